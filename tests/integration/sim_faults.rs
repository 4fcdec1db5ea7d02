//! Fault injection (seeded, deterministic), the write rate limit, request
//! counters and the `/_sim/` admin endpoints.

use crate::sim_support;

use std::time::Duration;

use serde_json::json;
use sim_support::{Client, GKE, start, tpu_pool};
use slicectl_sim::{FaultConfig, SimStats};

const POOLS: &str = "/v1/projects/proj1/locations/us-central2/clusters/c1/nodePools";
const RP: &str = "/compute/v1/projects/proj1/regions/us-central2/resourcePolicies";

fn flaky() -> FaultConfig {
    FaultConfig {
        rate_429: 0.25,
        rate_503: 0.25,
        ..Default::default()
    }
}

/// The same scripted request sequence; returns the status codes.
async fn run_script(seed: u64) -> Vec<u16> {
    let sim = start(Duration::ZERO, seed, flaky()).await;
    let c = Client::new(&sim);
    let mut codes = Vec::new();
    for i in 0..30 {
        let (s, _) = match i % 3 {
            0 => c.post(POOLS, tpu_pool(&format!("p{i}"))).await,
            1 => c.get(POOLS).await,
            _ => c.get(RP).await,
        };
        codes.push(s);
    }
    assert_eq!(
        sim.stats().faults_injected as usize,
        codes.iter().filter(|s| **s != 200).count()
    );
    sim.shutdown().await;
    codes
}

#[tokio::test]
async fn faults_are_deterministic_for_a_seed() {
    let a = run_script(42).await;
    let b = run_script(42).await;
    assert_eq!(a, b);
    assert!(
        a.contains(&429) && a.contains(&503) && a.contains(&200),
        "{a:?}"
    );
    let other = run_script(43).await;
    assert_ne!(a, other, "a different seed gives a different sequence");
}

#[tokio::test]
async fn fault_envelopes() {
    let sim = start(
        Duration::ZERO,
        1,
        FaultConfig {
            rate_429: 1.0,
            ..Default::default()
        },
    )
    .await;
    let c = Client::new(&sim);
    let (s, e) = c.get(POOLS).await;
    assert_eq!(s, 429);
    assert_eq!(e["error"]["code"], 429);
    assert_eq!(e["error"]["status"], "RESOURCE_EXHAUSTED");
    assert_eq!(e["error"]["errors"][0]["reason"], "rateLimitExceeded");
    assert_eq!(e["error"]["details"][0]["reason"], "RATE_LIMIT_EXCEEDED");
    sim.set_faults(FaultConfig {
        rate_503: 1.0,
        ..Default::default()
    });
    let (s, e) = c.get(RP).await;
    assert_eq!(s, 503);
    assert_eq!(e["error"]["status"], "UNAVAILABLE");
    assert_eq!(e["error"]["errors"][0]["domain"], "global");
    sim.set_faults(FaultConfig::default());
    let (s, _) = c.get(RP).await;
    assert_eq!(s, 200);
    sim.shutdown().await;
}

#[tokio::test]
async fn write_rate_limit_rejects_excess_writes_only() {
    let sim = start(
        Duration::ZERO,
        1,
        FaultConfig {
            write_rate_limit: Some(2.0),
            ..Default::default()
        },
    )
    .await;
    let c = Client::new(&sim);
    let mut codes = Vec::new();
    for i in 0..4 {
        codes.push(c.post(POOLS, tpu_pool(&format!("w{i}"))).await.0);
    }
    assert_eq!(codes[..2], [200, 200]);
    assert!(codes[2..].contains(&429), "{codes:?}");
    for _ in 0..5 {
        assert_eq!(c.get(POOLS).await.0, 200);
    }
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(c.post(POOLS, tpu_pool("later")).await.0, 200);
    sim.shutdown().await;
}

#[tokio::test]
async fn counters_split_reads_and_writes_by_method() {
    let sim = start(Duration::ZERO, 1, FaultConfig::default()).await;
    let c = Client::new(&sim);
    for name in ["a", "b"] {
        let (_, op) = c.post(POOLS, tpu_pool(name)).await;
        c.wait_gke(&op).await;
    }
    c.get(POOLS).await;
    c.post(
        RP,
        json!({"name": "wp", "workloadPolicy": {"type": "HIGH_THROUGHPUT"}}),
    )
    .await;
    let st = sim.stats();
    assert_eq!(st.writes, 3);
    assert_eq!(
        st.by_method["container.projects.locations.clusters.nodePools.create"],
        2
    );
    assert_eq!(
        st.by_method["container.projects.locations.clusters.nodePools.list"],
        1
    );
    assert_eq!(st.by_method["compute.resourcePolicies.insert"], 1);
    let polls = st.by_method["container.projects.locations.operations.get"];
    assert_eq!(st.reads, 1 + polls);

    // "A second apply makes zero writes": only reads after a reset.
    sim.reset_stats();
    assert_eq!(sim.stats(), SimStats::default());
    c.get(POOLS).await;
    c.get(&format!("{RP}?maxResults=500")).await;
    let st = sim.stats();
    assert_eq!((st.reads, st.writes), (2, 0));
    sim.shutdown().await;
}

