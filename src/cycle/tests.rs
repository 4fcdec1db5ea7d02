#![cfg(test)]
//! Every [`CycleOutcome`], driven through the recording fake cloud and real
//! sources (a temporary directory, a ConfigMap snapshot), with no process.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use super::*;
use crate::apply::ApplyOptions;
use crate::cloud::fake::{FakeCloud, Fault};
use crate::controller::capacity::RetryPolicy;
use crate::controller::configmap::Snapshot;
use crate::plan::{PlanMode, PlanOptions};
use crate::resource::ClusterRef;
use crate::resource::gke::NodePool;
use crate::source::Skipped;

pub(crate) const TARGET: &str = "apiVersion: slicectl.dev/v1alpha1\nkind: Target\nmetadata:\n  name: t\nspec:\n  project: unit-project\n  zone: us-central1-b\n  ownerId: unit\n  gke:\n    location: us-central1\n    name: c\n";

pub(crate) fn slice(name: &str, extra: &str) -> String {
    slice_of(name, "1x1", extra)
}

fn slice_of(name: &str, topology: &str, extra: &str) -> String {
    format!(
        "apiVersion: slicectl.dev/v1alpha1\nkind: Slice\nmetadata:\n  name: {name}\nspec:\n  target: t\n  backend: gke\n  accelerator: tpu-v6e-slice\n  topology: {topology}\n{extra}"
    )
}

/// A slice of another offering than [`slice`]'s (the capacity cache is
/// per offering).
fn big() -> String {
    slice_of("big", "2x2", "")
}

pub(crate) fn cluster() -> ClusterRef {
    ClusterRef {
        project: "unit-project".into(),
        location: "us-central1".into(),
        name: "c".into(),
    }
}

fn options(max_destroy: usize) -> ReconcileOptions {
    ReconcileOptions {
        mode: PlanMode::Apply,
        plan: PlanOptions {
            max_destroy,
            ..PlanOptions::default()
        },
        apply: ApplyOptions::default(),
    }
}

pub(crate) fn state() -> CycleState {
    CycleState::new(options(10), Arc::new(AtomicBool::new(false)))
}

pub(crate) fn tracked_state() -> CycleState {
    state().with_capacity(CapacityTracker::new(RetryPolicy {
        cache_ttl: Duration::from_secs(60),
        initial: Duration::from_secs(60),
        max: Duration::from_secs(600),
    }))
}

/// A spec directory the test rewrites between cycles.
pub(crate) struct Specs {
    pub(crate) tmp: tempfile::TempDir,
}

impl Specs {
    pub(crate) fn new(files: &[(&str, &str)]) -> Specs {
        let s = Specs {
            tmp: tempfile::tempdir().unwrap(),
        };
        s.set(files);
        s
    }

    pub(crate) fn set(&self, files: &[(&str, &str)]) {
        for e in std::fs::read_dir(self.tmp.path()).unwrap() {
            std::fs::remove_file(e.unwrap().path()).unwrap();
        }
        for (name, text) in files {
            std::fs::write(self.tmp.path().join(name), text).unwrap();
        }
    }

    pub(crate) fn source(&self) -> DirSource {
        DirSource {
            dir: self.tmp.path().to_path_buf(),
        }
    }
}

/// The fake cloud, or a connection that fails.
pub(crate) struct FakeConnect {
    pub(crate) cloud: Option<Cloud>,
    pub(crate) connects: usize,
}

impl FakeConnect {
    pub(crate) fn to(cloud: Cloud) -> FakeConnect {
        FakeConnect {
            cloud: Some(cloud),
            connects: 0,
        }
    }
}

impl Connect for FakeConnect {
    async fn cloud(&mut self, _fleet: &Fleet) -> anyhow::Result<Cloud> {
        self.connects += 1;
        self.cloud
            .clone()
            .ok_or_else(|| anyhow::anyhow!("cannot reach the cloud"))
    }
}

pub(crate) struct Quiet;
impl Progress for Quiet {
    fn started(&self, _: &str, _: &str) {}
    fn finished(&self, _: &str, _: &str, _: Result<(), &str>, _: Duration) {}
}

/// What the cycle told its sink.
#[derive(Default)]
struct Recorder {
    skipped: Vec<PathBuf>,
    resolved: usize,
    plans: usize,
    finished: Vec<&'static str>,
    fleet: Vec<String>,
    invalid: BTreeMap<String, String>,
    capacity: Option<CapacityNote>,
    source: String,
    timed: Vec<String>,
}

impl CycleSink for Recorder {
    fn progress(&mut self) -> Arc<dyn Progress> {
        Arc::new(Quiet)
    }

