//! Safety rails, end to end through the binary.

use crate::common;

use std::time::Duration;

use common::*;
use slicectl_sim::FaultConfig;

async fn converged_sim(files: &[(&str, String)]) -> (slicectl_sim::SimHandle, tempfile::TempDir) {
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

/// A Target in a pull request naming a kubeconfig beside the YAML, whose
/// user runs `sh`: the attack of plan-on-pull-request. `plan` (text and
/// JSON), `status` and `plan --sim` must never run it.
const GCE_TARGET_WITH_KUBECONFIG: &str = r#"apiVersion: slicectl.dev/v1alpha1
kind: Target
metadata:
  name: pr
spec:
  project: example-project
  zone: us-central1-b
  ownerId: pr
  gce:
    controlPlaneEndpoint: "127.0.0.1:1"
    kubeApi:
      kubeconfig: KUBECONFIG_PATH
"#;

const GCE_SLICE: &str = r#"apiVersion: slicectl.dev/v1alpha1
kind: Slice
metadata:
  name: prs
spec:
  target: pr
  backend: gce
  accelerator: tpu-v6e-slice
  topology: "2x2"
  gce:
    image: projects/ubuntu-os-accelerator-images/global/images/family/ubuntu-accel-2404-amd64-tpu-v6e
    bootstrap:
      kubeadm:
        kubernetesVersion: "1.36"
"#;

fn hostile_kubeconfig(server: &str, user: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {{server: '{server}', insecure-skip-tls-verify: true}}\nusers:\n- name: u\n  user:\n{user}\ncontexts:\n- name: x\n  context: {{cluster: c, user: u}}\ncurrent-context: x\n"
    )
}

/// Runs the binary in `dir` (relative kubeconfig paths resolve there) with a
/// HOME and no KUBECONFIG of the developer's.
async fn run_in(
    dir: &std::path::Path,
    home: &std::path::Path,
    args: &[&str],
    sim: Option<&slicectl_sim::SimHandle>,
) -> std::process::Output {
    let mut cmd = tokio::process::Command::new(bin());
    cmd.args(args)
        .current_dir(dir)
        .env("HOME", home)
        .env_remove("KUBECONFIG")
        .env_remove("SLICECTL_API_ENDPOINT")
        .env("NO_COLOR", "1")
        .stdin(std::process::Stdio::null());
    if let Some(sim) = sim {
        cmd.env("SLICECTL_API_ENDPOINT", sim.base_url())
            .env("SLICECTL_UNREAD_CLUSTERS_IDLE", "true");
    }
    cmd.output().await.unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_kubeconfig_a_spec_names_never_runs_a_command() {
    let sim = sim(Duration::from_millis(10), 1, FaultConfig::default()).await;
    let home = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("MARKER");
    let cred = r#"{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"t"}}"#;
    let user = format!(
        "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: sh\n      args: ['-c', 'id > {}; echo ''{cred}''']\n      interactiveMode: Never",
        marker.display()
    );
    std::fs::write(
        dir.path().join("kubeconfig"),
        hostile_kubeconfig("https://127.0.0.1:1", &user),
    )
    .unwrap();
    std::fs::write(
        dir.path().join("target.yaml"),
        GCE_TARGET_WITH_KUBECONFIG.replace("KUBECONFIG_PATH", "kubeconfig"),
    )
    .unwrap();
    std::fs::write(dir.path().join("slice.yaml"), GCE_SLICE).unwrap();
    let d = dir.path();
    for args in [
        vec!["plan", "."],
        vec!["plan", ".", "-o", "json"],
        vec!["status", "."],
        vec!["apply", ".", "--auto-approve"],
    ] {
        let o = run_in(d, home.path(), &args, Some(&sim)).await;
        assert_eq!(o.status.code(), Some(1), "{args:?}: {}", text(&o));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("runs a credential plugin"), "{args:?}: {err}");
        assert!(err.contains("target.yaml:1:1"), "{args:?}: located: {err}");
        assert!(err.contains("--trust-kubeconfig"), "{args:?}: {err}");
        assert!(!marker.exists(), "{args:?} ran the spec's command");
    }
    // Under --sim the kubeconfig is not even read.
    let o = run_in(d, home.path(), &["plan", ".", "--sim"], None).await;
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("under --sim slicectl reaches no real Kubernetes API"),
        "{}",
        text(&o)
    );
    assert!(!marker.exists(), "plan --sim ran the spec's command");
    // The operator may vouch for it: then (and only then) it runs.
    let o = run_in(
        d,
        home.path(),
        &["plan", ".", "--trust-kubeconfig", "kubeconfig"],
        Some(&sim),
    )
    .await;
    assert!(marker.exists(), "a trusted plugin runs: {}", text(&o));
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_spec_named_kubeconfig_is_read_bounded_and_never_echoed() {
    let sim = sim(Duration::from_millis(10), 1, FaultConfig::default()).await;
    let home = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("slice.yaml"), GCE_SLICE).unwrap();
    let target = |path: &str| {
        std::fs::write(
            dir.path().join("target.yaml"),
            GCE_TARGET_WITH_KUBECONFIG.replace("KUBECONFIG_PATH", path),
        )
        .unwrap();
    };
    // A FIFO: `plan` used to hang on it for ever.
    let fifo = dir.path().join("fifo");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    for (path, want) in [
        ("fifo", "FIFO"),
        ("/dev/zero", "character device"),
        ("/etc/passwd", "not a valid kubeconfig"),
    ] {
        target(path);
        let o = tokio::time::timeout(
            Duration::from_secs(30),
            run_in(dir.path(), home.path(), &["plan", "."], Some(&sim)),
        )
        .await
        .unwrap_or_else(|_| panic!("plan hung on {path}"));
        assert_eq!(o.status.code(), Some(1), "{}", text(&o));
        let t = text(&o);
        assert!(t.contains(want), "{path}: {t}");
        assert!(!t.contains("root:"), "{path}: echoed: {t}");
    }
    // A key and a password line: never echoed.
    std::fs::write(
        dir.path().join("secret"),
        "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\npassword: hunter2\n",
    )
    .unwrap();
    target("secret");
    let o = run_in(dir.path(), home.path(), &["plan", "."], Some(&sim)).await;
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    for s in ["hunter2", "MIIEvQ", "PRIVATE KEY"] {
        assert!(!t.contains(s), "{s} echoed: {t}");
    }
    sim.shutdown().await;
}

