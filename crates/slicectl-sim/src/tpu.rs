//! The simulator's own TPU tables: which machine types exist, which TPU
//! generation each belongs to, how many chips one VM of it has, which slice
//! topologies Google accepts for the generation, and the zones that offer it.
//!
//! These are written from Google's public pages (each table names its
//! source), independently of slicectl's catalogue (`slicectl::spec::catalog`).
//! The simulator stands in for Google: if it read the client's catalogue, a
//! mistake there would be agreed with, not caught. slicectl's test
//! `sim_tables` checks that the two agree on every machine type both know.
//!
//! The simulator applies these tables only where Google enforces them: the
//! zones that offer a machine type (`tpu_rules`, `gce`), the chips a VM of a
//! machine type has (node pool sizing, MIG workload policies) and the
//! topologies a workload policy may name for a machine type's generation.

/// A TPU generation as Google's pages describe it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Generation {
    /// GKE's accelerator name (the `cloud.google.com/gke-tpu-accelerator`
    /// node label).
    pub accelerator: &'static str,
    /// Machine types and the TPU chips attached to one VM of each.
    pub machine_types: &'static [(&'static str, u32)],
    /// Zones that offer the generation ([`ZONES_SOURCE`]), sorted.
    pub zones: &'static [&'static str],
    /// Which slice topologies Google accepts.
    pub topologies: Topologies,
}

/// The slice shapes of a generation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Topologies {
    /// Exactly these (2D generations: Google's pages list every shape).
    Listed(&'static [&'static str]),
    /// 3D generations: the listed shapes smaller than one 4x4x4 cube, and
    /// any `AxBxC` with `A ≤ B ≤ C`, each a multiple of 4 (whole cubes),
    /// that fits in the largest shape (sorted dimensions) and has at most
    /// `max_chips` chips.
    Cubes {
        /// Shapes below one cube, as Google's tables write them.
        small: &'static [&'static str],
        /// The largest shape, dimensions sorted.
        max_shape: [u32; 3],
        /// The most chips one slice may have.
        max_chips: u32,
    },
}

/// Where [`Generation::zones`] come from: Cloud TPU's "TPU regions and zones"
/// (its United States tables: v4 `us-central2-b`; v5e `us-central1-a`,
/// `us-south1-a`, `us-west1-c`, `us-west4-a`; v5p `us-central1-a`,
/// `us-east5-a`; v6e `us-central1-b`, `us-east1-d`, `us-east5-a`,
/// `us-east5-b`; TPU7x `us-central1-c`), leaving out the zones it marks
/// single-tenant (they take only a single-tenant reservation) and AI zones.
/// The Europe, Asia Pacific and South America rows (v5e and v5p
/// `europe-west4-b`, v6e `europe-west4-a`, `asia-northeast1-b`,
/// `southamerica-west1-a`) as GKE's "Plan TPUs in GKE" ("Validate TPU
/// availability") gives them.
pub const ZONES_SOURCE: &[&str] = &[
    "https://cloud.google.com/tpu/docs/regions-zones",
    "https://cloud.google.com/kubernetes-engine/docs/concepts/plan-tpus",
];

/// The 2D shapes of v5e and v6e: the "supported configurations" tables of
/// <https://cloud.google.com/tpu/docs/v5e> and
/// <https://cloud.google.com/tpu/docs/v6e> (1x1 … 16x16, a 256-chip pod).
const SHAPES_2D: &[&str] = &["1x1", "2x2", "2x4", "4x4", "4x8", "8x8", "8x16", "16x16"];

/// 3D shapes smaller than one cube that Google's v4 and v5p tables list
/// (<https://cloud.google.com/tpu/docs/v4>, <https://cloud.google.com/tpu/docs/v5p>:
/// 2x2x1 one VM, 2x2x2, 2x2x4, 2x4x4).
const SUB_CUBE_3D: &[&str] = &["2x2x1", "2x2x2", "2x2x4", "2x4x4"];

