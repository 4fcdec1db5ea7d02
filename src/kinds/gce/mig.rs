//! The managed instance group kind: one zonal MIG per `gce` slice replica,
//! `targetSize` = hosts, `targetSizePolicy.mode` BULK (all VMs or none) for
//! reservation-bound and flex-start slices, INDIVIDUAL for on-demand and spot
//! ones (`render::target_size_mode`),
//! the workload policy attached for multi-host slices. Its selective hash
//! chains its template's and policy's, so any change of those replaces the
//! slice replica. Ownership lives in the description (MIGs have no labels),
//! and so does the `preventDestroy` stamp (`prevent-destroy=true|false`):
//! the one thing updated in place, by `instanceGroupManagers.patch` with
//! the group's current fingerprint, whenever it differs from the spec.

use std::collections::BTreeSet;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;

use super::render::{self, mig_projection};
use crate::cloud::{Cloud, CloudError};
use crate::kind::ApplyError;
use crate::kind::hash::{self, FieldChange};
use crate::kind::ownership::{self, Ownership};
use crate::kind::{
    Action, Body, Comparison, Desired, Kind, KindId, LiveState, RenderCtx, Scope, UpdateGroup,
};
use crate::kind::{LiveReport, body_as};
use crate::kinds::compute_shell::ComputeKind;
use crate::resource::ZoneRef;
use crate::resource::compute::{self, InstanceGroupManager, InstanceGroupManagerPatch};

/// The kind's name.
pub const KIND: KindId = KindId("mig");

/// Patch the description (the `preventDestroy` stamp) in place.
pub const GROUP_DESCRIPTION: UpdateGroup = UpdateGroup("description");

/// The MIG kind.
#[derive(Debug, Clone, Copy)]
pub struct Migs;

/// The protection stamp a MIG's description records: `None` for a MIG made
/// before slicectl stamped MIGs (or not slicectl's).
pub fn recorded_stamp(m: &InstanceGroupManager) -> Option<bool> {
    m.description
        .as_deref()
        .and_then(ownership::description_stamp)
}

/// The field change of a MIG's stamp, `before` (`None`: never recorded)
/// to `after`.
fn stamp_change(before: Option<bool>, after: bool) -> FieldChange {
    FieldChange {
        path: "description.prevent-destroy".into(),
        before: before.map(|b| Value::from(b.to_string())),
        after: Some(Value::from(after.to_string())),
        forces_replacement: false,
    }
}

fn mig(b: &Body) -> Option<&InstanceGroupManager> {
    body_as::<InstanceGroupManager>(b)
}

fn ownership_of(m: &InstanceGroupManager) -> Option<Ownership> {
    described_ownership(m.description.as_deref()?, &m.name)
}

/// The ownership a MIG named `name` records in its `description`: a
/// slicectl description that names the slice replica whose MIG name
/// (`<slice>-<replica>`) the MIG has, or (a MIG slicectl adopted, or made
/// under a slice's `gce.migName`) one with the adoption marker, whatever
/// its name: a MIG cannot be renamed in place, so an adopted one keeps the
/// name another tool gave it.
pub fn described_ownership(description: &str, name: &str) -> Option<Ownership> {
    Ownership::from_description(description).filter(|o| {
        crate::spec::names::mig(&o.slice, o.replica) == name
            || ownership::description_adopted(description)
    })
}

