//! Workload-driven slices end to end: the `slicectl` binary, a simulated
//! GKE cluster linked to the real test control plane (real kube-scheduler,
//! hollow TPU nodes), and JobSet-shaped pods. A pending leader pod the
//! scheduler marks Unschedulable gets its slice and runs on it; a git
//! apply never prunes it; it outlives its JobSet by the grace period and
//! no longer, decided from the cluster and the cloud on every run (each
//! run is a new process); a request outside the policy is refused with one
//! Event on the JobSet.
//!
//! Until the real JobSet controller and CRD are on the test plane, the
//! JobSet objects are made with a minimal CRD of the same group, version
//! and kind (applied only when no JobSet CRD is installed), and the pods
//! carry the labels and annotations JobSet and the Job controller write
//! (reference next-capabilities §2.3).

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, Pod};
use kube::Client;
use kube::api::{Api, ListParams};
use serde_json::json;

use crate::common::*;
use crate::sim_gke_support::{
    client, link, pool_nodes, release_pod, submit, succeed_pod, tpu_pod, unique, wait_pool_nodes,
    wait_pool_nodes_gone, wait_running, wait_unschedulable,
};

const JOBSET_CRD: &str = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: jobsets.jobset.x-k8s.io
spec:
  group: jobset.x-k8s.io
  names: {kind: JobSet, listKind: JobSetList, plural: jobsets, singular: jobset}
  scope: Namespaced
  versions:
    - name: v1alpha2
      served: true
      storage: true
      subresources: {status: {}}
      schema:
        openAPIV3Schema:
          type: object
          x-kubernetes-preserve-unknown-fields: true
"#;

/// Makes sure a JobSet CRD is installed (the real one if present).
fn ensure_jobset_crd() {
    if k8s::kubectl(&["get", "crd", "jobsets.jobset.x-k8s.io"])
        .status
        .success()
    {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("crd.yaml");
    std::fs::write(&path, JOBSET_CRD).unwrap();
    k8s::ok(&k8s::kubectl(&[
        "apply",
        "--server-side",
        "--field-manager=slicectl-tests",
        "-f",
        path.to_str().unwrap(),
    ]));
    k8s::ok(&k8s::kubectl(&[
        "wait",
        "--for=condition=Established",
        "--timeout=30s",
        "crd/jobsets.jobset.x-k8s.io",
    ]));
}

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

/// Creates JobSet `name` in `ns`; returns its uid.
fn create_jobset(ns: &str, name: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("js.json");
    let js = json!({
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"replicatedJobs": [{"name": "slice", "replicas": 1}]},
    });
    std::fs::write(&path, js.to_string()).unwrap();
    k8s::ok(&k8s::kubectl(&["create", "-f", path.to_str().unwrap()]));
    k8s::ok(&k8s::kubectl(&[
        "get",
        "jobset",
        name,
        "-n",
        ns,
        "-o",
        "jsonpath={.metadata.uid}",
    ]))
}

/// Sets the JobSet's `Completed` condition, ended `ago` before now.
fn complete_jobset(ns: &str, name: &str, ago: Duration) {
    let at = jiff::Timestamp::now() - jiff::SignedDuration::try_from(ago).unwrap();
    let at = at.strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
    let patch = json!({"status": {"conditions": [{
        "type": "Completed", "status": "True", "reason": "AllJobsCompleted",
        "message": "jobset completed successfully", "lastTransitionTime": at,
    }]}});
    k8s::ok(&k8s::kubectl(&[
        "patch",
        "jobset",
        name,
        "-n",
        ns,
        "--subresource=status",
        "--type=merge",
        "-p",
        &patch.to_string(),
    ]));
}

/// The Job's job-key as JobSet computes it: sha1 of `<ns>/<job name>`.
fn job_key(ns: &str, job: &str) -> String {
    let o = std::process::Command::new("sha1sum")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write;
            c.stdin
                .take()
                .unwrap()
                .write_all(format!("{ns}/{job}").as_bytes())?;
            c.wait_with_output()
        })
        .expect("sha1sum");
    String::from_utf8_lossy(&o.stdout)[..40].to_string()
}

