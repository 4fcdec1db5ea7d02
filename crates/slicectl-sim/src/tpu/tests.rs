#![cfg(test)]
use super::*;

#[test]
fn machine_types_name_their_generation_and_chips() {
    let m = machine_type("ct5p-hightpu-4t").unwrap();
    assert_eq!(m.generation.accelerator, "tpu-v5p-slice");
    assert_eq!(m.chips_per_vm, 4);
    assert_eq!(machine_type("ct6e-standard-8t").unwrap().chips_per_vm, 8);
    assert_eq!(machine_type("ct5lp-hightpu-1t").unwrap().chips_per_vm, 1);
    assert!(machine_type("e2-standard-4").is_none());
}

#[test]
fn topologies_follow_googles_rules() {
    let v5p = machine_type("ct5p-hightpu-4t").unwrap().generation;
    for ok in ["2x2x1", "2x4x4", "4x4x4", "4x8x12", "16x16x24", "12x16x24"] {
        assert!(v5p.accepts_topology(ok), "{ok}");
    }
    for bad in [
        "2x2", "4x4x2", "8x4x4", "4x4x6", "16x16x28", "16x20x24", "x",
    ] {
        assert!(!v5p.accepts_topology(bad), "{bad}");
    }
    let v6e = machine_type("ct6e-standard-4t").unwrap().generation;
    assert!(v6e.accepts_topology("16x16"));
    assert!(!v6e.accepts_topology("16x32"));
    let tpu7x = machine_type("tpu7x-standard-4t").unwrap().generation;
    assert!(tpu7x.accepts_topology("16x16x16"));
    assert!(tpu7x.accepts_topology("16x24x24"));
    assert!(!tpu7x.accepts_topology("24x24x24"));
}

#[test]
fn zones_are_sorted_and_regions_strip_the_zone_letter() {
    for g in GENERATIONS {
        assert!(g.zones.is_sorted(), "{}", g.accelerator);
    }
    assert_eq!(region_of("us-central1-a"), "us-central1");
    assert_eq!(chips("2x2x4"), 16);
    assert_eq!(chips("2xq"), 0);
}