/// Checks a template the spec brings (`gce.instanceTemplate`) the way
/// tpu-operator's `ValidateExternalInstanceTemplate` does (tpu-anchors
/// §B.4): a TPU machine type, scheduling set, a provisioning model slicectl
/// knows and BULK mode takes (reservation-bound or flex-start: the MIG of a
/// brought template is BULK), `onHostMaintenance: TERMINATE`, and the
/// termination action that fits the model (DELETE for reservation-bound and
/// flex-start, STOP for spot). Returns every problem.
pub fn check_brought_template(t: &compute::InstanceTemplate) -> Vec<String> {
    let mut out = Vec::new();
    let p = &t.properties;
    if !["tpu7x-", "tpu7-", "ct6e-", "ct5p-"]
        .iter()
        .any(|pre| p.machine_type.starts_with(pre))
    {
        out.push(format!(
            "machineType {:?} is not a TPU machine type Compute Engine runs in MIGs (tpu7x-*, ct6e-*, ct5p-*)",
            p.machine_type
        ));
    }
    let Some(s) = p.scheduling.as_ref() else {
        out.push("it sets no scheduling (onHostMaintenance must be TERMINATE)".into());
        return out;
    };
    let model = s.provisioning_model.as_deref().unwrap_or("STANDARD");
    if !["STANDARD", "SPOT", "RESERVATION_BOUND", "FLEX_START"].contains(&model) {
        out.push(format!(
            "provisioningModel {model:?} is not STANDARD, SPOT, RESERVATION_BOUND or FLEX_START"
        ));
    }
    // A brought template's MIG is BULK (`render::target_size_mode`), which
    // Compute Engine takes only with these two models (Compute Engine,
    // *Create a MIG that uses the bulk mode*).
    if ["STANDARD", "SPOT"].contains(&model) {
        out.push(format!(
            "provisioningModel {model} cannot run in a BULK MIG: Compute Engine's bulk mode (all VMs \
             or none) takes only RESERVATION_BOUND or FLEX_START templates; for on-demand or spot \
             capacity remove gce.instanceTemplate and set `capacity`, and slicectl renders the \
             template and runs the MIG in INDIVIDUAL mode"
        ));
    }
    if s.on_host_maintenance.as_deref() != Some("TERMINATE") {
        out.push(format!(
            "onHostMaintenance is {:?}; TPU VMs cannot live-migrate, it must be TERMINATE",
            s.on_host_maintenance
                .as_deref()
                .unwrap_or("unset (MIGRATE)")
        ));
    }
    let action = s.instance_termination_action.as_deref();
    let want = match model {
        "SPOT" => Some("STOP"),
        "RESERVATION_BOUND" | "FLEX_START" => Some("DELETE"),
        _ => None,
    };
    if let Some(w) = want
        && action != Some(w)
    {
        out.push(format!(
            "instanceTerminationAction is {:?}; with {model} it must be {w}",
            action.unwrap_or("unset")
        ));
    }
    out
}

/// How many of the MIG's VMs are RUNNING (`status.currentInstanceStatuses`).
pub fn running_vms(m: &InstanceGroupManager) -> u32 {
    m.status
        .as_ref()
        .and_then(|s| s.current_instance_statuses.as_ref())
        .and_then(|c| c.running)
        .and_then(|n| u32::try_from(n).ok())
        .unwrap_or(0)
}

/// Why a MIG's slice replica is known not to become ready as it stands:
/// VMs it has not created (fewer RUNNING than its target, not stable) and
/// the error reported for them ([`creation_error`]: the bulk operation's
/// last check, or the `listErrors` item observation read for an
/// INDIVIDUAL MIG). `stockout` for a capacity error.
pub fn not_ready(m: &InstanceGroupManager) -> Option<crate::kind::NotReady> {
    let stable = m.status.as_ref().is_some_and(|s| s.is_stable);
    let target = u32::try_from(m.target_size).unwrap_or(0);
    if stable || running_vms(m) >= target {
        return None;
    }
    let message = creation_error(m)?;
    Some(crate::kind::NotReady {
        code: crate::kind::NotReady::code_of(&message, "mig_error"),
        message: format!(
            "{message} (VMs {}/{target} running; the MIG keeps retrying)",
            running_vms(m)
        ),
    })
}

