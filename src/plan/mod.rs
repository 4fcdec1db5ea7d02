//! Planning: `desired × observed → plan`, a pure and deterministic function,
//! generic over the registered resource kinds ([`Kind`]).
//!
//! A plan is data: an ordered list of typed actions (create / update in
//! place / replace / delete / wait on an in-flight operation), each with a
//! typed [`Reason`] and field-level changes, plus the changes a safety rail
//! refuses. [`human`] renders it for people; [`view`] is the stable JSON of
//! `plan --output json`.

pub mod adopt;
mod build;
pub mod hash;
pub mod human;
pub mod inventory;
pub mod kind;
pub use crate::spec::names;
pub mod consent;
pub mod ownership;
pub mod preflight;
pub mod reason;
pub mod view;
pub mod workload;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

use crate::spec::Fleet;

pub use hash::FieldChange;
pub use inventory::Inventory;
pub use kind::{
    Body, Comparison, Desired, Kind, KindId, LiveResource, LiveState, NotReady, OperationRecord,
    RenderCtx, ResourceId, Scope, SliceRef, UpdateGroup,
};
use ownership::Ownership;
pub use reason::Reason;
pub use view::{Refusal, Rename, Unmanaged};

/// The refusal code of a step held until the spec source settles (watch
/// mode and the controller's `--dir` mode: `crate::cycle::settle`).
pub const SETTLING: &str = "settling";

/// Version of the plan JSON format (`plan --output json`, `plan --out`).
pub const FORMAT_VERSION: u32 = 1;

/// What an action does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ActionKind {
    /// Create a missing resource.
    Create,
    /// Update in-place fields.
    Update,
    /// Delete and recreate (a replacement-class field changed).
    Replace,
    /// Delete a resource no longer in the specs.
    Delete,
    /// Wait for an operation already running on the resource (started by an
    /// earlier, interrupted apply) instead of starting a duplicate.
    Wait,
}

impl ActionKind {
    /// Spelling in output.
    pub fn as_str(self) -> &'static str {
        match self {
            ActionKind::Create => "create",
            ActionKind::Update => "update",
            ActionKind::Replace => "replace",
            ActionKind::Delete => "delete",
            ActionKind::Wait => "wait",
        }
    }

    /// Whether this action destroys a live resource.
    pub fn is_destructive(self) -> bool {
        matches!(self, ActionKind::Replace | ActionKind::Delete)
    }
}

/// One planned action on one resource.
#[derive(Debug, Clone)]
pub struct Action {
    /// Which resource.
    pub id: ResourceId,
    /// The slice replica it belongs to.
    pub owner: SliceRef,
    /// What to do.
    pub action: ActionKind,
    /// Why.
    pub reason: Reason,
    /// Field-level changes (update, replace).
    pub changes: Vec<FieldChange>,
    /// The in-place request groups an update sends.
    pub groups: BTreeSet<UpdateGroup>,
    /// The live resource as shown (update, replace, delete, wait).
    pub before: Option<Value>,
    /// The exact body to send (create, update, replace).
    pub desired: Option<Body>,
    /// An operation already running on the resource, waited on first.
    pub operation: Option<String>,
    /// Timeout of one long-running operation.
    pub timeout: Duration,
    /// The kind's human noun (`node pool`).
    pub noun: &'static str,
    /// The step destroys the capacity of a busy slice replica, and how it
    /// goes ahead (drain first, or with the policy's or `--disrupt`'s consent).
    pub disruption: Option<workload::Disrupting>,
    /// The replica was idle when observed: its Nodes, looked at again right
    /// before its capacity is destroyed (a pod bound since holds the step).
    pub recheck: Option<(crate::resource::KubeRef, Vec<String>)>,
}

impl Action {
    /// `slice.NAME[REPLICA].KIND`.
    pub fn address(&self) -> String {
        self.owner.address(self.id.kind)
    }

    /// The reason for people.
    pub fn reason_text(&self) -> String {
        self.reason.text(self.noun, &self.owner)
    }
}

/// Counts per action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct Summary {
    /// Creates.
    pub create: usize,
    /// In-place updates.
    pub update: usize,
    /// Replacements.
    pub replace: usize,
    /// Deletes.
    pub delete: usize,
    /// Waits on in-flight operations.
    pub wait: usize,
    /// Unmanaged resources seen.
    pub unmanaged: usize,
    /// Refused changes.
    #[serde(skip_serializing_if = "is_zero")]
    pub refused: usize,
    /// Slices of Targets that could not be observed (no action for them).
    #[serde(skip_serializing_if = "is_zero")]
    pub unobserved: usize,
    /// Steps held by a disruption policy (busy slice replicas).
    #[serde(skip_serializing_if = "is_zero")]
    pub held: usize,
    /// Nodes released from a drain no longer planned.
    #[serde(skip_serializing_if = "is_zero")]
    pub released: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

impl Summary {
    /// Whether the plan changes anything (waits count: work is in flight).
    pub fn has_changes(&self) -> bool {
        self.create + self.update + self.replace + self.delete + self.wait + self.released > 0
    }
}

/// A plan.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Fingerprint of the observed state the plan was computed from.
    pub observed_fingerprint: String,
    /// `apply` (converge to the specs) or `destroy`.
    pub mode: PlanMode,
    /// Ordered actions.
    pub actions: Vec<Action>,
    /// Resources seen but not owned.
    pub unmanaged: Vec<Unmanaged>,
    /// Desired resources that wait on what slicectl does not drive (a
    /// brought template's VMs that have not joined): notes, not changes.
    pub unjoined: Vec<Unmanaged>,
    /// Changes refused by a safety rail (never executed).
    pub refused: Vec<Refusal>,
    /// Steps held by a slice's disruption policy (its replica is busy):
    /// not executed now, they run by themselves once allowed.
    pub held: Vec<workload::Held>,
    /// Nodes slicectl cordoned for a drain that no step plans any more:
    /// uncordoned before the steps run.
    pub released: Vec<workload::Release>,
    /// Scopes that could not be observed and are left out of the plan
    /// (`--sim` with a self-managed cluster whose API is not reachable).
    pub deferred: Vec<Deferred>,
    /// Targets that could not be observed (a deleted cluster, an
    /// unreachable Kubernetes API, a project the credentials cannot see):
    /// none of their slices gets any action, and nothing is pruned from
    /// what was not seen.
    pub unobserved: Vec<UnobservedTarget>,
    /// Projects where the resources a fleet left behind (in clusters or
    /// zones no Target names any more) could not be looked for: nothing
    /// there is pruned this time.
    pub undiscovered: Vec<Undiscovered>,
    /// Slices renamed in the specs, declared or likely: notes for people,
    /// and (undeclared ones) create-before-delete ordering for the executor.
    pub renames: Vec<Rename>,
    /// The workload source's decisions: slices asked for (planned like
    /// any other), released, kept, refused and JobSets left alone.
    pub demand: crate::workload::Demand,
    /// Quota and reservation preflight ([`preflight`]): filled by the
    /// engine after reading quotas, empty from planning alone.
    pub preflight: preflight::Preflight,
    /// Counts.
    pub summary: Summary,
}

