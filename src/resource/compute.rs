//! Compute Engine wire types (compute v1): `ResourcePolicy` (workload
//! policy), `Operation`, `InstanceTemplate`, `InstanceGroupManager` (with
//! `listManagedInstances` and `listErrors` items), `Instance`, `Metadata` and
//! `GuestAttributes`.

use std::collections::BTreeMap;

use schemars::JsonSchema;

pub use super::observed::{Held, Linked};
use serde::{Deserialize, Serialize};

/// `ResourcePolicy` (subset: workload policies).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourcePolicy {
    /// Name (RFC1035, ≤ 63 chars).
    pub name: String,
    /// Description. Resource policies carry no labels, so slicectl records
    /// its ownership here (see `plan::ownership`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Region (short name on insert, URL on output).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    /// The workload policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload_policy: Option<WorkloadPolicy>,
    /// Output: CREATING, DELETING, EXPIRED, INVALID, READY.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// Output: self link.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub self_link: Option<String>,
    /// Output: id (uint64 as a string).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Output: kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Output: creation timestamp.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub creation_timestamp: Option<String>,
    /// Not on the wire: which managed instance group uses it, filled by
    /// observation (`kinds::gce::link`). A template or workload policy a
    /// MIG uses belongs to whoever owns that MIG (see docs/adopt.md).
    #[serde(skip)]
    pub held: Option<Held>,
}

/// `ResourcePolicyWorkloadPolicy`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadPolicy {
    /// HIGH_THROUGHPUT or HIGH_AVAILABILITY.
    #[serde(rename = "type")]
    pub kind: String,
    /// Accelerator topology, e.g. `4x4x4`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accelerator_topology: Option<String>,
    /// AUTO_CONNECT (server default) or PROVISION_ONLY.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accelerator_topology_mode: Option<String>,
}

/// `ResourcePolicyList`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourcePolicyList {
    /// Items.
    #[serde(default)]
    pub items: Vec<ResourcePolicy>,
    /// Next page token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_page_token: Option<String>,
}

/// Compute `Operation`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Operation {
    /// Name.
    pub name: String,
    /// `insert`, `delete`, `setMetadata`, …
    #[serde(default)]
    pub operation_type: String,
    /// PENDING, RUNNING, DONE.
    #[serde(default)]
    pub status: String,
    /// Target resource URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_link: Option<String>,
    /// Self link.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub self_link: Option<String>,
    /// Zone URL (zonal operation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
    /// Region URL (regional operation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    /// Set when a DONE operation failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<OperationError>,
    /// HTTP status of the failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_error_status_code: Option<i32>,
    /// HTTP message of the failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_error_message: Option<String>,
}

/// Compute operation error.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OperationError {
    /// Errors.
    #[serde(default)]
    pub errors: Vec<OperationErrorItem>,
}

/// One compute operation error.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OperationErrorItem {
    /// Code, e.g. ZONE_RESOURCE_POOL_EXHAUSTED.
    #[serde(default)]
    pub code: String,
    /// Message.
    #[serde(default)]
    pub message: String,
}

/// Compute `OperationList`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OperationList {
    /// Items.
    #[serde(default)]
    pub items: Vec<Operation>,
    /// Next page token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_page_token: Option<String>,
}

// ---- instance templates, MIGs, instances (compute v1) ---------------------

/// `InstanceTemplate` (global).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InstanceTemplate {
    /// Name (RFC1035, ≤ 63 chars).
    pub name: String,
    /// Description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// What every VM made from the template gets.
    #[serde(default)]
    pub properties: InstanceProperties,
    /// Output: self link.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub self_link: Option<String>,
    /// Output: id (uint64 as a string).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Output: `compute#instanceTemplate`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Output: creation timestamp (RFC3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub creation_timestamp: Option<String>,
    /// Not on the wire: which managed instance group uses it, filled by
    /// observation (`kinds::gce::link`). A template or workload policy a
    /// MIG uses belongs to whoever owns that MIG (see docs/adopt.md).
    #[serde(skip)]
    pub held: Option<Held>,
}

