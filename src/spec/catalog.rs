//! The TPU catalogue: accelerator ↔ machine types ↔ chips per host ↔ valid
//! topologies ↔ hosts per slice ↔ placement rule. Pure data and lookups.
//!
//! Every generation names the Google documents its topologies and machine
//! types come from ([`Generation::sources`]). Where sources disagree the GKE
//! documentation wins, since slicectl creates GKE node pools; the disagreement
//! is noted next to the list. Secondary sources, read to cross-check:
//! - `AI-Hypercomputer/xpk` `src/xpk/core/system_characteristics.py`
//!   (commit 367c838): every accelerator, machine type and topology xpk accepts;
//! - `ai-on-gke/tpu-provisioner` (commit 6789e2a): machine type and node count
//!   per topology, and `docs/ironwood-policy-bootstrap.sh` (tpu7x topologies);
//! - `ray-project/ray` `python/ray/_private/accelerators/tpu.py`
//!   (`VALID_TPU_TOPOLOGY`);
//! - `google/pathways-job` `internal/controller/pathwaysjob_controller.go`
//!   (`ValidTpuTopologiesMap`, per machine type).
//!
//! (Earlier notes: `shared/reference/tpu-anchors.md` §A.6, §B.9, §D.2.)
//!
//! Chips per host come from the machine type suffix (`-1t`, `-4t`, `-8t`),
//! never a constant 4. The single-host/multi-host rule (`fits`): a `-1t`
//! type makes only a one-chip slice, a `-8t` type only an 8-chip single-host
//! slice, and a `-4t` type any slice of four chips or more (one host for four
//! chips, several otherwise), as GKE's tables have it.

use std::fmt;

use super::model::Backend;

/// A Google document the catalogue's facts for a generation come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Source {
    /// The document's title.
    pub title: &'static str,
    /// Where it is published.
    pub url: &'static str,
}

const fn doc(title: &'static str, url: &'static str) -> Source {
    Source { title, url }
}

/// GKE's planning guide: per TPU version, the machine types, the topologies,
/// chips and VMs per slice, and whether a node pool is single- or multi-host.
const PLAN_TPUS_IN_GKE: Source = doc(
    "Plan TPUs in GKE",
    "https://cloud.google.com/kubernetes-engine/docs/concepts/plan-tpus",
);

/// Where the zones of each generation ([`Generation::zones`]) come from.
///
/// The primary source is Cloud TPU's "TPU regions and zones" page
/// (<https://cloud.google.com/tpu/docs/regions-zones>, also served as
/// <https://docs.cloud.google.com/tpu/docs/regions-zones.md.txt>), whose North
/// America tables read: TPU7x `us-central1-c` (and the AI zone
/// `us-central1-ai1a`); v6e `us-central1-b`, `us-east1-d`, `us-east5-a`,
/// `us-east5-b`; v5p `us-central1-a`, `us-east5-a`; v5e `us-central1-a`,
/// `us-south1-a`, `us-west1-c`, `us-west4-a`; v4 `us-central2-b`; Europe: v6e
/// `europe-west4-a`. Its Europe rows for v5p and v5e, and its Asia Pacific and
/// South America rows for v6e, were not legible in the copy read; for those,
/// GKE's "Plan TPUs in GKE" (<https://cloud.google.com/kubernetes-engine/docs/concepts/plan-tpus>,
/// "Validate TPU availability") as transcribed by a public GKE availability
/// script: v5p and v5e `europe-west4-b`, v6e `asia-northeast1-b` and
/// `southamerica-west1-a`. That transcription also lists v6e in
/// `us-south1-a`/`us-south1-b`, which the primary page's North America table
/// does not: left out (the stricter reading). AI zones (`us-central1-ai1a`,
/// `us-south1-ai1b`) and single-tenant-only zones are left out too. A Target
/// whose zone Google offers now but this table lacks sets
/// `allowUnlistedZone: true`.
pub const ZONE_SOURCES: &[Source] = &[
    doc(
        "TPU regions and zones",
        "https://cloud.google.com/tpu/docs/regions-zones",
    ),
    PLAN_TPUS_IN_GKE,
];

