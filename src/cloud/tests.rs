#![cfg(test)]
use super::*;

#[test]
fn polls_notice_completion_within_a_tenth_of_the_latency() {
    let p = PollPolicy::default();
    // Simulate waiting on operations of many latencies: the delay from
    // completion to the first poll that sees it, and the reads taken.
    for latency_s in [0.5, 3.0, 20.0, 90.0, 600.0, 3600.0] {
        let latency = Duration::from_secs_f64(latency_s);
        let mut t = Duration::ZERO;
        let mut reads = 0;
        while t < latency {
            t += poll_delay(&p, t);
            reads += 1;
        }
        let late = t - latency;
        let bound = p.min_interval.max(latency.mul_f64(0.1));
        assert!(
            late <= bound,
            "L={latency_s}s: seen {late:?} late (bound {bound:?})"
        );
        assert!(reads <= 250, "L={latency_s}s: {reads} reads");
    }
}

#[test]
fn options_debug_hides_the_token_source() {
    let opts = ClientOptions {
        token_source: Some(Arc::new(StaticToken::new("ya29.secret"))),
        ..ClientOptions::default()
    };
    let dbg = format!("{opts:?}");
    assert!(!dbg.contains("ya29"), "{dbg}");
    let client = CloudClient::new(opts).unwrap();
    assert!(!format!("{client:?}").contains("ya29"));
}

#[test]
fn building_without_credentials_succeeds() {
    // Production endpoints choose GcpAuth lazily: no credentials needed to build.
    let client = CloudClient::new(ClientOptions::default()).unwrap();
    assert_eq!(client.endpoints(), &Endpoints::default());
    assert_eq!(client.stats(), RequestStats::default());
}

fn assert_send<T: Send>(_: &T) {}

#[tokio::test]
async fn call_futures_are_send_so_they_can_be_spawned() {
    let client = CloudClient::new(ClientOptions::default()).unwrap();
    let c = ClusterRef::new("p", "l", "c");
    let op = crate::resource::gke::Operation::default();
    assert_send(&client.gke().list_node_pools(&c));
    assert_send(
        &client
            .gke()
            .wait_operation("p", "l", &op, Duration::from_secs(1)),
    );
    let cop = crate::resource::compute::Operation::default();
    assert_send(&client.compute().list_resource_policies("p", "r"));
    assert_send(
        &client
            .compute()
            .wait_operation(&cop, Duration::from_secs(1)),
    );
}

fn insecure(endpoint: &str) -> ClientOptions {
    ClientOptions {
        api_endpoint: Some(endpoint.to_string()),
        ..ClientOptions::default()
    }
}

#[test]
fn refuses_credentials_over_plain_http_off_loopback() {
    for endpoint in [
        "http://10.255.255.1:9",
        "http://proxy.example.com/gcp",
        "http://[::ffff:10.0.0.1]:9",
        "http://[2001:db8::1]",
    ] {
        // Default token source (GcpAuth) and an injected token alike.
        for token_source in [None, Some(Arc::new(StaticToken::new("ya29.t")) as Arc<_>)] {
            let err = CloudClient::new(ClientOptions {
                token_source,
                ..insecure(endpoint)
            })
            .unwrap_err();
            let msg = err.to_string();
            assert!(matches!(err, CloudError::InvalidInput(_)), "{msg}");
            for want in [
                "refusing to send Google Cloud credentials",
                "unencrypted",
                "https",
                "loopback",
                "--allow-insecure-http",
            ] {
                assert!(msg.contains(want), "{endpoint}: {want:?} in {msg}");
            }
            assert!(!msg.contains("ya29"), "{msg}");
        }
    }
}

#[test]
fn allows_plain_http_with_the_flag_and_says_so() {
    let client = CloudClient::new(ClientOptions {
        allow_insecure_http: true,
        ..insecure("http://10.255.255.1:9")
    })
    .unwrap();
    assert!(client.credentials_in_clear());
}

#[test]
fn plain_http_is_fine_without_credentials_tls_or_off_the_network() {
    // NoAuth sends nothing: no flag needed.
    let client = CloudClient::new(ClientOptions {
        token_source: Some(Arc::new(NoAuth)),
        ..insecure("http://10.255.255.1:9")
    })
    .unwrap();
    assert!(!client.credentials_in_clear());
    // Loopback in every form, with the default source (NoAuth) or an injected token.
    for endpoint in [
        "http://127.0.0.1:9",
        "http://127.3.2.1:9",
        "http://[::1]:9",
        "http://[::ffff:127.0.0.1]:9",
        "http://[::ffff:7f00:1]:9",
        "http://localhost:9",
    ] {
        for token_source in [None, Some(Arc::new(StaticToken::new("t")) as Arc<_>)] {
            let client = CloudClient::new(ClientOptions {
                token_source,
                ..insecure(endpoint)
            })
            .unwrap();
            assert!(!client.credentials_in_clear(), "{endpoint}");
        }
    }
    // TLS.
    let client = CloudClient::new(insecure("https://10.255.255.1:9")).unwrap();
    assert!(!client.credentials_in_clear());
    // The flag changes nothing where nothing is in clear.
    let client = CloudClient::new(ClientOptions {
        allow_insecure_http: true,
        ..insecure("https://proxy.example.com")
    })
    .unwrap();
    assert!(!client.credentials_in_clear());
}

#[test]
fn rejects_bad_options() {
    let bad = ClientOptions {
        retry: RetryPolicy {
            max_attempts: 0,
            ..RetryPolicy::default()
        },
        ..ClientOptions::default()
    };
    assert!(CloudClient::new(bad).is_err());
    let bad = ClientOptions {
        page_size: 501,
        ..ClientOptions::default()
    };
    assert!(CloudClient::new(bad).is_err());
}
