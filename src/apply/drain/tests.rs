#![cfg(test)]
use std::collections::BTreeSet;
use std::sync::Arc;

use super::*;
use crate::cloud::fake::FakeCloud;
use crate::kube::fake::FakeKube;
use crate::plan::workload::Disrupting;
use crate::plan::{ActionKind, KindId, Reason, ResourceId, Scope, SliceRef};
use crate::resource::KubeRef;

fn kube() -> KubeRef {
    KubeRef {
        endpoint: "10.0.0.2:6443".into(),
    }
}

fn setup() -> (Arc<FakeKube>, Cloud) {
    let fake = FakeKube::new();
    let k = kube();
    fake.join_node(&k, "n1", "gce://p/z/n1", 4);
    fake.join_node(&k, "n2", "gce://p/z/n2", 4);
    fake.seed_pod(&k, "ml", "train-0", "n1", &[], &[], Some(("Job", "train")));
    fake.seed_pod(
        &k,
        "kube-system",
        "plugin-n1",
        "n1",
        &[],
        &[],
        Some(("DaemonSet", "tpu-device-plugin")),
    );
    fake.seed_pod(&k, "ml", "other", "n2", &[], &[], None);
    let cloud = Cloud {
        kube: fake.clone(),
        ..FakeCloud::new().cloud()
    };
    (fake, cloud)
}

fn action(timeout_secs: u64, since: Option<Timestamp>) -> Action {
    Action {
        id: ResourceId {
            scope: Scope::Kube(kube()),
            kind: KindId("mig"),
            name: "llm-0".into(),
        },
        owner: SliceRef {
            slice: "llm".into(),
            replica: 0,
        },
        action: ActionKind::Replace,
        reason: Reason::StoredHashDiffers,
        changes: Vec::new(),
        groups: BTreeSet::new(),
        before: None,
        desired: None,
        operation: None,
        timeout: Duration::from_secs(60),
        noun: "managed instance group",
        disruption: Some(Disrupting {
            how: DisruptHow::Drain,
            pods: Vec::new(),
            kube: Some(kube()),
            nodes: vec!["n1".into()],
            drain_timeout_secs: timeout_secs,
            draining_since: since,
            windows: Vec::new(),
        }),
        recheck: None,
    }
}

/// Checks that list every `ms` milliseconds, on the wall clock, never
/// stopped.
fn every(ms: u64) -> Checks {
    Checks {
        poll: Duration::from_millis(ms),
        stop: Arc::new(|| false),
        clock: Arc::new(Timestamp::now),
    }
}

#[tokio::test]
async fn a_drain_cordons_marks_evicts_and_waits_until_idle() {
    let (fake, cloud) = setup();
    let out = run(&cloud, &action(60, None), &every(10)).await.unwrap();
    assert_eq!(out, StepOutcome::Done);
    let node = fake.node(&kube(), "n1").unwrap();
    assert!(crate::kube::is_cordoned(&node));
    let since = node
        .metadata
        .labels
        .as_ref()
        .unwrap()
        .get(DRAINING_SINCE)
        .cloned();
    assert!(since.is_some_and(|s| s.parse::<i64>().is_ok()));
    // Only the workload pod on the drained Node is evicted: not the
    // DaemonSet's, not the other Node's.
    assert_eq!(
        fake.calls_of("evict_pod"),
        vec!["evict_pod 10.0.0.2:6443 ml/train-0"]
    );
    assert_eq!(
        fake.pod_names(&kube()),
        vec!["kube-system/plugin-n1", "ml/other"]
    );
    assert!(!crate::kube::is_cordoned(
        &fake.node(&kube(), "n2").unwrap()
    ));
}

