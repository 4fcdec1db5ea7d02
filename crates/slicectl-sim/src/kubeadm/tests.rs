#![cfg(test)]
use super::*;

#[test]
fn parses_tokens() {
    let t = BootstrapToken::parse("abcdef.0123456789abcdef").unwrap();
    assert_eq!(t.id(), "abcdef");
    assert_eq!(t.expose(), "abcdef.0123456789abcdef");
    assert!(!format!("{t:?}").contains("0123456789abcdef"));
    for bad in [
        "abcdef",
        "ABCDEF.0123456789abcdef",
        "abcde.0123456789abcdef",
        "abcdef.0123",
    ] {
        assert!(BootstrapToken::parse(bad).is_err(), "{bad}");
    }
}

/// The pin of a fixed CA, computed with kubeadm's documented command
/// (`openssl x509 -pubkey -noout | openssl pkey -pubin -outform der |
/// sha256sum`).
#[test]
fn matches_the_openssl_pin() {
    const TEST_CA: &str = "-----BEGIN CERTIFICATE-----
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
    assert_eq!(
        ca_cert_hash(TEST_CA).unwrap(),
        "sha256:5d141242e5e0eb5682b93dce36751262bc384b12506d026f3aa8cdc819ca2e45"
    );
    assert!(ca_cert_hash("").is_err());
}
