//! Observing and executing node pools through [`crate::cloud::GkeService`].

use std::time::Duration;

use async_trait::async_trait;
use tokio::time::Instant;

use crate::cloud::{Cloud, CloudError};
use crate::kind::ownership::Ownership;
use crate::kind::{Action, KindId, OperationRecord, Scope};
use crate::kind::{
    ApplyError, KindExec, Observed, StepOp, StepOutcome, judge_conflict, refuse_protected,
};
use crate::kind::{OpSlot, Rejection, Scheduler};
use crate::resource::ClusterRef;
use crate::resource::gke::{
    self, NodeLabels, NodePool, NodeTaints, ResourceLabels, UpdateNodePoolRequest,
};

use super::fields::{LABELS, RESOURCE_LABELS, TAINTS};
use super::{KIND, NodePools};

/// The node pool name an operation targets (`.../nodePools/NAME`).
pub fn operation_target(op: &gke::Operation) -> Option<&str> {
    let link = op.target_link.as_deref()?;
    let (head, name) = link.rsplit_once('/')?;
    head.ends_with("/nodePools").then_some(name)
}

fn cluster_of(a: &Action) -> Result<&ClusterRef, ApplyError> {
    match &a.id.scope {
        Scope::Cluster(c) => Ok(c),
        _ => Err(ApplyError::Scope(a.address())),
    }
}

fn desired(a: &Action) -> Result<&NodePool, ApplyError> {
    crate::kind::desired_body(a)
}

/// The scheduler's scope of a cluster (GKE's concurrency rules are per cluster).
fn gate_of(c: &ClusterRef) -> String {
    c.path()
}

/// The time left until `deadline`, as a timeout for a wait.
fn left(deadline: Instant) -> Duration {
    deadline.saturating_duration_since(Instant::now())
}

fn timed_out(a: &Action, after: Duration) -> CloudError {
    CloudError::Timeout {
        operation: format!("waiting for room to write {}", a.address()),
        after,
    }
}

/// Sends one write on the cluster through the scheduler, following GKE's
/// concurrency rules, and returns the operation it started with its place
/// in the cluster (hold it until the operation has finished).
///
/// - 429 "Too many operations … quota N": the quota is learned, the write
///   waits until one of the cluster's operations finishes (ours wake the
///   gate; someone else's are waited on here) and is sent again.
/// - 400 "incompatible operation OP": the write waits for OP (a
///   cluster-level OP holds every write of this apply on the cluster) and is
///   sent again.
///
/// Both are counted as rejected writes. Anything else is returned.
async fn send_write<F, Fut>(
    cloud: &Cloud,
    sched: &Scheduler,
    a: &Action,
    c: &ClusterRef,
    deadline: Instant,
    mut call: F,
) -> Result<(gke::Operation, OpSlot), CloudError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<gke::Operation, CloudError>>,
{
    let gate = gate_of(c);
    let gke = &cloud.gke;
    loop {
        let permit = tokio::time::timeout_at(deadline, sched.send(&gate))
            .await
            .map_err(|_| timed_out(a, a.timeout))?;
        let err = match call().await {
            Ok(op) => return Ok((op, permit.accepted())),
            Err(e) => e,
        };
        if let Some(quota) = err.operation_quota() {
            let foreign = permit.rejected(sched, Rejection::Quota(quota));
            tracing::info!(address = %a.address(), cluster = %gate, ?quota, foreign,
                "GKE's concurrent operations quota is full; waiting for an operation on the cluster to finish");
            if foreign > 0 {
                wait_for_any_operation(cloud, c, deadline).await?;
                sched.foreign_finished(&gate);
            }
            continue;
        }
        let Some(blocking) = err.busy_operation().map(str::to_string) else {
            return Err(err);
        };
        let busy = match gke.get_operation(&c.project, &c.location, &blocking).await {
            Ok(op) => Some(op),
            Err(e) if e.is_not_found() => None,
            Err(e) => return Err(e),
        };
        let cluster_level = busy
            .as_ref()
            .is_some_and(|op| operation_target(op).is_none());
        // Block the cluster before giving the place back, so no other write
        // slips in while the cluster-level operation runs.
        let _held = cluster_level.then(|| sched.block(&gate));
        permit.rejected(sched, Rejection::Busy);
        tracing::info!(address = %a.address(), operation = %blocking, cluster_level,
            "GKE: an incompatible operation is running; waiting for it to finish");
        let Some(busy) = busy else { continue };
        match gke
            .wait_operation(&c.project, &c.location, &busy, left(deadline))
            .await
        {
            // How it ended is not ours to judge: only that it ended.
            Ok(_) => {}
            Err(CloudError::Timeout { .. }) => return Err(timed_out(a, a.timeout)),
            Err(e) if e.is_not_found() || matches!(e, CloudError::OperationFailed { .. }) => {}
            Err(e) => return Err(e),
        }
    }
}

