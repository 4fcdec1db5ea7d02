//! GKE (container v1/v1beta1): clusters (get, list), node pools (create, get,
//! list, update, delete) and operations (get, list). Node pools are stored
//! as the validated request plus the defaults GKE's server fills in, so a
//! client must normalise defaults before diffing, as against real GKE.

use std::sync::LazyLock;

use regex::Regex;
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use super::errors::ApiError;
use super::fields::Selection;
use super::labels;
use super::operations::{GkeEffect, GkeOp, OpTiming};
use super::server::Ctx;
use super::state::{Inner, PoolRec};

/// GKE node version the simulator reports.
pub const GKE_VERSION: &str = "1.33.5-gke.1162000";

/// Node pool name rule (verbatim from GKE's 400 message).
const POOL_NAME_RE: &str = "(?:[a-z](?:[-a-z0-9]{0,38}[a-z0-9])?)";

static POOL_NAME: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(&format!("^{POOL_NAME_RE}$")).ok());

/// gcloud's (and GKE's usual) default OAuth scopes.
const DEFAULT_SCOPES: [&str; 6] = [
    "https://www.googleapis.com/auth/devstorage.read_only",
    "https://www.googleapis.com/auth/logging.write",
    "https://www.googleapis.com/auth/monitoring",
    "https://www.googleapis.com/auth/service.management.readonly",
    "https://www.googleapis.com/auth/servicecontrol",
    "https://www.googleapis.com/auth/trace.append",
];

/// Path parameters of a cluster-scoped GKE call.
#[derive(Debug, Clone)]
pub(crate) struct ClusterRef {
    pub project: String,
    pub location: String,
    pub cluster: String,
}

impl ClusterRef {
    /// Parses `projects/P/locations/L/clusters/C` (or `…/zones/L/…`, the
    /// v1beta1 spelling; a leading URL or `/` before `projects/` is
    /// ignored): GKE's cluster resource name
    /// (<https://cloud.google.com/kubernetes-engine/docs/reference/rest/v1/projects.locations.clusters/get>).
    pub fn parse(s: &str) -> Option<ClusterRef> {
        let rest = s.find("projects/").map_or(s, |i| &s[i..]);
        let parts: Vec<&str> = rest.trim_end_matches('/').split('/').collect();
        match parts.as_slice() {
            ["projects", p, "locations" | "zones", l, "clusters", c]
                if !p.is_empty() && !l.is_empty() && !c.is_empty() =>
            {
                Some(ClusterRef {
                    project: (*p).to_owned(),
                    location: (*l).to_owned(),
                    cluster: (*c).to_owned(),
                })
            }
            _ => None,
        }
    }

    /// `projects/P/locations/L/clusters/C`.
    pub fn key(&self) -> String {
        format!(
            "projects/{}/locations/{}/clusters/{}",
            self.project, self.location, self.cluster
        )
    }

    fn pool_key(&self, pool: &str) -> String {
        format!("{}/nodePools/{pool}", self.key())
    }
}

/// True for a zone (`us-central2-b`), false for a region (`us-central2`).
pub(crate) fn is_zone(location: &str) -> bool {
    location
        .rsplit('-')
        .next()
        .is_some_and(|s| s.len() == 1 && s.chars().all(|c| c.is_ascii_lowercase()))
}

pub(crate) fn default_locations(location: &str) -> Vec<String> {
    if is_zone(location) {
        vec![location.to_string()]
    } else {
        ["a", "b", "c"]
            .iter()
            .map(|z| format!("{location}-{z}"))
            .collect()
    }
}

fn not_found(what: &str) -> ApiError {
    ApiError::not_found(format!("Not found: {what}."))
}

fn require_cluster(inner: &Inner, c: &ClusterRef) -> Result<(), ApiError> {
    if inner.clusters.contains_key(&c.key()) {
        Ok(())
    } else {
        Err(not_found(&c.key()))
    }
}

