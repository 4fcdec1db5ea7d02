//! Long-running operations (GKE and Compute), driven by a tokio clock: an
//! operation is RUNNING from its creation until `created + latency`, then
//! DONE (with an error when it failed). Effects on resources are applied by
//! `state::Inner::advance` when an operation completes.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::Instant;

/// When an operation started and when it completes.
#[derive(Debug, Clone)]
pub(crate) struct OpTiming {
    /// Clock time at completion.
    pub done_at: Instant,
    /// Wall-clock creation time (for RFC3339 fields).
    pub start_wall: jiff::Timestamp,
    /// Latency (end wall time = start + latency).
    pub latency: Duration,
}

impl OpTiming {
    pub fn new(now: Instant, latency: Duration) -> Self {
        Self {
            done_at: now + latency,
            start_wall: jiff::Timestamp::now(),
            latency,
        }
    }

    fn start_rfc3339(&self) -> String {
        self.start_wall.to_string()
    }

    fn end_rfc3339(&self) -> String {
        let end = jiff::SignedDuration::try_from(self.latency)
            .ok()
            .and_then(|d| self.start_wall.checked_add(d).ok())
            .unwrap_or(self.start_wall);
        end.to_string()
    }
}

/// What a GKE operation does to the world when it completes.
#[derive(Debug, Clone)]
pub(crate) enum GkeEffect {
    /// Node pool becomes RUNNING (or ERROR on a stockout, or with `fails`'s
    /// message when GKE accepts the request and fails it later).
    Create {
        pool: String,
        stockout: bool,
        fails: Option<String>,
    },
    /// Node pool disappears.
    Delete { pool: String },
    /// Node pool goes back to RUNNING after RECONCILING.
    Update { pool: String },
    /// A cluster-level operation (a control-plane upgrade): while it runs,
    /// no node pool operation may start on the cluster.
    Cluster { cluster: String },
}

impl GkeEffect {
    /// The path of the resource the operation targets (a node pool, or the
    /// cluster for a cluster-level operation).
    pub fn target(&self) -> &str {
        match self {
            Self::Create { pool, .. } | Self::Delete { pool } | Self::Update { pool } => pool,
            Self::Cluster { cluster } => cluster,
        }
    }

    /// Whether this is a cluster-level operation.
    pub fn is_cluster_level(&self) -> bool {
        matches!(self, Self::Cluster { .. })
    }
}

/// A failed GKE operation's `error` (google.rpc.Status) and conditions. A
/// `code` of 0 (OK) is an operation that succeeded but reports conditions:
/// it renders `clusterConditions` only, no `error` (a create that left its
/// pool `RUNNING_WITH_ERROR` after a stockout).
#[derive(Debug, Clone)]
pub(crate) struct GkeOpError {
    pub code: i32,
    pub message: String,
    pub conditions: Vec<Value>,
}

/// A GKE `Operation`.
#[derive(Debug, Clone)]
pub(crate) struct GkeOp {
    pub name: String,
    pub project: String,
    pub location: String,
    /// `projects/P/locations/L/clusters/C`.
    pub cluster: String,
    /// CREATE_NODE_POOL, DELETE_NODE_POOL, UPDATE_CLUSTER, UPGRADE_MASTER.
    pub op_type: &'static str,
    pub effect: GkeEffect,
    pub timing: OpTiming,
    pub done: bool,
    pub error: Option<GkeOpError>,
}

impl GkeOp {
    /// Renders the operation; `base` is `scheme://host`, `version` `v1` or `v1beta1`.
    pub fn to_json(&self, base: &str, version: &str) -> Value {
        // Serialising a struct of strings into a `Value` cannot fail.
        serde_json::to_value(self.wire(base, version)).unwrap_or_default()
    }

    /// The operation as GKE answers it, ready to serialise (a list of
    /// thousands is written without a `Value` per operation).
    pub fn wire<'a>(&'a self, base: &str, version: &str) -> GkeOpWire<'a> {
        let done = self.done;
        let status = if done { "DONE" } else { "RUNNING" };
        // GKE reports a create's stockout in the operation's
        // clusterConditions (code GCE_STOCKOUT) with nodepoolConditions
        // empty (issue text; terraform-provider-google stockout reports).
        let failed = self.error.as_ref().filter(|_| done);
        let error = failed.filter(|e| e.code != 0);
        GkeOpWire {
            name: &self.name,
            zone: &self.location,
            location: &self.location,
            operation_type: self.op_type,
            status,
            // Like real GKE, operation links name the project by its number,
            // and a zonal cluster's links say `zones/`, not `locations/`
            // (`…/projects/<number>/zones/<zone>/clusters/<c>/…`; issue text,
            // as GKE answers for zonal clusters).
            self_link: format!(
                "{base}/{version}/projects/{}/{}/{}/operations/{}",
                project_number(&self.project),
                location_segment(&self.location),
                self.location,
                self.name
            ),
            target_link: format!(
                "{base}/{version}/{}",
                zonal_links(&with_project_number(self.effect.target()), &self.location)
            ),
            start_time: self.timing.start_rfc3339(),
            end_time: done.then(|| self.timing.end_rfc3339()),
            progress: Progress { status },
            error: error.map(|e| RpcStatus {
                code: e.code,
                message: &e.message,
                details: [],
            }),
            status_message: error.map(|e| e.message.as_str()),
            detail: error.map(|e| e.message.as_str()),
            cluster_conditions: failed.map(|e| e.conditions.as_slice()),
        }
    }
}

