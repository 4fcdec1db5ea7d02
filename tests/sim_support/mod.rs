//! Shared helpers for the simulator's integration tests.
#![allow(dead_code)]

use std::time::Duration;

use serde_json::{Value, json};
use slicectl_sim::{FaultConfig, SimConfig, SimHandle, Simulator};

pub const CLUSTER: &str = "projects/proj1/locations/us-central2/clusters/c1";
pub const GKE: &str = "/v1/projects/proj1/locations/us-central2";
pub const COMPUTE: &str = "/compute/v1/projects/proj1";

pub async fn start(latency: Duration, seed: u64, faults: FaultConfig) -> SimHandle {
    let cfg = SimConfig {
        clusters: vec![CLUSTER.to_string()],
        operation_latency: latency,
        seed,
        faults,
    };
    Simulator::start(cfg, "127.0.0.1:0".parse().unwrap())
        .await
        .expect("simulator starts")
}

pub struct Client {
    pub base: String,
    http: reqwest::Client,
}

impl Client {
    pub fn new(sim: &SimHandle) -> Self {
        let _ = rustls::crypto::ring::default_provider().install_default();
        Self {
            base: sim.base_url(),
            http: reqwest::Client::new(),
        }
    }

    pub async fn send(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        let url = format!("{}{}", self.base, path);
        let m = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let mut req = self.http.request(m, &url);
        if let Some(b) = body {
            req = req.json(&b);
        }
        let resp = req
            .send()
            .await
            .unwrap_or_else(|e| panic!("{method} {url}: {e}"));
        let status = resp.status().as_u16();
        let text = resp.text().await.unwrap();
        let v =
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{method} {url}: {e}: {text}"));
        (status, v)
    }

    pub async fn get(&self, path: &str) -> (u16, Value) {
        self.send("GET", path, None).await
    }

    pub async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        self.send("POST", path, Some(body)).await
    }

    /// Polls a GKE operation until DONE.
    pub async fn wait_gke(&self, op: &Value) -> Value {
        let name = op["name"].as_str().unwrap();
        let loc = op["location"].as_str().unwrap();
        for _ in 0..200 {
            let (s, v) = self
                .get(&format!(
                    "/v1/projects/proj1/locations/{loc}/operations/{name}"
                ))
                .await;
            assert_eq!(s, 200, "{v}");
            if v["status"] == "DONE" {
                return v;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("operation {name} never finished");
    }
}

/// A realistic multi-host TPU node pool as slicectl sends it.
pub fn tpu_pool(name: &str) -> Value {
    json!({
        "nodePool": {
            "name": name,
            "initialNodeCount": 16,
            "locations": ["us-central2-b"],
            "config": {
                "machineType": "ct4p-hightpu-4t",
                "labels": {"slicectl.dev/slice": name, "team": "ml"},
                "resourceLabels": {"managed-by": "slicectl", "owner": "o1"},
                "taints": [{"key": "google.com/tpu", "value": "present", "effect": "NO_SCHEDULE"}],
                "spot": true,
                "reservationAffinity": {"consumeReservationType": "NO_RESERVATION"}
            },
            "placementPolicy": {"type": "COMPACT", "tpuTopology": "4x4x4"},
            "management": {"autoRepair": true, "autoUpgrade": false},
            "maxPodsConstraint": {"maxPodsPerNode": "32"},
            "upgradeSettings": {"maxSurge": 0, "maxUnavailable": 1}
        },
        "parent": CLUSTER
    })
}
