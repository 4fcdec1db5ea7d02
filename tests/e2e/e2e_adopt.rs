//! `slicectl adopt` and `slicectl release`, through the binary against the
//! simulator: pools made by gcloud (the real CLI), by tpu-provisioner (its
//! labels and its own hash, from the Go vectors in
//! `tests/tpu-provisioner-hash`) and by Terraform are adopted with one
//! in-place label update each, after which `plan` has nothing to do; a
//! pool adoption would replace is refused; release and adopt round-trip.
//! GCE: a MIG with its template and workload policy made outside slicectl
//! is adopted as one replica with one description patch; a GCE slice is
//! released and adopted back (through saved plan files) and destroyed.

use crate::common;

use std::path::Path;
use std::time::Duration;

use common::*;
use serde_json::{Value, json};
use slicectl_sim::{FaultConfig, SimHandle};

async fn start() -> SimHandle {
    sim(Duration::from_millis(10), 7, FaultConfig::default()).await
}

fn arg(p: &Path) -> &str {
    p.to_str().unwrap()
}

async fn pool(sim: &SimHandle, name: &str) -> Value {
    node_pools(sim)
        .await
        .into_iter()
        .find(|p| p["name"] == name)
        .unwrap_or_else(|| panic!("no node pool {name}"))
}

/// Creates a node pool over REST as another tool would: the fields
/// slicectl renders for a single-host pool (so that only ownership
/// differs), plus `extra` merged into it.
async fn create_pool(sim: &SimHandle, name: &str, zone: &str, machine: &str, extra: Value) {
    let mut np = json!({
        "name": name,
        "initialNodeCount": 1,
        "locations": [zone],
        "config": {
            "machineType": machine,
            "shieldedInstanceConfig": {"enableSecureBoot": true, "enableIntegrityMonitoring": true},
        },
        "management": {"autoUpgrade": false, "autoRepair": true},
        "maxPodsConstraint": {"maxPodsPerNode": "15"},
        "upgradeSettings": {"maxSurge": 1},
    });
    merge(&mut np, extra);
    let r = reqwest::Client::new()
        .post(format!("{}/v1/{CLUSTER}/nodePools", sim.base_url()))
        .json(&json!({"parent": CLUSTER, "nodePool": np}))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{:?}", r.text().await);
    wait_until_done(sim).await;
}

fn merge(a: &mut Value, b: Value) {
    match (a, b) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in b {
                merge(a.entry(k).or_insert(Value::Null), v);
            }
        }
        (a, b) => *a = b,
    }
}

/// Runs the installed gcloud CLI against the simulator.
async fn gcloud(sim: &SimHandle, cfg: &Path, args: &[&str]) {
    let o = gcloud_command(&sim.base_url(), cfg)
        .args(args)
        .output()
        .await
        .unwrap_or_else(|e| {
            panic!(
                "the gcloud CLI is not installed or not on PATH ({e}); this test drives the real gcloud \
                 against the simulator and cannot run without it (install the Google Cloud SDK)"
            )
        });
    assert!(
        o.status.success(),
        "gcloud {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    wait_until_done(sim).await;
}

/// `slicectl adopt DIR --target TARGET --out OUT --auto-approve` and `which`.
async fn adopt(
    sim: &SimHandle,
    dir: &Path,
    target: &str,
    out: &Path,
    which: &[&str],
) -> std::process::Output {
    let mut args = vec![
        "adopt",
        arg(dir),
        "--target",
        target,
        "--out",
        arg(out),
        "--auto-approve",
    ];
    args.extend_from_slice(which);
    slicectl(sim, &args).await
}

/// `ACTION KIND NAME` of each action of a JSON plan.
fn actions(plan: &Value) -> Vec<String> {
    plan["actions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            format!(
                "{} {} {}",
                a["action"].as_str().unwrap_or_default(),
                a["kind"].as_str().unwrap_or_default(),
                a["name"].as_str().unwrap_or_default()
            )
        })
        .collect()
}

/// `plan --detailed-exitcode` says the live slices match the specs.
async fn assert_no_changes(sim: &SimHandle, dir: &Path) {
    let o = slicectl(sim, &["plan", arg(dir), "--detailed-exitcode"]).await;
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("No changes"), "{}", text(&o));
}

/// Asserts that the writes since the last reset were `n` node pool
/// updates and nothing else (no create, no delete).
fn assert_only_updates(sim: &SimHandle, n: u64) {
    let stats = sim.stats();
    let updates = stats
        .by_method
        .get("container.projects.locations.clusters.nodePools.update")
        .copied()
        .unwrap_or(0);
    assert_eq!((stats.writes, updates), (n, n), "{:?}", stats.by_method);
}

