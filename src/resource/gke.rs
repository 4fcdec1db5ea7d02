//! GKE `NodePool` and `Operation` (container v1), the fields slicectl sets or reads.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

fn is_false(b: &bool) -> bool {
    !*b
}

pub use crate::labels::{Labels, shrink_labels};
use crate::labels::{compact_labels, labels_as_map};

/// `NodePool` (container v1). Output-only fields are `Option` and never sent.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodePool {
    /// Node pool name (≤ 40 chars, `[a-z](?:[-a-z0-9]{0,38}[a-z0-9])?`).
    pub name: String,
    /// Node configuration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<NodeConfig>,
    /// Number of nodes (TPU VMs) created in each zone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initial_node_count: Option<i32>,
    /// Zones of the node pool.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub locations: Vec<String>,
    /// Placement: COMPACT + tpuTopology, or a workload policy by name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement_policy: Option<PlacementPolicy>,
    /// Queued provisioning (flex-start through ProvisioningRequest).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queued_provisioning: Option<QueuedProvisioning>,
    /// Autoscaling (flex-start pools scale from zero).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autoscaling: Option<Autoscaling>,
    /// Auto-upgrade / auto-repair.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub management: Option<NodeManagement>,
    /// Max pods per node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_pods_constraint: Option<MaxPodsConstraint>,
    /// Surge upgrade settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upgrade_settings: Option<UpgradeSettings>,
    /// Additional node networks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_config: Option<NodeNetworkConfig>,
    /// Output: PROVISIONING, RUNNING, RUNNING_WITH_ERROR, RECONCILING, STOPPING, ERROR.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// Output: human-readable status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_message: Option<String>,
    /// Output: conditions (e.g. GCE_STOCKOUT).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<StatusCondition>,
    /// Output: Kubernetes version of the nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    // Not read: `selfLink`, `etag` and `instanceGroupUrls` (output only,
    // nothing slicectl decides or shows). Left out of the type, they are
    // skipped as a list is decoded rather than held: three strings and a
    // vector per pool, 4 MB of a 10,000-pool observation.
    /// Not on the wire: the workload policy its `placementPolicy.policyName`
    /// names, as observed (`kinds::gce::link`), so that `slicectl adopt` can
    /// read its topology.
    #[serde(skip)]
    pub linked_policy: Option<Box<crate::resource::compute::ResourcePolicy>>,
}

/// `NodeConfig` (subset).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeConfig {
    /// Machine type, e.g. `ct5p-hightpu-4t`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub machine_type: String,
    /// Kubernetes node labels.
    #[serde(
        default,
        skip_serializing_if = "Labels::is_empty",
        serialize_with = "labels_as_map",
        deserialize_with = "compact_labels"
    )]
    #[schemars(with = "BTreeMap<String, String>")]
    pub labels: Labels,
    /// GCE resource labels.
    #[serde(
        default,
        skip_serializing_if = "Labels::is_empty",
        serialize_with = "labels_as_map",
        deserialize_with = "compact_labels"
    )]
    #[schemars(with = "BTreeMap<String, String>")]
    pub resource_labels: Labels,
    /// Kubernetes taints.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub taints: Vec<NodeTaint>,
    /// Spot VMs.
    #[serde(default, skip_serializing_if = "is_false")]
    pub spot: bool,
    /// Flex-start VMs.
    #[serde(default, skip_serializing_if = "is_false")]
    pub flex_start: bool,
    /// Maximum run duration (google-duration, e.g. `"259200s"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_run_duration: Option<String>,
    /// Reservation affinity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reservation_affinity: Option<ReservationAffinity>,
    /// Node service account.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account: Option<String>,
    /// OAuth scopes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub oauth_scopes: Vec<String>,
    /// Network tags.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    /// Boot disk type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk_type: Option<String>,
    /// Boot disk size in GB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk_size_gb: Option<i32>,
    /// Shielded VM settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shielded_instance_config: Option<ShieldedInstanceConfig>,
    /// Server default: image type (never set by slicectl).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_type: Option<String>,
    /// Server-side metadata (never set by slicectl).
    #[serde(
        default,
        skip_serializing_if = "Labels::is_empty",
        serialize_with = "labels_as_map",
        deserialize_with = "compact_labels"
    )]
    #[schemars(with = "BTreeMap<String, String>")]
    pub metadata: Labels,
}

/// A node taint as GKE spells it.
#[derive(
    Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Default, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "camelCase")]
pub struct NodeTaint {
    /// Key.
    pub key: String,
    /// Value.
    #[serde(default)]
    pub value: String,
    /// NO_SCHEDULE, PREFER_NO_SCHEDULE or NO_EXECUTE.
    pub effect: String,
}

