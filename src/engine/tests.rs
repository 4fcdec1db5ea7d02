#![cfg(test)]
use super::*;
use crate::cloud::fake::{FakeCloud, Fault};
use crate::spec::SourceFile;

fn fleet() -> Fleet {
    let files = vec![SourceFile {
        path: "f.yaml".into(),
        text: "apiVersion: slicectl.dev/v1alpha1
kind: Target
metadata: {name: t}
spec: {project: unit-project, zone: us-central1-b, ownerId: unit, gke: {location: us-central1, name: c}}
---
apiVersion: slicectl.dev/v1alpha1
kind: Target
metadata: {name: t-c}
spec: {project: unit-project, zone: us-central1-c, ownerId: unit, gke: {location: us-central1, name: c}}
---
apiVersion: slicectl.dev/v1alpha1
kind: Slice
metadata: {name: a}
spec: {target: t, backend: gke, accelerator: tpu-v6e-slice, topology: 1x1, replicas: 2}
---
apiVersion: slicectl.dev/v1alpha1
kind: Slice
metadata: {name: iron}
spec: {target: t-c, backend: gke, accelerator: tpu7x, topology: 2x2x2, replicas: 1}
"
        .into(),
    }];
    crate::spec::load(&files).unwrap()
}

struct Quiet;
impl Progress for Quiet {
    fn started(&self, _: &str, _: &str) {}
    fn finished(&self, _: &str, _: &str, _: Result<(), &str>, _: std::time::Duration) {}
}

fn opts() -> ReconcileOptions {
    ReconcileOptions {
        mode: PlanMode::Apply,
        plan: PlanOptions::default(),
        apply: ApplyOptions::default(),
    }
}

#[tokio::test]
async fn a_plan_edit_holds_one_slice_back_and_the_others_converge() {
    let fake = FakeCloud::new();
    let f = fleet();
    let held: std::collections::BTreeSet<String> = ["iron".to_string()].into();
    let mut left_out = Vec::new();
    let r = reconcile_with(
        &f,
        &fake.cloud(),
        &opts(),
        |p| left_out = crate::controller::hold_actions(p, &held),
        |p| {
            assert!(p.actions.iter().all(|a| a.owner.slice == "a"));
            Approval::Auto
        },
        Arc::new(Quiet),
    )
    .await
    .unwrap();
    assert_eq!(
        left_out,
        vec![
            "create slice.iron[0].workload_policy",
            "create slice.iron[0].node_pool"
        ]
    );
    assert_eq!(r.plan.summary.create, 2, "a's two pools only");
    assert!(r.success());
    assert!(
        !fake.calls().iter().any(|c| c.contains("resource_policy")),
        "{:?}",
        fake.calls()
    );
    // Released: iron is created next time.
    let r = reconcile(
        &f,
        &fake.cloud(),
        &opts(),
        |_| Approval::Auto,
        Arc::new(Quiet),
    )
    .await
    .unwrap();
    assert_eq!(r.plan.summary.create, 2, "iron's policy and pool");
    assert!(r.success());
}

#[tokio::test]
async fn reconcile_reports_per_slice_and_then_has_nothing_to_do() {
    let fake = FakeCloud::new();
    let f = fleet();
    fake.fail_next("insert_resource_policy", Fault::Unavailable);
    let r = reconcile(
        &f,
        &fake.cloud(),
        &opts(),
        |_| Approval::Auto,
        Arc::new(Quiet),
    )
    .await
    .unwrap();
    assert_eq!(r.outcome, Outcome::Applied);
    assert!(!r.success());
    let by: BTreeMap<&str, &SliceReport> = r.slices.iter().map(|s| (s.slice.as_str(), s)).collect();
    assert!(by["a"].ok(), "{:?}", by["a"]);
    assert_eq!(by["a"].done.len(), 2);
    assert_eq!(by["iron"].failed[0].code, "cloud_unavailable");
    assert_eq!(by["iron"].not_run.len(), 1, "its pool is skipped");
    assert_eq!(r.status.len(), 3);

    let r = reconcile(
        &f,
        &fake.cloud(),
        &opts(),
        |_| Approval::Auto,
        Arc::new(Quiet),
    )
    .await
    .unwrap();
    assert!(r.success());
    let writes_before = fake
        .calls()
        .iter()
        .filter(|c| !c.starts_with("list_"))
        .count();
    let r = reconcile(
        &f,
        &fake.cloud(),
        &opts(),
        |_| panic!("no approval is asked without changes"),
        Arc::new(Quiet),
    )
    .await
    .unwrap();
    assert_eq!(r.outcome, Outcome::NoChanges);
    let writes_after = fake
        .calls()
        .iter()
        .filter(|c| !c.starts_with("list_"))
        .count();
    assert_eq!(writes_before, writes_after, "steady state makes no writes");
}

#[tokio::test]
async fn a_confirmed_plan_the_world_moved_away_from_is_refused() {
    let fake = FakeCloud::new();
    let f = fleet();
    let cloud = fake.cloud();
    let r = reconcile(
        &f,
        &cloud,
        &opts(),
        |_| {
            // While the person reads the plan, someone takes a name.
            fake.seed_pool(
                &crate::resource::ClusterRef {
                    project: "unit-project".into(),
                    location: "us-central1".into(),
                    name: "c".into(),
                },
                crate::resource::gke::NodePool {
                    name: "a-0".into(),
                    ..Default::default()
                },
            );
            Approval::Confirmed
        },
        Arc::new(Quiet),
    )
    .await;
    let Err(e) = r else { panic!("must be refused") };
    assert_eq!(e.code(), "stale_plan");
    assert!(fake.calls_of("create_node_pool").is_empty());
}

#[test]
fn a_pool_in_error_is_not_ready_and_a_stockout_says_so() {
    use crate::plan::Kind as _;
    use crate::resource::gke::{NodePool, StatusCondition};
    let k = crate::kinds::node_pool::NodePools;
    let pool = |status: &str, code: Option<&str>| -> crate::plan::Body {
        Arc::new(NodePool {
            name: "a-0".into(),
            status: Some(status.into()),
            conditions: vec![StatusCondition {
                code: code.map(str::to_string),
                message: Some("no room".into()),
                canonical_code: None,
            }],
            ..Default::default()
        })
    };
    let n = k.not_ready(&pool("ERROR", Some("GCE_STOCKOUT"))).unwrap();
    assert_eq!(n.code, "stockout");
    assert!(
        n.message.starts_with("ERROR: GCE_STOCKOUT"),
        "{}",
        n.message
    );
    let n = k
        .not_ready(&pool("RUNNING_WITH_ERROR", Some("GCE_QUOTA_EXCEEDED")))
        .unwrap();
    assert_eq!(n.code, "quota_exceeded");
    assert_eq!(k.not_ready(&pool("RUNNING", None)), None);
    assert_eq!(k.not_ready(&pool("PROVISIONING", None)), None);
}
