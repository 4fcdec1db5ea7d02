//! The shell the compute kinds share (workload policy, instance template,
//! MIG), written once: observe is one list of the kind's resources and one
//! list of its scope's operations; execute inserts, deletes or waits on a
//! running operation, and judges an insert answered 409
//! ([`crate::kind::judge_conflict`]). A kind says only what differs: its
//! place (project, region or zone), its calls, and what it adds (a check
//! before its insert, an in-place update).
//!
//! Every type that implements [`ComputeKind`] is a [`KindExec`].

use async_trait::async_trait;

use crate::cloud::{Cloud, CloudError};
use crate::kind::Resource;
use crate::kind::ownership::Ownership;
use crate::kind::{Action, Kind, KindId, OperationRecord, Scope};
use crate::kind::{ApplyError, KindExec, Observed, StepOp, StepOutcome};
use crate::resource::compute;
use crate::resource::{ProjectRef, RegionRef, ZoneRef};

/// Where a compute kind's resources live: a project (global resources), a
/// region or a zone.
pub trait Place: Send + Sync {
    /// The place of a scope, when it is a scope of this sort.
    fn of(scope: &Scope) -> Option<&Self>;
    /// A handle on an operation of the place, by name (to wait on one
    /// found running).
    fn operation(&self, name: &str) -> compute::Operation;
}

const COMPUTE: &str = "https://compute.googleapis.com/compute/v1";

impl Place for ProjectRef {
    fn of(scope: &Scope) -> Option<&Self> {
        match scope {
            Scope::Global(p) => Some(p),
            _ => None,
        }
    }

    fn operation(&self, name: &str) -> compute::Operation {
        compute::Operation {
            name: name.to_string(),
            self_link: Some(format!(
                "{COMPUTE}/projects/{}/global/operations/{name}",
                self.project
            )),
            ..Default::default()
        }
    }
}

impl Place for RegionRef {
    fn of(scope: &Scope) -> Option<&Self> {
        match scope {
            Scope::Region(r) => Some(r),
            _ => None,
        }
    }

    fn operation(&self, name: &str) -> compute::Operation {
        let region = format!(
            "{COMPUTE}/projects/{}/regions/{}",
            self.project, self.region
        );
        compute::Operation {
            name: name.to_string(),
            self_link: Some(format!("{region}/operations/{name}")),
            region: Some(region),
            ..Default::default()
        }
    }
}

impl Place for ZoneRef {
    fn of(scope: &Scope) -> Option<&Self> {
        match scope {
            Scope::Zone(z) => Some(z),
            _ => None,
        }
    }

    fn operation(&self, name: &str) -> compute::Operation {
        let zone = format!("{COMPUTE}/projects/{}/zones/{}", self.project, self.zone);
        compute::Operation {
            name: name.to_string(),
            self_link: Some(format!("{zone}/operations/{name}")),
            zone: Some(zone),
            ..Default::default()
        }
    }
}

/// One compute resource kind's calls, in the place its resources live.
#[async_trait]
pub trait ComputeKind: Kind + Send + Sync {
    /// Where its resources live.
    type Place: Place;
    /// Its wire type.
    type Item: Resource + Clone;
    /// The collection an operation's `targetLink` names it under
    /// (`instanceTemplates`, `resourcePolicies`, `instanceGroupManagers`).
    const COLLECTION: &'static str;

    /// The ownership a resource records.
    fn ownership_of(item: &Self::Item) -> Option<Ownership>;

    /// Every resource of the kind in the place.
    async fn list(cloud: &Cloud, place: &Self::Place) -> Result<Vec<Self::Item>, CloudError>;
    /// The place's operations (all, or only the running ones).
    async fn list_operations(
        cloud: &Cloud,
        place: &Self::Place,
    ) -> Result<Vec<compute::Operation>, CloudError>;
    /// Starts inserting a resource.
    async fn insert(
        cloud: &Cloud,
        place: &Self::Place,
        item: &Self::Item,
    ) -> Result<compute::Operation, CloudError>;
    /// Starts deleting a resource by name.
    async fn delete(
        cloud: &Cloud,
        place: &Self::Place,
        name: &str,
    ) -> Result<compute::Operation, CloudError>;
    /// After an insert answered 409: the live resource of `item`'s name,
    /// `None` when there is none.
    async fn find(
        cloud: &Cloud,
        place: &Self::Place,
        item: &Self::Item,
    ) -> Result<Option<Self::Item>, CloudError>;

