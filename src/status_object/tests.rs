//! The derivation on real engine reports (the fake cloud), snapshot-tested.
#![cfg(test)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;

use super::crd::{READY, RECONCILING, STALLED};
use super::derive::{Cycle, CycleResult, SliceObject, StatusSet, derive, reason};
use super::writer::{merged, object_body};
use crate::apply::{ApplyOptions, Progress};
use crate::cloud::fake::{FakeCloud, Fault};
use crate::engine::{Approval, ReconcileOptions, Report, reconcile};
use crate::plan::{PlanMode, PlanOptions};
use crate::spec::{Fleet, SourceFile};

fn fleet() -> Fleet {
    let files = vec![SourceFile {
        path: "f.yaml".into(),
        text: "apiVersion: slicectl.dev/v1alpha1
kind: Target
metadata: {name: t}
spec: {project: unit-project, zone: us-central1-b, ownerId: unit, gke: {location: us-central1, name: c}}
---
apiVersion: slicectl.dev/v1alpha1
kind: Slice
metadata: {name: a}
spec: {target: t, backend: gke, accelerator: tpu-v6e-slice, topology: 1x1, replicas: 2}
"
        .into(),
    }];
    crate::spec::load(&files).unwrap()
}

struct Quiet;
impl Progress for Quiet {
    fn started(&self, _: &str, _: &str) {}
    fn finished(&self, _: &str, _: &str, _: Result<(), &str>, _: Duration) {}
}

fn opts() -> ReconcileOptions {
    ReconcileOptions {
        mode: PlanMode::Apply,
        plan: PlanOptions::default(),
        apply: ApplyOptions::default(),
    }
}

async fn cycle(fake: &Arc<FakeCloud>, f: &Fleet, approval: Approval) -> Report {
    reconcile(f, &fake.cloud(), &opts(), |_| approval, Arc::new(Quiet))
        .await
        .unwrap()
}

fn now() -> Timestamp {
    "2026-01-02T03:04:05Z".parse().unwrap()
}

fn statuses(f: &Fleet, r: &Report) -> StatusSet {
    with(
        f,
        CycleResult::Report(r),
        &BTreeMap::new(),
        &BTreeMap::new(),
    )
}

fn with(
    f: &Fleet,
    result: CycleResult<'_>,
    invalid: &BTreeMap<String, String>,
    since: &BTreeMap<String, Timestamp>,
) -> StatusSet {
    derive(&Cycle {
        fleet: f,
        result,
        invalid,
        unavailable_since: since,
        stall_after: Duration::from_secs(30 * 60),
        now: now(),
    })
}

/// `TYPE=STATUS/REASON` of each condition.
fn conds(o: &SliceObject) -> Vec<String> {
    o.status
        .conditions
        .iter()
        .map(|c| format!("{}={}/{}", c.type_, c.status, c.reason))
        .collect()
}

fn only(set: &StatusSet) -> &SliceObject {
    assert_eq!(set.objects.len(), 1, "{set:#?}");
    &set.objects[0]
}

#[tokio::test]
async fn converged_is_ready() {
    let fake = FakeCloud::new();
    let f = fleet();
    let first = statuses(&f, &cycle(&fake, &f, Approval::Auto).await);
    let o = only(&first);
    assert_eq!(conds(o), ["Ready=True/Converged"]);
    let kinds: Vec<&str> = o.events.iter().map(|e| e.reason.as_str()).collect();
    assert_eq!(kinds, ["Created", "Created"], "{:#?}", o.events);
    insta::assert_yaml_snapshot!("converged_after_create", first);

    let steady = statuses(&f, &cycle(&fake, &f, Approval::Auto).await);
    let o = only(&steady);
    assert_eq!(conds(o), ["Ready=True/Converged"]);
    assert!(
        o.events.is_empty(),
        "a cycle with nothing to do records nothing"
    );
    assert_eq!(o.status.nodes.as_deref(), Some("2/2"));
    assert!(
        o.status.replicas[0]
            .resources
            .iter()
            .all(|r| r.state == "RUNNING" || r.state == "IN SYNC"),
        "{:#?}",
        o.status.replicas
    );
}

#[tokio::test]
async fn work_in_flight_is_reconciling_and_not_ready() {
    let fake = FakeCloud::new();
    let f = fleet();
    // Changes planned, not (yet) applied.
    let set = statuses(&f, &cycle(&fake, &f, Approval::Declined).await);
    let o = only(&set);
    assert_eq!(
        conds(o),
        ["Ready=False/Progressing", "Reconciling=True/Progressing"]
    );
    insta::assert_yaml_snapshot!("pending_changes", set);

    // A step failed with an error that may clear: retried, not stalled.
    fake.fail_next("create_node_pool", Fault::Unavailable);
    let set = statuses(&f, &cycle(&fake, &f, Approval::Auto).await);
    let o = only(&set);
    assert_eq!(
        conds(o),
        [
            "Ready=False/ProgressingWithRetry",
            "Reconciling=True/ProgressingWithRetry"
        ]
    );
    assert!(
        o.events
            .iter()
            .any(|e| e.warning && e.reason == "ApplyFailed")
    );
}

