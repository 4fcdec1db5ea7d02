//! What the planner knows about a resource kind, and the typed values it
//! plans with. Each cloud or cluster resource kind (node pool, workload
//! policy, …) implements [`Kind`] once, in its own module under
//! `crate::kinds`, and is registered there; the planner, the step graph and
//! the executor are generic over the registered kinds.
//!
//! Pure: no I/O. The shell half of a kind (observing and executing) is
//! `crate::apply::KindExec`.

use std::any::Any;
use std::collections::BTreeSet;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::hash::FieldChange;
use super::ownership::Ownership;
use crate::resource::{ClusterRef, KubeRef, ProjectRef, RegionRef, ZoneRef};
use crate::spec::{Slice, Target};

/// A resource kind's stable name (`node_pool`, `workload_policy`): used in
/// addresses, JSON output and metrics labels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct KindId(pub &'static str);

impl KindId {
    /// The name.
    pub fn as_str(self) -> &'static str {
        self.0
    }
}

impl fmt::Display for KindId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
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
    /// A compute zone (MIGs, instances).
    Zone(ZoneRef),
    /// A project's global scope (instance templates).
    Global(ProjectRef),
    /// A self-managed Kubernetes cluster (Nodes, bootstrap Secrets, the
    /// device plugin).
    Kube(KubeRef),
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Scope::Cluster(c) => c.fmt(f),
            Scope::Region(r) => r.fmt(f),
            Scope::Zone(z) => z.fmt(f),
            Scope::Global(p) => p.fmt(f),
            Scope::Kube(k) => k.fmt(f),
        }
    }
}

/// One resource: where, what kind, which name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ResourceId {
    /// Where it lives.
    pub scope: Scope,
    /// Its kind.
    pub kind: KindId,
    /// Its cloud name.
    pub name: String,
}

/// The slice replica a resource realises.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SliceRef {
    /// Slice name.
    pub slice: String,
    /// Replica index.
    pub replica: u32,
}

impl SliceRef {
    /// The owner of a resource shared by every slice in its scope (one per
    /// cluster, like the device plugin): no slice of its own.
    pub fn shared() -> SliceRef {
        SliceRef {
            slice: String::new(),
            replica: 0,
        }
    }

    /// Whether this is [`SliceRef::shared`].
    pub fn is_shared(&self) -> bool {
        self.slice.is_empty()
    }

    /// `slice.NAME[REPLICA].KIND`, or `shared.KIND` for a shared resource.
    pub fn address(&self, kind: KindId) -> String {
        if self.is_shared() {
            return format!("shared.{kind}");
        }
        format!("slice.{}[{}].{}", self.slice, self.replica, kind)
    }
}

/// A typed resource body (a node pool, a policy, …): each kind downcasts to
/// its own wire type, and every body can show itself as JSON.
pub trait Resource: Any + fmt::Debug + Send + Sync {
    /// The body as Google's JSON.
    fn to_json(&self) -> Value;
    /// For downcasting to the kind's own type.
    fn as_any(&self) -> &dyn Any;
}

impl<T: Serialize + fmt::Debug + Send + Sync + 'static> Resource for T {
    fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// A shared typed body.
pub type Body = Arc<dyn Resource>;

/// Downcasts a body to a kind's wire type.
pub fn body_as<T: 'static>(b: &Body) -> Option<&T> {
    b.as_any().downcast_ref::<T>()
}

/// A rendered desired resource.
#[derive(Debug, Clone)]
pub struct Desired {
    /// Which resource.
    pub id: ResourceId,
    /// The slice replica it realises.
    pub owner: SliceRef,
    /// The owner id of its target.
    pub owner_id: String,
    /// The exact body to send.
    pub body: Body,
    /// The spec protects it (`lifecycle.preventDestroy`).
    pub prevent_destroy: bool,
    /// Timeout of one long-running operation on it.
    pub timeout: Duration,
}

/// A live resource, as observed.
#[derive(Debug, Clone)]
pub struct LiveResource {
    /// Where it lives.
    pub scope: Scope,
    /// Its body as the API returned it.
    pub body: Body,
}

