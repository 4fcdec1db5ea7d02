//! JobSets on the real test control plane, for tests of workload-driven
//! slices: the real JobSet controller (`sigs.k8s.io/jobset`, started by
//! `scripts/k8s-testenv.sh up`, which exports `SLICECTL_TEST_JOBSET`), the
//! controller-manager's Job controller and the real kube-scheduler. Built on
//! [`crate::sim_gke_support`] (the linked simulated GKE cluster whose pools
//! register kubemark hollow Nodes, and the pod helpers).
//!
//! - [`TpuJobSet`]: a JobSet (`jobset.x-k8s.io/v1alpha2`) of replicated Jobs
//!   whose pods request `google.com/tpu` with the TPU node selectors and
//!   tolerate the TPU taint. The test plane installs no webhook
//!   configuration, so what JobSet's mutating webhook would default
//!   (`pkg/webhooks/jobset_webhook.go` `Default`) is written out:
//!   `completionMode: Indexed` (without it there is no completion index, and
//!   no leader pod), the pods' `restartPolicy`, `successPolicy`,
//!   `startupPolicy` and `network`. Its Jobs replace only Failed pods
//!   (`podReplacementPolicy: Failed`), so a pod [`succeed_jobset`] deletes
//!   counts as the kubelet ends it. [`submit_jobset_json`] takes any JobSet
//!   (a YAML file read), [`add_node_selector`] keeps it to a test's Nodes.
//! - [`submit_jobset`], [`wait_jobs`], [`wait_leaders_unschedulable`] (each
//!   Job's leader pod, completion index 0, `PodScheduled=False/Unschedulable`
//!   from the real scheduler), [`provisioning_trigger`] (tpu-provisioner's
//!   creation filter, to check a pod the way it reads one),
//!   [`wait_jobset_running`], [`wait_jobset_condition`] (`Completed`,
//!   `Failed`), [`wait_jobset_restarts`], [`succeed_jobset`] /
//!   [`fail_jobset_pod`] (the kubelet ends the pods: see
//!   [`crate::sim_gke_support::succeed_pod`]), [`delete_jobset`].
//! - [`workload_pool`]: the node pool a provisioner makes for one Job, named
//!   as tpu-provisioner names it and labelled with slicectl's workload
//!   ownership labels, for tests that stand in for the provisioner;
//!   [`jobset_pools`]: the pools a JobSet owns (slicectl's, or those).
//!
//! Everything fails loudly, with what to start, when the JobSet controller or
//! the control plane is missing.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Pod, PodCondition};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams};
use serde_json::{Value, json};
use slicectl_sim::SimHandle;

use crate::sim_gke_support::{WAIT, release_pod, succeed_pod, tpu_pool};

/// JobSet's API group and version (the v0.12.0 CRD serves `v1alpha2`).
pub const GROUP: &str = "jobset.x-k8s.io";
pub const VERSION: &str = "v1alpha2";
pub const KIND: &str = "JobSet";
/// The CRD `scripts/k8s-testenv.sh up` applies.
pub const CRD: &str = "jobsets.jobset.x-k8s.io";

/// Labels (and annotations) the JobSet controller puts on its Jobs and their
/// pods (`pkg/controllers/jobset_controller.go` `labelAndAnnotateObject`).
pub const JOBSET_NAME: &str = "jobset.sigs.k8s.io/jobset-name";
pub const JOBSET_UID: &str = "jobset.sigs.k8s.io/jobset-uid";
pub const REPLICATED_JOB_NAME: &str = "jobset.sigs.k8s.io/replicatedjob-name";
pub const JOB_INDEX: &str = "jobset.sigs.k8s.io/job-index";
/// How many times the JobSet had restarted when it made the Job (`"0"`
/// first).
pub const RESTART_ATTEMPT: &str = "jobset.sigs.k8s.io/restart-attempt";
/// `sha1("<namespace>/<job name>")` in hex.
pub const JOB_KEY: &str = "jobset.sigs.k8s.io/job-key";
/// The Job controller's completion index (label and annotation) on pods of
/// an Indexed Job.
pub const COMPLETION_INDEX: &str = "batch.kubernetes.io/job-completion-index";