/// `InstanceProperties` (the TPU-relevant subset).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InstanceProperties {
    /// Machine type: a **name** (`tpu7x-standard-4t`), not a URL.
    #[serde(default)]
    pub machine_type: String,
    /// Description of the VMs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Disks.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub disks: Vec<AttachedDisk>,
    /// Network interfaces.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub network_interfaces: Vec<NetworkInterface>,
    /// Instance metadata (startup script and friends).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
    /// Labels of the VMs.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Scheduling (capacity model).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduling: Option<Scheduling>,
    /// Reservation affinity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reservation_affinity: Option<ReservationAffinity>,
    /// Resource policies (names, not URLs).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resource_policies: Vec<String>,
    /// Service accounts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub service_accounts: Vec<ServiceAccount>,
    /// Network tags.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags: Option<Tags>,
    /// Shielded VM options.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shielded_instance_config: Option<ShieldedInstanceConfig>,
}

/// `AttachedDisk`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AttachedDisk {
    /// Whether this is the boot disk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot: Option<bool>,
    /// Deleted with the VM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto_delete: Option<bool>,
    /// PERSISTENT or SCRATCH.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// How to create the disk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initialize_params: Option<AttachedDiskInitializeParams>,
}

/// `AttachedDiskInitializeParams`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AttachedDiskInitializeParams {
    /// Image URL or `projects/P/global/images/…`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_image: Option<String>,
    /// Size in GB (int64 as a string on the wire).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "super::opt_int64_string"
    )]
    #[schemars(with = "Option<String>")]
    pub disk_size_gb: Option<i64>,
    /// Disk type name (`pd-balanced`, `hyperdisk-balanced`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk_type: Option<String>,
}

/// `NetworkInterface`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NetworkInterface {
    /// Network URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<String>,
    /// Subnetwork URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subnetwork: Option<String>,
    /// Output: internal IP.
    #[serde(default, rename = "networkIP", skip_serializing_if = "Option::is_none")]
    pub network_ip: Option<String>,
    /// External access (none: no external IP).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access_configs: Option<Vec<AccessConfig>>,
}

/// `AccessConfig`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AccessConfig {
    /// Name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// ONE_TO_ONE_NAT.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// PREMIUM or STANDARD.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_tier: Option<String>,
}

/// `Metadata`: the custom key/value items of an instance or template.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Metadata {
    /// Output: `compute#metadata`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Fingerprint (URL-safe base64) to send back with `setMetadata`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fingerprint: Option<String>,
    /// Items.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub items: Vec<MetadataItem>,
}

impl Metadata {
    /// The value of `key`, if set.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.items
            .iter()
            .find(|i| i.key == key)
            .and_then(|i| i.value.as_deref())
    }
}

/// One metadata item.
#[derive(Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MetadataItem {
    /// Key (`[a-zA-Z0-9-_]{1,128}`).
    pub key: String,
    /// Value (≤ 256 KiB).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
}

/// Values can hold secrets (bootstrap tokens): `Debug` shows only sizes.
impl std::fmt::Debug for MetadataItem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetadataItem")
            .field("key", &self.key)
            .field(
                "value",
                &self.value.as_ref().map(|v| format!("<{} bytes>", v.len())),
            )
            .finish()
    }
}

/// `Scheduling`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Scheduling {
    /// STANDARD, SPOT, FLEX_START, RESERVATION_BOUND.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provisioning_model: Option<String>,
    /// STOP or DELETE.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_termination_action: Option<String>,
    /// MIGRATE or TERMINATE (TPUs: TERMINATE).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_host_maintenance: Option<String>,
    /// Restart after a crash.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub automatic_restart: Option<bool>,
    /// Legacy preemptible VM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preemptible: Option<bool>,
    /// Longest run (flex-start).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_run_duration: Option<Duration>,
}

/// `Duration` (`seconds` int64 as a string).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Duration {
    /// Seconds.
    #[serde(with = "super::int64_string")]
    #[schemars(with = "String")]
    pub seconds: i64,
    /// Nanoseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nanos: Option<i32>,
}

/// `ReservationAffinity`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReservationAffinity {
    /// ANY_RESERVATION, NO_RESERVATION, SPECIFIC_RESERVATION.
    #[serde(default)]
    pub consume_reservation_type: String,
    /// `compute.googleapis.com/reservation-name` for a specific reservation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// Reservation names.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
}

/// `ServiceAccount`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServiceAccount {
    /// Email.
    pub email: String,
    /// OAuth scopes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scopes: Vec<String>,
}

