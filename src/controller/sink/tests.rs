#![cfg(test)]
use super::*;
use crate::cloud::fake::FakeCloud;
use crate::cycle::tests::{FakeConnect, Quiet, Specs, TARGET, cluster, slice, tracked_state};
use crate::cycle::{CycleState, DirSource, run_cycle};
use crate::watch::Trigger;

/// The status objects in memory: what was written is what exists.
#[derive(Default)]
struct FakeStore {
    sets: Mutex<Vec<StatusSet>>,
}

impl StatusStore for FakeStore {
    async fn existing(&self) -> Result<BTreeMap<String, SliceStatusStatus>, WriteError> {
        let sets = self.sets.lock().unwrap();
        Ok(sets
            .last()
            .map(|s| {
                s.objects
                    .iter()
                    .map(|o| (o.name.clone(), o.status.clone()))
                    .collect()
            })
            .unwrap_or_default())
    }

    async fn write(&self, set: &StatusSet) -> Result<WriteSummary, WriteError> {
        self.sets.lock().unwrap().push(set.clone());
        Ok(WriteSummary::default())
    }
}

struct Silent;
impl CycleSink for Silent {
    fn progress(&mut self) -> Arc<dyn Progress> {
        Arc::new(Quiet)
    }
    async fn finished(&mut self, _: &CycleEnd<'_>) {}
}

fn sink() -> ControllerSink<Silent, FakeStore> {
    ControllerSink {
        printer: Silent,
        metrics: Metrics::new(),
        status: FakeStore::default(),
        stall_after: Duration::from_secs(600),
        broken_since: Arc::default(),
    }
}

/// `(type, status, reason)` of each condition of `name`'s object in
/// the last set written.
fn conditions(s: &ControllerSink<Silent, FakeStore>, name: &str) -> Vec<(String, String, String)> {
    let sets = s.status.sets.lock().unwrap();
    let o = sets
        .last()
        .and_then(|set| set.objects.iter().find(|o| o.name == name))
        .unwrap_or_else(|| panic!("no object {name}"));
    o.status
        .conditions
        .iter()
        .map(|c| (c.type_.clone(), c.status.clone(), c.reason.clone()))
        .collect()
}

fn metric(s: &ControllerSink<Silent, FakeStore>, line_start: &str) -> Option<f64> {
    s.metrics
        .encode()
        .unwrap()
        .lines()
        .find(|l| l.starts_with(line_start))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

async fn cycle(
    st: &mut CycleState,
    src: &DirSource,
    conn: &mut FakeConnect,
    s: &mut ControllerSink<Silent, FakeStore>,
) -> &'static str {
    run_cycle(st, src, conn, s, Trigger::Resync).await.code()
}

#[tokio::test]
async fn each_outcome_is_counted_and_reported_in_the_status_objects() {
    let fake = FakeCloud::new();
    let specs = Specs::new(&[
        ("t.yaml", TARGET),
        ("a.yaml", &slice("a", "")),
        ("b.yaml", &slice("b", "")),
    ]);
    let (mut st, mut s) = (tracked_state(), sink());
    let mut conn = FakeConnect::to(fake.cloud());

    assert_eq!(
        cycle(&mut st, &specs.source(), &mut conn, &mut s).await,
        "applied"
    );
    assert_eq!(
        metric(&s, "slicectl_reconcile_cycles_total{result=\"applied\"}"),
        Some(1.0)
    );
    assert!(
        conditions(&s, "a").contains(&("Ready".into(), "True".into(), "Converged".into())),
        "{:?}",
        conditions(&s, "a")
    );
    assert_eq!(
        metric(&s, "slicectl_slices{condition=\"Ready\"}"),
        Some(2.0)
    );
    assert_eq!(metric(&s, "slicectl_capacity_held_slices"), Some(0.0));

    // The source gone: refused, counted, every object kept and Stalled.
    let gone = DirSource {
        dir: specs.tmp.path().join("unmounted"),
    };
    assert_eq!(
        cycle(&mut st, &gone, &mut conn, &mut s).await,
        "source_missing"
    );
    assert_eq!(
        metric(
            &s,
            "slicectl_refused_actions_total{code=\"source_missing\"}"
        ),
        Some(1.0)
    );
    for name in ["a", "b"] {
        assert!(
            conditions(&s, name).contains(&("Stalled".into(), "True".into(), "Refused".into())),
            "{name}: {:?}",
            conditions(&s, name)
        );
    }

    // A file never valid: b's delete waits, Refused, and the refusal is
    // counted as the cycle's result, not per action.
    specs.set(&[
        ("t.yaml", TARGET),
        ("a.yaml", &slice("a", "")),
        ("new.yaml", "kind: Slice\nmetadata: [broken\n"),
    ]);
    assert_eq!(
        cycle(&mut st, &specs.source(), &mut conn, &mut s).await,
        "pruning_suspended"
    );
    assert!(
        s.broken_since.lock().unwrap().is_some(),
        "the specs are broken"
    );
    assert_eq!(
        metric(
            &s,
            "slicectl_reconcile_cycles_total{result=\"pruning_suspended\"}"
        ),
        Some(1.0)
    );
    assert_eq!(
        metric(
            &s,
            "slicectl_refused_actions_total{code=\"pruning_suspended\"}"
        ),
        None
    );
    assert!(
        conditions(&s, "b").iter().any(|c| c.2 == "Refused"),
        "{:?}",
        conditions(&s, "b")
    );
    assert_eq!(fake.pools(&cluster()).len(), 2, "nothing deleted");

    // Fixed: b's delete goes, the specs are whole again.
    specs.set(&[("t.yaml", TARGET), ("a.yaml", &slice("a", ""))]);
    assert_eq!(
        cycle(&mut st, &specs.source(), &mut conn, &mut s).await,
        "applied"
    );
    assert!(s.broken_since.lock().unwrap().is_none());
    let sets = s.status.sets.lock().unwrap();
    let names: Vec<&str> = sets[sets.len() - 1]
        .objects
        .iter()
        .map(|o| o.name.as_str())
        .collect();
    assert_eq!(names, ["a"], "b's object goes with b");
}

#[tokio::test]
async fn a_cycle_that_reads_nothing_writes_no_status() {
    let specs = Specs::new(&[("t.yaml", TARGET), ("a.yaml", &slice("a", ""))]);
    let (mut st, mut s) = (tracked_state(), sink());
    let mut conn = FakeConnect {
        cloud: None,
        connects: 0,
    };
    assert_eq!(
        cycle(&mut st, &specs.source(), &mut conn, &mut s).await,
        "connect_failed"
    );
    assert!(s.status.sets.lock().unwrap().is_empty());
    assert_eq!(
        metric(
            &s,
            "slicectl_reconcile_cycles_total{result=\"connect_failed\"}"
        ),
        Some(1.0)
    );
}

/// Moved from `tests/e2e/e2e_controller.rs`: the specs left with their
/// Targets alone. The planner's empty-source guard refuses (no pool
/// goes), the objects of both live slices stay, Stalled and Refused
/// with `[empty_source]` and their summary, instead of being deleted;
/// with the slices back they are Ready again and nothing is created
/// again.
#[tokio::test]
async fn specs_left_with_their_targets_alone_keep_every_status_object() {
    let fake = FakeCloud::new();
    let both = [
        ("t.yaml", TARGET),
        ("alpha.yaml", &slice("alpha", "")),
        ("beta.yaml", &slice("beta", "")),
    ];
    let specs = Specs::new(&both);
    let (mut st, mut s) = (tracked_state(), sink());
    let mut conn = FakeConnect::to(fake.cloud());
    assert_eq!(
        cycle(&mut st, &specs.source(), &mut conn, &mut s).await,
        "applied"
    );

    specs.set(&[("t.yaml", TARGET)]);
    for _ in 0..2 {
        assert_eq!(
            cycle(&mut st, &specs.source(), &mut conn, &mut s).await,
            "empty_source"
        );
    }
    assert_eq!(fake.pools(&cluster()).len(), 2, "no pool goes");
    assert_eq!(
        metric(&s, "slicectl_refused_actions_total{code=\"empty_source\"}"),
        Some(2.0)
    );
    {
        let sets = s.status.sets.lock().unwrap();
        let set = sets.last().unwrap();
        let names: Vec<&str> = set.objects.iter().map(|o| o.name.as_str()).collect();
        assert_eq!(names, ["alpha", "beta"]);
        for o in &set.objects {
            let stalled = o
                .status
                .conditions
                .iter()
                .find(|c| c.type_ == "Stalled")
                .unwrap();
            assert_eq!(stalled.status, "True");
            assert!(
                stalled.message.starts_with("[empty_source]"),
                "{}",
                stalled.message
            );
            let ready = o
                .status
                .conditions
                .iter()
                .find(|c| c.type_ == "Ready")
                .unwrap();
            assert_eq!(ready.reason, "Refused");
            assert_eq!(
                o.status.slice.as_ref().map(|x| x.target.as_str()),
                Some("t"),
                "{} keeps its summary",
                o.name
            );
        }
    }

    specs.set(&both);
    assert_eq!(
        cycle(&mut st, &specs.source(), &mut conn, &mut s).await,
        "no_changes"
    );
    for name in ["alpha", "beta"] {
        assert!(conditions(&s, name).contains(&(
            "Ready".into(),
            "True".into(),
            "Converged".into()
        )));
    }
    assert_eq!(
        fake.calls_of("create_node_pool").len(),
        2,
        "no pool was created again"
    );
}
