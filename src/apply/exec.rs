//! The shell half of a resource kind: how its live resources are observed
//! and how its steps are executed, through the cloud seam
//! ([`crate::cloud::Cloud`]). Implemented once per kind under
//! `crate::kinds`, next to its pure half ([`crate::plan::Kind`]).

use async_trait::async_trait;

use super::{ApplyError, StepOutcome};
use crate::cloud::{Cloud, CloudError};
use std::sync::Arc;

use crate::plan::kind::Resource;
use crate::plan::{Action, Body, KindId, LiveResource, OperationRecord, Scope};

pub use super::steps::StepOp;

/// What one list of a kind in one scope found.
#[derive(Debug, Default)]
pub struct Observed {
    /// Live resources (managed or not).
    pub resources: Vec<LiveResource>,
    /// Operations on resources of this kind.
    pub operations: Vec<OperationRecord>,
}

impl Observed {
    /// The live `items` of one scope, with their operations.
    pub fn new<T: Resource>(
        scope: &Scope,
        items: Vec<T>,
        operations: Vec<OperationRecord>,
    ) -> Self {
        Observed::shared(scope, items.into_iter().map(Arc::new), operations)
    }

    /// [`Observed::new`] for bodies already in their `Arc`s (as node pools
    /// are decoded): each becomes a live body as it is, not copied. The
    /// list is built afresh, not in place of the items' own (whose
    /// capacity, sized for whole bodies, would outlive them).
    pub fn shared<T: Resource>(
        scope: &Scope,
        items: impl ExactSizeIterator<Item = Arc<T>>,
        operations: Vec<OperationRecord>,
    ) -> Self {
        let mut resources = Vec::with_capacity(items.len());
        resources.extend(items.map(|b| LiveResource {
            scope: scope.clone(),
            body: b as Body,
        }));
        Observed {
            resources,
            operations,
        }
    }
}

/// Both halves of a kind: what the engine hands to planning, observation
/// and execution (the registry, `crate::kinds::REGISTRY`, lists them).
pub trait RegisteredKind: crate::plan::Kind + KindExec {}

impl<T: crate::plan::Kind + KindExec> RegisteredKind for T {}

/// Observing and executing one kind.
#[async_trait]
pub trait KindExec: Send + Sync {
    /// The kind this executes.
    fn kind(&self) -> KindId;

    /// Whether resources of this kind live in scopes like `scope` (a node
    /// pool in a cluster, a policy in a region).
    fn observes(&self, scope: &Scope) -> bool;

    /// One list of the kind's resources (and their operations) in `scope`.
    async fn observe(&self, cloud: &Cloud, scope: &Scope) -> Result<Observed, CloudError>;

    /// Runs one step of an action on a resource of this kind. Writes go
    /// through `sched` where the cloud limits concurrency per scope.
    async fn execute(
        &self,
        cloud: &Cloud,
        sched: &super::schedule::Scheduler,
        action: &Action,
        op: StepOp,
    ) -> Result<StepOutcome, ApplyError>;
}