/// A scope left out of a plan, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Deferred {
    /// The scope.
    pub scope: Scope,
    /// Why it could not be observed, and what that means.
    pub reason: String,
    /// How many desired resources in it were left out.
    pub resources: usize,
}

/// Why a scope (or a project's left-behind discovery) could not be
/// observed: a stable code and the cause.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Unseen {
    /// `target_not_found` (404: a deleted cluster), `target_forbidden`
    /// (403: credentials that cannot see the project, RBAC), `target_unconfigured`
    /// (no usable kubeconfig or context), `target_unreachable` (anything else).
    pub code: String,
    /// The error, as the API or the client said it.
    pub cause: String,
}

/// A Target that could not be observed, and what that leaves alone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UnobservedTarget {
    /// The Target's name.
    pub target: String,
    /// The first scope of it that failed (others may have failed too).
    pub scope: Scope,
    /// Why, with a stable code.
    #[serde(flatten)]
    pub why: Unseen,
    /// Its slices in the specs, by name: each gets no action this time.
    pub slices: Vec<String>,
    /// Live resources owned by it (or possibly by it) that were seen in
    /// its other scopes and left untouched.
    pub untouched: usize,
}

/// A project whose left-behind discovery failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Undiscovered {
    /// The project.
    pub project: String,
    /// `gke` (clusters no Target names) or `gce` (zones no Target names).
    pub backend: &'static str,
    /// Why, with a stable code.
    #[serde(flatten)]
    pub why: Unseen,
}

impl Plan {
    /// Whether anything was left unobserved (a Target, or a project's
    /// left-behind discovery): the run cannot say the fleet converged.
    pub fn left_unobserved(&self) -> bool {
        !self.unobserved.is_empty() || !self.undiscovered.is_empty()
    }

    /// The unobserved Target a slice belongs to, if any.
    pub fn unobserved_slice(&self, slice: &str) -> Option<&UnobservedTarget> {
        self.unobserved
            .iter()
            .find(|u| u.slices.iter().any(|s| s == slice))
    }

    /// The summary, counted from the actions and refusals.
    pub fn count(&self) -> Summary {
        let mut summary = Summary {
            unmanaged: self.unmanaged.len(),
            refused: self.refused.len(),
            unobserved: self.unobserved.iter().map(|u| u.slices.len()).sum(),
            held: self.held.len(),
            released: self.released.iter().map(|r| r.nodes.len()).sum(),
            ..Summary::default()
        };
        for a in &self.actions {
            match a.action {
                ActionKind::Create => summary.create += 1,
                ActionKind::Update => summary.update += 1,
                ActionKind::Replace => summary.replace += 1,
                ActionKind::Delete => summary.delete += 1,
                ActionKind::Wait => summary.wait += 1,
            }
        }
        summary
    }

    /// The published JSON of the plan (`plan --output json`).
    pub fn to_json(&self) -> Value {
        serde_json::to_value(view::PlanView::of(self)).unwrap_or(Value::Null)
    }

    /// What the plan would do and refuse, as published JSON: two plans with
    /// equal [`Plan::effect`]s make the same calls. The observed fingerprint,
    /// unmanaged list and summary are left out.
    pub fn effect(&self) -> Value {
        view::effect(&self.to_json())
    }
}

/// What the plan is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PlanMode {
    /// Converge to the specs.
    Apply,
    /// Tear everything owned down.
    Destroy,
}

/// Safety options of planning.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlanOptions {
    /// Maximum destructive actions (replace + delete, of every kind) in one plan.
    pub max_destroy: usize,
    /// Allow pruning when the specs define no slice at all.
    pub allow_empty_source: bool,
    /// Allow deleting a slice replica no longer in the specs whose
    /// protection cannot be read (`protection_unknown`).
    pub allow_unverified_delete: bool,
    /// `destroy --disrupt`: destroy busy slice replicas too, killing their
    /// pods, whatever their disruption policy says.
    pub disrupt: bool,
}

impl Default for PlanOptions {
    fn default() -> Self {
        PlanOptions {
            max_destroy: 10,
            allow_empty_source: false,
            allow_unverified_delete: false,
            disrupt: false,
        }
    }
}

