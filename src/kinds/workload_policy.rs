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

use crate::cloud::{Cloud, CloudError};
use crate::kind::body_as;
use crate::kind::hash::{self, HASH_VERSION, Projection, project};
use crate::kind::names;
use crate::kind::ownership::Ownership;
use crate::kind::{
    Body, Comparison, Desired, Kind, KindId, LiveState, RenderCtx, ResourceId, Scope, SliceRef,
};
use crate::kinds::compute_shell::{self, ComputeKind};
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

fn ownership_of(p: &ResourcePolicy) -> Option<Ownership> {
    crate::kinds::gce::link::held_ownership(p.held.as_ref(), || {
        Ownership::from_description_named(
            p.description.as_deref()?,
            &p.name,
            crate::spec::names::workload_policy,
        )
    })
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
            // The source stamp, as a pool's label and a MIG's description
            // carry it: another spec source never prunes it.
            target: Some(ctx.target.name.clone()),
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
        ownership_of(policy(live)?)
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

#[async_trait]
impl ComputeKind for WorkloadPolicies {
    type Place = RegionRef;
    type Item = ResourcePolicy;
    const COLLECTION: &'static str = "resourcePolicies";

    fn ownership_of(p: &ResourcePolicy) -> Option<Ownership> {
        ownership_of(p)
    }

    async fn list(cloud: &Cloud, r: &RegionRef) -> Result<Vec<ResourcePolicy>, CloudError> {
        cloud
            .compute
            .list_resource_policies(&r.project, &r.region)
            .await
    }

    /// Only the running ones.
    async fn list_operations(
        cloud: &Cloud,
        r: &RegionRef,
    ) -> Result<Vec<compute::Operation>, CloudError> {
        cloud
            .compute
            .list_region_operations(&r.project, &r.region, true)
            .await
    }

    async fn insert(
        cloud: &Cloud,
        r: &RegionRef,
        p: &ResourcePolicy,
    ) -> Result<compute::Operation, CloudError> {
        cloud
            .compute
            .insert_resource_policy(&r.project, &r.region, p)
            .await
    }

    async fn delete(
        cloud: &Cloud,
        r: &RegionRef,
        name: &str,
    ) -> Result<compute::Operation, CloudError> {
        cloud
            .compute
            .delete_resource_policy(&r.project, &r.region, name)
            .await
    }

    async fn find(
        cloud: &Cloud,
        r: &RegionRef,
        p: &ResourcePolicy,
    ) -> Result<Option<ResourcePolicy>, CloudError> {
        compute_shell::found(
            cloud
                .compute
                .get_resource_policy(&r.project, &r.region, &p.name)
                .await,
        )
    }
}