    fn skipped(&mut self, skipped: &[Skipped]) {
        self.skipped.extend(skipped.iter().map(|s| s.path.clone()));
    }

    fn resolved(&mut self, _: &Resolved) {
        self.resolved += 1;
    }

    fn plan(&mut self, _: &Plan) {
        self.plans += 1;
    }

    async fn finished(&mut self, end: &CycleEnd<'_>) {
        self.finished.push(end.outcome.code());
        self.fleet = end.fleet.slices.keys().cloned().collect();
        self.invalid = end.invalid.clone();
        self.capacity = end.capacity.clone();
        self.source = end.source.clone();
    }

    fn timed(&mut self, code: &str, _: Duration) {
        self.timed.push(code.to_string());
    }
}

async fn cycle(
    state: &mut CycleState,
    source: &impl SpecSource,
    connect: &mut FakeConnect,
    sink: &mut Recorder,
) -> CycleOutcome {
    run_cycle(state, source, connect, sink, Trigger::Change).await
}

fn writes(fake: &FakeCloud) -> Vec<String> {
    fake.calls()
        .into_iter()
        .filter(|c| !c.starts_with("list_") && !c.starts_with("get_"))
        .collect()
}

#[tokio::test]
async fn applied_then_no_changes_with_no_writes() {
    let fake = FakeCloud::new();
    let specs = Specs::new(&[("t.yaml", TARGET), ("a.yaml", &slice("a", ""))]);
    let (mut st, mut sink) = (state(), Recorder::default());
    let mut conn = FakeConnect::to(fake.cloud());

    let o = cycle(&mut st, &specs.source(), &mut conn, &mut sink).await;
    assert_eq!(o.code(), "applied");
    let CycleOutcome::Applied(r) = &o else {
        panic!("{o:?}")
    };
    assert_eq!(r.plan.summary.create, 1);
    assert_eq!(fake.pools(&cluster()).len(), 1);
    assert_eq!(sink.plans, 1, "the plan with changes went to the sink");
    assert_eq!(sink.fleet, ["a"]);
    assert_eq!(sink.capacity, Some(CapacityNote::default()));

    let before = writes(&fake).len();
    let o = cycle(&mut st, &specs.source(), &mut conn, &mut sink).await;
    assert_eq!(o.code(), "no_changes");
    assert!(matches!(o, CycleOutcome::NoChanges(_)));
    assert_eq!(writes(&fake).len(), before, "a steady state makes no write");
    assert_eq!(sink.plans, 1, "no plan is shown without changes");
    assert_eq!(sink.finished, ["applied", "no_changes"]);
    assert_eq!(sink.timed, ["applied", "no_changes"]);
    assert_eq!(conn.connects, 2);
}

#[tokio::test]
async fn a_missing_directory_plans_nothing_and_keeps_the_last_fleet() {
    let fake = FakeCloud::new();
    let specs = Specs::new(&[("t.yaml", TARGET), ("a.yaml", &slice("a", ""))]);
    let (mut st, mut sink) = (state(), Recorder::default());
    let mut conn = FakeConnect::to(fake.cloud());
    cycle(&mut st, &specs.source(), &mut conn, &mut sink).await;
    let calls = fake.calls().len();

    let gone = DirSource {
        dir: specs.tmp.path().join("nowhere"),
    };
    let o = cycle(&mut st, &gone, &mut conn, &mut sink).await;
    assert_eq!(o.code(), "source_missing");
    assert_eq!(
        fake.calls().len(),
        calls,
        "nothing observed, nothing pruned"
    );
    assert_eq!(sink.fleet, ["a"], "the last fleet stays in force");
    assert_eq!(sink.capacity, None);
    assert_eq!(st.last_fleet().slices.len(), 1);
}

#[tokio::test]
async fn an_absent_configmap_is_a_missing_source_and_its_keys_follow_the_one_rule() {
    let fake = FakeCloud::new();
    let (tx, rx) = tokio::sync::watch::channel(Some(Snapshot::Absent));
    let src = ConfigMapSource {
        name: "specs".into(),
        latest: rx,
    };
    let (mut st, mut sink) = (state(), Recorder::default());
    let mut conn = FakeConnect::to(fake.cloud());
    let o = cycle(&mut st, &src, &mut conn, &mut sink).await;
    assert_eq!(o.code(), "source_missing");
    assert_eq!(sink.source, "ConfigMap specs");
    assert_eq!(conn.connects, 0);

    let data: BTreeMap<String, Vec<u8>> = [
        ("t.yaml", TARGET.to_string()),
        ("a.yaml", slice("a", "")),
        ("notes.txt", "not a spec".to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.into_bytes()))
    .collect();
    tx.send_replace(Some(Snapshot::Data(data)));
    let o = cycle(&mut st, &src, &mut conn, &mut sink).await;
    assert_eq!(o.code(), "applied");
    assert!(sink.skipped.is_empty(), "{:?}", sink.skipped);
    assert_eq!(fake.pools(&cluster()).len(), 1);
}