/// Why no plan could be made, or (for per-slice refusals) the text of a
/// [`Refusal`]. Each message says what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// Several problems at once: all of them are reported, not just the first.
    #[error("the plan is refused for {} reasons:\n{}", .0.len(), .0.iter().map(|e| format!("  - {e}")).collect::<Vec<_>>().join("\n"))]
    Multiple(Vec<PlanError>),
    /// A protected slice would be destroyed.
    #[error(
        "{address} ({name}) is protected by preventDestroy and would be {verb}: {reason}. {how}"
    )]
    Protected {
        /// Address.
        address: String,
        /// Resource name.
        name: String,
        /// `destroyed` or `replaced`.
        verb: &'static str,
        /// The action's reason.
        reason: String,
        /// What to do to go ahead deliberately.
        how: String,
    },
    /// The specs define no slice but live slices exist.
    #[error(
        "the specs define no Slice, but {live} live resource(s) owned by this reconciler exist; \
         refusing to delete them all (an empty checkout or an unmounted ConfigMap looks like this). \
         If you really mean to remove every slice, use `slicectl destroy` or pass --allow-empty-source"
    )]
    EmptySource {
        /// Number of owned live resources.
        live: usize,
    },
    /// Too many destructive actions.
    #[error(
        "the plan would destroy or replace {count} resources, more than --max-destroy={max} \
         (slices affected: {}); review the plan and raise --max-destroy if this is intended",
        .slices.join(", ")
    )]
    TooManyDestructive {
        /// Destructive actions.
        count: usize,
        /// The cap.
        max: usize,
        /// The slice replicas affected, `NAME[REPLICA]`.
        slices: Vec<String>,
    },
    /// Two desired resources have one name.
    #[error(
        "{kind} {name} in {scope} already exists and is not owned by this reconciler ({note}); \
         slicectl never changes it. Rename the slice, or remove or adopt the existing resource"
    )]
    NameCollision {
        /// Kind.
        kind: &'static str,
        /// Name.
        name: String,
        /// Where.
        scope: String,
        /// Who owns it.
        note: String,
    },
    /// A name slicectl must create is taken by a resource it does not own
    /// (reported per slice as a [`Refusal`]; only its text is used).
    #[error(
        "{kind} {name} in {scope} already exists and is not owned by this reconciler ({note}); \
         slicectl never changes it. Rename the slice, or remove the existing resource{hint}"
    )]
    NameTaken {
        /// Kind.
        kind: &'static str,
        /// Name.
        name: String,
        /// Where.
        scope: String,
        /// Who owns it.
        note: String,
        /// How to take it back, when it looks like slicectl's own.
        hint: String,
    },
}

/// Which owner ids may act in each scope: one entry per cluster, region and
/// zone a target names. Ownership of a live resource is decided here, for
/// every kind.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Owners {
    /// Owner ids per scope.
    pub by_scope: BTreeMap<Scope, BTreeSet<String>>,
    /// Owner ids of the GKE Targets per project: where slicectl also looks
    /// for this owner's node pools left in clusters no Target names any
    /// more (a Target moved, or removed with its Slices).
    pub gke_projects: BTreeMap<String, BTreeSet<String>>,
    /// Owner ids of the self-managed (GCE) Targets per project: where
    /// slicectl also looks for this owner's MIGs left in zones no Target
    /// names any more (a Target's zone changed, or it was removed).
    pub gce_projects: BTreeMap<String, BTreeSet<String>>,
    /// Owner ids per scope of the Targets another replica plans
    /// ([`Fleet::foreign`]): those scopes are not left behind.
    pub foreign: BTreeMap<Scope, BTreeSet<String>>,
    /// Sharded: per scope and owner id, the first (by name) of every
    /// Target, this replica's or another's, naming that scope: its holder
    /// owns what a removed Target left there ([`elsewhere`]). Empty
    /// outside sharding.
    pub first_named: BTreeMap<Scope, BTreeMap<String, String>>,
}

impl Owners {
    /// The scopes of a fleet's targets.
    pub fn of(fleet: &Fleet, kinds: &[&dyn Kind]) -> Owners {
        let mut gke_projects: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        let mut gce_projects: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        // Sharded, the other replicas' projects too: a Target removed with
        // its Slices may be this replica's to prune wherever it was.
        for t in fleet.targets.values().chain(fleet.foreign.values()) {
            let projects = match (&t.spec.gke, &t.spec.gce) {
                (Some(_), _) => &mut gke_projects,
                (None, Some(_)) => &mut gce_projects,
                (None, None) => continue,
            };
            projects
                .entry(t.spec.project.clone())
                .or_default()
                .insert(t.spec.owner_id.clone());
        }
        Owners {
            by_scope: Owners::by_scope(fleet.targets.values(), kinds),
            gke_projects,
            gce_projects,
            foreign: Owners::by_scope(fleet.foreign.values(), kinds),
            first_named: match fleet.shard {
                Some(_) => Owners::first_named(fleet, kinds),
                None => BTreeMap::new(),
            },
        }
    }

    /// [`Owners::first_named`] of a sharded fleet.
    fn first_named(
        fleet: &Fleet,
        kinds: &[&dyn Kind],
    ) -> BTreeMap<Scope, BTreeMap<String, String>> {
        let mut out: BTreeMap<Scope, BTreeMap<String, String>> = BTreeMap::new();
        for t in fleet.targets.values().chain(fleet.foreign.values()) {
            for scope in Owners::scopes_of(t, kinds) {
                let first = out
                    .entry(scope)
                    .or_default()
                    .entry(t.spec.owner_id.clone())
                    .or_insert_with(|| t.name.clone());
                if t.name < *first {
                    first.clone_from(&t.name);
                }
            }
        }
        out
    }

    /// The owner ids of `targets` per scope they name.
    fn by_scope<'a>(
        targets: impl Iterator<Item = &'a crate::spec::Target>,
        kinds: &[&dyn Kind],
    ) -> BTreeMap<Scope, BTreeSet<String>> {
        let mut out: BTreeMap<Scope, BTreeSet<String>> = BTreeMap::new();
        for t in targets {
            for scope in Owners::scopes_of(t, kinds) {
                out.entry(scope)
                    .or_default()
                    .insert(t.spec.owner_id.clone());
            }
        }
        out
    }

    /// Every scope one target names: its GKE cluster, its region, and for a
    /// self-managed target its project's global scope, its Kubernetes API
    /// and its zone (zones hold MIGs: only self-managed targets have any).
    pub fn scopes_of(t: &crate::spec::Target, kinds: &[&dyn Kind]) -> Vec<Scope> {
        let mut out: Vec<Scope> = Vec::new();
        for k in kinds {
            for s in k.scopes(t) {
                if !out.contains(&s) {
                    out.push(s);
                }
            }
        }
        out
    }

    /// Whether a live resource with ownership `own` in `scope` is this
    /// reconciler's: the one ownership decision, for every kind.
    pub fn owns(&self, scope: &Scope, own: Option<&Ownership>) -> bool {
        own.is_some_and(|o| {
            self.by_scope
                .get(scope)
                .is_some_and(|ids| ids.contains(&o.owner))
        })
    }

    /// Whether a live resource with ownership `own` in `scope` is one this
    /// fleet left behind: `scope` is a GKE cluster (or a zone, for a
    /// self-managed Target's MIGs) no Target of its owner names any more
    /// (another owner's Target may still name it), in a project a Target of
    /// that owner and backend names. Such a resource is shown, deleted as
    /// moved (its slice replica renders elsewhere) or refused as
    /// `target_removed`, and destroyed by `destroy`; never left unseen.
    pub fn left_behind(&self, scope: &Scope, own: Option<&Ownership>) -> bool {
        let projects = match scope {
            Scope::Cluster(c) => self.gke_projects.get(&c.project),
            Scope::Zone(z) => self.gce_projects.get(&z.project),
            _ => return false,
        };
        own.is_some_and(|o| {
            !self
                .by_scope
                .get(scope)
                .is_some_and(|ids| ids.contains(&o.owner))
                && !self
                    .foreign
                    .get(scope)
                    .is_some_and(|ids| ids.contains(&o.owner))
                && projects.is_some_and(|ids| ids.contains(&o.owner))
        })
    }

    /// Every scope, in order.
    pub fn scopes(&self) -> impl Iterator<Item = &Scope> {
        self.by_scope.keys()
    }
}