/// The pod opt-outs of provisioning (label or annotation): tpu-provisioner's
/// and slicectl's own.
pub const TPU_PROVISIONER_OPT_OUT: &str =
    "tpu-provisioner.cloud.google.com/disable-autoprovisioning";
pub const SLICECTL_OPT_OUT: &str = "slicectl.dev/disable-autoprovisioning";

/// The node selector (and pool label) a test keeps its pods to its own Nodes
/// with ([`TpuJobSet::node_selector`]).
pub const TEST_RUN_LABEL: &str = "slicectl.dev/test-run";

/// The TPU node selectors GKE labels TPU Nodes with.
pub const ACCELERATOR_SELECTOR: &str = "cloud.google.com/gke-tpu-accelerator";
pub const TOPOLOGY_SELECTOR: &str = "cloud.google.com/gke-tpu-topology";

/// slicectl's ownership labels on a workload slice's node pool (issue 18's
/// fixed fields).
pub const SOURCE_LABEL: &str = "slicectl.dev/source";
pub const OWNER_NAMESPACE_LABEL: &str = "slicectl.dev/jobset-namespace";
pub const OWNER_NAME_LABEL: &str = "slicectl.dev/jobset-name";
pub const OWNER_UID_LABEL: &str = "slicectl.dev/jobset-uid";
pub const OWNER_JOB_KEY_LABEL: &str = "slicectl.dev/job-key";

fn hint() -> &'static str {
    "build the binaries and start the test control plane with its JobSet controller first: \
     scripts/k8s-testbin.sh && eval \"$(scripts/k8s-testenv.sh up)\" (or run scripts/test.sh)"
}

/// The JobSet controller's version in the test plane (`SLICECTL_TEST_JOBSET`,
/// e.g. `v0.12.0`); panics when it is not set.
pub fn jobset_version() -> String {
    match std::env::var("SLICECTL_TEST_JOBSET") {
        Ok(v) if !v.is_empty() => v,
        _ => panic!(
            "SLICECTL_TEST_JOBSET is not set: the test control plane has no JobSet controller; {}",
            hint()
        ),
    }
}

/// Fails loudly unless the test plane runs the JobSet controller: the
/// environment says so and the API server serves the JobSet CRD.
pub async fn require_jobset(client: &Client) {
    let version = jobset_version();
    let crd = Api::<CustomResourceDefinition>::all(client.clone())
        .get_opt(CRD)
        .await
        .unwrap_or_else(|e| panic!("reading CRD {CRD}: {e}; {}", hint()));
    let established = crd
        .as_ref()
        .and_then(|c| c.status.as_ref())
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c.type_ == "Established" && c.status == "True")
        });
    assert!(
        established,
        "SLICECTL_TEST_JOBSET={version} but CRD {CRD} is not installed and established; {}",
        hint()
    );
}

/// The JobSet resource, for `Api<DynamicObject>`.
pub fn api_resource() -> ApiResource {
    ApiResource::from_gvk(&GroupVersionKind::gvk(GROUP, VERSION, KIND))
}

/// The JobSets of namespace `ns`.
pub fn jobsets(client: &Client, ns: &str) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), ns, &api_resource())
}

/// How a slice's capacity is asked for, by node selector (what
/// tpu-provisioner reads, `tpu-anchors.md` §A.4; flex-start:
/// `cloud.google.com/gke-flex-start`, the label of GKE's flex-start nodes).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Capacity {
    #[default]
    OnDemand,
    Spot,
    /// `cloud.google.com/reservation-name` (and `-project` when shared from
    /// another project).
    Reservation {
        name: String,
        project: Option<String>,
    },
    FlexStart,
}

