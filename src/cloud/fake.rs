//! An in-memory Google Cloud that records every call and can be told to fail
//! the next one: the executor's unit tests run on it, with no HTTP. Creates
//! and deletes start operations that finish when they are waited on; what an
//! operation does to a resource happens then, as in the real APIs.
//!
//! It is deliberately small: the simulator (`crate::sim`) is the faithful
//! stand-in for integration and end-to-end tests.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;

use super::CloudError;
use super::api::{Cloud, ComputeService, GkeService};
use crate::resource::ClusterRef;
use crate::resource::compute::{self, ResourcePolicy};
use crate::resource::gke::{self, NodePool, UpdateNodePoolRequest};

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
}

#[derive(Default)]
struct State {
    pools: BTreeMap<String, BTreeMap<String, NodePool>>,
    policies: BTreeMap<String, BTreeMap<String, ResourcePolicy>>,
    gke_ops: Vec<(String, gke::Operation, Effect)>,
    compute_ops: Vec<(String, compute::Operation, Effect)>,
    calls: Vec<String>,
    faults: VecDeque<(String, Fault)>,
    seq: u64,
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

impl FakeCloud {
    /// An empty cloud.
    pub fn new() -> Arc<FakeCloud> {
        Arc::new(FakeCloud::default())
    }

    /// A [`Cloud`] handle backed by this fake.
    pub fn cloud(self: &Arc<Self>) -> Cloud {
        Cloud {
            gke: self.clone(),
            compute: self.clone(),
        }
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

    /// The next call of `method` fails with `fault` (queued in order).
    pub fn fail_next(&self, method: &str, fault: Fault) {
        self.lock().faults.push_back((method.to_string(), fault));
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
        }
        Effect::None => {}
    }
}

#[async_trait]
impl GkeService for FakeCloud {
    async fn list_node_pools(&self, cluster: &ClusterRef) -> Result<Vec<NodePool>, CloudError> {
        self.call("list_node_pools", &cluster.path())?;
        Ok(self.pools(cluster))
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
        let op = new_gke_op(&mut st, cluster, name, "DELETE_NODE_POOL");
        st.gke_ops.push((
            cluster.path(),
            op.clone(),
            Effect::DeletePool(cluster.path(), name.to_string()),
        ));
        Ok(op)
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
}
