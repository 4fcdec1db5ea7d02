//! Planning: `desired × observed → plan`, a pure and deterministic function.
//!
//! A plan is data: an ordered list of actions (create / update in place /
//! replace / delete / wait on an in-flight operation), each with its reason
//! and field-level changes. [`human`] renders it for people, [`Plan`]
//! serialises to the stable JSON of `plan --output json`.

pub mod hash;
pub mod human;
pub mod inventory;
pub mod ownership;
pub mod provisioner_hash;
pub mod render;

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::Digest as _;

use crate::resource::gke::NodePool;
use crate::resource::{ClusterRef, RegionRef};
use crate::spec::Fleet;
/// Cloud resource names (pure, shared with validation, so lives in [`crate::spec`]).
pub use crate::spec::names;

use hash::{FieldChange, HASH_VERSION, Projection};
pub use inventory::Inventory;
use ownership::Ownership;
use render::{DesiredReplica, render_fleet};

/// Version of the plan JSON format (`plan --output json`, `plan --out`).
pub const FORMAT_VERSION: u32 = 1;

/// What an action does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ActionKind {
    /// Create a missing resource.
    Create,
    /// Update labels/taints in place.
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

/// The kind of cloud resource an action is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResourceKind {
    /// Compute workload policy (tpu7x multi-host).
    WorkloadPolicy,
    /// GKE node pool.
    NodePool,
}

impl ResourceKind {
    /// Spelling in output.
    pub fn as_str(self) -> &'static str {
        match self {
            ResourceKind::WorkloadPolicy => "workload_policy",
            ResourceKind::NodePool => "node_pool",
        }
    }
}

/// Where a resource lives.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(tag = "scope", rename_all = "lowercase")]
pub enum Scope {
    /// A GKE cluster.
    Cluster(ClusterRef),
    /// A compute region.
    Region(RegionRef),
}

impl std::fmt::Display for Scope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Scope::Cluster(c) => c.fmt(f),
            Scope::Region(r) => r.fmt(f),
        }
    }
}

/// One planned action on one resource.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Action {
    /// create, update, replace, delete or wait.
    pub action: ActionKind,
    /// node_pool or workload_policy.
    pub kind: ResourceKind,
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
    /// Why.
    pub reason: String,
    /// Field-level changes (update, replace).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changes: Vec<FieldChange>,
    /// The live resource (update, replace, delete, wait).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<Value>,
    /// The desired resource body (create, update, replace).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<Value>,
    /// An operation already running on this resource, waited on first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operation: Option<String>,
    /// Timeout of one long-running operation, in seconds.
    pub timeout_secs: u64,
}

/// A live resource that is not this reconciler's: shown, never touched.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Unmanaged {
    /// Kind.
    pub kind: ResourceKind,
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
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Refusal {
    /// Kind of the resource.
    pub kind: ResourceKind,
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
    /// `held_back` (another resource of the same slice replica is refused).
    pub code: String,
    /// Why, and what to do.
    pub message: String,
}

/// Counts per action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
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
    #[serde(default, skip_serializing_if = "is_zero")]
    pub refused: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

impl Summary {
    /// Whether the plan changes anything (waits count: work is in flight).
    pub fn has_changes(&self) -> bool {
        self.create + self.update + self.replace + self.delete + self.wait > 0
    }
}

/// A plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    /// [`FORMAT_VERSION`].
    pub format_version: u32,
    /// Fingerprint of the observed state the plan was computed from.
    pub observed_fingerprint: String,
    /// `apply` (converge to the specs) or `destroy`.
    pub mode: PlanMode,
    /// Ordered actions.
    pub actions: Vec<Action>,
    /// Resources seen but not owned.
    pub unmanaged: Vec<Unmanaged>,
    /// Changes refused by a safety rail (never executed).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refused: Vec<Refusal>,
    /// Counts.
    pub summary: Summary,
}

impl Plan {
    /// A digest of what the plan would do and refuse (mode, actions with
    /// their bodies, refusals): two plans with one digest make the same
    /// calls. The observed fingerprint, unmanaged list and summary are left
    /// out; they do not change what is executed.
    pub fn digest(&self) -> String {
        let v = serde_json::json!({
            "mode": self.mode,
            "actions": self.actions,
            "refused": self.refused,
        });
        let bytes = serde_json::to_vec(&v).unwrap_or_default();
        hex::encode(sha2::Sha256::digest(&bytes))
    }