/// Reservation affinity.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReservationAffinity {
    /// NO_RESERVATION, ANY_RESERVATION, SPECIFIC_RESERVATION, …
    pub consume_reservation_type: String,
    /// `compute.googleapis.com/reservation-name` for a specific reservation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// Reservation names or `projects/P/reservations/R`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
}

/// Shielded VM settings.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ShieldedInstanceConfig {
    /// Secure boot.
    #[serde(default)]
    pub enable_secure_boot: bool,
    /// Integrity monitoring.
    #[serde(default)]
    pub enable_integrity_monitoring: bool,
}

/// Placement policy.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PlacementPolicy {
    /// `COMPACT` (absent when a policy name is used).
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// TPU topology for COMPACT placement.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tpu_topology: Option<String>,
    /// Compute resource (workload) policy name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_name: Option<String>,
}

/// Queued provisioning.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct QueuedProvisioning {
    /// Enabled.
    #[serde(default)]
    pub enabled: bool,
}

/// Autoscaling.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Autoscaling {
    /// Enabled.
    #[serde(default)]
    pub enabled: bool,
    /// Total minimum nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_min_node_count: Option<i32>,
    /// Total maximum nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_max_node_count: Option<i32>,
    /// Minimum nodes per zone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_node_count: Option<i32>,
    /// Maximum nodes per zone. GKE sizes a multi-host TPU slice by this one:
    /// a slice with only the `total*` counts is refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_node_count: Option<i32>,
    /// BALANCED or ANY.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location_policy: Option<String>,
}

/// Node management.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeManagement {
    /// Auto-upgrade.
    #[serde(default)]
    pub auto_upgrade: bool,
    /// Auto-repair.
    #[serde(default)]
    pub auto_repair: bool,
}

/// Max pods per node (int64 as a JSON string).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MaxPodsConstraint {
    /// Max pods per node.
    #[serde(with = "super::int64_string")]
    #[schemars(with = "String")]
    pub max_pods_per_node: i64,
}

/// Upgrade settings.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpgradeSettings {
    /// Max surge.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_surge: Option<i32>,
    /// Max unavailable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_unavailable: Option<i32>,
}

/// Node network config (subset).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeNetworkConfig {
    /// Additional networks.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub additional_node_network_configs: Vec<AdditionalNodeNetworkConfig>,
}

/// An additional node network.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AdditionalNodeNetworkConfig {
    /// Network.
    pub network: String,
    /// Subnetwork.
    pub subnetwork: String,
}

/// Status condition (output).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StatusCondition {
    /// Deprecated code, e.g. GCE_STOCKOUT.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// Message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Canonical code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub canonical_code: Option<String>,
}

/// `CreateNodePoolRequest`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CreateNodePoolRequest {
    /// The node pool.
    pub node_pool: NodePool,
    /// `projects/P/locations/L/clusters/C`.
    pub parent: String,
}

/// `UpdateNodePoolRequest` (the in-place subset: labels, taints, resource labels).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpdateNodePoolRequest {
    /// Full node pool name.
    pub name: String,
    /// Replaces all Kubernetes node labels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<NodeLabels>,
    /// Replaces all taints.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub taints: Option<NodeTaints>,
    /// Replaces all GCE resource labels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_labels: Option<ResourceLabels>,
}

/// `NodeLabels`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
pub struct NodeLabels {
    /// Labels.
    #[serde(
        default,
        serialize_with = "labels_as_map",
        deserialize_with = "compact_labels"
    )]
    #[schemars(with = "BTreeMap<String, String>")]
    pub labels: Labels,
}

/// `NodeTaints`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
pub struct NodeTaints {
    /// Taints.
    #[serde(default)]
    pub taints: Vec<NodeTaint>,
}

/// `ResourceLabels`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
pub struct ResourceLabels {
    /// Labels.
    #[serde(
        default,
        serialize_with = "labels_as_map",
        deserialize_with = "compact_labels"
    )]
    #[schemars(with = "BTreeMap<String, String>")]
    pub labels: Labels,
}

/// `ListNodePoolsResponse`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ListNodePoolsResponse {
    /// Node pools, each decoded straight into its own `Arc`, which becomes
    /// the planner's live body as it is (a `Vec<NodePool>` moved into `Arc`s
    /// held every pool twice while a 10,000-pool fleet was observed: 8 MB of
    /// the plan's heap peak).
    #[serde(default)]
    pub node_pools: Vec<std::sync::Arc<NodePool>>,
}

