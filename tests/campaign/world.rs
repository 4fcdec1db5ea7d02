//! The world a run acts on: the recording fakes of the cloud and
//! Kubernetes seams, the spec model of each source, and the oracle's own
//! ground truth (which pods run on which pool's Nodes, who made each
//! resource). [`World::step`] runs one step and checks the invariants
//! after it ([`crate::oracle`]).

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use slicectl::apply::{ApplyOptions, Progress};
use slicectl::cloud::Cloud;
use slicectl::cloud::fake::{FakeCloud, Fault};
use slicectl::engine::{Approval, ReconcileOptions, Report};
use slicectl::kube::fake::{FakeKube, KubeFault};
use slicectl::plan::{PlanMode, PlanOptions};
use slicectl::resource::gke::{NodeConfig, NodePool};
use slicectl::resource::{ClusterRef, KubeRef};

use crate::model::{CLUSTERS, LOCATION, PROJECT, SourceM, WhenBusy, Window};
use crate::oracle::{self, Before, Violation};
use crate::steps::{CloudFault, Cut, KubeState, Step};

/// Longest a reconcile may take on the paused clock before it counts as
/// a hang (I7): far past every timeout a step of the fakes can reach.
pub const HANG: Duration = Duration::from_secs(6 * 3600);

pub fn cluster(i: usize) -> ClusterRef {
    ClusterRef {
        project: PROJECT.into(),
        location: LOCATION.into(),
        name: CLUSTERS[i % CLUSTERS.len()].into(),
    }
}

pub fn cluster_named(name: &str) -> ClusterRef {
    ClusterRef {
        project: PROJECT.into(),
        location: LOCATION.into(),
        name: name.into(),
    }
}

/// A live pool as the oracle reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LivePool {
    pub cluster: String,
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub running: bool,
    pub hosts: u32,
}

impl LivePool {
    /// `node_pool PATH/NAME`, as [`FakeCloud::removed`] says it.
    pub fn key(&self) -> String {
        format!(
            "node_pool {}/{}",
            cluster_named(&self.cluster).path(),
            self.name
        )
    }
    pub fn label(&self, k: &str) -> Option<&str> {
        self.labels.get(k).map(String::as_str)
    }
    /// (owner, slice, replica, target) from the stamp, if slicectl's.
    pub fn stamp(&self) -> Option<(String, String, u32, String)> {
        Some((
            self.label("slicectl.dev/owner")?.to_string(),
            self.label("slicectl.dev/slice")?.to_string(),
            self.label("slicectl.dev/replica")?.parse().ok()?,
            self.label("slicectl.dev/target").unwrap_or("").to_string(),
        ))
    }
}

/// A pod the world started.
#[derive(Debug, Clone)]
pub struct PodRec {
    pub ns: String,
    pub name: String,
    pub cluster: String,
    pub node: String,
    /// The pool whose Node it runs on (`node_pool PATH/NAME`).
    pub pool: String,
    pub dnd: bool,
    pub alive: bool,
}

/// A JobSet the world submitted.
#[derive(Debug, Clone)]
pub struct JobRec {
    pub cluster: String,
    pub ns: String,
    pub name: String,
    pub uid: String,
    pub ended: bool,
    /// Its leader pod runs (an index into the pods).
    pub running: Option<usize>,
}

impl JobRec {
    fn leader(&self) -> String {
        format!("{}-job-0-0", self.name)
    }
}

/// Who made a resource: a source (by index, with the ownerId it had), or
/// the world (`foreign`: another owner's; `unmanaged`: no stamp).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Creator {
    Source(usize),
    Foreign,
    Unmanaged,
}

pub struct World {
    pub sources: Vec<SourceM>,
    pub fake: Arc<FakeCloud>,
    pub kube: Arc<FakeKube>,
    pub cloud: Cloud,
    pub kube_state: BTreeMap<usize, KubeState>,
    pub pods: Vec<PodRec>,
    pub jobsets: Vec<JobRec>,
    pub creator: BTreeMap<String, Creator>,
    pub log: Vec<String>,
    /// The node pools as the last reconcile found them when it started.
    last_view: std::collections::BTreeMap<String, Vec<NodePool>>,
    /// The next reconcile is served `last_view`.
    stale_next: bool,
    /// This run's plan reads pool lists from an older view.
    pub stale_now: bool,
    /// Whether any reconcile of this run was served a stale view.
    pub stale_seen: bool,
}

