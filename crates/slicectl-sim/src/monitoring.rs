//! Cloud Monitoring's quota usage: `GET v3/projects/P/timeSeries`
//! (`monitoring.projects.timeSeries.list`), for the TPU quotas Cloud Quotas
//! gives only the limits of (`quotas::CLOUD_QUOTAS`).
//!
//! Google keeps the usage of a Compute Engine quota in Cloud Monitoring
//! (Cloud Quotas, *Implement common use cases*: "tracks quota usage with
//! Cloud Monitoring"; cloud.google.com/monitoring/alerts/using-quota-metrics):
//!
//! - `serviceruntime.googleapis.com/quota/allocation/usage` on the
//!   `consumer_quota` resource (labels `project_id`, `service`, `location`),
//!   metric labels `quota_metric` (e.g. `compute.googleapis.com/tpu_v5p`)
//!   and `limit_name` (the Cloud Quotas quota id), for the quotas without a
//!   family dimension;
//! - `compute.googleapis.com/quota/tpus_per_tpu_family/usage` on the
//!   `compute.googleapis.com/Location` resource (labels
//!   `resource_container`, `location`), metric label `tpu_family`, for the
//!   family quota (its shape from a public quota-monitoring tool's notes,
//!   the Quota Monitoring Solution v6 README: family quotas "are not emitted
//!   on `serviceruntime.googleapis.com/quota/allocation/usage`").
//!
//! One series per region (and family) with chips in use, its one point the
//! usage now (an `INT64` `GAUGE`). The request is held to the API reference
//! (cloud.google.com/monitoring/api/ref_v3/rest/v3/projects.timeSeries/list):
//! `filter` and `interval.endTime` are required (400 `INVALID_ARGUMENT`);
//! the filter is `metric.type`, `resource.type` and label equalities joined
//! by `AND`, and a clause this simulator does not serve is refused (400)
//! rather than ignored; no page token is ever issued, so any `pageToken` is
//! 400. A caller without `monitoring.timeSeries.list` (`--sim-deny`) gets
//! 403 `PERMISSION_DENIED` "Permission monitoring.timeSeries.list denied (or
//! the resource may not exist)." (the words public troubleshooting notes
//! quote, e.g. GoogleCloudPlatform's autoscaler docs: "7 PERMISSION_DENIED:
//! Permission monitoring.timeSeries.list denied (or the resource may not
//! exist).").

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::errors::ApiError;
use super::faults::FaultConfig;
use super::quotas::{CLOUD_QUOTAS, usage_by_region};
use super::server::Ctx;
use super::state::Inner;

/// The allocation usage metric of quotas without a family dimension.
pub(crate) const ALLOCATION_USAGE: &str = "serviceruntime.googleapis.com/quota/allocation/usage";
/// The usage metric of the TPU family quota.
pub(crate) const FAMILY_USAGE: &str = "compute.googleapis.com/quota/tpus_per_tpu_family/usage";
/// The permission `timeSeries.list` needs.
const PERMISSION: &str = "monitoring.timeSeries.list";

/// 403 for a caller denied `monitoring.timeSeries.list` (by method id or
/// permission in [`FaultConfig::denied_methods`]).
pub(crate) fn denied(config: &FaultConfig, method_id: &str) -> Option<ApiError> {
    config
        .denied_methods
        .iter()
        .any(|m| m == method_id || m == PERMISSION)
        .then(|| {
            ApiError::forbidden(format!(
                "Permission {PERMISSION} denied (or the resource may not exist)."
            ))
        })
}

/// The clauses of a filter: `key = "value"` joined by `AND`.
fn clauses(filter: &str) -> Result<BTreeMap<String, String>, ApiError> {
    const SERVED: &[&str] = &[
        "metric.type",
        "resource.type",
        "metric.labels.quota_metric",
        "metric.labels.limit_name",
        "metric.labels.tpu_family",
        "resource.labels.service",
        "resource.labels.location",
        "resource.labels.project_id",
        "resource.labels.resource_container",
    ];
    let mut out = BTreeMap::new();
    for clause in filter.split(" AND ") {
        // `resource.label.x` is accepted as `resource.labels.x`, as
        // Monitoring's filters are written both ways.
        let parsed = clause.split_once('=').and_then(|(k, v)| {
            let v = v.trim().strip_prefix('"')?.strip_suffix('"')?;
            Some((k.trim().replacen(".label.", ".labels.", 1), v))
        });
        let Some((key, value)) = parsed.filter(|(k, _)| SERVED.contains(&k.as_str())) else {
            return Err(ApiError::invalid(
                "badRequest",
                format!(
                    "The simulator serves filters of `key = \"value\"` clauses joined by AND on {}; \
                     not {:?}.",
                    SERVED.join(", "),
                    clause.trim()
                ),
            ));
        };
        out.insert(key, value.to_string());
    }
    Ok(out)
}

