//! The self-managed GCE backend's kinds: a `gce` slice replica is a
//! workload policy (multi-host; [`crate::kinds::workload_policy`]), an
//! instance template ([`template`]), a BULK MIG ([`mig`]) and the Nodes its
//! VMs become ([`nodes`]), with the cluster's shared TPU device plugin
//! ([`device_plugin`]). Rendering is in [`render`]; the Kubernetes-side
//! execution (the pull-model bootstrap) in [`exec`].

pub mod adopt;
pub mod device_plugin;
pub mod exec;
pub mod link;
pub mod mig;
pub mod nodes;
pub mod render;
pub mod template;

#[cfg(test)]
mod tests;

/// The failure codes this backend's kinds declare (`ApplyError::Kind`),
/// in metric labels and JSON reports: a VM reported a failed join, or the
/// join timed out.
pub const BOOTSTRAP_FAILED: &str = "bootstrap_failed";
/// A VM runs and joined once, but its Node is gone.
pub const NODE_LOST: &str = "node_lost";
/// The instance template a slice brings cannot run a TPU slice.
pub const INVALID_TEMPLATE: &str = "invalid_template";
/// Error code: the instance template a slice brings does not exist.
pub const MISSING_TEMPLATE: &str = "missing_template";

/// The self-managed cluster's Kubernetes API of a `gce` Target: where its
/// Nodes, bootstrap Secrets and device plugin live (none for other
/// backends).
pub fn kube_scope(t: &crate::spec::Target) -> Vec<crate::kind::Scope> {
    t.spec
        .gce
        .as_ref()
        .map(|g| {
            crate::kind::Scope::Kube(crate::resource::KubeRef {
                endpoint: g.control_plane_endpoint.clone(),
            })
        })
        .into_iter()
        .collect()
}
