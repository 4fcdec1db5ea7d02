//! The executor's own rules, fast, on the recording fake (no HTTP): order,
//! skipping what depends on a failure, the replacement limit, retries while
//! a cluster is busy, waiting on in-flight operations, a panicked step.
#![cfg(test)]

use std::sync::Arc;
use std::time::Duration;

use super::*;
use crate::cloud::fake::{FakeCloud, Fault};
use crate::plan::{PlanOptions, SliceRef};
use crate::resource::ClusterRef;
use crate::spec::{Fleet, SourceFile};

const TARGET: &str = "apiVersion: slicectl.dev/v1alpha1
kind: Target
metadata: {name: train}
spec:
  project: unit-project
  zone: us-central1-b
  ownerId: unit
  gke: {location: us-central1, name: train}
---
apiVersion: slicectl.dev/v1alpha1
kind: Target
metadata: {name: train-c}
spec:
  project: unit-project
  zone: us-central1-c
  ownerId: unit
  gke: {location: us-central1, name: train}
";

/// A slice on the target whose zone offers its generation (tpu7x in
/// us-central1-c, v6e in us-central1-b).
fn slice(name: &str, acc: &str, topo: &str, replicas: u32) -> String {
    let target = if acc == "tpu7x" { "train-c" } else { "train" };
    format!(
        "apiVersion: slicectl.dev/v1alpha1\nkind: Slice\nmetadata: {{name: {name}}}\nspec:\n  target: {target}\n  backend: gke\n  accelerator: {acc}\n  topology: \"{topo}\"\n  replicas: {replicas}\n"
    )
}

fn fleet(slices: &[String]) -> Fleet {
    let mut files = vec![SourceFile {
        path: "target.yaml".into(),
        text: TARGET.into(),
    }];
    for (i, s) in slices.iter().enumerate() {
        files.push(SourceFile {
            path: format!("s{i}.yaml").into(),
            text: s.clone(),
        });
    }
    crate::spec::load(&files).unwrap()
}

fn cluster() -> ClusterRef {
    ClusterRef {
        project: "unit-project".into(),
        location: "us-central1".into(),
        name: "train".into(),
    }
}

struct Quiet;
impl Progress for Quiet {
    fn started(&self, _: &str, _: &str) {}
    fn finished(&self, _: &str, _: &str, _: Result<(), &str>, _: Duration) {}
}

async fn plan_on(fake: &Arc<FakeCloud>, f: &Fleet) -> Plan {
    let inv = crate::observe::observe(&fake.cloud(), f).await.unwrap();
    let opts = PlanOptions {
        max_destroy: 100,
        ..PlanOptions::default()
    };
    crate::plan::plan(f, &inv, &crate::kinds::plan_kinds(), &opts).unwrap()
}

async fn run(fake: &Arc<FakeCloud>, p: &Plan, opts: ApplyOptions) -> ApplyReport {
    execute(&fake.cloud(), p, &opts, Arc::new(Quiet)).await
}

fn position(calls: &[String], call: &str) -> usize {
    calls
        .iter()
        .position(|c| c == call)
        .unwrap_or_else(|| panic!("{call} not in {calls:#?}"))
}

fn writes(fake: &FakeCloud) -> Vec<String> {
    fake.calls()
        .into_iter()
        .filter(|c| !c.starts_with("list_") && !c.starts_with("get_"))
        .collect()
}

#[tokio::test]
async fn a_policy_is_created_and_done_before_its_pool() {
    let fake = FakeCloud::new();
    let f = fleet(&[slice("iron", "tpu7x", "2x2x2", 1)]);
    let p = plan_on(&fake, &f).await;
    let r = run(&fake, &p, ApplyOptions::default()).await;
    assert!(r.success(), "{r:?}");
    let calls = writes(&fake);
    assert_eq!(
        calls,
        vec![
            "insert_resource_policy iron-0-wp",
            "wait_compute_operation operation-fake-1",
            "create_node_pool iron-0",
            "wait_operation operation-fake-2",
        ],
        "policy, its wait, then the pool"
    );
    // Teardown runs the other way round.
    let inv = crate::observe::observe(&fake.cloud(), &f).await.unwrap();
    let down = crate::plan::plan_destroy(&f, &inv, &crate::kinds::plan_kinds(), 10).unwrap();
    let r = run(&fake, &down, ApplyOptions::default()).await;
    assert!(r.success(), "{r:?}");
    let calls = writes(&fake);
    assert!(
        position(&calls, "delete_node_pool iron-0")
            < position(&calls, "delete_resource_policy iron-0-wp")
    );
    assert!(fake.pools(&cluster()).is_empty());
    assert!(fake.policies("unit-project", "us-central1").is_empty());
}

