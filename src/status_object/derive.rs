//! From what slicectl knows after a cycle to each slice's status object:
//! pure, no I/O.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

use super::crd::{
    READY, RECONCILING, ReplicaStatus, ResourceStatus, STALLED, SliceStatusStatus, SpecSummary,
};
use crate::engine::Report;
use crate::plan::{ActionKind, render_fleet};
use crate::spec::Fleet;
use crate::status::Row;

/// Condition reasons (stable, PascalCase as Kubernetes wants them).
pub mod reason {
    /// Ready: every replica exists with all its nodes.
    pub const CONVERGED: &str = "Converged";
    /// Reconciling: changes are being made or waited on.
    pub const PROGRESSING: &str = "Progressing";
    /// Reconciling: a step failed with an error that may clear; retried.
    pub const PROGRESSING_WITH_RETRY: &str = "ProgressingWithRetry";
    /// Reconciling: resources exist, nodes are not all there yet.
    pub const PROVISIONING: &str = "Provisioning";
    /// Stalled: the slice's spec file is invalid (its last good version
    /// stays in force).
    pub const INVALID_SPEC: &str = "InvalidSpec";
    /// Stalled: a safety rail refused a change (preventDestroy, a name
    /// slicectl does not own, `--max-destroy`, an empty source).
    pub const REFUSED: &str = "Refused";
    /// Stalled past the threshold, Reconciling before it: no TPU capacity
    /// (stockout, reservation too small).
    pub const CAPACITY_UNAVAILABLE: &str = "CapacityUnavailable";
    /// Stalled: a quota is exhausted.
    pub const QUOTA_EXCEEDED: &str = "QuotaExceeded";
    /// Stalled: credentials or permissions are missing.
    pub const ACCESS_DENIED: &str = "AccessDenied";
    /// Stalled: a resource slicectl does not own is in the way.
    pub const CONFLICT: &str = "Conflict";
    /// Reconciling: the live state could not be observed; retried.
    pub const OBSERVE_FAILED: &str = "ObserveFailed";
    /// The slice's Target could not be observed (a deleted cluster, an
    /// unreachable Kubernetes API, a project the credentials cannot see):
    /// nothing is done to the slice until it can be. Stalled: it needs a
    /// person (or the cluster back); the other Targets go on.
    pub const TARGET_UNREACHABLE: &str = "TargetUnreachable";
    /// Reconciling: a delete or replacement waits until the spec source
    /// has been unchanged for the settle period (`--settle`).
    pub const SETTLING: &str = "Settling";
    /// Reconciling: a step that destroys a busy replica's capacity is held
    /// by the slice's disruption policy (pods bound, a window, the budget,
    /// a PodDisruptionBudget); it runs by itself once allowed.
    pub const WAITING_FOR_WORKLOAD: &str = "WaitingForWorkload";
    /// Ready=Unknown, Reconciling: the slice's resources are there, but its
    /// Nodes were not read (its cluster's Kubernetes API is deferred: under
    /// `--sim`, or no Google token for a GKE cluster's API), so whether a
    /// job can be scheduled on it is not known, and never assumed.
    pub const NODES_NOT_OBSERVED: &str = "NodesNotObserved";
}

/// How the cycle ended, as far as status is concerned.
#[derive(Debug, Clone, Copy)]
pub enum CycleResult<'a> {
    /// It planned (and maybe applied): the engine's report.
    Report(&'a Report),
    /// It stopped before applying anything (`engine::ReconcileError`): its
    /// stable `code()` and its message. Applies to every slice.
    Failed {
        /// `ReconcileError::code()`.
        code: &'a str,
        /// The error's text.
        message: &'a str,
    },
}