struct Quiet {
    stop_after: Option<usize>,
    started: AtomicUsize,
}

impl Progress for Quiet {
    fn started(&self, _: &str, _: &str) {
        self.started.fetch_add(1, Ordering::SeqCst);
    }
    fn finished(&self, _: &str, _: &str, _: Result<(), &str>, _: Duration) {}
    fn stop_requested(&self) -> bool {
        self.stop_after
            .is_some_and(|n| self.started.load(Ordering::SeqCst) >= n)
    }
}

/// A future polled at most `left` times, then dropped: a process killed
/// with SIGKILL mid-apply (operations already sent go on in the cloud).
struct Killed<F> {
    inner: Pin<Box<F>>,
    left: u32,
}

impl<F: Future> Future for Killed<F> {
    type Output = Option<F::Output>;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        if self.left == 0 {
            return Poll::Ready(None);
        }
        self.left -= 1;
        match self.inner.as_mut().poll(cx) {
            Poll::Ready(v) => Poll::Ready(Some(v)),
            Poll::Pending => Poll::Pending,
        }
    }
}

/// What a reconcile gave back, for the oracle.
pub enum RunResult {
    Report(Box<Report>),
    /// The plan refused as a whole: its code, and why.
    Refused(String, String),
    Killed,
    Panicked(String),
    Hung,
}

impl World {
    pub fn new(sources: Vec<SourceM>, foreign: bool) -> World {
        let fake = FakeCloud::new();
        let weak = Arc::downgrade(&fake);
        let kube = FakeKube::with_gke_nodes(Arc::new(move |k| {
            weak.upgrade().map(|f| f.gke_nodes(k)).unwrap_or_default()
        }));
        let cloud = Cloud {
            gke: Arc::new(crate::yielding::Yielding(fake.clone())),
            compute: fake.clone(),
            kube: kube.clone(),
            sim_defers_kube: false,
            unread_idle: false,
        };
        let mut w = World {
            sources,
            fake,
            kube,
            cloud,
            kube_state: BTreeMap::new(),
            pods: Vec::new(),
            jobsets: Vec::new(),
            creator: BTreeMap::new(),
            log: Vec::new(),
            last_view: BTreeMap::new(),
            stale_next: false,
            stale_now: false,
            stale_seen: false,
        };
        if foreign {
            w.seed_foreign();
        }
        w
    }

    /// Another team's pool (another ownerId) and a pool no tool stamped,
    /// in the first cluster: neither may ever be touched (I2).
    fn seed_foreign(&mut self) {
        let c = cluster(0);
        let stamped = |owner: &str, slice: &str| {
            let mut labels = slicectl::labels::Labels::new();
            for (k, v) in [
                ("slicectl.dev/managed-by", "slicectl"),
                ("slicectl.dev/owner", owner),
                ("slicectl.dev/slice", slice),
                ("slicectl.dev/replica", "0"),
                ("slicectl.dev/target", "tx"),
            ] {
                labels.insert(k.to_string(), v.to_string());
            }
            labels
        };
        for (name, labels, who) in [
            ("x-0", stamped("other", "x"), Creator::Foreign),
            (
                "legacy-0",
                slicectl::labels::Labels::new(),
                Creator::Unmanaged,
            ),
        ] {
            self.fake.seed_pool(
                &c,
                NodePool {
                    name: name.into(),
                    config: Some(NodeConfig {
                        machine_type: "ct6e-standard-1t".into(),
                        labels,
                        ..Default::default()
                    }),
                    initial_node_count: Some(1),
                    status: Some("RUNNING".into()),
                    ..Default::default()
                },
            );
            self.creator
                .insert(format!("node_pool {}/{name}", c.path()), who);
        }
    }

    /// Every live pool, in cluster then name order.
    pub fn pools(&self) -> Vec<LivePool> {
        let mut out = Vec::new();
        for (i, name) in CLUSTERS.iter().enumerate() {
            for p in self.fake.pools(&cluster(i)) {
                let labels = p
                    .config
                    .as_ref()
                    .map(|c| {
                        c.labels
                            .iter()
                            .map(|(k, v)| (k.clone(), v.clone()))
                            .collect()
                    })
                    .unwrap_or_default();
                out.push(LivePool {
                    cluster: (*name).to_string(),
                    name: p.name.clone(),
                    labels,
                    running: p.status.as_deref() == Some("RUNNING"),
                    hosts: u32::try_from(p.initial_node_count.unwrap_or(0)).unwrap_or(0),
                });
            }
        }
        out
    }