impl Capacity {
    fn selectors(&self) -> Vec<(&'static str, String)> {
        match self {
            Capacity::OnDemand => Vec::new(),
            Capacity::Spot => vec![("cloud.google.com/gke-spot", "true".into())],
            Capacity::Reservation { name, project } => {
                let mut s = vec![("cloud.google.com/reservation-name", name.clone())];
                if let Some(p) = project {
                    s.push(("cloud.google.com/reservation-project", p.clone()));
                }
                s
            }
            Capacity::FlexStart => vec![("cloud.google.com/gke-flex-start", "true".into())],
        }
    }
}

/// One replicated Job of a [`TpuJobSet`]: `replicas` Jobs (one slice each),
/// each of `hosts` pods (`parallelism` = `completions`, Indexed), each
/// requesting `chips_per_host` `google.com/tpu`.
#[derive(Clone, Debug)]
pub struct TpuReplicatedJob {
    pub name: String,
    pub replicas: u32,
    pub accelerator: String,
    pub topology: String,
    pub hosts: u32,
    pub chips_per_host: u32,
    pub capacity: Capacity,
}

impl TpuReplicatedJob {
    /// `replicas` single-host slices' Jobs (one pod each).
    pub fn new(name: &str, replicas: u32, accelerator: &str, topology: &str, chips: u32) -> Self {
        TpuReplicatedJob {
            name: name.into(),
            replicas,
            accelerator: accelerator.into(),
            topology: topology.into(),
            hosts: 1,
            chips_per_host: chips,
            capacity: Capacity::OnDemand,
        }
    }

    /// The pods' tolerations: the TPU taint GKE puts on TPU Nodes; for Spot,
    /// also `cloud.google.com/gke-spot=true:NoSchedule` (tpu-provisioner
    /// taints its Spot pools so).
    pub fn tolerations(&self) -> Value {
        let mut t =
            vec![json!({"key": "google.com/tpu", "operator": "Exists", "effect": "NoSchedule"})];
        if self.capacity == Capacity::Spot {
            t.push(json!({
                "key": "cloud.google.com/gke-spot",
                "operator": "Equal",
                "value": "true",
                "effect": "NoSchedule",
            }));
        }
        json!(t)
    }

    /// The pods' node selectors: accelerator, topology and capacity.
    pub fn node_selector(&self) -> BTreeMap<String, String> {
        let mut s = BTreeMap::from([
            (ACCELERATOR_SELECTOR.to_string(), self.accelerator.clone()),
            (TOPOLOGY_SELECTOR.to_string(), self.topology.clone()),
        ]);
        for (k, v) in self.capacity.selectors() {
            s.insert(k.to_string(), v);
        }
        s
    }
}

/// A JobSet as a TPU workload writes it.
#[derive(Clone, Debug)]
pub struct TpuJobSet {
    pub name: String,
    pub replicated_jobs: Vec<TpuReplicatedJob>,
    /// `failurePolicy.maxRestarts`; `None`: no failure policy (the first
    /// failed Job fails the JobSet, reason `FailedJobs`).
    pub max_restarts: Option<u32>,
    /// The Jobs' `backoffLimit` (0: the first failed pod fails its Job).
    pub backoff_limit: u32,
    /// On the JobSet.
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    /// On every pod (e.g. an opt-out of provisioning).
    pub pod_labels: BTreeMap<String, String>,
    pub pod_annotations: BTreeMap<String, String>,
    /// More node selectors on every pod. Keys outside `cloud.google.com/`
    /// and `google.com/` become node labels of the pools made for them
    /// (tpu-provisioner copies them, `tpu-anchors.md` §A.4; so does
    /// [`workload_pool`]): a test gives its pods a selector of its own so the
    /// scheduler never binds them to another test's Nodes on the shared
    /// control plane. When slicectl makes the pools, the Target's workload
    /// rule can put the same label on them (`labels: {KEY: VALUE}`).
    pub node_selector: BTreeMap<String, String>,
}

