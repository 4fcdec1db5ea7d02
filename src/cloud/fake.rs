//! An in-memory Google Cloud that records every call and can be told to fail
//! the next one: the executor's unit tests run on it, with no HTTP. Creates
//! and deletes start operations that finish when they are waited on; what an
//! operation does to a resource happens then, as in the real APIs.
//!
//! It is deliberately small: the simulator (the `slicectl-sim` crate) is the faithful
//! stand-in for integration and end-to-end tests.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;

use super::CloudError;
use super::api::{Cloud, ComputeService, GkeService};
use crate::resource::compute::{
    self, ActionsSummary, BulkInstanceOperation, GuestAttributeEntry, IgmErrorActionDetails,
    IgmErrorDetail, Instance, InstanceGroupManager, InstanceGroupManagerPatch,
    InstanceGroupManagerStatus, InstanceManagedByIgmError, InstanceTemplate, LastProgressCheck,
    ManagedInstance, ManagedInstanceLastAttempt, Metadata, MetadataItem, OperationError,
    OperationErrorItem, ResourcePolicy,
};
use crate::resource::gke::{self, NodePool, UpdateNodePoolRequest};
use crate::resource::{ClusterRef, ProjectRef, ZoneRef};

/// A failure the fake can be told to return from the next call of a method.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// 404 NOT_FOUND.
    NotFound,
    /// 409 ALREADY_EXISTS.
    AlreadyExists,
    /// GKE's 400 FAILED_PRECONDITION "incompatible operation".
    ClusterBusy,
    /// 503 UNAVAILABLE.
    Unavailable,
    /// The operation ends DONE with a stockout.
    Stockout,
    /// The call panics (a bug in a step must be reported, not lost).
    Panic,
    /// 412 conditionNotMet: a stale metadata fingerprint.
    StaleFingerprint,
}

impl Fault {
    fn error(self, method: &str) -> CloudError {
        let api = |status: u16, code: &str, message: &str| CloudError::Api {
            status,
            code: code.to_string(),
            reason: None,
            message: message.to_string(),
            method: method.to_string(),
        };
        match self {
            Fault::NotFound => api(404, "NOT_FOUND", "not found"),
            Fault::AlreadyExists => api(409, "ALREADY_EXISTS", "already exists"),
            Fault::ClusterBusy => api(
                400,
                "FAILED_PRECONDITION",
                "Cluster is running incompatible operation operation-fake.",
            ),
            Fault::Unavailable => api(503, "UNAVAILABLE", "try again"),
            Fault::Stockout => CloudError::OperationFailed {
                operation: "fake".into(),
                code: "GCE_STOCKOUT".into(),
                message: "no capacity".into(),
            },
            Fault::Panic => api(500, "INTERNAL", "unreachable"),
            Fault::StaleFingerprint => CloudError::Api {
                status: 412,
                code: "FAILED_PRECONDITION".into(),
                reason: Some("conditionNotMet".into()),
                message: "Supplied fingerprint does not match current metadata fingerprint.".into(),
                method: method.to_string(),
            },
        }
    }
}

#[derive(Debug, Clone)]
enum Effect {
    CreatePool(String, Box<NodePool>),
    DeletePool(String, String),
    None,
    InsertPolicy(String, Box<ResourcePolicy>),
    DeletePolicy(String, String),
    InsertTemplate(String, Box<InstanceTemplate>),
    DeleteTemplate(String, String),
    /// Zone key, the MIG, whether its VMs meet a stockout.
    InsertMig(String, Box<InstanceGroupManager>, bool),
    DeleteMig(String, String),
    /// Zone key, the MIG, the VMs made again.
    RecreateVms(String, String, Vec<String>),
}

/// A MIG in the fake: the group, its VMs' names, and whether it is stuck
/// on a stockout (no VM, `ZONE_RESOURCE_POOL_EXHAUSTED` errors).
#[derive(Debug, Clone)]
struct FakeMig {
    mig: InstanceGroupManager,
    members: Vec<String>,
    stockout: bool,
    /// Its stockout is reported in `listErrors` only (not in its status).
    only_list_errors: bool,
}

impl FakeMig {
    /// `targetSizePolicy.mode: BULK`.
    fn is_bulk(&self) -> bool {
        self.mig
            .target_size_policy
            .as_ref()
            .is_some_and(|p| p.mode == "BULK")
    }
}

#[derive(Default)]
struct State {
    pools: BTreeMap<String, BTreeMap<String, NodePool>>,
    /// What `regions.get` reports as quotas, by region key.
    quotas: BTreeMap<String, Vec<compute::Quota>>,
    /// What `clusters.get` answers, by cluster path.
    cluster_access: BTreeMap<String, gke::ClusterAccess>,
    policies: BTreeMap<String, BTreeMap<String, ResourcePolicy>>,
    gke_ops: Vec<(String, gke::Operation, Effect)>,
    compute_ops: Vec<(String, compute::Operation, Effect)>,
    /// Templates by project, then name.
    templates: BTreeMap<String, BTreeMap<String, InstanceTemplate>>,
    /// MIGs by zone key (`projects/P/zones/Z`), then name.
    migs: BTreeMap<String, BTreeMap<String, FakeMig>>,
    /// VMs by zone key, then name.
    instances: BTreeMap<String, BTreeMap<String, Instance>>,
    /// Guest attributes by zone key, VM, then `NS/KEY`.
    guest: BTreeMap<(String, String), BTreeMap<String, String>>,
    calls: Vec<String>,
    faults: VecDeque<(String, Fault)>,
    seq: u64,
    /// Every resource an operation removed, in order (`KIND PATH`): what
    /// a test reads to tell a replaced resource (deleted, then made again
    /// under the same name) from one left alone.
    removed: Vec<String>,
    /// Every node pool delete accepted, as `node_pool CLUSTER_PATH/NAME`.
    pool_deletes: Vec<String>,
    /// What node pool lists answer instead of the present, when set: a
    /// view from an earlier moment ([`FakeCloud::serve_stale_pool_lists`]).
    stale_pools: Option<BTreeMap<String, Vec<NodePool>>>,
}

/// The recording fake. Share it with `Arc` and hand [`FakeCloud::cloud`] to
/// the code under test.
#[derive(Default)]
pub struct FakeCloud {
    state: Mutex<State>,
}

impl std::fmt::Debug for FakeCloud {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeCloud").finish_non_exhaustive()
    }
}

fn region_key(project: &str, region: &str) -> String {
    format!("projects/{project}/regions/{region}")
}

fn zone_key(zone: &ZoneRef) -> String {
    zone.to_string()
}

const FAKE_API: &str = "https://compute.googleapis.com/compute/v1";

impl FakeCloud {
    /// An empty cloud.
    pub fn new() -> Arc<FakeCloud> {
        Arc::new(FakeCloud::default())
    }