/// The MIG's last creation error (`CODE: message`), if any: the bulk
/// operation's last check (BULK), else what observation read from its
/// `listErrors` (INDIVIDUAL, [`with_list_error`]).
pub fn creation_error(m: &InstanceGroupManager) -> Option<String> {
    let bulk = m
        .status
        .as_ref()
        .and_then(|s| s.bulk_instance_operation.as_ref())
        .and_then(|b| b.last_progress_check.as_ref())
        .and_then(|c| c.error.as_ref())
        .and_then(|e| e.errors.first())
        .map(|e| format!("{}: {}", e.code, e.message));
    bulk.or_else(|| {
        m.list_error
            .as_ref()
            .map(|e| format!("{}: {}", e.code, e.message))
    })
}

/// Whether observation reads a MIG's `listErrors`: it is not stable, runs
/// fewer VMs than its target, and its status gives no reason (an
/// INDIVIDUAL MIG's stockout is only per VM and in `listErrors`). A steady
/// fleet has no such MIG, so observing it stays one list per zone.
fn needs_list_errors(m: &InstanceGroupManager) -> bool {
    let stable = m.status.as_ref().is_none_or(|s| s.is_stable);
    let target = u32::try_from(m.target_size).unwrap_or(0);
    !stable && running_vms(m) < target && creation_error(m).is_none()
}

/// The MIG with [`InstanceGroupManager::list_error`] read from its
/// `listErrors` when [`needs_list_errors`] (and it is slicectl's).
async fn with_list_error(
    cloud: &Cloud,
    z: &ZoneRef,
    mut m: InstanceGroupManager,
) -> Result<InstanceGroupManager, CloudError> {
    if !needs_list_errors(&m) || ownership_of(&m).is_none() {
        return Ok(m);
    }
    let mut errors = match cloud.compute.list_mig_errors(z, &m.name).await {
        Ok(e) => e,
        // Deleted between the list and this read: as listed.
        Err(e) if e.is_not_found() => return Ok(m),
        Err(e) => return Err(e),
    };
    errors.sort_by(|a, b| b.timestamp.cmp(&a.timestamp));
    m.list_error = errors
        .into_iter()
        .find(|e| {
            e.instance_action_details
                .as_ref()
                .is_none_or(|d| d.action == "CREATING")
        })
        .map(|e| e.error);
    Ok(m)
}

fn shown(m: &InstanceGroupManager) -> Value {
    let mut v = serde_json::to_value(InstanceGroupManager {
        name: m.name.clone(),
        description: m.description.clone(),
        base_instance_name: m.base_instance_name.clone(),
        instance_template: m.instance_template.clone(),
        target_size: m.target_size,
        target_size_policy: m.target_size_policy.clone(),
        resource_policies: m.resource_policies.clone(),
        ..Default::default()
    })
    .unwrap_or(Value::Null);
    // Links as partial URLs, as they were sent.
    for key in ["instanceTemplate"] {
        if let Some(s) = v[key].as_str()
            && let Some(i) = s.find("projects/")
        {
            v[key] = Value::from(&s[i..]);
        }
    }
    if let Some(s) = v
        .pointer("/resourcePolicies/workloadPolicy")
        .and_then(Value::as_str)
        && let Some(i) = s.find("projects/")
    {
        v["resourcePolicies"]["workloadPolicy"] = Value::from(&s[i..]);
    }
    v
}

impl Kind for Migs {
    fn scopes(&self, t: &crate::spec::Target) -> Vec<Scope> {
        t.spec
            .gce
            .as_ref()
            .map(|_| {
                Scope::Zone(crate::resource::ZoneRef {
                    project: t.spec.project.clone(),
                    zone: t.spec.zone.clone(),
                })
            })
            .into_iter()
            .collect()
    }

    fn id(&self) -> KindId {
        KIND
    }

