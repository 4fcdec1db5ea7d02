//! Kubernetes edge: clients, bootstrap tokens, the cluster CA, and the seam
//! ([`KubeService`]) through which the GCE backend works on a self-managed
//! cluster: its real implementation ([`KubeClients`]) and a recording fake
//! (`fake::FakeKube`, built for tests and with the `test-support` feature).

pub mod bootstrap_token;
pub mod ca;
pub mod client;
pub mod clients;
pub mod demand;
pub mod error;
/// The recording fake (unit tests, and integration tests through the
/// `test-support` feature; not in the product).
#[cfg(any(test, feature = "test-support"))]
pub mod fake;
pub mod gke;
pub mod kubeconfig;
pub mod service;

pub use bootstrap_token::{BootstrapToken, BootstrapTokenError, TokenSpec};
pub use ca::{CaError, ca_cert_hash};
pub use client::{ClientError, client_from_kubeconfig, config_from_kubeconfig};
pub use clients::{GkeLink, KubeClients};
pub use error::{Attempt, KubeError};
pub use kubeconfig::{Origin, TrustedKubeconfigs};
pub use service::{
    DevicePluginObjects, Eviction, FIELD_MANAGER, Kube, KubeService, LabelSelector, StoredToken,
    UNSCHEDULABLE_TAINT_KEY, is_cordoned, unschedulable_taint,
};
