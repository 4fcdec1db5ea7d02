//! GKE wire format through the simulator's HTTP API: node pools, operations,
//! clusters, errors, validation, latency, stockouts, incompatible operations.

use crate::sim_support;

use std::time::Duration;

use serde_json::{Value, json};
use sim_support::{CLUSTER, Client, GKE, start, tpu_pool};
use slicectl_sim::FaultConfig;

const POOLS: &str = "/v1/projects/proj1/locations/us-central2/clusters/c1/nodePools";

#[tokio::test]
async fn node_pool_round_trip_with_server_defaults() {
    let sim = start(Duration::ZERO, 1, FaultConfig::default()).await;
    let c = Client::new(&sim);
    let base = sim.base_url();

    let (s, op) = c.post(POOLS, tpu_pool("tpu-a")).await;
    assert_eq!(s, 200, "{op}");
    assert!(op["name"].as_str().unwrap().starts_with("operation-"));
    assert_eq!(op["operationType"], "CREATE_NODE_POOL");
    assert_eq!(op["status"], "RUNNING");
    assert_eq!(op["location"], "us-central2");
    assert_eq!(op["zone"], "us-central2");
    // Like real GKE, operation links name the project by its number.
    let number = slicectl_sim::project_number("proj1");
    assert_eq!(number.len(), 12);
    let by_number = |path: &str| {
        format!(
            "{base}{}",
            path.replace("/projects/proj1/", &format!("/projects/{number}/"))
        )
    };
    assert_eq!(op["targetLink"], by_number(&format!("{POOLS}/tpu-a")));
    assert_eq!(
        op["selfLink"],
        by_number(&format!(
            "{GKE}/operations/{}",
            op["name"].as_str().unwrap()
        ))
    );
    assert!(op["startTime"].as_str().unwrap().ends_with('Z'));
    let done = c.wait_gke(&op).await;
    assert!(done["endTime"].is_string());
    assert!(done.get("error").is_none());

    let (s, p) = c.get(&format!("{POOLS}/tpu-a?alt=json")).await;
    assert_eq!(s, 200, "{p}");
    // What was sent comes back…
    assert_eq!(p["name"], "tpu-a");
    assert_eq!(p["initialNodeCount"], 16);
    assert_eq!(p["locations"], json!(["us-central2-b"]));
    assert_eq!(p["config"]["machineType"], "ct4p-hightpu-4t");
    assert_eq!(p["config"]["spot"], true);
    assert_eq!(p["config"]["resourceLabels"]["owner"], "o1");
    assert_eq!(
        p["placementPolicy"],
        json!({"type": "COMPACT", "tpuTopology": "4x4x4"})
    );
    assert_eq!(p["maxPodsConstraint"]["maxPodsPerNode"], "32");
    assert_eq!(p["upgradeSettings"]["maxSurge"], 0);
    assert_eq!(
        p["management"],
        json!({"autoRepair": true, "autoUpgrade": false})
    );
    // …plus what GKE's server fills in.
    assert_eq!(p["status"], "RUNNING");
    assert_eq!(p["config"]["imageType"], "COS_CONTAINERD");
    assert_eq!(p["config"]["diskSizeGb"], 100);
    assert_eq!(p["config"]["diskType"], "pd-balanced");
    assert_eq!(
        p["config"]["metadata"],
        json!({"disable-legacy-endpoints": "true"})
    );
    assert_eq!(p["config"]["oauthScopes"].as_array().unwrap().len(), 6);
    assert_eq!(p["upgradeSettings"]["strategy"], "SURGE");
    assert!(p["version"].as_str().unwrap().contains("-gke."));
    assert_eq!(p["etag"].as_str().unwrap().len(), 32);
    assert_eq!(p["selfLink"], format!("{base}{POOLS}/tpu-a"));
    let igm = p["instanceGroupUrls"][0].as_str().unwrap();
    assert!(
        igm.starts_with(&format!(
            "{base}/compute/v1/projects/proj1/zones/us-central2-b/instanceGroupManagers/gke-c1-tpu-a-"
        )),
        "{igm}"
    );

    // Same under v1beta1; list; cluster; operations list.
    let (s, pb) = c
        .get("/v1beta1/projects/proj1/locations/us-central2/clusters/c1/nodePools/tpu-a")
        .await;
    assert_eq!(s, 200);
    assert!(pb["selfLink"].as_str().unwrap().contains("/v1beta1/"));
    let (s, list) = c.get(POOLS).await;
    assert_eq!(s, 200);
    assert_eq!(list["nodePools"].as_array().unwrap().len(), 1);
    assert_eq!(list["nodePools"][0]["name"], "tpu-a");
    let (s, cl) = c.get(&format!("{GKE}/clusters/c1")).await;
    assert_eq!(s, 200, "{cl}");
    assert_eq!(cl["name"], "c1");
    assert_eq!(cl["status"], "RUNNING");
    assert_eq!(cl["nodePools"][0]["name"], "tpu-a");
    let (s, ops) = c.get(&format!("{GKE}/operations")).await;
    assert_eq!(s, 200);
    assert_eq!(ops["operations"][0]["name"], op["name"]);
    assert_eq!(ops["operations"][0]["status"], "DONE");
    assert!(CLUSTER.ends_with("c1"));
    sim.shutdown().await;
}