    /// The summary, counted from the actions and refusals (never trusted
    /// from a file).
    pub fn count(&self) -> Summary {
        let mut summary = Summary {
            unmanaged: self.unmanaged.len(),
            refused: self.refused.len(),
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
}

/// What the plan is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
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
}

impl Default for PlanOptions {
    fn default() -> Self {
        PlanOptions {
            max_destroy: 10,
            allow_empty_source: false,
        }
    }
}

/// Why no plan could be made. Each message says what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// Several problems at once: all of them are reported, not just the first.
    #[error("the plan is refused for {} reasons:\n{}", .0.len(), .0.iter().map(|e| format!("  - {e}")).collect::<Vec<_>>().join("\n"))]
    Multiple(Vec<PlanError>),
    /// A protected slice would be destroyed.
    #[error(
        "{address} ({name}) is protected by preventDestroy and would be {verb}: {reason}. \
         To {verb_inf} it deliberately, set `lifecycle.preventDestroy: false` in its Slice spec and apply twice: \
         the first apply lifts the protection on the live resource, the second one {verb} it"
    )]
    Protected {
        /// Address.
        address: String,
        /// Resource name.
        name: String,
        /// `destroyed` or `replaced`.
        verb: &'static str,
        /// `destroy` or `replace`.
        verb_inf: &'static str,
        /// The action's reason.
        reason: String,
    },
    /// The specs define no slice but live slices exist.
    #[error(
        "the specs define no Slice, but {live} live node pool(s) owned by this reconciler exist; \
         refusing to delete them all (an empty checkout or an unmounted ConfigMap looks like this). \
         If you really mean to remove every slice, use `slicectl destroy` or pass --allow-empty-source"
    )]
    EmptySource {
        /// Number of owned live node pools.
        live: usize,
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
    /// A desired name is taken by a resource this reconciler does not own.
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
}

fn address(slice: &str, replica: u32, kind: ResourceKind) -> String {
    format!("slice.{slice}[{replica}].{}", kind.as_str())
}

fn to_value<T: Serialize>(t: &T) -> Option<Value> {
    serde_json::to_value(t).ok()
}

/// The clusters and regions the targets point at, with the owner ids that
/// may act in each: what is observed, and what counts as owned.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Scopes {
    /// Owner ids per cluster.
    pub clusters: BTreeMap<ClusterRef, BTreeSet<String>>,
    /// Owner ids per region.
    pub regions: BTreeMap<RegionRef, BTreeSet<String>>,
}

/// The [`Scopes`] of a fleet's targets.
pub fn scopes(fleet: &Fleet) -> Scopes {
    let mut s = Scopes {
        clusters: BTreeMap::new(),
        regions: BTreeMap::new(),
    };
    for t in fleet.targets.values() {
        if let Some(g) = &t.spec.gke {
            s.clusters
                .entry(ClusterRef {
                    project: t.spec.project.clone(),
                    location: g.location.clone(),
                    name: g.name.clone(),
                })
                .or_default()
                .insert(t.spec.owner_id.clone());
        }
        s.regions
            .entry(RegionRef {
                project: t.spec.project.clone(),
                region: crate::spec::validate::region_of(&t.spec.zone).to_string(),
            })
            .or_default()
            .insert(t.spec.owner_id.clone());
    }
    s
}

fn unmanaged_note(np: &NodePool) -> String {
    let Some(c) = np.config.as_ref() else {
        return "not created by slicectl".to_string();
    };
    let l = &c.labels;
    if l.get(ownership::TPU_PROVISIONER_MANAGER)
        .map(String::as_str)
        == Some("tpu-provisioner")
    {
        // Recompute tpu-provisioner's selective hash from the live pool: a
        // match means the pool is as tpu-provisioner made it (adoptable).
        return match l.get(ownership::TPU_PROVISIONER_HASH) {
            Some(stored) => {
                let mut labels = l.clone();
                labels.remove(ownership::TPU_PROVISIONER_HASH);
                labels.retain(|k, _| !is_server_label(k));
                let computed = provisioner_hash::tpu_provisioner_hash(
                    &labels,
                    &c.machine_type,
                    c.reservation_affinity.as_ref(),
                    c.spot,
                );
                if &computed == stored {
                    "created by tpu-provisioner (its node-pool hash verifies)".to_string()
                } else {
                    format!(
                        "created by tpu-provisioner, changed since (its hash {stored} ≠ {computed} recomputed)"
                    )
                }
            }
            None => "created by tpu-provisioner (no node-pool hash)".to_string(),
        };
    }
    match Ownership::from_labels(l) {
        Some(o) => format!("owned by another slicectl owner id {:?}", o.owner),
        None => "not created by slicectl".to_string(),
    }
}

