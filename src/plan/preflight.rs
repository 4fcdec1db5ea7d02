//! Quota and reservation preflight: what the plan's creates and
//! replacements need, per region and quota metric and per specific
//! reservation, against what is left, judged before anything is sent.
//!
//! Pure: [`needs`] says what to read, the shell reads it ([`Facts`],
//! `crate::preflight`), and [`judge`] refuses the slice replicas that
//! cannot fit (`quota_insufficient`, `reservation_insufficient`) and holds
//! back the rest of their steps; every other slice goes ahead.
//!
//! **Quotas** (Compute Engine, per region, in chips; [`QUOTAS`] cites the
//! sources): v4 `TPU_PODSLICE_V4` / `PREEMPTIBLE_TPU_PODSLICE_V4` and v5e
//! `TPU_LITE_PODSLICE_V5` / `PREEMPTIBLE_TPU_LITE_PODSLICE_V5` are read
//! with `regions.get` (limit and usage); v5p `TPU_V5P` /
//! `PREEMPTIBLE_TPU_V5P`, v6e `TPUS_PER_TPU_FAMILY/CT6E` /
//! `PREEMPTIBLE_TPU_V6E` and TPU7x `TPUS_PER_TPU_FAMILY/TPU7X` /
//! `PREEMPTIBLE_TPU7X` are not in `regions.get`: their limits are read from
//! Cloud Quotas (`quotaInfos.get`) and their usage is the larger of Cloud
//! Monitoring's (`Facts::monitored`) and what slicectl observes
//! ([`observed_usage`]). Spot VMs are charged to the preemptible
//! quota (Cloud TPU, *Quotas*); flex-start
//! is reported, never refused (its VMs come when the Dynamic Workload
//! Scheduler grants them, on the preemptible quota else the on-demand
//! one); a slice on a specific reservation is checked against the
//! reservation instead (`specificReservation.count - inUseCount`, in VMs).
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

use super::kind::{Scope, body_as};
use super::{Action, ActionKind, Inventory, Kind, Plan, Reason, Refusal, refusal};
use crate::spec::model::CapacityType;
use crate::spec::{Fleet, catalog};

/// Where a quota's limit is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum QuotaSource {
    /// Compute Engine `regions.get` (`quotas[]`, with its usage).
    Region,
    /// The Cloud Quotas API (`quotaInfos.get` of `compute.googleapis.com`):
    /// the quota id, and the `tpu_family` dimension when the quota has one.
    /// It gives the limit only; the usage is Cloud Monitoring's or what
    /// slicectl observes ([`observed_usage`]), the larger.
    CloudQuotas {
        /// Quota id, e.g. `TPU-V5P-per-project-region`.
        quota_id: &'static str,
        /// `tpu_family` dimension value, e.g. `CT6E`.
        family: Option<&'static str>,
    },
}

/// A regional TPU quota: the name the plan shows it by (Compute Engine's
/// metric name, the one its quota errors name) and where it is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuotaDef {
    /// E.g. `TPU_V5P`, `TPUS_PER_TPU_FAMILY/CT6E`.
    pub metric: &'static str,
    /// Where it is read.
    pub source: QuotaSource,
}

const fn region(metric: &'static str) -> QuotaDef {
    QuotaDef {
        metric,
        source: QuotaSource::Region,
    }
}

const fn cloud(
    metric: &'static str,
    quota_id: &'static str,
    family: Option<&'static str>,
) -> QuotaDef {
    QuotaDef {
        metric,
        source: QuotaSource::CloudQuotas { quota_id, family },
    }
}

/// The quota `TPUS-PER-TPU-FAMILY-per-project-region` (metric
/// `compute.googleapis.com/tpus_per_tpu_family`, dimensions `region`,
/// `tpu_family`).
pub const FAMILY_QUOTA_ID: &str = "TPUS-PER-TPU-FAMILY-per-project-region";

