//! Adopting a MIG slicectl does not own (`slicectl adopt`), with the
//! instance template and workload policy it uses, as one slice replica;
//! and releasing one (`slicectl release`). The design is in
//! docs/adopt.md ("GCE: a MIG, its template and its policy"): the MIG's
//! description (patchable in place) records the ownership and the
//! `adopted=true` marker; the template and policy, whose descriptions
//! cannot change, are the replica's by reference ([`super::link`]).

use crate::kind::Adoptable;
use crate::kind::ownership::{self, Ownership};
use crate::kinds::node_pool::adopt::{TERRAFORM_LABEL, topology_of};
use crate::resource::compute::{InstanceGroupManager, InstanceTemplate};
use crate::spec::Target;
use crate::spec::catalog;
use crate::spec::model::{Backend, BootDisk, GceSlice, Lifecycle, SliceSpec};

/// The slice and replica a MIG named `<slice>-<replica>` is (slicectl's
/// MIG name, which cannot change in place).
fn split_name(name: &str) -> Option<(String, u32)> {
    let (stem, r) = name.rsplit_once('-')?;
    let replica: u32 = r.parse().ok()?;
    (replica.to_string() == r && crate::kind::names::mig(stem, replica) == name)
        .then(|| (stem.to_string(), replica))
}

/// Whether `name` ends as tpu-operator names a TPUNodeGroup's children:
/// `<group>-<child><sfx>` with `sfx = "-" + 8 hex of sha256(uid)`
/// (tpu-operator `tpunodegroup_methods.go`; tpu-anchors §B.2).
fn tpu_operator_name(name: &str, child: &str) -> bool {
    name.rsplit_once('-').is_some_and(|(head, sfx)| {
        sfx.len() == 8
            && sfx.bytes().all(|b| b.is_ascii_hexdigit())
            && head.ends_with(&format!("-{child}"))
    })
}

/// The TPUNodeGroup a MIG named as tpu-operator names its MIG
/// (`<group>-mig-<hash>`) belongs to: the slice its adoption describes.
fn tpu_operator_group(name: &str) -> Option<&str> {
    tpu_operator_name(name, "mig")
        .then(|| name.rsplit_once('-'))
        .flatten()
        .and_then(|(head, _)| head.strip_suffix("-mig"))
        .filter(|g| !g.is_empty())
}

/// The tool that still manages a MIG (or what it uses), and what to do
/// first.
fn manager(m: &InstanceGroupManager, t: Option<&InstanceTemplate>) -> Option<String> {
    // The Terraform Google provider's attribution label sits in the
    // template's properties.labels (MIGs and resource policies carry none).
    if t.and_then(|t| t.properties.labels.get(TERRAFORM_LABEL))
        .is_some_and(|v| v == "true")
    {
        return Some(format!(
            "Terraform manages it (label {TERRAFORM_LABEL}=true on its instance template): remove the MIG, \
             template and policy from Terraform's state first (`terraform state rm`, or `removed` blocks \
             with `lifecycle {{ destroy = false }}`), or the next `terraform apply` fights slicectl over them"
        ));
    }
    if tpu_operator_name(&m.name, "mig") {
        return Some(
            "tpu-operator manages it (named <group>-mig-<hash>, as a TPUNodeGroup names its MIG): stop \
             tpu-operator and remove the finalizers of the TPUNodeGroup and of its ManagedInstanceGroup, \
             InstanceTemplate and WorkloadPolicy objects first (docs/adopt.md, \"Migrating from \
             tpu-operator\"), or deleting the TPUNodeGroup deletes the MIG, its template, its policy and \
             its Nodes"
                .to_string(),
        );
    }
    None
}

