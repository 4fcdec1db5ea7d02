//! Where a cycle's results go. The cycle calls its sink as it goes (what
//! was skipped, the state of the files, the plan about to be applied) and
//! once at the end with the typed outcome. The terminal printer
//! (`cli/cycle.rs`) and the controller's sink (metrics and status objects,
//! [`crate::controller::sink`]) implement it.

use std::sync::Arc;
use std::time::Duration;

use super::CycleEnd;
use crate::apply::Progress;
use crate::plan::Plan;
use crate::source::Skipped;
use crate::source::last_good::Resolved;

/// A cycle's results, as they come.
///
/// The cycle is generic over its sink (never a trait object), so the
/// futures of `finished` need no `Send` bound of their own.
#[allow(async_fn_in_trait)]
pub trait CycleSink {
    /// The progress of the apply steps (the cycle makes it stoppable).
    fn progress(&mut self) -> Arc<dyn Progress>;
    /// Entries of the source that were not read, and why.
    fn skipped(&mut self, skipped: &[Skipped]) {
        let _ = skipped;
    }
    /// The files as they are now: located errors, held and left-out files.
    fn resolved(&mut self, resolved: &Resolved) {
        let _ = resolved;
    }
    /// The plan, with changes, about to be approved.
    fn plan(&mut self, plan: &Plan) {
        let _ = plan;
    }
    /// The cycle ended.
    async fn finished(&mut self, end: &CycleEnd<'_>);
    /// The cycle and its sink are done: its code and how long it took in
    /// all.
    fn timed(&mut self, code: &str, elapsed: Duration) {
        let _ = (code, elapsed);
    }
}
