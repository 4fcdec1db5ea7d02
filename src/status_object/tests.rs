#![cfg(test)]
//! The derivation on real engine reports (the fake cloud), snapshot-tested.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;

use super::crd::{READY, RECONCILING, STALLED};
use super::derive::{Cycle, CycleResult, SliceObject, StatusSet, derive, reason};
use super::writer::{merged, metadata_current, object_body};
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
        existing: &BTreeMap::new(),
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

/// A live MIG that reports Compute Engine's `QUOTA_EXCEEDED` (what
/// `status` reads from it: its creation error) gets no VMs until the quota
/// is raised, with nothing left to apply: the slice is `Stalled`
/// `QuotaExceeded` with the cloud's words, not provisioning.
#[tokio::test]
async fn a_live_slice_reporting_a_quota_error_is_stalled_quota_exceeded() {
    let fake = FakeCloud::new();
    let f = fleet();
    let mut r = cycle(&fake, &f, Approval::Auto).await;
    assert_eq!(conds(only(&statuses(&f, &r)))[0], "Ready=True/Converged");
    // Replica 0 as a MIG without its VMs reads in `status`.
    let row = r.status.iter_mut().find(|x| x.replica == 0).unwrap();
    row.state = "MIG RETRYING, VMs 0/1".into();
    row.nodes = "0/1".into();
    row.last_error =
        "QUOTA_EXCEEDED: Quota 'TPUS_PER_TPU_FAMILY' exceeded. Limit: 0.0 in region us-central1."
            .into();
    let set = statuses(&f, &r);
    let o = only(&set);
    assert_eq!(
        conds(o),
        ["Ready=False/QuotaExceeded", "Stalled=True/QuotaExceeded"],
        "{:#?}",
        o.status
    );
    let m = &o.status.conditions[1].message;
    assert!(
        m.contains(
            "[quota_exceeded] replica 0: QUOTA_EXCEEDED: Quota 'TPUS_PER_TPU_FAMILY' exceeded"
        ),
        "{m}"
    );
    // Any other creation error is still provisioning.
    let row = r.status.iter_mut().find(|x| x.replica == 0).unwrap();
    row.last_error = "INVALID_FIELD_VALUE: bad".into();
    assert_eq!(
        conds(only(&statuses(&f, &r)))[1],
        "Reconciling=True/Provisioning"
    );
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
        existing: &BTreeMap::new(),
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
    let plain = object_body("llm", None, None);
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
    let owned = object_body("llm", Some(&owner), None);
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
    // Sharded: the object carries its shard, by which a replica scopes
    // what it lists and prunes.
    let sharded = object_body("llm", None, Some(4));
    assert_eq!(sharded["metadata"]["labels"]["slicectl.dev/shard"], "4");
}

