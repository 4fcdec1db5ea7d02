//! What the simulated VM needs of kubeadm's token discovery: bootstrap
//! tokens (`[a-z0-9]{6}.[a-z0-9]{16}`, "Authenticating with Bootstrap
//! Tokens", <https://kubernetes.io/docs/reference/access-authn-authz/bootstrap-tokens/>)
//! and the CA public-key pin `--discovery-token-ca-cert-hash` checks
//! (`sha256:` + the hex SHA-256 of the CA's DER SubjectPublicKeyInfo,
//! <https://kubernetes.io/docs/reference/setup-tools/kubeadm/kubeadm-join/>).
//!
//! The simulator's own implementation: the simulated VM plays kubeadm, so a
//! mistake in how slicectl builds a token or a pin is caught by the join,
//! not shared by it.

use std::fmt;

use secrecy::{ExposeSecret, SecretString};
use sha2::{Digest, Sha256};
use x509_cert::Certificate;
use x509_cert::der::Encode;

/// A malformed bootstrap token (the text is not repeated: it may hold a secret).
#[derive(Debug, thiserror::Error)]
#[error("malformed bootstrap token: expected [a-z0-9]{{6}}.[a-z0-9]{{16}}")]
pub struct MalformedToken;

/// A bootstrap token `<id>.<secret>`.
#[derive(Clone)]
pub struct BootstrapToken {
    id: String,
    secret: SecretString,
}

impl fmt::Debug for BootstrapToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BootstrapToken")
            .field("id", &self.id)
            .field("secret", &"<redacted>")
            .finish()
    }
}

fn is_part(s: &str, len: usize) -> bool {
    s.len() == len
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
}

impl BootstrapToken {
    /// Parses `<id>.<secret>`.
    pub fn parse(token: &str) -> Result<Self, MalformedToken> {
        let (id, secret) = token.split_once('.').ok_or(MalformedToken)?;
        if !is_part(id, 6) || !is_part(secret, 16) {
            return Err(MalformedToken);
        }
        Ok(Self {
            id: id.to_owned(),
            secret: SecretString::from(secret.to_owned()),
        })
    }

    /// The public token id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The whole token. Never log it.
    pub fn expose(&self) -> String {
        format!("{}.{}", self.id, self.secret.expose_secret())
    }

    /// `base` (cluster URL, CA, timeouts) authenticating with this token as
    /// a bearer token.
    pub fn client_config(&self, base: &kube::Config) -> kube::Config {
        let mut config = base.clone();
        config.auth_info = kube::config::AuthInfo {
            token: Some(SecretString::from(self.expose())),
            ..kube::config::AuthInfo::default()
        };
        config
    }
}

/// Errors reading a CA certificate.
#[derive(Debug, thiserror::Error)]
pub enum CaError {
    /// The PEM text or the certificate inside it could not be decoded.
    #[error("cannot parse CA certificate PEM: {0}")]
    Parse(#[source] x509_cert::der::Error),
    /// The PEM text holds no certificate.
    #[error("no CERTIFICATE block in the CA PEM")]
    Empty,
    /// The SubjectPublicKeyInfo could not be re-encoded as DER.
    #[error("cannot encode the CA's SubjectPublicKeyInfo: {0}")]
    Encode(#[source] x509_cert::der::Error),
}

/// kubeadm's pin of the first certificate in `pem`.
pub fn ca_cert_hash(pem: &str) -> Result<String, CaError> {
    let certs = Certificate::load_pem_chain(pem.as_bytes()).map_err(CaError::Parse)?;
    let cert = certs.first().ok_or(CaError::Empty)?;
    let spki = cert
        .tbs_certificate()
        .subject_public_key_info()
        .to_der()
        .map_err(CaError::Encode)?;
    Ok(format!("sha256:{}", hex::encode(Sha256::digest(&spki))))
}

#[cfg(test)]
#[path = "kubeadm/tests.rs"]
mod tests;