    /// A [`Cloud`] handle backed by this fake. Its GKE clusters' Kubernetes
    /// APIs list the Nodes GKE would have registered for their RUNNING node
    /// pools ([`FakeCloud::gke_nodes`]).
    pub fn cloud(self: &Arc<Self>) -> Cloud {
        let me = Arc::downgrade(self);
        Cloud {
            gke: self.clone(),
            compute: self.clone(),
            kube: crate::kube::fake::FakeKube::with_gke_nodes(Arc::new(move |k| {
                me.upgrade().map(|f| f.gke_nodes(k)).unwrap_or_default()
            })),
            sim_defers_kube: false,
            unread_idle: false,
        }
    }

    /// The Nodes GKE registers for a cluster's RUNNING node pools: one per
    /// host, `Ready`, labelled `cloud.google.com/gke-nodepool` and with the
    /// TPU accelerator and topology labels, `google.com/tpu` = the machine
    /// type's chips (the pool's topology, or for a pool without
    /// `tpuTopology` the generation's first topology of its size).
    pub fn gke_nodes(&self, k: &crate::resource::KubeRef) -> Vec<k8s_openapi::api::core::v1::Node> {
        use k8s_openapi::api::core::v1::{Node, NodeCondition, NodeStatus};
        use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
        let Some(c) = k.gke_cluster() else {
            return Vec::new();
        };
        let st = self.lock();
        let Some(pools) = st.pools.get(&c.path()) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for p in pools
            .values()
            .filter(|p| p.status.as_deref() == Some("RUNNING"))
        {
            let Some(cfg) = p.config.as_ref() else {
                continue;
            };
            let Some(g) = crate::spec::catalog::generation_of_machine_type(&cfg.machine_type)
            else {
                continue;
            };
            let chips = g
                .machine_types
                .iter()
                .find(|m| m.name == cfg.machine_type)
                .map_or(0, |m| m.chips_per_host);
            let hosts = u32::try_from(p.initial_node_count.unwrap_or(0)).unwrap_or(0);
            let topology = p
                .placement_policy
                .as_ref()
                .and_then(|pp| pp.tpu_topology.clone())
                .or_else(|| {
                    g.topologies
                        .iter()
                        .find(|t| crate::spec::catalog::chips(t) == hosts * chips)
                        .map(|t| (*t).to_string())
                })
                .unwrap_or_default();
            for i in 0..hosts {
                let mut labels: std::collections::BTreeMap<String, String> = cfg
                    .labels
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                labels.insert("cloud.google.com/gke-nodepool".into(), p.name.clone());
                labels.insert(
                    "cloud.google.com/gke-tpu-accelerator".into(),
                    g.accelerator.to_string(),
                );
                labels.insert("cloud.google.com/gke-tpu-topology".into(), topology.clone());
                let tpu = std::collections::BTreeMap::from([(
                    "google.com/tpu".to_string(),
                    Quantity(chips.to_string()),
                )]);
                let mut n = Node::default();
                n.metadata.name = Some(format!("gke-{}-{}-{i}", c.name, p.name));
                n.metadata.labels = Some(labels);
                n.status = Some(NodeStatus {
                    conditions: Some(vec![NodeCondition {
                        type_: "Ready".into(),
                        status: "True".into(),
                        ..NodeCondition::default()
                    }]),
                    capacity: Some(tpu.clone()),
                    allocatable: Some(tpu),
                    ..NodeStatus::default()
                });
                out.push(n);
            }
        }
        out
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A test that panicked while holding the lock leaves usable data.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Every call so far, as `method target`, in order.
    pub fn calls(&self) -> Vec<String> {
        self.lock().calls.clone()
    }

    /// Calls whose method is `method`, in order.
    pub fn calls_of(&self, method: &str) -> Vec<String> {
        self.calls()
            .into_iter()
            .filter(|c| c.split(' ').next() == Some(method))
            .collect()
    }

    /// Every cluster's node pools now, by cluster path: a view to serve
    /// later with [`FakeCloud::serve_stale_pool_lists`].
    pub fn pool_view(&self) -> BTreeMap<String, Vec<NodePool>> {
        self.lock()
            .pools
            .iter()
            .map(|(c, m)| (c.clone(), m.values().cloned().collect()))
            .collect()
    }

    /// `nodePools.list` answers from `view` (an earlier moment's: a list
    /// that lags the writes, or a restarted process's older view) until set
    /// back with `None`; every other call sees the present.
    pub fn serve_stale_pool_lists(&self, view: Option<BTreeMap<String, Vec<NodePool>>>) {
        self.lock().stale_pools = view;
    }

    /// Forgets the faults queued by [`FakeCloud::fail_next`] and not yet
    /// met: the faults of a step end with it.
    pub fn clear_faults(&self) {
        self.lock().faults.clear();
    }

    /// Every resource an operation removed so far, in order, as
    /// `node_pool CLUSTER_PATH/NAME`, `resource_policy projects/P/regions/R/NAME`,
    /// `instance_template P/NAME` or `mig projects/P/zones/Z/NAME`.
    pub fn removed(&self) -> Vec<String> {
        self.lock().removed.clone()
    }

    /// Every node pool delete accepted so far, in order, as
    /// `node_pool CLUSTER_PATH/NAME` (its operation may still run).
    pub fn pool_deletes(&self) -> Vec<String> {
        self.lock().pool_deletes.clone()
    }

    /// The next call of `method` fails with `fault` (queued in order).
    /// What `clusters.get` answers for `cluster` (a cluster without an
    /// answer is 404 NOT_FOUND).
    pub fn set_cluster_access(&self, cluster: &ClusterRef, access: gke::ClusterAccess) {
        self.lock().cluster_access.insert(cluster.path(), access);
    }

    pub fn fail_next(&self, method: &str, fault: Fault) {
        self.lock().faults.push_back((method.to_string(), fault));
    }

    /// Sets the quotas `regions.get` reports for `project`'s `region`.
    pub fn seed_quotas(&self, project: &str, region: &str, quotas: Vec<compute::Quota>) {
        self.lock()
            .quotas
            .insert(region_key(project, region), quotas);
    }

    /// Puts a live node pool in place.
    pub fn seed_pool(&self, cluster: &ClusterRef, pool: NodePool) {
        self.lock()
            .pools
            .entry(cluster.path())
            .or_default()
            .insert(pool.name.clone(), pool);
    }

    /// Starts a GKE operation creating `pool`, as an interrupted apply would
    /// have left it; it finishes when waited on.
    pub fn seed_running_create(&self, cluster: &ClusterRef, mut pool: NodePool) -> String {
        pool.status = Some("PROVISIONING".into());
        let mut st = self.lock();
        st.pools
            .entry(cluster.path())
            .or_default()
            .insert(pool.name.clone(), pool.clone());
        let op = new_gke_op(&mut st, cluster, &pool.name, "CREATE_NODE_POOL");
        let name = op.name.clone();
        st.gke_ops.push((
            cluster.path(),
            op,
            Effect::CreatePool(cluster.path(), Box::new(pool)),
        ));
        name
    }

    /// The node pools of a cluster now.
    pub fn pools(&self, cluster: &ClusterRef) -> Vec<NodePool> {
        self.lock()
            .pools
            .get(&cluster.path())
            .map(|m| m.values().cloned().collect())
            .unwrap_or_default()
    }

    /// The resource policies of a region now.
    pub fn policies(&self, project: &str, region: &str) -> Vec<ResourcePolicy> {
        self.lock()
            .policies
            .get(&region_key(project, region))
            .map(|m| m.values().cloned().collect())
            .unwrap_or_default()
    }

    /// The instance templates of a project now.
    pub fn templates(&self, project: &str) -> Vec<InstanceTemplate> {
        self.lock()
            .templates
            .get(project)
            .map(|m| m.values().cloned().collect())
            .unwrap_or_default()
    }

    /// The MIGs of a zone now.
    pub fn migs(&self, zone: &ZoneRef) -> Vec<InstanceGroupManager> {
        self.lock()
            .migs
            .get(&zone_key(zone))
            .map(|m| m.values().map(|f| f.mig.clone()).collect())
            .unwrap_or_default()
    }

    /// The VMs of a zone now.
    pub fn instances(&self, zone: &ZoneRef) -> Vec<Instance> {
        self.lock()
            .instances
            .get(&zone_key(zone))
            .map(|m| m.values().cloned().collect())
            .unwrap_or_default()
    }

    /// Puts a live instance template in place (a bring-your-own one).
    pub fn seed_template(&self, project: &str, template: InstanceTemplate) {
        let mut t = template;
        t.self_link = Some(format!(
            "{FAKE_API}/projects/{project}/global/instanceTemplates/{}",
            t.name
        ));
        self.lock()
            .templates
            .entry(project.to_string())
            .or_default()
            .insert(t.name.clone(), t);
    }

    /// A guest attribute `NS/KEY` the VM wrote.
    pub fn set_guest_attribute(&self, zone: &ZoneRef, instance: &str, path: &str, value: &str) {
        self.lock()
            .guest
            .entry((zone_key(zone), instance.to_string()))
            .or_default()
            .insert(path.to_string(), value.to_string());
    }

    /// Makes a MIG report its stockout in `listErrors` only: not in its
    /// status's bulk operation, not in its VMs' last attempt.
    pub fn stockout_only_in_list_errors(&self, zone: &ZoneRef, mig: &str) {
        if let Some(f) = self
            .lock()
            .migs
            .get_mut(&zone_key(zone))
            .and_then(|m| m.get_mut(mig))
        {
            f.only_list_errors = true;
        }
    }

    /// Ends a MIG's stockout: its VMs are created (RUNNING).
    pub fn end_stockout(&self, zone: &ZoneRef, mig: &str) {
        let mut st = self.lock();
        let key = zone_key(zone);
        let Some(f) = st.migs.get_mut(&key).and_then(|m| m.get_mut(mig)) else {
            return;
        };
        f.stockout = false;
        let (m, members) = (f.mig.clone(), f.members.clone());
        create_vms(&mut st, &key, &m, &members);
    }

    /// Records a call; returns the fault queued for it, if any.
    fn call(&self, method: &str, target: &str) -> Result<(), CloudError> {
        let mut st = self.lock();
        st.calls.push(format!("{method} {target}"));
        if let Some(i) = st.faults.iter().position(|(m, _)| m == method) {
            let (_, fault) = st
                .faults
                .remove(i)
                .unwrap_or((String::new(), Fault::Unavailable));
            drop(st);
            if fault == Fault::Panic {
                panic!("fake cloud: injected panic in {method}");
            }
            return Err(fault.error(method));
        }
        Ok(())
    }
}

/// Whether an insert of `name` is running in scope `key`: compute takes
/// the name at once, so a second insert is answered 409 while a GET still
/// finds nothing until the first one's operation is done (as the simulator
/// does; see `slicectl_sim::gce::insert_template`).
fn inserting(st: &State, key: &str, name: &str) -> bool {
    st.compute_ops.iter().any(|(k, op, effect)| {
        k == key
            && op.status != "DONE"
            && match effect {
                Effect::InsertPolicy(_, p) => p.name == name,
                Effect::InsertTemplate(_, t) => t.name == name,
                Effect::InsertMig(_, m, _) => m.name == name,
                _ => false,
            }
    })
}

fn new_gke_op(st: &mut State, c: &ClusterRef, pool: &str, ty: &str) -> gke::Operation {
    st.seq += 1;
    gke::Operation {
        name: format!("operation-fake-{}", st.seq),
        operation_type: ty.to_string(),
        status: "RUNNING".into(),
        target_link: Some(format!("{}/nodePools/{pool}", c.path())),
        self_link: Some(format!(
            "projects/{}/locations/{}/operations/operation-fake-{}",
            c.project, c.location, st.seq
        )),
        ..Default::default()
    }
}

fn new_compute_op(
    st: &mut State,
    project: &str,
    region: &str,
    name: &str,
    ty: &str,
) -> compute::Operation {
    st.seq += 1;
    let base =
        format!("https://compute.googleapis.com/compute/v1/projects/{project}/regions/{region}");
    compute::Operation {
        name: format!("operation-fake-{}", st.seq),
        operation_type: ty.to_string(),
        status: "RUNNING".into(),
        target_link: Some(format!("{base}/resourcePolicies/{name}")),
        self_link: Some(format!("{base}/operations/operation-fake-{}", st.seq)),
        region: Some(base),
        ..Default::default()
    }
}

/// A zonal or global operation (`scope` = `projects/P/zones/Z` or
/// `projects/P/global`) targeting `target` (a path under `scope`).
fn new_scoped_op(st: &mut State, scope: &str, target: &str, ty: &str) -> compute::Operation {
    st.seq += 1;
    let base = format!("{FAKE_API}/{scope}");
    compute::Operation {
        name: format!("operation-fake-{}", st.seq),
        operation_type: ty.to_string(),
        status: "RUNNING".into(),
        target_link: Some(format!("{base}/{target}")),
        self_link: Some(format!("{base}/operations/operation-fake-{}", st.seq)),
        zone: scope.contains("/zones/").then(|| base.clone()),
        ..Default::default()
    }
}

fn fingerprint(seq: u64) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE.encode(seq.to_be_bytes())
}

