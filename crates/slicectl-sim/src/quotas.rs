//! Regional TPU quotas, specific reservations' use, and permissions the
//! caller lacks.
//!
//! **Quotas.** Compute Engine charges TPU VMs (GKE's TPU node pools are
//! Compute Engine VMs) to a regional quota per TPU generation and
//! provisioning model, counted in chips (Compute Engine's TPU quota
//! catalogue, cloud.google.com/compute/resource-usage#tpu_quota): v4 "TPU
//! v4 PodSlice chips" `TPU_PODSLICE_V4` / `PREEMPTIBLE_TPU_PODSLICE_V4`, v5e
//! `TPU_LITE_PODSLICE_V5` / `PREEMPTIBLE_TPU_LITE_PODSLICE_V5` (these four
//! are in the compute v1 discovery document's `Quota.metric` enum), v5p
//! "TPU v5p chips" `TPU_V5P` / `PREEMPTIBLE_TPU_V5P`, v6e "TPUs per TPU
//! family" with `tpu_family=CT6E` (`TPUS_PER_TPU_FAMILY/CT6E` here) /
//! "Preemptible TPU slices v6e" `PREEMPTIBLE_TPU_V6E`, TPU7x "TPUs per TPU
//! family" `tpu_family=tpu7x` (`TPUS_PER_TPU_FAMILY/TPU7X`) / "Preemptible
//! TPU slices tpu7x" `PREEMPTIBLE_TPU7X` (the display names are GKE's
//! quota table, cloud.google.com/kubernetes-engine/docs/how-to/tpus,
//! "Ensure sufficient quota"). Spot VMs use the preemptible quota (Cloud TPU, *Quotas*:
//! cloud.google.com/tpu/docs/quota, "on-demand and preemptible (spot)").
//! Reservation-bound VMs are not charged (GKE, "Ensure sufficient quota":
//! a TPU node pool that consumes a reservation needs no TPU quota); flex-start VMs are not charged here
//! (they consume the preemptible quota, else the standard one, only when
//! the Dynamic Workload Scheduler grants them: Compute Engine, *Provisioning
//! models*).
//!
//! **Where they are read.** `regions.get` reports only the four v4 and v5e
//! metrics (public reports: "the compute quotas only show v5 lite entries";
//! the family quota "is not visible via `gcloud compute regions
//! describe`"). The others are served by the Cloud Quotas API
//! (`GET v1/projects/P/locations/global/services/compute.googleapis.com/quotaInfos[/ID]`,
//! `discovery/cloudquotas-v1.json`) under the quota ids public setup
//! scripts and notes read (`TPU-V5P-per-project-region`,
//! `PREEMPTIBLE-TPU-V5P-per-project-region`,
//! `PREEMPTIBLE-TPU-V6E-per-project-region`,
//! `TPUS-PER-TPU-FAMILY-per-project-region`,
//! `PREEMPTIBLE-TPU7X-per-project-region`; no Google page lists the ids):
//! limits only (`QuotaInfo` has no usage field; Google tracks usage "with
//! Cloud Monitoring", cloud.google.com/docs/quotas/implement-common-use-cases:
//! `super::monitoring` serves it),
//! one `dimensionsInfos` entry per region (and family) with
//! a quota set ([`FaultConfig::quotas`]), then the default entry, `-1`
//! (unlimited: this simulator limits nothing it was not told to).
//!
//! **Refusal.** A node pool create past the quota gets GKE's synchronous
//! error: 403 PERMISSION_DENIED `Insufficient regional quota to satisfy
//! request: resource "CPUS": request requires '72.0' and is short '48.0'.
//! project has a quota of '24.0' with '24.0' available. View and manage
//! quotas at https://console.cloud.google.com/iam-admin/quotas?usage=USED&project=P`
//! (kubeflow/kubeflow#842 with status PERMISSION_DENIED, 403; the same words
//! in kaiwaehner/hivemq-mqtt-tensorflow-kafka-realtime-iot-machine-learning-training-inference#48
//! and googlecodelabs/feedback#950). A MIG whose VMs the quota cannot hold
//! is created, but its VMs are not, and it reports Compute Engine's
//! `QUOTA_EXCEEDED` (gcp-api.md §3.3's family of operation error codes)
//! with `Quota 'TPU_V5P' exceeded. Limit: 8.0 in region us-central1.`
//! (the words of Compute's quota errors: "Quota 'CPUS_ALL_REGIONS'
//! exceeded.", GoogleCloudPlatform/ai-on-gke#849; "Quota
//! 'GPUS_ALL_REGIONS' exceeded. Limit: 0.0 globally.", fastai/course-v3#165;
//! for the family quota "Quota 'TPUS_PER_TPU_FAMILY' exceeded. Limit: 0.0"
//! in public TPU v6e setup notes) where it reports stockouts, until the
//! quota holds them. No public report shows GKE's synchronous error for a
//! TPU quota: the node pool create's words are those of its CPU quota
//! errors above, with the resource named as Compute names it. Searched
//! (2026-11) without a TPU hit: issue threads and pages for "Insufficient
//! regional quota to satisfy request" with TPU, `TPU_V5P`, `tpu-v5p`,
//! `TPUS_PER_TPU_FAMILY`, `GCE_QUOTA_EXCEEDED`, "quota exceeded" with node
//! pools (xpk, ray, kuberay, jobset, skypilot, marin); the TPU quota errors
//! public threads show are the Cloud TPU API's own ("Quota limit
//! 'TPUV6EPreemptiblePerProjectPerRegionForTPUAPI' has been exceeded. Limit:
//! 0 in region us-east5.", marin-community/marin#1612), another service.
//!
//! **Listing.** `quotaInfos.list` pages as the API does ([`list_quota_infos`]).
//!
//! **Permissions.** A method in [`FaultConfig::denied_methods`] gets 403
//! `Required 'compute.regions.get' permission for 'projects/P/regions/R'`
//! (terraform-google-modules/terraform-google-kubernetes-engine#459,
//! hashicorp/packer#12159: reason `forbidden`); a Cloud Quotas read denied
//! (its method id, or the permission `cloudquotas.quotas.get`) gets the
//! words of Google's other One Platform APIs: `Permission
//! 'cloudquotas.quotas.get' denied on resource
//! '//cloudquotas.googleapis.com/projects/P/…' (or it may not exist).`
//! (e.g. "Permission 'artifactregistry.repositories.create' denied on
//! resource '//artifactregistry.googleapis.com/projects/…' (or it may not
//! exist).", 403 PERMISSION_DENIED).
//!
//! [`FaultConfig::quotas`]: crate::FaultConfig::quotas
//! [`FaultConfig::denied_methods`]: crate::FaultConfig::denied_methods

