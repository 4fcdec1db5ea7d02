#![cfg(test)]
//! The executor's own rules, fast, on the recording fake (no HTTP): order,
//! skipping what depends on a failure, the replacement limit, retries while
//! a cluster is busy, waiting on in-flight operations, a panicked step.

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

/// A progress display that shows nothing (tests of other modules use it).
pub(crate) struct Quiet;
impl Progress for Quiet {
    fn started(&self, _: &str, _: &str) {}
    fn finished(&self, _: &str, _: &str, _: Result<(), &str>, _: Duration) {}
}

async fn plan_on(fake: &Arc<FakeCloud>, f: &Fleet) -> Plan {
    let inv = crate::observe::observe(&fake.cloud(), f, crate::kinds::REGISTRY).await;
    assert!(inv.unobserved.is_empty(), "{:?}", inv.unobserved);
    let opts = PlanOptions {
        max_destroy: 100,
        ..PlanOptions::default()
    };
    crate::plan::plan(f, &inv, &crate::kinds::plan_kinds(), &opts).unwrap()
}

async fn run(fake: &Arc<FakeCloud>, p: &Plan, opts: ApplyOptions) -> ApplyReport {
    execute(
        &fake.cloud(),
        crate::kinds::REGISTRY,
        p,
        &opts,
        Arc::new(Quiet),
    )
    .await
}

/// A progress reporter that requests a stop as soon as the first step
/// starts (a Ctrl-C right after the apply began).
fn stopping_after_first_start() -> Arc<crate::apply::progress::Stoppable> {
    use std::sync::atomic::{AtomicBool, Ordering};
    struct StopAfterFirst(Arc<AtomicBool>);
    impl Progress for StopAfterFirst {
        fn started(&self, _: &str, _: &str) {
            self.0.store(true, Ordering::Relaxed);
        }
        fn finished(&self, _: &str, _: &str, _: Result<(), &str>, _: Duration) {}
    }
    let stop = Arc::new(AtomicBool::new(false));
    Arc::new(crate::apply::progress::Stoppable::new(
        Arc::new(StopAfterFirst(stop.clone())),
        stop,
    ))
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
    let inv = crate::observe::observe(&fake.cloud(), &f, crate::kinds::REGISTRY).await;
    assert!(inv.unobserved.is_empty(), "{:?}", inv.unobserved);
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

// ---- Two runs at once: a create answered 409 -----------------------------

const GCE_SPECS: &str = r#"apiVersion: slicectl.dev/v1alpha1
kind: Target
metadata: {name: k}
spec:
  project: proj-one
  zone: us-central1-b
  ownerId: unit
  gce:
    controlPlaneEndpoint: "10.0.0.2:6443"
    kubeApi: {kubeconfig: /nonexistent}
---
apiVersion: slicectl.dev/v1alpha1
kind: Slice
metadata: {name: kk}
spec:
  target: k
  backend: gce
  accelerator: tpu-v6e-slice
  topology: "4x4"
  gce:
    image: projects/ubuntu-os-accelerator-images/global/images/img
    bootstrap: {kubeadm: {kubernetesVersion: "1.36"}}
"#;

/// Every create of a fresh plan: the GKE slice's node pool, and the gce
/// slice's workload policy, instance template and MIG.
fn creates_of_each_kind() -> Vec<Action> {
    let gke = fleet(&[slice("tiny", "tpu-v6e-slice", "1x1", 1)]);
    let gce = crate::spec::load(&[SourceFile {
        path: "g.yaml".into(),
        text: GCE_SPECS.into(),
    }])
    .unwrap();
    let kinds = crate::kinds::plan_kinds();
    let mut out = Vec::new();
    for f in [gke, gce] {
        let p = crate::plan::plan(
            &f,
            &crate::plan::Inventory::default(),
            &kinds,
            &PlanOptions::default(),
        )
        .unwrap();
        out.extend(p.actions.into_iter().filter(|a| {
            [
                crate::kinds::node_pool::KIND,
                crate::kinds::workload_policy::KIND,
                crate::kinds::gce::template::KIND,
                crate::kinds::gce::mig::KIND,
            ]
            .contains(&a.id.kind)
        }));
    }
    assert_eq!(out.len(), 4, "{out:#?}");
    out
}

/// Runs one step of `a` as the executor does.
async fn step(cloud: &Cloud, a: &Action) -> Result<StepOutcome, ApplyError> {
    let k = crate::kinds::REGISTRY
        .iter()
        .find(|k| KindExec::kind(**k) == a.id.kind)
        .unwrap();
    k.execute(cloud, &schedule::Scheduler::new(4), a, StepOp::Create)
        .await
}

/// What another run does first: sends the create of `a` and leaves its
/// operation running.
async fn create_elsewhere(cloud: &Cloud, a: &Action) -> String {
    use crate::plan::kind::body_as;
    let body = a.desired.as_ref().unwrap();
    match &a.id.scope {
        crate::plan::Scope::Cluster(c) => {
            cloud
                .gke
                .create_node_pool(c, body_as(body).unwrap())
                .await
                .unwrap()
                .name
        }
        crate::plan::Scope::Region(r) => {
            cloud
                .compute
                .insert_resource_policy(&r.project, &r.region, body_as(body).unwrap())
                .await
                .unwrap()
                .name
        }
        crate::plan::Scope::Global(p) => {
            cloud
                .compute
                .insert_instance_template(p, body_as(body).unwrap())
                .await
                .unwrap()
                .name
        }
        crate::plan::Scope::Zone(z) => {
            cloud
                .compute
                .insert_instance_group_manager(z, body_as(body).unwrap())
                .await
                .unwrap()
                .name
        }
        other => panic!("no create of {other}"),
    }
}

fn insert_method(a: &Action) -> &'static str {
    match a.id.kind.as_str() {
        "node_pool" => "create_node_pool",
        "workload_policy" => "insert_resource_policy",
        "instance_template" => "insert_instance_template",
        _ => "insert_instance_group_manager",
    }
}

