//! Every decision a user must see, as a `tracing` event on
//! [`LOG_TARGET`] (on by default for `reconcile --watch` and `controller`),
//! so text and JSON logs (`--log-format json`) both carry it, with
//! structured fields: `decision` (`held`, `refused`, `deferred`), `slice`,
//! `target`, `code` (the stable reason code) and the detail. The human
//! lines on stderr are the sinks' and stay as they are.

use crate::plan::{Deferred, Refusal, Scope};
use crate::spec::{Fleet, Target};
use crate::watch::LOG_TARGET;

use super::HeldSlice;

fn target_of<'a>(fleet: &'a Fleet, slice: &str) -> &'a str {
    fleet
        .slices
        .get(slice)
        .map_or("", |s| s.spec.target.as_str())
}

/// A slice held back for unavailable capacity.
pub(super) fn held(fleet: &Fleet, h: &HeldSlice) {
    tracing::info!(
        target: LOG_TARGET,
        decision = "held",
        slice = %h.slice,
        target = target_of(fleet, &h.slice),
        code = h.code(),
        offering = %h.hold.offering,
        since = %h.hold.since,
        retry_in_secs = h.hold.retry_in.as_secs(),
        left_out = h.left_out.len(),
        "slice held back: capacity unavailable"
    );
}

/// A change refused by a safety rail.
pub(super) fn refused(fleet: &Fleet, r: &Refusal) {
    tracing::warn!(
        target: LOG_TARGET,
        decision = "refused",
        slice = %r.slice,
        target = target_of(fleet, &r.slice),
        code = %r.code,
        address = %r.address,
        action = r.action.as_str(),
        reason = %r.message,
        "change refused"
    );
}

/// The whole cycle refused (nothing planned, nothing pruned), by `code`.
pub(super) fn refused_cycle(code: &str, source: &str, reason: &str) {
    tracing::warn!(
        target: LOG_TARGET,
        decision = "refused",
        code,
        source,
        reason,
        "cycle refused"
    );
}

/// A scope that could not be observed, left out of the plan.
pub(super) fn deferred(fleet: &Fleet, d: &Deferred) {
    let targets: Vec<&str> = fleet
        .targets
        .values()
        .filter(|t| in_scope(t, &d.scope))
        .map(|t| t.name.as_str())
        .collect();
    tracing::info!(
        target: LOG_TARGET,
        decision = "deferred",
        scope = %d.scope,
        target = targets.join(","),
        code = "not_observed",
        resources = d.resources,
        reason = %d.reason,
        "scope deferred: not observed"
    );
}

/// Whether `target`'s slices live in `scope` (its GKE cluster, or its
/// self-managed cluster's API).
fn in_scope(target: &Target, scope: &Scope) -> bool {
    match scope {
        Scope::Kube(k) => match k.gke_cluster() {
            // A GKE cluster's Kubernetes API.
            Some(c) => {
                target.spec.project == c.project
                    && target
                        .spec
                        .gke
                        .as_ref()
                        .is_some_and(|g| g.location == c.location && g.name == c.name)
            }
            None => target
                .spec
                .gce
                .as_ref()
                .is_some_and(|g| g.control_plane_endpoint == k.endpoint),
        },
        Scope::Cluster(c) => {
            target.spec.project == c.project
                && target
                    .spec
                    .gke
                    .as_ref()
                    .is_some_and(|g| g.location == c.location && g.name == c.name)
        }
        Scope::Zone(z) => target.spec.project == z.project && target.spec.zone == z.zone,
        Scope::Region(_) | Scope::Global(_) => false,
    }
}
