//! The compute workload policy kind: a `HIGH_THROUGHPUT` resource policy
//! with an `acceleratorTopology`, one per tpu7x multi-host slice replica,
//! which its node pool names in `placementPolicy.policyName`.
//!
//! Resource policies have no labels, so ownership is written into the
//! description. Policies are immutable: every field forces replacement, and
//! they carry no `preventDestroy` stamp. A policy is protected by its slice's
//! spec (`preventDestroy` refuses its replacement like its pool's), and
//! through its slice replica: it is never replaced or deleted while the
//! replacement or deletion of its node pool is refused (the planner's
//! `held_back`), which covers a slice deleted from the specs.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;

use crate::apply::{ApplyError, KindExec, Observed, StepOp, StepOutcome, judge_conflict};
use crate::cloud::{Cloud, CloudError};
use crate::plan::hash::{self, HASH_VERSION, Projection, project};
use crate::plan::kind::body_as;
use crate::plan::names;
use crate::plan::ownership::Ownership;
use crate::plan::{
    Action, Body, Comparison, Desired, Kind, KindId, LiveState, RenderCtx, ResourceId, Scope,
    SliceRef,
};
use crate::resource::RegionRef;
use crate::resource::compute::{self, ResourcePolicy, WorkloadPolicy};
use crate::spec::catalog::Placement;

/// The kind's name.
pub const KIND: KindId = KindId("workload_policy");

/// Workload policy fields that force replacement (policies are immutable).
pub const REPLACEMENT_FIELDS: &[&str] = &["workloadPolicy"];

/// The workload policy kind.
#[derive(Debug, Clone, Copy)]
pub struct WorkloadPolicies;

fn policy(b: &Body) -> Option<&ResourcePolicy> {
    body_as::<ResourcePolicy>(b)
}

/// Replacement-class projection of a workload policy.
pub fn projection(p: &ResourcePolicy) -> Projection {
    let v = serde_json::to_value(p).unwrap_or(Value::Null);
    let mut out = project(&v, REPLACEMENT_FIELDS);
    // AUTO_CONNECT is the server default of acceleratorTopologyMode.
    if out.get("workloadPolicy.acceleratorTopologyMode") == Some(&Value::from("AUTO_CONNECT")) {
        out.remove("workloadPolicy.acceleratorTopologyMode");
    }
    out
}

/// The resource policy name a compute operation targets.
pub fn operation_target(op: &compute::Operation) -> Option<&str> {
    let link = op.target_link.as_deref()?;
    let (head, name) = link.rsplit_once('/')?;
    head.ends_with("/resourcePolicies").then_some(name)
}

impl Kind for WorkloadPolicies {
    /// Both backends: a tpu7x GKE slice's policy and a multi-host GCE
    /// slice's live in the Target zone's region.
    fn scopes(&self, t: &crate::spec::Target) -> Vec<Scope> {
        vec![Scope::Region(crate::resource::RegionRef {
            project: t.spec.project.clone(),
            region: crate::spec::validate::region_of(&t.spec.zone).to_string(),
        })]
    }

    /// The topology first: what a person edits.
    fn replacement_rank(&self, path: &str) -> usize {
        usize::from(!path.starts_with("workloadPolicy.acceleratorTopology"))
    }

    fn id(&self) -> KindId {
        KIND
    }