/// The advice of a create that met another run's: run again, never
/// "someone else's, delete it".
fn another_runs(a: &Action, r: Result<StepOutcome, ApplyError>) {
    let e = r.expect_err(&a.address());
    assert_eq!(e.code(), "conflict", "{}: {e}", a.address());
    let m = e.to_string();
    assert!(m.contains("is being created by another run"), "{m}");
    assert!(m.contains("Run apply again"), "{m}");
    for never in [
        "never changes it",
        "Delete or rename",
        "remove the existing",
        "HTTP 404",
    ] {
        assert!(!m.contains(never), "{m}");
    }
}

#[tokio::test]
async fn a_409_then_a_404_is_another_runs_create_for_every_kind() {
    for a in creates_of_each_kind() {
        let fake = FakeCloud::new();
        // The name exists (another run's insert was accepted), and a GET
        // right after finds nothing yet.
        fake.fail_next(insert_method(&a), Fault::AlreadyExists);
        another_runs(&a, step(&fake.cloud(), &a).await);
    }
}

#[tokio::test]
async fn a_409_with_another_runs_create_in_flight_for_every_kind() {
    for a in creates_of_each_kind() {
        let fake = FakeCloud::new();
        let cloud = fake.cloud();
        let op = create_elsewhere(&cloud, &a).await;
        let r = step(&cloud, &a).await;
        if a.id.kind == crate::kinds::node_pool::KIND {
            // GKE shows the pool while it is created, labelled as this
            // slice replica's: waited on, not duplicated.
            assert!(matches!(r, Ok(StepOutcome::Done)), "{r:?}");
            assert_eq!(
                fake.calls_of("wait_operation"),
                vec![format!("wait_operation {op}")]
            );
            assert_eq!(fake.pools(&cluster()).len(), 1);
            continue;
        }
        // Compute answers 409 and serves 404 until the insert is done.
        assert_eq!(
            fake.calls_of(insert_method(&a)).len(),
            2,
            "{}: the second insert was sent and refused",
            a.address()
        );
        another_runs(&a, r);
        let msg = step(&cloud, &a).await.unwrap_err().to_string();
        assert!(
            msg.contains(&format!("operation {op} is creating it")),
            "{msg}"
        );
        // Once the other run's insert is done, a rerun finds its own
        // resource there: done, with no second one.
        let done = compute_op(&op);
        cloud
            .compute
            .wait_operation(&done, Duration::from_secs(1))
            .await
            .unwrap();
        let r = step(&cloud, &a).await;
        assert!(matches!(r, Ok(StepOutcome::Done)), "{}: {r:?}", a.address());
        let count = match &a.id.scope {
            crate::plan::Scope::Region(r) => fake.policies(&r.project, &r.region).len(),
            crate::plan::Scope::Global(p) => fake.templates(&p.project).len(),
            crate::plan::Scope::Zone(z) => fake.migs(z).len(),
            _ => unreachable!(),
        };
        assert_eq!(count, 1, "{}", a.address());
    }
}

