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

/// After a create answered 409: done when the live resource is this slice
/// replica's with the same spec hash (an interrupted apply made it), else a
/// conflict that says whose it is.
pub fn adopt_or_conflict(
    a: &crate::plan::Action,
    theirs: Option<crate::plan::ownership::Ownership>,
    want: Option<crate::plan::ownership::Ownership>,
    what: String,
) -> Result<crate::apply::StepOutcome, crate::apply::ApplyError> {
    if crate::apply::same_owner(theirs.as_ref(), want.as_ref())
        && theirs.and_then(|o| o.spec_hash) == want.and_then(|o| o.spec_hash)
    {
        return Ok(crate::apply::StepOutcome::Done);
    }
    Err(crate::apply::conflict(
        a,
        format!(
            "{what} already exists and is not this slice replica's; slicectl never changes it. \
             Delete or rename it, or rename the slice"
        ),
    ))
}

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
