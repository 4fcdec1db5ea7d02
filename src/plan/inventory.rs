//! What is live: the observed inventory the planner diffs against. Pure data,
//! filled by [`crate::observe`] from one list per resource kind and location.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::resource::compute::{self, ResourcePolicy};
use crate::resource::gke::{self, NodePool};
use crate::resource::{ClusterRef, RegionRef};

/// Live state of one GKE cluster.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ClusterState {
    /// All node pools of the cluster (managed or not).
    pub node_pools: Vec<NodePool>,
    /// Operations of the cluster's location (running and recently finished).
    pub operations: Vec<gke::Operation>,
}

/// Live state of one compute region.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct RegionState {
    /// All resource policies of the region.
    pub policies: Vec<ResourcePolicy>,
    /// Operations of the region that have not finished.
    pub operations: Vec<compute::Operation>,
}

/// Everything observed in one cycle.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Inventory {
    /// Per cluster.
    pub clusters: BTreeMap<ClusterRef, ClusterState>,
    /// Per region.
    pub regions: BTreeMap<RegionRef, RegionState>,
}

/// The node pool name an operation targets (`.../nodePools/NAME`).
pub fn gke_operation_target(op: &gke::Operation) -> Option<&str> {
    let link = op.target_link.as_deref()?;
    let (head, name) = link.rsplit_once('/')?;
    head.ends_with("/nodePools").then_some(name)
}

/// The resource policy name a compute operation targets.
pub fn compute_operation_target(op: &compute::Operation) -> Option<&str> {
    let link = op.target_link.as_deref()?;
    let (head, name) = link.rsplit_once('/')?;
    head.ends_with("/resourcePolicies").then_some(name)
}

impl ClusterState {
    /// The running (not DONE) operation on node pool `name`, if any.
    pub fn running_operation(&self, name: &str) -> Option<&gke::Operation> {
        self.operations
            .iter()
            .filter(|op| op.status != "DONE")
            .find(|op| gke_operation_target(op) == Some(name))
    }

    /// The most recent failed operation on node pool `name`, if any.
    pub fn last_error(&self, name: &str) -> Option<&gke::Operation> {
        self.operations
            .iter()
            .filter(|op| op.status == "DONE" && op.error.is_some())
            .filter(|op| gke_operation_target(op) == Some(name))
            .max_by(|a, b| a.end_time.cmp(&b.end_time))
    }
}

impl RegionState {
    /// The running operation on policy `name`, if any.
    pub fn running_operation(&self, name: &str) -> Option<&compute::Operation> {
        self.operations
            .iter()
            .filter(|op| op.status != "DONE")
            .find(|op| compute_operation_target(op) == Some(name))
    }
}

impl Inventory {
    /// A fingerprint of the observed state a plan was computed from: node
    /// pools and policies (names, status, labels, taints, replacement-class
    /// fields) and running operations. A saved plan is refused when the
    /// fingerprint of a fresh observation differs.
    pub fn fingerprint(&self) -> String {
        let mut h = Sha256::new();
        for (c, st) in &self.clusters {
            h.update(c.path().as_bytes());
            let mut pools: Vec<&NodePool> = st.node_pools.iter().collect();
            pools.sort_by(|a, b| a.name.cmp(&b.name));
            for p in pools {
                let mut p = p.clone();
                // Output-only fields that change without anyone acting.
                p.etag = None;
                p.status_message = None;
                p.conditions.clear();
                p.version = None;
                h.update(serde_json::to_string(&p).unwrap_or_default().as_bytes());
            }
            let mut ops: Vec<&str> = st
                .operations
                .iter()
                .filter(|o| o.status != "DONE")
                .map(|o| o.name.as_str())
                .collect();
            ops.sort_unstable();
            h.update(ops.join(",").as_bytes());
        }
        for (r, st) in &self.regions {
            h.update(r.to_string().as_bytes());
            let mut pols: Vec<&ResourcePolicy> = st.policies.iter().collect();
            pols.sort_by(|a, b| a.name.cmp(&b.name));
            for p in pols {
                h.update(p.name.as_bytes());
                h.update(p.description.as_deref().unwrap_or("").as_bytes());
                h.update(p.status.as_deref().unwrap_or("").as_bytes());
                h.update(
                    serde_json::to_string(&p.workload_policy)
                        .unwrap_or_default()
                        .as_bytes(),
                );
            }
            let mut ops: Vec<&str> = st
                .operations
                .iter()
                .filter(|o| o.status != "DONE")
                .map(|o| o.name.as_str())
                .collect();
            ops.sort_unstable();
            h.update(ops.join(",").as_bytes());
        }
        hex::encode(&h.finalize()[..16])
    }
}