#[tokio::test]
async fn operations_progress_with_latency() {
    let sim = start(Duration::from_millis(400), 1, FaultConfig::default()).await;
    let c = Client::new(&sim);
    let (_, op) = c.post(POOLS, tpu_pool("slow")).await;
    let (_, p) = c.get(&format!("{POOLS}/slow")).await;
    assert_eq!(p["status"], "PROVISIONING");
    let (_, o) = c
        .get(&format!(
            "{GKE}/operations/{}",
            op["name"].as_str().unwrap()
        ))
        .await;
    assert_eq!(o["status"], "RUNNING");
    assert!(o.get("endTime").is_none());
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (_, o) = c
        .get(&format!(
            "{GKE}/operations/{}",
            op["name"].as_str().unwrap()
        ))
        .await;
    assert_eq!(o["status"], "DONE");
    let (_, p) = c.get(&format!("{POOLS}/slow")).await;
    assert_eq!(p["status"], "RUNNING");

    let (s, del) = c.send("DELETE", &format!("{POOLS}/slow"), None).await;
    assert_eq!(s, 200, "{del}");
    assert_eq!(del["operationType"], "DELETE_NODE_POOL");
    let (_, p) = c.get(&format!("{POOLS}/slow")).await;
    assert_eq!(p["status"], "STOPPING");
    let done = c.wait_gke(&del).await;
    assert!(done.get("error").is_none());
    let (s, _) = c.get(&format!("{POOLS}/slow")).await;
    assert_eq!(s, 404);
    sim.shutdown().await;
}