/// Builds the plan that converges the live state to the fleet.
pub fn plan(
    fleet: &Fleet,
    inventory: &Inventory,
    kinds: &[&dyn Kind],
    opts: &PlanOptions,
) -> Result<Plan, PlanError> {
    build::build(fleet, inventory, kinds, opts, PlanMode::Apply)
}

/// Builds the teardown plan: every resource owned by the fleet's targets is
/// deleted (dependents first), at most `max_destroy` of them.
pub fn plan_destroy(
    fleet: &Fleet,
    inventory: &Inventory,
    kinds: &[&dyn Kind],
    max_destroy: usize,
) -> Result<Plan, PlanError> {
    let opts = PlanOptions {
        max_destroy,
        ..PlanOptions::default()
    };
    plan_destroy_with(fleet, inventory, kinds, &opts)
}

/// [`plan_destroy`] with every safety option (`allow_empty_source` has no
/// effect: a destroy empties the fleet by design).
pub fn plan_destroy_with(
    fleet: &Fleet,
    inventory: &Inventory,
    kinds: &[&dyn Kind],
    opts: &PlanOptions,
) -> Result<Plan, PlanError> {
    let opts = PlanOptions {
        allow_empty_source: true,
        ..*opts
    };
    build::build(fleet, inventory, kinds, &opts, PlanMode::Destroy)
}

/// What the workload source decides over an observation
/// ([`crate::workload::derive`]): the plan's own view of it, for `status`.
pub fn workload_demand(
    fleet: &Fleet,
    inventory: &Inventory,
    kinds: &[&dyn Kind],
) -> crate::workload::Demand {
    build::derive_demand(fleet, inventory, kinds)
}

/// Renders every desired resource of the fleet, kind by kind.
pub fn render_fleet(fleet: &Fleet, kinds: &[&dyn Kind]) -> Vec<Desired> {
    render_fleet_at(fleet, kinds, &BTreeMap::new(), &BTreeMap::new())
}

/// Whether a live resource with ownership `o` in `scope` is slice `slice`'s:
/// it carries the slice's name, or a name the slice declares in
/// `previousNames` with the owner id of the slice's Target and in one of
/// that Target's scopes, that no other spec source stamped
/// ([`other_source`]).
pub fn claims(
    fleet: &Fleet,
    kinds: &[&dyn Kind],
    slice: &crate::spec::Slice,
    o: &Ownership,
    scope: &Scope,
) -> bool {
    if o.slice == slice.name {
        return true;
    }
    // `previousNames` takes only what this source stamped or nobody did:
    // never another source's resource.
    slice.spec.previous_names.contains(&o.slice)
        && other_source(fleet, o).is_none()
        && fleet.target_of(slice).is_some_and(|t| {
            t.spec.owner_id == o.owner && Owners::scopes_of(t, kinds).contains(scope)
        })
}

/// The name each replica of a renamed slice is rendered under (see
/// [`RenderCtx::stem`]), for the replicas not named after the slice itself:
/// the first of the slice's name and its `previousNames` under which a live
/// resource of the replica exists that the slice [`claims`]. Slices without
/// `previousNames` are not in the map.
pub fn stems(
    fleet: &Fleet,
    inv: &Inventory,
    kinds: &[&dyn Kind],
    indices: &BTreeMap<String, Vec<u32>>,
) -> BTreeMap<(String, u32), String> {
    let owners = Owners::of(fleet, kinds);
    let mut out = BTreeMap::new();
    for slice in fleet
        .slices
        .values()
        .filter(|s| !s.spec.previous_names.is_empty())
    {
        let Some(target) = fleet.target_of(slice) else {
            continue;
        };
        let replicas = replicas_of(slice, indices);
        for replica in replicas {
            let candidates = std::iter::once(&slice.name).chain(&slice.spec.previous_names);
            for stem in candidates {
                let ctx = RenderCtx {
                    target,
                    slice,
                    replica,
                    stem,
                };
                let adopted = kinds.iter().filter(|k| !k.shared()).any(|k| {
                    k.render(ctx).iter().any(|d| {
                        inv.live(k.id()).iter().any(|l| {
                            l.scope == d.id.scope
                                && k.name(&l.body) == d.id.name
                                && k.ownership(&l.body).is_some_and(|o| {
                                    owners.owns(&l.scope, Some(&o))
                                        && o.replica == replica
                                        && claims(fleet, kinds, slice, &o, &l.scope)
                                })
                        })
                    })
                });
                if adopted {
                    if stem != &slice.name {
                        out.insert((slice.name.clone(), replica), stem.clone());
                    }
                    break;
                }
            }
        }
    }
    out
}

