//! The preflight's reads (shell): each region's quotas (`regions.get`) and
//! each specific reservation (`reservations.get`) the plan's creates and
//! replacements are charged to, then [`plan::preflight::judge`]. Read-only
//! calls; one that fails (a caller without `compute.regions.get` or
//! `compute.reservations.get`, a reservation not found) is a warning in the
//! plan and no preflight for what it covers, never a failed plan.

use futures::future::join_all;

use crate::cloud::Cloud;
use crate::plan::preflight::{Facts, ReservationKey, judge, reads};
use crate::plan::{Kind, Plan};
use crate::resource::ZoneRef;
use crate::spec::Fleet;

/// Reads what `plan` needs checked and judges it (refusing the slice
/// replicas that cannot fit). Makes no call when the plan creates or
/// replaces nothing that is charged.
pub async fn check(cloud: &Cloud, fleet: &Fleet, kinds: &[&dyn Kind], plan: &mut Plan) {
    let r = reads(plan, fleet, kinds);
    if r.regions.is_empty() && r.reservations.is_empty() {
        return;
    }
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
    let (regions, reservations) = futures::join!(regions, reservations);
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
    judge(plan, fleet, kinds, &facts);
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
