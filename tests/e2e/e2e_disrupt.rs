//! End to end: changes that respect running workloads on the GCE backend,
//! whose Nodes are real Nodes of the REAL test control plane: what only the
//! self-managed path has. `destroy` holds a busy slice's MIG (`busy`, the
//! pod named, `destroy --disrupt` offered), and with `whenBusy: drain` it
//! evicts through the real Eviction API before the MIG and its Nodes go.
//! Pods are bound by `spec.nodeName` (no scheduler needed) and marked
//! Running through the status subresource (the Eviction API ignores budgets
//! for Pending pods); no kubelet runs them, so the test removes an evicted
//! pod once the API server marked it deleted. PodDisruptionBudgets and a
//! drain killed with SIGKILL, with pods the real scheduler placed and a real
//! kubelet, are in `e2e_scheduled.rs`. Needs `SLICECTL_TEST_KUBECONFIG`;
//! fails loudly without it.

use crate::common;

use std::time::Duration;

use common::*;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;
use slicectl_sim::FaultConfig;

use super::e2e_gce::{SERIAL, gce_apply, gce_dir, gce_slice, get, kube_client, names, nodes_of};

async fn namespace(client: &kube::Client, name: &str) {
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
    let api = Api::<Namespace>::all(client.clone());
    let _ = api.create(&PostParams::default(), &ns).await;
}

/// A Running pod of JobSet `train` bound to `node`.
async fn running_pod(client: &kube::Client, ns: &str, name: &str, node: &str) {
    let api = Api::<Pod>::namespaced(client.clone(), ns);
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"app": "train", "jobset.sigs.k8s.io/jobset-name": "train"}},
        "spec": {
            "nodeName": node,
            "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}],
            "tolerations": [{"operator": "Exists"}]
        }
    }))
    .unwrap();
    api.create(&PostParams::default(), &pod).await.unwrap();
    let status = json!({"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}});
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
}

/// Plays the kubelet: a pod the API server marked deleted is removed.
async fn finish_terminating(client: &kube::Client, ns: &str) {
    let api = Api::<Pod>::namespaced(client.clone(), ns);
    for p in api.list(&Default::default()).await.unwrap().items {
        if p.metadata.deletion_timestamp.is_some() {
            let _ = api
                .delete(
                    p.metadata.name.as_deref().unwrap(),
                    &DeleteParams::default().grace_period(0),
                )
                .await;
        }
    }
}

async fn migs(sim: &slicectl_sim::SimHandle) -> Vec<String> {
    names(&get(sim, "zones/us-central1-b/instanceGroupManagers").await)
}

fn node_name(n: &Node) -> String {
    n.metadata.name.clone().unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_busy_gce_slice_is_held_then_drained_before_its_mig_goes() {
    let _serial = SERIAL.lock().await;
    let client = kube_client().await;
    let suffix = std::process::id();
    let ns = format!("e2e-disrupt-{suffix}");
    let slice = "gce-busy";
    namespace(&client, &ns).await;
    let sim = sim(Duration::from_millis(100), 11, FaultConfig::default()).await;
    // whenBusy: wait (the default).
    let dir = gce_dir("e2e-disrupt", &[("s.yaml", gce_slice(slice, "2x2", ""))]);
    let o = gce_apply(&sim, dir.path()).await;
    assert!(o.status.success(), "{}", text(&o));
    let nodes = nodes_of(&client, slice).await;
    assert_eq!(nodes.len(), 1, "{nodes:?}");
    let node = node_name(&nodes[0]);
    running_pod(&client, &ns, "train-0", &node).await;

    // 1. Held: destroy leaves the busy slice alone, names the pod, exits 0.
    let o = slicectl(
        &sim,
        &["destroy", dir.path().to_str().unwrap(), "--auto-approve"],
    )
    .await;
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    assert!(out.contains("held [busy]"), "{out}");
    assert!(
        out.contains(&format!("{ns}/train-0 (jobset {ns}/train)")),
        "{out}"
    );
    assert!(out.contains("destroy --disrupt"), "{out}");
    assert_eq!(migs(&sim).await, vec![format!("{slice}-0")]);
    let json_plan = slicectl(
        &sim,
        &["plan", dir.path().to_str().unwrap(), "--output", "json"],
    )
    .await;
    assert!(json_plan.status.success(), "{}", text(&json_plan));

    // 2. whenBusy: drain: destroy cordons the Node, evicts the pod through
    // the real Eviction API (the test plays the kubelet), and only then
    // deletes the MIG and the Node. (A PodDisruptionBudget that refuses, a
    // drain killed with SIGKILL and resumed: tests/e2e/e2e_scheduled.rs,
    // with pods the real scheduler placed and a real kubelet.)
    let drain = gce_slice(
        slice,
        "2x2",
        "  disruption:\n    whenBusy: drain\n    drainTimeout: 1m\n",
    );
    std::fs::write(dir.path().join("s.yaml"), drain).unwrap();
    let pods = Api::<Pod>::namespaced(client.clone(), &ns);
    let kubelet = {
        let client = client.clone();
        let ns = ns.clone();
        tokio::spawn(async move {
            loop {
                finish_terminating(&client, &ns).await;
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        })
    };
    let o = slicectl(
        &sim,
        &["destroy", dir.path().to_str().unwrap(), "--auto-approve"],
    )
    .await;
    kubelet.abort();
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    assert!(out.contains("drains first (whenBusy: drain)"), "{out}");
    assert!(migs(&sim).await.is_empty(), "{out}");
    assert!(pods.get_opt("train-0").await.unwrap().is_none());
    assert!(nodes_of(&client, slice).await.is_empty());
    let _ = Api::<Namespace>::all(client.clone())
        .delete(&ns, &DeleteParams::default())
        .await;
}
