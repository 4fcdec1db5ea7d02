//! End to end: the disruption policy (issue 17, item 4) with REAL
//! SCHEDULED pods. A simulated GKE cluster is linked to the real test
//! control plane, so the node pools `slicectl apply` creates register
//! kubemark hollow Nodes (the real kubelet, a fake container runtime); the
//! real kube-scheduler places the test's pods on them (never `nodeName`);
//! slicectl reaches the cluster's API as it reaches a GKE cluster's
//! (`clusters.get`'s endpoint and CA, the Google token from
//! `--access-token-file`), lists Nodes and Pods there, cordons, labels and
//! evicts through the Eviction API, and a real PodDisruptionBudget decides.
//! Pods end as the real kubelet ends them: evicted (the kubelet stops the
//! containers and the pod goes), or deleted behind a finalizer (the kubelet
//! reports them `Succeeded`, see `sim_gke_support::succeed_pod`).
//!
//! Every slice is a 1-host v5e slice (`ct5lp-hightpu-4t`, 2x2, one hollow
//! node each); the spec change that replaces a pool is `capacity: spot`.

use crate::common::*;
use crate::sim_gke_support::{
    client, link, release_pod, submit, succeed_pod, tpu_pod, unique, wait_pool_nodes, wait_running,
};

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use slicectl_sim::SimHandle;

const ACCELERATOR: &str = "tpu-v5-lite-podslice";
const TOPOLOGY: &str = "2x2";
const DRAINING_SINCE: &str = "slicectl.dev/draining-since";
const JOBSET: &str = "jobset.sigs.k8s.io/jobset-name";
/// A slice's policy: drain, with the shortest `drainTimeout`.
const DRAIN: &str = "  disruption:\n    whenBusy: drain\n    drainTimeout: 1m\n";

/// One test's world: a simulator whose cluster is linked to the control
/// plane, a spec directory with one Target (in a zone that offers v5e), a
/// namespace for the pods, and the Google token slicectl sends.
struct Bed {
    sim: SimHandle,
    client: Client,
    dir: tempfile::TempDir,
    ns: String,
    token: String,
    /// Prefix of every slice name (unique: the control plane is shared, and
    /// Nodes are found by pool name).
    id: String,
    /// When the test started (its time is printed at the end).
    started: Instant,
}

impl Bed {
    /// A new bed whose Target has `disruption` (see [`Bed::target`]).
    async fn new(prefix: &str, seed: u64, disruption: &str) -> Bed {
        let started = Instant::now();
        let client = client().await;
        let sim = sim(Duration::from_millis(100), seed, Default::default()).await;
        link(&sim, CLUSTER).await;
        let ns = crate::common::k8s::namespace(&client, prefix).await;
        let token = match std::env::var("SLICECTL_TEST_GKE_TOKEN_FILE") {
            Ok(p) if !p.is_empty() => p,
            _ => panic!(
                "SLICECTL_TEST_GKE_TOKEN_FILE is not set; {}",
                crate::common::k8s::hint()
            ),
        };
        let bed = Bed {
            sim,
            client,
            dir: tempfile::tempdir().unwrap(),
            ns,
            token,
            id: unique(prefix),
            started,
        };
        bed.target(disruption);
        bed
    }

    /// Slices `names` (each with `extra`), applied.
    async fn create(&self, names: &[&str], extra: &str) {
        for n in names {
            self.slice_file(n, false, extra);
        }
        let o = self.apply().await;
        assert!(o.status.success(), "{}", text(&o));
    }

    fn slice(&self, n: &str) -> String {
        format!("{}-{n}", self.id)
    }

    fn pool(&self, n: &str) -> String {
        format!("{}-0", self.slice(n))
    }

    /// Writes the Target, with `disruption` (YAML under `disruption:`, or
    /// empty).
    fn target(&self, disruption: &str) {
        let d = if disruption.is_empty() {
            String::new()
        } else {
            format!("  disruption:\n{disruption}")
        };
        put(
            self.dir.path(),
            "target.yaml",
            &format!(
                "apiVersion: slicectl.dev/v1alpha1\nkind: Target\nmetadata:\n  name: sched\nspec:\n  \
                 project: example-project\n  zone: us-central1-a\n  ownerId: e2e-sched\n  gke:\n    \
                 location: us-central1\n    name: train\n{d}"
            ),
        );
    }