#[tokio::test]
async fn update_replaces_labels_taints_resource_labels() {
    let sim = start(Duration::ZERO, 1, FaultConfig::default()).await;
    let c = Client::new(&sim);
    let (_, op) = c.post(POOLS, tpu_pool("up")).await;
    c.wait_gke(&op).await;
    let (_, before) = c.get(&format!("{POOLS}/up")).await;
    let body = json!({
        "name": format!("{CLUSTER}/nodePools/up"),
        "labels": {"labels": {"team": "infra"}},
        "taints": {"taints": [{"key": "k", "value": "v", "effect": 3}]},
        "resourceLabels": {"labels": {"owner": "o2"}},
        "etag": before["etag"],
    });
    let (s, op) = c.send("PUT", &format!("{POOLS}/up"), Some(body)).await;
    assert_eq!(s, 200, "{op}");
    assert_eq!(op["operationType"], "UPDATE_CLUSTER");
    c.wait_gke(&op).await;
    let (_, p) = c.get(&format!("{POOLS}/up")).await;
    assert_eq!(p["config"]["labels"], json!({"team": "infra"}));
    assert_eq!(
        p["config"]["taints"],
        json!([{"key": "k", "value": "v", "effect": "NO_EXECUTE"}])
    );
    assert_eq!(p["config"]["resourceLabels"], json!({"owner": "o2"}));
    assert_eq!(p["status"], "RUNNING");
    assert_ne!(p["etag"], before["etag"]);

    // A stale etag is refused with ABORTED.
    let stale = json!({"name": "x", "labels": {"labels": {}}, "etag": before["etag"]});
    let (s, e) = c.send("PUT", &format!("{POOLS}/up"), Some(stale)).await;
    assert_eq!(s, 409, "{e}");
    assert_eq!(e["error"]["status"], "ABORTED");
    sim.shutdown().await;
}

#[tokio::test]
async fn not_found_already_exists_and_bad_names() {
    let sim = start(Duration::ZERO, 1, FaultConfig::default()).await;
    let c = Client::new(&sim);

    let (s, e) = c
        .post(
            "/v1/projects/proj1/locations/us-central2/clusters/nope/nodePools",
            tpu_pool("a"),
        )
        .await;
    assert_eq!(s, 404);
    let msg = "Not found: projects/proj1/locations/us-central2/clusters/nope.";
    assert_eq!(
        e,
        json!({"error": {"code": 404, "message": msg, "status": "NOT_FOUND",
            "errors": [{"message": msg, "domain": "global", "reason": "notFound"}],
            "details": []}})
    );
    let (s, _) = c
        .get("/v1/projects/proj1/locations/us-central2/clusters/nope")
        .await;
    assert_eq!(s, 404);
    let (s, _) = c.get(&format!("{POOLS}/missing")).await;
    assert_eq!(s, 404);
    let (s, _) = c
        .get(&format!("{GKE}/operations/operation-1-deadbeef"))
        .await;
    assert_eq!(s, 404);
    let (s, e) = c
        .get("/v1/projects/proj1/locations/us-central2/clusters/c1/nodePools/a:setSize")
        .await;
    assert_eq!(s, 404, "{e}");

    let (s, _) = c.post(POOLS, tpu_pool("dup")).await;
    assert_eq!(s, 200);
    let (s, e) = c.post(POOLS, tpu_pool("dup")).await;
    assert_eq!(s, 409);
    assert_eq!(e["error"]["status"], "ALREADY_EXISTS");
    assert_eq!(e["error"]["errors"][0]["reason"], "alreadyExists");
    assert_eq!(
        e["error"]["message"],
        format!("Already exists: {CLUSTER}/nodePools/dup.")
    );

    for bad in ["Upper", "1abc", "ends-", &"a".repeat(41)] {
        let (s, e) = c.post(POOLS, tpu_pool(bad)).await;
        assert_eq!(s, 400, "{bad}");
        assert_eq!(e["error"]["status"], "INVALID_ARGUMENT");
        assert_eq!(
            e["error"]["message"],
            format!(
                "Invalid value for field \"node_pool.name\": \"{bad}\". Must be a match of regex '(?:[a-z](?:[-a-z0-9]{{0,38}}[a-z0-9])?)' (only lowercase alphanumerics and '-' allowed, must start with a letter and end with an alphanumeric, and must be no longer than 40 characters)."
            )
        );
        assert_eq!(
            e["error"]["details"][0]["@type"],
            "type.googleapis.com/google.rpc.RequestInfo"
        );
    }
    let (s, _) = c.post(POOLS, tpu_pool(&"a".repeat(40))).await;
    assert_eq!(s, 200);
    sim.shutdown().await;
}

fn with(mut body: Value, pointer: &str, v: Value) -> Value {
    *body.pointer_mut(pointer).unwrap() = v;
    body
}