/// The spec a live MIG is, with what it uses, or every reason it cannot
/// be one.
fn spec_of(m: &InstanceGroupManager, target: &Target) -> Result<SliceSpec, Vec<String>> {
    let mut why = Vec::new();
    let link = m.instance_template.as_deref().unwrap_or_default();
    let linked = m.linked.as_deref();
    let Some(t) = linked.and_then(|l| l.template.as_ref()) else {
        return Err(vec![format!(
            "its instance template {link:?} was not observed: slicectl adopts a MIG whose template is a global one in Target {}'s project {}",
            target.name, target.spec.project
        )]);
    };
    let machine_type = &t.properties.machine_type;
    let Some(generation) = catalog::generation_of_machine_type(machine_type) else {
        return Err(vec![format!(
            "machine type {machine_type} is not a TPU machine type slicectl knows"
        )]);
    };
    let policy = linked.and_then(|l| l.policy.as_ref());
    if policy.is_none()
        && let Some(p) = m
            .resource_policies
            .as_ref()
            .and_then(|r| r.workload_policy.as_deref())
    {
        why.push(format!(
            "its workload policy {p} was not observed in the region of Target {}'s zone",
            target.name
        ));
    }
    let declared = policy
        .and_then(|p| p.workload_policy.as_ref())
        .and_then(|w| w.accelerator_topology.clone());
    let Some(topology) = topology_of(generation, machine_type, declared) else {
        why.push(format!(
            "no {} topology fits machine type {machine_type} on one host, and no workload policy declares one",
            generation.accelerator
        ));
        return Err(why);
    };
    match catalog::resolve(generation.accelerator, &topology, Some(machine_type)) {
        Ok(shape) if i64::from(shape.hosts) != i64::from(m.target_size) => why.push(format!(
            "its target size is {} where topology {topology} needs {} VMs",
            m.target_size, shape.hosts
        )),
        Ok(_) => {}
        Err(e) => why.push(e.to_string()),
    }
    // The template is used as it is (`gce.instanceTemplate`): slicectl
    // never renders another tool's startup script, and a brought
    // template's MIG runs in BULK mode.
    for p in super::mig::check_brought_template(t) {
        why.push(format!("its instance template {}: {p}", t.name));
    }
    let mode = m.target_size_policy.as_ref().map(|p| p.mode.as_str());
    if mode != Some(super::render::MODE_BULK) {
        why.push(format!(
            "it runs in {} mode; slicectl runs a MIG with a template it did not render in BULK mode (all VMs or none)",
            mode.unwrap_or("INDIVIDUAL")
        ));
    }
    if !why.is_empty() {
        return Err(why);
    }
    Ok(SliceSpec {
        target: target.name.clone(),
        backend: Backend::Gce,
        accelerator: generation.accelerator.to_string(),
        topology,
        machine_type: Some(machine_type.clone()),
        replicas: 1,
        capacity: Default::default(),
        node_labels: Default::default(),
        taints: Vec::new(),
        lifecycle: Lifecycle::default(),
        gce: Some(Box::new(GceSlice {
            image: None,
            boot_disk: BootDisk::default(),
            metadata: Default::default(),
            bootstrap: None,
            instance_template: Some(format!(
                "projects/{}/global/instanceTemplates/{}",
                target.spec.project, t.name
            )),
            mig_name: None,
            workload_policy_name: None,
        })),
        previous_names: Vec::new(),
        node_pool_name: None,
        disruption: None,
    })
}

/// [`crate::kind::Kind::adoptable`] of a MIG: `None` when it is not in the
/// Target's zone.
pub fn adoptable(m: &InstanceGroupManager, target: &Target) -> Option<Adoptable> {
    if m.zone
        .as_deref()
        .is_some_and(|z| z.rsplit('/').next() != Some(target.spec.zone.as_str()))
    {
        return None;
    }
    let template = m.linked.as_deref().and_then(|l| l.template.as_ref());
    let labels = template
        .map(|t| t.properties.labels.clone())
        .unwrap_or_default();
    // A MIG named `<slice>-<replica>` is that replica; any other name (a
    // TPUNodeGroup's `<group>-mig-<hash>`, a gcloud script's) is the one
    // replica of a slice that keeps it (`gce.migName`), and its policy's
    // name (`gce.workloadPolicyName`), since neither can be renamed in
    // place.
    let (slice, replica, spec) = match split_name(&m.name) {
        Some((slice, replica)) => (slice, replica, spec_of(m, target)),
        None => {
            let slice = tpu_operator_group(&m.name).unwrap_or(&m.name).to_string();
            let spec = spec_of(m, target).map(|mut s| {
                let policy = m
                    .linked
                    .as_deref()
                    .and_then(|l| l.policy.as_ref())
                    .map(|p| p.name.clone())
                    .filter(|p| *p != crate::kind::names::workload_policy(&slice, 0));
                if let Some(g) = s.gce.as_mut() {
                    g.mig_name = Some(m.name.clone());
                    g.workload_policy_name = policy;
                }
                s
            });
            (slice, 0, spec)
        }
    };
    Some(Adoptable {
        slice,
        replica,
        spec,
        labels,
        manager: manager(m, template),
        handoff: Vec::new(),
    })
}

/// The name of the Node group of a MIG slicectl does not own, as adopting
/// it names it: `<slice>-<replica>` of the slice replica
/// [`adoptable`] makes it.
pub fn group_name(m: &InstanceGroupManager) -> String {
    match split_name(&m.name) {
        Some(_) => m.name.clone(),
        None => crate::kind::names::mig(tpu_operator_group(&m.name).unwrap_or(&m.name), 0),
    }
}

/// A MIG's description once released: no longer slicectl's (it does not
/// parse as ownership), saying whose it was.
pub fn released_description(o: &Ownership) -> String {
    format!(
        "released by slicectl (owner {}, slice {}, replica {})",
        o.owner, o.slice, o.replica
    )
}

/// The ownership a MIG's description said it had before it was released
/// ([`released_description`]), if it says so.
pub fn released_from(description: &str) -> Option<Ownership> {
    let inner = description
        .strip_prefix("released by slicectl (")?
        .strip_suffix(')')?;
    let mut parts = inner.split(", ");
    let mut take = |key: &str| parts.next()?.strip_prefix(key)?.strip_prefix(' ');
    let owner = take("owner")?.to_string();
    let slice = take("slice")?.to_string();
    let replica = take("replica")?.parse().ok()?;
    Some(Ownership {
        owner,
        slice,
        replica,
        target: None,
        spec_hash: None,
        hash_version: None,
        prevent_destroy: false,
    })
}

/// A MIG's description once adopted: `desired` (the rendered ownership)
/// with the adoption marker.
pub fn adopted_description(desired: &str) -> String {
    ownership::with_adopted(desired)
}

#[cfg(test)]
#[path = "adopt/tests.rs"]
mod tests;