/// GKE's concurrency rules for a write on `pool_key` (unless switched off
/// with `concurrency_rules: false`):
///
/// - a cluster-level operation excludes every other operation on the cluster,
///   and a node pool runs one operation at a time; a conflicting request gets
///   400 FAILED_PRECONDITION "Cluster is running incompatible operation OP."
///   (GKE "Troubleshoot concurrent operations" and "Add and manage node
///   pools"; the message, for a delete sent while that pool's create runs:
///   hashicorp/terraform-provider-google#10366). Operations on different
///   node pools run in parallel.
/// - at most `operation_quota` operations run on a cluster at once; past it,
///   429 RESOURCE_EXHAUSTED "Too many operations: cluster \"c\" hits the
///   concurrent operations quota 5, please try again later." with a
///   RequestInfo detail (hashicorp/terraform-provider-google#15205, #15579).
fn check_concurrency(
    inner: &mut Inner,
    ctx: &Ctx,
    c: &ClusterRef,
    pool_key: &str,
) -> Result<(), ApiError> {
    let config = &inner.faults.config;
    if !config.concurrency_rules {
        return Ok(());
    }
    let quota = config.operation_quota as usize;
    let key = c.key();
    let running: Vec<&GkeOp> = inner.running_gke_ops(&key).collect();
    let conflicting = running
        .iter()
        .find(|op| op.effect.is_cluster_level())
        .or_else(|| running.iter().find(|op| op.effect.target() == pool_key));
    if let Some(op) = conflicting {
        return Err(incompatible(&op.name).with_request_info(&ctx.request_id));
    }
    if running.len() >= quota {
        return Err(ApiError::too_many_operations(format!(
            "Too many operations: cluster \"{}\" hits the concurrent operations quota {quota}, please try again later.",
            c.cluster
        ))
        .with_request_info(&ctx.request_id));
    }
    Ok(())
}

fn incompatible(op: &str) -> ApiError {
    ApiError::failed_precondition(format!("Cluster is running incompatible operation {op}."))
}

/// Starts a cluster-level operation (`UPGRADE_MASTER`, as a control-plane
/// upgrade) on `cluster` that runs for `duration`: while it runs, every node
/// pool write on the cluster is refused as incompatible. For tests and
/// experiments (`POST /_sim/cluster-operations`).
pub(crate) fn start_cluster_operation(
    inner: &mut Inner,
    ctx: &Ctx,
    cluster: &str,
    duration: std::time::Duration,
) -> Result<Value, ApiError> {
    let c = ClusterRef::parse(cluster).ok_or_else(|| {
        ApiError::invalid(
            "badRequest",
            format!(
                "invalid input: {cluster:?} is not projects/PROJECT/locations/LOCATION/clusters/CLUSTER"
            ),
        )
    })?;
    require_cluster(inner, &c)?;
    let effect = GkeEffect::Cluster { cluster: c.key() };
    Ok(new_op_lasting(
        inner,
        ctx,
        &c,
        "UPGRADE_MASTER",
        effect,
        duration,
    ))
}

/// `GET v1/projects/P/locations/L/clusters/C` (a minimal Cluster).
pub(crate) fn get_cluster(inner: &Inner, ctx: &Ctx, c: &ClusterRef) -> Result<Value, ApiError> {
    render_cluster(inner, ctx, c, None)
}

/// A `Cluster`, its pools written with only what `pools_only` (the partial
/// response asked of them, if any) keeps.
fn render_cluster(
    inner: &Inner,
    ctx: &Ctx,
    c: &ClusterRef,
    pools_only: Option<&Selection>,
) -> Result<Value, ApiError> {
    let created = inner
        .clusters
        .get(&c.key())
        .ok_or_else(|| not_found(&c.key()))?;
    let pools: Vec<Value> = pools_of(inner, c)
        .map(|(key, rec)| render_pool(key, rec, ctx, pools_only))
        .collect();
    let mut cluster = json!({
        "name": c.cluster,
        "location": c.location,
        "zone": c.location,
        "locations": default_locations(&c.location),
        "status": "RUNNING",
        "currentMasterVersion": GKE_VERSION,
        "currentNodeVersion": GKE_VERSION,
        "initialClusterVersion": GKE_VERSION,
        "endpoint": "10.0.0.2",
        "network": "default",
        "subnetwork": "default",
        "createTime": created.to_string(),
        "selfLink": format!("{}/{}/{}", ctx.base, ctx.version, c.key()),
        "nodePools": pools,
    });
    // A cluster linked to a real API server reports it as GKE does.
    if let (Some(link), Some(obj)) = (inner.links.get(&c.key()), cluster.as_object_mut())
        && let Value::Object(fields) = link.cluster_fields()
    {
        obj.extend(fields);
    }
    Ok(cluster)
}

