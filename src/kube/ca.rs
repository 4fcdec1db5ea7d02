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
pub(crate) mod tests {
    use super::*;

    /// A fixed CA; the expected pin was computed with the command kubeadm's
    /// documentation gives: `openssl x509 -pubkey -noout | openssl pkey
    /// -pubin -outform der | sha256sum`.
    pub(crate) const TEST_CA: &str = "-----BEGIN CERTIFICATE-----
MIIBlzCCAT2gAwIBAgIUWUgIFdphsweI8FqOKsfZKKoBBkUwCgYIKoZIzj0EAwIw
IDEeMBwGA1UEAwwVc2xpY2VjdGwtdW5pdC10ZXN0LWNhMCAXDTI2MTEyMjEyNTA1
NFoYDzIxMjYxMDI5MTI1MDU0WjAgMR4wHAYDVQQDDBVzbGljZWN0bC11bml0LXRl
c3QtY2EwWTATBgcqhkjOPQIBBggqhkjOPQMBBwNCAATNGP4qJOYbld1EIbpasluv
cOTrJPEPbUVempqeT3jrpHo42PHbkrRkoQQY5GdeojNYWQc5X7OEJSH2w4+4QANx
o1MwUTAdBgNVHQ4EFgQURktRZcoBx7TAqVvpi8ASxH159OMwHwYDVR0jBBgwFoAU
RktRZcoBx7TAqVvpi8ASxH159OMwDwYDVR0TAQH/BAUwAwEB/zAKBggqhkjOPQQD
AgNIADBFAiBHmPvFnVpxcKVe/r9Ql5WDLaSkoUFESJlVKZGJY2HWywIhAPLMmShG
+AEKlcmhb/TsgMnvrj6iYv2o98lXND5LNhuF
-----END CERTIFICATE-----
";

    #[test]
    fn matches_the_openssl_pin() {
        assert_eq!(
            ca_cert_hash(TEST_CA).expect("hash"),
            "sha256:5d141242e5e0eb5682b93dce36751262bc384b12506d026f3aa8cdc819ca2e45"
        );
        // A bundle: the first certificate is pinned.
        let bundle = format!("{TEST_CA}{TEST_CA}");
        assert_eq!(
            ca_cert_hash(&bundle).expect("hash"),
            ca_cert_hash(TEST_CA).expect("hash")
        );
    }

    #[test]
    fn rejects_garbage_and_empty_input() {
        assert!(matches!(
            ca_cert_hash("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"),
            Err(CaError::Parse(_))
        ));
        assert!(ca_cert_hash("").is_err());
    }
}