/// Every TPU generation the simulator knows.
///
/// Machine types and chips per VM:
/// - v4: "TPU v4" (<https://cloud.google.com/tpu/docs/v4>) and GKE's "Plan
///   TPUs in GKE": `ct4p-hightpu-4t`, 4 chips. The v4 pod is 4096 chips;
///   "TPU types and topologies" (<https://cloud.google.com/tpu/docs/types-topologies>):
///   a v4 topology is `AxBxC` with `A ≤ B ≤ C`, all multiples of 4 beyond
///   the sub-cube shapes. Largest shape: the pod, 16x16x16.
/// - v5e: "TPU v5e" (<https://cloud.google.com/tpu/docs/v5e>): VMs of 1, 4 or
///   8 chips, `ct5lp-hightpu-1t`, `-4t`, `-8t` (GKE's machine types).
/// - v5p: "TPU v5p" (<https://cloud.google.com/tpu/docs/v5p>): "All v5p TPU
///   VMs use the `ct5p-hightpu-4t` machine type", 4 chips each; "The maximum
///   v5p shape is 16x16x24 (6144 chips, 96 cubes)".
/// - v6e: "TPU v6e" (<https://cloud.google.com/tpu/docs/v6e>): machine types
///   (GKE API) `ct6e-standard-1t` (1x1), `ct6e-standard-4t` (2x2 on one VM,
///   larger shapes on several), `ct6e-standard-8t` (2x4 on one VM).
/// - TPU7x: "About Ironwood (TPU7x) in GKE"
///   (<https://cloud.google.com/kubernetes-engine/docs/concepts/tpu-ironwood>):
///   "Each Ironwood (TPU7x) virtual machine (VM) contains four chips",
///   `tpu7x-standard-4t`; "TPU7x (Ironwood)" (<https://cloud.google.com/tpu/docs/tpu7x>):
///   a 9,216-chip pod, 3D like v5p. The 1-chip `tpu7x-standard-1t` (1x1x1)
///   is not on the part of those pages read; it is kept because GKE node
///   pools of it are in use (xpk's `system_characteristics.py` lists it).
///   The configuration table of the TPU7x page was not legible in the copy
///   read, so its cube rule is v5p's, bounded by the pod's 9,216 chips.
pub const GENERATIONS: &[Generation] = &[
    Generation {
        accelerator: "tpu-v4-podslice",
        machine_types: &[("ct4p-hightpu-4t", 4)],
        zones: &["us-central2-b"],
        topologies: Topologies::Cubes {
            small: SUB_CUBE_3D,
            max_shape: [16, 16, 16],
            max_chips: 4096,
        },
    },
    Generation {
        accelerator: "tpu-v5-lite-podslice",
        machine_types: &[
            ("ct5lp-hightpu-1t", 1),
            ("ct5lp-hightpu-4t", 4),
            ("ct5lp-hightpu-8t", 8),
        ],
        zones: &[
            "europe-west4-b",
            "us-central1-a",
            "us-south1-a",
            "us-west1-c",
            "us-west4-a",
        ],
        topologies: Topologies::Listed(SHAPES_2D),
    },
    Generation {
        accelerator: "tpu-v5p-slice",
        machine_types: &[("ct5p-hightpu-4t", 4)],
        zones: &["europe-west4-b", "us-central1-a", "us-east5-a"],
        topologies: Topologies::Cubes {
            small: SUB_CUBE_3D,
            max_shape: [16, 16, 24],
            max_chips: 6144,
        },
    },
    Generation {
        accelerator: "tpu-v6e-slice",
        machine_types: &[
            ("ct6e-standard-1t", 1),
            ("ct6e-standard-4t", 4),
            ("ct6e-standard-8t", 8),
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
        topologies: Topologies::Listed(SHAPES_2D),
    },
    Generation {
        accelerator: "tpu7x",
        machine_types: &[("tpu7x-standard-1t", 1), ("tpu7x-standard-4t", 4)],
        zones: &["us-central1-c"],
        topologies: Topologies::Cubes {
            small: &["1x1x1", "2x2x1", "2x2x2", "2x2x4", "2x4x4"],
            max_shape: [u32::MAX, u32::MAX, u32::MAX],
            max_chips: 9216,
        },
    },
];

/// A TPU machine type: its generation and the chips one VM of it has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MachineType {
    /// The machine type's name.
    pub name: &'static str,
    /// Its generation.
    pub generation: &'static Generation,
    /// TPU chips attached to one VM.
    pub chips_per_vm: u32,
}

/// The TPU machine type called `name`; `None` for any other machine type.
pub fn machine_type(name: &str) -> Option<MachineType> {
    GENERATIONS.iter().find_map(|generation| {
        generation
            .machine_types
            .iter()
            .find(|(n, _)| *n == name)
            .map(|&(name, chips_per_vm)| MachineType {
                name,
                generation,
                chips_per_vm,
            })
    })
}

impl Generation {
    /// Whether `zone` offers this generation.
    pub fn offered_in(&self, zone: &str) -> bool {
        self.zones.contains(&zone)
    }

    /// Whether Google accepts `topology` for a slice of this generation.
    pub fn accepts_topology(&self, topology: &str) -> bool {
        match self.topologies {
            Topologies::Listed(list) => list.contains(&topology),
            Topologies::Cubes {
                small,
                max_shape,
                max_chips,
            } => {
                if small.contains(&topology) {
                    return true;
                }
                let Some(dims) = dims3(topology) else {
                    return false;
                };
                let mut sorted = dims;
                sorted.sort_unstable();
                dims == sorted
                    && dims.iter().all(|d| *d > 0 && d % 4 == 0)
                    && dims.iter().zip(max_shape).all(|(d, m)| *d <= m)
                    && chips(topology) <= max_chips
            }
        }
    }
}

/// The three dimensions of `AxBxC`.
fn dims3(topology: &str) -> Option<[u32; 3]> {
    let mut it = topology.split('x').map(|d| d.parse::<u32>().ok());
    let dims = [it.next()??, it.next()??, it.next()??];
    it.next().is_none().then_some(dims)
}

/// The chips of a topology (`2x2x4` → 16); 0 when it is not `NxM[xK]`.
pub fn chips(topology: &str) -> u32 {
    topology
        .split('x')
        .map(|d| d.parse::<u32>().unwrap_or(0))
        .fold(1u32, u32::saturating_mul)
}

/// The region of a zone (`us-central1-a` → `us-central1`): Google's zone
/// names are the region's name, a dash and a letter
/// (<https://cloud.google.com/compute/docs/regions-zones>).
pub fn region_of(zone: &str) -> &str {
    zone.rsplit_once('-').map_or(zone, |(region, _)| region)
}

#[cfg(test)]
#[path = "tpu/tests.rs"]
mod tests;