#[tokio::test]
async fn an_unreadable_source_is_a_source_error() {
    let fake = FakeCloud::new();
    let bad: BTreeMap<String, Vec<u8>> = [("a.yaml".to_string(), vec![0xff, 0xfe])].into();
    let (_tx, rx) = tokio::sync::watch::channel(Some(Snapshot::Data(bad)));
    let src = ConfigMapSource {
        name: "specs".into(),
        latest: rx,
    };
    let (mut st, mut sink) = (state(), Recorder::default());
    let mut conn = FakeConnect::to(fake.cloud());
    let o = cycle(&mut st, &src, &mut conn, &mut sink).await;
    assert_eq!(o.code(), "source_error");
    let CycleOutcome::SourceUnreadable(e) = &o else {
        panic!("{o:?}")
    };
    assert!(e.to_string().contains("specs/a.yaml is not UTF-8"), "{e}");
    assert_eq!(sink.resolved, 0);
    assert!(fake.calls().is_empty());
}

#[tokio::test]
async fn specs_no_valid_fleet_can_be_made_of_are_invalid_specs() {
    let fake = FakeCloud::new();
    let specs = Specs::new(&[("t.yaml", TARGET), ("a.yaml", &slice("a", ""))]);
    let (mut st, mut sink) = (state(), Recorder::default());
    let mut conn = FakeConnect::to(fake.cloud());
    cycle(&mut st, &specs.source(), &mut conn, &mut sink).await;
    let calls = fake.calls().len();
    // a.yaml broken, and the Target its last good version needs is gone.
    specs.set(&[("a.yaml", &slice("a", "  replicas: -1\n"))]);
    let o = cycle(&mut st, &specs.source(), &mut conn, &mut sink).await;
    assert_eq!(o.code(), "invalid_specs", "{o:?}");
    let CycleOutcome::InvalidSpecs(d) = &o else {
        panic!("{o:?}")
    };
    assert!(!d.is_empty());
    assert_eq!(fake.calls().len(), calls, "nothing observed");
    assert_eq!(sink.fleet, ["a"], "the last fleet stays in force");
}

#[tokio::test]
async fn an_empty_directory_is_refused_unless_allowed() {
    let fake = FakeCloud::new();
    let specs = Specs::new(&[("README.md", "not a spec")]);
    let (mut st, mut sink) = (state(), Recorder::default());
    let mut conn = FakeConnect::to(fake.cloud());
    let o = cycle(&mut st, &specs.source(), &mut conn, &mut sink).await;
    assert_eq!(o.code(), "empty_source");
    assert!(matches!(o, CycleOutcome::EmptySource));
    assert_eq!(conn.connects, 0);

    let mut allowed = CycleState::new(
        ReconcileOptions {
            plan: PlanOptions {
                allow_empty_source: true,
                ..PlanOptions::default()
            },
            ..options(10)
        },
        Arc::new(AtomicBool::new(false)),
    );
    let o = cycle(&mut allowed, &specs.source(), &mut conn, &mut sink).await;
    assert_eq!(o.code(), "no_changes", "{o:?}");
}

#[tokio::test]
async fn targets_alone_over_live_slices_are_rejected_by_the_planner() {
    let fake = FakeCloud::new();
    let specs = Specs::new(&[("t.yaml", TARGET), ("a.yaml", &slice("a", ""))]);
    let (mut st, mut sink) = (state(), Recorder::default());
    let mut conn = FakeConnect::to(fake.cloud());
    cycle(&mut st, &specs.source(), &mut conn, &mut sink).await;

    specs.set(&[("t.yaml", TARGET)]);
    let o = cycle(&mut st, &specs.source(), &mut conn, &mut sink).await;
    assert_eq!(o.code(), "empty_source");
    assert!(
        matches!(o, CycleOutcome::Rejected(ReconcileError::Plan(_))),
        "{o:?}"
    );
    assert_eq!(fake.pools(&cluster()).len(), 1, "nothing pruned");
    assert!(sink.capacity.is_some(), "it planned");
}