fn stdout(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stdout).to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_gcloud_made_pool_is_adopted_with_one_label_update_then_plan_has_nothing_to_do() {
    let sim = start().await;
    let cfg = tempfile::tempdir().unwrap();
    let dir = spec_dir(&[]);
    gcloud(
        &sim,
        cfg.path(),
        &[
            "container",
            "node-pools",
            "create",
            "hand-0",
            "--cluster=train",
            "--region=us-central1",
            "--node-locations=us-central1-b",
            "--machine-type=ct6e-standard-4t",
            "--num-nodes=1",
            "--node-labels=team=llm",
            "--no-enable-autoupgrade",
            "--shielded-secure-boot",
            "--shielded-integrity-monitoring",
            "--max-pods-per-node=15",
        ],
    )
    .await;
    let out = dir.path().join("adopted");
    sim.reset_stats();
    let o = adopt(&sim, dir.path(), "train", &out, &["--selector", "team=llm"]).await;
    assert!(o.status.success(), "{}", text(&o));
    let t = stdout(&o);
    assert!(t.contains("# adopt: stamp slicectl's ownership"), "{t}");
    assert!(
        t.contains("Plan: 0 to create, 1 to update in place, 0 to replace, 0 to destroy"),
        "{t}"
    );
    // Labels and resource labels: two nodePools.update requests (GKE takes
    // one group per request), nothing else.
    assert_only_updates(&sim, 2);
    let file = std::fs::read_to_string(out.join("hand.yaml")).unwrap();
    for line in [
        "kind: Slice",
        "name: hand",
        "target: train",
        "accelerator: tpu-v6e-slice",
        "topology: 2x2",
        "machineType: ct6e-standard-4t",
        "team: llm",
    ] {
        assert!(file.contains(line), "{line:?} in\n{file}");
    }
    let v = slicectl(&sim, &["validate", arg(dir.path())]).await;
    assert!(v.status.success(), "{}", text(&v));
    let p = pool(&sim, "hand-0").await;
    let labels = &p["config"]["labels"];
    assert_eq!(labels["slicectl.dev/managed-by"], "slicectl");
    assert_eq!(labels["slicectl.dev/slice"], "hand");
    assert_eq!(labels["team"], "llm");
    assert!(labels["slicectl.dev/spec-hash"].is_string(), "{p}");
    assert_no_changes(&sim, dir.path()).await;
    // A second adopt finds nothing left, and never overwrites the file.
    let again = adopt(&sim, dir.path(), "train", &out, &["--all"]).await;
    assert_eq!(again.status.code(), Some(1), "{}", text(&again));
    assert!(
        stdout(&again).contains("Nothing to adopt"),
        "{}",
        text(&again)
    );
    sim.shutdown().await;
}

