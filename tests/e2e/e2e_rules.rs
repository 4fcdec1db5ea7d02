//! GKE's TPU rules end to end: the binary against the simulator, where the
//! simulator enforces a rule and slicectl must react to it correctly. Each
//! test fails without its slicectl fix.

use crate::common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::*;
use slicectl_sim::FaultConfig;

const CREATE: &str = "container.projects.locations.clusters.nodePools.create";

/// A specific reservation without room answers 429 RESOURCE_EXHAUSTED
/// ("Reservation does not have enough resources …"). That is capacity, not a
/// rate limit: slicectl retried it for a minute and a half as a rate limit,
/// holding the cluster's other writes, and reported it as
/// `cloud_unavailable`. Now it is not retried, and fails with its own code
/// and what to do.
#[tokio::test(flavor = "multi_thread")]
async fn a_full_reservation_fails_at_once_with_its_own_code() {
    let reservations = BTreeMap::from([(
        "projects/example-project/zones/us-central1-b/reservations/r1".to_string(),
        6,
    )]);
    let sim = sim(
        Duration::from_millis(10),
        1,
        FaultConfig {
            reservations,
            // The preflight would refuse the second replica before sending
            // it (e2e_preflight); unable to read the reservation, it goes
            // ahead, and GKE's own refusal is what this test is about.
            denied_methods: vec!["compute.reservations.get".into()],
            ..FaultConfig::default()
        },
    )
    .await;
    // Two 4-host replicas on a 6-VM reservation: the second has no room.
    let reserved = "  capacity:\n    type: reservation\n    reservation:\n      name: r1\n";
    let dir = spec_dir(&[(
        "big.yaml",
        slice_yaml("big", "tpu-v6e-slice", "4x4", 2, reserved),
    )]);
    let started = Instant::now();
    let o = apply(&sim, dir.path()).await;
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "took {:?}: {t}",
        started.elapsed()
    );
    assert!(
        t.contains("failed [reservation_insufficient]: slice.big["),
        "{t}"
    );
    for want in [
        "specific reservation \"r1\" is insufficient for node pool \"big-",
        "at zone \"us-central1-b\": required 4 and short of 2 VM count of machine type ct6e-standard-4t",
        "capacity, not a rate limit",
        "grow the reservation",
    ] {
        assert!(t.contains(want), "{want:?} in {t}");
    }
    // One create per replica: the refused one was not sent again.
    assert_eq!(sim.stats().by_method[CREATE], 2, "{:?}", sim.stats());
    assert_eq!(pool_names(&sim).await.len(), 1);
    sim.shutdown().await;
}

/// GKE can end a stocked-out create with the pool `RUNNING_WITH_ERROR`
/// (the operation DONE, `GCE_STOCKOUT` in its clusterConditions) while it
/// keeps retrying. A TPU slice is all-or-nothing, so that pool is not a
/// working slice; slicectl planned it as healthy and never repaired it. Now
/// `status` shows it and the next apply replaces it.
#[tokio::test(flavor = "multi_thread")]
async fn a_pool_left_running_with_error_is_replaced() {
    let stockout = FaultConfig {
        stockout_rate: 1.0,
        stockout_status: slicectl_sim::StockoutStatus::RunningWithError,
        ..FaultConfig::default()
    };
    let sim = sim(Duration::from_millis(10), 1, stockout).await;
    let dir = spec_dir(&[("s.yaml", slice_yaml("s", "tpu-v6e-slice", "2x4", 1, ""))]);
    let o = apply(&sim, dir.path()).await;
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(t.contains("failed [stockout]: slice.s[0].node_pool"), "{t}");
    let pools = node_pools(&sim).await;
    assert_eq!(pools[0]["status"], "RUNNING_WITH_ERROR", "{pools:#?}");

    // `status` shows the state and the last error.
    let o = slicectl(&sim, &["status", dir.path().to_str().unwrap()]).await;
    let t = text(&o);
    assert!(
        t.contains("RUNNING_WITH_ERROR") && t.contains("ZONE_RESOURCE_POOL_EXHAUSTED"),
        "{t}"
    );

    // Capacity is back: the plan replaces the pool, saying why.
    sim.set_faults(FaultConfig::default());
    let o = slicectl(&sim, &["plan", dir.path().to_str().unwrap()]).await;
    let t = text(&o);
    assert!(
        t.contains("replace because the node pool is in RUNNING_WITH_ERROR state")
            && t.contains("Not all instances running in IGM"),
        "{t}"
    );
    let o = apply(&sim, dir.path()).await;
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(t.contains("1 replaced"), "{t}");
    let pools = node_pools(&sim).await;
    assert_eq!(pools.len(), 1, "{pools:#?}");
    assert_eq!(pools[0]["status"], "RUNNING", "{pools:#?}");
    sim.shutdown().await;
}