/// Waits until one of the operations running on the cluster finishes (or
/// none runs any more).
async fn wait_for_any_operation(
    cloud: &Cloud,
    c: &ClusterRef,
    deadline: Instant,
) -> Result<(), CloudError> {
    let mut waits: futures::stream::FuturesUnordered<_> = running_on(cloud, c)
        .await?
        .into_iter()
        .map(|o| async move {
            cloud
                .gke
                .wait_operation(&c.project, &c.location, &o, left(deadline))
                .await
        })
        .collect();
    use futures::StreamExt;
    match waits.next().await {
        Some(Err(e @ CloudError::Timeout { .. })) => Err(e),
        _ => Ok(()),
    }
}

/// The operations running on the cluster now (GKE lists them per location).
async fn running_on(cloud: &Cloud, c: &ClusterRef) -> Result<Vec<gke::Operation>, CloudError> {
    let ops = cloud.gke.list_operations(&c.project, &c.location).await?;
    Ok(ops
        .into_iter()
        .filter(|o| o.status != "DONE")
        .filter(|o| o.target_link.as_deref().is_some_and(|l| c.contains_link(l)))
        .collect())
}

/// After a create answered 409: `Some(op)` when the pool is ours and still
/// being created (wait for `op`), `None` when it is ours and already there;
/// an error when it is someone else's or is being deleted.
async fn resolve_conflict(
    cloud: &Cloud,
    a: &Action,
    c: &ClusterRef,
    want: &NodePool,
) -> Result<Option<gke::Operation>, ApplyError> {
    let running = running_on(cloud, c)
        .await?
        .into_iter()
        .find(|o| operation_target(o) == Some(a.id.name.as_str()));
    let live = match cloud.gke.get_node_pool(c, &a.id.name).await {
        Ok(p) => Some(p),
        Err(e) if e.is_not_found() => None,
        Err(e) => return Err(e.into()),
    };
    let labels = |p: &NodePool| {
        p.config
            .as_ref()
            .and_then(|cfg| Ownership::from_labels(&cfg.labels))
    };
    judge_conflict(
        a,
        "CREATE_NODE_POOL",
        running
            .as_ref()
            .map(|o| (o.name.as_str(), o.operation_type.as_str())),
        live.as_ref().map(labels),
        labels(want).as_ref(),
    )?;
    Ok(running)
}

#[async_trait]
impl KindExec for NodePools {
    fn kind(&self) -> KindId {
        KIND
    }

    fn observes(&self, scope: &Scope) -> bool {
        matches!(scope, Scope::Cluster(_))
    }

    async fn observe(&self, cloud: &Cloud, scope: &Scope) -> Result<Observed, CloudError> {
        let Scope::Cluster(c) = scope else {
            return Ok(Observed::default());
        };
        let (pools, ops) = tokio::try_join!(
            cloud.gke.list_node_pools(c),
            cloud.gke.list_operations_shared(&c.project, &c.location)
        )?;
        // The location's operations, narrowed to this cluster's node pools
        // (GKE names the project by number in operation links).
        let operations = ops
            .iter()
            // DONE without an error: nothing planning reads (see observe).
            .filter(|op| crate::cloud::gke::is_unsettled(op))
            .filter(|op| {
                op.target_link
                    .as_deref()
                    .is_some_and(|l| c.contains_link(l))
            })
            .filter_map(|op| {
                Some(OperationRecord {
                    scope: scope.clone(),
                    target: operation_target(op)?.to_string(),
                    name: op.name.clone(),
                    operation_type: op.operation_type.clone(),
                    running: op.status != "DONE",
                    error: op.error.as_ref().map(|e| e.message.clone()),
                    end_time: op.end_time.clone(),
                })
            })
            .collect();
        Ok(Observed::shared(scope, pools.into_iter(), operations))
    }

