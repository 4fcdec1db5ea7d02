//! Workload-driven slices: pending JobSets get TPU slices, and lose them
//! when they end (tpu-provisioner's job, inside slicectl's model). Pure:
//! plain structs of what was observed in a Target's cluster ([`Observed`]),
//! and [`derive`], which turns them, the Target's `workloads` policy and
//! the live workload slices into the slices to add to the fleet, the ones
//! to release, and the requests refused. The shell (`crate::observe`)
//! fills the structs; the planner ([`crate::plan`]) calls [`derive`].

mod derive;
#[cfg(test)]
mod flow_tests;
pub mod phase;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};

use jiff::Timestamp;
use serde::Serialize;

pub use derive::{derive, grace, is_trigger, pool_name, slice_name};
pub use phase::{Phase, Standing};

use crate::resource::KubeRef;

/// Node pool label saying where a slice came from: `workload` for a slice a
/// JobSet asked for; absent (or `git`) for a slice from the specs.
pub const SOURCE: &str = "slicectl.dev/source";
/// Value of [`SOURCE`] on workload slices.
pub const SOURCE_WORKLOAD: &str = "workload";
/// The owning JobSet's namespace.
pub const JOBSET_NAMESPACE: &str = "slicectl.dev/jobset-namespace";
/// The owning JobSet's name.
pub const JOBSET_NAME: &str = "slicectl.dev/jobset-name";
/// The owning JobSet's uid (the JobSet that last asked for the slice).
pub const JOBSET_UID: &str = "slicectl.dev/jobset-uid";
/// The Job's `jobset.sigs.k8s.io/job-key` (sha1 of `<ns>/<job name>`).
pub const JOB_KEY: &str = "slicectl.dev/job-key";
/// Node label slicectl writes (unix seconds) on a workload slice's Nodes the
/// first time it sees the slice's JobSet gone: the start of its grace
/// period, read back after a restart (never kept in memory).
pub const RELEASED_AT: &str = "slicectl.dev/released-at";
/// The default `gracePeriod`.
pub const DEFAULT_GRACE: std::time::Duration = std::time::Duration::from_secs(120);

/// Pod and JobSet opt-outs (label or annotation `"true"`): tpu-provisioner's
/// (`internal/controller/pod_utils.go`) and slicectl's own.
pub const OPT_OUTS: [&str; 2] = [
    "tpu-provisioner.cloud.google.com/disable-autoprovisioning",
    "slicectl.dev/disable-autoprovisioning",
];

/// JobSet's pod labels and annotations (`jobset.sigs.k8s.io/…`, set by the
/// JobSet controller's `labelAndAnnotateObject`).
pub mod keys {
    /// The JobSet's name (label and annotation).
    pub const JOBSET_NAME: &str = "jobset.sigs.k8s.io/jobset-name";
    /// The JobSet's uid.
    pub const JOBSET_UID: &str = "jobset.sigs.k8s.io/jobset-uid";
    /// sha1 of `<ns>/<job name>`: stable across JobSet restarts.
    pub const JOB_KEY: &str = "jobset.sigs.k8s.io/job-key";
    /// The Job controller's completion index (annotation and label); `0` is
    /// the leader tpu-provisioner provisions for.
    pub const COMPLETION_INDEX: &str = "batch.kubernetes.io/job-completion-index";
    /// GKE's TPU accelerator node label.
    pub const ACCELERATOR: &str = "cloud.google.com/gke-tpu-accelerator";
    /// GKE's TPU topology node label.
    pub const TOPOLOGY: &str = "cloud.google.com/gke-tpu-topology";
    /// A specific reservation.
    pub const RESERVATION: &str = "cloud.google.com/reservation-name";
    /// The project of a shared reservation.
    pub const RESERVATION_PROJECT: &str = "cloud.google.com/reservation-project";
    /// Spot VMs.
    pub const SPOT: &str = "cloud.google.com/gke-spot";
    /// Flex-start VMs (GKE's node label and selector for flex-start nodes).
    pub const FLEX_START: &str = "cloud.google.com/gke-flex-start";
    /// A pod pinned to one node pool: not ours to provision.
    pub const NODEPOOL: &str = "cloud.google.com/gke-nodepool";
    /// GKE's ProvisioningRequest selector (Kueue's queued provisioning).
    pub const PROVISIONING_REQUEST_SELECTOR: &str = "autoscaling.gke.io/provisioning-request";
    /// Cluster autoscaler's annotation on pods that consume a
    /// ProvisioningRequest (`k8s.io/autoscaler/cluster-autoscaler/
    /// provisioningrequest/pods`, `ProvisioningRequestPodAnnotationKey`);
    /// Kueue's provisioning admission check sets it.
    pub const CONSUME_PROVISIONING_REQUEST: &str =
        "cluster-autoscaler.kubernetes.io/consume-provisioning-request";
    /// The TPU extended resource.
    pub const TPU_RESOURCE: &str = "google.com/tpu";
}

