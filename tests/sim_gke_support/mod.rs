//! Pods on slices, for tests against the real test control plane
//! (`scripts/k8s-testenv.sh up`: etcd, kube-apiserver, kube-controller-manager
//! with the node-lifecycle controller, kube-scheduler; kubemark built beside
//! them, `SLICECTL_TEST_KUBEMARK`).
//!
//! - [`link`]: link a simulated GKE cluster to the control plane; its node
//!   pools then register Nodes there, one kubemark hollow node (the real
//!   kubelet, fake container runtime) per VM, labelled, tainted and with
//!   `google.com/tpu` as GKE does them.
//! - [`create_pool`] / [`delete_pool`]: through the simulator's GKE API, as
//!   gcloud or slicectl would; [`wait_pool_nodes`] waits for the Nodes Ready.
//! - [`tpu_pod`], [`submit`], [`wait_running`], [`wait_unschedulable`]: a pod
//!   the real kube-scheduler binds.
//! - Ending a pod with the kubelet still real (the fake runtime runs every
//!   container until the pod goes): [`fail_pod`] sets
//!   `activeDeadlineSeconds` (mutable on a running pod), and the kubelet
//!   fails it `DeadlineExceeded`; [`succeed_pod`] deletes it behind a
//!   finalizer, and the kubelet stops its containers (exit code 0) and
//!   reports it `Succeeded` before the object goes; [`release_pod`] removes
//!   the finalizer.
//!
//! The control plane is shared by parallel tests: use unique cluster, pool
//! and namespace names ([`unique`]); Nodes are found by pool label, so two
//! tests must never give two pools the same name. Call
//! `SimHandle::shutdown` at the end: it stops the hollow nodes and deletes
//! their Nodes (dropping the simulator stops the processes but leaves the
//! Node objects).
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Node, Pod, PodSpec, ResourceRequirements, Toleration};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Client;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use slicectl_sim::link::GkeLink;
use slicectl_sim::{FaultConfig, SimConfig, SimHandle, Simulator};

/// How long a test waits for Nodes and pods.
pub const WAIT: Duration = Duration::from_secs(90);

/// The finalizer [`succeed_pod`] holds a pod with.
pub const HOLD_FINALIZER: &str = "slicectl.dev/test-hold";

fn hint() -> &'static str {
    "build the binaries and start the test control plane first: scripts/k8s-testbin.sh && \
     eval \"$(scripts/k8s-testenv.sh up)\" (or run scripts/test.sh)"
}

/// `NAME-xxxxxxxx`.
pub fn unique(prefix: &str) -> String {
    format!(
        "{prefix}-{}",
        &uuid::Uuid::new_v4().simple().to_string()[..8]
    )
}

/// The kubemark binary (`SLICECTL_TEST_KUBEMARK`); panics when it is not
/// there.
pub fn kubemark() -> PathBuf {
    let p = match std::env::var_os("SLICECTL_TEST_KUBEMARK") {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => panic!("SLICECTL_TEST_KUBEMARK is not set; {}", hint()),
    };
    assert!(
        p.is_file(),
        "kubemark is missing at {}; {}",
        p.display(),
        hint()
    );
    p
}

/// The test control plane's admin kubeconfig (`SLICECTL_TEST_KUBECONFIG`).
pub fn kubeconfig() -> PathBuf {
    match std::env::var_os("SLICECTL_TEST_KUBECONFIG") {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => panic!("SLICECTL_TEST_KUBECONFIG is not set; {}", hint()),
    }
}

/// The bearer token the test control plane accepts as a Google identity
/// (`SLICECTL_TEST_GKE_TOKEN_FILE`: user
/// `gke-user@example-project.iam.gserviceaccount.com`, bound to
/// cluster-admin), to stand for the Google access token a client sends to a
/// GKE cluster's endpoint.
pub fn gke_token() -> String {
    let p = match std::env::var_os("SLICECTL_TEST_GKE_TOKEN_FILE") {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => panic!("SLICECTL_TEST_GKE_TOKEN_FILE is not set; {}", hint()),
    };
    std::fs::read_to_string(&p)
        .unwrap_or_else(|e| panic!("reading {}: {e}; {}", p.display(), hint()))
        .trim()
        .to_string()
}