#[tokio::test]
async fn admin_endpoints() {
    let sim = start(Duration::ZERO, 1, FaultConfig::default()).await;
    let c = Client::new(&sim);
    let other = "/v1/projects/proj2/locations/europe-west4/clusters/c2/nodePools";
    assert_eq!(c.get(other).await.0, 404);
    let (s, v) = c
        .post(
            "/_sim/clusters",
            json!({"name": "projects/proj2/locations/europe-west4/clusters/c2"}),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(c.get(other).await.0, 200);
    let (s, _) = c
        .post("/_sim/clusters", json!({"name": "clusters/bad"}))
        .await;
    assert_eq!(s, 400);
    sim.add_cluster("projects/proj3/locations/us-east5/clusters/c3")
        .unwrap();
    assert!(sim.add_cluster("nonsense").is_err());
    assert_eq!(
        c.get("/v1/projects/proj3/locations/us-east5/clusters/c3")
            .await
            .0,
        200
    );

    let (s, st) = c.get("/_sim/stats").await;
    assert_eq!(s, 200);
    assert_eq!(st["reads"], 3);
    assert_eq!(st["writes"], 0);
    assert_eq!(
        st["by_method"]["container.projects.locations.clusters.nodePools.list"],
        2
    );

    let (s, _) = c
        .send("PUT", "/_sim/faults", Some(json!({"rate_503": 1.0})))
        .await;
    assert_eq!(s, 200);
    assert_eq!(c.get(&format!("{GKE}/clusters/c1")).await.0, 503);
    let (s, _) = c.send("PUT", "/_sim/faults", Some(json!({}))).await;
    assert_eq!(s, 200);
    assert_eq!(c.get(&format!("{GKE}/clusters/c1")).await.0, 200);

    let (s, _) = c.post("/_sim/reset-stats", json!(null)).await;
    assert_eq!(s, 200);
    let (_, st) = c.get("/_sim/stats").await;
    assert_eq!(
        st,
        json!({"reads": 0, "writes": 0, "by_method": {}, "faults_injected": 0})
    );
    assert_eq!(c.get("/_sim/nothing").await.0, 404);
    sim.shutdown().await;
}

/// Regional TPU quotas: a Spot v4 pool of 64 chips (charged to
/// `PREEMPTIBLE_TPU_PODSLICE_V4`) fits a 100-chip quota and
/// `regions.get` reports its usage; a second one past it gets GKE's 403
/// "Insufficient regional quota …" with the figures; a denied method
/// answers Compute's 403 "Required '…' permission for '…'".
#[tokio::test]
async fn quotas_follow_pools_and_refuse_a_create_past_them() {
    let faults = FaultConfig {
        quotas: [("us-central2/PREEMPTIBLE_TPU_PODSLICE_V4".to_string(), 100)].into(),
        ..Default::default()
    };
    let sim = start(Duration::ZERO, 1, faults).await;
    let c = Client::new(&sim);
    let (s, op) = c.post(POOLS, tpu_pool("p1")).await;
    assert_eq!(s, 200, "{op}");
    c.wait_gke(&op).await;
    let (s, region) = c
        .get("/compute/v1/projects/proj1/regions/us-central2")
        .await;
    assert_eq!(s, 200);
    assert_eq!(
        region["quotas"],
        json!([{"metric": "PREEMPTIBLE_TPU_PODSLICE_V4", "limit": 100.0, "usage": 64.0}])
    );
    let (s, e) = c.post(POOLS, tpu_pool("p2")).await;
    assert_eq!(s, 403, "{e}");
    assert_eq!(e["error"]["status"], "PERMISSION_DENIED");
    assert_eq!(
        e["error"]["message"],
        "Insufficient regional quota to satisfy request: resource \"PREEMPTIBLE_TPU_PODSLICE_V4\": request requires '64.0' \
         and is short '28.0'. project has a quota of '100.0' with '36.0' available. View and manage quotas at \
         https://console.cloud.google.com/iam-admin/quotas?usage=USED&project=proj1."
    );
    sim.set_faults(FaultConfig {
        quotas: [("us-central2/PREEMPTIBLE_TPU_PODSLICE_V4".to_string(), 100)].into(),
        denied_methods: vec!["compute.regions.get".into()],
        ..Default::default()
    });
    let (s, e) = c
        .get("/compute/v1/projects/proj1/regions/us-central2")
        .await;
    assert_eq!(s, 403, "{e}");
    assert_eq!(
        e["error"]["message"],
        "Required 'compute.regions.get' permission for 'projects/proj1/regions/us-central2'"
    );
    assert_eq!(e["error"]["errors"][0]["reason"], "forbidden");
    sim.shutdown().await;
}
