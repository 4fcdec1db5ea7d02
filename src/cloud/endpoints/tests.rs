#![cfg(test)]
use super::*;

#[test]
fn defaults() {
    let e = Endpoints::new(None).unwrap();
    assert_eq!(
        e.container_url("projects/p/locations/l/clusters/c/nodePools"),
        "https://container.googleapis.com/v1/projects/p/locations/l/clusters/c/nodePools"
    );
    assert_eq!(
        e.compute_url("projects/p/regions/r/resourcePolicies"),
        "https://compute.googleapis.com/compute/v1/projects/p/regions/r/resourcePolicies"
    );
    assert!(!e.loopback);
    assert_eq!(Endpoints::new(Some("  ")).unwrap(), Endpoints::default());
}

#[test]
fn override_with_and_without_trailing_slash() {
    for raw in ["http://127.0.0.1:8080", "http://127.0.0.1:8080/"] {
        let e = Endpoints::new(Some(raw)).unwrap();
        assert_eq!(e.container, "http://127.0.0.1:8080/");
        assert_eq!(e.compute, "http://127.0.0.1:8080/compute/v1/");
        assert_eq!(
            e.container_url("projects/p/locations/l/operations/op"),
            "http://127.0.0.1:8080/v1/projects/p/locations/l/operations/op"
        );
        assert!(e.loopback);
    }
    let e = Endpoints::new(Some("https://proxy.example.com/gcp/")).unwrap();
    assert_eq!(e.container, "https://proxy.example.com/gcp/");
    assert_eq!(e.compute, "https://proxy.example.com/gcp/compute/v1/");
    assert!(!e.loopback);
}

#[test]
fn loopback_detection() {
    for (raw, lo) in [
        ("http://127.0.0.1:1", true),
        ("http://127.9.8.7", true),
        ("http://127.255.255.254", true),
        ("http://127.1:9", true),
        ("http://2130706433/", true),
        ("http://localhost:9", true),
        ("http://LOCALHOST", true),
        ("http://api.localhost:9", true),
        ("http://[::1]:9/", true),
        ("http://[0:0:0:0:0:0:0:1]", true),
        ("http://[::ffff:127.0.0.1]", true),
        ("http://[::ffff:127.0.0.1]:8085/", true),
        ("http://[::ffff:7f00:1]", true),
        ("http://[::FFFF:127.1.2.3]", true),
        ("http://10.0.0.1", false),
        ("http://128.0.0.1", false),
        ("http://0.0.0.0", false),
        ("http://[::]", false),
        ("http://[::ffff:10.0.0.1]", false),
        ("http://[::ffff:8000:1]", false),
        // IPv4-compatible (deprecated), not mapped: not loopback.
        ("http://[::127.0.0.1]", false),
        ("http://[::2]", false),
        ("http://[fe80::1]", false),
        ("http://localhost.example.com", false),
        ("http://127.0.0.1.nip.io", false),
        ("https://container.googleapis.com", false),
    ] {
        assert_eq!(Endpoints::new(Some(raw)).unwrap().loopback, lo, "{raw}");
    }
}

#[test]
fn credentials_in_clear_only_for_plain_http_off_loopback() {
    for (raw, clear) in [
        ("http://10.255.255.1:9", true),
        ("http://proxy.example.com", true),
        ("http://[::ffff:10.0.0.1]", true),
        ("http://[2001:db8::1]", true),
        ("HTTP://example.com", true),
        ("https://10.255.255.1:9", false),
        ("https://proxy.example.com/gcp/", false),
        ("http://127.0.0.1:8085", false),
        ("http://[::ffff:127.0.0.1]", false),
        ("http://[::1]", false),
        ("http://localhost:8085", false),
    ] {
        let e = Endpoints::new(Some(raw)).unwrap();
        assert_eq!(e.credentials_in_clear(), clear, "{raw}");
    }
    assert!(!Endpoints::default().credentials_in_clear());
}

#[test]
fn rejects_bad_overrides() {
    assert!(Endpoints::new(Some("not a url")).is_err());
    assert!(Endpoints::new(Some("ftp://x/")).is_err());
    assert!(Endpoints::new(Some("http://x/?a=b")).is_err());
}

#[test]
fn segments() {
    assert!(segment("project", "my-proj").is_ok());
    assert!(segment("project", "example.com:proj").is_ok());
    for bad in ["", "a/b", "a?b", "a b", "a#b", "%2F"] {
        assert!(segment("name", bad).is_err(), "{bad}");
    }
}
