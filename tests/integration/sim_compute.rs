//! Compute wire format through the simulator's HTTP API: resource policies,
//! region/zone/global operations (get, list, wait), zones and regions.

use crate::sim_support;

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sim_support::{Client, GKE, start, tpu_pool};
use slicectl_sim::FaultConfig;

const RP: &str = "/compute/v1/projects/proj1/regions/us-central2/resourcePolicies";

fn wp(name: &str) -> Value {
    json!({"name": name, "region": "us-central2",
           "workloadPolicy": {"type": "HIGH_THROUGHPUT", "acceleratorTopology": "4x4x4"}})
}

async fn wait(c: &Client, op: &Value) -> Value {
    let link = op["selfLink"].as_str().unwrap();
    let path = link.strip_prefix(&c.base).unwrap();
    let (s, done) = c.post(&format!("{path}/wait"), json!(null)).await;
    assert_eq!(s, 200, "{done}");
    done
}

#[tokio::test]
async fn resource_policy_round_trip() {
    let sim = start(Duration::ZERO, 1, FaultConfig::default()).await;
    let c = Client::new(&sim);
    let api = format!("{}/compute/v1", sim.base_url());

    let (s, op) = c
        .post(
            &format!("{RP}?alt=json&%24apiVersion=2026-09-01"),
            wp("wp1"),
        )
        .await;
    assert_eq!(s, 200, "{op}");
    assert_eq!(op["kind"], "compute#operation");
    assert_eq!(op["operationType"], "insert");
    assert_eq!(op["status"], "RUNNING");
    assert!(op["id"].as_str().unwrap().parse::<u64>().is_ok());
    assert!(op["targetId"].as_str().unwrap().parse::<u64>().is_ok());
    assert_eq!(
        op["targetLink"],
        format!("{api}/projects/proj1/regions/us-central2/resourcePolicies/wp1")
    );
    assert_eq!(
        op["region"],
        format!("{api}/projects/proj1/regions/us-central2")
    );
    let name = op["name"].as_str().unwrap();
    assert_eq!(
        op["selfLink"],
        format!("{api}/projects/proj1/regions/us-central2/operations/{name}")
    );
    let done = wait(&c, &op).await;
    assert_eq!(done["status"], "DONE");
    assert_eq!(done["progress"], 100);
    assert!(done["endTime"].is_string());
    assert!(done.get("error").is_none());

    let (s, p) = c.get(&format!("{RP}/wp1")).await;
    assert_eq!(s, 200, "{p}");
    assert_eq!(p["kind"], "compute#resourcePolicy");
    assert_eq!(p["id"], op["targetId"]);
    assert_eq!(p["status"], "READY");
    assert_eq!(p["selfLink"], op["targetLink"]);
    assert_eq!(p["region"], op["region"]);
    assert!(p["creationTimestamp"].is_string());
    assert_eq!(
        p["workloadPolicy"],
        json!({"type": "HIGH_THROUGHPUT", "acceleratorTopology": "4x4x4", "acceleratorTopologyMode": "AUTO_CONNECT"})
    );

    // beta/alpha serve the same store, with links under their own version.
    let (s, pb) = c
        .get("/compute/beta/projects/proj1/regions/us-central2/resourcePolicies/wp1")
        .await;
    assert_eq!(s, 200);
    assert!(pb["selfLink"].as_str().unwrap().contains("/compute/beta/"));
    let (s, _) = c
        .get("/compute/alpha/projects/proj1/regions/us-central2/resourcePolicies/wp1")
        .await;
    assert_eq!(s, 200);

    let (s, agg) = c
        .get("/compute/v1/projects/proj1/aggregated/resourcePolicies")
        .await;
    assert_eq!(s, 200);
    assert_eq!(
        agg["items"]["regions/us-central2"]["resourcePolicies"][0]["name"],
        "wp1"
    );

    let (s, ops) = c
        .get("/compute/v1/projects/proj1/regions/us-central2/operations")
        .await;
    assert_eq!(s, 200);
    assert_eq!(ops["kind"], "compute#operationList");
    assert_eq!(ops["items"][0]["name"], name);
    let (s, got) = c
        .get(&format!(
            "/compute/v1/projects/proj1/regions/us-central2/operations/{name}"
        ))
        .await;
    assert_eq!(s, 200);
    assert_eq!(got["status"], "DONE");
    // The operation lives in its region only.
    let (s, e) = c
        .get(&format!(
            "/compute/v1/projects/proj1/zones/us-central2-b/operations/{name}"
        ))
        .await;
    assert_eq!(s, 404, "{e}");

    let (s, del) = c.send("DELETE", &format!("{RP}/wp1"), None).await;
    assert_eq!(s, 200, "{del}");
    assert_eq!(del["operationType"], "delete");
    assert_eq!(del["targetLink"], op["targetLink"]);
    let done = wait(&c, &del).await;
    assert!(done.get("error").is_none(), "{done}");
    let (s, e) = c.get(&format!("{RP}/wp1")).await;
    assert_eq!(s, 404);
    let msg =
        "The resource 'projects/proj1/regions/us-central2/resourcePolicies/wp1' was not found";
    assert_eq!(
        e,
        json!({"error": {"code": 404, "message": msg, "status": "NOT_FOUND",
            "errors": [{"message": msg, "domain": "global", "reason": "notFound"}], "details": []}})
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn list_is_paginated() {
    let sim = start(Duration::ZERO, 1, FaultConfig::default()).await;
    let c = Client::new(&sim);
    for i in 0..5 {
        let (s, _) = c.post(RP, wp(&format!("wp{i}"))).await;
        assert_eq!(s, 200);
    }
    let mut seen = Vec::new();
    let mut token: Option<String> = None;
    let mut pages = 0;
    loop {
        let mut path = format!("{RP}?maxResults=2");
        if let Some(t) = &token {
            path.push_str(&format!("&pageToken={t}"));
        }
        let (s, page) = c.get(&path).await;
        assert_eq!(s, 200, "{page}");
        assert_eq!(page["kind"], "compute#resourcePolicyList");
        pages += 1;
        for item in page["items"].as_array().unwrap() {
            seen.push(item["name"].as_str().unwrap().to_string());
        }
        match page["nextPageToken"].as_str() {
            Some(t) => token = Some(t.to_string()),
            None => break,
        }
    }
    assert_eq!(pages, 3);
    assert_eq!(seen, ["wp0", "wp1", "wp2", "wp3", "wp4"]);
    let (s, e) = c.get(&format!("{RP}?pageToken=garbage")).await;
    assert_eq!(s, 400, "{e}");
    sim.shutdown().await;
}

#[tokio::test]
async fn wait_long_polls_until_done() {
    let sim = start(Duration::from_millis(500), 1, FaultConfig::default()).await;
    let c = Client::new(&sim);
    let (_, op) = c.post(RP, wp("slow")).await;
    let (_, p) = c.get(&format!("{RP}/slow")).await;
    assert_eq!(p["status"], "CREATING");
    let t = Instant::now();
    let done = wait(&c, &op).await;
    assert_eq!(done["status"], "DONE");
    assert!(
        t.elapsed() >= Duration::from_millis(350),
        "{:?}",
        t.elapsed()
    );
    assert!(t.elapsed() < Duration::from_secs(5));
    let (_, p) = c.get(&format!("{RP}/slow")).await;
    assert_eq!(p["status"], "READY");
    sim.shutdown().await;
}

#[tokio::test]
async fn errors_duplicates_names_validation() {
    let sim = start(Duration::ZERO, 1, FaultConfig::default()).await;
    let c = Client::new(&sim);
    let (s, _) = c.post(RP, wp("dup")).await;
    assert_eq!(s, 200);
    let (s, e) = c.post(RP, wp("dup")).await;
    assert_eq!(s, 409);
    assert_eq!(e["error"]["status"], "ALREADY_EXISTS");
    assert_eq!(e["error"]["errors"][0]["reason"], "alreadyExists");
    assert_eq!(
        e["error"]["message"],
        "The resource 'projects/proj1/regions/us-central2/resourcePolicies/dup' already exists"
    );
    for bad in ["Bad_Name", "-x", &"a".repeat(64)] {
        let (s, e) = c.post(RP, wp(bad)).await;
        assert_eq!(s, 400, "{bad}");
        assert_eq!(
            e["error"]["message"],
            format!(
                "Invalid value for field 'resource.name': '{bad}'. Must be a match of regex '(?:[a-z](?:[-a-z0-9]{{0,61}}[a-z0-9])?)'"
            )
        );
        assert_eq!(e["error"]["errors"][0]["reason"], "invalid");
    }
    let (s, _) = c.post(RP, wp(&"a".repeat(63))).await;
    assert_eq!(s, 200);

    let mut unknown = wp("u");
    unknown["workloadPolicy"]["tpuTopology"] = json!("4x4x4");
    let (s, e) = c.post(RP, unknown).await;
    assert_eq!(s, 400);
    assert_eq!(
        e["error"]["message"],
        "Invalid JSON payload received. Unknown name \"tpuTopology\" at 'resource_policy_resource.workload_policy': Cannot find field."
    );
    let mut bad_enum = wp("u");
    bad_enum["workloadPolicy"]["type"] = json!("FAST");
    let (s, e) = c.post(RP, bad_enum).await;
    assert_eq!(s, 400);
    assert_eq!(
        e["error"]["message"],
        "Invalid value at 'resource_policy_resource.workload_policy.type' (type.googleapis.com/google.cloud.compute.v1.ResourcePolicyWorkloadPolicy.Type), \"FAST\""
    );
    let (s, e) = c.send("POST", RP, Some(json!("not an object"))).await;
    assert_eq!(s, 400, "{e}");

    let (s, _) = c
        .get("/compute/v1/projects/proj1/regions/nowhere/resourcePolicies")
        .await;
    assert_eq!(s, 404);
    let (s, e) = c.get("/compute/v1/projects/proj1/global/images").await;
    assert_eq!(s, 404, "{e}");
    assert_eq!(e["error"]["status"], "NOT_FOUND");
    sim.shutdown().await;
}

#[tokio::test]
async fn zones_regions_and_zone_global_operations() {
    let sim = start(Duration::ZERO, 1, FaultConfig::default()).await;
    let c = Client::new(&sim);
    let api = format!("{}/compute/v1", sim.base_url());
    let (s, z) = c
        .get("/compute/v1/projects/proj1/zones/us-central2-b")
        .await;
    assert_eq!(s, 200);
    assert_eq!(z["kind"], "compute#zone");
    assert_eq!(z["name"], "us-central2-b");
    assert_eq!(z["status"], "UP");
    assert_eq!(
        z["region"],
        format!("{api}/projects/proj1/regions/us-central2")
    );
    assert!(z["id"].as_str().unwrap().parse::<u64>().is_ok());
    let (s, r) = c
        .get("/compute/v1/projects/proj1/regions/us-central2")
        .await;
    assert_eq!(s, 200);
    assert_eq!(r["kind"], "compute#region");
    assert_eq!(r["zones"].as_array().unwrap().len(), 3);
    let (s, _) = c.get("/compute/v1/projects/proj1/zones/atlantis").await;
    assert_eq!(s, 404);
    for scope in ["zones/us-central2-b", "global"] {
        let (s, l) = c
            .get(&format!("/compute/v1/projects/proj1/{scope}/operations"))
            .await;
        assert_eq!(s, 200, "{l}");
        assert!(l.get("items").is_none());
        let (s, _) = c
            .post(
                &format!("/compute/v1/projects/proj1/{scope}/operations/operation-x/wait"),
                json!(null),
            )
            .await;
        assert_eq!(s, 404);
    }
    sim.shutdown().await;
}

#[tokio::test]
async fn deleting_a_policy_in_use_fails_in_the_operation() {
    let sim = start(Duration::ZERO, 1, FaultConfig::default()).await;
    let c = Client::new(&sim);
    let (_, op) = c.post(RP, wp("wp-used")).await;
    wait(&c, &op).await;
    let mut pool = tpu_pool("uses-wp");
    pool["nodePool"]["placementPolicy"] = json!({"policyName": "wp-used"});
    let (s, op) = c.post(&format!("{GKE}/clusters/c1/nodePools"), pool).await;
    assert_eq!(s, 200, "{op}");
    c.wait_gke(&op).await;
    let (_, del) = c.send("DELETE", &format!("{RP}/wp-used"), None).await;
    let done = wait(&c, &del).await;
    assert_eq!(done["status"], "DONE");
    assert_eq!(
        done["error"]["errors"][0]["code"],
        "RESOURCE_IN_USE_BY_ANOTHER_RESOURCE"
    );
    assert_eq!(done["httpErrorStatusCode"], 400);
    let (s, p) = c.get(&format!("{RP}/wp-used")).await;
    assert_eq!(s, 200);
    assert_eq!(p["status"], "READY");
    sim.shutdown().await;
}
