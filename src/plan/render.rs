//! Rendering: Slice × replica → the cloud resources that realise it.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::resource::compute::{ResourcePolicy, WorkloadPolicy};
use crate::resource::gke::{
    AdditionalNodeNetworkConfig, Autoscaling, MaxPodsConstraint, NodeConfig, NodeManagement,
    NodeNetworkConfig, NodePool, NodeTaint, PlacementPolicy, QueuedProvisioning,
    ReservationAffinity, ShieldedInstanceConfig, UpgradeSettings,
};
use crate::resource::{ClusterRef, RegionRef};
use crate::spec::catalog::Placement;
use crate::spec::model::{CapacityType, TaintEffect};
use crate::spec::{Fleet, Slice, Target};

use super::hash::{self, HASH_VERSION};
use super::names;
use super::ownership::Ownership;

/// Reservation affinity key GKE and gcloud use for a specific reservation.
pub const RESERVATION_KEY: &str = "compute.googleapis.com/reservation-name";

/// The desired resources of one slice replica.
#[derive(Debug, Clone, PartialEq)]
pub struct DesiredReplica {
    /// Slice name.
    pub slice: String,
    /// Replica index.
    pub replica: u32,
    /// Owner id (from the target).
    pub owner: String,
    /// Cluster the node pool goes to.
    pub cluster: ClusterRef,
    /// The node pool, ownership labels and spec hash included.
    pub node_pool: NodePool,
    /// The workload policy (tpu7x multi-host), if any.
    pub workload_policy: Option<DesiredPolicy>,
    /// Protected against destroy/replace.
    pub prevent_destroy: bool,
    /// Timeout of one long-running operation.
    pub operation_timeout: Duration,
}

/// A desired workload policy.
#[derive(Debug, Clone, PartialEq)]
pub struct DesiredPolicy {
    /// Where it lives.
    pub region: RegionRef,
    /// The policy, ownership description and spec hash included.
    pub policy: ResourcePolicy,
}

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

/// Renders every replica of every slice of the fleet.
pub fn render_fleet(fleet: &Fleet) -> Vec<DesiredReplica> {
    let mut out = Vec::new();
    for slice in fleet.slices.values() {
        if let Some(target) = fleet.target_of(slice) {
            for r in 0..slice.spec.replicas {
                if let Some(d) = render_replica(target, slice, r) {
                    out.push(d);
                }
            }
        }
    }
    out
}

/// Renders one replica. `None` when the target has no GKE cluster (only
/// backend `gke` is rendered by this release; validation rejects the rest).
pub fn render_replica(target: &Target, slice: &Slice, replica: u32) -> Option<DesiredReplica> {
    let gke = target.spec.gke.as_ref()?;
    let t = &target.spec;
    let s = &slice.spec;
    let shape = &slice.shape;
    let cluster = ClusterRef {
        project: t.project.clone(),
        location: gke.location.clone(),
        name: gke.name.clone(),
    };
    let region = RegionRef {
        project: t.project.clone(),
        region: crate::spec::validate::region_of(&t.zone).to_string(),
    };
    let pool_name = names::node_pool(&slice.name, replica);

    let mut ownership = Ownership {
        owner: t.owner_id.clone(),
        slice: slice.name.clone(),
        replica,
        spec_hash: None,
        hash_version: Some(HASH_VERSION.to_string()),
        prevent_destroy: s.lifecycle.prevent_destroy,
    };

    // Workload policy (tpu7x multi-host), rendered first: the pool names it.
    let workload_policy = match &shape.placement {
        Placement::WorkloadPolicy { topology } => {
            let mut policy = ResourcePolicy {
                name: names::workload_policy(&slice.name, replica),
                region: Some(region.region.clone()),
                workload_policy: Some(WorkloadPolicy {
                    kind: "HIGH_THROUGHPUT".to_string(),
                    accelerator_topology: Some(topology.clone()),
                    accelerator_topology_mode: None,
                }),
                ..Default::default()
            };
            let mut o = ownership.clone();
            o.prevent_destroy = false;
            o.spec_hash = Some(hash::spec_hash(&hash::policy_projection(&policy)));
            policy.description = Some(o.to_description());
            Some(DesiredPolicy { region, policy })
        }
        _ => None,
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
            policy_name: workload_policy.as_ref().map(|p| p.policy.name.clone()),
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

    let mut resource_labels: BTreeMap<String, String> = t.node_defaults.resource_labels.clone();
    resource_labels.insert("slicectl-owner".to_string(), t.owner_id.clone());
    resource_labels.insert("slicectl-slice".to_string(), slice.name.clone());

    let d = &t.node_defaults;
    let mut pool = NodePool {
        name: pool_name,
        config: Some(NodeConfig {
            machine_type: shape.machine_type.to_string(),
            labels: s.node_labels.clone(),
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
        queued_provisioning: flex.then_some(QueuedProvisioning { enabled: true }),
        autoscaling: flex.then_some(Autoscaling {
            enabled: true,
            total_min_node_count: Some(0),
            total_max_node_count: Some(hosts),
            location_policy: Some("ANY".to_string()),
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
    ownership.spec_hash = Some(hash::spec_hash(&hash::node_pool_projection(&pool)));
    if let Some(c) = pool.config.as_mut() {
        c.labels.extend(ownership.to_labels());
    }

    Some(DesiredReplica {
        slice: slice.name.clone(),
        replica,
        owner: t.owner_id.clone(),
        cluster,
        node_pool: pool,
        workload_policy,
        prevent_destroy: s.lifecycle.prevent_destroy,
        operation_timeout: slice.operation_timeout,
    })
}