/// Every TPU quota the preflight knows, on demand and preemptible (Spot;
/// also flex-start, [`quota_of`]). Compute Engine's TPU quota catalogue
/// (cloud.google.com/compute/resource-usage#tpu_quota; GKE: "Ensure
/// sufficient quota", cloud.google.com/kubernetes-engine/docs/how-to/tpus):
/// v4 "TPU v4 PodSlice chips", v5e "TPU v5 Lite PodSlice chips" (both in
/// the compute v1 `Quota.metric` enum, so `regions.get` lists them), v5p
/// "TPU v5p chips" / "Preemptible TPU v5p chips", v6e and TPU7x "TPUs per
/// TPU family" with `tpu_family=CT6E` / `tpu7x` and "Preemptible TPU slices
/// v6e" / "… tpu7x". `regions.get` lists only the v4 and v5e ones: the
/// compute v1 discovery document's `Quota.metric` enum has
/// `TPU_PODSLICE_V4`, `TPU_LITE_PODSLICE_V5` (and their preemptible and
/// `…_DEVICE_V5` forms) and no v5p, v6e or TPU7x metric (also public
/// reports: "the compute quotas only show v5 lite entries"; the family
/// quota "is not visible via `gcloud compute regions describe`"). The
/// others are read from Cloud Quotas by their quota ids; no Google page
/// lists the ids, so they are the ones public setup scripts and notes read
/// with `gcloud quotas info describe` (`TPU-V5P-per-project-region`,
/// `PREEMPTIBLE-TPU-V5P-per-project-region`,
/// `PREEMPTIBLE-TPU-V6E-per-project-region`,
/// `TPUS-PER-TPU-FAMILY-per-project-region` with dimensions `region` and
/// `tpu_family`; `PREEMPTIBLE-TPU7X-per-project-region`, 64 chips in a
/// public TPU7x quick start: yangwhale/gpu-tpu-pedia,
/// tpu/Hunyuan3-295B-Pretraining/QUICKSTART-v7.md). The plan names each
/// as Compute's errors do (`Quota 'TPUS_PER_TPU_FAMILY' exceeded. Limit:
/// 0.0 in region us-east5.`); `PREEMPTIBLE_TPU7X` follows the pattern of
/// `PREEMPTIBLE_TPU_V6E` (no public error shows it). A quota id Cloud
/// Quotas answers 404 for is "not checked", never a refusal.
pub const QUOTAS: &[(&str, QuotaDef, Option<QuotaDef>)] = &[
    (
        "tpu-v4-podslice",
        region("TPU_PODSLICE_V4"),
        Some(region("PREEMPTIBLE_TPU_PODSLICE_V4")),
    ),
    (
        "tpu-v5-lite-podslice",
        region("TPU_LITE_PODSLICE_V5"),
        Some(region("PREEMPTIBLE_TPU_LITE_PODSLICE_V5")),
    ),
    (
        "tpu-v5p-slice",
        cloud("TPU_V5P", "TPU-V5P-per-project-region", None),
        Some(cloud(
            "PREEMPTIBLE_TPU_V5P",
            "PREEMPTIBLE-TPU-V5P-per-project-region",
            None,
        )),
    ),
    (
        "tpu-v6e-slice",
        cloud("TPUS_PER_TPU_FAMILY/CT6E", FAMILY_QUOTA_ID, Some("CT6E")),
        Some(cloud(
            "PREEMPTIBLE_TPU_V6E",
            "PREEMPTIBLE-TPU-V6E-per-project-region",
            None,
        )),
    ),
    (
        "tpu7x",
        cloud("TPUS_PER_TPU_FAMILY/TPU7X", FAMILY_QUOTA_ID, Some("TPU7X")),
        Some(cloud(
            "PREEMPTIBLE_TPU7X",
            "PREEMPTIBLE-TPU7X-per-project-region",
            None,
        )),
    ),
];

/// The quota a slice of `accelerator` is charged to, on demand or
/// preemptible (Spot); `Err` says why none is known.
pub fn quota_of(accelerator: &str, preemptible: bool) -> Result<QuotaDef, String> {
    let Some((_, on_demand, spot)) = QUOTAS.iter().find(|(a, _, _)| *a == accelerator) else {
        return Err(format!(
            "no Compute Engine quota is known for {accelerator}; not checked"
        ));
    };
    if !preemptible {
        return Ok(*on_demand);
    }
    spot.ok_or_else(|| {
        format!("no preemptible Compute Engine quota is known for {accelerator}; not checked")
    })
}