#[tokio::test]
async fn a_budget_that_refuses_past_the_timeout_holds_the_step_with_pdb() {
    let (fake, cloud) = setup();
    fake.protect_pod(&kube(), "ml", "train-0", true);
    // The drain started an hour ago (read back from the Node after a
    // restart): its 60s are over, it tries once more and holds.
    let since = Timestamp::now() - SignedDuration::from_hours(1);
    let err = run(&cloud, &action(60, Some(since)), &every(10))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "pdb");
    let msg = err.to_string();
    assert!(
        msg.contains("ml/train-0") && msg.contains("disruption budget"),
        "{msg}"
    );
    assert!(msg.contains("Nothing was destroyed"), "{msg}");
    assert!(fake.pod_names(&kube()).contains(&"ml/train-0".to_string()));
    assert_eq!(fake.calls_of("evict_pod").len(), 1);
    // The drain's start is the one on the Node: not written again.
    assert!(fake.calls_of("patch_node").is_empty());
}

#[tokio::test]
async fn a_budget_that_allows_past_the_timeout_lets_that_run_finish() {
    let (fake, cloud) = setup();
    // An earlier run started the drain an hour ago and was held (the
    // budget refused); now the budget allows it: this run's eviction is
    // accepted and the drain waits for the pod to end, past the deadline.
    let since = Timestamp::now() - SignedDuration::from_hours(1);
    let out = run(&cloud, &action(60, Some(since)), &every(10))
        .await
        .unwrap();
    assert_eq!(out, StepOutcome::Done);
    assert_eq!(fake.calls_of("evict_pod").len(), 1);
    assert!(!fake.pod_names(&kube()).contains(&"ml/train-0".to_string()));
}

#[tokio::test]
async fn a_failed_eviction_is_asked_again_at_the_next_poll() {
    let (fake, cloud) = setup();
    fake.fail_next("evict_pod", crate::kube::fake::KubeFault::Server);
    let out = run(&cloud, &action(60, None), &every(10)).await.unwrap();
    assert_eq!(out, StepOutcome::Done);
    assert_eq!(fake.calls_of("evict_pod").len(), 2);
    // Past the deadline, failing evictions hold the step, named.
    let (fake, cloud) = setup();
    fake.fail_next("evict_pod", crate::kube::fake::KubeFault::Server);
    let since = Timestamp::now() - SignedDuration::from_hours(1);
    let err = run(&cloud, &action(60, Some(since)), &every(10))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "drain_timeout");
    assert!(
        err.to_string()
            .contains("evictions kept failing: ml/train-0"),
        "{err}"
    );
    assert!(fake.pod_names(&kube()).contains(&"ml/train-0".to_string()));
}

#[tokio::test]
async fn a_budget_that_allows_later_lets_the_drain_finish() {
    let (fake, cloud) = setup();
    fake.protect_pod(&kube(), "ml", "train-0", true);
    let f = fake.clone();
    let release = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        f.protect_pod(&kube(), "ml", "train-0", false);
    });
    let out = run(&cloud, &action(60, None), &every(20)).await.unwrap();
    release.await.unwrap();
    assert_eq!(out, StepOutcome::Done);
    assert!(
        fake.calls_of("evict_pod").len() >= 2,
        "{:?}",
        fake.calls_of("evict_pod")
    );
}

#[tokio::test]
async fn a_replica_busy_since_the_plan_is_held_before_its_capacity_goes() {
    let (fake, cloud) = setup();
    let mut a = action(60, None);
    a.disruption = None;
    let k = kube();
    let err = recheck(&cloud, &a, &k, &["n1".to_string()])
        .await
        .unwrap_err();
    assert_eq!(err.code(), "busy");
    assert!(
        err.to_string().contains("ml/train-0 (job ml/train)"),
        "{err}"
    );
    assert!(fake.calls_of("evict_pod").is_empty());
    assert!(fake.calls_of("cordon_node").is_empty());
    assert_eq!(
        recheck(&cloud, &a, &k, &["n9".to_string()]).await.unwrap(),
        StepOutcome::Done
    );
}