    fn noun(&self) -> &'static str {
        "managed instance group"
    }

    fn depends_on(&self) -> &'static [KindId] {
        &[super::template::KIND, crate::kinds::workload_policy::KIND]
    }

    fn is_primary(&self) -> bool {
        true
    }

    fn uses(&self, desired: &Body, id: &crate::kind::ResourceId) -> bool {
        let Some(m) = body_as::<InstanceGroupManager>(desired) else {
            return true;
        };
        let ends = |link: Option<&str>, collection: &str| {
            link.is_some_and(|l| l.ends_with(&format!("/{collection}/{}", id.name)))
        };
        if id.kind == super::template::KIND {
            ends(m.instance_template.as_deref(), "instanceTemplates")
        } else if id.kind == crate::kinds::workload_policy::KIND {
            ends(
                m.resource_policies
                    .as_ref()
                    .and_then(|r| r.workload_policy.as_deref()),
                "resourcePolicies",
            )
        } else {
            true
        }
    }

    fn render(&self, ctx: RenderCtx<'_>) -> Vec<Desired> {
        let Some(r) = render::render(ctx.target, &ctx.stem_slice(), ctx.replica) else {
            return Vec::new();
        };
        vec![ctx.desired(KIND, Scope::Zone(r.zone), r.mig.name.clone(), r.mig)]
    }

    fn name(&self, live: &Body) -> String {
        mig(live).map(|m| m.name.clone()).unwrap_or_default()
    }

    fn ownership(&self, live: &Body) -> Option<Ownership> {
        ownership_of(mig(live)?)
    }

    fn state(&self, _live: &Body) -> LiveState {
        // A MIG in a stockout is not broken: it keeps retrying (BULK: all
        // or none). The Nodes step reports it and fails the apply.
        LiveState::Ok
    }

    fn compare(&self, desired: &Desired, live: &Body) -> Comparison {
        let (Some(d), Some(l)) = (mig(&desired.body), mig(live)) else {
            return Comparison::Equal;
        };
        let want_hash = ownership_of(d)
            .and_then(|o| o.spec_hash)
            .unwrap_or_default();
        let changes = hash::diff(&mig_projection(l), &mig_projection(d), true);
        if hash::stale(ownership_of(l).as_ref(), &want_hash, &changes) {
            let hash_only = changes.is_empty();
            return Comparison::Replace { changes, hash_only };
        }
        // The stamp follows the spec in place; a MIG that has none yet
        // (made before MIGs were stamped) gets it, so every MIG soon says
        // whether it is protected.
        let mut changes = Vec::new();
        if let Some(want) = recorded_stamp(d).filter(|w| recorded_stamp(l) != Some(*w)) {
            changes.push(stamp_change(recorded_stamp(l), want));
        }
        // The Target stamp follows a declared Target rename in place; a MIG
        // made before the stamp existed gets it with its next patch.
        let target = |m: &InstanceGroupManager| ownership_of(m).and_then(|o| o.target);
        if let (Some(have), Some(want)) = (target(l), target(d))
            && have != want
        {
            changes.push(FieldChange {
                path: "description.target".into(),
                before: Some(Value::from(have)),
                after: Some(Value::from(want)),
                forces_replacement: false,
            });
        }
        if changes.is_empty() {
            Comparison::Equal
        } else {
            Comparison::Update {
                changes,
                groups: BTreeSet::from([GROUP_DESCRIPTION]),
            }
        }
    }

    fn adoptable(
        &self,
        live: &Body,
        target: &crate::spec::Target,
    ) -> Option<crate::kind::Adoptable> {
        super::adopt::adoptable(mig(live)?, target)
    }

    /// Released: the description no longer slicectl's. What the MIG uses
    /// (its template and policy) follows it ([`super::link`]).
    fn unlabel(&self, live: &Body) -> Option<(Body, Comparison)> {
        let l = mig(live)?;
        let o = ownership_of(l)?;
        let released = InstanceGroupManager {
            description: Some(super::adopt::released_description(&o)),
            linked: None,
            ..l.clone()
        };
        Some((
            Arc::new(released) as Body,
            Comparison::Update {
                changes: vec![FieldChange {
                    path: "description".into(),
                    before: l.description.clone().map(Value::from),
                    after: Some(Value::from(super::adopt::released_description(&o))),
                    forces_replacement: false,
                }],
                groups: BTreeSet::from([GROUP_DESCRIPTION]),
            },
        ))
    }

    fn lift_protection(&self, desired: &Desired, live: &Body) -> Option<(Body, Comparison)> {
        let (Some(_), Some(l)) = (mig(&desired.body), mig(live)) else {
            return None;
        };
        // Lift the stamp only: the live group as it is (its recorded hash
        // kept), its description saying `prevent-destroy=false`.
        let description = ownership::with_description_stamp(l.description.as_deref()?, false);
        let lifted = InstanceGroupManager {
            name: l.name.clone(),
            description: Some(description),
            base_instance_name: l.base_instance_name.clone(),
            instance_template: l.instance_template.clone(),
            target_size: l.target_size,
            target_size_policy: l.target_size_policy.clone(),
            resource_policies: l.resource_policies.clone(),
            ..Default::default()
        };
        Some((
            Arc::new(lifted) as Body,
            Comparison::Update {
                changes: vec![stamp_change(recorded_stamp(l), false)],
                groups: BTreeSet::from([GROUP_DESCRIPTION]),
            },
        ))
    }

    fn display_live(&self, live: &Body, _desired: Option<&Desired>) -> Value {
        mig(live).map(shown).unwrap_or(Value::Null)
    }

    /// A MIG's Nodes: in its Target's cluster, carrying the slice
    /// replica's ownership labels (registered with them through
    /// `kube-labels`), and the Nodes of its own VMs: their providerID
    /// names the MIG's project and zone (`gce://PROJECT/ZONE/INSTANCE`).
    /// The labels alone name the slice replica, which after a zone move has
    /// a MIG in each zone: the old one's drain must not touch the new one's.
    fn hosts(
        &self,
        id: &crate::kind::ResourceId,
        own: &Ownership,
        kube: Option<&crate::resource::KubeRef>,
    ) -> Option<crate::kind::Hosts> {
        Some(crate::kind::Hosts {
            kube: kube.cloned(),
            selector: [
                (ownership::OWNER.to_owned(), own.owner.clone()),
                (ownership::SLICE.to_owned(), own.slice.clone()),
                (ownership::REPLICA.to_owned(), own.replica.to_string()),
            ]
            .into_iter()
            .collect(),
            provider_id_prefix: match &id.scope {
                Scope::Zone(z) => Some(format!("gce://{}/{}/", z.project, z.zone)),
                _ => None,
            },
        })
    }

    fn parse(&self, json: Value) -> Result<Body, String> {
        serde_json::from_value::<InstanceGroupManager>(json)
            .map(|m| Arc::new(m) as Body)
            .map_err(|e| e.to_string())
    }

    fn protection_unrecorded(&self, live: &Body) -> bool {
        mig(live).is_some_and(|m| recorded_stamp(m).is_none())
    }

    fn running_hosts(&self, live: &Body) -> Option<u32> {
        mig(live).map(running_vms)
    }

    fn not_ready(&self, live: &Body) -> Option<crate::kind::NotReady> {
        not_ready(mig(live)?)
    }

    fn report(&self, live: &Body, hosts: u32) -> LiveReport {
        let Some(m) = mig(live) else {
            return LiveReport::default();
        };
        let running = running_vms(m);
        let stable = m.status.as_ref().is_some_and(|s| s.is_stable);
        let error = creation_error(m).unwrap_or_default();
        let state = match (stable, error.is_empty()) {
            (true, _) => "STABLE",
            (false, false) => "RETRYING",
            (false, true) => "CREATING",
        };
        LiveReport {
            state: format!("MIG {state}, VMs {running}/{hosts}"),
            nodes: String::new(),
            error,
            topology: String::new(),
        }
    }

    fn fingerprint_view(&self, live: &Body) -> Value {
        mig(live).map(shown).unwrap_or(Value::Null)
    }
}