/// What slicectl knows after a cycle.
#[derive(Debug, Clone, Copy)]
pub struct Cycle<'a> {
    /// The specs in force (for an invalid file, its last good version).
    pub fleet: &'a Fleet,
    /// How the cycle ended.
    pub result: CycleResult<'a>,
    /// Slices whose spec file is invalid now → the located error
    /// (`file:line:column: message`, as `validate` prints it).
    pub invalid: &'a BTreeMap<String, String>,
    /// Slices whose capacity is unavailable → since when (kept by the caller
    /// across cycles, e.g. its unavailable-capacity cache).
    pub unavailable_since: &'a BTreeMap<String, Timestamp>,
    /// How long capacity may stay unavailable before the slice is Stalled
    /// rather than Reconciling.
    pub stall_after: Duration,
    /// The time of this cycle (conditions' `lastTransitionTime`; the writer
    /// keeps the old one when a condition did not change).
    pub now: Timestamp,
    /// The status objects slicectl manages now, by name, with their status.
    /// An object is deleted only when this cycle shows its slice gone; one
    /// whose slice left the specs while a refusal stands (the whole cycle
    /// refused, its deletes refused or held, its target not observed) is
    /// kept and says why.
    pub existing: &'a BTreeMap<String, SliceStatusStatus>,
}

/// A Kubernetes Event to record on a slice's status object.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct EventNote {
    /// `Warning` rather than `Normal`.
    pub warning: bool,
    /// PascalCase reason (`Created`, `Replaced`, `Deleted`,
    /// `CapacityUnavailable`, `Refused`, `QuotaExceeded`, `ApplyFailed`,
    /// and on entering the state, `TargetUnreachable`, `WaitingForWorkload`).
    pub reason: String,
    /// What was done (`Create`, `Replace`, `Delete`, `Update`, `Wait`,
    /// `Observe`).
    pub action: String,
    /// For people.
    pub note: String,
}

/// One slice's object: its name (the slice's), its status and the events
/// of this cycle.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SliceObject {
    /// Object name = slice name.
    pub name: String,
    /// The status, `observedGeneration` left for the writer.
    pub status: SliceStatusStatus,
    /// Events to record on it.
    pub events: Vec<EventNote>,
}

/// Every status object there should be after a cycle, and the events of
/// slices whose object goes (their last deletes).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct StatusSet {
    /// Objects to write, sorted by name. Every other object slicectl
    /// manages in the namespace is deleted.
    pub objects: Vec<SliceObject>,
    /// Slices no longer in the specs whose object goes: events recorded on
    /// it before it is deleted.
    pub removed: Vec<SliceObject>,
}

/// Longest message kept in a condition or event (Events allow 1 KiB).
pub const MAX_MESSAGE: usize = 1000;

/// Shortens a message to at most [`MAX_MESSAGE`] bytes on a character
/// boundary.
pub fn shorten(s: &str) -> String {
    if s.len() <= MAX_MESSAGE {
        return s.to_string();
    }
    let mut end = MAX_MESSAGE - 3;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &s[..end])
}

