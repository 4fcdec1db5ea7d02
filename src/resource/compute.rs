//! Compute Engine `ResourcePolicy` (workload policy) and `Operation` (compute v1).

use schemars::JsonSchema;
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