    async fn execute(
        &self,
        cloud: &Cloud,
        sched: &Scheduler,
        a: &Action,
        op: StepOp,
    ) -> Result<StepOutcome, ApplyError> {
        let c = cluster_of(a)?;
        let timeout = a.timeout.max(Duration::from_secs(1));
        let deadline = Instant::now() + timeout;
        let gke = &cloud.gke;
        let (started, _slot) = match op {
            StepOp::WaitInFlight => (
                gke::Operation {
                    name: a.operation.clone().unwrap_or_default(),
                    ..Default::default()
                },
                sched.track(&gate_of(c)),
            ),
            StepOp::Create => {
                let pool = desired(a)?;
                no_protected_copy_elsewhere(cloud, a, c, pool).await?;
                match send_write(cloud, sched, a, c, deadline, || {
                    gke.create_node_pool(c, pool)
                })
                .await
                {
                    Ok(started) => started,
                    // The name is taken. It may be our own pool, created by an
                    // earlier attempt whose answer was lost (then wait for that
                    // create); anything else fails the step with the reason.
                    Err(e) if e.is_already_exists() => {
                        match resolve_conflict(cloud, a, c, pool).await? {
                            Some(op) => (op, sched.track(&gate_of(c))),
                            None => return Ok(StepOutcome::Done),
                        }
                    }
                    Err(e) => return Err(e.into()),
                }
            }
            StepOp::Update => {
                // One request per changed group, as Terraform does: GKE applies
                // them as separate operations, one at a time per node pool.
                let config = desired(a)?.config.clone().unwrap_or_default();
                let name = c.node_pool_path(&a.id.name);
                let mut requests = Vec::new();
                for group in &a.groups {
                    let mut req = UpdateNodePoolRequest {
                        name: name.clone(),
                        ..Default::default()
                    };
                    if *group == LABELS {
                        req.labels = Some(NodeLabels {
                            labels: config.labels.clone(),
                        });
                    } else if *group == TAINTS {
                        req.taints = Some(NodeTaints {
                            taints: config.taints.clone(),
                        });
                    } else if *group == RESOURCE_LABELS {
                        req.resource_labels = Some(ResourceLabels {
                            labels: config.resource_labels.clone(),
                        });
                    } else {
                        continue;
                    }
                    requests.push(req);
                }
                let mut last = None;
                for req in &requests {
                    if let Some((op, slot)) = last.take() {
                        gke.wait_operation(&c.project, &c.location, &op, left(deadline))
                            .await?;
                        drop(slot);
                    }
                    last = Some(
                        send_write(cloud, sched, a, c, deadline, || {
                            gke.update_node_pool(c, req)
                        })
                        .await?,
                    );
                }
                match last {
                    Some(started) => started,
                    None => return Ok(StepOutcome::Done),
                }
            }
            StepOp::Guard => {
                return Ok(guard(cloud, c, a).await?.unwrap_or(StepOutcome::Done));
            }
            StepOp::Delete => {
                // The stamp as it is now, not as the plan's view had it.
                if let Some(gone) = guard(cloud, c, a).await? {
                    return Ok(gone);
                }
                match send_write(cloud, sched, a, c, deadline, || {
                    gke.delete_node_pool(c, &a.id.name)
                })
                .await
                {
                    Ok(started) => started,
                    Err(e) if e.is_not_found() => return Ok(StepOutcome::AlreadyGone),
                    Err(e) => return Err(e.into()),
                }
            }
            // Node pools have no cleanup step; the executor drains.
            StepOp::Cleanup | StepOp::Drain => return Ok(StepOutcome::Done),
        };
        gke.wait_operation(&c.project, &c.location, &started, left(deadline))
            .await?;
        Ok(StepOutcome::Done)
    }
}
/// Before a protected slice replica's pool is created: no protected copy
/// of that replica (its owner, slice and replica stamp, and a live
/// `preventDestroy` stamp) lives in another cluster of the project. A plan
/// made from a lagging list may not have seen the copy its Target moved
/// away from; while both are protected, the second could never be pruned.
/// (An unprotected copy is the moved delete this plan pairs with the
/// create, or the next plan's.) One `clusters.list` (GKE embeds each
/// cluster's node pools), only for protected creates. A copy found refuses
/// the create (`protected_copy`); the next plan sees it.
async fn no_protected_copy_elsewhere(
    cloud: &Cloud,
    a: &Action,
    c: &ClusterRef,
    pool: &NodePool,
) -> Result<(), ApplyError> {
    let Some(want) = pool
        .config
        .as_ref()
        .and_then(|cfg| Ownership::from_labels(&cfg.labels))
        .filter(|o| o.prevent_destroy)
    else {
        return Ok(());
    };
    let listed = cloud.gke.list_clusters(&c.project).await?;
    for other in &listed.clusters {
        if other.location == c.location && other.name == c.name {
            continue;
        }
        let copy = other.node_pools.iter().find(|p| {
            p.config
                .as_ref()
                .and_then(|cfg| Ownership::from_labels(&cfg.labels))
                .is_some_and(|o| {
                    o.owner == want.owner
                        && o.slice == want.slice
                        && o.replica == want.replica
                        && o.prevent_destroy
                })
        });
        if let Some(p) = copy {
            return Err(ApplyError::of_kind(
                a,
                "protected_copy",
                format!(
                    "not created: slice {} has lifecycle.preventDestroy and its replica {} already runs as \
                     node pool {} in cluster {}/{}, stamped preventDestroy (the plan was made from a view \
                     that did not show it). A second protected copy could never be pruned; the next plan \
                     sees this one",
                    want.slice, want.replica, p.name, other.location, other.name
                ),
            ));
        }
    }
    Ok(())
}

/// Reads the pool's `preventDestroy` stamp as it is now, not as the plan's
/// view had it ([`refuse_protected`]): `Some` when it is gone, an error
/// when it is protected.
async fn guard(
    cloud: &Cloud,
    c: &ClusterRef,
    a: &Action,
) -> Result<Option<StepOutcome>, ApplyError> {
    match cloud.gke.get_node_pool(c, &a.id.name).await {
        Ok(p) => {
            refuse_protected(
                a,
                p.config
                    .as_ref()
                    .and_then(|cfg| Ownership::from_labels(&cfg.labels))
                    .as_ref(),
            )?;
            Ok(None)
        }
        Err(e) if e.is_not_found() => Ok(Some(StepOutcome::AlreadyGone)),
        Err(e) => Err(e.into()),
    }
}
