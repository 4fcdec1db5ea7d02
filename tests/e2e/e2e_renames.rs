//! Issue 24, item 3: renaming a slice never loses its capacity. Through the
//! binary against the simulator server, with operation latency and every
//! create stocked out (`PUT /_sim/faults`).

use crate::common;

use std::time::Duration;

use common::*;
use serde_json::Value;
use slicectl_sim::{FaultConfig, SimHandle};

/// `alpha` (v6e 2x2, 2 replicas) applied and RUNNING, then every create
/// stocked out and the simulator's counters reset.
async fn alpha_running_then_stockout() -> (SimHandle, tempfile::TempDir) {
    let sim = sim(Duration::from_millis(300), 1, FaultConfig::default()).await;
    let dir = spec_dir(&[("s.yaml", slice_yaml("alpha", "tpu-v6e-slice", "2x2", 2, ""))]);
    let o = apply(&sim, dir.path()).await;
    assert!(o.status.success(), "{}", text(&o));
    set_faults(&sim, serde_json::json!({"stockout_rate": 1.0})).await;
    let r = reqwest::Client::new()
        .post(format!("{}/_sim/reset-stats", sim.base_url()))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success());
    (sim, dir)
}

async fn stats(sim: &SimHandle) -> Value {
    reqwest::get(format!("{}/_sim/stats", sim.base_url()))
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

fn count(stats: &Value, method: &str) -> u64 {
    stats["by_method"][method].as_u64().unwrap_or(0)
}

const DELETE: &str = "container.projects.locations.clusters.nodePools.delete";
const CREATE: &str = "container.projects.locations.clusters.nodePools.create";

/// (name, status, slice label) of every pool.
async fn pools(sim: &SimHandle) -> Vec<(String, String, String)> {
    let mut out: Vec<(String, String, String)> = node_pools(sim)
        .await
        .iter()
        .map(|p| {
            (
                p["name"].as_str().unwrap_or_default().to_string(),
                p["status"].as_str().unwrap_or_default().to_string(),
                p["config"]["labels"]["slicectl.dev/slice"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            )
        })
        .collect();
    out.sort();
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn a_declared_rename_relabels_in_place_under_a_stockout() {
    let (sim, dir) = alpha_running_then_stockout().await;
    std::fs::write(
        dir.path().join("s.yaml"),
        slice_yaml(
            "gamma",
            "tpu-v6e-slice",
            "2x2",
            2,
            "  previousNames: [alpha]\n",
        ),
    )
    .unwrap();
    let o = apply(&sim, dir.path()).await;
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(t.contains("Renamed: slice gamma takes over"), "{t}");
    let st = stats(&sim).await;
    assert_eq!(count(&st, DELETE), 0, "no delete is sent: {st}");
    assert_eq!(count(&st, CREATE), 0, "no create is sent: {st}");
    assert_eq!(
        pools(&sim).await,
        vec![
            ("alpha-0".into(), "RUNNING".into(), "gamma".into()),
            ("alpha-1".into(), "RUNNING".into(), "gamma".into()),
        ]
    );
    for p in node_pools(&sim).await {
        assert_eq!(
            p["config"]["resourceLabels"]["slicectl-slice"], "gamma",
            "{p}"
        );
    }
    // Converged: the next plan changes nothing.
    let o = slicectl(
        &sim,
        &["plan", dir.path().to_str().unwrap(), "--detailed-exitcode"],
    )
    .await;
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    // And status reports the pools as gamma's.
    let o = slicectl(
        &sim,
        &["status", dir.path().to_str().unwrap(), "-o", "json"],
    )
    .await;
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    let rows: Value = serde_json::from_slice(&o.stdout).unwrap();
    let rows = rows.as_array().cloned().unwrap_or_default();
    assert_eq!(rows.len(), 2, "{t}");
    for r in &rows {
        assert_eq!(r["slice"], "gamma", "{t}");
        assert_eq!(r["state"], "RUNNING", "{t}");
    }
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_undeclared_rename_under_a_stockout_keeps_the_old_pools() {
    let (sim, dir) = alpha_running_then_stockout().await;
    std::fs::write(
        dir.path().join("s.yaml"),
        slice_yaml("gamma", "tpu-v6e-slice", "2x2", 2, ""),
    )
    .unwrap();
    let o = slicectl(&sim, &["plan", dir.path().to_str().unwrap()]).await;
    let t = text(&o);
    assert!(
        t.contains("slice alpha looks renamed to gamma")
            && t.contains("declare `previousNames: [alpha]` in gamma"),
        "{t}"
    );
    let o = apply(&sim, dir.path()).await;
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "the creates fail: {t}");
    let st = stats(&sim).await;
    assert_eq!(count(&st, CREATE), 2, "{st}");
    assert_eq!(count(&st, DELETE), 0, "no old pool is deleted: {st}");
    let left = pools(&sim).await;
    let running: Vec<&(String, String, String)> =
        left.iter().filter(|p| p.1 == "RUNNING").collect();
    assert_eq!(
        running,
        vec![
            &(
                "alpha-0".to_string(),
                "RUNNING".to_string(),
                "alpha".to_string()
            ),
            &(
                "alpha-1".to_string(),
                "RUNNING".to_string(),
                "alpha".to_string()
            ),
        ],
        "{left:?}\n{t}"
    );
    sim.shutdown().await;
}