    /// Every live resource policy: `resource_policy KEY/NAME` → description.
    pub fn policies(&self) -> BTreeMap<String, String> {
        self.fake
            .policies(PROJECT, LOCATION)
            .into_iter()
            .map(|p| {
                (
                    format!(
                        "resource_policy projects/{PROJECT}/regions/{LOCATION}/{}",
                        p.name
                    ),
                    p.description.unwrap_or_default(),
                )
            })
            .collect()
    }

    /// The cluster index of a name.
    fn cluster_index(name: &str) -> usize {
        CLUSTERS.iter().position(|c| *c == name).unwrap_or(0)
    }

    /// The resolved policy of a live pool's replica, from the model of the
    /// source whose ownerId and Target its stamp names.
    pub fn policy_of(&self, p: &LivePool) -> (WhenBusy, Option<Window>) {
        let Some((owner, slice, _, target)) = p.stamp() else {
            return (WhenBusy::Wait, None);
        };
        self.sources
            .iter()
            .filter(|s| s.owner == owner)
            .find(|s| s.target_named(&target).is_some() || s.slice_claiming(&slice).is_some())
            .map(|s| s.policy(&slice, &target))
            .unwrap_or((WhenBusy::Wait, None))
    }

    fn log(&mut self, line: String) {
        self.log.push(line);
    }

    /// Runs one step; returns the invariants it broke.
    pub async fn step(&mut self, n: usize, step: &Step) -> Vec<Violation> {
        self.log(format!("#{n} {step:?}"));
        match step {
            Step::Apply { src, cut } => {
                let src = *src % self.sources.len();
                return self.reconcile(src, PlanMode::Apply, *cut).await;
            }
            Step::Destroy { src } => {
                let src = *src % self.sources.len();
                return self.reconcile(src, PlanMode::Destroy, Cut::None).await;
            }
            Step::StartPod { pool, dnd } => self.start_pod(*pool, *dnd),
            Step::EndPod { pod } => {
                let alive: Vec<usize> = (0..self.pods.len())
                    .filter(|i| self.pods[*i].alive)
                    .collect();
                if !alive.is_empty() {
                    let i = alive[*pod % alive.len()];
                    let p = &mut self.pods[i];
                    p.alive = false;
                    let k = KubeRef::gke(&cluster_named(&p.cluster));
                    let (ns, name) = (p.ns.clone(), p.name.clone());
                    self.kube.set_pod_phase(&k, &ns, &name, "Succeeded");
                    self.log(format!("  pod {ns}/{name} ends"));
                }
            }
            Step::SubmitJobSet { target, name, ns } => self.submit_jobset(*target, *name, *ns),
            Step::RunJobSet { jobset } => self.run_jobset(*jobset),
            Step::EndJobSet { jobset } => self.end_jobset(*jobset),
            Step::SubmitJobSetEverywhere { name, ns } => {
                let mut clusters = self.workload_clusters();
                clusters.sort_unstable();
                clusters.dedup();
                if clusters.is_empty() {
                    self.log("  (no workload-enabled Target)".into());
                }
                for c in clusters {
                    self.submit_jobset_in(c, *name, *ns);
                }
            }
            Step::Fault(f) => {
                let (method, fault) = match f {
                    CloudFault::CreateUnavailable => ("create_node_pool", Fault::Unavailable),
                    CloudFault::CreateStockout => ("wait_operation", Fault::Stockout),
                    CloudFault::PolicyUnavailable => ("insert_resource_policy", Fault::Unavailable),
                    CloudFault::DeleteUnavailable => ("delete_node_pool", Fault::Unavailable),
                    CloudFault::UpdateBusy => ("update_node_pool", Fault::ClusterBusy),
                    CloudFault::ListUnavailable => ("list_node_pools", Fault::Unavailable),
                };
                self.fake.fail_next(method, fault);
            }
            Step::Kube { cluster: c, state } => self.set_kube(*c, *state),
            Step::StaleView => self.stale_next = true,
            edit => {
                let src = edit_source(edit) % self.sources.len();
                let before = self.sources[src].clone();
                crate::edits::apply(&mut self.sources[src], edit);
                if self.sources[src].fleet().is_err() {
                    // An edit the specs refuse (validate would say where):
                    // a person fixes it before it reaches slicectl.
                    self.sources[src] = before;
                    self.log("  (edit refused by validate; not made)".into());
                }
            }
        }
        Vec::new()
    }