/// One TPU generation as GKE names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Generation {
    /// GKE accelerator label value (`cloud.google.com/gke-tpu-accelerator`).
    pub accelerator: &'static str,
    /// Short human name.
    pub display: &'static str,
    /// Number of topology dimensions (2 or 3).
    pub dims: usize,
    /// Machine types, each with its chips per host.
    pub machine_types: &'static [MachineType],
    /// Valid topologies.
    pub topologies: &'static [&'static str],
    /// Multi-host slices need a compute workload policy instead of COMPACT placement.
    pub multi_host_workload_policy: bool,
    /// The Google documents the machine types and topologies come from; the
    /// GKE documentation first.
    pub sources: &'static [Source],
    /// The zones Google offers the generation in ([`ZONE_SOURCES`]), sorted.
    pub zones: &'static [&'static str],
    /// Whether Compute Engine creates TPU VMs of this generation in managed
    /// instance groups (backend `gce`), and with which boot disks; `None`:
    /// GKE only ([`GCE_SOURCES`]).
    pub gce: Option<GceSupport>,
}

/// What backend `gce` (TPU VMs in a Compute Engine MIG) supports for a generation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GceSupport {
    /// Disk types a TPU VM of this generation boots from, the default first.
    pub boot_disk_types: &'static [&'static str],
}

/// Where [`Generation::gce`] comes from.
///
/// Compute Engine's "TPU instances in MIGs" reads "You can use MIGs to create
/// and manage TPU VMs for TPU versions v5p, v6e, and TPU7x" (an earlier copy:
/// "v5p and later"), and "TPU machines in accelerator-optimized machine
/// family" lists exactly TPU7x, TPU v6e and TPU v5p as the versions Compute
/// Engine supports. v5e and v4 are created through the Cloud TPU API or GKE
/// only, so backend `gce` refuses them. tpu-operator, the CRD this backend
/// replaces, accepts only `tpu7x-*`, `tpu7-*` and `ct6e-*` machine types
/// (its CEL rule and template validator); slicectl also takes v5p, which
/// Google documents for MIGs. Boot disks: Cloud TPU's "Attach durable block
/// storage to a TPU VM" table gives v6e Hyperdisk Balanced (and Hyperdisk ML,
/// which cannot boot) and v5p Balanced Persistent Disk; TPU7x, not in that
/// table, is taken to boot from Hyperdisk Balanced like v6e (Google's TPU7x
/// MIG examples use its default boot disk).
pub const GCE_SOURCES: &[Source] = &[
    doc(
        "TPU instances in MIGs",
        "https://cloud.google.com/tpu/docs/tpus-and-migs",
    ),
    doc(
        "TPU machines in accelerator-optimized machine family",
        "https://cloud.google.com/compute/docs/tpus/tpu-machines",
    ),
    doc(
        "Attach durable block storage to a TPU VM",
        "https://cloud.google.com/tpu/docs/setup-persistent-disk",
    ),
];

/// Boot disks of TPU VMs that boot from Hyperdisk Balanced (v6e, TPU7x).
const HYPERDISK_BOOT: GceSupport = GceSupport {
    boot_disk_types: &["hyperdisk-balanced"],
};

/// Boot disks of TPU VMs that boot from Balanced Persistent Disk (v5p).
const PD_BALANCED_BOOT: GceSupport = GceSupport {
    boot_disk_types: &["pd-balanced"],
};

/// A TPU machine type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MachineType {
    /// GCE machine type name.
    pub name: &'static str,
    /// TPU chips attached to one VM of this type.
    pub chips_per_host: u32,
}

const fn mt(name: &'static str, chips_per_host: u32) -> MachineType {
    MachineType {
        name,
        chips_per_host,
    }
}

