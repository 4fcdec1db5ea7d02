//! Applying a plan: runs its steps with bounded concurrency, dependent steps
//! in order, waits on long-running operations, and reports every action's
//! outcome. Generic over the registered kinds: each kind's [`KindExec`]
//! runs its own steps. A failure stops only the steps that depend on it;
//! everything it leaves behind is observed and repaired by the next run (no
//! local state).

pub mod drain;
pub mod exec;
pub mod progress;
pub mod schedule;
pub mod steps;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::task::JoinSet;

use crate::cloud::{Cloud, CloudError};
use crate::plan::ownership::Ownership;
use crate::plan::{Action, ActionKind, Plan};

pub use exec::{KindExec, Observed, RegisteredKind};
pub use progress::{PlainProgress, Progress, TerminalProgress};
use steps::Step;
pub use steps::StepOp;

/// Executor settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApplyOptions {
    /// Maximum requests being sent at once. Waiting on a running operation
    /// takes no part of it: every ready step runs, and writes are scheduled
    /// to the cloud's own limits ([`schedule`]).
    pub parallelism: usize,
    /// Maximum slice replicas being replaced at once.
    pub max_replacements: usize,
}

impl Default for ApplyOptions {
    fn default() -> Self {
        ApplyOptions {
            parallelism: 16,
            max_replacements: 2,
        }
    }
}

/// Why a step failed.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// A cloud call failed (after retries) or an operation ended in error.
    #[error(transparent)]
    Cloud(#[from] CloudError),
    /// The action has no body of its kind's type (a bug).
    #[error("the plan has no valid body for {0}")]
    Body(String),
    /// The action's scope does not fit its kind (a bug).
    #[error("the plan's scope for {0} does not fit its kind")]
    Scope(String),
    /// No registered kind executes this action (a bug).
    #[error("no registered kind executes {0}")]
    UnknownKind(String),
    /// A create met a resource of that name that is not the one it meant to
    /// create (someone else's, or one being deleted).
    #[error("{address}: {reason}")]
    Conflict {
        /// Address.
        address: String,
        /// What was found, and what to do.
        reason: String,
    },
    /// The step's task panicked (a bug): reported, never silently dropped.
    #[error("internal error in this step: {0}")]
    Panicked(String),
    /// A Kubernetes call failed.
    #[error(transparent)]
    Kube(#[from] crate::kube::KubeError),
    /// A failure a kind names with a code of its own (declared by the kind:
    /// a self-managed slice's `bootstrap_failed`, `node_lost`,
    /// `invalid_template`). The message says what is known and what to
    /// do, never a secret.
    #[error("{address}: {message}")]
    Kind {
        /// Address.
        address: String,
        /// The kind's stable code (metric labels, JSON reports).
        code: &'static str,
        /// What happened, and what to do.
        message: String,
    },
}

impl ApplyError {
    /// A stable short code (metric labels, JSON reports).
    pub fn code(&self) -> &'static str {
        match self {
            ApplyError::Cloud(e) if e.is_stockout() => "stockout",
            ApplyError::Cloud(e) if e.is_quota_exceeded() => crate::plan::kind::QUOTA_EXCEEDED,
            ApplyError::Cloud(CloudError::ReservationFull { .. }) => "reservation_insufficient",
            ApplyError::Cloud(CloudError::Timeout { .. }) => "timeout",
            ApplyError::Cloud(CloudError::OperationFailed { .. }) => "operation_failed",
            ApplyError::Cloud(CloudError::Auth(_)) => "auth",
            ApplyError::Cloud(e) if e.is_retryable() => "cloud_unavailable",
            ApplyError::Cloud(_) => "cloud_error",
            ApplyError::Body(_) | ApplyError::Scope(_) | ApplyError::UnknownKind(_) => "internal",
            ApplyError::Conflict { .. } => "conflict",
            ApplyError::Panicked(_) => "panicked",
            ApplyError::Kube(e) => e.code(),
            ApplyError::Kind { code, .. } => code,
        }
    }
}

/// The desired body of an action, as the kind's own type (an error naming
/// the action when it has none of that type).
pub fn desired_body<T: 'static>(a: &Action) -> Result<&T, ApplyError> {
    a.desired
        .as_ref()
        .and_then(crate::plan::kind::body_as::<T>)
        .ok_or_else(|| ApplyError::Body(a.address()))
}