/// The metadata apply is skipped only when it would change nothing: the
/// fields slicectl's apply owns are the body's, with its values.
#[test]
fn the_metadata_is_current_only_when_slicectls_apply_owns_exactly_the_bodys_fields() {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
        FieldsV1, ManagedFieldsEntry, ObjectMeta, OwnerReference,
    };
    let owner = OwnerReference {
        api_version: "apps/v1".into(),
        kind: "Deployment".into(),
        name: "slicectl".into(),
        uid: "0b1c".into(),
        controller: Some(true),
        block_owner_deletion: None,
    };
    let entry = |manager: &str, fields: serde_json::Value| ManagedFieldsEntry {
        manager: Some(manager.into()),
        operation: Some("Apply".into()),
        fields_type: Some("FieldsV1".into()),
        fields_v1: Some(FieldsV1(fields)),
        ..Default::default()
    };
    let ours = |owner_uid: Option<&str>, shard: bool| {
        let mut m = serde_json::json!({"f:metadata": {"f:labels": {
            "f:app.kubernetes.io/managed-by": {}, "f:slicectl.dev/slice": {}}}, "f:spec": {}});
        if shard {
            m["f:metadata"]["f:labels"]["f:slicectl.dev/shard"] = serde_json::json!({});
        }
        if let Some(uid) = owner_uid {
            m["f:metadata"]["f:ownerReferences"] =
                serde_json::json!({format!("k:{{\"uid\":\"{uid}\"}}"): {".": {}}});
        }
        entry("slicectl", m)
    };
    let meta = |labels: &[(&str, &str)], owners: Vec<OwnerReference>, fields| ObjectMeta {
        name: Some("llm".into()),
        labels: Some(
            labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        ),
        owner_references: Some(owners),
        managed_fields: Some(fields),
        ..Default::default()
    };
    let base = [
        ("app.kubernetes.io/managed-by", "slicectl"),
        ("slicectl.dev/slice", "llm"),
    ];
    let plain = object_body("llm", None, None);
    let owned = object_body("llm", Some(&owner), None);

    // As the last apply left it: current; another manager's label too.
    let live = meta(&base, vec![], vec![ours(None, false)]);
    assert!(metadata_current(&live, &plain));
    let mut extra = base.to_vec();
    extra.push(("team", "a"));
    let live = meta(
        &extra,
        vec![],
        vec![
            ours(None, false),
            entry(
                "kubectl",
                serde_json::json!({"f:metadata": {"f:labels": {"f:team": {}}}}),
            ),
        ],
    );
    assert!(metadata_current(&live, &plain));
    // A label of ours with another value (taken over by kubectl): applied.
    let live = meta(
        &[base[0], ("slicectl.dev/slice", "other")],
        vec![],
        vec![ours(None, false)],
    );
    assert!(!metadata_current(&live, &plain));
    // A shard label slicectl set and no longer sets: applied (removed).
    let mut sharded = base.to_vec();
    sharded.push(("slicectl.dev/shard", "4"));
    let live = meta(&sharded, vec![], vec![ours(None, true)]);
    assert!(!metadata_current(&live, &plain));
    assert!(metadata_current(&live, &object_body("llm", None, Some(4))));
    assert!(!metadata_current(&live, &object_body("llm", None, Some(5))));
    // An owner to add, to keep, to remove.
    let live = meta(&base, vec![], vec![ours(None, false)]);
    assert!(!metadata_current(&live, &owned));
    let live = meta(&base, vec![owner.clone()], vec![ours(Some("0b1c"), false)]);
    assert!(metadata_current(&live, &owned));
    assert!(!metadata_current(&live, &plain));
    // A new Deployment (another uid): applied.
    let mut other = owner.clone();
    other.uid = "ffff".into();
    assert!(!metadata_current(
        &live,
        &object_body("llm", Some(&other), None)
    ));
    // No field set of slicectl's (written by someone else, or stripped):
    // applied.
    let live = meta(&base, vec![], vec![]);
    assert!(!metadata_current(&live, &plain));
}

// ---- No refusal loses an object ---------------------------------------------

fn load(text: &str) -> Fleet {
    crate::spec::load(&[SourceFile {
        path: "f.yaml".into(),
        text: text.into(),
    }])
    .unwrap()
}

const T: &str = "apiVersion: slicectl.dev/v1alpha1
kind: Target
metadata: {name: t}
spec: {project: unit-project, zone: us-central1-b, ownerId: unit, gke: {location: us-central1, name: c}}
---
apiVersion: slicectl.dev/v1alpha1
kind: Target
metadata: {name: t-c}
spec: {project: unit-project, zone: us-central1-c, ownerId: unit, gke: {location: us-central1, name: c}}
";

/// Target `t` (and `t-c`) with slices `alpha` and `beta`, optionally
/// protected, and `iron` (tpu7x: a workload policy and a pool) if asked.
fn two(protect: bool, iron: bool) -> Fleet {
    let life = if protect {
        ", lifecycle: {preventDestroy: true}"
    } else {
        ""
    };
    let mut text = T.to_string();
    for n in ["alpha", "beta"] {
        text.push_str(&format!(
            "---\napiVersion: slicectl.dev/v1alpha1\nkind: Slice\nmetadata: {{name: {n}}}\nspec: {{target: t, backend: gke, accelerator: tpu-v6e-slice, topology: 1x1{life}}}\n"
        ));
    }
    if iron {
        text.push_str(&format!(
            "---\napiVersion: slicectl.dev/v1alpha1\nkind: Slice\nmetadata: {{name: iron}}\nspec: {{target: t-c, backend: gke, accelerator: tpu7x, topology: 2x2x2{life}}}\n"
        ));
    }
    load(&text)
}

