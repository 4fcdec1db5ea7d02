//! Workload-driven slices end to end: the `slicectl` binary, a simulated
//! GKE cluster linked to the real test control plane (real kube-scheduler,
//! hollow TPU nodes) and the real JobSet controller v0.12.0
//! (`tests/jobset_support`). A JobSet whose leader pods the scheduler marks
//! Unschedulable gets a slice per Job, in one plan, and runs on them; a git
//! apply never prunes them; they outlive the JobSet's end (Completed, or
//! deleted) by the grace period and no longer, decided from the cluster and
//! the cloud on every run (each run is a new process); a request outside the
//! policy is refused with one Event on the JobSet.

use std::time::Duration;

use k8s_openapi::api::core::v1::Event;
use kube::Client;
use kube::api::{Api, ListParams};

use crate::common::*;
use crate::jobset_support::{
    TpuJobSet, TpuReplicatedJob, delete_jobset, jobset_pools, slicectl_pool_name, submit_jobset,
    succeed_jobset, wait_jobset_condition, wait_jobset_running, wait_leaders_unschedulable,
};
use crate::sim_gke_support::{
    client, link, pool_nodes, unique, wait_pool_nodes, wait_pool_nodes_gone,
};

/// `slicectl ARGS… --trust-kubeconfig KC` (the Target names the test
/// plane's kubeconfig, trusted as the operator's).
async fn run(sim: &slicectl_sim::SimHandle, args: &[&str]) -> std::process::Output {
    let kc = k8s::kubeconfig().display().to_string();
    let mut all = args.to_vec();
    all.extend(["--trust-kubeconfig", kc.as_str()]);
    slicectl(sim, &all).await
}

async fn apply_dir(sim: &slicectl_sim::SimHandle, dir: &std::path::Path) -> std::process::Output {
    run(sim, &["apply", dir.to_str().unwrap(), "--auto-approve"]).await
}

/// A JobSet of `jobs` v6e Jobs of one host each (`topology`, 4 chips a
/// pod), its pods kept to this test's Nodes by the node selector
/// `test-run: RUN` (copied onto the pools slicectl makes, as
/// tpu-provisioner copies a pod's own selectors).
fn tpu_jobset(name: &str, jobs: u32, topology: &str, run: &str) -> TpuJobSet {
    let mut js = TpuJobSet::new(
        name,
        vec![TpuReplicatedJob::new(
            "slice",
            jobs,
            "tpu-v6e-slice",
            topology,
            4,
        )],
    );
    js.node_selector.insert("test-run".into(), run.into());
    js
}

/// The spec directory: the Target `train` (v6e in us-central1-b) with
/// `workloads` for namespace `ns` (and `enabled`), and `extra` files.
fn specs(ns: &str, enabled: bool, grace: &str, extra: &[(&str, String)]) -> tempfile::TempDir {
    let target = format!(
        r#"apiVersion: slicectl.dev/v1alpha1
kind: Target
metadata:
  name: train
spec:
  project: example-project
  zone: us-central1-b
  ownerId: e2e
  gke:
    location: us-central1
    name: train
    kubeApi: {{kubeconfig: {kc:?}}}
  workloads:
    enabled: {enabled}
    gracePeriod: {grace}
    rules:
      - namespaces: [{ns}]
        accelerators: [tpu-v6e-slice]
        topologies: ["2x2"]
        maxChips: 8
        labels: {{team: ml}}
"#,
        kc = k8s::kubeconfig().display().to_string()
    );
    let mut files = vec![("target.yaml", target)];
    files.extend(extra.iter().cloned());
    spec_dir(&files)
}

async fn events_on(client: &Client, ns: &str, jobset: &str) -> Vec<Event> {
    Api::<Event>::namespaced(client.clone(), ns)
        .list(&ListParams::default().fields(&format!("involvedObject.name={jobset}")))
        .await
        .expect("list events")
        .items
}

/// The reasons of the phase Events slicectl recorded on JobSet `ns/name`
/// (`SliceCreating`, `WaitingForCapacity`, `SliceReady`), sorted. Other
/// tests' runs on the shared plane may refuse it (`SliceRefused`): left out.
async fn phases_on(client: &Client, ns: &str, jobset: &str) -> Vec<String> {
    let mut r: Vec<String> = events_on(client, ns, jobset)
        .await
        .into_iter()
        .filter(|e| e.source.as_ref().and_then(|s| s.component.as_deref()) == Some("slicectl"))
        .filter_map(|e| e.reason)
        .filter(|r| r != "SliceRefused")
        .collect();
    r.sort();
    r
}

/// A test's linked simulator and namespace.
struct Setup {
    client: Client,
    sim: slicectl_sim::SimHandle,
    ns: String,
}

/// A simulator (`sim(ARGS)`) linked to the test plane, and a namespace
/// `PREFIX-xxxxxxxx`.
async fn setup(
    prefix: &str,
    latency: Duration,
    seed: u64,
    faults: slicectl_sim::FaultConfig,
) -> Setup {
    let client = client().await;
    let sim = sim(latency, seed, faults).await;
    link(&sim, CLUSTER).await;
    let ns = k8s::namespace(&client, prefix).await;
    Setup { client, sim, ns }
}