/// Every generation slicectl knows.
pub const GENERATIONS: &[Generation] = &[
    // TPU v4. Machine type ct4p-hightpu-4t (4 chips per VM); 2x2x1 is the only
    // single-host slice. Below one 4x4x4 cube: 2x2x1, 2x2x2, 2x2x4 and 2x4x4
    // (every source lists these four); from 4x4x4 up, AxBxC with A ≤ B ≤ C,
    // each a multiple of 4 ("TPU types and topologies"), up to the largest v4
    // topology GKE documents, 12x16x16. The list is every such shape that
    // fits inside 12x16x16 (a test checks it).
    // Disagreements: Cloud TPU's v4 pod has 4096 chips and its torus examples
    // include 12x12x24, and xpk accepts up to 64 cubes (16x16x16), but GKE
    // stops at 12x16x16, so 16x16x16 is not offered; Ray caps v4 at
    // 12x12x16, leaving out 8x16x16 and 12x16x16, which GKE and xpk list.
    Generation {
        accelerator: "tpu-v4-podslice",
        display: "TPU v4",
        dims: 3,
        machine_types: &[mt("ct4p-hightpu-4t", 4)],
        topologies: &[
            "2x2x1", "2x2x2", "2x2x4", "2x4x4", "4x4x4", "4x4x8", "4x4x12", "4x4x16", "4x8x8",
            "4x8x12", "4x8x16", "8x8x8", "4x12x12", "4x12x16", "8x8x12", "4x16x16", "8x8x16",
            "8x12x12", "8x12x16", "12x12x12", "8x16x16", "12x12x16", "12x16x16",
        ],
        multi_host_workload_policy: false,
        sources: &[
            PLAN_TPUS_IN_GKE,
            doc("TPU v4", "https://cloud.google.com/tpu/docs/v4"),
            doc(
                "TPU types and topologies",
                "https://cloud.google.com/tpu/docs/types-topologies",
            ),
        ],
        zones: &["us-central2-b"],
        gce: None,
    },
    // TPU v5e. 2D slices 1x1 … 16x16 (256-chip pod). VM types: ct5lp-hightpu-1t
    // (1x1), ct5lp-hightpu-4t (2x2 on one VM; 2x4 and larger multi-host) and
    // ct5lp-hightpu-8t (2x4 on one VM); the Cloud TPU v5e page pairs
    // v5litepod-1/-4/-8 with the 1t/4t/8t types for single-host serving.
    // Cloud TPU's "hosts" column counts 8-chip hosts (4x4 = 2 hosts); GKE
    // counts ct5lp-hightpu-4t VMs (4x4 = 4 VMs), which is what slicectl
    // creates. pathways-job lists no 2x4 for the 4t type; xpk does (2 VMs).
    Generation {
        accelerator: "tpu-v5-lite-podslice",
        display: "TPU v5e",
        dims: 2,
        machine_types: &[
            mt("ct5lp-hightpu-1t", 1),
            mt("ct5lp-hightpu-4t", 4),
            mt("ct5lp-hightpu-8t", 8),
        ],
        topologies: &["1x1", "2x2", "2x4", "4x4", "4x8", "8x8", "8x16", "16x16"],
        multi_host_workload_policy: false,
        sources: &[
            PLAN_TPUS_IN_GKE,
            doc("TPU v5e", "https://cloud.google.com/tpu/docs/v5e"),
        ],
        zones: &[
            "europe-west4-b",
            "us-central1-a",
            "us-south1-a",
            "us-west1-c",
            "us-west4-a",
        ],
        gce: None,
    },
    // TPU v5p. Machine type ct5p-hightpu-4t for every topology; 2x2x1 is the
    // only single-host slice. Same rule as v4 (2x2x1, 2x2x2, 2x2x4, 2x4x4,
    // then A ≤ B ≤ C multiples of 4) up to the largest shape, 16x16x24 (6144
    // chips, 96 cubes), the maximum the Cloud TPU v5p page names; its table
    // lists "the most common (but not all)" shapes. The list is every
    // such shape that fits inside 16x16x24 (a test checks it); Ray's list is
    // the same envelope. Disagreement: xpk accepts any shape up to 140 cubes
    // (e.g. 4x4x28, 16x20x28, the whole 8960-chip pod), beyond the documented
    // largest; those are not offered.
    Generation {
        accelerator: "tpu-v5p-slice",
        display: "TPU v5p",
        dims: 3,
        machine_types: &[mt("ct5p-hightpu-4t", 4)],
        topologies: &[
            "2x2x1", "2x2x2", "2x2x4", "2x4x4", "4x4x4", "4x4x8", "4x4x12", "4x4x16", "4x8x8",
            "4x4x20", "4x4x24", "4x8x12", "4x8x16", "8x8x8", "4x12x12", "4x8x20", "4x8x24",
            "4x12x16", "8x8x12", "4x12x20", "4x16x16", "8x8x16", "4x12x24", "8x12x12", "4x16x20",
            "8x8x20", "4x16x24", "8x8x24", "8x12x16", "12x12x12", "8x12x20", "8x16x16", "8x12x24",
            "12x12x16", "8x16x20", "12x12x20", "8x16x24", "12x16x16", "12x12x24", "12x16x20",
            "16x16x16", "12x16x24", "16x16x20", "16x16x24",
        ],
        multi_host_workload_policy: false,
        sources: &[
            PLAN_TPUS_IN_GKE,
            doc("TPU v5p", "https://cloud.google.com/tpu/docs/v5p"),
        ],
        zones: &["europe-west4-b", "us-central1-a", "us-east5-a"],
        gce: Some(PD_BALANCED_BOOT),
    },
    // TPU v6e (Trillium). 2D slices 1x1 … 16x16 (256-chip pod, up to 8 chips
    // per host). ct6e-standard-1t: 1x1; ct6e-standard-8t: 2x4 on one VM;
    // ct6e-standard-4t: 2x2 on one VM, 2x4 on two VMs, larger multi-host.
    // (Ray's TPU utilities, citing the v6e configurations table, also note that
    // 2x4 is either one 8-chip VM or two 4-chip VMs.) xpk offers no 8t type.
    Generation {
        accelerator: "tpu-v6e-slice",
        display: "TPU v6e (Trillium)",
        dims: 2,
        machine_types: &[
            mt("ct6e-standard-1t", 1),
            mt("ct6e-standard-4t", 4),
            mt("ct6e-standard-8t", 8),
        ],
        topologies: &["1x1", "2x2", "2x4", "4x4", "4x8", "8x8", "8x16", "16x16"],
        multi_host_workload_policy: false,
        sources: &[
            PLAN_TPUS_IN_GKE,
            doc("TPU v6e", "https://cloud.google.com/tpu/docs/v6e"),
        ],
        zones: &[
            "asia-northeast1-b",
            "europe-west4-a",
            "southamerica-west1-a",
            "us-central1-b",
            "us-east1-d",
            "us-east5-a",
            "us-east5-b",
        ],
        gce: Some(HYPERDISK_BOOT),
    },
    // TPU7x (Ironwood). GKE: multi-host node pools take a workload policy
    // (`--placement-policy`) in place of `--tpu-topology`, and an Ironwood VM
    // has 4 chips (tpu7x-standard-4t); 2x2x1 is single-host. The 1-chip
    // tpu7x-standard-1t (1x1x1) comes from xpk (GKE node pools of it are in
    // use); the part of the GKE Ironwood page read describes only 4-chip VMs. The topologies are a subset of
    // the 98 that xpk and tpu-provisioner's workload-policy script list (up to
    // 144 cubes); Ray's list stops at 8x16x16.
    Generation {
        accelerator: "tpu7x",
        display: "TPU7x (Ironwood)",
        dims: 3,
        machine_types: &[mt("tpu7x-standard-1t", 1), mt("tpu7x-standard-4t", 4)],
        topologies: &[
            "1x1x1", "2x2x1", "2x2x2", "2x2x4", "2x4x4", "4x4x4", "4x4x8", "4x8x8", "8x8x8",
            "8x8x16", "8x16x16", "16x16x16",
        ],
        multi_host_workload_policy: true,
        sources: &[
            PLAN_TPUS_IN_GKE,
            doc(
                "About Ironwood (TPU7x) in GKE",
                "https://cloud.google.com/kubernetes-engine/docs/concepts/tpu-ironwood",
            ),
            doc(
                "TPU7x (Ironwood)",
                "https://cloud.google.com/tpu/docs/tpu7x",
            ),
        ],
        zones: &["us-central1-c"],
        gce: Some(HYPERDISK_BOOT),
    },
];

