//! Quota and reservation preflight: what the plan's creates and
//! replacements need, per region and quota metric and per specific
//! reservation, against what is left, judged before anything is sent.
//!
//! Pure: [`needs`] says what to read, the shell reads it ([`Facts`],
//! `crate::preflight`), and [`judge`] refuses the slice replicas that
//! cannot fit (`quota_insufficient`, `reservation_insufficient`) and holds
//! back the rest of their steps; every other slice goes ahead.
//!
//! **Metrics** (Compute Engine, per region, in chips): v4
//! `TPU_PODSLICE_V4` / `PREEMPTIBLE_TPU_PODSLICE_V4` and v5e
//! `TPU_LITE_PODSLICE_V5` / `PREEMPTIBLE_TPU_LITE_PODSLICE_V5` (the compute
//! v1 `Quota.metric` enum); v5p `TPU_V5P` / `PREEMPTIBLE_TPU_V5P` and v6e
//! `TPU_V6E` / `PREEMPTIBLE_TPU_V6E` (Cloud Quotas' `compute.googleapis.com/tpu_v5p`,
//! `…/preemptible_tpu_v6e`; not in the v1 enum, so `regions.get` may not
//! report them: then the line says "not checked"). Spot VMs are charged to
//! the preemptible metric (Cloud TPU, *Quotas*). TPU7x has no metric a
//! public source names; flex-start is not checked; a slice on a specific
//! reservation is checked against the reservation instead
//! (`specificReservation.count - inUseCount`, in VMs).
//!
//! **Order.** Creates need their whole capacity. A replacement runs delete
//! then create (`apply::steps`), so its own old capacity is free before its
//! create and is credited to it when it was charged the same way (the same
//! metric and region, or the same reservation); no other delete is
//! credited, since the executor may run it after other slices' creates
//! (and a moved replica's old resource is deleted only after its new one
//! exists). Slices are judged in plan order; one that does not fit takes
//! nothing, and later ones may still fit.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use super::{Action, ActionKind, Kind, Plan, Refusal, refusal};
use crate::spec::model::CapacityType;
use crate::spec::{Fleet, catalog};

/// The quota metric a slice of `accelerator` is charged to, on demand or
/// preemptible (Spot); `None` when no public source names one (TPU7x).
pub fn quota_metric(accelerator: &str, preemptible: bool) -> Option<&'static str> {
    let (on_demand, spot) = match accelerator {
        "tpu-v4-podslice" => ("TPU_PODSLICE_V4", "PREEMPTIBLE_TPU_PODSLICE_V4"),
        "tpu-v5-lite-podslice" => ("TPU_LITE_PODSLICE_V5", "PREEMPTIBLE_TPU_LITE_PODSLICE_V5"),
        "tpu-v5p-slice" => ("TPU_V5P", "PREEMPTIBLE_TPU_V5P"),
        "tpu-v6e-slice" => ("TPU_V6E", "PREEMPTIBLE_TPU_V6E"),
        _ => return None,
    };
    Some(if preemptible { spot } else { on_demand })
}

/// The region of a zone (`us-central1-a` → `us-central1`).
pub fn region_of(zone: &str) -> &str {
    zone.rsplit_once('-').map_or(zone, |(r, _)| r)
}

/// A regional quota: project, region, metric.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct QuotaKey {
    /// Project id.
    pub project: String,
    /// Region.
    pub region: String,
    /// Metric.
    pub metric: String,
}

/// A specific reservation: project, zone, name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct ReservationKey {
    /// Project owning the reservation.
    pub project: String,
    /// Zone.
    pub zone: String,
    /// Name.
    pub name: String,
}

/// What one primary create or replacement is charged.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Charge {
    Quota(QuotaKey, u64),
    Reservation(ReservationKey, u64),
}

/// One slice replica's need.
#[derive(Debug, Clone)]
struct Need {
    action: usize,
    charge: Charge,
    /// The old capacity a replacement frees before its create.
    credit: u64,
}

/// What the preflight must read: the regions (per project) and the
/// reservations the plan's creates and replacements are charged to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reads {
    /// `(project, region)`.
    pub regions: Vec<(String, String)>,
    /// Reservations.
    pub reservations: Vec<ReservationKey>,
}

/// What was read. A region or reservation missing from the maps was not
/// read (its error is in `errors`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Facts {
    /// `(project, region)` → metric → `(limit, usage)`.
    pub quotas: BTreeMap<(String, String), BTreeMap<String, (f64, f64)>>,
    /// Reservation → `(count, inUseCount)` in VMs.
    pub reservations: BTreeMap<ReservationKey, (u64, u64)>,
    /// Reads that failed, as warnings (`what: why`).
    pub errors: Vec<String>,
}

