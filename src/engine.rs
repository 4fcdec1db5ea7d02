//! Reconciliation as one library call: load → observe → plan → (approve) →
//! apply → observe → status, with a typed report per slice. The CLI's
//! `plan`, `apply`, `destroy` and `status` are thin wrappers around it, and
//! the controller calls the same function in its loop.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Serialize;
use tracing::Instrument;

use crate::apply::{self, ApplyOptions, ApplyReport, Failure, Progress, RegisteredKind};
use crate::cloud::Cloud;
use crate::plan::{self, Inventory, Kind, Plan, PlanError, PlanMode, PlanOptions, Refusal};
use crate::spec::Fleet;
use crate::status;

/// What to reconcile towards, and with which rails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReconcileOptions {
    /// Converge to the specs, or tear down.
    pub mode: PlanMode,
    /// Safety rails of planning.
    pub plan: PlanOptions,
    /// Execution limits.
    pub apply: ApplyOptions,
}

/// What the caller decided about a plan with changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Approval {
    /// Go ahead now (no time passed since the plan was made).
    Auto,
    /// A person confirmed it, maybe long after it was made: the world is
    /// observed again and only an identical plan goes ahead.
    Confirmed,
    /// Do nothing.
    Declined,
}

/// Why reconciliation stopped before applying anything. Each has a stable
/// short code (metric labels, controller conditions).
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    /// The plan as a whole is refused by a safety rail.
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// The world changed between the plan and its confirmation.
    #[error(
        "the confirmed plan no longer matches the live state; nothing was changed. Review the new plan and run again"
    )]
    Stale {
        /// The plan made now.
        now: Box<Plan>,
    },
}

impl ReconcileError {
    /// A stable short code.
    pub fn code(&self) -> &'static str {
        match self {
            ReconcileError::Plan(PlanError::EmptySource { .. }) => "empty_source",
            ReconcileError::Plan(PlanError::TooManyDestructive { .. }) => "too_many_destructive",
            ReconcileError::Plan(_) => "plan_refused",
            ReconcileError::Stale { .. } => "stale_plan",
        }
    }
}

/// How a reconciliation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Nothing to do.
    NoChanges,
    /// The plan was applied (see the apply report for failures).
    Applied,
    /// The caller declined the plan.
    Declined,
}

/// What happened to one slice.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SliceReport {
    /// Slice name.
    pub slice: String,
    /// Actions completed: `ACTION ADDRESS`.
    pub done: Vec<String>,
    /// Actions that failed, with codes.
    #[serde(skip)]
    pub failed: Vec<Failure>,
    /// Actions skipped or not run, with why.
    pub not_run: Vec<String>,
    /// Changes refused by a safety rail.
    #[serde(skip)]
    pub refused: Vec<Refusal>,
}

impl SliceReport {
    /// Whether this slice converged (nothing failed, was skipped or refused).
    pub fn ok(&self) -> bool {
        self.failed.is_empty() && self.not_run.is_empty() && self.refused.is_empty()
    }
}

/// A slice replica this reconciliation leaves known not to become ready:
/// its primary resource says why (a MIG in a stockout that keeps
/// retrying, a node pool in ERROR). A reconciliation that leaves one does
/// not report success ([`Report::success`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NotReadyReplica {
    /// The replica's primary resource's address (`slice.NAME[R].mig`).
    pub address: String,
    /// Slice name.
    pub slice: String,
    /// Replica index.
    pub replica: u32,
    /// A stable short code: `stockout`, or the kind's own.
    pub code: &'static str,
    /// The cloud's words.
    pub message: String,
}