/// Classification of a failed step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Severity {
    /// Will not clear by itself.
    Stalled(&'static str),
    /// May clear; retried.
    Retry(&'static str),
}

fn is_quota(message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    m.contains("quota_exceeded")
        || (m.contains("quota") && m.contains("exceeded") && !m.contains("requests"))
}

/// How a failure code (`apply::Failure::code`) and message weigh.
fn classify(code: &str, message: &str, capacity_stalled: bool) -> Severity {
    match code {
        "stockout" | "reservation_insufficient" if capacity_stalled => {
            Severity::Stalled(reason::CAPACITY_UNAVAILABLE)
        }
        "stockout" | "reservation_insufficient" => Severity::Retry(reason::CAPACITY_UNAVAILABLE),
        crate::plan::kind::QUOTA_EXCEEDED => Severity::Stalled(reason::QUOTA_EXCEEDED),
        "operation_failed" | "cloud_error" if is_quota(message) => {
            Severity::Stalled(reason::QUOTA_EXCEEDED)
        }
        // The template the spec brings cannot run the slice, or does not
        // exist: nothing changes until someone fixes it.
        "invalid_template" | "missing_template" => Severity::Stalled(reason::INVALID_SPEC),
        "auth" | "kube_forbidden" | "kube_config" => Severity::Stalled(reason::ACCESS_DENIED),
        "conflict" => Severity::Stalled(reason::CONFLICT),
        "busy" | "pdb" | "drain_timeout" | "do_not_disrupt" | "busy_unknown" => {
            Severity::Retry(reason::WAITING_FOR_WORKLOAD)
        }
        _ => Severity::Retry(reason::PROGRESSING_WITH_RETRY),
    }
}

fn condition(type_: &str, status: bool, reason: &str, message: &str, now: Timestamp) -> Condition {
    Condition {
        type_: type_.to_string(),
        status: if status { "True" } else { "False" }.to_string(),
        reason: reason.to_string(),
        message: shorten(message),
        last_transition_time: Time(now),
        observed_generation: None,
    }
}

/// The verdict on one slice.
enum Verdict {
    Ready(String),
    /// Readiness not known (Nodes not read): Ready=Unknown, Reconciling.
    Unknown(&'static str, String),
    Reconciling(&'static str, String),
    Stalled(&'static str, String),
}

/// The Event of a slice entering a state no step's Event reports: its
/// Target could not be observed (`TargetUnreachable`, a Warning), or a step
/// of it is held for a running workload (`WaitingForWorkload`). Recorded
/// once, when the state begins (the object's last conditions have another
/// reason), not once per cycle while it lasts.
fn entered(v: &Verdict, old: Option<&SliceStatusStatus>) -> Option<EventNote> {
    let (warning, why, action, m) = match v {
        Verdict::Stalled(r @ reason::TARGET_UNREACHABLE, m) => (true, *r, "Observe", m),
        Verdict::Reconciling(r @ reason::WAITING_FOR_WORKLOAD, m) => (false, *r, "Wait", m),
        _ => return None,
    };
    let already = old.is_some_and(|o| o.conditions.iter().any(|c| c.reason == why));
    (!already).then(|| EventNote {
        warning,
        reason: why.into(),
        action: action.into(),
        note: shorten(m),
    })
}

fn conditions(v: &Verdict, now: Timestamp) -> Vec<Condition> {
    match v {
        Verdict::Ready(m) => vec![condition(READY, true, reason::CONVERGED, m, now)],
        Verdict::Unknown(r, m) => {
            let mut ready = condition(READY, false, r, m, now);
            ready.status = "Unknown".to_string();
            vec![ready, condition(RECONCILING, true, r, m, now)]
        }
        Verdict::Reconciling(r, m) => vec![
            condition(READY, false, r, m, now),
            condition(RECONCILING, true, r, m, now),
        ],
        Verdict::Stalled(r, m) => vec![
            condition(READY, false, r, m, now),
            condition(STALLED, true, r, m, now),
        ],
    }
}

/// `READY/EXPECTED` out of a status row's nodes column (`4/4`, `?/4`,
/// `3/4 ready (4 joined)`).
fn parse_nodes(s: &str) -> (Option<u32>, Option<u32>) {
    let Some((ready, rest)) = s.split_once('/') else {
        return (None, None);
    };
    let expected: String = rest.chars().take_while(char::is_ascii_digit).collect();
    (ready.trim().parse().ok(), expected.parse().ok())
}

fn event_for(action: ActionKind) -> (&'static str, &'static str, &'static str) {
    match action {
        ActionKind::Create => ("Created", "Create", "created"),
        ActionKind::Update => ("Updated", "Update", "updated in place"),
        ActionKind::Replace => ("Replaced", "Replace", "replaced"),
        ActionKind::Delete => ("Deleted", "Delete", "deleted"),
        ActionKind::Wait => ("Waited", "Wait", "waited for the operation on"),
    }
}

fn capitalised(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

/// Each slice's status object after a cycle.
pub fn derive(c: &Cycle<'_>) -> StatusSet {
    let report = match c.result {
        CycleResult::Report(r) => Some(r),
        CycleResult::Failed { .. } => None,
    };
    let kinds = crate::engine::kinds();
    let desired = render_fleet(c.fleet, &kinds);
    let rows: &[Row] = report.map(|r| r.status.as_slice()).unwrap_or(&[]);

    // Which slices get an object.
    let mut names: BTreeSet<String> = c.fleet.slices.keys().cloned().collect();
    names.extend(c.invalid.keys().cloned());
    let mut departed: BTreeSet<String> = BTreeSet::new();
    if let Some(r) = report {
        for s in &r.slices {
            if !c.fleet.slices.contains_key(&s.slice) && !s.slice.is_empty() {
                if s.ok() {
                    departed.insert(s.slice.clone());
                } else {
                    names.insert(s.slice.clone());
                }
            }
        }
        for row in rows {
            if !c.fleet.slices.contains_key(&row.slice) {
                names.insert(row.slice.clone());
                departed.remove(&row.slice);
            }
        }
    }

    if let Some(r) = report {
        // Deletes planned and not run (a declined plan): the slice is not
        // gone yet.
        for a in &r.plan.actions {
            if !c.fleet.slices.contains_key(&a.owner.slice) && !a.owner.slice.is_empty() {
                let done = r
                    .apply
                    .as_ref()
                    .is_some_and(|rep| rep.completed.contains(&a.address()));
                if !done && !departed.contains(&a.owner.slice) {
                    names.insert(a.owner.slice.clone());
                }
            }
        }
    }

    let mut objects = Vec::new();
    for name in &names {
        objects.push(one(c, report, &desired, rows, name));
    }
    // Objects of slices no longer in the specs that nothing above reports
    // on: kept while the cycle cannot show the slice gone.
    for (name, old) in c.existing {
        if names.contains(name) || departed.contains(name) {
            continue;
        }
        if let Some(v) = outlives(c, report, old) {
            names.insert(name.clone());
            objects.push(kept(name, old, &v, c.now));
        }
    }
    objects.sort_by(|a, b| a.name.cmp(&b.name));
    let removed = departed
        .into_iter()
        .filter(|n| !names.contains(n))
        .map(|name| {
            let events = report.map(|r| events_of(r, &name)).unwrap_or_default();
            SliceObject {
                name,
                status: SliceStatusStatus::default(),
                events,
            }
        })
        .collect();
    StatusSet { objects, removed }
}

/// Why the object of a slice no longer in the specs stays after this
/// cycle, or `None` when the cycle shows the slice gone (it planned, saw
/// the slice's target, and nothing of the slice is live, refused or
/// pending).
fn outlives(c: &Cycle<'_>, report: Option<&Report>, old: &SliceStatusStatus) -> Option<Verdict> {
    let Some(r) = report else {
        // Stopped before planning, or refused as a whole: nothing was
        // pruned, so nothing is known gone.
        return Some(verdict(
            c,
            "",
            false,
            &[],
            &[],
            &BTreeMap::new(),
            &BTreeMap::new(),
        ));
    };
    let target = old.slice.as_ref()?.target.as_str();
    let t = c.fleet.targets.get(target)?;
    let one = Fleet {
        targets: BTreeMap::from([(target.to_string(), t.clone())]),
        ..Fleet::default()
    };
    let owners = crate::plan::Owners::of(&one, &crate::engine::kinds());
    let mut unseen: Vec<String> = r
        .plan
        .deferred
        .iter()
        .filter(|d| owners.scopes().any(|s| s == &d.scope))
        .map(|d| format!("{}: {}", d.scope, d.reason))
        .collect();
    unseen.extend(
        r.plan
            .unobserved
            .iter()
            .filter(|u| u.target == target)
            .map(|u| format!("{} [{}]: {}", u.scope, u.why.code, u.why.cause)),
    );
    if unseen.is_empty() {
        return None;
    }
    Some(Verdict::Reconciling(
        reason::OBSERVE_FAILED,
        format!(
            "[not_observed] the slice is no longer in the specs, but its target {target} could not be observed ({}); nothing of it is pruned, and this object stays, until it is",
            unseen.join("; ")
        ),
    ))
}

/// The object of a slice no longer in the specs, kept: what it last said
/// about the slice, with this cycle's verdict.
fn kept(name: &str, old: &SliceStatusStatus, v: &Verdict, now: Timestamp) -> SliceObject {
    SliceObject {
        name: name.to_string(),
        status: SliceStatusStatus {
            observed_generation: None,
            conditions: conditions(v, now),
            ..old.clone()
        },
        events: Vec::new(),
    }
}

fn events_of(r: &Report, slice: &str) -> Vec<EventNote> {
    let mut out = Vec::new();
    let actions: BTreeMap<String, &crate::plan::Action> = r
        .plan
        .actions
        .iter()
        .filter(|a| a.owner.slice == slice)
        .map(|a| (a.address(), a))
        .collect();
    if let Some(rep) = &r.apply {
        for addr in &rep.completed {
            let Some(a) = actions.get(addr) else { continue };
            if a.action == ActionKind::Wait {
                continue;
            }
            let (reason, action, verb) = event_for(a.action);
            out.push(EventNote {
                warning: false,
                reason: reason.into(),
                action: action.into(),
                note: shorten(&format!(
                    "{verb} {} {} ({addr}): {}",
                    a.noun,
                    a.id.name,
                    a.reason_text()
                )),
            });
        }
        for f in &rep.failures {
            let Some(a) = actions.get(&f.address) else {
                continue;
            };
            let reason = match classify(f.code, &f.message, false) {
                Severity::Retry(reason::CAPACITY_UNAVAILABLE) => reason::CAPACITY_UNAVAILABLE,
                Severity::Stalled(reason::QUOTA_EXCEEDED) => reason::QUOTA_EXCEEDED,
                _ => "ApplyFailed",
            };
            out.push(EventNote {
                warning: true,
                reason: reason.into(),
                action: event_for(a.action).1.into(),
                note: shorten(&format!("[{}] {}: {}", f.code, f.address, f.message)),
            });
        }
    }
    for rf in r.plan.refused.iter().filter(|x| x.slice == slice) {
        out.push(EventNote {
            warning: true,
            reason: reason::REFUSED.into(),
            action: capitalised(rf.action.as_str()),
            note: shorten(&format!("[{}] {}", rf.code, rf.message)),
        });
    }
    out
}

fn one(
    c: &Cycle<'_>,
    report: Option<&Report>,
    desired: &[crate::plan::Desired],
    rows: &[Row],
    name: &str,
) -> SliceObject {
    let slice = c.fleet.slices.get(name);
    // A slice gone from the specs whose object stays keeps the summary it
    // was last read with.
    let summary = match slice {
        Some(s) => Some(SpecSummary {
            target: s.spec.target.clone(),
            backend: s.spec.backend.as_str().to_string(),
            accelerator: s.spec.accelerator.clone(),
            topology: s.shape.topology.clone(),
            machine_type: s.shape.machine_type.to_string(),
            replicas: s.spec.replicas,
            hosts_per_replica: s.shape.hosts,
        }),
        None if !c.invalid.contains_key(name) => c.existing.get(name).and_then(|o| o.slice.clone()),
        None => None,
    };
    let slice_report = report.and_then(|r| r.slices.iter().find(|s| s.slice == name));
    let actions: Vec<&crate::plan::Action> = report
        .map(|r| {
            r.plan
                .actions
                .iter()
                .filter(|a| a.owner.slice == name)
                .collect()
        })
        .unwrap_or_default();

    // Per replica: the resources the specs give it, and its status row.
    let mut replicas: BTreeMap<u32, ReplicaStatus> = BTreeMap::new();
    let mut primary: BTreeMap<u32, String> = BTreeMap::new();
    // Replicas whose Nodes were not read, and why.
    let mut unobserved: BTreeMap<u32, String> = BTreeMap::new();
    let observe_only = |k: crate::plan::KindId| {
        crate::engine::kinds()
            .iter()
            .any(|x| x.id() == k && x.observe_only())
    };
    for d in desired
        .iter()
        .filter(|d| d.owner.slice == name && !observe_only(d.id.kind))
    {
        let addr = d.owner.address(d.id.kind);
        let state = resource_state(report, &actions, &addr);
        replicas
            .entry(d.owner.replica)
            .or_insert_with(|| ReplicaStatus {
                index: d.owner.replica,
                ..ReplicaStatus::default()
            })
            .resources
            .push(ResourceStatus {
                kind: d.id.kind.as_str().to_string(),
                name: d.id.name.clone(),
                state,
            });
    }
    for row in rows.iter().filter(|r| r.slice == name) {
        let rep = replicas
            .entry(row.replica)
            .or_insert_with(|| ReplicaStatus {
                index: row.replica,
                ..ReplicaStatus::default()
            });
        let (ready, expected) = parse_nodes(&row.nodes);
        rep.nodes_ready = ready;
        rep.nodes_expected = expected.unwrap_or_else(|| slice.map(|s| s.shape.hosts).unwrap_or(0));
        rep.nodes = row.nodes.clone();
        if !row.nodes_unobserved.is_empty() {
            unobserved.insert(row.replica, row.nodes_unobserved.clone());
        }
        rep.last_error = (!row.last_error.is_empty()).then(|| shorten(&row.last_error));
        primary.insert(row.replica, row.state.clone());
        // The primary resource's state is the live one. Under a declared
        // rename the live primary resource keeps its old name
        // (`previousNames`): it stands in for the rendered one.
        let primary_kind = |k: &str| {
            crate::engine::kinds()
                .iter()
                .any(|x| x.is_primary() && x.id().as_str() == k)
        };
        let at = rep
            .resources
            .iter()
            .position(|r| r.name == row.node_pool)
            .or_else(|| rep.resources.iter().position(|r| primary_kind(&r.kind)));
        if let Some(i) = at {
            rep.resources[i].name = row.node_pool.clone();
        }
        match at.and_then(|i| rep.resources.get_mut(i)) {
            Some(r) => r.state = row.state.clone(),
            None => rep.resources.push(ResourceStatus {
                kind: String::new(),
                name: row.node_pool.clone(),
                state: row.state.clone(),
            }),
        }
    }
    if let Some(sr) = slice_report {
        for f in &sr.failed {
            if let Some(rep) = replicas
                .values_mut()
                .find(|r| f.address.starts_with(&format!("slice.{name}[{}]", r.index)))
                // A failed step says more than the Nodes it left unready.
                && rep
                    .last_error
                    .as_deref()
                    .is_none_or(|e| e.starts_with(crate::kinds::readiness::NOT_READY_PREFIX))
            {
                rep.last_error = Some(shorten(&format!("[{}] {}", f.code, f.message)));
            }
        }
    }
    let replicas: Vec<ReplicaStatus> = replicas.into_values().collect();
    let nodes = if rows.iter().any(|r| r.slice == name) {
        let ready: Option<u32> = replicas.iter().map(|r| r.nodes_ready).sum();
        let expected: u32 = replicas.iter().map(|r| r.nodes_expected).sum();
        Some(match ready {
            Some(n) => format!("{n}/{expected}"),
            None => format!("?/{expected}"),
        })
    } else {
        None
    };

    let verdict = verdict(
        c,
        name,
        slice.is_some(),
        &actions,
        &replicas,
        &primary,
        &unobserved,
    );
    let mut events = report.map(|r| events_of(r, name)).unwrap_or_default();
    events.extend(entered(&verdict, c.existing.get(name)));
    SliceObject {
        name: name.to_string(),
        status: SliceStatusStatus {
            observed_generation: None,
            conditions: conditions(&verdict, c.now),
            slice: summary,
            nodes,
            replicas,
            source: rows
                .iter()
                .find(|r| r.slice == name && !r.source.is_empty())
                .map(|r| r.source.clone()),
        },
        events,
    }
}

fn resource_state(report: Option<&Report>, actions: &[&crate::plan::Action], addr: &str) -> String {
    let Some(r) = report else {
        return "UNKNOWN".into();
    };
    if let Some(rf) = r.plan.refused.iter().find(|x| x.address == addr) {
        return format!("REFUSED ({})", rf.code);
    }
    let Some(a) = actions.iter().find(|a| a.address() == addr) else {
        return "IN SYNC".into();
    };
    let Some(rep) = &r.apply else {
        return format!("PENDING {}", a.action.as_str().to_ascii_uppercase());
    };
    if rep.completed.iter().any(|x| x == addr) {
        return match a.action {
            ActionKind::Create => "CREATED",
            ActionKind::Update => "UPDATED",
            ActionKind::Replace => "REPLACED",
            ActionKind::Delete => "DELETED",
            ActionKind::Wait => "IN SYNC",
        }
        .into();
    }
    if let Some(f) = rep.failures.iter().find(|f| f.address == addr) {
        return format!("FAILED ({})", f.code);
    }
    "NOT RUN".into()
}

fn verdict(
    c: &Cycle<'_>,
    name: &str,
    in_specs: bool,
    actions: &[&crate::plan::Action],
    replicas: &[ReplicaStatus],
    primary: &BTreeMap<u32, String>,
    unobserved: &BTreeMap<u32, String>,
) -> Verdict {
    if let Some(e) = c.invalid.get(name) {
        let m = if in_specs {
            format!("{e} (the last valid version of this slice stays in force)")
        } else {
            e.clone()
        };
        return Verdict::Stalled(reason::INVALID_SPEC, m);
    }
    let r = match c.result {
        CycleResult::Failed { code, message } => {
            return match code {
                "empty_source" | "source_missing" | "too_many_destructive" | "plan_refused" => {
                    Verdict::Stalled(reason::REFUSED, format!("[{code}] {message}"))
                }
                "observe_failed" => {
                    Verdict::Reconciling(reason::OBSERVE_FAILED, format!("[{code}] {message}"))
                }
                _ => Verdict::Reconciling(
                    reason::PROGRESSING_WITH_RETRY,
                    format!("[{code}] {message}"),
                ),
            };
        }
        CycleResult::Report(r) => r,
    };
    if let Some(u) = r.plan.unobserved_slice(name) {
        return Verdict::Stalled(
            reason::TARGET_UNREACHABLE,
            format!(
                "[{}] target {} could not be observed ({}): {}; nothing is done to this slice (no create, update or delete) until it can be",
                u.why.code, u.target, u.scope, u.why.cause
            ),
        );
    }
    let sr = r.slices.iter().find(|s| s.slice == name);
    if let Some(rf) = sr.and_then(|s| s.refused.first()) {
        let more = sr.map(|s| s.refused.len()).unwrap_or(1) - 1;
        if sr.is_some_and(|s| s.refused.iter().all(|x| x.code == crate::cycle::SETTLING)) {
            return Verdict::Reconciling(reason::SETTLING, format!("[{}] {}", rf.code, rf.message));
        }
        let tail = if more > 0 {
            format!(" (and {more} more refused)")
        } else {
            String::new()
        };
        // The preflight's refusals say what is short: the quota, or the
        // reservation's room.
        let why = match rf.code.as_str() {
            "quota_insufficient" => reason::QUOTA_EXCEEDED,
            "reservation_insufficient" => reason::CAPACITY_UNAVAILABLE,
            _ => reason::REFUSED,
        };
        return Verdict::Stalled(why, format!("[{}] {}{tail}", rf.code, rf.message));
    }
    let capacity_stalled = c
        .unavailable_since
        .get(name)
        .is_some_and(|since| c.now.duration_since(*since).unsigned_abs() >= c.stall_after)
        || c.stall_after.is_zero();
    let failed = sr.map(|s| s.failed.as_slice()).unwrap_or(&[]);
    let judged: Vec<(Severity, String)> = failed
        .iter()
        .map(|f| {
            (
                classify(f.code, &f.message, capacity_stalled),
                format!("[{}] {}: {}", f.code, f.address, f.message),
            )
        })
        .collect();
    if let Some((Severity::Stalled(why), m)) = judged
        .iter()
        .find(|(s, _)| matches!(s, Severity::Stalled(_)))
    {
        return Verdict::Stalled(why, m.clone());
    }
    if let Some((Severity::Retry(why), m)) = judged.first() {
        return Verdict::Reconciling(why, m.clone());
    }
    if let Some(nr) = sr.and_then(|s| s.not_run.first()) {
        return Verdict::Reconciling(reason::PROGRESSING_WITH_RETRY, nr.clone());
    }
    let held: Vec<&crate::plan::workload::Held> =
        r.plan.held.iter().filter(|h| h.slice == name).collect();
    if let Some(h) = held.first() {
        let more = if held.len() > 1 {
            format!(" (and {} more held)", held.len() - 1)
        } else {
            String::new()
        };
        return Verdict::Reconciling(
            reason::WAITING_FOR_WORKLOAD,
            format!(
                "[{}] {} {}: {}{more}",
                h.code,
                h.action.as_str(),
                h.address,
                h.message
            ),
        );
    }
    let pending: Vec<String> = actions
        .iter()
        .filter(|a| match &r.apply {
            None => true,
            Some(rep) => a.action == ActionKind::Wait && !rep.completed.contains(&a.address()),
        })
        .map(|a| format!("{} {}", a.action.as_str(), a.address()))
        .collect();
    if !pending.is_empty() {
        return Verdict::Reconciling(
            reason::PROGRESSING,
            format!("changes pending: {}", pending.join(", ")),
        );
    }
    // A workload slice a pending JobSet asks for, or its running JobSet
    // keeps (no pod pending for it any more: they run on it), is as much
    // wanted as a git slice: its readiness is told the same way, never
    // "being deleted".
    let wanted_by_jobset = r.plan.demand.slices.iter().any(|s| s.name == name)
        || r.plan
            .demand
            .kept
            .iter()
            .any(|k| k.slice == name && k.why.starts_with("active"));
    if !in_specs && !wanted_by_jobset {
        return Verdict::Reconciling(
            reason::PROGRESSING,
            "not in the specs: its resources are being deleted".into(),
        );
    }
    let broken = |rep: &ReplicaStatus| {
        rep.resources
            .iter()
            .any(|x| x.state.contains("ERROR") || x.state == "MISSING" || x.state == "NOT OWNED")
    };
    let unready: Vec<&ReplicaStatus> = replicas
        .iter()
        .filter(|rep| rep.nodes_ready != Some(rep.nodes_expected) || broken(rep))
        .collect();
    // Readiness follows the Nodes; where they were not read it is unknown,
    // never assumed from the pool's or MIG's state.
    if !unready.is_empty()
        && unready
            .iter()
            .all(|rep| unobserved.contains_key(&rep.index) && !broken(rep))
    {
        let why: Vec<String> = unready
            .iter()
            .map(|rep| {
                format!(
                    "replica {}: {}",
                    rep.index,
                    unobserved.get(&rep.index).map(String::as_str).unwrap_or("")
                )
            })
            .collect();
        return Verdict::Unknown(
            reason::NODES_NOT_OBSERVED,
            format!(
                "the slice's resources are there, but its Nodes were not read, so whether a job \
                 can be scheduled is not known: {}",
                why.join("; ")
            ),
        );
    }
    // A MIG (or pool) that reports a quota error gets no VMs until the
    // quota is raised: stalled, not provisioning.
    if let Some((rep, e)) = unready.iter().find_map(|rep| {
        rep.last_error
            .as_deref()
            .filter(|e| is_quota(e))
            .map(|e| (rep, e))
    }) {
        return Verdict::Stalled(
            reason::QUOTA_EXCEEDED,
            format!(
                "[{}] replica {}: {e}. Its VMs are not created until the quota holds them: raise the \
                 quota (IAM & Admin > Quotas) or free chips; the MIG keeps retrying",
                crate::plan::kind::QUOTA_EXCEEDED,
                rep.index
            ),
        );
    }
    let unready: Vec<String> = unready
        .into_iter()
        .map(|rep| {
            let state = primary.get(&rep.index).map(String::as_str).unwrap_or("?");
            let mut m = format!("replica {}: {state}, nodes {}", rep.index, rep.nodes);
            if let Some(e) = &rep.last_error {
                m.push_str(&format!(": {e}"));
            }
            m
        })
        .collect();
    if unready.is_empty() {
        let n: u32 = replicas.iter().map(|r| r.nodes_expected).sum();
        Verdict::Ready(format!("{} replica(s) with all {n} nodes", replicas.len()))
    } else {
        Verdict::Reconciling(reason::PROVISIONING, unready.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A brought template that is missing stalls the slice like one that
    /// cannot run it: nothing clears it but a person.
    #[test]
    fn a_missing_brought_template_is_stalled_as_an_invalid_spec() {
        for code in ["invalid_template", "missing_template"] {
            assert_eq!(
                classify(code, "", false),
                Severity::Stalled(reason::INVALID_SPEC),
                "{code}"
            );
        }
    }
}