/// The same targets with no slice at all (the ConfigMap left with
/// `target.yaml` alone).
fn targets_only() -> Fleet {
    load(T)
}

/// What the objects of `set` would be once written: what the next cycle
/// reads as existing.
fn written(set: &StatusSet) -> BTreeMap<String, super::SliceStatusStatus> {
    set.objects
        .iter()
        .map(|o| (o.name.clone(), o.status.clone()))
        .collect()
}

fn after(
    f: &Fleet,
    result: CycleResult<'_>,
    existing: &BTreeMap<String, super::SliceStatusStatus>,
) -> StatusSet {
    derive(&Cycle {
        fleet: f,
        result,
        invalid: &BTreeMap::new(),
        unavailable_since: &BTreeMap::new(),
        stall_after: Duration::from_secs(30 * 60),
        now: now(),
        existing,
    })
}

fn names(set: &StatusSet) -> Vec<&str> {
    set.objects.iter().map(|o| o.name.as_str()).collect()
}

/// Both objects stay, Stalled/Refused with `[code]`, each still saying
/// which slice it reports on.
fn kept_refused(set: &StatusSet, code: &str) {
    assert_eq!(names(set), ["alpha", "beta"], "{set:#?}");
    assert!(set.removed.is_empty(), "{set:#?}");
    for o in &set.objects {
        assert_eq!(
            conds(o),
            ["Ready=False/Refused", "Stalled=True/Refused"],
            "{}",
            o.name
        );
        assert!(
            o.status.conditions[1]
                .message
                .contains(&format!("[{code}]")),
            "{}: {}",
            o.name,
            o.status.conditions[1].message
        );
        assert_eq!(
            o.status.slice.as_ref().map(|s| s.target.as_str()),
            Some("t"),
            "{} keeps its summary",
            o.name
        );
    }
}

async fn ready_pair(
    fake: &Arc<FakeCloud>,
    f: &Fleet,
) -> BTreeMap<String, super::SliceStatusStatus> {
    cycle(fake, f, Approval::Auto).await;
    let set = statuses(f, &cycle(fake, f, Approval::Auto).await);
    for o in &set.objects {
        assert_eq!(conds(o), ["Ready=True/Converged"], "{}", o.name);
    }
    written(&set)
}

#[tokio::test]
async fn an_empty_source_refusal_keeps_the_objects_of_live_slices() {
    let fake = FakeCloud::new();
    let existing = ready_pair(&fake, &two(false, false)).await;
    // target.yaml alone: the engine refuses the plan as a whole.
    let none = targets_only();
    let err = reconcile(
        &none,
        &fake.cloud(),
        &opts(),
        |_| Approval::Auto,
        Arc::new(Quiet),
    )
    .await
    .unwrap_err();
    assert_eq!(err.code(), "empty_source");
    let m = err.to_string();
    let set = after(
        &none,
        CycleResult::Failed {
            code: err.code(),
            message: &m,
        },
        &existing,
    );
    kept_refused(&set, "empty_source");
    // And on the next cycle, from what was written.
    let again = after(
        &none,
        CycleResult::Failed {
            code: err.code(),
            message: &m,
        },
        &written(&set),
    );
    kept_refused(&again, "empty_source");
}

#[tokio::test]
async fn every_refusal_of_the_whole_cycle_keeps_every_object() {
    let fake = FakeCloud::new();
    let existing = ready_pair(&fake, &two(false, false)).await;
    let none = targets_only();
    for code in ["source_missing", "too_many_destructive", "plan_refused"] {
        let set = after(&none, CycleResult::Failed { code, message: "m" }, &existing);
        kept_refused(&set, code);
    }
    // Not refusals, but nothing is known gone either.
    for (code, reason) in [
        ("observe_failed", "ObserveFailed"),
        ("invalid_specs", "ProgressingWithRetry"),
    ] {
        let set = after(&none, CycleResult::Failed { code, message: "m" }, &existing);
        assert_eq!(names(&set), ["alpha", "beta"], "{code}");
        for o in &set.objects {
            assert_eq!(
                conds(o),
                [
                    format!("Ready=False/{reason}"),
                    format!("Reconciling=True/{reason}")
                ]
            );
        }
    }
}