/// An operation found in the cloud, attributed to one resource.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OperationRecord {
    /// Where the resource lives.
    pub scope: Scope,
    /// The resource's name.
    pub target: String,
    /// The operation's name.
    pub name: String,
    /// What it does, as the API names it (`CREATE_NODE_POOL`, `insert`, …).
    pub operation_type: String,
    /// Whether it is still running.
    pub running: bool,
    /// The error it finished with, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// When it finished (RFC 3339), for the most recent error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_time: Option<String>,
}

/// The state of a live resource as the planner cares about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LiveState {
    /// Usable, or becoming so.
    Ok,
    /// Being deleted.
    Stopping,
    /// Not a working resource: it must be replaced, once no operation runs
    /// on it. For a node pool: `ERROR`, or `RUNNING_WITH_ERROR` (some nodes
    /// failed; a TPU slice is all-or-nothing).
    Error {
        /// The status the cloud reports (`ERROR`, `RUNNING_WITH_ERROR`, `INVALID`, …).
        status: String,
        /// What the cloud says about it (conditions, status message).
        detail: String,
    },
}

/// A group of in-place fields that is updated by one request (labels,
/// taints, …). Each kind defines its own; the executor matches on them,
/// never on field paths.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct UpdateGroup(pub &'static str);

/// How a live resource differs from its desired state.
#[derive(Debug, Clone, PartialEq)]
pub enum Comparison {
    /// Nothing to do.
    Equal,
    /// Update in place: the changed fields and the request groups they need.
    Update {
        /// Field-level changes.
        changes: Vec<FieldChange>,
        /// Request groups to send.
        groups: BTreeSet<UpdateGroup>,
    },
    /// Replace: fields whose change forces a replacement (empty when only
    /// the stored hash says so), plus any in-place changes.
    Replace {
        /// Field-level changes.
        changes: Vec<FieldChange>,
        /// Whether only the stored hash differs (no field does).
        hash_only: bool,
    },
}

/// [`NotReady::code`] (and the apply failure code) of a quota error: the
/// VMs will not come until the quota is raised or chips are freed.
pub const QUOTA_EXCEEDED: &str = "quota_exceeded";

/// Why a slice replica is known not to become ready as it stands
/// ([`Kind::not_ready`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotReady {
    /// A stable short code: `stockout`, or the kind's own.
    pub code: &'static str,
    /// The cloud's words.
    pub message: String,
}

impl NotReady {
    /// `stockout` when `message` carries one of the cloud's stockout codes
    /// (GCE's `*RESOURCE_POOL_EXHAUSTED*`, GKE's `GCE_STOCKOUT`,
    /// gcp-api.md §3.3), `quota_exceeded` when it carries a quota error
    /// (Compute's `QUOTA_EXCEEDED` in a MIG's errors, GKE's
    /// `GCE_QUOTA_EXCEEDED`), else `otherwise`.
    pub fn code_of(message: &str, otherwise: &'static str) -> &'static str {
        if message.contains("RESOURCE_POOL_EXHAUSTED") || message.contains("GCE_STOCKOUT") {
            "stockout"
        } else if message.contains("QUOTA_EXCEEDED") {
            QUOTA_EXCEEDED
        } else {
            otherwise
        }
    }
}

/// What `status` shows for a live resource.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LiveReport {
    /// State, as the cloud names it.
    pub state: String,
    /// Nodes, `N/H`, or empty.
    pub nodes: String,
    /// The error the resource itself reports, if any.
    pub error: String,
    /// The topology the live resource has, where it says (empty otherwise):
    /// `status` shows it, not the desired one, while a replacement is
    /// pending.
    pub topology: String,
}

/// What the planner needs to render a slice replica.
#[derive(Debug, Clone, Copy)]
pub struct RenderCtx<'a> {
    /// The slice's target.
    pub target: &'a Target,
    /// The slice.
    pub slice: &'a Slice,
    /// The replica index.
    pub replica: u32,
    /// The name the replica's cloud resources are named after: the slice's
    /// own name, or a name in its `previousNames` whose live resources it
    /// adopts (a declared rename keeps `alpha-0` as gamma's replica 0).
    pub stem: &'a str,
}