/// The preflight section of a plan.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Preflight {
    /// Per region and metric.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub quotas: Vec<QuotaLine>,
    /// Per specific reservation.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub reservations: Vec<ReservationLine>,
    /// Needs that could not be checked, and why.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unchecked: Vec<Unchecked>,
    /// Reads that failed (a caller without `compute.regions.get` or
    /// `compute.reservations.get`): no preflight for what they cover,
    /// never a failed plan.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

impl Preflight {
    /// Nothing to say (no create or replacement was charged anything).
    pub fn is_empty(&self) -> bool {
        self.quotas.is_empty()
            && self.reservations.is_empty()
            && self.unchecked.is_empty()
            && self.warnings.is_empty()
    }
}

/// One quota's figures.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct QuotaLine {
    /// Which quota.
    #[serde(flatten)]
    pub key: QuotaKey,
    /// The limit, in chips.
    pub limit: u64,
    /// Chips in use before the plan.
    pub usage: u64,
    /// Chips left before the plan (`limit - usage`).
    pub left: u64,
    /// Chips the plan's creates and replacements need (net of what
    /// replacements free first).
    pub needed: u64,
    /// The addresses refused for it (`quota_insufficient`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub refused: Vec<String>,
}

/// One reservation's figures.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReservationLine {
    /// Which reservation.
    #[serde(flatten)]
    pub key: ReservationKey,
    /// Its size in VMs (`specificReservation.count`).
    pub count: u64,
    /// VMs consuming it before the plan (`inUseCount`).
    pub in_use: u64,
    /// VMs free before the plan.
    pub free: u64,
    /// VMs the plan's creates and replacements need.
    pub needed: u64,
    /// The addresses refused for it (`reservation_insufficient`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub refused: Vec<String>,
}

/// A need that was not checked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Unchecked {
    /// The action's address.
    pub address: String,
    /// Why.
    pub why: String,
}

/// The primary creates and replacements of `plan`, with what each is
/// charged, and the needs that cannot be checked.
fn needs(plan: &Plan, fleet: &Fleet, kinds: &[&dyn Kind]) -> (Vec<Need>, Vec<Unchecked>) {
    // The specs' slices, then those pending JobSets asked for (no copy of
    // the fleet: a plan of thousands of slices with no create reads none).
    let slice_of = |name: &str| {
        fleet
            .slices
            .get(name)
            .or_else(|| plan.demand.slices.iter().find(|s| s.name == name))
    };
    let mut out = Vec::new();
    let mut unchecked = Vec::new();
    for (i, a) in plan.actions.iter().enumerate() {
        if !matches!(a.action, ActionKind::Create | ActionKind::Replace) {
            continue;
        }
        if !kinds.iter().any(|k| k.id() == a.id.kind && k.is_primary()) {
            continue;
        }
        let Some(slice) = slice_of(&a.owner.slice) else {
            continue;
        };
        let Some(target) = fleet.target_of(slice) else {
            continue;
        };
        let zone = &target.spec.zone;
        let project = &target.spec.project;
        let chips = u64::from(slice.shape.chips);
        let hosts = u64::from(slice.shape.hosts);
        let capacity = &slice.spec.capacity;
        let charge = match capacity.kind {
            CapacityType::Reservation => {
                let Some(r) = capacity.reservation.as_ref() else {
                    continue;
                };
                Charge::Reservation(
                    ReservationKey {
                        project: r.project.clone().unwrap_or_else(|| project.clone()),
                        zone: zone.clone(),
                        name: r.name.clone(),
                    },
                    hosts,
                )
            }
            CapacityType::FlexStart => {
                unchecked.push(Unchecked {
                    address: a.address(),
                    why: "flex-start capacity is granted by the Dynamic Workload Scheduler; no quota is checked".into(),
                });
                continue;
            }
            CapacityType::OnDemand | CapacityType::Spot => {
                let spot = capacity.kind == CapacityType::Spot;
                let Some(metric) = quota_metric(&slice.spec.accelerator, spot) else {
                    unchecked.push(Unchecked {
                        address: a.address(),
                        why: format!(
                            "no Compute Engine quota metric is known for {}; not checked",
                            slice.spec.accelerator
                        ),
                    });
                    continue;
                };
                Charge::Quota(
                    QuotaKey {
                        project: project.clone(),
                        region: region_of(zone).to_string(),
                        metric: metric.to_string(),
                    },
                    chips,
                )
            }
        };
        let credit = match a.action {
            ActionKind::Replace => old_charge(a, project)
                .filter(|(old, _)| same_pool(old, &charge))
                .map_or(0, |(_, n)| n),
            _ => 0,
        };
        out.push(Need {
            action: i,
            charge,
            credit,
        });
    }
    (out, unchecked)
}