    /// Writes slice `n` (1-host v5e); `spot` is the change that replaces
    /// its pool; `extra` is more of its spec.
    fn slice_file(&self, n: &str, spot: bool, extra: &str) {
        let capacity = if spot {
            "  capacity:\n    type: spot\n"
        } else {
            ""
        };
        put(
            self.dir.path(),
            &format!("{n}.yaml"),
            &format!(
                "apiVersion: slicectl.dev/v1alpha1\nkind: Slice\nmetadata:\n  name: {}\nspec:\n  \
                 target: sched\n  backend: gke\n  accelerator: {ACCELERATOR}\n  topology: \"{TOPOLOGY}\"\n  \
                 replicas: 1\n{capacity}{extra}",
                self.slice(n)
            ),
        );
    }

    fn d(&self) -> &str {
        self.dir.path().to_str().unwrap()
    }

    /// `slicectl ARGS DIR --access-token-file TOKEN [MORE]`, timed.
    async fn run(&self, verb: &str, more: &[&str]) -> (std::process::Output, Duration) {
        let mut args = vec![verb, self.d(), "--access-token-file", &self.token];
        args.extend_from_slice(more);
        let t = Instant::now();
        let o = slicectl(&self.sim, &args).await;
        (o, t.elapsed())
    }

    async fn apply(&self) -> std::process::Output {
        let (o, took) = self.run("apply", &["--auto-approve"]).await;
        eprintln!("{}: apply took {took:?}", self.id);
        o
    }

    /// `plan -o json`, parsed (the exit code must be 0 or 2).
    async fn plan_json(&self) -> Value {
        let (o, _) = self
            .run("plan", &["--output", "json", "--detailed-exitcode"])
            .await;
        assert!(matches!(o.status.code(), Some(0 | 2)), "{}", text(&o));
        serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&o)))
    }

    /// The `disruption` of slice `n`'s planned step (`plan -o json`).
    async fn disruption(&self, n: &str) -> Value {
        let plan = self.plan_json().await;
        actions(&plan, &self.slice(n))
            .iter()
            .find_map(|a| a.get("disruption").cloned())
            .unwrap_or_else(|| panic!("a disruption of {n}: {plan:#}"))
    }

    /// Waits for the 1 hollow Node of slice `n`'s pool; returns its name.
    async fn node(&self, n: &str) -> String {
        let nodes = wait_pool_nodes(&self.client, &self.pool(n), 1).await;
        nodes[0].metadata.name.clone().unwrap()
    }

    /// A pod of JobSet `jobset` for slice `n`, placed by the scheduler;
    /// waits until it runs on the pool's one Node and returns that Node.
    async fn run_pod(
        &self,
        n: &str,
        pod: &str,
        jobset: &str,
        annotations: &[(&str, &str)],
    ) -> String {
        let mut p = tpu_pod(pod, &self.pool(n), ACCELERATOR, TOPOLOGY, 4);
        p.metadata.labels = Some([(JOBSET.to_string(), jobset.to_string())].into());
        if !annotations.is_empty() {
            p.metadata.annotations = Some(
                annotations
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            );
        }
        // The fake runtime stops a container at once; a short grace keeps
        // an evicted pod's end quick whatever it does.
        if let Some(s) = p.spec.as_mut() {
            s.termination_grace_period_seconds = Some(2);
        }
        let node = self.node(n).await;
        submit(&self.client, &self.ns, &p).await;
        let running = wait_running(&self.client, &self.ns, pod).await;
        let bound = running.spec.and_then(|s| s.node_name).expect("bound");
        assert!(
            running
                .metadata
                .owner_references
                .is_none_or(|r| r.is_empty()),
            "a bare pod"
        );
        assert_eq!(
            bound, node,
            "the scheduler placed {pod} on slice {n}'s Node"
        );
        bound
    }

    fn pods(&self) -> Api<Pod> {
        Api::namespaced(self.client.clone(), &self.ns)
    }

    fn nodes(&self) -> Api<Node> {
        Api::all(self.client.clone())
    }

    /// Whether slice `n`'s live pool is the replacement (spot).
    async fn spot(&self, n: &str) -> bool {
        let pool = self.pool(n);
        let pools = node_pools(&self.sim).await;
        let p = pools
            .iter()
            .find(|p| p["name"] == pool.as_str())
            .unwrap_or_else(|| panic!("pool {pool} is gone: {pools:?}"));
        p["config"]["spot"] == true
    }

    async fn cordoned(&self, node: &str) -> Option<bool> {
        self.nodes()
            .get_opt(node)
            .await
            .unwrap()
            .and_then(|n| n.spec.and_then(|s| s.unschedulable))
    }

    async fn draining_since(&self, node: &str) -> Option<String> {
        self.nodes()
            .get_opt(node)
            .await
            .unwrap()
            .and_then(|n| n.metadata.labels)
            .and_then(|l| l.get(DRAINING_SINCE).cloned())
    }

    /// Asserts pod `name` was evicted and ended: gone, or deleted
    /// (`deletionTimestamp`) and terminal. The kubelet stops an evicted
    /// pod's containers and reports the terminal phase before the object
    /// goes; once the pool (and so the Node) is gone the pod garbage
    /// collector removes the object, after its 40 s quarantine, so the test
    /// does not wait for that.
    async fn assert_evicted(&self, name: &str) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let Some(p) = self.pods().get_opt(name).await.unwrap() else {
                return;
            };
            let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
            if p.metadata.deletion_timestamp.is_some()
                && matches!(phase, Some("Succeeded" | "Failed"))
            {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "pod {name} not evicted: {:?} {phase:?}",
                p.metadata.deletion_timestamp
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    async fn done(self) {
        crate::common::k8s::kubectl(&["delete", "namespace", &self.ns, "--wait=false"]);
        self.sim.shutdown().await;
        eprintln!("{}: the test took {:?}", self.id, self.started.elapsed());
    }
}