/// `GET v1/projects/P/locations/L/clusters` → `ListClustersResponse`: the
/// project's clusters in location `L`, or in every zone and region for
/// `L` = `-` ("Location \"-\" matches all zones and all regions":
/// cloud.google.com/kubernetes-engine/docs/reference/rest/v1/projects.locations.clusters/list).
/// Each is a full `Cluster`, node pools included, as `clusters.get` returns
/// it. As on the wire (proto3 JSON), an empty `clusters` list is left out,
/// and so is `missingZones`: the simulator never misses a zone.
pub(crate) fn list_clusters(inner: &Inner, ctx: &Ctx, project: &str, location: &str) -> Value {
    // Pools' fields a partial response (`fields`, applied to the answer
    // after) drops are not rendered: slicectl's `clusters.list` reads the
    // pools' names and labels, and rendering all of every pool in the project
    // cost as much as all its node pool lists.
    let selection = ctx.query("fields").and_then(|f| Selection::parse(f).ok());
    let pools_only = selection
        .as_ref()
        .and_then(|s| s.within("clusters"))
        .and_then(|s| s.within("nodePools"));
    let clusters: Vec<Value> = inner
        .clusters
        .keys()
        .filter_map(|k| {
            let c = ClusterRef::parse(k)?;
            let wanted = c.project == project && (location == "-" || c.location == location);
            wanted.then_some(c)
        })
        .filter_map(|c| render_cluster(inner, ctx, &c, pools_only).ok())
        .collect();
    if clusters.is_empty() {
        json!({})
    } else {
        json!({ "clusters": clusters })
    }
}

fn pools_of<'a>(
    inner: &'a Inner,
    c: &ClusterRef,
) -> impl Iterator<Item = (&'a String, &'a PoolRec)> {
    let prefix = format!("{}/nodePools/", c.key());
    // The keys are sorted, so one cluster's pools are one run of them.
    inner
        .pools
        .range(prefix.clone()..)
        .take_while(move |(k, _)| k.starts_with(&prefix))
}

/// `GET …/clusters/C/nodePools` → `ListNodePoolsResponse`.
pub(crate) fn list_pools(inner: &Inner, ctx: &Ctx, c: &ClusterRef) -> Result<Value, ApiError> {
    require_cluster(inner, c)?;
    let pools: Vec<Value> = pools_of(inner, c)
        .map(|(k, rec)| render_pool(k, rec, ctx, None))
        .collect();
    Ok(json!({ "nodePools": pools }))
}

/// `GET …/nodePools/NP`.
pub(crate) fn get_pool(
    inner: &Inner,
    ctx: &Ctx,
    c: &ClusterRef,
    pool: &str,
) -> Result<Value, ApiError> {
    require_cluster(inner, c)?;
    let key = c.pool_key(pool);
    let rec = inner.pools.get(&key).ok_or_else(|| not_found(&key))?;
    Ok(render_pool(&key, rec, ctx, None))
}

fn etag(rec: &PoolRec) -> String {
    /// Feeds serialised JSON straight into the hash: a list of thousands of
    /// pools computes thousands of etags under the simulator's lock, and a
    /// `String` of each pool per etag was most of that cost.
    struct HashWriter<'h>(&'h mut Sha256);
    impl std::io::Write for HashWriter<'_> {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.update(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut h = Sha256::new();
    // Writing a `Value` into an infallible writer cannot fail; were it to,
    // the etag would still be a digest of what was written.
    let _ = serde_json::to_writer(HashWriter(&mut h), &rec.spec);
    h.update(rec.status.as_bytes());
    hex::encode(&h.finalize()[..16])
}

/// The 8 hex digits in a pool's instance group (and node) names.
pub(crate) fn pool_digest(pool_key: &str) -> String {
    hex::encode(&Sha256::digest(pool_key.as_bytes())[..4])
}

fn render_pool(key: &str, rec: &PoolRec, ctx: &Ctx, only: Option<&Selection>) -> Value {
    // Serialising a map of string keys into a `Value` cannot fail.
    serde_json::to_value(PoolWire {
        key,
        rec,
        ctx,
        only,
    })
    .unwrap_or_default()
}

/// A stored pool as GKE answers it: its spec with `status`,
/// `statusMessage`, `conditions`, `selfLink`, `instanceGroupUrls` and
/// `etag` set, serialised straight from the record. A list of thousands of
/// pools is written without a `Value` per pool (the clone of each spec and
/// the maps built from it were most of the simulator's CPU in a 10,000-slice
/// plan). Key order is the spec's (`preserve_order`), a set field keeping
/// its place and new ones following in the order above, byte for byte what
/// inserting them into a clone of the spec gives (`gke_tests.rs`).
struct PoolWire<'a> {
    key: &'a str,
    rec: &'a PoolRec,
    ctx: &'a Ctx,
    /// The partial response (`fields`) asked of each pool, if any: fields it
    /// drops are not written (nor their etag computed).
    only: Option<&'a Selection>,
}