/// An admin client of the test control plane.
pub async fn client() -> Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let config = slicectl::kube::config_from_kubeconfig(&kubeconfig(), None)
        .await
        .unwrap_or_else(|e| panic!("{e}; {}", hint()));
    Client::try_from(config).expect("client")
}

/// A simulator with no cluster yet (register one with [`link`]), operations
/// of 200 ms, seeded with `seed`.
pub async fn sim(seed: u64) -> SimHandle {
    let _ = rustls::crypto::ring::default_provider().install_default();
    Simulator::start(
        SimConfig {
            clusters: Vec::new(),
            operation_latency: Duration::from_millis(200),
            seed,
            faults: FaultConfig::default(),
        },
        "127.0.0.1:0".parse().expect("loopback"),
    )
    .await
    .expect("start the simulator")
}

/// Registers `cluster` (`projects/P/locations/L/clusters/C`) in `sim` and
/// links it to the test control plane.
pub async fn link(sim: &SimHandle, cluster: &str) {
    sim.add_cluster(cluster).expect("register the cluster");
    sim.link_gke(cluster, GkeLink::new(kubeconfig(), kubemark()))
        .await
        .unwrap_or_else(|e| panic!("{e:#}; {}", hint()));
}

/// A TPU node pool as gcloud creates one: `hosts` VMs of `machine_type` in
/// `zone`, with `tpuTopology` when it is a multi-host slice.
pub fn tpu_pool(name: &str, machine_type: &str, zone: &str, topology: &str, hosts: u32) -> Value {
    let mut pool = json!({
        "name": name,
        "initialNodeCount": hosts,
        "locations": [zone],
        "config": {"machineType": machine_type},
    });
    if hosts > 1 {
        pool["placementPolicy"] = json!({"type": "COMPACT", "tpuTopology": topology});
    }
    pool
}

