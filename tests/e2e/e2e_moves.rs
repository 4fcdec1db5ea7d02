//! Issue 24 item 5, end to end through the binary against the simulator
//! server: a Target moved to another cluster, and a Target removed with its
//! Slices, never leave pools running unseen; the old pools go only after
//! the new ones are created.

use crate::common;

use std::path::Path;
use std::time::Duration;

use common::*;
use serde_json::Value;
use slicectl_sim::{FaultConfig, SimHandle};

const C1: &str = "projects/example-project/locations/us-central1/clusters/c1";
const C2: &str = "projects/example-project/locations/us-central1/clusters/c2";

fn target(name: &str, cluster: &str) -> String {
    format!(
        "apiVersion: slicectl.dev/v1alpha1\nkind: Target\nmetadata:\n  name: {name}\nspec:\n  project: example-project\n  zone: us-central1-b\n  ownerId: e2e\n  gke:\n    location: us-central1\n    name: {cluster}\n"
    )
}

fn slice(name: &str, target: &str, replicas: u32) -> String {
    format!(
        "apiVersion: slicectl.dev/v1alpha1\nkind: Slice\nmetadata:\n  name: {name}\nspec:\n  target: {target}\n  backend: gke\n  accelerator: tpu-v6e-slice\n  topology: \"1x1\"\n  replicas: {replicas}\n"
    )
}

/// A simulator with clusters c1 and c2 (the test cluster too, unused).
async fn two_clusters(latency: Duration) -> SimHandle {
    let sim = sim(latency, 1, FaultConfig::default()).await;
    sim.add_cluster(C1).unwrap();
    sim.add_cluster(C2).unwrap();
    sim
}

