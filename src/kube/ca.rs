//! The cluster CA as kubeadm pins it.

use sha2::{Digest, Sha256};
use x509_cert::Certificate;
use x509_cert::der::Encode;

/// Errors from reading a CA certificate.
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

/// The public-key pin kubeadm's `--discovery-token-ca-cert-hash` expects for
/// a CA certificate: `sha256:` followed by the lowercase hex SHA-256 of the
/// certificate's DER-encoded SubjectPublicKeyInfo.
///
/// `pem` may hold a bundle; the first certificate is the one hashed (the
/// cluster CA is first in `kube-root-ca.crt` and in kubeconfigs).
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
#[path = "ca/tests.rs"]
pub(crate) mod tests;
