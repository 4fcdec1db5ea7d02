//! `slicectl reconcile DIR [--watch]`: one reconciliation, or the same in a
//! loop driven by changes under DIR and a periodic resync ([`crate::watch`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result};

use super::args::{Connection, Exec, Safety, WatchArgs};
use super::{EXIT_ERROR, EXIT_OK, Session, plan_options, print_report, progress, reconcile};
use crate::apply::progress::Stoppable;
use crate::engine::{self, Outcome};
use crate::plan::{Plan, PlanMode};
use crate::source::last_good::LastGood;
use crate::source::{self, SourceError};
use crate::spec::ShownPath;
use crate::watch::{self, LOG_TARGET, LoopEnd, LoopOptions, Trigger};

/// `reconcile DIR`: one cycle (`apply --auto-approve`); with `watch`, the
/// loop.
pub(super) async fn run(
    dir: PathBuf,
    watch: Option<WatchArgs>,
    conn: Connection,
    safety: Safety,
    exec: Exec,
) -> Result<u8> {
    let Some(w) = watch else {
        let Some(loaded) = super::load_observable(&dir)? else {
            return Ok(EXIT_ERROR);
        };
        return reconcile(
            &loaded.fleet,
            &conn,
            PlanMode::Apply,
            plan_options(&safety),
            &exec,
        )
        .await;
    };
    let (signals, stop) =
        watch::forward_signals().context("cannot listen for SIGINT and SIGTERM")?;
    let (tx, changes) = tokio::sync::mpsc::unbounded_channel();
    watch::watch_dir(dir.clone(), w.debounce, tx)
        .context("cannot start the directory watcher thread")?;
    tracing::info!(
        target: LOG_TARGET,
        dir = %dir.display(),
        debounce_ms = w.debounce.as_millis(),
        resync_secs = w.resync.as_secs(),
        "watching the spec directory"
    );
    let state = Arc::new(tokio::sync::Mutex::new(Watcher {
        dir,
        last_good: LastGood::new(),
        session: None,
        conn,
        safety,
        exec,
        stop,
    }));
    let opts = LoopOptions {
        resync: w.resync,
        grace: w.grace,
    };
    let s = state.clone();
    let end = watch::run(opts, changes, signals, move |trigger| {
        let s = s.clone();
        async move { s.lock().await.cycle(trigger).await }
    })
    .await;
    if let Some(session) = state.lock().await.session.take() {
        session.close().await;
    }
    Ok(match end {
        LoopEnd::Stopped => {
            tracing::info!(target: LOG_TARGET, "stopped");
            EXIT_OK
        }
        LoopEnd::Abandoned => {
            eprintln!(
                "error: the in-flight cycle was abandoned; operations it started go on in the cloud, and the next run observes them and continues from the live state"
            );
            EXIT_ERROR
        }
    })
}

/// The loop's state between cycles: only what the files said when last
/// good, and the connection. Everything else is observed each cycle.
struct Watcher {
    dir: PathBuf,
    last_good: LastGood,
    session: Option<Session>,
    conn: Connection,
    safety: Safety,
    exec: Exec,
    /// Set at the first stop signal: no new step starts.
    stop: Arc<std::sync::atomic::AtomicBool>,
}

impl Watcher {
    async fn cycle(&mut self, trigger: Trigger) {
        let started = Instant::now();
        tracing::debug!(target: LOG_TARGET, trigger = trigger.as_str(), "cycle started");
        let outcome = self.reconcile_once().await;
        super::cycle::log_finished(trigger, outcome, started.elapsed());
    }

    /// One cycle; returns its outcome (a stable short code).
    async fn reconcile_once(&mut self) -> &'static str {
        let files = match source::list_dir(&self.dir) {
            Ok(listing) => {
                super::report_skipped(&listing.skipped);
                listing.files
            }
            Err(e @ SourceError::Missing { .. }) => {
                eprintln!(
                    "error: {e}; waiting for it to come back (nothing is planned, nothing is pruned)"
                );
                return "source_missing";
            }
            Err(e) => {
                eprintln!(
                    "error: cannot read the specs under {}: {e}; nothing is planned this cycle",
                    ShownPath(&self.dir)
                );
                return "source_error";
            }
        };
        let resolved = match self.last_good.resolve(&files) {
            Ok(r) => r,
            Err(u) => {
                super::print_diagnostics(&u.diagnostics);
                eprintln!(
                    "error: {} problem(s) in the specs under {}, and no valid fleet can be made from the files and their last good versions; nothing is planned or changed this cycle",
                    u.diagnostics.len(),
                    ShownPath(&self.dir)
                );
                return "invalid_specs";
            }
        };
        super::cycle::print_resolved(&resolved);
        let fleet = resolved.fleet;
        if fleet.files == 0 && resolved.left_out.is_empty() && !self.safety.allow_empty_source {
            // Without Targets nothing would even be observed: say so, every
            // cycle, rather than report "no changes".
            eprintln!(
                "refused: no spec files (*.yaml, *.yml) under {}: an empty checkout or an unmounted ConfigMap looks like this; \
                 nothing is planned and nothing is pruned while it is empty (use `slicectl destroy` to remove every slice)",
                ShownPath(&self.dir)
            );
            return "empty_source";
        }
        let Some(cloud) = super::loop_cloud(&mut self.session, &self.conn, &fleet).await else {
            return "connect_failed";
        };
        let ropts = super::converge_options(&self.safety, &self.exec);
        let suspend_prune = !resolved.left_out.is_empty();
        let mut prune_suspended = false;
        let approve = |plan: &Plan| {
            super::cycle::approve_unless_pruning(plan, suspend_prune, &mut prune_suspended)
        };
        let progress = Arc::new(Stoppable::new(progress(), self.stop.clone()));
        let result = engine::reconcile(&fleet, &cloud, &ropts, approve, progress).await;
        let report = match result {
            Ok(r) => r,
            Err(e) => {
                eprintln!("error: {e}");
                return e.code();
            }
        };
        if report.outcome == Outcome::Declined {
            eprintln!(
                "refused: this plan deletes resources, and {} file(s) under {} are invalid with no good version to stand for them ({}); nothing is applied until they are fixed",
                resolved.left_out.len(),
                ShownPath(&self.dir),
                paths(&resolved.left_out)
            );
            return if prune_suspended {
                "pruning_suspended"
            } else {
                "declined"
            };
        }
        let code = print_report(&report, &fleet, "reconcile");
        match (report.outcome, code) {
            (Outcome::NoChanges, EXIT_OK) => "no_changes",
            (_, EXIT_OK) => "applied",
            _ if !report.plan.refused.is_empty() => "refused",
            _ => "failed",
        }
    }
}

fn paths(p: &[PathBuf]) -> String {
    p.iter()
        .map(|p| Path::display(p).to_string())
        .collect::<Vec<_>>()
        .join(", ")
}