impl TpuJobSet {
    pub fn new(name: &str, replicated_jobs: Vec<TpuReplicatedJob>) -> Self {
        TpuJobSet {
            name: name.into(),
            replicated_jobs,
            max_restarts: None,
            backoff_limit: 0,
            labels: BTreeMap::new(),
            annotations: BTreeMap::new(),
            pod_labels: BTreeMap::new(),
            pod_annotations: BTreeMap::new(),
            node_selector: BTreeMap::new(),
        }
    }

    /// How many Jobs (slices) the JobSet makes.
    pub fn jobs(&self) -> u32 {
        self.replicated_jobs.iter().map(|r| r.replicas).sum()
    }

    /// The Job names the JobSet controller gives: `<jobset>-<rjob>-<index>`.
    pub fn job_names(&self) -> Vec<String> {
        self.replicated_jobs
            .iter()
            .flat_map(|r| (0..r.replicas).map(move |i| format!("{}-{}-{i}", self.name, r.name)))
            .collect()
    }

    /// The JobSet object (JSON), with what JobSet's mutating webhook would
    /// default written out (`pkg/webhooks/jobset_webhook.go` `Default`):
    /// `successPolicy` All, `startupPolicy` AnyOrder, `network`
    /// (`enableDNSHostnames`, `publishNotReadyAddresses`: a headless Service
    /// per JobSet), `completionMode: Indexed`; `restartPolicy: Never` (the
    /// webhook's would be OnFailure; the Job API refuses Always).
    pub fn to_json(&self) -> Value {
        let replicated: Vec<Value> = self
            .replicated_jobs
            .iter()
            .map(|r| {
                let tpu = r.chips_per_host.to_string();
                let mut node_selector = r.node_selector();
                node_selector.extend(self.node_selector.clone());
                json!({
                    "name": r.name,
                    "replicas": r.replicas,
                    "template": {"spec": {
                        "completionMode": "Indexed",
                        "parallelism": r.hosts,
                        "completions": r.hosts,
                        "backoffLimit": self.backoff_limit,
                        // A replacement only for a Failed pod: a pod deleted
                        // while it runs counts by the phase the kubelet ends
                        // it with (how `succeed_pod` succeeds one), not as
                        // failed for being deleted.
                        "podReplacementPolicy": "Failed",
                        "template": {
                            "metadata": {
                                "labels": self.pod_labels,
                                "annotations": self.pod_annotations,
                            },
                            "spec": {
                                "restartPolicy": "Never",
                                "nodeSelector": node_selector,
                                "tolerations": r.tolerations(),
                                "containers": [{
                                    "name": "train",
                                    // Never pulled: the hollow kubelet's runtime is fake.
                                    "image": "registry.invalid/train:1",
                                    "resources": {
                                        "requests": {"google.com/tpu": tpu},
                                        "limits": {"google.com/tpu": tpu},
                                    },
                                }],
                            },
                        },
                    }},
                })
            })
            .collect();
        let mut spec = json!({
            "successPolicy": {"operator": "All"},
            "startupPolicy": {"startupPolicyOrder": "AnyOrder"},
            "network": {"enableDNSHostnames": true, "publishNotReadyAddresses": true},
            "replicatedJobs": replicated,
        });
        if let Some(n) = self.max_restarts {
            spec["failurePolicy"] = json!({"maxRestarts": n});
        }
        json!({
            "apiVersion": format!("{GROUP}/{VERSION}"),
            "kind": KIND,
            "metadata": {
                "name": self.name,
                "labels": self.labels,
                "annotations": self.annotations,
            },
            "spec": spec,
        })
    }

    /// The JobSet as YAML, for `kubectl apply -f -` or a spec directory.
    pub fn to_yaml(&self) -> String {
        serde_saphyr::to_string(&self.to_json()).expect("JobSet as YAML")
    }
}

/// Creates `js` in `ns` (after [`require_jobset`]); returns the created
/// object (its uid set).
pub async fn submit_jobset(client: &Client, ns: &str, js: &TpuJobSet) -> DynamicObject {
    submit_jobset_json(client, ns, js.to_json()).await
}

