//! The preflight's reads (shell): each region's quotas (`regions.get`), the
//! Cloud Quotas quotas `regions.get` does not list (`quotaInfos.get`: TPU
//! v5p, v6e, TPU7x) with their usage from Cloud Monitoring
//! (`timeSeries.list`; the larger of it and the observed usage,
//! [`observed_usage`], is taken), and each specific reservation
//! (`reservations.get`) the plan's creates and replacements are charged to,
//! then [`plan::preflight::judge`]. Read-only calls; one that fails (a caller
//! without `compute.regions.get`, `cloudquotas.quotas.get`,
//! `monitoring.timeSeries.list` or `compute.reservations.get`, a reservation
//! not found) is a warning in the plan and no preflight for what it covers
//! (for Monitoring: the observed usage), never a failed plan.
//!
//! [`observed_usage`]: crate::plan::preflight::observed_usage

use futures::future::join_all;

use crate::cloud::{Cloud, CloudError};
use crate::plan::preflight::{CloudQuotaRead, Facts, ReservationKey, judge, observed_usage, reads};
use crate::plan::{Inventory, Kind, Plan};
use crate::resource::ZoneRef;
use crate::resource::compute::{QuotaInfo, TimeSeries};
use crate::spec::Fleet;

/// Reads what `plan` needs checked and judges it (refusing the slice
/// replicas that cannot fit); `inv` is the observation the plan was made
/// from (the usage of the Cloud Quotas quotas). Makes no call when the plan
/// creates or replaces nothing that is charged.
pub async fn check(
    cloud: &Cloud,
    fleet: &Fleet,
    kinds: &[&dyn Kind],
    inv: &Inventory,
    plan: &mut Plan,
) {
    let r = reads(plan, fleet, kinds);
    if r.regions.is_empty() && r.reservations.is_empty() && r.cloud_quotas.is_empty() {
        return;
    }
    let cloud_quotas = join_all(r.cloud_quotas.iter().map(|c| async move {
        (
            c,
            cloud.compute.get_quota_info(&c.project, c.quota_id).await,
        )
    }));
    let regions = join_all(r.regions.iter().map(|(project, region)| async move {
        (
            (project.clone(), region.clone()),
            cloud.compute.get_region(project, region).await,
        )
    }));
    let reservations = join_all(r.reservations.iter().map(|k| async move {
        let zone = ZoneRef {
            project: k.project.clone(),
            zone: k.zone.clone(),
        };
        (
            k.clone(),
            cloud.compute.get_reservation(&zone, &k.name).await,
        )
    }));
    let (regions, reservations, cloud_quotas) = futures::join!(regions, reservations, cloud_quotas);
    // The usage of the quotas Cloud Quotas gave a limit of, from Cloud
    // Monitoring (Cloud Quotas has none).
    let usages = join_all(cloud_quotas.iter().filter_map(|(c, got)| {
        let filter = usage_filter(c, got.as_ref().ok()?)?;
        Some(async move {
            let got = cloud.compute.list_time_series(&c.project, &filter).await;
            ((c.project.clone(), c.quota_id), got)
        })
    }))
    .await;
    let usages: std::collections::BTreeMap<_, _> = usages.into_iter().collect();
    let mut facts = Facts::default();
    for ((project, region), got) in regions {
        match got {
            Ok(r) => {
                let q = r
                    .quotas
                    .into_iter()
                    .map(|q| (q.metric, (q.limit, q.usage)))
                    .collect();
                facts.quotas.insert((project, region), q);
            }
            Err(e) => {
                let w = format!(
                    "quotas of projects/{project}/regions/{region} not read ({e}); no quota preflight there. \
                     Reading them needs compute.regions.get (roles/compute.viewer)"
                );
                tracing::warn!(target: crate::watch::LOG_TARGET, project = %project, region = %region, error = %e, "quota preflight skipped: quotas not read");
                facts.errors.push(w);
                facts.unread_regions.insert((project, region));
            }
        }
    }
    for (k, got) in reservations {
        match got.map(|r| counts(&r)) {
            Ok(Some(c)) => {
                facts.reservations.insert(k, c);
            }
            Ok(None) => facts.errors.push(format!(
                "reservation {} has no specificReservation count; not checked",
                path(&k)
            )),
            Err(e) => {
                tracing::warn!(target: crate::watch::LOG_TARGET, reservation = %path(&k), error = %e, "reservation preflight skipped: reservation not read");
                facts.errors.push(format!(
                    "reservation {} not read ({e}); no preflight for it. Reading it needs \
                     compute.reservations.get (roles/compute.viewer)",
                    path(&k)
                ));
            }
        }
    }
    for (c, got) in cloud_quotas {
        let usage = usages.get(&(c.project.clone(), c.quota_id));
        cloud_quota_facts(c, got, usage, inv, &mut facts);
    }
    judge(plan, fleet, kinds, &facts);
}

