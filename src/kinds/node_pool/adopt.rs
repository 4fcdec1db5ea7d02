//! Adopting a node pool slicectl does not own (`slicectl adopt`): the
//! Slice spec that describes it, the tool that still manages it, and the
//! labels a release removes.

use std::collections::BTreeMap;

use crate::kind::Adoptable;
use crate::kind::ownership;
use crate::resource::gke::NodePool;
use crate::spec::Target;
use crate::spec::catalog;
use crate::spec::model::{
    Backend, Capacity, CapacityType, Lifecycle, Reservation, SliceSpec, Taint, TaintEffect,
};

use super::fields::is_server_label;
use super::provisioner_hash::{
    TPU_PROVISIONER_HASH_LABEL, TPU_PROVISIONER_MANAGER_LABEL, tpu_provisioner_hash,
};
use super::render::RESERVATION_KEY;

/// The attribution label the Terraform Google provider puts on every
/// resource it creates (`goog-terraform-provisioned = "true"`, provider
/// setting `add_terraform_attribution_label`, on by default since provider
/// 6.0: https://registry.terraform.io/providers/hashicorp/google/latest/docs/guides/provider_reference#add_terraform_attribution_label).
/// On a node pool it sits in `config.resourceLabels`.
pub const TERRAFORM_LABEL: &str = "goog-terraform-provisioned";

/// The label tpu-provisioner's static-pool reconciler puts on the pools it
/// keeps, deleting those missing from its ConfigMap
/// (ai-on-gke/tpu-provisioner `internal/controller/static_nodepool_controller.go`).
pub const TPU_PROVISIONER_STATIC_LABEL: &str = "tpu-provisioner-static-nodepool";

/// Label prefix of tpu-provisioner's bookkeeping labels (`…-jobset-name`,
/// `…-parent-kind`, its hash; `internal/cloud/common.go`).
const TPU_PROVISIONER_PREFIX: &str = "google.com/tpu-provisioner-";

/// Whether `key` is a label tpu-provisioner keeps for itself: removed on
/// adoption (its hand-off), so that its deleter, which selects
/// `google.com/nodepool-manager=tpu-provisioner`, no longer takes the pool.
fn provisioner_label(key: &str) -> bool {
    key == TPU_PROVISIONER_MANAGER_LABEL
        || key == TPU_PROVISIONER_STATIC_LABEL
        || key.starts_with(TPU_PROVISIONER_PREFIX)
}

/// tpu-provisioner's verdict on a pool it made: `None` when it did not
/// make it, `Some(Ok(()))` when its stored hash verifies (or it has none),
/// `Some(Err(why))` when the pool changed since.
pub fn provisioner_verdict(p: &NodePool) -> Option<Result<(), String>> {
    let c = p.config.as_ref()?;
    let l = &c.labels;
    let made = l.get(TPU_PROVISIONER_MANAGER_LABEL).map(String::as_str) == Some("tpu-provisioner")
        || l.contains_key(TPU_PROVISIONER_STATIC_LABEL);
    if !made {
        return None;
    }
    let Some(stored) = l.get(TPU_PROVISIONER_HASH_LABEL) else {
        return Some(Ok(()));
    };
    let mut labels: BTreeMap<String, String> =
        l.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    labels.remove(TPU_PROVISIONER_HASH_LABEL);
    labels.retain(|k, _| !is_server_label(k));
    let computed = tpu_provisioner_hash(
        &labels,
        &c.machine_type,
        c.reservation_affinity.as_ref(),
        c.spot,
    );
    Some(if &computed == stored {
        Ok(())
    } else {
        Err(format!(
            "changed since (its hash {stored} ≠ {computed} recomputed)"
        ))
    })
}

/// The tool that still manages a pool, and what to do before adopting it.
fn manager(p: &NodePool, cluster: &str) -> Option<String> {
    let c = p.config.as_ref();
    let label = |k: &str| {
        c.and_then(|c| c.resource_labels.get(k).or(c.labels.get(k)))
            .map(String::as_str)
    };
    if label(TERRAFORM_LABEL) == Some("true") {
        return Some(format!(
            "Terraform manages it (label {TERRAFORM_LABEL}=true): remove it from Terraform's state first \
             (`terraform state rm`, or a `removed` block with `lifecycle {{ destroy = false }}`), or the next \
             `terraform apply` fights slicectl over it"
        ));
    }
    if provisioner_verdict(p).is_some() {
        return Some(format!(
            "tpu-provisioner manages it (label {TPU_PROVISIONER_MANAGER_LABEL}=tpu-provisioner): adopting removes \
             tpu-provisioner's labels so that its deleter no longer selects it; make sure no JobSet of \
             tpu-provisioner's still counts on this pool"
        ));
    }
    // xpk names the pools of `xpk cluster create` `<cluster>-np-<i>` and
    // deletes or recreates pools so named when the cluster is created again
    // with another shape (AI-Hypercomputer/xpk `src/xpk/core/nodepool.py`,
    // `run_gke_node_pool_create_command`, `get_node_pools_to_delete`); it
    // sets no label of its own.
    if p.name.starts_with(&format!("{cluster}-np-")) {
        return Some(format!(
            "xpk manages it (named {cluster}-np-N, as `xpk cluster create` names and prunes pools): stop \
             running `xpk cluster create` on this cluster first"
        ));
    }
    None
}

