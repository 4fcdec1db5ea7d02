//! Applying a plan: runs its steps with bounded concurrency, dependent steps
//! in order, waits on long-running operations, and reports a summary. A
//! failure stops only the steps that depend on it; everything it leaves
//! behind is observed and repaired by the next run (no local state).

pub mod progress;
pub mod steps;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::task::JoinSet;

use crate::cloud::{CloudClient, CloudError};
use crate::plan::ownership::Ownership;
use crate::plan::{Action, ActionKind, Plan, ResourceKind, Scope};
use crate::resource::compute::{self, ResourcePolicy};
use crate::resource::gke::{
    self, NodeLabels, NodePool, NodeTaints, ResourceLabels, UpdateNodePoolRequest,
};
use crate::resource::{ClusterRef, RegionRef};

pub use progress::{PlainProgress, Progress, TerminalProgress};
use steps::{Step, StepOp};

/// Executor settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApplyOptions {
    /// Maximum steps running at once.
    pub parallelism: usize,
    /// Maximum replacements (delete + create) in progress at once.
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
    /// The plan's body could not be decoded (a hand-edited plan file).
    #[error("the plan's body for {address} is invalid: {source}")]
    Body {
        /// Address.
        address: String,
        /// Cause.
        source: serde_json::Error,
    },
    /// The action's scope does not fit its kind (a hand-edited plan file).
    #[error("the plan's scope for {0} does not fit its kind")]
    Scope(String),
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
}

/// How a step that did not fail ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepOutcome {
    /// It did what it was meant to.
    Done,
    /// A delete found the resource already gone: nothing was destroyed.
    AlreadyGone,
}

/// The result of an apply.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ApplyReport {
    /// Counts of completed actions by kind.
    pub done: BTreeMap<&'static str, usize>,
    /// Failed actions: address → error.
    pub failed: Vec<(String, String)>,
    /// Actions not started because something they depend on failed.
    pub skipped: Vec<String>,
    /// Actions that never ran for any other reason: address → why. Any step
    /// not run is a failure of the run.
    pub not_run: Vec<(String, String)>,
    /// Deletes that found the resource already gone (counted apart from
    /// `destroyed`: this apply did not destroy it).
    pub already_gone: Vec<String>,
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
        let n = |k: &str| self.done.get(k).copied().unwrap_or(0);
        let gone = match self.already_gone.len() {
            0 => String::new(),
            k => format!(" ({k} already gone)"),
        };
        let not_run = match self.not_run.len() {
            0 => String::new(),
            k => format!(", {k} not run"),
        };
        format!(
            "{}: {} created, {} updated, {} replaced, {} destroyed{gone}, {} waited on, {} failed, {} skipped{not_run} ({:.1}s).",
            if self.success() {
                "Apply complete"
            } else {
                "Apply FAILED"
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

fn action_word(a: ActionKind) -> &'static str {
    match a {
        ActionKind::Create => "create",
        ActionKind::Update => "update",
        ActionKind::Replace => "replace",
        ActionKind::Delete => "delete",
        ActionKind::Wait => "wait",
    }
}

fn body<T: serde::de::DeserializeOwned>(a: &Action) -> Result<T, ApplyError> {
    let v = a.after.clone().unwrap_or(serde_json::Value::Null);
    serde_json::from_value(v).map_err(|source| ApplyError::Body {
        address: a.address.clone(),
        source,
    })
}

fn gke_op(name: &str) -> gke::Operation {
    gke::Operation {
        name: name.to_string(),
        ..Default::default()
    }
}

fn region_op(r: &RegionRef, name: &str) -> compute::Operation {
    let region = format!(
        "https://compute.googleapis.com/compute/v1/projects/{}/regions/{}",
        r.project, r.region
    );
    compute::Operation {
        name: name.to_string(),
        self_link: Some(format!("{region}/operations/{name}")),
        region: Some(region),
        ..Default::default()
    }
}

/// Retries `call` while GKE answers "incompatible operation" (another
/// operation runs on the cluster), until `timeout`: a TPU node pool operation
/// can hold the cluster for many minutes, longer than the client's own retry
/// budget. Other errors return at once.
async fn while_cluster_busy<T, F, Fut>(timeout: Duration, mut call: F) -> Result<T, CloudError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, CloudError>>,
{
    let deadline = Instant::now() + timeout;
    let mut delay = Duration::from_secs(5);
    loop {
        match call().await {
            Err(e) if e.is_cluster_busy() && Instant::now() + delay < deadline => {
                tracing::info!(error = %e, delay_s = delay.as_secs(), "cluster busy; retrying");
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(60));
            }
            other => return other,
        }
    }
}