    fn set_kube(&mut self, c: usize, state: KubeState) {
        let k = KubeRef::gke(&cluster(c));
        self.kube.set_failing(
            &k,
            match state {
                KubeState::Unreachable => Some(KubeFault::Unreachable),
                KubeState::Forbidden => Some(KubeFault::Forbidden),
                _ => None,
            },
        );
        self.kube.set_deferred(
            &k,
            (state == KubeState::NoToken).then(|| {
                "slicectl holds no Google token this cluster's API would accept (campaign)"
                    .to_string()
            }),
        );
        self.kube_state.insert(c % CLUSTERS.len(), state);
    }

    /// Whether cluster `name`'s Kubernetes API is up (a pod can start).
    fn kube_up(&self, name: &str) -> bool {
        self.kube_state
            .get(&Self::cluster_index(name))
            .is_none_or(|s| *s == KubeState::Up)
    }

    fn start_pod(&mut self, pool: usize, dnd: bool) {
        let candidates: Vec<LivePool> = self
            .pools()
            .into_iter()
            .filter(|p| p.running && p.hosts > 0 && p.stamp().is_some())
            .filter(|p| self.kube_up(&p.cluster))
            .collect();
        if candidates.is_empty() {
            self.log("  (no pool to run on)".into());
            return;
        }
        let p = &candidates[pool % candidates.len()];
        let node = format!("gke-{}-{}-0", p.cluster, p.name);
        let name = format!("w{}", self.pods.len());
        let k = KubeRef::gke(&cluster_named(&p.cluster));
        let annotations: &[(&str, &str)] = if dnd {
            &[("slicectl.dev/do-not-disrupt", "true")]
        } else {
            &[]
        };
        self.kube.seed_pod(
            &k,
            "ml",
            &name,
            &node,
            &[("jobset.sigs.k8s.io/jobset-name", "train")],
            annotations,
            None,
        );
        self.log(format!("  pod ml/{name} runs on {node}"));
        self.pods.push(PodRec {
            ns: "ml".into(),
            name,
            cluster: p.cluster.clone(),
            node,
            pool: p.key(),
            dnd,
            alive: true,
        });
    }

    /// One reconcile of source `src`, checked.
    async fn reconcile(&mut self, src: usize, mode: PlanMode, cut: Cut) -> Vec<Violation> {
        let fleet = match self.sources[src].fleet() {
            Ok(f) => f,
            Err(e) => {
                self.log(format!("  specs invalid: {e}"));
                return Vec::new();
            }
        };
        let before = Before::take(self, src, mode);
        let view = self.fake.pool_view();
        self.stale_now = std::mem::take(&mut self.stale_next);
        self.stale_seen |= self.stale_now;
        if self.stale_now {
            self.fake
                .serve_stale_pool_lists(Some(std::mem::take(&mut self.last_view)));
        }
        self.last_view = view;
        let result = self.run(&fleet, mode, cut).await;
        self.fake.serve_stale_pool_lists(None);
        self.fake.clear_faults();
        self.kube.clear_faults();
        let removed: BTreeSet<String> = before.removed_since(self).into_iter().collect();
        let out = oracle::check(self, &before, &result);
        self.collect_dead_pods(&removed);
        out
    }

    async fn run(&mut self, fleet: &slicectl::spec::Fleet, mode: PlanMode, cut: Cut) -> RunResult {
        use futures::FutureExt;
        let opts = ReconcileOptions {
            mode,
            plan: PlanOptions::default(),
            apply: ApplyOptions::default(),
        };
        let progress = Arc::new(Quiet {
            stop_after: match cut {
                Cut::Stop(n) => Some(usize::from(n)),
                _ => None,
            },
            started: AtomicUsize::new(0),
        });
        let fut =
            slicectl::engine::reconcile(fleet, &self.cloud, &opts, |_| Approval::Auto, progress);
        let polls = match cut {
            Cut::Kill(n) => u32::from(n),
            _ => u32::MAX,
        };
        let killed = Killed {
            inner: Box::pin(fut),
            left: polls,
        };
        let guarded =
            std::panic::AssertUnwindSafe(tokio::time::timeout(HANG, killed)).catch_unwind();
        match guarded.await {
            Err(p) => RunResult::Panicked(
                p.downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default(),
            ),
            Ok(Err(_)) => RunResult::Hung,
            Ok(Ok(None)) => RunResult::Killed,
            Ok(Ok(Some(Err(e)))) => RunResult::Refused(refusal_code(&e), e.to_string()),
            Ok(Ok(Some(Ok(r)))) => RunResult::Report(Box::new(r)),
        }
    }