/// The first vector of tpu-provisioner's own hash code
/// (`tests/tpu-provisioner-hash/vectors.json`, produced by the Go program).
fn provisioner_vector() -> (Value, String, String) {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/tpu-provisioner-hash/vectors.json");
    let v: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let first = v
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["name"] == "simple case")
        .unwrap()
        .clone();
    (
        first["labels"].clone(),
        first["machineType"].as_str().unwrap().to_string(),
        first["hash"].as_str().unwrap().to_string(),
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tpu_provisioner_pool_is_adopted_by_name_when_its_hash_verifies() {
    let sim = start().await;
    let dir = spec_dir(&[]);
    let (mut labels, machine, hash) = provisioner_vector();
    labels["google.com/tpu-provisioner-nodepool-hash"] = json!(hash);
    create_pool(
        &sim,
        "jobset-test-bd7x2",
        "us-central1-a",
        &machine,
        json!({"config": {"labels": labels.clone()}}),
    )
    .await;
    // The same pool changed since tpu-provisioner made it: its hash no
    // longer verifies.
    let mut changed = labels.clone();
    changed["google.com/tpu-provisioner-jobset-name"] = json!("other");
    create_pool(
        &sim,
        "jobset-test-q9z4k",
        "us-central1-a",
        &machine,
        json!({"config": {"labels": changed}}),
    )
    .await;
    let out = dir.path().join("adopted");
    // --all leaves tpu-provisioner's pools alone.
    let o = adopt(&sim, dir.path(), "train-a", &out, &["--all"]).await;
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        text(&o).contains("left alone: tpu-provisioner manages it"),
        "{}",
        text(&o)
    );
    assert!(!out.exists(), "nothing written");

    // A changed pool is refused; named, a verified one is adopted with a
    // warning, and tpu-provisioner's labels are handed off.
    let o = adopt(
        &sim,
        dir.path(),
        "train-a",
        &out,
        &["--name", "jobset-test-q9z4k"],
    )
    .await;
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        text(&o).contains("created by tpu-provisioner, changed since"),
        "{}",
        text(&o)
    );
    sim.reset_stats();
    let o = adopt(
        &sim,
        dir.path(),
        "train-a",
        &out,
        &["--name", "jobset-test-bd7x2"],
    )
    .await;
    assert!(o.status.success(), "{}", text(&o));
    let t = stdout(&o);
    assert!(t.contains("WARNING"), "{t}");
    assert!(t.contains("google.com/nodepool-manager"), "{t}");
    assert_only_updates(&sim, 2);
    let file = std::fs::read_to_string(out.join("jobset-test-bd7x2.yaml")).unwrap();
    assert!(file.contains("nodePoolName: jobset-test-bd7x2"), "{file}");
    assert!(file.contains("accelerator: tpu-v5p-slice"), "{file}");
    let p = pool(&sim, "jobset-test-bd7x2").await;
    let l = p["config"]["labels"].as_object().unwrap();
    assert_eq!(l["slicectl.dev/managed-by"], "slicectl");
    assert!(
        l.keys().all(|k| !k.starts_with("google.com/")),
        "tpu-provisioner's labels are handed off: {l:?}"
    );
    // The changed pool stays unmanaged (shown, never changed): plan has
    // nothing to do for the adopted one.
    let o = slicectl(&sim, &["plan", arg(dir.path()), "--detailed-exitcode"]).await;
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pool_adoption_would_replace_is_refused_and_nothing_is_written() {
    let sim = start().await;
    let dir = spec_dir(&[]);
    // Auto-upgrade on: slicectl keeps it off, and that is not changed in
    // place.
    create_pool(
        &sim,
        "up-0",
        "us-central1-b",
        "ct6e-standard-4t",
        json!({"management": {"autoUpgrade": true}}),
    )
    .await;
    let out = dir.path().join("adopted");
    sim.reset_stats();
    let o = adopt(&sim, dir.path(), "train", &out, &["--name", "up-0"]).await;
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let t = text(&o);
    assert!(t.contains("adoption never replaces"), "{t}");
    assert!(t.contains("management.autoUpgrade"), "{t}");
    assert!(!out.exists());
    assert_eq!(sim.stats().writes, 0);
    assert!(pool(&sim, "up-0").await["config"]["labels"]["slicectl.dev/managed-by"].is_null());
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn release_then_adopt_round_trips_without_a_delete() {
    let sim = start().await;
    let dir = spec_dir(&[("a.yaml", slice_yaml("a", "tpu-v6e-slice", "1x1", 1, ""))]);
    let o = apply(&sim, dir.path()).await;
    assert!(o.status.success(), "{}", text(&o));
    sim.reset_stats();
    let o = slicectl(
        &sim,
        &["release", arg(dir.path()), "--slice", "a", "--auto-approve"],
    )
    .await;
    assert!(o.status.success(), "{}", text(&o));
    let t = stdout(&o);
    assert!(
        t.contains("# release: remove slicectl's ownership labels"),
        "{t}"
    );
    assert!(t.contains("still name released slices"), "{t}");
    assert!(t.contains("a.yaml"), "{t}");
    assert_only_updates(&sim, 2);
    let p = pool(&sim, "a-0").await;
    let l = p["config"]["labels"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    assert!(l.keys().all(|k| !k.starts_with("slicectl.dev/")), "{p}");
    // The spec still names it: apply refuses it, never recreates it.
    let o = slicectl(&sim, &["plan", arg(dir.path())]).await;
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("name_taken"), "{}", text(&o));
    // Adopted again as the Slice the specs already describe: no file.
    let out = dir.path().join("adopted");
    let o = adopt(&sim, dir.path(), "train", &out, &["--name", "a-0"]).await;
    assert!(o.status.success(), "{}", text(&o));
    assert!(stdout(&o).contains("is named by Slice a"), "{}", text(&o));
    assert!(!out.join("a.yaml").exists());
    // Release and adopt: two label updates each, no delete or create.
    assert_only_updates(&sim, 4);
    assert_no_changes(&sim, dir.path()).await;
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_terraform_pool_is_adopted_only_by_name_and_with_a_warning() {
    let sim = start().await;
    let dir = spec_dir(&[]);
    create_pool(
        &sim,
        "tf-0",
        "us-central1-b",
        "ct6e-standard-4t",
        json!({"config": {"resourceLabels": {"goog-terraform-provisioned": "true"}}}),
    )
    .await;
    let out = dir.path().join("adopted");
    let o = adopt(&sim, dir.path(), "train", &out, &["--all"]).await;
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        text(&o).contains("left alone: Terraform manages it"),
        "{}",
        text(&o)
    );
    assert!(!out.exists());
    let o = adopt(&sim, dir.path(), "train", &out, &["--name", "tf-0"]).await;
    assert!(o.status.success(), "{}", text(&o));
    let t = stdout(&o);
    assert!(t.contains("WARNING: Terraform manages it"), "{t}");
    assert!(t.contains("terraform state rm"), "{t}");
    assert_no_changes(&sim, dir.path()).await;
    sim.shutdown().await;
}

/// The writes since the last reset, by method.
fn writes(sim: &SimHandle) -> (u64, u64) {
    let s = sim.stats();
    let patches = s
        .by_method
        .get("compute.instanceGroupManagers.patch")
        .copied()
        .unwrap_or(0);
    (s.writes, patches)
}

/// Issue 20: a GCE slice (MIG, instance template, workload policy, Nodes on
/// the real control plane) is released with one MIG description patch and
/// nothing deleted; its spec is then refused (`name_taken`), never
/// recreated; `adopt --name` takes it back with one patch (both through
/// saved plan files, applied with `apply FILE`, the adoption's refused
/// once the world moved) and `plan` has
/// nothing to do; `destroy` then deletes the MIG, template and
/// policy (the simulator refuses a template or policy a MIG still uses,
/// so the order is proven).
#[tokio::test(flavor = "multi_thread")]
async fn a_gce_slice_is_released_and_adopted_back_with_one_mig_patch_each() {
    use crate::e2e_gce::{
        SERIAL, gce_apply, gce_dir, gce_slice, get, kube_client, names, nodes_of,
    };
    let _serial = SERIAL.lock().await;
    let client = kube_client().await;
    let sim = start().await;
    let dir = gce_dir(
        "e2e-adopt-gce",
        &[("rt.yaml", gce_slice("gce-rt", "4x4", ""))],
    );
    let o = gce_apply(&sim, dir.path()).await;
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(nodes_of(&client, "gce-rt").await.len(), 4);

    // Released through a saved plan file: saving writes nothing, applying
    // it patches the MIG's description once.
    sim.reset_stats();
    let saved = tempfile::tempdir().unwrap();
    let release_plan = saved.path().join("release.json");
    let o = slicectl(
        &sim,
        &[
            "release",
            arg(dir.path()),
            "--slice",
            "gce-rt",
            "--plan-out",
            arg(&release_plan),
        ],
    )
    .await;
    assert!(o.status.success(), "{}", text(&o));
    assert!(!text(&o).contains("release_unsupported"), "{}", text(&o));
    assert_eq!(writes(&sim), (0, 0), "{:?}", sim.stats().by_method);
    let o = slicectl(&sim, &["apply", arg(&release_plan), "--auto-approve"]).await;
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(writes(&sim), (1, 1), "{:?}", sim.stats().by_method);
    let o = slicectl(&sim, &["plan", arg(dir.path()), "--detailed-exitcode"]).await;
    assert!(text(&o).contains("name_taken"), "{}", text(&o));
    assert!(
        !text(&o).contains("- destroy") && !text(&o).contains("-/+"),
        "{}",
        text(&o)
    );

    // Adopted back through a saved plan file, which applies once: the
    // world it was made for is gone after that.
    sim.reset_stats();
    let out = dir.path().join("adopted");
    let adopt_plan = saved.path().join("adopt.json");
    let o = adopt(
        &sim,
        dir.path(),
        "kubeadm",
        &out,
        &["--name", "gce-rt-0", "--plan-out", arg(&adopt_plan)],
    )
    .await;
    assert!(o.status.success(), "{}", text(&o));
    assert!(stdout(&o).contains("adopt: "), "{}", text(&o));
    assert_eq!(writes(&sim), (0, 0), "{:?}", sim.stats().by_method);
    let o = slicectl(&sim, &["apply", arg(&adopt_plan), "--auto-approve"]).await;
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(writes(&sim), (1, 1), "{:?}", sim.stats().by_method);
    let o = slicectl(&sim, &["apply", arg(&adopt_plan), "--auto-approve"]).await;
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("has changed since"), "{}", text(&o));
    assert_eq!(writes(&sim), (1, 1), "{:?}", sim.stats().by_method);
    assert!(
        !out.join("gce-rt.yaml").exists(),
        "the Slice in the specs is used"
    );
    assert_no_changes(&sim, dir.path()).await;
    let migs = get(&sim, "zones/us-central1-b/instanceGroupManagers").await;
    let d = migs["items"][0]["description"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(d.contains(" adopted=true prevent-destroy=false"), "{d}");

    // Destroying it deletes the whole replica, in reverse order.
    let o = slicectl(&sim, &["destroy", arg(dir.path()), "--auto-approve"]).await;
    assert!(o.status.success(), "{}", text(&o));
    assert!(names(&get(&sim, "zones/us-central1-b/instanceGroupManagers").await).is_empty());
    assert!(names(&get(&sim, "global/instanceTemplates").await).is_empty());
    assert!(names(&get(&sim, "regions/us-central1/resourcePolicies").await).is_empty());
    assert!(nodes_of(&client, "gce-rt").await.is_empty());
}

/// POSTs `body` to the simulator's compute `collection` of
/// example-project, as another tool would, and waits for it.
async fn compute_insert(sim: &SimHandle, collection: &str, body: Value) {
    let r = reqwest::Client::new()
        .post(format!(
            "{}/compute/v1/projects/example-project/{collection}",
            sim.base_url()
        ))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert!(
        r.status().is_success(),
        "{collection}: {:?}",
        r.text().await
    );
    let mut op: Value = r.json().await.unwrap();
    let link = op["selfLink"].as_str().unwrap_or_default().to_string();
    for _ in 0..200 {
        if op["status"] == "DONE" {
            assert!(op.get("error").is_none(), "{collection}: {op}");
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        op = reqwest::get(&link).await.unwrap().json().await.unwrap();
    }
    panic!("{collection}: the insert did not finish: {op}");
}

/// The cluster's own TPU device plugin (tpu-operator's, made before
/// slicectl came), which slicectl uses as it is; delete it when done.
async fn foreign_device_plugin() -> kube::Api<k8s_openapi::api::apps::v1::DaemonSet> {
    let ds: kube::Api<k8s_openapi::api::apps::v1::DaemonSet> =
        kube::Api::namespaced(crate::e2e_gce::kube_client().await, "kube-system");
    let _ = ds.delete("tpu-device-plugin", &Default::default()).await;
    let plugin: k8s_openapi::api::apps::v1::DaemonSet = serde_json::from_value(json!({
        "metadata": {"name": "tpu-device-plugin", "namespace": "kube-system"},
        "spec": {"selector": {"matchLabels": {"app": "tpu"}}, "template": {
            "metadata": {"labels": {"app": "tpu"}},
            "spec": {"containers": [{"name": "p", "image": "example.com/tpu-device-plugin:1"}]}}}
    }))
    .unwrap();
    ds.create(&Default::default(), &plugin).await.unwrap();
    ds
}

/// A workload policy, a flex-start instance template and a BULK MIG made
/// outside slicectl (as tpu-operator or a script makes them), the MIG
/// named `mig` with VMs named `base`. The policy is made by the real
/// gcloud; the template and the MIG over REST, since GA gcloud offers
/// neither the FLEX_START provisioning model nor the BULK mode flag (only
/// `gcloud alpha` has `--target-size-policy-mode`).
async fn foreign_mig(sim: &SimHandle, mig: &str, base: &str) {
    foreign_mig_named(sim, mig, base, &format!("{mig}-tpl"), &format!("{mig}-wp")).await;
}

/// [`foreign_mig`] with the template and policy named `template` and
/// `policy` (tpu-operator's `<group>-template-<hash>`, `<group>-policy-<hash>`).
async fn foreign_mig_named(sim: &SimHandle, mig: &str, base: &str, template: &str, policy: &str) {
    let (mig_tpl, mig_wp) = (template.to_string(), policy.to_string());
    let cfg = tempfile::tempdir().unwrap();
    gcloud(
        sim,
        cfg.path(),
        &[
            "compute",
            "resource-policies",
            "create",
            "workload-policy",
            &mig_wp,
            "--region",
            "us-central1",
            "--type",
            "HIGH_THROUGHPUT",
            "--accelerator-topology",
            "4x4",
        ],
    )
    .await;
    compute_insert(
        sim,
        "global/instanceTemplates",
        json!({"name": mig_tpl, "properties": {
            "machineType": "ct6e-standard-4t",
            "labels": {"team": "ml"},
            "disks": [{"boot": true, "autoDelete": true, "initializeParams": {
                "sourceImage": "projects/ubuntu-os-accelerator-images/global/images/family/ubuntu-accel-2404-amd64-tpu-v6e",
                "diskType": "hyperdisk-balanced", "diskSizeGb": "100"}}],
            "networkInterfaces": [{"network": "projects/example-project/global/networks/default"}],
            "scheduling": {"provisioningModel": "FLEX_START", "onHostMaintenance": "TERMINATE",
                           "instanceTerminationAction": "DELETE", "automaticRestart": false}}}),
    )
    .await;
    compute_insert(
        sim,
        "zones/us-central1-b/instanceGroupManagers",
        json!({"name": mig, "baseInstanceName": base,
               "instanceTemplate": format!("projects/example-project/global/instanceTemplates/{mig_tpl}"),
               "targetSize": 4, "targetSizePolicy": {"mode": "BULK"},
               "instanceLifecyclePolicy": {"defaultActionOnFailure": "DO_NOTHING"},
               "resourcePolicies": {"workloadPolicy": format!("projects/example-project/regions/us-central1/resourcePolicies/{mig_wp}")}}),
    )
    .await;
}

/// Issue 20: a MIG with its template and workload policy made outside
/// slicectl is adopted as one replica: the Slice file brings the template
/// as it is (`gce.instanceTemplate`), the plan patches the MIG's
/// description only, and `plan` then changes nothing in the cloud; a MIG adopting
/// would replace (its VMs are named otherwise than slicectl names them)
/// is refused with nothing written; `destroy` deletes MIG, template and
/// policy, which are now the slice's.
#[tokio::test(flavor = "multi_thread")]
async fn a_foreign_mig_with_its_template_and_policy_is_adopted_as_one_replica() {
    use crate::e2e_gce::{SERIAL, gce_dir, get, names};
    let _serial = SERIAL.lock().await;
    let ds = foreign_device_plugin().await;
    // Nodes a failed run of this test left (the simulator's VM names repeat).
    let _ = kube::Api::<k8s_openapi::api::core::v1::Node>::all(crate::e2e_gce::kube_client().await)
        .delete_collection(
            &Default::default(),
            &kube::api::ListParams::default().labels("slicectl.dev/owner=e2e-adopt-mig"),
        )
        .await;
    let sim = start().await;
    let dir = gce_dir("e2e-adopt-mig", &[]);
    foreign_mig(&sim, "train-0", "train-0").await;
    foreign_mig(&sim, "odd-0", "odd-vm").await;

    sim.reset_stats();
    let out = dir.path().join("adopted");
    let o = adopt(&sim, dir.path(), "kubeadm", &out, &["--name", "odd-0"]).await;
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        text(&o).contains("adopt_replace") || text(&o).contains("would replace"),
        "{}",
        text(&o)
    );
    assert!(text(&o).contains("baseInstanceName"), "{}", text(&o));
    assert_eq!(sim.stats().writes, 0, "{:?}", sim.stats().by_method);
    assert!(!out.join("odd.yaml").exists());

    let o = adopt(
        &sim,
        dir.path(),
        "kubeadm",
        &out,
        &["--selector", "team=ml"],
    )
    .await;
    let t = text(&o);
    assert!(t.contains("wrote "), "{t}");
    assert_eq!(writes(&sim), (1, 1), "{:?}", sim.stats().by_method);
    let file = std::fs::read_to_string(out.join("train.yaml")).unwrap();
    assert!(file.contains("backend: gce"), "{file}");
    assert!(
        file.contains(
            "instanceTemplate: projects/example-project/global/instanceTemplates/train-0-tpl"
        ),
        "{file}"
    );
    assert!(file.contains("topology: 4x4"), "{file}");
    let o = slicectl(&sim, &["validate", arg(dir.path())]).await;
    assert!(o.status.success(), "{}", text(&o));
    // Nothing changes any more: the MIG's VMs run a template slicectl
    // did not render (these simulated VMs run another tool's template,
    // whose bootstrap the simulator does not run, so none has joined), and
    // slicectl hands them no token: `plan` shows no Nodes step that could
    // only wait, but the `unjoined` note, and exits 0.
    let o = slicectl(&sim, &["plan", arg(dir.path()), "--output", "json"]).await;
    assert!(o.status.success(), "{}", text(&o));
    let plan: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(
        plan["actions"].as_array().is_some_and(|a| a.is_empty()),
        "{plan}"
    );
    assert!(
        plan["refused"].as_array().is_none_or(|r| r.is_empty()),
        "{plan}"
    );
    assert_eq!(plan["unjoined"][0]["name"], "train-0", "{plan}");
    let o = slicectl(&sim, &["plan", arg(dir.path()), "--detailed-exitcode"]).await;
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(
        text(&o).contains("unjoined: 0 of 4 VM(s) of MIG train-0"),
        "{}",
        text(&o)
    );

    // Once they join (unlabelled, by the other tool's script), the next
    // plan labels them, in place, and nothing else; then nothing is left.
    let client = crate::e2e_gce::kube_client().await;
    join_as_another_tool(&client, &sim, "train-0-").await;
    let o = slicectl(&sim, &["plan", arg(dir.path()), "--output", "json"]).await;
    let plan: Value = serde_json::from_slice(&o.stdout).unwrap();
    let acted = actions(&plan);
    assert_eq!(acted, vec!["update nodes train-0".to_string()], "{plan}");
    let o = slicectl(&sim, &["apply", arg(dir.path()), "--auto-approve"]).await;
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(crate::e2e_gce::nodes_of(&client, "train").await.len(), 4);
    assert_no_changes(&sim, dir.path()).await;

    // Changed to render its own template, the replica is replaced and the
    // brought template the adopted MIG used (the slice's by reference) is
    // deleted, after the old MIG (the simulator refuses deleting a
    // template a MIG uses, as Compute Engine does).
    let spec = out.join("train.yaml");
    let brought = std::fs::read_to_string(&spec).unwrap();
    let own = brought.replace(
        "instanceTemplate: projects/example-project/global/instanceTemplates/train-0-tpl",
        "image: projects/ubuntu-os-accelerator-images/global/images/family/ubuntu-accel-2404-amd64-tpu-v6e\n    bootstrap: {kubeadm: {kubernetesVersion: \"1.36\"}}",
    );
    assert_ne!(own, brought);
    std::fs::write(&spec, &own).unwrap();
    let o = slicectl(&sim, &["plan", arg(dir.path()), "--output", "json"]).await;
    let plan: Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|_| panic!("{}", text(&o)));
    let acted = actions(&plan);
    for want in [
        "delete instance_template train-0-tpl",
        "create instance_template train-0-it",
        "replace mig train-0",
    ] {
        assert!(acted.iter().any(|a| a == want), "{want}: {acted:?}");
    }
    let o = slicectl(&sim, &["apply", arg(dir.path()), "--auto-approve"]).await;
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(
        names(&get(&sim, "global/instanceTemplates").await),
        vec!["odd-0-tpl", "train-0-it"],
        "{}",
        text(&o)
    );
    // The new MIG keeps the adoption marker: the policy the old one held
    // by reference (made by gcloud) stays the slice's, so nothing is left.
    assert_no_changes(&sim, dir.path()).await;

    let again = dir.path().join("again");
    let o = adopt(&sim, dir.path(), "kubeadm", &again, &["--name", "train-0"]).await;
    assert!(
        text(&o).contains("already owned by slicectl"),
        "{}",
        text(&o)
    );

    // Teardown (the odd MIG is not slicectl's: it stays).
    let o = slicectl(&sim, &["destroy", arg(dir.path()), "--auto-approve"]).await;
    assert!(o.status.success(), "{}", text(&o));
    let left = |v: Value| names(&v);
    assert_eq!(
        left(get(&sim, "zones/us-central1-b/instanceGroupManagers").await),
        vec!["odd-0"]
    );
    assert_eq!(
        left(get(&sim, "global/instanceTemplates").await),
        vec!["odd-0-tpl"]
    );
    assert_eq!(
        left(get(&sim, "regions/us-central1/resourcePolicies").await),
        vec!["odd-0-wp"]
    );
    ds.delete("tpu-device-plugin", &Default::default())
        .await
        .unwrap();
}