/// The Cloud Monitoring filter of the usage of `info` (read for `c`): the
/// family quota's `compute.googleapis.com/quota/tpus_per_tpu_family/usage`
/// (on `compute.googleapis.com/Location`, label `tpu_family`), else the
/// allocation usage of its metric (`serviceruntime.googleapis.com/quota/allocation/usage`
/// on `consumer_quota`, label `quota_metric`); `None` when the quota names no
/// metric.
fn usage_filter(c: &CloudQuotaRead, info: &QuotaInfo) -> Option<String> {
    if c.uses.iter().any(|(_, _, family)| family.is_some()) {
        return Some(
            "metric.type = \"compute.googleapis.com/quota/tpus_per_tpu_family/usage\" AND \
             resource.type = \"compute.googleapis.com/Location\""
                .to_string(),
        );
    }
    (!info.metric.is_empty()).then(|| {
        format!(
            "metric.type = \"serviceruntime.googleapis.com/quota/allocation/usage\" AND \
             resource.type = \"consumer_quota\" AND resource.labels.service = \"compute.googleapis.com\" AND \
             metric.labels.quota_metric = \"{}\"",
            info.metric
        )
    })
}

/// The usage Cloud Monitoring's `series` give `region` (and `family`): the
/// newest point of the matching series (the largest, if several match).
fn monitored_usage(series: &[TimeSeries], region: &str, family: Option<&str>) -> Option<u64> {
    series
        .iter()
        .filter(|s| s.resource.labels.get("location").map(String::as_str) == Some(region))
        .filter(|s| {
            family.is_none_or(|f| {
                s.metric
                    .labels
                    .get("tpu_family")
                    .is_some_and(|v| v.eq_ignore_ascii_case(f))
            })
        })
        .filter_map(|s| s.points.first()?.value.whole())
        .max()
}

/// What one Cloud Quotas read says: for each region and metric it covers,
/// the limit in force there (none: the judge says "not checked") and the
/// usage, the larger of Cloud Monitoring's (`usage`, when read) and the
/// observed one; a failed read is a warning and no preflight for it (a
/// quota id Cloud Quotas does not know is "not checked"), and a failed
/// usage read is a warning and the observed usage.
fn cloud_quota_facts(
    c: &CloudQuotaRead,
    got: Result<QuotaInfo, CloudError>,
    usage: Option<&Result<Vec<TimeSeries>, CloudError>>,
    inv: &Inventory,
    facts: &mut Facts,
) {
    let info = match got {
        Ok(info) => Some(info),
        Err(e) if e.is_not_found() => None,
        Err(e) => {
            let path = format!(
                "projects/{}/locations/global/services/compute.googleapis.com/quotaInfos/{}",
                c.project, c.quota_id
            );
            tracing::warn!(target: crate::watch::LOG_TARGET, quota = %path, error = %e, "quota preflight skipped: Cloud Quotas quota not read");
            facts.errors.push(format!(
                "quota {path} not read ({e}); no quota preflight for it. Reading it needs \
                 cloudquotas.quotas.get (roles/cloudquotas.viewer)"
            ));
            for (_, metric, _) in &c.uses {
                facts
                    .unread
                    .insert((c.project.clone(), (*metric).to_string()));
            }
            return;
        }
    };
    let series = match usage {
        Some(Ok(series)) => Some(series.as_slice()),
        Some(Err(e)) => {
            let path = format!("projects/{}/timeSeries", c.project);
            tracing::warn!(target: crate::watch::LOG_TARGET, quota = %c.quota_id, error = %e, "quota usage not read from Cloud Monitoring; using the observed usage");
            facts.errors.push(format!(
                "usage of {} not read from Cloud Monitoring ({path}: {e}); its usage is what slicectl \
                 observes. Reading it needs monitoring.timeSeries.list (roles/monitoring.viewer)",
                c.quota_id
            ));
            None
        }
        None => None,
    };
    for (region, metric, family) in &c.uses {
        let entry = facts
            .quotas
            .entry((c.project.clone(), region.clone()))
            .or_default();
        let Some(limit) = info.as_ref().and_then(|i| i.limit_in(region, *family)) else {
            continue;
        };
        let observed = observed_usage(inv, &c.project, region)
            .get(*metric)
            .copied()
            .unwrap_or(0);
        let monitored = series.and_then(|s| monitored_usage(s, region, *family));
        let usage = match monitored {
            Some(m) if m > observed => {
                facts
                    .monitored
                    .insert((c.project.clone(), region.clone(), (*metric).to_string()));
                m
            }
            _ => observed,
        };
        // Whole chips; the judge reads a negative limit as unlimited.
        entry.insert((*metric).to_string(), (limit as f64, usage as f64));
    }
}

fn path(k: &ReservationKey) -> String {
    format!(
        "projects/{}/zones/{}/reservations/{}",
        k.project, k.zone, k.name
    )
}

/// `(count, inUseCount)` of a reservation (int64 strings on the wire).
fn counts(r: &crate::resource::compute::Reservation) -> Option<(u64, u64)> {
    let s = r.specific_reservation.as_ref()?;
    let count = s.count.as_deref()?.parse().ok()?;
    let in_use = s
        .in_use_count
        .as_deref()
        .map_or(Some(0), |v| v.parse().ok())?;
    Some((count, in_use))
}

#[cfg(test)]
#[path = "preflight/tests.rs"]
mod tests;
