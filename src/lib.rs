//! slicectl: a declarative, GitOps-style reconciler for Google Cloud TPU slices.
//!
//! The data flows `spec` → `source` → `observe` → `plan` → `apply`, with
//! `cloud` and `kube` as the edges, `engine` (one
//! reconciliation as a library call), `cycle` (one cycle of the loops: a
//! source of specs to a sink of results, with a typed outcome) and `cli` on
//! top. Each resource kind is
//! one module under `kinds`. The pure core (`spec`, `resource`, `plan`)
//! never imports the shell. The GCP simulator is its own crate,
//! `slicectl-sim` (`crates/slicectl-sim`), which only `cli` (for `slicectl sim`
//! and `--sim`) and the tests use.

pub mod apply;
pub mod bootstrap;
pub mod cli;
pub mod cloud;
pub mod controller;
pub mod cycle;
pub mod engine;
pub mod error;
/// The front-end fuzz targets' bodies (tests and `fuzz/` only).
#[cfg(any(test, feature = "test-support"))]
pub mod fuzzing;
pub mod kind;
pub mod kinds;
pub mod kube;
pub mod labels;
pub mod observe;
pub mod plan;
pub mod preflight;
pub mod resource;
pub mod source;
pub mod spec;
pub mod status;
pub mod status_object;
pub mod watch;
pub mod workload;