/// The quota metric a slice of `accelerator` is charged to, on demand or
/// preemptible (Spot); `None` when none is known.
pub fn quota_metric(accelerator: &str, preemptible: bool) -> Option<&'static str> {
    quota_of(accelerator, preemptible).ok().map(|q| q.metric)
}

/// The quota shown as `metric`.
pub fn quota_by_metric(metric: &str) -> Option<QuotaDef> {
    QUOTAS
        .iter()
        .flat_map(|(_, o, s)| std::iter::once(*o).chain(*s))
        .find(|q| q.metric == metric)
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

/// What the preflight must read: the regions (per project), the Cloud
/// Quotas quotas and the reservations the plan's creates and replacements
/// are charged to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reads {
    /// `(project, region)` for `regions.get`.
    pub regions: Vec<(String, String)>,
    /// `(project, quota id)` for Cloud Quotas' `quotaInfos.get`, with the
    /// regions and metrics of the needs it covers.
    pub cloud_quotas: Vec<CloudQuotaRead>,
    /// Reservations.
    pub reservations: Vec<ReservationKey>,
}

/// One Cloud Quotas quota to read for a project.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CloudQuotaRead {
    /// Project id.
    pub project: String,
    /// Quota id.
    pub quota_id: &'static str,
    /// `(region, metric, tpu_family)` of the needs it covers.
    pub uses: Vec<(String, &'static str, Option<&'static str>)>,
}

/// What was read. A region or reservation missing from the maps was not
/// read (its error is in `errors`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Facts {
    /// `(project, region)` → metric → `(limit, usage)`; a negative limit is
    /// unlimited.
    pub quotas: BTreeMap<(String, String), BTreeMap<String, (f64, f64)>>,
    /// `(project, metric)` of the Cloud Quotas quotas whose read failed
    /// (the warning is in `errors`): no preflight for them.
    pub unread: std::collections::BTreeSet<(String, String)>,
    /// `(project, region)` whose `regions.get` failed (the warning is in
    /// `errors`): no preflight for the quotas it lists.
    pub unread_regions: std::collections::BTreeSet<(String, String)>,
    /// Reservation → `(count, inUseCount)` in VMs.
    pub reservations: BTreeMap<ReservationKey, (u64, u64)>,
    /// `(project, region, metric)` of the Cloud Quotas quotas whose usage is
    /// Cloud Monitoring's (larger than the observed one).
    pub monitored: std::collections::BTreeSet<(String, String, String)>,
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

/// `QuotaLine::read_with` of a quota `regions.get` reports (limit and
/// usage).
pub const READ_WITH_REGION: &str = "regions.get";
/// `QuotaLine::read_with` of a quota read from Cloud Quotas (the limit),
/// its usage per `QuotaLine::usage_from`.
pub const READ_WITH_CLOUD_QUOTAS: &str = "cloudquotas";

/// `QuotaLine::usage_from` of a usage read from Cloud Monitoring.
pub const USAGE_FROM_MONITORING: &str = "monitoring";
/// `QuotaLine::usage_from` of a usage slicectl observes.
pub const USAGE_FROM_OBSERVED: &str = "observed";