impl ApplyError {
    /// A failure of action `a` with its kind's own `code`.
    pub fn of_kind(a: &Action, code: &'static str, message: String) -> ApplyError {
        ApplyError::Kind {
            address: a.address(),
            code,
            message,
        }
    }
}

/// A conflict error for an action.
pub fn conflict(a: &Action, reason: String) -> ApplyError {
    ApplyError::Conflict {
        address: a.address(),
        reason,
    }
}

/// Asked by every kind right before it sends a delete (a delete, or the
/// delete half of a replacement), with the ownership the resource carries
/// now, read again (a GET where the API has one). A plan can be made from
/// a view that lags the writes (a lagging list, a restart from an older
/// view): what it read as unprotected may have been stamped
/// `preventDestroy` since, and that stamp speaks last. `live` is `None`
/// when the resource is gone or carries no slicectl stamp.
pub fn refuse_protected(a: &Action, live: Option<&Ownership>) -> Result<(), ApplyError> {
    if live.is_some_and(|o| o.prevent_destroy) {
        return Err(ApplyError::of_kind(
            a,
            "prevent_destroy",
            "read again right before its delete, it is stamped preventDestroy (the plan was made from \
             an older view). Nothing was deleted; the next plan sees the stamp"
                .into(),
        ));
    }
    Ok(())
}

/// What a create that was answered 409 (the name exists) found, judged the
/// same way for every kind: `Ok` only when the live resource is this
/// owner's, for the same slice replica (and, when both say, the same spec
/// hash), and whatever runs on it is a create (`create_type`); the caller
/// then waits on `running`, if any. `running` is the operation on the name
/// (name, type); `live` is the live resource's ownership, `None` when it
/// was not found; `want` is the ownership the create would have written.
///
/// A name whose create is still running, or that the cloud says exists
/// and then cannot find (GCE answers 409 and serves 404 until another
/// insert's operation is done), is being created by another run: a
/// `conflict` that says to run again, never one that calls it someone
/// else's (deleting it would delete the other run's slice).
pub fn judge_conflict(
    a: &Action,
    create_type: &str,
    running: Option<(&str, &str)>,
    live: Option<Option<Ownership>>,
    want: Option<&Ownership>,
) -> Result<(), ApplyError> {
    let (noun, name) = (a.noun, &a.id.name);
    let another_run = |seen: String| {
        conflict(
            a,
            format!(
                "{noun} {name} is being created by another run ({seen}); nothing was created by this one. \
                 Run apply again once that run is done: it picks up what the other run made"
            ),
        )
    };
    match running {
        Some((op, ty)) if !same_operation_type(ty, create_type) => {
            return Err(conflict(
                a,
                format!(
                    "{noun} {name} already exists and operation {op} ({ty}) is running on it, \
                     probably started by another apply; nothing was created. Run apply again once it has finished"
                ),
            ));
        }
        Some((op, _)) => {
            return match live {
                Some(theirs)
                    if same_owner(theirs.as_ref(), want) && same_hash(theirs.as_ref(), want) =>
                {
                    Ok(())
                }
                _ => Err(another_run(format!("operation {op} is creating it"))),
            };
        }
        None => {}
    }
    let Some(theirs) = live else {
        return Err(another_run(
            "the cloud answered that it exists, then could not find it: its create is not finished"
                .into(),
        ));
    };
    if !same_owner(theirs.as_ref(), want) {
        return Err(conflict(
            a,
            format!(
                "{noun} {name} already exists in {} and is {}; slicectl never changes it. \
                 It was created by someone else after the plan was made: rename the slice, or remove the existing {noun}",
                a.id.scope,
                describe_owner(theirs.as_ref())
            ),
        ));
    }
    if !same_hash(theirs.as_ref(), want) {
        return Err(another_run(
            "it is this slice replica's, made from another version of its spec".into(),
        ));
    }
    Ok(())
}

/// Whether an operation type is `create_type`: compute names one type two
/// ways (`insert`, `compute.instanceTemplates.insert`), so only the last
/// dot-separated part is compared.
fn same_operation_type(ty: &str, create_type: &str) -> bool {
    let last = |t: &str| t.rsplit('.').next().unwrap_or(t).to_string();
    last(ty) == last(create_type)
}

