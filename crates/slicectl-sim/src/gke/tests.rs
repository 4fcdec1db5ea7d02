#![cfg(test)]
//! Tests of GKE's answers (`super` is `gke`): the node pool and operation
//! lists written straight from the records are byte for byte what building a
//! `serde_json::Value` of each item (the simulator's former way, kept here as
//! the reference) serialises to.

use std::time::Duration;

use super::*;
use crate::faults::{FaultConfig, Faults};
use crate::operations::GkeOpError;

const CLUSTER: &str = "projects/p/locations/us-east5/clusters/c1";

fn ctx() -> Ctx {
    Ctx {
        base: "http://127.0.0.1:9".into(),
        version: "v1".into(),
        now: tokio::time::Instant::now(),
        query: Vec::new(),
        request_id: "0x1".into(),
        path: String::new(),
    }
}

/// A cluster with three pools: plain; with a status message and conditions;
/// and one whose stored spec already holds `status` and `etag` (a set field
/// keeps its place), two zones; plus a pool of another cluster.
fn world() -> Inner {
    let mut inner = Inner::new(Duration::ZERO, 1, Faults::new(FaultConfig::default(), 1));
    for c in [CLUSTER, "projects/p/locations/us-east5/clusters/c2"] {
        inner.clusters.insert(c.into(), jiff::Timestamp::UNIX_EPOCH);
    }
    let pool = |spec: Value, status, message: Option<&str>, conditions: Vec<Value>| PoolRec {
        spec,
        status,
        status_message: message.map(str::to_string),
        conditions,
    };
    inner.pools.insert(
        format!("{CLUSTER}/nodePools/a"),
        pool(
            json!({"name": "a", "locations": ["us-east5-a"], "config": {"labels": {"k": "v", "a": "é\"\n"}, "machineType": "ct5lp-hightpu-4t"}, "initialNodeCount": 4}),
            "RUNNING",
            None,
            Vec::new(),
        ),
    );
    inner.pools.insert(
        format!("{CLUSTER}/nodePools/b"),
        pool(
            json!({"name": "b", "locations": ["us-east5-a"], "initialNodeCount": 2}),
            "RUNNING_WITH_ERROR",
            Some("stockout"),
            vec![json!({"code": "GCE_STOCKOUT", "message": "no capacity"})],
        ),
    );
    inner.pools.insert(
        format!("{CLUSTER}/nodePools/c"),
        pool(
            json!({"etag": "old", "name": "c", "status": "X", "locations": ["us-east5-a", "us-east5-b"]}),
            "PROVISIONING",
            None,
            Vec::new(),
        ),
    );
    inner.pools.insert(
        "projects/p/locations/us-east5/clusters/c2/nodePools/d".into(),
        pool(json!({"name": "d"}), "RUNNING", None, Vec::new()),
    );
    let timing = OpTiming::new(tokio::time::Instant::now(), Duration::from_secs(3));
    let op = |name: &str, location: &str, done, error: Option<GkeOpError>| GkeOp {
        name: name.into(),
        project: "p".into(),
        location: location.into(),
        cluster: CLUSTER.into(),
        op_type: "CREATE_NODE_POOL",
        effect: GkeEffect::Create {
            pool: format!("{CLUSTER}/nodePools/a"),
            stockout: false,
            fails: None,
        },
        timing: timing.clone(),
        done,
        error,
    };
    let failed = |code| GkeOpError {
        code,
        message: "no \"capacity\"".into(),
        conditions: vec![json!({"code": "GCE_STOCKOUT"})],
    };
    inner.gke_ops = vec![
        op("running", "us-east5", false, None),
        op("done", "us-east5", true, None),
        op("failed", "us-east5", true, Some(failed(9))),
        op("stockout", "us-east5-a", true, Some(failed(0))),
        op("not-yet", "us-east5", false, Some(failed(9))),
    ];
    inner
}

/// The former `render_pool`: a clone of the spec with the fields set over it.
fn reference_pool(key: &str, rec: &PoolRec, ctx: &Ctx) -> Value {
    let mut v = rec.spec.clone();
    let obj = v.as_object_mut().unwrap();
    let parts: Vec<&str> = key.split('/').collect();
    let (project, cluster, pool) = (parts[1], parts[5], parts[7]);
    let digest = pool_digest(key);
    let urls: Vec<Value> = obj
        .get("locations")
        .and_then(Value::as_array)
        .map(|zones| {
            zones
                .iter()
                .filter_map(Value::as_str)
                .map(|z| json!(format!("{}/compute/v1/projects/{project}/zones/{z}/instanceGroupManagers/gke-{cluster}-{pool}-{digest}-grp", ctx.base)))
                .collect()
        })
        .unwrap_or_default();
    obj.insert("status".into(), json!(rec.status));
    if let Some(m) = &rec.status_message {
        obj.insert("statusMessage".into(), json!(m));
    }
    if !rec.conditions.is_empty() {
        obj.insert("conditions".into(), Value::Array(rec.conditions.clone()));
    }
    obj.insert(
        "selfLink".into(),
        json!(format!("{}/{}/{key}", ctx.base, ctx.version)),
    );
    obj.insert("instanceGroupUrls".into(), Value::Array(urls));
    obj.insert("etag".into(), json!(etag(rec)));
    v
}

