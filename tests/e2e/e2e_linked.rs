//! slicectl's own GKE slices on a simulated cluster linked to the real test
//! control plane: the node pools `slicectl apply` creates register their
//! Nodes there (one hollow node per TPU host), a TPU pod the real scheduler
//! binds runs on them, and `slicectl destroy` takes them away.

use crate::common::*;
use crate::sim_gke_support::{
    client, link, pool_nodes, submit, tpu_pod, unique, wait_pool_nodes, wait_pool_nodes_gone,
    wait_running,
};

use std::time::Duration;

#[tokio::test(flavor = "multi_thread")]
async fn slicectl_slices_on_a_linked_cluster_get_nodes_that_run_pods() {
    let client = client().await;
    let sim = sim(Duration::from_millis(200), 3, Default::default()).await;
    link(&sim, CLUSTER).await;
    // The shared control plane sees every linked test's Nodes: a unique
    // slice name gives unique pool names.
    let slice = unique("lk");
    let dir = spec_dir(&[(
        "s.yaml",
        slice_yaml(&slice, "tpu-v5p-slice", "2x2x2", 1, ""),
    )]);
    let o = apply(&sim, dir.path()).await;
    assert!(o.status.success(), "{}", text(&o));
    let pools = pool_names(&sim).await;
    let [pool] = pools.as_slice() else {
        panic!("one pool: {pools:?}");
    };
    // v5p 2x2x2 (ct5p-hightpu-4t): 2 hosts of 4 chips.
    let nodes = wait_pool_nodes(&client, pool, 2).await;
    for n in &nodes {
        let l = n.metadata.labels.clone().unwrap_or_default();
        assert_eq!(l["cloud.google.com/gke-tpu-accelerator"], "tpu-v5p-slice");
        assert_eq!(l["cloud.google.com/gke-tpu-topology"], "2x2x2");
        let allocatable = n
            .status
            .as_ref()
            .and_then(|s| s.allocatable.clone())
            .unwrap_or_default();
        assert_eq!(allocatable["google.com/tpu"].0, "4");
    }
    let ns = k8s::namespace(&client, "linked").await;
    submit(
        &client,
        &ns,
        &tpu_pod("worker-0", pool, "tpu-v5p-slice", "2x2x2", 4),
    )
    .await;
    let pod = wait_running(&client, &ns, "worker-0").await;
    let node = pod.spec.and_then(|s| s.node_name).expect("bound");
    assert!(
        nodes
            .iter()
            .any(|n| n.metadata.name.as_deref() == Some(node.as_str())),
        "{node}"
    );

    let o = slicectl(
        &sim,
        &["destroy", dir.path().to_str().unwrap(), "--auto-approve"],
    )
    .await;
    assert!(o.status.success(), "{}", text(&o));
    wait_pool_nodes_gone(&client, pool).await;
    assert!(pool_nodes(&client, pool).await.is_empty());
    k8s::kubectl(&["delete", "namespace", &ns, "--wait=false"]);
    sim.shutdown().await;
}
