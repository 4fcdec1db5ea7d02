//! Regional TPU quotas, specific reservations' use, and permissions the
//! caller lacks.
//!
//! **Metrics.** Compute Engine charges TPU VMs (GKE's TPU node pools are
//! Compute Engine VMs) to a regional quota per TPU generation and
//! provisioning model, counted in chips. The compute v1 discovery document's
//! `Quota.metric` enum names `TPU_PODSLICE_V4`, `PREEMPTIBLE_TPU_PODSLICE_V4`,
//! `TPU_LITE_PODSLICE_V5` and `PREEMPTIBLE_TPU_LITE_PODSLICE_V5` (v5e);
//! Spot VMs use the preemptible metric (Cloud TPU, *Quotas*:
//! cloud.google.com/tpu/docs/quota, "on-demand and preemptible (spot)").
//! v5p and v6e are charged to `TPU_V5P` / `PREEMPTIBLE_TPU_V5P` and
//! `TPU_V6E` / `PREEMPTIBLE_TPU_V6E` (the Cloud Quotas metrics
//! `compute.googleapis.com/tpu_v5p`, `…/preemptible_tpu_v6e`, as public
//! setup guides name them); they are not in the v1 enum, and Google's
//! `regions.get` is reported to list only the v5e metrics, so this
//! simulator reports a metric only when a quota is set for it
//! ([`FaultConfig::quotas`]). No public source names TPU7x's metric: TPU7x
//! is not charged here. Flex-start and reservation-bound VMs are not
//! charged either (their capacity is obtained another way; not verified
//! from a source).
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
//! 'GPUS_ALL_REGIONS' exceeded. Limit: 0.0 globally.", fastai/course-v3#165)
//! where it reports stockouts, until the quota holds them.
//!
//! **Permissions.** A method in [`FaultConfig::denied_methods`] gets 403
//! `Required 'compute.regions.get' permission for 'projects/P/regions/R'`
//! (terraform-google-modules/terraform-google-kubernetes-engine#459,
//! hashicorp/packer#12159: reason `forbidden`).
//!
//! [`FaultConfig::quotas`]: crate::FaultConfig::quotas
//! [`FaultConfig::denied_methods`]: crate::FaultConfig::denied_methods

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::compute::{list_page, not_found, stable_id};
use super::errors::ApiError;
use super::faults::FaultConfig;
use super::gke::ClusterRef;
use super::routes::{Api, Resolved};
use super::server::Ctx;
use super::state::Inner;
use super::tpu_rules::{nodes_per_zone, reservations_of};

