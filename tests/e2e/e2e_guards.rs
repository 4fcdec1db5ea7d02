//! Regression tests for safety defects found by trying to break slicectl,
//! end to end through the binary against the simulator. Each test fails
//! without its fix.

use crate::common;

use std::time::Duration;

use common::*;
use serde_json::Value;
use sha2::{Digest, Sha256};
use slicectl_sim::{FaultConfig, SimHandle};

async fn converged_sim(files: &[(&str, String)]) -> (SimHandle, tempfile::TempDir) {
    let sim = sim(Duration::from_millis(10), 1, FaultConfig::default()).await;
    let dir = spec_dir(files);
    let o = apply(&sim, dir.path()).await;
    assert!(o.status.success(), "{}", text(&o));
    (sim, dir)
}

fn dir_arg(dir: &tempfile::TempDir) -> &str {
    dir.path().to_str().unwrap()
}

async fn pool(sim: &SimHandle, name: &str) -> Option<Value> {
    node_pools(sim)
        .await
        .into_iter()
        .find(|p| p["name"] == name)
}

async fn policies(sim: &SimHandle) -> Vec<Value> {
    let url = format!(
        "{}/compute/v1/projects/example-project/regions/{REGION}/resourcePolicies",
        sim.base_url()
    );
    let v: Value = reqwest::get(url).await.unwrap().json().await.unwrap();
    v["items"].as_array().cloned().unwrap_or_default()
}

fn machine_type(p: &Value) -> &str {
    p["config"]["machineType"].as_str().unwrap_or("")
}

/// Defect 1: a replacement that depends on another replacement (tpu7x pool
/// and its workload policy) deleted the pools, never recreated anything and
/// reported success.
#[tokio::test(flavor = "multi_thread")]
async fn dependent_replacements_never_deadlock_on_the_limit() {
    for (replicas, max_replacements) in [(2, "2"), (1, "1")] {
        let (sim, dir) = converged_sim(&[(
            "iron.yaml",
            slice_yaml("iron", "tpu7x", "2x2x2", replicas, ""),
        )])
        .await;
        std::fs::write(
            dir.path().join("iron.yaml"),
            slice_yaml("iron", "tpu7x", "2x2x4", replicas, ""),
        )
        .unwrap();
        let o = slicectl(
            &sim,
            &[
                "apply",
                dir_arg(&dir),
                "--auto-approve",
                "--max-replacements",
                max_replacements,
            ],
        )
        .await;
        assert!(o.status.success(), "{}", text(&o));
        let t = text(&o);
        assert!(t.contains(&format!("{} replaced", 2 * replicas)), "{t}");
        let pools = node_pools(&sim).await;
        assert_eq!(pools.len(), replicas as usize, "{pools:#?}");
        for p in &pools {
            assert_eq!(p["status"], "RUNNING", "{p}");
        }
        // tpu7x multi-host pools carry the workload policy, not a topology;
        // the policies must exist again, with the new topology.
        let pols = policies(&sim).await;
        assert_eq!(pols.len(), replicas as usize, "{pols:#?}");
        for p in &pols {
            assert_eq!(p["workloadPolicy"]["acceleratorTopology"], "2x2x4", "{p}");
        }
        sim.shutdown().await;
    }
}

/// Defect 2: `preventDestroy: false` in the same commit as a change that
/// forces replacement replaced the protected pool in one apply.
#[tokio::test(flavor = "multi_thread")]
async fn lifting_prevent_destroy_takes_two_applies() {
    let protect = "  lifecycle:\n    preventDestroy: true\n";
    let (sim, dir) = converged_sim(&[(
        "keep.yaml",
        slice_yaml("keep", "tpu-v6e-slice", "1x1", 1, protect),
    )])
    .await;
    std::fs::write(
        dir.path().join("keep.yaml"),
        slice_yaml(
            "keep",
            "tpu-v6e-slice",
            "2x2",
            1,
            "  lifecycle:\n    preventDestroy: false\n",
        ),
    )
    .unwrap();
    let o = apply(&sim, dir.path()).await;
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        text(&o).contains("apply again to replace it"),
        "{}",
        text(&o)
    );
    let p = pool(&sim, "keep-0").await.unwrap();
    assert_eq!(
        machine_type(&p),
        "ct6e-standard-1t",
        "not replaced by the first apply: {p}"
    );
    assert!(
        p["config"]["labels"]
            .get("slicectl.dev/prevent-destroy")
            .is_none(),
        "the first apply lifts the stamp: {p}"
    );
    let o = apply(&sim, dir.path()).await;
    assert!(o.status.success(), "{}", text(&o));
    let p = pool(&sim, "keep-0").await.unwrap();
    assert_eq!(machine_type(&p), "ct6e-standard-4t", "{p}");
    sim.shutdown().await;
}

