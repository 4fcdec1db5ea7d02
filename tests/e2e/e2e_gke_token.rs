//! GKE readiness through the default `gke.kubeApi` (no kubeconfig): the
//! simulator plays GKE and is linked to the real test control plane, so its
//! `clusters.get` answers with that API server's endpoint and CA; slicectl
//! authenticates there with the Google access token it reads from
//! `--access-token-file` (the control plane's static token standing for a
//! Google identity, `SLICECTL_TEST_GKE_TOKEN_FILE`). The node pools
//! `slicectl apply` creates register hollow kubemark Nodes (real kubelet,
//! fake runtime); the real kube-scheduler binds a TPU pod to them. Both
//! `slicectl status` and the controller's SliceStatus `Ready` follow the
//! Nodes.

use crate::common::k8s::{apply_crd, kubectl, namespace};
use crate::common::*;
use crate::sim_gke_support::{
    client, link, pool_nodes, submit, tpu_pod, unique, wait_pool_nodes, wait_running,
};

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, Patch, PatchParams};
use slicectl::status_object::SliceStatus;
use slicectl_sim::SimHandle;

const TOPOLOGY_LABEL: &str = "cloud.google.com/gke-tpu-topology";

/// The Google access token file the test control plane accepts.
fn token_file() -> String {
    match std::env::var("SLICECTL_TEST_GKE_TOKEN_FILE") {
        Ok(p) if !p.is_empty() => p,
        _ => panic!(
            "SLICECTL_TEST_GKE_TOKEN_FILE is not set; start the test control plane first: \
             eval \"$(scripts/k8s-testenv.sh up)\" (or source /tmp/k8s-shared.env)"
        ),
    }
}

async fn status_row(sim: &SimHandle, dir: &str, more: &[&str]) -> serde_json::Value {
    let mut args = vec!["status", dir, "-o", "json"];
    args.extend_from_slice(more);
    let o = slicectl(sim, &args).await;
    assert!(o.status.success(), "{}", text(&o));
    let rows: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    rows[0].clone()
}