    /// Pods whose Node is gone are gone (the pod garbage collector), and a
    /// pool made again under the same name has new Nodes.
    fn collect_dead_pods(&mut self, removed: &BTreeSet<String>) {
        let live: BTreeSet<String> = self
            .pools()
            .iter()
            .filter(|p| p.running)
            .map(LivePool::key)
            .collect();
        let listed = |w: &World, p: &PodRec| {
            w.kube
                .pod_names(&KubeRef::gke(&cluster_named(&p.cluster)))
                .contains(&format!("{}/{}", p.ns, p.name))
        };
        for i in 0..self.pods.len() {
            let p = self.pods[i].clone();
            if !p.alive {
                continue;
            }
            if !live.contains(&p.pool) || !listed(self, &p) || removed.contains(&p.pool) {
                self.pods[i].alive = false;
                let k = KubeRef::gke(&cluster_named(&p.cluster));
                self.kube.set_pod_phase(&k, &p.ns, &p.name, "Failed");
                if let Some(j) = self.jobsets.iter_mut().find(|j| j.running == Some(i)) {
                    // Its leader is gone: JobSet's failure policy makes
                    // it again, pending.
                    j.running = None;
                    let j = j.clone();
                    self.put_leader(&j, None);
                }
            }
        }
    }

    /// Faults stop, workloads end: every source is applied until its plan
    /// is empty, at most `rounds` times each; I4 is then checked.
    pub async fn quiesce(&mut self, rounds: usize) -> Vec<Violation> {
        for c in 0..CLUSTERS.len() {
            self.set_kube(c, KubeState::Up);
        }
        // A stale view is a perturbation too: it stops with the faults (a
        // quiet plan on a list older than the last writes proves nothing).
        self.stale_next = false;
        self.fake.clear_faults();
        for i in 0..self.jobsets.len() {
            if !self.jobsets[i].ended {
                self.end_jobset_at(i);
            }
        }
        for i in 0..self.pods.len() {
            if self.pods[i].alive {
                self.pods[i].alive = false;
                let p = self.pods[i].clone();
                self.kube.set_pod_phase(
                    &KubeRef::gke(&cluster_named(&p.cluster)),
                    &p.ns,
                    &p.name,
                    "Succeeded",
                );
            }
        }
        self.log("quiesce: faults stop, pods end".into());
        let mut out = Vec::new();
        let mut last = Vec::new();
        for round in 0..rounds {
            last.clear();
            let mut changes = false;
            for src in 0..self.sources.len() {
                let v = self.reconcile(src, PlanMode::Apply, Cut::None).await;
                out.extend(v);
                if let Some(l) = self.log.iter().rev().find(|l| l.starts_with("  plan")) {
                    changes |= !l.contains("changes=false");
                    last.push(l.clone());
                }
            }
            if !changes {
                self.log(format!("quiet after {round} rounds"));
                // A plan over the destroy cap is refused whole until a
                // person raises `--max-destroy`, and one of a source whose
                // specs define no slice (the empty-source guard) until a
                // person passes `--allow-empty-source`: what it would prune
                // (workload slices too) stays, by design, so there is no
                // leak to judge yet.
                if !last
                    .iter()
                    .any(|l| l.contains("too_many_destructive") || l.contains("empty_source"))
                {
                    out.extend(oracle::converged(self));
                }
                return out;
            }
        }
        out.push(Violation::new(
            "I4",
            format!(
                "not converged after {rounds} rounds with no fault: {}",
                last.join(" | ")
            ),
            Vec::new(),
        ));
        out
    }
}

/// JobSet's job-key for a Job: a 40-hex hash of `JOBSET/JOB` (JobSet
/// writes sha1 of `NS/JOB`; leaving the namespace out is what a tenant
/// copying another's labels does).
fn job_key(jobset: &str) -> String {
    use sha2::{Digest, Sha256};
    hex::encode(Sha256::digest(
        format!("{jobset}/{jobset}-job-0").as_bytes(),
    ))[..40]
        .to_string()
}

