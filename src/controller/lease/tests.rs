#![cfg(test)]
use super::*;

#[test]
fn each_replica_applies_under_its_own_field_manager() {
    assert_eq!(
        field_manager("slicectl-7d9f-abc"),
        "slicectl-lease-slicectl-7d9f-abc"
    );
    assert_ne!(field_manager("a"), field_manager("b"));
}

#[test]
fn a_long_identity_still_fits_the_api_servers_limit_and_stays_its_own() {
    let a = "x".repeat(200);
    let b = format!("{}y", "x".repeat(199));
    for id in [&a, &b] {
        let m = field_manager(id);
        assert!(m.len() <= MAX_FIELD_MANAGER, "{m}");
        assert!(m.starts_with(PREFIX), "{m}");
        assert_eq!(m, field_manager(id), "stable");
    }
    assert_ne!(field_manager(&a), field_manager(&b));
    let edge = "z".repeat(MAX_FIELD_MANAGER - PREFIX.len());
    assert_eq!(field_manager(&edge), format!("{PREFIX}{edge}"));
}