async fn wait_operation(sim: &SimHandle, cluster: &str, op: &Value) {
    let name = op["name"].as_str().expect("operation name");
    // projects/P/locations/L of projects/P/locations/L/clusters/C.
    let location = cluster.split("/clusters/").next().expect("cluster key");
    let url = format!("{}/v1/{location}/operations/{name}", sim.base_url());
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let v: Value = reqwest::get(&url)
            .await
            .expect("get operation")
            .json()
            .await
            .expect("operation JSON");
        if v["status"] == "DONE" {
            assert!(v.get("error").is_none(), "operation {name} failed: {v}");
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "operation {name} not DONE: {v}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Creates a node pool through the simulator's GKE API and waits for the
/// operation.
pub async fn create_pool(sim: &SimHandle, cluster: &str, pool: Value) {
    let r = reqwest::Client::new()
        .post(format!("{}/v1/{cluster}/nodePools", sim.base_url()))
        .json(&json!({"parent": cluster, "nodePool": pool}))
        .send()
        .await
        .expect("create node pool");
    let status = r.status();
    let op: Value = r.json().await.expect("operation JSON");
    assert!(status.is_success(), "create node pool: {status} {op}");
    wait_operation(sim, cluster, &op).await;
}

/// The node pools of `cluster` (`nodePools.list` through the simulator's GKE
/// API), as JSON.
pub async fn list_pools(sim: &SimHandle, cluster: &str) -> Vec<Value> {
    let v: Value = reqwest::get(format!("{}/v1/{cluster}/nodePools", sim.base_url()))
        .await
        .expect("list node pools")
        .json()
        .await
        .expect("node pools JSON");
    v["nodePools"].as_array().cloned().unwrap_or_default()
}

/// Deletes a node pool through the simulator's GKE API and waits for the
/// operation.
pub async fn delete_pool(sim: &SimHandle, cluster: &str, pool: &str) {
    let r = reqwest::Client::new()
        .delete(format!("{}/v1/{cluster}/nodePools/{pool}", sim.base_url()))
        .send()
        .await
        .expect("delete node pool");
    let status = r.status();
    let op: Value = r.json().await.expect("operation JSON");
    assert!(status.is_success(), "delete node pool: {status} {op}");
    wait_operation(sim, cluster, &op).await;
}

/// The Nodes of pool `pool` (by GKE's `cloud.google.com/gke-nodepool` label).
pub async fn pool_nodes(client: &Client, pool: &str) -> Vec<Node> {
    Api::<Node>::all(client.clone())
        .list(&ListParams::default().labels(&format!("cloud.google.com/gke-nodepool={pool}")))
        .await
        .expect("list nodes")
        .items
}

/// Whether a Node is `Ready` and has lost the kubelet's
/// `node.kubernetes.io/not-ready` taint (the node-lifecycle controller
/// lifts it), so pods can be scheduled onto it.
pub fn schedulable_ready(n: &Node) -> bool {
    let ready = n
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
    let not_ready_taint = n
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|ts| ts.iter().any(|t| t.key.starts_with("node.kubernetes.io/")));
    ready && !not_ready_taint
}

/// Waits until pool `pool` has exactly `count` Nodes, all Ready and
/// schedulable; returns them.
pub async fn wait_pool_nodes(client: &Client, pool: &str, count: usize) -> Vec<Node> {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let nodes = pool_nodes(client, pool).await;
        if nodes.len() == count && nodes.iter().all(schedulable_ready) {
            return nodes;
        }
        if tokio::time::Instant::now() > deadline {
            let seen: Vec<_> = nodes
                .iter()
                .map(|n| {
                    (
                        n.metadata.name.clone(),
                        n.spec.as_ref().and_then(|s| s.taints.clone()),
                    )
                })
                .collect();
            panic!("pool {pool}: wanted {count} Ready Nodes within {WAIT:?}, have {seen:?}");
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Waits until pool `pool` has no Node left.
pub async fn wait_pool_nodes_gone(client: &Client, pool: &str) {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let nodes = pool_nodes(client, pool).await;
        if nodes.is_empty() {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "pool {pool}: Nodes still there after {WAIT:?}: {:?}",
            nodes
                .iter()
                .map(|n| n.metadata.name.clone())
                .collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// A pod for a TPU slice as JobSet workloads write it: the accelerator and
/// topology node selectors, a toleration of the TPU taint, `chips`
/// `google.com/tpu` requested (and limited), `restartPolicy: Never`; and
/// pinned to node pool `pool` (`cloud.google.com/gke-nodepool`), because
/// the control plane is shared: other tests' Nodes of the same accelerator
/// and topology (some already gone with their simulator, not yet marked
/// NotReady) would match the TPU selectors alone.
pub fn tpu_pod(name: &str, pool: &str, accelerator: &str, topology: &str, chips: u32) -> Pod {
    let tpu = BTreeMap::from([("google.com/tpu".to_string(), Quantity(chips.to_string()))]);
    Pod {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            restart_policy: Some("Never".into()),
            node_selector: Some(BTreeMap::from([
                (
                    "cloud.google.com/gke-nodepool".to_string(),
                    pool.to_string(),
                ),
                (
                    "cloud.google.com/gke-tpu-accelerator".to_string(),
                    accelerator.to_string(),
                ),
                (
                    "cloud.google.com/gke-tpu-topology".to_string(),
                    topology.to_string(),
                ),
            ])),
            tolerations: Some(vec![Toleration {
                key: Some("google.com/tpu".into()),
                operator: Some("Exists".into()),
                effect: Some("NoSchedule".into()),
                ..Toleration::default()
            }]),
            containers: vec![Container {
                name: "train".into(),
                // Never pulled: the hollow kubelet's runtime is fake.
                image: Some("registry.invalid/train:1".into()),
                resources: Some(ResourceRequirements {
                    requests: Some(tpu.clone()),
                    limits: Some(tpu),
                    ..ResourceRequirements::default()
                }),
                ..Container::default()
            }],
            ..PodSpec::default()
        }),
        ..Pod::default()
    }
}

/// Creates `pod` in `ns`.
pub async fn submit(client: &Client, ns: &str, pod: &Pod) -> Pod {
    Api::<Pod>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), pod)
        .await
        .expect("create pod")
}

async fn wait_pod(
    client: &Client,
    ns: &str,
    name: &str,
    what: &str,
    ok: impl Fn(&Pod) -> bool,
) -> Pod {
    let api = Api::<Pod>::namespaced(client.clone(), ns);
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let pod = api.get(name).await.expect("get pod");
        if ok(&pod) {
            return pod;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "pod {ns}/{name} not {what} after {WAIT:?}: {:?}",
            pod.status
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

fn phase(p: &Pod) -> Option<&str> {
    p.status.as_ref().and_then(|s| s.phase.as_deref())
}

/// Waits until the pod is Running; returns it (its `spec.nodeName` set).
pub async fn wait_running(client: &Client, ns: &str, name: &str) -> Pod {
    wait_pod(client, ns, name, "Running", |p| phase(p) == Some("Running")).await
}

/// Waits until the scheduler reports the pod Unschedulable; returns the
/// `PodScheduled` condition's message.
pub async fn wait_unschedulable(client: &Client, ns: &str, name: &str) -> String {
    let pod = wait_pod(client, ns, name, "Unschedulable", |p| {
        scheduled_condition(p).is_some_and(|c| c.reason.as_deref() == Some("Unschedulable"))
    })
    .await;
    scheduled_condition(&pod)
        .and_then(|c| c.message.clone())
        .unwrap_or_default()
}

fn scheduled_condition(p: &Pod) -> Option<&k8s_openapi::api::core::v1::PodCondition> {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "PodScheduled"))
}

/// Ends a running pod as Failed: sets `activeDeadlineSeconds: 1` (a pod's
/// deadline may be set or lowered while it runs) and the real kubelet fails
/// it with reason `DeadlineExceeded`. Returns the ended pod.
pub async fn fail_pod(client: &Client, ns: &str, name: &str) -> Pod {
    Api::<Pod>::namespaced(client.clone(), ns)
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"activeDeadlineSeconds": 1}})),
        )
        .await
        .expect("set activeDeadlineSeconds");
    wait_pod(client, ns, name, "Failed", |p| phase(p) == Some("Failed")).await
}

