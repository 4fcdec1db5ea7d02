//! Per-slice status objects that `kubectl` and Flux can read: a namespaced,
//! status-only custom resource (`SliceStatus`, `slicectl.dev/v1alpha1`), one
//! object per slice, with kstatus conditions (`Ready`, `Reconciling`,
//! `Stalled`) and `observedGeneration`.
//!
//! - [`crd`]: the types, from which the CRD in `deploy/crd-slicestatus.yaml`
//!   is generated ([`crd_yaml`]).
//! - [`derive`]: the pure function from a cycle's outcome to each slice's
//!   status and events.
//! - [`writer`]: writes them with server-side apply, records Events, deletes
//!   the objects of slices no longer in the specs.
//!
//! The objects only report: the specs are the source of truth, and the
//! object's spec is empty.

pub mod crd;
pub mod derive;
pub mod writer;

pub use crd::{SliceStatus, SliceStatusSpec, SliceStatusStatus, crd_yaml};
pub use derive::{Cycle, CycleResult, EventNote, SliceObject, StatusSet, derive};
pub use writer::{StatusWriter, WriteError, WriteSummary};

#[cfg(test)]
mod tests;
