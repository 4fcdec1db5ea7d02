//! End to end: the slicectl binary converging GKE node pools on the simulator.

use crate::common;

use std::time::Duration;

use common::*;
use slicectl_sim::FaultConfig;

fn fleet() -> Vec<(&'static str, String)> {
    vec![
        (
            "llm.yaml",
            slice_yaml(
                "llm",
                "tpu-v5p-slice",
                "2x2x2",
                2,
                "  capacity:\n    type: spot\n  nodeLabels:\n    team: llm\n",
            ),
        ),
        ("iron.yaml", slice_yaml("iron", "tpu7x", "2x2x2", 1, "")),
        (
            "tiny.yaml",
            slice_yaml("tiny", "tpu-v6e-slice", "1x1", 1, ""),
        ),
    ]
}

#[tokio::test(flavor = "multi_thread")]
async fn create_then_noop_then_update_replace_delete() {
    let sim = sim(Duration::from_millis(50), 1, FaultConfig::default()).await;
    let dir = spec_dir(&fleet());

    // Create from empty.
    let o = apply(&sim, dir.path()).await;
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(
        pool_names(&sim).await,
        vec!["iron-0", "llm-0", "llm-1", "tiny-0"]
    );
    assert_eq!(policy_names(&sim).await, vec!["iron-0-wp"]);
    let pools = node_pools(&sim).await;
    let iron = pools.iter().find(|p| p["name"] == "iron-0").unwrap();
    assert_eq!(iron["placementPolicy"]["policyName"], "iron-0-wp");
    assert_eq!(iron["config"]["machineType"], "tpu7x-standard-4t");
    assert_eq!(iron["initialNodeCount"], 2);

    // A second apply plans nothing and writes nothing.
    sim.reset_stats();
    let o = apply(&sim, dir.path()).await;
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("No changes."),
        "{}",
        text(&o)
    );
    let stats = sim.stats();
    assert_eq!(stats.writes, 0, "{stats:?}");
    assert!(
        stats.reads <= 5,
        "one list per kind and location, and one cluster list per project: {stats:?}"
    );
    let o = slicectl(
        &sim,
        &["plan", dir.path().to_str().unwrap(), "--detailed-exitcode"],
    )
    .await;
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));

    // A label change is an in-place update.
    std::fs::write(
        dir.path().join("tiny.yaml"),
        slice_yaml(
            "tiny",
            "tpu-v6e-slice",
            "1x1",
            1,
            "  nodeLabels:\n    team: research\n",
        ),
    )
    .unwrap();
    let o = slicectl(
        &sim,
        &[
            "plan",
            dir.path().to_str().unwrap(),
            "--detailed-exitcode",
            "-o",
            "json",
        ],
    )
    .await;
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let plan: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(plan["actions"].as_array().unwrap().len(), 1);
    assert_eq!(plan["actions"][0]["action"], "update");
    assert_eq!(plan["actions"][0]["name"], "tiny-0");
    sim.reset_stats();
    let o = apply(&sim, dir.path()).await;
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(
        sim.stats()
            .by_method
            .get("container.projects.locations.clusters.nodePools.delete"),
        None
    );
    let tiny = node_pools(&sim)
        .await
        .into_iter()
        .find(|p| p["name"] == "tiny-0")
        .unwrap();
    assert_eq!(tiny["config"]["labels"]["team"], "research");

    // Labels and taints together: one update request per field group.
    std::fs::write(
        dir.path().join("tiny.yaml"),
        slice_yaml(
            "tiny",
            "tpu-v6e-slice",
            "1x1",
            1,
            "  nodeLabels:\n    team: infra\n  taints:\n    - {key: dedicated, value: infra, effect: NoSchedule}\n",
        ),
    )
    .unwrap();
    sim.reset_stats();
    let o = apply(&sim, dir.path()).await;
    assert!(o.status.success(), "{}", text(&o));
    let updates = "container.projects.locations.clusters.nodePools.update";
    assert_eq!(sim.stats().by_method.get(updates), Some(&2));
    let tiny = node_pools(&sim)
        .await
        .into_iter()
        .find(|p| p["name"] == "tiny-0")
        .unwrap();
    assert_eq!(tiny["config"]["labels"]["team"], "infra");
    assert_eq!(tiny["config"]["taints"][0]["key"], "dedicated", "{tiny}");
    let o = slicectl(
        &sim,
        &["plan", dir.path().to_str().unwrap(), "--detailed-exitcode"],
    )
    .await;
    assert_eq!(
        o.status.code(),
        Some(0),
        "converged after the update: {}",
        text(&o)
    );

    // A topology change is a replacement, with the reason on the field.
    std::fs::write(
        dir.path().join("llm.yaml"),
        slice_yaml(
            "llm",
            "tpu-v5p-slice",
            "2x2x4",
            2,
            "  capacity:\n    type: spot\n  nodeLabels:\n    team: llm\n",
        ),
    )
    .unwrap();
    let o = slicectl(&sim, &["plan", dir.path().to_str().unwrap()]).await;
    let out = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(out.contains("-/+ node_pool \"llm-0\""), "{out}");
    assert!(
        out.contains("placementPolicy.tpuTopology: \"2x2x2\" → \"2x2x4\"  # forces replacement"),
        "{out}"
    );
    assert!(
        out.contains("Plan: 0 to create, 0 to update in place, 2 to replace, 0 to destroy."),
        "{out}"
    );
    let o = apply(&sim, dir.path()).await;
    assert!(o.status.success(), "{}", text(&o));
    let llm = node_pools(&sim)
        .await
        .into_iter()
        .find(|p| p["name"] == "llm-0")
        .unwrap();
    assert_eq!(llm["placementPolicy"]["tpuTopology"], "2x2x4");
    assert_eq!(llm["initialNodeCount"], 4);

    // A removed spec is a delete (pool first, then its workload policy).
    std::fs::remove_file(dir.path().join("iron.yaml")).unwrap();
    let o = apply(&sim, dir.path()).await;
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(pool_names(&sim).await, vec!["llm-0", "llm-1", "tiny-0"]);
    assert!(policy_names(&sim).await.is_empty());
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn faults_at_a_steady_rate_still_converge() {
    let faults = FaultConfig {
        rate_429: 0.1,
        rate_503: 0.1,
        stockout_rate: 0.2,
        operation_quota: 2,
        ..FaultConfig::default()
    };
    let sim = sim(Duration::from_millis(30), 7, faults).await;
    let dir = spec_dir(&fleet());
    let mut converged = false;
    for _round in 0..8 {
        let _ = apply(&sim, dir.path()).await;
        let o = slicectl(
            &sim,
            &["plan", dir.path().to_str().unwrap(), "--detailed-exitcode"],
        )
        .await;
        if o.status.code() == Some(0) {
            converged = true;
            break;
        }
    }
    assert!(converged, "did not converge under faults");
    let injected = sim.stats().faults_injected;
    sim.set_faults(FaultConfig::default()); // the checks below read through the simulator too
    assert_eq!(
        pool_names(&sim).await,
        vec!["iron-0", "llm-0", "llm-1", "tiny-0"]
    );
    for p in node_pools(&sim).await {
        assert_eq!(p["status"], "RUNNING", "{p}");
    }
    assert!(injected > 0, "the test must actually inject faults");
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn stockout_is_a_failure_not_a_success() {
    let faults = FaultConfig {
        stockout_rate: 1.0,
        ..FaultConfig::default()
    };
    let sim = sim(Duration::from_millis(10), 3, faults).await;
    let dir = spec_dir(&[(
        "tiny.yaml",
        slice_yaml("tiny", "tpu-v6e-slice", "1x1", 1, ""),
    )]);
    let o = apply(&sim, dir.path()).await;
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let out = text(&o);
    assert!(out.contains("Apply FAILED"), "{out}");
    assert!(
        out.contains("STOCKOUT") || out.contains("RESOURCE_POOL_EXHAUSTED"),
        "{out}"
    );
    // status shows the failure.
    let o = slicectl(&sim, &["status", dir.path().to_str().unwrap()]).await;
    let table = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(table.contains("ERROR"), "{table}");
    assert!(
        table.contains("STOCKOUT") || table.contains("RESOURCE_POOL_EXHAUSTED"),
        "{table}"
    );
    // The next plan replaces the pool left in ERROR.
    let o = slicectl(&sim, &["plan", dir.path().to_str().unwrap()]).await;
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("ERROR state"),
        "{}",
        text(&o)
    );
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn retryable_faults_are_absorbed_within_one_apply() {
    // 429s and 503s are retried, and GKE's concurrency refusals (a quota of
    // 2 operations per cluster) waited out, inside the apply: one run
    // converges, with no second round needed.
    let faults = FaultConfig {
        rate_429: 0.15,
        rate_503: 0.15,
        operation_quota: 2,
        ..FaultConfig::default()
    };
    let sim = sim(Duration::from_millis(30), 11, faults).await;
    let dir = spec_dir(&fleet());
    let o = apply(&sim, dir.path()).await;
    assert!(o.status.success(), "{}", text(&o));
    let injected = sim.stats().faults_injected;
    sim.set_faults(FaultConfig::default());
    assert!(injected > 0, "the test must actually inject faults");
    let o = slicectl(
        &sim,
        &["plan", dir.path().to_str().unwrap(), "--detailed-exitcode"],
    )
    .await;
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(
        pool_names(&sim).await,
        vec!["iron-0", "llm-0", "llm-1", "tiny-0"]
    );
    sim.shutdown().await;
}

/// Waiting costs reads per location, not per operation: eight pools created
/// at once in one cluster, their operations taking 3 s, are waited on
/// through the location's `operations.list` (a tick within max(1 s, 10 % of
/// the wait), shared by all eight) and never one `operations.get` each.
#[tokio::test(flavor = "multi_thread")]
async fn waits_read_each_location_once_per_tick() {
    let latency = Duration::from_secs(3);
    let faults = FaultConfig {
        concurrency_rules: false,
        ..FaultConfig::default()
    };
    let sim = sim(latency, 21, faults).await;
    let dir = spec_dir(&[(
        "many.yaml",
        slice_yaml("many", "tpu-v6e-slice", "1x1", 8, ""),
    )]);
    let o = apply(&sim, dir.path()).await;
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(pool_names(&sim).await.len(), 8);
    let st = sim.stats();
    let count = |m: &str| st.by_method.get(m).copied().unwrap_or(0);
    assert_eq!(
        count("container.projects.locations.operations.get"),
        0,
        "{st:?}"
    );
    // One list while observing, then one per tick for one location: a tick
    // at least every 0.75 s (1 s less jitter) over about 3 s.
    let lists = count("container.projects.locations.operations.list");
    assert!(
        (2..=1 + 6).contains(&lists),
        "{lists} operations lists for 8 waits in one location: {st:?}"
    );
}