/// Which replica indices of each slice are kept, given what is live. The
/// rule is `0..replicas`, except after a scale-down (or any time a live
/// replica sits at an index past `replicas`): then the busy replicas (pods
/// run on their Nodes, or whether they do cannot be read) are kept first,
/// then those whose primary resource (a node pool, a MIG) is working, each
/// lowest index first, and the rest are filled from the lowest indices. So
/// a scale-down removes idle replicas first, then broken ones, then the
/// highest index: `replicas: 1` over a stocked-out replica 0 and RUNNING
/// replicas 1 and 2 keeps replica 1; `replicas: 1` over an idle replica 0
/// and a busy replica 1 keeps replica 1 and removes the idle one.
/// Slices not in the map use `0..replicas`.
pub fn replica_indices(
    fleet: &Fleet,
    inv: &Inventory,
    kinds: &[&dyn Kind],
) -> BTreeMap<String, Vec<u32>> {
    let owners = Owners::of(fleet, kinds);
    // (slice, replica) → (busy, working), from the primary kinds' owned
    // resources.
    let mut live: BTreeMap<(&str, u32), (bool, bool)> = BTreeMap::new();
    for kind in kinds.iter().filter(|k| k.is_primary()) {
        for l in inv.live(kind.id()) {
            let Some(o) = kind
                .ownership(&l.body)
                .filter(|o| owners.owns(&l.scope, Some(o)))
            else {
                continue;
            };
            let Some(slice) = fleet
                .claimant(&o.slice)
                .filter(|s| claims(fleet, kinds, s, &o, &l.scope))
            else {
                continue;
            };
            let ok = kind.state(&l.body) == LiveState::Ok;
            let id = ResourceId {
                scope: l.scope.clone(),
                kind: kind.id(),
                name: kind.name(&l.body),
            };
            let kube = fleet.target_of(slice).and_then(|t| {
                Owners::scopes_of(t, kinds)
                    .into_iter()
                    .find_map(|s| match s {
                        Scope::Kube(k) => Some(k),
                        _ => None,
                    })
            });
            let busy = kind
                .hosts(&id, &o, kube.as_ref())
                .is_some_and(|h| workload::may_be_busy(&inv.workloads, &h));
            let e = live
                .entry((slice.name.as_str(), o.replica))
                .or_insert((false, true));
            e.0 |= busy;
            e.1 &= ok;
        }
    }
    let mut out = BTreeMap::new();
    for slice in fleet.slices.values() {
        let n = slice.spec.replicas;
        let mut mine: Vec<(u32, bool, bool)> = live
            .range((slice.name.as_str(), 0)..=(slice.name.as_str(), u32::MAX))
            .map(|(&(_, r), &(busy, ok))| (r, busy, ok))
            .collect();
        if mine.iter().all(|&(r, _, _)| r < n) {
            continue;
        }
        // Busy first, then working, then the lowest index: what is not
        // taken is removed (idle, then broken, then the highest index).
        mine.sort_by_key(|&(r, busy, ok)| (!busy, !ok, r));
        let mut kept: Vec<u32> = mine
            .iter()
            .filter(|&&(_, busy, ok)| busy || ok)
            .map(|&(r, _, _)| r)
            .take(n as usize)
            .collect();
        let mut next = 0u32;
        while kept.len() < n as usize {
            if !kept.contains(&next) {
                kept.push(next);
            }
            next += 1;
        }
        kept.sort_unstable();
        out.insert(slice.name.clone(), kept);
    }
    out
}

/// The replica indices of `slice`: from [`replica_indices`], else
/// `0..replicas`.
fn replicas_of(slice: &crate::spec::Slice, indices: &BTreeMap<String, Vec<u32>>) -> Vec<u32> {
    indices
        .get(&slice.name)
        .cloned()
        .unwrap_or_else(|| (0..slice.spec.replicas).collect())
}

/// [`render_fleet`] with the replica indices of [`replica_indices`] and
/// the names of [`stems`].
pub fn render_fleet_at(
    fleet: &Fleet,
    kinds: &[&dyn Kind],
    indices: &BTreeMap<String, Vec<u32>>,
    stems: &BTreeMap<(String, u32), String>,
) -> Vec<Desired> {
    render_fleet_settling(fleet, kinds, indices, stems, &mut |_, _| {})
}

/// [`render_fleet_at`], handing each resource to `settle` as it is rendered
/// (with its kind), before the next one is: the planner swaps the body of
/// one already in sync for the live body, so a large fleet's rendered
/// bodies are never all held at once (`plan::build`).
pub(crate) fn render_fleet_settling(
    fleet: &Fleet,
    kinds: &[&dyn Kind],
    indices: &BTreeMap<String, Vec<u32>>,
    stems: &BTreeMap<(String, u32), String>,
    settle: &mut dyn FnMut(&dyn Kind, &mut Desired),
) -> Vec<Desired> {
    // About one resource per slice for most kinds: sized up front, and the
    // doubling's spare capacity given back at the end (at 10,000 node pools
    // that spare was 2.6 MB of the plan's heap peak).
    let mut out = Vec::with_capacity(fleet.slices.len());
    for slice in fleet.slices.values() {
        let Some(target) = fleet.target_of(slice) else {
            continue;
        };
        let replicas = replicas_of(slice, indices);
        for replica in replicas {
            let stem = if stems.is_empty() {
                &slice.name
            } else {
                stems
                    .get(&(slice.name.clone(), replica))
                    .unwrap_or(&slice.name)
            };
            for kind in kinds {
                for mut d in kind.render(RenderCtx {
                    target,
                    slice,
                    replica,
                    stem,
                }) {
                    settle(*kind, &mut d);
                    // A shared resource is planned once per scope, owned by
                    // no slice: the first slice that renders it says what it is.
                    if kind.shared() {
                        if out
                            .iter()
                            .any(|o: &Desired| o.id == d.id && o.owner.is_shared())
                        {
                            continue;
                        }
                        out.push(Desired {
                            owner: SliceRef::shared(),
                            prevent_destroy: false,
                            ..d
                        });
                    } else {
                        out.push(d);
                    }
                }
            }
        }
    }
    out.shrink_to_fit();
    out
}

/// The refusal of action `a`.
pub(crate) fn refusal(a: &Action, code: &str, message: String) -> Refusal {
    Refusal {
        kind: a.id.kind.as_str(),
        name: a.id.name.clone(),
        address: a.address(),
        slice: a.owner.slice.clone(),
        replica: a.owner.replica,
        scope: a.id.scope.clone(),
        action: a.action,
        code: code.to_string(),
        message,
    }
}