/// Issue 20: a MIG tpu-operator made (its TPUNodeGroup's children
/// `grp-mig-<hash>`, `grp-template-<hash>`, `grp-policy-<hash>`) is adopted
/// by name under the names it has (`gce.migName`,
/// `gce.workloadPolicyName`: a MIG cannot be renamed in place), with
/// tpu-operator's warning and one MIG description patch; `plan` then changes
/// nothing in the cloud, and `destroy` deletes MIG, template and policy.
#[tokio::test(flavor = "multi_thread")]
async fn a_tpu_operator_mig_is_adopted_under_its_own_names() {
    use crate::e2e_gce::{SERIAL, gce_dir, get, names};
    let _serial = SERIAL.lock().await;
    let sim = start().await;
    let dir = gce_dir("e2e-adopt-tpuop", &[]);
    let (mig, tpl, wp) = (
        "grp-mig-1a2b3c4d",
        "grp-template-1a2b3c4d",
        "grp-policy-1a2b3c4d",
    );
    foreign_mig_named(&sim, mig, mig, tpl, wp).await;
    // Its VMs joined the real control plane as tpu-operator's bootstrap
    // has them: Nodes with the `gce://P/ZONE/VM` providerID, Ready, with 4
    // chips (tpu-operator's device plugin runs), and none of slicectl's
    // labels.
    let ds = foreign_device_plugin().await;
    let client = crate::e2e_gce::kube_client().await;
    join_as_another_tool(&client, &sim, "").await;

    // Not taken by --all: tpu-operator still manages it.
    sim.reset_stats();
    let out = dir.path().join("adopted");
    let o = adopt(&sim, dir.path(), "kubeadm", &out, &["--all"]).await;
    assert!(text(&o).contains("tpu-operator"), "{}", text(&o));
    assert_eq!(sim.stats().writes, 0, "{:?}", sim.stats().by_method);

    let o = adopt(&sim, dir.path(), "kubeadm", &out, &["--name", mig]).await;
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(t.contains("WARNING") && t.contains("tpu-operator"), "{t}");
    assert!(t.contains("slice.grp[0].nodes"), "{t}");
    assert_eq!(writes(&sim), (1, 1), "{:?}", sim.stats().by_method);
    let file = std::fs::read_to_string(out.join("grp.yaml")).unwrap();
    assert!(file.contains(&format!("migName: {mig}")), "{file}");
    assert!(
        file.contains(&format!("workloadPolicyName: {wp}")),
        "{file}"
    );
    assert!(
        file.contains(&format!(
            "instanceTemplate: projects/example-project/global/instanceTemplates/{tpl}"
        )),
        "{file}"
    );
    let o = slicectl(&sim, &["validate", arg(dir.path())]).await;
    assert!(o.status.success(), "{}", text(&o));
    let migs = get(&sim, "zones/us-central1-b/instanceGroupManagers").await;
    let d = migs["items"][0]["description"].as_str().unwrap_or_default();
    assert!(
        d.contains("slice=grp replica=0") && d.contains("adopted=true"),
        "{d}"
    );

    // The adoption labelled the Nodes its VMs had joined with (one
    // in-place step on the Kubernetes side, no wait), so the very next
    // `plan` has no changes, with no apply in between.
    assert_eq!(
        crate::e2e_gce::nodes_of(&client, "grp").await.len(),
        4,
        "{t}"
    );
    sim.reset_stats();
    assert_no_changes(&sim, dir.path()).await;
    assert_eq!(sim.stats().writes, 0);

    let o = slicectl(&sim, &["destroy", arg(dir.path()), "--auto-approve"]).await;
    assert!(o.status.success(), "{}", text(&o));
    assert!(names(&get(&sim, "zones/us-central1-b/instanceGroupManagers").await).is_empty());
    assert!(names(&get(&sim, "global/instanceTemplates").await).is_empty());
    assert!(names(&get(&sim, "regions/us-central1/resourcePolicies").await).is_empty());
    ds.delete("tpu-device-plugin", &Default::default())
        .await
        .unwrap();
}