/// Creates a MIG's VMs, RUNNING, with the template's metadata plus
/// `created-by` naming the MIG.
fn create_vms(st: &mut State, zone: &str, mig: &InstanceGroupManager, members: &[String]) {
    let template = mig
        .instance_template
        .as_deref()
        .and_then(|l| l.rsplit_once("/instanceTemplates/"))
        .map(|(_, n)| n.to_string())
        .unwrap_or_default();
    let project = zone.split('/').nth(1).unwrap_or_default().to_string();
    let props = st
        .templates
        .get(&project)
        .and_then(|m| m.get(&template))
        .map(|t| t.properties.clone())
        .unwrap_or_default();
    for name in members {
        st.seq += 1;
        let mut items = props.metadata.clone().unwrap_or_default().items;
        items.push(MetadataItem {
            key: "created-by".into(),
            value: Some(format!("{zone}/instanceGroupManagers/{}", mig.name)),
        });
        let vm = Instance {
            name: name.clone(),
            id: Some(st.seq.to_string()),
            status: "RUNNING".into(),
            machine_type: Some(format!(
                "{FAKE_API}/{zone}/machineTypes/{}",
                props.machine_type
            )),
            zone: Some(format!("{FAKE_API}/{zone}")),
            labels: props.labels.clone(),
            metadata: Metadata {
                kind: Some("compute#metadata".into()),
                fingerprint: Some(fingerprint(st.seq)),
                items,
            },
            self_link: Some(format!("{FAKE_API}/{zone}/instances/{name}")),
            scheduling: props.scheduling.clone(),
            ..Default::default()
        };
        st.instances
            .entry(zone.to_string())
            .or_default()
            .insert(name.clone(), vm);
    }
}