fn same_pool(a: &Charge, b: &Charge) -> bool {
    match (a, b) {
        (Charge::Quota(x, _), Charge::Quota(y, _)) => x == y,
        (Charge::Reservation(x, _), Charge::Reservation(y, _)) => x == y,
        _ => false,
    }
}

/// What the live resource a replacement deletes was charged, read from the
/// action's `before` (a GKE node pool: machine type, node count per zone,
/// zones, Spot, reservation). A MIG's machine type lives in its template,
/// not in the MIG: nothing is credited for it.
fn old_charge(a: &Action, project: &str) -> Option<(Charge, u64)> {
    let before = a.before.as_ref()?;
    let config = before.get("config")?;
    let machine = config.get("machineType")?.as_str()?;
    let generation = catalog::generation_of_machine_type(machine)?;
    let per_host = generation
        .machine_types
        .iter()
        .find(|m| m.name == machine)
        .map(|m| u64::from(m.chips_per_host))?;
    let nodes = before.get("initialNodeCount").and_then(Value::as_u64)?;
    let zone = before
        .get("locations")
        .and_then(Value::as_array)
        .and_then(|l| l.first())
        .and_then(Value::as_str)?;
    let affinity = config.get("reservationAffinity");
    let specific = affinity
        .and_then(|r| r.get("consumeReservationType"))
        .and_then(Value::as_str)
        == Some("SPECIFIC_RESERVATION");
    if specific {
        let value = affinity
            .and_then(|r| r.get("values"))
            .and_then(Value::as_array)
            .and_then(|v| v.first())
            .and_then(Value::as_str)?;
        let (res_project, name) = match value.strip_prefix("projects/") {
            Some(rest) => {
                let (p, n) = rest.split_once("/reservations/")?;
                (p.to_string(), n.to_string())
            }
            None => (project.to_string(), value.to_string()),
        };
        let key = ReservationKey {
            project: res_project,
            zone: zone.to_string(),
            name,
        };
        return Some((Charge::Reservation(key, nodes), nodes));
    }
    let flag = |k: &str| config.get(k).and_then(Value::as_bool).unwrap_or(false);
    if flag("flexStart") {
        return None;
    }
    let metric = quota_metric(generation.accelerator, flag("spot") || flag("preemptible"))?;
    let key = QuotaKey {
        project: project.to_string(),
        region: region_of(zone).to_string(),
        metric: metric.to_string(),
    };
    Some((Charge::Quota(key, nodes * per_host), nodes * per_host))
}

/// What the preflight must read for `plan` (nothing when it creates and
/// replaces nothing that is charged).
pub fn reads(plan: &Plan, fleet: &Fleet, kinds: &[&dyn Kind]) -> Reads {
    let (needs, _) = needs(plan, fleet, kinds);
    let mut out = Reads::default();
    for n in needs {
        match n.charge {
            Charge::Quota(k, _) => {
                let r = (k.project, k.region);
                if !out.regions.contains(&r) {
                    out.regions.push(r);
                }
            }
            Charge::Reservation(k, _) => {
                if !out.reservations.contains(&k) {
                    out.reservations.push(k);
                }
            }
        }
    }
    out.regions.sort();
    out.reservations.sort();
    out
}

/// Charges `net` to a quota or reservation that had `left` before the
/// plan, of which the needs judged before took `taken`: `Ok` (and taken)
/// when it fits, else what was left then and what had been taken.
fn take(left: u64, taken: &mut u64, needed: &mut u64, net: u64) -> Result<(), (u64, u64)> {
    let now = left.saturating_sub(*taken);
    *needed += net;
    if net <= now {
        *taken += net;
        Ok(())
    } else {
        Err((now, *taken))
    }
}

fn whole(x: f64) -> u64 {
    if x.is_finite() && x > 0.0 {
        // Quotas are whole chips sent as doubles.
        x.round() as u64
    } else {
        0
    }
}

