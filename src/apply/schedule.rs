//! Scheduling writes to the cloud's real limits, not to a worker count.
//!
//! - A running long operation holds no worker: a step that waits on an
//!   operation is just a sleeping task, so hundreds can be in flight.
//! - Writes per scope (a GKE cluster) go through a [`Gate`] that follows
//!   GKE's concurrency rules. The per-cluster quota of concurrent operations
//!   is not assumed: until the first 429 "Too many operations … quota N"
//!   names it, a cluster gets one write request at a time (operations still
//!   run in parallel), so at most one write per cluster is ever rejected for
//!   the quota. Once learned, a write is sent only while fewer than N
//!   operations run there, and a write that has to wait starts when one of
//!   that cluster's operations finishes (the gate is notified), not after a
//!   backoff timer.
//! - Requests being sent at once are bounded by `--parallelism`.
//!
//! Every write the cloud rejected for these rules is counted and reported.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};

/// Why the cloud rejected a write under its concurrency rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rejection {
    /// The per-scope quota of concurrent operations (GKE's 429 "Too many
    /// operations"), with the number it named.
    Quota(Option<u32>),
    /// Another operation excludes this one (GKE's 400 "incompatible
    /// operation"). A cluster-level one holds the whole scope: the caller
    /// [`Scheduler::block`]s it until that operation ends.
    Busy,
}

#[derive(Debug, Default)]
struct GateState {
    /// The learned quota of concurrent operations; `None` until the cloud
    /// names it.
    limit: Option<usize>,
    /// Our operations running in the scope (including in-flight ones we
    /// wait on).
    running: usize,
    /// Our write requests sent and not yet answered.
    sending: usize,
    /// Operations not ours that held quota slots when we were last refused.
    foreign: usize,
    /// A cluster-level operation blocks every write until it finishes.
    blocked: usize,
}

impl GateState {
    fn can_send(&self) -> bool {
        if self.blocked > 0 {
            return false;
        }
        match self.limit {
            None => self.sending == 0,
            Some(l) => self.running + self.sending + self.foreign < l,
        }
    }
}

/// The write gate of one scope.
#[derive(Debug, Default)]
pub struct Gate {
    state: Mutex<GateState>,
    changed: Notify,
}

impl Gate {
    fn lock(&self) -> MutexGuard<'_, GateState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn update(&self, f: impl FnOnce(&mut GateState)) {
        f(&mut self.lock());
        self.changed.notify_waiters();
    }
}

/// Schedules the writes of one apply.
#[derive(Debug)]
pub struct Scheduler {
    gates: Mutex<HashMap<String, Arc<Gate>>>,
    sends: Arc<Semaphore>,
    rejected: AtomicU64,
}

impl Scheduler {
    /// A scheduler sending at most `parallelism` requests at once.
    pub fn new(parallelism: usize) -> Scheduler {
        Scheduler {
            gates: Mutex::new(HashMap::new()),
            sends: Arc::new(Semaphore::new(parallelism.max(1))),
            rejected: AtomicU64::new(0),
        }
    }

    fn gate(&self, scope: &str) -> Arc<Gate> {
        let mut gates = self.gates.lock().unwrap_or_else(|e| e.into_inner());
        gates.entry(scope.to_string()).or_default().clone()
    }

