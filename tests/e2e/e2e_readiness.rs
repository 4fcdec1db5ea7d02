//! The CLI reads a GKE slice's readiness from its cluster's Nodes: the
//! simulator (`--api-endpoint`) plays GKE, the real test control plane plays
//! the cluster's Kubernetes API through the Target's `gke.kubeApi.kubeconfig`
//! (trusted with `--trust-kubeconfig`, as the operator's), and the test
//! registers the Nodes as GKE's kubelets would.

use crate::common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::k8s::{client, kubeconfig};
use k8s_openapi::api::core::v1::{Node, NodeCondition, NodeStatus};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::api::{Api, DeleteParams, PostParams};

fn node(name: &str, pool: &str, ready: bool) -> Node {
    let tpu = BTreeMap::from([("google.com/tpu".to_string(), Quantity("4".into()))]);
    let mut n = Node::default();
    n.metadata.name = Some(name.into());
    n.metadata.labels = Some(BTreeMap::from([
        (
            "cloud.google.com/gke-nodepool".to_string(),
            pool.to_string(),
        ),
        (
            "cloud.google.com/gke-tpu-accelerator".to_string(),
            "tpu-v6e-slice".to_string(),
        ),
        (
            "cloud.google.com/gke-tpu-topology".to_string(),
            "2x4".to_string(),
        ),
    ]));
    n.status = Some(NodeStatus {
        conditions: Some(vec![NodeCondition {
            type_: "Ready".into(),
            status: if ready { "True" } else { "False" }.into(),
            ..NodeCondition::default()
        }]),
        capacity: Some(tpu.clone()),
        allocatable: Some(tpu),
        ..NodeStatus::default()
    });
    n
}

async fn status_row(sim: &slicectl_sim::SimHandle, dir: &str, kc: &str) -> serde_json::Value {
    let o = common::slicectl(
        sim,
        &["status", dir, "-o", "json", "--trust-kubeconfig", kc],
    )
    .await;
    assert!(o.status.success(), "{}", common::text(&o));
    let rows: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    rows[0].clone()
}

#[tokio::test(flavor = "multi_thread")]
async fn status_reads_gke_readiness_from_the_real_nodes() {
    let admin = client().await;
    let nodes = Api::<Node>::all(admin);
    let sim = common::sim(
        Duration::from_millis(5),
        11,
        slicectl_sim::FaultConfig::default(),
    )
    .await;
    let kc = kubeconfig().display().to_string();
    let slice = format!("e2erdy{}", std::process::id());
    let target = common::TARGET.replace(
        "    name: train\n",
        &format!("    name: train\n    kubeApi: {{kubeconfig: {kc:?}}}\n"),
    );
    let dir = common::spec_dir(&[
        ("target.yaml", target),
        (
            "s.yaml",
            common::slice_yaml(
                &slice,
                "tpu-v6e-slice",
                "2x4",
                1,
                "  machineType: ct6e-standard-4t\n",
            ),
        ),
    ]);
    let d = dir.path().to_str().unwrap();
    let o = common::slicectl(
        &sim,
        &["apply", d, "--auto-approve", "--trust-kubeconfig", &kc],
    )
    .await;
    assert!(o.status.success(), "{}", common::text(&o));
    let pool = format!("{slice}-0");
    assert_eq!(common::pool_names(&sim).await, vec![pool.clone()]);

    let row = status_row(&sim, d, &kc).await;
    assert_eq!(row["nodes"], "0/2 ready", "{row}");
    assert!(
        row["last_error"]
            .as_str()
            .unwrap()
            .contains("2 of 2 node(s) not registered"),
        "{row}"
    );

    let (a, b) = (format!("{slice}-a"), format!("{slice}-b"));
    let pp = PostParams::default();
    nodes.create(&pp, &node(&a, &pool, true)).await.unwrap();
    nodes.create(&pp, &node(&b, &pool, false)).await.unwrap();
    let row = status_row(&sim, d, &kc).await;
    assert_eq!(row["nodes"], "1/2 ready", "{row}");
    assert!(
        row["last_error"]
            .as_str()
            .unwrap()
            .contains(&format!("node {b}: not Ready")),
        "{row}"
    );

    nodes.delete(&b, &DeleteParams::default()).await.unwrap();
    nodes.create(&pp, &node(&b, &pool, true)).await.unwrap();
    let row = status_row(&sim, d, &kc).await;
    assert_eq!(row["nodes"], "2/2 ready", "{row}");
    assert_eq!(row["last_error"], "", "{row}");

    for n in [&a, &b] {
        let _ = nodes.delete(n, &DeleteParams::default()).await;
    }
}