#[tokio::test]
async fn a_pod_that_turns_do_not_disrupt_mid_drain_holds_it() {
    let (fake, cloud) = setup();
    fake.seed_pod(
        &kube(),
        "ml",
        "ckpt",
        "n1",
        &[],
        &[(crate::spec::disruption::DO_NOT_DISRUPT, "true")],
        None,
    );
    let err = run(&cloud, &action(60, None), &every(10))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "do_not_disrupt");
    assert!(fake.calls_of("evict_pod").is_empty());
}

/// A released Node slicectl cordoned is uncordoned; one a person had
/// cordoned before the drain keeps its cordon and loses only the label.
#[tokio::test]
async fn a_released_node_is_uncordoned_and_loses_the_drain_label() {
    let (fake, cloud) = setup();
    // n2: cordoned by a person, then caught in a drain (labelled).
    let mut n2 = fake.node(&kube(), "n2").unwrap();
    n2.spec.get_or_insert_with(Default::default).unschedulable = Some(true);
    n2.metadata
        .labels
        .get_or_insert_with(Default::default)
        .insert(DRAINING_SINCE.to_owned(), "1764136800".to_owned());
    fake.seed_node(&kube(), n2);
    let out = run(&cloud, &action(60, None), &every(10)).await.unwrap();
    assert_eq!(out, StepOutcome::Done);
    let has = |n: &str, label: &str| {
        fake.node(&kube(), n)
            .unwrap()
            .metadata
            .labels
            .unwrap_or_default()
            .contains_key(label)
    };
    let marked = |n: &str| has(n, crate::spec::disruption::CORDONED_BY_SLICECTL);
    assert!(marked("n1"), "slicectl's cordon is marked");
    assert!(!marked("n2"));
    let plan = crate::plan::Plan {
        observed_fingerprint: String::new(),
        mode: crate::plan::PlanMode::Apply,
        actions: Vec::new(),
        unmanaged: Vec::new(),
        unjoined: Vec::new(),
        refused: Vec::new(),
        held: Vec::new(),
        released: vec![crate::plan::workload::Release {
            kube: kube(),
            cluster: kube().endpoint,
            nodes: vec!["n1".into(), "n2".into()],
            cordon_kept: vec!["n2".into()],
        }],
        deferred: Vec::new(),
        unobserved: Vec::new(),
        undiscovered: Vec::new(),
        renames: Vec::new(),
        demand: Default::default(),
        preflight: Default::default(),
        summary: crate::plan::Summary::default(),
    };
    let report = crate::apply::execute(
        &cloud,
        crate::kinds::REGISTRY,
        &plan,
        &crate::apply::ApplyOptions::default(),
        Arc::new(crate::apply::tests::Quiet),
    )
    .await;
    assert!(report.success(), "{report:?}");
    let node = fake.node(&kube(), "n1").unwrap();
    assert!(!crate::kube::is_cordoned(&node));
    assert!(!has("n1", DRAINING_SINCE));
    assert!(!marked("n1"));
    let node = fake.node(&kube(), "n2").unwrap();
    assert_eq!(
        node.spec.as_ref().and_then(|s| s.unschedulable),
        Some(true),
        "a person's cordon stays"
    );
    assert!(!has("n2", DRAINING_SINCE));
}

/// A refusal with `Retry-After` is not asked again before then: over a
/// 1 s drain polled every 10 ms, a budget that asks for 400 ms is asked
/// 3 times, not a hundred.
#[tokio::test]
async fn a_refusal_with_retry_after_is_not_asked_again_before_then() {
    let (fake, cloud) = setup();
    fake.protect_pod(&kube(), "ml", "train-0", true);
    fake.set_eviction_retry_after(&kube(), Some(Duration::from_millis(400)));
    let since = Timestamp::now();
    let started = std::time::Instant::now();
    let err = run(&cloud, &action(1, Some(since)), &every(10))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "pdb", "{err}");
    let asked = fake.calls_of("evict_pod").len();
    assert!((2..=4).contains(&asked), "asked {asked} times");
    assert!(started.elapsed() >= Duration::from_millis(900));
    // Without Retry-After, every poll asks again.
    let (fake, cloud) = setup();
    fake.protect_pod(&kube(), "ml", "train-0", true);
    let err = run(&cloud, &action(1, Some(Timestamp::now())), &every(10))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "pdb", "{err}");
    assert!(fake.calls_of("evict_pod").len() > 10);
}