fn apply_effect(st: &mut State, effect: &Effect) {
    match effect {
        Effect::CreatePool(c, p) => {
            let mut p = (**p).clone();
            p.status = Some("RUNNING".into());
            st.pools
                .entry(c.clone())
                .or_default()
                .insert(p.name.clone(), p);
        }
        Effect::DeletePool(c, name) => {
            if let Some(m) = st.pools.get_mut(c) {
                m.remove(name);
            }
            st.removed.push(format!("node_pool {c}/{name}"));
        }
        Effect::InsertPolicy(r, p) => {
            let mut p = (**p).clone();
            p.status = Some("READY".into());
            st.policies
                .entry(r.clone())
                .or_default()
                .insert(p.name.clone(), p);
        }
        Effect::DeletePolicy(r, name) => {
            if let Some(m) = st.policies.get_mut(r) {
                m.remove(name);
            }
            st.removed.push(format!("resource_policy {r}/{name}"));
        }
        Effect::InsertTemplate(project, t) => {
            let mut t = (**t).clone();
            t.self_link = Some(format!(
                "{FAKE_API}/projects/{project}/global/instanceTemplates/{}",
                t.name
            ));
            st.templates
                .entry(project.clone())
                .or_default()
                .insert(t.name.clone(), t);
        }
        Effect::DeleteTemplate(project, name) => {
            if let Some(m) = st.templates.get_mut(project) {
                m.remove(name);
            }
            st.removed
                .push(format!("instance_template {project}/{name}"));
        }
        Effect::InsertMig(zone, m, stockout) => {
            let mut mig = (**m).clone();
            mig.self_link = Some(format!(
                "{FAKE_API}/{zone}/instanceGroupManagers/{}",
                mig.name
            ));
            let base = mig
                .base_instance_name
                .clone()
                .unwrap_or_else(|| mig.name.clone());
            let members: Vec<String> = (0..mig.target_size.max(0))
                .map(|i| format!("{base}-{i:04}"))
                .collect();
            if !stockout {
                create_vms(st, zone, &mig, &members);
            }
            st.seq += 1;
            mig.fingerprint = Some(fingerprint(st.seq));
            st.migs.entry(zone.clone()).or_default().insert(
                mig.name.clone(),
                FakeMig {
                    mig,
                    members,
                    stockout: *stockout,
                    only_list_errors: false,
                },
            );
        }
        Effect::RecreateVms(zone, name, vms) => {
            let Some(mig) = st
                .migs
                .get(zone)
                .and_then(|m| m.get(name))
                .map(|f| f.mig.clone())
            else {
                return;
            };
            for vm in vms {
                st.guest.remove(&(zone.clone(), vm.clone()));
            }
            create_vms(st, zone, &mig, vms);
        }
        Effect::DeleteMig(zone, name) => {
            st.removed.push(format!("mig {zone}/{name}"));
            if let Some(f) = st.migs.get_mut(zone).and_then(|m| m.remove(name))
                && let Some(vms) = st.instances.get_mut(zone)
            {
                for n in &f.members {
                    vms.remove(n);
                }
            }
        }
        Effect::None => {}
    }
}

fn stockout_error() -> OperationError {
    OperationError {
        errors: vec![OperationErrorItem {
            code: "ZONE_RESOURCE_POOL_EXHAUSTED".into(),
            message: "The zone does not have enough resources available to fulfill the request."
                .into(),
        }],
    }
}

/// A MIG's status and current actions as the fake reports them.
fn with_status(f: &FakeMig, running: i32) -> InstanceGroupManager {
    let mut m = f.mig.clone();
    let size = m.target_size;
    // BULK reports its stockout in the bulk operation's last check (and
    // `listErrors`), not in the managed instances' last attempt, as Compute
    // Engine does (*About bulk mode*; the simulator's `gce.rs`).
    let bulk = f.is_bulk().then(|| BulkInstanceOperation {
        in_progress: f.stockout,
        last_progress_check: Some(LastProgressCheck {
            timestamp: Some("2026-01-01T00:00:00Z".into()),
            error: (f.stockout && !f.only_list_errors).then(stockout_error),
        }),
    });
    m.status = Some(InstanceGroupManagerStatus {
        is_stable: !f.stockout && running == size,
        bulk_instance_operation: bulk,
        ..Default::default()
    });
    m.current_actions = Some(ActionsSummary {
        creating: size - running,
        none: running,
        ..Default::default()
    });
    m
}

#[async_trait]
impl GkeService for FakeCloud {
    async fn list_node_pools(
        &self,
        cluster: &ClusterRef,
    ) -> Result<Vec<Arc<NodePool>>, CloudError> {
        self.call("list_node_pools", &cluster.path())?;
        if let Some(view) = &self.lock().stale_pools {
            let pools = view.get(&cluster.path()).cloned().unwrap_or_default();
            return Ok(pools.into_iter().map(Arc::new).collect());
        }
        Ok(self.pools(cluster).into_iter().map(Arc::new).collect())
    }