#[tokio::test]
async fn a_stockout_is_reconciling_until_the_threshold_then_stalled() {
    let fake = FakeCloud::new();
    let f = fleet();
    fake.fail_next("wait_operation", Fault::Stockout);
    let r = cycle(&fake, &f, Approval::Auto).await;
    let fresh = statuses(&f, &r);
    let o = only(&fresh);
    assert_eq!(
        conds(o),
        [
            "Ready=False/CapacityUnavailable",
            "Reconciling=True/CapacityUnavailable"
        ]
    );
    let ev: Vec<_> = o.events.iter().filter(|e| e.warning).collect();
    assert_eq!(ev.len(), 1, "{:#?}", o.events);
    assert_eq!(ev[0].reason, "CapacityUnavailable");

    let since = BTreeMap::from([("a".to_string(), now() - jiff::SignedDuration::from_hours(1))]);
    let stalled = with(&f, CycleResult::Report(&r), &BTreeMap::new(), &since);
    let o = only(&stalled);
    assert_eq!(
        conds(o),
        [
            "Ready=False/CapacityUnavailable",
            "Stalled=True/CapacityUnavailable"
        ]
    );
    let failed: Vec<_> = o
        .status
        .replicas
        .iter()
        .filter_map(|r| r.last_error.as_deref())
        .collect();
    assert!(
        failed.iter().any(|e| e.starts_with("[stockout]")),
        "{failed:?}"
    );
    insta::assert_yaml_snapshot!("stockout_stalled", stalled);
}

#[tokio::test]
async fn a_refused_change_is_stalled() {
    let fake = FakeCloud::new();
    let f = fleet();
    // A node pool slicectl does not own has the name of replica 0.
    fake.seed_pool(
        &crate::resource::ClusterRef {
            project: "unit-project".into(),
            location: "us-central1".into(),
            name: "c".into(),
        },
        crate::resource::gke::NodePool {
            name: "a-0".into(),
            status: Some("RUNNING".into()),
            ..Default::default()
        },
    );
    let set = statuses(&f, &cycle(&fake, &f, Approval::Auto).await);
    let o = only(&set);
    assert_eq!(conds(o), ["Ready=False/Refused", "Stalled=True/Refused"]);
    let stalled = &o.status.conditions[1];
    assert!(
        stalled.message.contains("[name_taken]"),
        "{}",
        stalled.message
    );
    assert!(
        o.events
            .iter()
            .any(|e| e.warning && e.reason == "Refused" && e.action == "Create"),
        "{:#?}",
        o.events
    );
    insta::assert_yaml_snapshot!("refused", set);
}

#[tokio::test]
async fn an_invalid_spec_is_stalled_with_the_located_error() {
    let fake = FakeCloud::new();
    let f = fleet();
    let r = cycle(&fake, &f, Approval::Auto).await;
    let invalid = BTreeMap::from([
        (
            "a".to_string(),
            "specs/a.yaml:5:13: unknown topology \"9x9\"".to_string(),
        ),
        (
            "b".to_string(),
            "specs/b.yaml:3:1: missing field `target`".to_string(),
        ),
    ]);
    let set = with(&f, CycleResult::Report(&r), &invalid, &BTreeMap::new());
    assert_eq!(set.objects.len(), 2);
    for o in &set.objects {
        assert_eq!(
            conds(o),
            ["Ready=False/InvalidSpec", "Stalled=True/InvalidSpec"]
        );
    }
    assert!(
        set.objects[0].status.conditions[0]
            .message
            .contains("last valid version")
    );
    assert!(set.objects[1].status.slice.is_none(), "b was never valid");
    insta::assert_yaml_snapshot!("invalid", set);
}

#[test]
fn a_cycle_refused_as_a_whole_stalls_every_slice_and_an_observe_failure_does_not() {
    let f = fleet();
    let none = BTreeMap::new();
    let never = BTreeMap::new();
    let set = with(
        &f,
        CycleResult::Failed {
            code: "too_many_destructive",
            message: "the plan destroys 12 resources, more than --max-destroy 10",
        },
        &none,
        &never,
    );
    assert_eq!(
        conds(only(&set)),
        ["Ready=False/Refused", "Stalled=True/Refused"]
    );
    // A spec source that vanished: refused (nothing pruned), not retried
    // as if the cloud were at fault.
    for code in ["empty_source", "source_missing"] {
        let set = with(
            &f,
            CycleResult::Failed {
                code,
                message: "the spec source /specs does not exist",
            },
            &none,
            &never,
        );
        assert_eq!(
            conds(only(&set)),
            ["Ready=False/Refused", "Stalled=True/Refused"],
            "{code}"
        );
        assert!(
            only(&set).status.conditions[0]
                .message
                .starts_with(&format!("[{code}] ")),
            "{code}"
        );
    }
    let set = with(
        &f,
        CycleResult::Failed {
            code: "observe_failed",
            message: "cannot observe the live state: 503",
        },
        &none,
        &never,
    );
    assert_eq!(
        conds(only(&set)),
        [
            "Ready=False/ObserveFailed",
            "Reconciling=True/ObserveFailed"
        ]
    );
}