/// How the hosts of a slice are placed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Placement {
    /// Single-host slice: no placement policy at all.
    None,
    /// GKE COMPACT placement with `tpuTopology`.
    Compact {
        /// The TPU topology.
        topology: String,
    },
    /// A compute workload policy (`HIGH_THROUGHPUT`, `acceleratorTopology`)
    /// referenced by name from the node pool (tpu7x multi-host).
    WorkloadPolicy {
        /// The accelerator topology.
        topology: String,
    },
}

/// The resolved shape of a slice: everything rendering needs from the catalogue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SliceShape {
    /// The generation.
    pub generation: &'static Generation,
    /// Machine type name.
    pub machine_type: &'static str,
    /// Chips per host (from the machine type).
    pub chips_per_host: u32,
    /// Total chips in the slice (product of the topology).
    pub chips: u32,
    /// Number of hosts (VMs / nodes) in one slice.
    pub hosts: u32,
    /// Placement rule.
    pub placement: Placement,
    /// The normalised topology string.
    pub topology: String,
}

/// Why an accelerator/topology/machine-type combination is invalid. The
/// message lists what would be valid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CatalogError {
    /// Unknown accelerator.
    UnknownAccelerator {
        /// What was given.
        given: String,
    },
    /// Topology not valid for this accelerator.
    InvalidTopology {
        /// Accelerator.
        accelerator: &'static str,
        /// What was given.
        given: String,
        /// Valid topologies.
        valid: Vec<&'static str>,
    },
    /// Machine type unknown for this accelerator.
    UnknownMachineType {
        /// Accelerator.
        accelerator: &'static str,
        /// What was given.
        given: String,
        /// Valid machine types.
        valid: Vec<&'static str>,
    },
    /// The generation cannot run on this backend (backend `gce`: Compute
    /// Engine does not create its TPU VMs in MIGs).
    NotOnBackend {
        /// Accelerator.
        accelerator: &'static str,
        /// Its human name.
        display: &'static str,
        /// The backend.
        backend: Backend,
        /// Accelerators the backend takes.
        valid: Vec<&'static str>,
    },
    /// Machine type cannot build this topology (chips do not divide, or a
    /// single-host-only machine type for a multi-host topology).
    MachineTypeDoesNotFit {
        /// Machine type.
        machine_type: &'static str,
        /// Topology.
        topology: String,
        /// Machine types that fit.
        valid: Vec<&'static str>,
    },
}