/// One quota's figures.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct QuotaLine {
    /// Which quota.
    #[serde(flatten)]
    pub key: QuotaKey,
    /// Where its figures come from: `regions.get` (limit and usage), or
    /// `cloudquotas` (the limit from Cloud Quotas, the usage per
    /// `usage_from`).
    pub read_with: &'static str,
    /// With `cloudquotas`: where the usage comes from, `monitoring` (Cloud
    /// Monitoring's, larger than the observed one) or `observed`
    /// ([`observed_usage`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage_from: Option<&'static str>,
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
        // A brought instance template holds the provisioning model (on
        // demand, Spot, FLEX_START, RESERVATION_BOUND and its reservation):
        // the slice's `capacity` says nothing of it, so nothing is charged
        // from it (a FLEX_START or reservation-bound template charged to the
        // on-demand quota was refused although Compute Engine creates it).
        if let Some(t) = slice
            .spec
            .gce
            .as_ref()
            .and_then(|g| g.instance_template.as_deref())
        {
            unchecked.push(Unchecked {
                address: a.address(),
                why: format!(
                    "its VMs are provisioned as its brought instance template {t} says (on demand, Spot, \
                     FLEX_START or bound to a reservation), which the preflight does not read: the create is \
                     not refused for quota"
                ),
            });
            continue;
        }
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
                // Flex-start VMs consume the preemptible quota, or the
                // standard one when the preemptible quota lacks room
                // (Compute Engine, "Provisioning models",
                // cloud.google.com/compute/docs/instances/provisioning-models);
                // a flex-start pool gets its VMs only when the Dynamic
                // Workload Scheduler grants them. Neither refuses the create.
                let metric = quota_metric(&slice.spec.accelerator, true)
                    .or_else(|| quota_metric(&slice.spec.accelerator, false))
                    .unwrap_or("its generation's quota");
                unchecked.push(Unchecked {
                    address: a.address(),
                    why: format!(
                        "flex-start: its VMs consume {metric} (the preemptible quota, else the on-demand one) \
                         only when the Dynamic Workload Scheduler grants them; the create is not refused for quota"
                    ),
                });
                continue;
            }
            CapacityType::OnDemand | CapacityType::Spot => {
                let spot = capacity.kind == CapacityType::Spot;
                let quota = match quota_of(&slice.spec.accelerator, spot) {
                    Ok(q) => q,
                    Err(why) => {
                        unchecked.push(Unchecked {
                            address: a.address(),
                            why,
                        });
                        continue;
                    }
                };
                Charge::Quota(
                    QuotaKey {
                        project: project.clone(),
                        region: region_of(zone).to_string(),
                        metric: quota.metric.to_string(),
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
/// A pool in `ERROR` holds no VMs (and [`observed_usage`] does not count
/// it): its replacement frees nothing.
fn old_charge(a: &Action, project: &str) -> Option<(Charge, u64)> {
    if matches!(&a.reason, Reason::ErrorState { status, .. } if status == "ERROR") {
        return None;
    }
    pool_charge(a.before.as_ref()?, project)
}

/// What a GKE node pool (Google's JSON) is charged, and how much.
fn pool_charge(before: &Value, project: &str) -> Option<(Charge, u64)> {
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
                let Some(def) = quota_by_metric(&k.metric) else {
                    continue;
                };
                match def.source {
                    QuotaSource::Region => {
                        let r = (k.project, k.region);
                        if !out.regions.contains(&r) {
                            out.regions.push(r);
                        }
                    }
                    QuotaSource::CloudQuotas { quota_id, family } => {
                        let use_ = (k.region, def.metric, family);
                        match out
                            .cloud_quotas
                            .iter_mut()
                            .find(|c| c.project == k.project && c.quota_id == quota_id)
                        {
                            Some(c) if !c.uses.contains(&use_) => c.uses.push(use_),
                            Some(_) => {}
                            None => out.cloud_quotas.push(CloudQuotaRead {
                                project: k.project,
                                quota_id,
                                uses: vec![use_],
                            }),
                        }
                    }
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
    out.cloud_quotas
        .sort_by(|a, b| (&a.project, a.quota_id).cmp(&(&b.project, b.quota_id)));
    for c in &mut out.cloud_quotas {
        c.uses.sort();
    }
    out.reservations.sort();
    out
}

/// Chips in use per quota metric in `project`'s `region`, as far as
/// slicectl observes them: the TPU node pools of the fleet's clusters and
/// the VMs the TPU MIGs of its zones have created, managed or not (a pool
/// in `ERROR` holds none; Cloud Quotas gives limits, not usage). Capacity
/// elsewhere in the region (other clusters, VMs outside a MIG) is not seen,
/// so this can be low; GKE and Compute Engine still refuse a create past
/// the quota.
pub fn observed_usage(inv: &Inventory, project: &str, region: &str) -> BTreeMap<String, u64> {
    use crate::resource::compute::{InstanceGroupManager, InstanceTemplate};
    let mut out: BTreeMap<String, u64> = BTreeMap::new();
    for l in inv.live(crate::kinds::node_pool::KIND) {
        let Scope::Cluster(c) = &l.scope else {
            continue;
        };
        if c.project != project {
            continue;
        }
        let pool = l.body.to_json();
        // A pool in ERROR holds no VMs (a stockout, a failed create).
        if pool.get("status").and_then(Value::as_str) == Some("ERROR") {
            continue;
        }
        if let Some((Charge::Quota(k, chips), _)) = pool_charge(&pool, project)
            && k.region == region
        {
            *out.entry(k.metric).or_default() += chips;
        }
    }
    let templates: BTreeMap<&str, &InstanceTemplate> = inv
        .live(crate::kinds::gce::template::KIND)
        .iter()
        .filter(|l| matches!(&l.scope, Scope::Global(p) if p.project == project))
        .filter_map(|l| body_as::<InstanceTemplate>(&l.body))
        .map(|t| (t.name.as_str(), t))
        .collect();
    for l in inv.live(crate::kinds::gce::mig::KIND) {
        let Scope::Zone(z) = &l.scope else {
            continue;
        };
        if z.project != project || region_of(&z.zone) != region {
            continue;
        }
        let Some(m) = body_as::<InstanceGroupManager>(&l.body) else {
            continue;
        };
        let template = m
            .instance_template
            .as_deref()
            .and_then(|t| t.rsplit('/').next())
            .and_then(|t| templates.get(t));
        let Some((metric, per_vm)) = template.and_then(|t| vm_charge(&t.properties)) else {
            continue;
        };
        let creating = m.current_actions.as_ref().map_or(0, |a| a.creating);
        let vms = u64::try_from(m.target_size.saturating_sub(creating)).unwrap_or(0);
        *out.entry(metric.to_string()).or_default() += vms * per_vm;
    }
    out
}

/// What one VM of a template is charged: its quota metric and chips;
/// `None` on a specific reservation or flex-start (or no TPU).
fn vm_charge(p: &crate::resource::compute::InstanceProperties) -> Option<(&'static str, u64)> {
    let generation = catalog::generation_of_machine_type(&p.machine_type)?;
    let per_vm = generation
        .machine_types
        .iter()
        .find(|m| m.name == p.machine_type)
        .map(|m| u64::from(m.chips_per_host))?;
    let model = p
        .scheduling
        .as_ref()
        .and_then(|s| s.provisioning_model.as_deref())
        .unwrap_or("STANDARD");
    let specific = p
        .reservation_affinity
        .as_ref()
        .is_some_and(|r| r.consume_reservation_type == "SPECIFIC_RESERVATION");
    if specific || matches!(model, "FLEX_START" | "RESERVATION_BOUND") {
        return None;
    }
    let preemptible = model == "SPOT"
        || p.scheduling
            .as_ref()
            .and_then(|s| s.preemptible)
            .unwrap_or(false);
    Some((quota_metric(generation.accelerator, preemptible)?, per_vm))
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
                let source = quota_by_metric(&k.metric).map_or(QuotaSource::Region, |d| d.source);
                let region = facts.quotas.get(&(k.project.clone(), k.region.clone()));
                let unread = match source {
                    QuotaSource::Region => {
                        region.is_none()
                            || facts
                                .unread_regions
                                .contains(&(k.project.clone(), k.region.clone()))
                    }
                    QuotaSource::CloudQuotas { .. } => facts
                        .unread
                        .contains(&(k.project.clone(), k.metric.clone())),
                };
                if unread {
                    continue; // not read: its warning says why
                }
                let Some(&(limit, usage)) = region.and_then(|q| q.get(&k.metric)) else {
                    let why = match source {
                        QuotaSource::Region => format!(
                            "regions.get reports no quota {} in {} (project {}); not checked",
                            k.metric, k.region, k.project
                        ),
                        QuotaSource::CloudQuotas { quota_id, .. } => format!(
                            "Cloud Quotas has no limit of {quota_id} ({}) for {} (project {}); not checked",
                            k.metric, k.region, k.project
                        ),
                    };
                    pf.unchecked.push(Unchecked { address, why });
                    continue;
                };
                if limit < 0.0 {
                    continue; // unlimited (Cloud Quotas' -1): nothing to check
                }
                let (limit, usage) = (whole(limit), whole(usage));
                let line = quota_lines.entry(k.clone()).or_insert_with(|| QuotaLine {
                    key: k.clone(),
                    read_with: match source {
                        QuotaSource::Region => READ_WITH_REGION,
                        QuotaSource::CloudQuotas { .. } => READ_WITH_CLOUD_QUOTAS,
                    },
                    usage_from: match source {
                        QuotaSource::Region => None,
                        QuotaSource::CloudQuotas { .. } => Some(
                            if facts.monitored.contains(&(
                                k.project.clone(),
                                k.region.clone(),
                                k.metric.clone(),
                            )) {
                                USAGE_FROM_MONITORING
                            } else {
                                USAGE_FROM_OBSERVED
                            },
                        ),
                    },
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
                    // Cloud Quotas gives the limit only: say whose usage it is
                    // and name the quota id the console and gcloud know.
                    let (seen, note, which) = match (source, line.usage_from) {
                        (
                            QuotaSource::CloudQuotas { quota_id, .. },
                            Some(USAGE_FROM_MONITORING),
                        ) => (" from Cloud Monitoring", "", format!("quota {quota_id}")),
                        (QuotaSource::CloudQuotas { quota_id, .. }, _) => (
                            " observed",
                            "; Cloud Quotas gives the limit only, so the usage is the TPU pools and VMs \
                             slicectl sees in the region",
                            format!("quota {quota_id}"),
                        ),
                        (QuotaSource::Region, _) => ("", "", format!("metric {}", k.metric)),
                    };
                    refusals.push(refusal(
                        a,
                        "quota_insufficient",
                        format!(
                            "{address} needs {net} {} chips in {} (project {}){freed}; the quota has {left_now} left \
                             (limit {limit}, usage {usage}{seen}, {taken} taken by this plan's earlier creates){note}. \
                             Nothing is sent for this slice replica this run. Raise the quota \
                             (IAM & Admin > Quotas, {which}, region {}), free chips, or choose another capacity; \
                             it is planned again on the next run",
                            k.metric, k.region, k.project, k.region
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
    jobsets_whole(plan, &mut refusals);
    let gone: Vec<String> = refusals.iter().map(|r| r.address.clone()).collect();
    plan.actions.retain(|a| !gone.contains(&a.address()));
    plan.refused.extend(refusals);
    super::build::hold_back(&mut plan.actions, &mut plan.refused);
    plan.summary = plan.count();
}

/// A JobSet's slices are made all together or not at all: when the quota
/// or a reservation refuses one of a JobSet's workload slices, its other
/// slices' creates are refused with it (a JobSet that cannot have all its
/// slices cannot run on some of them). Each refusal also becomes the
/// JobSet's: a `SliceRefused` Event, and `status` says why.
fn jobsets_whole(plan: &mut Plan, refusals: &mut Vec<Refusal>) {
    let origin_of = |slice: &str| {
        plan.demand
            .slices
            .iter()
            .find(|s| s.name == slice)
            .and_then(|s| Some((s.spec.target.clone(), s.workload.clone()?)))
    };
    let mut whole: Vec<Refusal> = Vec::new();
    let mut theirs: Vec<crate::workload::Refused> = Vec::new();
    for r in refusals.iter() {
        let Some((target, origin)) = origin_of(&r.slice) else {
            continue;
        };
        theirs.push(crate::workload::Refused {
            target: target.clone(),
            namespace: origin.namespace.clone(),
            jobset: origin.jobset.clone(),
            uid: origin.uid.clone(),
            job_key: origin.job_key.clone(),
            code: if r.code == "quota_insufficient" {
                "quota_insufficient"
            } else {
                "reservation_insufficient"
            },
            message: r.message.clone(),
        });
        for a in &plan.actions {
            let sibling = a.owner.slice != r.slice
                && origin_of(&a.owner.slice)
                    .is_some_and(|(t, o)| t == target && o.uid == origin.uid);
            if sibling
                && !refusals
                    .iter()
                    .chain(&whole)
                    .any(|x| x.address == a.address())
            {
                whole.push(refusal(
                    a,
                    &r.code,
                    format!(
                        "not created: {} of the same JobSet ({}) was refused ({}); a JobSet's slices are made all \
                         together or not at all",
                        r.address,
                        origin.jobset_ref(),
                        r.code
                    ),
                ));
            }
        }
    }
    refusals.extend(whole);
    plan.demand.refused.extend(theirs);
}