/// Defect 4: an edited saved plan deleted a foreign and a protected pool,
/// and flags that cannot apply to a plan file were silently ignored.
#[tokio::test(flavor = "multi_thread")]
async fn a_saved_plan_is_checked_again_and_cannot_be_edited() {
    let protect = "  lifecycle:\n    preventDestroy: true\n";
    let (sim, dir) = converged_sim(&[
        (
            "keep.yaml",
            slice_yaml("keep", "tpu-v6e-slice", "1x1", 1, protect),
        ),
        ("a.yaml", slice_yaml("a", "tpu-v6e-slice", "1x1", 1, "")),
    ])
    .await;
    create_by_hand(&sim, "theirs", serde_json::json!({"team": "other"})).await;
    std::fs::write(
        dir.path().join("a.yaml"),
        slice_yaml("a", "tpu-v6e-slice", "1x1", 2, ""),
    )
    .unwrap();
    let planfile = dir.path().join("../guards.plan.json");
    let pf = planfile.to_str().unwrap();
    let o = slicectl(&sim, &["plan", dir_arg(&dir), "--out", pf]).await;
    assert!(o.status.success(), "{}", text(&o));

    // Flags of planning are refused with a plan file, not ignored.
    for flags in [vec!["--max-destroy", "5"], vec!["--allow-empty-source"]] {
        let mut args = vec!["apply", pf, "--auto-approve"];
        args.extend(flags);
        let o = slicectl(&sim, &args).await;
        assert_eq!(o.status.code(), Some(1), "{}", text(&o));
        assert!(
            text(&o).contains("cannot be used with a saved plan"),
            "{}",
            text(&o)
        );
    }

    // Add deletes of the foreign and the protected pool to the plan.
    let original = std::fs::read_to_string(&planfile).unwrap();
    let mut v: Value = serde_json::from_str(&original).unwrap();
    let template = v["plan"]["actions"][0].clone();
    for (name, slice) in [("theirs", "theirs"), ("keep-0", "keep")] {
        let mut a = template.clone();
        a["action"] = "delete".into();
        a["name"] = name.into();
        a["slice"] = slice.into();
        a["address"] = format!("slice.{slice}[0].node_pool").into();
        a.as_object_mut().unwrap().remove("after");
        v["plan"]["actions"].as_array_mut().unwrap().push(a);
    }
    v["plan"]["summary"]["delete"] = 0.into();
    let edited = serde_json::to_string_pretty(&v).unwrap();
    std::fs::write(&planfile, &edited).unwrap();
    sim.reset_stats();
    let o = slicectl(&sim, &["apply", pf, "--auto-approve"]).await;
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("was edited"), "{}", text(&o));
    assert_eq!(sim.stats().writes, 0);

    // Even with its digest forged to match, the edited plan is not what the
    // saved specs plan against the live state: refused.
    let mut body = v.clone();
    body.as_object_mut().unwrap().remove("digest");
    let digest = hex::encode(Sha256::digest(serde_json::to_vec(&body).unwrap()));
    v["digest"] = digest.into();
    std::fs::write(&planfile, serde_json::to_string_pretty(&v).unwrap()).unwrap();
    let o = slicectl(&sim, &["apply", pf, "--auto-approve"]).await;
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        text(&o).contains("planning its specs again now gives a different plan"),
        "{}",
        text(&o)
    );
    assert_eq!(sim.stats().writes, 0);
    assert_eq!(pool_names(&sim).await, vec!["a-0", "keep-0", "theirs"]);

    // The untouched plan applies, with its summary counted from its actions.
    std::fs::write(&planfile, &original).unwrap();
    let o = slicectl(&sim, &["apply", pf, "--auto-approve"]).await;
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("Apply complete: 1 created"),
        "{}",
        text(&o)
    );
    assert_eq!(
        pool_names(&sim).await,
        vec!["a-0", "a-1", "keep-0", "theirs"]
    );
    let _ = std::fs::remove_file(planfile);
    sim.shutdown().await;
}