    async fn get_node_pool(
        &self,
        cluster: &ClusterRef,
        name: &str,
    ) -> Result<NodePool, CloudError> {
        self.call("get_node_pool", name)?;
        self.lock()
            .pools
            .get(&cluster.path())
            .and_then(|m| m.get(name).cloned())
            .ok_or_else(|| Fault::NotFound.error("get_node_pool"))
    }

    async fn create_node_pool(
        &self,
        cluster: &ClusterRef,
        pool: &NodePool,
    ) -> Result<gke::Operation, CloudError> {
        self.call("create_node_pool", &pool.name)?;
        let mut st = self.lock();
        let pools = st.pools.entry(cluster.path()).or_default();
        if pools.contains_key(&pool.name) {
            return Err(Fault::AlreadyExists.error("create_node_pool"));
        }
        let mut p = pool.clone();
        p.status = Some("PROVISIONING".into());
        pools.insert(p.name.clone(), p);
        let op = new_gke_op(&mut st, cluster, &pool.name, "CREATE_NODE_POOL");
        st.gke_ops.push((
            cluster.path(),
            op.clone(),
            Effect::CreatePool(cluster.path(), Box::new(pool.clone())),
        ));
        Ok(op)
    }

    async fn update_node_pool(
        &self,
        cluster: &ClusterRef,
        req: &UpdateNodePoolRequest,
    ) -> Result<gke::Operation, CloudError> {
        let name = req.name.rsplit('/').next().unwrap_or(&req.name).to_string();
        self.call("update_node_pool", &name)?;
        let mut st = self.lock();
        let Some(p) = st
            .pools
            .get_mut(&cluster.path())
            .and_then(|m| m.get_mut(&name))
        else {
            return Err(Fault::NotFound.error("update_node_pool"));
        };
        let cfg = p.config.get_or_insert_with(Default::default);
        if let Some(l) = &req.labels {
            cfg.labels = l.labels.clone();
        }
        if let Some(t) = &req.taints {
            cfg.taints = t.taints.clone();
        }
        if let Some(r) = &req.resource_labels {
            cfg.resource_labels = r.labels.clone();
        }
        let op = new_gke_op(&mut st, cluster, &name, "UPDATE_NODE_POOL");
        st.gke_ops.push((cluster.path(), op.clone(), Effect::None));
        Ok(op)
    }

    async fn delete_node_pool(
        &self,
        cluster: &ClusterRef,
        name: &str,
    ) -> Result<gke::Operation, CloudError> {
        self.call("delete_node_pool", name)?;
        let mut st = self.lock();
        let Some(p) = st
            .pools
            .get_mut(&cluster.path())
            .and_then(|m| m.get_mut(name))
        else {
            return Err(Fault::NotFound.error("delete_node_pool"));
        };
        p.status = Some("STOPPING".into());
        st.pool_deletes
            .push(format!("node_pool {}/{name}", cluster.path()));
        let op = new_gke_op(&mut st, cluster, name, "DELETE_NODE_POOL");
        st.gke_ops.push((
            cluster.path(),
            op.clone(),
            Effect::DeletePool(cluster.path(), name.to_string()),
        ));
        Ok(op)
    }

    /// The clusters that hold (or held) a pool in this fake.
    async fn get_cluster(&self, cluster: &ClusterRef) -> Result<gke::ClusterAccess, CloudError> {
        self.call("get_cluster", &cluster.path())?;
        self.lock()
            .cluster_access
            .get(&cluster.path())
            .cloned()
            .ok_or_else(|| Fault::NotFound.error("get_cluster"))
    }

    async fn list_clusters(&self, project: &str) -> Result<gke::ListClustersResponse, CloudError> {
        self.call("list_clusters", project)?;
        let clusters = self
            .lock()
            .pools
            .iter()
            .filter_map(|(k, pools)| Some((ClusterRef::parse(k).ok()?, pools)))
            .filter(|(c, _)| c.project == project)
            .map(|(c, pools)| gke::ClusterSummary {
                name: c.name,
                location: c.location,
                node_pools: pools
                    .values()
                    .map(|p| gke::PoolLabels {
                        name: p.name.clone(),
                        config: p.config.as_ref().map(|c| gke::ResourceLabels {
                            labels: c.labels.clone(),
                        }),
                    })
                    .collect(),
            })
            .collect();
        Ok(gke::ListClustersResponse {
            clusters,
            missing_zones: Vec::new(),
        })
    }

    async fn list_operations(
        &self,
        project: &str,
        location: &str,
    ) -> Result<Vec<gke::Operation>, CloudError> {
        self.call("list_operations", &format!("{project}/{location}"))?;
        let prefix = format!("projects/{project}/locations/{location}/");
        Ok(self
            .lock()
            .gke_ops
            .iter()
            .filter(|(c, _, _)| c.starts_with(&prefix))
            .map(|(_, op, _)| op.clone())
            .collect())
    }

    async fn get_operation(
        &self,
        _project: &str,
        _location: &str,
        name: &str,
    ) -> Result<gke::Operation, CloudError> {
        let short = name.rsplit('/').next().unwrap_or(name).to_string();
        self.call("get_operation", &short)?;
        let st = self.lock();
        st.gke_ops
            .iter()
            .find(|(_, o, _)| o.name == short)
            .map(|(_, o, _)| o.clone())
            .ok_or_else(|| Fault::NotFound.error("get_operation"))
    }

    async fn wait_operation(
        &self,
        _project: &str,
        _location: &str,
        op: &gke::Operation,
        _timeout: Duration,
    ) -> Result<gke::Operation, CloudError> {
        let short = op.name.rsplit('/').next().unwrap_or(&op.name).to_string();
        self.call("wait_operation", &short)?;
        let mut st = self.lock();
        let Some(i) = st.gke_ops.iter().position(|(_, o, _)| o.name == short) else {
            return Err(Fault::NotFound.error("wait_operation"));
        };
        if st.gke_ops[i].1.status != "DONE" {
            let effect = st.gke_ops[i].2.clone();
            apply_effect(&mut st, &effect);
            st.gke_ops[i].1.status = "DONE".into();
        }
        Ok(st.gke_ops[i].1.clone())
    }
}

#[async_trait]
impl ComputeService for FakeCloud {
    async fn list_resource_policies(
        &self,
        project: &str,
        region: &str,
    ) -> Result<Vec<ResourcePolicy>, CloudError> {
        self.call("list_resource_policies", &region_key(project, region))?;
        Ok(self.policies(project, region))
    }

    async fn get_resource_policy(
        &self,
        project: &str,
        region: &str,
        name: &str,
    ) -> Result<ResourcePolicy, CloudError> {
        self.call("get_resource_policy", name)?;
        self.lock()
            .policies
            .get(&region_key(project, region))
            .and_then(|m| m.get(name).cloned())
            .ok_or_else(|| Fault::NotFound.error("get_resource_policy"))
    }

