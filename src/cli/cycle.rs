//! What `reconcile --watch` and `controller` print of a cycle
//! ([`TerminalSink`], the library cycle's printer) and how they connect
//! ([`LoopConnect`]). The cycle itself is [`crate::cycle::run_cycle`].

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Result;

use super::args::Connection;
use super::{Session, color_stdout, print_diagnostics, print_report, progress, report_skipped};
use crate::apply::Progress;
use crate::cloud::Cloud;
use crate::cycle::{Connect, CycleEnd, CycleOutcome, CycleSink, HeldSlice};
use crate::cycle::{empty_message, missing_message, pruning_message};
use crate::plan::{Plan, human};
use crate::source::last_good::Resolved;
use crate::source::{Skipped, SourceError};
use crate::spec::{Fleet, ShownPath};

/// Whose words the printer uses where the two loops say things their own
/// way.
pub(super) enum Wording {
    /// `reconcile DIR --watch`.
    Watch(PathBuf),
    /// `controller`: its source, described.
    Controller(String),
}

/// The terminal printer: the plan and the report on stdout, the state of
/// the files, refusals and errors on stderr.
pub(super) struct TerminalSink {
    pub(super) wording: Wording,
}

impl CycleSink for TerminalSink {
    fn progress(&mut self) -> Arc<dyn Progress> {
        progress()
    }

    fn skipped(&mut self, skipped: &[Skipped]) {
        report_skipped(skipped);
    }

    fn resolved(&mut self, resolved: &Resolved) {
        print_resolved(resolved);
    }

    fn plan(&mut self, plan: &Plan) {
        print!("{}", human::render(plan, color_stdout()));
    }

    async fn finished(&mut self, end: &CycleEnd<'_>) {
        self.print(end);
    }
}

impl TerminalSink {
    fn print(&self, end: &CycleEnd<'_>) {
        for h in end.capacity.iter().flat_map(|c| &c.held) {
            print_held(h);
        }
        match (&end.outcome, &self.wording) {
            (CycleOutcome::SourceMissing, Wording::Watch(dir)) => eprintln!(
                "error: {}; waiting for it to come back (nothing is planned, nothing is pruned)",
                SourceError::Missing { path: dir.clone() }
            ),
            (CycleOutcome::SourceMissing, Wording::Controller(w)) => {
                eprintln!("refused: {}", missing_message(w));
            }
            (CycleOutcome::SourceUnreadable(e), Wording::Watch(dir)) => eprintln!(
                "error: cannot read the specs under {}: {e}; nothing is planned this cycle",
                ShownPath(dir)
            ),
            (CycleOutcome::SourceUnreadable(e), Wording::Controller(w)) => {
                eprintln!(
                    "error: cannot read the specs from {w}: {e}; nothing is planned this cycle"
                );
            }
            (CycleOutcome::InvalidSpecs(d), wording) => {
                print_diagnostics(d);
                let place = match wording {
                    Wording::Watch(dir) => format!("under {}", ShownPath(dir)),
                    Wording::Controller(w) => format!("of {w}"),
                };
                eprintln!(
                    "error: {} problem(s) in the specs {place}, and no valid fleet can be made from the files and their last good versions; nothing is planned or changed this cycle",
                    d.len()
                );
            }
            // Without Targets nothing would even be observed: say so, every
            // cycle, rather than report "no changes".
            (CycleOutcome::EmptySource, Wording::Watch(dir)) => eprintln!(
                "refused: no spec files (*.yaml, *.yml) under {}: an empty checkout or an unmounted ConfigMap looks like this; \
                 nothing is planned and nothing is pruned while it is empty (use `slicectl destroy` to remove every slice)",
                ShownPath(dir)
            ),
            (CycleOutcome::EmptySource, Wording::Controller(w)) => {
                eprintln!("refused: {}", empty_message(w));
            }
            (CycleOutcome::ConnectFailed(e), _) => {
                eprintln!("error: {}", crate::error::chain_anyhow(e))
            }
            (CycleOutcome::Rejected(e), _) => eprintln!("error: {e}"),
            (CycleOutcome::PruningSuspended { left_out, .. }, Wording::Watch(dir)) => eprintln!(
                "refused: this plan deletes resources, and {} file(s) under {} are invalid with no good version to stand for them ({}); nothing is applied until they are fixed",
                left_out.len(),
                ShownPath(dir),
                paths(left_out)
            ),
            (CycleOutcome::PruningSuspended { left_out, .. }, Wording::Controller(w)) => {
                eprintln!("refused: {}", pruning_message(left_out.len(), w));
            }
            (outcome, _) => {
                if let Some(report) = outcome.report() {
                    print_report(report, end.fleet, "reconcile");
                }
            }
        }
    }
}

/// The line of a slice held back for unavailable capacity.
fn print_held(h: &HeldSlice) {
    eprintln!(
        "held: slice {}: capacity unavailable ({}) since {}; its creates and replacements are left out of this cycle ({}), next try in {}s",
        h.slice,
        h.hold.offering,
        h.hold.since,
        if h.left_out.is_empty() {
            "none planned".to_string()
        } else {
            h.left_out.join(", ")
        },
        h.hold.retry_in.as_secs()
    );
}

/// Prints every located error of the files as they are now, and what
/// stands for each invalid file.
fn print_resolved(resolved: &Resolved) {
    print_diagnostics(&resolved.diagnostics);
    for p in &resolved.held {
        eprintln!(
            "warning: {} is invalid (or valid only with a file that is); its last good version stays in force until it is fixed, and nothing it defines is deleted or replaced",
            ShownPath(p)
        );
    }
    for p in &resolved.left_out {
        eprintln!(
            "warning: {} is invalid and has no good version yet: it contributes nothing, and nothing is pruned until it is fixed",
            ShownPath(p)
        );
    }
}

fn paths(p: &[PathBuf]) -> String {
    p.iter()
        .map(|p| Path::display(p).to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The connection of a long-running command: its session connects on the
/// first valid fleet and serves every later one.
pub(super) struct LoopConnect {
    pub(super) conn: Connection,
    pub(super) session: Option<Session>,
}

impl LoopConnect {
    pub(super) fn new(conn: Connection) -> LoopConnect {
        LoopConnect {
            conn,
            session: None,
        }
    }

    /// Ends the session (stops the embedded simulator).
    pub(super) async fn close(&mut self) {
        if let Some(session) = self.session.take() {
            session.close().await;
        }
    }
}

impl Connect for LoopConnect {
    async fn cloud(&mut self, fleet: &Fleet) -> Result<Cloud> {
        if self.session.is_none() {
            self.session = Some(Session::connect(&self.conn, fleet).await?);
        }
        match &self.session {
            Some(s) => {
                // A template a later version of the specs brings gets its
                // stand-in too (under --sim; created once).
                if self.conn.sim {
                    super::seed_brought_templates(&s.client, fleet).await?;
                }
                Ok(s.cloud_for(fleet))
            }
            None => anyhow::bail!("no session"),
        }
    }
}
