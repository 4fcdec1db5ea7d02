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
    /// The step's task panicked (a bug): reported, never silently dropped.
    #[error("internal error in this step: {0}")]
    Panicked(String),
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
    /// Wall-clock time.
    pub elapsed: Duration,
}

impl ApplyReport {
    /// Whether everything succeeded.
    pub fn success(&self) -> bool {
        self.failed.is_empty() && self.skipped.is_empty()
    }

    /// One-line summary.
    pub fn summary(&self) -> String {
        let n = |k: &str| self.done.get(k).copied().unwrap_or(0);
        format!(
            "{}: {} created, {} updated, {} replaced, {} destroyed, {} waited on, {} failed, {} skipped ({:.1}s).",
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

async fn run_pool_step(
    client: &CloudClient,
    a: &Action,
    c: &ClusterRef,
    op: StepOp,
    timeout: Duration,
) -> Result<(), ApplyError> {
    let gke = client.gke();
    let started = match op {
        StepOp::WaitInFlight => gke_op(a.operation.as_deref().unwrap_or_default()),
        StepOp::Create => {
            let pool: NodePool = body(a)?;
            match while_cluster_busy(timeout, || gke.create_node_pool(c, &pool)).await {
                Ok(op) => op,
                // Created by an earlier attempt whose answer was lost: find
                // the operation creating it instead of failing or duplicating.
                Err(e) if e.is_already_exists() => {
                    let ops = client
                        .gke()
                        .list_operations(&c.project, &c.location)
                        .await?;
                    match ops.into_iter().find(|o| {
                        o.status != "DONE"
                            && o.target_link.as_deref().is_some_and(|l| c.contains_link(l))
                            && crate::plan::inventory::gke_operation_target(o)
                                == Some(a.name.as_str())
                    }) {
                        Some(op) => op,
                        None => return Ok(()),
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
                None => return Ok(()),
            }
        }
        StepOp::Delete => {
            match while_cluster_busy(timeout, || gke.delete_node_pool(c, &a.name)).await {
                Ok(op) => op,
                Err(e) if e.is_not_found() => return Ok(()),
                Err(e) => return Err(e.into()),
            }
        }
    };
    client
        .gke()
        .wait_operation(&c.project, &c.location, &started, timeout)
        .await?;
    Ok(())
}

async fn run_policy_step(
    client: &CloudClient,
    a: &Action,
    r: &RegionRef,
    op: StepOp,
    timeout: Duration,
) -> Result<(), ApplyError> {
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
                Err(e) if e.is_already_exists() => return Ok(()),
                Err(e) => return Err(e.into()),
            }
        }
        StepOp::Update => return Ok(()), // workload policies are immutable: never planned
        StepOp::Delete => match client
            .compute()
            .delete_resource_policy(&r.project, &r.region, &a.name)
            .await
        {
            Ok(op) => op,
            Err(e) if e.is_not_found() => return Ok(()),
            Err(e) => return Err(e.into()),
        },
    };
    client.compute().wait_operation(&started, timeout).await?;
    Ok(())
}

async fn run_step(client: CloudClient, a: Action, op: StepOp) -> Result<(), ApplyError> {
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

/// Executes the plan.
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
    // Steps left per action, to know when an action (and a replacement) is done.
    let mut left: Vec<usize> = vec![0; plan.actions.len()];
    for s in &steps {
        left[s.action] += 1;
    }
    let mut ready: Vec<usize> = steps
        .iter()
        .filter(|s| s.deps.is_empty())
        .map(|s| s.id)
        .collect();
    ready.reverse();
    let mut failed_steps = vec![false; steps.len()];
    let mut action_failed = vec![false; plan.actions.len()];
    let mut replacing: Vec<bool> = vec![false; plan.actions.len()];
    let mut replacements_running = 0usize;
    let mut report = ApplyReport::default();
    let mut running: JoinSet<(usize, Duration, Result<(), ApplyError>)> = JoinSet::new();
    let mut tasks: HashMap<tokio::task::Id, usize> = HashMap::new();

    loop {
        // Start what can start.
        let mut deferred = Vec::new();
        while running.len() < opts.parallelism.max(1) {
            let Some(id) = ready.pop() else { break };
            let step = &steps[id];
            let a = &plan.actions[step.action];
            if a.action == ActionKind::Replace && !replacing[step.action] {
                if replacements_running >= opts.max_replacements.max(1) {
                    deferred.push(id);
                    continue;
                }
                replacing[step.action] = true;
                replacements_running += 1;
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
        left[step.action] -= 1;
        match &result {
            Ok(()) => {
                progress.finished(&a.address, step.op.verb(), Ok(()), elapsed);
                for d in &dependents[id] {
                    pending[*d] -= 1;
                    if pending[*d] == 0 && !failed_steps[*d] {
                        ready.push(*d);
                    }
                }
                if left[step.action] == 0 && !action_failed[step.action] {
                    *report.done.entry(action_word(a.action)).or_default() += 1;
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
                    if !failed_steps[d] {
                        failed_steps[d] = true;
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
        if replacing[step.action] && (left[step.action] == 0 || result.is_err()) {
            replacing[step.action] = false;
            replacements_running -= 1;
        }
    }
    report.elapsed = start.elapsed();
    report
}