#[tokio::test]
async fn a_protected_slice_gone_from_the_specs_keeps_its_object_with_every_refusal() {
    let fake = FakeCloud::new();
    let existing = ready_pair(&fake, &two(true, true)).await;
    // Only alpha stays in the specs: beta's and iron's deletes are refused.
    let mut rest = two(true, true);
    rest.slices.retain(|n, _| n == "alpha");
    let r = cycle(&fake, &rest, Approval::Auto).await;
    let codes: std::collections::BTreeSet<&str> =
        r.plan.refused.iter().map(|x| x.code.as_str()).collect();
    assert!(codes.contains("protected"), "{codes:?}");
    let set = after(&rest, CycleResult::Report(&r), &existing);
    assert_eq!(names(&set), ["alpha", "beta", "iron"], "{set:#?}");
    for o in &set.objects[1..] {
        assert_eq!(
            conds(o),
            ["Ready=False/Refused", "Stalled=True/Refused"],
            "{}",
            o.name
        );
        assert!(o.status.slice.is_some(), "{} keeps its summary", o.name);
        assert!(
            o.events
                .iter()
                .any(|e| e.warning && e.reason == "Refused" && e.action == "Delete"),
            "{}: {:#?}",
            o.name,
            o.events
        );
    }
    assert!(fake.calls_of("delete_node_pool").is_empty());
}

#[tokio::test]
async fn a_protected_pool_holds_back_its_policys_delete_and_the_object_says_so() {
    let fake = FakeCloud::new();
    let f = two(false, true);
    cycle(&fake, &f, Approval::Auto).await;
    let existing = written(&statuses(&f, &cycle(&fake, &f, Approval::Auto).await));
    // Stamp iron's pool by hand, as a spec that protected it would have.
    let mut pool = fake
        .pools(&crate::resource::ClusterRef {
            project: "unit-project".into(),
            location: "us-central1".into(),
            name: "c".into(),
        })
        .into_iter()
        .find(|p| p.name == "iron-0")
        .unwrap();
    pool.config
        .as_mut()
        .unwrap()
        .labels
        .insert("slicectl.dev/prevent-destroy".into(), "true".into());
    fake.seed_pool(
        &crate::resource::ClusterRef {
            project: "unit-project".into(),
            location: "us-central1".into(),
            name: "c".into(),
        },
        pool,
    );
    let mut rest = f.clone();
    rest.slices.remove("iron");
    let r = cycle(&fake, &rest, Approval::Auto).await;
    let codes: Vec<(&str, &str)> = r
        .plan
        .refused
        .iter()
        .map(|x| (x.kind, x.code.as_str()))
        .collect();
    assert_eq!(
        codes,
        [("workload_policy", "held_back"), ("node_pool", "protected")]
    );
    let set = after(&rest, CycleResult::Report(&r), &existing);
    let iron = set.objects.iter().find(|o| o.name == "iron").expect("kept");
    assert_eq!(conds(iron), ["Ready=False/Refused", "Stalled=True/Refused"]);
    assert!(
        iron.status
            .replicas
            .iter()
            .flat_map(|r| &r.resources)
            .any(|x| x.state == "REFUSED (held_back)")
            || iron.events.iter().any(|e| e.note.contains("[held_back]")),
        "{iron:#?}"
    );
}

#[tokio::test]
async fn deletes_declined_while_pruning_is_suspended_keep_the_object_refused() {
    let fake = FakeCloud::new();
    let existing = ready_pair(&fake, &two(false, false)).await;
    let mut rest = two(false, false);
    rest.slices.remove("beta");
    // A never-valid file suspends pruning: the controller declines the
    // plan and says why.
    let mut r = cycle(&fake, &rest, Approval::Declined).await;
    r.refuse_deletes("pruning_suspended", "1 file(s) in specs/ are invalid");
    let set = after(&rest, CycleResult::Report(&r), &existing);
    assert_eq!(names(&set), ["alpha", "beta"]);
    let beta = &set.objects[1];
    assert_eq!(conds(beta), ["Ready=False/Refused", "Stalled=True/Refused"]);
    assert!(
        beta.status.conditions[1]
            .message
            .contains("[pruning_suspended]")
    );
    assert_eq!(conds(&set.objects[0]), ["Ready=True/Converged"]);
    // Without the refusal it is still kept: pending, not gone.
    let r = cycle(&fake, &rest, Approval::Declined).await;
    let set = after(&rest, CycleResult::Report(&r), &existing);
    assert_eq!(names(&set), ["alpha", "beta"]);
}