/// The slice and replica a pool named `<slice>-<replica>` is.
fn split_name(name: &str) -> Option<(String, u32)> {
    let (stem, r) = name.rsplit_once('-')?;
    let replica: u32 = r.parse().ok()?;
    (replica.to_string() == r && crate::kind::names::node_pool(stem, replica) == name)
        .then(|| (stem.to_string(), replica))
}

/// A Google duration (`"259200s"`) as a spec writes it (`72h`).
fn friendly(d: &str) -> String {
    match d.strip_suffix('s').and_then(|s| s.parse::<u64>().ok()) {
        Some(s) if s % 3600 == 0 => format!("{}h", s / 3600),
        Some(s) if s % 60 == 0 => format!("{}m", s / 60),
        Some(s) => format!("{s}s"),
        None => d.to_string(),
    }
}

/// The topology of a slice of `machine_type`: the one `declared` (a
/// pool's `tpuTopology`, a workload policy's `acceleratorTopology`), else
/// (single host: none is declared) the one whose chips the machine type
/// holds on one host.
pub(crate) fn topology_of(
    generation: &catalog::Generation,
    machine_type: &str,
    declared: Option<String>,
) -> Option<String> {
    declared.or_else(|| {
        generation.topologies.iter().find_map(|t| {
            catalog::resolve(generation.accelerator, t, Some(machine_type))
                .ok()
                .filter(|s| s.hosts == 1)
                .map(|_| t.to_string())
        })
    })
}