    async fn insert_resource_policy(
        &self,
        project: &str,
        region: &str,
        policy: &ResourcePolicy,
    ) -> Result<compute::Operation, CloudError> {
        self.call("insert_resource_policy", &policy.name)?;
        let mut st = self.lock();
        let key = region_key(project, region);
        if st
            .policies
            .get(&key)
            .is_some_and(|m| m.contains_key(&policy.name))
            || inserting(&st, &key, &policy.name)
        {
            return Err(Fault::AlreadyExists.error("insert_resource_policy"));
        }
        let op = new_compute_op(&mut st, project, region, &policy.name, "insert");
        st.compute_ops.push((
            key.clone(),
            op.clone(),
            Effect::InsertPolicy(key, Box::new(policy.clone())),
        ));
        Ok(op)
    }

    async fn delete_resource_policy(
        &self,
        project: &str,
        region: &str,
        name: &str,
    ) -> Result<compute::Operation, CloudError> {
        self.call("delete_resource_policy", name)?;
        let mut st = self.lock();
        let key = region_key(project, region);
        if !st.policies.get(&key).is_some_and(|m| m.contains_key(name)) {
            return Err(Fault::NotFound.error("delete_resource_policy"));
        }
        let op = new_compute_op(&mut st, project, region, name, "delete");
        st.compute_ops.push((
            key.clone(),
            op.clone(),
            Effect::DeletePolicy(key, name.to_string()),
        ));
        Ok(op)
    }

    async fn list_region_operations(
        &self,
        project: &str,
        region: &str,
        only_running: bool,
    ) -> Result<Vec<compute::Operation>, CloudError> {
        let key = region_key(project, region);
        self.call("list_region_operations", &key)?;
        Ok(self
            .lock()
            .compute_ops
            .iter()
            .filter(|(r, op, _)| *r == key && (!only_running || op.status != "DONE"))
            .map(|(_, op, _)| op.clone())
            .collect())
    }

    async fn wait_operation(
        &self,
        op: &compute::Operation,
        _timeout: Duration,
    ) -> Result<compute::Operation, CloudError> {
        self.call("wait_compute_operation", &op.name)?;
        let mut st = self.lock();
        let Some(i) = st
            .compute_ops
            .iter()
            .position(|(_, o, _)| o.name == op.name)
        else {
            return Err(Fault::NotFound.error("wait_compute_operation"));
        };
        if st.compute_ops[i].1.status != "DONE" {
            let effect = st.compute_ops[i].2.clone();
            apply_effect(&mut st, &effect);
            st.compute_ops[i].1.status = "DONE".into();
        }
        Ok(st.compute_ops[i].1.clone())
    }
    async fn list_instance_templates(
        &self,
        project: &ProjectRef,
    ) -> Result<Vec<InstanceTemplate>, CloudError> {
        self.call("list_instance_templates", &project.to_string())?;
        Ok(self.templates(&project.project))
    }

    async fn get_instance_template(&self, link: &str) -> Result<InstanceTemplate, CloudError> {
        self.call("get_instance_template", link)?;
        let path = link.find("projects/").map(|i| &link[i..]).unwrap_or(link);
        let parts: Vec<&str> = path.split('/').collect();
        let found = match parts.as_slice() {
            ["projects", p, "global", "instanceTemplates", n] => self
                .lock()
                .templates
                .get(*p)
                .and_then(|m| m.get(*n).cloned()),
            _ => None,
        };
        found.ok_or_else(|| Fault::NotFound.error("get_instance_template"))
    }

    async fn insert_instance_template(
        &self,
        project: &ProjectRef,
        template: &InstanceTemplate,
    ) -> Result<compute::Operation, CloudError> {
        self.call("insert_instance_template", &template.name)?;
        let mut st = self.lock();
        let scope = project.to_string();
        if st
            .templates
            .get(&project.project)
            .is_some_and(|m| m.contains_key(&template.name))
            || inserting(&st, &scope, &template.name)
        {
            return Err(Fault::AlreadyExists.error("insert_instance_template"));
        }
        let op = new_scoped_op(
            &mut st,
            &scope,
            &format!("instanceTemplates/{}", template.name),
            "compute.instanceTemplates.insert",
        );
        st.compute_ops.push((
            scope,
            op.clone(),
            Effect::InsertTemplate(project.project.clone(), Box::new(template.clone())),
        ));
        Ok(op)
    }

    async fn delete_instance_template(
        &self,
        project: &ProjectRef,
        name: &str,
    ) -> Result<compute::Operation, CloudError> {
        self.call("delete_instance_template", name)?;
        let mut st = self.lock();
        if !st
            .templates
            .get(&project.project)
            .is_some_and(|m| m.contains_key(name))
        {
            return Err(Fault::NotFound.error("delete_instance_template"));
        }
        let scope = project.to_string();
        let op = new_scoped_op(
            &mut st,
            &scope,
            &format!("instanceTemplates/{name}"),
            "compute.instanceTemplates.delete",
        );
        st.compute_ops.push((
            scope,
            op.clone(),
            Effect::DeleteTemplate(project.project.clone(), name.to_string()),
        ));
        Ok(op)
    }

    async fn list_instance_group_managers(
        &self,
        zone: &ZoneRef,
    ) -> Result<Vec<InstanceGroupManager>, CloudError> {
        let key = zone_key(zone);
        self.call("list_instance_group_managers", &key)?;
        let st = self.lock();
        let vms = st.instances.get(&key);
        Ok(st
            .migs
            .get(&key)
            .map(|m| {
                m.values()
                    .map(|f| {
                        let running = f
                            .members
                            .iter()
                            .filter(|n| vms.is_some_and(|v| v.contains_key(*n)))
                            .count();
                        with_status(f, i32::try_from(running).unwrap_or(i32::MAX))
                    })
                    .collect()
            })
            .unwrap_or_default())
    }

    async fn list_instance_group_managers_aggregated(
        &self,
        project: &str,
    ) -> Result<(Vec<(String, InstanceGroupManager)>, Vec<String>), CloudError> {
        self.call("list_instance_group_managers_aggregated", project)?;
        let zones: Vec<ZoneRef> = {
            let st = self.lock();
            st.migs
                .keys()
                .filter_map(|k| {
                    let rest = k.strip_prefix(&format!("projects/{project}/zones/"))?;
                    Some(ZoneRef {
                        project: project.to_string(),
                        zone: rest.split('/').next()?.to_string(),
                    })
                })
                .collect()
        };
        let mut out = Vec::new();
        for z in zones {
            let migs = self.list_instance_group_managers(&z).await?;
            out.extend(migs.into_iter().map(|m| (z.zone.clone(), m)));
        }
        Ok((out, Vec::new()))
    }

