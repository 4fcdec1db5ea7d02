//! Kubernetes edge: clients, bootstrap tokens and the cluster CA.

pub mod bootstrap_token;
pub mod ca;
pub mod client;

pub use bootstrap_token::{BootstrapToken, BootstrapTokenError, TokenSpec};
pub use ca::{CaError, ca_cert_hash};
pub use client::{ClientError, client_from_kubeconfig, config_from_kubeconfig};