use std::collections::BTreeMap;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Map, Value, json};

use super::compute::{list_page, not_found, stable_id};
use super::errors::ApiError;
use super::faults::FaultConfig;
use super::gke::ClusterRef;
use super::routes::{Api, QuotaParent, Resolved};
use super::server::Ctx;
use super::state::Inner;
use super::tpu_rules::{nodes_per_zone, reservations_of};

/// The quota metric a TPU VM of `machine_type` is charged to: on-demand, or
/// preemptible (Spot). A family quota is `TPUS_PER_TPU_FAMILY/FAMILY`.
pub(crate) fn metric(machine_type: &str, preemptible: bool) -> Option<&'static str> {
    let t = crate::tpu::machine_type(machine_type)?;
    let (on_demand, spot) = match t.generation.accelerator {
        "tpu-v4-podslice" => ("TPU_PODSLICE_V4", Some("PREEMPTIBLE_TPU_PODSLICE_V4")),
        "tpu-v5-lite-podslice" => (
            "TPU_LITE_PODSLICE_V5",
            Some("PREEMPTIBLE_TPU_LITE_PODSLICE_V5"),
        ),
        "tpu-v5p-slice" => ("TPU_V5P", Some("PREEMPTIBLE_TPU_V5P")),
        "tpu-v6e-slice" => ("TPUS_PER_TPU_FAMILY/CT6E", Some("PREEMPTIBLE_TPU_V6E")),
        "tpu7x" => ("TPUS_PER_TPU_FAMILY/TPU7X", Some("PREEMPTIBLE_TPU7X")),
        _ => return None,
    };
    if preemptible { spot } else { Some(on_demand) }
}

