//! How a cycle ended: [`CycleOutcome`], one variant per stable code, with
//! what the sinks need to report it, and [`CycleEnd`], the outcome with the
//! cycle's context (the fleet in force, invalid files, capacity).

use std::collections::BTreeMap;
use std::path::PathBuf;

use jiff::Timestamp;

use crate::controller::capacity::Hold;
use crate::engine::{ReconcileError, Report};
use crate::source::SourceError;
use crate::spec::{Diagnostic, Fleet};

/// The code of a plan declined because its deletes wait for invalid files
/// (each delete is refused with it, and the cycle ends with it).
pub const PRUNING_SUSPENDED: &str = "pruning_suspended";

/// How one cycle ended. [`CycleOutcome::code`] is stable: it is the
/// `outcome` of the `cycle finished` log line and the `result` label of
/// `slicectl_reconcile_cycles_total`.
#[derive(Debug)]
pub enum CycleOutcome {
    /// `source_missing`: the directory or ConfigMap does not exist; nothing
    /// is planned or pruned.
    SourceMissing,
    /// `source_error`: the source could not be read.
    SourceUnreadable(SourceError),
    /// `invalid_specs`: no valid fleet can be made from the files and their
    /// last good versions; every located problem.
    InvalidSpecs(Vec<Diagnostic>),
    /// `empty_source`: the source holds no spec file (and
    /// `--allow-empty-source` is not given).
    EmptySource,
    /// `connect_failed`: the cloud session could not be set up.
    ConnectFailed(anyhow::Error),
    /// The engine stopped before applying anything; the code is the
    /// error's (`empty_source`, `too_many_destructive`,
    /// `plan_refused`, `stale_plan`).
    Rejected(ReconcileError),
    /// `pruning_suspended`: the plan deletes, and files that never were
    /// valid are left out; nothing was applied and each delete is refused
    /// in the report.
    PruningSuspended {
        /// The declined plan's report.
        report: Box<Report>,
        /// The files left out.
        left_out: Vec<PathBuf>,
    },
    /// `no_changes`: nothing to do, nothing refused.
    NoChanges(Box<Report>),
    /// `applied`: the plan was applied and everything converged.
    Applied(Box<Report>),
    /// `capacity_held`: converged except the slices held back for
    /// unavailable capacity.
    CapacityHeld(Box<Report>),
    /// `refused`: a safety rail refused some changes (the rest were planned
    /// and applied).
    Refused(Box<Report>),
    /// `failed`: a step failed, or was skipped or not run.
    Failed(Box<Report>),
    /// `unobserved`: some Targets could not be observed and got no action;
    /// everything else converged (was applied, or needed nothing).
    Unobserved(Box<Report>),
}

