//! The HTTP front: one fallback handler that resolves the URL, counts the
//! request, injects faults, validates the body against the discovery
//! document and dispatches to `gke` / `compute`; plus the `/_sim/` admin
//! endpoints.

use std::net::SocketAddr;
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::Duration;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, Method, Uri, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use tokio::time::Instant;

use super::compute;
use super::discovery::{self, Violation, snake};
use super::errors::ApiError;
use super::faults::{FaultConfig, RequestFault};
use super::fields;
use super::gce;
use super::gke;
use super::routes::{Api, Endpoint, Resolved, resolve};
use super::state::Inner;

/// Longest a compute `wait` blocks (Google's ~2 minute cap).
const WAIT_CAP: Duration = Duration::from_secs(120);

/// Shared simulator state.
#[derive(Debug)]
pub(crate) struct Sim {
    /// Written under [`Sim::lock`]; the large lists are rendered under a
    /// shared read ([`Sim::read`]), several at once, as a real API's
    /// servers answer concurrent lists.
    inner: RwLock<Inner>,
    addr: SocketAddr,
}

impl Sim {
    pub fn new(inner: Inner, addr: SocketAddr) -> Self {
        Self {
            inner: RwLock::new(inner),
            addr,
        }
    }

    /// Locks the state (a poisoned lock is still usable: no invariant spans
    /// a panic point).
    pub fn lock(&self) -> RwLockWriteGuard<'_, Inner> {
        self.inner.write().unwrap_or_else(|e| e.into_inner())
    }

    /// The state shared for reading: the readers of one moment render at
    /// once. [`admit`] has advanced it to the request's time already (a
    /// write since only makes it newer).
    fn read(&self) -> RwLockReadGuard<'_, Inner> {
        self.inner.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Starts a cluster-level operation on `cluster` for `duration` and
    /// renders it.
    fn cluster_operation_json(&self, cluster: &str, duration: Duration) -> Result<Value, ApiError> {
        let now = Instant::now();
        let ctx = Ctx {
            base: format!("http://{}", self.addr),
            version: "v1".into(),
            now,
            query: Vec::new(),
            request_id: String::new(),
            path: String::new(),
        };
        let mut inner = self.lock();
        inner.advance(now);
        gke::start_cluster_operation(&mut inner, &ctx, cluster, duration)
    }

    /// Starts a cluster-level operation; returns its name.
    pub fn start_cluster_operation(
        &self,
        cluster: &str,
        duration: Duration,
    ) -> Result<String, String> {
        self.cluster_operation_json(cluster, duration)
            .map(|v| {
                v.get("name")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string()
            })
            .map_err(|e| e.message)
    }

    /// Advances the clock when VMs are booting or MIGs retrying, or when an
    /// operation runs on a linked cluster (its Nodes come and go when the
    /// operation ends, with no request arriving).
    pub fn tick(&self) {
        let mut inner = self.lock();
        let linked_op = || {
            !inner.links.is_empty()
                && inner
                    .gke_ops
                    .iter()
                    .any(|op| !op.done && inner.links.contains_key(&op.cluster))
        };
        let flex_due = || {
            inner.flex_due.iter().any(|(_, pool)| {
                pool.split_once("/nodePools/")
                    .is_some_and(|(c, _)| inner.links.contains_key(c))
            })
        };
        if gce::has_pending(&inner) || linked_op() || flex_due() {
            inner.advance(Instant::now());
        }
    }

    /// Links a registered cluster to a real API server.
    pub fn link(&self, cluster: &str, link: Arc<super::link::Linked>) -> Result<(), String> {
        let mut inner = self.lock();
        if !inner.clusters.contains_key(cluster) {
            return Err(format!(
                "cluster {cluster:?} is not a simulated cluster; register it first"
            ));
        }
        inner.links.insert(cluster.to_string(), link);
        Ok(())
    }

    /// Stops every hollow node; returns the Nodes to delete, with the
    /// client of their API server.
    pub fn stop_hollow_nodes(&self) -> Vec<(kube::Client, Vec<String>)> {
        let mut inner = self.lock();
        let hollow = std::mem::take(&mut inner.hollow);
        let mut out = Vec::new();
        for (pool, nodes) in hollow {
            let names: Vec<String> = nodes.iter().map(|n| n.name.clone()).collect();
            drop(nodes);
            let cluster = pool.split("/nodePools/").next().unwrap_or_default();
            if let Some(link) = inner.links.get(cluster) {
                out.push((link.client.clone(), names));
            }
        }
        out
    }

    /// The rows of `GET /_sim/instances`.
    pub fn instance_rows(&self) -> Vec<Value> {
        let mut inner = self.lock();
        inner.advance(Instant::now());
        gce::instance_rows(&inner)
    }

    /// Writes a guest attribute of a VM, as the VM would.
    pub fn put_guest_attribute(
        &self,
        project: &str,
        zone: &str,
        instance: &str,
        path: &str,
        value: &str,
    ) -> Result<(), String> {
        gce::put_guest_attribute(&self.lock(), project, zone, instance, path, value)
    }

    /// Stops every VM (metadata servers and node agents).
    pub fn drop_vms(&self) {
        self.lock().instances.clear();
    }

    /// Registers a cluster `projects/P/locations/L/clusters/C`.
    pub fn add_cluster(&self, name: &str) -> Result<(), String> {
        let parts: Vec<&str> = name.split('/').collect();
        let valid = matches!(parts.as_slice(),
            ["projects", p, "locations", l, "clusters", c]
                if !p.is_empty() && !l.is_empty() && !c.is_empty());
        if !valid {
            return Err(format!(
                "cluster name {name:?} is not of the form projects/P/locations/L/clusters/C"
            ));
        }
        self.lock()
            .clusters
            .entry(name.to_string())
            .or_insert_with(jiff::Timestamp::now);
        Ok(())
    }
}

