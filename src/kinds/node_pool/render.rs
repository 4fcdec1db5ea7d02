//! Rendering a slice replica into the GKE node pool that realises it.

use crate::kind::hash::{self, HASH_VERSION};
use crate::kind::names;
use crate::kind::ownership::Ownership;
use crate::resource::gke::{
    AdditionalNodeNetworkConfig, Autoscaling, Labels, MaxPodsConstraint, NodeConfig,
    NodeManagement, NodeNetworkConfig, NodePool, NodeTaint, PlacementPolicy, QueuedProvisioning,
    ReservationAffinity, ShieldedInstanceConfig, UpgradeSettings, shrink_labels,
};
use crate::spec::catalog::Placement;
use crate::spec::model::{CapacityType, TaintEffect};
use crate::spec::{Slice, Target};

use super::fields::node_pool_projection;

/// Reservation affinity key GKE and gcloud use for a specific reservation.
pub const RESERVATION_KEY: &str = "compute.googleapis.com/reservation-name";

fn effect(e: TaintEffect) -> &'static str {
    match e {
        TaintEffect::NoSchedule => "NO_SCHEDULE",
        TaintEffect::PreferNoSchedule => "PREFER_NO_SCHEDULE",
        TaintEffect::NoExecute => "NO_EXECUTE",
    }
}

/// Parses a friendly duration (`72h`, `30m`) into Google's duration string
/// (`"259200s"`).
fn google_duration(s: &str) -> Option<String> {
    let d: jiff::SignedDuration = s.parse().ok()?;
    Some(format!("{}s", d.as_secs()))
}

/// The node pool name of a slice replica: the spec's `nodePoolName` (an
/// adopted pool), `<stem>-<replica>`, or for a workload slice its own name (tpu-provisioner's, see
/// [`crate::workload::pool_name`]).
pub fn pool_name(slice: &Slice, stem: &str, replica: u32) -> String {
    if let Some(name) = &slice.spec.node_pool_name {
        name.clone()
    } else if slice.workload.is_some() {
        slice.name.clone()
    } else {
        names::node_pool(stem, replica)
    }
}

