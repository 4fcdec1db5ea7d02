//! End to end: the slicectl binary bringing self-managed GCE slices up on the
//! simulator, whose VMs join the REAL test control plane (token discovery, a
//! CSR the real controller-manager signs, their own Nodes), and tearing them
//! down in reverse order. Needs `SLICECTL_TEST_KUBECONFIG` (scripts/test.sh
//! starts the control plane); fails loudly without it.

use crate::common;

use std::path::Path;
use std::time::Duration;

use common::k8s::kubeconfig;
use common::*;
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Node, Secret};
use kube::api::{Api, ListParams};
use serde_json::Value;
use slicectl_sim::{FaultConfig, SimHandle};

/// The tests of this file share the control plane's Nodes and its one
/// device plugin: they run one at a time.
pub(crate) static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

pub(crate) async fn kube_client() -> kube::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    slicectl::kube::client_from_kubeconfig(&kubeconfig(), None)
        .await
        .expect("kube client")
}

/// `HOST:PORT` of the test API server.
fn endpoint() -> String {
    let kc = kube::config::Kubeconfig::read_from(kubeconfig()).expect("kubeconfig");
    let server = kc.clusters[0]
        .cluster
        .as_ref()
        .and_then(|c| c.server.clone())
        .expect("server");
    server
        .trim_start_matches("https://")
        .trim_end_matches('/')
        .to_string()
}

/// A spec dir with a self-managed Target on the test control plane.
pub(crate) fn gce_dir(owner: &str, slices: &[(&str, String)]) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    let target = format!(
        r#"apiVersion: slicectl.dev/v1alpha1
kind: Target
metadata:
  name: kubeadm
spec:
  project: example-project
  zone: us-central1-b
  ownerId: {owner}
  gce:
    controlPlaneEndpoint: "{}"
    kubeApi:
      kubeconfig: "{}"
"#,
        endpoint(),
        kubeconfig().display()
    );
    std::fs::write(d.path().join("target.yaml"), target).unwrap();
    for (file, text) in slices {
        std::fs::write(d.path().join(file), text).unwrap();
    }
    d
}

pub(crate) fn gce_slice(name: &str, topo: &str, extra: &str) -> String {
    format!(
        r#"apiVersion: slicectl.dev/v1alpha1
kind: Slice
metadata:
  name: {name}
spec:
  target: kubeadm
  backend: gce
  accelerator: tpu-v6e-slice
  topology: "{topo}"
  nodeLabels:
    team: research
{extra}  gce:
    image: projects/ubuntu-os-accelerator-images/global/images/family/ubuntu-accel-2404-amd64-tpu-v6e
    bootstrap:
      kubeadm:
        kubernetesVersion: "1.36"
"#
    )
}

pub(crate) async fn nodes_of(client: &kube::Client, slice: &str) -> Vec<Node> {
    Api::<Node>::all(client.clone())
        .list(&ListParams::default().labels(&format!("slicectl.dev/slice={slice}")))
        .await
        .unwrap()
        .items
}

async fn token_secrets_of(client: &kube::Client, slice: &str) -> Vec<Secret> {
    Api::<Secret>::namespaced(client.clone(), "kube-system")
        .list(&ListParams::default().labels(&format!("slicectl.dev/slice={slice}")))
        .await
        .unwrap()
        .items
}

pub(crate) async fn get(sim: &SimHandle, path: &str) -> Value {
    reqwest::get(format!(
        "{}/compute/v1/projects/example-project/{path}",
        sim.base_url()
    ))
    .await
    .unwrap()
    .json()
    .await
    .unwrap()
}

