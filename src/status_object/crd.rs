//! The `SliceStatus` custom resource: one object per slice, status only.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// API group of the status objects.
pub const GROUP: &str = "slicectl.dev";
/// API version of the status objects.
pub const VERSION: &str = "v1alpha1";
/// `apiVersion` of the status objects.
pub const API_VERSION: &str = "slicectl.dev/v1alpha1";
/// Kind of the status objects.
pub const KIND: &str = "SliceStatus";
/// Short name (`kubectl get slst`).
pub const SHORT_NAME: &str = "slst";

/// Condition `Ready`: the slice is converged (every replica exists with all
/// its nodes) — `kubectl wait --for=condition=Ready` waits for it.
pub const READY: &str = "Ready";
/// Condition `Reconciling`: work is in progress (kstatus InProgress).
pub const RECONCILING: &str = "Reconciling";
/// Condition `Stalled`: an error that will not clear by itself (kstatus
/// Failed).
pub const STALLED: &str = "Stalled";

/// The status of one slice as slicectl last saw it. The spec is empty on
/// purpose: the slice specs in git are the only source of truth, so there is
/// nothing to edit here (fields set by hand are pruned by the API server).
/// Everything lives in `status`, written by slicectl.
// Each `printcolumn(...)` repeats `type_ = "string"`: not a duplicate.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "slicectl.dev",
    version = "v1alpha1",
    kind = "SliceStatus",
    plural = "slicestatuses",
    singular = "slicestatus",
    shortname = "slst",
    category = "slicectl",
    namespaced,
    status = "SliceStatusStatus",
    doc = "What slicectl last saw of one TPU slice: reporting only, the slice specs are the source of truth.",
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    ),
    printcolumn(
        name = "Reason",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].reason"
    ),
    printcolumn(name = "Nodes", type_ = "string", json_path = ".status.nodes"),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
pub struct SliceStatusSpec {}

/// What slicectl reports about a slice.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("default" = {"observedGeneration": -1}))]
pub struct SliceStatusStatus {
    /// The object's `metadata.generation` this status was written for; -1
    /// until slicectl first writes it (so kstatus reports a fresh object
    /// InProgress, not Current).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// kstatus conditions: `Ready` always; `Reconciling` while work is in
    /// progress and `Stalled` on an error that will not clear by itself, each
    /// only while true.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// A summary of the slice's spec, for reading only. Absent while the
    /// slice has never been validly defined in the specs; the last one read
    /// while the object outlives its slice's spec (a refusal stands).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slice: Option<SpecSummary>,
    /// Nodes over all replicas, `READY/EXPECTED` (`?` when unknown).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodes: Option<String>,
    /// Per replica.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub replicas: Vec<ReplicaStatus>,
    /// Where the slice comes from: absent for a slice of the specs,
    /// `jobset NAMESPACE/NAME` for a workload slice a pending JobSet asked
    /// for (docs/workloads.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

/// The slice's spec as slicectl read it from the specs.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SpecSummary {
    /// The Target the slice goes to.
    pub target: String,
    /// `gke` or `gce`.
    pub backend: String,
    /// TPU accelerator.
    pub accelerator: String,
    /// TPU topology.
    pub topology: String,
    /// Machine type (the catalogue's default when the spec leaves it out).
    pub machine_type: String,
    /// Desired replicas.
    #[schemars(schema_with = "count")]
    pub replicas: u32,
    /// Hosts (VMs, nodes) per replica.
    #[schemars(schema_with = "count")]
    pub hosts_per_replica: u32,
}

/// One replica of the slice.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReplicaStatus {
    /// Replica index.
    #[schemars(schema_with = "count")]
    pub index: u32,
    /// Its cloud resources.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<ResourceStatus>,
    /// Nodes ready (for GKE, the node count the pool reports), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "optional_count")]
    pub nodes_ready: Option<u32>,
    /// Nodes expected (hosts of the slice).
    #[schemars(schema_with = "count")]
    pub nodes_expected: u32,
    /// Nodes as `slicectl status` shows them.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub nodes: String,
    /// The replica's last error, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
}

/// One cloud resource of a replica.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceStatus {
    /// Kind (`node_pool`, `workload_policy`, `instance_template`, `mig`, `nodes`).
    pub kind: String,
    /// Cloud resource name.
    pub name: String,
    /// State: the live status for the replica's primary resource (node pool
    /// or MIG); for the others what this cycle did (`IN SYNC`, `CREATED`,
    /// `FAILED (code)`, …).
    pub state: String,
}

/// A count: `int32` with minimum 0 (the API server does not know `uint32`).
fn count(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": "integer", "format": "int32", "minimum": 0})
}

/// An optional count.
fn optional_count(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": "integer", "format": "int32", "minimum": 0, "nullable": true})
}

/// The CRD as YAML, exactly as committed in `deploy/crd-slicestatus.yaml`.
pub fn crd_yaml() -> Result<String, serde_saphyr::ser::Error> {
    use kube::CustomResourceExt as _;
    let body = serde_saphyr::to_string(&SliceStatus::crd())?;
    Ok(format!(
        "# Generated by `slicectl crd` from src/status_object/crd.rs; do not edit.\n{body}"
    ))
}

#[cfg(test)]
#[path = "crd/tests.rs"]
mod tests;
