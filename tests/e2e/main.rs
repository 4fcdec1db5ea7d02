//! End to end: the `slicectl` binary against the simulator (and, for `gce` Targets and the
//! controller, the real test control plane: `SLICECTL_TEST_KUBECONFIG`).
//!
//! One test binary of several modules, as ripgrep's tests are: one link instead of one per
//! file. Run one module with `cargo test --test e2e MODULE::` (docs/testing.md).

#[path = "../common/mod.rs"]
mod common;
// Pods on slices: a simulated GKE cluster linked to the test control plane.
#[path = "../sim_gke_support/mod.rs"]
mod sim_gke_support;
// JobSets through the real JobSet controller (SLICECTL_TEST_JOBSET).
#[path = "../jobset_support/mod.rs"]
mod jobset_support;

mod cli;
mod e2e_adopt;
mod e2e_controller;
mod e2e_converge;
mod e2e_disrupt;
mod e2e_gate;
mod e2e_gce;
mod e2e_gke_token;
mod e2e_guards;
mod e2e_isolation;
mod e2e_jobsets;
mod e2e_kill;
mod e2e_linked;
mod e2e_monitoring;
mod e2e_moves;
mod e2e_preflight;
mod e2e_readiness;
mod e2e_release;
mod e2e_renames;
mod e2e_rules;
mod e2e_safety;
mod e2e_scheduled;
mod e2e_settle;
mod e2e_shards;
mod e2e_watch;