    async fn insert_instance_group_manager(
        &self,
        zone: &ZoneRef,
        mig: &InstanceGroupManager,
    ) -> Result<compute::Operation, CloudError> {
        // A queued `Fault::Stockout` makes this MIG's VMs meet a stockout.
        let stockout = match self.call("insert_instance_group_manager", &mig.name) {
            Err(CloudError::OperationFailed { .. }) => true,
            Err(e) => return Err(e),
            Ok(()) => false,
        };
        let mut st = self.lock();
        let key = zone_key(zone);
        if st.migs.get(&key).is_some_and(|m| m.contains_key(&mig.name))
            || inserting(&st, &key, &mig.name)
        {
            return Err(Fault::AlreadyExists.error("insert_instance_group_manager"));
        }
        let op = new_scoped_op(
            &mut st,
            &key,
            &format!("instanceGroupManagers/{}", mig.name),
            "compute.instanceGroupManagers.insert",
        );
        st.compute_ops.push((
            key.clone(),
            op.clone(),
            Effect::InsertMig(key, Box::new(mig.clone()), stockout),
        ));
        Ok(op)
    }

    async fn get_instance_group_manager(
        &self,
        zone: &ZoneRef,
        name: &str,
    ) -> Result<InstanceGroupManager, CloudError> {
        self.call("get_instance_group_manager", name)?;
        self.list_instance_group_managers(zone)
            .await?
            .into_iter()
            .find(|m| m.name == name)
            .ok_or_else(|| Fault::NotFound.error("get_instance_group_manager"))
    }

    async fn patch_instance_group_manager(
        &self,
        zone: &ZoneRef,
        name: &str,
        patch: &InstanceGroupManagerPatch,
    ) -> Result<compute::Operation, CloudError> {
        self.call("patch_instance_group_manager", name)?;
        let mut st = self.lock();
        st.seq += 1;
        let next = fingerprint(st.seq);
        let key = zone_key(zone);
        let Some(f) = st.migs.get_mut(&key).and_then(|m| m.get_mut(name)) else {
            return Err(Fault::NotFound.error("patch_instance_group_manager"));
        };
        if patch.fingerprint.is_none() || patch.fingerprint != f.mig.fingerprint {
            return Err(Fault::StaleFingerprint.error("patch_instance_group_manager"));
        }
        if let Some(d) = &patch.description {
            f.mig.description = Some(d.clone());
        }
        f.mig.fingerprint = Some(next);
        let mut op = new_scoped_op(
            &mut st,
            &key,
            &format!("instanceGroupManagers/{name}"),
            "compute.instanceGroupManagers.patch",
        );
        op.status = "DONE".into();
        st.compute_ops.push((key, op.clone(), Effect::None));
        Ok(op)
    }

    async fn delete_instance_group_manager(
        &self,
        zone: &ZoneRef,
        name: &str,
    ) -> Result<compute::Operation, CloudError> {
        self.call("delete_instance_group_manager", name)?;
        let mut st = self.lock();
        let key = zone_key(zone);
        if !st.migs.get(&key).is_some_and(|m| m.contains_key(name)) {
            return Err(Fault::NotFound.error("delete_instance_group_manager"));
        }
        let op = new_scoped_op(
            &mut st,
            &key,
            &format!("instanceGroupManagers/{name}"),
            "compute.instanceGroupManagers.delete",
        );
        st.compute_ops.push((
            key.clone(),
            op.clone(),
            Effect::DeleteMig(key, name.to_string()),
        ));
        Ok(op)
    }

    async fn recreate_instances(
        &self,
        zone: &ZoneRef,
        mig: &str,
        instances: &[String],
    ) -> Result<compute::Operation, CloudError> {
        self.call(
            "recreate_instances",
            &format!("{mig} {}", instances.join(",")),
        )?;
        let mut st = self.lock();
        let key = zone_key(zone);
        let Some(f) = st.migs.get(&key).and_then(|m| m.get(mig)) else {
            return Err(Fault::NotFound.error("recreate_instances"));
        };
        if instances.iter().any(|i| !f.members.contains(i)) {
            return Err(Fault::NotFound.error("recreate_instances"));
        }
        let op = new_scoped_op(
            &mut st,
            &key,
            &format!("instanceGroupManagers/{mig}"),
            "compute.instanceGroupManagers.recreateInstances",
        );
        st.compute_ops.push((
            key.clone(),
            op.clone(),
            Effect::RecreateVms(key, mig.to_string(), instances.to_vec()),
        ));
        Ok(op)
    }

    async fn list_managed_instances(
        &self,
        zone: &ZoneRef,
        mig: &str,
    ) -> Result<Vec<ManagedInstance>, CloudError> {
        self.call("list_managed_instances", mig)?;
        let st = self.lock();
        let key = zone_key(zone);
        let f = st
            .migs
            .get(&key)
            .and_then(|m| m.get(mig))
            .ok_or_else(|| Fault::NotFound.error("list_managed_instances"))?;
        Ok(f.members
            .iter()
            .map(|n| {
                let vm = st.instances.get(&key).and_then(|v| v.get(n));
                ManagedInstance {
                    name: Some(n.clone()),
                    instance: format!("{FAKE_API}/{key}/instances/{n}"),
                    id: vm.and_then(|v| v.id.clone()),
                    current_action: if vm.is_some() { "NONE" } else { "CREATING" }.into(),
                    instance_status: vm.map(|v| v.status.clone()),
                    target_status: Some("RUNNING".into()),
                    last_attempt: (f.stockout && !f.is_bulk() && !f.only_list_errors).then(|| {
                        ManagedInstanceLastAttempt {
                            errors: Some(stockout_error()),
                        }
                    }),
                }
            })
            .collect())
    }

    async fn list_mig_errors(
        &self,
        zone: &ZoneRef,
        mig: &str,
    ) -> Result<Vec<InstanceManagedByIgmError>, CloudError> {
        self.call("list_mig_errors", mig)?;
        let st = self.lock();
        let key = zone_key(zone);
        let f = st
            .migs
            .get(&key)
            .and_then(|m| m.get(mig))
            .ok_or_else(|| Fault::NotFound.error("list_mig_errors"))?;
        if !f.stockout {
            return Ok(Vec::new());
        }
        Ok(f.members
            .iter()
            .map(|n| {
                let e = stockout_error().errors.remove(0);
                InstanceManagedByIgmError {
                    timestamp: "2026-01-01T00:00:00Z".into(),
                    error: IgmErrorDetail {
                        code: e.code,
                        message: e.message,
                    },
                    instance_action_details: Some(IgmErrorActionDetails {
                        action: "CREATING".into(),
                        instance: Some(format!("{FAKE_API}/{key}/instances/{n}")),
                        version: None,
                    }),
                }
            })
            .collect())
    }