#[tokio::test]
async fn discovery_validation_rejects_like_google() {
    let sim = start(Duration::ZERO, 1, FaultConfig::default()).await;
    let c = Client::new(&sim);
    let base = tpu_pool("v");
    let mut unknown = base.clone();
    unknown["nodePool"]["config"]["fooBar"] = json!(1);
    let cases = [
        (
            unknown,
            "Invalid JSON payload received. Unknown name \"fooBar\" at 'node_pool.config': Cannot find field.",
        ),
        (
            with(base.clone(), "/nodePool/config/spot", json!("yes")),
            "Invalid value at 'node_pool.config.spot' (TYPE_BOOL), \"yes\"",
        ),
        (
            with(base.clone(), "/nodePool/initialNodeCount", json!("many")),
            "Invalid value at 'node_pool.initial_node_count' (TYPE_INT32), \"many\"",
        ),
        (
            with(
                base.clone(),
                "/nodePool/placementPolicy/type",
                json!("TIGHT"),
            ),
            "Invalid value at 'node_pool.placement_policy.type' (type.googleapis.com/google.container.v1.PlacementPolicy.Type), \"TIGHT\"",
        ),
        (
            with(base.clone(), "/nodePool/config/taints/0/effect", json!(9)),
            "Invalid value at 'node_pool.config.taints[0].effect' (type.googleapis.com/google.container.v1.NodeTaint.Effect), 9",
        ),
        (
            json!({"nodePool": {"name": "x"}, "bogus": true}),
            "Invalid JSON payload received. Unknown name \"bogus\": Cannot find field.",
        ),
    ];
    for (body, msg) in cases {
        let (s, e) = c.post(POOLS, body).await;
        assert_eq!(s, 400, "{e}");
        assert_eq!(e["error"]["code"], 400);
        assert_eq!(e["error"]["status"], "INVALID_ARGUMENT");
        assert_eq!(e["error"]["message"], msg);
        assert_eq!(e["error"]["errors"][0]["domain"], "global");
        assert_eq!(
            e["error"]["details"][0]["@type"],
            "type.googleapis.com/google.rpc.BadRequest"
        );
    }
    let (s, list) = c.get(POOLS).await;
    assert_eq!(s, 200);
    assert!(list["nodePools"].as_array().unwrap().is_empty());

    // Proto enum numbers (as the Rust SDK sends them) are accepted and
    // emitted as names; SDK query parameters are ignored.
    let mut ints = base.clone();
    ints["nodePool"]["placementPolicy"]["type"] = json!(1);
    ints["nodePool"]["config"]["taints"][0]["effect"] = json!(1);
    ints["nodePool"]["config"]["reservationAffinity"]["consumeReservationType"] = json!(1);
    ints["nodePool"]["maxPodsConstraint"]["maxPodsPerNode"] = json!(32);
    let path = format!(
        "{POOLS}?%24alt=json%3Benum-encoding%3Dint&projectId=&zone=&clusterId=&prettyPrint=false"
    );
    let (s, op) = c.post(&path, ints).await;
    assert_eq!(s, 200, "{op}");
    let (_, p) = c
        .get(&format!(
            "{POOLS}/v?projectId=&zone=&clusterId=&nodePoolId="
        ))
        .await;
    assert_eq!(p["placementPolicy"]["type"], "COMPACT");
    assert_eq!(p["config"]["taints"][0]["effect"], "NO_SCHEDULE");
    assert_eq!(
        p["config"]["reservationAffinity"]["consumeReservationType"],
        "NO_RESERVATION"
    );
    assert_eq!(p["maxPodsConstraint"]["maxPodsPerNode"], "32");
    sim.shutdown().await;
}