impl CycleOutcome {
    /// The stable short code.
    pub fn code(&self) -> &'static str {
        match self {
            CycleOutcome::SourceMissing => "source_missing",
            CycleOutcome::SourceUnreadable(_) => "source_error",
            CycleOutcome::InvalidSpecs(_) => "invalid_specs",
            CycleOutcome::EmptySource => "empty_source",
            CycleOutcome::ConnectFailed(_) => "connect_failed",
            CycleOutcome::Rejected(e) => e.code(),
            CycleOutcome::PruningSuspended { .. } => PRUNING_SUSPENDED,
            CycleOutcome::NoChanges(_) => "no_changes",
            CycleOutcome::Applied(_) => "applied",
            CycleOutcome::CapacityHeld(_) => "capacity_held",
            CycleOutcome::Refused(_) => "refused",
            CycleOutcome::Failed(_) => "failed",
            CycleOutcome::Unobserved(_) => "unobserved",
        }
    }

    /// Whether the cycle converged (`no_changes`, `applied`): its log line
    /// is info, any other is a warning.
    pub fn converged(&self) -> bool {
        matches!(self, CycleOutcome::NoChanges(_) | CycleOutcome::Applied(_))
    }

    /// The engine's report, when the cycle planned.
    pub fn report(&self) -> Option<&Report> {
        match self {
            CycleOutcome::PruningSuspended { report, .. }
            | CycleOutcome::NoChanges(report)
            | CycleOutcome::Applied(report)
            | CycleOutcome::CapacityHeld(report)
            | CycleOutcome::Refused(report)
            | CycleOutcome::Failed(report)
            | CycleOutcome::Unobserved(report) => Some(report),
            _ => None,
        }
    }

    /// The outcome of a planned cycle from its report: `capacity_held` when
    /// slices were held and everything else converged; else `no_changes` /
    /// `applied` when it converged, `refused` when a rail refused something,
    /// `unobserved` when only Targets that could not be observed are left,
    /// `failed` otherwise.
    pub fn of_report(report: Report, holds: bool) -> CycleOutcome {
        let report = Box::new(report);
        if report.success() {
            if holds {
                CycleOutcome::CapacityHeld(report)
            } else if report.outcome == crate::engine::Outcome::NoChanges {
                CycleOutcome::NoChanges(report)
            } else {
                CycleOutcome::Applied(report)
            }
        } else if !report.plan.refused.is_empty() {
            CycleOutcome::Refused(report)
        } else if report
            .apply
            .as_ref()
            .is_none_or(crate::apply::ApplyReport::success)
        {
            CycleOutcome::Unobserved(report)
        } else {
            CycleOutcome::Failed(report)
        }
    }
}

/// A slice held back this cycle for unavailable capacity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldSlice {
    /// The slice.
    pub slice: String,
    /// Why, and until when.
    pub hold: Hold,
    /// Its plan actions left out (`ACTION ADDRESS`), in plan order.
    pub left_out: Vec<String>,
}

impl HeldSlice {
    /// The failure code a held slice reports: `reservation_insufficient`
    /// for a reservation, else `stockout`.
    pub fn code(&self) -> &'static str {
        if self.hold.offering.capacity.starts_with("reservation:") {
            "reservation_insufficient"
        } else {
            "stockout"
        }
    }
}

/// What a cycle that reached planning knows about capacity.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CapacityNote {
    /// Slices held back, by name.
    pub held: Vec<HeldSlice>,
    /// Capacity shortages met this cycle (found in the plan, or failed
    /// creates).
    pub unavailable: u64,
}

/// A cycle's outcome with its context, as the sinks get it.
#[derive(Debug)]
pub struct CycleEnd<'a> {
    /// How it ended.
    pub outcome: CycleOutcome,
    /// The source, for people (`ConfigMap NAME`, or the directory).
    pub source: String,
    /// The specs in force: this cycle's, or the last ones when the cycle
    /// stopped before a valid fleet was read.
    pub fleet: &'a Fleet,
    /// Slices whose spec file is invalid now (held at its last good
    /// version) → that file's first located error.
    pub invalid: BTreeMap<String, String>,
    /// `None` when the cycle stopped before planning.
    pub capacity: Option<CapacityNote>,
    /// Slices whose capacity is unavailable → since when.
    pub unavailable_since: BTreeMap<String, Timestamp>,
}

/// Why a missing source is refused (the controller's line and status).
pub fn missing_message(source: &str) -> String {
    format!(
        "the spec source {source} does not exist: nothing is planned and nothing is pruned until it is back"
    )
}

/// Why an empty source is refused (the controller's line and status).
pub fn empty_message(source: &str) -> String {
    format!(
        "no spec files (*.yaml, *.yml) in {source}: an emptied ConfigMap or an empty checkout looks like this; nothing is planned and nothing is pruned while it is empty (use `slicectl destroy` to remove every slice)"
    )
}

/// Why a plan's deletes are refused while `left_out` files are invalid
/// with no good version (each refusal's reason, the controller's line).
pub fn pruning_message(left_out: usize, source: &str) -> String {
    format!(
        "this plan deletes resources, and {left_out} file(s) in {source} are invalid with no good version to stand for them; nothing is applied until they are fixed"
    )
}