#[tokio::test]
async fn a_slice_whose_target_cannot_be_observed_keeps_its_object() {
    let fake = FakeCloud::new();
    let existing = ready_pair(&fake, &two(false, false)).await;
    let mut rest = two(false, false);
    rest.slices.remove("beta");
    // The cluster could not be observed: nothing of it is seen or planned.
    let mut inv = crate::plan::Inventory::default();
    let scope = crate::plan::Scope::Cluster(crate::resource::ClusterRef {
        project: "unit-project".into(),
        location: "us-central1".into(),
        name: "c".into(),
    });
    inv.deferred.insert(scope, "connection refused".into());
    let plan = crate::plan::plan(
        &rest,
        &inv,
        &crate::kinds::plan_kinds(),
        &PlanOptions::default(),
    )
    .unwrap();
    assert!(plan.actions.is_empty());
    let r = Report {
        outcome: crate::engine::Outcome::NoChanges,
        plan,
        apply: None,
        slices: Vec::new(),
        status: Vec::new(),
        not_ready: Vec::new(),
    };
    let set = after(&rest, CycleResult::Report(&r), &existing);
    assert_eq!(names(&set), ["alpha", "beta"]);
    let beta = &set.objects[1];
    assert_eq!(
        conds(beta),
        [
            "Ready=False/ObserveFailed",
            "Reconciling=True/ObserveFailed"
        ]
    );
    assert!(beta.status.conditions[0].message.contains("[not_observed]"));
    assert!(
        beta.status.conditions[0]
            .message
            .contains("connection refused")
    );
}

#[tokio::test]
async fn an_object_goes_only_once_its_slice_is_seen_gone() {
    let fake = FakeCloud::new();
    let existing = ready_pair(&fake, &two(false, false)).await;
    let mut rest = two(false, false);
    rest.slices.remove("beta");
    // Its pool deleted this cycle: removed, with its events.
    let r = cycle(&fake, &rest, Approval::Auto).await;
    let set = after(&rest, CycleResult::Report(&r), &existing);
    assert_eq!(names(&set), ["alpha"]);
    assert_eq!(set.removed.len(), 1);
    // An object of a slice with nothing live, all observed: not kept.
    let r = cycle(&fake, &rest, Approval::Auto).await;
    let set = after(&rest, CycleResult::Report(&r), &existing);
    assert_eq!(names(&set), ["alpha"]);
}

#[tokio::test]
async fn a_replacement_held_by_the_live_stamp_is_refused_on_the_slices_object() {
    let fake = FakeCloud::new();
    let existing = ready_pair(&fake, &two(true, false)).await;
    // alpha no longer protected, and a change that replaces its pool: the
    // live stamp still holds this apply back (it lifts the stamp first).
    let text = format!(
        "{T}---\napiVersion: slicectl.dev/v1alpha1\nkind: Slice\nmetadata: {{name: alpha}}\nspec: {{target: t, backend: gke, accelerator: tpu-v6e-slice, topology: 2x2}}\n---\napiVersion: slicectl.dev/v1alpha1\nkind: Slice\nmetadata: {{name: beta}}\nspec: {{target: t, backend: gke, accelerator: tpu-v6e-slice, topology: 1x1, lifecycle: {{preventDestroy: true}}}}\n"
    );
    let f = load(&text);
    let r = cycle(&fake, &f, Approval::Auto).await;
    let codes: Vec<&str> = r.plan.refused.iter().map(|x| x.code.as_str()).collect();
    assert_eq!(codes, ["protected_live"]);
    let set = after(&f, CycleResult::Report(&r), &existing);
    assert_eq!(names(&set), ["alpha", "beta"]);
    assert_eq!(
        conds(&set.objects[0]),
        ["Ready=False/Refused", "Stalled=True/Refused"]
    );
    assert!(
        set.objects[0].status.conditions[1]
            .message
            .contains("[protected_live]")
    );
    assert_eq!(conds(&set.objects[1]), ["Ready=True/Converged"]);
}