#[async_trait]
impl ComputeKind for Migs {
    type Place = ZoneRef;
    type Item = InstanceGroupManager;
    const COLLECTION: &'static str = "instanceGroupManagers";

    fn ownership_of(m: &InstanceGroupManager) -> Option<Ownership> {
        ownership_of(m)
    }

    /// The zone's MIGs, each not-stable one short of VMs with its
    /// `listErrors` reason ([`with_list_error`]).
    async fn list(cloud: &Cloud, z: &ZoneRef) -> Result<Vec<InstanceGroupManager>, CloudError> {
        let migs = cloud.compute.list_instance_group_managers(z).await?;
        futures::future::try_join_all(migs.into_iter().map(|m| with_list_error(cloud, z, m))).await
    }

    async fn list_operations(
        cloud: &Cloud,
        z: &ZoneRef,
    ) -> Result<Vec<compute::Operation>, CloudError> {
        cloud.compute.list_zone_operations(z).await
    }

    async fn insert(
        cloud: &Cloud,
        z: &ZoneRef,
        m: &InstanceGroupManager,
    ) -> Result<compute::Operation, CloudError> {
        cloud.compute.insert_instance_group_manager(z, m).await
    }

    async fn delete(
        cloud: &Cloud,
        z: &ZoneRef,
        name: &str,
    ) -> Result<compute::Operation, CloudError> {
        cloud.compute.delete_instance_group_manager(z, name).await
    }