#[tokio::test]
async fn an_unreachable_cloud_is_connect_failed() {
    let specs = Specs::new(&[("t.yaml", TARGET), ("a.yaml", &slice("a", ""))]);
    let (mut st, mut sink) = (state(), Recorder::default());
    let mut conn = FakeConnect {
        cloud: None,
        connects: 0,
    };
    let o = cycle(&mut st, &specs.source(), &mut conn, &mut sink).await;
    assert_eq!(o.code(), "connect_failed");
    let CycleOutcome::ConnectFailed(e) = &o else {
        panic!("{o:?}")
    };
    assert_eq!(e.to_string(), "cannot reach the cloud");
    assert_eq!(sink.plans, 0);
}

#[tokio::test]
async fn a_failed_listing_leaves_its_target_unobserved() {
    let fake = FakeCloud::new();
    fake.fail_next("list_node_pools", Fault::Unavailable);
    let specs = Specs::new(&[("t.yaml", TARGET), ("a.yaml", &slice("a", ""))]);
    let (mut st, mut sink) = (state(), Recorder::default());
    let mut conn = FakeConnect::to(fake.cloud());
    let o = cycle(&mut st, &specs.source(), &mut conn, &mut sink).await;
    assert_eq!(o.code(), "unobserved", "{o:?}");
    let Some(r) = o.report() else { panic!("{o:?}") };
    assert_eq!(r.plan.unobserved.len(), 1, "{:?}", r.plan.unobserved);
    assert_eq!(r.plan.unobserved[0].why.code, "target_unreachable");
    assert_eq!(r.plan.unobserved[0].slices, vec!["a".to_string()]);
    assert!(fake.calls_of("create_node_pool").is_empty());
    // The next cycle observes it and converges.
    let o = cycle(&mut st, &specs.source(), &mut conn, &mut sink).await;
    assert_eq!(o.code(), "applied", "{o:?}");
    assert_eq!(fake.calls_of("create_node_pool").len(), 1);
}

/// The controller's cycle, like `apply`: a GKE cluster whose Kubernetes
/// API rejects slicectl (401) leaves its Target unobserved
/// (`target_forbidden`) and no action is taken there, while the other
/// Target converges in the same cycle.
#[tokio::test]
async fn a_cluster_api_that_rejects_slicectl_leaves_only_its_target_alone() {
    let fake = FakeCloud::new();
    let other = "apiVersion: slicectl.dev/v1alpha1\nkind: Target\nmetadata:\n  name: u\nspec:\n  project: unit-project\n  zone: us-central1-b\n  ownerId: unit\n  gke:\n    location: us-central1\n    name: locked\n";
    let specs = Specs::new(&[
        ("t.yaml", TARGET),
        ("u.yaml", other),
        ("a.yaml", &slice("a", "")),
        ("b.yaml", &slice("b", "").replace("target: t", "target: u")),
    ]);
    let kube = crate::kube::fake::FakeKube::new();
    let locked = crate::resource::KubeRef::gke(&ClusterRef {
        name: "locked".into(),
        ..cluster()
    });
    kube.set_failing(&locked, Some(crate::kube::fake::KubeFault::Unauthorized));
    let cloud = Cloud {
        kube: kube.clone(),
        ..fake.cloud()
    };
    let (mut st, mut sink) = (state(), Recorder::default());
    let mut conn = FakeConnect::to(cloud);
    let o = cycle(&mut st, &specs.source(), &mut conn, &mut sink).await;
    assert_eq!(o.code(), "unobserved", "{o:?}");
    let Some(r) = o.report() else { panic!("{o:?}") };
    assert_eq!(r.plan.unobserved.len(), 1, "{:?}", r.plan.unobserved);
    let u = &r.plan.unobserved[0];
    assert_eq!(
        (u.target.as_str(), u.why.code.as_str()),
        ("u", "target_forbidden")
    );
    assert!(u.why.cause.contains("401"), "{}", u.why.cause);
    assert_eq!(u.slices, vec!["b".to_string()]);
    assert_eq!(
        fake.calls_of("create_node_pool"),
        vec!["create_node_pool a-0"]
    );
    assert_eq!(fake.pools(&cluster()).len(), 1, "a converged");
}

#[tokio::test]
async fn more_deletes_than_the_cap_are_too_many_destructive() {
    let fake = FakeCloud::new();
    let specs = Specs::new(&[
        ("t.yaml", TARGET),
        ("a.yaml", &slice("a", "")),
        ("b.yaml", &slice("b", "")),
    ]);
    let mut conn = FakeConnect::to(fake.cloud());
    let mut sink = Recorder::default();
    let mut st = CycleState::new(options(0), Arc::new(AtomicBool::new(false)));
    assert_eq!(
        cycle(&mut st, &specs.source(), &mut conn, &mut sink)
            .await
            .code(),
        "applied"
    );
    specs.set(&[("t.yaml", TARGET), ("a.yaml", &slice("a", ""))]);
    let o = cycle(&mut st, &specs.source(), &mut conn, &mut sink).await;
    assert_eq!(o.code(), "too_many_destructive", "{o:?}");
    assert!(fake.calls_of("delete_node_pool").is_empty());
}