/// Issue 17 item 1: a slice whose Target cannot be observed is Stalled
/// with TargetUnreachable and the cause; the other Target's slice is
/// unaffected (Ready).
#[tokio::test]
async fn a_slice_of_an_unobserved_target_is_stalled_and_the_others_are_not() {
    let fake = FakeCloud::new();
    let alpha_only = two(false, false);
    cycle(&fake, &alpha_only, Approval::Auto).await;
    let f = load(&format!(
        "{T}---\napiVersion: slicectl.dev/v1alpha1\nkind: Target\nmetadata: {{name: gone}}\nspec: {{project: unit-project, zone: us-central1-b, ownerId: unit, gke: {{location: us-central1, name: deleted}}}}\n---\napiVersion: slicectl.dev/v1alpha1\nkind: Slice\nmetadata: {{name: alpha}}\nspec: {{target: t, backend: gke, accelerator: tpu-v6e-slice, topology: 1x1}}\n---\napiVersion: slicectl.dev/v1alpha1\nkind: Slice\nmetadata: {{name: beta}}\nspec: {{target: t, backend: gke, accelerator: tpu-v6e-slice, topology: 1x1}}\n---\napiVersion: slicectl.dev/v1alpha1\nkind: Slice\nmetadata: {{name: lost}}\nspec: {{target: gone, backend: gke, accelerator: tpu-v6e-slice, topology: 1x1}}\n"
    ));
    let mut inv = crate::observe::observe(&fake.cloud(), &f, crate::kinds::REGISTRY).await;
    inv.unobserved.clear();
    inv.unobserved.insert(
        crate::plan::Scope::Cluster(crate::resource::ClusterRef {
            project: "unit-project".into(),
            location: "us-central1".into(),
            name: "deleted".into(),
        }),
        crate::plan::Unseen {
            code: "target_not_found".into(),
            cause: "HTTP 404 NOT_FOUND: Not found: projects/unit-project/locations/us-central1/clusters/deleted.".into(),
        },
    );
    let plan = crate::plan::plan(
        &f,
        &inv,
        &crate::kinds::plan_kinds(),
        &PlanOptions::default(),
    )
    .unwrap();
    assert!(plan.actions.is_empty(), "{:?}", plan.actions);
    let r = Report {
        outcome: crate::engine::Outcome::NoChanges,
        status: crate::status::rows(&f, &inv, &crate::kinds::plan_kinds()),
        plan,
        apply: None,
        slices: Vec::new(),
        not_ready: Vec::new(),
    };
    assert!(!r.success());
    let set = statuses(&f, &r);
    assert_eq!(names(&set), ["alpha", "beta", "lost"]);
    assert_eq!(conds(&set.objects[0]), ["Ready=True/Converged"]);
    assert_eq!(conds(&set.objects[1]), ["Ready=True/Converged"]);
    let lost = &set.objects[2];
    assert_eq!(
        conds(lost),
        [
            "Ready=False/TargetUnreachable",
            "Stalled=True/TargetUnreachable"
        ]
    );
    let m = &lost.status.conditions[1].message;
    assert!(m.starts_with("[target_not_found] target gone"), "{m}");
    assert!(m.contains("clusters/deleted."), "{m}");
    // One Warning Event when the slice becomes unreachable, none on the
    // healthy slices, and none again while it stays unreachable.
    let ev: Vec<(bool, &str, &str)> = lost
        .events
        .iter()
        .map(|e| (e.warning, e.reason.as_str(), e.action.as_str()))
        .collect();
    assert_eq!(ev, [(true, "TargetUnreachable", "Observe")]);
    assert!(lost.events[0].note.contains("target_not_found"));
    assert!(set.objects[0].events.is_empty() && set.objects[1].events.is_empty());
    let again = after(&f, CycleResult::Report(&r), &written(&set));
    assert!(
        again.objects[2].events.is_empty(),
        "{:?}",
        again.objects[2].events
    );
}