pub(crate) fn names(v: &Value) -> Vec<String> {
    let mut n: Vec<String> = v["items"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|i| i["name"].as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    n.sort();
    n
}

pub(crate) async fn gce_apply(sim: &SimHandle, dir: &Path) -> std::process::Output {
    slicectl(sim, &["apply", dir.to_str().unwrap(), "--auto-approve"]).await
}

/// The installed gcloud, pointed at the simulator, as JSON.
async fn gcloud(sim: &SimHandle, args: &[&str]) -> Value {
    let cfg = tempfile::tempdir().unwrap();
    let base = sim.base_url();
    let mut cmd = std::process::Command::new("gcloud");
    cmd.args(args)
        .args(["--format", "json"])
        .envs(crate::common::gcloud_env(
            &base,
            cfg.path(),
            "example-project",
        ));
    let out = tokio::task::spawn_blocking(move || cmd.output())
        .await
        .unwrap()
        .expect("the gcloud CLI is installed (this test drives the real gcloud)");
    assert!(
        out.status.success(),
        "gcloud {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn ready_with_chips(n: &Node, chips: &str) -> bool {
    let st = n.status.as_ref().unwrap();
    let ready = st
        .conditions
        .as_ref()
        .unwrap()
        .iter()
        .any(|c| c.type_ == "Ready" && c.status == "True");
    let cap = st
        .capacity
        .as_ref()
        .unwrap()
        .get("google.com/tpu")
        .map(|q| q.0.as_str());
    ready && cap == Some(chips)
}

#[tokio::test(flavor = "multi_thread")]
async fn gce_slices_join_the_real_control_plane_and_tear_down_in_reverse() {
    let _serial = SERIAL.lock().await;
    let client = kube_client().await;
    // The device plugin is one per cluster: start without one.
    let _ = Api::<DaemonSet>::namespaced(client.clone(), "kube-system")
        .delete("tpu-device-plugin", &Default::default())
        .await;
    let sim = sim(Duration::from_millis(200), 7, FaultConfig::default()).await;
    // A multi-host slice (4 VMs of 4 chips, a workload policy) and a
    // single-host one (no policy), with a taint.
    let dir = gce_dir(
        "e2e-gce",
        &[
            ("multi.yaml", gce_slice("gce-multi", "4x4", "")),
            (
                "single.yaml",
                gce_slice(
                    "gce-single",
                    "2x2",
                    "  taints:\n    - key: example.com/dedicated\n      value: research\n      effect: NoSchedule\n",
                ),
            ),
        ],
    );

    // The plan shows the whole graph, Kubernetes side included, and no secret.
    let o = slicectl(&sim, &["plan", dir.path().to_str().unwrap()]).await;
    let out = text(&o);
    for want in [
        "+ device_plugin",
        "+ workload_policy \"gce-multi-0-wp\"",
        "+ instance_template \"gce-multi-0-it\"",
        "+ mig \"gce-multi-0\"",
        "+ nodes \"gce-multi-0\"",
        "+ instance_template \"gce-single-0-it\"",
    ] {
        assert!(out.contains(want), "plan lacks {want:?}:\n{out}");
    }
    assert!(
        !out.contains("gce-single-0-wp"),
        "single-host has no policy:\n{out}"
    );

    // Apply: every slice Ready, Nodes labelled.
    let o = gce_apply(&sim, dir.path()).await;
    assert!(o.status.success(), "{}", text(&o));
    let multi = nodes_of(&client, "gce-multi").await;
    assert_eq!(multi.len(), 4, "{multi:?}");
    for n in &multi {
        assert!(ready_with_chips(n, "4"), "{n:?}");
        let l = n.metadata.labels.as_ref().unwrap();
        assert_eq!(l["cloud.google.com/gke-tpu-accelerator"], "tpu-v6e-slice");
        assert_eq!(l["cloud.google.com/gke-tpu-topology"], "4x4");
        assert_eq!(l["cloud.google.com/gke-accelerator-count"], "4");
        assert_eq!(l["team"], "research");
        assert!(l.contains_key("slicectl.dev/spec-hash"), "{l:?}");
        let pid = n.spec.as_ref().unwrap().provider_id.clone().unwrap();
        assert!(
            pid.starts_with("gce://example-project/us-central1-b/gce-multi-0-"),
            "{pid}"
        );
    }
    let single = nodes_of(&client, "gce-single").await;
    assert_eq!(single.len(), 1);
    let taints = single[0]
        .spec
        .as_ref()
        .unwrap()
        .taints
        .clone()
        .unwrap_or_default();
    assert!(
        taints
            .iter()
            .any(|t| t.key == "example.com/dedicated" && t.effect == "NoSchedule"),
        "{taints:?}"
    );
    // The cloud side: MIGs of the right size (on-demand: INDIVIDUAL, as
    // Compute Engine's BULK takes only reservation-bound and flex-start
    // templates), the policy on the multi-host one.
    let migs = get(&sim, "zones/us-central1-b/instanceGroupManagers").await;
    assert_eq!(names(&migs), vec!["gce-multi-0", "gce-single-0"]);
    let m = migs["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == "gce-multi-0")
        .unwrap();
    assert_eq!(m["targetSizePolicy"]["mode"], "INDIVIDUAL");
    assert_eq!(m["targetSize"], 4);
    assert!(
        m["resourcePolicies"]["workloadPolicy"]
            .as_str()
            .unwrap()
            .ends_with("/gce-multi-0-wp")
    );
    // Tokens are gone from every VM's metadata and their Secrets deleted.
    let vms = get(&sim, "zones/us-central1-b/instances").await;
    assert_eq!(names(&vms).len(), 5, "{vms}");
    for vm in vms["items"].as_array().unwrap() {
        // Ownership on the VMs, as GCE labels.
        assert_eq!(vm["labels"]["slicectl-owner"], "e2e-gce", "{vm}");
        assert!(
            vm["labels"]["slicectl-slice"]
                .as_str()
                .unwrap()
                .starts_with("gce-"),
            "{vm}"
        );
        let items = vm["metadata"]["items"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        assert!(
            !items.iter().any(|i| i["key"] == "kubeadm-join-token"),
            "token left on {}: {items:?}",
            vm["name"]
        );
    }
    assert!(token_secrets_of(&client, "gce-multi").await.is_empty());
    assert!(token_secrets_of(&client, "gce-single").await.is_empty());
    let ds = Api::<DaemonSet>::namespaced(client.clone(), "kube-system");
    assert!(ds.get_opt("tpu-device-plugin").await.unwrap().is_some());
    // gcloud reads back exactly what slicectl made.
    let t = gcloud(
        &sim,
        &[
            "compute",
            "instance-templates",
            "describe",
            "gce-multi-0-it",
        ],
    )
    .await;
    assert_eq!(t["properties"]["machineType"], "ct6e-standard-4t");
    assert_eq!(
        t["properties"]["scheduling"]["onHostMaintenance"],
        "TERMINATE"
    );
    assert!(
        t["description"]
            .as_str()
            .unwrap()
            .contains("slice=gce-multi"),
        "{t}"
    );
    let m = gcloud(
        &sim,
        &[
            "compute",
            "instance-groups",
            "managed",
            "describe",
            "gce-multi-0",
            "--zone",
            "us-central1-b",
        ],
    )
    .await;
    assert_eq!(m["targetSizePolicy"]["mode"], "INDIVIDUAL");
    assert_eq!(m["targetSize"], 4);
    let listed = gcloud(
        &sim,
        &[
            "compute",
            "instance-groups",
            "managed",
            "list-instances",
            "gce-multi-0",
            "--zone",
            "us-central1-b",
        ],
    )
    .await;
    assert_eq!(listed.as_array().unwrap().len(), 4, "{listed}");
    assert!(
        listed
            .as_array()
            .unwrap()
            .iter()
            .all(|i| i["instanceStatus"] == "RUNNING"),
        "{listed}"
    );
    let vms = gcloud(
        &sim,
        &["compute", "instances", "list", "--zones", "us-central1-b"],
    )
    .await;
    assert_eq!(vms.as_array().unwrap().len(), 5, "{vms}");

    // No token in anything slicectl printed.
    assert!(!text(&o).contains("kubeadm-join-token\":"), "{}", text(&o));

    // A second apply: nothing to do, zero cloud writes.
    sim.reset_stats();
    let o = gce_apply(&sim, dir.path()).await;
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("No changes."),
        "{}",
        text(&o)
    );
    assert_eq!(sim.stats().writes, 0, "{:?}", sim.stats());

    // Status shows the MIG, VMs and Nodes.
    let o = slicectl(
        &sim,
        &["status", dir.path().to_str().unwrap(), "--output", "json"],
    )
    .await;
    assert!(o.status.success(), "{}", text(&o));
    let rows: Value = serde_json::from_slice(&o.stdout).unwrap();
    let row = rows
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["slice"] == "gce-multi")
        .unwrap();
    assert_eq!(row["state"], "MIG STABLE, VMs 4/4", "{row}");
    assert!(
        row["nodes"].as_str().unwrap().starts_with("4/4 ready"),
        "{row}"
    );

    // Destroy: nothing left, Nodes and Secrets included, and the device
    // plugin with the last slice.
    let o = slicectl(
        &sim,
        &["destroy", dir.path().to_str().unwrap(), "--auto-approve"],
    )
    .await;
    assert!(o.status.success(), "{}", text(&o));
    assert!(names(&get(&sim, "zones/us-central1-b/instanceGroupManagers").await).is_empty());
    assert!(names(&get(&sim, "global/instanceTemplates").await).is_empty());
    assert!(names(&get(&sim, "regions/us-central1/resourcePolicies").await).is_empty());
    assert!(nodes_of(&client, "gce-multi").await.is_empty());
    assert!(nodes_of(&client, "gce-single").await.is_empty());
    assert!(ds.get_opt("tpu-device-plugin").await.unwrap().is_none());
}

/// Two `slicectl apply` processes at once on one simulator server (a CI
/// job beside an operator). They race for the same names: the one whose
/// insert comes second is answered 409 while the first one's insert still
/// runs, and a GET then finds nothing. It must say "being created by
/// another run; run again", never "not this slice's: delete or rename it"
/// (following that advice deletes a healthy slice) nor a raw 404. A rerun
/// converges on what the first made, with no duplicate.
#[tokio::test(flavor = "multi_thread")]
async fn two_applies_at_once_never_advise_deleting_the_other_runs_resources() {
    let _serial = SERIAL.lock().await;
    let client = kube_client().await;
    let mut raced = false;
    for attempt in 0..3u64 {
        let slice = format!("gce-twin{attempt}");
        let sim = sim(
            Duration::from_millis(1000),
            40 + attempt,
            FaultConfig::default(),
        )
        .await;
        let dir = gce_dir("e2e-gce-twin", &[("s.yaml", gce_slice(&slice, "2x2", ""))]);
        let run = || {
            tokio::process::Command::new(bin())
                .args(["apply", dir.path().to_str().unwrap(), "--auto-approve"])
                .env("SLICECTL_API_ENDPOINT", sim.base_url())
                .env("SLICECTL_UNREAD_CLUSTERS_IDLE", "true")
                .env("NO_COLOR", "1")
                .stdin(std::process::Stdio::null())
                .output()
        };
        let (a, b) = tokio::join!(run(), run());
        let (a, b) = (a.unwrap(), b.unwrap());
        for o in [&a, &b] {
            let t = text(o);
            for never in [
                "Delete or rename",
                "never changes it",
                "HTTP 404",
                "not this slice",
            ] {
                assert!(!t.contains(never), "attempt {attempt}: {never:?} in\n{t}");
            }
            if !o.status.success() {
                assert!(
                    t.contains("is being created by another run") && t.contains("[conflict]"),
                    "attempt {attempt}: a run that lost the race says why\n{t}"
                );
            }
        }
        assert!(
            a.status.success() || b.status.success(),
            "one run goes through\n{}\n{}",
            text(&a),
            text(&b)
        );
        let inserts = |m: &str| sim.stats().by_method.get(m).copied().unwrap_or(0);
        raced |= inserts("compute.instanceTemplates.insert") >= 2
            || inserts("compute.instanceGroupManagers.insert") >= 2;
        // A rerun converges, with no duplicate.
        let o = gce_apply(&sim, dir.path()).await;
        assert!(o.status.success(), "attempt {attempt}: {}", text(&o));
        assert_eq!(
            count(&sim, "zones/us-central1-b/instanceGroupManagers").await,
            1
        );
        assert_eq!(count(&sim, "global/instanceTemplates").await, 1);
        assert_eq!(count(&sim, "zones/us-central1-b/instances").await, 1);
        assert_eq!(nodes_of(&client, &slice).await.len(), 1);
        let o = slicectl(
            &sim,
            &["plan", dir.path().to_str().unwrap(), "--detailed-exitcode"],
        )
        .await;
        assert_eq!(o.status.code(), Some(0), "attempt {attempt}: {}", text(&o));
        let o = slicectl(
            &sim,
            &["destroy", dir.path().to_str().unwrap(), "--auto-approve"],
        )
        .await;
        assert!(o.status.success(), "attempt {attempt}: {}", text(&o));
        assert!(nodes_of(&client, &slice).await.is_empty());
        if raced {
            break;
        }
    }
    assert!(
        raced,
        "the two runs never sent the same insert: the race was not produced"
    );
}

async fn count(sim: &SimHandle, path: &str) -> usize {
    names(&get(sim, path).await).len()
}

#[tokio::test(flavor = "multi_thread")]
async fn bulk_stockout_leaves_no_partial_slice_and_status_says_why() {
    let _serial = SERIAL.lock().await;
    let client = kube_client().await;
    let faults = FaultConfig {
        stockout_zones: vec!["us-central1-b".into()],
        ..FaultConfig::default()
    };
    let sim = sim(Duration::from_millis(100), 3, faults).await;
    // Flex-start: a BULK MIG, which says why it waits only in its bulk
    // operation's last check and in `listErrors` (*About bulk mode*).
    let dir = gce_dir(
        "e2e-gce-stockout",
        &[(
            "s.yaml",
            gce_slice(
                "gce-stock",
                "4x4",
                "  capacity: {type: flex-start, maxRunDuration: 24h}\n",
            ),
        )],
    );
    let o = gce_apply(&sim, dir.path()).await;
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let out = text(&o);
    assert!(
        out.contains("failed [stockout]: slice.gce-stock[0].nodes"),
        "{out}"
    );
    assert!(out.contains("ZONE_RESOURCE_POOL_EXHAUSTED"), "{out}");
    // Reported once, as the failed step; not again as a replica not ready.
    assert!(!out.contains("not ready ["), "{out}");
    // All or nothing: the MIG exists, no VM does, no Node joined.
    assert_eq!(
        count(&sim, "zones/us-central1-b/instanceGroupManagers").await,
        1
    );
    assert_eq!(count(&sim, "zones/us-central1-b/instances").await, 0);
    assert!(nodes_of(&client, "gce-stock").await.is_empty());
    // status shows the MIG retrying and GCE's error.
    let o = slicectl(
        &sim,
        &["status", dir.path().to_str().unwrap(), "--output", "json"],
    )
    .await;
    let rows: Value = serde_json::from_slice(&o.stdout).unwrap();
    let row = &rows[0];
    assert_eq!(row["state"], "MIG RETRYING, VMs 0/4", "{row}");
    assert!(
        row["last_error"]
            .as_str()
            .unwrap()
            .starts_with("ZONE_RESOURCE_POOL_EXHAUSTED"),
        "{row}"
    );
    // Capacity comes back: the next apply finishes the slice.
    sim.set_faults(FaultConfig::default());
    let o = gce_apply(&sim, dir.path()).await;
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(nodes_of(&client, "gce-stock").await.len(), 4);
    let o = slicectl(
        &sim,
        &["destroy", dir.path().to_str().unwrap(), "--auto-approve"],
    )
    .await;
    assert!(o.status.success(), "{}", text(&o));
    assert!(nodes_of(&client, "gce-stock").await.is_empty());
}

/// A spot slice's MIG is INDIVIDUAL (BULK takes no spot template): in a
/// zone with room for 2 of its 4 VMs, the MIG makes 2. slicectl keeps the
/// slice all-or-nothing: the Nodes step fails at once with `stockout`,
/// saying how many VMs exist, and no VM gets a token; once capacity
/// returns the next apply finishes the slice with the VMs it had.
#[tokio::test(flavor = "multi_thread")]
async fn a_partial_individual_slice_is_a_stockout_not_a_slice() {
    let _serial = SERIAL.lock().await;
    let client = kube_client().await;
    let faults = FaultConfig {
        zone_vm_limits: [("us-central1-b".to_string(), 2)].into(),
        ..FaultConfig::default()
    };
    let sim = sim(Duration::from_millis(100), 5, faults).await;
    let dir = gce_dir(
        "e2e-gce-partial",
        &[(
            "s.yaml",
            gce_slice("gce-part", "4x4", "  capacity: {type: spot}\n"),
        )],
    );
    let o = gce_apply(&sim, dir.path()).await;
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let out = text(&o);
    assert!(
        out.contains("failed [stockout]: slice.gce-part[0].nodes"),
        "{out}"
    );
    assert!(out.contains("ZONE_RESOURCE_POOL_EXHAUSTED"), "{out}");
    assert!(
        out.contains("(2 of 4 VM(s) created: a partial TPU slice is not a slice"),
        "{out}"
    );
    let migs = get(&sim, "zones/us-central1-b/instanceGroupManagers").await;
    assert_eq!(migs["items"][0]["targetSizePolicy"]["mode"], "INDIVIDUAL");
    assert_eq!(count(&sim, "zones/us-central1-b/instances").await, 2);
    assert!(nodes_of(&client, "gce-part").await.is_empty());
    assert!(token_secrets_of(&client, "gce-part").await.is_empty());
    // status: the MIG retrying, and why (read from its listErrors).
    let o = slicectl(
        &sim,
        &["status", dir.path().to_str().unwrap(), "--output", "json"],
    )
    .await;
    let rows: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(
        rows[0]["state"]
            .as_str()
            .unwrap()
            .starts_with("MIG RETRYING, VMs "),
        "{}",
        rows[0]
    );
    assert!(
        rows[0]["last_error"]
            .as_str()
            .unwrap()
            .starts_with("ZONE_RESOURCE_POOL_EXHAUSTED"),
        "{}",
        rows[0]
    );
    // Capacity returns: the next apply finishes the slice.
    sim.set_faults(FaultConfig::default());
    let o = gce_apply(&sim, dir.path()).await;
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(nodes_of(&client, "gce-part").await.len(), 4);
    let o = slicectl(
        &sim,
        &["destroy", dir.path().to_str().unwrap(), "--auto-approve"],
    )
    .await;
    assert!(o.status.success(), "{}", text(&o));
    assert!(nodes_of(&client, "gce-part").await.is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn killed_gce_apply_resumes_without_duplicates_leaks_or_second_tokens() {
    use rand::{Rng, SeedableRng};
    let _serial = SERIAL.lock().await;
    let client = kube_client().await;
    for seed in 0..6u64 {
        let slice = format!("gce-kill{seed}");
        let sim = sim(Duration::from_millis(300), seed, FaultConfig::default()).await;
        let dir = gce_dir("e2e-gce-kill", &[("s.yaml", gce_slice(&slice, "4x4", ""))]);
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        for _ in 0..(1 + seed % 2) {
            let mut child = tokio::process::Command::new(bin())
                .args(["apply", dir.path().to_str().unwrap(), "--auto-approve"])
                .env("SLICECTL_API_ENDPOINT", sim.base_url())
                .env("SLICECTL_UNREAD_CLUSTERS_IDLE", "true")
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap();
            tokio::time::sleep(Duration::from_millis(rng.random_range(50..4000))).await;
            child.start_kill().unwrap(); // SIGKILL
            let _ = child.wait().await;
            // Never a second valid token while one is.
            let tokens = token_secrets_of(&client, &slice).await;
            assert!(
                tokens.len() <= 1,
                "seed {seed}: {} token Secrets",
                tokens.len()
            );
        }
        let o = gce_apply(&sim, dir.path()).await;
        assert!(o.status.success(), "seed {seed}: {}", text(&o));
        assert_eq!(
            count(&sim, "zones/us-central1-b/instanceGroupManagers").await,
            1,
            "seed {seed}"
        );
        assert_eq!(
            count(&sim, "global/instanceTemplates").await,
            1,
            "seed {seed}"
        );
        assert_eq!(
            count(&sim, "regions/us-central1/resourcePolicies").await,
            1,
            "seed {seed}"
        );
        assert_eq!(
            count(&sim, "zones/us-central1-b/instances").await,
            4,
            "seed {seed}"
        );
        let nodes = nodes_of(&client, &slice).await;
        assert_eq!(nodes.len(), 4, "seed {seed}");
        assert!(
            nodes.iter().all(|n| ready_with_chips(n, "4")),
            "seed {seed}"
        );
        assert!(
            token_secrets_of(&client, &slice).await.is_empty(),
            "seed {seed}"
        );
        let o = slicectl(
            &sim,
            &["plan", dir.path().to_str().unwrap(), "--detailed-exitcode"],
        )
        .await;
        assert_eq!(o.status.code(), Some(0), "seed {seed}: {}", text(&o));
        // Kill a destroy too, then destroy again: nothing is left.
        let mut child = tokio::process::Command::new(bin())
            .args(["destroy", dir.path().to_str().unwrap(), "--auto-approve"])
            .env("SLICECTL_API_ENDPOINT", sim.base_url())
            .env("SLICECTL_UNREAD_CLUSTERS_IDLE", "true")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        tokio::time::sleep(Duration::from_millis(rng.random_range(50..2000))).await;
        child.start_kill().unwrap();
        let _ = child.wait().await;
        let o = slicectl(
            &sim,
            &["destroy", dir.path().to_str().unwrap(), "--auto-approve"],
        )
        .await;
        assert!(o.status.success(), "seed {seed}: {}", text(&o));
        assert_eq!(
            count(&sim, "zones/us-central1-b/instanceGroupManagers").await,
            0,
            "seed {seed}"
        );
        assert_eq!(
            count(&sim, "global/instanceTemplates").await,
            0,
            "seed {seed}"
        );
        assert_eq!(
            count(&sim, "zones/us-central1-b/instances").await,
            0,
            "seed {seed}"
        );
        assert!(nodes_of(&client, &slice).await.is_empty(), "seed {seed}");
        assert!(
            token_secrets_of(&client, &slice).await.is_empty(),
            "seed {seed}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_kubelet_newer_than_the_api_server_is_refused_before_any_token() {
    let _serial = SERIAL.lock().await;
    let client = kube_client().await;
    let sim = sim(Duration::from_millis(100), 5, FaultConfig::default()).await;
    let spec = gce_slice("gce-skew", "2x2", "").replace("\"1.36\"", "\"1.37\"");
    let dir = gce_dir("e2e-gce-skew", &[("s.yaml", spec)]);
    let o = gce_apply(&sim, dir.path()).await;
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let out = text(&o);
    assert!(
        out.contains("failed [bootstrap_failed]: slice.gce-skew[0].nodes"),
        "{out}"
    );
    assert!(out.contains("API server is 1.36"), "{out}");
    assert!(token_secrets_of(&client, "gce-skew").await.is_empty());
    let o = slicectl(
        &sim,
        &["destroy", dir.path().to_str().unwrap(), "--auto-approve"],
    )
    .await;
    assert!(o.status.success(), "{}", text(&o));
}

/// Issue 23 item 1: `--sim` against specs whose kubeconfig reaches a real
/// cluster. A slice applied for real (simulator server + the real control
/// plane), then `plan`, `apply` and `destroy --sim` with the same specs and a
/// real-looking `~/.kube/config`: the cluster sees no write at all (the
/// Node, the token Secrets and the device plugin are untouched), where
/// `--sim` used to delete the real Nodes and the device plugin.
#[tokio::test(flavor = "multi_thread")]
async fn sim_mode_never_writes_to_a_reachable_real_cluster() {
    let _serial = SERIAL.lock().await;
    let client = kube_client().await;
    let sim = sim(Duration::from_millis(50), 11, FaultConfig::default()).await;
    let dir = gce_dir(
        "e2e-sim-iso",
        &[("iso.yaml", gce_slice("sim-iso", "2x2", ""))],
    );
    let o = gce_apply(&sim, dir.path()).await;
    assert!(o.status.success(), "{}", text(&o));
    let before = nodes_of(&client, "sim-iso").await;
    assert_eq!(before.len(), 1, "{before:?}");
    let ds = Api::<DaemonSet>::namespaced(client.clone(), "kube-system");
    let ds_before = ds.get("tpu-device-plugin").await.unwrap();
    let secrets_before = token_secrets_of(&client, "sim-iso").await.len();

    // The same specs, the kubeconfig named as the committed specs/ name it.
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir(home.path().join(".kube")).unwrap();
    std::fs::copy(kubeconfig(), home.path().join(".kube/config")).unwrap();
    let target = std::fs::read_to_string(dir.path().join("target.yaml")).unwrap();
    std::fs::write(
        dir.path().join("target.yaml"),
        target.replace(&kubeconfig().display().to_string(), "~/.kube/config"),
    )
    .unwrap();
    let d = dir.path().to_str().unwrap();
    for args in [
        vec!["plan", d, "--sim"],
        vec![
            "apply",
            d,
            "--sim",
            "--sim-latency",
            "20ms",
            "--auto-approve",
        ],
        vec![
            "destroy",
            d,
            "--sim",
            "--sim-latency",
            "20ms",
            "--auto-approve",
        ],
    ] {
        let o = tokio::process::Command::new(bin())
            .args(&args)
            .env("HOME", home.path())
            .env_remove("KUBECONFIG")
            .env_remove("SLICECTL_API_ENDPOINT")
            .env("NO_COLOR", "1")
            .stdin(std::process::Stdio::null())
            .output()
            .await
            .unwrap();
        let t = text(&o);
        assert!(o.status.success(), "{args:?}: {t}");
        assert!(t.contains("nothing real is touched"), "{t}");
        assert!(
            t.contains("reaches no real Kubernetes API"),
            "{args:?}: {t}"
        );
        assert!(!t.contains("nodes: deleting"), "{args:?}: {t}");
    }
    let after = nodes_of(&client, "sim-iso").await;
    assert_eq!(after.len(), 1, "the real Node was deleted under --sim");
    // The Node's own kubelet may report status; what slicectl writes
    // (labels, cordon, taints, the object itself) must not have changed.
    assert_eq!(after[0].metadata.uid, before[0].metadata.uid);
    assert_eq!(
        after[0].metadata.labels, before[0].metadata.labels,
        "the real Node was relabelled under --sim"
    );
    assert_eq!(
        after[0].spec, before[0].spec,
        "the real Node was cordoned or tainted under --sim"
    );
    let ds_after = ds.get("tpu-device-plugin").await.unwrap();
    assert_eq!(ds_after.metadata.uid, ds_before.metadata.uid);
    assert_eq!(ds_after.metadata.generation, ds_before.metadata.generation);
    assert_eq!(
        token_secrets_of(&client, "sim-iso").await.len(),
        secrets_before
    );

    // Tear the real slice down with the real specs.
    std::fs::write(dir.path().join("target.yaml"), &target).unwrap();
    let o = slicectl(&sim, &["destroy", d, "--auto-approve"]).await;
    assert!(o.status.success(), "{}", text(&o));
    assert!(nodes_of(&client, "sim-iso").await.is_empty());
}

/// Issue 23 item 2: a protected slice whose YAML was moved away and whose
/// Nodes were deleted (maintenance, node GC) keeps its MIG, template and
/// policy: the protection is read from the MIG, where the capacity is.
/// Put back, its running VMs without Nodes are recreated by a planned step
/// and join again.
#[tokio::test(flavor = "multi_thread")]
async fn a_protected_slice_survives_its_yaml_and_its_nodes_going() {
    let _serial = SERIAL.lock().await;
    let client = kube_client().await;
    let sim = sim(Duration::from_millis(50), 11, FaultConfig::default()).await;
    // 2 hosts of 4 chips: a multi-host slice, with a workload policy.
    let protected = gce_slice(
        "gce-lsx",
        "2x4",
        "  machineType: ct6e-standard-4t\n  lifecycle: {preventDestroy: true}\n",
    );
    let dir = gce_dir(
        "e2e-gce-protect",
        &[
            ("lsx.yaml", protected.clone()),
            ("other.yaml", gce_slice("gce-other", "2x2", "")),
        ],
    );
    let o = gce_apply(&sim, dir.path()).await;
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(nodes_of(&client, "gce-lsx").await.len(), 2);
    let migs = "zones/us-central1-b/instanceGroupManagers";
    let mig = get(&sim, &format!("{migs}/gce-lsx-0")).await;
    assert!(
        mig["description"]
            .as_str()
            .unwrap()
            .ends_with(" prevent-destroy=true"),
        "{mig}"
    );
    // The YAML moves away (another slice stays: the source is not empty),
    // and the Nodes are deleted by hand.
    std::fs::remove_file(dir.path().join("lsx.yaml")).unwrap();
    for n in nodes_of(&client, "gce-lsx").await {
        Api::<Node>::all(client.clone())
            .delete(n.metadata.name.as_deref().unwrap(), &Default::default())
            .await
            .unwrap();
    }
    assert!(nodes_of(&client, "gce-lsx").await.is_empty());
    let o = gce_apply(&sim, dir.path()).await;
    let out = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(out.contains("slice.gce-lsx[0].mig"), "{out}");
    assert!(out.contains("protected by preventDestroy"), "{out}");
    assert!(!out.contains("deleting done"), "{out}");
    // Nothing of it was deleted.
    assert_eq!(names(&get(&sim, migs).await), ["gce-lsx-0", "gce-other-0"]);
    assert_eq!(
        names(&get(&sim, "global/instanceTemplates").await),
        ["gce-lsx-0-it", "gce-other-0-it"]
    );
    assert_eq!(
        names(&get(&sim, "regions/us-central1/resourcePolicies").await),
        ["gce-lsx-0-wp"]
    );
    // Back in the specs: its VMs run, their Nodes are gone, and a kubelet
    // does not register again by itself. The plan offers recreating them
    // through the MIG (reason node_lost); apply does it and they join again
    // under their names.
    let vms = names(&get(&sim, "zones/us-central1-b/instances").await);
    std::fs::write(dir.path().join("lsx.yaml"), &protected).unwrap();
    let o = slicectl(
        &sim,
        &["plan", dir.path().to_str().unwrap(), "--output", "json"],
    )
    .await;
    let plan: Value = serde_json::from_slice(&o.stdout).unwrap();
    let nodes = plan["actions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["address"] == "slice.gce-lsx[0].nodes")
        .unwrap_or_else(|| panic!("{plan}"));
    assert_eq!(nodes["reason_code"], "node_lost", "{nodes}");
    assert!(
        nodes["reason"]
            .as_str()
            .unwrap()
            .contains("recreated through the MIG"),
        "{nodes}"
    );
    let o = gce_apply(&sim, dir.path()).await;
    assert!(o.status.success(), "{}", text(&o));
    let back = nodes_of(&client, "gce-lsx").await;
    assert_eq!(back.len(), 2);
    assert!(back.iter().all(|n| ready_with_chips(n, "4")));
    assert!(back.iter().all(|n| {
        n.metadata.labels.as_ref().unwrap()["slicectl.dev/prevent-destroy"] == "true"
    }));
    assert_eq!(
        names(&get(&sim, "zones/us-central1-b/instances").await),
        vms
    );
    // Unprotected: apply lifts the stamp in place, from the MIG's
    // description (`instanceGroupManagers.patch`, same group, same VMs) and
    // from the Nodes. Then removing the YAML deletes the slice.
    std::fs::write(
        dir.path().join("lsx.yaml"),
        protected.replace("preventDestroy: true", "preventDestroy: false"),
    )
    .unwrap();
    let o = gce_apply(&sim, dir.path()).await;
    assert!(o.status.success(), "{}", text(&o));
    let lifted = get(&sim, &format!("{migs}/gce-lsx-0")).await;
    assert!(
        lifted["description"]
            .as_str()
            .unwrap()
            .ends_with(" prevent-destroy=false"),
        "{lifted}"
    );
    assert_eq!(lifted["id"], mig["id"]);
    assert_ne!(lifted["fingerprint"], mig["fingerprint"]);
    assert_eq!(
        names(&get(&sim, "zones/us-central1-b/instances").await),
        vms
    );
    std::fs::remove_file(dir.path().join("lsx.yaml")).unwrap();
    let o = gce_apply(&sim, dir.path()).await;
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(names(&get(&sim, migs).await), ["gce-other-0"]);
    assert!(nodes_of(&client, "gce-lsx").await.is_empty());
    let o = slicectl(
        &sim,
        &["destroy", dir.path().to_str().unwrap(), "--auto-approve"],
    )
    .await;
    assert!(o.status.success(), "{}", text(&o));
    assert!(names(&get(&sim, migs).await).is_empty());
    assert!(nodes_of(&client, "gce-other").await.is_empty());
}

/// Issue 24 item 5, self-managed: the Target's zone changes (us-central1-b
/// to us-east1-d, both v6e zones). The old MIG, in a zone no Target names
/// any more, is found (one `instanceGroupManagers.aggregatedList` per
/// project) and deleted as moved once the slice runs in the new zone; then
/// the plan is in sync and the old zone is empty.
#[tokio::test(flavor = "multi_thread")]
async fn a_gce_target_moved_to_another_zone_takes_its_slice_along() {
    let _serial = SERIAL.lock().await;
    let client = kube_client().await;
    let sim = sim(Duration::from_millis(100), 11, FaultConfig::default()).await;
    let dir = gce_dir(
        "e2e-gce-move",
        &[("mv.yaml", gce_slice("gce-mv", "1x1", ""))],
    );
    let o = gce_apply(&sim, dir.path()).await;
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(nodes_of(&client, "gce-mv").await.len(), 1);
    let path = dir.path().join("target.yaml");
    let t = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, t.replace("zone: us-central1-b", "zone: us-east1-d")).unwrap();
    let o = slicectl(
        &sim,
        &["plan", dir.path().to_str().unwrap(), "--output", "json"],
    )
    .await;
    let plan: Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|_| panic!("{}", text(&o)));
    let migs: Vec<(String, String, String)> = plan["actions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["kind"] == "mig")
        .map(|a| {
            (
                a["action"].as_str().unwrap_or_default().to_string(),
                a["scope"].to_string(),
                a["reason_code"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    assert!(
        migs.iter()
            .any(|(a, s, r)| a == "delete" && s.contains("us-central1-b") && r == "moved"),
        "{migs:?}\n{}",
        text(&o)
    );
    assert!(
        migs.iter()
            .any(|(a, s, _)| a == "create" && s.contains("us-east1-d")),
        "{migs:?}"
    );
    let o = gce_apply(&sim, dir.path()).await;
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(
        count(&sim, "zones/us-central1-b/instanceGroupManagers").await,
        0
    );
    assert_eq!(
        count(&sim, "zones/us-east1-d/instanceGroupManagers").await,
        1
    );
    let o = slicectl(
        &sim,
        &["plan", dir.path().to_str().unwrap(), "--detailed-exitcode"],
    )
    .await;
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = slicectl(
        &sim,
        &["destroy", dir.path().to_str().unwrap(), "--auto-approve"],
    )
    .await;
    assert!(o.status.success(), "{}", text(&o));
    assert!(nodes_of(&client, "gce-mv").await.is_empty());
}