#[tokio::test]
async fn stockout_fails_the_operation_and_errors_the_pool() {
    let faults = FaultConfig {
        stockout_rate: 1.0,
        ..Default::default()
    };
    let sim = start(Duration::ZERO, 3, faults).await;
    let c = Client::new(&sim);
    let (s, op) = c.post(POOLS, tpu_pool("dry")).await;
    assert_eq!(s, 200);
    let done = c.wait_gke(&op).await;
    assert_eq!(done["status"], "DONE");
    assert_eq!(done["error"]["code"], 8);
    let msg = done["error"]["message"].as_str().unwrap();
    assert!(msg.contains("GCE_STOCKOUT"), "{msg}");
    assert!(msg.contains("ZONE_RESOURCE_POOL_EXHAUSTED"), "{msg}");
    // As GKE reports it: in clusterConditions, with nodepoolConditions empty.
    assert_eq!(done["clusterConditions"][0]["code"], "GCE_STOCKOUT");
    assert!(done.get("nodepoolConditions").is_none(), "{done}");
    let (_, p) = c.get(&format!("{POOLS}/dry")).await;
    assert_eq!(p["status"], "ERROR");
    assert_eq!(p["conditions"][0]["code"], "GCE_STOCKOUT");
    assert_eq!(p["conditions"][0]["canonicalCode"], "RESOURCE_EXHAUSTED");
    assert!(sim.stats().faults_injected >= 1);
    sim.shutdown().await;
}

#[tokio::test]
async fn gke_concurrency_rules_are_on_by_default() {
    let sim = start(Duration::from_secs(30), 1, FaultConfig::default()).await;
    let c = Client::new(&sim);
    let (s, first) = c.post(POOLS, tpu_pool("first")).await;
    assert_eq!(s, 200, "{first}");
    // One operation per node pool: a delete sent while its create runs.
    let (s, e) = c.send("DELETE", &format!("{POOLS}/first"), None).await;
    assert_eq!(s, 400, "{e}");
    assert_eq!(e["error"]["status"], "FAILED_PRECONDITION");
    assert_eq!(
        e["error"]["message"],
        format!(
            "Cluster is running incompatible operation {}.",
            first["name"].as_str().unwrap()
        )
    );
    // Operations on different node pools run in parallel, up to the quota (5).
    for name in ["p2", "p3", "p4", "p5"] {
        let (s, e) = c.post(POOLS, tpu_pool(name)).await;
        assert_eq!(s, 200, "{name}: {e}");
    }
    let (s, e) = c.post(POOLS, tpu_pool("p6")).await;
    assert_eq!(s, 429, "{e}");
    assert_eq!(e["error"]["status"], "RESOURCE_EXHAUSTED");
    assert_eq!(
        e["error"]["message"],
        "Too many operations: cluster \"c1\" hits the concurrent operations quota 5, please try again later."
    );
    assert_eq!(
        e["error"]["details"][0]["@type"],
        "type.googleapis.com/google.rpc.RequestInfo"
    );
    // The quota is settable …
    sim.set_faults(FaultConfig {
        operation_quota: 6,
        ..FaultConfig::default()
    });
    let (s, e) = c.post(POOLS, tpu_pool("p6")).await;
    assert_eq!(s, 200, "{e}");
    // … and the rules can be switched off.
    sim.set_faults(FaultConfig {
        concurrency_rules: false,
        ..FaultConfig::default()
    });
    let (s, e) = c.post(POOLS, tpu_pool("p7")).await;
    assert_eq!(s, 200, "{e}");
    let (s, e) = c.send("DELETE", &format!("{POOLS}/first"), None).await;
    assert_eq!(s, 200, "{e}");
    sim.shutdown().await;
}

