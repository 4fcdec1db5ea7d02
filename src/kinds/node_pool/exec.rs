//! Observing and executing node pools through [`crate::cloud::GkeService`].

use std::time::Duration;

use async_trait::async_trait;
use tokio::time::Instant;

use crate::apply::{ApplyError, KindExec, Observed, StepOp, StepOutcome, judge_conflict};
use crate::cloud::{Cloud, CloudError};
use crate::plan::kind::body_as;
use crate::plan::ownership::Ownership;
use crate::plan::{Action, KindId, OperationRecord, Scope};
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
    a.desired
        .as_ref()
        .and_then(body_as::<NodePool>)
        .ok_or_else(|| ApplyError::Body(a.address()))
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

/// After a create answered 409: `Some(op)` when the pool is ours and still
/// being created (wait for `op`), `None` when it is ours and already there;
/// an error when it is someone else's or is being deleted.
async fn resolve_conflict(
    cloud: &Cloud,
    a: &Action,
    c: &ClusterRef,
    want: &NodePool,
) -> Result<Option<gke::Operation>, ApplyError> {
    let ops = cloud.gke.list_operations(&c.project, &c.location).await?;
    let running = ops.into_iter().find(|o| {
        o.status != "DONE"
            && o.target_link.as_deref().is_some_and(|l| c.contains_link(l))
            && operation_target(o) == Some(a.id.name.as_str())
    });
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
            cloud.gke.list_operations(&c.project, &c.location)
        )?;
        // The location's operations, narrowed to this cluster's node pools
        // (GKE names the project by number in operation links).
        let operations = ops
            .iter()
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
        Ok(Observed::new(scope, pools, operations))
    }

    async fn execute(
        &self,
        cloud: &Cloud,
        a: &Action,
        op: StepOp,
    ) -> Result<StepOutcome, ApplyError> {
        let c = cluster_of(a)?;
        let timeout = a.timeout.max(Duration::from_secs(1));
        let gke = &cloud.gke;
        let started = match op {
            StepOp::WaitInFlight => gke::Operation {
                name: a.operation.clone().unwrap_or_default(),
                ..Default::default()
            },
            StepOp::Create => {
                let pool = desired(a)?;
                match while_cluster_busy(timeout, || gke.create_node_pool(c, pool)).await {
                    Ok(op) => op,
                    // The name is taken. It may be our own pool, created by an
                    // earlier attempt whose answer was lost (then wait for that
                    // create); anything else fails the step with the reason.
                    Err(e) if e.is_already_exists() => {
                        match resolve_conflict(cloud, a, c, pool).await? {
                            Some(op) => op,
                            None => return Ok(StepOutcome::Done),
                        }
                    }
                    Err(e) => return Err(e.into()),
                }
            }
            StepOp::Update => {
                // One request per changed group, as Terraform does: GKE applies
                // them as separate operations.
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
                    if let Some(op) = last.take() {
                        gke.wait_operation(&c.project, &c.location, &op, timeout)
                            .await?;
                    }
                    last =
                        Some(while_cluster_busy(timeout, || gke.update_node_pool(c, req)).await?);
                }
                match last {
                    Some(op) => op,
                    None => return Ok(StepOutcome::Done),
                }
            }
            StepOp::Delete => {
                match while_cluster_busy(timeout, || gke.delete_node_pool(c, &a.id.name)).await {
                    Ok(op) => op,
                    Err(e) if e.is_not_found() => return Ok(StepOutcome::AlreadyGone),
                    Err(e) => return Err(e.into()),
                }
            }
        };
        gke.wait_operation(&c.project, &c.location, &started, timeout)
            .await?;
        Ok(StepOutcome::Done)
    }
}