    /// Right before a delete: the live resource named `name`, read again,
    /// for a kind whose resources carry a `preventDestroy` stamp (a MIG);
    /// `None` (no read) for one whose resources carry none.
    async fn protection_now(
        _cloud: &Cloud,
        _place: &Self::Place,
        _name: &str,
    ) -> Result<Option<Option<Self::Item>>, CloudError> {
        Ok(None)
    }

    /// What is inserted for `a`: its desired item, unless the kind carries
    /// something over from the resource it replaces (a MIG its adoption
    /// marker).
    fn to_insert<'i>(&self, _a: &Action, item: &'i Self::Item) -> std::borrow::Cow<'i, Self::Item> {
        std::borrow::Cow::Borrowed(item)
    }

    /// What is checked before an insert (nothing by default).
    async fn before_insert(
        &self,
        _cloud: &Cloud,
        _a: &Action,
        _item: &Self::Item,
    ) -> Result<(), ApplyError> {
        Ok(())
    }

    /// An in-place update to `item`: the operation to wait on. By default
    /// the kind is immutable (the planner never plans an update of it) and
    /// there is nothing to do.
    async fn update(
        &self,
        _cloud: &Cloud,
        _place: &Self::Place,
        _a: &Action,
        _item: &Self::Item,
    ) -> Result<Option<compute::Operation>, ApplyError> {
        Ok(None)
    }
}

/// A GET's answer as an option: `None` when the resource is not found.
pub fn found<T>(got: Result<T, CloudError>) -> Result<Option<T>, CloudError> {
    match got {
        Ok(t) => Ok(Some(t)),
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) => Err(e),
    }
}

/// The name of the resource of collection `collection` a compute operation
/// targets.
pub fn operation_target<'a>(op: &'a compute::Operation, collection: &str) -> Option<&'a str> {
    let link = op.target_link.as_deref()?;
    let (head, name) = link.rsplit_once('/')?;
    let head = head.strip_suffix(collection)?;
    head.ends_with('/').then_some(name)
}

/// The operation records of a compute operations listing in `scope`, for
/// the operations that target a resource of `collection` (one kind's).
pub fn operation_records(
    scope: &Scope,
    ops: &[compute::Operation],
    collection: &str,
) -> Vec<OperationRecord> {
    ops.iter()
        .filter_map(|op| {
            Some(OperationRecord {
                scope: scope.clone(),
                target: operation_target(op, collection)?.to_string(),
                name: op.name.clone(),
                operation_type: op.operation_type.clone(),
                running: op.status != "DONE",
                error: None,
                end_time: None,
            })
        })
        .collect()
}

/// After an insert answered 409, judged as for every kind: the resource is
/// ours from an interrupted apply, another run's (maybe still being
/// inserted), or someone else's. Done when it is this slice replica's
/// (after its running insert, if any, finished); else a conflict that says
/// whether it is someone else's or is being created by another run.
async fn after_conflict<K: ComputeKind>(
    cloud: &Cloud,
    place: &K::Place,
    a: &Action,
    want: &K::Item,
    timeout: std::time::Duration,
) -> Result<StepOutcome, ApplyError> {
    let ops = K::list_operations(cloud, place).await?;
    let live = K::find(cloud, place, want)
        .await?
        .map(|l| K::ownership_of(&l));
    let running = ops.iter().find(|o| {
        o.status != "DONE" && operation_target(o, K::COLLECTION) == Some(a.id.name.as_str())
    });
    crate::kind::judge_conflict(
        a,
        "insert",
        running.map(|o| (o.name.as_str(), o.operation_type.as_str())),
        live,
        K::ownership_of(want).as_ref(),
    )?;
    if let Some(op) = running {
        cloud.compute.wait_operation(op, timeout).await?;
    }
    Ok(StepOutcome::Done)
}

#[async_trait]
impl<K: ComputeKind> KindExec for K {
    fn kind(&self) -> KindId {
        Kind::id(self)
    }

    fn observes(&self, scope: &Scope) -> bool {
        K::Place::of(scope).is_some()
    }