/// Labels GKE manages itself on `config.labels`; never compared.
fn is_server_label(k: &str) -> bool {
    k.starts_with("cloud.google.com/gke-")
}

fn in_place_view(np: &NodePool, desired: Option<&NodePool>) -> Projection {
    let mut p = Projection::new();
    let Some(c) = &np.config else { return p };
    let want_tpu_taint = desired
        .and_then(|d| d.config.as_ref())
        .is_some_and(|c| c.taints.iter().any(|t| t.key == "google.com/tpu"));
    for (k, v) in &c.labels {
        if !is_server_label(k) {
            p.insert(format!("config.labels[{k:?}]"), Value::from(v.clone()));
        }
    }
    let taints: Vec<Value> = c
        .taints
        .iter()
        .filter(|t| want_tpu_taint || t.key != "google.com/tpu")
        .map(|t| Value::from(format!("{}={}:{}", t.key, t.value, t.effect)))
        .collect();
    if !taints.is_empty() {
        p.insert("config.taints".into(), Value::Array(taints));
    }
    for (k, v) in &c.resource_labels {
        if !k.starts_with("goog-") {
            p.insert(
                format!("config.resourceLabels[{k:?}]"),
                Value::from(v.clone()),
            );
        }
    }
    p
}

fn fmt_value(v: &Option<Value>) -> String {
    match v {
        Some(v) => v.to_string(),
        None => "(unset)".to_string(),
    }
}

/// Which forced change to name in a replacement's reason: the ones a person
/// edits (topology, machine type, capacity) before derived ones (node count).
fn reason_rank(path: &str) -> usize {
    const ORDER: &[&str] = &[
        "placementPolicy.tpuTopology",
        "workloadPolicy.acceleratorTopology",
        "config.machineType",
        "placementPolicy",
        "config.spot",
        "config.reservationAffinity",
        "config.flexStart",
        "locations",
    ];
    ORDER
        .iter()
        .position(|p| path.starts_with(p))
        .unwrap_or(ORDER.len())
}

fn replace_reason(changes: &[FieldChange]) -> String {
    let forced: Vec<&FieldChange> = changes.iter().filter(|c| c.forces_replacement).collect();
    match forced.iter().min_by_key(|c| reason_rank(&c.path)) {
        Some(c) => {
            let more = match forced.len() - 1 {
                0 => String::new(),
                1 => " (and 1 more field)".to_string(),
                n => format!(" (and {n} more fields)"),
            };
            format!(
                "replace because {} {} → {} forces replacement{more}",
                c.path,
                fmt_value(&c.before),
                fmt_value(&c.after)
            )
        }
        None => "replace because the stored spec hash differs from the desired one".to_string(),
    }
}

/// Whether a live resource must be replaced. With a stored hash of this
/// version, the hash is the truth about what was sent. With another version,
/// or no hash at all (someone replaced the labels by hand), the fields are
/// compared: equal fields re-stamp the hash in place instead of replacing.
fn stale_hash(own: Option<&Ownership>, desired_hash: &str, repl_changes: &[FieldChange]) -> bool {
    match own.map(|o| (o.hash_version.as_deref(), o.spec_hash.as_deref())) {
        Some((Some(v), Some(h))) if v == HASH_VERSION => h != desired_hash,
        _ => !repl_changes.is_empty(),
    }
}

