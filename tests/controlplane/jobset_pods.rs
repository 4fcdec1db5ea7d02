//! JobSets through the real parts: the JobSet controller (v0.12.0, built
//! from its Go module) makes Jobs, the Job controller makes pods, the real
//! kube-scheduler reports each Job's leader pod `Unschedulable` (what
//! tpu-provisioner, and slicectl's workload source, react to). The test then
//! plays the provisioner by hand: it creates the node pools a provisioner
//! would (named and labelled for each Job) in a simulated GKE cluster linked
//! to the control plane, whose hollow Nodes (the real kubelet) take the pods;
//! the kubelet ends them, and the JobSet turns `Completed` or `Failed`.

use crate::jobset_support::*;
use crate::sim_gke_support::{
    client, create_pool, delete_pool, link, sim, unique, wait_pool_nodes, wait_pool_nodes_gone,
};

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use slicectl_sim::SimHandle;

/// A test's own simulated GKE cluster linked to the control plane, and a
/// namespace; `run` also names the node selector that keeps its pods on its
/// own Nodes ([`TpuJobSet::node_selector`]).
struct Run {
    client: Client,
    sim: SimHandle,
    run: String,
    cluster: String,
    ns: String,
}

impl Run {
    async fn start() -> Run {
        let client = client().await;
        require_jobset(&client).await;
        let sim = sim(18).await;
        let run = unique("js");
        let cluster = format!("projects/example-project/locations/us-central1/clusters/{run}");
        link(&sim, &cluster).await;
        let ns = crate::common::k8s::namespace(&client, "jobset").await;
        Run {
            client,
            sim,
            run,
            cluster,
            ns,
        }
    }

    /// `js` with this run's node selector.
    fn jobset(&self, mut js: TpuJobSet) -> TpuJobSet {
        js.node_selector
            .insert(TEST_RUN_LABEL.into(), self.run.clone());
        js
    }

    /// Deletes the JobSet `name` and the pools, stops the simulator, and
    /// deletes the namespace.
    async fn finish(self, name: &str, pools: &[String]) {
        delete_jobset(&self.client, &self.ns, name).await;
        for pool in pools {
            delete_pool(&self.sim, &self.cluster, pool).await;
            wait_pool_nodes_gone(&self.client, pool).await;
        }
        self.sim.shutdown().await;
        crate::common::k8s::kubectl(&["delete", "namespace", &self.ns, "--wait=false"]);
    }
}

/// The `PodScheduled` condition as the real kube-scheduler writes it on a fit
/// failure (`pkg/scheduler/schedule_one.go`: `False`, `Unschedulable`, "0/N
/// nodes are available: …", or "no nodes available to schedule pods" in an
/// empty cluster), and as tpu-provisioner's trigger reads it: a Pending
/// leader (completion index 0) of a JobSet asking for `google.com/tpu` with a
/// topology selector.
fn assert_provisioning_trigger(leader: &Pod) {
    let c = scheduled_condition(leader).expect("PodScheduled condition");
    assert_eq!(c.status, "False", "{c:?}");
    assert_eq!(c.reason.as_deref(), Some("Unschedulable"), "{c:?}");
    let message = c.message.clone().unwrap_or_default();
    assert!(
        message.starts_with("0/") && message.contains("nodes are available")
            || message == "no nodes available to schedule pods",
        "{message}"
    );
    assert!(provisioning_trigger(leader), "{:?}", leader.metadata);
    let annotations = leader.metadata.annotations.clone().unwrap_or_default();
    assert_eq!(annotations[COMPLETION_INDEX], "0");
    assert!(!annotations[JOBSET_NAME].is_empty());
    // An opt-out, as a label or an annotation, and slicectl's own, each
    // turn the trigger off.
    for key in [TPU_PROVISIONER_OPT_OUT, SLICECTL_OPT_OUT] {
        let mut labelled = leader.clone();
        labelled
            .metadata
            .labels
            .get_or_insert_with(BTreeMap::new)
            .insert(key.into(), "true".into());
        assert!(!provisioning_trigger(&labelled), "{key} as a label");
        let mut annotated = leader.clone();
        annotated
            .metadata
            .annotations
            .get_or_insert_with(BTreeMap::new)
            .insert(key.into(), "true".into());
        assert!(!provisioning_trigger(&annotated), "{key} as an annotation");
    }
}