    /// One GET: a MIG carries the `preventDestroy` stamp.
    async fn protection_now(
        cloud: &Cloud,
        z: &ZoneRef,
        name: &str,
    ) -> Result<Option<Option<InstanceGroupManager>>, CloudError> {
        crate::kinds::compute_shell::found(cloud.compute.get_instance_group_manager(z, name).await)
            .map(Some)
    }

    /// By listing the zone's MIGs.
    async fn find(
        cloud: &Cloud,
        z: &ZoneRef,
        m: &InstanceGroupManager,
    ) -> Result<Option<InstanceGroupManager>, CloudError> {
        Ok(cloud
            .compute
            .list_instance_group_managers(z)
            .await?
            .into_iter()
            .find(|l| l.name == m.name))
    }

    /// The MIG replacing an adopted one keeps `adopted=true`: what the old
    /// one held by reference (a workload policy another tool made, which
    /// the new one still uses) stays the slice replica's (`super::link`).
    fn to_insert<'i>(
        &self,
        a: &Action,
        item: &'i InstanceGroupManager,
    ) -> std::borrow::Cow<'i, InstanceGroupManager> {
        let was_adopted = a.action == crate::kind::ActionKind::Replace
            && a.before
                .as_ref()
                .and_then(|b| b["description"].as_str())
                .is_some_and(ownership::description_adopted);
        match item.description.as_deref() {
            Some(d) if was_adopted && !ownership::description_adopted(d) => {
                std::borrow::Cow::Owned(InstanceGroupManager {
                    description: Some(ownership::with_adopted(d)),
                    ..item.clone()
                })
            }
            _ => std::borrow::Cow::Borrowed(item),
        }
    }

    /// A template the spec brings is checked before it is used.
    async fn before_insert(
        &self,
        cloud: &Cloud,
        a: &Action,
        m: &InstanceGroupManager,
    ) -> Result<(), ApplyError> {
        let rendered = ownership_of(m).map(|o| {
            format!(
                "/global/instanceTemplates/{}",
                crate::kind::names::instance_template(&o.slice, o.replica)
            )
        });
        let Some(link) = m.instance_template.as_deref() else {
            return Ok(());
        };
        if rendered.is_some_and(|r| link.ends_with(&r)) {
            return Ok(());
        }
        let t = match cloud.compute.get_instance_template(link).await {
            Ok(t) => t,
            Err(e) if e.is_not_found() => {
                return Err(ApplyError::Kind {
                    code: crate::kinds::gce::MISSING_TEMPLATE,
                    address: a.address(),
                    message: format!(
                        "instance template {link} (gce.instanceTemplate) does not exist: slicectl uses a \
                         template you bring as it is and never creates it. Create it first (`gcloud compute \
                         instance-templates create`; a BULK MIG needs provisioningModel RESERVATION_BOUND or \
                         FLEX_START and onHostMaintenance TERMINATE), or let slicectl render one (remove \
                         gce.instanceTemplate, set gce.image and gce.bootstrap). The simulator (--sim) \
                         starts with no template: see examples/gce-own-template/README.md"
                    ),
                });
            }
            Err(e) => return Err(e.into()),
        };
        let problems = check_brought_template(&t);
        if problems.is_empty() {
            return Ok(());
        }
        Err(ApplyError::Kind {
            code: crate::kinds::gce::INVALID_TEMPLATE,
            address: a.address(),
            message: format!(
                "instance template {link} cannot run a TPU slice: {}. Fix the template or let \
                 slicectl render one (remove gce.instanceTemplate, set gce.image and gce.bootstrap)",
                problems.join("; ")
            ),
        })
    }

    /// The protection (and Target) stamp in the description, patched.
    async fn update(
        &self,
        cloud: &Cloud,
        z: &ZoneRef,
        a: &Action,
        m: &InstanceGroupManager,
    ) -> Result<Option<compute::Operation>, ApplyError> {
        patch_description(cloud, z, a, m).await.map(Some)
    }
}

