//! The one readiness rule of a slice replica, on both backends: every
//! expected Node is `Ready`, carries the TPU labels with the slice's values,
//! and has `google.com/tpu` allocatable (and capacity) equal to the chips
//! per host. tpu-operator's rule (Ready plus `google.com/tpu` capacity ==
//! allocatable == chipsPerNode, `internal/controllers/tpunodegroup`), with
//! the labels workloads select on: a Node without them cannot be scheduled
//! on by a TPU job, so it is not ready for one. Pure.

use std::collections::BTreeMap;

use super::gce::nodes::NodeView;

/// How a status row's last error starts when it is the Nodes' readiness
/// that speaks (a failed step of the replica says more, and takes its place
/// in the status objects).
pub const NOT_READY_PREFIX: &str = "not ready: ";

/// The label GKE puts on every Node of a node pool, naming the pool.
pub const LABEL_NODEPOOL: &str = "cloud.google.com/gke-nodepool";
/// The TPU accelerator label.
pub const LABEL_ACCELERATOR: &str = "cloud.google.com/gke-tpu-accelerator";
/// The TPU topology label.
pub const LABEL_TOPOLOGY: &str = "cloud.google.com/gke-tpu-topology";

/// What every Node of a slice replica must be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expect {
    /// Hosts (Nodes) in the replica.
    pub hosts: u32,
    /// `google.com/tpu` per Node.
    pub chips: u32,
    /// Labels each Node must carry, with their values.
    pub labels: BTreeMap<String, String>,
}

/// Why one Node is not ready for a TPU job (empty: it is).
pub fn problems(n: &NodeView, e: &Expect) -> Vec<String> {
    let mut out = Vec::new();
    if !n.ready {
        out.push("not Ready".to_string());
    }
    for (k, v) in &e.labels {
        match n.labels.get(k) {
            None => out.push(format!("no label {k}")),
            Some(have) if have != v => out.push(format!("label {k}={have}, want {v}")),
            Some(_) => {}
        }
    }
    let shown = |q: Option<u32>| q.map_or_else(|| "none".to_string(), |q| q.to_string());
    if n.tpu_allocatable != Some(e.chips) {
        out.push(format!(
            "google.com/tpu allocatable {}, want {}",
            shown(n.tpu_allocatable),
            e.chips
        ));
    } else if n.tpu_capacity.is_some_and(|c| c != e.chips) {
        out.push(format!(
            "google.com/tpu capacity {}, want {}",
            shown(n.tpu_capacity),
            e.chips
        ));
    }
    out
}

/// Whether one Node is ready for a TPU job.
pub fn is_ready(n: &NodeView, e: &Expect) -> bool {
    problems(n, e).is_empty()
}

/// A replica's readiness from its Nodes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Readiness {
    /// Nodes ready for a TPU job (at most `expected` count).
    pub ready: u32,
    /// Nodes expected.
    pub expected: u32,
    /// Why it is not ready (empty when every expected Node is).
    pub why: String,
}

impl Readiness {
    /// `R/E ready`, as `status` shows it.
    pub fn nodes_column(&self) -> String {
        format!("{}/{} ready", self.ready, self.expected)
    }

    /// Whether every expected Node is ready.
    pub fn is_ready(&self) -> bool {
        self.ready >= self.expected && self.expected > 0
    }
}

/// Judges a replica's Nodes: how many are ready, and why the replica is
/// not (missing Nodes, and each Node's problems, the first few named).
pub fn judge(nodes: &[&NodeView], e: &Expect) -> Readiness {
    const NAMED: usize = 5;
    let mut ready = 0u32;
    let mut reasons = Vec::new();
    let mut unready = 0usize;
    for n in nodes {
        let p = problems(n, e);
        if p.is_empty() {
            ready += 1;
        } else {
            unready += 1;
            if unready <= NAMED {
                reasons.push(format!("node {}: {}", n.name, p.join(", ")));
            }
        }
    }
    if unready > NAMED {
        reasons.push(format!("and {} more node(s) not ready", unready - NAMED));
    }
    let present = u32::try_from(nodes.len()).unwrap_or(u32::MAX);
    if present < e.hosts {
        reasons.insert(
            0,
            format!(
                "{} of {} node(s) not registered",
                e.hosts - present,
                e.hosts
            ),
        );
    }
    Readiness {
        ready: ready.min(e.hosts),
        expected: e.hosts,
        why: reasons.join("; "),
    }
}

#[cfg(test)]
#[path = "readiness/tests.rs"]
mod tests;