    async fn observe(&self, cloud: &Cloud, scope: &Scope) -> Result<Observed, CloudError> {
        let Some(place) = K::Place::of(scope) else {
            return Ok(Observed::default());
        };
        let (items, ops) =
            tokio::try_join!(K::list(cloud, place), K::list_operations(cloud, place))?;
        Ok(Observed::new(
            scope,
            items,
            operation_records(scope, &ops, K::COLLECTION),
        ))
    }

    async fn execute(
        &self,
        cloud: &Cloud,
        _sched: &crate::kind::Scheduler,
        a: &Action,
        op: StepOp,
    ) -> Result<StepOutcome, ApplyError> {
        let place = K::Place::of(&a.id.scope).ok_or_else(|| ApplyError::Scope(a.address()))?;
        let timeout = a.timeout.max(std::time::Duration::from_secs(1));
        let started = match op {
            // The executor drains, before the kind runs (crate::apply::drain).
            StepOp::Drain => return Ok(StepOutcome::Done),
            StepOp::WaitInFlight => place.operation(a.operation.as_deref().unwrap_or_default()),
            StepOp::Create => {
                let item = self.to_insert(a, crate::kind::desired_body::<K::Item>(a)?);
                let item = &*item;
                self.before_insert(cloud, a, item).await?;
                match K::insert(cloud, place, item).await {
                    Ok(op) => op,
                    Err(e) if e.is_already_exists() => {
                        return after_conflict::<K>(cloud, place, a, item, timeout).await;
                    }
                    Err(e) => return Err(e.into()),
                }
            }
            StepOp::Update => match self
                .update(cloud, place, a, crate::kind::desired_body::<K::Item>(a)?)
                .await?
            {
                Some(op) => op,
                None => return Ok(StepOutcome::Done),
            },
            // No compute kind has a cleanup step.
            StepOp::Cleanup => return Ok(StepOutcome::Done),
            StepOp::Guard => {
                return match guard::<K>(cloud, place, a).await? {
                    Some(gone) => Ok(gone),
                    None => Ok(StepOutcome::Done),
                };
            }
            StepOp::Delete => {
                // The stamp as it is now, not as the plan's view had it.
                if let Some(gone) = guard::<K>(cloud, place, a).await? {
                    return Ok(gone);
                }
                match K::delete(cloud, place, &a.id.name).await {
                    Ok(op) => op,
                    Err(e) if e.is_not_found() => return Ok(StepOutcome::AlreadyGone),
                    Err(e) => return Err(e.into()),
                }
            }
        };
        cloud.compute.wait_operation(&started, timeout).await?;
        Ok(StepOutcome::Done)
    }
}

/// Reads the resource's `preventDestroy` stamp as it is now, not as the
/// plan's view had it ([`crate::kind::refuse_protected`]): `Some` when it is
/// gone, an error when it is protected.
async fn guard<K: ComputeKind>(
    cloud: &Cloud,
    place: &K::Place,
    a: &Action,
) -> Result<Option<StepOutcome>, ApplyError> {
    match K::protection_now(cloud, place, &a.id.name).await? {
        None => Ok(None),
        Some(None) => Ok(Some(StepOutcome::AlreadyGone)),
        Some(Some(now)) => {
            crate::kind::refuse_protected(a, K::ownership_of(&now).as_ref())?;
            Ok(None)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(target: &str) -> compute::Operation {
        compute::Operation {
            name: "operation-1".into(),
            target_link: Some(target.into()),
            ..Default::default()
        }
    }

    #[test]
    fn an_operation_targets_a_name_of_its_own_collection_only() {
        let t =
            op("https://compute.googleapis.com/compute/v1/projects/p/global/instanceTemplates/t-0");
        assert_eq!(operation_target(&t, "instanceTemplates"), Some("t-0"));
        assert_eq!(operation_target(&t, "resourcePolicies"), None);
        // A collection whose name ends like another's is not it.
        let m = op("projects/p/zones/z/regionInstanceGroupManagers/m-0");
        assert_eq!(operation_target(&m, "instanceGroupManagers"), None);
        let m = op("projects/p/zones/z/instanceGroupManagers/m-0");
        assert_eq!(operation_target(&m, "instanceGroupManagers"), Some("m-0"));
        assert_eq!(operation_target(&compute::Operation::default(), "x"), None);
    }
}
