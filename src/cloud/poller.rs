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
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use super::*;
    use crate::resource::gke::{Operation, RpcStatus};

    /// A location whose operations finish at set times (paused tokio clock).
    #[derive(Default)]
    struct FakeLocation {
        /// name → (finishes at, fails).
        ops: Mutex<HashMap<String, (Instant, bool)>>,
        /// Names left out of lists (an operation paged past, or dropped).
        hidden: Mutex<Vec<String>>,
        lists: AtomicUsize,
        gets: AtomicUsize,
        /// The next this many lists fail.
        failing_lists: AtomicUsize,
    }

    impl FakeLocation {
        fn start(&self, name: &str, latency: Duration, fails: bool) -> Operation {
            lock(&self.ops).insert(name.into(), (Instant::now() + latency, fails));
            Operation {
                name: name.into(),
                status: "RUNNING".into(),
                ..Operation::default()
            }
        }

        fn render(&self, name: &str) -> Operation {
            let (at, fails) = lock(&self.ops)[name];
            let done = Instant::now() >= at;
            Operation {
                name: name.into(),
                status: if done { "DONE" } else { "RUNNING" }.into(),
                error: (done && fails).then(|| RpcStatus {
                    code: 8,
                    message: "no capacity".into(),
                }),
                ..Operation::default()
            }
        }

        async fn list(&self) -> Result<Vec<Operation>, CloudError> {
            self.lists.fetch_add(1, Ordering::SeqCst);
            if self
                .failing_lists
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok()
            {
                return Err(CloudError::InvalidInput("list refused".into()));
            }
            let names: Vec<String> = lock(&self.ops).keys().cloned().collect();
            let hidden = lock(&self.hidden).clone();
            Ok(names
                .iter()
                .filter(|n| !hidden.contains(n))
                .map(|n| self.render(n))
                .collect())
        }

        async fn get(&self, name: &str) -> Result<Operation, CloudError> {
            self.gets.fetch_add(1, Ordering::SeqCst);
            Ok(self.render(name))
        }
    }

    /// Waits on `op` in `loc`, returning the operation and when it was seen DONE.
    async fn wait(
        poller: &Poller<Operation>,
        loc: &FakeLocation,
        key: &str,
        op: Operation,
    ) -> (Operation, Instant) {
        let name = op.name.clone();
        let done = poller
            .wait(
                key,
                &op,
                &PollPolicy::default(),
                |_| loc.list(),
                || loc.get(&name),
            )
            .await
            .unwrap();
        (done, Instant::now())
    }

    /// The ticks one waiter alone would need for an operation of `latency`
    /// with the delay at its shortest (jitter takes up to a quarter off).
    fn most_ticks(latency: Duration) -> usize {
        let p = PollPolicy::default();
        let mut t = Duration::ZERO;
        let mut ticks = 0;
        while t < latency {
            t += p.min_interval.max(t.mul_f64(0.1)).mul_f64(0.75);
            ticks += 1;
        }
        ticks + 1
    }

    #[tokio::test(start_paused = true)]
    async fn one_list_per_tick_serves_every_waiter_of_a_location() {
        let poller = Poller::default();
        let loc = FakeLocation::default();
        let n = 40;
        let latency = Duration::from_secs(5);
        let waits = (0..n).map(|i| {
            let op = loc.start(&format!("operation-{i}"), latency, false);
            wait(&poller, &loc, "projects/p/locations/l", op)
        });
        let done = futures::future::join_all(waits).await;
        assert!(done.iter().all(|(op, _)| op.status == "DONE"));
        let lists = loc.lists.load(Ordering::SeqCst);
        // One waiter alone polls about 6 times in 5 s; 40 waiters together
        // list no more often than that, and never read one operation.
        assert!(
            lists <= most_ticks(latency),
            "{lists} lists for {n} waiters (at most {})",
            most_ticks(latency)
        );
        assert_eq!(loc.gets.load(Ordering::SeqCst), 0);
        assert_eq!(poller.locations(), 0, "finished waits leave nothing behind");
    }

    #[tokio::test(start_paused = true)]
    async fn locations_are_listed_apart() {
        let poller = Poller::default();
        let (a, b) = (FakeLocation::default(), FakeLocation::default());
        let latency = Duration::from_secs(3);
        let waits = (0..10).map(|i| {
            let (loc, key) = if i % 2 == 0 { (&a, "a") } else { (&b, "b") };
            let op = loc.start(&format!("operation-{i}"), latency, false);
            wait(&poller, loc, key, op)
        });
        futures::future::join_all(waits).await;
        for loc in [&a, &b] {
            let lists = loc.lists.load(Ordering::SeqCst);
            assert!((1..=most_ticks(latency)).contains(&lists), "{lists}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn each_operation_is_seen_done_within_a_tenth_of_its_age() {
        let poller = Poller::default();
        let loc = FakeLocation::default();
        // Old and young waiters mixed: starts staggered, latencies from
        // 0.5 s to 10 min; the young ones make the location list often, and
        // the old ones must still be seen in time.
        let specs: Vec<(u64, f64)> = vec![
            (0, 600.0),
            (0, 0.5),
            (3, 90.0),
            (10, 20.0),
            (30, 3.0),
            (200, 300.0),
            (450, 100.0),
        ];
        let waits = specs.iter().enumerate().map(|(i, &(start, latency))| {
            let (poller, loc) = (&poller, &loc);
            async move {
                tokio::time::sleep(Duration::from_secs(start)).await;
                let began = Instant::now();
                let latency = Duration::from_secs_f64(latency);
                let op = loc.start(&format!("operation-{i}"), latency, false);
                let (_, seen) = wait(poller, loc, "l", op).await;
                let late = seen - (began + latency);
                let bound = Duration::from_secs(1).max(latency.mul_f64(0.1));
                assert!(
                    late <= bound,
                    "L={latency:?}: seen DONE {late:?} late (bound {bound:?})"
                );
            }
        });
        futures::future::join_all(waits).await;
        // Compare with the 600 s waiter alone (its ticks are the longest
        // chain); the others overlap it, so the lists stay well below the
        // sum of every waiter's own polls.
        let lists = loc.lists.load(Ordering::SeqCst);
        let alone: usize = specs
            .iter()
            .map(|&(_, l)| most_ticks(Duration::from_secs_f64(l)))
            .sum();
        assert!(lists < alone, "{lists} lists, {alone} polls one by one");
        assert_eq!(loc.gets.load(Ordering::SeqCst), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_operation_fails_only_its_own_wait() {
        let poller = Poller::default();
        let loc = FakeLocation::default();
        let latency = Duration::from_secs(2);
        let ok = loc.start("operation-ok", latency, false);
        let bad = loc.start("operation-bad", latency, true);
        let (ok, bad) = tokio::join!(wait(&poller, &loc, "l", ok), wait(&poller, &loc, "l", bad));
        assert!(crate::cloud::gke::operation_result(ok.0).is_ok());
        let err = crate::cloud::gke::operation_result(bad.0).unwrap_err();
        assert!(
            matches!(&err, CloudError::OperationFailed { operation, .. } if operation == "operation-bad"),
            "{err}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn an_operation_missing_from_the_list_is_read_itself() {
        let poller = Poller::default();
        let loc = FakeLocation::default();
        let latency = Duration::from_secs(4);
        let listed = loc.start("operation-listed", latency, false);
        let paged_past = loc.start("operation-paged-past", latency, false);
        lock(&loc.hidden).push("operation-paged-past".into());
        let (a, b) = tokio::join!(
            wait(&poller, &loc, "l", listed),
            wait(&poller, &loc, "l", paged_past)
        );
        assert_eq!((a.0.status.as_str(), b.0.status.as_str()), ("DONE", "DONE"));
        let (lists, gets) = (
            loc.lists.load(Ordering::SeqCst),
            loc.gets.load(Ordering::SeqCst),
        );
        // One get per list, for the missing operation only.
        assert!(gets >= 1 && gets <= lists, "{lists} lists, {gets} gets");
        assert!(b.1 - a.1 <= Duration::from_secs(1), "{:?}", b.1 - a.1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_list_falls_back_to_reading_the_operation() {
        let poller = Poller::default();
        let loc = FakeLocation::default();
        loc.failing_lists.store(100, Ordering::SeqCst);
        let op = loc.start("operation-1", Duration::from_secs(3), false);
        let (done, _) = wait(&poller, &loc, "l", op).await;
        assert_eq!(done.status, "DONE");
        assert!(loc.gets.load(Ordering::SeqCst) >= 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_done_operation_costs_no_read() {
        let poller = Poller::default();
        let loc = FakeLocation::default();
        let mut op = loc.start("operation-1", Duration::ZERO, false);
        op.status = "DONE".into();
        wait(&poller, &loc, "l", op).await;
        assert_eq!(
            loc.lists.load(Ordering::SeqCst) + loc.gets.load(Ordering::SeqCst),
            0
        );
    }
}
