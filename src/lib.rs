//! slicectl: a declarative, GitOps-style reconciler for Google Cloud TPU slices.
//!
//! The data flows `spec` → `source` → `observe` → `plan` → `apply`, with
//! `cloud` and `kube` as the edges, `sim` beside them and `cli` on top. The
//! pure core (`spec`, `resource`, `plan`) never imports the shell.

pub mod kube;
pub mod plan;
pub mod resource;
pub mod spec;