impl PoolWire<'_> {
    fn keeps(&self, field: &str) -> bool {
        self.only.is_none_or(|s| s.keeps(field))
    }

    /// The fields set over the spec, in order (those the selection keeps).
    fn overrides(&self) -> Vec<(&'static str, Value)> {
        let mut set = vec![("status", json!(self.rec.status))];
        if let Some(m) = &self.rec.status_message {
            set.push(("statusMessage", json!(m)));
        }
        if !self.rec.conditions.is_empty() {
            set.push(("conditions", Value::Array(self.rec.conditions.clone())));
        }
        let base = &self.ctx.base;
        if self.keeps("selfLink") {
            let link = format!("{base}/{}/{}", self.ctx.version, self.key);
            set.push(("selfLink", Value::String(link)));
        }
        if self.keeps("instanceGroupUrls") {
            let parts: Vec<&str> = self.key.split('/').collect();
            let part = |i: usize| parts.get(i).copied().unwrap_or_default();
            let (project, cluster, pool) = (part(1), part(5), part(7));
            let digest = pool_digest(self.key);
            let zones = self.rec.spec.get("locations").and_then(Value::as_array);
            let urls = zones
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .map(|z| {
                    Value::String(format!(
                        "{base}/compute/v1/projects/{project}/zones/{z}/instanceGroupManagers/gke-{cluster}-{pool}-{digest}-grp"
                    ))
                })
                .collect();
            set.push(("instanceGroupUrls", Value::Array(urls)));
        }
        if self.keeps("etag") {
            set.push(("etag", Value::String(etag(self.rec))));
        }
        set.retain(|(k, _)| self.keeps(k));
        set
    }
}

impl serde::Serialize for PoolWire<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let Some(spec) = self.rec.spec.as_object() else {
            return self.rec.spec.serialize(s);
        };
        let set = self.overrides();
        let over = |k: &str| set.iter().find(|(name, _)| *name == k).map(|(_, v)| v);
        let mut map = s.serialize_map(None)?;
        for (k, v) in spec.iter().filter(|(k, _)| self.keeps(k)) {
            // Only the part of a field the selection keeps within it (a
            // pool's `config/labels`, not all of its config).
            match (over(k), self.only.and_then(|s| s.within(k))) {
                (Some(o), _) => map.serialize_entry(k, o)?,
                (None, Some(part)) => map.serialize_entry(k, &part.select(v))?,
                (None, None) => map.serialize_entry(k, v)?,
            }
        }
        for (k, v) in &set {
            if !spec.contains_key(*k) {
                map.serialize_entry(k, v)?;
            }
        }
        map.end()
    }
}

/// A list answer (`{"<field>": [...]}`) serialised from an iterator of
/// items, without collecting them.
struct ListWire<F>(&'static str, F);

impl<F, I, T> serde::Serialize for ListWire<F>
where
    F: Fn() -> I,
    I: Iterator<Item = T>,
    T: serde::Serialize,
{
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        struct Items<'f, F>(&'f F);
        impl<F, I, T> serde::Serialize for Items<'_, F>
        where
            F: Fn() -> I,
            I: Iterator<Item = T>,
            T: serde::Serialize,
        {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_seq((self.0)())
            }
        }
        let mut map = s.serialize_map(Some(1))?;
        map.serialize_entry(self.0, &Items(&self.1))?;
        map.end()
    }
}