/// The refusal of a protected resource, with what to do about it.
fn protected(a: &Action, mode: PlanMode, in_specs: bool) -> PlanError {
    let replace = a.action == ActionKind::Replace;
    let how = match (mode, replace, in_specs) {
        (PlanMode::Destroy, _, _) => format!(
            "To destroy it deliberately, set `lifecycle.preventDestroy: false` in slice {}'s spec and run \
             `slicectl apply` (which lifts the protection on the live resource), then `slicectl destroy` again",
            a.owner.slice
        ),
        (_, true, _) => "To replace it deliberately, set `lifecycle.preventDestroy: false` in its Slice spec and apply \
             twice: the first apply lifts the protection on the live resource, the second one replaces it"
            .to_string(),
        // A replica past `replicas` is no longer rendered, so no apply
        // lifts its stamp: it must be desired again while the stamp goes.
        (_, false, true) if matches!(a.reason, Reason::ReplicaNotDesired { .. }) => format!(
            "To remove this replica deliberately, keep slice {}'s `replicas` high enough to include it, set \
             `lifecycle.preventDestroy: false` and apply (which lifts the protection on every live replica), \
             then lower `replicas` and apply again",
            a.owner.slice
        ),
        (_, false, true) => "To destroy it deliberately, set `lifecycle.preventDestroy: false` in its Slice spec and apply \
             twice: the first apply lifts the protection on the live resource, the second one destroys it"
            .to_string(),
        (_, false, false) => format!(
            "To destroy it deliberately, put slice {} back in the specs with `lifecycle.preventDestroy: false` and \
             apply (which lifts the protection on the live resource), then remove it and apply again",
            a.owner.slice
        ),
    };
    PlanError::Protected {
        address: a.address(),
        name: a.id.name.clone(),
        verb: if replace { "replaced" } else { "destroyed" },
        how,
        reason: a.reason_text(),
    }
}

/// The note on Nodes planned to join while VMs of the replica already run
/// without one: a VM still bootstrapping joins during the apply, but one
/// whose Node was deleted does not, and apply stops on it (`node_lost`).
fn lost_nodes_note(running: u32, seen: u32, scope: &Scope, mig: &str) -> FieldChange {
    let (zone, project) = match scope {
        Scope::Zone(z) => (z.zone.as_str(), z.project.as_str()),
        _ => ("ZONE", "PROJECT"),
    };
    FieldChange {
        path: "nodes.missing".into(),
        before: Some(Value::from(format!(
            "{running} VM(s) of managed instance group {mig} RUNNING, {seen} Node(s)"
        ))),
        after: Some(Value::from(format!(
            "a VM still bootstrapping joins during this apply; a VM that joined and whose Node was deleted does not: \
             a kubelet does not register its Node again by itself, so apply stops on it (node_lost) and names it. \
             Recreate such a VM: gcloud compute instance-groups managed recreate-instances {mig} --instances=VM \
             --zone={zone} --project={project} (list them: gcloud compute instance-groups managed list-instances {mig} \
             --zone={zone} --project={project})"
        ))),
        forces_replacement: false,
    }
}

/// How many hosts an action that is not a replace or delete disrupts (the
/// VMs a lost-Node recreate may make again), counted against
/// `--max-destroy`.
fn disruption(a: &Action) -> usize {
    match &a.reason {
        Reason::NodeLost { running, nodes, .. } => running.saturating_sub(*nodes) as usize,
        _ => 0,
    }
}

/// The refusal text of a slice replica gone from the specs whose
/// protection cannot be read.
fn protection_unknown(a: &Action, running: u32, seen: u32) -> String {
    format!(
        "{} ({}) would be destroyed ({}), but whether slice {} is protected by preventDestroy cannot be read: \
         the {} {} carries no protection stamp, and {} VM(s) run while only {seen} of their Nodes exist \
         ({} missing), and the Nodes are where the stamp lives. Nothing of slice replica {}[{}] is deleted. \
         If it is protected, put its spec back with `lifecycle.preventDestroy: true`; if you are sure it is not, \
         apply again with --allow-unverified-delete",
        a.address(),
        a.id.name,
        a.reason_text(),
        a.owner.slice,
        a.noun,
        a.id.name,
        running,
        running - seen,
        a.owner.slice,
        a.owner.replica,
    )
}

/// The reason of a replacement from its changes: the forced change the kind
/// ranks most telling ([`Kind::replacement_rank`]).
fn replace_reason(kind: &dyn Kind, changes: &[FieldChange], hash_only: bool) -> Reason {
    let forced: Vec<&FieldChange> = changes.iter().filter(|c| c.forces_replacement).collect();
    match forced.iter().min_by_key(|c| kind.replacement_rank(&c.path)) {
        Some(c) if !hash_only => Reason::FieldsForceReplacement {
            path: c.path.clone(),
            before: c.before.clone(),
            after: c.after.clone(),
            more: forced.len() - 1,
        },
        _ => Reason::StoredHashDiffers,
    }
}

/// The empty-source guard per Target: a resource of owner `o` in `a`'s
/// scope is pruned only when some Target of that owner covering that scope
/// still has a Slice in the specs. When none has (the file with a Target's
/// Slices was lost in a merge, while another Target keeps the fleet from
/// looking empty), the delete is refused with why.
fn empty_target(fleet: &Fleet, kinds: &[&dyn Kind], a: &Action, o: &Ownership) -> Option<String> {
    let covering: Vec<&crate::spec::Target> = fleet
        .targets
        .values()
        .filter(|t| t.spec.owner_id == o.owner && Owners::scopes_of(t, kinds).contains(&a.id.scope))
        .collect();
    if covering.is_empty()
        || covering.iter().any(|t| {
            fleet
                .slices
                .values()
                .any(|s| s.workload.is_none() && s.spec.target == t.name)
        })
    {
        return None;
    }
    let names: Vec<&str> = covering.iter().map(|t| t.name.as_str()).collect();
    Some(format!(
        "{} ({}) would be deleted, but Target {} (owner {:?}) has no Slice in the specs while it still \
         has live slices: refusing to prune them all (a file lost in a merge looks like this, even when \
         other Targets keep the fleet from looking empty). To remove them deliberately, run `slicectl \
         destroy` on their specs, or pass --allow-empty-source",
        a.address(),
        a.id.name,
        names.join(", "),
        o.owner
    ))
}

