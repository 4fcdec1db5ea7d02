//! The controller's cycle sink: after its printer, the Prometheus metrics
//! of each outcome and the SliceStatus objects (with their Events), through
//! a [`StatusStore`] (the server-side-apply [`StatusWriter`], or a fake in
//! tests).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use jiff::Timestamp;

use super::metrics::{CountingProgress, Metrics};
use crate::apply::Progress;
use crate::cycle::{CycleEnd, CycleOutcome, CycleSink, PRUNING_SUSPENDED};
use crate::cycle::{empty_message, missing_message};
use crate::engine::ReconcileError;
use crate::plan::{Plan, PlanError};
use crate::source::Skipped;
use crate::source::last_good::Resolved;
use crate::spec::Fleet;
use crate::status_object::{
    self, Cycle, CycleResult, SliceStatusStatus, StatusSet, StatusWriter, WriteError, WriteSummary,
};
use crate::watch::LOG_TARGET;

/// Where the status objects go.
#[allow(async_fn_in_trait)]
pub trait StatusStore {
    /// The objects managed now, by name, with their status.
    async fn existing(&self) -> Result<BTreeMap<String, SliceStatusStatus>, WriteError>;
    /// Writes (and deletes) objects and records their Events.
    async fn write(&self, set: &StatusSet) -> Result<WriteSummary, WriteError>;
}

impl StatusStore for StatusWriter {
    async fn existing(&self) -> Result<BTreeMap<String, SliceStatusStatus>, WriteError> {
        StatusWriter::existing(self).await
    }

    async fn write(&self, set: &StatusSet) -> Result<WriteSummary, WriteError> {
        StatusWriter::write(self, set).await
    }
}

/// The controller's sink: `printer` first, then metrics and status objects.
pub struct ControllerSink<P, W> {
    /// What prints the cycle (the terminal printer).
    pub printer: P,
    /// The metrics.
    pub metrics: Metrics,
    /// The status objects.
    pub status: W,
    /// How long capacity may stay unavailable before a slice is Stalled.
    pub stall_after: Duration,
    /// Since when the specs have been broken (`None`: every file is in
    /// force as it is now).
    pub broken_since: Arc<Mutex<Option<Instant>>>,
}

impl<P, W> ControllerSink<P, W> {
    fn set_broken(&self, broken: bool) {
        if let Ok(mut g) = self.broken_since.lock() {
            if broken {
                g.get_or_insert_with(Instant::now);
            } else {
                *g = None;
            }
        }
    }

    /// Counts what the cycle refused, and what it learnt about capacity.
    fn count(&self, end: &CycleEnd<'_>) {
        if let Some(note) = &end.capacity {
            self.metrics.capacity_unavailable.inc_by(note.unavailable);
            self.metrics
                .capacity_held
                .set(i64::try_from(note.held.len()).unwrap_or(i64::MAX));
        }
        match &end.outcome {
            CycleOutcome::SourceMissing | CycleOutcome::EmptySource => {
                self.metrics.refused(end.outcome.code());
            }
            CycleOutcome::InvalidSpecs(_) => self.set_broken(true),
            CycleOutcome::Rejected(e @ ReconcileError::Plan(p)) => {
                let n = match p {
                    PlanError::Multiple(v) => v.len(),
                    _ => 1,
                };
                for _ in 0..n {
                    self.metrics.refused(e.code());
                }
            }
            outcome => {
                if let Some(r) = outcome.report() {
                    let unobserved: std::collections::BTreeSet<&str> = r
                        .plan
                        .unobserved
                        .iter()
                        .map(|u| u.target.as_str())
                        .collect();
                    self.metrics
                        .set_targets(end.fleet.targets.keys(), &unobserved);
                    self.metrics.set_held(&r.plan.held);
                }
                // The deletes a suspended prune refuses are counted once, as
                // the cycle's result, not per action.
                for r in outcome.report().iter().flat_map(|r| &r.plan.refused) {
                    if r.code != PRUNING_SUSPENDED {
                        self.metrics.refused(&r.code);
                    }
                }
            }
        }
    }
}