/// A slice gone from the specs whose Target could not be observed keeps
/// its object (nothing of it is known gone), and a slice still in the
/// specs on that Target is Stalled/TargetUnreachable.
#[tokio::test]
async fn a_slice_gone_from_the_specs_of_an_unobserved_target_keeps_its_object() {
    let fake = FakeCloud::new();
    let existing = ready_pair(&fake, &two(false, false)).await;
    let mut rest = two(false, false);
    rest.slices.remove("beta");
    let mut inv = crate::plan::Inventory::default();
    inv.unobserved.insert(
        crate::plan::Scope::Cluster(crate::resource::ClusterRef {
            project: "unit-project".into(),
            location: "us-central1".into(),
            name: "c".into(),
        }),
        crate::plan::Unseen {
            code: "target_forbidden".into(),
            cause: "HTTP 403 PERMISSION_DENIED: the caller may not list node pools".into(),
        },
    );
    let plan = crate::plan::plan(
        &rest,
        &inv,
        &crate::kinds::plan_kinds(),
        &PlanOptions::default(),
    )
    .unwrap();
    assert!(plan.actions.is_empty());
    let r = Report {
        outcome: crate::engine::Outcome::NoChanges,
        plan,
        apply: None,
        slices: Vec::new(),
        status: Vec::new(),
        not_ready: Vec::new(),
    };
    let set = after(&rest, CycleResult::Report(&r), &existing);
    assert_eq!(names(&set), ["alpha", "beta"]);
    assert_eq!(
        conds(&set.objects[0]),
        [
            "Ready=False/TargetUnreachable",
            "Stalled=True/TargetUnreachable"
        ]
    );
    let beta = &set.objects[1];
    assert_eq!(
        conds(beta),
        [
            "Ready=False/ObserveFailed",
            "Reconciling=True/ObserveFailed"
        ]
    );
    let m = &beta.status.conditions[0].message;
    assert!(
        m.contains("[not_observed]") && m.contains("[target_forbidden]"),
        "{m}"
    );
}

/// A delete held until the spec files settle (watch mode, `--dir`): the
/// slice is Reconciling with the reason `Settling` (it goes ahead by
/// itself), not Stalled as a rail's refusal is.
#[tokio::test]
async fn a_delete_held_until_the_specs_settle_is_reconciling() {
    let fake = FakeCloud::new();
    let f = fleet();
    let _ = cycle(&fake, &f, Approval::Auto).await;
    let one = crate::spec::load(&[SourceFile {
        path: "f.yaml".into(),
        text: "apiVersion: slicectl.dev/v1alpha1
kind: Target
metadata: {name: t}
spec: {project: unit-project, zone: us-central1-b, ownerId: unit, gke: {location: us-central1, name: c}}
---
apiVersion: slicectl.dev/v1alpha1
kind: Slice
metadata: {name: a}
spec: {target: t, backend: gke, accelerator: tpu-v6e-slice, topology: 1x1, replicas: 1}
"
        .into(),
    }])
    .unwrap();
    let r = crate::engine::reconcile_with(
        &one,
        &fake.cloud(),
        &opts(),
        |p| {
            assert_eq!(crate::cycle::settle::hold(p, "the files just changed"), 1);
        },
        |_| Approval::Auto,
        Arc::new(Quiet),
    )
    .await
    .unwrap();
    assert_eq!(r.plan.refused.len(), 1);
    let set = statuses(&one, &r);
    let o = only(&set);
    assert_eq!(
        conds(o),
        ["Ready=False/Settling", "Reconciling=True/Settling"],
        "{:#?}",
        o.status.conditions
    );
    assert!(
        o.status.conditions[1].message.contains("[settling]"),
        "{}",
        o.status.conditions[1].message
    );
}