/// When a desired resource's name is held by the same slice replica under
/// another owner id (the Target's `ownerId` was changed), the way to change
/// it without losing capacity: both owner ids must be this reconciler's for
/// one apply, so that the live resources are relabelled in place.
fn owner_change_hint(d: &Desired, live: Option<&Ownership>, relabels: bool) -> String {
    let Some(o) = live.filter(|o| {
        o.slice == d.owner.slice && o.replica == d.owner.replica && o.owner != d.owner_id
    }) else {
        return String::new();
    };
    if !relabels {
        return format!(
            ". It is this very slice replica, created under owner id {old:?}, which it records where \
             slicectl does not rewrite it: if you changed the Target's ownerId from {old:?} to {new:?}, \
             deleting and recreating it would lose its capacity. Keep (or restore) a Target with ownerId \
             {old:?} on this scope for as long as it lives (a second Target with ownerId {new:?} may stand \
             beside it)",
            old = o.owner,
            new = d.owner_id,
        );
    }
    format!(
        ". It is this very slice replica, created under owner id {old:?}: if you changed the Target's \
         ownerId from {old:?} to {new:?}, deleting and recreating it would lose its capacity. The lossless \
         way: keep (or restore) a Target with ownerId {old:?} on this cluster, add a second Target with \
         ownerId {new:?} and point the Slices at it; one apply relabels the live resources in place (no \
         delete); then remove the old Target",
        old = o.owner,
        new = d.owner_id,
    )
}

/// The Target a live slice replica was last written by, when these specs
/// do not declare it for its ownerId, neither by name nor in a Target's
/// `previousNames` (a hand-over): the slice is another spec source's, one
/// that applies the same ownerId. `None` when the resource carries no
/// Target stamp (dependents, and what was made before the stamp existed).
pub fn other_source<'a>(fleet: &Fleet, o: &'a Ownership) -> Option<&'a str> {
    let t = o.target.as_deref()?;
    let declared = fleet.targets.values().any(|x| {
        x.spec.owner_id == o.owner && (x.name == t || x.spec.previous_names.iter().any(|p| p == t))
    });
    (!declared).then_some(t)
}

/// Sharded (`controller --shards N`): whether the owned live resource with
/// ownership `o` in `scope` is another replica's business, so that this
/// replica neither changes, prunes nor reports it (nor its slice replica's
/// other resources). Every replica computes the same answer from the specs
/// alone, so each resource is exactly one replica's:
///
/// - a slice of this cut (by name or `previousNames`): this replica's,
///   wherever it was; another replica's Slice: theirs;
/// - a Target stamp naming a Target of this cut: this replica's; one of
///   another replica's: theirs;
/// - a shared resource (no slice): this replica's only when no other
///   replica's Target of its ownerId names its scope (another may need it);
/// - otherwise its slice left the specs, with its Target (removed together)
///   or before the stamp existed: in a scope some Target of its ownerId
///   still names, the holder of the first such Target by name (that
///   replica observes the scope for sure); in a scope no Target names any
///   more (left behind, which every replica discovers), the holder of the
///   shard of its Target stamp (of its slice name, unstamped).
///
/// Never outside sharding.
pub fn elsewhere(fleet: &Fleet, owners: &Owners, scope: &Scope, o: &Ownership) -> bool {
    let Some(cut) = &fleet.shard else {
        return false;
    };
    if fleet.claimant(&o.slice).is_some() {
        return false;
    }
    if cut.others.contains(&o.slice) {
        return true;
    }
    if let Some(t) = o.target.as_deref() {
        let declares = |x: &crate::spec::Target| {
            x.spec.owner_id == o.owner
                && (x.name == t || x.spec.previous_names.iter().any(|p| p == t))
        };
        if fleet.targets.values().any(declares) {
            return false;
        }
        if fleet.foreign.values().any(declares) {
            return true;
        }
    }
    if o.slice.is_empty() {
        return owners
            .foreign
            .get(scope)
            .is_some_and(|ids| ids.contains(&o.owner));
    }
    match owners.first_named.get(scope).and_then(|m| m.get(&o.owner)) {
        Some(first) => !fleet.targets.contains_key(first),
        None => !cut.scope.keeps(o.target.as_deref().unwrap_or(&o.slice)),
    }
}

/// The refusal of a change to a slice replica another source wrote.
fn other_source_refusal(a: &Action, o: &Ownership, target: &str, mode: PlanMode) -> String {
    let delete = match (a.action, mode) {
        (ActionKind::Delete, PlanMode::Apply) => format!(
            ". To delete it deliberately (Target {target:?} was removed together with its Slices), pass \
             --allow-empty-source"
        ),
        (_, PlanMode::Destroy) => {
            ". `slicectl destroy` removes only the slices of the Targets it is given".to_string()
        }
        _ => String::new(),
    };
    format!(
        "{} ({}) was last applied by Target {target:?} (ownerId {:?}), which these specs do not declare: \
         another spec source that applies the same ownerId made it, or Target {target:?} was renamed or \
         removed. Refusing to {} it. If another source applies it, give one of the two sources its own \
         ownerId; if Target {target:?} was renamed, or its slices are to move here, add `previousNames: \
         [{target}]` to the Target that takes them over (one apply relabels them in place, nothing is \
         deleted); to remove them, run `slicectl destroy` on the specs that declare Target {target:?}{delete}",
        a.address(),
        a.id.name,
        o.owner,
        a.action.as_str(),
    )
}