fn out(o: &std::process::Output) -> String {
    text(o)
}

/// The held steps of a JSON plan, by slice.
fn held<'a>(plan: &'a Value, slice: &str) -> Vec<&'a Value> {
    plan["held"]
        .as_array()
        .map(|h| h.iter().filter(|h| h["slice"] == slice).collect())
        .unwrap_or_default()
}

/// The held steps of slice `slice` in a JSON plan: there are some, and all
/// are held with `code`.
fn held_as<'a>(plan: &'a Value, slice: &str, code: &str) -> Vec<&'a Value> {
    let h = held(plan, slice);
    assert!(!h.is_empty(), "{slice} held as {code}: {plan:#}");
    for h in &h {
        assert_eq!(h["code"], code, "{h:#}");
    }
    h
}

/// The planned actions of a JSON plan, by slice.
fn actions<'a>(plan: &'a Value, slice: &str) -> Vec<&'a Value> {
    plan["actions"]
        .as_array()
        .map(|a| a.iter().filter(|a| a["slice"] == slice).collect())
        .unwrap_or_default()
}

/// Case 1: a replacement held by a running pod (`whenBusy: wait`, the
/// default), the rest of the fleet applied, released by itself once the
/// pod ends (Succeeded).
#[tokio::test(flavor = "multi_thread")]
async fn a_replacement_waits_for_a_running_pod_and_goes_once_it_succeeds() {
    let bed = Bed::new("sched-wait", 171, "").await;
    bed.create(&["busy", "idle"], "").await;
    let busy_node = bed.run_pod("busy", "train-0", "train", &[]).await;
    bed.node("idle").await;

    // Both slices change to spot: a replacement each.
    bed.slice_file("busy", true, "");
    bed.slice_file("idle", true, "");
    let (o, _) = bed.run("plan", &["--detailed-exitcode"]).await;
    let text = out(&o);
    assert_eq!(o.status.code(), Some(2), "{text}");
    assert!(text.contains("Held (busy slice replicas"), "{text}");
    assert!(text.contains("[busy]"), "{text}");
    let pod = format!("{}/train-0 (jobset {}/train)", bed.ns, bed.ns);
    assert!(text.contains(&pod), "{text}");
    let plan = bed.plan_json().await;
    for h in held_as(&plan, &bed.slice("busy"), "busy") {
        assert_eq!(
            h["pods"],
            json!([{"namespace": bed.ns, "name": "train-0", "owner": format!("jobset {}/train", bed.ns)}]),
            "{h:#}"
        );
    }
    assert!(actions(&plan, &bed.slice("busy")).is_empty(), "{plan:#}");
    assert!(held(&plan, &bed.slice("idle")).is_empty(), "{plan:#}");
    assert!(
        actions(&plan, &bed.slice("idle"))
            .iter()
            .any(|a| a["action"] == "replace"),
        "{plan:#}"
    );

    // apply: the idle slice is replaced, the busy one held (exit 0: the
    // policy working), its pod untouched.
    let o = bed.apply().await;
    let text = out(&o);
    assert!(o.status.success(), "{text}");
    assert!(text.contains("held [busy]"), "{text}");
    assert!(
        bed.spot("idle").await,
        "the rest of the fleet applied: {text}"
    );
    assert!(!bed.spot("busy").await, "held: {text}");
    assert_eq!(bed.cordoned(&busy_node).await, None, "never cordoned");
    let p = bed.pods().get("train-0").await.unwrap();
    assert_eq!(p.status.and_then(|s| s.phase).as_deref(), Some("Running"));
    let (o, _) = bed.run("plan", &["--detailed-exitcode"]).await;
    assert_eq!(o.status.code(), Some(2), "still held: {}", out(&o));

    // The pod ends (the kubelet reports it Succeeded; the finalizer keeps
    // the terminal object): the next apply replaces the pool by itself.
    succeed_pod(&bed.client, &bed.ns, "train-0").await;
    let plan = bed.plan_json().await;
    assert!(held(&plan, &bed.slice("busy")).is_empty(), "{plan:#}");
    let o = bed.apply().await;
    let text = out(&o);
    assert!(o.status.success(), "{text}");
    assert!(!text.contains("held ["), "{text}");
    assert!(bed.spot("busy").await, "replaced once idle: {text}");
    let (o, _) = bed.run("plan", &["--detailed-exitcode"]).await;
    assert_eq!(o.status.code(), Some(0), "converged: {}", out(&o));
    release_pod(&bed.client, &bed.ns, "train-0").await;
    bed.done().await;
}