/// `--sim` dials no Kubernetes API at all, whatever the specs name: a
/// listener standing in for the cluster sees no connection.
#[tokio::test(flavor = "multi_thread")]
async fn sim_mode_never_dials_a_kubernetes_api() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    listener.set_nonblocking(true).unwrap();
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir(home.path().join(".kube")).unwrap();
    std::fs::write(
        home.path().join(".kube/config"),
        hostile_kubeconfig(&format!("https://127.0.0.1:{port}"), "    token: t"),
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("target.yaml"),
        GCE_TARGET_WITH_KUBECONFIG
            .replace("KUBECONFIG_PATH", "\"~/.kube/config\"")
            .replace("127.0.0.1:1", &format!("127.0.0.1:{port}")),
    )
    .unwrap();
    std::fs::write(dir.path().join("slice.yaml"), GCE_SLICE).unwrap();
    for args in [
        vec!["plan", ".", "--sim"],
        vec!["status", ".", "--sim"],
        vec![
            "apply",
            ".",
            "--sim",
            "--sim-latency",
            "10ms",
            "--auto-approve",
        ],
        vec![
            "destroy",
            ".",
            "--sim",
            "--sim-latency",
            "10ms",
            "--auto-approve",
        ],
    ] {
        let o = run_in(dir.path(), home.path(), &args, None).await;
        assert!(o.status.success(), "{args:?}: {}", text(&o));
        assert!(text(&o).contains("nothing real is touched"), "{}", text(&o));
        assert!(
            matches!(listener.accept(), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
            "{args:?} connected to the Kubernetes API"
        );
    }
    // The controller promises the same by refusing --sim.
    let o = run_in(dir.path(), home.path(), &["controller", "--sim"], None).await;
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("does not take --sim"), "{}", text(&o));
}