/// The leader pod (completion index 0) of Job `<jobset>-slice-0`, with the
/// labels and annotations JobSet and the Job controller write.
fn leader_pod(ns: &str, jobset: &str, uid: &str, topology: &str, chips: u32) -> Pod {
    let job = format!("{jobset}-slice-0");
    let mut pod = tpu_pod(&format!("{job}-0"), "tpu-v6e-slice", topology, chips);
    let meta: BTreeMap<String, String> = [
        ("jobset.sigs.k8s.io/jobset-name", jobset.to_string()),
        ("jobset.sigs.k8s.io/jobset-uid", uid.to_string()),
        ("jobset.sigs.k8s.io/replicatedjob-name", "slice".to_string()),
        ("jobset.sigs.k8s.io/job-index", "0".to_string()),
        ("jobset.sigs.k8s.io/job-key", job_key(ns, &job)),
        ("batch.kubernetes.io/job-completion-index", "0".to_string()),
        ("batch.kubernetes.io/job-name", job.clone()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    pod.metadata.labels = Some(meta.clone());
    pod.metadata.annotations = Some(meta);
    // tpu-provisioner's admission webhook pins each Job to its own pool
    // with this selector (anchors §A.16); slicectl copies such selectors
    // onto the pool's Nodes, so no other JobSet's pod can take them.
    if let Some(sel) = pod.spec.as_mut().and_then(|s| s.node_selector.as_mut()) {
        sel.insert("job-key".to_string(), job_key(ns, &job));
    }
    pod
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

#[tokio::test(flavor = "multi_thread")]
async fn a_pending_jobset_gets_its_slice_keeps_it_through_git_applies_and_loses_it_after_the_grace()
{
    let client = client().await;
    ensure_jobset_crd();
    let sim = sim(Duration::from_millis(200), 5, Default::default()).await;
    link(&sim, CLUSTER).await;
    let ns = k8s::namespace(&client, "js").await;
    let js = unique("train");
    let uid = create_jobset(&ns, &js);
    let pod = leader_pod(&ns, &js, &uid, "2x2", 4);
    let pod_name = pod.metadata.name.clone().unwrap();
    submit(&client, &ns, &pod).await;
    let why = wait_unschedulable(&client, &ns, &pod_name).await;
    assert!(why.contains("node"), "{why}");

    // The plan shows the request; nothing is created by `plan`.
    let dir = specs(&ns, true, "30s", &[]);
    let o = run(&sim, &["plan", dir.path().to_str().unwrap()]).await;
    let out = text(&o);
    let key = job_key(&ns, &format!("{js}-slice-0"));
    let pool = format!("{}-{}", js.chars().take(34).collect::<String>(), &key[..5]);
    assert!(
        out.contains(&format!("+ {pool} for jobset {ns}/{js}")),
        "{out}"
    );
    assert!(pool_names(&sim).await.is_empty());

    // Apply: the pool is created with its owner's labels, its Node joins,
    // and the scheduler binds the leader pod there.
    let o = apply_dir(&sim, dir.path()).await;
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(pool_names(&sim).await, std::slice::from_ref(&pool));
    let live = node_pools(&sim).await;
    let labels = &live[0]["config"]["labels"];
    assert_eq!(labels["slicectl.dev/source"], "workload");
    assert_eq!(labels["slicectl.dev/jobset-namespace"], ns.as_str());
    assert_eq!(labels["slicectl.dev/jobset-name"], js.as_str());
    assert_eq!(labels["slicectl.dev/jobset-uid"], uid.as_str());
    assert_eq!(labels["slicectl.dev/job-key"], key.as_str());
    assert_eq!(labels["team"], "ml");
    assert_eq!(labels["job-key"], key.as_str());
    // v6e 2x2 with 4 chips a pod: one ct6e-standard-4t host.
    assert_eq!(live[0]["config"]["machineType"], "ct6e-standard-4t");
    let nodes = wait_pool_nodes(&client, &pool, 1).await;
    let running = wait_running(&client, &ns, &pod_name).await;
    assert_eq!(
        running.spec.and_then(|s| s.node_name),
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
    assert_eq!(row["source"], format!("jobset {ns}/{js}"), "{row:#}");
    assert!(
        row["last_error"]
            .as_str()
            .unwrap_or("")
            .starts_with("kept: active"),
        "{row:#}"
    );

    // A git apply, with workloads off and a git slice of its own, leaves
    // the workload slice alone.
    let git = specs(
        &ns,
        false,
        "30s",
        &[(
            "s.yaml",
            slice_yaml("git-v6e", "tpu-v6e-slice", "2x2", 1, ""),
        )],
    );
    let o = apply_dir(&sim, git.path()).await;
    assert!(o.status.success(), "{}", text(&o));
    let mut names = pool_names(&sim).await;
    names.sort();
    assert!(
        names.contains(&pool) && names.contains(&"git-v6e-0".to_string()),
        "{names:?}"
    );

    // The job ends; its JobSet completes. Within the grace period the slice
    // stays (a restarted JobSet would reuse it)...
    succeed_pod(&client, &ns, &pod_name).await;
    release_pod(&client, &ns, &pod_name).await;
    complete_jobset(&ns, &js, Duration::from_secs(5));
    let both = specs(
        &ns,
        true,
        "30s",
        &[(
            "s.yaml",
            slice_yaml("git-v6e", "tpu-v6e-slice", "2x2", 1, ""),
        )],
    );
    let o = apply_dir(&sim, both.path()).await;
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    assert!(
        out.contains(&format!("= {pool} kept (jobset {ns}/{js}): grace")),
        "{out}"
    );
    assert!(pool_names(&sim).await.contains(&pool));

    // ...and after it, the next run (a new process: nothing in memory)
    // releases it; the git slice stays.
    complete_jobset(&ns, &js, Duration::from_secs(60));
    let o = apply_dir(&sim, both.path()).await;
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    assert!(
        out.contains("workload slice") && out.contains("released"),
        "{out}"
    );
    assert_eq!(pool_names(&sim).await, ["git-v6e-0"]);
    wait_pool_nodes_gone(&client, &pool).await;
    assert!(pool_nodes(&client, &pool).await.is_empty());

    k8s::kubectl(&["delete", "namespace", &ns, "--wait=false"]);
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_request_outside_the_policy_is_refused_with_one_event_on_its_jobset() {
    let client = client().await;
    ensure_jobset_crd();
    let sim = sim(Duration::from_millis(100), 6, Default::default()).await;
    link(&sim, CLUSTER).await;
    let ns = k8s::namespace(&client, "jsr").await;
    let js = unique("big");
    let uid = create_jobset(&ns, &js);
    // 4x4 is not in the rule's topologies.
    let pod = leader_pod(&ns, &js, &uid, "4x4", 4);
    let pod_name = pod.metadata.name.clone().unwrap();
    submit(&client, &ns, &pod).await;
    wait_unschedulable(&client, &ns, &pod_name).await;
    let dir = specs(&ns, true, "2m", &[]);
    for _ in 0..2 {
        let o = apply_dir(&sim, dir.path()).await;
        let out = text(&o);
        assert!(o.status.success(), "{out}");
        assert!(
            out.contains(&format!("refused jobset {ns}/{js} [topology]")),
            "{out}"
        );
    }
    assert!(pool_names(&sim).await.is_empty());
    // Other tests' runs on the shared plane refuse this JobSet too (their
    // rules name only their own namespaces: `no_rule`); this run's refusal
    // is said once, however many runs see it.
    let events: Vec<Event> = events_on(&client, &ns, &js)
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
    k8s::kubectl(&["delete", "namespace", &ns, "--wait=false"]);
    sim.shutdown().await;
}