/// `Tags`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Tags {
    /// Network tags.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub items: Vec<String>,
}

/// `ShieldedInstanceConfig`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ShieldedInstanceConfig {
    /// Secure boot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enable_secure_boot: Option<bool>,
    /// vTPM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enable_vtpm: Option<bool>,
    /// Integrity monitoring.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enable_integrity_monitoring: Option<bool>,
}

/// `InstanceTemplateList`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InstanceTemplateList {
    /// Items.
    #[serde(default)]
    pub items: Vec<InstanceTemplate>,
    /// Next page token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_page_token: Option<String>,
}

/// `InstanceGroupManager` (zonal MIG).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InstanceGroupManager {
    /// Name.
    pub name: String,
    /// Description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Prefix of the VM names (defaults to the MIG's name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_instance_name: Option<String>,
    /// Template URL (full or partial).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_template: Option<String>,
    /// Number of VMs.
    #[serde(default)]
    pub target_size: i32,
    /// BULK (all VMs at once) or INDIVIDUAL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_size_policy: Option<TargetSizePolicy>,
    /// The workload policy the VMs are placed by.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_policies: Option<MigResourcePolicies>,
    /// What to do when a VM fails.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_lifecycle_policy: Option<InstanceLifecyclePolicy>,
    /// Output: status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<InstanceGroupManagerStatus>,
    /// Output: what the MIG is doing to its VMs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_actions: Option<ActionsSummary>,
    /// Output: self link.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub self_link: Option<String>,
    /// Output: id (uint64 as a string).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Output: zone URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
    /// Output: creation timestamp.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub creation_timestamp: Option<String>,
    /// Fingerprint (URL-safe base64).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fingerprint: Option<String>,
    /// Output: `compute#instanceGroupManager`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Output: the instance group URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_group: Option<String>,
    /// Not on the wire: the newest error of a CREATING action in the
    /// group's `listErrors`, read by slicectl's observation only when the
    /// group is not stable, runs fewer VMs than its target and its status
    /// says nothing (an INDIVIDUAL MIG reports a stockout per VM and in
    /// `listErrors`, not in its own status).
    #[serde(skip)]
    pub list_error: Option<IgmErrorDetail>,
    /// Not on the wire: the instance template and workload policy the group
    /// uses, as observed (`kinds::gce::link`), so that `slicectl adopt` can
    /// describe the group as one slice replica.
    #[serde(skip)]
    pub linked: Option<Box<Linked>>,
}

/// `InstanceGroupManagerTargetSizePolicy`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TargetSizePolicy {
    /// BULK, INDIVIDUAL or UNSPECIFIED_MODE.
    #[serde(default)]
    pub mode: String,
}

/// `InstanceGroupManagerResourcePolicies`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MigResourcePolicies {
    /// Workload policy URL (or partial path / name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload_policy: Option<String>,
}

/// `InstanceGroupManagerInstanceLifecyclePolicy`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InstanceLifecyclePolicy {
    /// REPAIR or DO_NOTHING.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_action_on_failure: Option<String>,
}

/// `InstanceGroupManagerStatus`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InstanceGroupManagerStatus {
    /// No VM is changing and nothing is scheduled.
    #[serde(default)]
    pub is_stable: bool,
    /// BULK creation progress.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bulk_instance_operation: Option<BulkInstanceOperation>,
    /// The accelerator topology applied from the workload policy.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub applied_accelerator_topologies: Vec<AppliedAcceleratorTopology>,
    /// Per-status VM counts (TPU MIGs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_instance_statuses: Option<InstanceStatusSummary>,
}

/// `InstanceGroupManagerStatusBulkInstanceOperation`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BulkInstanceOperation {
    /// The bulk creation is still trying.
    #[serde(default)]
    pub in_progress: bool,
    /// The last check and its errors.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_progress_check: Option<LastProgressCheck>,
}

/// `InstanceGroupManagerStatusBulkInstanceOperationLastProgressCheck`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LastProgressCheck {
    /// When (RFC3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<String>,
    /// Errors of the last attempt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<OperationError>,
}

/// `InstanceGroupManagerStatusAcceleratorTopology`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AppliedAcceleratorTopology {
    /// Topology, e.g. `4x4x4`.
    #[serde(default)]
    pub accelerator_topology: String,
    /// ACTIVATING, ACTIVE, ACTIVE_DEGRADED, DEACTIVATING, FAILED, INCOMPLETE, REACTIVATING.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
}

