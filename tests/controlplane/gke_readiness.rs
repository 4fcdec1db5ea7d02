//! Readiness of a GKE slice from its Nodes on a real API server: the
//! simulator plays GKE (the node pool), the real test control plane plays
//! the cluster's Kubernetes API, reached through the Target's
//! `gke.kubeApi.kubeconfig`. The Nodes are created here as GKE's kubelets
//! would register them (labels, `google.com/tpu`, the Ready condition); no
//! node-lifecycle controller runs, so their conditions stay as written.
//!
//! - `status` reads `R/H ready` from the Nodes, and says why a replica is
//!   not ready (Nodes missing, NotReady, a missing label, wrong allocatable);
//! - the SliceStatus `Ready` condition follows readiness, not the pool's
//!   RUNNING state.

use crate::common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use common::k8s::{client, kubeconfig};
use common::status::Quiet;
use k8s_openapi::api::core::v1::{Node, NodeCondition, NodeStatus};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DeleteParams, PostParams};
use slicectl::apply::ApplyOptions;
use slicectl::cloud::{Cloud, CloudClient};
use slicectl::engine::{Approval, ReconcileOptions, reconcile};
use slicectl::kube::{GkeLink, KubeClients};
use slicectl::plan::{PlanMode, PlanOptions};
use slicectl::resource::ClusterRef;
use slicectl::spec::{Fleet, SourceFile};
use slicectl::status_object::{Cycle, CycleResult, derive};

fn fleet(slice: &str) -> Fleet {
    let kc = kubeconfig();
    slicectl::spec::load(&[SourceFile {
        path: "f.yaml".into(),
        text: format!(
            "apiVersion: slicectl.dev/v1alpha1
kind: Target
metadata: {{name: train}}
spec:
  project: example-project
  zone: us-central1-b
  ownerId: rdy
  gke:
    location: us-central1
    name: train
    kubeApi: {{kubeconfig: {kc:?}}}
---
apiVersion: slicectl.dev/v1alpha1
kind: Slice
metadata: {{name: {slice}}}
spec: {{target: train, backend: gke, accelerator: tpu-v6e-slice, topology: 2x4, machineType: ct6e-standard-4t}}
",
            kc = kc.display().to_string()
        ),
    }])
    .expect("fleet")
}

fn cloud(sim: &slicectl_sim::SimHandle, f: &Fleet) -> Cloud {
    let client = CloudClient::new(slicectl::cloud::ClientOptions {
        api_endpoint: Some(sim.base_url()),
        poll: slicectl::cloud::PollPolicy::fast_for_tests(),
        ..Default::default()
    })
    .expect("client");
    let t = f.targets.get("train").expect("target");
    let g = t.spec.gke.as_ref().expect("gke");
    let kube = KubeClients::new([]).with_gke(
        [(
            ClusterRef {
                project: t.spec.project.clone(),
                location: g.location.clone(),
                name: g.name.clone(),
            },
            g.kube_api.access(),
            None,
        )],
        GkeLink::new(Arc::new(client.clone()), client.token_source()),
    );
    Cloud::from(client).with_kube(Arc::new(kube))
}

fn node(name: &str, pool: &str, ready: bool, topology: Option<&str>, chips: &str) -> Node {
    let mut labels = BTreeMap::from([
        (
            "cloud.google.com/gke-nodepool".to_string(),
            pool.to_string(),
        ),
        (
            "cloud.google.com/gke-tpu-accelerator".to_string(),
            "tpu-v6e-slice".to_string(),
        ),
    ]);
    if let Some(t) = topology {
        labels.insert("cloud.google.com/gke-tpu-topology".into(), t.into());
    }
    let tpu = BTreeMap::from([("google.com/tpu".to_string(), Quantity(chips.into()))]);
    Node {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some(labels),
            ..ObjectMeta::default()
        },
        // Nodes allow every field, status included, to be set on create.
        status: Some(NodeStatus {
            conditions: Some(vec![NodeCondition {
                type_: "Ready".into(),
                status: if ready { "True" } else { "False" }.into(),
                reason: Some("KubeletReady".into()),
                ..NodeCondition::default()
            }]),
            capacity: Some(tpu.clone()),
            allocatable: Some(tpu),
            ..NodeStatus::default()
        }),
        ..Node::default()
    }
}

async fn cycle(
    f: &Fleet,
    c: &Cloud,
) -> (
    Vec<slicectl::status::Row>,
    slicectl::status_object::StatusSet,
) {
    let opts = ReconcileOptions {
        mode: PlanMode::Apply,
        plan: PlanOptions::default(),
        apply: ApplyOptions::default(),
    };
    let report = reconcile(f, c, &opts, |_| Approval::Auto, Arc::new(Quiet))
        .await
        .expect("reconcile");
    let set = derive(&Cycle {
        fleet: f,
        result: CycleResult::Report(&report),
        invalid: &BTreeMap::new(),
        unavailable_since: &BTreeMap::new(),
        stall_after: Duration::from_secs(1800),
        now: jiff::Timestamp::now(),
        existing: &BTreeMap::new(),
    });
    (report.status, set)
}

