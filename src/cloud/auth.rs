//! Access tokens for Google Cloud calls, behind a small trait so tests (and
//! the simulator) can do without credentials.

use std::fmt;
use std::sync::Arc;

use futures::FutureExt;
use futures::future::BoxFuture;
use tokio::sync::OnceCell;

use super::error::CloudError;

/// The OAuth scope slicectl asks for.
pub const CLOUD_PLATFORM_SCOPE: &str = "https://www.googleapis.com/auth/cloud-platform";

/// A source of bearer tokens. `Ok(None)` means "send no Authorization header".
///
/// Tokens are secrets: implementations must never log them or show them in `Debug`.
pub trait TokenSource: Send + Sync {
    /// The token to send with the next request (cached by the implementation).
    fn token(&self) -> BoxFuture<'_, Result<Option<String>, CloudError>>;

    /// Whether this source may ever produce a token. Only a source that never
    /// does ([`NoAuth`]) may be used over plain `http` to a host that is not
    /// loopback without `allow_insecure_http`.
    fn sends_credentials(&self) -> bool {
        true
    }
}

/// Sends no credentials (the simulator, a local proxy).
#[derive(Debug, Clone, Copy, Default)]
pub struct NoAuth;

impl TokenSource for NoAuth {
    fn token(&self) -> BoxFuture<'_, Result<Option<String>, CloudError>> {
        futures::future::ready(Ok(None)).boxed()
    }

    fn sends_credentials(&self) -> bool {
        false
    }
}

/// A fixed token (tests, or a token minted elsewhere). `Debug` redacts it.
#[derive(Clone)]
pub struct StaticToken(String);

impl StaticToken {
    /// Wraps a token.
    pub fn new(token: impl Into<String>) -> Self {
        StaticToken(token.into())
    }
}

impl fmt::Debug for StaticToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("StaticToken(<redacted>)")
    }
}

impl TokenSource for StaticToken {
    fn token(&self) -> BoxFuture<'_, Result<Option<String>, CloudError>> {
        futures::future::ready(Ok(Some(self.0.clone()))).boxed()
    }
}

/// An access token read from a file at every use, as gcloud's
/// `--access-token-file` / `CLOUDSDK_AUTH_ACCESS_TOKEN_FILE` does ("A file
/// path to read the access token ... The file should only contain an access
/// token with no other information", `gcloud topic` / gcloud-wide flags,
/// <https://cloud.google.com/sdk/gcloud/reference>): no ADC, no metadata
/// server, no gcloud. Whatever rewrites the file (a sidecar minting tokens,
/// `gcloud auth print-access-token > FILE`) is picked up by the next
/// request. Surrounding whitespace is trimmed; an empty or unreadable file
/// is an error naming the path. `Debug` shows the path, never the token.
#[derive(Clone)]
pub struct AccessTokenFile {
    path: std::path::PathBuf,
}

impl AccessTokenFile {
    /// A source reading `path` at each use (nothing is read here).
    pub fn new(path: impl Into<std::path::PathBuf>) -> Self {
        AccessTokenFile { path: path.into() }
    }

    /// The file read.
    pub fn path(&self) -> &std::path::Path {
        &self.path
    }

    async fn read(&self) -> Result<Option<String>, CloudError> {
        let shown = self.path.display();
        let raw = tokio::fs::read_to_string(&self.path).await.map_err(|e| {
            CloudError::Auth(format!(
                "cannot read the access token file {shown} (--access-token-file / \
                 SLICECTL_ACCESS_TOKEN_FILE): {e}; write a Google access token into it \
                 (`gcloud auth print-access-token > {shown}`) or drop the flag to use \
                 Application Default Credentials"
            ))
        })?;
        let token = raw.trim();
        if token.is_empty() {
            return Err(CloudError::Auth(format!(
                "the access token file {shown} (--access-token-file / SLICECTL_ACCESS_TOKEN_FILE) \
                 is empty; write a Google access token into it (`gcloud auth print-access-token > \
                 {shown}`)"
            )));
        }
        if token.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(CloudError::Auth(format!(
                "the access token file {shown} (--access-token-file / SLICECTL_ACCESS_TOKEN_FILE) \
                 holds more than one token (whitespace inside); it must hold only an access \
                 token, as gcloud's --access-token-file does"
            )));
        }
        Ok(Some(token.to_owned()))
    }
}

impl fmt::Debug for AccessTokenFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AccessTokenFile")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl TokenSource for AccessTokenFile {
    fn token(&self) -> BoxFuture<'_, Result<Option<String>, CloudError>> {
        self.read().boxed()
    }
}

/// Google credentials through `gcp_auth`: `GOOGLE_APPLICATION_CREDENTIALS`, the
/// gcloud ADC file, the metadata server (GKE workload identity, GCE) or
/// `gcloud auth print-access-token`, in that order. The provider is found
/// lazily on the first call, so building a client never fails for lack of
/// credentials; gcp_auth caches tokens until they expire.
#[derive(Default)]
pub struct GcpAuth {
    provider: OnceCell<Arc<dyn gcp_auth::TokenProvider>>,
}

impl GcpAuth {
    /// A source that discovers credentials on first use.
    pub fn new() -> Self {
        GcpAuth::default()
    }

    async fn fetch(&self) -> Result<Option<String>, CloudError> {
        let provider = self
            .provider
            .get_or_try_init(|| async {
                tracing::debug!("discovering Google Cloud credentials");
                gcp_auth::provider()
                    .await
                    .map_err(|e| CloudError::Auth(e.to_string()))
            })
            .await?;
        let token = provider
            .token(&[CLOUD_PLATFORM_SCOPE])
            .await
            .map_err(|e| CloudError::Auth(e.to_string()))?;
        Ok(Some(token.as_str().to_string()))
    }
}

impl fmt::Debug for GcpAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GcpAuth")
            .field("scope", &CLOUD_PLATFORM_SCOPE)
            .field("initialized", &self.provider.initialized())
            .finish()
    }
}

impl TokenSource for GcpAuth {
    fn token(&self) -> BoxFuture<'_, Result<Option<String>, CloudError>> {
        self.fetch().boxed()
    }
}

#[cfg(test)]
#[path = "auth/tests.rs"]
mod tests;
