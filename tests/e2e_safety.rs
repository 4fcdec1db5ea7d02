//! Safety rails, end to end through the binary.

mod common;

use std::time::Duration;

use common::*;
use slicectl::sim::FaultConfig;

async fn converged_sim(files: &[(&str, String)]) -> (slicectl::sim::SimHandle, tempfile::TempDir) {
    let sim = sim(Duration::from_millis(10), 1, FaultConfig::default()).await;
    let dir = spec_dir(files);
    let o = apply(&sim, dir.path()).await;
    assert!(o.status.success(), "{}", text(&o));
    (sim, dir)
}

#[tokio::test(flavor = "multi_thread")]
async fn an_invalid_file_never_deletes_or_replaces() {
    let (sim, dir) = converged_sim(&[
        ("a.yaml", slice_yaml("a", "tpu-v6e-slice", "1x1", 1, "")),
        ("b.yaml", slice_yaml("b", "tpu-v6e-slice", "1x1", 1, "")),
    ])
    .await;
    // b.yaml becomes invalid: its slice must not be seen as removed.
    std::fs::write(
        dir.path().join("b.yaml"),
        "apiVersion: slicectl.dev/v1alpha1\nkind: Slice\nmetadata: {name: b\n",
    )
    .unwrap();
    sim.reset_stats();
    for args in [vec!["plan"], vec!["apply", "--auto-approve"]] {
        let mut a = args.clone();
        a.insert(1, dir.path().to_str().unwrap());
        let o = slicectl(&sim, &a).await;
        assert_eq!(o.status.code(), Some(1), "{}", text(&o));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("b.yaml:"), "{err}");
        assert!(err.contains("nothing was planned or changed"), "{err}");
    }
    assert_eq!(sim.stats().writes, 0);
    assert_eq!(pool_names(&sim).await, vec!["a-0", "b-0"]);
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_empty_source_never_prunes_without_override() {
    let (sim, dir) =
        converged_sim(&[("a.yaml", slice_yaml("a", "tpu-v6e-slice", "1x1", 1, ""))]).await;
    std::fs::remove_file(dir.path().join("a.yaml")).unwrap();
    let o = apply(&sim, dir.path()).await;
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        text(&o).contains("refusing to delete them all"),
        "{}",
        text(&o)
    );
    assert_eq!(pool_names(&sim).await, vec!["a-0"]);
    let o = slicectl(
        &sim,
        &[
            "apply",
            dir.path().to_str().unwrap(),
            "--auto-approve",
            "--allow-empty-source",
        ],
    )
    .await;
    assert!(o.status.success(), "{}", text(&o));
    assert!(pool_names(&sim).await.is_empty());
    // A missing directory is an error, not an empty fleet.
    let o = slicectl(&sim, &["apply", "/nonexistent/specs", "--auto-approve"]).await;
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn destructive_actions_are_capped() {
    let (sim, dir) =
        converged_sim(&[("a.yaml", slice_yaml("a", "tpu-v6e-slice", "1x1", 3, ""))]).await;
    std::fs::write(
        dir.path().join("a.yaml"),
        slice_yaml("a", "tpu-v6e-slice", "2x2", 3, ""),
    )
    .unwrap();
    let o = slicectl(
        &sim,
        &[
            "apply",
            dir.path().to_str().unwrap(),
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
    let o = slicectl(
        &sim,
        &[
            "apply",
            dir.path().to_str().unwrap(),
            "--auto-approve",
            "--max-destroy",
            "3",
        ],
    )
    .await;
    assert!(o.status.success(), "{}", text(&o));
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn prevent_destroy_survives_deleting_the_yaml() {
    let (sim, dir) = converged_sim(&[
        (
            "keep.yaml",
            slice_yaml(
                "keep",
                "tpu-v6e-slice",
                "1x1",
                1,
                "  lifecycle:\n    preventDestroy: true\n",
            ),
        ),
        (
            "other.yaml",
            slice_yaml("other", "tpu-v6e-slice", "1x1", 1, ""),
        ),
    ])
    .await;
    let pool = node_pools(&sim)
        .await
        .into_iter()
        .find(|p| p["name"] == "keep-0")
        .unwrap();
    assert_eq!(
        pool["config"]["labels"]["slicectl.dev/prevent-destroy"],
        "true"
    );
    std::fs::remove_file(dir.path().join("keep.yaml")).unwrap();
    let o = apply(&sim, dir.path()).await;
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        text(&o).contains("protected by preventDestroy"),
        "{}",
        text(&o)
    );
    assert_eq!(pool_names(&sim).await, vec!["keep-0", "other-0"]);
    let o = slicectl(
        &sim,
        &["destroy", dir.path().to_str().unwrap(), "--auto-approve"],
    )
    .await;
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(pool_names(&sim).await.contains(&"keep-0".to_string()));
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn unowned_pools_are_listed_and_never_changed() {
    let sim = sim(Duration::from_millis(10), 1, FaultConfig::default()).await;
    // A pool created by someone else (gcloud, tpu-provisioner, ...).
    let body = serde_json::json!({
        "parent": CLUSTER,
        "nodePool": {"name": "default-pool", "initialNodeCount": 1, "config": {"machineType": "e2-standard-4"}}
    });
    let r = reqwest::Client::new()
        .post(format!("{}/v1/{CLUSTER}/nodePools", sim.base_url()))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{:?}", r.text().await);
    tokio::time::sleep(Duration::from_millis(50)).await;
    let dir = spec_dir(&[("a.yaml", slice_yaml("a", "tpu-v6e-slice", "1x1", 1, ""))]);
    let o = apply(&sim, dir.path()).await;
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("Unmanaged resources"), "{}", text(&o));
    assert!(text(&o).contains("\"default-pool\""), "{}", text(&o));
    let o = slicectl(
        &sim,
        &["destroy", dir.path().to_str().unwrap(), "--auto-approve"],
    )
    .await;
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(pool_names(&sim).await, vec!["default-pool"]);
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_saved_plan_is_refused_once_the_world_moved() {
    let sim = sim(Duration::from_millis(10), 1, FaultConfig::default()).await;
    let dir = spec_dir(&[("a.yaml", slice_yaml("a", "tpu-v6e-slice", "1x1", 1, ""))]);
    let planfile = dir.path().join("../saved.plan.json");
    let o = slicectl(
        &sim,
        &[
            "plan",
            dir.path().to_str().unwrap(),
            "--out",
            planfile.to_str().unwrap(),
        ],
    )
    .await;
    assert!(o.status.success(), "{}", text(&o));
    // Someone applies in between.
    let o = apply(&sim, dir.path()).await;
    assert!(o.status.success(), "{}", text(&o));
    let o = slicectl(
        &sim,
        &["apply", planfile.to_str().unwrap(), "--auto-approve"],
    )
    .await;
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        text(&o).contains("the live state has changed"),
        "{}",
        text(&o)
    );
    // A fresh saved plan applies.
    std::fs::write(
        dir.path().join("a.yaml"),
        slice_yaml("a", "tpu-v6e-slice", "1x1", 2, ""),
    )
    .unwrap();
    let o = slicectl(
        &sim,
        &[
            "plan",
            dir.path().to_str().unwrap(),
            "--out",
            planfile.to_str().unwrap(),
        ],
    )
    .await;
    assert!(o.status.success(), "{}", text(&o));
    let o = slicectl(
        &sim,
        &["apply", planfile.to_str().unwrap(), "--auto-approve"],
    )
    .await;
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(pool_names(&sim).await, vec!["a-0", "a-1"]);
    let _ = std::fs::remove_file(planfile);
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn apply_without_a_terminal_needs_auto_approve() {
    let sim = sim(Duration::from_millis(10), 1, FaultConfig::default()).await;
    let dir = spec_dir(&[("a.yaml", slice_yaml("a", "tpu-v6e-slice", "1x1", 1, ""))]);
    let o = slicectl(&sim, &["apply", dir.path().to_str().unwrap()]).await;
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("pass --auto-approve"), "{}", text(&o));
    assert_eq!(sim.stats().writes, 0);
    sim.shutdown().await;
}