fn ready_condition(set: &slicectl::status_object::StatusSet) -> (String, String, String) {
    let o = set.objects.first().expect("one object");
    let c = o
        .status
        .conditions
        .iter()
        .find(|c| c.type_ == "Ready")
        .expect("Ready");
    (c.status.clone(), c.reason.clone(), c.message.clone())
}

#[tokio::test(flavor = "multi_thread")]
async fn gke_readiness_follows_the_nodes_on_the_real_api_server() {
    let admin = client().await;
    let nodes = Api::<Node>::all(admin.clone());
    let sim = common::sim(
        Duration::from_millis(5),
        7,
        slicectl_sim::FaultConfig::default(),
    )
    .await;
    let slice = format!("rdy{}", std::process::id());
    let f = fleet(&slice);
    let c = cloud(&sim, &f);

    // The pool is created and RUNNING, but no Node is there: not ready.
    let (rows, set) = cycle(&f, &c).await;
    let pools = common::pool_names(&sim).await;
    assert_eq!(pools.len(), 1, "{pools:?}");
    let pool = pools[0].clone();
    let row = &rows[0];
    assert_eq!(row.state, "RUNNING", "{row:?}");
    assert_eq!(row.nodes, "0/2 ready", "{row:?}");
    assert!(
        row.last_error.contains("2 of 2 node(s) not registered"),
        "{row:?}"
    );
    let (status, reason, _) = ready_condition(&set);
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "Provisioning")
    );

    // One Ready node, one NotReady without its topology label and with the
    // wrong chips.
    let (a, b) = (format!("{slice}-a"), format!("{slice}-b"));
    let pp = PostParams::default();
    nodes
        .create(&pp, &node(&a, &pool, true, Some("2x4"), "4"))
        .await
        .expect("create node a");
    nodes
        .create(&pp, &node(&b, &pool, false, None, "1"))
        .await
        .expect("create node b");
    let (rows, set) = cycle(&f, &c).await;
    let row = &rows[0];
    assert_eq!(row.nodes, "1/2 ready", "{row:?}");
    for why in [
        "not Ready",
        "no label cloud.google.com/gke-tpu-topology",
        "google.com/tpu allocatable 1, want 4",
    ] {
        assert!(row.last_error.contains(why), "{why}: {row:?}");
    }
    assert!(row.last_error.contains(&b), "{row:?}");
    let (status, reason, message) = ready_condition(&set);
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "Provisioning")
    );
    assert!(message.contains("1/2 ready"), "{message}");

    // Node b as GKE would have it once its kubelet and device plugin are up.
    nodes
        .delete(&b, &DeleteParams::default())
        .await
        .expect("delete node b");
    nodes
        .create(&pp, &node(&b, &pool, true, Some("2x4"), "4"))
        .await
        .expect("create node b again");
    let (rows, set) = cycle(&f, &c).await;
    let row = &rows[0];
    assert_eq!(
        (row.nodes.as_str(), row.last_error.as_str()),
        ("2/2 ready", ""),
        "{row:?}"
    );
    let (status, reason, _) = ready_condition(&set);
    assert_eq!((status.as_str(), reason.as_str()), ("True", "Converged"));

    for n in [&a, &b] {
        let _ = nodes.delete(n, &DeleteParams::default()).await;
    }
}

/// The default `endpoint` access with no Google credentials (a simulator
/// on loopback): the Kubernetes side is deferred and says so, and the
/// SliceStatus says readiness is unknown rather than claim it.
#[tokio::test(flavor = "multi_thread")]
async fn without_a_google_token_readiness_is_deferred_and_unknown() {
    let sim = common::sim(
        Duration::from_millis(5),
        8,
        slicectl_sim::FaultConfig::default(),
    )
    .await;
    let mut f = fleet(&format!("unk{}", std::process::id()));
    if let Some(t) = f.targets.get_mut("train")
        && let Some(g) = t.spec.gke.as_mut()
    {
        g.kube_api = Default::default();
    }
    let c = cloud(&sim, &f);
    let (rows, set) = cycle(&f, &c).await;
    let row = &rows[0];
    assert_eq!(row.nodes, "?/2", "{row:?}");
    assert!(
        row.nodes_unobserved.contains("no Google credentials"),
        "{row:?}"
    );
    assert!(row.last_error.contains("readiness unknown"), "{row:?}");
    let o = set.objects.first().expect("object");
    let ready = o
        .status
        .conditions
        .iter()
        .find(|c| c.type_ == "Ready")
        .expect("Ready");
    assert_eq!(ready.status, "Unknown", "{:?}", o.status.conditions);
    assert_eq!(ready.reason, "NodesNotObserved");
    assert!(
        o.status
            .conditions
            .iter()
            .any(|c| c.type_ == "Reconciling" && c.status == "True"),
        "{:?}",
        o.status.conditions
    );
}
