#![cfg(test)]
use super::*;

#[test]
fn every_metric_is_exposed_with_conventional_names() {
    let m = Metrics::new();
    m.cycle("applied", 1.5);
    m.refused("empty_source");
    m.set_slices(2, 1, 0);
    m.cloud_request(
        "container.projects.locations.clusters.nodePools.create",
        "200",
    );
    m.capacity_unavailable.inc();
    m.leader.set(1);
    m.shards_held.set(2);
    m.shards.set(6);
    m.last_good_age.set(3.0);
    m.set_held(&[]);
    let text = m.encode().unwrap();
    for want in [
        "slicectl_reconcile_cycles_total{result=\"applied\"} 1",
        "slicectl_reconcile_duration_seconds_count{result=\"applied\"} 1",
        "slicectl_reconcile_duration_seconds_sum{result=\"applied\"} 1.5",
        "slicectl_slices{condition=\"Ready\"} 2",
        "slicectl_slices{condition=\"Stalled\"} 0",
        "slicectl_cloud_requests_total{api=\"container\",method=\"projects.locations.clusters.nodePools.create\",code=\"200\"} 1",
        "slicectl_operations_in_flight 0",
        "slicectl_refused_actions_total{code=\"empty_source\"} 1",
        "slicectl_spec_last_good_age_seconds 3.0",
        "slicectl_capacity_unavailable_total 1",
        "slicectl_capacity_held_slices 0",
        "slicectl_leader 1",
        "slicectl_shards_held 2",
        "slicectl_shards 6",
        "slicectl_held_steps{code=\"busy\"} 0",
        "slicectl_held_steps{code=\"busy_unknown\"} 0",
        "# EOF",
    ] {
        assert!(text.contains(want), "missing {want:?} in\n{text}");
    }
}

#[test]
fn unobserved_targets_are_one_and_targets_gone_from_the_specs_are_dropped() {
    let m = Metrics::new();
    let targets = ["gone".to_string(), "train".to_string()];
    m.set_targets(&targets, &std::collections::BTreeSet::from(["gone"]));
    let text = m.encode().unwrap();
    assert!(
        text.contains("slicectl_target_unobserved{target=\"gone\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("slicectl_target_unobserved{target=\"train\"} 0"),
        "{text}"
    );
    m.set_targets(&targets[1..], &std::collections::BTreeSet::new());
    let text = m.encode().unwrap();
    assert!(!text.contains("target=\"gone\""), "{text}");
    assert!(
        text.contains("slicectl_target_unobserved{target=\"train\"} 0"),
        "{text}"
    );
}