/// The former `GkeOp::to_json`.
fn reference_op(op: &GkeOp, base: &str, version: &str) -> Value {
    let wire = serde_json::to_value(op.wire(base, version)).unwrap();
    let mut v = json!({
        "name": op.name,
        "zone": op.location,
        "location": op.location,
        "operationType": op.op_type,
        "status": if op.done { "DONE" } else { "RUNNING" },
        "selfLink": wire["selfLink"],
        "targetLink": wire["targetLink"],
        "startTime": wire["startTime"],
    });
    if op.done {
        v["endTime"] = wire["endTime"].clone();
        v["progress"] = json!({"status": "DONE"});
    } else {
        v["progress"] = json!({"status": "RUNNING"});
    }
    if let (true, Some(e)) = (op.done, &op.error) {
        if e.code != 0 {
            v["error"] = json!({"code": e.code, "message": e.message, "details": []});
            v["statusMessage"] = json!(e.message);
            v["detail"] = json!(e.message);
        }
        v["clusterConditions"] = Value::Array(e.conditions.clone());
    }
    v
}

#[test]
fn pool_list_text_is_what_a_value_per_pool_serialises_to() {
    let inner = world();
    let ctx = ctx();
    let c = ClusterRef::parse(CLUSTER).unwrap();
    let pools: Vec<Value> = pools_of(&inner, &c)
        .map(|(k, rec)| reference_pool(k, rec, &ctx))
        .collect();
    assert_eq!(pools.len(), 3);
    let want = serde_json::to_vec(&json!({ "nodePools": pools })).unwrap();
    let got = list_pools_bytes(&inner, &ctx, &c).unwrap();
    assert_eq!(
        String::from_utf8(got).unwrap(),
        String::from_utf8(want).unwrap()
    );
    // `nodePools.get`, `clusters.get` and a partial response go through the
    // same writer as a `Value`.
    assert_eq!(
        get_pool(&inner, &ctx, &c, "c").unwrap(),
        pools[2],
        "the set fields keep their places"
    );
    assert_eq!(
        serde_json::to_vec(&list_pools(&inner, &ctx, &c).unwrap()).unwrap(),
        list_pools_bytes(&inner, &ctx, &c).unwrap()
    );
    let empty = ClusterRef::parse("projects/p/locations/us-east5/clusters/c3").unwrap();
    assert!(
        list_pools_bytes(&inner, &ctx, &empty).is_err(),
        "no such cluster"
    );
}

#[test]
fn operation_list_text_is_what_a_value_per_operation_serialises_to() {
    let inner = world();
    let ctx = ctx();
    for location in ["us-east5", "-", "europe-west4"] {
        let ops: Vec<Value> = inner
            .gke_ops
            .iter()
            .filter(|op| location == "-" || op.location == location)
            .map(|op| reference_op(op, &ctx.base, &ctx.version))
            .collect();
        let want = serde_json::to_vec(&json!({ "operations": ops })).unwrap();
        let got = list_operations_bytes(&inner, &ctx, "p", location).unwrap();
        assert_eq!(
            String::from_utf8(got).unwrap(),
            String::from_utf8(want).unwrap()
        );
        assert_eq!(
            serde_json::to_vec(&list_operations(&inner, &ctx, "p", location)).unwrap(),
            list_operations_bytes(&inner, &ctx, "p", location).unwrap()
        );
    }
    let failed = &inner.gke_ops[2].to_json(&ctx.base, &ctx.version);
    assert_eq!(
        failed["error"],
        json!({"code": 9, "message": "no \"capacity\"", "details": []})
    );
    assert_eq!(
        failed["clusterConditions"],
        json!([{"code": "GCE_STOCKOUT"}])
    );
    let stockout = &inner.gke_ops[3].to_json(&ctx.base, &ctx.version);
    assert!(stockout.get("error").is_none() && stockout.get("clusterConditions").is_some());
    assert!(
        stockout["selfLink"]
            .as_str()
            .unwrap()
            .contains("/zones/us-east5-a/operations/stockout")
    );
}

#[test]
fn a_partial_cluster_list_renders_only_the_selected_pool_fields_with_the_same_answer() {
    let inner = world();
    let whole = list_clusters(&inner, &ctx(), "p", "-");
    for fields in [
        // slicectl's own `clusters.list`.
        "clusters(name,location,nodePools(name,config/labels)),missingZones",
        "clusters/nodePools(etag,status,statusMessage,conditions)",
        "clusters/nodePools/instanceGroupUrls,clusters/name",
        "clusters(nodePools/*)",
        "*",
        "clusters/nodePools",
    ] {
        let selection = Selection::parse(fields).unwrap();
        let mut ctx = ctx();
        ctx.query = vec![("fields".into(), fields.into())];
        let partial = list_clusters(&inner, &ctx, "p", "-");
        assert_eq!(
            selection.apply(partial),
            selection.apply(whole.clone()),
            "{fields}"
        );
    }
    let mut ctx = ctx();
    ctx.query = vec![(
        "fields".into(),
        "clusters(name,nodePools(name,config/labels))".into(),
    )];
    let partial = list_clusters(&inner, &ctx, "p", "-");
    let pool = &partial["clusters"][0]["nodePools"][0];
    assert!(
        pool.get("etag").is_none() && pool.get("config").is_some(),
        "{pool}"
    );
    // Within the config, only its labels are copied out of the record.
    let config = pool["config"].as_object().unwrap();
    assert_eq!(config.keys().collect::<Vec<_>>(), ["labels"], "{pool}");
    let whole_config = whole["clusters"][0]["nodePools"][0]["config"]
        .as_object()
        .unwrap();
    assert!(whole_config.len() > 1, "{whole_config:?}");
}
