//! One writer per Target across controller modes. A `--shards 1` replica
//! writes under the leader Lease `NAME`; a `--shards N` replica (N > 1)
//! under shard Leases `NAME-<k>`. Each mode excludes its own kind, but a
//! leader and a sharded replica hold different Leases, so both would
//! reconcile every Target (a rolling update from `deploy/` to
//! `deploy/sharding`, or back). So before every cycle each replica looks at
//! the other mode's Leases and waits while it runs:
//!
//! - a sharded replica holds no shard, and runs no cycle, while the leader
//!   Lease has a live holder (the coordinator releases what it holds after
//!   the in-flight cycle);
//! - a leader runs no cycle while a shard Lease has a live holder.
//!
//! Each replica looks after it holds its own Lease (acquire, then look), so
//! of two that start together at least the later one sees the earlier; if
//! both see each other, the sharded one steps back and the leader goes on
//! once the shard Leases are released. A replica of an older release that
//! does not look is still seen by one that does.

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, ListParams};

/// The holder of `l` while it is live (renewed within its duration).
pub fn live_holder(l: &Lease, now: jiff::Timestamp) -> Option<String> {
    let spec = l.spec.as_ref()?;
    let holder = spec.holder_identity.clone().filter(|h| !h.is_empty())?;
    let renewed = spec.renew_time.as_ref()?.0;
    let secs = i64::from(spec.lease_duration_seconds?);
    let until = renewed
        .checked_add(jiff::SignedDuration::from_secs(secs))
        .ok()?;
    (until > now).then_some(holder)
}

/// Whether `name` is one of controller `lease_name`'s shard Leases
/// (`NAME-<k>`).
fn is_shard_lease(name: &str, lease_name: &str) -> bool {
    name.strip_prefix(lease_name)
        .and_then(|r| r.strip_prefix('-'))
        .is_some_and(|k| !k.is_empty() && k.bytes().all(|b| b.is_ascii_digit()))
}

/// The other mode running beside a replica with `shards` shards, from the
/// Leases of the controller's namespace at `now`: why it must wait (the
/// Lease and its holder), or `None`.
pub fn other_mode(
    leases: &[Lease],
    lease_name: &str,
    shards: u32,
    identity: &str,
    now: jiff::Timestamp,
) -> Option<String> {
    let mut seen: Vec<String> = leases
        .iter()
        .filter_map(|l| {
            let name = l.metadata.name.as_deref()?;
            let theirs = if shards > 1 {
                name == lease_name
            } else {
                is_shard_lease(name, lease_name)
            };
            if !theirs {
                return None;
            }
            live_holder(l, now)
                .filter(|h| h != identity)
                .map(|h| format!("{name} (held by {h})"))
        })
        .collect();
    if seen.is_empty() {
        return None;
    }
    seen.sort();
    Some(if shards > 1 {
        format!(
            "a controller with --shards 1 leads: the leader Lease {} is live; this --shards {shards} replica \
             holds no shard until it is gone",
            seen.join(", ")
        )
    } else {
        format!(
            "a sharded controller (--shards > 1) runs: shard Lease(s) {} are live; this --shards 1 replica \
             runs no cycle until they are released",
            seen.join(", ")
        )
    })
}

/// [`other_mode`], from one list of the Leases in `namespace`. An error
/// (the Leases cannot be listed) is the caller's to treat as "cannot tell":
/// it runs no cycle.
pub async fn look(
    client: &kube::Client,
    namespace: &str,
    lease_name: &str,
    shards: u32,
    identity: &str,
) -> anyhow::Result<Option<String>> {
    use anyhow::Context;
    let leases = Api::<Lease>::namespaced(client.clone(), namespace)
        .list(&ListParams::default())
        .await
        .with_context(|| {
            format!(
                "cannot list the Leases in namespace {namespace} to tell whether a controller of the other \
                 mode (--shards) runs"
            )
        })?;
    Ok(other_mode(
        &leases.items,
        lease_name,
        shards,
        identity,
        jiff::Timestamp::now(),
    ))
}

/// The look before every cycle ([`look`]), and what a replica that waits
/// says: a warning when it starts waiting and a note when it stops, the
/// metric `slicectl_other_mode_waiting`, `slicectl_leader` 0, and the body
/// of `/readyz`. While it waits it looks again every `tick`.
pub struct Watcher {
    /// The controller's cluster.
    pub client: kube::Client,
    /// The Leases' namespace.
    pub namespace: String,
    /// The controller's Lease name.
    pub lease_name: String,
    /// This replica's `--shards`.
    pub shards: u32,
    /// This replica.
    pub identity: String,
    /// Its metrics.
    pub metrics: super::metrics::Metrics,
    /// Its endpoints' state.
    pub health: std::sync::Arc<super::server::Health>,
    /// Runs a cycle (to look again while waiting).
    pub wake: tokio::sync::mpsc::UnboundedSender<()>,
    /// How soon a waiting replica looks again.
    pub tick: std::time::Duration,
    /// A look again is scheduled.
    pub again: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Watcher {
    /// Whether a cycle may run now: no controller of the other mode runs
    /// (and the Leases could be listed: a replica that cannot tell waits).
    pub async fn may_run(&self) -> bool {
        use std::sync::atomic::Ordering;
        let why = match look(
            &self.client,
            &self.namespace,
            &self.lease_name,
            self.shards,
            &self.identity,
        )
        .await
        {
            Ok(None) => None,
            Ok(Some(why)) => Some(why),
            Err(e) => Some(format!("{e:#}")),
        };
        let waiting = self.say(why);
        if waiting && !self.again.swap(true, Ordering::SeqCst) {
            let (wake, again, tick) = (self.wake.clone(), self.again.clone(), self.tick);
            tokio::spawn(async move {
                tokio::time::sleep(tick).await;
                again.store(false, Ordering::SeqCst);
                let _ = wake.send(());
            });
        }
        !waiting
    }

    /// Records whether this replica waits for the other mode (`why`), and
    /// says so: a log line when it changes, the metrics, `/readyz`. Returns
    /// whether it waits.
    pub fn say(&self, why: Option<String>) -> bool {
        let was = self
            .health
            .waiting
            .lock()
            .map(|mut w| std::mem::replace(&mut *w, why.clone()))
            .unwrap_or_default();
        let Some(why) = why else {
            if was.is_some() {
                tracing::info!(target: crate::watch::LOG_TARGET, "no controller of the other mode runs any more: reconciling");
                self.metrics.other_mode_waiting.set(0);
                if self.shards <= 1 {
                    self.metrics.leader.set(1);
                    self.metrics.shards_held.set(1);
                }
            }
            return false;
        };
        if was.as_deref() != Some(why.as_str()) {
            tracing::warn!(target: crate::watch::LOG_TARGET, reason = %why, "waiting for a controller of the other mode: no cycle runs, so that each Target has one writer");
        }
        self.metrics.other_mode_waiting.set(1);
        self.metrics.leader.set(0);
        if self.shards <= 1 {
            self.metrics.shards_held.set(0);
        }
        true
    }
}

#[cfg(test)]
#[path = "mode/tests.rs"]
mod tests;