/// Registers a Node for each VM named `prefix…` of the simulator's zone
/// us-central1-b as another tool's bootstrap would (providerID
/// `gce://P/ZONE/VM`, Ready, `google.com/tpu` 4), without slicectl's
/// labels.
async fn join_as_another_tool(client: &kube::Client, sim: &SimHandle, prefix: &str) {
    use k8s_openapi::api::core::v1::Node;
    let nodes: kube::Api<Node> = kube::Api::all(client.clone());
    let vms: Vec<String> =
        crate::e2e_gce::names(&crate::e2e_gce::get(sim, "zones/us-central1-b/instances").await)
            .into_iter()
            .filter(|vm| vm.starts_with(prefix))
            .collect();
    assert_eq!(vms.len(), 4, "{vms:?}");
    for vm in vms {
        let _ = nodes.delete(&vm, &Default::default()).await;
        let node: Node = serde_json::from_value(json!({
            "metadata": {"name": vm},
            "spec": {"providerID": format!("gce://example-project/us-central1-b/{vm}")}
        }))
        .unwrap();
        nodes.create(&Default::default(), &node).await.unwrap();
        let status = json!({"status": {
            "capacity": {"google.com/tpu": "4", "cpu": "8", "memory": "32Gi", "pods": "110"},
            "allocatable": {"google.com/tpu": "4", "cpu": "8", "memory": "32Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                            "message": "joined by another tool",
                            "lastHeartbeatTime": jiff::Timestamp::now().to_string(),
                            "lastTransitionTime": jiff::Timestamp::now().to_string()}]}});
        nodes
            .patch_status(
                &vm,
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(&status),
            )
            .await
            .unwrap();
    }
}

