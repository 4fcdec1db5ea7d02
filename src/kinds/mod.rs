//! Every resource kind slicectl manages, each described once in its own
//! module (its pure half implements [`crate::kind::Kind`], its shell half
//! [`crate::kind::KindExec`]) and registered in [`REGISTRY`]. The planner,
//! the step graph, the executor and observation are generic over them.
//!
//! Adding a kind: write its module and add one line to [`REGISTRY`]. The
//! order there is the order of actions within a slice replica in plans. A
//! compute kind (a resource in a project, region or zone, inserted and
//! deleted through compute operations) gets its shell half from
//! [`compute_shell`] by implementing [`compute_shell::ComputeKind`].

pub mod compute_shell;
pub mod gce;
pub mod node_pool;
pub mod readiness;
pub mod workload_policy;

use crate::kind::{Kind, KindId};

pub use crate::kind::RegisteredKind;

/// The registered kinds.
pub static REGISTRY: &[&dyn RegisteredKind] = &[
    &gce::device_plugin::DevicePlugins,
    &workload_policy::WorkloadPolicies,
    &gce::template::InstanceTemplates,
    &gce::mig::Migs,
    &gce::nodes::Nodes,
    &node_pool::NodePools,
    &node_pool::nodes::GkeNodes,
];

/// The pure halves, for planning (what `crate::engine::kinds` hands the
/// planner; tests use it directly).
pub fn plan_kinds() -> Vec<&'static dyn Kind> {
    REGISTRY.iter().map(|k| *k as &dyn Kind).collect()
}

/// One kind by name.
pub fn get(id: KindId) -> Option<&'static dyn RegisteredKind> {
    REGISTRY.iter().copied().find(|k| Kind::id(*k) == id)
}