/// Ends a running pod as Succeeded: holds it with [`HOLD_FINALIZER`] and
/// deletes it; the real kubelet stops its containers (the fake runtime
/// reports exit code 0) and sets the phase `Succeeded` before the object
/// goes. The pod stays, terminal and terminating, until [`release_pod`].
///
/// The finalizer is added beside the pod's others (a strategic merge:
/// `metadata.finalizers` merges), so a Job's pod keeps the Job controller's
/// `batch.kubernetes.io/job-tracking` and is counted. A Job counts a pod
/// deleted before it is terminal as failed unless its
/// `podReplacementPolicy` is `Failed` (`pkg/controller/job` `isPodFailed`).
pub async fn succeed_pod(client: &Client, ns: &str, name: &str) -> Pod {
    let api = Api::<Pod>::namespaced(client.clone(), ns);
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Strategic(json!({"metadata": {"finalizers": [HOLD_FINALIZER]}})),
    )
    .await
    .expect("add the hold finalizer");
    api.delete(name, &DeleteParams::default())
        .await
        .expect("delete pod");
    wait_pod(client, ns, name, "Succeeded", |p| {
        phase(p) == Some("Succeeded")
    })
    .await
}

/// Removes [`HOLD_FINALIZER`] (only it): a pod [`succeed_pod`] ended goes
/// away once the pod's other finalizers are gone too.
pub async fn release_pod(client: &Client, ns: &str, name: &str) {
    Api::<Pod>::namespaced(client.clone(), ns)
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Strategic(
                json!({"metadata": {"$deleteFromPrimitiveList/finalizers": [HOLD_FINALIZER]}}),
            ),
        )
        .await
        .expect("remove the hold finalizer");
}

/// Whether a process runs whose command line holds `--name=NODE` (a
/// hollow node of that name).
pub fn hollow_process_running(node: &str) -> bool {
    let needle = format!("--name={node}");
    std::fs::read_dir("/proc")
        .map(|entries| {
            entries.filter_map(Result::ok).any(|e| {
                std::fs::read(e.path().join("cmdline"))
                    .is_ok_and(|c| c.split(|b| *b == 0).any(|arg| arg == needle.as_bytes()))
            })
        })
        .unwrap_or(false)
}