#[tokio::test]
async fn a_name_taken_by_another_owner_is_refused_and_the_rest_applied() {
    let fake = FakeCloud::new();
    fake.seed_pool(
        &cluster(),
        NodePool {
            name: "b-0".into(),
            ..Default::default()
        },
    );
    let specs = Specs::new(&[
        ("t.yaml", TARGET),
        ("a.yaml", &slice("a", "")),
        ("b.yaml", &slice("b", "")),
    ]);
    let (mut st, mut sink) = (state(), Recorder::default());
    let mut conn = FakeConnect::to(fake.cloud());
    let o = cycle(&mut st, &specs.source(), &mut conn, &mut sink).await;
    assert_eq!(o.code(), "refused", "{o:?}");
    let CycleOutcome::Refused(r) = &o else {
        panic!("{o:?}")
    };
    let codes: Vec<(&str, &str)> = r
        .plan
        .refused
        .iter()
        .map(|x| (x.slice.as_str(), x.code.as_str()))
        .collect();
    assert_eq!(codes, [("b", "name_taken")]);
    assert_eq!(fake.calls_of("create_node_pool").len(), 1, "a is created");
}

#[tokio::test]
async fn a_failed_create_is_failed_and_the_next_cycle_converges() {
    let fake = FakeCloud::new();
    fake.fail_next("create_node_pool", Fault::Unavailable);
    let specs = Specs::new(&[("t.yaml", TARGET), ("a.yaml", &slice("a", ""))]);
    let (mut st, mut sink) = (state(), Recorder::default());
    let mut conn = FakeConnect::to(fake.cloud());
    let o = cycle(&mut st, &specs.source(), &mut conn, &mut sink).await;
    assert_eq!(o.code(), "failed", "{o:?}");
    let r = o.report().unwrap();
    assert_eq!(r.slices[0].failed[0].code, "cloud_unavailable");
    let o = cycle(&mut st, &specs.source(), &mut conn, &mut sink).await;
    assert_eq!(o.code(), "applied");
}

#[tokio::test]
async fn a_stockout_holds_the_slice_back_while_the_others_converge() {
    let fake = FakeCloud::new();
    fake.fail_next("create_node_pool", Fault::Stockout);
    let specs = Specs::new(&[("t.yaml", TARGET), ("big.yaml", &big())]);
    let (mut st, mut sink) = (tracked_state(), Recorder::default());
    let mut conn = FakeConnect::to(fake.cloud());

    let o = cycle(&mut st, &specs.source(), &mut conn, &mut sink).await;
    assert_eq!(o.code(), "failed", "{o:?}");
    assert_eq!(
        sink.capacity.as_ref().map(|c| c.unavailable),
        Some(1),
        "{o:?}"
    );
    assert_eq!(st.capacity().map(|t| t.failures("big")), Some(1));
    let creates = fake.calls_of("create_node_pool").len();

    // Within the backoff: big is held, a new slice converges.
    specs.set(&[
        ("t.yaml", TARGET),
        ("big.yaml", &big()),
        ("tiny.yaml", &slice("tiny", "")),
    ]);
    let o = cycle(&mut st, &specs.source(), &mut conn, &mut sink).await;
    assert_eq!(o.code(), "capacity_held", "{o:?}");
    let note = sink.capacity.clone().unwrap();
    assert_eq!(note.held.len(), 1);
    assert_eq!(note.held[0].slice, "big");
    assert_eq!(note.held[0].code(), "stockout");
    assert_eq!(note.held[0].left_out, ["create slice.big[0].node_pool"]);
    assert_eq!(
        fake.calls_of("create_node_pool").len(),
        creates + 1,
        "tiny only: no retry of big inside its backoff"
    );
    let r = o.report().unwrap();
    let big = r.slices.iter().find(|s| s.slice == "big").unwrap();
    assert_eq!(big.failed[0].code, "stockout", "its status says why");
    assert!(big.failed[0].message.contains("held back"));
}

