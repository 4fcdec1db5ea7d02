//! `slicectl controller`: the in-cluster loop (design §3). The engine, the
//! single-flight loop ([`crate::watch`]) and the last-good store
//! ([`crate::source::last_good`]) are shared with `reconcile --watch`; this
//! module adds what only the controller needs:
//!
//! - [`configmap`]: specs from one ConfigMap through an API watch;
//! - [`capacity`]: the unavailable-capacity cache and per-slice backoff;
//! - [`metrics`]: the Prometheus metrics;
//! - [`server`]: `/healthz`, `/readyz`, `/metrics`;
//! - [`lease`]: the Lease managers (leader and shards), one field manager per replica;
//! - [`mode`]: one writer per Target across modes (a leader beside sharded replicas);
//! - [`owner`]: the owner reference of the status objects (`--owner-deployment`);
//! - [`sink`]: the controller's cycle sink (metrics and status objects);
//! - here: the pure helpers of a cycle (which plan actions a capacity hold
//!   leaves out, which slices an invalid file stands for, who we are).
//!
//! The cycle itself is [`crate::cycle::run_cycle`]; the wiring (leader
//! election, source, sink) is in `cli/controller.rs`.

pub mod capacity;
pub mod configmap;
pub mod lease;
pub mod metrics;
pub mod mode;
pub mod owner;
pub mod server;
pub mod shard;
pub mod sink;

use std::collections::{BTreeMap, BTreeSet};

use jiff::Timestamp;
use tokio::time::Instant;

use crate::cloud::STOCKOUT_CODES;
use crate::plan::{ActionKind, Plan, Reason};
use crate::source::last_good::Resolved;
use crate::spec::Fleet;
use capacity::{CapacityTracker, Hold, offering_of};

/// Removes from `plan` every action of a slice in `held` except deletes
/// (a held slice is still in the specs, so it has none of its own; deletes
/// of what the specs no longer define are never held). Returns the
/// addresses left out, in plan order.
pub fn hold_actions(plan: &mut Plan, held: &BTreeSet<String>) -> Vec<String> {
    if held.is_empty() {
        return Vec::new();
    }
    let mut left_out = Vec::new();
    plan.actions.retain(|a| {
        let keep = a.action == ActionKind::Delete || !held.contains(&a.owner.slice);
        if !keep {
            left_out.push(format!("{} {}", a.action.as_str(), a.address()));
        }
        keep
    });
    plan.summary = plan.count();
    left_out
}

/// Slices the plan replaces because the cloud left one of their resources
/// in an error state *after a stockout* (a node pool GKE left
/// `RUNNING_WITH_ERROR` or `ERROR` with `GCE_STOCKOUT` in its conditions)
/// → what the cloud says. Such a pool is found by the plan, not by a failed
/// step (after a restart, by a standby that took over, or when GKE ended
/// the create operation without an error and kept the pool), and it is the
/// same shortage: the controller counts it and holds the slice rather than
/// replace it at once into the same stockout. Slices in `held` are left
/// out (already held).
pub fn stockouts_in_plan(plan: &Plan, held: &BTreeSet<String>) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for a in &plan.actions {
        if a.action != ActionKind::Replace || held.contains(&a.owner.slice) {
            continue;
        }
        if let Reason::ErrorState { status, detail } = &a.reason
            && STOCKOUT_CODES.iter().any(|c| detail.contains(c))
        {
            out.entry(a.owner.slice.clone())
                .or_insert_with(|| format!("{} is {status}: {detail}", a.address()));
        }
    }
    out
}

/// A cycle's capacity edit of its plan: slices the plan finds in a
/// stockout ([`stockouts_in_plan`]) that the tracker does not know yet are
/// recorded as failed now (a slice already known is past its backoff, and
/// this replacement is its retry) and join `holds`; then every held
/// slice's actions are left out ([`hold_actions`]). Returns the addresses
/// left out and how many stockouts were found in the plan.
pub fn hold_for_capacity(
    plan: &mut Plan,
    fleet: &Fleet,
    tracker: &mut CapacityTracker,
    holds: &mut BTreeMap<String, Hold>,
    now: Instant,
    wall: Timestamp,
) -> (Vec<String>, usize) {
    // Workload slices the plan added are held like the specs' slices.
    let with_workloads = plan.demand.extend(fleet);
    let fleet = &with_workloads;
    let held: BTreeSet<String> = holds.keys().cloned().collect();
    let mut found = 0;
    for (name, message) in stockouts_in_plan(plan, &held) {
        if tracker.failures(&name) > 0 {
            continue;
        }
        let Some(o) = fleet.slices.get(&name).and_then(|s| offering_of(fleet, s)) else {
            continue;
        };
        found += 1;
        tracker.record_failure(&name, o.clone(), &message, now, wall);
        if let Some(h) = tracker.hold(&name, Some(&o), now) {
            holds.insert(name, h);
        }
    }
    let held: BTreeSet<String> = holds.keys().cloned().collect();
    (hold_actions(plan, &held), found)
}

/// Slices defined by a file that is invalid now (held at its last good
/// version) → that file's first located error, as `validate` prints it.
pub fn invalid_slices(resolved: &Resolved) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for file in &resolved.held {
        let Some(d) = resolved
            .diagnostics
            .iter()
            .find(|d| &d.location.file == file)
        else {
            continue;
        };
        for s in resolved.fleet.slices.values() {
            if &s.location.file == file {
                out.insert(s.name.clone(), d.to_string());
            }
        }
    }
    out
}

/// This replica's identity in the Lease and in Events: `POD_NAME`, else
/// the hostname.
pub fn identity() -> String {
    let from_env = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
    from_env("POD_NAME")
        .or_else(|| from_env("HOSTNAME"))
        .or_else(|| {
            std::fs::read_to_string("/proc/sys/kernel/hostname")
                .ok()
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
        })
        .unwrap_or_else(|| "slicectl".to_string())
}

/// The controller's namespace: `--namespace`, else `POD_NAMESPACE`, else
/// `slicectl`.
pub fn namespace(flag: Option<&str>) -> String {
    flag.map(str::to_string)
        .or_else(|| {
            std::env::var("POD_NAMESPACE")
                .ok()
                .filter(|v| !v.is_empty())
        })
        .unwrap_or_else(|| "slicectl".to_string())
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