fn node_name(p: &Pod) -> String {
    p.spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .expect("a Running pod is bound")
}

#[tokio::test]
async fn a_two_job_spot_jobset_gets_a_pool_per_job_runs_and_completes() {
    let t = Run::start().await;
    let (client, ns, run) = (&t.client, &t.ns, &t.run);

    // Two single-host v6e 2x2 slices (4 chips each) on Spot, one per Job.
    let mut rjob = TpuReplicatedJob::new("slice", 2, "tpu-v6e-slice", "2x2", 4);
    rjob.capacity = Capacity::Spot;
    let js = t.jobset(TpuJobSet::new(&unique("train"), vec![rjob]));
    let created = submit_jobset(client, ns, &js).await;
    let uid = created.metadata.uid.clone().expect("uid");
    let jobs = wait_jobs(client, ns, &js).await;
    assert_eq!(jobs.len(), 2);
    for j in &jobs {
        let spec = j.spec.as_ref().expect("Job spec");
        assert_eq!(spec.completion_mode.as_deref(), Some("Indexed"));
        let labels = j.metadata.labels.clone().unwrap_or_default();
        assert_eq!(labels[JOBSET_NAME], js.name);
        assert_eq!(labels[JOBSET_UID], uid);
    }

    // Each Job's leader pod is Unschedulable, the provisioning trigger.
    let leaders = wait_leaders_unschedulable(client, ns, &js).await;
    assert_eq!(
        leaders.keys().cloned().collect::<Vec<_>>(),
        js.job_names(),
        "one leader per Job"
    );
    for leader in leaders.values() {
        assert_provisioning_trigger(leader);
    }

    // What a provisioner does: a pool per Job, named and labelled for it.
    let mut pools = Vec::new();
    for leader in leaders.values() {
        let pool = workload_pool(leader, "ct6e-standard-4t", "us-central1-b", 1);
        let name = pool["name"].as_str().expect("pool name").to_string();
        assert!(name.starts_with(&js.name) && name.len() <= 40, "{name}");
        let labels = &pool["config"]["labels"];
        assert_eq!(labels[SOURCE_LABEL], "workload");
        assert_eq!(labels[OWNER_NAMESPACE_LABEL], ns.as_str());
        assert_eq!(labels[OWNER_NAME_LABEL], js.name.as_str());
        assert_eq!(labels[OWNER_UID_LABEL], uid.as_str());
        assert_eq!(labels[TEST_RUN_LABEL], run.as_str());
        assert_eq!(pool["config"]["spot"], true, "{pool}");
        create_pool(&t.sim, &t.cluster, pool).await;
        pools.push(name);
    }
    pools.sort();
    assert_eq!(pools.len(), 2);
    assert_eq!(jobset_pools(&t.sim, &t.cluster, &uid).await, pools);
    assert_ne!(pools[0], pools[1], "a pool per Job (job-key suffix)");
    let mut pool_of_node = BTreeMap::new();
    for pool in &pools {
        for n in wait_pool_nodes(client, pool, 1).await {
            pool_of_node.insert(n.metadata.name.clone().expect("name"), pool.clone());
        }
    }

    // The real scheduler places them; they run on the new Nodes, one per
    // host. (Which Job lands on which of the two identical pools is the
    // scheduler's choice: JobSet's exclusive placement needs its pod
    // webhook, which the test plane does not install.)
    let running = wait_jobset_running(client, ns, &js.name, 2).await;
    let mut nodes: Vec<String> = running.iter().map(node_name).collect();
    nodes.sort();
    nodes.dedup();
    assert_eq!(nodes.len(), 2, "one pod per host: {nodes:?}");
    assert!(
        nodes.iter().all(|n| pool_of_node.contains_key(n)),
        "{nodes:?} not all in {pool_of_node:?}"
    );

    // The kubelet ends them Succeeded; the JobSet completes.
    assert_eq!(succeed_jobset(client, ns, &js.name).await, 2);
    let completed = wait_jobset_condition(client, ns, &js.name, "Completed").await;
    assert_eq!(completed["reason"], "AllJobsCompleted", "{completed}");
    let done = get_jobset(client, ns, &js.name).await;
    assert!(jobset_condition(&done, "Failed").is_none(), "{}", done.data);

    t.finish(&js.name, &pools).await;
}

