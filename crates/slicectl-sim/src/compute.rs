//! Compute Engine (v1; also served under beta/alpha): resource policies
//! (insert, get, list, aggregatedList, delete), region/zone/global operations
//! (get, list; `wait` lives in `server`), and minimal zones/regions.
//! Instance templates, MIGs and instances are in `gce`, over the same
//! `Inner`, operation store and helpers.

use std::sync::LazyLock;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE;
use regex::Regex;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::aggregated;
use super::errors::ApiError;
use super::operations::{ComputeEffect, ComputeOp, OpTiming, Scope};
use super::server::Ctx;
use super::state::{Inner, PolicyRec};

pub(crate) const NAME_RE: &str = "(?:[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?)";
pub(crate) static NAME: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(&format!("^{NAME_RE}$")).ok());
pub(crate) static ZONE: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new("^[a-z]+-[a-z]+[0-9]+-[a-z]$").ok());
static REGION: LazyLock<Option<Regex>> = LazyLock::new(|| Regex::new("^[a-z]+-[a-z]+[0-9]+$").ok());

/// Default and maximum `maxResults`.
const MAX_RESULTS: usize = 500;

pub(crate) fn not_found(path: &str) -> ApiError {
    ApiError::not_found(format!("The resource '{path}' was not found"))
}

pub(crate) fn matches(re: &LazyLock<Option<Regex>>, s: &str) -> bool {
    re.as_ref().is_some_and(|r| r.is_match(s))
}

/// A stable numeric id for a named thing (zones, regions).
pub(crate) fn stable_id(s: &str) -> String {
    let d = Sha256::digest(s.as_bytes());
    let mut b = [0u8; 8];
    b.copy_from_slice(&d[..8]);
    (u64::from_be_bytes(b) >> 1).to_string()
}

fn check_region(project: &str, region: &str) -> Result<(), ApiError> {
    if matches(&REGION, region) {
        Ok(())
    } else {
        Err(not_found(&format!("projects/{project}/regions/{region}")))
    }
}

/// Checks a compute scope (zone/region names must look real).
pub(crate) fn check_scope(scope: &Scope) -> Result<(), ApiError> {
    match scope {
        Scope::Region { project, region } => check_region(project, region),
        Scope::Zone { project, zone } if !matches(&ZONE, zone) => {
            Err(not_found(&format!("projects/{project}/zones/{zone}")))
        }
        _ => Ok(()),
    }
}

/// `GET compute/v1/projects/P/zones/Z`.
pub(crate) fn get_zone(ctx: &Ctx, project: &str, zone: &str) -> Result<Value, ApiError> {
    if !matches(&ZONE, zone) {
        return Err(not_found(&format!("projects/{project}/zones/{zone}")));
    }
    let region = zone.rsplit_once('-').map(|(r, _)| r).unwrap_or(zone);
    let api = ctx.compute_api();
    Ok(json!({
        "kind": "compute#zone",
        "id": stable_id(zone),
        "name": zone,
        "description": zone,
        "status": "UP",
        "region": format!("{api}/projects/{project}/regions/{region}"),
        "selfLink": format!("{api}/projects/{project}/zones/{zone}"),
        "creationTimestamp": "1969-12-31T16:00:00.000-08:00",
        "supportsPzs": false,
    }))
}

/// `GET compute/v1/projects/P/regions/R`.
pub(crate) fn get_region(ctx: &Ctx, project: &str, region: &str) -> Result<Value, ApiError> {
    check_region(project, region)?;
    let api = ctx.compute_api();
    let zones: Vec<String> = ["a", "b", "c"]
        .iter()
        .map(|z| format!("{api}/projects/{project}/zones/{region}-{z}"))
        .collect();
    Ok(json!({
        "kind": "compute#region",
        "id": stable_id(region),
        "name": region,
        "description": region,
        "status": "UP",
        "zones": zones,
        "selfLink": format!("{api}/projects/{project}/regions/{region}"),
        "creationTimestamp": "1969-12-31T16:00:00.000-08:00",
    }))
}

