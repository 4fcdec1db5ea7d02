//! Keeps the benchmark suite (`benches/suite/`) from rotting without running
//! it: the fleets it generates validate, its ideals are the documented
//! formulas, and its gcloud command lines express every field slicectl
//! renders for those fleets. Runs in well under a second in debug.

#[allow(dead_code)]
#[path = "../../benches/suite/fleet.rs"]
mod fleet;

use std::time::Duration;

use fleet::Fleet;
use serde_json::json;

fn load(f: &Fleet) -> slicectl::spec::Fleet {
    let dir = tempfile::tempdir().unwrap();
    f.write(dir.path()).unwrap();
    match slicectl::source::load_dir(dir.path()) {
        Ok(fleet) => fleet,
        Err(e) => panic!("the bench's generated specs do not validate: {e:?}"),
    }
}

#[test]
fn generated_fleets_validate() {
    for f in [
        Fleet::even("plan", 10, 1_000),
        Fleet::even("conv", 4, 40),
        Fleet::even("busy", 1, 20),
        Fleet::even("odd", 3, 7),
    ] {
        let loaded = load(&f);
        assert_eq!(loaded.slices.len(), f.slices());
        assert_eq!(loaded.targets.len(), f.per_cluster.len());
        assert_eq!(
            slicectl::observe::clusters(&loaded).len(),
            f.per_cluster.len()
        );
        let paths: Vec<String> = slicectl::observe::clusters(&loaded)
            .iter()
            .map(|c| c.path())
            .collect();
        assert_eq!(paths, f.cluster_paths());
    }
    assert_eq!(Fleet::even("odd", 3, 7).per_cluster, [3, 2, 2]);
}

#[test]
fn ideals() {
    let l = Duration::from_secs(2);
    // 4 clusters × 10 slices, quota 5: two waves of L; 40 writes at 20/s: 2 s.
    let c = Fleet::even("conv", 4, 40);
    assert_eq!(c.converge_ideal(5, l, Some(20.0)), Duration::from_secs(4));
    assert_eq!(c.converge_ideal(5, l, Some(5.0)), Duration::from_secs(8));
    assert_eq!(c.converge_ideal(5, l, None), Duration::from_secs(4));
    // One busy cluster: ceil(20/5) waves.
    let b = Fleet::even("busy", 1, 20);
    assert_eq!(b.converge_ideal(5, l, Some(20.0)), Duration::from_secs(8));
    assert_eq!(b.converge_ideal(3, l, None), Duration::from_secs(14));
    // 10 clusters in one project, location and region: 1 cluster list
    // (issue 24: where a moved Target's pools are found) + 10 + 1 + 1 + 1.
    assert_eq!(Fleet::even("plan", 10, 1_000).ideal_lists().total(), 14);
    assert!(fleet::is_list(
        "container.projects.locations.clusters.nodePools.list"
    ));
    assert!(!fleet::is_list(
        "container.projects.locations.operations.get"
    ));
    // Waits: one read per location per tick of at least 0.75 s; polled one
    // operation at a time, a 5 s operation costs 5 gets (one a second).
    assert_eq!(fleet::waits::read_bound(1, Duration::from_secs(10)), 14);
    assert_eq!(fleet::waits::read_bound(3, Duration::from_millis(10)), 3);
    assert_eq!(
        fleet::waits::per_operation_polls(40, Duration::from_secs(5)),
        200
    );
}

/// Every field slicectl renders for the bench's slices has a gcloud flag.
#[test]
fn gcloud_flags_express_every_rendered_field() {
    let f = Fleet::even("conv", 2, 8);
    let loaded = load(&f);
    let mut seen_topology = false;
    for slice in loaded.slices.values() {
        let target = loaded.target_of(slice).unwrap();
        let pool =
            slicectl::kinds::node_pool::render::node_pool(target, slice, 0, &slice.name).unwrap();
        let body = serde_json::to_value(&pool).unwrap();
        let g = fleet::gcloud_create_args(&body, &target.name, fleet::LOCATION);
        assert!(
            g.untranslated.is_empty(),
            "no gcloud flag for {g:?} in {body}"
        );
        let args = g.args;
        assert_eq!(
            args[..4],
            ["container", "node-pools", "create", &*pool.name]
        );
        assert!(args.contains(&format!("--cluster={}", target.name)));
        assert!(args.contains(&"--machine-type=ct4p-hightpu-4t".to_string()));
        assert!(args.contains(&format!("--node-locations={}", fleet::ZONE)));
        seen_topology |= args.iter().any(|a| a.starts_with("--tpu-topology="));
    }
    assert!(seen_topology);
}