    fn noun(&self) -> &'static str {
        "workload policy"
    }

    fn lists_unmanaged(&self) -> bool {
        false // regions hold many unrelated policies
    }

    fn render(&self, ctx: RenderCtx<'_>) -> Vec<Desired> {
        // A `gce` slice's policy (any multi-host slice) comes from its render.
        if let Some(r) =
            crate::kinds::gce::render::render(ctx.target, &ctx.stem_slice(), ctx.replica)
        {
            return r
                .policy
                .map(|p| ctx.desired(KIND, Scope::Region(r.region), p.name.clone(), p))
                .into_iter()
                .collect();
        }
        if ctx.slice.spec.backend != crate::spec::model::Backend::Gke {
            return Vec::new();
        }
        let Placement::WorkloadPolicy { topology } = &ctx.slice.shape.placement else {
            return Vec::new();
        };
        let t = &ctx.target.spec;
        let region = RegionRef {
            project: t.project.clone(),
            region: crate::spec::validate::region_of(&t.zone).to_string(),
        };
        // Its ownership is in its immutable description: an adopted policy
        // keeps the name it was created under (`ctx.stem`).
        let mut p = ResourcePolicy {
            name: names::workload_policy(ctx.stem, ctx.replica),
            region: Some(region.region.clone()),
            workload_policy: Some(WorkloadPolicy {
                kind: "HIGH_THROUGHPUT".to_string(),
                accelerator_topology: Some(topology.clone()),
                accelerator_topology_mode: None,
            }),
            ..Default::default()
        };
        let own = Ownership {
            owner: t.owner_id.clone(),
            slice: ctx.stem.to_string(),
            replica: ctx.replica,
            target: None,
            spec_hash: Some(hash::spec_hash(&projection(&p))),
            hash_version: Some(HASH_VERSION.to_string()),
            prevent_destroy: false,
        };
        p.description = Some(own.to_description());
        vec![Desired {
            id: ResourceId {
                scope: Scope::Region(region),
                kind: KIND,
                name: p.name.clone(),
            },
            owner: SliceRef {
                slice: ctx.slice.name.clone(),
                replica: ctx.replica,
            },
            owner_id: t.owner_id.clone(),
            body: Arc::new(p),
            prevent_destroy: ctx.slice.spec.lifecycle.prevent_destroy,
            timeout: ctx.slice.operation_timeout,
        }]
    }

    fn name(&self, live: &Body) -> String {
        policy(live).map(|p| p.name.clone()).unwrap_or_default()
    }

    fn ownership(&self, live: &Body) -> Option<Ownership> {
        let p = policy(live)?;
        Ownership::from_description_named(
            p.description.as_deref()?,
            &p.name,
            crate::spec::names::workload_policy,
        )
    }

    fn state(&self, live: &Body) -> LiveState {
        match policy(live).and_then(|p| p.status.as_deref()) {
            Some("DELETING") => LiveState::Stopping,
            Some(s @ ("INVALID" | "EXPIRED")) => LiveState::Error {
                status: s.to_string(),
                detail: String::new(),
            },
            _ => LiveState::Ok,
        }
    }

    fn compare(&self, desired: &Desired, live: &Body) -> Comparison {
        let (Some(d), Some(l)) = (policy(&desired.body), policy(live)) else {
            return Comparison::Equal;
        };
        let want = projection(d);
        let changes = hash::diff(&projection(l), &want, true);
        if hash::stale(
            self.ownership(live).as_ref(),
            &hash::spec_hash(&want),
            &changes,
        ) {
            let hash_only = changes.is_empty();
            Comparison::Replace { changes, hash_only }
        } else {
            Comparison::Equal
        }
    }

    fn display_live(&self, live: &Body, _desired: Option<&Desired>) -> Value {
        // As it would be sent: output-only fields dropped, the region back to
        // its short name, and the server default of the topology mode gone.
        let Some(p) = policy(live) else {
            return Value::Null;
        };
        let mut shown = ResourcePolicy {
            name: p.name.clone(),
            description: p.description.clone(),
            region: p
                .region
                .as_deref()
                .map(|r| r.rsplit('/').next().unwrap_or(r).to_string()),
            workload_policy: p.workload_policy.clone(),
            ..Default::default()
        };
        if let Some(w) = shown.workload_policy.as_mut()
            && w.accelerator_topology_mode.as_deref() == Some("AUTO_CONNECT")
        {
            w.accelerator_topology_mode = None;
        }
        serde_json::to_value(&shown).unwrap_or(Value::Null)
    }

    fn parse(&self, json: Value) -> Result<Body, String> {
        serde_json::from_value::<ResourcePolicy>(json)
            .map(|p| Arc::new(p) as Body)
            .map_err(|e| e.to_string())
    }

    fn fingerprint_view(&self, live: &Body) -> Value {
        let Some(p) = policy(live) else {
            return Value::Null;
        };
        serde_json::json!({
            "name": p.name,
            "description": p.description,
            "status": p.status,
            "workloadPolicy": p.workload_policy,
        })
    }
}