/// The refusal of a delete in a cluster no Target names any more, of a
/// slice no longer in the specs: its Target was removed together with its
/// Slices (or the file holding both was lost). Like the empty-source guard,
/// it takes an explicit override.
fn target_removed(a: &Action, o: &Ownership) -> String {
    format!(
        "{} ({}) runs in {}, which no Target names any more, and slice {} is not in the specs: its Target \
         was removed together with its Slices (a file lost in a merge looks like this too). Refusing to \
         delete it. To remove it deliberately, pass --allow-empty-source (`slicectl destroy` removes it \
         too, with every other slice of ownerId {:?} in these specs); to keep it, put its Target and Slice \
         back",
        a.address(),
        a.id.name,
        a.id.scope,
        o.slice,
        o.owner
    )
}

/// Why an owned live resource no longer desired is deleted (apply mode).
fn delete_reason(fleet: &Fleet, desired: &[Desired], kind: &dyn Kind, o: &Ownership) -> Reason {
    if o.slice.is_empty() {
        // A shared resource: no slice of its scope renders it any more.
        return Reason::NotNeeded;
    }
    let Some(s) = fleet.claimant(&o.slice) else {
        return Reason::NotInSpecs;
    };
    let kept: Vec<u32> = {
        let mut k: Vec<u32> = desired
            .iter()
            .filter(|d| d.owner.slice == s.name)
            .map(|d| d.owner.replica)
            .collect();
        k.dedup();
        k
    };
    if !kept.contains(&o.replica) {
        return Reason::ReplicaNotDesired {
            replicas: s.spec.replicas,
            kept,
        };
    }
    match desired
        .iter()
        .find(|d| d.id.kind == kind.id() && d.owner.slice == s.name && d.owner.replica == o.replica)
    {
        Some(d) => Reason::Moved {
            now: format!(
                "{} {} in {} (target {})",
                kind.noun(),
                d.id.name,
                d.id.scope,
                s.spec.target
            ),
        },
        None => Reason::NotNeeded,
    }
}

/// The renames of a plan: the declared ones it carries out (from
/// [`stems`]), and the likely ones it can only see. A slice `old` that is
/// no longer in the specs looks renamed to a slice `new` when every action
/// of `new` creates and `new` renders, under `old`'s names, what `old`'s
/// live primary resources are up to in-place fields (same Target, same
/// shape).
fn renames(
    fleet: &Fleet,
    inv: &Inventory,
    kinds: &[&dyn Kind],
    stems: &BTreeMap<(String, u32), String>,
    actions: &[Action],
) -> Vec<Rename> {
    let addresses = |slice: &str| -> Vec<String> {
        actions
            .iter()
            .filter(|a| a.owner.slice == slice)
            .map(Action::address)
            .collect()
    };
    let mut out = Vec::new();
    let declared: BTreeSet<(&String, &String)> =
        stems.iter().map(|((to, _), from)| (from, to)).collect();
    for (from, to) in declared {
        let target = fleet
            .slices
            .get(to)
            .map(|s| s.spec.target.clone())
            .unwrap_or_default();
        out.push(Rename {
            from: from.clone(),
            to: to.clone(),
            declared: true,
            target,
            addresses: addresses(to)
                .into_iter()
                .chain(addresses(from))
                .collect(),
            message: format!(
                "slice {to} takes over the live resources of slice {from} (previousNames): node pools are \
                 relabelled in place and keep their names, nothing is deleted. Keep `previousNames: [{from}]` \
                 in slice {to} while resources named after {from} live: their names cannot change, and compute \
                 resources (workload policies, instance templates, MIGs) keep {from} in their ownership"
            ),
        });
    }
    let primary: Vec<&dyn Kind> = kinds.iter().copied().filter(|k| k.is_primary()).collect();
    // Old slices: every primary resource deleted because the slice left the specs.
    let mut old: BTreeMap<&str, Vec<&Action>> = BTreeMap::new();
    for a in actions {
        if a.action == ActionKind::Delete
            && a.reason == Reason::NotInSpecs
            && primary.iter().any(|k| k.id() == a.id.kind)
        {
            old.entry(a.owner.slice.as_str()).or_default().push(a);
        }
    }
    for new in fleet.slices.values() {
        let mine: Vec<&Action> = actions
            .iter()
            .filter(|a| a.owner.slice == new.name)
            .collect();
        if mine.is_empty() || mine.iter().any(|a| a.action != ActionKind::Create) {
            continue;
        }
        let Some(target) = fleet.target_of(new) else {
            continue;
        };
        let found = old.iter().find(|(from, deletes)| {
            deletes.iter().all(|a| {
                let Some(kind) = primary.iter().find(|k| k.id() == a.id.kind) else {
                    return false;
                };
                let Some(live) = inv
                    .live(a.id.kind)
                    .iter()
                    .find(|l| l.scope == a.id.scope && kind.name(&l.body) == a.id.name)
                else {
                    return false;
                };
                let same_target = kind
                    .ownership(&live.body)
                    .is_some_and(|o| o.owner == target.spec.owner_id)
                    && Owners::scopes_of(target, kinds).contains(&a.id.scope);
                same_target
                    && kind
                        .render(RenderCtx {
                            target,
                            slice: new,
                            replica: a.owner.replica,
                            stem: from,
                        })
                        .iter()
                        .any(|d| {
                            d.id == a.id
                                && !matches!(
                                    kind.compare(d, &live.body),
                                    Comparison::Replace { .. }
                                )
                        })
            })
        });
        let Some((from, _)) = found else {
            continue;
        };
        let (from, to) = (from.to_string(), new.name.clone());
        out.push(Rename {
            message: format!(
                "slice {from} looks renamed to {to} (same Target, same shape, {from} gone, {to} new): \
                 declare `previousNames: [{from}]` in {to} to keep its capacity. As planned, {to}'s \
                 resources are created first and {from}'s are deleted only once those creates succeed"
            ),
            addresses: addresses(&to).into_iter().chain(addresses(&from)).collect(),
            target: new.spec.target.clone(),
            declared: false,
            from,
            to,
        });
        let taken = out.last().map(|r| r.from.clone()).unwrap_or_default();
        old.remove(taken.as_str());
    }
    out
}

fn rank_str(kinds: &[&dyn Kind], k: &str) -> usize {
    kinds
        .iter()
        .position(|x| x.id().as_str() == k)
        .unwrap_or(usize::MAX)
}

#[cfg(test)]
mod tests;
