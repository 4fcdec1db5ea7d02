//! Waiting on long-running operations at the cost of one read per location.
//!
//! Every step that waits on an operation registers with the [`Poller`] of
//! its location (a GKE location, a Compute zone or region, Compute's global
//! scope). The waiter whose next poll falls due first lists the location's
//! operations once (`projects.locations.operations.list`,
//! `zoneOperations.list`, `regionOperations.list`, `globalOperations.list`)
//! and publishes the list; every other waiter of the location reads its own
//! operation from that list instead of asking for it. So a tick costs one
//! list per location however many operations wait there.
//!
//! Ticks stay adaptive: each waiter wants to look again within
//! [`super::poll_delay`] of its last look (a tenth of its age, within the
//! [`super::PollPolicy`] bounds) and any list published by another waiter
//! counts as a look, so the location is listed as often as its youngest
//! waiter needs and every operation is seen DONE within max(`min_interval`,
//! 10 % of its age).
//!
//! Judgement stays per operation: the poller hands each waiter its own
//! operation, and the caller judges it (an operation that failed fails only
//! its step). When the operation is missing from a list taken after the wait
//! began (a list that pages past it, a server that drops old entries) or the
//! list itself fails, that waiter reads its operation directly, as before.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::watch;
use tokio::time::Instant;

use super::{CloudError, PollPolicy, poll_delay};

/// An operation the poller can follow.
pub(crate) trait Polled: Clone + Send + Sync + 'static {
    /// The operation's short name (its last path segment).
    fn short_name(&self) -> &str;
    /// Whether the operation has finished (with or without an error).
    fn is_done(&self) -> bool;
}

impl Polled for crate::resource::gke::Operation {
    fn short_name(&self) -> &str {
        self.name.rsplit('/').next().unwrap_or(&self.name)
    }
    fn is_done(&self) -> bool {
        self.status == "DONE"
    }
}

impl Polled for crate::resource::compute::Operation {
    fn short_name(&self) -> &str {
        self.name.rsplit('/').next().unwrap_or(&self.name)
    }
    fn is_done(&self) -> bool {
        self.status == "DONE"
    }
}

/// One list of a location's operations, by short name.
struct Snapshot<Op> {
    /// When the list request was sent: every operation in it is at least
    /// this fresh.
    taken: Instant,
    ops: HashMap<String, Op>,
}

/// The waiters of one location.
struct Location<Op> {
    /// The latest list; waiters are woken when it changes.
    latest: watch::Sender<Arc<Snapshot<Op>>>,
    /// Held while listing, so waiters due together send one list.
    listing: tokio::sync::Mutex<()>,
    /// The operations waited on (short name → number of waiters).
    waiting: Mutex<BTreeMap<String, usize>>,
}

/// Shared waiting on the operations of many locations (one per API family
/// in a [`super::CloudClient`]; clones of the client share it).
pub(crate) struct Poller<Op> {
    locations: Mutex<HashMap<String, Arc<Location<Op>>>>,
}

impl<Op> Default for Poller<Op> {
    fn default() -> Self {
        Poller {
            locations: Mutex::new(HashMap::new()),
        }
    }
}

/// A lock that a panicking holder cannot make unusable (the maps stay
/// consistent: every update is a single insert or remove).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A waiter's registration, removed when its wait ends however it ends
/// (done, failed, timed out or dropped).
struct Registration<'a, Op> {
    poller: &'a Poller<Op>,
    key: String,
    name: String,
    location: Arc<Location<Op>>,
}

impl<Op> Drop for Registration<'_, Op> {
    fn drop(&mut self) {
        let mut locations = lock(&self.poller.locations);
        let mut waiting = lock(&self.location.waiting);
        if let Some(n) = waiting.get_mut(&self.name) {
            *n -= 1;
            if *n == 0 {
                waiting.remove(&self.name);
            }
        }
        if waiting.is_empty() {
            locations.remove(&self.key);
        }
    }
}