#[test]
fn retry_after_is_read_and_bounded() {
    use crate::kube::clients::retry_after;
    assert_eq!(retry_after(Some("7"), None), Some(Duration::from_secs(7)));
    assert_eq!(retry_after(None, Some(10)), Some(Duration::from_secs(10)));
    assert_eq!(
        retry_after(Some("2"), Some(10)),
        Some(Duration::from_secs(2))
    );
    assert_eq!(retry_after(None, Some(0)), None);
    assert_eq!(retry_after(Some("soon"), None), None);
    assert_eq!(
        bounded_retry_after(Duration::from_secs(3600)),
        MAX_RETRY_AFTER
    );
    assert_eq!(
        bounded_retry_after(Duration::from_secs(1)),
        Duration::from_secs(1)
    );
}

/// Saturdays 02:00–03:00 UTC.
fn saturday_window() -> crate::spec::disruption::Window {
    crate::spec::disruption::Window::parse(&crate::spec::model::DisruptionWindow {
        schedule: "0 2 * * SAT".into(),
        time_zone: None,
        duration: "1h".into(),
    })
    .unwrap()
}

/// A clock the test moves: seconds since the epoch.
fn moving_clock(at: &str) -> (Arc<std::sync::atomic::AtomicI64>, Checks) {
    let t: Timestamp = at.parse().unwrap();
    let secs = Arc::new(std::sync::atomic::AtomicI64::new(t.as_second()));
    let s = secs.clone();
    let checks = Checks {
        poll: Duration::from_millis(20),
        stop: Arc::new(|| false),
        clock: Arc::new(move || {
            Timestamp::from_second(s.load(std::sync::atomic::Ordering::SeqCst)).unwrap()
        }),
    };
    (secs, checks)
}

fn drain_label(fake: &FakeKube, n: &str) -> Option<String> {
    fake.node(&kube(), n)
        .unwrap()
        .metadata
        .labels
        .unwrap_or_default()
        .get(DRAINING_SINCE)
        .cloned()
}

/// Issue 35, case 4: a drain started inside its window, held by a budget,
/// is asked again before every eviction: once the window has closed, the
/// budget relaxing evicts nothing; the step is held (`outside_window`,
/// with the next opening), the Nodes keep the cordon and the drain label.
#[tokio::test]
async fn a_window_that_closes_mid_drain_holds_it_before_the_next_eviction() {
    let (fake, cloud) = setup();
    fake.protect_pod(&kube(), "ml", "train-0", true);
    let mut a = action(7200, None);
    a.disruption.as_mut().unwrap().windows = vec![saturday_window()];
    let (clock, checks) = moving_clock("2026-11-28T02:10:00Z");
    let f = fake.clone();
    let later = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        // 03:10: the window closed; then the budget relaxes.
        let closed: Timestamp = "2026-11-28T03:10:00Z".parse().unwrap();
        clock.store(closed.as_second(), std::sync::atomic::Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(100)).await;
        f.protect_pod(&kube(), "ml", "train-0", false);
    });
    let err = run(&cloud, &a, &checks).await.unwrap_err();
    later.await.unwrap();
    assert_eq!(err.code(), "outside_window", "{err}");
    let msg = err.to_string();
    assert!(
        msg.contains("the next window opens at 2026-12-05T02:00:00Z"),
        "{msg}"
    );
    assert!(msg.contains("Nothing more is evicted"), "{msg}");
    // Refused while the window was open; nothing evicted after it closed.
    assert!(fake.pod_names(&kube()).contains(&"ml/train-0".to_string()));
    assert!(crate::kube::is_cordoned(&fake.node(&kube(), "n1").unwrap()));
    assert!(drain_label(&fake, "n1").is_some());
    // The budget relaxes afterwards: still nothing is evicted (the step
    // ended; the next run plans it again, outside the window: held).
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(fake.pod_names(&kube()).contains(&"ml/train-0".to_string()));
}

