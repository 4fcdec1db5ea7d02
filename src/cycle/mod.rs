//! One reconcile cycle, in the library: read the specs from a
//! [`SpecSource`], resolve them against their last good versions, refuse an
//! empty or missing source, hold slices back for unavailable capacity,
//! hold steps that destroy capacity until working files settle
//! ([`settle`]), observe, plan and apply through
//! [`crate::engine::reconcile_with`], and
//! hand a typed [`CycleOutcome`] (with a stable code) to a [`CycleSink`].
//! `reconcile --watch` and `controller` both run [`run_cycle`]; they only
//! choose the source, the connection and the sink.
//!
//! A cycle runs under the `cycle` span, its planning under `plan` and its
//! apply under `apply` (target [`LOG_TARGET`]); each decision a user must
//! see (held, refused, deferred) is an event (`decisions.rs`).

mod capacity;
mod decisions;
pub mod outcome;
pub mod settle;
pub mod sink;
pub mod source;
#[cfg(test)]
pub(crate) mod tests;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use jiff::Timestamp;
use tracing::Instrument;

use crate::apply::Progress;
use crate::apply::progress::Stoppable;
use crate::cloud::Cloud;
use crate::controller::capacity::CapacityTracker;
use crate::controller::{hold_for_capacity, invalid_slices};
use crate::engine::{self, Approval, Outcome, ReconcileError, ReconcileOptions};
use crate::plan::{ActionKind, Plan};
use crate::source::last_good::{LastGood, Resolved};
use crate::spec::Fleet;
use crate::watch::{LOG_TARGET, Trigger};

pub use outcome::{
    CapacityNote, CycleEnd, CycleOutcome, HeldSlice, PRUNING_SUSPENDED, empty_message,
    missing_message, pruning_message,
};
pub use settle::{SETTLING, Settle};
pub use sink::CycleSink;
pub use source::{
    AnySource, ConfigMapSetSource, ConfigMapSource, DirSource, GitSource, SpecSource,
};

/// The cloud for a cycle's fleet: a long-running command connects on its
/// first valid fleet and serves every later one.
#[allow(async_fn_in_trait)]
pub trait Connect {
    /// The cloud for `fleet`; an error ends the cycle (`connect_failed`)
    /// and the next cycle tries again.
    async fn cloud(&mut self, fleet: &Fleet) -> anyhow::Result<Cloud>;
}

/// What a loop keeps between cycles: the last good version of each file,
/// the fleet last in force, and (controller) the capacity tracker.
/// Everything else is observed each cycle.
pub struct CycleState {
    options: ReconcileOptions,
    last_good: LastGood,
    last_fleet: Fleet,
    capacity: Option<CapacityTracker>,
    settle: Option<Settle>,
    stop: Arc<AtomicBool>,
    /// The workload slices the last plan added (pending JobSets'): held
    /// for capacity like the specs' slices (the tracker is this loop's
    /// memory of shortages anyway; the slices are derived again each cycle).
    last_demand: crate::workload::Demand,
    /// Sharded controller: the shards this cycle plans (the fleet is cut to
    /// their Targets).
    scope: Option<crate::controller::shard::ShardScope>,
}

impl CycleState {
    /// A loop converging with `options`; `stop` set (a stop signal) starts
    /// no new step.
    pub fn new(options: ReconcileOptions, stop: Arc<AtomicBool>) -> CycleState {
        CycleState {
            options,
            last_good: LastGood::new(),
            last_fleet: Fleet::default(),
            capacity: None,
            settle: None,
            stop,
            last_demand: crate::workload::Demand::default(),
            scope: None,
        }
    }

    /// Plans only the Targets of the shards `scope` holds from the next
    /// cycle on (sharded controller; `None`: the whole fleet).
    pub fn set_scope(&mut self, scope: Option<crate::controller::shard::ShardScope>) {
        self.scope = scope;
    }

    /// Holds the steps that destroy capacity until a source that can be
    /// read half written ([`SpecSource::settles`]) has been unchanged for
    /// `period` ([`settle`]).
    pub fn with_settle(mut self, period: Duration) -> CycleState {
        self.settle = Some(Settle::new(period));
        self
    }

    /// When the loop must run the next cycle: the end of the settle period
    /// of the steps the last cycle held, the end of the first grace period
    /// a workload slice was kept for, or the end of the first capacity
    /// backoff (controller), whichever comes first.
    pub fn wake_at(&self) -> Option<(tokio::time::Instant, Trigger)> {
        let settle = self
            .settle
            .as_ref()
            .and_then(Settle::wake_at)
            .map(|at| (at, Trigger::Settle));
        let release = self.last_demand.release_due.map(|due| {
            // Wall time to the loop's clock; a due time already past runs
            // the next cycle at once.
            let left = due.duration_since(Timestamp::now());
            let at = tokio::time::Instant::now() + Duration::try_from(left).unwrap_or_default();
            (at, Trigger::Grace)
        });
        let backoff = self
            .capacity
            .as_ref()
            .and_then(|c| c.next_retry(tokio::time::Instant::now()))
            .map(|at| (at, Trigger::Backoff));
        settle
            .into_iter()
            .chain(release)
            .chain(backoff)
            .min_by_key(|w| w.0)
    }

