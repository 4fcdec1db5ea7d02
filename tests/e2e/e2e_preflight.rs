//! Quota and reservation preflight end to end (issue 20 items 3 and 5): the
//! binary against a simulator whose regional TPU quotas and specific
//! reservations are set, read with `regions.get` (v4, v5e), Cloud Quotas'
//! `quotaInfos.get` (v5p, v6e, TPU7x) and `reservations.get` before
//! anything is sent.

use crate::common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::*;
use serde_json::{Value, json};
use slicectl_sim::{FaultConfig, SimConfig, Simulator};

const CREATE: &str = "container.projects.locations.clusters.nodePools.create";

fn creates(sim: &slicectl_sim::SimHandle) -> u64 {
    sim.stats().by_method.get(CREATE).copied().unwrap_or(0)
}

async fn get(sim: &slicectl_sim::SimHandle, path: &str) -> Value {
    let url = format!(
        "{}/compute/v1/projects/example-project/{path}",
        sim.base_url()
    );
    reqwest::get(url).await.unwrap().json().await.unwrap()
}

/// Asserts that the output `t` says each of `wants`.
fn assert_says(t: &str, wants: &[&str]) {
    for want in wants {
        assert!(t.contains(want), "{want:?} in {t}");
    }
}

/// `apply` converges the one slice that fits (`pool`, one create) and sends
/// nothing for the refused ones (exit 1: a refusal stands); the next plan
/// then says `next`, counting the chips that pool holds.
async fn apply_converges_then_plan_says(
    sim: &slicectl_sim::SimHandle,
    dir: &std::path::Path,
    pool: &str,
    next: &str,
) {
    let o = apply(sim, dir).await;
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "a refusal stands: {t}");
    assert_eq!(pool_names(sim).await, vec![pool], "{t}");
    assert_eq!(creates(sim), 1, "{:?}", sim.stats());
    let o = slicectl(sim, &["plan", dir.to_str().unwrap()]).await;
    assert_says(&text(&o), &[next]);
}

fn quota(metric: &str, limit: u64) -> FaultConfig {
    FaultConfig {
        quotas: BTreeMap::from([(format!("{REGION}/{metric}"), limit)]),
        ..FaultConfig::default()
    }
}

/// A v5p plan whose creates need more chips than the region's quota has
/// left (its limit read from Cloud Quotas, its usage observed) shows the
/// figures and refuses the slice that does not fit (`quota_insufficient`);
/// `apply` sends nothing for it, and the slice that fits converges; the
/// next plan counts the chips it took.
#[tokio::test(flavor = "multi_thread")]
async fn a_plan_past_the_quota_shows_the_figures_and_the_slices_that_fit_converge() {
    let sim = sim(Duration::from_millis(10), 1, quota("TPU_V5P", 8)).await;
    // big: 16 chips (refused, 8 left); small: 8 chips (fits).
    let dir = spec_dir(&[
        (
            "big.yaml",
            slice_yaml("big", "tpu-v5p-slice", "2x2x4", 1, ""),
        ),
        (
            "small.yaml",
            slice_yaml("small", "tpu-v5p-slice", "2x2x2", 1, ""),
        ),
    ]);
    let d = dir.path().to_str().unwrap();
    let o = slicectl(&sim, &["plan", d]).await;
    let t = text(&o);
    assert_ne!(o.status.code(), Some(0), "{t}");
    assert_says(
        &t,
        &[
            "Preflight (quotas and reservations, read before anything is sent):",
            "✗ TPU_V5P in us-central1 (project example-project): the plan needs 24 chips; the quota has 8 left (limit 8, usage 0 observed; limit from Cloud Quotas)",
            "refused: slice.big[0].node_pool",
            "[quota_insufficient]",
            "slice.big[0].node_pool needs 16 TPU_V5P chips in us-central1 (project example-project); the quota has 8 left",
        ],
    );
    let o = slicectl(&sim, &["plan", d, "--output", "json"]).await;
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let q = &v["preflight"]["quotas"][0];
    assert_eq!(
        (
            &q["metric"],
            &q["region"],
            &q["limit"],
            &q["left"],
            &q["needed"]
        ),
        (
            &Value::from("TPU_V5P"),
            &Value::from("us-central1"),
            &Value::from(8),
            &Value::from(8),
            &Value::from(24)
        ),
        "{v:#}"
    );
    assert_eq!(v["refused"][0]["code"], "quota_insufficient", "{v:#}");
    assert_eq!(creates(&sim), 0, "plan sends nothing");

    // apply: the slice that fits converges, nothing is sent for the other;
    // the next plan counts the 8 chips small-0 holds.
    apply_converges_then_plan_says(
        &sim,
        dir.path(),
        "small-0",
        "✗ TPU_V5P in us-central1 (project example-project): the plan needs 16 chips; the quota has 0 left (limit 8, usage 8 observed; limit from Cloud Quotas)",
    )
    .await;
    // Cloud Quotas serves the limit; regions.get does not list v5p.
    let info: Value = reqwest::get(format!(
        "{}/v1/projects/example-project/locations/global/services/compute.googleapis.com/quotaInfos/TPU-V5P-per-project-region",
        sim.base_url()
    ))
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    assert_eq!(
        info["dimensionsInfos"][0],
        serde_json::json!({"dimensions": {"region": "us-central1"}, "details": {"value": "8"},
                           "applicableLocations": ["us-central1"]}),
        "{info:#}"
    );
    let region = get(&sim, "regions/us-central1").await;
    assert!(region.get("quotas").is_none(), "{region:#}");
    sim.shutdown().await;
}

