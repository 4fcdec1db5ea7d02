//! The executor's own rules, through the library against the simulator:
//! a failed step skips exactly what depends on it, replacements are limited,
//! and parallelism is bounded.

use crate::common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use slicectl::apply::{self, ApplyOptions, Progress};
use slicectl::cloud::{ClientOptions, Cloud, CloudClient, PollPolicy};
use slicectl::plan::{self, ActionKind, PlanOptions};
use slicectl::resource::compute::ResourcePolicy;
use slicectl_sim::{FaultConfig, SimHandle};

/// Records the steps running at any moment.
#[derive(Default)]
struct Recorder {
    running: Mutex<Vec<String>>,
    peak: Mutex<usize>,
    peak_replacing: Mutex<usize>,
    replacing: Vec<String>,
}

impl Progress for Recorder {
    fn started(&self, key: &str, what: &str) {
        let mut r = self.running.lock().unwrap();
        r.push(format!("{key} {what}"));
        let mut p = self.peak.lock().unwrap();
        *p = (*p).max(r.len());
        let replacing = self
            .replacing
            .iter()
            .filter(|a| r.iter().any(|x| x.starts_with(a.as_str())))
            .count();
        let mut pr = self.peak_replacing.lock().unwrap();
        *pr = (*pr).max(replacing);
    }

    fn finished(&self, key: &str, what: &str, _result: Result<(), &str>, _elapsed: Duration) {
        let mut r = self.running.lock().unwrap();
        if let Some(i) = r.iter().position(|x| *x == format!("{key} {what}")) {
            r.remove(i);
        }
    }
}

/// A client of the simulator, whose clusters have no Kubernetes API: no
/// pod can run there, which the user declares (`--unread-clusters-idle`);
/// otherwise a cluster not read is busy and every destructive step held.
fn client(sim: &slicectl_sim::SimHandle) -> Cloud {
    let mut c: Cloud = CloudClient::new(ClientOptions {
        api_endpoint: Some(sim.base_url()),
        poll: PollPolicy::fast_for_tests(),
        ..ClientOptions::default()
    })
    .unwrap()
    .into();
    c.unread_idle = true;
    c
}