    /// Holds slices back while their capacity is unavailable (the
    /// controller).
    pub fn with_capacity(mut self, tracker: CapacityTracker) -> CycleState {
        self.capacity = Some(tracker);
        self
    }

    /// The capacity tracker, when there is one.
    pub fn capacity(&self) -> Option<&CapacityTracker> {
        self.capacity.as_ref()
    }

    /// The fleet last in force.
    pub fn last_fleet(&self) -> &Fleet {
        &self.last_fleet
    }
}

/// Runs one cycle from `source` to `sink`, under the `cycle` span, and
/// returns its outcome. The sink gets the outcome with its context
/// ([`CycleEnd`]) before this returns; then the `cycle finished` line is
/// logged.
pub async fn run_cycle<S, C, K>(
    state: &mut CycleState,
    source: &S,
    connect: &mut C,
    sink: &mut K,
    trigger: Trigger,
) -> CycleOutcome
where
    S: SpecSource,
    C: Connect,
    K: CycleSink,
{
    let started = Instant::now();
    let span = tracing::info_span!(target: LOG_TARGET, "cycle", trigger = trigger.as_str());
    let outcome = async {
        tracing::debug!(target: LOG_TARGET, trigger = trigger.as_str(), "cycle started");
        let (outcome, invalid, capacity) = state.turn(source, connect, sink).await;
        let end = CycleEnd {
            outcome,
            source: source.describe(),
            fleet: &state.last_fleet,
            invalid,
            capacity,
            unavailable_since: state
                .capacity
                .as_ref()
                .map(CapacityTracker::unavailable_since)
                .unwrap_or_default(),
        };
        sink.finished(&end).await;
        end.outcome
    }
    .instrument(span)
    .await;
    let elapsed = started.elapsed();
    sink.timed(outcome.code(), elapsed);
    log_finished(trigger, &outcome, elapsed);
    outcome
}

/// The `cycle finished` line: info for `no_changes` and `applied`, warn for
/// any other outcome.
fn log_finished(trigger: Trigger, outcome: &CycleOutcome, elapsed: Duration) {
    let duration_ms = u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX);
    let trigger = trigger.as_str();
    let code = outcome.code();
    if outcome.converged() || matches!(outcome, CycleOutcome::Settling(_)) {
        tracing::info!(target: LOG_TARGET, trigger, duration_ms, outcome = code, "cycle finished");
    } else {
        tracing::warn!(target: LOG_TARGET, trigger, duration_ms, outcome = code, "cycle finished");
    }
}

type Turn = (CycleOutcome, BTreeMap<String, String>, Option<CapacityNote>);