/// A PodDisruptionBudget over JobSet `jobset`'s one pod with
/// `minAvailable: min_available` (for pods of no controller with a scale,
/// such as a Job's or bare ones, Kubernetes supports only an integer
/// `minAvailable`: "Specifying a Disruption Budget for your Application").
async fn pdb(bed: &Bed, jobset: &str, min_available: i32) {
    let api = Api::<PodDisruptionBudget>::namespaced(bed.client.clone(), &bed.ns);
    if api.get_opt(jobset).await.unwrap().is_some() {
        api.patch(
            jobset,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"minAvailable": min_available}})),
        )
        .await
        .unwrap();
    } else {
        let body: PodDisruptionBudget = serde_json::from_value(json!({
            "metadata": {"name": jobset},
            "spec": {"minAvailable": min_available, "selector": {"matchLabels": {JOBSET: jobset}}}
        }))
        .unwrap();
        api.create(&PostParams::default(), &body).await.unwrap();
    }
    // The Eviction API reads the budget's status, which
    // kube-controller-manager's disruption controller writes: wait for it
    // (one healthy pod).
    let want = 1 - min_available.min(1);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let p = api.get(jobset).await.unwrap();
        let st = p.status.unwrap_or_default();
        if st.observed_generation == p.metadata.generation
            && st.current_healthy == Some(1)
            && st.disruptions_allowed == Some(want)
        {
            return;
        }
        assert!(Instant::now() < deadline, "PDB {jobset} status: {st:?}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Cases 2 and 6: a drain (`whenBusy: drain`) blocked by a real
/// PodDisruptionBudget, SIGKILLed mid-drain, resumed from the cordon and
/// the `slicectl.dev/draining-since` label in the cluster (not from
/// memory), held with `pdb` once its `drainTimeout` is over (never
/// forced), then let through when the budget allows, and the pool is
/// replaced.
#[tokio::test(flavor = "multi_thread")]
async fn a_drain_held_by_a_pdb_survives_sigkill_and_finishes_once_the_budget_allows() {
    let bed = Bed::new("sched-pdb", 172, "").await;
    bed.create(&["drain"], DRAIN).await;
    let node = bed.run_pod("drain", "train-0", "train", &[]).await;
    pdb(&bed, "train", 1).await;

    // The replacement drains first, as the plan says.
    bed.slice_file("drain", true, DRAIN);
    let d = bed.disruption("drain").await;
    assert_eq!(d["how"], "drain", "{d:#}");
    assert_eq!(d["nodes"], json!([node]), "{d:#}");
    assert!(d.get("draining_since").is_none(), "{d:#}");

    // SIGKILL mid-drain: once slicectl has cordoned the Node and marked the
    // drain's start, while the budget refuses the eviction.
    let mut child = spawn_apply(&bed);
    let deadline = Instant::now() + Duration::from_secs(30);
    let since = loop {
        if let Some(s) = bed.draining_since(&node).await {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "no drain label: {}",
            child.stderr.lock().unwrap()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    // Let it ask for the eviction (and be refused) at least once.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    child.child.start_kill().unwrap(); // SIGKILL
    let status = child.child.wait().await.unwrap();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(9)
    );
    assert_eq!(
        bed.cordoned(&node).await,
        Some(true),
        "the cordon stays: {}",
        String::from_utf8_lossy(
            &crate::common::k8s::kubectl(&[
                "get",
                "node",
                &node,
                "-o",
                "yaml",
                "--show-managed-fields"
            ])
            .stdout
        ),
    );
    assert_eq!(bed.draining_since(&node).await, Some(since.clone()));
    assert!(!bed.spot("drain").await, "nothing destroyed");
    let p = bed.pods().get("train-0").await.unwrap();
    assert_eq!(p.status.and_then(|s| s.phase).as_deref(), Some("Running"));
    assert!(p.metadata.deletion_timestamp.is_none(), "not evicted");

    // A fresh process reads the drain back from the cluster.
    let d = bed.disruption("drain").await;
    let started = jiff::Timestamp::from_second(since.parse().unwrap()).unwrap();
    assert_eq!(d["draining_since"], started.to_string(), "{d:#}");

    // It resumes, keeps the first run's start (so its deadline), is
    // refused until drainTimeout is over, and holds: `pdb`, nothing forced.
    let (o, took) = bed.run("apply", &["--auto-approve"]).await;
    let text = out(&o);
    assert_eq!(o.status.code(), Some(1), "{text}");
    assert!(text.contains("[pdb]"), "{text}");
    assert!(text.contains("PodDisruptionBudget"), "{text}");
    assert!(text.contains(&format!("{}/train-0", bed.ns)), "{text}");
    assert!(
        text.contains(&format!("the drain started at {started}")),
        "the deadline is the first run's: {text}"
    );
    assert!(
        took < Duration::from_secs(60),
        "deadline from the label, not from this run's start: {took:?}: {text}"
    );
    assert!(!bed.spot("drain").await, "{text}");
    assert_eq!(bed.cordoned(&node).await, Some(true));
    assert_eq!(bed.draining_since(&node).await, Some(since.clone()));
    let p = bed.pods().get("train-0").await.unwrap();
    assert_eq!(p.status.and_then(|s| s.phase).as_deref(), Some("Running"));

    // The budget allows one: the eviction goes through, the real kubelet
    // stops the pod, and the pool is replaced.
    pdb(&bed, "train", 0).await;
    let o = bed.apply().await;
    let text = out(&o);
    assert!(o.status.success(), "{text}");
    assert!(
        text.contains(&format!("draining since {started}")),
        "{text}"
    );
    assert!(bed.spot("drain").await, "{text}");
    bed.assert_evicted("train-0").await;
    let new = bed.node("drain").await;
    assert_ne!(new, node, "a new Node");
    assert_eq!(bed.cordoned(&new).await, None);
    assert_eq!(bed.draining_since(&new).await, None);
    bed.done().await;
}

/// Case 3: a pod annotated `slicectl.dev/do-not-disrupt: "true"` blocks
/// even a drain; without the annotation the drain goes.
#[tokio::test(flavor = "multi_thread")]
async fn do_not_disrupt_blocks_even_a_drain() {
    let bed = Bed::new("sched-dnd", 173, "").await;
    bed.create(&["dnd"], DRAIN).await;
    let annotation = ("slicectl.dev/do-not-disrupt", "true");
    let node = bed.run_pod("dnd", "ckpt-0", "ckpt", &[annotation]).await;

    bed.slice_file("dnd", true, DRAIN);
    let plan = bed.plan_json().await;
    for h in held_as(&plan, &bed.slice("dnd"), "do_not_disrupt") {
        assert_eq!(h["pods"][0]["name"], "ckpt-0", "{h:#}");
        assert_eq!(h["pods"][0]["do_not_disrupt"], true, "{h:#}");
    }
    let o = bed.apply().await;
    let text = out(&o);
    assert!(o.status.success(), "{text}");
    assert!(text.contains("held [do_not_disrupt]"), "{text}");
    assert!(!bed.spot("dnd").await, "{text}");
    assert_eq!(bed.cordoned(&node).await, None, "not even cordoned");
    let p = bed.pods().get("ckpt-0").await.unwrap();
    assert_eq!(p.status.and_then(|s| s.phase).as_deref(), Some("Running"));

    // The annotation goes: the drain evicts and the pool is replaced.
    bed.pods()
        .patch(
            "ckpt-0",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {annotation.0: null}}})),
        )
        .await
        .unwrap();
    let o = bed.apply().await;
    let text = out(&o);
    assert!(o.status.success(), "{text}");
    assert!(bed.spot("dnd").await, "{text}");
    bed.assert_evicted("ckpt-0").await;
    bed.done().await;
}