/// The node pool of one replica, ownership labels and spec hash included.
/// `None` when the target has no GKE cluster. The pool (and its workload
/// policy) are named after `stem`, the slice's name or the previous name
/// whose live pool it adopts; its labels name the slice (an in-place
/// relabel).
pub fn node_pool(target: &Target, slice: &Slice, replica: u32, stem: &str) -> Option<NodePool> {
    target.spec.gke.as_ref()?;
    if slice.spec.backend != crate::spec::model::Backend::Gke {
        return None;
    }
    let t = &target.spec;
    let s = &slice.spec;
    let shape = &slice.shape;
    let pool_name = pool_name(slice, stem, replica);
    let mut ownership = Ownership {
        owner: t.owner_id.clone(),
        slice: slice.name.clone(),
        replica,
        target: Some(target.name.clone()),
        spec_hash: None,
        hash_version: Some(HASH_VERSION.to_string()),
        prevent_destroy: s.lifecycle.prevent_destroy,
    };
    let placement_policy = match &shape.placement {
        Placement::None => None,
        Placement::Compact { topology } => Some(PlacementPolicy {
            kind: Some("COMPACT".to_string()),
            tpu_topology: Some(topology.clone()),
            policy_name: None,
        }),
        Placement::WorkloadPolicy { .. } => Some(PlacementPolicy {
            kind: None,
            tpu_topology: None,
            policy_name: Some(names::workload_policy(stem, replica)),
        }),
    };

    let hosts = i32::try_from(shape.hosts).unwrap_or(i32::MAX);
    let flex = s.capacity.kind == CapacityType::FlexStart;
    let mut taints: Vec<NodeTaint> = s
        .taints
        .iter()
        .map(|t| NodeTaint {
            key: t.key.clone(),
            value: t.value.clone(),
            effect: effect(t.effect).to_string(),
        })
        .collect();
    if s.capacity.kind == CapacityType::Spot {
        taints.push(NodeTaint {
            key: "cloud.google.com/gke-spot".to_string(),
            value: "true".to_string(),
            effect: "NO_SCHEDULE".to_string(),
        });
    }
    taints.sort();
    taints.dedup();

    let reservation_affinity = match (s.capacity.kind, &s.capacity.reservation) {
        (CapacityType::Reservation, Some(r)) => Some(ReservationAffinity {
            consume_reservation_type: "SPECIFIC_RESERVATION".to_string(),
            key: Some(RESERVATION_KEY.to_string()),
            values: vec![match &r.project {
                Some(p) if p != &t.project => format!("projects/{p}/reservations/{}", r.name),
                _ => r.name.clone(),
            }],
        }),
        (CapacityType::FlexStart, _) => Some(ReservationAffinity {
            consume_reservation_type: "NO_RESERVATION".to_string(),
            key: None,
            values: Vec::new(),
        }),
        _ => None,
    };

    let mut resource_labels: Labels = t
        .node_defaults
        .resource_labels
        .clone()
        .into_iter()
        .collect();
    resource_labels.insert("slicectl-owner".to_string(), t.owner_id.clone());
    resource_labels.insert("slicectl-slice".to_string(), slice.name.clone());

    let d = &t.node_defaults;
    let mut pool = NodePool {
        name: pool_name,
        config: Some(NodeConfig {
            machine_type: shape.machine_type.to_string(),
            labels: s.node_labels.clone().into_iter().collect(),
            resource_labels,
            taints,
            spot: s.capacity.kind == CapacityType::Spot,
            flex_start: flex,
            max_run_duration: if flex {
                s.capacity
                    .max_run_duration
                    .as_deref()
                    .and_then(google_duration)
            } else {
                None
            },
            reservation_affinity,
            service_account: d.service_account.clone(),
            oauth_scopes: d.oauth_scopes.clone(),
            tags: d.tags.clone(),
            disk_type: d.disk_type.clone(),
            disk_size_gb: d.disk_size_gb.map(|g| i32::try_from(g).unwrap_or(i32::MAX)),
            shielded_instance_config: Some(ShieldedInstanceConfig {
                enable_secure_boot: d.secure_boot,
                enable_integrity_monitoring: true,
            }),
            ..Default::default()
        }),
        initial_node_count: Some(if flex { 0 } else { hosts }),
        locations: vec![t.zone.clone()],
        placement_policy,
        // Flex-start VMs: autoscaling from 0, no reservation, scaled up by
        // the cluster autoscaler for pending pods selecting
        // `cloud.google.com/gke-flex-start: "true"` ("Run a small batch
        // workload with TPUs and flex-start", `--flex-start
        // --enable-autoscaling --num-nodes 0 --reservation-affinity=none`,
        // cloud.google.com/kubernetes-engine/docs/how-to/dws-flex-start-training-tpu).
        // With `queued: true`, GKE's queued provisioning on top: "nodes can be
        // only obtained through queuing via the Cluster Autoscaler
        // ProvisioningRequest API" (container v1 `NodePool.QueuedProvisioning`;
        // `--flex-start --enable-queued-provisioning`,
        // cloud.google.com/kubernetes-engine/docs/how-to/provisioningrequest).
        queued_provisioning: (flex && s.capacity.queued)
            .then_some(QueuedProvisioning { enabled: true }),
        // GKE validates a multi-host TPU slice against the per-zone
        // maxNodeCount (zero when only the total counts are set, which it
        // refuses): "Maximum node count 0 is not a valid size of TPU pod
        // slice with topology 2x2x2" (vllm-project/ci-infra#545). The pool
        // is pinned to one zone, so per-zone and total are the same number.
        autoscaling: flex.then_some(if shape.hosts > 1 {
            Autoscaling {
                enabled: true,
                min_node_count: Some(0),
                max_node_count: Some(hosts),
                location_policy: Some("ANY".to_string()),
                ..Default::default()
            }
        } else {
            Autoscaling {
                enabled: true,
                total_min_node_count: Some(0),
                total_max_node_count: Some(hosts),
                location_policy: Some("ANY".to_string()),
                ..Default::default()
            }
        }),
        management: Some(NodeManagement {
            auto_upgrade: false,
            auto_repair: !flex,
        }),
        max_pods_constraint: Some(MaxPodsConstraint {
            max_pods_per_node: i64::from(d.max_pods_per_node),
        }),
        upgrade_settings: Some(UpgradeSettings {
            max_surge: Some(1),
            max_unavailable: None,
        }),
        network_config: (!d.additional_networks.is_empty()).then(|| NodeNetworkConfig {
            additional_node_network_configs: d
                .additional_networks
                .iter()
                .map(|n| AdditionalNodeNetworkConfig {
                    network: n.network.clone(),
                    subnetwork: n.subnetwork.clone(),
                })
                .collect(),
        }),
        ..Default::default()
    };
    ownership.spec_hash = Some(hash::spec_hash(&node_pool_projection(&pool)));
    if let Some(c) = pool.config.as_mut() {
        c.labels.extend(ownership.to_labels());
        // Whose a workload slice is: compared in place (a JobSet recreated
        // under its name relabels its pool), not hashed.
        if let Some(origin) = &slice.workload {
            c.labels.extend(origin.labels());
        }
        shrink_labels(&mut c.labels);
        shrink_labels(&mut c.resource_labels);
    }

    Some(pool)
}