impl fmt::Display for CatalogError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CatalogError::UnknownAccelerator { given } => write!(
                f,
                "unknown accelerator {given:?}; expected one of: {}",
                GENERATIONS
                    .iter()
                    .map(|g| g.accelerator)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            CatalogError::InvalidTopology {
                accelerator,
                given,
                valid,
            } => write!(
                f,
                "topology {given:?} is not valid for {accelerator}; valid topologies: {}",
                valid.join(", ")
            ),
            CatalogError::UnknownMachineType {
                accelerator,
                given,
                valid,
            } => write!(
                f,
                "machine type {given:?} is not a {accelerator} machine type; expected one of: {}",
                valid.join(", ")
            ),
            CatalogError::NotOnBackend {
                accelerator,
                display,
                backend,
                valid,
            } => write!(
                f,
                "accelerator {accelerator} ({display}) cannot run on backend {}: Compute Engine creates \
                 TPU VMs in managed instance groups only for {} ({}); use backend gke for {accelerator}",
                backend.as_str(),
                valid.join(", "),
                GCE_SOURCES[0].url,
            ),
            CatalogError::MachineTypeDoesNotFit {
                machine_type,
                topology,
                valid,
            } => write!(
                f,
                "machine type {machine_type} cannot form topology {topology}; machine types that fit: {}",
                valid.join(", ")
            ),
        }
    }
}

impl std::error::Error for CatalogError {}

/// Looks up a generation by its GKE accelerator name.
pub fn generation(accelerator: &str) -> Option<&'static Generation> {
    GENERATIONS.iter().find(|g| g.accelerator == accelerator)
}

/// Looks up the generation a machine type belongs to.
pub fn generation_of_machine_type(machine_type: &str) -> Option<&'static Generation> {
    GENERATIONS
        .iter()
        .find(|g| g.machine_types.iter().any(|m| m.name == machine_type))
}

impl Generation {
    /// Whether Google offers this generation in `zone` ([`Generation::zones`]).
    pub fn offered_in(&self, zone: &str) -> bool {
        self.zones.contains(&zone)
    }
}

/// Chips of a topology (`2x2x4` → 16).
pub fn chips(topology: &str) -> u32 {
    topology
        .split('x')
        .map(|d| d.parse::<u32>().unwrap_or(0))
        .product()
}

/// Whether `m` can form `topology`: chips divide evenly, and a machine type
/// with more than 4 chips per host (8t) is single-host only.
fn fits(m: &MachineType, topology: &str) -> bool {
    let c = chips(topology);
    if c == 0 || !c.is_multiple_of(m.chips_per_host) {
        return false;
    }
    let hosts = c / m.chips_per_host;
    // 1t machine types only make 1-chip slices; 8t machine types are single host.
    match m.chips_per_host {
        1 => c == 1,
        4 => c >= 4,
        _ => hosts == 1,
    }
}