/// Compares a live managed node pool with its desired state.
fn compare_pool(
    d: &DesiredReplica,
    live: &NodePool,
    st: &inventory::ClusterState,
) -> Option<(ActionKind, String, Vec<FieldChange>, Option<String>)> {
    let running = st
        .running_operation(&live.name)
        .map(|o| (o.name.clone(), o.operation_type.clone()));
    let status = live.status.as_deref().unwrap_or("");
    if status == "STOPPING" {
        let op = running.as_ref().map(|r| r.0.clone());
        return Some((
            ActionKind::Create,
            "the node pool is being deleted by an earlier operation; it will be created again once that finishes".into(),
            Vec::new(),
            op,
        ));
    }
    let desired_proj = hash::node_pool_projection(&d.node_pool);
    let live_proj = hash::live_node_pool_projection(live, &desired_proj);
    let mut repl_changes = hash::diff(&live_proj, &desired_proj, true);
    let in_place = hash::diff(
        &in_place_view(live, Some(&d.node_pool)),
        &in_place_view(&d.node_pool, None),
        false,
    );

    if status == "ERROR" {
        let why = live
            .conditions
            .iter()
            .filter_map(|c| c.code.clone().or(c.message.clone()))
            .chain(live.status_message.clone())
            .collect::<Vec<_>>()
            .join("; ");
        let mut changes = repl_changes;
        changes.extend(in_place);
        return Some((
            ActionKind::Replace,
            format!(
                "replace because the node pool is in ERROR state{}",
                if why.is_empty() {
                    String::new()
                } else {
                    format!(" ({why})")
                }
            ),
            changes,
            None,
        ));
    }

    let own = live
        .config
        .as_ref()
        .and_then(|c| Ownership::from_labels(&c.labels));
    let desired_hash = hash::spec_hash(&desired_proj);
    let needs_replace = stale_hash(own.as_ref(), &desired_hash, &repl_changes);
    if needs_replace {
        if repl_changes.is_empty() {
            // The stored hash differs but the normalised fields look equal:
            // still replace (the hash records what was sent), but say so.
            repl_changes = Vec::new();
        }
        let reason = replace_reason(&repl_changes);
        let mut changes = repl_changes;
        changes.extend(in_place);
        return Some((ActionKind::Replace, reason, changes, running.map(|r| r.0)));
    }
    if !in_place.is_empty() {
        let what: BTreeSet<&str> = in_place
            .iter()
            .map(|c| {
                if c.path.starts_with("config.labels") {
                    "labels"
                } else if c.path.starts_with("config.taints") {
                    "taints"
                } else {
                    "resource labels"
                }
            })
            .collect();
        let what: Vec<&str> = what.into_iter().collect();
        return Some((
            ActionKind::Update,
            format!("update in place because {} changed", what.join(" and ")),
            in_place,
            running.map(|r| r.0),
        ));
    }
    if let Some((op, ty)) = running {
        return Some((
            ActionKind::Wait,
            format!(
                "operation {op} ({ty}) is already running on this node pool; waiting for it instead of starting a duplicate"
            ),
            Vec::new(),
            Some(op),
        ));
    }
    None
}

/// Builds the plan that converges the live state to the fleet.
pub fn plan(fleet: &Fleet, inventory: &Inventory, opts: &PlanOptions) -> Result<Plan, PlanError> {
    build(fleet, inventory, opts, PlanMode::Apply)
}

/// Builds the teardown plan: every resource owned by the fleet's targets is
/// deleted (node pools before their workload policies), at most
/// `max_destroy` of them.
pub fn plan_destroy(
    fleet: &Fleet,
    inventory: &Inventory,
    max_destroy: usize,
) -> Result<Plan, PlanError> {
    let opts = PlanOptions {
        max_destroy,
        allow_empty_source: true,
    };
    build(fleet, inventory, &opts, PlanMode::Destroy)
}

/// How to take back a node pool whose slicectl labels were removed by hand.
fn reclaim_hint(d: &DesiredReplica, live: &NodePool) -> String {
    let labels = live.config.as_ref().map(|c| &c.labels);
    let has = |k: &str| labels.is_some_and(|l| l.contains_key(k));
    let looks_ours = [
        ownership::MANAGED_BY,
        ownership::OWNER,
        ownership::SLICE,
        ownership::REPLICA,
        ownership::SPEC_HASH,
    ]
    .iter()
    .any(|k| has(k));
    if labels.and_then(Ownership::from_labels).is_some() {
        // Another owner's: not ours to take.
        return String::new();
    }
    format!(
        ". If it is this slice's pool and lost its slicectl labels (`gcloud container node-pools update \
             --node-labels` replaces them all){}, put these labels back and apply again: \
             {}=slicectl, {}={}, {}={}, {}={} (slicectl then compares it field by field and re-stamps it)",
        if looks_ours {
            ": it still has some of them"
        } else {
            ""
        },
        ownership::MANAGED_BY,
        ownership::OWNER,
        d.owner,
        ownership::SLICE,
        d.slice,
        ownership::REPLICA,
        d.replica
    )
}