#[tokio::test]
async fn a_multi_host_jobset_whose_pod_fails_turns_failed() {
    let t = Run::start().await;
    let (client, ns) = (&t.client, &t.ns);

    // One Job on a 2-host v5e 2x4 slice: two pods, one leader.
    let mut rjob = TpuReplicatedJob::new("slice", 1, "tpu-v5-lite-podslice", "2x4", 4);
    rjob.hosts = 2;
    let js = t.jobset(TpuJobSet::new(&unique("train"), vec![rjob]));
    submit_jobset(client, ns, &js).await;
    wait_jobs(client, ns, &js).await;
    let leaders = wait_leaders_unschedulable(client, ns, &js).await;
    assert_eq!(leaders.len(), 1);
    let leader = leaders.values().next().expect("leader").clone();
    assert_provisioning_trigger(&leader);
    // The other pod (completion index 1) is Unschedulable too, but no
    // trigger: one slice per Job, asked for by its leader only.
    let pods = jobset_pods(client, ns, &js.name).await;
    assert_eq!(pods.len(), 2);
    let follower = pods
        .iter()
        .find(|p| !is_leader(p))
        .expect("a pod of index 1");
    assert!(!provisioning_trigger(follower), "{:?}", follower.metadata);

    let pool = workload_pool(&leader, "ct5lp-hightpu-4t", "us-central1-a", 2);
    assert_eq!(pool["placementPolicy"]["tpuTopology"], "2x4", "{pool}");
    let pool_name = pool["name"].as_str().expect("pool name").to_string();
    create_pool(&t.sim, &t.cluster, pool).await;
    wait_pool_nodes(client, &pool_name, 2).await;
    let running = wait_jobset_running(client, ns, &js.name, 2).await;
    let leader_name = running
        .iter()
        .find(|p| is_leader(p))
        .and_then(|p| p.metadata.name.clone())
        .expect("the running leader");

    // The kubelet fails the leader (its deadline passed); with
    // backoffLimit 0 the Job fails, and with no failure policy the JobSet.
    let failed = fail_jobset_pod(client, ns, &leader_name).await;
    assert_eq!(
        failed.status.and_then(|s| s.reason).as_deref(),
        Some("DeadlineExceeded")
    );
    let condition = wait_jobset_condition(client, ns, &js.name, "Failed").await;
    assert_eq!(condition["reason"], "FailedJobs", "{condition}");
    let ended = get_jobset(client, ns, &js.name).await;
    assert!(jobset_condition(&ended, "Completed").is_none());

    t.finish(&js.name, &[pool_name]).await;
}