/// `GET v3/projects/P/timeSeries`: the usage series of the TPU quotas the
/// filter selects ([module docs](self)).
pub(crate) fn list_time_series(inner: &Inner, ctx: &Ctx, project: &str) -> Result<Value, ApiError> {
    let filter = ctx.query("filter").unwrap_or_default();
    if filter.trim().is_empty() {
        return Err(ApiError::invalid(
            "badRequest",
            "Field filter had an invalid value: a filter is required.".to_string(),
        ));
    }
    let end = ctx.query("interval.endTime").unwrap_or_default();
    let end: jiff::Timestamp = end.parse().map_err(|_| {
        ApiError::invalid(
            "badRequest",
            format!(
                "Field interval.endTime had an invalid value of {end:?}: a timestamp is required."
            ),
        )
    })?;
    if ctx.query("pageToken").is_some_and(|t| !t.is_empty()) {
        return Err(ApiError::invalid(
            "badRequest",
            "Request contains an invalid argument.".to_string(),
        ));
    }
    let want = clauses(filter)?;
    let matches = |key: &str, value: &str| want.get(key).is_none_or(|w| w == value);
    let point = |chips: u64| {
        json!([{
            "interval": {"startTime": end.to_string(), "endTime": end.to_string()},
            "value": {"int64Value": chips.to_string()},
        }])
    };
    let mut series = Vec::new();
    for ((region, sim_metric), chips) in usage_by_region(inner, project) {
        let (family_metric, family) = match sim_metric.split_once('/') {
            Some((m, f)) => (m, Some(f)),
            None => (sim_metric, None),
        };
        let Some(q) = CLOUD_QUOTAS.iter().find(|q| q.sim_metric == family_metric) else {
            continue; // a regions.get quota (v4, v5e): not served here
        };
        let (metric, resource) = match family {
            Some(f) if q.family => (
                json!({"type": FAMILY_USAGE, "labels": {"tpu_family": f}}),
                json!({"type": "compute.googleapis.com/Location",
                       "labels": {"resource_container": project, "location": region}}),
            ),
            None if !q.family => (
                json!({"type": ALLOCATION_USAGE,
                       "labels": {"quota_metric": q.metric, "limit_name": q.id}}),
                json!({"type": "consumer_quota",
                       "labels": {"project_id": project, "service": "compute.googleapis.com",
                                  "location": region}}),
            ),
            _ => continue,
        };
        let selected = [("metric", &metric), ("resource", &resource)]
            .iter()
            .all(|(kind, v)| {
                matches(
                    &format!("{kind}.type"),
                    v["type"].as_str().unwrap_or_default(),
                ) && v["labels"].as_object().is_some_and(|labels| {
                    labels.iter().all(|(k, l)| {
                        matches(
                            &format!("{kind}.labels.{k}"),
                            l.as_str().unwrap_or_default(),
                        )
                    })
                })
            });
        let known_keys = want.keys().all(|k| {
            let (kind, rest) = k.split_once('.').unwrap_or_default();
            let v = if kind == "metric" { &metric } else { &resource };
            rest == "type"
                || v["labels"]
                    .get(rest.trim_start_matches("labels."))
                    .is_some()
        });
        if selected && known_keys {
            series.push(json!({
                "metric": metric,
                "resource": resource,
                "metricKind": "GAUGE",
                "valueType": "INT64",
                "points": point(chips),
            }));
        }
    }
    Ok(if series.is_empty() {
        json!({})
    } else {
        json!({ "timeSeries": series })
    })
}

#[cfg(test)]
#[path = "monitoring/tests.rs"]
mod tests;
