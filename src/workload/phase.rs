//! Where a workload slice stands for the JobSet waiting on it: being
//! created, waiting for capacity, or ready. Pure: read from the slice's
//! status row (its node pool's state and its Nodes). The shell records one
//! Kubernetes Event per phase on the JobSet (`crate::kube::demand`), and
//! `status` and the SliceStatus objects show the message.

use serde::Serialize;

use super::Origin;

/// Event reason: the slice's node pool is being created.
pub const CREATING: &str = "SliceCreating";
/// Event reason: the pool exists but its nodes have not all come (a
/// flex-start pool waiting for the cluster autoscaler, a stockout in its
/// backoff, a pool in error).
pub const WAITING: &str = "WaitingForCapacity";
/// Event reason: the slice is up and its JobSet's pods can run.
pub const READY: &str = "SliceReady";

/// A workload slice's phase, for its JobSet.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Phase {
    /// [`CREATING`], [`WAITING`] or [`READY`].
    pub reason: &'static str,
    /// For people: what is happening and what comes next.
    pub message: String,
}

/// A workload slice's row: whose it is and, when known, its phase.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Standing {
    /// The JobSet and Job it is for.
    pub origin: Origin,
    /// Its phase; `None` when it cannot be told (Nodes not read, the Target
    /// not observed, a release under way).
    pub phase: Option<Phase>,
}

/// `(ready, hosts)` from a status row's nodes column (`R/H ready`);
/// `None` for an unknown count (`?/H`).
fn counts(nodes: &str) -> Option<(u32, u32)> {
    let (r, h) = nodes.split_once('/')?;
    let h = h.split_whitespace().next()?;
    Some((r.trim().parse().ok()?, h.parse().ok()?))
}

/// The phase of a workload slice whose node pool this run creates.
pub fn creating(pool: &str) -> Phase {
    Phase {
        reason: CREATING,
        message: format!("node pool {pool} is being created for this JobSet; its pods wait for it"),
    }
}

/// The phase of workload slice `pool` that a pending JobSet asks for, from
/// its row's `state` (the node pool's status, or `MISSING`), `nodes` and
/// `last_error`; `flex` for a flex-start slice.
pub fn asked(pool: &str, state: &str, nodes: &str, last_error: &str, flex: bool) -> Option<Phase> {
    let status = state.split(',').next().unwrap_or_default().trim();
    let (reason, message) = match status {
        "MISSING" | "PROVISIONING" => return Some(creating(pool)),
        "ERROR" | "RUNNING_WITH_ERROR" => (
            WAITING,
            format!(
                "node pool {pool} has no capacity yet ({status}{}); slicectl tries again after its \
                 backoff and the pods keep waiting",
                if last_error.is_empty() {
                    String::new()
                } else {
                    format!(": {last_error}")
                }
            ),
        ),
        "RUNNING" | "RECONCILING" => {
            let (ready, hosts) = counts(nodes)?;
            if hosts > 0 && ready >= hosts {
                (
                    READY,
                    format!(
                        "slice {pool} is ready ({ready}/{hosts} nodes); the pods can be scheduled"
                    ),
                )
            } else if flex {
                (
                    WAITING,
                    format!(
                        "flex-start node pool {pool} waits for capacity ({ready}/{hosts} nodes ready): \
                         GKE's cluster autoscaler adds the whole slice when it finds it, for up to \
                         the pods' wait"
                    ),
                )
            } else {
                (
                    CREATING,
                    format!(
                        "node pool {pool} is up and its nodes are registering ({ready}/{hosts} ready); \
                         the pods wait for them"
                    ),
                )
            }
        }
        _ => return None,
    };
    Some(Phase { reason, message })
}

/// The phase of a live workload slice no pending pod asks for any more
/// while its JobSet runs (`kept` says why it stays): ready once its pool
/// is RUNNING, as its pods were scheduled.
pub fn kept(pool: &str, state: &str, kept_why: &str) -> Option<Phase> {
    let status = state.split(',').next().unwrap_or_default().trim();
    (kept_why.starts_with("active") && matches!(status, "RUNNING" | "RECONCILING")).then(|| Phase {
        reason: READY,
        message: format!("slice {pool} is ready and the JobSet's pods are no longer pending"),
    })
}