/// Defect 6: one protected slice in ERROR blocked the whole fleet. Also:
/// `status` showed an ERROR pool with no nodes as 1/1 (defect 10).
#[tokio::test(flavor = "multi_thread")]
async fn a_protected_slice_in_error_does_not_block_the_fleet() {
    let sim = sim(Duration::from_millis(10), 1, FaultConfig::default()).await;
    let protect = "  lifecycle:\n    preventDestroy: true\n";
    let dir = spec_dir(&[(
        "keep.yaml",
        slice_yaml("keep", "tpu-v6e-slice", "1x1", 1, protect),
    )]);
    sim.set_faults(FaultConfig {
        stockout_rate: 1.0,
        ..FaultConfig::default()
    });
    let o = apply(&sim, dir.path()).await;
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    sim.set_faults(FaultConfig::default());
    assert_eq!(pool(&sim, "keep-0").await.unwrap()["status"], "ERROR");
    let o = slicectl(&sim, &["status", dir_arg(&dir), "--output", "json"]).await;
    let rows: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(rows[0]["state"], "ERROR", "{rows}");
    assert_eq!(rows[0]["nodes"], "?/1", "{rows}");

    // Another slice is added: it converges although keep stays refused.
    std::fs::write(
        dir.path().join("other.yaml"),
        slice_yaml("other", "tpu-v6e-slice", "1x1", 1, ""),
    )
    .unwrap();
    let o = apply(&sim, dir.path()).await;
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let t = text(&o);
    assert!(t.contains("protected by preventDestroy"), "{t}");
    assert!(
        t.contains("gcloud container node-pools delete keep-0"),
        "{t}"
    );
    assert_eq!(pool(&sim, "other-0").await.unwrap()["status"], "RUNNING");
    assert_eq!(pool(&sim, "keep-0").await.unwrap()["status"], "ERROR");
    sim.shutdown().await;
}

/// Defect 7: removing only the spec-hash label (a hand-run
/// `gcloud ... update --node-labels`) made slicectl replace the pool.
#[tokio::test(flavor = "multi_thread")]
async fn a_missing_spec_hash_is_restamped_not_replaced() {
    let (sim, dir) =
        converged_sim(&[("a.yaml", slice_yaml("a", "tpu-v6e-slice", "1x1", 1, ""))]).await;
    let mut labels = pool(&sim, "a-0").await.unwrap()["config"]["labels"].clone();
    labels
        .as_object_mut()
        .unwrap()
        .remove("slicectl.dev/spec-hash");
    let r = reqwest::Client::new()
        .put(format!("{}/v1/{CLUSTER}/nodePools/a-0", sim.base_url()))
        .json(&serde_json::json!({"name": format!("{CLUSTER}/nodePools/a-0"), "labels": {"labels": labels}}))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{:?}", r.text().await);
    wait_until_done(&sim).await;
    sim.reset_stats();
    let o = apply(&sim, dir.path()).await;
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("1 updated, 0 replaced"), "{}", text(&o));
    let stats = sim.stats();
    assert_eq!(stats.writes, 1, "one label update, no delete or create");
    let p = pool(&sim, "a-0").await.unwrap();
    assert!(p["config"]["labels"]["slicectl.dev/spec-hash"].is_string());

    // Without ownership labels it is foreign, and the message says how to
    // take it back.
    let mut labels = p["config"]["labels"].clone();
    labels
        .as_object_mut()
        .unwrap()
        .retain(|k, _| !k.starts_with("slicectl.dev/"));
    let r = reqwest::Client::new()
        .put(format!("{}/v1/{CLUSTER}/nodePools/a-0", sim.base_url()))
        .json(&serde_json::json!({"name": format!("{CLUSTER}/nodePools/a-0"), "labels": {"labels": labels}}))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{:?}", r.text().await);
    wait_until_done(&sim).await;
    let o = slicectl(&sim, &["plan", dir_arg(&dir)]).await;
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let t = text(&o);
    assert!(t.contains("not created by slicectl"), "{t}");
    assert!(t.contains("slicectl.dev/owner=e2e"), "{t}");
    let o = slicectl(&sim, &["status", dir_arg(&dir), "--output", "json"]).await;
    let rows: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(rows[0]["state"], "NOT OWNED", "{rows}");
    sim.shutdown().await;
}