    /// Waits until a write may be sent in `scope`, and holds its place.
    /// Answer with [`SendPermit::accepted`] or [`SendPermit::rejected`];
    /// dropping the permit (the request failed otherwise) frees the place.
    pub async fn send(&self, scope: &str) -> SendPermit {
        let gate = self.gate(scope);
        loop {
            let notified = gate.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let mut s = gate.lock();
                if s.can_send() {
                    s.sending += 1;
                    break;
                }
            }
            notified.await;
        }
        // Holds the place from here, so a cancelled wait gives it back.
        let mut permit = SendPermit {
            gate,
            _slot: None,
            answered: false,
        };
        // A closed semaphore (never closed here) still lets the write go.
        permit._slot = self.sends.clone().acquire_owned().await.ok();
        permit
    }

    /// Counts an operation already running in `scope` (one we wait on but
    /// did not start in this apply) until the returned slot is dropped.
    pub fn track(&self, scope: &str) -> OpSlot {
        let gate = self.gate(scope);
        gate.update(|s| s.running += 1);
        OpSlot { gate }
    }

    /// How many operations of ours run in `scope`.
    #[cfg(test)]
    fn ours_running(&self, scope: &str) -> usize {
        self.gate(scope).lock().running
    }

    /// A foreign operation that held a slot in `scope` has finished.
    pub fn foreign_finished(&self, scope: &str) {
        self.gate(scope)
            .update(|s| s.foreign = s.foreign.saturating_sub(1));
    }

    /// Holds every write in `scope` until the returned guard is dropped (a
    /// cluster-level operation runs there).
    pub fn block(&self, scope: &str) -> Blocked {
        let gate = self.gate(scope);
        gate.update(|s| s.blocked += 1);
        Blocked { gate }
    }

    /// Writes the cloud rejected under its concurrency rules.
    pub fn rejected_writes(&self) -> u64 {
        self.rejected.load(Ordering::Relaxed)
    }

    /// The quotas learned, by scope.
    pub fn learned_quotas(&self) -> BTreeMap<String, usize> {
        let gates = self.gates.lock().unwrap_or_else(|e| e.into_inner());
        gates
            .iter()
            .filter_map(|(k, g)| Some((k.clone(), g.lock().limit?)))
            .collect()
    }
}

/// A place to send one write in a scope.
#[derive(Debug)]
pub struct SendPermit {
    gate: Arc<Gate>,
    _slot: Option<OwnedSemaphorePermit>,
    answered: bool,
}

impl SendPermit {
    /// The cloud accepted the write and started an operation: it holds a
    /// place in the scope until the returned slot is dropped (when the
    /// operation has finished).
    pub fn accepted(mut self) -> OpSlot {
        self.answered = true;
        self.gate.update(|s| {
            s.sending -= 1;
            s.running += 1;
        });
        OpSlot {
            gate: self.gate.clone(),
        }
    }

    /// The cloud rejected the write under its concurrency rules. Returns how
    /// many slots operations that are not ours hold (learned from the quota
    /// it named), which the caller should wait on when no operation of ours
    /// will wake the gate.
    pub fn rejected(mut self, sched: &Scheduler, why: Rejection) -> usize {
        self.answered = true;
        sched.rejected.fetch_add(1, Ordering::Relaxed);
        let mut foreign = 0;
        self.gate.update(|s| {
            s.sending -= 1;
            if let Rejection::Quota(named) = why {
                // The quota is what GKE names; without a number, what was
                // running when it refused (ours and others' alike).
                let limit = named
                    .map(|n| n as usize)
                    .unwrap_or(s.running + s.sending + s.foreign)
                    .max(1);
                s.limit = Some(limit);
                s.foreign = limit.saturating_sub(s.running + s.sending);
                foreign = s.foreign;
            }
        });
        foreign
    }
}

impl Drop for SendPermit {
    fn drop(&mut self) {
        if !self.answered {
            self.gate.update(|s| s.sending -= 1);
        }
    }
}

/// An operation of ours running in a scope; dropping it frees its place and
/// wakes the writes waiting there.
#[derive(Debug)]
pub struct OpSlot {
    gate: Arc<Gate>,
}

impl Drop for OpSlot {
    fn drop(&mut self) {
        self.gate
            .update(|s| s.running = s.running.saturating_sub(1));
    }
}

/// Every write in a scope held back while a cluster-level operation runs.
#[derive(Debug)]
pub struct Blocked {
    gate: Arc<Gate>,
}

impl Drop for Blocked {
    fn drop(&mut self) {
        self.gate
            .update(|s| s.blocked = s.blocked.saturating_sub(1));
    }
}

#[cfg(test)]
#[path = "schedule/tests.rs"]
mod tests;
