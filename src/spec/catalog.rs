//! The TPU catalogue: accelerator ↔ machine types ↔ chips per host ↔ valid
//! topologies ↔ hosts per slice ↔ placement rule. Pure data and lookups.
//!
//! Facts: GKE TPU docs as summarised in `shared/reference/tpu-anchors.md`
//! (§A.6 tpu-provisioner, §B.9 tpu-operator, §D.2 xpk). Chips per host come from
//! the machine type suffix (`-1t`, `-4t`, `-8t`), never a constant 4.

use std::fmt;

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
}

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
    Generation {
        accelerator: "tpu-v4-podslice",
        display: "TPU v4",
        dims: 3,
        machine_types: &[mt("ct4p-hightpu-4t", 4)],
        topologies: &[
            "2x2x1", "2x2x2", "2x2x4", "2x4x4", "4x4x4", "4x4x8", "4x8x8", "8x8x8", "8x8x12",
            "8x8x16", "8x16x16", "12x12x12", "12x12x16", "12x16x16", "16x16x16",
        ],
        multi_host_workload_policy: false,
    },
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
    },
    Generation {
        accelerator: "tpu-v5p-slice",
        display: "TPU v5p",
        dims: 3,
        machine_types: &[mt("ct5p-hightpu-4t", 4)],
        topologies: &[
            "2x2x1", "2x2x2", "2x2x4", "2x4x4", "4x4x4", "4x4x8", "4x4x12", "4x4x16", "4x8x8",
            "4x8x12", "4x8x16", "8x8x8", "8x8x12", "8x8x16", "8x16x16", "12x12x12", "12x12x16",
            "12x16x16", "16x16x16", "16x16x20", "16x16x24",
        ],
        multi_host_workload_policy: false,
    },
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
    },
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

fn chips(topology: &str) -> u32 {
    topology
        .split('x')
        .map(|d| d.parse::<u32>().unwrap_or(0))
        .product()
}

/// Whether `m` can form `topology`: chips divide evenly, and a machine type
/// with more than 4 chips per host (8t) is single-host only.
fn fits(m: &MachineType, topology: &str) -> bool {
    let c = chips(topology);
    if c == 0 || c % m.chips_per_host != 0 {
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

/// Resolves accelerator × topology × optional machine type to a [`SliceShape`].
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
    let placement = if hosts <= 1 {
        Placement::None
    } else if generation.multi_host_workload_policy {
        Placement::WorkloadPolicy {
            topology: topo.to_string(),
        }
    } else {
        Placement::Compact {
            topology: topo.to_string(),
        }
    };
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
mod tests {
    use super::*;

    #[test]
    fn host_counts_follow_chips_per_host() {
        let cases = [
            ("tpu-v5p-slice", "2x2x1", None, "ct5p-hightpu-4t", 1),
            ("tpu-v5p-slice", "4x4x4", None, "ct5p-hightpu-4t", 16),
            ("tpu-v4-podslice", "2x2x4", None, "ct4p-hightpu-4t", 4),
            ("tpu-v6e-slice", "1x1", None, "ct6e-standard-1t", 1),
            ("tpu-v6e-slice", "2x4", None, "ct6e-standard-8t", 1),
            (
                "tpu-v6e-slice",
                "2x4",
                Some("ct6e-standard-4t"),
                "ct6e-standard-4t",
                2,
            ),
            ("tpu-v6e-slice", "16x16", None, "ct6e-standard-4t", 64),
            ("tpu-v5-lite-podslice", "2x2", None, "ct5lp-hightpu-4t", 1),
            ("tpu7x", "2x2x2", None, "tpu7x-standard-4t", 2),
            ("tpu7x", "1x1x1", None, "tpu7x-standard-1t", 1),
        ];
        for (acc, topo, mt, want_mt, want_hosts) in cases {
            let s = resolve(acc, topo, mt).unwrap();
            assert_eq!(
                (s.machine_type, s.hosts),
                (want_mt, want_hosts),
                "{acc} {topo}"
            );
        }
    }

    #[test]
    fn placement_rules() {
        assert_eq!(
            resolve("tpu-v5p-slice", "2x2x1", None).unwrap().placement,
            Placement::None
        );
        assert_eq!(
            resolve("tpu-v5p-slice", "2x2x2", None).unwrap().placement,
            Placement::Compact {
                topology: "2x2x2".into()
            }
        );
        assert_eq!(
            resolve("tpu7x", "4x4x4", None).unwrap().placement,
            Placement::WorkloadPolicy {
                topology: "4x4x4".into()
            }
        );
        assert_eq!(
            resolve("tpu7x", "2x2x1", None).unwrap().placement,
            Placement::None
        );
        assert_eq!(
            resolve("tpu-v6e-slice", "2x4", None).unwrap().placement,
            Placement::None
        );
    }

    #[test]
    fn invalid_combinations_list_valid_ones() {
        let e = resolve("tpu-v5p-slice", "3x3x3", None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("valid topologies: 2x2x1, 2x2x2"), "{e}");
        let e = resolve("tpu-v6e-slice", "4x4", Some("ct6e-standard-8t"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("machine types that fit: ct6e-standard-4t"),
            "{e}"
        );
        let e = resolve("tpu-v9", "2x2", None).unwrap_err().to_string();
        assert!(e.contains("tpu7x"), "{e}");
        let e = resolve("tpu-v5p-slice", "2x2x2", Some("ct6e-standard-4t"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("expected one of: ct5p-hightpu-4t"), "{e}");
    }
}
