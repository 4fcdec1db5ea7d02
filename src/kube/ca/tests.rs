#![cfg(test)]
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
