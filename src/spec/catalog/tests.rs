#![cfg(test)]
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
fn gce_takes_v5p_v6e_and_tpu7x_with_a_policy_for_every_multi_host_slice() {
    assert_eq!(
        gce_accelerators(),
        ["tpu-v5p-slice", "tpu-v6e-slice", "tpu7x"]
    );
    for (acc, topo, want) in [
        ("tpu-v6e-slice", "2x2", Placement::None),
        ("tpu-v6e-slice", "2x4", Placement::None),
        (
            "tpu-v6e-slice",
            "4x4",
            Placement::WorkloadPolicy {
                topology: "4x4".into(),
            },
        ),
        ("tpu-v5p-slice", "2x2x1", Placement::None),
        (
            "tpu-v5p-slice",
            "2x2x2",
            Placement::WorkloadPolicy {
                topology: "2x2x2".into(),
            },
        ),
        ("tpu7x", "1x1x1", Placement::None),
        (
            "tpu7x",
            "2x2x4",
            Placement::WorkloadPolicy {
                topology: "2x2x4".into(),
            },
        ),
    ] {
        let s = resolve_for(Backend::Gce, acc, topo, None).unwrap();
        assert_eq!(s.placement, want, "{acc} {topo}");
    }
    // The same v6e slice on GKE keeps COMPACT placement.
    assert_eq!(
        resolve_for(Backend::Gke, "tpu-v6e-slice", "4x4", None)
            .unwrap()
            .placement,
        Placement::Compact {
            topology: "4x4".into()
        }
    );
    // v6e 2x4 on two 4-chip hosts is multi-host: a policy.
    assert!(matches!(
        resolve_for(
            Backend::Gce,
            "tpu-v6e-slice",
            "2x4",
            Some("ct6e-standard-4t")
        )
        .unwrap()
        .placement,
        Placement::WorkloadPolicy { .. }
    ));
    for acc in ["tpu-v4-podslice", "tpu-v5-lite-podslice"] {
        let g = generation(acc).unwrap();
        let e = resolve_for(Backend::Gce, acc, g.topologies[0], None).unwrap_err();
        assert!(matches!(e, CatalogError::NotOnBackend { .. }), "{e:?}");
        let e = e.to_string();
        assert!(
            e.contains("only for tpu-v5p-slice, tpu-v6e-slice, tpu7x")
                && e.contains("use backend gke"),
            "{e}"
        );
        assert!(resolve_for(Backend::Gke, acc, g.topologies[0], None).is_ok());
    }
    for g in GENERATIONS {
        if let Some(gce) = g.gce {
            assert!(!gce.boot_disk_types.is_empty(), "{}", g.accelerator);
        }
    }
    assert!(
        GCE_SOURCES
            .iter()
            .all(|s| s.url.starts_with("https://cloud.google.com/"))
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

#[test]
fn every_generation_cites_a_google_document() {
    for g in GENERATIONS {
        assert!(!g.sources.is_empty(), "{} cites no source", g.accelerator);
        for s in g.sources {
            assert!(
                !s.title.trim().is_empty(),
                "{}: untitled source",
                g.accelerator
            );
            assert!(
                s.url.starts_with("https://cloud.google.com/"),
                "{}: {} is not a Google Cloud document",
                g.accelerator,
                s.url
            );
        }
        // slicectl creates GKE node pools: GKE's own documentation comes first.
        assert!(
            g.sources[0].url.contains("/kubernetes-engine/docs/"),
            "{}: first source {} is not GKE documentation",
            g.accelerator,
            g.sources[0].url
        );
    }
}

#[test]
fn zones_are_sorted_real_zones_and_cited() {
    for g in GENERATIONS {
        assert!(!g.zones.is_empty(), "{} lists no zone", g.accelerator);
        assert!(
            g.zones.windows(2).all(|w| w[0] < w[1]),
            "{}: zones not sorted: {:?}",
            g.accelerator,
            g.zones
        );
        for z in g.zones {
            assert!(crate::spec::validate::is_zone(z), "{z}");
            assert!(g.offered_in(z));
        }
    }
    assert!(generation("tpu-v4-podslice").is_some_and(|g| g.offered_in("us-central2-b")));
    assert!(!generation("tpu-v6e-slice").is_some_and(|g| g.offered_in("us-central2-b")));
    assert!(ZONE_SOURCES[0].url.ends_with("/tpu/docs/regions-zones"));
}

/// Parses `AxBxC` into its dimensions.
fn dims(topology: &str) -> Vec<u32> {
    topology.split('x').map(|d| d.parse().unwrap()).collect()
}

/// The documented 3D rule: below one 4x4x4 cube, GKE's four small shapes;
/// from 4x4x4 up, every AxBxC with A ≤ B ≤ C, each a multiple of 4, that
/// fits inside the largest documented topology.
fn documented_3d(largest: [u32; 3]) -> Vec<String> {
    let mut want: Vec<String> = ["2x2x1", "2x2x2", "2x2x4", "2x4x4"]
        .map(String::from)
        .to_vec();
    for a in (4..=largest[0]).step_by(4) {
        for b in (a..=largest[1]).step_by(4) {
            for c in (b..=largest[2]).step_by(4) {
                want.push(format!("{a}x{b}x{c}"));
            }
        }
    }
    want
}

fn assert_documented_3d(accelerator: &str, largest: [u32; 3]) {
    let g = generation(accelerator).unwrap();
    let mut have: Vec<String> = g.topologies.iter().map(|t| t.to_string()).collect();
    let mut want = documented_3d(largest);
    // Listed smallest first (chips, then dimensions), so error messages read in order.
    let key = |t: &str| (chips(t), dims(t));
    assert!(
        have.windows(2).all(|w| key(&w[0]) < key(&w[1])),
        "{accelerator}: topologies not in ascending order: {have:?}"
    );
    have.sort();
    want.sort();
    assert_eq!(have, want, "{accelerator}");
}

#[test]
fn v4_topologies_are_the_documented_ones_up_to_12x16x16() {
    assert_documented_3d("tpu-v4-podslice", [12, 16, 16]);
    // GKE documents 12x16x16 as the largest v4 topology.
    let s = resolve("tpu-v4-podslice", "12x16x16", None).unwrap();
    assert_eq!((s.chips, s.hosts), (3072, 768));
    for gone in ["16x16x16", "12x12x24", "4x4x20"] {
        assert!(
            matches!(
                resolve("tpu-v4-podslice", gone, None),
                Err(CatalogError::InvalidTopology { .. })
            ),
            "v4 must refuse {gone}"
        );
    }
    // Shapes inside the envelope that the list used to lack.
    for added in ["4x4x12", "4x16x16", "8x12x16"] {
        assert!(resolve("tpu-v4-podslice", added, None).is_ok(), "{added}");
    }
    // Only ascending AxBxC.
    assert!(resolve("tpu-v4-podslice", "16x12x16", None).is_err());
}

#[test]
fn v5p_topologies_are_the_documented_ones_up_to_16x16x24() {
    assert_documented_3d("tpu-v5p-slice", [16, 16, 24]);
    let s = resolve("tpu-v5p-slice", "16x16x24", None).unwrap();
    assert_eq!((s.chips, s.hosts), (6144, 1536));
    for beyond in ["4x4x28", "16x20x28", "16x16x28"] {
        assert!(resolve("tpu-v5p-slice", beyond, None).is_err(), "{beyond}");
    }
}

#[test]
fn single_and_multi_host_by_machine_type() {
    // (accelerator, topology, machine type, hosts or None when it cannot form it)
    let cases: &[(&str, &str, &str, Option<u32>)] = &[
        // v5e: 1t only 1x1, 8t only 2x4 on one VM, 4t from 2x2 up.
        ("tpu-v5-lite-podslice", "1x1", "ct5lp-hightpu-1t", Some(1)),
        ("tpu-v5-lite-podslice", "2x2", "ct5lp-hightpu-1t", None),
        ("tpu-v5-lite-podslice", "1x1", "ct5lp-hightpu-4t", None),
        ("tpu-v5-lite-podslice", "2x2", "ct5lp-hightpu-4t", Some(1)),
        ("tpu-v5-lite-podslice", "2x4", "ct5lp-hightpu-4t", Some(2)),
        (
            "tpu-v5-lite-podslice",
            "16x16",
            "ct5lp-hightpu-4t",
            Some(64),
        ),
        ("tpu-v5-lite-podslice", "2x4", "ct5lp-hightpu-8t", Some(1)),
        ("tpu-v5-lite-podslice", "2x2", "ct5lp-hightpu-8t", None),
        ("tpu-v5-lite-podslice", "4x4", "ct5lp-hightpu-8t", None),
        // v6e: the same shape.
        ("tpu-v6e-slice", "1x1", "ct6e-standard-1t", Some(1)),
        ("tpu-v6e-slice", "2x2", "ct6e-standard-4t", Some(1)),
        ("tpu-v6e-slice", "2x4", "ct6e-standard-4t", Some(2)),
        ("tpu-v6e-slice", "2x4", "ct6e-standard-8t", Some(1)),
        ("tpu-v6e-slice", "8x16", "ct6e-standard-8t", None),
        // v4, v5p: one 4-chip type, 2x2x1 the only single-host slice.
        ("tpu-v4-podslice", "2x2x1", "ct4p-hightpu-4t", Some(1)),
        ("tpu-v4-podslice", "2x2x2", "ct4p-hightpu-4t", Some(2)),
        ("tpu-v5p-slice", "2x2x1", "ct5p-hightpu-4t", Some(1)),
        ("tpu-v5p-slice", "4x4x4", "ct5p-hightpu-4t", Some(16)),
        // tpu7x: 1t only 1x1x1; 4t single-host at 2x2x1.
        ("tpu7x", "1x1x1", "tpu7x-standard-1t", Some(1)),
        ("tpu7x", "2x2x1", "tpu7x-standard-1t", None),
        ("tpu7x", "1x1x1", "tpu7x-standard-4t", None),
        ("tpu7x", "2x2x1", "tpu7x-standard-4t", Some(1)),
        ("tpu7x", "2x2x2", "tpu7x-standard-4t", Some(2)),
    ];
    for &(acc, topo, machine, hosts) in cases {
        let got = resolve(acc, topo, Some(machine));
        match hosts {
            Some(h) => assert_eq!(got.unwrap().hosts, h, "{acc} {topo} {machine}"),
            None => assert!(
                matches!(got, Err(CatalogError::MachineTypeDoesNotFit { .. })),
                "{acc} {topo} {machine}: {got:?}"
            ),
        }
    }
}

#[test]
fn every_listed_topology_resolves() {
    for g in GENERATIONS {
        for t in g.topologies {
            let s = resolve(g.accelerator, t, None)
                .unwrap_or_else(|e| panic!("{} {t}: {e}", g.accelerator));
            assert_eq!(t.split('x').count(), g.dims, "{} {t}", g.accelerator);
            assert_eq!(s.hosts * s.chips_per_host, s.chips, "{} {t}", g.accelerator);
        }
    }
}