/// Judges the plan against `facts`: the preflight section, and the slice
/// replicas that cannot fit refused (their primary create or replacement
/// and, through [`super::build::hold_back`], the rest of their steps).
pub fn judge(plan: &mut Plan, fleet: &Fleet, kinds: &[&dyn Kind], facts: &Facts) {
    let (needs, unchecked) = needs(plan, fleet, kinds);
    let mut pf = Preflight {
        unchecked,
        warnings: facts.errors.clone(),
        ..Preflight::default()
    };
    let mut quota_lines: BTreeMap<QuotaKey, QuotaLine> = BTreeMap::new();
    let mut res_lines: BTreeMap<ReservationKey, ReservationLine> = BTreeMap::new();
    let mut refusals: Vec<Refusal> = Vec::new();
    // What the needs judged so far were granted, per quota / reservation.
    let mut q_taken: BTreeMap<QuotaKey, u64> = BTreeMap::new();
    let mut r_taken: BTreeMap<ReservationKey, u64> = BTreeMap::new();
    for n in &needs {
        let a = &plan.actions[n.action];
        let address = a.address();
        match &n.charge {
            Charge::Quota(k, chips) => {
                let Some(q) = facts.quotas.get(&(k.project.clone(), k.region.clone())) else {
                    continue; // not read: its warning says why
                };
                let Some(&(limit, usage)) = q.get(&k.metric) else {
                    pf.unchecked.push(Unchecked {
                        address,
                        why: format!(
                            "regions.get reports no quota {} in {} (project {}); not checked",
                            k.metric, k.region, k.project
                        ),
                    });
                    continue;
                };
                let (limit, usage) = (whole(limit), whole(usage));
                let line = quota_lines.entry(k.clone()).or_insert_with(|| QuotaLine {
                    key: k.clone(),
                    limit,
                    usage,
                    left: limit.saturating_sub(usage),
                    needed: 0,
                    refused: Vec::new(),
                });
                let net = chips.saturating_sub(n.credit);
                let taken = q_taken.entry(k.clone()).or_default();
                if let Err((left_now, taken)) = take(line.left, taken, &mut line.needed, net) {
                    line.refused.push(address.clone());
                    let freed = if n.credit > 0 {
                        format!(", after the {} chips its replacement frees first", n.credit)
                    } else {
                        String::new()
                    };
                    refusals.push(refusal(
                        a,
                        "quota_insufficient",
                        format!(
                            "{address} needs {net} {} chips in {} (project {}){freed}; the quota has {left_now} left \
                             (limit {limit}, usage {usage}, {taken} taken by this plan's earlier creates). \
                             Nothing is sent for this slice replica this run. Raise the quota \
                             (IAM & Admin > Quotas, metric {}, region {}), free chips, or choose another capacity; \
                             it is planned again on the next run",
                            k.metric, k.region, k.project, k.metric, k.region
                        ),
                    ));
                }
            }
            Charge::Reservation(k, vms) => {
                let Some(&(count, in_use)) = facts.reservations.get(k) else {
                    continue;
                };
                let line = res_lines
                    .entry(k.clone())
                    .or_insert_with(|| ReservationLine {
                        key: k.clone(),
                        count,
                        in_use,
                        free: count.saturating_sub(in_use),
                        needed: 0,
                        refused: Vec::new(),
                    });
                let net = vms.saturating_sub(n.credit);
                let taken = r_taken.entry(k.clone()).or_default();
                if let Err((free_now, taken)) = take(line.free, taken, &mut line.needed, net) {
                    line.refused.push(address.clone());
                    refusals.push(refusal(
                        a,
                        "reservation_insufficient",
                        format!(
                            "{address} needs {net} VMs of reservation {} in {} (project {}); it has {free_now} of {count} free \
                             ({in_use} in use, {taken} taken by this plan's earlier creates). Nothing is sent for this \
                             slice replica this run. Free VMs of the reservation, grow it, or choose another capacity; \
                             it is planned again on the next run",
                            k.name, k.zone, k.project
                        ),
                    ));
                }
            }
        }
    }
    pf.quotas = quota_lines.into_values().collect();
    pf.reservations = res_lines.into_values().collect();
    plan.preflight = pf;
    if refusals.is_empty() {
        return;
    }
    let gone: Vec<String> = refusals.iter().map(|r| r.address.clone()).collect();
    plan.actions.retain(|a| !gone.contains(&a.address()));
    plan.refused.extend(refusals);
    super::build::hold_back(&mut plan.actions, &mut plan.refused);
    plan.summary = plan.count();
}