/// Case 4: outside its window a busy replica is held (`outside_window`);
/// a window containing now lets it go (here `whenBusy: replace`, which the
/// plan names as killing the pods).
#[tokio::test(flavor = "multi_thread")]
async fn a_busy_replica_is_replaced_only_inside_its_window() {
    let bed = Bed::new("sched-win", 174, "").await;
    let now = jiff::Timestamp::now().to_zoned(jiff::tz::TimeZone::UTC);
    let window = |hour: i8, duration: &str| {
        format!(
            "  disruption:\n    whenBusy: replace\n    windows:\n      - schedule: \"0 {hour} * * *\"\n        \
             timeZone: UTC\n        duration: {duration}\n"
        )
    };
    // Opens 12 hours from now's hour, for one hour: now is outside.
    let closed = window((now.hour() + 12) % 24, "1h");
    bed.create(&["win"], &closed).await;
    bed.run_pod("win", "train-0", "train", &[]).await;

    bed.slice_file("win", true, &closed);
    let plan = bed.plan_json().await;
    for h in held_as(&plan, &bed.slice("win"), "outside_window") {
        assert!(
            h["message"]
                .as_str()
                .unwrap()
                .contains("the next window opens at"),
            "{h:#}"
        );
    }
    let o = bed.apply().await;
    let text = out(&o);
    assert!(o.status.success(), "{text}");
    assert!(text.contains("held [outside_window]"), "{text}");
    assert!(!bed.spot("win").await, "{text}");

    // Opened at the start of this hour, for two hours: now is inside.
    let open = window(now.hour(), "2h");
    bed.slice_file("win", true, &open);
    let (o, _) = bed.run("plan", &[]).await;
    let text = out(&o);
    assert!(o.status.success(), "{text}");
    assert!(text.contains("kills the running pods"), "{text}");
    assert!(text.contains(&format!("{}/train-0", bed.ns)), "{text}");
    let o = bed.apply().await;
    let text = out(&o);
    assert!(o.status.success(), "{text}");
    assert!(!text.contains("held ["), "{text}");
    assert!(bed.spot("win").await, "{text}");
    bed.done().await;
}