/// `InstanceGroupManagerStatusInstanceStatusSummary` (counts by VM status).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InstanceStatusSummary {
    /// VMs that do not exist yet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub non_existent: Option<i32>,
    /// PROVISIONING.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provisioning: Option<i32>,
    /// STAGING.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub staging: Option<i32>,
    /// RUNNING.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub running: Option<i32>,
    /// STOPPING.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopping: Option<i32>,
    /// DEPROVISIONING.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deprovisioning: Option<i32>,
}

/// `InstanceGroupManagerActionsSummary`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ActionsSummary {
    /// VMs running with nothing to do.
    #[serde(default)]
    pub none: i32,
    /// VMs being (or to be) created.
    #[serde(default)]
    pub creating: i32,
    /// VMs created once, without retries.
    #[serde(default)]
    pub creating_without_retries: i32,
    /// VMs being recreated.
    #[serde(default)]
    pub recreating: i32,
    /// VMs being deleted.
    #[serde(default)]
    pub deleting: i32,
    /// VMs being abandoned.
    #[serde(default)]
    pub abandoning: i32,
    /// VMs restarting.
    #[serde(default)]
    pub restarting: i32,
    /// VMs refreshing.
    #[serde(default)]
    pub refreshing: i32,
    /// VMs verifying.
    #[serde(default)]
    pub verifying: i32,
}

/// `InstanceGroupManagerList`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InstanceGroupManagerList {
    /// Items.
    #[serde(default)]
    pub items: Vec<InstanceGroupManager>,
    /// Next page token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_page_token: Option<String>,
}

/// `InstanceGroupManagerAggregatedList`: every MIG of a project, by scope
/// (`zones/Z`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InstanceGroupManagerAggregatedList {
    /// Scope (`zones/Z`, `regions/R`) → its MIGs.
    #[serde(default)]
    pub items: std::collections::BTreeMap<String, InstanceGroupManagersScopedList>,
    /// Next page token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_page_token: Option<String>,
    /// Scopes that could not be listed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unreachables: Vec<String>,
}

/// `InstanceGroupManagersScopedList`: the MIGs of one scope.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InstanceGroupManagersScopedList {
    /// The MIGs (absent when the scope has none).
    #[serde(default)]
    pub instance_group_managers: Vec<InstanceGroupManager>,
}

/// The body of `instanceGroupManagers.patch` as slicectl sends it (a JSON
/// merge patch of an `InstanceGroupManager`): only the description (where a
/// MIG's ownership and protection stamp live), and the group's current
/// fingerprint, without which the patch fails with 412 conditionNotMet.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InstanceGroupManagerPatch {
    /// The new description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The group's current fingerprint (from a get or a list).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fingerprint: Option<String>,
}

/// `InstanceGroupManagersRecreateInstancesRequest`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RecreateInstancesRequest {
    /// The VMs, as URLs or `zones/Z/instances/NAME`.
    #[serde(default)]
    pub instances: Vec<String>,
}

/// `ManagedInstance` (one item of `listManagedInstances`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ManagedInstance {
    /// VM name (present even before the VM exists).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// VM URL.
    #[serde(default)]
    pub instance: String,
    /// VM id (empty until it exists).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// NONE, CREATING, DELETING, …
    #[serde(default)]
    pub current_action: String,
    /// The VM's status (absent until it exists).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_status: Option<String>,
    /// RUNNING, STOPPED, …
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_status: Option<String>,
    /// Errors of the last create/delete attempt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_attempt: Option<ManagedInstanceLastAttempt>,
}

/// `ManagedInstanceLastAttempt`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ManagedInstanceLastAttempt {
    /// The errors.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub errors: Option<OperationError>,
}

/// `InstanceGroupManagersListManagedInstancesResponse`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ManagedInstanceList {
    /// The VMs.
    #[serde(default)]
    pub managed_instances: Vec<ManagedInstance>,
    /// Next page token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_page_token: Option<String>,
}