/// The part of a GKE `Cluster` slicectl reads from `clusters.list`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterSummary {
    /// Cluster name.
    #[serde(default)]
    pub name: String,
    /// Region or zone the cluster lives in.
    #[serde(default)]
    pub location: String,
    /// Its node pools (GKE embeds them), read only as far as their labels:
    /// enough to see whose they are, cheap to hold for a large fleet.
    #[serde(default)]
    pub node_pools: Vec<PoolLabels>,
}

/// The part of a GKE `Cluster` slicectl reads from `clusters.get`: how to
/// reach its Kubernetes API server, as `gcloud container clusters
/// get-credentials` reads it (endpoint, private endpoint, DNS endpoint, and
/// the CA certificate).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterAccess {
    /// Cluster name.
    #[serde(default)]
    pub name: String,
    /// `PROVISIONING`, `RUNNING`, … (GKE has no endpoint while provisioning).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// The control plane's IP address (public, unless the cluster has no
    /// public endpoint).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// The CA that signs the API server's certificate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub master_auth: Option<MasterAuth>,
    /// A private cluster's settings (its deprecated `privateEndpoint`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub private_cluster_config: Option<PrivateClusterConfig>,
    /// The IP and DNS endpoints of the control plane.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_plane_endpoints_config: Option<ControlPlaneEndpointsConfig>,
}

/// `MasterAuth`, the CA only (slicectl authenticates with its Google token).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MasterAuth {
    /// Base64 of the PEM certificate that is the root of trust of the cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_ca_certificate: Option<String>,
}

/// `PrivateClusterConfig`, as far as the endpoint goes.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PrivateClusterConfig {
    /// The control plane's internal IP (deprecated for
    /// `controlPlaneEndpointsConfig.ipEndpointsConfig.privateEndpoint`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub private_endpoint: Option<String>,
}

/// `ControlPlaneEndpointsConfig`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ControlPlaneEndpointsConfig {
    /// The DNS-based endpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dns_endpoint_config: Option<DnsEndpointConfig>,
    /// The IP-based endpoints.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip_endpoints_config: Option<IpEndpointsConfig>,
}

/// `DNSEndpointConfig`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DnsEndpointConfig {
    /// The control plane's DNS name (`gke-….….gke.goog`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// Whether the DNS endpoint answers from outside the cluster's VPC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_external_traffic: Option<bool>,
}

/// `IPEndpointsConfig`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct IpEndpointsConfig {
    /// Whether the control plane may be reached by IP at all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// The control plane's external IP.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub public_endpoint: Option<String>,
    /// The control plane's internal IP.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub private_endpoint: Option<String>,
}

/// A node pool's `config.labels`, and nothing else of it.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PoolLabels {
    /// Pool name.
    #[serde(default)]
    pub name: String,
    /// The node config, labels only.
    #[serde(default)]
    pub config: Option<ResourceLabels>,
}

/// `ListClustersResponse`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ListClustersResponse {
    /// Clusters.
    #[serde(default)]
    pub clusters: Vec<ClusterSummary>,
    /// Zones the listing may be missing (unavailable at the time).
    #[serde(default)]
    pub missing_zones: Vec<String>,
}

/// GKE `Operation` (not a google.longrunning Operation).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Operation {
    /// Server-assigned name.
    pub name: String,
    /// CREATE_NODE_POOL, DELETE_NODE_POOL, UPDATE_CLUSTER, …
    #[serde(default)]
    pub operation_type: String,
    /// PENDING, RUNNING, DONE, ABORTING.
    #[serde(default)]
    pub status: String,
    /// Zone or region.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
    /// Link to the operation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub self_link: Option<String>,
    /// Link to the target (node pool).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_link: Option<String>,
    /// Detail.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// RFC3339 start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<String>,
    /// RFC3339 end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_time: Option<String>,
    /// Set when a DONE operation failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<RpcStatus>,
    /// Deprecated conditions (e.g. GCE_STOCKOUT).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodepool_conditions: Vec<StatusCondition>,
    /// Conditions of the cluster: where GKE reports a stockout during a
    /// node pool create (code GCE_STOCKOUT), with `nodepoolConditions` empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cluster_conditions: Vec<StatusCondition>,
}

/// `google.rpc.Status`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RpcStatus {
    /// Numeric google.rpc.Code.
    #[serde(default)]
    pub code: i32,
    /// Message.
    #[serde(default)]
    pub message: String,
}

/// `ListOperationsResponse`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ListOperationsResponse {
    /// Operations.
    #[serde(default)]
    pub operations: Vec<Operation>,
}

#[cfg(test)]
#[path = "gke/tests.rs"]
mod tests;