fn policy_key(project: &str, region: &str, name: &str) -> String {
    format!("projects/{project}/regions/{region}/resourcePolicies/{name}")
}

fn render_policy(key: &str, rec: &PolicyRec, ctx: &Ctx) -> Value {
    let api = ctx.compute_api();
    let mut v = rec.spec.clone();
    if let Some(obj) = v.as_object_mut() {
        obj.insert("selfLink".into(), json!(format!("{api}/{key}")));
        obj.insert(
            "region".into(),
            json!(format!(
                "{api}/projects/{}/regions/{}",
                rec.project, rec.region
            )),
        );
        obj.insert("status".into(), json!(rec.status));
    }
    v
}

pub(crate) fn client_op_id(ctx: &Ctx) -> Option<String> {
    ctx.query("requestId")
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

pub(crate) fn new_op(
    inner: &mut Inner,
    ctx: &Ctx,
    scope: Scope,
    op_type: &'static str,
    target: String,
    target_id: String,
    effect: ComputeEffect,
) -> Value {
    let op = ComputeOp {
        name: inner.op_name(),
        id: inner.numeric_id().to_string(),
        scope,
        op_type,
        target,
        target_id,
        effect,
        timing: OpTiming::new(ctx.now, inner.latency),
        done: false,
        error: None,
        client_operation_id: client_op_id(ctx),
    };
    let rendered = op.to_json(&ctx.compute_api());
    inner.compute_ops.push(op);
    rendered
}

/// A retried write with the same `requestId` returns the original operation.
pub(crate) fn replayed(inner: &Inner, ctx: &Ctx) -> Option<Value> {
    let id = client_op_id(ctx)?;
    inner
        .compute_ops
        .iter()
        .find(|op| op.client_operation_id.as_deref() == Some(id.as_str()))
        .map(|op| op.to_json(&ctx.compute_api()))
}

/// `POST …/regions/R/resourcePolicies` with a validated `ResourcePolicy`.
pub(crate) fn insert_policy(
    inner: &mut Inner,
    ctx: &Ctx,
    project: &str,
    region: &str,
    body: &Value,
) -> Result<Value, ApiError> {
    check_region(project, region)?;
    if let Some(op) = replayed(inner, ctx) {
        return Ok(op);
    }
    let name = body
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    if !matches(&NAME, &name) {
        return Err(ApiError::invalid(
            "invalid",
            format!(
                "Invalid value for field 'resource.name': '{name}'. Must be a match of regex '{NAME_RE}'"
            ),
        ));
    }
    let key = policy_key(project, region, &name);
    if inner.policies.contains_key(&key) {
        return Err(ApiError::already_exists(format!(
            "The resource '{key}' already exists"
        )));
    }
    let id = inner.numeric_id().to_string();
    let mut spec = body.clone();
    if let Some(obj) = spec.as_object_mut() {
        obj.remove("region");
        obj.insert("kind".into(), json!("compute#resourcePolicy"));
        obj.insert("id".into(), json!(id));
        obj.insert(
            "creationTimestamp".into(),
            json!(jiff::Timestamp::now().to_string()),
        );
        if let Some(wp) = obj.get_mut("workloadPolicy").and_then(Value::as_object_mut)
            && !wp.contains_key("acceleratorTopologyMode")
        {
            wp.insert("acceleratorTopologyMode".into(), json!("AUTO_CONNECT"));
        }
    }
    inner.policies.insert(
        key.clone(),
        PolicyRec {
            project: project.to_string(),
            region: region.to_string(),
            spec,
            status: "CREATING",
        },
    );
    tracing::debug!(policy = %key, "sim: insert resource policy");
    let scope = Scope::Region {
        project: project.into(),
        region: region.into(),
    };
    Ok(new_op(
        inner,
        ctx,
        scope,
        "insert",
        key.clone(),
        id,
        ComputeEffect::PolicyReady { key },
    ))
}

/// `GET …/regions/R/resourcePolicies/N`.
pub(crate) fn get_policy(
    inner: &Inner,
    ctx: &Ctx,
    project: &str,
    region: &str,
    name: &str,
) -> Result<Value, ApiError> {
    let key = policy_key(project, region, name);
    let rec = inner.policies.get(&key).ok_or_else(|| not_found(&key))?;
    Ok(render_policy(&key, rec, ctx))
}

/// `DELETE …/regions/R/resourcePolicies/N`.
pub(crate) fn delete_policy(
    inner: &mut Inner,
    ctx: &Ctx,
    project: &str,
    region: &str,
    name: &str,
) -> Result<Value, ApiError> {
    if let Some(op) = replayed(inner, ctx) {
        return Ok(op);
    }
    let key = policy_key(project, region, name);
    let rec = inner
        .policies
        .get_mut(&key)
        .ok_or_else(|| not_found(&key))?;
    if rec.status != "READY" {
        return Err(ApiError::invalid(
            "resourceNotReady",
            format!("The resource '{key}' is not ready"),
        ));
    }
    rec.status = "DELETING";
    let id = rec
        .spec
        .get("id")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    tracing::debug!(policy = %key, "sim: delete resource policy");
    let scope = Scope::Region {
        project: project.into(),
        region: region.into(),
    };
    Ok(new_op(
        inner,
        ctx,
        scope,
        "delete",
        key.clone(),
        id,
        ComputeEffect::PolicyDelete { key },
    ))
}

/// Applies `maxResults` / `pageToken` to `items`; returns the page and the
/// next token.
/// One page of a list after its `filter` ([`aggregated::Filter`]); see
/// [`page_of`].
pub(crate) fn paginate(
    ctx: &Ctx,
    items: Vec<Value>,
) -> Result<(Vec<Value>, Option<String>), ApiError> {
    let filter = aggregated::Filter::parse(ctx.query("filter").unwrap_or(""))?;
    let items = items.into_iter().filter(|v| filter.matches(v)).collect();
    page_of(ctx, items)
}

/// One page of `items` by `maxResults` and `pageToken`.
pub(crate) fn page_of(
    ctx: &Ctx,
    items: Vec<Value>,
) -> Result<(Vec<Value>, Option<String>), ApiError> {
    let max = match ctx.query("maxResults") {
        Some(s) if !s.is_empty() => s
            .parse::<usize>()
            .map_err(|_| {
                ApiError::invalid(
                    "invalid",
                    format!("Invalid value for field 'maxResults': '{s}'. Must be a number."),
                )
            })?
            .clamp(1, MAX_RESULTS),
        _ => MAX_RESULTS,
    };
    let start = match ctx.query("pageToken") {
        Some(t) if !t.is_empty() => URL_SAFE
            .decode(t)
            .ok()
            .and_then(|b| String::from_utf8(b).ok())
            .and_then(|s| s.strip_prefix("offset:").and_then(|n| n.parse().ok()))
            .ok_or_else(|| {
                ApiError::invalid(
                    "invalid",
                    format!("Invalid value for field 'pageToken': '{t}'."),
                )
            })?,
        _ => 0usize,
    };
    let total = items.len();
    let page: Vec<Value> = items.into_iter().skip(start).take(max).collect();
    let next = (start + max < total).then(|| URL_SAFE.encode(format!("offset:{}", start + max)));
    Ok((page, next))
}

/// One page of a list of `items` (its `filter`, `maxResults`, `pageToken`)
/// as the list body of `kind` for `collection` (`projects/P/…/NAME`).
pub(crate) fn list_page(
    ctx: &Ctx,
    kind: &str,
    collection: &str,
    items: Vec<Value>,
) -> Result<Value, ApiError> {
    let (page, next) = paginate(ctx, items)?;
    Ok(list_body(
        kind,
        collection.to_string(),
        format!("{}/{collection}", ctx.compute_api()),
        page,
        next,
    ))
}

pub(crate) fn list_body(
    kind: &str,
    id: String,
    self_link: String,
    page: Vec<Value>,
    next: Option<String>,
) -> Value {
    let mut v = json!({"kind": kind, "id": id, "selfLink": self_link});
    if !page.is_empty() {
        v["items"] = Value::Array(page);
    }
    if let Some(t) = next {
        v["nextPageToken"] = json!(t);
    }
    v
}

/// `GET …/regions/R/resourcePolicies` (paginated).
pub(crate) fn list_policies(
    inner: &Inner,
    ctx: &Ctx,
    project: &str,
    region: &str,
) -> Result<Value, ApiError> {
    check_region(project, region)?;
    let prefix = format!("projects/{project}/regions/{region}/resourcePolicies/");
    let items: Vec<Value> = inner
        .policies
        .iter()
        .filter(|(k, _)| k.starts_with(&prefix))
        .map(|(k, rec)| render_policy(k, rec, ctx))
        .collect();
    let (page, next) = paginate(ctx, items)?;
    let collection = format!("projects/{project}/regions/{region}/resourcePolicies");
    Ok(list_body(
        "compute#resourcePolicyList",
        collection.clone(),
        format!("{}/{collection}", ctx.compute_api()),
        page,
        next,
    ))
}

/// `GET …/projects/P/aggregated/resourcePolicies` ([`aggregated`]).
pub(crate) fn aggregated_policies(
    inner: &Inner,
    ctx: &Ctx,
    project: &str,
) -> Result<Value, ApiError> {
    aggregated::of_store(
        ctx,
        project,
        aggregated::POLICIES,
        &inner.policies,
        |_| true,
        |k, rec| render_policy(k, rec, ctx),
    )
}

/// `GET …/projects/P/aggregated/operations` (method
/// `compute.globalOperations.aggregatedList`): every scope's operations.
pub(crate) fn aggregated_operations(
    inner: &Inner,
    ctx: &Ctx,
    project: &str,
) -> Result<Value, ApiError> {
    let api = ctx.compute_api();
    let items = inner
        .compute_ops
        .iter()
        .filter_map(|op| {
            let path = op.scope.path();
            let mine = path.starts_with(&format!("projects/{project}/"));
            let scope = aggregated::scope_of(&path).filter(|_| mine)?;
            Some((scope, op.to_json(&api)))
        })
        .collect();
    aggregated::aggregated_list(ctx, project, aggregated::OPERATIONS, items)
}

/// Finds a compute operation by scope and name.
pub(crate) fn find_operation<'a>(
    inner: &'a Inner,
    scope: &Scope,
    name: &str,
) -> Result<&'a ComputeOp, ApiError> {
    inner
        .compute_ops
        .iter()
        .find(|op| op.name == name && op.scope == *scope)
        .ok_or_else(|| not_found(&format!("{}/operations/{name}", scope.path())))
}

/// `GET …/{regions/R|zones/Z|global}/operations` (paginated, narrowed by
/// `filter` as Compute's list methods are: "A filter expression that filters
/// resources listed in the response", the `filter` parameter of
/// `zoneOperations.list`, `regionOperations.list` and `globalOperations.list`
/// in the Compute v1 discovery document; the filter is applied before
/// paging, so pages hold only matching operations).
pub(crate) fn list_operations(inner: &Inner, ctx: &Ctx, scope: &Scope) -> Result<Value, ApiError> {
    check_scope(scope)?;
    let filter = aggregated::Filter::parse(ctx.query("filter").unwrap_or(""))?;
    let api = ctx.compute_api();
    let items: Vec<Value> = inner
        .compute_ops
        .iter()
        .filter(|op| op.scope == *scope)
        .map(|op| op.to_json(&api))
        .filter(|v| filter.matches(v))
        .collect();
    let (page, next) = paginate(ctx, items)?;
    let collection = format!("{}/operations", scope.path());
    Ok(list_body(
        "compute#operationList",
        collection.clone(),
        format!("{api}/{collection}"),
        page,
        next,
    ))
}