#[tokio::test]
async fn a_quota_error_is_stalled() {
    let fake = FakeCloud::new();
    let f = fleet();
    let mut r = cycle(&fake, &f, Approval::Declined).await;
    // What a create refused for TPU quota looks like in the report.
    let addr = r.plan.actions[0].address();
    let failure = crate::apply::Failure {
        address: addr.clone(),
        code: "operation_failed",
        message: "QUOTA_EXCEEDED: Quota 'TPUV6E_LITE_PODSLICE_CHIPS' exceeded. Limit: 0.0 in region us-central1.".into(),
    };
    r.apply = Some(crate::apply::ApplyReport {
        failed: vec![(addr, failure.message.clone())],
        failures: vec![failure.clone()],
        ..Default::default()
    });
    r.slices = vec![crate::engine::SliceReport {
        slice: "a".into(),
        failed: vec![failure],
        ..Default::default()
    }];
    let set = statuses(&f, &r);
    let o = only(&set);
    assert_eq!(
        conds(o),
        ["Ready=False/QuotaExceeded", "Stalled=True/QuotaExceeded"]
    );
    assert!(o.events.iter().any(|e| e.reason == reason::QUOTA_EXCEEDED));
}

#[tokio::test]
async fn a_slice_gone_from_the_specs_loses_its_object_once_its_resources_are_gone() {
    let fake = FakeCloud::new();
    let f = fleet();
    cycle(&fake, &f, Approval::Auto).await;
    let mut empty = fleet();
    empty.slices.clear();
    let opts = ReconcileOptions {
        plan: PlanOptions {
            allow_empty_source: true,
            ..PlanOptions::default()
        },
        ..opts()
    };
    let r = reconcile(
        &empty,
        &fake.cloud(),
        &opts,
        |_| Approval::Auto,
        Arc::new(Quiet),
    )
    .await
    .unwrap();
    let set = statuses(&empty, &r);
    assert!(set.objects.is_empty(), "{set:#?}");
    assert_eq!(set.removed.len(), 1);
    let reasons: Vec<&str> = set.removed[0]
        .events
        .iter()
        .map(|e| e.reason.as_str())
        .collect();
    assert_eq!(reasons, ["Deleted", "Deleted"]);
}

#[test]
fn a_condition_that_did_not_change_keeps_its_transition_time() {
    let f = fleet();
    let none = BTreeMap::new();
    let never = BTreeMap::new();
    let failed = CycleResult::Failed {
        code: "observe_failed",
        message: "x",
    };
    let old = with(&f, failed, &none, &never).objects[0].status.clone();
    let mut later = derive(&Cycle {
        fleet: &f,
        result: failed,
        invalid: &none,
        unavailable_since: &never,
        stall_after: Duration::ZERO,
        now: now() + jiff::SignedDuration::from_mins(5),
    });
    let new = later.objects.remove(0).status;
    let m = merged(&new, Some(&old), Some(3));
    assert_eq!(m.observed_generation, Some(3));
    assert!(
        m.conditions
            .iter()
            .all(|c| c.observed_generation == Some(3))
    );
    assert_eq!(m.conditions[0].last_transition_time.0, now());
    let m = merged(&new, None, Some(1));
    assert_eq!(
        m.conditions[0].last_transition_time.0,
        now() + jiff::SignedDuration::from_mins(5)
    );
    assert!([READY, RECONCILING, STALLED].contains(&m.conditions[1].type_.as_str()));
}

#[test]
fn messages_are_cut_to_what_an_event_allows() {
    let long = "é".repeat(2000);
    let s = super::derive::shorten(&long);
    assert!(s.len() <= super::derive::MAX_MESSAGE);
    assert!(s.ends_with("..."));
}

#[test]
fn the_applied_object_carries_the_owner_reference_only_with_an_owner() {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
    let plain = object_body("llm", None);
    assert_eq!(
        plain,
        serde_json::json!({
            "apiVersion": "slicectl.dev/v1alpha1",
            "kind": "SliceStatus",
            "metadata": {
                "name": "llm",
                "labels": {
                    "app.kubernetes.io/managed-by": "slicectl",
                    "slicectl.dev/slice": "llm",
                },
            },
            "spec": {},
        })
    );
    let owner = OwnerReference {
        api_version: "apps/v1".into(),
        kind: "Deployment".into(),
        name: "slicectl".into(),
        uid: "0b1c".into(),
        controller: Some(true),
        block_owner_deletion: None,
    };
    let owned = object_body("llm", Some(&owner));
    assert_eq!(
        owned["metadata"]["ownerReferences"],
        serde_json::json!([{
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "name": "slicectl",
            "uid": "0b1c",
            "controller": true,
        }])
    );
    assert_eq!(owned["metadata"]["labels"], plain["metadata"]["labels"]);
}