/// The replicas of the fleet's slices whose live primary resource says
/// they will not become ready as they stand ([`Kind::not_ready`]),
/// except those whose own steps failed in `applied` (reported there
/// already). Nothing in destroy mode: a replica being torn down need not
/// become ready.
pub fn not_ready(
    fleet: &Fleet,
    inv: &Inventory,
    mode: PlanMode,
    applied: Option<&ApplyReport>,
) -> Vec<NotReadyReplica> {
    if mode == PlanMode::Destroy {
        return Vec::new();
    }
    let kinds = kinds();
    let owners = plan::Owners::of(fleet, &kinds);
    let mut out = Vec::new();
    for kind in kinds.iter().filter(|k| k.is_primary()) {
        for l in inv.live(kind.id()) {
            let Some(o) = kind.ownership(&l.body) else {
                continue;
            };
            let in_specs = fleet
                .slices
                .get(&o.slice)
                .is_some_and(|s| o.replica < s.spec.replicas);
            if !in_specs || !owners.owns(&l.scope, Some(&o)) {
                continue;
            }
            let Some(why) = kind.not_ready(&l.body) else {
                continue;
            };
            let prefix = format!("slice.{}[{}].", o.slice, o.replica);
            if applied.is_some_and(|a| a.failures.iter().any(|f| f.address.starts_with(&prefix))) {
                continue;
            }
            out.push(NotReadyReplica {
                address: format!("{prefix}{}", kind.id()),
                slice: o.slice.clone(),
                replica: o.replica,
                code: why.code,
                message: why.message,
            });
        }
    }
    out.sort_by(|a, b| (&a.slice, a.replica).cmp(&(&b.slice, b.replica)));
    out
}

/// The result of one reconciliation.
#[derive(Debug)]
pub struct Report {
    /// How it ended.
    pub outcome: Outcome,
    /// The plan that was (or would have been) applied.
    pub plan: Plan,
    /// The executor's report, when something was applied.
    pub apply: Option<ApplyReport>,
    /// Per slice, sorted by name.
    pub slices: Vec<SliceReport>,
    /// Status rows observed after applying (before, when nothing was).
    pub status: Vec<status::Row>,
    /// Replicas known not to become ready as they stand, observed with the
    /// status ([`not_ready`]).
    pub not_ready: Vec<NotReadyReplica>,
}

impl Report {
    /// Whether everything converged: applied without failure, nothing
    /// refused, every Target observed, and no replica known not to become
    /// ready (an apply never reports success for one).
    pub fn success(&self) -> bool {
        self.plan.refused.is_empty()
            && !self.plan.left_unobserved()
            && self.apply.as_ref().is_none_or(ApplyReport::success)
            && self.not_ready.is_empty()
    }
}

impl Report {
    /// A plan declined because its deletes must not run (pruning suspended
    /// by a file that never was valid): each delete becomes a refusal with
    /// `code` and `why`, in the plan and in its slice's report, so the
    /// slice reports it (its status object says Refused) rather than look
    /// gone or merely pending.
    pub fn refuse_deletes(&mut self, code: &str, why: &str) {
        let deletes: Vec<plan::Action> = self
            .plan
            .actions
            .iter()
            .filter(|a| a.action == plan::ActionKind::Delete)
            .cloned()
            .collect();
        for a in deletes {
            let r = plan::refusal(&a, code, format!("{} is not deleted: {why}", a.address()));
            match self.slices.iter_mut().find(|s| s.slice == r.slice) {
                Some(s) => s.refused.push(r.clone()),
                None => self.slices.push(SliceReport {
                    slice: r.slice.clone(),
                    refused: vec![r.clone()],
                    ..SliceReport::default()
                }),
            }
            self.plan.refused.push(r);
        }
        self.slices.sort_by(|a, b| a.slice.cmp(&b.slice));
    }
}

/// The registered kinds' pure halves.
pub fn kinds() -> Vec<&'static dyn Kind> {
    registry().iter().map(|k| *k as &dyn Kind).collect()
}

/// The registered kinds: read here, once, and handed to planning
/// ([`kinds`]), observation and execution alike.
pub fn registry() -> &'static [&'static dyn RegisteredKind] {
    crate::kinds::REGISTRY
}

/// Plans against an observation.
pub fn plan_with(
    fleet: &Fleet,
    inv: &Inventory,
    mode: PlanMode,
    opts: &PlanOptions,
) -> Result<Plan, PlanError> {
    let kinds = kinds();
    match mode {
        PlanMode::Apply => plan::plan(fleet, inv, &kinds, opts),
        PlanMode::Destroy => plan::plan_destroy_with(fleet, inv, &kinds, opts),
    }
}

/// Observes and plans.
pub async fn observe_and_plan(
    fleet: &Fleet,
    cloud: &Cloud,
    mode: PlanMode,
    opts: &PlanOptions,
) -> Result<(Inventory, Plan), ReconcileError> {
    observe_prepared_and_plan(fleet, cloud, mode, opts, &|_| {}).await
}