/// Whether `live` carries the same ownership (owner, slice, replica) as the
/// desired labels.
fn same_owner(live: Option<Ownership>, desired: Option<Ownership>) -> bool {
    match (live, desired) {
        (Some(l), Some(d)) => l.owner == d.owner && l.slice == d.slice && l.replica == d.replica,
        _ => false,
    }
}

fn describe_owner(o: Option<&Ownership>) -> String {
    match o {
        Some(o) => format!(
            "owned by slicectl owner {:?} as slice {} replica {}",
            o.owner, o.slice, o.replica
        ),
        None => "not created by slicectl".to_string(),
    }
}

/// After a node pool create answered 409: `Some(op)` when the pool is ours
/// and still being created (wait for `op`), `None` when it is ours and
/// already there; an error when it is someone else's or is being deleted.
async fn resolve_pool_conflict(
    client: &CloudClient,
    a: &Action,
    c: &ClusterRef,
    desired: &NodePool,
) -> Result<Option<gke::Operation>, ApplyError> {
    let ops = client
        .gke()
        .list_operations(&c.project, &c.location)
        .await?;
    let running = ops.into_iter().find(|o| {
        o.status != "DONE"
            && o.target_link.as_deref().is_some_and(|l| c.contains_link(l))
            && crate::plan::inventory::gke_operation_target(o) == Some(a.name.as_str())
    });
    let conflict = |reason: String| ApplyError::Conflict {
        address: a.address.clone(),
        reason,
    };
    if let Some(op) = &running
        && op.operation_type != "CREATE_NODE_POOL"
    {
        return Err(conflict(format!(
            "node pool {} already exists and operation {} ({}) is running on it, \
             probably started by another apply; nothing was created. Run apply again once it has finished",
            a.name, op.name, op.operation_type
        )));
    }
    let live = match client.gke().get_node_pool(c, &a.name).await {
        Ok(p) => p,
        Err(e) if e.is_not_found() => {
            return Err(conflict(format!(
                "node pool {} was reported to exist, then could not be found (deleted meanwhile?); \
                 nothing was created. Run apply again",
                a.name
            )));
        }
        Err(e) => return Err(e.into()),
    };
    let labels = |p: &NodePool| {
        p.config
            .as_ref()
            .and_then(|cfg| Ownership::from_labels(&cfg.labels))
    };
    let theirs = labels(&live);
    if !same_owner(theirs.clone(), labels(desired)) {
        return Err(conflict(format!(
            "node pool {} already exists in {c} and is {}; slicectl never changes it. \
             It was created by someone else after the plan was made: rename the slice, or remove the existing pool",
            a.name,
            describe_owner(theirs.as_ref())
        )));
    }
    Ok(running)
}

/// After a workload policy insert answered 409: like [`resolve_pool_conflict`].
async fn resolve_policy_conflict(
    client: &CloudClient,
    a: &Action,
    r: &RegionRef,
    desired: &ResourcePolicy,
) -> Result<Option<compute::Operation>, ApplyError> {
    let conflict = |reason: String| ApplyError::Conflict {
        address: a.address.clone(),
        reason,
    };
    let running = client
        .compute()
        .list_region_operations(&r.project, &r.region, true)
        .await?
        .into_iter()
        .find(|o| crate::plan::inventory::compute_operation_target(o) == Some(a.name.as_str()));
    if let Some(op) = &running
        && op.operation_type != "insert"
    {
        return Err(conflict(format!(
            "workload policy {} already exists and operation {} ({}) is running on it, \
             probably started by another apply; nothing was created. Run apply again once it has finished",
            a.name, op.name, op.operation_type
        )));
    }
    let live = match client
        .compute()
        .get_resource_policy(&r.project, &r.region, &a.name)
        .await
    {
        Ok(p) => p,
        Err(e) if e.is_not_found() => {
            return Err(conflict(format!(
                "workload policy {} was reported to exist, then could not be found (deleted meanwhile?); \
                 nothing was created. Run apply again",
                a.name
            )));
        }
        Err(e) => return Err(e.into()),
    };
    let own = |p: &ResourcePolicy| {
        p.description
            .as_deref()
            .and_then(Ownership::from_description)
    };
    let theirs = own(&live);
    if !same_owner(theirs.clone(), own(desired)) {
        return Err(conflict(format!(
            "workload policy {} already exists in {r} and is {}; slicectl never changes it. \
             Rename the slice, or remove the existing policy",
            a.name,
            describe_owner(theirs.as_ref())
        )));
    }
    Ok(running)
}