/// Creates the JobSet `object` (JSON, e.g. a YAML file read) in `ns`, after
/// [`require_jobset`]; its own `metadata.namespace`, if any, is replaced.
pub async fn submit_jobset_json(client: &Client, ns: &str, mut object: Value) -> DynamicObject {
    require_jobset(client).await;
    object["metadata"]["namespace"] = json!(ns);
    let name = object["metadata"]["name"]
        .as_str()
        .unwrap_or("?")
        .to_string();
    let obj: DynamicObject = serde_json::from_value(object).expect("JobSet object");
    jobsets(client, ns)
        .create(&Default::default(), &obj)
        .await
        .unwrap_or_else(|e| panic!("creating JobSet {ns}/{name}: {e}"))
}

/// Adds node selector `key: value` to every pod template of the JobSet
/// `object` (see [`TpuJobSet::node_selector`]).
pub fn add_node_selector(object: &mut Value, key: &str, value: &str) {
    let rjobs = object["spec"]["replicatedJobs"]
        .as_array_mut()
        .expect("spec.replicatedJobs");
    for r in rjobs {
        r["template"]["spec"]["template"]["spec"]["nodeSelector"][key] = json!(value);
    }
}

/// The JobSet `ns/name`.
pub async fn get_jobset(client: &Client, ns: &str, name: &str) -> DynamicObject {
    jobsets(client, ns)
        .get(name)
        .await
        .unwrap_or_else(|e| panic!("getting JobSet {ns}/{name}: {e}"))
}

fn selector(name: &str) -> ListParams {
    ListParams::default().labels(&format!("{JOBSET_NAME}={name}"))
}

/// The Jobs of JobSet `ns/name`, by its label.
pub async fn jobset_jobs(client: &Client, ns: &str, name: &str) -> Vec<Job> {
    Api::<Job>::namespaced(client.clone(), ns)
        .list(&selector(name))
        .await
        .expect("list jobs")
        .items
}

/// The pods of JobSet `ns/name`, by its label.
pub async fn jobset_pods(client: &Client, ns: &str, name: &str) -> Vec<Pod> {
    Api::<Pod>::namespaced(client.clone(), ns)
        .list(&selector(name))
        .await
        .expect("list pods")
        .items
}

/// Waits for the Jobs the JobSet controller makes of `js` (all of
/// [`TpuJobSet::job_names`]); returns them by name.
pub async fn wait_jobs(client: &Client, ns: &str, js: &TpuJobSet) -> Vec<Job> {
    let mut want = js.job_names();
    want.sort();
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let mut jobs = jobset_jobs(client, ns, &js.name).await;
        jobs.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        let names: Vec<String> = jobs
            .iter()
            .filter_map(|j| j.metadata.name.clone())
            .collect();
        if names == want {
            return jobs;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "JobSet {ns}/{}: wanted Jobs {want:?} within {WAIT:?}, have {names:?}; is the JobSet \
             controller running (SLICECTL_TEST_JOBSET={})? {}",
            js.name,
            jobset_version(),
            hint()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

fn entry<'a>(map: &'a Option<BTreeMap<String, String>>, key: &str) -> Option<&'a str> {
    map.as_ref()?.get(key).map(String::as_str)
}

fn annotation<'a>(p: &'a Pod, key: &str) -> Option<&'a str> {
    entry(&p.metadata.annotations, key)
}

fn label<'a>(p: &'a Pod, key: &str) -> Option<&'a str> {
    entry(&p.metadata.labels, key)
}

/// The pod's `PodScheduled` condition.
pub fn scheduled_condition(p: &Pod) -> Option<&PodCondition> {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "PodScheduled"))
}

/// Whether `p` is a leader pod: completion index 0 of its Job.
pub fn is_leader(p: &Pod) -> bool {
    annotation(p, COMPLETION_INDEX) == Some("0")
}