/// Observes, lets `prepare` mark the observation (`adopt` marks the
/// resources it takes over: [`Inventory::adopting`]), and plans.
pub async fn observe_prepared_and_plan(
    fleet: &Fleet,
    cloud: &Cloud,
    mode: PlanMode,
    opts: &PlanOptions,
    prepare: &dyn Fn(&mut Inventory),
) -> Result<(Inventory, Plan), ReconcileError> {
    let span = tracing::info_span!(
        target: crate::watch::LOG_TARGET,
        "plan",
        mode = ?mode,
        slices = fleet.slices.len()
    );
    async {
        let mut inv = crate::observe::observe(cloud, fleet, registry()).await;
        prepare(&mut inv);
        let mut plan = plan_with(fleet, &inv, mode, opts)?;
        if mode == PlanMode::Apply {
            crate::preflight::check(cloud, fleet, &kinds(), &inv, &mut plan).await;
        }
        Ok((inv, plan))
    }
    .instrument(span)
    .await
}

/// Status rows of the fleet (a slice whose Target could not be observed
/// says so, with the cause).
pub async fn status(fleet: &Fleet, cloud: &Cloud) -> Vec<status::Row> {
    let inv = crate::observe::observe(cloud, fleet, registry()).await;
    status::rows(fleet, &inv, &kinds())
}