async fn run_pool_step(
    client: &CloudClient,
    a: &Action,
    c: &ClusterRef,
    op: StepOp,
    timeout: Duration,
) -> Result<StepOutcome, ApplyError> {
    let gke = client.gke();
    let started = match op {
        StepOp::WaitInFlight => gke_op(a.operation.as_deref().unwrap_or_default()),
        StepOp::Create => {
            let pool: NodePool = body(a)?;
            match while_cluster_busy(timeout, || gke.create_node_pool(c, &pool)).await {
                Ok(op) => op,
                // The name is taken. It may be our own pool, created by an
                // earlier attempt whose answer was lost (then wait for that
                // create); anything else fails the step with the reason.
                Err(e) if e.is_already_exists() => {
                    match resolve_pool_conflict(client, a, c, &pool).await? {
                        Some(op) => op,
                        None => return Ok(StepOutcome::Done),
                    }
                }
                Err(e) => return Err(e.into()),
            }
        }
        StepOp::Update => {
            // One request per changed field group, as Terraform does: GKE
            // applies them as separate operations.
            let pool: NodePool = body(a)?;
            let config = pool.config.unwrap_or_default();
            let changed = |prefix: &str| a.changes.iter().any(|c| c.path.starts_with(prefix));
            let name = c.node_pool_path(&a.name);
            let mut requests = Vec::new();
            if changed("config.labels") {
                requests.push(UpdateNodePoolRequest {
                    name: name.clone(),
                    labels: Some(NodeLabels {
                        labels: config.labels,
                    }),
                    ..Default::default()
                });
            }
            if changed("config.taints") {
                requests.push(UpdateNodePoolRequest {
                    name: name.clone(),
                    taints: Some(NodeTaints {
                        taints: config.taints,
                    }),
                    ..Default::default()
                });
            }
            if changed("config.resourceLabels") {
                requests.push(UpdateNodePoolRequest {
                    name,
                    resource_labels: Some(ResourceLabels {
                        labels: config.resource_labels,
                    }),
                    ..Default::default()
                });
            }
            let mut last = None;
            for req in &requests {
                if let Some(op) = last.take() {
                    client
                        .gke()
                        .wait_operation(&c.project, &c.location, &op, timeout)
                        .await?;
                }
                last = Some(while_cluster_busy(timeout, || gke.update_node_pool(c, req)).await?);
            }
            match last {
                Some(op) => op,
                None => return Ok(StepOutcome::Done),
            }
        }
        StepOp::Delete => {
            match while_cluster_busy(timeout, || gke.delete_node_pool(c, &a.name)).await {
                Ok(op) => op,
                Err(e) if e.is_not_found() => return Ok(StepOutcome::AlreadyGone),
                Err(e) => return Err(e.into()),
            }
        }
    };
    client
        .gke()
        .wait_operation(&c.project, &c.location, &started, timeout)
        .await?;
    Ok(StepOutcome::Done)
}

async fn run_policy_step(
    client: &CloudClient,
    a: &Action,
    r: &RegionRef,
    op: StepOp,
    timeout: Duration,
) -> Result<StepOutcome, ApplyError> {
    let started = match op {
        StepOp::WaitInFlight => region_op(r, a.operation.as_deref().unwrap_or_default()),
        StepOp::Create => {
            let policy: ResourcePolicy = body(a)?;
            match client
                .compute()
                .insert_resource_policy(&r.project, &r.region, &policy)
                .await
            {
                Ok(op) => op,
                Err(e) if e.is_already_exists() => {
                    match resolve_policy_conflict(client, a, r, &policy).await? {
                        Some(op) => op,
                        None => return Ok(StepOutcome::Done),
                    }
                }
                Err(e) => return Err(e.into()),
            }
        }
        // Workload policies are immutable: an update is never planned.
        StepOp::Update => return Ok(StepOutcome::Done),
        StepOp::Delete => match client
            .compute()
            .delete_resource_policy(&r.project, &r.region, &a.name)
            .await
        {
            Ok(op) => op,
            Err(e) if e.is_not_found() => return Ok(StepOutcome::AlreadyGone),
            Err(e) => return Err(e.into()),
        },
    };
    client.compute().wait_operation(&started, timeout).await?;
    Ok(StepOutcome::Done)
}

