//! End to end: changes that respect running workloads, on the GCE backend,
//! whose Nodes are real Nodes of the REAL test control plane. Pods are bound
//! to them by `spec.nodeName` (no scheduler needed) and marked Running
//! through the status subresource (the Eviction API ignores budgets for
//! Pending pods); a real PodDisruptionBudget and the real Eviction API
//! decide. No kubelet runs these pods, so the test plays its part and
//! removes an evicted pod once the API server marked it deleted. Needs
//! `SLICECTL_TEST_KUBECONFIG`; fails loudly without it.

use crate::common;

use std::time::Duration;

use common::*;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;
use slicectl_sim::FaultConfig;

use super::e2e_gce::{SERIAL, gce_apply, gce_dir, gce_slice, get, kube_client, names, nodes_of};

const DRAINING_SINCE: &str = "slicectl.dev/draining-since";

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

fn label(n: &Node, key: &str) -> Option<String> {
    n.metadata.labels.as_ref().and_then(|l| l.get(key).cloned())
}

#[tokio::test(flavor = "multi_thread")]
async fn busy_gce_slices_are_held_drained_through_pdbs_and_resume_after_sigkill() {
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

    // 2. Drain with a real PodDisruptionBudget that allows nothing. The drain
    // started an hour ago (as a killed run would have left it on the Node):
    // its deadline is over, slicectl asks once more, is refused (429) and holds.
    let drain = gce_slice(
        slice,
        "2x2",
        "  disruption:\n    whenBusy: drain\n    drainTimeout: 1m\n",
    );
    std::fs::write(dir.path().join("s.yaml"), drain).unwrap();
    let pdbs = Api::<PodDisruptionBudget>::namespaced(client.clone(), &ns);
    let pdb: PodDisruptionBudget = serde_json::from_value(json!({
        "metadata": {"name": "train"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "train"}}}
    }))
    .unwrap();
    pdbs.create(&PostParams::default(), &pdb).await.unwrap();
    let an_hour_ago = (jiff::Timestamp::now() - jiff::SignedDuration::from_hours(1)).as_second();
    let nodes_api = Api::<Node>::all(client.clone());
    nodes_api
        .patch(
            &node,
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"labels": {DRAINING_SINCE: an_hour_ago.to_string()}}}),
            ),
        )
        .await
        .unwrap();
    let o = slicectl(
        &sim,
        &["destroy", dir.path().to_str().unwrap(), "--auto-approve"],
    )
    .await;
    let out = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(out.contains("failed [pdb]"), "{out}");
    assert!(out.contains("Nothing was destroyed"), "{out}");
    assert_eq!(migs(&sim).await, vec![format!("{slice}-0")], "{out}");
    let n = nodes_api.get(&node).await.unwrap();
    assert_eq!(
        n.spec.as_ref().and_then(|s| s.unschedulable),
        Some(true),
        "cordoned"
    );
    assert_eq!(
        label(&n, DRAINING_SINCE),
        Some(an_hour_ago.to_string()),
        "the deadline is kept"
    );
    let pods = Api::<Pod>::namespaced(client.clone(), &ns);
    assert!(
        pods.get_opt("train-0").await.unwrap().is_some(),
        "never forced"
    );

    // 3. SIGKILL mid-drain: a fresh drain (label removed) is killed while
    // the budget still refuses; the cordon and the drain's start survive in
    // the cluster.
    nodes_api
        .patch(
            &node,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {DRAINING_SINCE: null}}})),
        )
        .await
        .unwrap();
    let mut child = tokio::process::Command::new(bin())
        .args(["destroy", dir.path().to_str().unwrap(), "--auto-approve"])
        .env("SLICECTL_API_ENDPOINT", sim.base_url())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut since = None;
    for _ in 0..200 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        since = label(&nodes_api.get(&node).await.unwrap(), DRAINING_SINCE);
        if since.is_some() {
            break;
        }
    }
    let since = since.expect("the drain marks the Node");
    tokio::time::sleep(Duration::from_millis(500)).await;
    child.start_kill().unwrap(); // SIGKILL
    let _ = child.wait().await;
    let n = nodes_api.get(&node).await.unwrap();
    assert_eq!(n.spec.as_ref().and_then(|s| s.unschedulable), Some(true));
    assert_eq!(label(&n, DRAINING_SINCE), Some(since.clone()));
    assert_eq!(migs(&sim).await, vec![format!("{slice}-0")]);
    let o = slicectl(
        &sim,
        &["plan", dir.path().to_str().unwrap(), "--output", "json"],
    )
    .await;
    assert!(o.status.success(), "{}", text(&o));

    // 4. The budget allows it: the resumed drain evicts (the test plays the
    // kubelet), keeps the first run's start, and the slice is destroyed.
    pdbs.delete("train", &DeleteParams::default())
        .await
        .unwrap();
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
    assert!(out.contains("draining since"), "{out}");
    assert!(migs(&sim).await.is_empty(), "{out}");
    assert!(pods.get_opt("train-0").await.unwrap().is_none());
    assert!(nodes_of(&client, slice).await.is_empty());
    let _ = Api::<Namespace>::all(client.clone())
        .delete(&ns, &DeleteParams::default())
        .await;
}