/// Sets (`Some`) or removes (`None`) a label of a Node (the kubelet does not
/// manage the TPU labels after registration, so the change stays).
async fn set_label(nodes: &Api<Node>, node: &str, key: &str, value: Option<&str>) {
    let patch = serde_json::json!({"metadata": {"labels": {key: value}}});
    nodes
        .patch(node, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap_or_else(|e| panic!("label node {node}: {e}"));
}

#[tokio::test(flavor = "multi_thread")]
async fn status_reads_gke_readiness_through_clusters_get_and_the_token_file() {
    let client = client().await;
    let nodes = Api::<Node>::all(client.clone());
    let tok = token_file();
    let sim = sim(Duration::from_millis(200), 5, Default::default()).await;
    link(&sim, CLUSTER).await;
    // Unique names: the control plane is shared.
    let slice = unique("tk");
    let dir = spec_dir(&[(
        "s.yaml",
        slice_yaml(&slice, "tpu-v5p-slice", "2x2x2", 1, ""),
    )]);
    let d = dir.path().to_str().unwrap();
    let o = slicectl(
        &sim,
        &["apply", d, "--auto-approve", "--access-token-file", &tok],
    )
    .await;
    assert!(o.status.success(), "{}", text(&o));
    let pool = format!("{slice}-0");
    // v5p 2x2x2 (ct5p-hightpu-4t): 2 hosts of 4 chips.
    let hollow = wait_pool_nodes(&client, &pool, 2).await;

    // The default path: clusters.get's endpoint and CA, and the token.
    let row = status_row(&sim, d, &["--access-token-file", &tok]).await;
    assert_eq!(row["nodes"], "2/2 ready", "{row}");
    assert_eq!(row["last_error"], "", "{row}");

    // Without a token (a loopback endpoint gets no credentials) readiness
    // is deferred, and says so: never faked.
    let row = status_row(&sim, d, &[]).await;
    assert!(
        row.to_string().contains("sends no Google credentials"),
        "{row}"
    );
    assert_eq!(row["nodes"], "?/2", "{row}");

    // A token the cluster's API server rejects is an error naming that
    // cluster (the token itself never shows).
    let bad = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(bad.path(), "not-a-valid-token-secret\n").unwrap();
    let o = slicectl(
        &sim,
        &[
            "status",
            d,
            "-o",
            "json",
            "--access-token-file",
            bad.path().to_str().unwrap(),
        ],
    )
    .await;
    let all = text(&o);
    assert!(!all.contains("not-a-valid-token-secret"), "{all}");
    assert!(!o.status.success(), "{all}");
    assert!(all.contains("401 Unauthorized"), "{all}");
    assert!(all.contains("--access-token-file"), "{all}");
    assert!(
        all.contains("gke://example-project/us-central1/train"),
        "{all}"
    );

    // A pod with the TPU selectors and toleration is scheduled by the real
    // scheduler and runs on one of the slice's Nodes.
    let ns = namespace(&client, "tok").await;
    // Pinned to this slice's pool (the shared control plane holds other
    // tests' v5p 2x2x2 Nodes).
    let pod = tpu_pod("worker-0", &pool, "tpu-v5p-slice", "2x2x2", 4);
    submit(&client, &ns, &pod).await;
    let pod = wait_running(&client, &ns, "worker-0").await;
    let bound = pod.spec.and_then(|s| s.node_name).expect("bound");
    assert!(
        hollow
            .iter()
            .any(|n| n.metadata.name.as_deref() == Some(bound.as_str())),
        "{bound}"
    );

    // Not ready: a Node without its TPU topology label, with the reason.
    let other = hollow
        .iter()
        .filter_map(|n| n.metadata.name.clone())
        .find(|n| *n != bound)
        .expect("a second node");
    set_label(&nodes, &other, TOPOLOGY_LABEL, None).await;
    let row = status_row(&sim, d, &["--access-token-file", &tok]).await;
    assert_eq!(row["nodes"], "1/2 ready", "{row}");
    let why = row["last_error"].as_str().unwrap_or_default();
    assert!(
        why.contains(&format!("node {other}")) && why.contains(TOPOLOGY_LABEL),
        "{row}"
    );
    set_label(&nodes, &other, TOPOLOGY_LABEL, Some("2x2x2")).await;
    let row = status_row(&sim, d, &["--access-token-file", &tok]).await;
    assert_eq!(row["nodes"], "2/2 ready", "{row}");

    let _ = kubectl(&["delete", "namespace", &ns, "--wait=false"]);
    sim.shutdown().await;
}

/// Whether a Node's `Ready` condition is True.
fn node_ready(n: &Node) -> bool {
    n.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// `STATUS MESSAGE` of a SliceStatus condition.
fn condition(ns: &str, name: &str, cond: &str) -> String {
    let o = kubectl(&[
        "get",
        "-n",
        ns,
        &format!("slicestatus/{name}"),
        "-o",
        &format!(
            "jsonpath={{.status.conditions[?(@.type==\"{cond}\")].status}} {{.status.conditions[?(@.type==\"{cond}\")].message}}"
        ),
    ]);
    String::from_utf8_lossy(&o.stdout).into_owned()
}

async fn wait_until(what: &str, secs: u64, logs: &Piped, mut done: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    while !done() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}\n--- controller stderr\n{}",
            logs.stderr.lock().unwrap()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_controllers_ready_condition_follows_the_hollow_nodes_through_the_token() {
    let client = client().await;
    let nodes = Api::<Node>::all(client.clone());
    apply_crd();
    let ns = namespace(&client, "tokctl").await;
    let tok = token_file();
    let sim = sim(Duration::from_millis(200), 6, Default::default()).await;
    link(&sim, CLUSTER).await;
    let slice = unique("tc");
    let dir = spec_dir(&[(
        "s.yaml",
        slice_yaml(&slice, "tpu-v5p-slice", "2x2x2", 1, ""),
    )]);
    let port = free_port();
    let mut ctl = spawn_piped(
        tokio::process::Command::new(bin())
            .args([
                "controller",
                "--namespace",
                &ns,
                "--listen",
                &format!("127.0.0.1:{port}"),
                "--lease-duration",
                "4s",
                "--dir",
                dir.path().to_str().unwrap(),
                "--debounce",
                "100ms",
                "--resync",
                "1s",
                "--access-token-file",
                &tok,
            ])
            .env("SLICECTL_API_ENDPOINT", sim.base_url())
            .env("SLICECTL_UNREAD_CLUSTERS_IDLE", "true")
            .env("KUBECONFIG", crate::common::k8s::kubeconfig())
            .env("POD_NAME", "tokctl")
            .env("NO_COLOR", "1")
            .env_remove("SLICECTL_LOG")
            .env_remove("POD_NAMESPACE"),
    );
    let pool = format!("{slice}-0");
    // From the start, every time the object says Ready True, the pool's two
    // Nodes must already be there and Ready (the Nodes only get readier
    // until the label is taken away below, so reading them just after the
    // object cannot wrongly blame it).
    let watching = Arc::new(AtomicBool::new(true));
    let watcher = {
        let (client, ns, slice, pool, watching) = (
            client.clone(),
            ns.clone(),
            slice.clone(),
            pool.clone(),
            watching.clone(),
        );
        tokio::spawn(async move {
            let objects = Api::<SliceStatus>::namespaced(client.clone(), &ns);
            let (mut seen_not_true, mut seen_true) = (0usize, 0usize);
            while watching.load(Ordering::SeqCst) {
                let ready = objects.get_opt(&slice).await.ok().flatten().and_then(|o| {
                    o.status?
                        .conditions
                        .into_iter()
                        .find(|c| c.type_ == "Ready")
                        .map(|c| (c.status, c.message))
                });
                match ready {
                    Some((s, _)) if s == "True" => {
                        let nodes = pool_nodes(&client, &pool).await;
                        let ready = nodes.iter().filter(|n| node_ready(n)).count();
                        assert!(
                            nodes.len() == 2 && ready == 2,
                            "slicestatus/{slice} Ready True with {ready} of {} Node(s) Ready",
                            nodes.len()
                        );
                        seen_true += 1;
                    }
                    Some(_) => seen_not_true += 1,
                    None => {}
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            (seen_not_true, seen_true)
        })
    };
    let hollow = wait_pool_nodes(&client, &pool, 2).await;
    // `kubectl wait --for=condition=Ready`: True once the hollow Nodes are
    // Ready, read through clusters.get's endpoint and CA with the token.
    wait_until(&format!("slicestatus/{slice}"), 60, &ctl, || {
        kubectl(&["get", "-n", &ns, &format!("slicestatus/{slice}")])
            .status
            .success()
    })
    .await;
    let o = kubectl(&[
        "wait",
        "-n",
        &ns,
        "--for=condition=Ready",
        "--timeout=60s",
        &format!("slicestatus/{slice}"),
    ]);
    assert!(
        o.status.success(),
        "{}\n--- controller stderr\n{}",
        text(&o),
        ctl.stderr.lock().unwrap()
    );

    // Let the watcher (100 ms polls) see the True too.
    tokio::time::sleep(Duration::from_millis(500)).await;
    watching.store(false, Ordering::SeqCst);
    let (_not_true, seen_true) = watcher.await.expect("the Ready watcher held");
    assert!(seen_true > 0, "the watcher saw Ready True");

    // A Node that loses its TPU label: Ready turns False, with the reason;
    // back, True again.
    let one = hollow[0].metadata.name.clone().expect("named");
    set_label(&nodes, &one, TOPOLOGY_LABEL, None).await;
    wait_until("Ready False for the missing label", 60, &ctl, || {
        let c = condition(&ns, &slice, "Ready");
        c.starts_with("False ") && c.contains(TOPOLOGY_LABEL)
    })
    .await;
    set_label(&nodes, &one, TOPOLOGY_LABEL, Some("2x2x2")).await;
    wait_until("Ready True again", 60, &ctl, || {
        condition(&ns, &slice, "Ready").starts_with("True ")
    })
    .await;

    let _ = ctl.child.start_kill();
    let _ = ctl.child.wait().await;
    let _ = kubectl(&["delete", "namespace", &ns, "--wait=false"]);
    sim.shutdown().await;
}

/// A kubeconfig for the test control plane (its server and CA) whose user
/// is a token the API server rejects (401).
fn rejected_kubeconfig(dir: &std::path::Path) -> std::path::PathBuf {
    let admin = kube::config::Kubeconfig::read_from(crate::sim_gke_support::kubeconfig())
        .expect("the test control plane's kubeconfig");
    let cluster = admin.clusters[0].cluster.clone().expect("a cluster");
    let server = cluster.server.expect("a server");
    let ca = cluster.certificate_authority_data.expect("an embedded CA");
    let path = dir.join("rejected.kubeconfig");
    std::fs::write(
        &path,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {{server: '{server}', certificate-authority-data: '{ca}'}}\nusers:\n- name: u\n  user: {{token: not-a-valid-token-secret}}\ncontexts:\n- name: x\n  context: {{cluster: c, user: u}}\ncurrent-context: x\n"
        ),
    )
    .expect("write the kubeconfig");
    path
}

/// `slicectl ARGS --access-token-file TOKEN`.
async fn with_token(sim: &SimHandle, tok: &str, args: &[&str]) -> std::process::Output {
    let mut all = args.to_vec();
    all.extend(["--access-token-file", tok]);
    slicectl(sim, &all).await
}

/// Issue 17 item 1 for the Kubernetes side: a GKE Target whose cluster's
/// API rejects slicectl's credentials (401), and a GCE Target whose
/// kubeconfig's user is rejected, beside a healthy GKE Target. Every
/// command isolates them: `plan`, `apply`, `status`, `reconcile` and
/// `destroy` report each as not observed with `[target_forbidden]` and the
/// cause, act on the healthy Target only, and exit 1.
#[tokio::test(flavor = "multi_thread")]
async fn a_cluster_api_that_rejects_slicectl_leaves_only_its_target_alone_in_every_command() {
    let _client = client().await;
    let tok = token_file();
    let sim = sim(Duration::from_millis(50), 7, Default::default()).await;
    link(&sim, CLUSTER).await;
    let locked = "projects/example-project/locations/us-central1/clusters/locked";
    sim.add_cluster(locked).expect("register the cluster");
    let ok = unique("ok");
    let dir = spec_dir(&[("ok.yaml", slice_yaml(&ok, "tpu-v6e-slice", "1x1", 1, ""))]);
    let bad = rejected_kubeconfig(dir.path());
    let bad = bad.to_str().unwrap();
    std::fs::write(
        dir.path().join("locked.yaml"),
        format!(
            "apiVersion: slicectl.dev/v1alpha1\nkind: Target\nmetadata: {{name: locked}}\nspec:\n  project: example-project\n  zone: us-central1-b\n  ownerId: e2e\n  gke:\n    location: us-central1\n    name: locked\n    kubeApi: {{kubeconfig: {bad}}}\n---\napiVersion: slicectl.dev/v1alpha1\nkind: Target\nmetadata: {{name: kubeadm}}\nspec:\n  project: example-project\n  zone: us-central1-b\n  ownerId: e2e\n  gce:\n    controlPlaneEndpoint: \"10.128.0.2:6443\"\n    kubeApi: {{kubeconfig: {bad}}}\n---\napiVersion: slicectl.dev/v1alpha1\nkind: Slice\nmetadata: {{name: held}}\nspec: {{target: locked, backend: gke, accelerator: tpu-v6e-slice, topology: 1x1}}\n---\napiVersion: slicectl.dev/v1alpha1\nkind: Slice\nmetadata: {{name: selfm}}\nspec:\n  target: kubeadm\n  backend: gce\n  accelerator: tpu-v6e-slice\n  topology: \"2x2\"\n  gce:\n    image: projects/ubuntu-os-accelerator-images/global/images/family/ubuntu-accel-2404-amd64-tpu-v6e\n    bootstrap:\n      kubeadm:\n        kubernetesVersion: \"1.36\"\n"
        ),
    )
    .unwrap();
    let d = dir.path().to_str().unwrap();
    let reported = |t: &str| {
        assert!(t.contains("[target_forbidden]"), "{t}");
        assert!(t.contains("401"), "{t}");
        assert!(t.contains("locked") && t.contains("kubeadm"), "{t}");
        assert!(!t.contains("not-a-valid-token-secret"), "{t}");
    };
    let o = with_token(&sim, &tok, &["plan", d]).await;
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    reported(&t);
    assert!(t.contains("Plan: 1 to create"), "{t}");

    let o = with_token(&sim, &tok, &["apply", d, "--auto-approve"]).await;
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    reported(&t);
    assert!(pool_names(&sim).await.contains(&format!("{ok}-0")), "{t}");

    let o = with_token(&sim, &tok, &["status", d, "-o", "json"]).await;
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    let rows: serde_json::Value = serde_json::from_slice(&o.stdout).expect("a JSON table");
    let state = |slice: &str| {
        rows.as_array()
            .unwrap()
            .iter()
            .find(|r| r["slice"] == slice)
            .map(|r| {
                (
                    r["state"].as_str().unwrap_or("").to_string(),
                    r["last_error"].to_string(),
                )
            })
            .unwrap_or_else(|| panic!("no row for {slice}: {t}"))
    };
    for s in ["held", "selfm"] {
        let (st, why) = state(s);
        assert_eq!(st, "NOT OBSERVED", "{t}");
        assert!(why.contains("target_forbidden"), "{why}");
    }
    assert!(state(&ok).0.starts_with("RUNNING"), "{t}");

    let o = with_token(&sim, &tok, &["reconcile", d]).await;
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    reported(&t);

    let o = with_token(&sim, &tok, &["destroy", d, "--auto-approve"]).await;
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    reported(&t);
    assert!(!pool_names(&sim).await.contains(&format!("{ok}-0")), "{t}");
    sim.shutdown().await;
}
