//! The published JSON of a plan (`plan --output json`, format version 1).
//!
//! Made from the plan by view types that exist only for this output, so
//! renaming an internal type or field cannot change what is published.
//! Fields are only ever added within a format version.

use serde::Serialize;
use serde_json::Value;

use super::kind::Scope;
use super::{ActionKind, FORMAT_VERSION, Plan, PlanMode, Summary};

/// The whole plan.
#[derive(Debug, Serialize)]
pub struct PlanView<'a> {
    format_version: u32,
    observed_fingerprint: &'a str,
    mode: PlanMode,
    actions: Vec<ActionView<'a>>,
    unmanaged: &'a [Unmanaged],
    #[serde(skip_serializing_if = "<[Unmanaged]>::is_empty")]
    unjoined: &'a [Unmanaged],
    #[serde(skip_serializing_if = "<[Refusal]>::is_empty")]
    refused: &'a [Refusal],
    #[serde(skip_serializing_if = "<[super::workload::Held]>::is_empty")]
    held: &'a [super::workload::Held],
    #[serde(skip_serializing_if = "<[super::workload::Release]>::is_empty")]
    released: &'a [super::workload::Release],
    #[serde(skip_serializing_if = "<[super::Deferred]>::is_empty")]
    deferred: &'a [super::Deferred],
    #[serde(skip_serializing_if = "<[super::UnobservedTarget]>::is_empty")]
    unobserved: &'a [super::UnobservedTarget],
    #[serde(skip_serializing_if = "<[super::Undiscovered]>::is_empty")]
    undiscovered: &'a [super::Undiscovered],
    #[serde(skip_serializing_if = "<[Rename]>::is_empty")]
    renames: &'a [Rename],
    #[serde(skip_serializing_if = "WorkloadsView::is_empty")]
    workloads: WorkloadsView<'a>,
    #[serde(skip_serializing_if = "super::preflight::Preflight::is_empty")]
    preflight: &'a super::preflight::Preflight,
    summary: Summary,
}

/// The workload source's decisions in the plan JSON (`workloads`).
#[derive(Debug, Serialize)]
struct WorkloadsView<'a> {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    requested: Vec<RequestedView<'a>>,
    #[serde(skip_serializing_if = "<[crate::workload::Kept]>::is_empty")]
    kept: &'a [crate::workload::Kept],
    #[serde(skip_serializing_if = "<[crate::workload::Released]>::is_empty")]
    released: &'a [crate::workload::Released],
    #[serde(skip_serializing_if = "<[crate::workload::Refused]>::is_empty")]
    refused: &'a [crate::workload::Refused],
    #[serde(skip_serializing_if = "<[crate::workload::Skipped]>::is_empty")]
    skipped: &'a [crate::workload::Skipped],
}

impl WorkloadsView<'_> {
    fn is_empty(&self) -> bool {
        self.requested.is_empty()
            && self.kept.is_empty()
            && self.released.is_empty()
            && self.refused.is_empty()
            && self.skipped.is_empty()
    }
}

/// A slice a pending JobSet asks for.
#[derive(Debug, Serialize)]
struct RequestedView<'a> {
    slice: &'a str,
    node_pool: &'a str,
    target: &'a str,
    jobset: &'a crate::workload::Origin,
    accelerator: &'a str,
    topology: &'a str,
    capacity: &'static str,
}

#[derive(Debug, Serialize)]
struct ActionView<'a> {
    action: ActionKind,
    kind: &'static str,
    name: &'a str,
    address: String,
    slice: &'a str,
    replica: u32,
    scope: &'a Scope,
    reason: String,
    reason_code: &'static str,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    changes: Vec<ChangeView<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    before: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    after: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    operation: Option<&'a str>,
    timeout_secs: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    disruption: Option<&'a super::workload::Disrupting>,
}

#[derive(Debug, Serialize)]
struct ChangeView<'a> {
    path: &'a str,
    before: &'a Option<Value>,
    after: &'a Option<Value>,
    forces_replacement: bool,
}

/// A live resource that is not this reconciler's: shown, never touched.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Unmanaged {
    /// Kind.
    pub kind: &'static str,
    /// Name.
    pub name: String,
    /// Where.
    pub scope: Scope,
    /// Who seems to own it.
    pub note: String,
}