/// The spec a live pool is, or every reason it cannot be one.
fn spec_of(p: &NodePool, target: &Target) -> Result<SliceSpec, Vec<String>> {
    let mut why = Vec::new();
    let Some(c) = p.config.as_ref() else {
        return Err(vec!["it has no node config".to_string()]);
    };
    if let Some(Err(e)) = provisioner_verdict(p) {
        why.push(format!(
            "created by tpu-provisioner, {e}: tpu-provisioner would recreate it, and slicectl adopts only what it can verify"
        ));
    }
    let Some(generation) = catalog::generation_of_machine_type(&c.machine_type) else {
        why.push(format!(
            "machine type {} is not a TPU machine type slicectl knows",
            c.machine_type
        ));
        return Err(why);
    };
    let hosts = p.initial_node_count.unwrap_or(0);
    let placement = p.placement_policy.as_ref();
    // A pool placed by a workload policy (tpu7x multi-host): the topology
    // is the policy's, which is adopted with the pool (`kinds::gce::link`).
    let mut declared = placement.and_then(|pp| pp.tpu_topology.clone());
    if let Some(name) = placement.and_then(|pp| pp.policy_name.as_ref()) {
        match p.linked_policy.as_ref() {
            Some(policy) => {
                declared = declared.or_else(|| {
                    policy
                        .workload_policy
                        .as_ref()
                        .and_then(|w| w.accelerator_topology.clone())
                });
            }
            None => why.push(format!(
                "its workload policy {name} was not observed in the cluster's region: slicectl adopts a pool with the policy that places it"
            )),
        }
    }
    let topology = topology_of(generation, &c.machine_type, declared);
    let Some(topology) = topology else {
        why.push(format!(
            "no {} topology fits machine type {} on one host",
            generation.accelerator, c.machine_type
        ));
        return Err(why);
    };
    match catalog::resolve(generation.accelerator, &topology, Some(&c.machine_type)) {
        Ok(shape) if i64::from(shape.hosts) != i64::from(hosts) => why.push(format!(
            "it has {hosts} nodes where topology {topology} needs {}",
            shape.hosts
        )),
        Ok(_) => {}
        Err(e) => why.push(e.to_string()),
    }
    let zone_ok = p.locations.len() == 1 && p.locations[0] == target.spec.zone;
    if !zone_ok {
        why.push(format!(
            "its node locations {:?} are not exactly Target {}'s zone {}",
            p.locations, target.name, target.spec.zone
        ));
    }
    let reservation = c
        .reservation_affinity
        .as_ref()
        .filter(|r| r.consume_reservation_type == "SPECIFIC_RESERVATION");
    let capacity = if c.flex_start {
        Capacity {
            kind: CapacityType::FlexStart,
            reservation: None,
            max_run_duration: c.max_run_duration.as_deref().map(friendly),
            // A pool with GKE's queued provisioning stays one.
            queued: p.queued_provisioning.as_ref().is_some_and(|q| q.enabled),
        }
    } else if c.spot {
        Capacity {
            kind: CapacityType::Spot,
            ..Capacity::default()
        }
    } else if let Some(r) = reservation {
        let value = r.values.first().cloned().unwrap_or_default();
        if r.key.as_deref() != Some(RESERVATION_KEY) || r.values.len() != 1 {
            why.push(format!(
                "its reservation affinity (key {:?}, values {:?}) is not one specific reservation",
                r.key, r.values
            ));
        }
        let (project, name) = match value.strip_prefix("projects/").map(|v| v.split('/')) {
            Some(mut parts) => {
                let project = parts.next().unwrap_or_default().to_string();
                (Some(project), parts.nth(1).unwrap_or_default().to_string())
            }
            None => (None, value),
        };
        Capacity {
            kind: CapacityType::Reservation,
            reservation: Some(Reservation {
                name,
                project: project.filter(|p| p != &target.spec.project),
            }),
            max_run_duration: None,
            queued: false,
        }
    } else {
        Capacity::default()
    };
    let node_labels: crate::labels::Labels = c
        .labels
        .iter()
        .filter(|(k, _)| {
            !is_server_label(k) && !k.starts_with(ownership::PREFIX) && !provisioner_label(k)
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let mut taints = Vec::new();
    for t in &c.taints {
        // GKE's own TPU taint, and the spot taint slicectl renders itself.
        let spot_taint = c.spot && t.key == "cloud.google.com/gke-spot";
        if t.key == "google.com/tpu" || spot_taint {
            continue;
        }
        let effect = match t.effect.as_str() {
            "NO_SCHEDULE" => TaintEffect::NoSchedule,
            "PREFER_NO_SCHEDULE" => TaintEffect::PreferNoSchedule,
            "NO_EXECUTE" => TaintEffect::NoExecute,
            other => {
                why.push(format!("taint {} has effect {other}", t.key));
                continue;
            }
        };
        taints.push(Taint {
            key: t.key.clone(),
            value: t.value.clone(),
            effect,
        });
    }
    if !why.is_empty() {
        return Err(why);
    }
    Ok(SliceSpec {
        target: target.name.clone(),
        backend: Backend::Gke,
        accelerator: generation.accelerator.to_string(),
        topology,
        machine_type: Some(c.machine_type.clone()),
        replicas: 1,
        capacity,
        node_labels,
        taints,
        lifecycle: Lifecycle::default(),
        gce: None,
        previous_names: Vec::new(),
        node_pool_name: None,
        disruption: None,
    })
}

/// [`crate::kind::Kind::adoptable`] of a node pool: `None` when the pool is
/// not in the Target's zone.
pub fn adoptable(p: &NodePool, target: &Target) -> Option<Adoptable> {
    if !p.locations.iter().any(|l| l == &target.spec.zone) {
        return None;
    }
    let cluster = target
        .spec
        .gke
        .as_ref()
        .map(|g| g.name.as_str())
        .unwrap_or_default();
    let labels: BTreeMap<String, String> = p
        .config
        .as_ref()
        .map(|c| {
            c.labels
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        })
        .unwrap_or_default();
    let handoff = labels
        .keys()
        .filter(|k| provisioner_label(k))
        .cloned()
        .collect();
    // A pool named `<slice>-<replica>` is that replica; any other name is
    // a slice of its own name that keeps it (`nodePoolName`).
    let (slice, replica, pinned) = match split_name(&p.name) {
        Some((slice, replica)) => (slice, replica, None),
        None => (p.name.clone(), 0, Some(p.name.clone())),
    };
    let spec = spec_of(p, target).map(|mut s| {
        s.node_pool_name = pinned;
        s
    });
    Some(Adoptable {
        slice,
        replica,
        spec,
        labels,
        manager: manager(p, cluster),
        handoff,
    })
}

/// A pool's labels without slicectl's ownership (node labels
/// `slicectl.dev/*`, resource labels `slicectl-owner` and `slicectl-slice`).
pub fn without_ownership(p: &NodePool) -> NodePool {
    let mut p = p.clone();
    if let Some(c) = p.config.as_mut() {
        c.labels.retain(|k, _| !k.starts_with(ownership::PREFIX));
        c.resource_labels
            .retain(|k, _| k != "slicectl-owner" && k != "slicectl-slice");
    }
    p
}

#[cfg(test)]
#[path = "adopt/tests.rs"]
mod tests;