/// A specific reservation one VM short: the plan says how many are free and
/// refuses the slice (`reservation_insufficient`); nothing is sent.
#[tokio::test(flavor = "multi_thread")]
async fn a_reservation_short_by_one_vm_is_refused_before_anything_is_sent() {
    let faults = FaultConfig {
        reservations: BTreeMap::from([(
            "projects/example-project/zones/us-central1-a/reservations/r1".to_string(),
            3,
        )]),
        ..FaultConfig::default()
    };
    let sim = sim(Duration::from_millis(10), 1, faults).await;
    let reserved = "  capacity:\n    type: reservation\n    reservation:\n      name: r1\n";
    // 2x2x4 v5p: 4 hosts on a 3-VM reservation.
    let dir = spec_dir(&[(
        "r.yaml",
        slice_yaml("r", "tpu-v5p-slice", "2x2x4", 1, reserved),
    )]);
    let o = apply(&sim, dir.path()).await;
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert_says(
        &t,
        &[
            "✗ reservation r1 in us-central1-a (project example-project): the plan needs 4 VMs; 3 of 3 free (0 in use)",
            "[reservation_insufficient]",
            "slice.r[0].node_pool needs 4 VMs of reservation r1 in us-central1-a (project example-project); it has 3 of 3 free",
        ],
    );
    assert_eq!(creates(&sim), 0, "{:?}", sim.stats());
    let r = get(&sim, "zones/us-central1-a/reservations/r1").await;
    assert_eq!(r["specificReservation"]["count"], "3", "{r:#}");
    assert_eq!(r["specificReservation"]["inUseCount"], "0", "{r:#}");
    sim.shutdown().await;
}

/// A caller without `compute.regions.get` or `cloudquotas.quotas.get` gets
/// a warning and no preflight, never a failed plan; the create then meets
/// GKE's own quota error.
#[tokio::test(flavor = "multi_thread")]
async fn without_permission_to_read_quotas_the_plan_warns_and_goes_ahead() {
    let faults = FaultConfig {
        denied_methods: vec![
            "compute.regions.get".into(),
            "cloudquotas.quotas.get".into(),
        ],
        ..quota("TPU_V5P", 4)
    };
    let sim = sim(Duration::from_millis(10), 1, faults).await;
    let dir = spec_dir(&[
        ("s.yaml", slice_yaml("s", "tpu-v5p-slice", "2x2x2", 1, "")),
        (
            "lite.yaml",
            slice_yaml("lite", "tpu-v5-lite-podslice", "2x2", 1, ""),
        ),
    ]);
    let d = dir.path().to_str().unwrap();
    let o = slicectl(&sim, &["plan", d, "--detailed-exitcode"]).await;
    let t = text(&o);
    assert_eq!(o.status.code(), Some(2), "changes, no failure: {t}");
    assert_says(
        &t,
        &[
            "Warning: quotas of projects/example-project/regions/us-central1 not read",
            "HTTP 403 PERMISSION_DENIED",
            "Required 'compute.regions.get' permission for 'projects/example-project/regions/us-central1'",
            "needs compute.regions.get (roles/compute.viewer)",
            "Warning: quota projects/example-project/locations/global/services/compute.googleapis.com/quotaInfos/TPU-V5P-per-project-region not read",
            "Permission 'cloudquotas.quotas.get' denied on resource",
            "needs cloudquotas.quotas.get (roles/cloudquotas.viewer)",
        ],
    );
    assert!(!t.contains("quota_insufficient"), "{t}");
    assert!(!t.contains("not checked"), "{t}");
    // The create is sent, and GKE refuses it for the quota (403).
    let o = apply(&sim, dir.path()).await;
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(
        t.contains("Insufficient regional quota to satisfy request: resource \"TPU_V5P\": request requires '8.0' and is short '4.0'. project has a quota of '4.0' with '4.0' available."),
        "{t}"
    );
    assert_eq!(pool_names(&sim).await, vec!["lite-0"], "{t}");
    sim.shutdown().await;
}

