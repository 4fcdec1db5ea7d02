//! Fast tests in one process, with no control plane: the pure core (golden plans, the spec
//! corpus, the example fleet's bodies), our wire types against Google's discovery documents, the
//! simulator's own tables against the client's, the simulator itself (GKE, compute, metadata
//! server, faults, responses, gcloud reading it back), the cloud client and executor on it, and the
//! documentation's links.
//!
//! One test binary of several modules, as ripgrep's tests are: one link instead of one per
//! file. Run one module with `cargo test --test integration MODULE::` (docs/testing.md).

#[path = "../common/mod.rs"]
mod common;
#[path = "../sim_support/mod.rs"]
mod sim_support;

mod apply_executor;
mod bench_harness;
mod cloud_client;
mod doc_links;
mod fuzz_front;
mod golden;
mod image;
mod kind_contract;
mod plan_specs;
mod readme_deploy;
mod sim_aggregated;
mod sim_compute;
mod sim_discovery;
mod sim_faults;
mod sim_gce;
mod sim_gcloud;
mod sim_gke;
mod sim_metadata;
mod sim_responses;
mod sim_tables;
mod spec_corpus;
mod wire_types_discovery;