    async fn list_instances(&self, zone: &ZoneRef) -> Result<Vec<Instance>, CloudError> {
        self.call("list_instances", &zone_key(zone))?;
        Ok(self.instances(zone))
    }

    async fn get_instance(&self, zone: &ZoneRef, name: &str) -> Result<Instance, CloudError> {
        self.call("get_instance", name)?;
        self.lock()
            .instances
            .get(&zone_key(zone))
            .and_then(|m| m.get(name).cloned())
            .ok_or_else(|| Fault::NotFound.error("get_instance"))
    }

    async fn set_instance_metadata(
        &self,
        zone: &ZoneRef,
        name: &str,
        metadata: &Metadata,
    ) -> Result<compute::Operation, CloudError> {
        self.call("set_instance_metadata", name)?;
        let mut st = self.lock();
        st.seq += 1;
        let next = fingerprint(st.seq);
        let key = zone_key(zone);
        let Some(vm) = st.instances.get_mut(&key).and_then(|m| m.get_mut(name)) else {
            return Err(Fault::NotFound.error("set_instance_metadata"));
        };
        if metadata.fingerprint.is_none() || metadata.fingerprint != vm.metadata.fingerprint {
            return Err(Fault::StaleFingerprint.error("set_instance_metadata"));
        }
        vm.metadata.items = metadata.items.clone();
        vm.metadata.fingerprint = Some(next);
        let mut op = new_scoped_op(&mut st, &key, &format!("instances/{name}"), "setMetadata");
        op.status = "DONE".into();
        st.compute_ops.push((key, op.clone(), Effect::None));
        Ok(op)
    }

    async fn get_guest_attributes(
        &self,
        zone: &ZoneRef,
        instance: &str,
        query_path: &str,
    ) -> Result<Vec<GuestAttributeEntry>, CloudError> {
        self.call("get_guest_attributes", instance)?;
        let st = self.lock();
        Ok(st
            .guest
            .get(&(zone_key(zone), instance.to_string()))
            .map(|attrs| {
                attrs
                    .iter()
                    .filter(|(k, _)| k.starts_with(query_path))
                    .filter_map(|(k, v)| {
                        let (ns, key) = k.split_once('/')?;
                        Some(GuestAttributeEntry {
                            namespace: ns.into(),
                            key: key.into(),
                            value: v.clone(),
                        })
                    })
                    .collect()
            })
            .unwrap_or_default())
    }

    async fn list_zone_operations(
        &self,
        zone: &ZoneRef,
    ) -> Result<Vec<compute::Operation>, CloudError> {
        let key = zone_key(zone);
        self.call("list_zone_operations", &key)?;
        Ok(self.ops_of(&key))
    }

    async fn list_global_operations(
        &self,
        project: &ProjectRef,
    ) -> Result<Vec<compute::Operation>, CloudError> {
        let key = project.to_string();
        self.call("list_global_operations", &key)?;
        Ok(self.ops_of(&key))
    }
    /// The quotas seeded ([`FakeCloud::seed_quotas`]), none by default.
    async fn get_region(&self, project: &str, region: &str) -> Result<compute::Region, CloudError> {
        let quotas = self
            .lock()
            .quotas
            .get(&region_key(project, region))
            .cloned()
            .unwrap_or_default();
        Ok(compute::Region {
            name: region.to_string(),
            quotas,
        })
    }
    /// The Cloud Quotas quota `quota_id`, from the quotas seeded for
    /// `project` ([`FakeCloud::seed_quotas`]) under the metrics read from
    /// it (`TPU_V5P`, `TPUS_PER_TPU_FAMILY/CT6E`, …): one entry per region;
    /// 404 when none is seeded. The seeded usage is not served (Cloud
    /// Quotas has none): the preflight observes it.
    async fn get_quota_info(
        &self,
        project: &str,
        quota_id: &str,
    ) -> Result<compute::QuotaInfo, CloudError> {
        use crate::plan::preflight::{QuotaSource, quota_by_metric};
        let prefix = region_key(project, "");
        let infos: Vec<compute::DimensionsInfo> = self
            .lock()
            .quotas
            .iter()
            .filter_map(|(k, qs)| Some((k.strip_prefix(&prefix)?, qs)))
            .flat_map(|(region, qs)| {
                qs.iter().filter_map(move |q| {
                    let QuotaSource::CloudQuotas {
                        quota_id: id,
                        family,
                    } = quota_by_metric(&q.metric)?.source
                    else {
                        return None;
                    };
                    let mut dimensions =
                        BTreeMap::from([("region".to_string(), region.to_string())]);
                    if let Some(f) = family {
                        dimensions.insert("tpu_family".into(), f.into());
                    }
                    (id == quota_id).then(|| compute::DimensionsInfo {
                        dimensions,
                        details: compute::QuotaDetails {
                            value: Some(format!("{}", q.limit.round())),
                        },
                        applicable_locations: vec![region.to_string()],
                    })
                })
            })
            .collect();
        if infos.is_empty() {
            return Err(CloudError::Api {
                status: 404,
                code: "NOT_FOUND".into(),
                reason: None,
                message: format!("quota info {quota_id} not found in {project}"),
                method: "cloudquotas.projects.locations.services.quotaInfos.get".into(),
            });
        }
        Ok(compute::QuotaInfo {
            name: format!(
                "projects/{project}/locations/global/services/compute.googleapis.com/quotaInfos/{quota_id}"
            ),
            quota_id: quota_id.to_string(),
            dimensions_infos: infos,
            ..Default::default()
        })
    }
    /// The fake keeps no Cloud Monitoring: no series, so the usage of the
    /// Cloud Quotas quotas stays what the preflight observes.
    async fn list_time_series(
        &self,
        _project: &str,
        _filter: &str,
    ) -> Result<Vec<compute::TimeSeries>, CloudError> {
        Ok(Vec::new())
    }
    /// The fake knows no reservation: the preflight warns and checks none.
    async fn get_reservation(
        &self,
        zone: &ZoneRef,
        name: &str,
    ) -> Result<compute::Reservation, CloudError> {
        Err(CloudError::Api {
            status: 404,
            code: "NOT_FOUND".into(),
            reason: Some("notFound".into()),
            message: format!("The resource '{zone}/reservations/{name}' was not found"),
            method: "compute.reservations.get".into(),
        })
    }
}

impl FakeCloud {
    /// The compute operations of one scope key.
    fn ops_of(&self, key: &str) -> Vec<compute::Operation> {
        self.lock()
            .compute_ops
            .iter()
            .filter(|(k, _, _)| k == key)
            .map(|(_, op, _)| op.clone())
            .collect()
    }
}

#[cfg(test)]
#[path = "fake/tests.rs"]
mod tests;