async fn observe_and_plan(
    c: &Cloud,
    dir: &std::path::Path,
) -> (slicectl::spec::Fleet, slicectl::plan::Plan) {
    let fleet = slicectl::source::load_dir(dir).unwrap();
    let inv = slicectl::observe::observe(c, &fleet, slicectl::kinds::REGISTRY).await;
    assert!(inv.unobserved.is_empty(), "{:?}", inv.unobserved);
    let p = plan::plan(
        &fleet,
        &inv,
        &slicectl::kinds::plan_kinds(),
        &PlanOptions {
            max_destroy: 100,
            ..Default::default()
        },
    )
    .unwrap();
    (fleet, p)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failed_step_skips_exactly_its_dependents() {
    let sim = sim(Duration::from_millis(20), 1, FaultConfig::default()).await;
    let c = client(&sim);
    let dir = spec_dir(&[
        ("iron.yaml", slice_yaml("iron", "tpu7x", "2x2x2", 1, "")),
        (
            "tiny.yaml",
            slice_yaml("tiny", "tpu-v6e-slice", "1x1", 1, ""),
        ),
    ]);
    let (_, mut p) = observe_and_plan(&c, dir.path()).await;
    // Corrupt the workload policy's body: the simulator rejects it (400), so
    // its node pool must be skipped while the unrelated slice goes ahead.
    let pol = p
        .actions
        .iter_mut()
        .find(|a| a.id.name == "iron-0-wp")
        .unwrap();
    let mut body: ResourcePolicy =
        serde_json::from_value(pol.desired.as_ref().unwrap().to_json()).unwrap();
    body.workload_policy.as_mut().unwrap().kind = "NOT_A_TYPE".into();
    pol.desired = Some(Arc::new(body));
    let report = apply::execute(
        &c,
        slicectl::kinds::REGISTRY,
        &p,
        &ApplyOptions::default(),
        Arc::new(Recorder::default()),
    )
    .await;
    assert!(!report.success());
    assert_eq!(report.failed.len(), 1, "{report:?}");
    assert_eq!(report.failed[0].0, "slice.iron[0].workload_policy");
    assert!(report.failed[0].1.contains("NOT_A_TYPE"), "{report:?}");
    assert_eq!(report.skipped, vec!["slice.iron[0].node_pool".to_string()]);
    assert_eq!(report.done.get("create"), Some(&1));
    assert_eq!(pool_names(&sim).await, vec!["tiny-0"]);
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn replacements_are_limited_and_waiting_holds_no_worker() {
    let sim = sim(Duration::from_millis(150), 1, FaultConfig::default()).await;
    let c = client(&sim);
    let dir = spec_dir(&[("a.yaml", slice_yaml("a", "tpu-v6e-slice", "1x1", 4, ""))]);
    let (_, p) = observe_and_plan(&c, dir.path()).await;
    let rec = Arc::new(Recorder::default());
    let report = apply::execute(
        &c,
        slicectl::kinds::REGISTRY,
        &p,
        &ApplyOptions {
            parallelism: 2,
            max_replacements: 1,
        },
        rec.clone(),
    )
    .await;
    assert!(report.success(), "{report:?}");
    assert_eq!(
        *rec.peak.lock().unwrap(),
        4,
        "4 independent creates all run with parallelism 2: waiting on an operation holds no worker"
    );

    // Now every replica needs a replacement.
    std::fs::write(
        dir.path().join("a.yaml"),
        slice_yaml("a", "tpu-v6e-slice", "2x2", 4, ""),
    )
    .unwrap();
    let (_, p) = observe_and_plan(&c, dir.path()).await;
    assert!(p.actions.iter().all(|a| a.action == ActionKind::Replace));
    let rec = Arc::new(Recorder {
        replacing: p.actions.iter().map(|a| a.address()).collect(),
        ..Recorder::default()
    });
    let report = apply::execute(
        &c,
        slicectl::kinds::REGISTRY,
        &p,
        &ApplyOptions {
            parallelism: 8,
            max_replacements: 1,
        },
        rec.clone(),
    )
    .await;
    assert!(report.success(), "{report:?}");
    assert_eq!(report.done.get("replace"), Some(&4));
    assert_eq!(
        *rec.peak_replacing.lock().unwrap(),
        1,
        "one replacement at a time"
    );
    sim.shutdown().await;
}

fn no_retry_client(sim: &SimHandle) -> Cloud {
    CloudClient::new(ClientOptions {
        api_endpoint: Some(sim.base_url()),
        poll: PollPolicy::fast_for_tests(),
        retry: slicectl::cloud::RetryPolicy {
            max_attempts: 1,
            ..Default::default()
        },
        ..ClientOptions::default()
    })
    .unwrap()
    .into()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cluster_level_operation_is_waited_out_then_every_write_goes() {
    // A control-plane upgrade holds the cluster for 2s; the client itself
    // does not retry at all. The executor meets it once, waits for that
    // operation, and holds every other write of the cluster meanwhile.
    let sim = sim(Duration::from_millis(200), 1, FaultConfig::default()).await;
    let c = no_retry_client(&sim);
    let dir = spec_dir(&[("a.yaml", slice_yaml("a", "tpu-v6e-slice", "1x1", 3, ""))]);
    let (_, p) = observe_and_plan(&c, dir.path()).await;
    sim.start_cluster_operation(CLUSTER, Duration::from_secs(2))
        .unwrap();
    let report = apply::execute(
        &c,
        slicectl::kinds::REGISTRY,
        &p,
        &ApplyOptions::default(),
        Arc::new(Recorder::default()),
    )
    .await;
    assert!(report.success(), "{report:?}");
    assert_eq!(report.done.get("create"), Some(&3));
    assert_eq!(pool_names(&sim).await, vec!["a-0", "a-1", "a-2"]);
    assert_eq!(
        report.rejected_writes, 1,
        "one write met the upgrade; the others waited for it: {report:?}"
    );
    assert_eq!(sim.stats().writes, 4);
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_operations_quota_is_learned_from_the_first_429_and_never_hit_again() {
    // GKE's default quota of 5 concurrent operations per cluster, 12 slices
    // in one cluster, operations long enough to overlap.
    let sim = sim(Duration::from_millis(400), 1, FaultConfig::default()).await;
    let c = no_retry_client(&sim);
    let dir = spec_dir(&[("a.yaml", slice_yaml("a", "tpu-v6e-slice", "1x1", 12, ""))]);
    let (_, p) = observe_and_plan(&c, dir.path()).await;
    let report = apply::execute(
        &c,
        slicectl::kinds::REGISTRY,
        &p,
        &ApplyOptions::default(),
        Arc::new(Recorder::default()),
    )
    .await;
    assert!(report.success(), "{report:?}");
    assert_eq!(report.done.get("create"), Some(&12));
    assert_eq!(report.rejected_writes, 1, "{report:?}");
    assert_eq!(
        report.learned_quotas.values().copied().collect::<Vec<_>>(),
        vec![5]
    );
    // 12 creates and the one refusal that taught the quota.
    assert_eq!(sim.stats().writes, 13);
    assert!(
        report.summary().contains("1 write(s) were refused"),
        "{}",
        report.summary()
    );
    sim.shutdown().await;
}

/// Regression: a create answered 409 was counted as "created" when the name
/// was taken by someone else's pool.
#[tokio::test(flavor = "multi_thread")]
async fn a_create_that_meets_someone_elses_pool_fails_with_the_reason() {
    let sim = sim(Duration::from_millis(20), 1, FaultConfig::default()).await;
    let c = client(&sim);
    let dir = spec_dir(&[("a.yaml", slice_yaml("a", "tpu-v6e-slice", "1x1", 1, ""))]);
    let (_, p) = observe_and_plan(&c, dir.path()).await;
    // Between the plan and the apply, someone makes a pool with that name.
    create_by_hand(&sim, "a-0", serde_json::json!({"team": "other"})).await;
    let report = apply::execute(
        &c,
        slicectl::kinds::REGISTRY,
        &p,
        &ApplyOptions::default(),
        Arc::new(Recorder::default()),
    )
    .await;
    assert!(!report.success(), "{report:?}");
    assert_eq!(report.done.get("create"), None, "{report:?}");
    assert_eq!(report.failed.len(), 1, "{report:?}");
    assert!(
        report.failed[0].1.contains("not created by slicectl"),
        "{report:?}"
    );
    let pools = node_pools(&sim).await;
    assert_eq!(pools[0]["config"]["labels"]["team"], "other");
    sim.shutdown().await;
}

/// Regression: a create answered 409 while another apply's delete of that
/// name was running was counted as "created".
#[tokio::test(flavor = "multi_thread")]
async fn a_create_that_meets_a_delete_in_flight_fails_with_the_reason() {
    let sim = sim(Duration::from_millis(800), 1, FaultConfig::default()).await;
    let c = client(&sim);
    let dir = spec_dir(&[("a.yaml", slice_yaml("a", "tpu-v6e-slice", "1x1", 1, ""))]);
    let (_, p) = observe_and_plan(&c, dir.path()).await;
    let rec = Arc::new(Recorder::default());
    let report = apply::execute(
        &c,
        slicectl::kinds::REGISTRY,
        &p,
        &ApplyOptions::default(),
        rec.clone(),
    )
    .await;
    assert!(report.success(), "{report:?}");
    // Another apply is deleting the pool when this one creates it again.
    start_delete_by_hand(&sim, "a-0").await;
    let report = apply::execute(
        &c,
        slicectl::kinds::REGISTRY,
        &p,
        &ApplyOptions::default(),
        rec,
    )
    .await;
    assert!(!report.success(), "{report:?}");
    assert_eq!(report.done.get("create"), None, "{report:?}");
    assert!(
        report.failed[0].1.contains("DELETE_NODE_POOL"),
        "{report:?}"
    );
    wait_until_done(&sim).await;
    sim.shutdown().await;
}

/// Regression: a delete that found the pool already gone was counted as
/// "destroyed".
#[tokio::test(flavor = "multi_thread")]
async fn a_delete_that_finds_the_pool_gone_is_not_counted_destroyed() {
    let sim = sim(Duration::from_millis(20), 1, FaultConfig::default()).await;
    let c = client(&sim);
    let dir = spec_dir(&[("a.yaml", slice_yaml("a", "tpu-v6e-slice", "1x1", 2, ""))]);
    let (fleet, p) = observe_and_plan(&c, dir.path()).await;
    let rec = Arc::new(Recorder::default());
    assert!(
        apply::execute(
            &c,
            slicectl::kinds::REGISTRY,
            &p,
            &ApplyOptions::default(),
            rec.clone()
        )
        .await
        .success()
    );
    let inv = slicectl::observe::observe(&c, &fleet, slicectl::kinds::REGISTRY).await;
    assert!(inv.unobserved.is_empty(), "{:?}", inv.unobserved);
    let teardown = plan::plan_destroy(&fleet, &inv, &slicectl::kinds::plan_kinds(), 10).unwrap();
    delete_by_hand(&sim, "a-1").await;
    let report = apply::execute(
        &c,
        slicectl::kinds::REGISTRY,
        &teardown,
        &ApplyOptions::default(),
        rec,
    )
    .await;
    assert!(report.success(), "{report:?}");
    assert_eq!(report.done.get("delete"), Some(&1), "{report:?}");
    assert_eq!(
        report.already_gone,
        vec!["slice.a[1].node_pool".to_string()]
    );
    assert!(
        report.summary().contains("1 destroyed (1 already gone)"),
        "{}",
        report.summary()
    );
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn five_hundred_slices_are_in_flight_at_once() {
    // A cluster that allows them (GKE's concurrency rules off, as a raised
    // quota would): hundreds of operations overlap, though only 16
    // requests may be sent at once, because waiting holds no worker.
    let sim = sim(
        Duration::from_secs(3),
        1,
        FaultConfig {
            concurrency_rules: false,
            ..FaultConfig::default()
        },
    )
    .await;
    let c: Cloud = CloudClient::new(ClientOptions {
        api_endpoint: Some(sim.base_url()),
        poll: PollPolicy {
            min_interval: Duration::from_millis(200),
            ..PollPolicy::default()
        },
        write_rate: None,
        ..ClientOptions::default()
    })
    .unwrap()
    .into();
    let files: Vec<(String, String)> = (0..10)
        .map(|i| {
            let name = format!("s{i}");
            let yaml = slice_yaml(&name, "tpu-v6e-slice", "1x1", 50, "");
            (format!("{name}.yaml"), yaml)
        })
        .collect();
    let files: Vec<(&str, String)> = files.iter().map(|(n, y)| (n.as_str(), y.clone())).collect();
    let dir = spec_dir(&files);
    let (_, p) = observe_and_plan(&c, dir.path()).await;
    let report = apply::execute(
        &c,
        slicectl::kinds::REGISTRY,
        &p,
        &ApplyOptions::default(),
        Arc::new(Recorder::default()),
    )
    .await;
    assert!(report.success(), "{report:?}");
    assert_eq!(report.done.get("create"), Some(&500));
    // Waiting holds no worker: far more operations overlap than the 16
    // requests that may be in flight. (Counted from the operations' own
    // start and end times, so a loaded machine that sends the 500 creates
    // more slowly than 3 s still shows it; with a worker held per wait, at
    // most 16 could ever overlap.)
    let url = format!(
        "{}/v1/projects/example-project/locations/us-central1/operations",
        sim.base_url()
    );
    let ops: serde_json::Value = reqwest::get(url).await.unwrap().json().await.unwrap();
    let ops = ops["operations"].as_array().unwrap();
    assert_eq!(ops.len(), 500);
    let ts = |o: &serde_json::Value, f: &str| -> jiff::Timestamp {
        o[f].as_str().unwrap().parse().unwrap()
    };
    // +1 at each start, -1 at each end; ends sort before starts at the same
    // instant, so touching operations do not count as overlapping.
    let mut events: Vec<(jiff::Timestamp, i32)> = ops
        .iter()
        .flat_map(|o| [(ts(o, "startTime"), 1), (ts(o, "endTime"), -1)])
        .collect();
    events.sort();
    let (mut now, mut most) = (0, 0);
    for (_, d) in events {
        now += d;
        most = most.max(now);
    }
    assert!(
        most >= 64,
        "at most {most} of 500 operations were in flight at once; waiting must not hold one of the 16 workers"
    );
    sim.shutdown().await;
}
