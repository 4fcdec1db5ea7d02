//! What a cycle of `reconcile --watch` and of `controller` print and decide
//! the same way: the cycle's log line, the state of the files (their
//! located errors, held and left-out files), and the approval of a plan
//! while a never-valid file suspends pruning.

use std::time::Duration;

use super::color_stdout;
use crate::engine::Approval;
use crate::plan::{ActionKind, Plan, human};
use crate::source::last_good::Resolved;
use crate::spec::ShownPath;
use crate::watch::{LOG_TARGET, Trigger};

/// The `cycle finished` line: info for `no_changes` and `applied`, warn for
/// any other outcome.
pub(super) fn log_finished(trigger: Trigger, outcome: &str, elapsed: Duration) {
    let duration_ms = u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX);
    let trigger = trigger.as_str();
    if matches!(outcome, "no_changes" | "applied") {
        tracing::info!(target: LOG_TARGET, trigger, duration_ms, outcome, "cycle finished");
    } else {
        tracing::warn!(target: LOG_TARGET, trigger, duration_ms, outcome, "cycle finished");
    }
}

/// Prints every located error of the files as they are now, and what
/// stands for each invalid file.
pub(super) fn print_resolved(resolved: &Resolved) {
    super::print_diagnostics(&resolved.diagnostics);
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

/// Prints the plan and approves it, unless pruning is suspended (a file
/// that never was valid is left out) and the plan deletes something: then
/// it is declined and `prune_suspended` is set.
pub(super) fn approve_unless_pruning(
    plan: &Plan,
    suspend_prune: bool,
    prune_suspended: &mut bool,
) -> Approval {
    print!("{}", human::render(plan, color_stdout()));
    if suspend_prune && plan.actions.iter().any(|a| a.action == ActionKind::Delete) {
        *prune_suspended = true;
        Approval::Declined
    } else {
        Approval::Auto
    }
}