#[tokio::test]
async fn a_file_that_never_was_valid_suspends_pruning() {
    let fake = FakeCloud::new();
    let specs = Specs::new(&[
        ("t.yaml", TARGET),
        ("a.yaml", &slice("a", "")),
        ("b.yaml", &slice("b", "")),
    ]);
    let (mut st, mut sink) = (state(), Recorder::default());
    let mut conn = FakeConnect::to(fake.cloud());
    cycle(&mut st, &specs.source(), &mut conn, &mut sink).await;

    // b is gone from the specs, and a new file is broken: it may have
    // been b's new home, so b is not deleted.
    specs.set(&[
        ("t.yaml", TARGET),
        ("a.yaml", &slice("a", "")),
        ("new.yaml", "kind: Slice\nmetadata: [broken\n"),
    ]);
    let o = cycle(&mut st, &specs.source(), &mut conn, &mut sink).await;
    assert_eq!(o.code(), "pruning_suspended", "{o:?}");
    let CycleOutcome::PruningSuspended { report, left_out } = &o else {
        panic!("{o:?}")
    };
    assert_eq!(left_out.len(), 1);
    assert!(left_out[0].ends_with("new.yaml"), "{left_out:?}");
    let refused: Vec<(&str, &str)> = report
        .plan
        .refused
        .iter()
        .map(|r| (r.slice.as_str(), r.code.as_str()))
        .collect();
    assert_eq!(refused, [("b", PRUNING_SUSPENDED)]);
    assert!(report.slices.iter().any(|s| s.slice == "b" && !s.ok()));
    assert!(fake.calls_of("delete_node_pool").is_empty());
    assert_eq!(sink.plans, 2, "the declined plan was shown");
}

#[tokio::test]
async fn a_held_file_names_its_slices_as_invalid() {
    let fake = FakeCloud::new();
    let specs = Specs::new(&[("t.yaml", TARGET), ("a.yaml", &slice("a", ""))]);
    let (mut st, mut sink) = (state(), Recorder::default());
    let mut conn = FakeConnect::to(fake.cloud());
    cycle(&mut st, &specs.source(), &mut conn, &mut sink).await;
    specs.set(&[
        ("t.yaml", TARGET),
        ("a.yaml", &slice("a", "  replicas: -1\n")),
    ]);
    let o = cycle(&mut st, &specs.source(), &mut conn, &mut sink).await;
    assert_eq!(o.code(), "no_changes", "its last good version stands");
    assert_eq!(sink.invalid.keys().collect::<Vec<_>>(), ["a"]);
}

/// Sources are read the same way the loop sees them: a directory's
/// skipped entries reach the sink.
#[tokio::test]
async fn a_near_miss_in_the_directory_is_reported_skipped() {
    let fake = FakeCloud::new();
    let specs = Specs::new(&[
        ("t.yaml", TARGET),
        ("a.yaml", &slice("a", "")),
        ("b.yaml.bak", &slice("b", "")),
    ]);
    let (mut st, mut sink) = (state(), Recorder::default());
    let mut conn = FakeConnect::to(fake.cloud());
    let o = cycle(&mut st, &specs.source(), &mut conn, &mut sink).await;
    assert_eq!(o.code(), "applied");
    let names: Vec<&str> = sink
        .skipped
        .iter()
        .filter_map(|p| Path::file_name(p)?.to_str())
        .collect();
    assert_eq!(names, ["b.yaml.bak"]);
}