/// The metrics `regions.get` reports (the compute v1 `Quota.metric` enum's
/// TPU values); the others are Cloud Quotas'.
const REGION_METRICS: &[&str] = &[
    "TPU_PODSLICE_V4",
    "PREEMPTIBLE_TPU_PODSLICE_V4",
    "TPU_LITE_PODSLICE_V5",
    "PREEMPTIBLE_TPU_LITE_PODSLICE_V5",
];

/// The name Compute Engine's errors give a metric (`TPUS_PER_TPU_FAMILY`
/// for a family quota).
fn error_name(metric: &str) -> &str {
    metric.split('/').next().unwrap_or(metric)
}

/// A Cloud Quotas quota: its id, metric, display name, and the metric (or,
/// for a family quota, the `METRIC/` prefix) its limits are set under.
pub(crate) struct CloudQuota {
    pub(crate) id: &'static str,
    pub(crate) metric: &'static str,
    display: &'static str,
    pub(crate) sim_metric: &'static str,
    pub(crate) family: bool,
}

/// The Cloud Quotas quotas served (ids as public setup scripts read them;
/// display names from Compute Engine's TPU quota catalogue).
pub(crate) const CLOUD_QUOTAS: &[CloudQuota] = &[
    CloudQuota {
        id: "TPU-V5P-per-project-region",
        metric: "compute.googleapis.com/tpu_v5p",
        display: "TPU v5p chips",
        sim_metric: "TPU_V5P",
        family: false,
    },
    CloudQuota {
        id: "PREEMPTIBLE-TPU-V5P-per-project-region",
        metric: "compute.googleapis.com/preemptible_tpu_v5p",
        display: "Preemptible TPU v5p chips",
        sim_metric: "PREEMPTIBLE_TPU_V5P",
        family: false,
    },
    CloudQuota {
        id: "PREEMPTIBLE-TPU-V6E-per-project-region",
        metric: "compute.googleapis.com/preemptible_tpu_v6e",
        display: "Preemptible TPU slices v6e",
        sim_metric: "PREEMPTIBLE_TPU_V6E",
        family: false,
    },
    // "Preemptible TPU slices tpu7x" (GKE's quota table); its id as a
    // public TPU7x quick start reads it (yangwhale/gpu-tpu-pedia,
    // tpu/Hunyuan3-295B-Pretraining/QUICKSTART-v7.md: a 64-chip
    // `PREEMPTIBLE-TPU7X-per-project-region`, so counted in chips); its
    // metric by the pattern of the v5p and v6e ones.
    CloudQuota {
        id: "PREEMPTIBLE-TPU7X-per-project-region",
        metric: "compute.googleapis.com/preemptible_tpu7x",
        display: "Preemptible TPU slices tpu7x",
        sim_metric: "PREEMPTIBLE_TPU7X",
        family: false,
    },
    CloudQuota {
        id: "TPUS-PER-TPU-FAMILY-per-project-region",
        metric: "compute.googleapis.com/tpus_per_tpu_family",
        display: "TPUs per TPU family",
        sim_metric: "TPUS_PER_TPU_FAMILY",
        family: true,
    },
];