/// Writes a list answer as JSON text.
fn list_bytes<F, I, T>(field: &'static str, items: F) -> Result<Vec<u8>, ApiError>
where
    F: Fn() -> I,
    I: Iterator<Item = T>,
    T: serde::Serialize,
{
    serde_json::to_vec(&ListWire(field, items))
        .map_err(|e| ApiError::internal(format!("simulator: writing the {field} list: {e}")))
}

/// `GET …/clusters/C/nodePools` as JSON text, byte for byte what
/// [`list_pools`] serialises to (`gke_tests.rs`), written straight from the
/// stored pools.
pub(crate) fn list_pools_bytes(
    inner: &Inner,
    ctx: &Ctx,
    c: &ClusterRef,
) -> Result<Vec<u8>, ApiError> {
    require_cluster(inner, c)?;
    list_bytes("nodePools", || {
        pools_of(inner, c).map(|(key, rec)| PoolWire {
            key,
            rec,
            ctx,
            only: None,
        })
    })
}

fn set_default(obj: &mut Map<String, Value>, key: &str, value: Value) {
    if !obj.contains_key(key) {
        obj.insert(key.to_string(), value);
    }
}

/// Fills in what GKE's server adds to a created node pool.
fn apply_defaults(pool: &mut Map<String, Value>, location: &str) {
    set_default(pool, "locations", json!(default_locations(location)));
    set_default(pool, "version", json!(GKE_VERSION));
    set_default(
        pool,
        "management",
        json!({"autoUpgrade": true, "autoRepair": true}),
    );
    set_default(pool, "maxPodsConstraint", json!({"maxPodsPerNode": "110"}));
    set_default(pool, "podIpv4CidrSize", json!(24));
    let upgrade = pool.entry("upgradeSettings").or_insert_with(|| json!({}));
    if let Some(u) = upgrade.as_object_mut() {
        set_default(u, "maxSurge", json!(1));
        set_default(u, "strategy", json!("SURGE"));
    }
    let config = pool.entry("config").or_insert_with(|| json!({}));
    if let Some(c) = config.as_object_mut() {
        set_default(c, "machineType", json!("e2-medium"));
        set_default(c, "diskSizeGb", json!(100));
        set_default(c, "diskType", json!("pd-balanced"));
        set_default(c, "imageType", json!("COS_CONTAINERD"));
        set_default(c, "serviceAccount", json!("default"));
        set_default(c, "oauthScopes", json!(DEFAULT_SCOPES));
        set_default(c, "metadata", json!({"disable-legacy-endpoints": "true"}));
        set_default(
            c,
            "shieldedInstanceConfig",
            json!({"enableIntegrityMonitoring": true}),
        );
    }
}

/// Kubernetes label/taint and GCE label rules on a node pool's config.
/// Requests GKE accepts and then fails, leaving the pool in ERROR.
///
/// A tpu7x multi-host pool with COMPACT placement: "Creation of a managed
/// instance group with tpu7x-standard-4t machine type with placement policy
/// is not supported. Use workload policy instead." (vllm-project/ci-infra#547;
/// the pool is created, then goes to ERROR). The operation's error code is
/// not in the source; FAILED_PRECONDITION is this simulator's choice.
fn accepted_then_failed(pool: &Map<String, Value>) -> Option<String> {
    let machine = pool.get("config")?.get("machineType")?.as_str()?;
    let compact = pool
        .get("placementPolicy")
        .and_then(|p| p.get("type"))
        .and_then(Value::as_str)
        == Some("COMPACT");
    (machine.starts_with("tpu7x-") && compact).then(|| {
        format!(
            "Creation of a managed instance group with {machine} machine type with placement policy is not supported. Use workload policy instead."
        )
    })
}

/// The TPU slice shape of a pool: (topology, hosts), when it is a TPU pool
/// whose topology is known (its `tpuTopology`, or its workload policy's
/// `acceleratorTopology`).
pub(crate) fn tpu_shape(
    inner: &Inner,
    c: &ClusterRef,
    pool: &Map<String, Value>,
) -> Option<(String, u32)> {
    let machine = pool.get("config")?.get("machineType")?.as_str()?;
    let per_host = crate::tpu::machine_type(machine)?.chips_per_vm;
    let placement = pool.get("placementPolicy");
    let topology = match placement
        .and_then(|p| p.get("tpuTopology"))
        .and_then(Value::as_str)
    {
        Some(t) => t.to_string(),
        None => {
            let policy = placement?.get("policyName")?.as_str()?;
            let region = if is_zone(&c.location) {
                crate::tpu::region_of(&c.location)
            } else {
                c.location.as_str()
            };
            let key = format!(
                "projects/{}/regions/{region}/resourcePolicies/{policy}",
                c.project
            );
            inner
                .policies
                .get(&key)?
                .spec
                .pointer("/workloadPolicy/acceleratorTopology")?
                .as_str()?
                .to_string()
        }
    };
    let chips = crate::tpu::chips(&topology);
    (per_host > 0 && chips > 0).then(|| (topology.clone(), chips.div_ceil(per_host)))
}

/// How a pool gets its nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Capacity {
    /// `initialNodeCount` per zone, when the create operation ends.
    Initial(i64),
    /// A flex-start pool (`config.flexStart`, autoscaling from 0): created
    /// with no node, "the cluster autoscaler creates the nodes" for pending
    /// pods that select `cloud.google.com/gke-flex-start: "true"` ("Run a
    /// small batch workload with TPUs and flex-start",
    /// <https://cloud.google.com/kubernetes-engine/docs/how-to/dws-flex-start-training-tpu>),
    /// a TPU slice all at once. The simulator scales it up to its maximum
    /// (per zone) `flex_start_delay_ms` after it turns RUNNING.
    FlexStart(i64),
    /// A queued-provisioning pool: "nodes can be only obtained through
    /// queuing via the Cluster Autoscaler ProvisioningRequest API"
    /// (container v1 `NodePool.QueuedProvisioning.enabled`). The simulator
    /// has no ProvisioningRequest, so it never gets a node.
    Queued,
}