/// Whether tpu-provisioner's creation controller would act on `p`
/// (`internal/controller/creation_controller.go` and `pod_utils.go`,
/// `tpu-anchors.md` §A.3): annotation `jobset-name` non-empty, annotation
/// completion index `"0"`, phase `Pending`, `PodScheduled=False` with reason
/// `Unschedulable`, a container requesting `google.com/tpu`, a
/// `gke-tpu-topology` node selector, no opt-out (label or annotation) and
/// not being deleted. slicectl's own opt-out counts too.
pub fn provisioning_trigger(p: &Pod) -> bool {
    let opted_out = [TPU_PROVISIONER_OPT_OUT, SLICECTL_OPT_OUT]
        .iter()
        .any(|k| label(p, k) == Some("true") || annotation(p, k) == Some("true"));
    let unschedulable = scheduled_condition(p)
        .is_some_and(|c| c.status == "False" && c.reason.as_deref() == Some("Unschedulable"));
    let spec = p.spec.as_ref();
    let requests_tpu = spec.is_some_and(|s| {
        s.containers.iter().any(|c| {
            c.resources
                .as_ref()
                .and_then(|r| r.requests.as_ref())
                .is_some_and(|r| r.contains_key("google.com/tpu"))
        })
    });
    let topology = spec
        .and_then(|s| s.node_selector.as_ref())
        .is_some_and(|s| s.contains_key(TOPOLOGY_SELECTOR));
    annotation(p, JOBSET_NAME).is_some_and(|n| !n.is_empty())
        && is_leader(p)
        && p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Pending")
        && unschedulable
        && requests_tpu
        && topology
        && !opted_out
        && p.metadata.deletion_timestamp.is_none()
}

/// Waits until each of `js`'s Jobs has its leader pod (completion index 0)
/// Pending and `PodScheduled=False/Unschedulable` from the real
/// kube-scheduler; returns the leaders, one per Job, by Job name.
pub async fn wait_leaders_unschedulable(
    client: &Client,
    ns: &str,
    js: &TpuJobSet,
) -> BTreeMap<String, Pod> {
    wait_jobset_leaders_unschedulable(client, ns, &js.name, js.jobs() as usize).await
}