/// Defect 10: `destroy` had no `--max-destroy`.
#[tokio::test(flavor = "multi_thread")]
async fn destroy_is_capped_too() {
    let (sim, dir) =
        converged_sim(&[("a.yaml", slice_yaml("a", "tpu-v6e-slice", "1x1", 3, ""))]).await;
    let o = slicectl(
        &sim,
        &[
            "destroy",
            dir_arg(&dir),
            "--auto-approve",
            "--max-destroy",
            "2",
        ],
    )
    .await;
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        text(&o).contains("more than --max-destroy=2"),
        "{}",
        text(&o)
    );
    assert!(text(&o).contains("a[0], a[1], a[2]"), "{}", text(&o));
    assert_eq!(pool_names(&sim).await.len(), 3);
    let o = slicectl(
        &sim,
        &[
            "destroy",
            dir_arg(&dir),
            "--auto-approve",
            "--max-destroy",
            "3",
        ],
    )
    .await;
    assert!(o.status.success(), "{}", text(&o));
    assert!(pool_names(&sim).await.is_empty());
    sim.shutdown().await;
}

/// Defect 3: between the plan and the user's `yes`, someone deleted the pool
/// and made their own under the same name; slicectl deleted theirs.
#[tokio::test(flavor = "multi_thread")]
async fn the_confirmation_is_checked_against_the_world_again() {
    use tokio::io::AsyncWriteExt;
    let (sim, dir) = converged_sim(&[
        ("a.yaml", slice_yaml("a", "tpu-v6e-slice", "1x1", 1, "")),
        ("b.yaml", slice_yaml("b", "tpu-v6e-slice", "1x1", 1, "")),
    ])
    .await;
    std::fs::remove_file(dir.path().join("b.yaml")).unwrap();
    let cmd = format!("{} apply {}", bin().display(), dir_arg(&dir));
    let mut child = tokio::process::Command::new("script")
        .args(["-qec", &cmd, "/dev/null"])
        .env("NO_COLOR", "1")
        .env("SLICECTL_API_ENDPOINT", sim.base_url())
        .env("SLICECTL_UNREAD_CLUSTERS_IDLE", "true")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("script(1) from util-linux is needed for the terminal test");
    // The plan (delete b-0) is on screen; meanwhile someone else replaces
    // b-0 with a pool of their own.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    delete_by_hand(&sim, "b-0").await;
    create_by_hand(&sim, "b-0", serde_json::json!({"team": "other"})).await;
    child
        .stdin
        .as_mut()
        .unwrap()
        .write_all(b"yes\n")
        .await
        .unwrap();
    let o = child.wait_with_output().await.unwrap();
    let t = text(&o);
    assert!(t.contains("Only 'yes' will be accepted"), "{t}");
    assert!(t.contains("changed while waiting for confirmation"), "{t}");
    assert!(!t.contains("Apply complete"), "{t}");
    let theirs = pool(&sim, "b-0").await.expect("their pool must survive");
    assert_eq!(theirs["config"]["labels"]["team"], "other");
    sim.shutdown().await;
}

