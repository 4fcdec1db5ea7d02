#![cfg(test)]
//! The bootstrap drive on the recording fakes of the cloud and Kubernetes
//! seams: what it writes, how often, and how it fails.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use crate::apply::KindExec;
use crate::apply::schedule::Scheduler;
use crate::apply::{StepOp, StepOutcome};
use crate::cloud::Cloud;
use crate::cloud::fake::{FakeCloud, Fault};
use crate::kinds::gce::nodes::{self, Nodes};
use crate::kube::fake::FakeKube;
use crate::kube::{BootstrapToken, KubeService};
use crate::plan::{self, Action, Inventory, PlanOptions};
use crate::resource::{KubeRef, ZoneRef};
use crate::spec::{Fleet, SourceFile};

const SPECS: &str = r#"apiVersion: slicectl.dev/v1alpha1
kind: Target
metadata: {name: k}
spec:
  project: proj-one
  zone: us-central1-b
  ownerId: o
  gce:
    controlPlaneEndpoint: "10.0.0.2:6443"
    kubeApi: {kubeconfig: /nonexistent}
---
apiVersion: slicectl.dev/v1alpha1
kind: Slice
metadata: {name: s}
spec:
  target: k
  backend: gce
  accelerator: tpu-v6e-slice
  topology: "2x4"
  machineType: ct6e-standard-4t
  lifecycle: {operationTimeout: 1m}
  gce:
    image: projects/ubuntu-os-accelerator-images/global/images/img
    bootstrap: {kubeadm: {kubernetesVersion: "1.36"}}
"#;

fn zone() -> ZoneRef {
    ZoneRef {
        project: "proj-one".into(),
        zone: "us-central1-b".into(),
    }
}

fn kref() -> KubeRef {
    KubeRef {
        endpoint: "10.0.0.2:6443".into(),
    }
}

struct World {
    fake: Arc<FakeCloud>,
    kube: Arc<FakeKube>,
    cloud: Cloud,
    nodes_action: Action,
}

/// A fake world where the slice's MIG and its 2 RUNNING VMs exist, and the
/// planned `nodes` action that drives them.
async fn world(stockout: bool) -> World {
    world_of(SPECS, stockout).await
}

/// [`world`] of other specs.
async fn world_of(specs: &str, stockout: bool) -> World {
    let fleet: Fleet = crate::spec::load(&[SourceFile {
        path: "specs/s.yaml".into(),
        text: specs.into(),
    }])
    .unwrap_or_else(|d| panic!("{d:?}"));
    let kinds = crate::kinds::plan_kinds();
    let p = plan::plan(
        &fleet,
        &Inventory::default(),
        &kinds,
        &PlanOptions::default(),
    )
    .unwrap();
    let fake = FakeCloud::new();
    let kube = FakeKube::new();
    let cloud = fake.cloud().with_kube(kube.clone());
    let mig = p
        .actions
        .iter()
        .find(|a| a.id.kind == crate::kinds::gce::mig::KIND)
        .unwrap();
    if stockout {
        fake.fail_next("insert_instance_group_manager", Fault::Stockout);
    }
    let body = mig
        .desired
        .as_ref()
        .and_then(crate::plan::kind::body_as)
        .unwrap();
    let op = cloud
        .compute
        .insert_instance_group_manager(&zone(), body)
        .await
        .unwrap();
    cloud
        .compute
        .wait_operation(&op, Duration::from_secs(5))
        .await
        .unwrap();
    let nodes_action = p
        .actions
        .iter()
        .find(|a| a.id.kind == nodes::KIND)
        .unwrap()
        .clone();
    World {
        fake,
        kube,
        cloud,
        nodes_action,
    }
}