/// How `pool` (a stored spec) gets its nodes.
pub(crate) fn capacity_of(pool: &Value) -> Capacity {
    let queued = pool
        .pointer("/queuedProvisioning/enabled")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let initial = pool
        .get("initialNodeCount")
        .and_then(Value::as_i64)
        .unwrap_or(1)
        .max(0);
    if queued {
        return Capacity::Queued;
    }
    let flex = pool
        .pointer("/config/flexStart")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let autoscaling = pool.get("autoscaling");
    let enabled = autoscaling
        .and_then(|a| a.get("enabled"))
        .and_then(Value::as_bool)
        .unwrap_or(false);
    if !(flex && enabled) {
        return Capacity::Initial(initial);
    }
    let zones = pool
        .get("locations")
        .and_then(Value::as_array)
        .map_or(1, |z| z.len().max(1));
    let int = |f: &str| autoscaling.and_then(|a| a.get(f)).and_then(Value::as_i64);
    let per_zone = int("maxNodeCount").unwrap_or_else(|| {
        int("totalMaxNodeCount").unwrap_or(0) / i64::try_from(zones).unwrap_or(1)
    });
    Capacity::FlexStart(per_zone.max(initial))
}

/// GKE's rules for TPU slice pools: queued provisioning and sizing.
fn check_tpu_sizing(
    inner: &Inner,
    c: &ClusterRef,
    pool: &Map<String, Value>,
    request_id: &str,
) -> Result<(), ApiError> {
    // "Queued_provisioning requires reservation affinity to be set to none"
    // (terraform-provider-google#18341).
    let queued = pool
        .get("queuedProvisioning")
        .and_then(|q| q.get("enabled"))
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let affinity = pool
        .get("config")
        .and_then(|c| c.pointer("/reservationAffinity/consumeReservationType"))
        .and_then(Value::as_str);
    if queued && affinity != Some("NO_RESERVATION") {
        return Err(ApiError::invalid(
            "badRequest",
            "Queued_provisioning requires reservation affinity to be set to none".into(),
        )
        .with_request_info(request_id));
    }
    let Some((topology, hosts)) = tpu_shape(inner, c, pool) else {
        return Ok(());
    };
    let has_tpu_topology = pool
        .get("placementPolicy")
        .and_then(|p| p.get("tpuTopology"))
        .is_some();
    // A single-host slice takes no topology: "TPU topology can't be
    // specified with single-host TPU slice pool" (AI-Hypercomputer/xpk#825).
    if hosts == 1 && has_tpu_topology {
        return Err(ApiError::invalid(
            "badRequest",
            "TPU topology can't be specified with single-host TPU slice pool".into(),
        )
        .with_request_info(request_id));
    }
    // A multi-host slice is sized by the per-zone maxNodeCount, which is 0
    // when only totalMaxNodeCount is set (vllm-project/ci-infra#545).
    let autoscaling = pool.get("autoscaling");
    let enabled = autoscaling
        .and_then(|a| a.get("enabled"))
        .and_then(Value::as_bool)
        .unwrap_or(false);
    if hosts > 1 && enabled {
        let max = autoscaling
            .and_then(|a| a.get("maxNodeCount"))
            .and_then(Value::as_i64)
            .unwrap_or(0);
        if max != i64::from(hosts) {
            return Err(ApiError::invalid(
                "badRequest",
                format!(
                    "Maximum node count {max} is not a valid size of TPU pod slice with topology {topology}"
                ),
            )
            .with_request_info(request_id));
        }
    }
    Ok(())
}

fn check_pool_labels(pool: &Map<String, Value>, request_id: &str) -> Result<(), ApiError> {
    let config = pool.get("config");
    let get = |f: &str| config.and_then(|c| c.get(f));
    labels::check_k8s_labels("node_pool.config.labels", get("labels"))
        .and_then(|()| labels::check_taints("node_pool.config.taints", get("taints")))
        .and_then(|()| {
            labels::check_gce_labels("node_pool.config.resource_labels", get("resourceLabels"))
        })
        .map_err(|m| ApiError::invalid("badRequest", m).with_request_info(request_id))
}