/// A drain whose window closed before it started (a plan approved late)
/// touches nothing: no cordon, no label, no eviction.
#[tokio::test]
async fn a_drain_outside_its_window_touches_nothing() {
    let (fake, cloud) = setup();
    let mut a = action(7200, None);
    a.disruption.as_mut().unwrap().windows = vec![saturday_window()];
    let (_clock, checks) = moving_clock("2026-11-28T05:00:00Z");
    let err = run(&cloud, &a, &checks).await.unwrap_err();
    assert_eq!(err.code(), "outside_window", "{err}");
    assert!(fake.calls_of("evict_pod").is_empty());
    assert!(fake.calls_of("cordon_node").is_empty());
    assert!(drain_label(&fake, "n1").is_none());
}

/// Issue 35, case 5: a stop request (the first Ctrl-C) ends a running
/// drain before its next eviction: code `stopped`, the pod kept, the Nodes
/// still cordoned and labelled so that the next run resumes the drain.
#[tokio::test]
async fn a_stop_request_ends_a_drain_before_its_next_eviction() {
    let (fake, cloud) = setup();
    fake.protect_pod(&kube(), "ml", "train-0", true);
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let s = stop.clone();
    let checks = Checks {
        stop: Arc::new(move || s.load(std::sync::atomic::Ordering::SeqCst)),
        ..every(20)
    };
    let f = fake.clone();
    let later = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        stop.store(true, std::sync::atomic::Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(100)).await;
        f.protect_pod(&kube(), "ml", "train-0", false);
    });
    let err = run(&cloud, &action(60, None), &checks).await.unwrap_err();
    later.await.unwrap();
    assert_eq!(err.code(), STOPPED, "{err}");
    let msg = err.to_string();
    assert!(msg.contains("resumes the drain"), "{msg}");
    assert!(
        !fake.calls_of("evict_pod").is_empty(),
        "evicted while running"
    );
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(fake.pod_names(&kube()).contains(&"ml/train-0".to_string()));
    assert!(crate::kube::is_cordoned(&fake.node(&kube(), "n1").unwrap()));
    assert!(drain_label(&fake, "n1").is_some());
}

/// Right before the capacity goes, a busy replica's consent is asked again:
/// with `whenBusy: replace`, a closed window holds the delete.
#[tokio::test]
async fn a_replace_outside_its_window_is_held_before_the_delete() {
    let (fake, cloud) = setup();
    let mut a = action(60, None);
    {
        let d = a.disruption.as_mut().unwrap();
        d.how = DisruptHow::Replace;
        d.windows = vec![saturday_window()];
    }
    let (clock, checks) = moving_clock("2026-11-28T02:30:00Z");
    assert_eq!(
        before_destroy(&cloud, &a, &checks).await.unwrap(),
        StepOutcome::Done
    );
    let closed: Timestamp = "2026-11-28T03:30:00Z".parse().unwrap();
    clock.store(closed.as_second(), std::sync::atomic::Ordering::SeqCst);
    let err = before_destroy(&cloud, &a, &checks).await.unwrap_err();
    assert_eq!(err.code(), "outside_window", "{err}");
    assert!(err.to_string().contains("Nothing was destroyed"), "{err}");
    // `destroy --disrupt` is not asked again.
    a.disruption.as_mut().unwrap().how = DisruptHow::Forced;
    assert_eq!(
        before_destroy(&cloud, &a, &checks).await.unwrap(),
        StepOutcome::Done
    );
    assert!(fake.calls_of("evict_pod").is_empty());
}