async fn run_step(client: CloudClient, a: Action, op: StepOp) -> Result<StepOutcome, ApplyError> {
    let timeout = Duration::from_secs(a.timeout_secs.max(1));
    match (a.kind, &a.scope) {
        (ResourceKind::NodePool, Scope::Cluster(c)) => {
            run_pool_step(&client, &a, c, op, timeout).await
        }
        (ResourceKind::WorkloadPolicy, Scope::Region(r)) => {
            run_policy_step(&client, &a, r, op, timeout).await
        }
        _ => Err(ApplyError::Scope(a.address.clone())),
    }
}

/// The replacement group of an action: every replacing action of one slice
/// replica holds one replacement slot together. The steps of a replica's
/// replacements depend on each other (pool delete → policy delete → policy
/// create → pool create), so a slot per action would deadlock them.
fn replacement_group(a: &Action) -> (&str, u32) {
    (a.slice.as_str(), a.replica)
}

/// Executes the plan. Every action ends in the report: done, failed, skipped
/// (something it depends on failed) or not run (any other reason).
pub async fn execute(
    client: &CloudClient,
    plan: &Plan,
    opts: &ApplyOptions,
    progress: Arc<dyn Progress>,
) -> ApplyReport {
    let start = Instant::now();
    let steps: Vec<Step> = steps::expand(plan);
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
    let mut replacing: BTreeMap<(&str, u32), bool> = BTreeMap::new();
    let mut replacements_running = 0usize;
    let mut report = ApplyReport::default();
    let mut running: JoinSet<(usize, Duration, Result<StepOutcome, ApplyError>)> = JoinSet::new();
    let mut tasks: HashMap<tokio::task::Id, usize> = HashMap::new();
    let max_replacements = opts.max_replacements.max(1);

    loop {
        // Start what can start.
        let mut deferred = Vec::new();
        while running.len() < opts.parallelism.max(1) {
            let Some(id) = ready.pop() else { break };
            let step = &steps[id];
            let a = &plan.actions[step.action];
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
            }
            progress.started(&a.address, step.op.verb());
            let client = client.clone();
            let action = a.clone();
            let op = step.op;
            let handle = running.spawn(async move {
                let t = Instant::now();
                let r = run_step(client, action, op).await;
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
                progress.finished(&a.address, step.op.verb(), Ok(()), elapsed);
                if *outcome == StepOutcome::AlreadyGone {
                    action_gone[step.action] = true;
                }
                for d in &dependents[id] {
                    pending[*d] -= 1;
                    if pending[*d] == 0 && !finished[*d] {
                        ready.push(*d);
                    }
                }
            }
            Err(e) => {
                let msg = e.to_string();
                progress.finished(&a.address, step.op.verb(), Err(&msg), elapsed);
                action_failed[step.action] = true;
                report.failed.push((a.address.clone(), msg));
                // Everything downstream is skipped.
                let mut stack = dependents[id].clone();
                while let Some(d) = stack.pop() {
                    if !finished[d] {
                        finished[d] = true;
                        newly_finished.push(d);
                        let da = &plan.actions[steps[d].action];
                        if !action_failed[steps[d].action] && !report.skipped.contains(&da.address)
                        {
                            report.skipped.push(da.address.clone());
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
                && result.is_ok()
            {
                if action_gone[steps[f].action] && fa.action == ActionKind::Delete {
                    report.already_gone.push(fa.address.clone());
                } else {
                    *report.done.entry(action_word(fa.action)).or_default() += 1;
                }
            }
            if fa.action == ActionKind::Replace {
                let g = replacement_group(fa);
                if let Some(n) = group_left.get_mut(&g) {
                    *n -= 1;
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
        if report.not_run.iter().any(|(addr, _)| *addr == a.address) {
            continue;
        }
        let why = if pending[s.id] > 0 {
            "a step it depends on never finished"
        } else {
            "it could not be scheduled (replacement limit)"
        };
        tracing::error!(address = %a.address, step = s.op.verb(), why, "step never ran");
        report.not_run.push((
            a.address.clone(),
            format!("{} never ran: {why}", s.op.verb()),
        ));
    }
    report.elapsed = start.elapsed();
    report
}