/// What a node pool is charged: `(metric, chips)` for each region it has
/// zones in; nothing for a pool that consumes a specific reservation or
/// runs flex-start.
fn pool_charges(project: &str, pool: &Value, zones: &[String]) -> Vec<(String, &'static str, u64)> {
    let config = pool.get("config").cloned().unwrap_or(json!({}));
    let flag = |k: &str| config.get(k).and_then(Value::as_bool).unwrap_or(false);
    if flag("flexStart") || !reservations_of(project, pool).is_empty() {
        return Vec::new();
    }
    let machine = config
        .get("machineType")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let Some(m) = metric(machine, flag("spot") || flag("preemptible")) else {
        return Vec::new();
    };
    let per_vm = crate::tpu::machine_type(machine).map_or(0, |t| t.chips_per_vm);
    let nodes = u64::from(nodes_per_zone(pool));
    zones
        .iter()
        .map(|z| {
            (
                crate::tpu::region_of(z).to_string(),
                m,
                nodes * u64::from(per_vm),
            )
        })
        .collect()
}

/// What one VM is charged: `(metric, chips)`, from its machine type and
/// scheduling.
fn vm_charge(machine: &str, props: &Value) -> Option<(&'static str, u64)> {
    let model = props
        .pointer("/scheduling/provisioningModel")
        .and_then(Value::as_str)
        .unwrap_or("STANDARD");
    if matches!(model, "RESERVATION_BOUND" | "FLEX_START") {
        return None;
    }
    let specific = props
        .pointer("/reservationAffinity/consumeReservationType")
        .and_then(Value::as_str)
        == Some("SPECIFIC_RESERVATION");
    if specific {
        return None;
    }
    let preemptible = model == "SPOT"
        || props
            .pointer("/scheduling/preemptible")
            .and_then(Value::as_bool)
            .unwrap_or(false);
    let m = metric(machine, preemptible)?;
    let chips = crate::tpu::machine_type(machine).map_or(0, |t| t.chips_per_vm);
    Some((m, u64::from(chips)))
}