/// Which JobSet and Job a workload slice is for: written on its node pool
/// as labels ([`Origin::labels`]).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Origin {
    /// The JobSet's namespace.
    pub namespace: String,
    /// The JobSet's name.
    pub jobset: String,
    /// The JobSet's uid.
    pub uid: String,
    /// The Job's job-key.
    pub job_key: String,
}

impl Origin {
    /// The node pool labels that mark a workload slice.
    pub fn labels(&self) -> BTreeMap<String, String> {
        [
            (SOURCE, SOURCE_WORKLOAD),
            (JOBSET_NAMESPACE, self.namespace.as_str()),
            (JOBSET_NAME, self.jobset.as_str()),
            (JOBSET_UID, self.uid.as_str()),
            (JOB_KEY, self.job_key.as_str()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
    }

    /// Reads the labels back: `None` unless [`SOURCE`] is `workload` and
    /// the JobSet is named.
    pub fn from_labels<L: crate::resource::LabelLookup + ?Sized>(labels: &L) -> Option<Origin> {
        if labels.label(SOURCE).map(String::as_str) != Some(SOURCE_WORKLOAD) {
            return None;
        }
        let get = |k: &str| labels.label(k).cloned().unwrap_or_default();
        let o = Origin {
            namespace: get(JOBSET_NAMESPACE),
            jobset: get(JOBSET_NAME),
            uid: get(JOBSET_UID),
            job_key: get(JOB_KEY),
        };
        (!o.namespace.is_empty() && !o.jobset.is_empty()).then_some(o)
    }

    /// `ns/name`, for people.
    pub fn jobset_ref(&self) -> String {
        format!("{}/{}", self.namespace, self.jobset)
    }
}

/// How a JobSet ended (its `Completed` or `Failed` condition).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ended {
    /// `Completed` or `Failed`.
    pub condition: String,
    /// The condition's `lastTransitionTime`.
    pub at: Timestamp,
}

/// A JobSet as observed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ObservedJobSet {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// uid.
    pub uid: String,
    /// Labels.
    pub labels: BTreeMap<String, String>,
    /// Annotations.
    pub annotations: BTreeMap<String, String>,
    /// Its terminal condition, if it has one.
    pub ended: Option<Ended>,
    /// Being deleted (`deletionTimestamp` set).
    pub deleting: bool,
    /// Suspended (`spec.suspend: true`, what Kueue sets on preemption):
    /// since when (its `Suspended` condition's `lastTransitionTime`, or
    /// the time it was observed suspended without one).
    pub suspended: Option<Timestamp>,
    /// The names of its Jobs, from its own `spec.replicatedJobs`
    /// (`<jobset>-<replicatedJob>-<index>`, as the JobSet controller names
    /// them): the only Jobs a pod may claim to be a Job of, and the only
    /// slices this JobSet may hold.
    pub jobs: Vec<String>,
}

/// A pending pod that requests TPUs, as observed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PendingPod {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Labels.
    pub labels: BTreeMap<String, String>,
    /// Annotations.
    pub annotations: BTreeMap<String, String>,
    /// `spec.nodeSelector`.
    pub node_selector: BTreeMap<String, String>,
    /// `google.com/tpu` requested, summed over its (non-init) containers.
    pub tpu_chips: u32,
    /// `PodScheduled=False` with reason `Unschedulable` (kube-scheduler's
    /// fit failure: tpu-provisioner's trigger).
    pub unschedulable: bool,
    /// The name of the Job its controller ownerReference names (kind
    /// `Job`, `batch/v1`): a pod asks for a slice only for a Job its
    /// JobSet's own spec names, in its own namespace.
    pub owner_job: Option<String>,
    /// `google.com/tpu` requests that are not a chip count a slice can
    /// have (a quantity over the most chips any host has, a fraction, or
    /// one that does not parse): why, refused as `shape`.
    pub tpu_error: Option<String>,
    /// Being deleted.
    pub deleting: bool,
}

/// One cluster's JobSets and pending TPU pods.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Observed {
    /// Every JobSet.
    pub jobsets: Vec<ObservedJobSet>,
    /// Pending pods that request `google.com/tpu`.
    pub pending: Vec<PendingPod>,
}

/// What a workload-enabled Target's cluster showed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DemandView {
    /// Listed.
    Seen(Observed),
    /// JobSets or pods could not be listed: nothing is created or released
    /// for this cluster this cycle.
    Unreadable(String),
}

/// Per Kubernetes API.
pub type DemandViews = BTreeMap<KubeRef, DemandView>;