/// Per-request context handed to handlers.
#[derive(Debug, Clone)]
pub(crate) struct Ctx {
    /// `scheme://host[:port]` as the client addressed us.
    pub base: String,
    /// Version path segment (`v1`, `v1beta1`, `beta`, `alpha`).
    pub version: String,
    /// Clock time of the request.
    pub now: Instant,
    /// Query parameters (unknown ones are ignored).
    pub query: Vec<(String, String)>,
    /// Request id for `google.rpc.RequestInfo`.
    pub request_id: String,
    /// The request's path (for permission errors, `sim::quotas::denied`).
    pub path: String,
}

impl Ctx {
    /// `scheme://host/compute/VERSION`.
    pub fn compute_api(&self) -> String {
        format!("{}/compute/{}", self.base, self.version)
    }

    /// First value of a query parameter.
    pub fn query(&self, key: &str) -> Option<&str> {
        self.query
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// Builds the router.
pub(crate) fn router(sim: Arc<Sim>) -> axum::Router {
    axum::Router::new().fallback(handle).with_state(sim)
}

fn base_url(headers: &HeaderMap, fallback: SocketAddr) -> String {
    let scheme = headers
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
        .filter(|s| *s == "https" || *s == "http")
        .unwrap_or("http");
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .filter(|h| !h.is_empty())
        .map(str::to_string)
        .unwrap_or_else(|| fallback.to_string());
    format!("{scheme}://{host}")
}

async fn handle(
    State(sim): State<Arc<Sim>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri.path().to_string();
    if let Some(admin) = path.strip_prefix("/_sim/") {
        return admin_endpoint(&sim, &method, admin, &body);
    }
    let query = Query::<Vec<(String, String)>>::try_from_uri(&uri)
        .map(|q| q.0)
        .unwrap_or_default();
    let now = Instant::now();
    let Some(resolved) = resolve(&method, &path) else {
        let mut inner = sim.lock();
        inner.stats.count("unknown", method != Method::GET);
        return ApiError::unknown_route(method.as_str(), &path).into_response();
    };
    let request_id = format!("0x{:016x}", rand::random::<u64>());
    let ctx = Ctx {
        base: base_url(&headers, sim.addr),
        version: resolved.version.clone(),
        now,
        query,
        request_id,
        path: path.clone(),
    };
    tracing::debug!(%method, %path, id = %resolved.endpoint.method_id(), "sim request");
    if let Endpoint::OpWait(scope, name) = &resolved.endpoint {
        if let Err(e) = admit(&sim, &resolved, &ctx) {
            return e.into_response();
        }
        return wait(&sim, &ctx, scope, name).await;
    }
    // A partial response (`fields`) is parsed before the call, so a bad
    // selection changes nothing.
    let selection = match ctx.query("fields").map(fields::Selection::parse) {
        Some(Err(e)) => return e.into_response(),
        Some(Ok(s)) => Some(s),
        None => None,
    };
    if let Some(answer) = call_list_text(&sim, &resolved, &ctx, &body, selection.as_ref()) {
        return match answer {
            Ok(text) => ([(header::CONTENT_TYPE, "application/json")], text).into_response(),
            Err(e) => e.into_response(),
        };
    }
    match call(&sim, &resolved, &ctx, &body) {
        Ok(v) => Json(match selection {
            Some(s) => s.apply(v),
            None => v,
        })
        .into_response(),
        Err(e) => e.into_response(),
    }
}

/// Counts the request and applies request-level faults (429/503, write rate limit).
fn admit(sim: &Sim, r: &Resolved, ctx: &Ctx) -> Result<(), ApiError> {
    let mut inner = sim.lock();
    inner.advance(ctx.now);
    let write = r.endpoint.is_write();
    inner.stats.count(&r.endpoint.method_id(), write);
    if let Some(e) = super::quotas::denied(&inner.faults.config, r, ctx) {
        return Err(e);
    }
    let service = match r.api {
        Api::Container => "container.googleapis.com",
        Api::Compute => "compute.googleapis.com",
        Api::CloudQuotas => "cloudquotas.googleapis.com",
        Api::Monitoring => "monitoring.googleapis.com",
    };
    match inner.faults.draw_request() {
        RequestFault::RateLimited => {
            inner.stats.faults_injected += 1;
            return Err(ApiError::rate_limited(service));
        }
        RequestFault::Unavailable => {
            inner.stats.faults_injected += 1;
            return Err(ApiError::unavailable());
        }
        RequestFault::None => {}
    }
    if write && !inner.faults.take_write_token(ctx.now) {
        inner.stats.faults_injected += 1;
        return Err(ApiError::rate_limited(service));
    }
    Ok(())
}

fn violations_error(reason: &'static str, errs: Vec<Violation>) -> ApiError {
    let message = errs
        .iter()
        .map(|v| v.message.as_str())
        .collect::<Vec<_>>()
        .join("\n");
    let violations: Vec<Value> = errs
        .iter()
        .map(|v| json!({"field": v.field, "description": v.message}))
        .collect();
    let mut e = ApiError::invalid(reason, message);
    e.details.push(json!({
        "@type": "type.googleapis.com/google.rpc.BadRequest",
        "fieldViolations": violations,
    }));
    e
}

/// Parses and validates the request body against the method's discovery
/// request schema; returns the normalised body (`Null` for body-less methods).
fn validated_body(r: &Resolved, body: &Bytes) -> Result<Value, ApiError> {
    let id = r.endpoint.method_id();
    let (doc, reason) = match r.api {
        Api::Container | Api::CloudQuotas | Api::Monitoring => {
            (discovery::container(), "badRequest")
        }
        Api::Compute => (discovery::compute(), "invalid"),
    };
    if matches!(r.api, Api::CloudQuotas | Api::Monitoring) {
        // Cloud Quotas' and Monitoring's reads take no body (cloudquotas-v1.json;
        // `timeSeries.list` is a GET).
        return Ok(Value::Null);
    }
    let doc = doc.map_err(ApiError::internal)?;
    let Some(schema) = doc.request_schema(&id) else {
        return Ok(Value::Null);
    };
    let raw: Value = if body.iter().all(u8::is_ascii_whitespace) {
        json!({})
    } else {
        serde_json::from_slice(body)
            .map_err(|e| ApiError::invalid(reason, format!("Invalid JSON payload received. {e}")))?
    };
    let root = match r.api {
        Api::Container | Api::CloudQuotas | Api::Monitoring => String::new(),
        Api::Compute => format!("{}_resource", snake(schema).trim_start_matches('_')),
    };
    doc.validate(schema, &root, &raw)
        .map_err(|errs| violations_error(reason, errs))
}

/// Admits the request, validates its body, then locks the state advanced to
/// the request's time.
fn enter<'s>(
    sim: &'s Sim,
    r: &Resolved,
    ctx: &Ctx,
    body: &Bytes,
) -> Result<(RwLockWriteGuard<'s, Inner>, Value), ApiError> {
    admit(sim, r, ctx)?;
    let body = validated_body(r, body)?;
    let mut inner = sim.lock();
    inner.advance(ctx.now);
    Ok((inner, body))
}

/// The large GKE lists rendered under a shared read of the state, several
/// at once, byte for byte what [`call`] would answer: node pools and
/// operations (whole) as JSON text straight from the stored records,
/// without a `Value` per item, and clusters (with the partial response
/// asked); `None` for every other endpoint.
fn call_list_text(
    sim: &Sim,
    r: &Resolved,
    ctx: &Ctx,
    body: &Bytes,
    selection: Option<&fields::Selection>,
) -> Option<Result<Vec<u8>, ApiError>> {
    let whole = selection.is_none();
    let listed = match r.endpoint {
        Endpoint::GkePoolList(_) | Endpoint::GkeOpList { .. } => whole,
        Endpoint::GkeClusterList { .. } => true,
        _ => false,
    };
    if !listed {
        return None;
    }
    if let Err(e) = admit(sim, r, ctx).and_then(|()| validated_body(r, body).map(drop)) {
        return Some(Err(e));
    }
    let inner = sim.read();
    match &r.endpoint {
        Endpoint::GkePoolList(c) => Some(gke::list_pools_bytes(&inner, ctx, c)),
        Endpoint::GkeOpList { project, location } => {
            Some(gke::list_operations_bytes(&inner, ctx, project, location))
        }
        Endpoint::GkeClusterList { project, location } => {
            let v = gke::list_clusters(&inner, ctx, project, location);
            drop(inner);
            let v = match selection {
                Some(s) => s.apply(v),
                None => v,
            };
            Some(serde_json::to_vec(&v).map_err(|e| ApiError::internal(e.to_string())))
        }
        _ => None,
    }
}

fn call(sim: &Sim, r: &Resolved, ctx: &Ctx, body: &Bytes) -> Result<Value, ApiError> {
    let (mut inner, body) = enter(sim, r, ctx, body)?;
    let inner = &mut *inner;
    match &r.endpoint {
        Endpoint::GkeClusterGet(c) => gke::get_cluster(inner, ctx, c),
        Endpoint::GkeClusterList { project, location } => {
            Ok(gke::list_clusters(inner, ctx, project, location))
        }
        Endpoint::GkePoolList(c) => gke::list_pools(inner, ctx, c),
        Endpoint::GkePoolCreate(c) => gke::create_pool(inner, ctx, c, &body),
        Endpoint::GkePoolGet(c, np) => gke::get_pool(inner, ctx, c, np),
        Endpoint::GkePoolUpdate(c, np) => gke::update_pool(inner, ctx, c, np, &body),
        Endpoint::GkePoolDelete(c, np) => gke::delete_pool(inner, ctx, c, np),
        Endpoint::GkeOpGet {
            project,
            location,
            name,
        } => gke::get_operation(inner, ctx, project, location, name),
        Endpoint::GkeOpList { project, location } => {
            Ok(gke::list_operations(inner, ctx, project, location))
        }
        Endpoint::PolicyInsert { project, region } => {
            compute::insert_policy(inner, ctx, project, region, &body)
        }
        Endpoint::PolicyList { project, region } => {
            compute::list_policies(inner, ctx, project, region)
        }
        Endpoint::PolicyAggregated { project } => compute::aggregated_policies(inner, ctx, project),
        Endpoint::PolicyGet {
            project,
            region,
            name,
        } => compute::get_policy(inner, ctx, project, region, name),
        Endpoint::PolicyDelete {
            project,
            region,
            name,
        } => compute::delete_policy(inner, ctx, project, region, name),
        Endpoint::OpGet(scope, name) => {
            compute::find_operation(inner, scope, name).map(|op| op.to_json(&ctx.compute_api()))
        }
        Endpoint::OpList(scope) => compute::list_operations(inner, ctx, scope),
        Endpoint::OpWait(scope, name) => {
            compute::find_operation(inner, scope, name).map(|op| op.to_json(&ctx.compute_api()))
        }
        Endpoint::ZoneGet { project, zone } => compute::get_zone(ctx, project, zone),
        Endpoint::RegionGet { project, region } => {
            compute::get_region(ctx, project, region).map(|mut v| {
                super::quotas::add_region_quotas(inner, project, region, &mut v);
                v
            })
        }
        Endpoint::ReservationGet(project, zone, name) => {
            super::quotas::get_reservation(inner, ctx, project, zone, name)
        }
        Endpoint::ReservationList(project, zone) => {
            super::quotas::list_reservations(inner, ctx, project, zone)
        }
        Endpoint::ReservationAggregated(project) => {
            super::quotas::aggregated_reservations(inner, ctx, project)
        }
        Endpoint::QuotaInfoGet(parent, id) => super::quotas::get_quota_info(inner, parent, id),
        Endpoint::QuotaInfoList(parent) => super::quotas::list_quota_infos(inner, ctx, parent),
        Endpoint::TimeSeriesList(project) => {
            super::monitoring::list_time_series(inner, ctx, project)
        }
        Endpoint::TemplateInsert(p) => gce::insert_template(inner, ctx, p, &body),
        Endpoint::TemplateList(p) => gce::list_templates(inner, ctx, p),
        Endpoint::TemplateGet(p, n) => gce::get_template(inner, ctx, p, n),
        Endpoint::TemplateDelete(p, n) => gce::delete_template(inner, ctx, p, n),
        Endpoint::MigInsert(p, z) => gce::insert_mig(inner, ctx, p, z, &body),
        Endpoint::MigList(p, z) => gce::list_migs(inner, ctx, p, z),
        Endpoint::MigGet(p, z, n) => gce::get_mig(inner, ctx, p, z, n),
        Endpoint::MigDelete(p, z, n) => gce::delete_mig(inner, ctx, p, z, n),
        Endpoint::MigPatch(p, z, n) => gce::patch_mig(inner, ctx, p, z, n, &body),
        Endpoint::MigRecreate(p, z, n) => gce::recreate_instances(inner, ctx, p, z, n, &body),
        Endpoint::MigListManaged(p, z, n) => gce::list_managed_instances(inner, ctx, p, z, n),
        Endpoint::MigListErrors(p, z, n) => gce::list_errors(inner, ctx, p, z, n),
        Endpoint::AutoscalerList(p, z) => gce::list_autoscalers(ctx, p, z),
        Endpoint::InstanceGroupList(p, z) => gce::list_instance_groups(inner, ctx, p, z),
        Endpoint::InstanceList(p, z) => gce::list_instances(inner, ctx, p, z),
        Endpoint::InstanceAggregated(p) => gce::aggregated_instances(inner, ctx, p),
        Endpoint::MigAggregated(p) => gce::aggregated_migs(inner, ctx, p),
        Endpoint::TemplateAggregated(p) => gce::aggregated_templates(inner, ctx, p),
        Endpoint::OpAggregated(p) => compute::aggregated_operations(inner, ctx, p),
        Endpoint::InstanceGet(p, z, n) => gce::get_instance(inner, ctx, p, z, n),
        Endpoint::InstanceSetMetadata(p, z, n) => gce::set_metadata(inner, ctx, p, z, n, &body),
        Endpoint::InstanceGuestAttributes(p, z, n) => {
            gce::get_guest_attributes(inner, ctx, p, z, n)
        }
    }
}

/// `POST …/operations/OP/wait`: returns when the operation is DONE or after
/// about two minutes, whichever comes first.
async fn wait(sim: &Sim, ctx: &Ctx, scope: &super::operations::Scope, name: &str) -> Response {
    let deadline = ctx.now + WAIT_CAP;
    loop {
        let now = Instant::now();
        let step = {
            let mut inner = sim.lock();
            inner.advance(now);
            compute::find_operation(&inner, scope, name).map(|op| {
                (
                    op.to_json(&ctx.compute_api()),
                    (!op.done).then_some(op.timing.done_at),
                )
            })
        };
        match step {
            Err(e) => return e.into_response(),
            Ok((v, None)) => return Json(v).into_response(),
            Ok((v, Some(done_at))) => {
                if now >= deadline {
                    return Json(v).into_response();
                }
                tokio::time::sleep_until(done_at.min(deadline)).await;
            }
        }
    }
}

fn admin_endpoint(sim: &Sim, method: &Method, path: &str, body: &Bytes) -> Response {
    let bad = |m: String| ApiError::invalid("badRequest", m).into_response();
    match (method.as_str(), path) {
        ("GET", "stats") => Json(sim.lock().stats.clone()).into_response(),
        ("GET", "instances") => Json(sim.instance_rows()).into_response(),
        ("POST", "reset-stats") => {
            sim.lock().stats = Default::default();
            Json(json!({})).into_response()
        }
        ("PUT", "faults") => match serde_json::from_slice::<FaultConfig>(body) {
            Ok(f) => {
                sim.lock().faults.set(f.clone());
                Json(f).into_response()
            }
            Err(e) => bad(format!("invalid FaultConfig: {e}")),
        },
        ("POST", "cluster-operations") => {
            let req = serde_json::from_slice::<Value>(body).ok();
            let cluster = req
                .as_ref()
                .and_then(|v| v.get("cluster").and_then(Value::as_str));
            let seconds = req
                .as_ref()
                .and_then(|v| v.get("seconds").and_then(Value::as_f64))
                .filter(|s| s.is_finite() && *s >= 0.0);
            let (Some(cluster), Some(seconds)) = (cluster, seconds) else {
                return bad(
                    "expected {\"cluster\": \"projects/P/locations/L/clusters/C\", \"seconds\": N}"
                        .into(),
                );
            };
            match sim.cluster_operation_json(cluster, Duration::from_secs_f64(seconds)) {
                Ok(v) => Json(v).into_response(),
                Err(e) => e.into_response(),
            }
        }
        ("POST", "clusters") => {
            let name = serde_json::from_slice::<Value>(body)
                .ok()
                .and_then(|v| v.get("name").and_then(Value::as_str).map(str::to_string));
            match name {
                Some(n) => match sim.add_cluster(&n) {
                    Ok(()) => Json(json!({"name": n})).into_response(),
                    Err(e) => bad(e),
                },
                None => bad("expected {\"name\": \"projects/P/locations/L/clusters/C\"}".into()),
            }
        }
        _ => ApiError::unknown_route(method.as_str(), &format!("/_sim/{path}")).into_response(),
    }
}
