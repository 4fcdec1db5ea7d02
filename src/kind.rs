//! The kind contract: what a resource kind is and what it may return, in
//! one place. A kind (a module under `crate::kinds`) implements
//! [`Kind`] (pure: render, compare, ownership, the scopes it lives in, its
//! replacement ranking) and [`KindExec`] (the shell: observe, execute), and
//! returns [`Comparison`]s, [`Observed`] listings, [`StepOutcome`]s and
//! [`ApplyError`]s (its own failure codes as [`ApplyError::Kind`]). The
//! engine reads the registry (`crate::kinds::REGISTRY`) and hands the kinds
//! to planning, observation and execution; nothing there imports a kind.
//!
//! Kinds import the engine's types from here only (a test below keeps it
//! so); the cloud seam (`crate::cloud`), the wire types
//! (`crate::resource`), the specs (`crate::spec`) and the Kubernetes seam
//! (`crate::kube`) they use directly.

pub use crate::apply::schedule::{OpSlot, Rejection, Scheduler};
pub use crate::apply::{
    ApplyError, KindExec, Observed, RegisteredKind, StepOp, StepOutcome, conflict, desired_body,
    judge_conflict, refuse_protected, same_owner,
};
pub use crate::plan::adopt::Adoptable;
pub use crate::plan::kind::{
    Body, Comparison, Desired, Kind, KindId, LiveReport, LiveResource, LiveState, NotReady,
    OperationRecord, RenderCtx, Resource, ResourceId, Scope, SliceRef, UpdateGroup, body_as,
};
pub use crate::plan::workload::{GKE_NODEPOOL, Hosts};
pub use crate::plan::{Action, ActionKind, Inventory, Reason, hash, names, ownership};

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    /// Every non-test source file under `dir`.
    fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let p = e.path();
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            if p.is_dir() {
                sources(&p, out);
            } else if name.ends_with(".rs") && name != "tests.rs" && !name.ends_with("_tests.rs") {
                out.push(p);
            }
        }
    }

    /// Kinds reach the planner's and the executor's types through the
    /// contract only: a kind that imports `crate::plan` or `crate::apply`
    /// directly depends on more than what a kind is.
    #[test]
    fn kinds_import_only_the_contract() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/kinds");
        let mut files = Vec::new();
        sources(&root, &mut files);
        assert!(files.len() > 5, "{files:?}");
        let mut offenders = Vec::new();
        for f in &files {
            let text = std::fs::read_to_string(f).unwrap_or_default();
            // Unit tests at the end of a file may use the whole crate.
            let code = text.split("#[cfg(test)]").next().unwrap_or_default();
            for (i, line) in code.lines().enumerate() {
                let line = line.trim_start();
                if line.starts_with("//") {
                    continue;
                }
                if line.contains("crate::plan") || line.contains("crate::apply") {
                    offenders.push(format!("{}:{}: {line}", f.display(), i + 1));
                }
            }
        }
        assert!(
            offenders.is_empty(),
            "kinds must import the engine's types from crate::kind:\n{}",
            offenders.join("\n")
        );
    }
}