/// A workload slice that exists (a node pool labelled
/// `slicectl.dev/source: workload`), as the planner read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveSlice {
    /// The Target it belongs to (its `slicectl.dev/target`).
    pub target: String,
    /// Its slice name (its `slicectl.dev/slice`): unique in the fleet
    /// ([`slice_name`]), where the pool's name is unique in its cluster only.
    pub slice: String,
    /// The pool's name.
    pub pool: String,
    /// Whose.
    pub origin: Origin,
    /// Chips it holds (all its hosts).
    pub chips: u32,
}

/// A request refused by the policy (an Event on the JobSet says why).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Refused {
    /// The Target.
    pub target: String,
    /// The JobSet's namespace.
    pub namespace: String,
    /// The JobSet's name.
    pub jobset: String,
    /// The JobSet's uid (the Event's object).
    pub uid: String,
    /// The Job's key.
    pub job_key: String,
    /// A stable code: `no_rule`, `accelerator`, `topology`, `capacity`,
    /// `max_chips`, `shape`, `name`, `name_taken`.
    pub code: &'static str,
    /// Why, and what to do.
    pub message: String,
}

/// A JobSet left alone, and why (opt-out, ProvisioningRequest-managed).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Skipped {
    /// The Target.
    pub target: String,
    /// `ns/name`.
    pub jobset: String,
    /// Why.
    pub why: String,
}

/// A workload slice kept although nothing pending asks for it now, and why.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Kept {
    /// The Target.
    pub target: String,
    /// The slice.
    pub slice: String,
    /// The pool.
    pub pool: String,
    /// `ns/name` of its JobSet.
    pub jobset: String,
    /// Why it stays (`active`, `grace`, `busy`, `unobserved`).
    pub why: String,
}

/// A workload slice released: its pool is deleted by the plan.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Released {
    /// The Target.
    pub target: String,
    /// The slice.
    pub slice: String,
    /// The pool.
    pub pool: String,
    /// `ns/name` of its JobSet.
    pub jobset: String,
    /// Why (`jobset ml/train Completed at 2026-11-28T01:02:03Z (gracePeriod 2m)`).
    pub why: String,
}

/// Nodes to stamp with [`RELEASED_AT`] (their JobSet was seen gone), or
/// to clear it from (a JobSet of that name is back: its slice's grace
/// period starts again when it ends).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Mark {
    /// The cluster.
    pub kube: KubeRef,
    /// The Nodes.
    pub nodes: Vec<String>,
    /// Unix seconds; `None` removes the stamp.
    pub at: Option<i64>,
}

/// What [`derive`] decided for the whole fleet.
#[derive(Debug, Clone, Default)]
pub struct Demand {
    /// Slices to add to the fleet (one per Job asking now).
    pub slices: Vec<crate::spec::Slice>,
    /// Workload pools released, by (Target, pool).
    pub released: Vec<Released>,
    /// Workload pools kept without a pending request.
    pub kept: Vec<Kept>,
    /// Requests refused.
    pub refused: Vec<Refused>,
    /// JobSets left alone.
    pub skipped: Vec<Skipped>,
    /// Released-at stamps to write.
    pub marks: Vec<Mark>,
    /// When the first slice kept only for its grace period may be
    /// released (its JobSet's end plus `gracePeriod`), or, for a slice past
    /// it kept only for the pods still on it, when to look again: the
    /// controller runs a cycle then, not at the next resync.
    pub release_due: Option<Timestamp>,
}

impl Demand {
    /// Notes a slice kept until `ended` plus `grace` (its grace period; or,
    /// past it, while pods still run on it: a look again soon).
    fn due(&mut self, ended: Timestamp, grace: std::time::Duration) {
        let Ok(until) = ended.checked_add(grace) else {
            return;
        };
        self.release_due = Some(self.release_due.map_or(until, |d| d.min(until)));
    }

    /// The fleet with the workload slices added.
    pub fn extend(&self, fleet: &crate::spec::Fleet) -> crate::spec::Fleet {
        let mut out = fleet.clone();
        for s in &self.slices {
            out.slices.insert(s.name.clone(), s.clone());
        }
        out
    }

    /// Whether slice `slice` of Target `target` is released.
    pub fn is_released(&self, target: &str, slice: &str) -> bool {
        self.release_of(target, slice).is_some()
    }

    /// The release of slice `slice` of Target `target`, if any: keyed by
    /// both, as a pool name is unique in its cluster only.
    pub fn release_of(&self, target: &str, slice: &str) -> Option<&Released> {
        self.released
            .iter()
            .find(|r| r.target == target && r.slice == slice)
    }

    /// Why live workload slice `slice` of Target `target` is kept, if it is.
    pub fn kept_of(&self, target: &str, slice: &str) -> Option<&Kept> {
        self.kept
            .iter()
            .find(|k| k.target == target && k.slice == slice)
    }

    /// The names of the slices added.
    pub fn slice_names(&self) -> BTreeSet<&str> {
        self.slices.iter().map(|s| s.name.as_str()).collect()
    }
}