/// A step held by the slice's disruption policy (its replica is busy) is
/// `Reconciling/WaitingForWorkload`, with the code and the pods, not Ready
/// and not Stalled: it runs by itself once allowed.
#[tokio::test]
async fn a_held_step_is_waiting_for_workload() {
    let fake = FakeCloud::new();
    let f = fleet();
    let mut r = cycle(&fake, &f, Approval::Auto).await;
    r.plan.held.push(crate::plan::workload::Held {
        kind: "node_pool",
        name: "a-0".into(),
        address: "slice.a[0].node_pool".into(),
        slice: "a".into(),
        replica: 0,
        scope: crate::plan::Scope::Cluster(crate::resource::ClusterRef {
            project: "unit-project".into(),
            location: "us-central1".into(),
            name: "c".into(),
        }),
        action: crate::plan::ActionKind::Replace,
        reason: "replace because x".into(),
        code: "busy",
        message: "slice replica a[0] is busy: ml/train-0 (jobset ml/train)".into(),
        pods: Vec::new(),
    });
    let set = statuses(&f, &r);
    let o = only(&set);
    assert_eq!(
        conds(o),
        [
            "Ready=False/WaitingForWorkload",
            "Reconciling=True/WaitingForWorkload"
        ]
    );
    let m = &o.status.conditions[1].message;
    assert!(
        m.starts_with("[busy] replace slice.a[0].node_pool: "),
        "{m}"
    );
    assert!(m.contains("ml/train-0"), "{m}");
    assert_eq!(reason::WAITING_FOR_WORKLOAD, "WaitingForWorkload");
    // One Normal Event when the hold begins, not one per cycle.
    let ev: Vec<(bool, &str)> = o
        .events
        .iter()
        .filter(|e| e.reason == "WaitingForWorkload")
        .map(|e| (e.warning, e.action.as_str()))
        .collect();
    assert_eq!(ev, [(false, "Wait")]);
    let again = after(&f, CycleResult::Report(&r), &written(&set));
    assert!(
        only(&again)
            .events
            .iter()
            .all(|e| e.reason != "WaitingForWorkload"),
        "{:?}",
        only(&again).events
    );
}

#[tokio::test]
async fn a_slice_past_its_quota_is_stalled_quota_exceeded() {
    let fake = FakeCloud::new();
    let f = fleet();
    // Two v6e 1x1 replicas (1 chip each) and 1 chip left of the v6e family
    // quota (Cloud Quotas; the usage observed).
    fake.seed_quotas(
        "unit-project",
        "us-central1",
        vec![crate::resource::compute::Quota {
            metric: "TPUS_PER_TPU_FAMILY/CT6E".into(),
            limit: 1.0,
            usage: 0.0,
        }],
    );
    let r = cycle(&fake, &f, Approval::Auto).await;
    assert_eq!(
        r.plan
            .refused
            .iter()
            .map(|x| x.code.as_str())
            .collect::<Vec<_>>(),
        ["quota_insufficient"]
    );
    let set = statuses(&f, &r);
    let o = only(&set);
    assert_eq!(
        conds(o),
        ["Ready=False/QuotaExceeded", "Stalled=True/QuotaExceeded"]
    );
    assert!(
        o.status.conditions[1]
            .message
            .contains("needs 1 TPUS_PER_TPU_FAMILY/CT6E chips in us-central1"),
        "{}",
        o.status.conditions[1].message
    );
}

#[test]
fn one_leader_lists_every_object_and_a_replica_its_shards_and_the_unlabelled() {
    use super::writer::list_selectors;
    use crate::controller::shard::ShardScope;
    assert_eq!(
        list_selectors(None),
        ["app.kubernetes.io/managed-by=slicectl"]
    );
    let scope = ShardScope {
        shards: 4,
        held: [0, 3].into(),
    };
    assert_eq!(
        list_selectors(Some(&scope)),
        [
            "app.kubernetes.io/managed-by=slicectl,slicectl.dev/shard in (0,3)",
            "app.kubernetes.io/managed-by=slicectl,slicectl.dev/shard notin (0,1,2,3)",
        ]
    );
    let none = ShardScope {
        shards: 2,
        held: Default::default(),
    };
    assert_eq!(
        list_selectors(Some(&none)),
        ["app.kubernetes.io/managed-by=slicectl,slicectl.dev/shard notin (0,1)"]
    );
}