/// Issue 24: a roll-out under a stockout, through the simulator server's
/// fault switch (`PUT /_sim/faults`) with operation latency: three RUNNING
/// replicas, a topology change, every create stocked out. Only the first
/// replica is replaced (and lost); the other two keep running, and the
/// summary says what was deleted and not recreated.
#[tokio::test(flavor = "multi_thread")]
async fn a_roll_out_under_a_stockout_stops_at_the_first_failed_replacement() {
    let (sim, dir) =
        converged_sim(&[("rep.yaml", slice_yaml("rep", "tpu-v6e-slice", "2x2", 3, ""))]).await;
    std::fs::write(
        dir.path().join("rep.yaml"),
        slice_yaml("rep", "tpu-v6e-slice", "2x4", 3, ""),
    )
    .unwrap();
    set_faults(&sim, serde_json::json!({"stockout_rate": 1.0})).await;
    let o = slicectl(
        &sim,
        &[
            "apply",
            dir.path().to_str().unwrap(),
            "--auto-approve",
            "--max-replacements",
            "1",
        ],
    )
    .await;
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(t.contains("roll-out stopped"), "{t}");
    assert!(t.contains("1 replaced but not recreated"), "{t}");
    let pools = node_pools(&sim).await;
    let running: Vec<&str> = pools
        .iter()
        .filter(|p| p["status"] == "RUNNING")
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        running.len(),
        2,
        "two replicas keep their capacity: {pools:?}"
    );
    for p in pools.iter().filter(|p| p["status"] == "RUNNING") {
        assert_eq!(p["initialNodeCount"], 1, "the old 2x2 (one host): {p}");
    }
    sim.shutdown().await;
}

/// Issue 24: scale-down keeps the working replicas, through the simulator
/// server with a stockout on and operation latency. rep-0 is left in ERROR
/// by a stocked-out create, rep-1 and rep-2 are RUNNING; `replicas: 1`
/// deletes rep-0 and one of the others, keeps a RUNNING one, and sends no
/// create (which the stockout would fail).
#[tokio::test(flavor = "multi_thread")]
async fn a_scale_down_under_a_stockout_keeps_a_running_replica() {
    let (sim, dir) =
        converged_sim(&[("rep.yaml", slice_yaml("rep", "tpu-v6e-slice", "2x2", 3, ""))]).await;
    // rep-0 is lost by hand and recreated into a stockout: ERROR.
    delete_by_hand(&sim, "rep-0").await;
    set_faults(&sim, serde_json::json!({"stockout_rate": 1.0})).await;
    let o = apply(&sim, dir.path()).await;
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    wait_until_done(&sim).await;
    let status = |pools: &[serde_json::Value], name: &str| {
        pools
            .iter()
            .find(|p| p["name"] == name)
            .map(|p| p["status"].as_str().unwrap_or_default().to_string())
    };
    let pools = node_pools(&sim).await;
    assert_eq!(
        status(&pools, "rep-0").as_deref(),
        Some("ERROR"),
        "{pools:?}"
    );
    assert_eq!(status(&pools, "rep-1").as_deref(), Some("RUNNING"));
    assert_eq!(status(&pools, "rep-2").as_deref(), Some("RUNNING"));

    // Scale down to one, the stockout still on, operations slow.
    sim.set_latency(Duration::from_millis(1500));
    sim.reset_stats();
    std::fs::write(
        dir.path().join("rep.yaml"),
        slice_yaml("rep", "tpu-v6e-slice", "2x2", 1, ""),
    )
    .unwrap();
    let o = apply(&sim, dir.path()).await;
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(
        t.contains("the busy replicas, then the working ones, are kept first"),
        "{t}"
    );
    let pools = node_pools(&sim).await;
    assert_eq!(pools.len(), 1, "{pools:?}");
    let kept = pools[0]["name"].as_str().unwrap();
    assert!(kept == "rep-1" || kept == "rep-2", "{pools:?}");
    assert_eq!(pools[0]["status"], "RUNNING", "{pools:?}");
    let stats = sim.stats();
    let count = |m: &str| stats.by_method.get(m).copied().unwrap_or(0);
    assert_eq!(
        count("container.projects.locations.clusters.nodePools.create"),
        0,
        "no create under the stockout: {stats:?}"
    );
    assert_eq!(
        count("container.projects.locations.clusters.nodePools.delete"),
        2,
        "{stats:?}"
    );
    sim.shutdown().await;
}