impl<'a> RenderCtx<'a> {
    /// The slice as the kinds whose ownership is immutable (written in a
    /// compute resource's description or a template's VM labels) render
    /// it: under the stem's name, so an adopted resource compares equal to
    /// what is live and keeps the old slice name in its ownership.
    pub fn stem_slice(&self) -> std::borrow::Cow<'a, Slice> {
        if self.stem == self.slice.name {
            return std::borrow::Cow::Borrowed(self.slice);
        }
        let mut s = self.slice.clone();
        s.name = self.stem.to_string();
        std::borrow::Cow::Owned(s)
    }

    /// The desired resource `name` of `kind` in `scope` for this slice
    /// replica, with its owner, protection and timeout from the spec.
    pub fn desired<T: Resource>(
        &self,
        kind: KindId,
        scope: Scope,
        name: String,
        body: T,
    ) -> Desired {
        Desired {
            id: ResourceId { scope, kind, name },
            owner: SliceRef {
                slice: self.slice.name.clone(),
                replica: self.replica,
            },
            owner_id: self.target.spec.owner_id.clone(),
            body: Arc::new(body),
            prevent_destroy: self.slice.spec.lifecycle.prevent_destroy,
            timeout: self.slice.operation_timeout,
        }
    }
}

/// The pure half of a resource kind: rendering, picking live resources,
/// ownership and comparison. Implemented once per kind under `crate::kinds`.
pub trait Kind: Send + Sync {
    /// The kind's name.
    fn id(&self) -> KindId;

    /// The scopes this kind's resources live in for Target `t` (a node
    /// pool in its GKE cluster, a policy in its region): where slicectl
    /// observes, and what the Target's owner id owns. Empty for a Target
    /// whose backend has none of this kind.
    fn scopes(&self, t: &Target) -> Vec<Scope>;

    /// Human spelling (`node pool`).
    fn noun(&self) -> &'static str;