/// A GKE `Operation` on the wire, fields in the order GKE's JSON (and the
/// simulator before it wrote them this way) has them.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct GkeOpWire<'a> {
    name: &'a str,
    zone: &'a str,
    location: &'a str,
    operation_type: &'static str,
    status: &'static str,
    self_link: String,
    target_link: String,
    start_time: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    end_time: Option<String>,
    progress: Progress,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<RpcStatus<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    status_message: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    detail: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cluster_conditions: Option<&'a [Value]>,
}

#[derive(serde::Serialize)]
struct Progress {
    status: &'static str,
}

/// `google.rpc.Status` with no details.
#[derive(serde::Serialize)]
struct RpcStatus<'a> {
    code: i32,
    message: &'a str,
    details: [(); 0],
}

/// Where a compute operation lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Scope {
    Region { project: String, region: String },
    Zone { project: String, zone: String },
    Global { project: String },
}

impl Scope {
    /// `projects/P/regions/R` (or zones/Z, global).
    pub fn path(&self) -> String {
        match self {
            Self::Region { project, region } => format!("projects/{project}/regions/{region}"),
            Self::Zone { project, zone } => format!("projects/{project}/zones/{zone}"),
            Self::Global { project } => format!("projects/{project}/global"),
        }
    }
}

/// What a compute operation does when it completes.
#[derive(Debug, Clone)]
pub(crate) enum ComputeEffect {
    /// Resource policy CREATING → READY.
    PolicyReady { key: String },
    /// Resource policy removed.
    PolicyDelete { key: String },
    /// Instance template becomes visible.
    TemplateReady { key: String },
    /// Instance template removed.
    TemplateDelete { key: String },
    /// MIG exists; it creates its VMs (or meets a stockout).
    MigReady { key: String },
    /// MIG and its VMs removed.
    MigDelete { key: String },
    /// These VMs of the MIG are made again from its template.
    MigRecreate { key: String, vms: Vec<String> },
    /// The operation fails with this error and changes nothing.
    Fail {
        code: String,
        message: String,
        http_status: u16,
        http_message: String,
    },
    /// Nothing more happens (the change was applied at request time).
    None,
}

/// A failed compute operation's `error.errors[]` and HTTP status.
#[derive(Debug, Clone)]
pub(crate) struct ComputeOpError {
    pub code: String,
    pub message: String,
    pub http_status: u16,
    pub http_message: String,
}

/// A compute `Operation`.
#[derive(Debug, Clone)]
pub(crate) struct ComputeOp {
    pub name: String,
    pub id: String,
    pub scope: Scope,
    /// `insert`, `delete`, …
    pub op_type: &'static str,
    /// Target resource path relative to the API root (`projects/…`).
    pub target: String,
    pub target_id: String,
    pub effect: ComputeEffect,
    pub timing: OpTiming,
    pub done: bool,
    pub error: Option<ComputeOpError>,
    pub client_operation_id: Option<String>,
}

impl ComputeOp {
    /// Renders the operation; `api` is `scheme://host/compute/VERSION`.
    pub fn to_json(&self, api: &str) -> Value {
        let scope_path = self.scope.path();
        let mut op = json!({
            "kind": "compute#operation",
            "id": self.id,
            "name": self.name,
            "operationType": self.op_type,
            "targetLink": format!("{api}/{}", self.target),
            "targetId": self.target_id,
            "status": if self.done { "DONE" } else { "RUNNING" },
            "user": "slicectl-sim@example.com",
            "progress": if self.done { 100 } else { 0 },
            "insertTime": self.timing.start_rfc3339(),
            "startTime": self.timing.start_rfc3339(),
            "selfLink": format!("{api}/{scope_path}/operations/{}", self.name),
        });
        match &self.scope {
            Scope::Region { .. } => op["region"] = json!(format!("{api}/{scope_path}")),
            Scope::Zone { .. } => op["zone"] = json!(format!("{api}/{scope_path}")),
            Scope::Global { .. } => {}
        }
        if let Some(id) = &self.client_operation_id {
            op["clientOperationId"] = json!(id);
        }
        if self.done {
            op["endTime"] = json!(self.timing.end_rfc3339());
            if let Some(e) = &self.error {
                op["error"] = json!({"errors": [{"code": e.code, "message": e.message}]});
                op["httpErrorStatusCode"] = json!(e.http_status);
                op["httpErrorMessage"] = json!(e.http_message);
            }
        }
        op
    }
}

/// The simulated project number of a project id: 12 digits, deterministic.
/// Real GKE operation `selfLink`/`targetLink` use the project number, so a
/// client that matches links by project id breaks on them.
pub fn project_number(project: &str) -> String {
    use sha2::{Digest, Sha256};
    let d = Sha256::digest(project.as_bytes());
    let n = u64::from_be_bytes([d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7]]);
    format!("{}", 100_000_000_000 + n % 900_000_000_000)
}

/// `projects/ID/rest` → `projects/NUMBER/rest`.
/// `zones` for a zone, `locations` for a region.
fn location_segment(location: &str) -> &'static str {
    if super::gke::is_zone(location) {
        "zones"
    } else {
        "locations"
    }
}

/// A resource path with `locations/<zone>` spelt `zones/<zone>` for a zonal
/// cluster, as GKE spells its operation links.
fn zonal_links(path: &str, location: &str) -> String {
    if super::gke::is_zone(location) {
        path.replacen(
            &format!("/locations/{location}/"),
            &format!("/zones/{location}/"),
            1,
        )
    } else {
        path.to_string()
    }
}

fn with_project_number(path: &str) -> String {
    match path
        .strip_prefix("projects/")
        .and_then(|r| r.split_once('/'))
    {
        Some((id, rest)) => format!("projects/{}/{rest}", project_number(id)),
        None => path.to_string(),
    }
}