/// GKE TPU7x: a plan past the TPU7x family quota
/// (`TPUS-PER-TPU-FAMILY-per-project-region`, `tpu_family=tpu7x`) refuses
/// the slice that does not fit with `quota_insufficient` and the figures,
/// and a Spot slice past `PREEMPTIBLE-TPU7X-per-project-region` likewise;
/// `apply` sends nothing for them, the slice that fits converges with its
/// workload policy, and the next plan counts the chips it took.
#[tokio::test(flavor = "multi_thread")]
async fn a_tpu7x_plan_past_its_quotas_refuses_those_slices_and_the_rest_converge() {
    let faults = FaultConfig {
        quotas: BTreeMap::from([
            (format!("{REGION}/TPUS_PER_TPU_FAMILY/TPU7X"), 8),
            (format!("{REGION}/PREEMPTIBLE_TPU7X"), 4),
        ]),
        ..FaultConfig::default()
    };
    let sim = sim(Duration::from_millis(10), 1, faults).await;
    let spot = "  capacity:\n    type: spot\n";
    // big: 16 chips (refused, 8 left); iron: 8 chips (fits); spot: 8
    // preemptible chips (refused, 4 left).
    let dir = spec_dir(&[
        ("big.yaml", slice_yaml("big", "tpu7x", "2x2x4", 1, "")),
        ("iron.yaml", slice_yaml("iron", "tpu7x", "2x2x2", 1, "")),
        ("spot.yaml", slice_yaml("spot", "tpu7x", "2x2x2", 1, spot)),
    ]);
    let d = dir.path().to_str().unwrap();
    let o = slicectl(&sim, &["plan", d]).await;
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert_says(
        &t,
        &[
            "✗ TPUS_PER_TPU_FAMILY/TPU7X in us-central1 (project example-project): the plan needs 24 chips; the quota has 8 left (limit 8, usage 0 observed; limit from Cloud Quotas)",
            "refused: slice.big[0].node_pool",
            "✗ PREEMPTIBLE_TPU7X in us-central1 (project example-project): the plan needs 8 chips; the quota has 4 left (limit 4, usage 0 observed; limit from Cloud Quotas)",
            "refused: slice.spot[0].node_pool",
            "slice.big[0].node_pool needs 16 TPUS_PER_TPU_FAMILY/TPU7X chips in us-central1 (project example-project); the quota has 8 left",
            "slice.spot[0].node_pool needs 8 PREEMPTIBLE_TPU7X chips in us-central1 (project example-project); the quota has 4 left",
        ],
    );
    let o = slicectl(&sim, &["plan", d, "--output", "json"]).await;
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let mut refused: Vec<(String, String)> = v["refused"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["code"] == "quota_insufficient")
        .map(|r| {
            (
                r["address"].as_str().unwrap_or_default().to_string(),
                r["code"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    refused.sort();
    assert_eq!(
        refused,
        vec![
            (
                "slice.big[0].node_pool".to_string(),
                "quota_insufficient".to_string()
            ),
            (
                "slice.spot[0].node_pool".to_string(),
                "quota_insufficient".to_string()
            ),
        ],
        "{v:#}"
    );
    let family = v["preflight"]["quotas"]
        .as_array()
        .unwrap()
        .iter()
        .find(|q| q["metric"] == "TPUS_PER_TPU_FAMILY/TPU7X")
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        (
            &family["limit"],
            &family["left"],
            &family["needed"],
            &family["read_with"]
        ),
        (
            &Value::from(8),
            &Value::from(8),
            &Value::from(24),
            &Value::from("cloudquotas")
        ),
        "{v:#}"
    );

    // apply: iron converges (its workload policy, then its pool); nothing
    // is sent for big or spot; the next plan counts the 8 chips iron-0 holds.
    apply_converges_then_plan_says(
        &sim,
        dir.path(),
        "iron-0",
        "✗ TPUS_PER_TPU_FAMILY/TPU7X in us-central1 (project example-project): the plan needs 16 chips; the quota has 0 left (limit 8, usage 8 observed; limit from Cloud Quotas)",
    )
    .await;
    sim.shutdown().await;
}

/// TPU capacity slicectl does not observe (a v5p pool in a cluster no
/// Target names) is in Cloud Monitoring's usage: the plan takes that usage
/// (larger than the observed one) and refuses the slice the quota cannot
/// hold; a caller without `monitoring.timeSeries.list` gets a warning and
/// the observed usage, never a failed plan.
#[tokio::test(flavor = "multi_thread")]
async fn usage_slicectl_does_not_see_is_read_from_cloud_monitoring() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let other = "projects/example-project/locations/us-central1/clusters/other";
    let sim = Simulator::start(
        SimConfig {
            clusters: vec![CLUSTER.to_string(), other.to_string()],
            operation_latency: Duration::from_millis(10),
            seed: 1,
            faults: quota("TPU_V5P", 8),
        },
        "127.0.0.1:0".parse().unwrap(),
    )
    .await
    .unwrap();
    // 4 v5p chips in the other cluster (single host).
    let r = reqwest::Client::new()
        .post(format!("{}/v1/{other}/nodePools", sim.base_url()))
        .json(&json!({"parent": other, "nodePool": {
            "name": "elsewhere", "initialNodeCount": 1, "locations": ["us-central1-a"],
            "config": {"machineType": "ct5p-hightpu-4t"}}}))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{:?}", r.text().await);
    let dir = spec_dir(&[(
        "llm.yaml",
        slice_yaml("llm", "tpu-v5p-slice", "2x2x2", 1, ""),
    )]);
    let d = dir.path().to_str().unwrap();
    let o = slicectl(&sim, &["plan", d]).await;
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert_says(
        &t,
        &[
            "✗ TPU_V5P in us-central1 (project example-project): the plan needs 8 chips; the quota has 4 left (limit 8, usage 4 from Cloud Monitoring; limit from Cloud Quotas)",
            "slice.llm[0].node_pool needs 8 TPU_V5P chips in us-central1 (project example-project); the quota has 4 left (limit 8, usage 4 from Cloud Monitoring, 0 taken",
        ],
    );
    let o = slicectl(&sim, &["plan", d, "--output", "json"]).await;
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        v["preflight"]["quotas"][0]["usage_from"], "monitoring",
        "{v:#}"
    );
    assert!(
        sim.stats().by_method["monitoring.projects.timeSeries.list"] >= 1,
        "{:?}",
        sim.stats()
    );
    // Without the permission: a warning, the observed usage (0), the plan
    // goes ahead (and the create meets GKE's own quota error).
    let r = reqwest::Client::new()
        .put(format!("{}/_sim/faults", sim.base_url()))
        .json(&json!({"quotas": {"us-central1/TPU_V5P": 8},
                      "denied_methods": ["monitoring.timeSeries.list"]}))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success());
    let o = slicectl(&sim, &["plan", d, "--detailed-exitcode"]).await;
    let t = text(&o);
    assert_eq!(o.status.code(), Some(2), "changes, no failure: {t}");
    assert_says(
        &t,
        &[
            "Warning: usage of TPU-V5P-per-project-region not read from Cloud Monitoring",
            "Permission monitoring.timeSeries.list denied (or the resource may not exist).",
            "needs monitoring.timeSeries.list (roles/monitoring.viewer)",
            "✓ TPU_V5P in us-central1 (project example-project): the plan needs 8 chips; the quota has 8 left (limit 8, usage 0 observed; limit from Cloud Quotas)",
        ],
    );
    sim.shutdown().await;
}