/// Whether two ownerships carry the same spec hash, where both carry one.
fn same_hash(live: Option<&Ownership>, desired: Option<&Ownership>) -> bool {
    match (
        live.and_then(|o| o.spec_hash.as_deref()),
        desired.and_then(|o| o.spec_hash.as_deref()),
    ) {
        (Some(l), Some(d)) => l == d,
        _ => true,
    }
}

/// Whether two ownerships name the same owner, slice and replica.
pub fn same_owner(live: Option<&Ownership>, desired: Option<&Ownership>) -> bool {
    match (live, desired) {
        (Some(l), Some(d)) => l.owner == d.owner && l.slice == d.slice && l.replica == d.replica,
        _ => false,
    }
}

/// Who owns a resource, for people.
pub fn describe_owner(o: Option<&Ownership>) -> String {
    match o {
        Some(o) => format!(
            "owned by slicectl owner {:?} as slice {} replica {}",
            o.owner, o.slice, o.replica
        ),
        None => "not created by slicectl".to_string(),
    }
}

/// How a step that did not fail ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepOutcome {
    /// It did what it was meant to.
    Done,
    /// A delete found the resource already gone: nothing was destroyed.
    AlreadyGone,
}

/// A failed action.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// Address.
    pub address: String,
    /// Stable short code ([`ApplyError::code`]).
    pub code: &'static str,
    /// The error.
    pub message: String,
}

/// The result of an apply.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ApplyReport {
    /// Counts of completed actions by kind.
    pub done: BTreeMap<&'static str, usize>,
    /// Addresses of the actions that completed.
    pub completed: Vec<String>,
    /// Failed actions: address → error.
    pub failed: Vec<(String, String)>,
    /// Failed actions with their codes.
    pub failures: Vec<Failure>,
    /// Actions not started because something they depend on failed.
    pub skipped: Vec<String>,
    /// Actions that never ran for any other reason: address → why. Any step
    /// not run is a failure of the run.
    pub not_run: Vec<(String, String)>,
    /// Deletes that found the resource already gone (counted apart from
    /// `destroyed`: this apply did not destroy it).
    pub already_gone: Vec<String>,
    /// Replacements whose old resource was deleted but whose new one was
    /// not created (it failed, or never ran): capacity this apply removed
    /// and did not give back.
    pub capacity_lost: Vec<String>,
    /// Writes the cloud rejected under its concurrency rules (GKE's
    /// operations quota or an incompatible operation); each waited for an
    /// operation to finish and was sent again.
    pub rejected_writes: u64,
    /// Per-cluster quotas of concurrent operations learned from the cloud.
    pub learned_quotas: BTreeMap<String, usize>,
    /// A stop was requested (SIGINT or SIGTERM) and steps were left for the
    /// next run (in `not_run`).
    pub stopped: bool,
    /// Wall-clock time.
    pub elapsed: Duration,
}

impl ApplyReport {
    /// Whether everything succeeded.
    pub fn success(&self) -> bool {
        self.failed.is_empty() && self.skipped.is_empty() && self.not_run.is_empty()
    }

    /// One-line summary.
    pub fn summary(&self) -> String {
        self.summary_with_not_ready(0)
    }