/// A compute operation handle by name (the fake finds it by name).
fn compute_op(name: &str) -> crate::resource::compute::Operation {
    crate::resource::compute::Operation {
        name: name.to_string(),
        ..Default::default()
    }
}

#[tokio::test]
async fn a_409_for_someone_elses_resource_still_says_whose_it_is() {
    let fake = FakeCloud::new();
    let a = creates_of_each_kind()
        .into_iter()
        .find(|a| a.id.kind == crate::kinds::gce::template::KIND)
        .unwrap();
    fake.seed_template(
        "proj-one",
        crate::resource::compute::InstanceTemplate {
            name: a.id.name.clone(),
            description: Some("made by hand".into()),
            ..Default::default()
        },
    );
    let e = step(&fake.cloud(), &a).await.unwrap_err();
    assert_eq!(e.code(), "conflict");
    let m = e.to_string();
    assert!(m.contains("not created by slicectl"), "{m}");
    assert!(!m.contains("another run"), "{m}");
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
    let fake = FakeCloud::new();
    let f = fleet(&[slice("iron", "tpu7x", "2x2x2", 1)]);
    let p = plan_on(&fake, &f).await;
    assert_eq!(p.summary.create, 2, "policy, then pool");
    let progress = stopping_after_first_start();
    let r = execute(
        &fake.cloud(),
        crate::kinds::REGISTRY,
        &p,
        &ApplyOptions::default(),
        progress,
    )
    .await;
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
    let fake = FakeCloud::new();
    let f = fleet(&[slice("rep", "tpu-v6e-slice", "2x2", 2)]);
    let p = plan_on(&fake, &f).await;
    assert!(run(&fake, &p, ApplyOptions::default()).await.success());
    let p = plan_on(&fake, &fleet(&[slice("rep", "tpu-v6e-slice", "2x4", 2)])).await;
    let progress = stopping_after_first_start();
    let opts = ApplyOptions {
        parallelism: 16,
        max_replacements: 1,
    };
    let before = fake.calls_of("create_node_pool").len();
    let r = execute(&fake.cloud(), crate::kinds::REGISTRY, &p, &opts, progress).await;
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

/// What a stop at once would abandon, as the executor runs a replacement:
/// while the old pool's delete is in flight, the step and the replica left
/// without capacity; while the new pool's create (its last step) is in
/// flight, only that step (its operation brings the capacity back); once it
/// is over, nothing.
#[tokio::test]
async fn in_flight_names_a_replacement_left_without_capacity() {
    use std::sync::atomic::AtomicBool;
    use std::sync::{Mutex, OnceLock};
    #[derive(Default)]
    struct Snapshots {
        in_flight: OnceLock<Arc<crate::apply::progress::InFlight>>,
        seen: Mutex<Vec<(String, Vec<String>)>>,
    }
    impl Progress for Snapshots {
        fn started(&self, key: &str, what: &str) {
            let now = self.in_flight.get().unwrap().abandoned("apply");
            self.seen
                .lock()
                .unwrap()
                .push((format!("{key}: {what}"), now));
        }
        fn finished(&self, _: &str, _: &str, _: Result<(), &str>, _: Duration) {}
    }
    let fake = FakeCloud::new();
    let f = fleet(&[slice("rep", "tpu-v6e-slice", "2x2", 1)]);
    let p = plan_on(&fake, &f).await;
    assert!(run(&fake, &p, ApplyOptions::default()).await.success());
    let p = plan_on(&fake, &fleet(&[slice("rep", "tpu-v6e-slice", "2x4", 1)])).await;
    assert_eq!(p.summary.replace, 1);
    let snaps = Arc::new(Snapshots::default());
    let progress = Arc::new(crate::apply::progress::Stoppable::new(
        snaps.clone(),
        Arc::new(AtomicBool::new(false)),
    ));
    let in_flight = progress.in_flight();
    snaps.in_flight.set(in_flight.clone()).unwrap();
    let r = execute(
        &fake.cloud(),
        crate::kinds::REGISTRY,
        &p,
        &ApplyOptions::default(),
        progress,
    )
    .await;
    assert!(r.success(), "{r:?}");
    let seen = snaps.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2, "{seen:#?}");
    assert_eq!(seen[0].0, "slice.rep[0].node_pool: deleting");
    assert_eq!(seen[0].1.len(), 2, "{seen:#?}");
    assert!(
        seen[0].1[0].starts_with("slice.rep[0].node_pool: deleting (in flight"),
        "{seen:#?}"
    );
    assert!(
        seen[0].1[1]
            .starts_with("slice.rep[0] has no capacity until the next `slicectl apply` creates it"),
        "{seen:#?}"
    );
    assert_eq!(seen[1].0, "slice.rep[0].node_pool: creating");
    assert_eq!(seen[1].1.len(), 1, "{seen:#?}");
    assert!(
        seen[1].1[0].starts_with("slice.rep[0].node_pool: creating (in flight"),
        "{seen:#?}"
    );
    assert!(in_flight.abandoned("apply").is_empty());
}