/// `InstanceManagedByIgmError` (one item of `listErrors`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InstanceManagedByIgmError {
    /// When (RFC3339).
    #[serde(default)]
    pub timestamp: String,
    /// The error.
    #[serde(default)]
    pub error: IgmErrorDetail,
    /// What the MIG was doing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_action_details: Option<IgmErrorActionDetails>,
}

/// `InstanceManagedByIgmErrorManagedInstanceError`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct IgmErrorDetail {
    /// Code, e.g. `ZONE_RESOURCE_POOL_EXHAUSTED`.
    #[serde(default)]
    pub code: String,
    /// Message.
    #[serde(default)]
    pub message: String,
}

/// `InstanceManagedByIgmErrorInstanceActionDetails`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct IgmErrorActionDetails {
    /// CREATING, DELETING, …
    #[serde(default)]
    pub action: String,
    /// VM URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance: Option<String>,
    /// Template version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<ManagedInstanceVersion>,
}

/// `ManagedInstanceVersion`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ManagedInstanceVersion {
    /// Template URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_template: Option<String>,
    /// Version name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// `InstanceGroupManagersListErrorsResponse`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct IgmErrorList {
    /// The errors.
    #[serde(default)]
    pub items: Vec<InstanceManagedByIgmError>,
    /// Next page token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_page_token: Option<String>,
}

/// `Instance` (a VM; output subset).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Instance {
    /// Name.
    pub name: String,
    /// Id (uint64 as a string).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// PROVISIONING, STAGING, RUNNING, STOPPING, TERMINATED, …
    #[serde(default)]
    pub status: String,
    /// Why it is in that status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_message: Option<String>,
    /// Machine type URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine_type: Option<String>,
    /// Zone URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
    /// Labels.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Metadata with its fingerprint.
    #[serde(default)]
    pub metadata: Metadata,
    /// Self link.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub self_link: Option<String>,
    /// Creation timestamp.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub creation_timestamp: Option<String>,
    /// Network interfaces.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_interfaces: Option<Vec<NetworkInterface>>,
    /// Scheduling.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduling: Option<Scheduling>,
}

/// `InstanceList`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InstanceList {
    /// Items.
    #[serde(default)]
    pub items: Vec<Instance>,
    /// Next page token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_page_token: Option<String>,
}

/// `GuestAttributes` (answer of `instances.getGuestAttributes`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GuestAttributes {
    /// The path asked for (`NS/` or `NS/KEY`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query_path: Option<String>,
    /// The entries under it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query_value: Option<GuestAttributesValue>,
}

/// `GuestAttributesValue`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GuestAttributesValue {
    /// Entries.
    #[serde(default)]
    pub items: Vec<GuestAttributeEntry>,
}

/// `GuestAttributesEntry`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GuestAttributeEntry {
    /// Namespace.
    #[serde(default)]
    pub namespace: String,
    /// Key.
    #[serde(default)]
    pub key: String,
    /// Value.
    #[serde(default)]
    pub value: String,
}

/// `Region` (answer of `regions.get`): only its quotas are read.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Region {
    /// Region name.
    #[serde(default)]
    pub name: String,
    /// The region's quotas (`Quota`).
    #[serde(default)]
    pub quotas: Vec<Quota>,
}

/// `Quota`: one metric's limit and usage in a region (doubles on the wire).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Quota {
    /// The metric, e.g. `TPU_LITE_PODSLICE_V5`.
    #[serde(default)]
    pub metric: String,
    /// The limit.
    #[serde(default)]
    pub limit: f64,
    /// Current usage.
    #[serde(default)]
    pub usage: f64,
}

/// `QuotaInfo` of the Cloud Quotas API (`cloudquotas.googleapis.com/v1`,
/// answer of `projects.locations.services.quotaInfos.get`; fields from
/// `google/api/cloudquotas/v1/resources.proto`): the quota's limits, per
/// combination of dimensions. Only what the preflight reads is kept.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct QuotaInfo {
    /// `projects/P/locations/global/services/compute.googleapis.com/quotaInfos/ID`.
    #[serde(default)]
    pub name: String,
    /// The quota id, e.g. `TPU-V5P-per-project-region`.
    #[serde(default)]
    pub quota_id: String,
    /// The metric, e.g. `compute.googleapis.com/tpu_v5p`.
    #[serde(default)]
    pub metric: String,
    /// The dimensions the quota is defined on (`region`, `tpu_family`).
    #[serde(default)]
    pub dimensions: Vec<String>,
    /// The limits, from the most specific dimensions to the least.
    #[serde(default)]
    pub dimensions_infos: Vec<DimensionsInfo>,
}