fn region_of(a: &Action) -> Result<&RegionRef, ApplyError> {
    match &a.id.scope {
        Scope::Region(r) => Ok(r),
        _ => Err(ApplyError::Scope(a.address())),
    }
}

/// After an insert answered 409: `Some(op)` when the policy is ours and
/// still being inserted, `None` when it is ours and there; else an error.
async fn resolve_conflict(
    cloud: &Cloud,
    a: &Action,
    r: &RegionRef,
    want: &ResourcePolicy,
) -> Result<Option<compute::Operation>, ApplyError> {
    let running = cloud
        .compute
        .list_region_operations(&r.project, &r.region, true)
        .await?
        .into_iter()
        .find(|o| operation_target(o) == Some(a.id.name.as_str()));
    let live = match cloud
        .compute
        .get_resource_policy(&r.project, &r.region, &a.id.name)
        .await
    {
        Ok(p) => Some(p),
        Err(e) if e.is_not_found() => None,
        Err(e) => return Err(e.into()),
    };
    let own = |p: &ResourcePolicy| {
        Ownership::from_description_named(
            p.description.as_deref()?,
            &p.name,
            crate::spec::names::workload_policy,
        )
    };
    judge_conflict(
        a,
        "insert",
        running
            .as_ref()
            .map(|o| (o.name.as_str(), o.operation_type.as_str())),
        live.as_ref().map(own),
        own(want).as_ref(),
    )?;
    Ok(running)
}

fn region_operation(r: &RegionRef, name: &str) -> compute::Operation {
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

#[async_trait]
impl KindExec for WorkloadPolicies {
    fn kind(&self) -> KindId {
        KIND
    }

    fn observes(&self, scope: &Scope) -> bool {
        matches!(scope, Scope::Region(_))
    }

    async fn observe(&self, cloud: &Cloud, scope: &Scope) -> Result<Observed, CloudError> {
        let Scope::Region(r) = scope else {
            return Ok(Observed::default());
        };
        let (policies, ops) = tokio::try_join!(
            cloud.compute.list_resource_policies(&r.project, &r.region),
            cloud
                .compute
                .list_region_operations(&r.project, &r.region, true)
        )?;
        Ok(Observed::new(
            scope,
            policies,
            crate::kinds::compute_operation_records(scope, &ops, operation_target),
        ))
    }

    async fn execute(
        &self,
        cloud: &Cloud,
        _sched: &crate::apply::schedule::Scheduler,
        a: &Action,
        op: StepOp,
    ) -> Result<StepOutcome, ApplyError> {
        let r = region_of(a)?;
        let timeout = a.timeout.max(std::time::Duration::from_secs(1));
        let started = match op {
            StepOp::WaitInFlight => region_operation(r, a.operation.as_deref().unwrap_or_default()),
            StepOp::Create => {
                let p = a
                    .desired
                    .as_ref()
                    .and_then(body_as::<ResourcePolicy>)
                    .ok_or_else(|| ApplyError::Body(a.address()))?;
                match cloud
                    .compute
                    .insert_resource_policy(&r.project, &r.region, p)
                    .await
                {
                    Ok(op) => op,
                    Err(e) if e.is_already_exists() => {
                        match resolve_conflict(cloud, a, r, p).await? {
                            Some(op) => op,
                            None => return Ok(StepOutcome::Done),
                        }
                    }
                    Err(e) => return Err(e.into()),
                }
            }
            // Immutable: the planner never plans an update of a policy; and
            // policies have no cleanup step.
            StepOp::Update | StepOp::Cleanup => return Ok(StepOutcome::Done),
            StepOp::Delete => match cloud
                .compute
                .delete_resource_policy(&r.project, &r.region, &a.id.name)
                .await
            {
                Ok(op) => op,
                Err(e) if e.is_not_found() => return Ok(StepOutcome::AlreadyGone),
                Err(e) => return Err(e.into()),
            },
        };
        cloud.compute.wait_operation(&started, timeout).await?;
        Ok(StepOutcome::Done)
    }
}