#[tokio::test]
async fn a_cluster_level_operation_excludes_every_node_pool_write() {
    let sim = start(Duration::ZERO, 1, FaultConfig::default()).await;
    let c = Client::new(&sim);
    let (_, op) = c.post(POOLS, tpu_pool("live")).await;
    c.wait_gke(&op).await;
    let upgrade = sim
        .start_cluster_operation(CLUSTER, Duration::from_secs(30))
        .unwrap();
    let (s, e) = c.post(POOLS, tpu_pool("other")).await;
    assert_eq!(s, 400, "{e}");
    assert_eq!(
        e["error"]["message"],
        format!("Cluster is running incompatible operation {upgrade}.")
    );
    let (s, e) = c.send("DELETE", &format!("{POOLS}/live"), None).await;
    assert_eq!(s, 400, "{e}");
    // The operation is listed, cluster-level (its target is the cluster).
    let (_, ops) = c
        .get("/v1/projects/proj1/locations/us-central2/operations")
        .await;
    let listed = ops["operations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["name"] == upgrade.as_str())
        .unwrap();
    assert_eq!(listed["operationType"], "UPGRADE_MASTER");
    assert!(
        listed["targetLink"]
            .as_str()
            .unwrap()
            .ends_with("/clusters/c1"),
        "{listed}"
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn label_rules_are_enforced() {
    let sim = start(Duration::ZERO, 1, FaultConfig::default()).await;
    let c = Client::new(&sim);
    let mut bad_gce = tpu_pool("l1");
    bad_gce["nodePool"]["config"]["resourceLabels"] = json!({"Owner": "x"});
    let (s, e) = c.post(POOLS, bad_gce).await;
    assert_eq!(s, 400, "{e}");
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("node_pool.config.resource_labels")
    );
    let mut bad_k8s = tpu_pool("l2");
    bad_k8s["nodePool"]["config"]["labels"] = json!({"team": "not valid!"});
    let (s, e) = c.post(POOLS, bad_k8s).await;
    assert_eq!(s, 400, "{e}");
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("node_pool.config.labels")
    );
    let (_, op) = c.post(POOLS, tpu_pool("l3")).await;
    c.wait_gke(&op).await;
    let upd = json!({"name": "x", "resourceLabels": {"labels": {"UP": "x"}}});
    let (s, e) = c.send("PUT", &format!("{POOLS}/l3"), Some(upd)).await;
    assert_eq!(s, 400, "{e}");
    sim.shutdown().await;
}

fn error_of(v: &Value) -> (&str, &str) {
    (
        v["error"]["status"].as_str().unwrap_or_default(),
        v["error"]["message"].as_str().unwrap_or_default(),
    )
}

/// `placementPolicy.policyName` must name a resource policy in the pool's
/// project and region (400 INVALID_ARGUMENT), and a TPU machine type must be
/// offered in each of the pool's zones (400 "Invalid machine type … in zone
/// …: GCE_NOT_FOUND").
#[tokio::test]
async fn placement_policy_and_machine_type_zones_are_checked() {
    let sim = start(Duration::ZERO, 1, FaultConfig::default()).await;
    let c = Client::new(&sim);
    let mut pool = tpu_pool("named");
    pool["nodePool"]["placementPolicy"] = json!({"policyName": "nope"});
    let (s, v) = c.post(POOLS, pool.clone()).await;
    assert_eq!(s, 400, "{v}");
    assert_eq!(
        error_of(&v),
        (
            "INVALID_ARGUMENT",
            "Placement policy \"nope\" was not found in project \"proj1\" region \"us-central2\": the resource policy must be in the same project and region as the node pool."
        )
    );
    // A policy of that name in another region is not the pool's.
    let wp = json!({"name": "nope", "workloadPolicy": {"type": "HIGH_THROUGHPUT", "acceleratorTopology": "4x4x4"}});
    let (s, _) = c
        .post(
            "/compute/v1/projects/proj1/regions/us-central1/resourcePolicies",
            wp.clone(),
        )
        .await;
    assert_eq!(s, 200);
    let (s, v) = c.post(POOLS, pool.clone()).await;
    assert_eq!(s, 400, "{v}");
    // In the pool's region it is found.
    let (s, _) = c
        .post(
            "/compute/v1/projects/proj1/regions/us-central2/resourcePolicies",
            wp,
        )
        .await;
    assert_eq!(s, 200);
    let (s, v) = c.post(POOLS, pool).await;
    assert_eq!(s, 200, "{v}");

    // tpu7x is offered in us-central1-c only.
    let mut iron = tpu_pool("iron");
    iron["nodePool"]["config"]["machineType"] = json!("tpu7x-standard-4t");
    iron["nodePool"]["placementPolicy"] = json!(null);
    iron["nodePool"]["initialNodeCount"] = json!(1);
    let (s, v) = c.post(POOLS, iron).await;
    assert_eq!(s, 400, "{v}");
    assert_eq!(
        error_of(&v),
        (
            "INVALID_ARGUMENT",
            "Invalid machine type \"tpu7x-standard-4t\" in zone \"us-central2-b\": GCE_NOT_FOUND"
        )
    );
    // Without locations a regional cluster's pool spans its zones, and v4
    // is offered in us-central2-b only.
    let mut spread = tpu_pool("spread");
    spread["nodePool"]["locations"] = json!(null);
    let (s, v) = c.post(POOLS, spread).await;
    assert_eq!(s, 400, "{v}");
    assert!(error_of(&v).1.contains("in zone \"us-central2-a\""), "{v}");
    sim.shutdown().await;
}

/// A specific reservation must exist in the pool's zone (404) and have room
/// for its nodes next to the live pools consuming it (429 "Reservation does
/// not have enough resources …"); a deleted pool gives its room back.
#[tokio::test]
async fn specific_reservations_have_a_size() {
    let faults = FaultConfig {
        reservations: [(
            "projects/proj1/zones/us-central2-b/reservations/r1".to_string(),
            20,
        )]
        .into(),
        ..FaultConfig::default()
    };
    let sim = start(Duration::ZERO, 1, faults).await;
    let c = Client::new(&sim);
    let reserved = |name: &str, res: &str| {
        let mut p = tpu_pool(name);
        p["nodePool"]["config"]["spot"] = json!(false);
        p["nodePool"]["config"]["reservationAffinity"] = json!({
            "consumeReservationType": "SPECIFIC_RESERVATION",
            "key": "compute.googleapis.com/reservation-name",
            "values": [res]
        });
        p
    };
    let (s, op) = c.post(POOLS, reserved("first", "r1")).await;
    assert_eq!(s, 200, "{op}");
    c.wait_gke(&op).await;
    let (s, v) = c.post(POOLS, reserved("second", "r1")).await;
    assert_eq!(s, 429, "{v}");
    assert_eq!(
        error_of(&v),
        (
            "RESOURCE_EXHAUSTED",
            "Reservation does not have enough resources for the request: specific reservation \"r1\" is insufficient for node pool \"second\" at zone \"us-central2-b\": required 16 and short of 12 VM count of machine type ct4p-hightpu-4t."
        )
    );
    let (s, v) = c.post(POOLS, reserved("third", "missing")).await;
    assert_eq!(s, 404, "{v}");
    assert_eq!(
        error_of(&v),
        (
            "NOT_FOUND",
            "Google Compute Engine: reservation \"missing\" not found for node pool \"third\" at zone \"us-central2-b\"."
        )
    );
    // A shared reservation is looked up in its own project.
    let (s, v) = c
        .post(POOLS, reserved("shared", "projects/other/reservations/r1"))
        .await;
    assert_eq!(s, 404, "{v}");
    let (s, op) = c.send("DELETE", &format!("{POOLS}/first"), None).await;
    assert_eq!(s, 200, "{op}");
    c.wait_gke(&op).await;
    let (s, v) = c.post(POOLS, reserved("second", "r1")).await;
    assert_eq!(s, 200, "{v}");
    sim.shutdown().await;
}