/// Issue 35, case 5: the first Ctrl-C during a replacement's drain ends the
/// drain before its next eviction and starts neither its delete nor its
/// create: nothing of the replica is destroyed, the run is not a success
/// (`Apply STOPPED`), and the report says what it left.
#[tokio::test]
async fn a_stop_during_a_drain_starts_no_delete() {
    use crate::plan::workload::{DisruptHow, Disrupting};
    let fake = FakeCloud::new();
    let f = fleet(&[slice("rep", "tpu-v6e-slice", "2x2", 1)]);
    let p = plan_on(&fake, &f).await;
    assert!(run(&fake, &p, ApplyOptions::default()).await.success());
    let mut p = plan_on(&fake, &fleet(&[slice("rep", "tpu-v6e-slice", "2x4", 1)])).await;
    assert_eq!(p.summary.replace, 1);
    let kube = crate::resource::KubeRef {
        endpoint: "10.0.0.9:443".into(),
    };
    let fk = crate::kube::fake::FakeKube::new();
    fk.join_node(&kube, "rep-0-node", "gce://p/z/rep-0-node", 4);
    fk.seed_pod(&kube, "ml", "train-0", "rep-0-node", &[], &[], None);
    let a = p
        .actions
        .iter_mut()
        .find(|a| a.action == ActionKind::Replace)
        .unwrap();
    a.disruption = Some(Disrupting {
        how: DisruptHow::Drain,
        pods: Vec::new(),
        kube: Some(kube.clone()),
        nodes: vec!["rep-0-node".into()],
        drain_timeout_secs: 600,
        draining_since: None,
        windows: Vec::new(),
    });
    let before = writes(&fake);
    let cloud = crate::cloud::Cloud {
        kube: fk.clone(),
        ..fake.cloud()
    };
    let r = execute(
        &cloud,
        crate::kinds::REGISTRY,
        &p,
        &ApplyOptions::default(),
        stopping_after_first_start(),
    )
    .await;
    assert_eq!(writes(&fake), before, "no delete, no create");
    assert!(fk.calls_of("evict_pod").is_empty());
    assert!(fk.pod_names(&kube).contains(&"ml/train-0".to_string()));
    assert!(!r.success(), "{r:?}");
    assert!(r.stopped);
    assert!(r.failed.is_empty(), "{r:?}");
    assert!(r.capacity_lost.is_empty(), "{r:?}");
    assert!(r.summary().starts_with("Apply STOPPED"), "{}", r.summary());
    assert_eq!(r.not_run.len(), 1, "{r:?}");
    assert!(
        r.not_run[0]
            .1
            .starts_with("draining stopped: the drain stopped before its next eviction"),
        "{r:?}"
    );
}