/// The settle period through the cycle (paused time): the first read's
/// creates go ahead; a removal is held (`settling`, a refusal with the code
/// and the time to plan again) while a create in the same change goes
/// ahead; held again before the period is over; pruned at its end. A
/// ConfigMap (atomic) is not held.
#[tokio::test(start_paused = true)]
async fn a_removal_waits_for_the_settle_period_and_creates_do_not() {
    let fake = FakeCloud::new();
    let specs = Specs::new(&[
        ("t.yaml", TARGET),
        ("a.yaml", &slice("a", "")),
        ("b.yaml", &slice("b", "")),
    ]);
    let period = Duration::from_secs(10);
    let (mut st, mut sink) = (state().with_settle(period), Recorder::default());
    let mut conn = FakeConnect::to(fake.cloud());
    let o = cycle(&mut st, &specs.source(), &mut conn, &mut sink).await;
    assert_eq!(o.code(), "applied", "creates do not wait, even at start");
    assert_eq!(fake.pools(&cluster()).len(), 2);
    assert_eq!(st.wake_at(), None);

    tokio::time::advance(Duration::from_secs(60)).await;
    specs.set(&[
        ("t.yaml", TARGET),
        ("a.yaml", &slice("a", "")),
        ("c.yaml", &slice("c", "")),
    ]);
    let changed = tokio::time::Instant::now();
    let o = cycle(&mut st, &specs.source(), &mut conn, &mut sink).await;
    assert_eq!(o.code(), "settling", "{o:?}");
    let r = o.report().unwrap();
    assert_eq!(r.plan.refused.len(), 1, "{:?}", r.plan.refused);
    assert_eq!(r.plan.refused[0].code, SETTLING);
    assert_eq!(r.plan.refused[0].slice, "b");
    assert_eq!(r.plan.refused[0].action, ActionKind::Delete);
    assert!(
        r.plan.refused[0].message.contains("settle period (10s)"),
        "{}",
        r.plan.refused[0].message
    );
    let mut pools: Vec<String> = fake.pools(&cluster()).into_iter().map(|p| p.name).collect();
    pools.sort();
    assert_eq!(pools, ["a-0", "b-0", "c-0"], "c created, b kept");
    assert_eq!(st.wake_at(), Some((changed + period, Trigger::Settle)));

    // Before the period is over: held again.
    tokio::time::advance(Duration::from_secs(5)).await;
    let o = cycle(&mut st, &specs.source(), &mut conn, &mut sink).await;
    assert_eq!(o.code(), "settling");
    assert_eq!(fake.pools(&cluster()).len(), 3);
    assert_eq!(st.wake_at(), Some((changed + period, Trigger::Settle)));

    // At its end: pruned.
    tokio::time::advance(Duration::from_secs(5)).await;
    let o = cycle(&mut st, &specs.source(), &mut conn, &mut sink).await;
    assert_eq!(o.code(), "applied", "{o:?}");
    assert_eq!(fake.pools(&cluster()).len(), 2);
    assert_eq!(st.wake_at(), None);

    // A ConfigMap is written whole: its removal is not held.
    let data = |names: &[&str]| -> BTreeMap<String, Vec<u8>> {
        let mut d: BTreeMap<String, Vec<u8>> =
            [("t.yaml".to_string(), TARGET.as_bytes().to_vec())].into();
        for n in names {
            d.insert(format!("{n}.yaml"), slice(n, "").into_bytes());
        }
        d
    };
    let (tx, rx) = tokio::sync::watch::channel(Some(Snapshot::Data(data(&["a", "c"]))));
    let src = ConfigMapSource {
        name: "specs".into(),
        latest: rx,
    };
    let o = cycle(&mut st, &src, &mut conn, &mut sink).await;
    assert_eq!(o.code(), "no_changes", "{o:?}");
    tx.send(Some(Snapshot::Data(data(&["a"])))).unwrap();
    let o = cycle(&mut st, &src, &mut conn, &mut sink).await;
    assert_eq!(o.code(), "applied", "{o:?}");
    assert_eq!(fake.pools(&cluster()).len(), 1);
}