/// The same rules on an `UpdateNodePoolRequest`.
fn check_update_labels(body: &Value, request_id: &str) -> Result<(), ApiError> {
    let inner = |f: &str, g: &str| body.get(f).and_then(|v| v.get(g));
    labels::check_k8s_labels("labels.labels", inner("labels", "labels"))
        .and_then(|()| labels::check_taints("taints.taints", inner("taints", "taints")))
        .and_then(|()| {
            labels::check_gce_labels("resource_labels.labels", inner("resourceLabels", "labels"))
        })
        .map_err(|m| ApiError::invalid("badRequest", m).with_request_info(request_id))
}

fn new_op(
    inner: &mut Inner,
    ctx: &Ctx,
    c: &ClusterRef,
    op_type: &'static str,
    effect: GkeEffect,
) -> Value {
    let latency = inner.latency;
    new_op_lasting(inner, ctx, c, op_type, effect, latency)
}

/// Starts an operation that runs for `latency`; returns it rendered.
fn new_op_lasting(
    inner: &mut Inner,
    ctx: &Ctx,
    c: &ClusterRef,
    op_type: &'static str,
    effect: GkeEffect,
    latency: std::time::Duration,
) -> Value {
    let op = GkeOp {
        name: inner.op_name(),
        project: c.project.clone(),
        location: c.location.clone(),
        cluster: c.key(),
        op_type,
        effect,
        timing: OpTiming::new(ctx.now, latency),
        done: false,
        error: None,
    };
    let rendered = op.to_json(&ctx.base, &ctx.version);
    inner.gke_ops.push(op);
    rendered
}

/// `POST …/clusters/C/nodePools` with a validated `CreateNodePoolRequest`.
pub(crate) fn create_pool(
    inner: &mut Inner,
    ctx: &Ctx,
    c: &ClusterRef,
    body: &Value,
) -> Result<Value, ApiError> {
    require_cluster(inner, c)?;
    let Some(mut pool) = body.get("nodePool").and_then(Value::as_object).cloned() else {
        return Err(ApiError::invalid(
            "badRequest",
            "Invalid value for field \"node_pool\": must be set.".into(),
        ));
    };
    let name = pool
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    if !POOL_NAME.as_ref().is_some_and(|re| re.is_match(&name)) {
        return Err(ApiError::invalid(
            "badRequest",
            format!(
                "Invalid value for field \"node_pool.name\": \"{name}\". Must be a match of regex '{POOL_NAME_RE}' (only lowercase alphanumerics and '-' allowed, must start with a letter and end with an alphanumeric, and must be no longer than 40 characters)."
            ),
        )
        .with_request_info(&ctx.request_id));
    }
    check_pool_labels(&pool, &ctx.request_id)?;
    super::tpu_rules::check_request(inner, c, &pool, &ctx.request_id)?;
    check_tpu_sizing(inner, c, &pool, &ctx.request_id)?;
    let key = c.pool_key(&name);
    if inner.pools.contains_key(&key) {
        return Err(ApiError::already_exists(format!("Already exists: {key}.")));
    }
    check_concurrency(inner, ctx, c, &key)?;
    super::tpu_rules::check_reservation(inner, c, &name, &pool, &ctx.request_id)?;
    apply_defaults(&mut pool, &c.location);
    super::quotas::check_pool_quota(inner, c, &pool, &ctx.request_id)?;
    let fails = accepted_then_failed(&pool);
    let stockout = fails.is_none() && inner.faults.draw_stockout();
    if stockout {
        inner.stats.faults_injected += 1;
    }
    inner.pools.insert(
        key.clone(),
        PoolRec {
            spec: Value::Object(pool),
            status: "PROVISIONING",
            status_message: None,
            conditions: Vec::new(),
        },
    );
    tracing::debug!(pool = %key, stockout, "sim: create node pool");
    Ok(new_op(
        inner,
        ctx,
        c,
        "CREATE_NODE_POOL",
        GkeEffect::Create {
            pool: key,
            stockout,
            fails,
        },
    ))
}

/// `DELETE …/nodePools/NP`.
pub(crate) fn delete_pool(
    inner: &mut Inner,
    ctx: &Ctx,
    c: &ClusterRef,
    pool: &str,
) -> Result<Value, ApiError> {
    require_cluster(inner, c)?;
    let key = c.pool_key(pool);
    let status = inner
        .pools
        .get(&key)
        .map(|r| r.status)
        .ok_or_else(|| not_found(&key))?;
    // A pool being deleted is not deleted twice, whatever the rules say.
    if status == "STOPPING"
        && let Some(op) = inner
            .running_gke_ops(&c.key())
            .find(|op| op.effect.target() == key)
    {
        return Err(incompatible(&op.name));
    }
    check_concurrency(inner, ctx, c, &key)?;
    if let Some(rec) = inner.pools.get_mut(&key) {
        rec.status = "STOPPING";
    }
    tracing::debug!(pool = %key, "sim: delete node pool");
    Ok(new_op(
        inner,
        ctx,
        c,
        "DELETE_NODE_POOL",
        GkeEffect::Delete { pool: key },
    ))
}

