//! Shared helpers of the end-to-end tests: a simulator in the test process,
//! the `slicectl` binary pointed at it, spec directories in temp dirs, a
//! child's output collected as it comes, and ([`k8s`]) the real test
//! control plane.
#![allow(dead_code)]

pub mod gotool;
pub mod image;
pub mod k8s;
pub mod status;

use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use slicectl_sim::{FaultConfig, SimConfig, SimHandle, Simulator};

pub const CLUSTER: &str = "projects/example-project/locations/us-central1/clusters/train";

/// The test cluster's region (workload policies live there).
pub const REGION: &str = "us-central1";

pub async fn sim(latency: Duration, seed: u64, faults: FaultConfig) -> SimHandle {
    // reqwest is built without a default TLS provider.
    let _ = rustls::crypto::ring::default_provider().install_default();
    Simulator::start(
        SimConfig {
            clusters: vec![CLUSTER.to_string()],
            operation_latency: latency,
            seed,
            faults,
        },
        "127.0.0.1:0".parse().unwrap(),
    )
    .await
    .unwrap()
}

/// Targets on the one test cluster (regional, us-central1), one per zone
/// that offers a TPU generation (Google's "TPU regions and zones"): `train`
/// in us-central1-b (v6e), `train-a` in us-central1-a (v5p, v5e) and
/// `train-c` in us-central1-c (tpu7x). [`slice_yaml`] picks the target of a
/// slice's generation.
pub const TARGET: &str = r#"apiVersion: slicectl.dev/v1alpha1
kind: Target
metadata:
  name: train
spec:
  project: example-project
  zone: us-central1-b
  ownerId: e2e
  gke:
    location: us-central1
    name: train
---
apiVersion: slicectl.dev/v1alpha1
kind: Target
metadata:
  name: train-a
spec:
  project: example-project
  zone: us-central1-a
  ownerId: e2e
  gke:
    location: us-central1
    name: train
---
apiVersion: slicectl.dev/v1alpha1
kind: Target
metadata:
  name: train-c
spec:
  project: example-project
  zone: us-central1-c
  ownerId: e2e
  gke:
    location: us-central1
    name: train
"#;

/// The target (in [`TARGET`]) whose zone offers the accelerator.
pub fn target_of(acc: &str) -> &'static str {
    match acc {
        "tpu-v5p-slice" | "tpu-v5-lite-podslice" => "train-a",
        "tpu7x" => "train-c",
        _ => "train",
    }
}

pub fn slice_yaml(name: &str, acc: &str, topo: &str, replicas: u32, extra: &str) -> String {
    let target = target_of(acc);
    format!(
        "apiVersion: slicectl.dev/v1alpha1\nkind: Slice\nmetadata:\n  name: {name}\nspec:\n  target: {target}\n  backend: gke\n  accelerator: {acc}\n  topology: \"{topo}\"\n  replicas: {replicas}\n{extra}"
    )
}

/// Writes `text` to `dir/name` as an editor or `git checkout` does: a
/// temporary file renamed into place.
pub fn put(dir: &Path, name: &str, text: &str) {
    let tmp = dir.join(format!(".{name}.tmp"));
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, dir.join(name)).unwrap();
}

/// Collects a child's pipe into a shared string, as it comes.
pub fn collect(mut r: impl tokio::io::AsyncRead + Unpin + Send + 'static) -> Arc<Mutex<String>> {
    use tokio::io::AsyncReadExt;
    let out = Arc::new(Mutex::new(String::new()));
    let o = out.clone();
    tokio::spawn(async move {
        let mut buf = [0u8; 4096];
        while let Ok(n) = r.read(&mut buf).await {
            if n == 0 {
                break;
            }
            o.lock()
                .unwrap()
                .push_str(&String::from_utf8_lossy(&buf[..n]));
        }
    });
    out
}

/// A child process whose stdout and stderr are collected as they come.
pub struct Piped {
    pub child: tokio::process::Child,
    pub stdout: Arc<Mutex<String>>,
    pub stderr: Arc<Mutex<String>>,
}

/// Spawns `cmd` with no stdin, its output collected, killed when dropped.
pub fn spawn_piped(cmd: &mut tokio::process::Command) -> Piped {
    let mut child = cmd
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let stdout = collect(child.stdout.take().unwrap());
    let stderr = collect(child.stderr.take().unwrap());
    Piped {
        child,
        stdout,
        stderr,
    }
}

/// A TCP port on loopback that was free a moment ago.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A spec dir with the target and the given slice files.
pub fn spec_dir(slices: &[(&str, String)]) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("target.yaml"), TARGET).unwrap();
    for (file, text) in slices {
        std::fs::write(d.path().join(file), text).unwrap();
    }
    d
}

pub fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_slicectl"))
}

/// Runs slicectl with the simulator endpoint.
pub async fn slicectl(sim: &SimHandle, args: &[&str]) -> Output {
    let mut cmd = tokio::process::Command::new(bin());
    cmd.args(args)
        .env("SLICECTL_API_ENDPOINT", sim.base_url())
        // The simulator's clusters are read with no Google token (deferred):
        // nothing runs in them unless a test links one (e2e_gate runs without
        // it), so they count as idle, not busy-unknown.
        .env("SLICECTL_UNREAD_CLUSTERS_IDLE", "true")
        .env("NO_COLOR", "1")
        .stdin(std::process::Stdio::null());
    cmd.output().await.unwrap()
}

