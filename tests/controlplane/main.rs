//! Against the real test control plane (`SLICECTL_TEST_KUBECONFIG`, `SLICECTL_TEST_KUBEADM`):
//! the Kubernetes seam, the startup script's real `kubeadm join` discovery, a simulated VM joining
//! through a real CSR, the status objects and kstatus, `deploy/`, and pods the real scheduler
//! binds onto a linked simulated GKE pool's hollow nodes (`SLICECTL_TEST_KUBEMARK`).
//! And `deploy/` with the real image on a real kubelet (`SLICECTL_TEST_NODE`, `scripts/k8s-testnode.sh`).
//!
//! One test binary of several modules, as ripgrep's tests are: one link instead of one per
//! file. Run one module with `cargo test --test controlplane MODULE::` (docs/testing.md).

#[path = "../common/mod.rs"]
mod common;
#[path = "../sim_gke_support/mod.rs"]
mod sim_gke_support;
// JobSets through the real JobSet controller (SLICECTL_TEST_JOBSET).
#[path = "../jobset_support/mod.rs"]
mod jobset_support;
#[path = "../sim_kubelet_support/mod.rs"]
mod sim_kubelet_support;

mod bootstrap_script;
mod deploy;
mod gke_readiness;
mod jobset_pods;
mod k8s_controlplane;
mod kube_service;
mod lease_race;
mod real_kubelet;
mod sim_gke_pods;
mod sim_kubelet;
mod status_object;