    /// Kinds this one needs first: it is created after them and deleted
    /// before them (within one slice replica).
    fn depends_on(&self) -> &'static [KindId] {
        &[]
    }

    /// Whether live resources of this kind that slicectl does not own are
    /// listed as unmanaged (node pools: yes; region-wide policies: no).
    fn lists_unmanaged(&self) -> bool {
        true
    }

    /// Whether this kind's resource is the one `status` reports a replica by.
    fn is_primary(&self) -> bool {
        false
    }

    /// Whether `status` takes a replica's nodes column from this kind (the
    /// Nodes of a self-managed slice, beside its primary MIG).
    fn reports_nodes(&self) -> bool {
        false
    }

    /// Whether slicectl only observes and reports this kind, never acts on
    /// it (a GKE slice's Nodes, which GKE makes from the node pool): the
    /// planner plans nothing for it, neither for a desired resource nor for
    /// a live one; `status` and the status objects read it.
    fn observe_only(&self) -> bool {
        false
    }

    /// Whether one resource of this kind serves every slice in its scope
    /// (the device plugin of a cluster): rendered by each slice that needs
    /// it, planned once (owner [`SliceRef::shared`]), created before any
    /// slice resource that depends on it and deleted after all of them.
    fn shared(&self) -> bool {
        false
    }

    /// Whether a live resource of this kind is replaced when one of the
    /// (non-shared) kinds it depends on is created again or replaced in the
    /// same slice replica: a slice's Nodes are other VMs' once its MIG is.
    fn replaced_with_dependencies(&self) -> bool {
        false
    }

    /// Whether deleting a resource of this kind ends with a cleanup step
    /// that runs after the kinds it depends on are deleted too (Node objects
    /// and bootstrap Secrets go after the VMs that were those nodes).
    fn cleanup_after_dependencies(&self) -> bool {
        false
    }

    /// The desired resources of one slice replica (none when the slice's
    /// backend does not use this kind).
    fn render(&self, ctx: RenderCtx<'_>) -> Vec<Desired>;

    /// The cloud name of a live body.
    fn name(&self, live: &Body) -> String;

    /// Who owns a live resource, read from it (labels or description):
    /// the only place ownership is read, for every kind.
    fn ownership(&self, live: &Body) -> Option<Ownership>;

    /// The JobSet a live workload slice's resource is for, and the chips it
    /// holds (the node pool that holds a workload slice's capacity; `None`
    /// for every other kind, and for slices from the specs).
    fn workload_slice(&self, _live: &Body) -> Option<(crate::workload::Origin, u32)> {
        None
    }

    /// What adopting this live resource (slicectl does not own it) makes
    /// it: the slice replica and the spec that describe it, or why they
    /// cannot (`slicectl adopt`). `None` when the kind is not adopted on
    /// its own, or the resource is not in `target`'s zone.
    fn adoptable(
        &self,
        _live: &Body,
        _target: &crate::spec::Target,
    ) -> Option<super::adopt::Adoptable> {
        None
    }

    /// The live body with its `preventDestroy` stamp lifted, and the
    /// in-place change that makes it so: for a copy a slice left behind
    /// (its Target moved), which no desired body lifts, once the slice's
    /// spec no longer protects it. `None` when the kind records the stamp
    /// where it cannot change in place, or the body carries none.
    fn unprotect(&self, _live: &Body) -> Option<(Body, Comparison)> {
        None
    }

    /// The live body with slicectl's ownership labels removed, and the
    /// in-place change that makes it so (`slicectl release`). `None` when
    /// the kind records ownership where it cannot change in place.
    fn unlabel(&self, _live: &Body) -> Option<(Body, Comparison)> {
        None
    }

    /// The live state of a resource.
    fn state(&self, live: &Body) -> LiveState;

    /// Compares a live resource this reconciler owns with its desired state.
    fn compare(&self, desired: &Desired, live: &Body) -> Comparison;

    /// The live body as shown next to the desired one (output-only fields
    /// and unset server defaults removed).
    fn display_live(&self, live: &Body, desired: Option<&Desired>) -> Value;

    /// What can be said about a resource that is not this reconciler's.
    fn unmanaged_note(&self, live: &Body) -> String {
        match self.ownership(live) {
            Some(o) => format!("owned by another slicectl owner id {:?}", o.owner),
            None => "not created by slicectl".to_string(),
        }
    }

    /// How telling a change of the field at `path` is as the reason of a
    /// replacement, lower first: the plan names the most telling of the
    /// fields that force it (a node pool's topology before its capacity
    /// model). Fields a kind does not rank come last, in the order found.
    fn replacement_rank(&self, _path: &str) -> usize {
        usize::MAX
    }

    /// Whether a change of the owner id is written onto a live resource in
    /// place (labels), so that a Target's `ownerId` can move without a
    /// delete. Kinds that record ownership where slicectl does not rewrite
    /// it (a compute resource's description) say `false`.
    fn owner_relabels_in_place(&self) -> bool {
        false
    }

    /// How to take back a resource whose ownership was removed by hand, if
    /// the kind can say (appended to the refusal).
    fn reclaim_hint(&self, _desired: &Desired, _live: &Body) -> String {
        String::new()
    }

    /// How to recover a protected resource stuck in an error state
    /// (appended to the refusal).
    fn error_recovery_hint(&self, _id: &ResourceId, _status: &str) -> String {
        String::new()
    }

    /// A body that lifts the live `preventDestroy` stamp in place without
    /// recording the deferred replacement, when the kind carries a stamp.
    fn lift_protection(&self, _desired: &Desired, _live: &Body) -> Option<(Body, Comparison)> {
        None
    }

    /// Whether a live resource of a kind that records the `preventDestroy`
    /// stamp (a MIG's description says `prevent-destroy=true|false`) has
    /// no stamp at all: made before the kind was stamped, so whether its
    /// slice is protected cannot be read from it (`protection_unknown`
    /// when its Nodes cannot say either). The next apply that plans the
    /// slice writes the stamp.
    fn protection_unrecorded(&self, _live: &Body) -> bool {
        false
    }

    /// How many hosts of its slice replica a live resource runs, when it is
    /// the one holding the replica's capacity (a MIG's RUNNING VMs).
    fn running_hosts(&self, _live: &Body) -> Option<u32> {
        None
    }

    /// How many hosts of its slice replica a live resource stands for in the
    /// cluster, when it carries a per-host protection stamp (a self-managed
    /// slice's Nodes): fewer of them than running hosts means the Nodes
    /// cannot speak for every host (what matters when the MIG has no stamp
    /// of its own, see [`Kind::protection_unrecorded`]).
    fn stamped_hosts(&self, _live: &Body) -> Option<u32> {
        None
    }

    /// When hosts of the replica run without being in the cluster (more
    /// running hosts than [`Kind::stamped_hosts`]) and no join is under way
    /// in `live` (this kind's live body, if any): the update group that
    /// recreates the hosts that lost their place (a self-managed slice's
    /// VMs whose Nodes were deleted), if the kind can for `desired` (the
    /// step's desired body).
    fn recreate_lost_hosts(
        &self,
        _desired: Option<&Body>,
        _live: Option<&Body>,
    ) -> Option<UpdateGroup> {
        None
    }

    /// Whether a resource of this kind, as `desired`, uses the live
    /// resource `id` (a MIG its instance template or workload policy):
    /// what a replacement moves off is deleted after it.
    fn uses(&self, _desired: &Body, _id: &ResourceId) -> bool {
        true
    }

    /// Why desired resource `desired` (with `live`, this kind's live body,
    /// if any) waits on something slicectl does not drive: a brought
    /// template's VMs that have not joined the cluster. `Some(note)` makes
    /// the planner leave out its create step when nothing it depends on
    /// changes in this replica (no step could succeed), and show the note
    /// instead; a step the plan has for it otherwise stays.
    fn unjoined(&self, _desired: &Desired, _live: Option<&Body>) -> Option<String> {
        None
    }

    /// The Nodes that run the capacity of live resource `id` (owned as
    /// `own`), when destroying it destroys capacity workloads run on (a node
    /// pool, a MIG): the Kubernetes API they are in and the labels that pick
    /// them out. `kube` is the Kubernetes API of the resource's Target, if
    /// it has one. The planner holds such a destructive step while the
    /// Nodes are busy (`crate::plan::workload`).
    fn hosts(
        &self,
        _id: &ResourceId,
        _own: &Ownership,
        _kube: Option<&KubeRef>,
    ) -> Option<super::workload::Hosts> {
        None
    }

    /// Reads a live body from Google's JSON (golden inventories, fakes).
    fn parse(&self, json: Value) -> Result<Body, String>;

    /// Why a live primary resource's slice replica is known not to become
    /// ready while it stays as it is, if the resource says so: a stable
    /// code (`stockout` when the cloud reports no capacity) and the cloud's
    /// words. An apply that leaves a replica so does not report success
    /// (`engine::Report::not_ready`). By default: a resource in an error
    /// state (a GKE pool in ERROR or RUNNING_WITH_ERROR).
    fn not_ready(&self, live: &Body) -> Option<NotReady> {
        match self.state(live) {
            LiveState::Error { status, detail } => {
                let message = if detail.is_empty() {
                    status
                } else {
                    format!("{status}: {detail}")
                };
                Some(NotReady {
                    code: NotReady::code_of(&message, "error_state"),
                    message,
                })
            }
            _ => None,
        }
    }

    /// What `status` shows for a live primary resource of a slice needing
    /// `hosts` hosts.
    fn report(&self, live: &Body, hosts: u32) -> LiveReport {
        let _ = hosts;
        LiveReport {
            state: match self.state(live) {
                LiveState::Ok => "OK".into(),
                LiveState::Stopping => "STOPPING".into(),
                LiveState::Error { status, .. } => status,
            },
            nodes: String::new(),
            error: match self.state(live) {
                LiveState::Error { detail, .. } => detail,
                _ => String::new(),
            },
            topology: String::new(),
        }
    }

    /// What `status` shows for a slice replica's nodes, from a kind that
    /// [`Kind::reports_nodes`]: its live body (none: no Node found) judged
    /// against the desired one.
    fn report_nodes(&self, live: Option<&Body>, desired: &Desired, hosts: u32) -> LiveReport {
        let _ = desired;
        match live {
            Some(l) => self.report(l, hosts),
            None => LiveReport {
                nodes: format!("0/{hosts} ready"),
                ..LiveReport::default()
            },
        }
    }

    /// The fingerprint view of a live body: what must not move between a
    /// plan and its application (output-only noise removed).
    fn fingerprint_view(&self, live: &Body) -> Value {
        live.to_json()
    }
}