/// [`wait_leaders_unschedulable`] for any JobSet `ns/name` of `jobs` Jobs
/// (one not built by [`TpuJobSet`], e.g. a YAML file).
pub async fn wait_jobset_leaders_unschedulable(
    client: &Client,
    ns: &str,
    name: &str,
    jobs: usize,
) -> BTreeMap<String, Pod> {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let leaders: BTreeMap<String, Pod> = jobset_pods(client, ns, name)
            .await
            .into_iter()
            .filter(|p| is_leader(p) && p.metadata.deletion_timestamp.is_none())
            .filter_map(|p| Some((label(&p, "batch.kubernetes.io/job-name")?.to_string(), p)))
            .collect();
        let unschedulable = leaders.values().all(|p| {
            scheduled_condition(p).is_some_and(|c| {
                c.status == "False" && c.reason.as_deref() == Some("Unschedulable")
            })
        });
        if leaders.len() == jobs && unschedulable {
            return leaders;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "JobSet {ns}/{name}: wanted {jobs} Unschedulable leader pods within {WAIT:?}, have {:?}; \
             is the JobSet controller running (SLICECTL_TEST_JOBSET={})?",
            leaders
                .iter()
                .map(|(j, p)| (j, scheduled_condition(p)))
                .collect::<Vec<_>>(),
            jobset_version()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Waits until every pod of JobSet `ns/name` is Running, `count` of them;
/// returns them.
pub async fn wait_jobset_running(client: &Client, ns: &str, name: &str, count: usize) -> Vec<Pod> {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let pods: Vec<Pod> = jobset_pods(client, ns, name)
            .await
            .into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .collect();
        let running = pods
            .iter()
            .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
            .count();
        if pods.len() == count && running == count {
            return pods;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "JobSet {ns}/{name}: wanted {count} Running pods within {WAIT:?}, have {:?}",
            pods.iter()
                .map(|p| (
                    p.metadata.name.clone(),
                    p.status.as_ref().and_then(|s| s.phase.clone()),
                    scheduled_condition(p).and_then(|c| c.message.clone())
                ))
                .collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// The JobSet's condition `type_` when its status is `True`.
pub fn jobset_condition(js: &DynamicObject, type_: &str) -> Option<Value> {
    js.data["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_ && c["status"] == "True")
        .cloned()
}

/// The JobSet's `status.restarts` (restarts by its failure policy).
pub fn jobset_restarts(js: &DynamicObject) -> u64 {
    js.data["status"]["restarts"].as_u64().unwrap_or(0)
}

/// Waits until JobSet `ns/name` has restarted `n` times.
pub async fn wait_jobset_restarts(client: &Client, ns: &str, name: &str, n: u64) {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let js = get_jobset(client, ns, name).await;
        if jobset_restarts(&js) == n {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "JobSet {ns}/{name}: not restarted {n} times within {WAIT:?}: {}",
            js.data["status"]
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Waits until JobSet `ns/name` has condition `type_` (`Completed`,
/// `Failed`, `Suspended`, …) True; returns the condition.
pub async fn wait_jobset_condition(client: &Client, ns: &str, name: &str, type_: &str) -> Value {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let js = get_jobset(client, ns, name).await;
        if let Some(c) = jobset_condition(&js, type_) {
            return c;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "JobSet {ns}/{name}: no {type_}=True condition within {WAIT:?}: {}",
            js.data["status"]
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Ends every Running pod of JobSet `ns/name` as Succeeded, the kubelet
/// real ([`succeed_pod`], then [`release_pod`]); returns how many.
pub async fn succeed_jobset(client: &Client, ns: &str, name: &str) -> usize {
    let running: Vec<String> = jobset_pods(client, ns, name)
        .await
        .into_iter()
        .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
        .filter_map(|p| p.metadata.name)
        .collect();
    for p in &running {
        succeed_pod(client, ns, p).await;
        release_pod(client, ns, p).await;
    }
    running.len()
}

/// Ends Running pod `pod` of a JobSet as Failed (the kubelet real:
/// [`crate::sim_gke_support::fail_pod`]).
pub async fn fail_jobset_pod(client: &Client, ns: &str, pod: &str) -> Pod {
    crate::sim_gke_support::fail_pod(client, ns, pod).await
}

/// Deletes JobSet `ns/name` (background propagation: the garbage collector
/// deletes its Jobs and their pods) and waits until the JobSet, its Jobs and
/// its pods are gone.
pub async fn delete_jobset(client: &Client, ns: &str, name: &str) {
    jobsets(client, ns)
        .delete(name, &DeleteParams::background())
        .await
        .unwrap_or_else(|e| panic!("deleting JobSet {ns}/{name}: {e}"));
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let js = jobsets(client, ns).get_opt(name).await.expect("get JobSet");
        let jobs = jobset_jobs(client, ns, name).await;
        let pods = jobset_pods(client, ns, name).await;
        if js.is_none() && jobs.is_empty() && pods.is_empty() {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "JobSet {ns}/{name} not gone within {WAIT:?}: JobSet {}, Jobs {:?}, pods {:?}",
            js.is_some(),
            jobs.iter()
                .map(|j| j.metadata.name.clone())
                .collect::<Vec<_>>(),
            pods.iter()
                .map(|p| p.metadata.name.clone())
                .collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// The node pools of `cluster` in `sim` (`nodePools.list`) owned by the
/// JobSet of uid `uid` (label [`OWNER_UID_LABEL`]), by name.
pub async fn jobset_pools(sim: &SimHandle, cluster: &str, uid: &str) -> Vec<String> {
    let mut names: Vec<String> = crate::sim_gke_support::list_pools(sim, cluster)
        .await
        .into_iter()
        .filter(|p| p["config"]["labels"][OWNER_UID_LABEL] == uid)
        .filter_map(|p| p["name"].as_str().map(str::to_string))
        .collect();
    names.sort();
    names
}

/// tpu-provisioner's node pool name for a leader pod (`podToNodePoolName`,
/// `tpu-anchors.md` §A.9): the first 34 characters of the JobSet's name, `-`,
/// the first 5 of the pod's job-key.
pub fn provisioner_pool_name(leader: &Pod) -> String {
    let jobset = label(leader, JOBSET_NAME).expect("a JobSet pod has the jobset-name label");
    let key = label(leader, JOB_KEY).expect("a JobSet pod has the job-key label");
    format!(
        "{}-{}",
        &jobset[..jobset.len().min(34)],
        &key[..key.len().min(5)]
    )
}

/// slicectl's node pool name for a leader pod's Job
/// ([`slicectl::workload::pool_name`]): the first 23 characters of the
/// JobSet's name, `-`, 16 hex of sha256(`<namespace>/<job>`), the Job named
/// by the pod's controller ownerReference.
pub fn slicectl_pool_name(leader: &Pod) -> String {
    let jobset = label(leader, JOBSET_NAME).expect("a JobSet pod has the jobset-name label");
    let ns = leader
        .metadata
        .namespace
        .as_deref()
        .expect("a namespaced pod");
    let job = leader
        .metadata
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.kind == "Job" && o.controller == Some(true))
        .map(|o| o.name.clone())
        .expect("a JobSet pod is owned by its Job");
    slicectl::workload::pool_name(ns, jobset, &job).expect("a valid pool name")
}

/// The node pool a provisioner makes for the Job of `leader`: named by
/// [`provisioner_pool_name`], `hosts` VMs of `machine_type` in `zone` with
/// the leader's topology (`tpuTopology` when multi-host), and labelled with
/// slicectl's workload ownership labels (source `workload`, the JobSet's
/// namespace, name and uid, the job-key) and the pod's node selectors that
/// are not Google's (as tpu-provisioner copies them, `tpu-anchors.md` §A.4);
/// `spot` and a specific `reservationAffinity` from the capacity selectors
/// (flex-start is left to the caller).
pub fn workload_pool(leader: &Pod, machine_type: &str, zone: &str, hosts: u32) -> Value {
    let selector = leader
        .spec
        .as_ref()
        .and_then(|s| s.node_selector.clone())
        .unwrap_or_default();
    let topology = selector
        .get(TOPOLOGY_SELECTOR)
        .expect("a TPU pod has the topology node selector");
    let mut pool = tpu_pool(
        &provisioner_pool_name(leader),
        machine_type,
        zone,
        topology,
        hosts,
    );
    let need = |k: &str| {
        label(leader, k)
            .unwrap_or_else(|| panic!("leader pod has no label {k}"))
            .to_string()
    };
    let mut labels: BTreeMap<String, String> = selector
        .iter()
        .filter(|(k, _)| !k.starts_with("cloud.google.com/") && !k.starts_with("google.com/"))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    labels.extend([
        (SOURCE_LABEL.to_string(), "workload".to_string()),
        (
            OWNER_NAMESPACE_LABEL.to_string(),
            leader.metadata.namespace.clone().expect("namespace"),
        ),
        (OWNER_NAME_LABEL.to_string(), need(JOBSET_NAME)),
        (OWNER_UID_LABEL.to_string(), need(JOBSET_UID)),
        (OWNER_JOB_KEY_LABEL.to_string(), need(JOB_KEY)),
    ]);
    pool["config"]["labels"] = json!(labels);
    // Capacity from the selectors, as tpu-provisioner reads them
    // (`nodePoolForPod`, `tpu-anchors.md` §A.4/§A.5).
    if selector
        .get("cloud.google.com/gke-spot")
        .map(String::as_str)
        == Some("true")
    {
        pool["config"]["spot"] = json!(true);
    }
    if let Some(name) = selector.get("cloud.google.com/reservation-name") {
        let value = match selector.get("cloud.google.com/reservation-project") {
            Some(p) => format!("projects/{p}/reservations/{name}"),
            None => name.clone(),
        };
        pool["config"]["reservationAffinity"] = json!({
            "consumeReservationType": "SPECIFIC_RESERVATION",
            "key": "compute.googleapis.com/reservation-name",
            "values": [value],
        });
    }
    pool
}
