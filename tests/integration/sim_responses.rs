//! Everything the simulator answers is itself valid against the discovery
//! document's response schema of the method (no invented fields, right JSON
//! types, enum names not numbers, int64 as strings).

use crate::sim_support;

use std::time::Duration;

use serde_json::{Value, json};
use sim_support::{CLUSTER, Client, GKE, start, tpu_pool};
use slicectl_sim::{FaultConfig, discovery};

fn check(method_id: &str, body: &Value) {
    let doc = if method_id.starts_with("container.") {
        discovery::container().unwrap()
    } else {
        discovery::compute().unwrap()
    };
    let schema = doc
        .response_schema(method_id)
        .unwrap_or_else(|| panic!("{method_id} has no response schema"));
    let normalised = doc
        .validate(schema, "", body)
        .unwrap_or_else(|errs| panic!("{method_id} response invalid: {errs:?}\n{body}"));
    assert_eq!(
        &normalised, body,
        "{method_id}: response is not in canonical form"
    );
}

#[tokio::test]
async fn responses_match_discovery_response_schemas() {
    let sim = start(
        Duration::ZERO,
        1,
        FaultConfig {
            stockout_rate: 0.5,
            ..Default::default()
        },
    )
    .await;
    let c = Client::new(&sim);
    let np = "container.projects.locations.clusters.nodePools";
    let pools = format!("{GKE}/clusters/c1/nodePools");
    let mut ops = Vec::new();
    for i in 0..4 {
        let (s, op) = c.post(&pools, tpu_pool(&format!("p{i}"))).await;
        assert_eq!(s, 200);
        check(&format!("{np}.create"), &op);
        ops.push(op);
    }
    for op in &ops {
        let done = c.wait_gke(op).await;
        check("container.projects.locations.operations.get", &done);
    }
    let (_, list) = c.get(&pools).await;
    check(&format!("{np}.list"), &list);
    let statuses: Vec<&str> = list["nodePools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["status"].as_str().unwrap())
        .collect();
    assert!(statuses.contains(&"ERROR"), "{statuses:?}");
    let (_, p) = c.get(&format!("{pools}/p0")).await;
    check(&format!("{np}.get"), &p);
    let upd = json!({"name": format!("{CLUSTER}/nodePools/p0"), "labels": {"labels": {"a": "b"}}});
    let (s, op) = c.send("PUT", &format!("{pools}/p0"), Some(upd)).await;
    assert_eq!(s, 200, "{op}");
    check(&format!("{np}.update"), &op);
    let (_, op) = c.send("DELETE", &format!("{pools}/p1"), None).await;
    check(&format!("{np}.delete"), &op);
    let (_, cl) = c.get(&format!("{GKE}/clusters/c1")).await;
    check("container.projects.locations.clusters.get", &cl);
    // `-`: every zone and region of the project, full Clusters as `get` has them.
    let (s, all) = c.get("/v1/projects/proj1/locations/-/clusters").await;
    assert_eq!(s, 200, "{all}");
    check("container.projects.locations.clusters.list", &all);
    assert_eq!(all["clusters"][0]["name"], cl["name"], "{all}");
    let (_, none) = c.get("/v1/projects/nobody/locations/-/clusters").await;
    check("container.projects.locations.clusters.list", &none);
    assert_eq!(
        none,
        json!({}),
        "no clusters: an empty message, as GKE sends"
    );
    let (_, ol) = c.get(&format!("{GKE}/operations")).await;
    check("container.projects.locations.operations.list", &ol);

    let rp = "/compute/v1/projects/proj1/regions/us-central2/resourcePolicies";
    let body = json!({"name": "wp1", "description": "d",
        "workloadPolicy": {"type": "HIGH_THROUGHPUT", "acceleratorTopology": "4x4x4"}});
    let (_, op) = c.post(rp, body).await;
    check("compute.resourcePolicies.insert", &op);
    let name = op["name"].as_str().unwrap();
    let ops_path = "/compute/v1/projects/proj1/regions/us-central2/operations";
    let (_, w) = c
        .post(&format!("{ops_path}/{name}/wait"), json!(null))
        .await;
    check("compute.regionOperations.wait", &w);
    let (_, g) = c.get(&format!("{ops_path}/{name}")).await;
    check("compute.regionOperations.get", &g);
    let (_, l) = c.get(ops_path).await;
    check("compute.regionOperations.list", &l);
    let (_, p) = c.get(&format!("{rp}/wp1")).await;
    check("compute.resourcePolicies.get", &p);
    let (_, l) = c.get(&format!("{rp}?maxResults=1")).await;
    check("compute.resourcePolicies.list", &l);
    let (_, a) = c
        .get("/compute/v1/projects/proj1/aggregated/resourcePolicies")
        .await;
    check("compute.resourcePolicies.aggregatedList", &a);
    let (_, z) = c
        .get("/compute/v1/projects/proj1/zones/us-central2-b")
        .await;
    check("compute.zones.get", &z);
    let (_, r) = c
        .get("/compute/v1/projects/proj1/regions/us-central2")
        .await;
    check("compute.regions.get", &r);
    let (_, d) = c.send("DELETE", &format!("{rp}/wp1"), None).await;
    check("compute.resourcePolicies.delete", &d);
    sim.shutdown().await;
}