/// `DimensionsInfo`: the limit in force for one combination of dimensions
/// (a dimension missing from `dimensions` matches every value without an
/// entry of its own).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DimensionsInfo {
    /// Dimension → value (`region` → `us-central1`, `tpu_family` → `CT6E`).
    #[serde(default)]
    pub dimensions: BTreeMap<String, String>,
    /// The limit.
    #[serde(default)]
    pub details: QuotaDetails,
    /// The regions (or zones) it applies to.
    #[serde(default)]
    pub applicable_locations: Vec<String>,
}

/// `QuotaDetails`: the value in force (int64 as a string on the wire; `-1`
/// is unlimited).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct QuotaDetails {
    /// The value.
    #[serde(default)]
    pub value: Option<String>,
}

impl QuotaInfo {
    /// The limit in force in `region` for `family` (the `tpu_family`
    /// dimension, compared without case): the first, most specific entry
    /// whose dimensions all match. `None` when no entry applies or its value
    /// is not a number; `Some(-1)` is unlimited.
    pub fn limit_in(&self, region: &str, family: Option<&str>) -> Option<i64> {
        let applies = |d: &DimensionsInfo| {
            d.dimensions.iter().all(|(k, v)| match k.as_str() {
                "region" => v == region,
                "tpu_family" => family.is_some_and(|f| f.eq_ignore_ascii_case(v)),
                _ => false,
            }) && (d.applicable_locations.is_empty()
                || d.applicable_locations.iter().any(|l| l == region))
        };
        let d = self.dimensions_infos.iter().find(|d| applies(d))?;
        d.details.value.as_deref()?.parse().ok()
    }
}

/// `ListTimeSeriesResponse` of Cloud Monitoring (`monitoring.googleapis.com/v3`,
/// answer of `projects.timeSeries.list`): the usage of the TPU quotas Cloud
/// Quotas gives only the limits of. Only what the preflight reads is kept.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ListTimeSeriesResponse {
    /// The series of this page.
    #[serde(default)]
    pub time_series: Vec<TimeSeries>,
    /// Set while more pages remain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_page_token: Option<String>,
}

/// `TimeSeries`: one metric of one monitored resource, its points newest
/// first.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TimeSeries {
    /// The metric (`type`, `labels`: `quota_metric`, `tpu_family`, …).
    #[serde(default)]
    pub metric: Labelled,
    /// The monitored resource (`type`, `labels`: `location`, …).
    #[serde(default)]
    pub resource: Labelled,
    /// The points, newest first.
    #[serde(default)]
    pub points: Vec<Point>,
}

/// `Metric` or `MonitoredResource`: a type and its labels.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
pub struct Labelled {
    /// E.g. `serviceruntime.googleapis.com/quota/allocation/usage`, `consumer_quota`.
    #[serde(default, rename = "type")]
    pub kind: String,
    /// Label → value.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
}

/// `Point`: a value over an interval.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Point {
    /// The value.
    #[serde(default)]
    pub value: TypedValue,
}

/// `TypedValue`: the quota usage is an `INT64` (a string on the wire).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TypedValue {
    /// An int64 value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub int64_value: Option<String>,
    /// A double value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub double_value: Option<f64>,
}

impl TypedValue {
    /// The value as a whole number, if it is one.
    pub fn whole(&self) -> Option<u64> {
        match (&self.int64_value, self.double_value) {
            (Some(v), _) => v.parse().ok(),
            (None, Some(d)) if d >= 0.0 && d.is_finite() => Some(d.round() as u64),
            _ => None,
        }
    }
}

/// `Reservation` (answer of `reservations.get`): its name and
/// `specificReservation` are read.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Reservation {
    /// Reservation name.
    #[serde(default)]
    pub name: String,
    /// Size and use (`AllocationSpecificSKUReservation`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub specific_reservation: Option<SpecificReservation>,
}

/// `AllocationSpecificSKUReservation`: `count` and `inUseCount` (int64,
/// sent as strings).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SpecificReservation {
    /// VMs the reservation holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<String>,
    /// VMs consuming it now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_use_count: Option<String>,
}