/// `PUT …/nodePools/NP` with a validated `UpdateNodePoolRequest`: `labels`,
/// `taints` and `resourceLabels` replace those of the pool's config.
pub(crate) fn update_pool(
    inner: &mut Inner,
    ctx: &Ctx,
    c: &ClusterRef,
    pool: &str,
    body: &Value,
) -> Result<Value, ApiError> {
    require_cluster(inner, c)?;
    let key = c.pool_key(pool);
    let rec = inner.pools.get(&key).ok_or_else(|| not_found(&key))?;
    check_update_labels(body, &ctx.request_id)?;
    if let Some(want) = body.get("etag").and_then(Value::as_str)
        && !want.is_empty()
        && want != etag(rec)
    {
        return Err(ApiError::aborted(format!(
            "Provided etag \"{want}\" does not match the current etag of node pool \"{pool}\"."
        )));
    }
    check_concurrency(inner, ctx, c, &key)?;
    let Some(rec) = inner.pools.get_mut(&key) else {
        return Err(not_found(&key));
    };
    if let Some(config) = rec.spec.get_mut("config").and_then(Value::as_object_mut) {
        let replace = |config: &mut Map<String, Value>, field: &str, v: Option<&Value>| {
            if let Some(v) = v {
                let empty = v.as_object().is_some_and(Map::is_empty)
                    || v.as_array().is_some_and(Vec::is_empty);
                if empty {
                    config.remove(field);
                } else {
                    config.insert(field.to_string(), v.clone());
                }
            }
        };
        if let Some(l) = body.get("labels") {
            replace(
                config,
                "labels",
                Some(l.get("labels").unwrap_or(&json!({}))),
            );
        }
        if let Some(t) = body.get("taints") {
            replace(
                config,
                "taints",
                Some(t.get("taints").unwrap_or(&json!([]))),
            );
        }
        if let Some(l) = body.get("resourceLabels") {
            replace(
                config,
                "resourceLabels",
                Some(l.get("labels").unwrap_or(&json!({}))),
            );
        }
    }
    if rec.status == "RUNNING" {
        rec.status = "RECONCILING";
    }
    tracing::debug!(pool = %key, "sim: update node pool");
    Ok(new_op(
        inner,
        ctx,
        c,
        "UPDATE_CLUSTER",
        GkeEffect::Update { pool: key },
    ))
}

/// `GET v1/projects/P/locations/L/operations/OP`.
pub(crate) fn get_operation(
    inner: &Inner,
    ctx: &Ctx,
    project: &str,
    location: &str,
    name: &str,
) -> Result<Value, ApiError> {
    inner
        .gke_ops
        .iter()
        .find(|op| op.name == name && op.project == project && op.location == location)
        .map(|op| op.to_json(&ctx.base, &ctx.version))
        .ok_or_else(|| {
            not_found(&format!(
                "projects/{project}/locations/{location}/operations/{name}"
            ))
        })
}

/// `GET v1/projects/P/locations/L/operations` (`-` for all locations).
pub(crate) fn list_operations(inner: &Inner, ctx: &Ctx, project: &str, location: &str) -> Value {
    let ops: Vec<Value> = ops_in(inner, project, location)
        .map(|op| op.to_json(&ctx.base, &ctx.version))
        .collect();
    json!({ "operations": ops })
}

/// `GET v1/projects/P/locations/L/operations` as JSON text, byte for byte
/// what [`list_operations`] serialises to (`gke_tests.rs`), written without
/// a `Value` per operation.
pub(crate) fn list_operations_bytes(
    inner: &Inner,
    ctx: &Ctx,
    project: &str,
    location: &str,
) -> Result<Vec<u8>, ApiError> {
    list_bytes("operations", || {
        ops_in(inner, project, location).map(|op| op.wire(&ctx.base, &ctx.version))
    })
}

fn ops_in<'a>(
    inner: &'a Inner,
    project: &'a str,
    location: &'a str,
) -> impl Iterator<Item = &'a GkeOp> {
    inner
        .gke_ops
        .iter()
        .filter(move |op| op.project == project && (location == "-" || op.location == location))
}

#[cfg(test)]
#[path = "gke/tests.rs"]
mod tests;