/// Joins each VM whose metadata holds a token, as its kubelet would.
fn joiner(fake: Arc<FakeCloud>, kube: Arc<FakeKube>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            for vm in fake.instances(&zone()) {
                if vm.metadata.get("kubeadm-join-token").is_some()
                    && kube.node(&kref(), &vm.name).is_none()
                {
                    kube.join_node(
                        &kref(),
                        &vm.name,
                        &format!("gce://proj-one/us-central1-b/{}", vm.name),
                        4,
                    );
                }
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
}

/// Every VM reports it joined, as one does after `kubeadm join` (its Node
/// since deleted): their names.
fn joined_before(w: &World) -> Vec<String> {
    let vms: Vec<String> = w
        .fake
        .instances(&zone())
        .into_iter()
        .map(|v| v.name)
        .collect();
    for vm in &vms {
        w.fake
            .set_guest_attribute(&zone(), vm, "slicectl/bootstrap", "joined");
    }
    vms
}

async fn run(w: &World, op: StepOp) -> Result<StepOutcome, crate::apply::ApplyError> {
    Nodes
        .execute(&w.cloud, &Scheduler::new(4), &w.nodes_action, op)
        .await
}

#[tokio::test]
async fn hands_the_token_to_each_vm_once_removes_it_after_the_join_and_deletes_the_secret() {
    let w = world(false).await;
    assert_eq!(w.fake.instances(&zone()).len(), 2);
    let j = joiner(w.fake.clone(), w.kube.clone());
    let out = run(&w, StepOp::Create).await;
    j.abort();
    assert!(matches!(out, Ok(StepOutcome::Done)), "{out:?}");
    // Two writes per VM: the join values in, the token out.
    assert_eq!(w.fake.calls_of("set_instance_metadata").len(), 4);
    assert_eq!(w.kube.calls_of("create_bootstrap_token").len(), 1);
    for vm in w.fake.instances(&zone()) {
        assert!(vm.metadata.get("kubeadm-join-token").is_none(), "{vm:?}");
        assert_eq!(
            vm.metadata.get("kubeadm-api-endpoint"),
            Some("10.0.0.2:6443")
        );
        assert!(
            vm.metadata
                .get("kubeadm-ca-hash")
                .is_some_and(|h| h.starts_with("sha256:"))
        );
        // The Node is labelled with the TPU labels and its generation.
        let n = w.kube.node(&kref(), &vm.name).unwrap();
        let l = n.metadata.labels.unwrap();
        assert_eq!(l["cloud.google.com/gke-tpu-accelerator"], "tpu-v6e-slice");
        assert_eq!(l["cloud.google.com/gke-accelerator-count"], "4");
        assert!(l.contains_key("slicectl.dev/spec-hash"));
    }
    assert!(
        w.kube.tokens(&kref()).is_empty(),
        "the Secret is deleted once all joined"
    );

    // Steady state: nothing written, in the cloud or the cluster.
    let before = w.fake.calls_of("set_instance_metadata").len();
    w.kube.clear_calls();
    let out = run(&w, StepOp::Update).await;
    assert!(matches!(out, Ok(StepOutcome::Done)), "{out:?}");
    assert_eq!(w.fake.calls_of("set_instance_metadata").len(), before);
    assert!(w.kube.writes().is_empty(), "{:?}", w.kube.writes());
}

#[tokio::test]
async fn a_valid_token_is_reused_never_a_second_one() {
    let w = world(false).await;
    let labels = BTreeMap::from([
        (
            "slicectl.dev/managed-by".to_string(),
            "slicectl".to_string(),
        ),
        ("slicectl.dev/owner".to_string(), "o".to_string()),
        ("slicectl.dev/slice".to_string(), "s".to_string()),
        ("slicectl.dev/replica".to_string(), "0".to_string()),
    ]);
    let token = BootstrapToken::generate();
    let expires = jiff::Timestamp::now() + jiff::SignedDuration::from_mins(50);
    w.kube.seed_token(&kref(), &token, expires, &labels);
    let j = joiner(w.fake.clone(), w.kube.clone());
    let out = run(&w, StepOp::Create).await;
    j.abort();
    assert!(matches!(out, Ok(StepOutcome::Done)), "{out:?}");
    assert!(w.kube.calls_of("create_bootstrap_token").is_empty());
    // A token with less than 10 minutes left is not reused.
    let w = world(false).await;
    let old = jiff::Timestamp::now() + jiff::SignedDuration::from_mins(5);
    w.kube
        .seed_token(&kref(), &BootstrapToken::generate(), old, &labels);
    let j = joiner(w.fake.clone(), w.kube.clone());
    let out = run(&w, StepOp::Create).await;
    j.abort();
    assert!(matches!(out, Ok(StepOutcome::Done)), "{out:?}");
    assert_eq!(w.kube.calls_of("create_bootstrap_token").len(), 1);
}

#[tokio::test]
async fn a_vm_that_gave_up_fails_the_step_with_its_reason_and_no_token() {
    let w = world(false).await;
    for vm in w.fake.instances(&zone()) {
        w.fake.set_guest_attribute(
            &zone(),
            &vm.name,
            "slicectl/bootstrap",
            "failed: CA hash mismatch: the cluster CA in cluster-info does not match kubeadm-ca-hash (attempt 5/5)",
        );
    }
    let started = std::time::Instant::now();
    let err = run(&w, StepOp::Create).await.unwrap_err();
    assert_eq!(err.code(), "bootstrap_failed");
    let msg = err.to_string();
    assert!(msg.contains("CA hash mismatch"), "{msg}");
    assert!(started.elapsed() < Duration::from_secs(5), "failed at once");
    for t in w.kube.tokens(&kref()) {
        let secret = t.token.unwrap().expose();
        assert!(!msg.contains(secret.split('.').nth(1).unwrap()), "{msg}");
    }
}

#[tokio::test]
async fn a_vm_that_joined_and_lost_its_node_fails_the_step_with_the_fix() {
    // Both VMs joined once (slicectl removed their tokens), then their
    // Nodes were deleted: no token makes a kubelet register again, so the
    // step says so at once instead of waiting for its timeout.
    let w = world(false).await;
    let vms = joined_before(&w);
    let started = std::time::Instant::now();
    let err = run(&w, StepOp::Create).await.unwrap_err();
    assert_eq!(err.code(), "node_lost", "{err}");
    let msg = err.to_string();
    for vm in &vms {
        assert!(msg.contains(vm.as_str()), "{msg}");
    }
    assert!(
        msg.contains("gcloud compute instance-groups managed recreate-instances"),
        "{msg}"
    );
    assert!(started.elapsed() < Duration::from_secs(5), "failed at once");
    assert!(
        w.fake.calls_of("set_instance_metadata").is_empty(),
        "no token is handed to a VM that joined already"
    );
}

#[tokio::test]
async fn a_planned_recreate_makes_vms_that_lost_their_node_again_and_they_join() {
    // The plan offered the fix (reason node_lost): the step recreates the
    // VMs through the MIG once, and they join like new ones.
    let mut w = world(false).await;
    w.nodes_action.groups.insert(nodes::GROUP_RECREATE_LOST);
    let vms = joined_before(&w);
    let j = joiner(w.fake.clone(), w.kube.clone());
    let out = run(&w, StepOp::Create).await;
    j.abort();
    assert!(matches!(out, Ok(StepOutcome::Done)), "{out:?}");
    let recreated = w.fake.calls_of("recreate_instances");
    assert_eq!(recreated.len(), 1, "{recreated:?}");
    for vm in &vms {
        assert!(recreated[0].contains(vm.as_str()), "{recreated:?}");
        assert!(w.kube.node(&kref(), vm).is_some(), "{vm} joined again");
    }
}

#[tokio::test]
async fn a_bulk_stockout_fails_the_step_as_a_stockout() {
    let w = world(true).await;
    assert!(w.fake.instances(&zone()).is_empty(), "BULK: no VM at all");
    let err = run(&w, StepOp::Create).await.unwrap_err();
    assert_eq!(err.code(), "stockout", "{err}");
    assert!(w.kube.calls_of("create_bootstrap_token").is_empty());
    assert!(w.fake.calls_of("set_instance_metadata").is_empty());
}

/// [`SPECS`] on flex-start capacity: a BULK MIG.
fn flex_start_specs() -> String {
    SPECS.replace(
        "  lifecycle: {operationTimeout: 1m}",
        "  lifecycle: {operationTimeout: 1m}\n  capacity: {type: flex-start, maxRunDuration: 24h}",
    )
}

#[tokio::test]
async fn a_bulk_stockout_is_read_from_the_migs_bulk_operation() {
    let w = world_of(&flex_start_specs(), true).await;
    let managed = w
        .cloud
        .compute
        .list_managed_instances(&zone(), "s-0")
        .await
        .unwrap();
    assert_eq!(
        managed.len(),
        2,
        "BULK lists its managed instances, CREATING"
    );
    assert!(
        managed.iter().all(|m| m.last_attempt.is_none()),
        "BULK says why in its own status, not per VM: {managed:?}"
    );
    let err = run(&w, StepOp::Create).await.unwrap_err();
    assert_eq!(err.code(), "stockout", "{err}");
    assert!(
        err.to_string().contains("ZONE_RESOURCE_POOL_EXHAUSTED"),
        "{err}"
    );
    assert!(!w.fake.calls_of("get_instance_group_manager").is_empty());
    assert!(w.kube.calls_of("create_bootstrap_token").is_empty());
}

#[tokio::test]
async fn a_stockout_reported_only_in_list_errors_fails_the_step_at_once() {
    let w = world_of(&flex_start_specs(), true).await;
    w.fake.stockout_only_in_list_errors(&zone(), "s-0");
    let start = std::time::Instant::now();
    let err = run(&w, StepOp::Create).await.unwrap_err();
    assert_eq!(err.code(), "stockout", "{err}");
    assert!(
        err.to_string().contains("ZONE_RESOURCE_POOL_EXHAUSTED"),
        "{err}"
    );
    assert!(
        start.elapsed() < Duration::from_secs(10),
        "not left waiting until the step's timeout"
    );
    assert!(!w.fake.calls_of("list_mig_errors").is_empty());
}

#[tokio::test]
async fn cordon_before_the_vms_go_and_clean_up_after() {
    let w = world(false).await;
    let j = joiner(w.fake.clone(), w.kube.clone());
    run(&w, StepOp::Create).await.unwrap();
    j.abort();
    // Plan the teardown from what is live now.
    let nodes = w.kube.nodes(&kref()).await.unwrap();
    let tokens = w.kube.bootstrap_tokens(&kref(), "").await.unwrap();
    let live = super::group(&nodes, &tokens);
    assert_eq!(live.len(), 1);
    let mut del = w.nodes_action.clone();
    del.action = crate::plan::ActionKind::Delete;
    del.before = Some(serde_json::to_value(&live[0]).unwrap());
    let out = Nodes
        .execute(&w.cloud, &Scheduler::new(4), &del, StepOp::Delete)
        .await;
    assert!(out.is_ok(), "{out:?}");
    for n in w.kube.nodes(&kref()).await.unwrap() {
        assert!(crate::kube::is_cordoned(&n), "{n:?}");
    }
    let out = Nodes
        .execute(&w.cloud, &Scheduler::new(4), &del, StepOp::Cleanup)
        .await;
    assert!(out.is_ok(), "{out:?}");
    assert!(w.kube.node_names(&kref()).is_empty());
}

#[test]
fn kubelet_version_skew() {
    use super::skew_problem;
    assert_eq!(skew_problem("1.36", (1, 36)), None);
    assert_eq!(skew_problem("1.33", (1, 36)), None);
    let newer = skew_problem("1.37", (1, 36)).unwrap();
    assert!(
        newer.contains("never newer") && newer.contains("1.33 … 1.36"),
        "{newer}"
    );
    assert!(skew_problem("1.32", (1, 36)).is_some());
}
