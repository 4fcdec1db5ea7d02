//! The self-managed GCE backend's kinds: a `gce` slice replica is a
//! workload policy (multi-host; [`crate::kinds::workload_policy`]), an
//! instance template ([`template`]), a BULK MIG ([`mig`]) and the Nodes its
//! VMs become ([`nodes`]), with the cluster's shared TPU device plugin
//! ([`device_plugin`]). Rendering is in [`render`]; the Kubernetes-side
//! execution (the pull-model bootstrap) in [`exec`].

pub mod device_plugin;
pub mod exec;
pub mod mig;
pub mod nodes;
pub mod render;
pub mod template;

#[cfg(test)]
mod tests;

use crate::resource::compute;
use crate::resource::{ProjectRef, ZoneRef};

const COMPUTE: &str = "https://compute.googleapis.com/compute/v1";

/// A handle on a global operation by name (to wait on one found running).
pub fn global_operation(p: &ProjectRef, name: &str) -> compute::Operation {
    compute::Operation {
        name: name.to_string(),
        self_link: Some(format!(
            "{COMPUTE}/projects/{}/global/operations/{name}",
            p.project
        )),
        ..Default::default()
    }
}

/// A handle on a zone operation by name.
pub fn zone_operation(z: &ZoneRef, name: &str) -> compute::Operation {
    let zone = format!("{COMPUTE}/projects/{}/zones/{}", z.project, z.zone);
    compute::Operation {
        name: name.to_string(),
        self_link: Some(format!("{zone}/operations/{name}")),
        zone: Some(zone),
        ..Default::default()
    }
}