impl World {
    /// The workload-enabled Targets, over every source: (cluster).
    pub fn workload_clusters(&self) -> Vec<&'static str> {
        self.sources
            .iter()
            .flat_map(|s| s.targets.iter())
            .filter(|t| t.workloads)
            .map(|t| t.cluster)
            .collect()
    }

    fn jobset_json(j: &JobRec) -> serde_json::Value {
        let mut v = serde_json::json!({
            "apiVersion": "jobset.x-k8s.io/v1alpha2",
            "kind": "JobSet",
            "metadata": {"namespace": j.ns, "name": j.name, "uid": j.uid},
            // One replicatedJob `job` of one Job: `<name>-job-0`, as the
            // JobSet controller names it.
            "spec": {"replicatedJobs": [{"name": "job", "replicas": 1}]},
        });
        if j.ended {
            v["status"] = serde_json::json!({"conditions": [{
                "type": "Completed", "status": "True",
                "lastTransitionTime": "2000-01-01T00:00:00Z"
            }]});
        }
        v
    }

    /// The leader pod of `j`: pending and unschedulable, or bound to `node`.
    fn put_leader(&self, j: &JobRec, node: Option<&str>) {
        use k8s_openapi::api::core::v1::{
            Container, Pod, PodCondition, PodSpec, PodStatus, ResourceRequirements,
        };
        use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
        let labels: BTreeMap<String, String> = [
            ("jobset.sigs.k8s.io/jobset-name", j.name.clone()),
            ("jobset.sigs.k8s.io/jobset-uid", j.uid.clone()),
            ("jobset.sigs.k8s.io/job-key", job_key(&j.name)),
            ("batch.kubernetes.io/job-completion-index", "0".to_string()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        let mut pod = Pod::default();
        pod.metadata.namespace = Some(j.ns.clone());
        pod.metadata.name = Some(j.leader());
        pod.metadata.labels = Some(labels.clone());
        pod.metadata.annotations = Some(labels);
        // Owned by its Job, as the Job controller makes it.
        pod.metadata.owner_references = Some(vec![OwnerReference {
            api_version: "batch/v1".into(),
            kind: "Job".into(),
            name: format!("{}-job-0", j.name),
            uid: format!("{}-job-0", j.uid),
            controller: Some(true),
            ..Default::default()
        }]);
        pod.spec = Some(PodSpec {
            node_name: node.map(str::to_string),
            node_selector: Some(
                [
                    ("cloud.google.com/gke-tpu-accelerator", "tpu-v6e-slice"),
                    ("cloud.google.com/gke-tpu-topology", "2x2"),
                ]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ),
            containers: vec![Container {
                name: "train".into(),
                resources: Some(ResourceRequirements {
                    requests: Some([("google.com/tpu".to_string(), Quantity("4".into()))].into()),
                    ..Default::default()
                }),
                ..Default::default()
            }],
            ..Default::default()
        });
        pod.status = Some(PodStatus {
            phase: Some(if node.is_some() { "Running" } else { "Pending" }.into()),
            conditions: node.is_none().then(|| {
                vec![PodCondition {
                    type_: "PodScheduled".into(),
                    status: "False".into(),
                    reason: Some("Unschedulable".into()),
                    ..Default::default()
                }]
            }),
            ..Default::default()
        });
        self.kube
            .put_pod(&KubeRef::gke(&cluster_named(&j.cluster)), pod);
    }

    fn submit_jobset(&mut self, target: usize, name: usize, ns: usize) {
        let clusters = self.workload_clusters();
        if clusters.is_empty() {
            self.log("  (no workload-enabled Target)".into());
            return;
        }
        let cluster = clusters[target % clusters.len()];
        self.submit_jobset_in(cluster, name, ns);
    }

    /// JobSet `name` of namespace `ns` (indices into the small sets)
    /// submitted in cluster `cluster`, unless it runs there already.
    fn submit_jobset_in(&mut self, cluster: &str, name: usize, ns: usize) {
        let cluster = cluster.to_string();
        let (ns, name) = (
            ["ml", "ml2"][ns % 2].to_string(),
            ["train", "eval"][name % 2].to_string(),
        );
        if self
            .jobsets
            .iter()
            .any(|j| !j.ended && j.cluster == cluster && j.ns == ns && j.name == name)
        {
            self.log("  (that JobSet runs already)".into());
            return;
        }
        let j = JobRec {
            uid: format!("uid-{cluster}-{ns}-{name}-{}", self.jobsets.len()),
            cluster,
            ns,
            name,
            ended: false,
            running: None,
        };
        self.kube.put_jobset(
            &KubeRef::gke(&cluster_named(&j.cluster)),
            Self::jobset_json(&j),
        );
        self.put_leader(&j, None);
        self.log(format!(
            "  jobset {}/{} ({}) pending in {}",
            j.ns, j.name, j.uid, j.cluster
        ));
        self.jobsets.push(j);
    }

    fn run_jobset(&mut self, i: usize) {
        let pending: Vec<usize> = (0..self.jobsets.len())
            .filter(|x| !self.jobsets[*x].ended && self.jobsets[*x].running.is_none())
            .collect();
        if pending.is_empty() {
            return;
        }
        let x = pending[i % pending.len()];
        let j = self.jobsets[x].clone();
        // The scheduler places it on a running pool of its cluster whose
        // Nodes carry its JobSet's namespace and name (a workload slice
        // asked for it).
        let Some(p) = self.pools().into_iter().find(|p| {
            p.cluster == j.cluster
                && p.running
                && p.label("slicectl.dev/jobset-name") == Some(&j.name)
                && p.label("slicectl.dev/jobset-namespace") == Some(&j.ns)
        }) else {
            self.log(format!(
                "  jobset {}/{} in {}: no pool for it yet",
                j.ns, j.name, j.cluster
            ));
            return;
        };
        if !self.kube_up(&p.cluster) {
            return;
        }
        let node = format!("gke-{}-{}-0", p.cluster, p.name);
        self.put_leader(&j, Some(&node));
        self.jobsets[x].running = Some(self.pods.len());
        self.log(format!("  jobset {}/{} runs on {node}", j.ns, j.name));
        self.pods.push(PodRec {
            ns: j.ns.clone(),
            name: j.leader(),
            cluster: p.cluster.clone(),
            node,
            pool: p.key(),
            dnd: false,
            alive: true,
        });
    }

    fn end_jobset(&mut self, i: usize) {
        let live: Vec<usize> = (0..self.jobsets.len())
            .filter(|x| !self.jobsets[*x].ended)
            .collect();
        if let Some(x) = live.get(i % live.len().max(1)) {
            self.end_jobset_at(*x);
        }
    }

    fn end_jobset_at(&mut self, x: usize) {
        self.jobsets[x].ended = true;
        let j = self.jobsets[x].clone();
        let k = KubeRef::gke(&cluster_named(&j.cluster));
        self.kube.put_jobset(&k, Self::jobset_json(&j));
        self.kube.set_pod_phase(&k, &j.ns, &j.leader(), "Succeeded");
        if let Some(p) = j.running {
            self.pods[p].alive = false;
        }
        self.log(format!(
            "  jobset {}/{} in {} ends",
            j.ns, j.name, j.cluster
        ));
    }
}

/// The refusal's code; a plan refused for several reasons at once
/// (`plan_refused`) names each (`empty_source+too_many_destructive`), so the
/// oracle can tell by-design refusals from the others.
fn refusal_code(e: &slicectl::engine::ReconcileError) -> String {
    use slicectl::engine::ReconcileError;
    use slicectl::plan::PlanError;
    match e {
        ReconcileError::Plan(PlanError::Multiple(all)) => all
            .iter()
            .map(|p| match p {
                PlanError::EmptySource { .. } => "empty_source",
                PlanError::TooManyDestructive { .. } => "too_many_destructive",
                _ => "plan_refused",
            })
            .collect::<Vec<_>>()
            .join("+"),
        _ => e.code().to_string(),
    }
}

fn edit_source(s: &Step) -> usize {
    match s {
        Step::Replace { src, .. }
        | Step::Rename { src, .. }
        | Step::Move { src, .. }
        | Step::Retarget { src, .. }
        | Step::Scale { src, .. }
        | Step::ToggleFile { src, .. }
        | Step::Protect { src, .. }
        | Step::Policy { src, .. }
        | Step::SetWindow { src, .. }
        | Step::OwnerChange { src } => *src,
        _ => 0,
    }
}