/// GKE sizes a multi-host TPU slice by the per-zone maxNodeCount; a
/// flex-start slice rendered with only the total counts was refused by GKE
/// (and is by the simulator now).
#[tokio::test(flavor = "multi_thread")]
async fn a_multi_host_flex_start_slice_is_sized_per_zone() {
    let flex = "  capacity:\n    type: flex-start\n    maxRunDuration: 24h\n";
    let (sim, _dir) = converged_sim(&[
        (
            "flex.yaml",
            slice_yaml("flex", "tpu-v6e-slice", "4x4", 1, flex),
        ),
        (
            "one.yaml",
            slice_yaml("one", "tpu-v6e-slice", "2x2", 1, flex),
        ),
    ])
    .await;
    let p = pool(&sim, "flex-0").await.unwrap();
    assert_eq!(p["autoscaling"]["maxNodeCount"], 4, "{p}");
    assert_eq!(p["autoscaling"]["minNodeCount"], 0, "{p}");
    let one = pool(&sim, "one-0").await.unwrap();
    assert_eq!(one["autoscaling"]["totalMaxNodeCount"], 1, "{one}");

    // What GKE answers to the total-only shape, and to a topology on a
    // single-host pool.
    let client = reqwest::Client::new();
    let post = |pool: Value| {
        client
            .post(format!("{}/v1/{CLUSTER}/nodePools", sim.base_url()))
            .json(&serde_json::json!({"parent": CLUSTER, "nodePool": pool}))
            .send()
    };
    let r = post(serde_json::json!({
        "name": "total-only", "initialNodeCount": 0, "locations": ["us-central1-b"],
        "config": {"machineType": "ct6e-standard-4t"},
        "placementPolicy": {"type": "COMPACT", "tpuTopology": "4x4"},
        "autoscaling": {"enabled": true, "totalMinNodeCount": 0, "totalMaxNodeCount": 4}
    }))
    .await
    .unwrap();
    assert_eq!(r.status(), 400);
    let body = r.text().await.unwrap();
    assert!(
        body.contains(
            "Maximum node count 0 is not a valid size of TPU pod slice with topology 4x4"
        ),
        "{body}"
    );
    let r = post(serde_json::json!({
        "name": "single", "initialNodeCount": 1, "locations": ["us-central1-b"],
        "config": {"machineType": "ct6e-standard-4t"},
        "placementPolicy": {"type": "COMPACT", "tpuTopology": "2x2"}
    }))
    .await
    .unwrap();
    assert_eq!(r.status(), 400);
    let body = r.text().await.unwrap();
    assert!(
        body.contains("TPU topology can't be specified with single-host TPU slice pool"),
        "{body}"
    );
    let r = post(serde_json::json!({
        "name": "queued", "initialNodeCount": 0, "locations": ["us-central1-b"],
        "config": {"machineType": "ct6e-standard-4t"},
        "queuedProvisioning": {"enabled": true}
    }))
    .await
    .unwrap();
    assert_eq!(r.status(), 400);
    let body = r.text().await.unwrap();
    assert!(
        body.contains("Queued_provisioning requires reservation affinity to be set to none"),
        "{body}"
    );
    // tpu7x with COMPACT placement: accepted, then the pool goes to ERROR.
    let r = post(serde_json::json!({
        "name": "compact7x", "initialNodeCount": 2, "locations": ["us-central1-c"],
        "config": {"machineType": "tpu7x-standard-4t"},
        "placementPolicy": {"type": "COMPACT", "tpuTopology": "2x2x2"}
    }))
    .await
    .unwrap();
    assert_eq!(r.status(), 200, "{:?}", r.text().await);
    wait_until_done(&sim).await;
    let p = pool(&sim, "compact7x").await.unwrap();
    assert_eq!(p["status"], "ERROR", "{p}");
    assert!(
        p["statusMessage"]
            .as_str()
            .unwrap_or_default()
            .contains("with placement policy is not supported. Use workload policy instead."),
        "{p}"
    );
    sim.shutdown().await;
}