/// Case 5: a Target budget of 1 across 3 busy slices: one drained and
/// replaced, two held with `budget`; the next apply takes the next one.
#[tokio::test(flavor = "multi_thread")]
async fn a_budget_of_one_disrupts_one_busy_slice_at_a_time() {
    let bed = Bed::new("sched-bud", 175, "    budget: 1\n").await;
    let names = ["a", "b", "c"];
    bed.create(&names, DRAIN).await;
    for n in names {
        bed.run_pod(n, &format!("train-{n}"), n, &[]).await;
        bed.slice_file(n, true, DRAIN);
    }
    for (round, n) in names.iter().enumerate() {
        let o = bed.apply().await;
        let text = out(&o);
        assert!(o.status.success(), "{text}");
        // Slices are taken in name order: this round's is replaced, the
        // ones before it already were, the ones after it are held.
        for (i, m) in names.iter().enumerate() {
            assert_eq!(bed.spot(m).await, i <= round, "round {round}, {m}: {text}");
        }
        bed.assert_evicted(&format!("train-{n}")).await;
        let held_now = text.matches("held [budget]").count();
        let waiting = names.len() - round - 1;
        assert!(
            held_now >= waiting && (waiting > 0 || held_now == 0),
            "round {round}: {held_now} held for {waiting} slices: {text}"
        );
        if waiting > 0 {
            assert!(
                text.contains(&format!("budget (1) is used by {}[0]", bed.slice(n))),
                "{text}"
            );
        }
    }
    bed.done().await;
}

