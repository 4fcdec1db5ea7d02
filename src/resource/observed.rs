//! What observation adds to the compute wire types (never on the wire):
//! who uses a template or workload policy, and what a MIG uses
//! (`kinds::gce::link`).

use super::compute::{InstanceTemplate, ResourcePolicy};

/// Who uses a template or workload policy
/// ([`InstanceTemplate::held`](super::compute::InstanceTemplate::held)): a
/// MIG, or (a workload policy) a GKE node pool.
#[derive(Debug, Clone, PartialEq)]
pub enum Held {
    /// A MIG slicectl does not own: the resource is not slicectl's either,
    /// whatever its description says (released with its MIG, or someone
    /// else's group runs on it).
    Foreign {
        /// The name of the MIG (or GKE node pool) that uses it.
        holder: String,
    },
    /// A MIG slicectl adopted (or a node pool slicectl owns): the resource
    /// is that slice replica's by reference (its description, immutable,
    /// may be someone else's).
    Adopted {
        /// The name of the MIG (or GKE node pool) that uses it.
        holder: String,
        /// The MIG's owner id, slice and replica.
        owner: (String, String, u32),
    },
}

/// What a MIG uses, as observed ([`InstanceGroupManager::linked`](super::compute::InstanceGroupManager::linked)).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Linked {
    /// Its instance template, when it is a global one in its project.
    pub template: Option<InstanceTemplate>,
    /// Its workload policy.
    pub policy: Option<ResourcePolicy>,
}