/// The node pools of `cluster` as `(name, field)`, `field` read by `read`.
async fn pools_by(
    sim: &SimHandle,
    cluster: &str,
    read: impl Fn(&Value) -> &Value,
) -> Vec<(String, String)> {
    let url = format!("{}/v1/{cluster}/nodePools", sim.base_url());
    let v: Value = reqwest::get(url).await.unwrap().json().await.unwrap();
    let mut out: Vec<(String, String)> = v["nodePools"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|p| {
            (
                p["name"].as_str().unwrap_or_default().to_string(),
                read(p).as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    out.sort();
    out
}

/// The node pools of `cluster` as `(name, status)`.
async fn pools(sim: &SimHandle, cluster: &str) -> Vec<(String, String)> {
    pools_by(sim, cluster, |p| &p["status"]).await
}

async fn names(sim: &SimHandle, cluster: &str) -> Vec<String> {
    pools(sim, cluster).await.into_iter().map(|p| p.0).collect()
}

async fn run(sim: &SimHandle, args: &[&str], dir: &Path) -> std::process::Output {
    let mut a = vec![args[0], dir.to_str().unwrap()];
    a.extend_from_slice(&args[1..]);
    slicectl(sim, &a).await
}

/// `plan -o json --detailed-exitcode`, which must exit `code`.
async fn plan_json(sim: &SimHandle, dir: &Path, code: i32) -> Value {
    let o = run(sim, &["plan", "-o", "json", "--detailed-exitcode"], dir).await;
    assert_eq!(o.status.code(), Some(code), "{}", text(&o));
    serde_json::from_slice(&o.stdout).unwrap()
}

async fn stockout(sim: &SimHandle, rate: f64) {
    let r = reqwest::Client::new()
        .put(format!("{}/_sim/faults", sim.base_url()))
        .json(&serde_json::json!({"stockout_rate": rate}))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success());
}

/// `tz` on c1 with `zz` (2 replicas), applied; then `tz` names c2.
async fn moved_from_c1_to_c2(latency: Duration) -> (SimHandle, tempfile::TempDir) {
    let sim = two_clusters(latency).await;
    let dir = tempfile::tempdir().unwrap();
    put(dir.path(), "target.yaml", &target("tz", "c1"));
    put(dir.path(), "zz.yaml", &slice("zz", "tz", 2));
    let o = apply(&sim, dir.path()).await;
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(names(&sim, C1).await, vec!["zz-0", "zz-1"]);
    put(dir.path(), "target.yaml", &target("tz", "c2"));
    (sim, dir)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_target_moved_to_another_cluster_takes_its_pools_along() {
    let (sim, dir) = moved_from_c1_to_c2(Duration::from_millis(10)).await;
    let plan = plan_json(&sim, dir.path(), 2).await;
    let actions = plan["actions"].as_array().unwrap();
    for r in 0..2 {
        let at = |action: &str, cluster: &str| {
            actions
                .iter()
                .position(|a| {
                    a["action"] == action
                        && a["replica"] == r
                        && a["kind"] == "node_pool"
                        && a["scope"]["name"] == cluster
                })
                .unwrap_or_else(|| panic!("no {action} of replica {r} in {cluster}: {plan:#}"))
        };
        let (create, delete) = (at("create", "c2"), at("delete", "c1"));
        assert!(
            create < delete,
            "the c1 delete comes after the c2 create: {plan:#}"
        );
        assert_eq!(actions[delete]["reason_code"], "moved", "{plan:#}");
    }
    let o = run(&sim, &["plan"], dir.path()).await;
    let t = text(&o);
    assert!(t.contains("moved: it is now node pool zz-0 in"), "{t}");

    let o = apply(&sim, dir.path()).await;
    assert!(o.status.success(), "{}", text(&o));
    assert!(names(&sim, C1).await.is_empty(), "nothing runs in c1");
    assert_eq!(names(&sim, C2).await, vec!["zz-0", "zz-1"]);
    let o = run(&sim, &["plan", "--detailed-exitcode"], dir.path()).await;
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    sim.shutdown().await;
}

/// Under latency, with every c2 create stocked out: the c1 pools are kept
/// (their deletes wait on the creates that failed), and the plan still
/// says there is work to do.
#[tokio::test(flavor = "multi_thread")]
async fn a_moved_target_keeps_its_old_pools_when_the_new_ones_stock_out() {
    let (sim, dir) = moved_from_c1_to_c2(Duration::from_millis(300)).await;
    stockout(&sim, 1.0).await;
    let o = apply(&sim, dir.path()).await;
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert_eq!(
        t.matches("skipped (a step it depends on failed)").count(),
        2,
        "the c1 deletes wait on the c2 creates: {t}"
    );
    assert_eq!(
        pools(&sim, C1).await,
        vec![
            ("zz-0".to_string(), "RUNNING".to_string()),
            ("zz-1".to_string(), "RUNNING".to_string())
        ],
        "the old pools keep their capacity: {t}"
    );
    let o = run(&sim, &["plan", "--detailed-exitcode"], dir.path()).await;
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    // The capacity comes back: the move completes, create first.
    stockout(&sim, 0.0).await;
    let o = apply(&sim, dir.path()).await;
    assert!(o.status.success(), "{}", text(&o));
    assert!(names(&sim, C1).await.is_empty(), "{}", text(&o));
    assert_eq!(
        pools(&sim, C2).await,
        vec![
            ("zz-0".to_string(), "RUNNING".to_string()),
            ("zz-1".to_string(), "RUNNING".to_string())
        ]
    );
    sim.shutdown().await;
}

/// `tz` (c1, slice zz) and `keep` (c2, slice k); then `tz` and `zz` leave
/// the specs together.
async fn removed_target() -> (SimHandle, tempfile::TempDir) {
    let sim = two_clusters(Duration::from_millis(10)).await;
    let dir = tempfile::tempdir().unwrap();
    put(dir.path(), "keep.yaml", &target("keep", "c2"));
    put(dir.path(), "k.yaml", &slice("k", "keep", 1));
    put(dir.path(), "tz.yaml", &target("tz", "c1"));
    put(dir.path(), "zz.yaml", &slice("zz", "tz", 2));
    let o = apply(&sim, dir.path()).await;
    assert!(o.status.success(), "{}", text(&o));
    std::fs::remove_file(dir.path().join("tz.yaml")).unwrap();
    std::fs::remove_file(dir.path().join("zz.yaml")).unwrap();
    (sim, dir)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_target_removed_with_its_slices_is_refused_without_override() {
    let (sim, dir) = removed_target().await;
    // Never "in sync" while they run.
    let plan = plan_json(&sim, dir.path(), 1).await;
    let codes: Vec<&str> = plan["refused"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["code"].as_str().unwrap())
        .collect();
    assert_eq!(codes, vec!["target_removed", "target_removed"], "{plan:#}");
    let o = apply(&sim, dir.path()).await;
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("--allow-empty-source"), "{}", text(&o));
    assert_eq!(names(&sim, C1).await, vec!["zz-0", "zz-1"], "kept");
    let o = run(&sim, &["status", "-o", "json"], dir.path()).await;
    let rows: Value = serde_json::from_slice(&o.stdout).unwrap();
    let in_c1 = rows
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["cluster"] == "c1" && r["location"] == "us-central1")
        .count();
    assert_eq!(in_c1, 2, "status shows them: {rows:#}");

    let o = run(
        &sim,
        &["apply", "--auto-approve", "--allow-empty-source"],
        dir.path(),
    )
    .await;
    assert!(o.status.success(), "{}", text(&o));
    assert!(names(&sim, C1).await.is_empty());
    assert_eq!(names(&sim, C2).await, vec!["k-0"]);
    sim.shutdown().await;
}

/// `destroy` finds the pools of a removed Target but removes only the
/// slices of the Targets it is given: the removed Target's pools carry its
/// name (`slicectl.dev/target=tz`), like another source's, and are refused
/// (`other_source`), so destroy does not say it is complete while they
/// run. Restoring the Target (no Slice needed) lets destroy remove them.
#[tokio::test(flavor = "multi_thread")]
async fn destroy_finds_the_pools_of_a_removed_target() {
    let (sim, dir) = removed_target().await;
    let o = run(&sim, &["destroy", "--auto-approve"], dir.path()).await;
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let out = text(&o);
    assert!(
        out.contains("other_source") || out.contains("was last applied by Target \"tz\""),
        "{out}"
    );
    assert_eq!(names(&sim, C1).await, vec!["zz-0", "zz-1"], "{out}");
    assert!(names(&sim, C2).await.is_empty(), "{out}");
    put(dir.path(), "tz.yaml", &target("tz", "c1"));
    let o = run(&sim, &["destroy", "--auto-approve"], dir.path()).await;
    assert!(o.status.success(), "{}", text(&o));
    assert!(names(&sim, C1).await.is_empty(), "{}", text(&o));
    sim.shutdown().await;
}

/// The `slicectl.dev/target` label of each pool of `cluster`.
async fn stamps(sim: &SimHandle, cluster: &str) -> Vec<(String, String)> {
    pools_by(
        sim,
        cluster,
        |p| &p["config"]["labels"]["slicectl.dev/target"],
    )
    .await
}

/// Issue 24 item 7: two spec directories apply one ownerId (`e2e`) on one
/// cluster. Neither prunes the other's slices, on any run: each pool
/// records the Target that wrote it, and the other directory's are refused
/// as `other_source`, under a stockout too. Then directory A takes B's
/// slices over with `previousNames: [team-b]`: one apply relabels them in
/// place, nothing is deleted or created, and the plan is in sync.
#[tokio::test(flavor = "multi_thread")]
async fn two_spec_directories_with_one_owner_id_keep_each_others_slices() {
    let sim = two_clusters(Duration::from_millis(10)).await;
    let a = tempfile::tempdir().unwrap();
    put(a.path(), "t.yaml", &target("team-a", "c1"));
    put(a.path(), "s.yaml", &slice("aa", "team-a", 1));
    let b = tempfile::tempdir().unwrap();
    put(b.path(), "t.yaml", &target("team-b", "c1"));
    put(b.path(), "s.yaml", &slice("bb", "team-b", 2));
    let o = apply(&sim, a.path()).await;
    assert!(o.status.success(), "{}", text(&o));
    for _ in 0..2 {
        for dir in [b.path(), a.path()] {
            let o = apply(&sim, dir).await;
            assert_eq!(o.status.code(), Some(1), "{}", text(&o));
            assert!(
                text(&o).contains("was last applied by Target"),
                "{}",
                text(&o)
            );
            assert_eq!(names(&sim, C1).await, vec!["aa-0", "bb-0", "bb-1"]);
        }
    }
    let plan = plan_json(&sim, a.path(), 1).await;
    let refused: Vec<(&str, &str)> = plan["refused"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["name"].as_str().unwrap(), r["code"].as_str().unwrap()))
        .collect();
    assert_eq!(
        refused,
        vec![("bb-0", "other_source"), ("bb-1", "other_source")],
        "{plan:#}"
    );
    // A destroy of A removes A's slice only.
    let o = run(&sim, &["destroy", "--auto-approve"], a.path()).await;
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert_eq!(names(&sim, C1).await, vec!["bb-0", "bb-1"]);
    let o = apply(&sim, a.path()).await;
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    // The hand-over, with every create stocking out: nothing is created or
    // deleted, so nothing fails.
    stockout(&sim, 1.0).await;
    put(
        a.path(),
        "t.yaml",
        &format!("{}  previousNames: [team-b]\n", target("team-a", "c1")),
    );
    put(a.path(), "bb.yaml", &slice("bb", "team-a", 2));
    let o = apply(&sim, a.path()).await;
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(
        stamps(&sim, C1).await,
        vec![
            ("aa-0".to_string(), "team-a".to_string()),
            ("bb-0".to_string(), "team-a".to_string()),
            ("bb-1".to_string(), "team-a".to_string()),
        ]
    );
    plan_json(&sim, a.path(), 0).await;
    sim.shutdown().await;
}
