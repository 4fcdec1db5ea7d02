//! Building kube clients from kubeconfig files.

use std::path::Path;

use ::kube::config::{KubeConfigOptions, Kubeconfig, KubeconfigError};
use ::kube::{Client, Config};

/// Errors from loading a kubeconfig or building a client from it.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The kubeconfig file could not be read or understood.
    #[error("cannot load kubeconfig {path}: {source}")]
    Kubeconfig {
        /// The kubeconfig path.
        path: String,
        /// What went wrong.
        #[source]
        source: KubeconfigError,
    },
    /// The client could not be built from the configuration.
    #[error("cannot build a Kubernetes client: {0}")]
    Client(#[source] ::kube::Error),
}

/// Loads the kubeconfig at `path` (optionally a named `context`) into a
/// client configuration.
pub async fn config_from_kubeconfig(
    path: &Path,
    context: Option<&str>,
) -> Result<Config, ClientError> {
    let err = |source| ClientError::Kubeconfig {
        path: path.display().to_string(),
        source,
    };
    let kubeconfig = Kubeconfig::read_from(path).map_err(err)?;
    let options = KubeConfigOptions {
        context: context.map(str::to_owned),
        ..KubeConfigOptions::default()
    };
    Config::from_custom_kubeconfig(kubeconfig, &options)
        .await
        .map_err(err)
}

/// A client for the kubeconfig at `path` (optionally a named `context`).
pub async fn client_from_kubeconfig(
    path: &Path,
    context: Option<&str>,
) -> Result<Client, ClientError> {
    let config = config_from_kubeconfig(path, context).await?;
    Client::try_from(config).map_err(ClientError::Client)
}