/// On a zonal cluster GKE's operation links say `zones/<zone>`, not
/// `locations/`: an in-flight create left by a killed apply was invisible
/// there, so nothing waited for it.
#[tokio::test(flavor = "multi_thread")]
async fn in_flight_operations_are_found_on_a_zonal_cluster() {
    const ZONAL: &str = "projects/example-project/locations/us-central1-b/clusters/zonal";
    let sim = sim(Duration::from_secs(4), 1, FaultConfig::default()).await;
    sim.add_cluster(ZONAL).unwrap();
    // The first target (us-central1-b, which offers v6e) on a zonal cluster there.
    let target = TARGET
        .replacen("name: train\nspec:", "name: zonal\nspec:", 1)
        .replacen(
            "location: us-central1\n    name: train",
            "location: us-central1-b\n    name: zonal",
            1,
        );
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("target.yaml"), target).unwrap();
    std::fs::write(
        d.path().join("a.yaml"),
        slice_yaml("a", "tpu-v6e-slice", "1x1", 1, "").replace("target: train", "target: zonal"),
    )
    .unwrap();
    let dir = d.path().to_str().unwrap();
    // An apply that is killed once its create is in flight.
    let mut child = tokio::process::Command::new(bin())
        .args(["apply", dir, "--auto-approve"])
        .env("SLICECTL_API_ENDPOINT", sim.base_url())
        .env("SLICECTL_UNREAD_CLUSTERS_IDLE", "true")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let url = format!("{}/v1/{ZONAL}/nodePools", sim.base_url());
    for _ in 0..100 {
        let v: Value = reqwest::get(&url).await.unwrap().json().await.unwrap();
        if v["nodePools"].as_array().is_some_and(|a| !a.is_empty()) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    child.start_kill().unwrap();
    let _ = child.wait().await;
    let o = slicectl(&sim, &["plan", dir, "--output", "json"]).await;
    assert!(o.status.success(), "{}", text(&o));
    let plan: Value = serde_json::from_slice(&o.stdout).unwrap();
    let a = &plan["actions"][0];
    assert_eq!(a["action"], "wait", "{plan:#}");
    assert_eq!(a["reason_code"], "operation_in_flight", "{plan:#}");
    sim.shutdown().await;
}

/// Issue 8: against GKE's quota of 5 concurrent operations per cluster, the
/// old executor sent 16 creates at once (its parallelism), and the sixth to
/// sixteenth met 429 "Too many operations" and were retried blindly until
/// the retry budget ran out. Now the quota is learned from the first 429 and
/// every other write waits for an operation to finish.
#[tokio::test(flavor = "multi_thread")]
async fn sixteen_slices_in_one_cluster_respect_the_operations_quota() {
    let sim = sim(Duration::from_millis(1500), 1, FaultConfig::default()).await;
    let dir = spec_dir(&[("a.yaml", slice_yaml("a", "tpu-v6e-slice", "1x1", 16, ""))]);
    let o = apply(&sim, dir.path()).await;
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(pool_names(&sim).await.len(), 16);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("1 write(s) were refused by the cloud's concurrency limits")
            && out.contains("(concurrent operations quota: 5 in projects/example-project/locations/us-central1/clusters/train)"),
        "{}",
        text(&o)
    );
    let stats = sim.stats();
    assert_eq!(
        stats.by_method["container.projects.locations.clusters.nodePools.create"], 17,
        "16 creates and the one refusal that taught the quota: {stats:?}"
    );
    sim.shutdown().await;
}

/// Issue 8: writes per project go through a client-side token bucket. A
/// project that allows 2 writes a second (the simulator answers any write
/// beyond that 429) sees none refused with `--write-rate 2 --write-burst 1`,
/// and some without the limit.
#[tokio::test(flavor = "multi_thread")]
async fn the_write_rate_keeps_inside_the_projects_rate_limit() {
    for (limit, refused) in [("2", false), ("0", true)] {
        let sim = sim(
            Duration::from_millis(10),
            1,
            FaultConfig {
                write_rate_limit: Some(2.0),
                ..FaultConfig::default()
            },
        )
        .await;
        let dir = spec_dir(&[("a.yaml", slice_yaml("a", "tpu-v6e-slice", "1x1", 4, ""))]);
        let o = slicectl(
            &sim,
            &[
                "apply",
                dir.path().to_str().unwrap(),
                "--auto-approve",
                "--write-rate",
                limit,
                "--write-burst",
                "1",
            ],
        )
        .await;
        assert!(o.status.success(), "{}", text(&o));
        assert_eq!(pool_names(&sim).await.len(), 4);
        assert_eq!(
            sim.stats().faults_injected > 0,
            refused,
            "--write-rate {limit}: {:?}",
            sim.stats()
        );
        sim.shutdown().await;
    }
}