/// The JobSets of `examples/jobset/jobsets/` are accepted by the real CRD and
/// controller as written, and every Job's leader is an `Unschedulable`
/// provisioning trigger (one Job for `single-slice.yaml`, three for
/// `multislice.yaml`).
#[tokio::test]
async fn the_example_jobsets_make_a_trigger_per_job() {
    let client = client().await;
    require_jobset(&client).await;
    let run = unique("js");
    let ns = crate::common::k8s::namespace(&client, "jobset").await;
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/jobset/jobsets");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("examples/jobset/jobsets")
        .map(|e| e.expect("entry").path())
        .collect();
    files.sort();
    let mut seen = BTreeMap::new();
    for f in &files {
        let text = std::fs::read_to_string(f).expect("read example");
        let mut object: serde_json::Value = serde_saphyr::from_str(&text).expect("example YAML");
        let name = object["metadata"]["name"]
            .as_str()
            .expect("name")
            .to_string();
        let jobs: u64 = object["spec"]["replicatedJobs"]
            .as_array()
            .expect("replicatedJobs")
            .iter()
            .map(|r| r["replicas"].as_u64().expect("replicas"))
            .sum();
        // Kept off other tests' Nodes on the shared control plane.
        add_node_selector(&mut object, TEST_RUN_LABEL, &run);
        submit_jobset_json(&client, &ns, object).await;
        let leaders = wait_jobset_leaders_unschedulable(&client, &ns, &name, jobs as usize).await;
        for leader in leaders.values() {
            assert_provisioning_trigger(leader);
        }
        seen.insert(name.clone(), leaders.len());
        delete_jobset(&client, &ns, &name).await;
    }
    assert_eq!(
        seen,
        BTreeMap::from([
            ("train-multislice".to_string(), 3),
            ("train-single".to_string(), 1)
        ])
    );
    crate::common::k8s::kubectl(&["delete", "namespace", &ns, "--wait=false"]);
}

/// A JobSet restarted by its failure policy makes its Jobs again under the
/// same names, so the same job-keys and the same provisioner pool names: the
/// restarted leader runs on the pool made for the first attempt. After
/// `maxRestarts` the JobSet fails (`ReachedMaxRestarts`).
#[tokio::test]
async fn a_restarted_jobset_keeps_its_job_keys_and_runs_on_the_same_pool() {
    let t = Run::start().await;
    let (client, ns) = (&t.client, &t.ns);
    let mut js = t.jobset(TpuJobSet::new(
        &unique("train"),
        vec![TpuReplicatedJob::new("slice", 1, "tpu-v6e-slice", "2x2", 4)],
    ));
    js.max_restarts = Some(1);
    submit_jobset(client, ns, &js).await;
    let leaders = wait_leaders_unschedulable(client, ns, &js).await;
    let first = leaders.values().next().expect("leader").clone();
    assert_provisioning_trigger(&first);
    let pool = workload_pool(&first, "ct6e-standard-4t", "us-central1-b", 1);
    let pool_name = pool["name"].as_str().expect("pool name").to_string();
    create_pool(&t.sim, &t.cluster, pool).await;
    wait_pool_nodes(client, &pool_name, 1).await;

    let labels = |p: &Pod| p.metadata.labels.clone().unwrap_or_default();
    let mut leader = wait_jobset_running(client, ns, &js.name, 1).await.remove(0);
    for attempt in 0..2u64 {
        assert_eq!(labels(&leader)[RESTART_ATTEMPT], attempt.to_string());
        assert_eq!(labels(&leader)[JOB_KEY], labels(&first)[JOB_KEY]);
        assert_eq!(provisioner_pool_name(&leader), pool_name);
        let node = node_name(&leader);
        assert!(
            node.contains(&pool_name),
            "{node} is not of pool {pool_name}"
        );
        let name = leader.metadata.name.clone().expect("name");
        fail_jobset_pod(client, ns, &name).await;
        if attempt == 0 {
            wait_jobset_restarts(client, ns, &js.name, 1).await;
            leader = wait_jobset_running(client, ns, &js.name, 1).await.remove(0);
        }
    }
    let condition = wait_jobset_condition(client, ns, &js.name, "Failed").await;
    assert_eq!(condition["reason"], "ReachedMaxRestarts", "{condition}");

    t.finish(&js.name, &[pool_name]).await;
}