#[tokio::test]
async fn a_failed_step_skips_exactly_its_dependents() {
    let fake = FakeCloud::new();
    let f = fleet(&[
        slice("iron", "tpu7x", "2x2x2", 1),
        slice("tiny", "tpu-v6e-slice", "1x1", 1),
    ]);
    let p = plan_on(&fake, &f).await;
    fake.fail_next("insert_resource_policy", Fault::Unavailable);
    let r = run(&fake, &p, ApplyOptions::default()).await;
    assert!(!r.success());
    assert_eq!(r.failed.len(), 1, "{r:?}");
    assert_eq!(r.failures[0].address, "slice.iron[0].workload_policy");
    assert_eq!(r.failures[0].code, "cloud_unavailable");
    assert_eq!(r.skipped, vec!["slice.iron[0].node_pool".to_string()]);
    assert_eq!(r.done.get("create"), Some(&1));
    assert!(fake.calls_of("create_node_pool") == vec!["create_node_pool tiny-0"]);
}

#[tokio::test]
async fn replacements_are_limited_per_slice_replica_and_never_deadlock() {
    let fake = FakeCloud::new();
    let f = fleet(&[slice("iron", "tpu7x", "2x2x2", 3)]);
    let p = plan_on(&fake, &f).await;
    assert!(run(&fake, &p, ApplyOptions::default()).await.success());
    let f2 = fleet(&[slice("iron", "tpu7x", "2x2x4", 3)]);
    let p = plan_on(&fake, &f2).await;
    assert_eq!(p.summary.replace, 6, "3 pools and 3 policies");
    let before = fake.calls().len();
    let r = run(
        &fake,
        &p,
        ApplyOptions {
            parallelism: 16,
            max_replacements: 1,
        },
    )
    .await;
    assert!(r.success(), "{r:?}");
    assert_eq!(r.done.get("replace"), Some(&6));
    // One replica at a time: replica N is recreated before N+1 is touched.
    let calls: Vec<String> = fake.calls()[before..].to_vec();
    for n in 0..2 {
        assert!(
            position(&calls, &format!("create_node_pool iron-{n}"))
                < position(&calls, &format!("delete_node_pool iron-{}", n + 1)),
            "{calls:#?}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_busy_cluster_is_waited_out() {
    let fake = FakeCloud::new();
    let f = fleet(&[slice("tiny", "tpu-v6e-slice", "1x1", 1)]);
    let p = plan_on(&fake, &f).await;
    for _ in 0..3 {
        fake.fail_next("create_node_pool", Fault::ClusterBusy);
    }
    let r = run(&fake, &p, ApplyOptions::default()).await;
    assert!(r.success(), "{r:?}");
    assert_eq!(
        fake.calls_of("create_node_pool").len(),
        4,
        "3 refusals, then it goes"
    );
}

#[tokio::test]
async fn an_in_flight_operation_is_waited_on_not_duplicated() {
    let fake = FakeCloud::new();
    let f = fleet(&[slice("tiny", "tpu-v6e-slice", "1x1", 1)]);
    // An earlier, killed apply left a create running.
    let planned = plan_on(&fake, &f).await;
    let body = planned.actions[0]
        .desired
        .as_ref()
        .and_then(crate::plan::kind::body_as::<crate::resource::gke::NodePool>)
        .cloned()
        .unwrap();
    let op = fake.seed_running_create(&cluster(), body);
    let p = plan_on(&fake, &f).await;
    assert_eq!(p.actions.len(), 1);
    assert_eq!(p.actions[0].action, ActionKind::Wait, "{:?}", p.actions[0]);
    let r = run(&fake, &p, ApplyOptions::default()).await;
    assert!(r.success(), "{r:?}");
    assert!(fake.calls_of("create_node_pool").is_empty());
    assert_eq!(
        fake.calls_of("wait_operation"),
        vec![format!("wait_operation {op}")]
    );
    assert_eq!(fake.pools(&cluster())[0].status.as_deref(), Some("RUNNING"));
}

#[tokio::test]
async fn a_panicked_step_is_a_failure_not_a_loss() {
    let fake = FakeCloud::new();
    let f = fleet(&[
        slice("a", "tpu-v6e-slice", "1x1", 1),
        slice("b", "tpu-v6e-slice", "1x1", 1),
    ]);
    let p = plan_on(&fake, &f).await;
    fake.fail_next("create_node_pool", Fault::Panic);
    let r = run(&fake, &p, ApplyOptions::default()).await;
    assert!(!r.success());
    assert_eq!(r.failures.len(), 1, "{r:?}");
    assert_eq!(r.failures[0].code, "panicked");
    assert!(r.failures[0].message.contains("injected panic"), "{r:?}");
    assert_eq!(r.done.get("create"), Some(&1), "the other slice goes ahead");
}

#[tokio::test]
async fn an_action_of_an_unregistered_kind_fails_with_a_code() {
    let fake = FakeCloud::new();
    let f = fleet(&[slice("a", "tpu-v6e-slice", "1x1", 1)]);
    let mut p = plan_on(&fake, &f).await;
    p.actions[0].id.kind = crate::plan::KindId("no_such_kind");
    p.actions[0].owner = SliceRef {
        slice: "a".into(),
        replica: 0,
    };
    let r = run(&fake, &p, ApplyOptions::default()).await;
    assert!(!r.success());
    assert_eq!(r.failures[0].code, "internal");
}

#[tokio::test]
async fn a_stockout_is_a_failure_with_its_code() {
    let fake = FakeCloud::new();
    let f = fleet(&[slice("a", "tpu-v6e-slice", "1x1", 1)]);
    let p = plan_on(&fake, &f).await;
    fake.fail_next("wait_operation", Fault::Stockout);
    let r = run(&fake, &p, ApplyOptions::default()).await;
    assert!(!r.success());
    assert_eq!(r.failures[0].code, "stockout");
}

/// A stop request (SIGINT/SIGTERM in `reconcile --watch` and `controller`):
/// the steps in flight finish, no new step starts, and the others are
/// reported as not run with the reason; the next run continues from the
/// live state and does only what is left.
#[tokio::test]
async fn a_stop_request_lets_steps_in_flight_finish_and_starts_no_new_one() {
    use std::sync::atomic::{AtomicBool, Ordering};
    struct StopAfterFirst(Arc<AtomicBool>);
    impl Progress for StopAfterFirst {
        fn started(&self, _: &str, _: &str) {
            self.0.store(true, Ordering::Relaxed);
        }
        fn finished(&self, _: &str, _: &str, _: Result<(), &str>, _: Duration) {}
    }
    let fake = FakeCloud::new();
    let f = fleet(&[slice("iron", "tpu7x", "2x2x2", 1)]);
    let p = plan_on(&fake, &f).await;
    assert_eq!(p.summary.create, 2, "policy, then pool");
    let stop = Arc::new(AtomicBool::new(false));
    let progress = Arc::new(crate::apply::progress::Stoppable::new(
        Arc::new(StopAfterFirst(stop.clone())),
        stop.clone(),
    ));
    let r = execute(&fake.cloud(), &p, &ApplyOptions::default(), progress).await;
    assert!(!r.success());
    assert_eq!(
        r.completed,
        vec!["slice.iron[0].workload_policy".to_string()]
    );
    assert!(r.failed.is_empty() && r.skipped.is_empty(), "{r:?}");
    assert_eq!(r.not_run.len(), 1, "{r:?}");
    assert_eq!(r.not_run[0].0, "slice.iron[0].node_pool");
    assert!(
        r.not_run[0].1.contains("a stop was requested"),
        "{}",
        r.not_run[0].1
    );
    assert!(fake.calls_of("create_node_pool").is_empty());
    assert_eq!(fake.policies("unit-project", "us-central1").len(), 1);
    // The next run does only what is left.
    let p = plan_on(&fake, &f).await;
    assert_eq!(p.summary.create, 1);
    let r = run(&fake, &p, ApplyOptions::default()).await;
    assert!(r.success(), "{r:?}");
    assert_eq!(fake.pools(&cluster()).len(), 1);
}

/// Issue 24: a roll-out stops at its first failed replacement. Three
/// RUNNING replicas, a topology change that forces replacement, and a
/// stockout on every create: only the first replica is lost, the other two
/// keep their capacity and are reported not run with why, and the summary
/// says what was deleted and not recreated.
#[tokio::test]
async fn a_roll_out_stops_at_the_first_failed_replacement() {
    let fake = FakeCloud::new();
    let f = fleet(&[slice("rep", "tpu-v6e-slice", "2x2", 3)]);
    let p = plan_on(&fake, &f).await;
    assert!(run(&fake, &p, ApplyOptions::default()).await.success());
    let f2 = fleet(&[slice("rep", "tpu-v6e-slice", "2x4", 3)]);
    let p = plan_on(&fake, &f2).await;
    assert_eq!(p.summary.replace, 3);
    for _ in 0..3 {
        fake.fail_next("create_node_pool", Fault::Stockout);
    }
    let r = run(
        &fake,
        &p,
        ApplyOptions {
            parallelism: 16,
            max_replacements: 1,
        },
    )
    .await;
    assert!(!r.success());
    assert_eq!(fake.calls_of("delete_node_pool").len(), 1, "{r:?}");
    assert_eq!(r.failures.len(), 1, "{r:?}");
    assert_eq!(r.failures[0].code, "stockout");
    let mut not_run: Vec<&str> = r.not_run.iter().map(|(a, _)| a.as_str()).collect();
    not_run.sort_unstable();
    assert_eq!(
        not_run,
        vec!["slice.rep[1].node_pool", "slice.rep[2].node_pool"],
        "{r:?}"
    );
    assert!(
        r.not_run
            .iter()
            .all(|(_, why)| why.contains("roll-out stopped")),
        "{r:?}"
    );
    let mut left: Vec<String> = fake.pools(&cluster()).into_iter().map(|p| p.name).collect();
    left.sort();
    assert_eq!(
        left,
        vec!["rep-1", "rep-2"],
        "the two untouched replicas keep their capacity"
    );
    assert_eq!(r.capacity_lost, vec!["slice.rep[0].node_pool".to_string()]);
    let summary = r.summary();
    assert!(
        summary.contains("1 replaced but not recreated"),
        "{summary}"
    );
    assert!(summary.contains("slice.rep[0].node_pool"), "{summary}");
}

/// A stockout halts the not-yet-started replacements of every slice in the
/// same area, not only the failed slice's.
#[tokio::test]
async fn a_stockout_halts_replacements_in_the_same_area() {
    let fake = FakeCloud::new();
    let f = fleet(&[
        slice("a", "tpu-v6e-slice", "2x2", 1),
        slice("b", "tpu-v6e-slice", "2x2", 1),
    ]);
    let p = plan_on(&fake, &f).await;
    assert!(run(&fake, &p, ApplyOptions::default()).await.success());
    let f2 = fleet(&[
        slice("a", "tpu-v6e-slice", "2x4", 1),
        slice("b", "tpu-v6e-slice", "2x4", 1),
    ]);
    let p = plan_on(&fake, &f2).await;
    fake.fail_next("create_node_pool", Fault::Stockout);
    fake.fail_next("create_node_pool", Fault::Stockout);
    let r = run(
        &fake,
        &p,
        ApplyOptions {
            parallelism: 16,
            max_replacements: 1,
        },
    )
    .await;
    assert_eq!(fake.calls_of("delete_node_pool").len(), 1, "{r:?}");
    assert_eq!(r.not_run.len(), 1, "{r:?}");
    assert!(r.not_run[0].1.contains("stockout"), "{r:?}");
    assert_eq!(fake.pools(&cluster()).len(), 1);
}

/// The two halves of one replacement are one unit for a graceful stop:
/// once the delete is sent, the create runs; replacements not started stay
/// unstarted.
#[tokio::test]
async fn a_stop_never_leaves_a_started_replacement_without_its_create() {
    use std::sync::atomic::{AtomicBool, Ordering};
    struct StopAfterFirst(Arc<AtomicBool>);
    impl Progress for StopAfterFirst {
        fn started(&self, _: &str, _: &str) {
            self.0.store(true, Ordering::Relaxed);
        }
        fn finished(&self, _: &str, _: &str, _: Result<(), &str>, _: Duration) {}
    }
    let fake = FakeCloud::new();
    let f = fleet(&[slice("rep", "tpu-v6e-slice", "2x2", 2)]);
    let p = plan_on(&fake, &f).await;
    assert!(run(&fake, &p, ApplyOptions::default()).await.success());
    let p = plan_on(&fake, &fleet(&[slice("rep", "tpu-v6e-slice", "2x4", 2)])).await;
    let stop = Arc::new(AtomicBool::new(false));
    let progress = Arc::new(crate::apply::progress::Stoppable::new(
        Arc::new(StopAfterFirst(stop.clone())),
        stop.clone(),
    ));
    let opts = ApplyOptions {
        parallelism: 16,
        max_replacements: 1,
    };
    let before = fake.calls_of("create_node_pool").len();
    let r = execute(&fake.cloud(), &p, &opts, progress).await;
    assert_eq!(
        fake.calls_of("create_node_pool")[before..],
        ["create_node_pool rep-0".to_string()],
        "{r:?}"
    );
    assert_eq!(r.completed, vec!["slice.rep[0].node_pool".to_string()]);
    assert!(r.capacity_lost.is_empty(), "{r:?}");
    assert_eq!(r.not_run.len(), 1, "{r:?}");
    assert!(r.not_run[0].1.contains("a stop was requested"), "{r:?}");
    assert_eq!(fake.pools(&cluster()).len(), 2);
}
