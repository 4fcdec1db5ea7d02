#![cfg(test)]
//! Unit tests of the per-location operation poller.

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