/// `--configmap-selector`: every matching ConfigMap is read as one fleet,
/// its files shown as `CONFIGMAP/KEY`; none matching is a missing source
/// (nothing planned, nothing pruned); a ConfigMap vanishing from the set is
/// a half-written source: its slices' deletes wait for the settle period,
/// and it coming back within it prunes nothing.
#[tokio::test(start_paused = true)]
async fn a_set_of_configmaps_is_one_fleet_and_a_vanished_one_prunes_nothing_at_once() {
    use crate::controller::configmap::Selected;
    let fake = FakeCloud::new();
    let cm = |files: &[(&str, String)]| -> BTreeMap<String, Vec<u8>> {
        files
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone().into_bytes()))
            .collect()
    };
    let platform = cm(&[("target.yaml", TARGET.to_string())]);
    let llm = cm(&[("a.yaml", slice("a", ""))]);
    let vision = cm(&[("b.yaml", slice("b", "")), ("b.yaml.bak", "x".into())]);
    let set = |names: &[(&str, &BTreeMap<String, Vec<u8>>)]| {
        Some(Selected(
            names
                .iter()
                .map(|(n, d)| (n.to_string(), (*d).clone()))
                .collect(),
        ))
    };
    let (tx, rx) = tokio::sync::watch::channel(Some(Selected::default()));
    let src = ConfigMapSetSource {
        selector: "slicectl.dev/specs=true".into(),
        latest: rx,
    };
    let period = Duration::from_secs(10);
    let (mut st, mut sink) = (state().with_settle(period), Recorder::default());
    let mut conn = FakeConnect::to(fake.cloud());

    let o = cycle(&mut st, &src, &mut conn, &mut sink).await;
    assert_eq!(o.code(), "source_missing", "none matching: {o:?}");
    assert_eq!(sink.source, "ConfigMaps matching slicectl.dev/specs=true");
    assert_eq!(conn.connects, 0);

    let all = set(&[("platform", &platform), ("llm", &llm), ("vision", &vision)]);
    tx.send_replace(all.clone());
    let o = cycle(&mut st, &src, &mut conn, &mut sink).await;
    assert_eq!(o.code(), "applied", "{o:?}");
    let mut pools: Vec<String> = fake.pools(&cluster()).into_iter().map(|p| p.name).collect();
    pools.sort();
    assert_eq!(pools, ["a-0", "b-0"], "one fleet from three ConfigMaps");
    let skipped: Vec<String> = sink
        .skipped
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    assert_eq!(skipped, ["vision/b.yaml.bak"], "keys named by ConfigMap");

    // `vision` vanishes (deleted to be created again): its slice is not
    // pruned at once...
    tokio::time::advance(Duration::from_secs(60)).await;
    tx.send_replace(set(&[("platform", &platform), ("llm", &llm)]));
    let o = cycle(&mut st, &src, &mut conn, &mut sink).await;
    assert_eq!(o.code(), "settling", "{o:?}");
    assert_eq!(fake.pools(&cluster()).len(), 2);
    // ...and comes back within the period: nothing was pruned.
    tokio::time::advance(Duration::from_secs(3)).await;
    tx.send_replace(all);
    let o = cycle(&mut st, &src, &mut conn, &mut sink).await;
    assert_eq!(o.code(), "no_changes", "{o:?}");
    assert_eq!(fake.pools(&cluster()).len(), 2);

    // An invalid key is named with its ConfigMap.
    let broken = cm(&[("b.yaml", "kind: [".to_string())]);
    tx.send_replace(set(&[
        ("platform", &platform),
        ("llm", &llm),
        ("vision", &broken),
    ]));
    let o = cycle(&mut st, &src, &mut conn, &mut sink).await;
    assert_eq!(o.code(), "no_changes", "its last good version stands");
    let why = sink.invalid.get("b").cloned().unwrap_or_default();
    assert!(why.contains("vision/b.yaml"), "{:?}", sink.invalid);
    assert_eq!(fake.pools(&cluster()).len(), 2);
}

/// A cycle that kept a workload slice for its grace period asks for the
/// next cycle at the grace's end (at once when that is past), so the slice
/// is released then and not at the next resync.
#[tokio::test(start_paused = true)]
async fn a_slice_kept_for_its_grace_asks_for_a_cycle_at_the_graces_end() {
    let mut st = state().with_settle(Duration::from_secs(10));
    assert_eq!(st.wake_at(), None);
    st.last_demand.release_due = Some(Timestamp::now() + Duration::from_secs(30));
    let (at, trigger) = st.wake_at().expect("a wake at the grace's end");
    assert_eq!(trigger, Trigger::Grace);
    let left = at - tokio::time::Instant::now();
    assert!(
        left <= Duration::from_secs(30) && left > Duration::from_secs(25),
        "{left:?}"
    );
    st.last_demand.release_due = Some(Timestamp::now() - Duration::from_secs(5));
    let (at, _) = st.wake_at().expect("a wake");
    assert!(
        at <= tokio::time::Instant::now(),
        "a grace already over: at once"
    );
}

/// Issue 36, case 7: a stockout's backoff that ends asks for a cycle at its
/// end, as the grace does; a 10-minute resync would otherwise leave the
/// slice in ERROR for minutes after the capacity came back.
#[tokio::test(start_paused = true)]
async fn a_backoff_that_ends_asks_for_a_cycle_at_its_end() {
    let mut st = state().with_capacity(crate::controller::capacity::CapacityTracker::new(
        RetryPolicy::default(),
    ));
    assert_eq!(st.wake_at(), None);
    let offering = crate::controller::capacity::Offering {
        project: "p".into(),
        zone: "us-central1-b".into(),
        machine_type: "ct6e-standard-4t".into(),
        capacity: "on-demand".into(),
    };
    let now = tokio::time::Instant::now();
    st.capacity.as_mut().unwrap().record_failure(
        "train",
        offering,
        "GCE_STOCKOUT",
        now,
        Timestamp::now(),
    );
    let (at, trigger) = st.wake_at().expect("a wake at the backoff's end");
    assert_eq!(trigger, Trigger::Backoff);
    assert_eq!(
        at - now,
        Duration::from_secs(30),
        "the first backoff is 30 s"
    );
    assert_eq!(Trigger::Backoff.as_str(), "backoff");
    // Once it is over, nothing more to wake for.
    tokio::time::advance(Duration::from_secs(31)).await;
    assert_eq!(st.wake_at(), None);
}