/// The placement of a slice of `hosts` hosts of `generation` on `backend`.
///
/// A single-host slice has none on either backend. Multi-host: on GKE,
/// COMPACT placement with `tpuTopology`, or a workload policy where the
/// generation needs one (tpu7x); on GCE, always a workload policy
/// (`HIGH_THROUGHPUT`, `acceleratorTopology`) attached to the BULK MIG,
/// including v6e and v5p: that is what makes the MIG's VMs one ICI-connected
/// slice (Compute Engine's "Create a MIG with multi-host TPU slice";
/// tpu-operator does the same for every BULK multi-host group).
pub fn placement(
    generation: &Generation,
    topology: &str,
    hosts: u32,
    backend: Backend,
) -> Placement {
    let topology = topology.to_string();
    if hosts <= 1 {
        Placement::None
    } else if backend == Backend::Gce || generation.multi_host_workload_policy {
        Placement::WorkloadPolicy { topology }
    } else {
        Placement::Compact { topology }
    }
}

/// Generations backend `gce` takes ([`Generation::gce`]), in catalogue order.
pub fn gce_accelerators() -> Vec<&'static str> {
    GENERATIONS
        .iter()
        .filter(|g| g.gce.is_some())
        .map(|g| g.accelerator)
        .collect()
}

/// [`resolve`] for a backend: on `gce`, refuses a generation Compute Engine
/// does not create in MIGs ([`CatalogError::NotOnBackend`], listing those
/// it does) and places every multi-host slice with a workload policy
/// ([`placement`]).
pub fn resolve_for(
    backend: Backend,
    accelerator: &str,
    topology: &str,
    machine_type: Option<&str>,
) -> Result<SliceShape, CatalogError> {
    let mut shape = resolve(accelerator, topology, machine_type)?;
    if backend == Backend::Gce {
        let g = shape.generation;
        if g.gce.is_none() {
            return Err(CatalogError::NotOnBackend {
                accelerator: g.accelerator,
                display: g.display,
                backend,
                valid: gce_accelerators(),
            });
        }
        shape.placement = placement(g, &shape.topology, shape.hosts, backend);
    }
    Ok(shape)
}

/// Resolves accelerator × topology × optional machine type to a [`SliceShape`]
/// (backend `gke`; see [`resolve_for`]).
pub fn resolve(
    accelerator: &str,
    topology: &str,
    machine_type: Option<&str>,
) -> Result<SliceShape, CatalogError> {
    let generation = generation(accelerator).ok_or_else(|| CatalogError::UnknownAccelerator {
        given: accelerator.to_string(),
    })?;
    let topology_str = topology.trim();
    let topo = generation
        .topologies
        .iter()
        .find(|t| **t == topology_str)
        .ok_or_else(|| CatalogError::InvalidTopology {
            accelerator: generation.accelerator,
            given: topology.to_string(),
            valid: generation.topologies.to_vec(),
        })?;
    let fitting: Vec<&'static MachineType> = generation
        .machine_types
        .iter()
        .filter(|m| fits(m, topo))
        .collect();
    let machine = match machine_type {
        Some(name) => {
            let m = generation
                .machine_types
                .iter()
                .find(|m| m.name == name)
                .ok_or_else(|| CatalogError::UnknownMachineType {
                    accelerator: generation.accelerator,
                    given: name.to_string(),
                    valid: generation.machine_types.iter().map(|m| m.name).collect(),
                })?;
            if !fits(m, topo) {
                return Err(CatalogError::MachineTypeDoesNotFit {
                    machine_type: m.name,
                    topology: topo.to_string(),
                    valid: fitting.iter().map(|m| m.name).collect(),
                });
            }
            m
        }
        // Default: the machine type that gives the fewest hosts (a single host
        // when one fits), as GKE's documentation does.
        None => fitting
            .iter()
            .copied()
            .max_by_key(|m| m.chips_per_host)
            .ok_or_else(|| CatalogError::InvalidTopology {
                accelerator: generation.accelerator,
                given: topology.to_string(),
                valid: generation.topologies.to_vec(),
            })?,
    };
    let total = chips(topo);
    let hosts = total / machine.chips_per_host;
    let placement = placement(generation, topo, hosts, Backend::Gke);
    Ok(SliceShape {
        generation,
        machine_type: machine.name,
        chips_per_host: machine.chips_per_host,
        chips: total,
        hosts,
        placement,
        topology: topo.to_string(),
    })
}

#[cfg(test)]
#[path = "catalog/tests.rs"]
mod tests;