/// The installed `gcloud` CLI pointed at a simulator at `base` (its
/// container and compute endpoints), with its own configuration directory
/// and no credentials, prompts or update checks.
pub fn gcloud_command(base: &str, config_dir: &Path) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new("gcloud");
    cmd.envs(gcloud_env(base, config_dir, "example-project"));
    cmd
}

/// The environment that points the real gcloud CLI at the simulator at
/// `base` (container and compute endpoints), with its own configuration
/// directory, default project `project`, and no credentials, prompts or
/// update checks: for `Command::envs`, std's or tokio's.
pub fn gcloud_env(base: &str, config_dir: &Path, project: &str) -> Vec<(&'static str, String)> {
    vec![
        ("CLOUDSDK_CONFIG", config_dir.display().to_string()),
        ("CLOUDSDK_CORE_PROJECT", project.to_string()),
        ("CLOUDSDK_AUTH_DISABLE_CREDENTIALS", "true".into()),
        (
            "CLOUDSDK_API_ENDPOINT_OVERRIDES_CONTAINER",
            format!("{base}/"),
        ),
        (
            "CLOUDSDK_API_ENDPOINT_OVERRIDES_COMPUTE",
            format!("{base}/compute/v1/"),
        ),
        // `gcloud beta quotas info …` (Cloud Quotas).
        (
            "CLOUDSDK_API_ENDPOINT_OVERRIDES_CLOUDQUOTAS",
            format!("{base}/"),
        ),
        ("CLOUDSDK_CORE_DISABLE_USAGE_REPORTING", "true".into()),
        (
            "CLOUDSDK_COMPONENT_MANAGER_DISABLE_UPDATE_CHECK",
            "true".into(),
        ),
        ("CLOUDSDK_CORE_CHECK_GCE_METADATA", "false".into()),
        ("CLOUDSDK_CORE_DISABLE_PROMPTS", "true".into()),
    ]
}

/// Sets the simulator server's faults (`PUT /_sim/faults`), e.g.
/// `{"stockout_rate": 1.0}`.
pub async fn set_faults(sim: &SimHandle, faults: Value) {
    let r = reqwest::Client::new()
        .put(format!("{}/_sim/faults", sim.base_url()))
        .json(&faults)
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "PUT /_sim/faults: {}", r.status());
}

pub fn text(o: &Output) -> String {
    format!(
        "exit: {:?}\n--- stdout\n{}\n--- stderr\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

pub async fn apply(sim: &SimHandle, dir: &Path) -> Output {
    slicectl(sim, &["apply", dir.to_str().unwrap(), "--auto-approve"]).await
}

/// Node pools of the test cluster, as the simulator serves them.
pub async fn node_pools(sim: &SimHandle) -> Vec<Value> {
    let url = format!("{}/v1/{CLUSTER}/nodePools", sim.base_url());
    let v: Value = reqwest::get(url).await.unwrap().json().await.unwrap();
    v["nodePools"].as_array().cloned().unwrap_or_default()
}

pub async fn pool_names(sim: &SimHandle) -> Vec<String> {
    let mut n: Vec<String> = node_pools(sim)
        .await
        .iter()
        .map(|p| p["name"].as_str().unwrap_or_default().to_string())
        .collect();
    n.sort();
    n
}

pub async fn policy_names(sim: &SimHandle) -> Vec<String> {
    let url = format!(
        "{}/compute/v1/projects/example-project/regions/{REGION}/resourcePolicies",
        sim.base_url()
    );
    let v: Value = reqwest::get(url).await.unwrap().json().await.unwrap();
    let mut n: Vec<String> = v["items"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|p| p["name"].as_str().unwrap_or_default().to_string())
        .collect();
    n.sort();
    n
}

/// Creates a node pool by hand (as gcloud would), and waits for it.
pub async fn create_by_hand(sim: &SimHandle, name: &str, labels: Value) {
    let body = serde_json::json!({
        "parent": CLUSTER,
        "nodePool": {"name": name, "initialNodeCount": 1,
                     "config": {"machineType": "e2-standard-4", "labels": labels}}
    });
    let r = reqwest::Client::new()
        .post(format!("{}/v1/{CLUSTER}/nodePools", sim.base_url()))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{:?}", r.text().await);
    wait_until_done(sim).await;
}

pub async fn delete_by_hand(sim: &SimHandle, name: &str) {
    start_delete_by_hand(sim, name).await;
    wait_until_done(sim).await;
}

/// Starts deleting a node pool by hand, without waiting for it.
pub async fn start_delete_by_hand(sim: &SimHandle, name: &str) {
    let r = reqwest::Client::new()
        .delete(format!("{}/v1/{CLUSTER}/nodePools/{name}", sim.base_url()))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{:?}", r.text().await);
}

/// Waits until no operation runs in the test cluster's location.
pub async fn wait_until_done(sim: &SimHandle) {
    let url = format!(
        "{}/v1/projects/example-project/locations/{REGION}/operations",
        sim.base_url()
    );
    for _ in 0..200 {
        let v: Value = reqwest::get(&url).await.unwrap().json().await.unwrap();
        let running = v["operations"]
            .as_array()
            .map(|ops| ops.iter().any(|o| o["status"] != "DONE"))
            .unwrap_or(false);
        if !running {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("operations still running");
}