#[test]
fn gcloud_flags_by_field() {
    let body = json!({
        "name": "p-0",
        "config": {
            "machineType": "ct5p-hightpu-4t",
            "labels": {"a": "1", "b": "2"},
            "resourceLabels": {"team": "x"},
            "taints": [{"key": "k", "value": "v", "effect": "NO_EXECUTE"}],
            "spot": false,
            "flexStart": true,
            "maxRunDuration": "259200s",
            "reservationAffinity": {"consumeReservationType": "SPECIFIC_RESERVATION",
                                    "key": "compute.googleapis.com/reservation-name", "values": ["r1"]},
            "oauthScopes": ["s1", "s2"],
            "tags": ["t"],
            "shieldedInstanceConfig": {"enableSecureBoot": false, "enableIntegrityMonitoring": true},
            "somethingNew": 3
        },
        "initialNodeCount": 0,
        "locations": ["us-east5-a"],
        "placementPolicy": {"type": "COMPACT", "tpuTopology": "2x2x2"},
        "autoscaling": {"enabled": true, "minNodeCount": 0, "maxNodeCount": 2, "locationPolicy": "ANY"},
        "management": {"autoUpgrade": false, "autoRepair": false},
        "maxPodsConstraint": {"maxPodsPerNode": "32"},
        "upgradeSettings": {"maxSurge": 1},
        "queuedProvisioning": {"enabled": true},
        "networkConfig": {"additionalNodeNetworkConfigs": [{"network": "n", "subnetwork": "s"}]}
    });
    let g = fleet::gcloud_create_args(&body, "c", "us-east5");
    let args = g.args;
    for want in [
        "--machine-type=ct5p-hightpu-4t",
        "--node-labels=a=1,b=2",
        "--labels=team=x",
        "--node-taints=k=v:NoExecute",
        "--flex-start",
        "--max-run-duration=259200s",
        "--reservation-affinity=specific",
        "--reservation=r1",
        "--scopes=s1,s2",
        "--tags=t",
        "--no-shielded-secure-boot",
        "--shielded-integrity-monitoring",
        "--num-nodes=0",
        "--node-locations=us-east5-a",
        "--placement-type=COMPACT",
        "--tpu-topology=2x2x2",
        "--enable-autoscaling",
        "--min-nodes=0",
        "--max-nodes=2",
        "--location-policy=ANY",
        "--no-enable-autoupgrade",
        "--no-enable-autorepair",
        "--max-pods-per-node=32",
        "--max-surge-upgrade=1",
        "--max-unavailable-upgrade=0",
        "--enable-queued-provisioning",
        "--additional-node-network=network=n,subnetwork=s",
    ] {
        assert!(
            args.iter().any(|a| a == want),
            "{want} missing from {args:?}"
        );
    }
    assert!(!args.iter().any(|a| a == "--spot"), "{args:?}");
    assert_eq!(g.untranslated, ["config.somethingNew"]);
    assert!(g.approximations[0].starts_with("upgradeSettings.maxUnavailable"));
    assert_eq!(g.approximations.len(), 1, "{:?}", g.approximations);
}

#[test]
fn differing_fields_ignore_output_only() {
    let a = json!({"name": "p", "status": "RUNNING", "selfLink": "x", "config": {"oauthScopes": ["a", "b"], "spot": true}});
    let b = json!({"name": "p", "status": "PROVISIONING", "selfLink": "y", "config": {"oauthScopes": ["a"], "spot": true}});
    let d = fleet::differing_fields(&a, &b);
    assert_eq!(d.into_iter().collect::<Vec<_>>(), ["config.oauthScopes"]);
    assert_eq!(fleet::shell_quote("--a=b,c"), "--a=b,c");
    assert_eq!(fleet::shell_quote("it's"), r"'it'\''s'");
}
