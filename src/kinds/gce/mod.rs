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

/// After a compute insert answered 409, judged as for every kind
/// ([`crate::apply::judge_conflict`]): `ops` are the scope's operations
/// (`target_of` names what each one targets), `live` the live resource's
/// ownership (`None` when a GET found nothing), `want` what the insert
/// carried. Done when the resource is this slice replica's (after its
/// running insert, if any, finished); else a conflict that says whether it
/// is someone else's or is being created by another run.
pub async fn after_conflict(
    cloud: &crate::cloud::Cloud,
    a: &crate::plan::Action,
    ops: &[compute::Operation],
    target_of: fn(&compute::Operation) -> Option<&str>,
    live: Option<Option<crate::plan::ownership::Ownership>>,
    want: Option<crate::plan::ownership::Ownership>,
    timeout: std::time::Duration,
) -> Result<crate::apply::StepOutcome, crate::apply::ApplyError> {
    let running = ops
        .iter()
        .find(|o| o.status != "DONE" && target_of(o) == Some(a.id.name.as_str()));
    crate::apply::judge_conflict(
        a,
        "insert",
        running.map(|o| (o.name.as_str(), o.operation_type.as_str())),
        live,
        want.as_ref(),
    )?;
    if let Some(op) = running {
        cloud.compute.wait_operation(op, timeout).await?;
    }
    Ok(crate::apply::StepOutcome::Done)
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