impl<Op: Polled> Poller<Op> {
    fn register(&self, key: &str, name: &str) -> Registration<'_, Op> {
        let mut locations = lock(&self.locations);
        let location = locations
            .entry(key.to_string())
            .or_insert_with(|| {
                Arc::new(Location {
                    latest: watch::Sender::new(Arc::new(Snapshot {
                        taken: Instant::now(),
                        ops: HashMap::new(),
                    })),
                    listing: tokio::sync::Mutex::new(()),
                    waiting: Mutex::new(BTreeMap::new()),
                })
            })
            .clone();
        *lock(&location.waiting).entry(name.to_string()).or_default() += 1;
        Registration {
            poller: self,
            key: key.to_string(),
            name: name.to_string(),
            location,
        }
    }

    /// Number of locations with waiters (for tests).
    #[cfg(test)]
    fn locations(&self) -> usize {
        lock(&self.locations).len()
    }

    /// Waits until `op` (of location `key`) is DONE and returns it as listed
    /// or read then; the caller judges it. `list` lists the location's
    /// operations, given the short names of those waited on (a server-side
    /// filter may narrow the list to them); `get` reads `op` alone. Errors of
    /// `get` end this wait; a failed `list` makes this waiter read its own
    /// operation for that tick. No timeout here: the caller bounds the wait.
    pub(crate) async fn wait<L, LF, G, GF>(
        &self,
        key: &str,
        op: &Op,
        policy: &PollPolicy,
        list: L,
        get: G,
    ) -> Result<Op, CloudError>
    where
        L: Fn(Vec<String>) -> LF,
        LF: Future<Output = Result<Vec<Op>, CloudError>>,
        G: Fn() -> GF,
        GF: Future<Output = Result<Op, CloudError>>,
    {
        if op.is_done() {
            return Ok(op.clone());
        }
        let name = op.short_name().to_string();
        let reg = self.register(key, &name);
        let location = &reg.location;
        let mut rx = location.latest.subscribe();
        let started = Instant::now();
        let mut due = started + poll_delay(policy, std::time::Duration::ZERO);
        loop {
            let snapshot = tokio::select! {
                Ok(()) = rx.changed() => rx.borrow_and_update().clone(),
                () = tokio::time::sleep_until(due) => {
                    let _listing = location.listing.lock().await;
                    if rx.has_changed().unwrap_or(false) {
                        // Another waiter listed while this one queued.
                        rx.borrow_and_update().clone()
                    } else {
                        let names: Vec<String> = lock(&location.waiting).keys().cloned().collect();
                        let taken = Instant::now();
                        match list(names).await {
                            Ok(ops) => {
                                let snapshot = Arc::new(Snapshot {
                                    taken,
                                    ops: ops
                                        .into_iter()
                                        .map(|o| (o.short_name().to_string(), o))
                                        .collect(),
                                });
                                location.latest.send_replace(snapshot.clone());
                                rx.borrow_and_update();
                                snapshot
                            }
                            Err(e) => {
                                tracing::warn!(location = %key, operation = %name, error = %e,
                                    "cannot list the operations of this location; reading the operation itself");
                                let current = get().await?;
                                if current.is_done() {
                                    return Ok(current);
                                }
                                let now = Instant::now();
                                due = now + poll_delay(policy, now - started);
                                continue;
                            }
                        }
                    }
                }
            };
            match snapshot.ops.get(&name) {
                Some(current) if current.is_done() => return Ok(current.clone()),
                Some(_) => {}
                // Missing from a list sent after this wait began: read it.
                None if snapshot.taken >= started => {
                    tracing::debug!(location = %key, operation = %name, "operation missing from the location's list; reading it");
                    let current = get().await?;
                    if current.is_done() {
                        return Ok(current);
                    }
                }
                // A list sent before this wait began may predate the operation.
                None => {}
            }
            due = snapshot.taken
                + poll_delay(policy, snapshot.taken.saturating_duration_since(started));
        }
    }
}

#[cfg(test)]
#[path = "poller/tests.rs"]
mod tests;