    /// One-line summary, counting `not_ready` slice replicas the apply
    /// leaves known not to become ready (`engine::not_ready`): with any,
    /// it is not "complete" even when every step succeeded.
    pub fn summary_with_not_ready(&self, not_ready: usize) -> String {
        let n = |k: &str| self.done.get(k).copied().unwrap_or(0);
        let gone = match self.already_gone.len() {
            0 => String::new(),
            k => format!(" ({k} already gone)"),
        };
        let not_run = match self.not_run.len() {
            0 => String::new(),
            k => format!(", {k} not run"),
        };
        let rejected = match self.rejected_writes {
            0 => String::new(),
            k => format!(
                " {k} write(s) were refused by the cloud's concurrency limits and sent again once an operation finished{}.",
                if self.learned_quotas.is_empty() {
                    String::new()
                } else {
                    let q: Vec<String> = self
                        .learned_quotas
                        .iter()
                        .map(|(c, n)| format!("{n} in {c}"))
                        .collect();
                    format!(" (concurrent operations quota: {})", q.join(", "))
                }
            ),
        };
        let lost = match self.capacity_lost.len() {
            0 => String::new(),
            k => format!(
                " {k} replaced but not recreated: the old one was deleted and the new one failed or never ran, so {} no capacity now ({}); apply again once capacity returns.",
                if k == 1 { "it has" } else { "they have" },
                self.capacity_lost.join(", ")
            ),
        };
        let not_ready = match not_ready {
            0 => String::new(),
            k => format!(", {k} not ready"),
        };
        format!(
            "{}: {} created, {} updated, {} replaced, {} destroyed{gone}, {} waited on, {} failed, {} skipped{not_run}{not_ready} ({:.1}s).{lost}{rejected}",
            match (self.success(), not_ready.is_empty()) {
                (true, true) => "Apply complete",
                (true, false) => "Apply INCOMPLETE",
                (false, _) if self.stopped && self.failed.is_empty() => "Apply STOPPED",
                (false, _) => "Apply FAILED",
            },
            n("create"),
            n("update"),
            n("replace"),
            n("delete"),
            n("wait"),
            self.failed.len(),
            self.skipped.len(),
            self.elapsed.as_secs_f64()
        )
    }
}

async fn run_step(
    cloud: Cloud,
    sched: Arc<schedule::Scheduler>,
    exec: Option<&'static dyn KindExec>,
    a: Action,
    op: StepOp,
    checks: drain::Checks,
) -> Result<StepOutcome, ApplyError> {
    if op == StepOp::Drain {
        return drain::run(&cloud, &a, &checks).await;
    }
    // Consent is asked again as the capacity goes: a replica idle when
    // planned must still be idle, a busy one's policy must still consent.
    if op == StepOp::Delete {
        drain::before_destroy(&cloud, &a, &checks).await?;
    }
    match exec {
        Some(e) => e.execute(&cloud, &sched, &a, op).await,
        None => Err(ApplyError::UnknownKind(a.address())),
    }
}

/// The replacement group of an action: every replacing action of one slice
/// replica holds one replacement slot together. The steps of a replica's
/// replacements depend on each other (pool delete → policy delete → policy
/// create → pool create), so a slot per action would deadlock them.
fn replacement_group(a: &Action) -> (&str, u32) {
    (a.owner.slice.as_str(), a.owner.replica)
}

/// The address of the slice replica an action belongs to (`slice.rep[0]`).
fn replica_address(a: &Action) -> String {
    format!("slice.{}[{}]", a.owner.slice, a.owner.replica)
}

/// Where a replacement's capacity comes from, for halting a roll-out after
/// a stockout: the project and the location (zone, region or a GKE
/// cluster's location). Templates and Nodes hold no capacity of their own.
fn capacity_area(a: &Action) -> Option<(&str, &str)> {
    match &a.id.scope {
        crate::plan::Scope::Cluster(c) => Some((&c.project, &c.location)),
        crate::plan::Scope::Zone(z) => Some((&z.project, &z.zone)),
        crate::plan::Scope::Region(r) => Some((&r.project, &r.region)),
        crate::plan::Scope::Global(_) | crate::plan::Scope::Kube(_) => None,
    }
}

/// Whether two capacity areas overlap: the same project, and the same
/// location or a zone of the other's region (`us-central1-b` lies in
/// `us-central1`).
fn areas_overlap(a: (&str, &str), b: (&str, &str)) -> bool {
    let within = |zone: &str, region: &str| {
        zone.strip_prefix(region)
            .is_some_and(|rest| rest.starts_with('-'))
    };
    a.0 == b.0 && (a.1 == b.1 || within(a.1, b.1) || within(b.1, a.1))
}

