//! The installed `gcloud` CLI — a client nobody here wrote — reads back what
//! was created through the simulator's HTTP API, and its own create/delete
//! requests pass the simulator's discovery validation.

mod sim_support;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde_json::Value;
use sim_support::{CLUSTER, Client, GKE, start, tpu_pool};
use slicectl::sim::FaultConfig;

/// Runs gcloud against the simulator; returns stdout, panics with stderr on failure.
async fn gcloud(base: &str, config_dir: &Path, args: &[&str]) -> String {
    let which = Command::new("gcloud").arg("--version").output();
    if which.is_err() {
        panic!(
            "the gcloud CLI is not installed or not on PATH; this test drives the real gcloud \
             against the simulator and cannot run without it (install the Google Cloud SDK)"
        );
    }
    let mut cmd = Command::new("gcloud");
    cmd.args(args)
        .env("CLOUDSDK_CONFIG", config_dir)
        .env("CLOUDSDK_CORE_PROJECT", "proj1")
        .env("CLOUDSDK_AUTH_DISABLE_CREDENTIALS", "true")
        .env(
            "CLOUDSDK_API_ENDPOINT_OVERRIDES_CONTAINER",
            format!("{base}/"),
        )
        .env(
            "CLOUDSDK_API_ENDPOINT_OVERRIDES_COMPUTE",
            format!("{base}/compute/v1/"),
        )
        .env("CLOUDSDK_CORE_DISABLE_USAGE_REPORTING", "true")
        .env("CLOUDSDK_COMPONENT_MANAGER_DISABLE_UPDATE_CHECK", "true")
        .env("CLOUDSDK_CORE_CHECK_GCE_METADATA", "false")
        .env("CLOUDSDK_CORE_DISABLE_PROMPTS", "true");
    let out = tokio::task::spawn_blocking(move || cmd.output())
        .await
        .unwrap()
        .expect("gcloud runs");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(
        out.status.success(),
        "gcloud {args:?} failed ({}):\nstdout: {stdout}\nstderr: {stderr}",
        out.status
    );
    stdout
}

fn names(list: &Value) -> Vec<String> {
    let mut n: Vec<String> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap().to_string())
        .collect();
    n.sort();
    n
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gcloud_reads_back_and_drives_the_simulator() {
    let sim = start(Duration::from_millis(200), 1, FaultConfig::default()).await;
    let c = Client::new(&sim);
    let base = sim.base_url();
    let cfg = tempfile::tempdir().unwrap();

    // slicectl-style creates through the HTTP API.
    for name in ["tpu-a", "tpu-b"] {
        let (s, op) = c
            .post(&format!("{GKE}/clusters/c1/nodePools"), tpu_pool(name))
            .await;
        assert_eq!(s, 200, "{op}");
        let done = c.wait_gke(&op).await;
        assert!(done.get("error").is_none(), "{done}");
    }

    let loc = [
        "--cluster",
        "c1",
        "--location",
        "us-central2",
        "--format=json",
    ];
    let mut args = vec!["container", "node-pools", "list"];
    args.extend(loc);
    let list: Value = serde_json::from_str(&gcloud(&base, cfg.path(), &args).await).unwrap();
    assert_eq!(names(&list), ["tpu-a", "tpu-b"]);
    for p in list.as_array().unwrap() {
        assert_eq!(p["config"]["machineType"], "ct4p-hightpu-4t");
        assert_eq!(p["placementPolicy"]["type"], "COMPACT");
        assert_eq!(p["placementPolicy"]["tpuTopology"], "4x4x4");
        assert_eq!(p["config"]["labels"]["team"], "ml");
        assert_eq!(p["status"], "RUNNING");
    }

    let mut args = vec!["container", "node-pools", "describe", "tpu-a"];
    args.extend(loc);
    let desc: Value = serde_json::from_str(&gcloud(&base, cfg.path(), &args).await).unwrap();
    assert_eq!(desc["name"], "tpu-a");
    assert_eq!(desc["initialNodeCount"], 16);
    assert_eq!(desc["config"]["labels"]["slicectl.dev/slice"], "tpu-a");
    assert_eq!(desc["config"]["taints"][0]["effect"], "NO_SCHEDULE");
    assert_eq!(desc["maxPodsConstraint"]["maxPodsPerNode"], "32");

    // gcloud's own create request passes validation and completes.
    let args = [
        "container",
        "node-pools",
        "create",
        "gc-pool",
        "--cluster=c1",
        "--location=us-central2",
        "--node-locations=us-central2-b",
        "--machine-type=ct4p-hightpu-4t",
        "--tpu-topology=4x4x4",
        "--placement-type=COMPACT",
        "--num-nodes=16",
        "--format=json",
    ];
    gcloud(&base, cfg.path(), &args).await;
    let (s, pool) = c.get(&format!("{GKE}/clusters/c1/nodePools/gc-pool")).await;
    assert_eq!(s, 200, "{pool}");
    assert_eq!(pool["placementPolicy"]["tpuTopology"], "4x4x4");
    assert_eq!(pool["initialNodeCount"], 16);
    assert_eq!(pool["status"], "RUNNING");

    // Compute workload policy: create, describe, list, delete.
    let args = [
        "compute",
        "resource-policies",
        "create",
        "workload-policy",
        "wp1",
        "--type=HIGH_THROUGHPUT",
        "--accelerator-topology=4x4x4",
        "--region=us-central2",
    ];
    gcloud(&base, cfg.path(), &args).await;
    let args = [
        "compute",
        "resource-policies",
        "describe",
        "wp1",
        "--region=us-central2",
        "--format=json",
    ];
    let wp: Value = serde_json::from_str(&gcloud(&base, cfg.path(), &args).await).unwrap();
    assert_eq!(wp["name"], "wp1");
    assert_eq!(wp["status"], "READY");
    assert_eq!(wp["workloadPolicy"]["type"], "HIGH_THROUGHPUT");
    assert_eq!(wp["workloadPolicy"]["acceleratorTopology"], "4x4x4");
    assert_eq!(
        wp["workloadPolicy"]["acceleratorTopologyMode"],
        "AUTO_CONNECT"
    );
    let args = ["compute", "resource-policies", "list", "--format=json"];
    let list: Value = serde_json::from_str(&gcloud(&base, cfg.path(), &args).await).unwrap();
    assert_eq!(names(&list), ["wp1"]);
    let args = [
        "compute",
        "resource-policies",
        "delete",
        "wp1",
        "--region=us-central2",
        "--quiet",
    ];
    gcloud(&base, cfg.path(), &args).await;
    let (s, _) = c
        .get("/compute/v1/projects/proj1/regions/us-central2/resourcePolicies/wp1")
        .await;
    assert_eq!(s, 404);

    let stats = sim.stats();
    assert_eq!(
        stats.by_method["container.projects.locations.clusters.nodePools.create"],
        3
    );
    assert_eq!(stats.by_method["compute.resourcePolicies.insert"], 1);
    assert_eq!(stats.by_method["compute.resourcePolicies.delete"], 1);
    assert!(CLUSTER.ends_with("/c1"));
    sim.shutdown().await;
}
