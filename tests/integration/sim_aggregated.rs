//! Compute Engine's `aggregatedList` on the simulator's wire: `items` keyed
//! by scope, `NO_RESULTS_ON_PAGE` warnings for empty scopes, paging over
//! the whole result, `filter`, and the boolean parameters gcloud sends.

use crate::sim_support;

use std::time::Duration;

use serde_json::{Value, json};
use sim_support::{COMPUTE, Client, start};
use slicectl_sim::FaultConfig;

/// Waits for a compute operation through its `wait` method.
async fn wait(c: &Client, op: &Value) {
    let link = op["selfLink"].as_str().unwrap();
    let path = link.strip_prefix(&c.base).unwrap().to_string();
    for _ in 0..100 {
        let (s, done) = c.post(&format!("{path}/wait"), json!(null)).await;
        assert_eq!(s, 200, "{done}");
        if done["status"] == "DONE" {
            assert!(done.get("error").is_none(), "{done}");
            return;
        }
    }
    panic!("operation {link} never finished");
}

fn names(scoped: &Value, field: &str) -> Vec<String> {
    scoped[field]
        .as_array()
        .unwrap_or_else(|| panic!("no {field} in {scoped}"))
        .iter()
        .map(|v| v["name"].as_str().unwrap().to_string())
        .collect()
}

fn assert_no_results(items: &Value, scope: &str) {
    let w = &items[scope]["warning"];
    assert_eq!(w["code"], "NO_RESULTS_ON_PAGE", "{scope}: {items}");
    assert_eq!(
        w["message"],
        format!("There are no results for scope '{scope}' on this page.")
    );
    assert_eq!(w["data"], json!([{"key": "scope", "value": scope}]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aggregated_lists_key_by_scope_warn_page_and_filter() {
    let sim = start(Duration::from_millis(20), 3, FaultConfig::default()).await;
    let c = Client::new(&sim);

    // An empty project: every visible scope answers NO_RESULTS_ON_PAGE.
    let (s, empty) = c
        .get(&format!(
            "{COMPUTE}/aggregated/instances?includeAllScopes=True&maxResults=500&returnPartialSuccess=True"
        ))
        .await;
    assert_eq!(s, 200, "{empty}");
    assert_eq!(empty["kind"], "compute#instanceAggregatedList");
    assert_eq!(empty["id"], "projects/proj1/aggregated/instances");
    assert!(empty.get("nextPageToken").is_none(), "{empty}");
    let scopes = empty["items"].as_object().unwrap();
    assert!(scopes.len() > 3, "{empty}");
    assert!(scopes.keys().all(|k| k.starts_with("zones/")), "{empty}");
    for scope in scopes.keys() {
        assert_no_results(&empty["items"], scope);
    }

    for t in ["t1", "t2", "t3"] {
        let (s, op) = c
            .post(
                &format!("{COMPUTE}/global/instanceTemplates"),
                json!({"name": t, "properties": {"machineType": "ct4p-hightpu-4t",
                       "labels": {"team": if t == "t2" { "b" } else { "a" }}}}),
            )
            .await;
        assert_eq!(s, 200, "{op}");
        wait(&c, &op).await;
    }
    let (s, op) = c
        .post(
            &format!("{COMPUTE}/regions/us-central2/resourcePolicies"),
            json!({"name": "wp", "workloadPolicy": {"type": "HIGH_THROUGHPUT", "acceleratorTopology": "2x2x4"}}),
        )
        .await;
    assert_eq!(s, 200, "{op}");
    wait(&c, &op).await;

    // Templates are global; the regional template scopes stay empty.
    let agg = format!("{COMPUTE}/aggregated/instanceTemplates");
    let (s, all) = c.get(&agg).await;
    assert_eq!(s, 200, "{all}");
    assert_eq!(all["kind"], "compute#instanceTemplateAggregatedList");
    assert_eq!(
        names(&all["items"]["global"], "instanceTemplates"),
        ["t1", "t2", "t3"]
    );
    assert_no_results(&all["items"], "regions/us-central2");

    // Paging runs over the whole result; every page lists every scope.
    let (s, p1) = c.get(&format!("{agg}?maxResults=2")).await;
    assert_eq!(s, 200, "{p1}");
    assert_eq!(
        names(&p1["items"]["global"], "instanceTemplates"),
        ["t1", "t2"]
    );
    assert_no_results(&p1["items"], "regions/us-central2");
    let token = p1["nextPageToken"].as_str().expect("a second page");
    let (s, p2) = c
        .get(&format!("{agg}?maxResults=2&pageToken={token}"))
        .await;
    assert_eq!(s, 200, "{p2}");
    assert_eq!(names(&p2["items"]["global"], "instanceTemplates"), ["t3"]);
    assert!(p2.get("nextPageToken").is_none(), "{p2}");

    // Filters: AIP-160 equality on a nested field, the regex form, and a
    // filter the simulator cannot read is refused rather than ignored.
    let (s, f) = c
        .get(&format!(
            "{agg}?filter=properties.labels.team%20%3D%20%22b%22"
        ))
        .await;
    assert_eq!(s, 200, "{f}");
    assert_eq!(names(&f["items"]["global"], "instanceTemplates"), ["t2"]);
    let (s, f) = c
        .get(&format!("{agg}?filter=(name%20ne%20t%5B12%5D)"))
        .await;
    assert_eq!(s, 200, "{f}");
    assert_eq!(names(&f["items"]["global"], "instanceTemplates"), ["t3"]);
    let (s, f) = c.get(&format!("{agg}?filter=name%20%3D%20nothing")).await;
    assert_eq!(s, 200, "{f}");
    assert_no_results(&f["items"], "global");
    let (s, e) = c.get(&format!("{agg}?filter=name%20~%20x")).await;
    assert_eq!(s, 400, "{e}");
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("Invalid list filter expression"),
        "{e}"
    );
    let (s, e) = c.get(&format!("{agg}?returnPartialSuccess=maybe")).await;
    assert_eq!(s, 400, "{e}");

    // Policies are regional; operations span global and regional scopes.
    let (s, p) = c
        .get(&format!("{COMPUTE}/aggregated/resourcePolicies"))
        .await;
    assert_eq!(s, 200, "{p}");
    assert_eq!(
        names(&p["items"]["regions/us-central2"], "resourcePolicies"),
        ["wp"]
    );
    assert!(
        p["items"]
            .as_object()
            .unwrap()
            .keys()
            .all(|k| k.starts_with("regions/"))
    );
    let (s, ops) = c.get(&format!("{COMPUTE}/aggregated/operations")).await;
    assert_eq!(s, 200, "{ops}");
    assert_eq!(ops["kind"], "compute#operationAggregatedList");
    assert_eq!(
        ops["items"]["global"]["operations"]
            .as_array()
            .unwrap()
            .len(),
        3
    );
    assert_eq!(
        ops["items"]["regions/us-central2"]["operations"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    assert_no_results(&ops["items"], "zones/us-central2-b");

    let (s, m) = c
        .get(&format!("{COMPUTE}/aggregated/instanceGroupManagers"))
        .await;
    assert_eq!(s, 200, "{m}");
    assert_no_results(&m["items"], "zones/us-central2-b");
    sim.shutdown().await;
}