/// A change the plan refuses to make: shown with why and what to do, never
/// executed. The rest of the fleet still converges; `plan` and `apply` exit
/// non-zero while any refusal stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Refusal {
    /// Kind of the resource.
    pub kind: &'static str,
    /// Cloud resource name.
    pub name: String,
    /// `slice.NAME[REPLICA].KIND`.
    pub address: String,
    /// Slice name.
    pub slice: String,
    /// Replica index.
    pub replica: u32,
    /// Where the resource lives.
    pub scope: Scope,
    /// What slicectl would otherwise have done.
    pub action: ActionKind,
    /// Stable short code: `protected` (preventDestroy), `protected_live`
    /// (the live stamp still protects it; this apply lifts it),
    /// `name_taken` (a resource slicectl does not own has the name),
    /// `held_back` (another resource of the same slice replica is refused),
    /// `settling` (watch mode: held until the spec source has been
    /// unchanged for the settle period; planned again then).
    pub code: String,
    /// Why, and what to do.
    pub message: String,
}

/// A slice renamed in the specs: declared (`previousNames`, its resources
/// are taken over in place) or only likely (an old slice gone and a new one
/// of the same shape on the same Target: the creates of the new one run
/// before the deletes of the old one, which are skipped if a create fails).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Rename {
    /// The old slice name.
    pub from: String,
    /// The new slice name.
    pub to: String,
    /// Declared in `previousNames` (true) or detected (false).
    pub declared: bool,
    /// The Target of both.
    pub target: String,
    /// The addresses of the actions it affects.
    pub addresses: Vec<String>,
    /// What it means and what to do.
    pub message: String,
}

impl<'a> PlanView<'a> {
    /// The view of a plan.
    pub fn of(plan: &'a Plan) -> PlanView<'a> {
        PlanView {
            format_version: FORMAT_VERSION,
            observed_fingerprint: &plan.observed_fingerprint,
            mode: plan.mode,
            actions: plan
                .actions
                .iter()
                .map(|a| ActionView {
                    action: a.action,
                    kind: a.id.kind.as_str(),
                    name: &a.id.name,
                    address: a.address(),
                    slice: &a.owner.slice,
                    replica: a.owner.replica,
                    scope: &a.id.scope,
                    reason: a.reason_text(),
                    reason_code: a.reason.code(),
                    changes: a
                        .changes
                        .iter()
                        .map(|c| ChangeView {
                            path: &c.path,
                            before: &c.before,
                            after: &c.after,
                            forces_replacement: c.forces_replacement,
                        })
                        .collect(),
                    before: a.before.as_ref(),
                    after: a.desired.as_ref().map(|b| b.to_json()),
                    operation: a.operation.as_deref(),
                    timeout_secs: a.timeout.as_secs(),
                    disruption: a.disruption.as_ref(),
                })
                .collect(),
            unmanaged: &plan.unmanaged,
            unjoined: &plan.unjoined,
            refused: &plan.refused,
            held: &plan.held,
            released: &plan.released,
            deferred: &plan.deferred,
            unobserved: &plan.unobserved,
            undiscovered: &plan.undiscovered,
            renames: &plan.renames,
            preflight: &plan.preflight,
            workloads: WorkloadsView {
                requested: plan
                    .demand
                    .slices
                    .iter()
                    .filter_map(|s| {
                        Some(RequestedView {
                            slice: &s.name,
                            node_pool: s.spec.node_pool_name.as_deref().unwrap_or(&s.name),
                            target: &s.spec.target,
                            jobset: s.workload.as_ref()?,
                            accelerator: &s.spec.accelerator,
                            topology: &s.shape.topology,
                            capacity: s.spec.capacity.kind.as_str(),
                        })
                    })
                    .collect(),
                kept: &plan.demand.kept,
                released: &plan.demand.released,
                refused: &plan.demand.refused,
                skipped: &plan.demand.skipped,
            },
            summary: plan.count(),
        }
    }
}

/// The part of a published plan that decides what is executed: its mode,
/// actions (with their bodies) and refusals.
pub fn effect(published: &Value) -> Value {
    serde_json::json!({
        "mode": published.get("mode"),
        "actions": published.get("actions"),
        "refused": published.get("refused"),
        "held": published.get("held"),
        "released": published.get("released"),
    })
}
