//! Issue 17 item 1, end to end: each Target on its own. A Target that
//! cannot be observed (a deleted GKE cluster, a self-managed cluster with no
//! kubeconfig) gets no action and is reported, the other Targets converge,
//! and the run exits 1. No error message repeats its cause.

use crate::common;

use std::path::Path;
use std::time::Duration;

use common::*;
use slicectl_sim::{FaultConfig, SimConfig, SimHandle, Simulator};

/// A Target on a cluster the simulator does not have (deleted).
const GONE: &str = r#"---
apiVersion: slicectl.dev/v1alpha1
kind: Target
metadata:
  name: gone
spec:
  project: example-project
  zone: us-central1-a
  ownerId: e2e
  gke:
    location: us-central1
    name: deleted-cluster
"#;

/// `slice_yaml` on another Target.
fn slice_on(name: &str, target: &str) -> String {
    slice_yaml(name, "tpu-v5-lite-podslice", "2x2", 1, "")
        .replace("target: train-a", &format!("target: {target}"))
}

/// Every `: `-separated segment of at least 12 characters occurs once in
/// each line (a cause said twice is the doubled chain of issue 17).
fn assert_no_repeated_cause(out: &str) {
    for line in out.lines() {
        assert_eq!(
            slicectl::error::repeated_segment(line),
            None,
            "a cause is said twice in: {line}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_deleted_cluster_leaves_its_target_alone_and_the_other_converges() {
    let sim = sim(Duration::from_millis(20), 17, FaultConfig::default()).await;
    // Slice `b` runs on Target train-a (cluster train).
    let dir = spec_dir(&[
        ("a.yaml", slice_yaml("a", "tpu-v6e-slice", "1x1", 1, "")),
        ("b.yaml", slice_on("b", "train-a")),
    ]);
    let o = apply(&sim, dir.path()).await;
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let before = pool_names(&sim).await;
    assert_eq!(before.len(), 2, "{before:?}");
    // A Target on a cluster that was deleted joins; slice `a` grows a
    // replica; slice `b` moves to the new Target; slice `c` is new there.
    std::fs::write(dir.path().join("target.yaml"), format!("{TARGET}{GONE}")).unwrap();
    put(
        dir.path(),
        "a.yaml",
        &slice_yaml("a", "tpu-v6e-slice", "1x1", 2, ""),
    );
    put(dir.path(), "b.yaml", &slice_on("b", "gone"));
    put(dir.path(), "c.yaml", &slice_on("c", "gone"));

    // plan: the healthy Target's create is planned, the other is reported
    // with its code and cause, and the exit code says something was left.
    let d = dir.path().to_str().unwrap();
    let o = slicectl(&sim, &["plan", d, "--detailed-exitcode"]).await;
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(t.contains("+ create") || t.contains("create"), "{t}");
    assert!(t.contains("target gone"), "{t}");
    assert!(t.contains("[target_not_found]"), "{t}");
    assert!(t.contains("clusters/deleted-cluster"), "{t}");
    assert!(t.contains("slices not observed: b, c"), "{t}");
    assert!(
        t.contains("Plan: 1 to create, 0 to update in place, 0 to replace, 0 to destroy."),
        "{t}"
    );
    assert_no_repeated_cause(&t);

    // JSON: the same, for machines.
    let o = slicectl(&sim, &["plan", d, "--output", "json"]).await;
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let json: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(json["unobserved"][0]["target"], "gone", "{json}");
    assert_eq!(json["unobserved"][0]["code"], "target_not_found", "{json}");
    assert_eq!(json["summary"]["unobserved"], 2, "{json}");
    assert!(
        json["actions"]
            .as_array()
            .unwrap()
            .iter()
            .all(|a| a["slice"] == "a"),
        "{json}"
    );

    // apply: a converges, b's pool in train is not deleted (its Target
    // was not seen), exit 1.
    let o = apply(&sim, dir.path()).await;
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(
        t.contains("not observed: target gone [target_not_found]"),
        "{t}"
    );
    assert_no_repeated_cause(&t);
    let after = pool_names(&sim).await;
    assert_eq!(after.len(), 3, "a grew, nothing was deleted: {after:?}");
    for p in &before {
        assert!(after.contains(p), "{p} was deleted: {after:?}");
    }
    assert!(t.contains("NOT OBSERVED"), "the status table says so: {t}");

    // status: the slices of the unobserved Target, with the cause; exit 1.
    let o = slicectl(&sim, &["status", d]).await;
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    let lines: Vec<&str> = t
        .lines()
        .filter(|l| l.starts_with("│") && l.contains("NOT OBSERVED"))
        .collect();
    assert_eq!(lines.len(), 2, "b and c: {t}");
    assert!(t.contains("target_not_found"), "{t}");
    assert!(
        t.contains("its Target gone could not be observed: left untouched"),
        "b's pool in train is not shown as about to be deleted: {t}"
    );
    assert_no_repeated_cause(&t);

    // Once the Target points at a cluster that exists, b moves and c is made.
    std::fs::write(dir.path().join("target.yaml"), TARGET).unwrap();
    put(dir.path(), "b.yaml", &slice_on("b", "train-a"));
    put(dir.path(), "c.yaml", &slice_on("c", "train-a"));
    let o = apply(&sim, dir.path()).await;
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(pool_names(&sim).await.len(), 4);
}

/// A simulator with both clusters the committed specs name.
async fn sim_for_committed_specs() -> SimHandle {
    let _ = rustls::crypto::ring::default_provider().install_default();
    Simulator::start(
        SimConfig {
            clusters: vec![
                CLUSTER.to_string(),
                "projects/example-project/locations/us-central2/clusters/research".to_string(),
            ],
            operation_latency: Duration::from_millis(5),
            seed: 17,
            faults: FaultConfig::default(),
        },
        "127.0.0.1:0".parse().unwrap(),
    )
    .await
    .unwrap()
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let p = e.unwrap().path();
        let dest = to.join(p.file_name().unwrap());
        if p.is_dir() {
            copy_dir(&p, &dest);
        } else {
            std::fs::copy(&p, &dest).unwrap();
        }
    }
}

/// The committed `specs/` against a Google-like endpoint (not `--sim`, so
/// the self-managed Target's Kubernetes API is really looked for) from a
/// home with no `~/.kube/config`: the GCE Target is unobserved
/// (`target_unconfigured`), the GKE Targets plan and converge.
#[tokio::test(flavor = "multi_thread")]
async fn the_committed_specs_with_no_kubeconfig_converge_their_gke_targets() {
    let sim = sim_for_committed_specs().await;
    let home = tempfile::tempdir().unwrap();
    let specs = home.path().join("specs");
    copy_dir(Path::new("specs"), &specs);
    let run = |args: Vec<String>| {
        let mut cmd = tokio::process::Command::new(bin());
        cmd.args(&args)
            .env("SLICECTL_API_ENDPOINT", sim.base_url())
            .env("SLICECTL_UNREAD_CLUSTERS_IDLE", "true")
            .env("HOME", home.path())
            .env_remove("KUBECONFIG")
            .env("NO_COLOR", "1")
            .stdin(std::process::Stdio::null());
        cmd
    };
    let d = specs.to_str().unwrap().to_string();
    let o = run(vec!["plan".into(), d.clone()]).output().await.unwrap();
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(t.contains("target research-kubeadm"), "{t}");
    assert!(t.contains("[target_unconfigured]"), "{t}");
    assert!(t.contains("to create"), "the GKE Targets are planned: {t}");
    assert_no_repeated_cause(&t);
    let o = run(vec!["apply".into(), d.clone(), "--auto-approve".into()])
        .output()
        .await
        .unwrap();
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(pool_names(&sim).await.len() >= 5, "{t}");
    // (The committed fleet's reservations do not exist in this simulator:
    // those two creates fail on their own; nothing else does.)
    let failed: Vec<&str> = t.lines().filter(|l| l.contains("failed [")).collect();
    assert!(
        failed.iter().all(|l| l.contains("reservation")),
        "only the unobserved Target and the missing reservations are left: {t}"
    );
    assert!(
        t.contains("research-kubeadm-v6e") && t.contains("NOT OBSERVED"),
        "{t}"
    );
    assert_no_repeated_cause(&t);
    // Nothing of the self-managed Target was made.
    let migs = reqwest::get(format!(
        "{}/compute/v1/projects/example-project/aggregated/instanceGroupManagers",
        sim.base_url()
    ))
    .await
    .unwrap()
    .text()
    .await
    .unwrap();
    assert!(!migs.contains("\"name\""), "{migs}");
}