/// The quota metric a TPU VM of `machine_type` is charged to: on-demand, or
/// preemptible (Spot).
pub(crate) fn metric(machine_type: &str, preemptible: bool) -> Option<&'static str> {
    let t = crate::tpu::machine_type(machine_type)?;
    let (on_demand, spot) = match t.generation.accelerator {
        "tpu-v4-podslice" => ("TPU_PODSLICE_V4", "PREEMPTIBLE_TPU_PODSLICE_V4"),
        "tpu-v5-lite-podslice" => ("TPU_LITE_PODSLICE_V5", "PREEMPTIBLE_TPU_LITE_PODSLICE_V5"),
        "tpu-v5p-slice" => ("TPU_V5P", "PREEMPTIBLE_TPU_V5P"),
        "tpu-v6e-slice" => ("TPU_V6E", "PREEMPTIBLE_TPU_V6E"),
        _ => return None,
    };
    Some(if preemptible { spot } else { on_demand })
}

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
    let mut out: BTreeMap<&'static str, u64> = BTreeMap::new();
    for (key, rec) in &inner.pools {
        let their_project = key.split('/').nth(1).unwrap_or_default();
        if their_project != project || rec.status == "ERROR" {
            continue;
        }
        for (r, m, chips) in pool_charges(project, &rec.spec, &pool_zones_of(&rec.spec)) {
            if r == region {
                *out.entry(m).or_default() += chips;
            }
        }
    }
    for vm in inner.instances.values() {
        if vm.project != project || crate::tpu::region_of(&vm.zone) != region {
            continue;
        }
        if let Some((m, chips)) = vm_charge(&vm.machine_type, &vm.properties) {
            *out.entry(m).or_default() += chips;
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

/// `regions.get`'s `quotas`: each metric with a quota set, its limit and
/// usage (`Quota {metric, limit, usage}`, doubles, compute v1 discovery).
pub(crate) fn add_region_quotas(inner: &Inner, project: &str, region: &str, out: &mut Value) {
    let used = usage(inner, project, region);
    let quotas: Vec<Value> = limits(&inner.faults.config, region)
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
                "Insufficient regional quota to satisfy request: resource \"{m}\": request requires \
                 '{:.1}' and is short '{:.1}'. project has a quota of '{:.1}' with '{:.1}' available. \
                 View and manage quotas at \
                 https://console.cloud.google.com/iam-admin/quotas?usage=USED&project={project}.",
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
            "Quota '{m}' exceeded. Limit: {:.1} in region {region}.",
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

/// 403 for a method the caller lacks the permission for.
pub(crate) fn denied(config: &FaultConfig, r: &Resolved, ctx: &Ctx) -> Option<ApiError> {
    let id = r.endpoint.method_id();
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
        Api::Container => ctx
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
mod tests {
    use super::*;

    #[test]
    fn metrics_follow_generation_and_provisioning_model() {
        assert_eq!(metric("ct5p-hightpu-4t", false), Some("TPU_V5P"));
        assert_eq!(metric("ct5p-hightpu-4t", true), Some("PREEMPTIBLE_TPU_V5P"));
        assert_eq!(
            metric("ct5lp-hightpu-4t", false),
            Some("TPU_LITE_PODSLICE_V5")
        );
        assert_eq!(
            metric("ct4p-hightpu-4t", true),
            Some("PREEMPTIBLE_TPU_PODSLICE_V4")
        );
        assert_eq!(metric("ct6e-standard-4t", false), Some("TPU_V6E"));
        assert_eq!(metric("n2-standard-4", false), None);
    }

    #[test]
    fn pools_on_a_reservation_or_flex_start_are_not_charged() {
        let zones = vec!["us-east5-a".to_string()];
        let spot = json!({"initialNodeCount": 4, "config": {"machineType": "ct5p-hightpu-4t", "spot": true}});
        assert_eq!(
            pool_charges("p", &spot, &zones),
            vec![("us-east5".to_string(), "PREEMPTIBLE_TPU_V5P", 16)]
        );
        let reserved = json!({"initialNodeCount": 4, "config": {"machineType": "ct5p-hightpu-4t",
            "reservationAffinity": {"consumeReservationType": "SPECIFIC_RESERVATION",
                "key": "compute.googleapis.com/reservation-name", "values": ["r"]}}});
        assert!(pool_charges("p", &reserved, &zones).is_empty());
        let flex = json!({"initialNodeCount": 4, "config": {"machineType": "ct5p-hightpu-4t", "flexStart": true}});
        assert!(pool_charges("p", &flex, &zones).is_empty());
    }

    #[test]
    fn vms_are_charged_by_provisioning_model() {
        let spot = json!({"scheduling": {"provisioningModel": "SPOT"}});
        assert_eq!(
            vm_charge("ct6e-standard-4t", &spot),
            Some(("PREEMPTIBLE_TPU_V6E", 4))
        );
        let bound = json!({"scheduling": {"provisioningModel": "RESERVATION_BOUND"}});
        assert_eq!(vm_charge("ct6e-standard-4t", &bound), None);
        assert_eq!(
            vm_charge("ct6e-standard-4t", &json!({})),
            Some(("TPU_V6E", 4))
        );
    }
}