fn slice_reports(plan: &Plan, applied: Option<&ApplyReport>) -> Vec<SliceReport> {
    let mut by: BTreeMap<String, SliceReport> = BTreeMap::new();
    let slice_of: BTreeMap<String, (String, &'static str)> = plan
        .actions
        .iter()
        .map(|a| (a.address(), (a.owner.slice.clone(), a.action.as_str())))
        .collect();
    let entry = |by: &mut BTreeMap<String, SliceReport>, slice: &str| {
        by.entry(slice.to_string())
            .or_insert_with(|| SliceReport {
                slice: slice.to_string(),
                ..SliceReport::default()
            })
            .slice
            .clone()
    };
    for r in &plan.refused {
        let k = entry(&mut by, &r.slice);
        if let Some(s) = by.get_mut(&k) {
            s.refused.push(r.clone());
        }
    }
    if let Some(rep) = applied {
        let mut add = |addr: &str, f: &mut dyn FnMut(&mut SliceReport)| {
            if let Some((slice, _)) = slice_of.get(addr) {
                let k = entry(&mut by, slice);
                if let Some(s) = by.get_mut(&k) {
                    f(s);
                }
            }
        };
        for addr in &rep.completed {
            let action = slice_of.get(addr).map(|x| x.1).unwrap_or("");
            add(addr, &mut |s| s.done.push(format!("{action} {addr}")));
        }
        for addr in &rep.already_gone {
            add(addr, &mut |s| s.done.push(format!("already gone {addr}")));
        }
        for f in &rep.failures {
            add(&f.address, &mut |s| s.failed.push(f.clone()));
        }
        for addr in &rep.skipped {
            add(addr, &mut |s| {
                s.not_run
                    .push(format!("{addr}: skipped (a step it depends on failed)"))
            });
        }
        for (addr, why) in &rep.not_run {
            add(addr, &mut |s| s.not_run.push(format!("{addr}: {why}")));
        }
    }
    by.into_values().collect()
}

/// Applies a plan already approved, then observes again for the status.
pub async fn execute(
    fleet: &Fleet,
    cloud: &Cloud,
    plan: Plan,
    opts: &ApplyOptions,
    progress: Arc<dyn Progress>,
) -> Result<Report, ReconcileError> {
    crate::kube::demand::write_creating(cloud, &plan).await;
    let report = apply::execute(cloud, registry(), &plan, opts, progress)
        .instrument(tracing::info_span!(
            target: crate::watch::LOG_TARGET,
            "apply",
            actions = plan.actions.len()
        ))
        .await;
    let inv = crate::observe::observe(cloud, fleet, registry()).await;
    let status = status::rows(fleet, &inv, &kinds());
    crate::kube::demand::write_phases(cloud, &status).await;
    Ok(Report {
        outcome: Outcome::Applied,
        slices: slice_reports(&plan, Some(&report)),
        not_ready: not_ready(fleet, &inv, plan.mode, Some(&report)),
        plan,
        apply: Some(report),
        status,
    })
}

/// One reconciliation: observe, plan, ask `approve` when there are changes
/// (never when there are none), apply, observe again. A plan refused as a
/// whole, or a confirmed plan the world has moved away from, is an error
/// and nothing is changed.
pub async fn reconcile(
    fleet: &Fleet,
    cloud: &Cloud,
    opts: &ReconcileOptions,
    approve: impl FnOnce(&Plan) -> Approval,
    progress: Arc<dyn Progress>,
) -> Result<Report, ReconcileError> {
    reconcile_with(fleet, cloud, opts, |_| {}, approve, progress).await
}

/// [`reconcile`], with `edit` applied to the plan before anything else
/// sees it (the controller leaves out the creates and replacements of
/// slices held back by capacity backoff). `edit` may only remove actions;
/// the summary is counted again after it.
pub async fn reconcile_with(
    fleet: &Fleet,
    cloud: &Cloud,
    opts: &ReconcileOptions,
    edit: impl FnOnce(&mut Plan),
    approve: impl FnOnce(&Plan) -> Approval,
    progress: Arc<dyn Progress>,
) -> Result<Report, ReconcileError> {
    // The first plan only, as it always was.
    let once = std::sync::Mutex::new(Some(edit));
    let edit_once = |_: &Inventory, p: &mut Plan| {
        let f = once.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(f) = f {
            f(p);
        }
    };
    reconcile_shaped(fleet, cloud, opts, &|_| {}, &edit_once, approve, progress).await
}

/// [`reconcile`] of a command that does one thing (`adopt`, `release`):
/// `prepare` marks each observation before it is planned, and `edit`
/// makes each plan (the one approved and the one made again after the
/// approval, which must be the same) only what the command does.
pub async fn reconcile_shaped(
    fleet: &Fleet,
    cloud: &Cloud,
    opts: &ReconcileOptions,
    prepare: &dyn Fn(&mut Inventory),
    edit: &dyn Fn(&Inventory, &mut Plan),
    approve: impl FnOnce(&Plan) -> Approval,
    progress: Arc<dyn Progress>,
) -> Result<Report, ReconcileError> {
    let (inv, mut plan) =
        observe_prepared_and_plan(fleet, cloud, opts.mode, &opts.plan, prepare).await?;
    edit(&inv, &mut plan);
    plan.summary = plan.count();
    // The workload source's own writes (released-at stamps, refusal
    // Events): a reconcile makes them, `plan` never does.
    crate::kube::demand::write(cloud, fleet, &plan.demand).await;
    if !plan.summary.has_changes() {
        let status = status::rows(fleet, &inv, &kinds());
        // Where each pending JobSet's slice stands, as Events on it.
        crate::kube::demand::write_phases(cloud, &status).await;
        return Ok(Report {
            outcome: Outcome::NoChanges,
            status,
            slices: slice_reports(&plan, None),
            not_ready: not_ready(fleet, &inv, opts.mode, None),
            plan,
            apply: None,
        });
    }
    match approve(&plan) {
        Approval::Declined => Ok(Report {
            outcome: Outcome::Declined,
            status: status::rows(fleet, &inv, &kinds()),
            slices: slice_reports(&plan, None),
            not_ready: Vec::new(),
            plan,
            apply: None,
        }),
        Approval::Auto => execute(fleet, cloud, plan, &opts.apply, progress).await,
        Approval::Confirmed => {
            // The answer may come hours later: go ahead only if the plan
            // made now is exactly the one that was confirmed.
            let (inv, mut now) =
                observe_prepared_and_plan(fleet, cloud, opts.mode, &opts.plan, prepare).await?;
            edit(&inv, &mut now);
            now.summary = now.count();
            if now.effect() != plan.effect() {
                return Err(ReconcileError::Stale { now: Box::new(now) });
            }
            execute(fleet, cloud, plan, &opts.apply, progress).await
        }
    }
}

#[cfg(test)]
#[path = "engine/tests.rs"]
mod tests;