/// Executes the plan. Every action ends in the report: done, failed, skipped
/// (something it depends on failed) or not run (any other reason).
pub async fn execute(
    cloud: &Cloud,
    kinds: &'static [&'static dyn RegisteredKind],
    plan: &Plan,
    opts: &ApplyOptions,
    progress: Arc<dyn Progress>,
) -> ApplyReport {
    let start = Instant::now();
    let mut release_failures = Vec::new();
    for r in &plan.released {
        for n in &r.nodes {
            if let Err(e) = cloud
                .kube
                .uncordon_node(&r.kube, n, crate::spec::disruption::DRAINING_SINCE)
                .await
            {
                tracing::warn!(cluster = %r.cluster, node = %n, error = %e, "cannot release a Node from a drain no longer planned");
                release_failures.push(Failure {
                    address: format!("node {n} in {}", r.kube),
                    code: ApplyError::Kube(e).code(),
                    message: "cannot uncordon it after a drain that is no longer planned; the next run tries again"
                        .to_string(),
                });
            }
        }
    }
    let exec_of = |id| {
        kinds
            .iter()
            .copied()
            .find(|e| KindExec::kind(*e) == id)
            .map(|k| k as &'static dyn KindExec)
    };
    let steps: Vec<Step> = steps::expand(plan, |k| {
        let kind = kinds
            .iter()
            .copied()
            .find(|x| crate::plan::Kind::id(*x) == k);
        kind.map_or(steps::KindInfo::default(), |x| steps::KindInfo {
            depends_on: x.depends_on(),
            shared: x.shared(),
            cleanup: x.cleanup_after_dependencies(),
        })
    });
    let mut pending: Vec<usize> = steps.iter().map(|s| s.deps.len()).collect();
    let mut dependents: Vec<Vec<usize>> = vec![Vec::new(); steps.len()];
    for s in &steps {
        for d in &s.deps {
            dependents[*d].push(s.id);
        }
    }
    // Steps left per action, to know when an action is done.
    let mut left: Vec<usize> = vec![0; plan.actions.len()];
    // Replacement steps left per group, to know when its slot frees.
    let mut group_left: BTreeMap<(&str, u32), usize> = BTreeMap::new();
    for s in &steps {
        left[s.action] += 1;
        let a = &plan.actions[s.action];
        if a.action == ActionKind::Replace {
            *group_left.entry(replacement_group(a)).or_default() += 1;
        }
    }
    let mut ready: Vec<usize> = steps
        .iter()
        .filter(|s| s.deps.is_empty())
        .map(|s| s.id)
        .collect();
    ready.reverse();
    // A step is finished once it ran, failed or was skipped.
    let mut finished = vec![false; steps.len()];
    let mut action_failed = vec![false; plan.actions.len()];
    let mut action_gone = vec![false; plan.actions.len()];
    // An action one of whose steps was skipped (a step it depends on
    // failed) did not complete, whichever of its steps finished last: a
    // replacement whose delete found the pool gone and whose create was
    // skipped is not a completed replacement.
    let mut action_skipped = vec![false; plan.actions.len()];
    let mut replacing: BTreeMap<(&str, u32), bool> = BTreeMap::new();
    let mut replacements_running = 0usize;
    // Replacement groups whose first step was sent: a started replacement
    // always runs to its end (its delete is never left without its create,
    // even when a stop is requested).
    let mut group_started: std::collections::BTreeSet<(&str, u32)> = Default::default();
    // A roll-out stops at its first failed replacement (Kubernetes'
    // maxUnavailable, GKE's surge upgrades, Terraform's stop-on-error): the
    // failed slice's other replacements, and after a stockout every
    // replacement in the same area, do not start. Why, by slice and area.
    let mut halted_slices: BTreeMap<&str, String> = BTreeMap::new();
    let mut halted_areas: Vec<((&str, &str), String)> = Vec::new();
    let mut halted_groups: BTreeMap<(&str, u32), String> = BTreeMap::new();
    // A replacement whose old resource is deleted.
    let mut old_deleted = vec![false; plan.actions.len()];
    let mut report = ApplyReport::default();
    for f in release_failures {
        report.failed.push((f.address.clone(), f.message.clone()));
        report.failures.push(f);
    }
    let mut running: JoinSet<(usize, Duration, Result<StepOutcome, ApplyError>)> = JoinSet::new();
    let mut tasks: HashMap<tokio::task::Id, usize> = HashMap::new();
    let max_replacements = opts.max_replacements.max(1);
    let sched = Arc::new(schedule::Scheduler::new(opts.parallelism));
    let mut stop_logged = false;
    // A drain asks before every eviction whether a stop was requested.
    let checks = drain::Checks::new({
        let progress = progress.clone();
        Arc::new(move || progress.stop_requested())
    });

    loop {
        // Start what can start: every ready step (a step waiting on an
        // operation holds no worker; the scheduler paces the writes).
        let mut deferred = Vec::new();
        // Asked to stop: nothing new starts; what runs finishes.
        let stopping = progress.stop_requested();
        if stopping && !ready.is_empty() && !stop_logged {
            stop_logged = true;
            tracing::warn!(
                in_flight = running.len(),
                "stop requested: no new step starts; the steps in flight finish"
            );
        }
        while let Some(id) = ready.pop() {
            let step = &steps[id];
            let a = &plan.actions[step.action];
            let in_started_replacement =
                a.action == ActionKind::Replace && group_started.contains(&replacement_group(a));
            if stopping && !in_started_replacement {
                deferred.push(id);
                continue;
            }
            if a.action == ActionKind::Replace && !in_started_replacement {
                let g = replacement_group(a);
                let halted = halted_slices.get(g.0).cloned().or_else(|| {
                    let area = capacity_area(a)?;
                    halted_areas
                        .iter()
                        .find(|(h, _)| areas_overlap(*h, area))
                        .map(|(_, why)| why.clone())
                });
                if let Some(why) = halted {
                    // Left unstarted: reported as not run, with why.
                    halted_groups.entry(g).or_insert(why);
                    continue;
                }
            }
            if a.action == ActionKind::Replace {
                let g = replacement_group(a);
                if !replacing.get(&g).copied().unwrap_or(false) {
                    if replacements_running >= max_replacements {
                        deferred.push(id);
                        continue;
                    }
                    replacing.insert(g, true);
                    replacements_running += 1;
                }
                // A replacement starts with its delete, not its drain: a
                // drain a stop ends leaves the replacement unstarted.
                if step.op != StepOp::Drain && group_started.insert(g) {
                    progress.replacement(
                        &replica_address(a),
                        group_left.get(&g).copied().unwrap_or(0),
                    );
                }
            }
            progress.started(&a.address(), step.op.verb());
            let cloud = cloud.clone();
            let action = a.clone();
            let op = step.op;
            let exec = exec_of(a.id.kind);
            let sched = sched.clone();
            let checks = checks.clone();
            let handle = running.spawn(async move {
                let t = Instant::now();
                let r = run_step(cloud, sched, exec, action, op, checks).await;
                (id, t.elapsed(), r)
            });
            tasks.insert(handle.id(), id);
        }
        deferred.reverse();
        ready.extend(deferred);
        let Some(joined) = running.join_next_with_id().await else {
            break;
        };
        let (id, elapsed, result) = match joined {
            Ok((task, x)) => {
                tasks.remove(&task);
                x
            }
            Err(e) => {
                // A step that panicked is a failed step, not a lost one.
                tracing::error!(error = %e, "apply step task panicked or was cancelled");
                let Some(id) = tasks.remove(&e.id()) else {
                    continue;
                };
                (id, Duration::ZERO, Err(ApplyError::Panicked(e.to_string())))
            }
        };
        let step = &steps[id];
        let a = &plan.actions[step.action];
        let mut newly_finished = vec![id];
        match &result {
            Ok(outcome) => {
                progress.finished(&a.address(), step.op.verb(), Ok(()), elapsed);
                if *outcome == StepOutcome::AlreadyGone {
                    action_gone[step.action] = true;
                }
                if a.action == ActionKind::Replace && step.op == StepOp::Delete {
                    old_deleted[step.action] = true;
                }
                for d in &dependents[id] {
                    pending[*d] -= 1;
                    if pending[*d] == 0 && !finished[*d] {
                        ready.push(*d);
                    }
                }
            }
            Err(e) if e.code() == drain::STOPPED => {
                // A drain a stop request ended before its next eviction:
                // not a failure of the step but a step left, like every
                // step after it (reported as not run below); nothing of its
                // replica was destroyed.
                stop_logged = true;
                let msg = e.to_string();
                let msg = msg
                    .strip_prefix(&format!("{}: ", a.address()))
                    .map_or_else(|| msg.clone(), str::to_owned);
                progress.finished(&a.address(), step.op.verb(), Err(&msg), elapsed);
                report
                    .not_run
                    .push((a.address(), format!("{} stopped: {msg}", step.op.verb())));
            }
            Err(e) => {
                // Said once: the report and the progress line name the
                // address already.
                let msg = e.to_string();
                let msg = msg
                    .strip_prefix(&format!("{}: ", a.address()))
                    .map_or_else(|| msg.clone(), str::to_owned);
                progress.finished(&a.address(), step.op.verb(), Err(&msg), elapsed);
                action_failed[step.action] = true;
                report.failures.push(Failure {
                    address: a.address(),
                    code: e.code(),
                    message: msg.clone(),
                });
                report.failed.push((a.address(), msg));
                let capacity = matches!(e.code(), "stockout" | "reservation_insufficient");
                if a.action == ActionKind::Replace || capacity {
                    let why = format!(
                        "the roll-out stopped at the first failed replacement or stockout: {} failed [{}], \
                         so this replacement was not started and its capacity is kept; fix the cause (or \
                         wait for capacity) and apply again",
                        a.address(),
                        e.code()
                    );
                    if a.action == ActionKind::Replace {
                        halted_slices
                            .entry(a.owner.slice.as_str())
                            .or_insert_with(|| why.clone());
                    }
                    if capacity && let Some(area) = capacity_area(a) {
                        halted_areas.push((area, why));
                    }
                }
                // Everything downstream is skipped.
                let mut stack = dependents[id].clone();
                while let Some(d) = stack.pop() {
                    if !finished[d] {
                        finished[d] = true;
                        newly_finished.push(d);
                        let da = &plan.actions[steps[d].action];
                        action_skipped[steps[d].action] = true;
                        if !action_failed[steps[d].action]
                            && !report.skipped.contains(&da.address())
                        {
                            report.skipped.push(da.address());
                        }
                        stack.extend(dependents[d].iter().copied());
                    }
                }
            }
        }
        finished[id] = true;
        for f in newly_finished {
            let fa = &plan.actions[steps[f].action];
            left[steps[f].action] -= 1;
            if left[steps[f].action] == 0
                && f == id
                && !action_failed[steps[f].action]
                && !action_skipped[steps[f].action]
                && result.is_ok()
            {
                if action_gone[steps[f].action] && fa.action == ActionKind::Delete {
                    report.already_gone.push(fa.address());
                } else {
                    *report.done.entry(fa.action.as_str()).or_default() += 1;
                    report.completed.push(fa.address());
                }
            }
            if fa.action == ActionKind::Replace {
                let g = replacement_group(fa);
                if let Some(n) = group_left.get_mut(&g) {
                    *n -= 1;
                    if group_started.contains(&g) {
                        progress.replacement(&replica_address(fa), *n);
                    }
                    if *n == 0 && replacing.insert(g, false).unwrap_or(false) {
                        replacements_running -= 1;
                    }
                }
            }
        }
    }
    // Whatever never ran is a failure of the run, with the reason.
    for s in &steps {
        if finished[s.id] {
            continue;
        }
        let a = &plan.actions[s.action];
        if report.not_run.iter().any(|(addr, _)| *addr == a.address()) {
            continue;
        }
        let halted = (a.action == ActionKind::Replace)
            .then(|| halted_groups.get(&replacement_group(a)))
            .flatten();
        let why = if let Some(h) = halted {
            h.as_str()
        } else if stop_logged {
            "a stop was requested (SIGINT or SIGTERM) before it started; the next run continues from the live state"
        } else if pending[s.id] > 0 {
            "a step it depends on never finished"
        } else {
            "it could not be scheduled (replacement limit)"
        };
        tracing::error!(address = %a.address(), step = s.op.verb(), why, "step never ran");
        report
            .not_run
            .push((a.address(), format!("{} never ran: {why}", s.op.verb())));
    }
    // Capacity this apply removed and did not give back.
    for (i, a) in plan.actions.iter().enumerate() {
        let completed = report.completed.contains(&a.address());
        if old_deleted[i] && !completed && !report.capacity_lost.contains(&a.address()) {
            report.capacity_lost.push(a.address());
        }
    }
    report.stopped = stop_logged && !report.not_run.is_empty();
    report.rejected_writes = sched.rejected_writes();
    report.learned_quotas = sched.learned_quotas();
    report.elapsed = start.elapsed();
    report
}

#[cfg(test)]
pub(crate) mod tests;