#[tokio::test]
async fn a_create_paired_with_a_delete_waits_for_its_protection_read_again() {
    // Campaign seed 0xab6df2972a0f31a9 (N6's seed, then a duplicate): a plan
    // made from a lagging list pairs a create with the delete of a pool
    // stamped preventDestroy since that view (an undeclared rename here, a
    // moved replica there). The guard reads the stamp first: the delete is
    // refused and the create never sent, so no second copy is made that
    // could never be pruned.
    let fake = FakeCloud::new();
    let v6e = |name: &str, protect: bool| {
        let mut s = slice(name, "tpu-v6e-slice", "2x2", 1);
        if protect {
            s.push_str("  lifecycle: {preventDestroy: true}\n");
        }
        s
    };
    let r = run(
        &fake,
        &plan_on(&fake, &fleet(&[v6e("iron", false)])).await,
        ApplyOptions::default(),
    )
    .await;
    assert!(r.success(), "{r:?}");
    let before = fake.pool_view();
    let r = run(
        &fake,
        &plan_on(&fake, &fleet(&[v6e("iron", true)])).await,
        ApplyOptions::default(),
    )
    .await;
    assert!(r.success(), "{r:?}");
    // The rename, planned from the view before the stamp.
    fake.serve_stale_pool_lists(Some(before));
    let p = plan_on(&fake, &fleet(&[v6e("gold", false)])).await;
    fake.serve_stale_pool_lists(None);
    let acts: Vec<(ActionKind, &str)> = p
        .actions
        .iter()
        .map(|a| (a.action, a.id.name.as_str()))
        .collect();
    assert!(
        acts.contains(&(ActionKind::Create, "gold-0"))
            && acts.contains(&(ActionKind::Delete, "iron-0")),
        "{acts:?}"
    );
    let r = run(&fake, &p, ApplyOptions::default()).await;
    assert!(!r.success(), "{r:?}");
    assert!(
        fake.calls_of("create_node_pool")
            .iter()
            .all(|c| !c.contains("gold")),
        "{:?}",
        fake.calls()
    );
    assert!(
        fake.calls_of("delete_node_pool").is_empty(),
        "{:?}",
        fake.calls()
    );
    let names: Vec<String> = fake
        .pools(&cluster())
        .iter()
        .map(|p| p.name.clone())
        .collect();
    assert_eq!(names, vec!["iron-0".to_string()]);
    assert!(
        format!("{r:?}").contains("prevent_destroy"),
        "the refusal says why: {r:?}"
    );
}

#[tokio::test]
async fn a_protected_replica_is_not_created_where_a_copy_already_runs_elsewhere() {
    // Campaign seed 0xc87fd24ffd6382ed (N15): the Target moved to another
    // cluster and the plan was made from a lagging list that did not show
    // the copy left behind, so nothing paired a delete with the create.
    // The create reads where the replica runs first (one clusters.list).
    let fake = FakeCloud::new();
    let text = |cluster: &str| {
        let mut s = slice("iron", "tpu-v6e-slice", "2x2", 1);
        s.push_str("  lifecycle: {preventDestroy: true}\n");
        let mut f = fleet(&[s]);
        for t in f.targets.values_mut() {
            if let Some(g) = t.spec.gke.as_mut() {
                g.name = cluster.into();
            }
        }
        f
    };
    let r = run(
        &fake,
        &plan_on(&fake, &text("train")).await,
        ApplyOptions::default(),
    )
    .await;
    assert!(r.success(), "{r:?}");
    // Every node pool list answers from the moment before the first pool.
    let empty: std::collections::BTreeMap<String, Vec<crate::resource::gke::NodePool>> = fake
        .pool_view()
        .into_keys()
        .map(|k| (k, Vec::new()))
        .collect();
    fake.serve_stale_pool_lists(Some(empty));
    let moved = text("train2");
    let p = plan_on(&fake, &moved).await;
    fake.serve_stale_pool_lists(None);
    assert!(
        p.actions.iter().all(|a| a.action != ActionKind::Delete),
        "the stale view hides the copy: {:?}",
        p.actions
    );
    assert!(
        p.actions
            .iter()
            .any(|a| a.action == ActionKind::Create && a.id.name == "iron-0"),
        "{:?}",
        p.actions
    );
    let r = run(&fake, &p, ApplyOptions::default()).await;
    assert!(!r.success(), "{r:?}");
    assert!(format!("{r:?}").contains("protected_copy"), "{r:?}");
    let train2 = ClusterRef {
        name: "train2".into(),
        ..cluster()
    };
    assert!(fake.pools(&train2).is_empty(), "no second copy");
    assert_eq!(fake.pools(&cluster()).len(), 1, "the copy stays");
    // An unprotected slice is created without the extra read.
    let before = fake.calls_of("list_clusters").len();
    let plain = fleet(&[slice("tiny", "tpu-v6e-slice", "1x1", 1)]);
    let r = run(
        &fake,
        &plan_on(&fake, &plain).await,
        ApplyOptions::default(),
    )
    .await;
    assert!(r.success(), "{r:?}");
    assert_eq!(
        fake.calls_of("list_clusters").len(),
        before + 1,
        "one list, the plan's left-behind discovery; none by the create"
    );
}