async fn teardown(ns: &str, sim: slicectl_sim::SimHandle) {
    k8s::kubectl(&["delete", "namespace", ns, "--wait=false"]);
    sim.shutdown().await;
}

/// Submits `js` and waits until its leader pods are Unschedulable: its uid
/// and the leaders by Job name.
async fn pending(
    client: &Client,
    ns: &str,
    js: &TpuJobSet,
) -> (
    String,
    std::collections::BTreeMap<String, k8s_openapi::api::core::v1::Pod>,
) {
    let created = submit_jobset(client, ns, js).await;
    let uid = created.metadata.uid.clone().unwrap_or_default();
    (uid, wait_leaders_unschedulable(client, ns, js).await)
}

/// The pool names of `sim`'s cluster, sorted.
async fn pools(sim: &slicectl_sim::SimHandle) -> Vec<String> {
    let mut n = pool_names(sim).await;
    n.sort();
    n
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pending_jobset_gets_its_slice_keeps_it_through_git_applies_and_loses_it_after_the_grace()
{
    let Setup { client, sim, ns } =
        setup("js", Duration::from_millis(200), 5, Default::default()).await;
    let run_id = unique("r");
    let js = tpu_jobset(&unique("train"), 1, "2x2", &run_id);
    let (uid, leaders) = pending(&client, &ns, &js).await;
    let leader = leaders.values().next().expect("one leader");
    let pool = slicectl_pool_name(leader);

    // The plan shows the request; nothing is created by `plan`.
    let dir = specs(&ns, true, "4s", &[]);
    let o = run(&sim, &["plan", dir.path().to_str().unwrap()]).await;
    let out = text(&o);
    assert!(
        out.contains(&format!("(node pool {pool}) for jobset {ns}/{}", js.name)),
        "{out}"
    );
    assert!(pool_names(&sim).await.is_empty());

    // Apply: the pool is created with its owner's labels, its Node joins,
    // and the scheduler binds the JobSet's pod there.
    let o = apply_dir(&sim, dir.path()).await;
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(pool_names(&sim).await, std::slice::from_ref(&pool));
    assert_eq!(
        jobset_pools(&sim, CLUSTER, &uid).await,
        std::slice::from_ref(&pool)
    );
    let live = node_pools(&sim).await;
    let labels = &live[0]["config"]["labels"];
    assert_eq!(labels["slicectl.dev/source"], "workload");
    assert_eq!(labels["slicectl.dev/jobset-namespace"], ns.as_str());
    assert_eq!(labels["slicectl.dev/jobset-name"], js.name.as_str());
    assert_eq!(labels["team"], "ml");
    assert_eq!(labels["test-run"], run_id.as_str());
    // v6e 2x2 with 4 chips a pod: one ct6e-standard-4t host.
    assert_eq!(live[0]["config"]["machineType"], "ct6e-standard-4t");
    let nodes = wait_pool_nodes(&client, &pool, 1).await;
    let running = wait_jobset_running(&client, &ns, &js.name, 1).await;
    assert_eq!(
        running[0].spec.as_ref().and_then(|s| s.node_name.clone()),
        nodes[0].metadata.name
    );

    // `status` shows it, marked with its JobSet, kept while the JobSet runs.
    let o = run(
        &sim,
        &["status", dir.path().to_str().unwrap(), "-o", "json"],
    )
    .await;
    assert!(o.status.success(), "{}", text(&o));
    let rows: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let row = rows
        .as_array()
        .and_then(|r| r.iter().find(|r| r["node_pool"] == pool.as_str()))
        .unwrap_or_else(|| panic!("a row for {pool}: {rows:#}"));
    assert_eq!(row["source"], format!("jobset {ns}/{}", js.name), "{row:#}");
    assert!(
        row["last_error"]
            .as_str()
            .unwrap_or("")
            .starts_with("kept: active"),
        "{row:#}"
    );

    // A git apply, with workloads off and a git slice of its own, leaves
    // the workload slice alone.
    let git_slice = (
        "s.yaml",
        slice_yaml("git-v6e", "tpu-v6e-slice", "2x2", 1, ""),
    );
    let git = specs(&ns, false, "4s", std::slice::from_ref(&git_slice));
    let o = apply_dir(&sim, git.path()).await;
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(pools(&sim).await, ["git-v6e-0".to_string(), pool.clone()]);

    // The job ends; its JobSet completes. Within the grace period the slice
    // stays (a restarted JobSet would reuse it)...
    assert_eq!(succeed_jobset(&client, &ns, &js.name).await, 1);
    wait_jobset_condition(&client, &ns, &js.name, "Completed").await;
    let both = specs(&ns, true, "4s", &[git_slice]);
    let o = apply_dir(&sim, both.path()).await;
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    assert!(
        out.contains(&format!("= {pool} kept (jobset {ns}/{}): grace", js.name)),
        "{out}"
    );
    assert!(pool_names(&sim).await.contains(&pool));

    // ...and after it, the next run (a new process: nothing in memory)
    // releases it; the git slice stays.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let o = apply_dir(&sim, both.path()).await;
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    assert!(
        out.contains(&format!(
            "- {pool} released: jobset {ns}/{} Completed",
            js.name
        )),
        "{out}"
    );
    assert_eq!(pool_names(&sim).await, ["git-v6e-0"]);
    wait_pool_nodes_gone(&client, &pool).await;
    assert!(pool_nodes(&client, &pool).await.is_empty());

    teardown(&ns, sim).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_multislice_jobset_gets_a_slice_per_job_in_one_plan_and_a_deleted_one_loses_them_after_the_grace()
 {
    let Setup { client, sim, ns } =
        setup("jsm", Duration::from_millis(200), 7, Default::default()).await;
    let run_id = unique("r");
    let js = tpu_jobset(&unique("multi"), 2, "2x2", &run_id);
    let (uid, leaders) = pending(&client, &ns, &js).await;
    let mut want: Vec<String> = leaders.values().map(slicectl_pool_name).collect();
    want.sort();
    assert_eq!(want.len(), 2);
    let dir = specs(&ns, true, "3s", &[]);
    let o = apply_dir(&sim, dir.path()).await;
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    assert!(out.contains("Plan: 2 to create"), "{out}");
    assert_eq!(jobset_pools(&sim, CLUSTER, &uid).await, want);
    wait_jobset_running(&client, &ns, &js.name, 2).await;

    // The JobSet is deleted while it runs: its pods go, and the first run
    // that sees it gone stamps the pools' Nodes (the grace starts) and keeps
    // them; a run within the grace keeps them; the first after releases both.
    delete_jobset(&client, &ns, &js.name).await;
    let o = apply_dir(&sim, dir.path()).await;
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    assert!(out.contains("is gone; released 3s from now"), "{out}");
    for p in &want {
        for n in pool_nodes(&client, p).await {
            let l = n.metadata.labels.unwrap_or_default();
            assert!(l.contains_key("slicectl.dev/released-at"), "{p}: {l:?}");
        }
    }
    let o = apply_dir(&sim, dir.path()).await;
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(pools(&sim).await, want);
    tokio::time::sleep(Duration::from_secs(3)).await;
    let o = apply_dir(&sim, dir.path()).await;
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    assert!(
        out.contains("Plan: 0 to create, 0 to update in place, 0 to replace, 2 to destroy"),
        "{out}"
    );
    assert!(pool_names(&sim).await.is_empty());
    teardown(&ns, sim).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_request_outside_the_policy_is_refused_with_one_event_on_its_jobset() {
    let Setup { client, sim, ns } =
        setup("jsr", Duration::from_millis(100), 6, Default::default()).await;
    // 4x4 is not in the rule's topologies.
    let js = tpu_jobset(&unique("big"), 1, "4x4", &unique("r"));
    let created = submit_jobset(&client, &ns, &js).await;
    let uid = created.metadata.uid.clone().unwrap_or_default();
    wait_leaders_unschedulable(&client, &ns, &js).await;
    let dir = specs(&ns, true, "2m", &[]);
    for _ in 0..2 {
        let o = apply_dir(&sim, dir.path()).await;
        let out = text(&o);
        assert!(o.status.success(), "{out}");
        assert!(
            out.contains(&format!("refused jobset {ns}/{} [topology]", js.name)),
            "{out}"
        );
    }
    assert!(pool_names(&sim).await.is_empty());
    // Other tests' runs on the shared plane refuse this JobSet too (their
    // rules name only their own namespaces: `no_rule`); this run's refusal
    // is said once, however many runs see it.
    let events: Vec<Event> = events_on(&client, &ns, &js.name)
        .await
        .into_iter()
        .filter(|e| {
            e.message
                .as_deref()
                .is_some_and(|m| m.starts_with("topology"))
        })
        .collect();
    assert_eq!(events.len(), 1, "{events:#?}");
    let e = &events[0];
    assert_eq!(e.reason.as_deref(), Some("SliceRefused"));
    assert_eq!(e.type_.as_deref(), Some("Warning"));
    assert_eq!(e.involved_object.kind.as_deref(), Some("JobSet"));
    assert_eq!(e.involved_object.uid.as_deref(), Some(uid.as_str()));
    let msg = e.message.clone().unwrap_or_default();
    assert!(msg.contains("topology 4x4 is not allowed"), "{msg}");
    teardown(&ns, sim).await;
}

/// `slicectl apply DIR` started in the background.
fn spawn_apply(sim: &slicectl_sim::SimHandle, dir: &std::path::Path) -> tokio::process::Child {
    let kc = k8s::kubeconfig().display().to_string();
    tokio::process::Command::new(bin())
        .args(["apply", dir.to_str().unwrap(), "--auto-approve"])
        .args(["--trust-kubeconfig", kc.as_str()])
        .env("SLICECTL_API_ENDPOINT", sim.base_url())
        .env("SLICECTL_UNREAD_CLUSTERS_IDLE", "true")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap()
}

/// Waits until every pool of `sim`'s cluster is in `status` (and there are
/// `n`), then SIGKILLs `child`.
async fn kill_when(
    sim: &slicectl_sim::SimHandle,
    mut child: tokio::process::Child,
    n: usize,
    status: &str,
) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let live = node_pools(sim).await;
        if live.len() == n && live.iter().all(|p| p["status"] == status) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "pools never all {status}: {live:#?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    child.start_kill().unwrap(); // SIGKILL
    let _ = child.wait().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_killed_mid_create_and_mid_release_is_resumed_from_the_cluster_and_the_cloud() {
    // Slow operations: the kills land while they run.
    let Setup { client, sim, ns } =
        setup("jsk", Duration::from_secs(3), 8, Default::default()).await;
    let js = tpu_jobset(&unique("kill"), 2, "2x2", &unique("r"));
    pending(&client, &ns, &js).await;
    let dir = specs(&ns, true, "1s", &[]);
    // Killed with both creates in flight: the next run finds the
    // operations in the cloud and waits on them, never creating twice
    // (tpu-provisioner's dedup is in memory only: anchors A.17 item 6).
    kill_when(&sim, spawn_apply(&sim, dir.path()), 2, "PROVISIONING").await;
    let o = apply_dir(&sim, dir.path()).await;
    assert!(o.status.success(), "{}", text(&o));
    wait_jobset_running(&client, &ns, &js.name, 2).await;
    let count = |m: &str| sim.stats().by_method.get(m).copied().unwrap_or(0);
    assert_eq!(
        count("container.projects.locations.clusters.nodePools.create"),
        2
    );

    // The JobSet completes; killed with both deletes in flight, the next
    // run waits on them; nothing leaks and nothing is deleted twice.
    assert_eq!(succeed_jobset(&client, &ns, &js.name).await, 2);
    wait_jobset_condition(&client, &ns, &js.name, "Completed").await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    kill_when(&sim, spawn_apply(&sim, dir.path()), 2, "STOPPING").await;
    let o = apply_dir(&sim, dir.path()).await;
    assert!(o.status.success(), "{}", text(&o));
    assert!(pool_names(&sim).await.is_empty());
    assert_eq!(
        count("container.projects.locations.clusters.nodePools.delete"),
        2
    );
    let o = run(
        &sim,
        &["plan", dir.path().to_str().unwrap(), "--detailed-exitcode"],
    )
    .await;
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    teardown(&ns, sim).await;
}

/// `slicectl controller --dir DIR --resync RESYNC` on `sim`, leading in `ns`.
fn spawn_controller(
    sim: &slicectl_sim::SimHandle,
    ns: &str,
    dir: &std::path::Path,
    resync: &str,
) -> Piped {
    let kc = k8s::kubeconfig().display().to_string();
    k8s::spawn_controller(
        sim,
        ns,
        "jsctl",
        free_port(),
        &[
            "--dir",
            dir.to_str().unwrap(),
            "--resync",
            resync,
            "--trust-kubeconfig",
            &kc,
        ],
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stocked_out_workload_slice_is_backed_off_by_the_controller() {
    k8s::apply_crd();
    let Setup { client, sim, ns } = setup(
        "jss",
        Duration::from_millis(200),
        11,
        slicectl_sim::FaultConfig {
            stockout_rate: 1.0,
            ..Default::default()
        },
    )
    .await;
    let dir = specs(&ns, true, "2m", &[]);
    let mut ctl = spawn_controller(&sim, &ns, dir.path(), "1s");
    let js = tpu_jobset(&unique("stock"), 1, "2x2", &unique("r"));
    let (_, leaders) = pending(&client, &ns, &js).await;
    let pool = slicectl_pool_name(leaders.values().next().expect("a leader"));
    let held = format!(
        "held: slice {}: capacity unavailable",
        slicectl::workload::slice_name("train", &pool)
    );
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while !ctl.stderr.lock().unwrap().contains(&held) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "never held:\n{}",
            ctl.stderr.lock().unwrap()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Many 1 s resyncs (and pod watch wakes) within the backoff: one create.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let creates = sim
        .stats()
        .by_method
        .get("container.projects.locations.clusters.nodePools.create")
        .copied()
        .unwrap_or(0);
    assert_eq!(creates, 1, "{}", ctl.stderr.lock().unwrap());
    let leaders = wait_leaders_unschedulable(&client, &ns, &js).await;
    assert_eq!(leaders.len(), 1);
    // The JobSet was told once that its slice was being created and once
    // that it waits for capacity, however many cycles saw it.
    assert_eq!(
        phases_on(&client, &ns, &js.name).await,
        ["SliceCreating", "WaitingForCapacity"],
        "{}",
        ctl.stderr.lock().unwrap()
    );
    let _ = ctl.child.start_kill();
    let _ = ctl.child.wait().await;
    teardown(&ns, sim).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_controller_wakes_on_an_unschedulable_leader_pod_and_when_the_grace_is_over_not_at_the_resync()
 {
    k8s::apply_crd();
    let Setup { client, sim, ns } =
        setup("jsc", Duration::from_millis(200), 9, Default::default()).await;
    let dir = specs(&ns, true, "2s", &[]);
    let mut ctl = spawn_controller(&sim, &ns, dir.path(), "10m");
    let said = |needle: &str| ctl.stderr.lock().unwrap().contains(needle);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while !said("watching pending TPU pods and JobSets") {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the controller never watched:\n{}",
            ctl.stderr.lock().unwrap()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The resync is 10 minutes away: only the watch can start this cycle.
    let js = tpu_jobset(&unique("wake"), 1, "2x2", &unique("r"));
    pending(&client, &ns, &js).await;
    let unschedulable = tokio::time::Instant::now();
    while pool_names(&sim).await.is_empty() {
        assert!(
            unschedulable.elapsed() < Duration::from_secs(20),
            "no create request 20 s after the leader pod was Unschedulable:\n{}",
            ctl.stderr.lock().unwrap()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let took = unschedulable.elapsed();
    eprintln!("unschedulable leader pod to create request: {took:?}");
    // Measured well under 2 s here; the bound leaves room for a loaded CI.
    assert!(took < Duration::from_secs(5), "{took:?}");
    wait_jobset_running(&client, &ns, &js.name, 1).await;
    // Its SliceStatus object (named after the pool and its Target) says
    // whose it is.
    let pool = slicectl::workload::slice_name("train", &pool_names(&sim).await.remove(0));
    let want = format!("jobset {ns}/{}", js.name);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let o = k8s::kubectl(&[
            "get",
            "slicestatus",
            &pool,
            "-n",
            &ns,
            "-o",
            "jsonpath={.status.source}",
        ]);
        if String::from_utf8_lossy(&o.stdout) == want {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "SliceStatus {pool} never had source {want:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // The JobSet completes: the watch runs a cycle then (kept: grace) and
    // once more when the grace period is over, which releases the slice.
    assert_eq!(succeed_jobset(&client, &ns, &js.name).await, 1);
    wait_jobset_condition(&client, &ns, &js.name, "Completed").await;
    let ended = tokio::time::Instant::now();
    while !pool_names(&sim).await.is_empty() {
        assert!(
            ended.elapsed() < Duration::from_secs(30),
            "the slice outlived its JobSet by 30 s (gracePeriod 2s):\n{}",
            ctl.stderr.lock().unwrap()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    eprintln!("JobSet end to delete done: {:?}", ended.elapsed());
    let _ = ctl.child.start_kill();
    let _ = ctl.child.wait().await;
    teardown(&ns, sim).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_flex_start_jobset_gets_a_flex_start_pool_whose_capacity_arrives_and_a_queued_git_slice_waits()
 {
    // GKE brings a flex-start pool's nodes when the cluster autoscaler
    // finds capacity for the pods waiting on it: here 2.5 s after the pool
    // is up.
    let Setup { client, sim, ns } = setup(
        "jsf",
        Duration::from_millis(100),
        10,
        slicectl_sim::FaultConfig {
            flex_start_delay_ms: 2500,
            ..Default::default()
        },
    )
    .await;
    let mut js = tpu_jobset(&unique("flex"), 1, "2x2", &unique("r"));
    js.replicated_jobs[0].capacity = crate::jobset_support::Capacity::FlexStart;
    let (_, leaders) = pending(&client, &ns, &js).await;
    let pool = slicectl_pool_name(leaders.values().next().expect("a leader"));
    // A rule without flexStart refuses it...
    let dir = specs(&ns, true, "2m", &[]);
    let o = apply_dir(&sim, dir.path()).await;
    let out = text(&o);
    assert!(
        out.contains(&format!("refused jobset {ns}/{} [capacity]", js.name)),
        "{out}"
    );
    assert!(pool_names(&sim).await.is_empty());
    // ...one that allows it gets a flex-start pool: flex-start VMs, no
    // reservation, autoscaling from 0 and no queued provisioning (which
    // only a ProvisioningRequest scales up). Beside it, a git slice that
    // asks for queued provisioning explicitly.
    let queued = (
        "q.yaml",
        slice_yaml(
            "queued-v6e",
            "tpu-v6e-slice",
            "2x2",
            1,
            "  capacity: {type: flex-start, queued: true}\n",
        ),
    );
    // And a flex-start git slice no pod waits for: GKE's autoscaler never
    // scales it up (another topology, so the JobSet's pod does not fit it).
    let idle = (
        "idle.yaml",
        slice_yaml(
            "idle-flex",
            "tpu-v6e-slice",
            "2x4",
            1,
            "  capacity: {type: flex-start}\n",
        ),
    );
    let flex = specs(&ns, true, "2m", &[queued, idle]);
    let target = flex.path().join("target.yaml");
    let text_now = std::fs::read_to_string(&target).unwrap();
    std::fs::write(
        &target,
        text_now.replace("maxChips: 8", "maxChips: 8\n        capacity: [flexStart]"),
    )
    .unwrap();
    let o = apply_dir(&sim, flex.path()).await;
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    assert!(
        out.contains(&format!("(node pool {pool}) for jobset {ns}/{}", js.name)),
        "{out}"
    );
    assert!(out.contains("flex-start"), "{out}");
    let live = node_pools(&sim).await;
    let p = live
        .iter()
        .find(|p| p["name"] == pool.as_str())
        .unwrap_or_else(|| panic!("pool {pool}: {live:#?}\n{out}"));
    assert_eq!(p["config"]["flexStart"], true, "{p:#}");
    assert!(p.get("queuedProvisioning").is_none(), "{p:#}");
    assert_eq!(
        p["config"]["reservationAffinity"]["consumeReservationType"], "NO_RESERVATION",
        "{p:#}"
    );
    assert_eq!(p["autoscaling"]["enabled"], true, "{p:#}");
    assert_eq!(p["initialNodeCount"], 0, "{p:#}");
    let q = live
        .iter()
        .find(|p| p["name"] == "queued-v6e-0")
        .unwrap_or_else(|| panic!("pool queued-v6e-0: {live:#?}\n{out}"));
    assert_eq!(q["queuedProvisioning"]["enabled"], true, "{q:#}");
    // No capacity yet: no Node, the JobSet waits, and says so.
    assert!(pool_nodes(&client, &pool).await.is_empty());
    assert_eq!(
        phases_on(&client, &ns, &js.name).await,
        ["SliceCreating", "WaitingForCapacity"]
    );
    let o = run(
        &sim,
        &["status", flex.path().to_str().unwrap(), "-o", "json"],
    )
    .await;
    let rows: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let row = rows
        .as_array()
        .and_then(|r| r.iter().find(|r| r["node_pool"] == pool.as_str()))
        .unwrap_or_else(|| panic!("a row for {pool}: {rows:#}"));
    assert!(
        row["last_error"].as_str().is_some_and(
            |e| e.starts_with(&format!("flex-start node pool {pool} waits for capacity"))
        ),
        "{row:#}"
    );
    // The capacity arrives; the slice's Node registers (labelled as GKE
    // labels flex-start nodes, which the pod selects) and the JobSet runs.
    let nodes = wait_pool_nodes(&client, &pool, 1).await;
    let labels = nodes[0].metadata.labels.clone().unwrap_or_default();
    assert_eq!(
        labels
            .get("cloud.google.com/gke-flex-start")
            .map(String::as_str),
        Some("true")
    );
    wait_jobset_running(&client, &ns, &js.name, 1).await;
    // The next run asks for nothing more; the queued pool has no Node (no
    // ProvisioningRequest asked for one).
    let o = apply_dir(&sim, flex.path()).await;
    assert!(o.status.success(), "{}", text(&o));
    let creates = sim
        .stats()
        .by_method
        .get("container.projects.locations.clusters.nodePools.create")
        .copied()
        .unwrap_or(0);
    assert_eq!(creates, 3);
    assert!(pool_nodes(&client, "queued-v6e-0").await.is_empty());
    // Past the flex-start delay, the pool nobody waits for has no Node.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(pool_nodes(&client, "idle-flex-0").await.is_empty());
    // Each phase was said once, however many runs saw it.
    let o = apply_dir(&sim, flex.path()).await;
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(
        phases_on(&client, &ns, &js.name).await,
        ["SliceCreating", "SliceReady", "WaitingForCapacity"]
    );
    teardown(&ns, sim).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn jobsets_sharing_a_target_share_its_max_chips() {
    let Setup { client, sim, ns } =
        setup("jst", Duration::from_millis(100), 12, Default::default()).await;
    let run_id = unique("r");
    // maxChips 8: two 4-chip JobSets fit, a third does not.
    let a = tpu_jobset(&unique("a"), 1, "2x2", &run_id);
    let b = tpu_jobset(&unique("b"), 1, "2x2", &run_id);
    for js in [&a, &b] {
        pending(&client, &ns, js).await;
    }
    let dir = specs(&ns, true, "2m", &[]);
    let o = apply_dir(&sim, dir.path()).await;
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(pool_names(&sim).await.len(), 2);
    wait_jobset_running(&client, &ns, &a.name, 1).await;
    wait_jobset_running(&client, &ns, &b.name, 1).await;
    let c = tpu_jobset(&unique("c"), 1, "2x2", &run_id);
    pending(&client, &ns, &c).await;
    let o = apply_dir(&sim, dir.path()).await;
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    assert!(
        out.contains(&format!("refused jobset {ns}/{} [max_chips]", c.name)),
        "{out}"
    );
    assert!(out.contains("(8 held, 0 asked for this run)"), "{out}");
    assert_eq!(pool_names(&sim).await.len(), 2);
    teardown(&ns, sim).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_slice_whose_jobset_ended_is_kept_while_another_jobsets_pod_runs_on_it() {
    let Setup { client, sim, ns } =
        setup("jsb", Duration::from_millis(100), 13, Default::default()).await;
    let run_id = unique("r");
    let a = tpu_jobset(&unique("a"), 1, "2x2", &run_id);
    let (_, leaders) = pending(&client, &ns, &a).await;
    let pool = slicectl_pool_name(leaders.values().next().expect("a leader"));
    let dir = specs(&ns, true, "1s", &[]);
    let o = apply_dir(&sim, dir.path()).await;
    assert!(o.status.success(), "{}", text(&o));
    wait_jobset_running(&client, &ns, &a.name, 1).await;
    assert_eq!(succeed_jobset(&client, &ns, &a.name).await, 1);
    wait_jobset_condition(&client, &ns, &a.name, "Completed").await;
    // Another JobSet's pod (same selectors) takes the freed Node at once.
    let b = tpu_jobset(&unique("b"), 1, "2x2", &run_id);
    submit_jobset(&client, &ns, &b).await;
    let running = wait_jobset_running(&client, &ns, &b.name, 1).await;
    let node = running[0].spec.as_ref().and_then(|s| s.node_name.clone());
    assert_eq!(node, pool_nodes(&client, &pool).await[0].metadata.name);
    // Past A's grace period the slice is busy with B's pod: kept, not deleted.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let o = apply_dir(&sim, dir.path()).await;
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    assert!(
        out.contains(&format!("= {pool} kept (jobset {ns}/{}): busy", a.name))
            && out.contains(&format!("(jobset {ns}/{})", b.name)),
        "{out}"
    );
    assert_eq!(pool_names(&sim).await, std::slice::from_ref(&pool));
    // B ends too: nothing runs on it any more, and A's slice goes.
    assert_eq!(succeed_jobset(&client, &ns, &b.name).await, 1);
    let o = apply_dir(&sim, dir.path()).await;
    assert!(o.status.success(), "{}", text(&o));
    assert!(pool_names(&sim).await.is_empty(), "{}", text(&o));
    teardown(&ns, sim).await;
}

/// The requests `method` the simulator answered.
fn requests(sim: &slicectl_sim::SimHandle, method: &str) -> u64 {
    sim.stats()
        .by_method
        .get(&format!(
            "container.projects.locations.clusters.nodePools.{method}"
        ))
        .copied()
        .unwrap_or(0)
}

/// A JobSet (`PREFIX-…`) of one v6e 2x2 Job whose slice `apply` made,
/// under a Target with `gracePeriod` `grace`, running on it: the setup, the
/// JobSet, its pool and the spec directory.
async fn on_its_slice(
    prefix: &str,
    seed: u64,
    name: &str,
    grace: &str,
) -> (Setup, TpuJobSet, String, tempfile::TempDir) {
    let setup = setup(prefix, Duration::from_millis(100), seed, Default::default()).await;
    let js = tpu_jobset(&unique(name), 1, "2x2", &unique("r"));
    let (_, leaders) = pending(&setup.client, &setup.ns, &js).await;
    let pool = slicectl_pool_name(leaders.values().next().expect("a leader"));
    let dir = specs(&setup.ns, true, grace, &[]);
    let o = apply_dir(&setup.sim, dir.path()).await;
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(pool_names(&setup.sim).await, std::slice::from_ref(&pool));
    wait_jobset_running(&setup.client, &setup.ns, &js.name, 1).await;
    (setup, js, pool, dir)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failed_jobset_loses_its_slice_after_the_grace() {
    let (Setup { client, sim, ns }, js, pool, dir) = on_its_slice("jsx", 14, "fails", "3s").await;
    let running = wait_jobset_running(&client, &ns, &js.name, 1).await;
    // Its pod fails (backoffLimit 0, no failure policy): the JobSet Fails.
    let pod = running[0].metadata.name.clone().unwrap_or_default();
    crate::jobset_support::fail_jobset_pod(&client, &ns, &pod).await;
    wait_jobset_condition(&client, &ns, &js.name, "Failed").await;
    // Within the grace period the slice stays...
    let o = apply_dir(&sim, dir.path()).await;
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    assert!(
        out.contains(&format!("= {pool} kept (jobset {ns}/{}): grace", js.name)),
        "{out}"
    );
    assert_eq!(requests(&sim, "delete"), 0);
    // ...and after it, the next run releases it.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let o = apply_dir(&sim, dir.path()).await;
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    assert!(
        out.contains(&format!(
            "- {pool} released: jobset {ns}/{} Failed",
            js.name
        )),
        "{out}"
    );
    assert!(pool_names(&sim).await.is_empty());
    assert_eq!(requests(&sim, "delete"), 1);
    wait_pool_nodes_gone(&client, &pool).await;
    teardown(&ns, sim).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_jobset_deleted_and_recreated_within_the_grace_reuses_its_slice() {
    let (Setup { client, sim, ns }, js, pool, dir) = on_its_slice("jsy", 15, "again", "2m").await;
    let nodes = wait_pool_nodes(&client, &pool, 1).await;
    // Deleted: the run that sees it gone starts its grace period.
    delete_jobset(&client, &ns, &js.name).await;
    let o = apply_dir(&sim, dir.path()).await;
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    assert!(
        out.contains(&format!("= {pool} kept (jobset {ns}/{}): grace", js.name)),
        "{out}"
    );
    // Submitted again under its name (its Jobs, so its job-keys, are the
    // same): its pod fits the slice's Node at once.
    submit_jobset(&client, &ns, &js).await;
    let running = wait_jobset_running(&client, &ns, &js.name, 1).await;
    assert_eq!(
        running[0].spec.as_ref().and_then(|s| s.node_name.clone()),
        nodes[0].metadata.name
    );
    // The next runs keep the slice for it (its JobSet, by namespace and
    // name, is active), never deleted nor created again; the first one's
    // released-at stamp is gone from its Node.
    for _ in 0..2 {
        let o = apply_dir(&sim, dir.path()).await;
        let out = text(&o);
        assert!(o.status.success(), "{out}");
        assert!(
            out.contains(&format!("= {pool} kept (jobset {ns}/{}): active", js.name)),
            "{out}"
        );
    }
    assert_eq!(requests(&sim, "create"), 1);
    assert_eq!(requests(&sim, "delete"), 0);
    let nodes = pool_nodes(&client, &pool).await;
    assert_eq!(nodes.len(), 1);
    let labels = nodes[0].metadata.labels.clone().unwrap_or_default();
    assert!(
        !labels.contains_key("slicectl.dev/released-at"),
        "{labels:?}"
    );

    teardown(&ns, sim).await;
}

/// Issue 36, case 2, with the real JobSet controller and kube-scheduler: a
/// tenant of another allowed namespace submits a JobSet of the same name
/// and Jobs as a running victim's (under tpu-provisioner's names, the same
/// pool), and a bare pod carrying the victim's JobSet labels. The bare pod
/// asks for nothing (no Job of a JobSet owns it), the tenant's JobSet gets
/// a pool of its own (the namespace is in the name's hash), and the
/// victim's pool is neither relabelled, updated nor deleted.
#[tokio::test(flavor = "multi_thread")]
async fn another_namespace_cannot_take_or_touch_a_running_jobsets_pool() {
    use k8s_openapi::api::core::v1::Pod;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    let Setup { client, sim, ns } =
        setup("jsv", Duration::from_millis(100), 16, Default::default()).await;
    let evil = k8s::namespace(&client, "jse").await;
    let js = tpu_jobset(&unique("victim"), 1, "2x2", &unique("r"));
    let (uid, leaders) = pending(&client, &ns, &js).await;
    let leader = leaders.values().next().expect("a leader").clone();
    let pool = slicectl_pool_name(&leader);
    let dir = specs(&format!("{ns}, {evil}"), true, "2m", &[]);
    let o = apply_dir(&sim, dir.path()).await;
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(pool_names(&sim).await, std::slice::from_ref(&pool));
    wait_jobset_running(&client, &ns, &js.name, 1).await;
    let labels_before = node_pools(&sim).await[0]["config"]["labels"].clone();

    // The same JobSet (name and Jobs) in the tenant's namespace (first: its
    // leader is then the only pod with the leader labels there).
    let (_, theirs) = pending(&client, &evil, &js).await;
    let their_pool = slicectl_pool_name(theirs.values().next().expect("their JobSet's leader"));
    // A bare pod in the tenant's namespace with the victim's JobSet labels.
    let mut bare: Pod = leader.clone();
    bare.metadata = ObjectMeta {
        name: Some("bare-0".into()),
        namespace: Some(evil.clone()),
        labels: leader.metadata.labels.clone(),
        annotations: leader.metadata.annotations.clone(),
        ..ObjectMeta::default()
    };
    bare.status = None;
    if let Some(s) = bare.spec.as_mut() {
        s.node_name = None;
    }
    Api::<Pod>::namespaced(client.clone(), &evil)
        .create(&Default::default(), &bare)
        .await
        .expect("create the bare pod");
    assert_ne!(their_pool, pool, "the namespace is in the pool's name");

    let updates = requests(&sim, "update") + requests(&sim, "setLabels");
    let o = apply_dir(&sim, dir.path()).await;
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    assert!(
        out.contains(&format!("~ jobset {evil}/{} left alone", js.name)),
        "{out}"
    );
    let mut want = vec![pool.clone(), their_pool.clone()];
    want.sort();
    assert_eq!(pools(&sim).await, want);
    // The victim's pool: the same labels (its namespace, uid, rule taint
    // label), no update, no delete.
    let live = node_pools(&sim).await;
    let victim = live
        .iter()
        .find(|p| p["name"] == pool.as_str())
        .expect("the victim's pool");
    assert_eq!(victim["config"]["labels"], labels_before);
    assert_eq!(
        victim["config"]["labels"]["slicectl.dev/jobset-uid"],
        uid.as_str()
    );
    assert_eq!(
        requests(&sim, "update") + requests(&sim, "setLabels"),
        updates
    );
    assert_eq!(requests(&sim, "delete"), 0);
    k8s::kubectl(&["delete", "namespace", &evil, "--wait=false"]);
    teardown(&ns, sim).await;
}

/// Issue 36, case 8: `scripts/demo-jobsets.sh`, the newcomer's one path,
/// runs as written on the test plane (its control plane, the JobSet
/// controller and kubemark): the example JobSet's pool is created, its
/// pods run, its SliceStatus is Ready, and the pool is released after the
/// grace period once the JobSet is deleted.
#[tokio::test(flavor = "multi_thread")]
async fn the_demo_script_runs_on_the_test_plane() {
    let root = env!("CARGO_MANIFEST_DIR");
    let o = tokio::process::Command::new("bash")
        .arg(format!("{root}/scripts/demo-jobsets.sh"))
        .env("SLICECTL_BIN", bin())
        .env("SLICECTL_TEST_KUBECONFIG", k8s::kubeconfig())
        .env("DEMO_GRACE", "5s")
        .env("NO_COLOR", "1")
        .output()
        .await
        .expect("run the demo script");
    let out = format!(
        "{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(o.status.success(), "{out}");
    for step in [
        "kubectl apply -f examples/jobset/jobsets/single-slice.yaml",
        "jobset=ml-team/train-single",
        "Running",
        "SliceReady",
        "node pool released",
    ] {
        assert!(out.contains(step), "no {step:?} in:\n{out}");
    }
}