impl CycleState {
    /// The cycle itself: its outcome, the invalid files' slices, and what
    /// it knows about capacity (once it planned).
    async fn turn<S, C, K>(&mut self, source: &S, connect: &mut C, sink: &mut K) -> Turn
    where
        S: SpecSource,
        C: Connect,
        K: CycleSink,
    {
        let where_ = source.describe();
        let (files, stamp) = match source.read() {
            Ok(Some(listing)) => {
                sink.skipped(&listing.skipped);
                // Settle: this read starts or continues the period.
                if let Some(s) = self.settle.as_mut().filter(|_| source.settles()) {
                    s.read(&listing.stamp, tokio::time::Instant::now());
                }
                (listing.files, listing.stamp)
            }
            Ok(None) => {
                decisions::refused_cycle("source_missing", &where_, &missing_message(&where_));
                return (CycleOutcome::SourceMissing, BTreeMap::new(), None);
            }
            Err(e) => return (CycleOutcome::SourceUnreadable(e), BTreeMap::new(), None),
        };
        let resolved = match self.last_good.resolve(&files) {
            Ok(r) => r,
            Err(u) => {
                return (
                    CycleOutcome::InvalidSpecs(u.diagnostics),
                    BTreeMap::new(),
                    None,
                );
            }
        };
        sink.resolved(&resolved);
        let invalid = invalid_slices(&resolved);
        let Resolved {
            fleet, left_out, ..
        } = resolved;
        if fleet.files == 0 && left_out.is_empty() && !self.options.plan.allow_empty_source {
            decisions::refused_cycle("empty_source", &where_, &empty_message(&where_));
            return (CycleOutcome::EmptySource, BTreeMap::new(), None);
        }
        // Sharded: only this replica's Targets. The others' slices are
        // never pruned (their capacity carries their Target's stamp:
        // `other_source`, their dependents `held_back`); those refusals
        // are another replica's business and are dropped from this plan
        // below.
        let (fleet, others) = match &self.scope {
            Some(s) => s.cut(fleet),
            None => (fleet, std::collections::BTreeSet::new()),
        };
        let mut invalid = invalid;
        invalid.retain(|slice, _| !others.contains(slice));
        self.last_fleet = fleet;
        let fleet = &self.last_fleet;
        let cloud = match connect.cloud(fleet).await {
            Ok(c) => c,
            Err(e) => return (CycleOutcome::ConnectFailed(e), invalid, None),
        };

        let settle = self.settle.as_mut().filter(|_| source.settles());
        let mut settling: Option<(String, usize)> = None;

        // Capacity holds: slices not retried while backing off, and pools
        // the plan finds in an error state after a stockout.
        let now = tokio::time::Instant::now();
        let wall = Timestamp::now();
        let with_workloads = self.last_demand.extend(fleet);
        let mut holds = capacity::initial_holds(self.capacity.as_mut(), &with_workloads, now);
        let mut left_out_actions = Vec::new();
        let mut found_in_plan = 0;
        let capacity = &mut self.capacity;
        let edit = |p: &mut Plan| {
            p.refused.retain(|r| !others.contains(&r.slice));
            if let Some(t) = capacity.as_mut() {
                (left_out_actions, found_in_plan) =
                    hold_for_capacity(p, fleet, t, &mut holds, now, wall);
            }
            // Steps that destroy capacity wait for the source to settle,
            // judged now, just before approval, from the source read again.
            if let Some(s) = settle
                && p.actions.iter().any(settle::destroys_capacity)
            {
                let at = tokio::time::Instant::now();
                let again = source.restamp();
                let verdict = s.judge(&stamp, again.as_ref(), at);
                if let settle::Verdict::Settling { until, .. } = verdict {
                    let why = settle::message(&where_, s.period(), &verdict, at);
                    let n = settle::hold(p, &why);
                    s.held_until(until);
                    settling = Some((why, n));
                }
            }
        };
        // While a file that never was valid is left out, nothing is pruned.
        let suspend_prune = !left_out.is_empty();
        let progress: Arc<dyn Progress> =
            Arc::new(Stoppable::new(sink.progress(), self.stop.clone()));
        let approve = |plan: &Plan| {
            sink.plan(plan);
            if suspend_prune && plan.actions.iter().any(|a| a.action == ActionKind::Delete) {
                Approval::Declined
            } else {
                Approval::Auto
            }
        };
        let result =
            engine::reconcile_with(fleet, &cloud, &self.options, edit, approve, progress).await;

        let held = capacity::held_slices(holds, &left_out_actions);
        for h in &held {
            decisions::held(fleet, h);
        }
        if let Some((why, n)) = &settling {
            decisions::settling(&where_, *n, why);
        }
        let mut note = CapacityNote {
            held,
            unavailable: u64::try_from(found_in_plan).unwrap_or(u64::MAX),
        };
        let mut report = match result {
            Ok(r) => r,
            Err(e) => {
                if let ReconcileError::Plan(_) = &e {
                    decisions::refused_cycle(e.code(), &where_, &e.to_string());
                }
                return (CycleOutcome::Rejected(e), invalid, Some(note));
            }
        };
        // Sharded: the other replicas' slices seen in a shared cluster are
        // theirs to report.
        if !others.is_empty() {
            report.slices.retain(|x| !others.contains(&x.slice));
            report.status.retain(|x| !others.contains(&x.slice));
            report.not_ready.retain(|x| !others.contains(&x.slice));
        }
        self.last_demand = report.plan.demand.clone();
        let with_workloads = self.last_demand.extend(fleet);
        note.unavailable = note.unavailable.saturating_add(capacity::record(
            self.capacity.as_mut(),
            &with_workloads,
            &report,
            &note.held,
            now,
            wall,
        ));
        capacity::report_holds(&mut report.slices, &note.held);
        // A held slice is reported as held for capacity, not again as a
        // replica that will not become ready.
        report
            .not_ready
            .retain(|n| !note.held.iter().any(|h| h.slice == n.slice));
        for d in &report.plan.deferred {
            decisions::deferred(fleet, d);
        }
        for u in &report.plan.unobserved {
            decisions::unobserved(u);
        }
        if report.outcome == Outcome::Declined {
            // The slices whose deletes wait say so (Refused), whether or
            // not they are still in the specs.
            report.refuse_deletes(PRUNING_SUSPENDED, &pruning_message(left_out.len(), &where_));
            for r in &report.plan.refused {
                decisions::refused(fleet, r);
            }
            let outcome = CycleOutcome::PruningSuspended {
                report: Box::new(report),
                left_out,
            };
            return (outcome, invalid, Some(note));
        }
        for r in report.plan.refused.iter().filter(|r| r.code != SETTLING) {
            decisions::refused(fleet, r);
        }
        let outcome = CycleOutcome::of_report(report, !note.held.is_empty());
        (outcome, invalid, Some(note))
    }
}