/// Patches the MIG's description to the one `m` carries (the stamp kept in
/// step), with the group's current fingerprint read just before; a 412
/// (someone changed the group in between) is retried once after a fresh
/// get. The group must still be this slice replica's.
async fn patch_description(
    cloud: &Cloud,
    z: &ZoneRef,
    a: &Action,
    m: &InstanceGroupManager,
) -> Result<compute::Operation, ApplyError> {
    // Adopting: the group is nobody's yet; releasing: it is the action's
    // slice replica's; else it must be the slice replica `m` names.
    let adopting = matches!(a.reason, crate::kind::Reason::Adopt { .. });
    let want = match a.reason {
        crate::kind::Reason::Release => Some((a.owner.slice.clone(), a.owner.replica)),
        _ => ownership_of(m).map(|o| (o.slice, o.replica)),
    };
    let mut retried = false;
    loop {
        let live = cloud
            .compute
            .get_instance_group_manager(z, &a.id.name)
            .await?;
        let held = ownership_of(&live).map(|o| (o.slice, o.replica));
        let ok = if adopting {
            held.is_none()
        } else {
            held.is_some() && held == want
        };
        if !ok {
            return Err(ApplyError::Conflict {
                address: a.address(),
                reason: format!(
                    "managed instance group {} is not what the plan saw (its description is {:?}); \
                     its description was not changed. Plan again",
                    a.id.name,
                    live.description.as_deref().unwrap_or_default()
                ),
            });
        }
        // The adoption marker is written on adoption and kept after.
        let marked = adopting
            || live
                .description
                .as_deref()
                .is_some_and(ownership::description_adopted);
        let description = match &m.description {
            Some(d) if marked && ownership_of(m).is_some() => {
                Some(super::adopt::adopted_description(d))
            }
            other => other.clone(),
        };
        let patch = InstanceGroupManagerPatch {
            description,
            fingerprint: live.fingerprint.clone(),
        };
        match cloud
            .compute
            .patch_instance_group_manager(z, &a.id.name, &patch)
            .await
        {
            Ok(op) => {
                tracing::info!(mig = %a.id.name, stamp = ?recorded_stamp(m), "patched the MIG's protection stamp");
                return Ok(op);
            }
            Err(e) if e.is_stale_fingerprint() && !retried => {
                tracing::debug!(mig = %a.id.name, "MIG fingerprint changed under the patch; reading it again");
                retried = true;
            }
            Err(e) => return Err(e.into()),
        }
    }
}