impl<P: CycleSink, W: StatusStore> ControllerSink<P, W> {
    /// The status objects after `end`: for the fleet in force; nothing is
    /// written when the source could not be read or the cloud reached.
    async fn write_status(&self, end: &CycleEnd<'_>) {
        let none = BTreeMap::new();
        let (message, invalid);
        let result = match &end.outcome {
            CycleOutcome::SourceUnreadable(_) | CycleOutcome::ConnectFailed(_) => return,
            CycleOutcome::SourceMissing => {
                message = missing_message(&end.source);
                invalid = &none;
                CycleResult::Failed {
                    code: end.outcome.code(),
                    message: &message,
                }
            }
            CycleOutcome::EmptySource => {
                message = empty_message(&end.source);
                invalid = &none;
                CycleResult::Failed {
                    code: end.outcome.code(),
                    message: &message,
                }
            }
            CycleOutcome::InvalidSpecs(d) => {
                message = d.first().map(ToString::to_string).unwrap_or_default();
                invalid = &none;
                CycleResult::Failed {
                    code: end.outcome.code(),
                    message: &message,
                }
            }
            CycleOutcome::Rejected(e) => {
                message = e.to_string();
                invalid = &end.invalid;
                CycleResult::Failed {
                    code: e.code(),
                    message: &message,
                }
            }
            outcome => match outcome.report() {
                Some(r) => {
                    invalid = &end.invalid;
                    CycleResult::Report(r)
                }
                None => return,
            },
        };
        self.write(end.fleet, result, invalid, &end.unavailable_since)
            .await;
    }

    async fn write(
        &self,
        fleet: &Fleet,
        result: CycleResult<'_>,
        invalid: &BTreeMap<String, String>,
        unavailable_since: &BTreeMap<String, Timestamp>,
    ) {
        // What is there now decides what may go: without it nothing is
        // written this cycle rather than delete an object blind.
        let existing = match self.status.existing().await {
            Ok(e) => e,
            Err(e) => {
                tracing::warn!(target: LOG_TARGET, error = %e, "cannot read the status objects; they are written next cycle");
                return;
            }
        };
        let set = status_object::derive(&Cycle {
            fleet,
            result,
            invalid,
            unavailable_since,
            stall_after: self.stall_after,
            now: Timestamp::now(),
            existing: &existing,
        });
        let (mut ready, mut reconciling, mut stalled) = (0, 0, 0);
        for o in &set.objects {
            let is = |t: &str| {
                o.status
                    .conditions
                    .iter()
                    .any(|c| c.type_ == t && c.status == "True")
            };
            if is("Stalled") {
                stalled += 1;
            } else if is("Ready") {
                ready += 1;
            } else {
                reconciling += 1;
            }
        }
        self.metrics.set_slices(ready, reconciling, stalled);
        match self.status.write(&set).await {
            Ok(sum) => {
                tracing::debug!(
                    target: LOG_TARGET,
                    written = sum.written.len(),
                    unchanged = sum.unchanged,
                    deleted = sum.deleted.len(),
                    "status objects written where they changed"
                );
                for e in &sum.event_errors {
                    tracing::warn!(target: LOG_TARGET, error = %e, "cannot record an Event");
                }
            }
            Err(e) => {
                tracing::warn!(target: LOG_TARGET, error = %e, "cannot write the status objects; retried next cycle");
            }
        }
    }
}

impl<P: CycleSink, W: StatusStore> CycleSink for ControllerSink<P, W> {
    fn progress(&mut self) -> Arc<dyn Progress> {
        Arc::new(CountingProgress::new(
            self.printer.progress(),
            self.metrics.in_flight.clone(),
        ))
    }

    fn skipped(&mut self, skipped: &[Skipped]) {
        self.printer.skipped(skipped);
    }

    fn resolved(&mut self, resolved: &Resolved) {
        self.set_broken(!resolved.clean());
        self.printer.resolved(resolved);
    }

    fn plan(&mut self, plan: &Plan) {
        self.printer.plan(plan);
    }

    async fn finished(&mut self, end: &CycleEnd<'_>) {
        self.printer.finished(end).await;
        self.count(end);
        self.write_status(end).await;
    }

    fn timed(&mut self, code: &str, elapsed: Duration) {
        self.metrics.cycle(code, elapsed.as_secs_f64());
        self.printer.timed(code, elapsed);
    }
}

#[cfg(test)]
#[path = "sink/tests.rs"]
mod tests;