/// Why a live resource is deleted in apply mode: the replica is no longer
/// wanted, or it now lives elsewhere (another target or name).
fn delete_reason(
    fleet: &Fleet,
    desired: &[DesiredReplica],
    o: &Ownership,
    what: &str,
    here: &str,
) -> String {
    let Some(s) = fleet.slices.get(&o.slice) else {
        return format!("delete because slice {} is no longer in the specs", o.slice);
    };
    if o.replica >= s.spec.replicas {
        return format!(
            "delete because replica {} of slice {} is no longer desired (replicas: {})",
            o.replica, o.slice, s.spec.replicas
        );
    }
    match desired
        .iter()
        .find(|d| d.slice == o.slice && d.replica == o.replica)
    {
        Some(d) if what == "node pool" => format!(
            "delete because replica {} of slice {} moved: it is now node pool {} in {} (target {}), not {here}",
            o.replica, o.slice, d.node_pool.name, d.cluster, s.spec.target
        ),
        Some(d) => match &d.workload_policy {
            Some(p) => format!(
                "delete because replica {} of slice {} moved: its workload policy is now {} in {}, not {here}",
                o.replica, o.slice, p.policy.name, p.region
            ),
            None => format!(
                "delete because replica {} of slice {} no longer needs a workload policy",
                o.replica, o.slice
            ),
        },
        None => format!(
            "delete because replica {} of slice {} is no longer rendered here",
            o.replica, o.slice
        ),
    }
}

fn refusal(a: &Action, code: &str, message: String) -> Refusal {
    Refusal {
        kind: a.kind,
        name: a.name.clone(),
        address: a.address.clone(),
        slice: a.slice.clone(),
        replica: a.replica,
        scope: a.scope.clone(),
        action: a.action,
        code: code.to_string(),
        message,
    }
}

/// The desired pool with the live pool's hash labels: an in-place update
/// that changes labels, taints and protection but not the recorded hash
/// (the replacement it defers must still be seen by the next plan).
fn keep_live_hash(desired: &NodePool, live: &NodePool) -> NodePool {
    let mut out = desired.clone();
    let live_labels = live.config.as_ref().map(|c| &c.labels);
    if let Some(cfg) = out.config.as_mut() {
        for k in [ownership::SPEC_HASH, ownership::HASH_VERSION] {
            match live_labels.and_then(|l| l.get(k)) {
                Some(v) => cfg.labels.insert(k.to_string(), v.clone()),
                None => cfg.labels.remove(k),
            };
        }
    }
    out
}