/// Case 1 in the controller (`controller --dir`): a replacement held by a
/// running pod shows as `WaitingForWorkload` on the slice's status object
/// and is not applied, cycle after cycle; once the pod ends, the
/// controller replaces the pool by itself, with nobody running anything,
/// and the status converges.
#[tokio::test(flavor = "multi_thread")]
async fn the_controller_holds_a_busy_replacement_and_applies_it_once_the_pod_ends() {
    let bed = Bed::new("sched-ctl", 173, "").await;
    crate::common::k8s::apply_crd();
    bed.create(&["busy"], "").await;
    bed.run_pod("busy", "train-0", "train", &[]).await;
    bed.slice_file("busy", true, "");

    let crate::common::Piped {
        child: mut ctl,
        stderr,
        ..
    } = crate::common::k8s::spawn_controller(
        &bed.sim,
        &bed.ns,
        "sched-ctl",
        free_port(),
        &[
            "--dir",
            bed.d(),
            "--debounce",
            "100ms",
            "--settle",
            "1s",
            "--resync",
            "1s",
            "--access-token-file",
            &bed.token,
        ],
    );
    let logs = || stderr.lock().unwrap().clone();
    let slice = bed.slice("busy");
    let wait = |what: &'static str, secs: u64| {
        let deadline = Instant::now() + Duration::from_secs(secs);
        move |done: bool, logs: String| {
            assert!(
                done || Instant::now() < deadline,
                "timed out waiting for {what}\n{logs}"
            );
            done
        }
    };

    // Held: the status says so, and cycles go by without the replacement.
    let check = wait("WaitingForWorkload", 60);
    while !check(
        crate::common::k8s::ready_reason(&bed.ns, &slice) == "WaitingForWorkload",
        logs(),
    ) {
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let cycles = |l: &str| l.matches("cycle finished").count();
    let seen = cycles(&logs());
    let check = wait("three more cycles", 60);
    while !check(cycles(&logs()) >= seen + 3, logs()) {
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let pools = node_pools(&bed.sim).await;
    assert!(
        pools
            .iter()
            .any(|p| p["name"] == bed.pool("busy").as_str() && p["config"]["spot"] != true),
        "held, never applied: {pools:?}\n{}",
        logs()
    );
    let p = bed.pods().get("train-0").await.unwrap();
    assert_eq!(p.status.and_then(|s| s.phase).as_deref(), Some("Running"));

    // The pod ends: the controller replaces the pool on its own.
    succeed_pod(&bed.client, &bed.ns, "train-0").await;
    // (A replacement deletes the pool first, then creates the new one.)
    let check = wait("the replacement", 120);
    while !check(
        node_pools(&bed.sim)
            .await
            .iter()
            .any(|p| p["name"] == bed.pool("busy").as_str() && p["config"]["spot"] == true),
        logs(),
    ) {
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let check = wait("the status to leave WaitingForWorkload", 60);
    while !check(
        crate::common::k8s::ready_reason(&bed.ns, &slice) != "WaitingForWorkload",
        logs(),
    ) {
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    ctl.start_kill().unwrap();
    let _ = ctl.wait().await;
    release_pod(&bed.client, &bed.ns, "train-0").await;
    bed.done().await;
}

/// `apply --auto-approve` of the bed's specs, as a child process.
fn spawn_apply(bed: &Bed) -> Piped {
    spawn_piped(
        tokio::process::Command::new(bin())
            .args([
                "apply",
                bed.d(),
                "--auto-approve",
                "--access-token-file",
                &bed.token,
            ])
            .env("SLICECTL_API_ENDPOINT", bed.sim.base_url())
            .env("NO_COLOR", "1"),
    )
}

/// Waits until the drain marked Node `node` (its start, read back).
async fn wait_drain_label(bed: &Bed, node: &str, child: &Piped) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(s) = bed.draining_since(node).await {
            return s;
        }
        assert!(
            Instant::now() < deadline,
            "no drain label: {}",
            child.stderr.lock().unwrap()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits for `child` to exit (at most 90 s); its exit code and output.
async fn finished(mut child: Piped) -> (Option<i32>, String) {
    let status = tokio::time::timeout(Duration::from_secs(90), child.child.wait())
        .await
        .unwrap_or_else(|_| panic!("no exit: {}", child.stderr.lock().unwrap()))
        .unwrap();
    let text = format!(
        "{}\n{}",
        child.stdout.lock().unwrap(),
        child.stderr.lock().unwrap()
    );
    (status.code(), text)
}

/// Asserts slice `n` kept its pool (not replaced), its pod `pod` runs and
/// was not evicted, and Node `node` keeps its cordon and drain label
/// `since`.
async fn assert_kept(bed: &Bed, n: &str, pod: &str, node: &str, since: &str, text: &str) {
    assert!(!bed.spot(n).await, "nothing destroyed: {text}");
    let p = bed.pods().get(pod).await.unwrap();
    assert_eq!(
        p.status.and_then(|s| s.phase).as_deref(),
        Some("Running"),
        "{text}"
    );
    assert!(
        p.metadata.deletion_timestamp.is_none(),
        "not evicted: {text}"
    );
    assert_eq!(bed.cordoned(node).await, Some(true), "{text}");
    assert_eq!(
        bed.draining_since(node).await.as_deref(),
        Some(since),
        "{text}"
    );
}

/// Issue 35, case 5: the first Ctrl-C (SIGINT) during a drain ends it
/// before its next eviction, even when the budget relaxes right after: no
/// eviction, no delete, no create; the cordon and drain label stay, the
/// run says what it left (`Apply STOPPED`, `draining stopped`) and exits
/// 1. The next apply resumes the drain and replaces the pool.
#[tokio::test(flavor = "multi_thread")]
async fn a_ctrl_c_mid_drain_stops_it_before_the_next_eviction() {
    let bed = Bed::new("sched-int", 351, "").await;
    bed.create(&["drain"], DRAIN).await;
    let node = bed.run_pod("drain", "train-0", "train", &[]).await;
    pdb(&bed, "train", 1).await;
    bed.slice_file("drain", true, DRAIN);
    let child = spawn_apply(&bed);
    let since = wait_drain_label(&bed, &node, &child).await;
    // Refused at least once, then the first Ctrl-C; then the budget relaxes
    // (the drain used to evict at its next poll, and delete and create).
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let pid = child.child.id().unwrap();
    crate::common::k8s::ok(
        &std::process::Command::new("kill")
            .args(["-INT", &pid.to_string()])
            .output()
            .unwrap(),
    );
    pdb(&bed, "train", 0).await;
    let (code, text) = finished(child).await;
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("Apply STOPPED"), "{text}");
    assert!(!text.contains("Apply complete"), "{text}");
    assert!(
        text.contains("draining stopped: the drain stopped before its next eviction"),
        "{text}"
    );
    assert!(text.contains("resumes the drain"), "{text}");
    // The budget allowed it for a while: still nothing was evicted.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_kept(&bed, "drain", "train-0", &node, &since, &text).await;

    // The next apply resumes the drain (same start) and replaces the pool.
    let o = bed.apply().await;
    let text = out(&o);
    assert!(o.status.success(), "{text}");
    let started = jiff::Timestamp::from_second(since.parse().unwrap()).unwrap();
    assert!(
        text.contains(&format!("draining since {started}")),
        "{text}"
    );
    assert!(bed.spot("drain").await, "{text}");
    bed.assert_evicted("train-0").await;
    bed.done().await;
}

/// Issue 35, case 4: a drain started inside its window and held by a real
/// PodDisruptionBudget is asked again before every eviction: once the
/// window has closed, the budget relaxing evicts nothing and destroys
/// nothing; the step is held `outside_window` with the next opening, the
/// cordon and the drain label stay.
#[tokio::test(flavor = "multi_thread")]
async fn a_window_that_closes_mid_drain_stops_it() {
    // Open for the first 40 s of every minute.
    const WINDOWED: &str = "  disruption:\n    whenBusy: drain\n    drainTimeout: 10m\n    windows:\n    - {schedule: \"* * * * *\", duration: 40s}\n";
    let bed = Bed::new("sched-win", 352, "").await;
    bed.create(&["win"], WINDOWED).await;
    let node = bed.run_pod("win", "train-0", "train", &[]).await;
    pdb(&bed, "train", 1).await;
    bed.slice_file("win", true, WINDOWED);
    // Start early in a window (the plan is made inside it).
    loop {
        let s = jiff::Timestamp::now().as_second().rem_euclid(60);
        if (1..=6).contains(&s) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let opened = jiff::Timestamp::now();
    let child = spawn_apply(&bed);
    let since = wait_drain_label(&bed, &node, &child).await;
    // The window closes at second 40; the budget relaxes after it.
    let closes = opened.as_second() - opened.as_second().rem_euclid(60) + 40;
    let wait = closes + 3 - jiff::Timestamp::now().as_second();
    tokio::time::sleep(Duration::from_secs(u64::try_from(wait.max(0)).unwrap())).await;
    pdb(&bed, "train", 0).await;
    let (code, text) = finished(child).await;
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("[outside_window]"), "{text}");
    assert!(text.contains("held mid-drain"), "{text}");
    assert!(text.contains("the next window opens at"), "{text}");
    assert!(text.contains("Nothing more is evicted"), "{text}");
    assert_kept(&bed, "win", "train-0", &node, &since, &text).await;
    bed.done().await;
}