/// Issue 35, case 9: adopting makes a pool slicectl's, and an apply of the
/// spec directory without its file would delete it. Slice files written
/// outside the directory are refused before anything is observed or
/// stamped (`--out-outside-source` is the explicit way); written under it,
/// the next apply of the directory keeps the adopted pool.
#[tokio::test(flavor = "multi_thread")]
async fn adopting_into_files_outside_the_spec_directory_is_refused() {
    let sim = start().await;
    let dir = spec_dir(&[(
        "keep.yaml",
        slice_yaml("keep", "tpu-v6e-slice", "1x1", 1, ""),
    )]);
    let o = apply(&sim, dir.path()).await;
    assert!(o.status.success(), "{}", text(&o));
    create_pool(
        &sim,
        "legacy-0",
        "us-central1-b",
        "ct6e-standard-4t",
        json!({}),
    )
    .await;
    let elsewhere = tempfile::tempdir().unwrap();
    sim.reset_stats();
    let o = adopt(
        &sim,
        dir.path(),
        "train",
        elsewhere.path(),
        &["--name", "legacy-0"],
    )
    .await;
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(t.contains("outside the spec directory"), "{t}");
    assert!(t.contains("--out-outside-source"), "{t}");
    assert_eq!(sim.stats().writes, 0, "{t}");
    assert!(
        std::fs::read_dir(elsewhere.path())
            .unwrap()
            .next()
            .is_none()
    );
    assert!(pool(&sim, "legacy-0").await["config"]["labels"]["slicectl.dev/managed-by"].is_null());
    // Under the directory: adopted, and kept by the next apply of it.
    let out = dir.path().join("adopted");
    let o = adopt(&sim, dir.path(), "train", &out, &["--name", "legacy-0"]).await;
    assert!(o.status.success(), "{}", text(&o));
    assert!(out.join("legacy.yaml").exists());
    let o = apply(&sim, dir.path()).await;
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(
        pool(&sim, "legacy-0").await["config"]["labels"]["slicectl.dev/managed-by"],
        "slicectl"
    );
    assert_no_changes(&sim, dir.path()).await;
    sim.shutdown().await;
}