fn build(
    fleet: &Fleet,
    inv: &Inventory,
    opts: &PlanOptions,
    mode: PlanMode,
) -> Result<Plan, PlanError> {
    let desired: Vec<DesiredReplica> = match mode {
        PlanMode::Apply => render_fleet(fleet),
        PlanMode::Destroy => Vec::new(),
    };
    let sc = scopes(fleet);
    let empty_cluster = inventory::ClusterState::default();
    let empty_region = inventory::RegionState::default();
    let mut actions = Vec::new();
    let mut unmanaged = Vec::new();
    let mut refused: Vec<Refusal> = Vec::new();
    let mut errors: Vec<PlanError> = Vec::new();

    // Validation rejects slices whose names collide (see
    // `spec::validate::check_name_collisions`); refuse here too rather than
    // trust it, since two slices sharing a name would fight over one pool.
    let mut seen: BTreeMap<(String, String), String> = BTreeMap::new();
    for d in &desired {
        let mut names = vec![(d.cluster.to_string(), d.node_pool.name.clone())];
        if let Some(p) = &d.workload_policy {
            names.push((p.region.to_string(), p.policy.name.clone()));
        }
        for key in names {
            let who = format!("slice {} replica {}", d.slice, d.replica);
            if let Some(first) = seen.insert(key.clone(), who.clone()) {
                errors.push(PlanError::NameCollision {
                    kind: "resource",
                    name: key.1,
                    scope: key.0,
                    note: format!("both {first} and {who} render to this name"),
                });
            }
        }
    }

    // Desired resources.
    let mut wanted_pools: BTreeSet<(ClusterRef, String)> = BTreeSet::new();
    let mut wanted_policies: BTreeSet<(RegionRef, String)> = BTreeSet::new();
    for d in &desired {
        let st = inv.clusters.get(&d.cluster).unwrap_or(&empty_cluster);
        let timeout_secs = d.operation_timeout.as_secs();
        if let Some(p) = &d.workload_policy {
            wanted_policies.insert((p.region.clone(), p.policy.name.clone()));
            let rst = inv.regions.get(&p.region).unwrap_or(&empty_region);
            let live = rst.policies.iter().find(|x| x.name == p.policy.name);
            let addr = address(&d.slice, d.replica, ResourceKind::WorkloadPolicy);
            let scope = Scope::Region(p.region.clone());
            let base = |action, reason: String, changes, before, op| Action {
                action,
                kind: ResourceKind::WorkloadPolicy,
                name: p.policy.name.clone(),
                address: addr.clone(),
                slice: d.slice.clone(),
                replica: d.replica,
                scope: scope.clone(),
                reason,
                changes,
                before,
                after: to_value(&p.policy),
                operation: op,
                timeout_secs,
            };
            match live {
                None => actions.push(base(
                    ActionKind::Create,
                    format!(
                        "create because replica {} of slice {} needs a workload policy and none exists",
                        d.replica, d.slice
                    ),
                    Vec::new(),
                    None,
                    rst.running_operation(&p.policy.name)
                        .map(|o| o.name.clone()),
                )),
                Some(l) => {
                    let own = l
                        .description
                        .as_deref()
                        .and_then(Ownership::from_description);
                    match own {
                        Some(o)
                            if sc
                                .regions
                                .get(&p.region)
                                .is_some_and(|s| s.contains(&o.owner)) =>
                        {
                            let want = hash::policy_projection(&p.policy);
                            let have = hash::policy_projection(l);
                            let changes = hash::diff(&have, &want, true);
                            let stale = stale_hash(Some(&o), &hash::spec_hash(&want), &changes);
                            let running = rst.running_operation(&l.name).map(|o| o.name.clone());
                            if stale {
                                let a = base(
                                    ActionKind::Replace,
                                    replace_reason(&changes),
                                    changes,
                                    to_value(l),
                                    running,
                                );
                                if d.prevent_destroy {
                                    let msg = PlanError::Protected {
                                        address: a.address.clone(),
                                        name: a.name.clone(),
                                        verb: "replaced",
                                        verb_inf: "replace",
                                        reason: a.reason.clone(),
                                    };
                                    refused.push(refusal(&a, "protected", msg.to_string()));
                                } else {
                                    actions.push(a);
                                }
                            } else if let Some(op) = running {
                                actions.push(base(
                                    ActionKind::Wait,
                                    format!(
                                        "operation {op} is already running on this workload policy; waiting for it"
                                    ),
                                    Vec::new(),
                                    to_value(l),
                                    Some(op),
                                ));
                            }
                        }
                        other => {
                            let a = base(ActionKind::Create, String::new(), Vec::new(), None, None);
                            let msg = PlanError::NameTaken {
                                kind: "workload policy",
                                name: l.name.clone(),
                                scope: p.region.to_string(),
                                note: match other {
                                    Some(o) => format!("owned by slicectl owner id {:?}", o.owner),
                                    None => "not created by slicectl".into(),
                                },
                                hint: String::new(),
                            };
                            refused.push(refusal(&a, "name_taken", msg.to_string()));
                        }
                    }
                }
            }
        }

        wanted_pools.insert((d.cluster.clone(), d.node_pool.name.clone()));
        let live = st.node_pools.iter().find(|x| x.name == d.node_pool.name);
        let addr = address(&d.slice, d.replica, ResourceKind::NodePool);
        let mk = |action, reason: String, changes, before, op, after: &NodePool| Action {
            action,
            kind: ResourceKind::NodePool,
            name: d.node_pool.name.clone(),
            address: addr.clone(),
            slice: d.slice.clone(),
            replica: d.replica,
            scope: Scope::Cluster(d.cluster.clone()),
            reason,
            changes,
            before,
            after: to_value(after),
            operation: op,
            timeout_secs,
        };
        let Some(l) = live else {
            actions.push(mk(
                ActionKind::Create,
                format!(
                    "create because replica {} of slice {} does not exist yet",
                    d.replica, d.slice
                ),
                Vec::new(),
                None,
                st.running_operation(&d.node_pool.name)
                    .map(|o| o.name.clone()),
                &d.node_pool,
            ));
            continue;
        };
        let own = l
            .config
            .as_ref()
            .and_then(|c| Ownership::from_labels(&c.labels));
        let ours = own.as_ref().is_some_and(|o| {
            sc.clusters
                .get(&d.cluster)
                .is_some_and(|s| s.contains(&o.owner))
        });
        if !ours {
            let a = mk(
                ActionKind::Create,
                String::new(),
                Vec::new(),
                None,
                None,
                &d.node_pool,
            );
            let msg = PlanError::NameTaken {
                kind: "node pool",
                name: l.name.clone(),
                scope: d.cluster.to_string(),
                note: unmanaged_note(l),
                hint: reclaim_hint(d, l),
            };
            refused.push(refusal(&a, "name_taken", msg.to_string()));
            continue;
        }
        let Some((kind, reason, changes, op)) = compare_pool(d, l, st) else {
            continue;
        };
        let before = Some(hash::display_live_node_pool(l, Some(&d.node_pool)));
        let live_protected = own.as_ref().is_some_and(|o| o.prevent_destroy);
        if kind != ActionKind::Replace || !(d.prevent_destroy || live_protected) {
            actions.push(mk(kind, reason, changes, before, op, &d.node_pool));
            continue;
        }
        let a = mk(
            kind,
            reason,
            changes,
            before.clone(),
            op.clone(),
            &d.node_pool,
        );
        let protected = PlanError::Protected {
            address: a.address.clone(),
            name: a.name.clone(),
            verb: "replaced",
            verb_inf: "replace",
            reason: a.reason.clone(),
        };
        if d.prevent_destroy {
            let mut msg = protected.to_string();
            if l.status.as_deref() == Some("ERROR") {
                msg.push_str(&format!(
                    ". It stays in ERROR until then. To recover it, either lift the protection and apply twice, \
                     or delete it yourself (`gcloud container node-pools delete {} --cluster {} --location {} --project {}`) \
                     and apply to create it again",
                    l.name, d.cluster.name, d.cluster.location, d.cluster.project
                ));
            }
            refused.push(refusal(&a, "protected", msg));
            continue;
        }
        // The spec no longer protects the slice but the live pool still
        // carries the stamp: this apply lifts the stamp (in place, keeping
        // the recorded hash), the next one replaces. Protection always
        // takes two applies to remove, so one commit cannot bypass it.
        refused.push(refusal(
            &a,
            "protected_live",
            format!(
                "{} ({}) is still protected by preventDestroy on the live node pool, so this apply does not replace it ({}). \
                 Your spec no longer protects it: this apply lifts the protection in place; apply again to replace it",
                a.address, a.name, a.reason
            ),
        ));
        let lifted = keep_live_hash(&d.node_pool, l);
        let changes = hash::diff(
            &in_place_view(l, Some(&lifted)),
            &in_place_view(&lifted, None),
            false,
        );
        actions.push(mk(
            ActionKind::Update,
            "update in place to lift preventDestroy from the live node pool (the spec no longer sets it); \
             its replacement waits for the next apply"
                .to_string(),
            changes,
            before,
            op,
            &lifted,
        ));
    }

    // Live resources: owned but not desired → delete; not owned → unmanaged.
    let mut owned_live = 0usize;
    for (cluster, st) in &inv.clusters {
        let owners = sc.clusters.get(cluster);
        for l in &st.node_pools {
            let own = l
                .config
                .as_ref()
                .and_then(|c| Ownership::from_labels(&c.labels));
            let Some(o) = own.filter(|o| owners.is_some_and(|s| s.contains(&o.owner))) else {
                unmanaged.push(Unmanaged {
                    kind: ResourceKind::NodePool,
                    name: l.name.clone(),
                    scope: Scope::Cluster(cluster.clone()),
                    note: unmanaged_note(l),
                });
                continue;
            };
            owned_live += 1;
            if wanted_pools.contains(&(cluster.clone(), l.name.clone())) {
                continue;
            }
            let addr = address(&o.slice, o.replica, ResourceKind::NodePool);
            let running = st.running_operation(&l.name);
            let (kind, reason) = if l.status.as_deref() == Some("STOPPING") {
                (
                    ActionKind::Wait,
                    format!(
                        "the node pool is already being deleted{}; waiting for it",
                        running
                            .map(|r| format!(" by operation {}", r.name))
                            .unwrap_or_default()
                    ),
                )
            } else if mode == PlanMode::Destroy {
                (
                    ActionKind::Delete,
                    format!(
                        "delete because `slicectl destroy` tears down slice {}",
                        o.slice
                    ),
                )
            } else {
                (
                    ActionKind::Delete,
                    delete_reason(fleet, &desired, &o, "node pool", &cluster.to_string()),
                )
            };
            let a = Action {
                action: kind,
                kind: ResourceKind::NodePool,
                name: l.name.clone(),
                address: addr,
                slice: o.slice.clone(),
                replica: o.replica,
                scope: Scope::Cluster(cluster.clone()),
                reason,
                changes: Vec::new(),
                before: Some(hash::display_live_node_pool(l, None)),
                after: None,
                operation: running.map(|r| r.name.clone()),
                timeout_secs: crate::spec::DEFAULT_OPERATION_TIMEOUT.as_secs(),
            };
            if kind == ActionKind::Delete && o.prevent_destroy {
                let msg = PlanError::Protected {
                    address: a.address.clone(),
                    name: a.name.clone(),
                    verb: "destroyed",
                    verb_inf: "destroy",
                    reason: a.reason.clone(),
                };
                refused.push(refusal(&a, "protected", msg.to_string()));
                continue;
            }
            actions.push(a);
        }
    }
    for (region, st) in &inv.regions {
        let owners = sc.regions.get(region);
        for l in &st.policies {
            let own = l
                .description
                .as_deref()
                .and_then(Ownership::from_description);
            let Some(o) = own.filter(|o| owners.is_some_and(|s| s.contains(&o.owner))) else {
                continue; // policies of others are not listed: regions hold many unrelated policies
            };
            if wanted_policies.contains(&(region.clone(), l.name.clone())) {
                continue;
            }
            let running = st.running_operation(&l.name);
            let reason = match mode {
                PlanMode::Destroy => format!(
                    "delete because `slicectl destroy` tears down slice {}",
                    o.slice
                ),
                PlanMode::Apply => {
                    delete_reason(fleet, &desired, &o, "workload policy", &region.to_string())
                }
            };
            actions.push(Action {
                action: ActionKind::Delete,
                kind: ResourceKind::WorkloadPolicy,
                name: l.name.clone(),
                address: address(&o.slice, o.replica, ResourceKind::WorkloadPolicy),
                slice: o.slice.clone(),
                replica: o.replica,
                scope: Scope::Region(region.clone()),
                reason,
                changes: Vec::new(),
                before: to_value(l),
                after: None,
                operation: running.map(|r| r.name.clone()),
                timeout_secs: crate::spec::DEFAULT_OPERATION_TIMEOUT.as_secs(),
            });
        }
    }

    // A refused resource holds back the creates, replacements and deletes of
    // the rest of its slice replica (a policy must not be replaced under a
    // pool that stays, nor created for a pool that cannot be).
    let held: BTreeMap<(String, u32), String> = refused
        .iter()
        .map(|r| ((r.slice.clone(), r.replica), r.address.clone()))
        .collect();
    let (kept, held_back): (Vec<Action>, Vec<Action>) = actions.into_iter().partition(|a| {
        !held.contains_key(&(a.slice.clone(), a.replica))
            || matches!(a.action, ActionKind::Update | ActionKind::Wait)
    });
    actions = kept;
    for a in held_back {
        let by = held
            .get(&(a.slice.clone(), a.replica))
            .cloned()
            .unwrap_or_default();
        let msg = format!(
            "{} is held back ({} {}): {by} of the same slice replica is refused",
            a.address,
            a.action.as_str(),
            a.name
        );
        refused.push(refusal(&a, "held_back", msg));
    }

    // Safety rails over the whole plan.
    if mode == PlanMode::Apply {
        let pruning = actions
            .iter()
            .filter(|a| a.action == ActionKind::Delete)
            .count()
            + refused
                .iter()
                .filter(|r| r.action == ActionKind::Delete)
                .count();
        if fleet.slices.is_empty() && pruning > 0 && !opts.allow_empty_source {
            errors.insert(0, PlanError::EmptySource { live: owned_live });
        }
    }
    let destructive: Vec<&Action> = actions
        .iter()
        .filter(|a| a.action.is_destructive())
        .collect();
    if destructive.len() > opts.max_destroy {
        let slices: BTreeSet<String> = destructive
            .iter()
            .map(|a| format!("{}[{}]", a.slice, a.replica))
            .collect();
        errors.push(PlanError::TooManyDestructive {
            count: destructive.len(),
            max: opts.max_destroy,
            slices: slices.into_iter().collect(),
        });
    }
    match errors.len() {
        0 => {}
        1 => return Err(errors.remove(0)),
        _ => return Err(PlanError::Multiple(errors)),
    }

    actions.sort_by(|a, b| {
        (&a.slice, a.replica, a.kind, &a.name).cmp(&(&b.slice, b.replica, b.kind, &b.name))
    });
    unmanaged.sort_by(|a, b| (&a.scope, &a.name).cmp(&(&b.scope, &b.name)));
    refused.sort_by(|a, b| {
        (&a.slice, a.replica, a.kind, &a.name).cmp(&(&b.slice, b.replica, b.kind, &b.name))
    });
    let mut plan = Plan {
        format_version: FORMAT_VERSION,
        observed_fingerprint: inv.fingerprint(),
        mode,
        actions,
        unmanaged,
        refused,
        summary: Summary::default(),
    };
    plan.summary = plan.count();
    Ok(plan)
}
#[cfg(test)]
mod tests;