fn pool_zones_of(rec_spec: &Value) -> Vec<String> {
    rec_spec
        .get("locations")
        .and_then(Value::as_array)
        .map(|l| {
            l.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// Chips in use per metric in `project`'s `region`: the node pools not in
/// `ERROR` and the TPU VMs that exist.
pub(crate) fn usage(inner: &Inner, project: &str, region: &str) -> BTreeMap<&'static str, u64> {
    usage_by_region(inner, project)
        .into_iter()
        .filter(|((r, _), _)| r == region)
        .map(|((_, m), chips)| (m, chips))
        .collect()
}

/// Chips in use in `project` per `(region, metric)` ([`usage`]).
pub(crate) fn usage_by_region(
    inner: &Inner,
    project: &str,
) -> BTreeMap<(String, &'static str), u64> {
    let mut out: BTreeMap<(String, &'static str), u64> = BTreeMap::new();
    for (key, rec) in &inner.pools {
        let their_project = key.split('/').nth(1).unwrap_or_default();
        if their_project != project || rec.status == "ERROR" {
            continue;
        }
        for (r, m, chips) in pool_charges(project, &rec.spec, &pool_zones_of(&rec.spec)) {
            *out.entry((r, m)).or_default() += chips;
        }
    }
    for vm in inner.instances.values() {
        if vm.project != project {
            continue;
        }
        if let Some((m, chips)) = vm_charge(&vm.machine_type, &vm.properties) {
            let region = crate::tpu::region_of(&vm.zone).to_string();
            *out.entry((region, m)).or_default() += chips;
        }
    }
    out
}

/// The quotas set for `region`: metric → limit.
fn limits<'a>(config: &'a FaultConfig, region: &'a str) -> impl Iterator<Item = (&'a str, u64)> {
    config.quotas.iter().filter_map(move |(k, limit)| {
        let (r, m) = k.split_once('/')?;
        (r == region).then_some((m, *limit))
    })
}

/// `regions.get`'s `quotas`: each v4 and v5e metric with a quota set, its
/// limit and usage (`Quota {metric, limit, usage}`, doubles, compute v1
/// discovery); the other TPU quotas are Cloud Quotas' ([`get_quota_info`]).
pub(crate) fn add_region_quotas(inner: &Inner, project: &str, region: &str, out: &mut Value) {
    let used = usage(inner, project, region);
    let quotas: Vec<Value> = limits(&inner.faults.config, region)
        .filter(|(m, _)| REGION_METRICS.contains(m))
        .map(|(m, limit)| {
            let u = used.get(m).copied().unwrap_or(0);
            json!({"metric": m, "limit": limit as f64, "usage": u as f64})
        })
        .collect();
    if !quotas.is_empty() {
        out["quotas"] = Value::Array(quotas);
    }
}

/// A node pool create (its defaults applied: `locations` set) must fit
/// the regional quota of its metric, next to the usage already there.
pub(crate) fn check_pool_quota(
    inner: &Inner,
    c: &ClusterRef,
    pool: &Map<String, Value>,
    request_id: &str,
) -> Result<(), ApiError> {
    let body = Value::Object(pool.clone());
    let mut need: BTreeMap<(String, &'static str), u64> = BTreeMap::new();
    for (r, m, chips) in pool_charges(&c.project, &body, &pool_zones_of(&body)) {
        *need.entry((r, m)).or_default() += chips;
    }
    for ((region, m), chips) in need {
        let key = format!("{region}/{m}");
        let Some(&limit) = inner.faults.config.quotas.get(&key) else {
            continue;
        };
        let used = usage(inner, &c.project, &region)
            .get(m)
            .copied()
            .unwrap_or(0);
        let available = limit.saturating_sub(used);
        if chips > available {
            let project = &c.project;
            return Err(ApiError::forbidden(format!(
                "Insufficient regional quota to satisfy request: resource \"{}\": request requires \
                 '{:.1}' and is short '{:.1}'. project has a quota of '{:.1}' with '{:.1}' available. \
                 View and manage quotas at \
                 https://console.cloud.google.com/iam-admin/quotas?usage=USED&project={project}.",
                error_name(m),
                chips as f64,
                (chips - available) as f64,
                limit as f64,
                available as f64,
            ))
            .with_request_info(request_id));
        }
    }
    Ok(())
}

/// Why a MIG of `vms` VMs from `template` (an `InstanceTemplate`) cannot
/// get its VMs in `zone` for quota: Compute Engine's message, or `None`
/// when they fit (or are not charged).
pub(crate) fn mig_quota_error(
    inner: &Inner,
    project: &str,
    zone: &str,
    template: &Value,
    vms: u32,
) -> Option<String> {
    let props = template.get("properties")?;
    let machine = props.get("machineType")?.as_str()?;
    let (m, per_vm) = vm_charge(machine, props)?;
    let region = crate::tpu::region_of(zone);
    let limit = *inner.faults.config.quotas.get(&format!("{region}/{m}"))?;
    let used = usage(inner, project, region).get(m).copied().unwrap_or(0);
    let need = per_vm * u64::from(vms);
    (used + need > limit).then(|| {
        format!(
            "Quota '{}' exceeded. Limit: {:.1} in region {region}.",
            error_name(m),
            limit as f64
        )
    })
}

/// VMs of `project/zone/reservations/name` in use: the nodes of the pools
/// (not in `ERROR`) and the VMs that consume it.
pub(crate) fn reservation_in_use(inner: &Inner, project: &str, zone: &str, name: &str) -> u32 {
    let consumes = |their_project: &str, pool: &Value| {
        reservations_of(their_project, pool)
            .iter()
            .any(|(p, r, _)| p == project && r == name)
    };
    let pools: u32 = inner
        .pools
        .iter()
        .filter(|(_, rec)| rec.status != "ERROR")
        .filter(|(k, rec)| {
            let their_project = k.split('/').nth(1).unwrap_or_default();
            pool_zones_of(&rec.spec).iter().any(|z| z == zone) && consumes(their_project, &rec.spec)
        })
        .map(|(_, rec)| nodes_per_zone(&rec.spec))
        .sum();
    let vms = inner
        .instances
        .values()
        .filter(|vm| vm.zone == zone)
        .filter(|vm| {
            let as_pool = json!({"config": {"reservationAffinity":
                vm.properties.get("reservationAffinity").cloned().unwrap_or(Value::Null)}});
            consumes(&vm.project, &as_pool)
        })
        .count();
    pools.saturating_add(u32::try_from(vms).unwrap_or(u32::MAX))
}

fn render_reservation(inner: &Inner, ctx: &Ctx, key: &str, size: u32) -> Option<Value> {
    let parts: Vec<&str> = key.split('/').collect();
    let [_, project, _, zone, _, name] = parts.as_slice() else {
        return None;
    };
    let api = ctx.compute_api();
    let used = reservation_in_use(inner, project, zone, name);
    Some(json!({
        "kind": "compute#reservation",
        "id": stable_id(key),
        "name": name,
        "zone": format!("{api}/projects/{project}/zones/{zone}"),
        "selfLink": format!("{api}/{key}"),
        "status": "READY",
        "specificReservationRequired": true,
        "specificReservation": {
            "count": size.to_string(),
            "inUseCount": used.to_string(),
        },
    }))
}

/// `GET …/zones/Z/reservations/N`: the reservations of
/// [`FaultConfig::reservations`](crate::FaultConfig::reservations), with
/// `specificReservation.count` and `inUseCount` (int64 as strings).
pub(crate) fn get_reservation(
    inner: &Inner,
    ctx: &Ctx,
    project: &str,
    zone: &str,
    name: &str,
) -> Result<Value, ApiError> {
    let key = format!("projects/{project}/zones/{zone}/reservations/{name}");
    inner
        .faults
        .config
        .reservations
        .get(&key)
        .and_then(|&size| render_reservation(inner, ctx, &key, size))
        .ok_or_else(|| not_found(&key))
}

/// `GET …/zones/Z/reservations` (paginated).
pub(crate) fn list_reservations(
    inner: &Inner,
    ctx: &Ctx,
    project: &str,
    zone: &str,
) -> Result<Value, ApiError> {
    let prefix = format!("projects/{project}/zones/{zone}/reservations/");
    let items: Vec<Value> = inner
        .faults
        .config
        .reservations
        .iter()
        .filter(|(k, _)| k.starts_with(&prefix))
        .filter_map(|(k, &size)| render_reservation(inner, ctx, k, size))
        .collect();
    let collection = format!("projects/{project}/zones/{zone}/reservations");
    list_page(ctx, "compute#reservationList", &collection, items)
}

/// `GET …/projects/P/aggregated/reservations` (`gcloud compute
/// reservations list`).
pub(crate) fn aggregated_reservations(
    inner: &Inner,
    ctx: &Ctx,
    project: &str,
) -> Result<Value, ApiError> {
    super::aggregated::of_store(
        ctx,
        project,
        super::aggregated::RESERVATIONS,
        &inner.faults.config.reservations,
        |_| true,
        |k, &size| render_reservation(inner, ctx, k, size).unwrap_or(Value::Null),
    )
}

/// Renders Cloud Quotas' `QuotaInfo` of `q` for `project`
/// (`resources.proto`): one `dimensionsInfos` entry per region (and
/// family) with a quota set, most specific first, then the default `-1`.
fn render_quota_info(config: &FaultConfig, project: &str, q: &CloudQuota) -> Value {
    let mut infos: Vec<Value> = config
        .quotas
        .iter()
        .filter_map(|(k, limit)| {
            let (region, m) = k.split_once('/')?;
            let dimensions = if q.family {
                let family = m.strip_prefix(q.sim_metric)?.strip_prefix('/')?;
                json!({"region": region, "tpu_family": family})
            } else if m == q.sim_metric {
                json!({"region": region})
            } else {
                return None;
            };
            Some(json!({
                "dimensions": dimensions,
                "details": {"value": limit.to_string()},
                "applicableLocations": [region],
            }))
        })
        .collect();
    infos.push(json!({"details": {"value": "-1"}}));
    let mut dimensions = vec!["region"];
    if q.family {
        dimensions.push("tpu_family");
    }
    json!({
        "name": format!(
            "projects/{project}/locations/global/services/compute.googleapis.com/quotaInfos/{}",
            q.id
        ),
        "quotaId": q.id,
        "metric": q.metric,
        "service": "compute.googleapis.com",
        "isPrecise": true,
        "containerType": "PROJECT",
        "dimensions": dimensions,
        "metricDisplayName": q.display,
        "quotaDisplayName": q.display,
        "metricUnit": "1/{project}/{region}",
        "quotaIncreaseEligibility": {"isEligible": true},
        "isFixed": false,
        "dimensionsInfos": infos,
        "isConcurrent": false,
    })
}

/// A Cloud Quotas parent this simulator serves: `locations/global` (the
/// `QuotaInfo` name's location "must be \"global\"", resources.proto) of
/// `compute.googleapis.com`.
fn check_parent(parent: &QuotaParent) -> Result<(), ApiError> {
    if parent.location != "global" {
        return Err(ApiError::invalid(
            "badRequest",
            format!(
                "Invalid location '{}' in {}: the location of a quota info must be 'global'.",
                parent.location,
                parent.path()
            ),
        ));
    }
    if parent.service != "compute.googleapis.com" {
        return Err(not_found(&parent.path()));
    }
    Ok(())
}

/// Cloud Quotas `quotaInfos.get`.
pub(crate) fn get_quota_info(
    inner: &Inner,
    parent: &QuotaParent,
    id: &str,
) -> Result<Value, ApiError> {
    check_parent(parent)?;
    CLOUD_QUOTAS
        .iter()
        .find(|q| q.id == id)
        .map(|q| render_quota_info(&inner.faults.config, &parent.project, q))
        .ok_or_else(|| not_found(&format!("{}/quotaInfos/{id}", parent.path())))
}

/// `quotaInfos.list`'s page size when the request sets none (or 0): the
/// API leaves it to the server ("If unspecified, server will pick an
/// appropriate default", `ListQuotaInfosRequest.page_size`,
/// cloudquotas.proto) and documents no figure; this one is the simulator's.
pub(crate) const QUOTA_INFOS_DEFAULT_PAGE: usize = 100;

/// The largest page `quotaInfos.list` returns; a larger `pageSize` is
/// coerced down to it (AIP-158: "the API may coerce" a size above its
/// maximum).
pub(crate) const QUOTA_INFOS_MAX_PAGE: usize = 1000;

/// Google's words for a request argument it refuses without naming it
/// (400 INVALID_ARGUMENT, as One Platform APIs answer, e.g.
/// googleads/google-ads-php#513): what an unusable `pageToken` gets.
const INVALID_ARGUMENT: &str = "Request contains an invalid argument.";

/// The page token of `quotaInfos.list` for the page at `offset` of
/// `parent`: opaque to the caller, bound to the request it continues
/// (AIP-158: the other arguments must stay the same).
fn quota_page_token(parent: &QuotaParent, offset: usize) -> String {
    URL_SAFE_NO_PAD.encode(format!("quotaInfos|{}|{offset}", parent.path()))
}

/// The offset a `pageToken` of `parent`'s list points at, if it is one this
/// list returned for it.
fn quota_page_offset(parent: &QuotaParent, token: &str) -> Option<usize> {
    let text = String::from_utf8(URL_SAFE_NO_PAD.decode(token).ok()?).ok()?;
    let rest = text.strip_prefix("quotaInfos|")?;
    let (path, offset) = rest.rsplit_once('|')?;
    (path == parent.path()).then_some(())?;
    offset.parse().ok()
}

/// Cloud Quotas `quotaInfos.list`, paged as the API pages
/// (`ListQuotaInfosRequest` `page_size` / `page_token`,
/// `ListQuotaInfosResponse.next_page_token`, cloudquotas.proto; AIP-158):
/// `pageSize` must be an int32 (ESF's "Invalid value at 'page_size'
/// (TYPE_INT32)") and not negative; unset or 0 is
/// [`QUOTA_INFOS_DEFAULT_PAGE`]; `nextPageToken` is set while quotas
/// remain and absent on the last page; a `pageToken` this list did not
/// return for this parent (garbled, another parent's, past the end) is 400
/// INVALID_ARGUMENT (AIP-158: a token whose request arguments differ "should
/// send an INVALID_ARGUMENT error").
pub(crate) fn list_quota_infos(
    inner: &Inner,
    ctx: &Ctx,
    parent: &QuotaParent,
) -> Result<Value, ApiError> {
    check_parent(parent)?;
    let size = match ctx.query("pageSize") {
        None | Some("") => 0,
        Some(size) => size.parse::<i32>().map_err(|_| {
            ApiError::invalid(
                "badRequest",
                format!("Invalid value at 'page_size' (TYPE_INT32), \"{size}\""),
            )
        })?,
    };
    let size = match usize::try_from(size) {
        Ok(0) => QUOTA_INFOS_DEFAULT_PAGE,
        Ok(n) => n.min(QUOTA_INFOS_MAX_PAGE),
        Err(_) => {
            return Err(ApiError::invalid(
                "badRequest",
                format!("page_size must not be negative, got {size}."),
            ));
        }
    };
    let start = match ctx.query("pageToken") {
        None | Some("") => 0,
        Some(token) => quota_page_offset(parent, token)
            .filter(|&o| o < CLOUD_QUOTAS.len())
            .ok_or_else(|| ApiError::invalid("badRequest", INVALID_ARGUMENT.to_string()))?,
    };
    let infos: Vec<Value> = CLOUD_QUOTAS
        .iter()
        .skip(start)
        .take(size)
        .map(|q| render_quota_info(&inner.faults.config, &parent.project, q))
        .collect();
    let mut out = json!({ "quotaInfos": infos });
    let end = start + size;
    if end < CLOUD_QUOTAS.len() {
        out["nextPageToken"] = json!(quota_page_token(parent, end));
    }
    Ok(out)
}

/// 403 for a method the caller lacks the permission for.
pub(crate) fn denied(config: &FaultConfig, r: &Resolved, ctx: &Ctx) -> Option<ApiError> {
    let id = r.endpoint.method_id();
    if r.api == Api::CloudQuotas {
        let permission = "cloudquotas.quotas.get";
        if !config
            .denied_methods
            .iter()
            .any(|m| *m == id || m == permission)
        {
            return None;
        }
        let resource = ctx
            .path
            .trim_start_matches('/')
            .split_once('/')
            .map_or("", |(_, rest)| rest);
        return Some(ApiError::forbidden(format!(
            "Permission '{permission}' denied on resource '//cloudquotas.googleapis.com/{resource}' \
             (or it may not exist)."
        )));
    }
    if r.api == Api::Monitoring {
        return super::monitoring::denied(config, &id);
    }
    if !config.denied_methods.contains(&id) {
        return None;
    }
    let resource = match r.api {
        Api::Compute => ctx
            .path
            .splitn(4, '/')
            .nth(3)
            .unwrap_or_default()
            .to_string(),
        Api::Container | Api::CloudQuotas | Api::Monitoring => ctx
            .path
            .splitn(3, '/')
            .nth(2)
            .unwrap_or_default()
            .to_string(),
    };
    Some(ApiError::forbidden(format!(
        "Required '{id}' permission for '{resource}'"
    )))
}

#[cfg(test)]
#[path = "quotas/tests.rs"]
mod tests;
