#![cfg(test)]
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::any;

use super::*;
use crate::cloud::{ClientOptions, CloudClient, PollPolicy, RetryPolicy, StaticToken};

/// What the test server saw, and how many failures it still has to give.
#[derive(Default)]
struct Seen {
    queries: Vec<String>,
    auth: Vec<Option<String>>,
    fail_first: usize,
    fail_status: u16,
    fail_body: String,
}

type Shared = Arc<Mutex<Seen>>;

async fn handler(
    State(seen): State<Shared>,
    RawQuery(q): RawQuery,
    headers: HeaderMap,
) -> (StatusCode, String) {
    let mut s = seen.lock().unwrap();
    s.queries.push(q.unwrap_or_default());
    s.auth.push(
        headers
            .get("authorization")
            .map(|v| v.to_str().unwrap().to_string()),
    );
    if s.fail_first > 0 {
        s.fail_first -= 1;
        return (
            StatusCode::from_u16(s.fail_status).unwrap(),
            s.fail_body.clone(),
        );
    }
    (StatusCode::OK, r#"{"name":"op-1","status":"DONE"}"#.into())
}

async fn server(seen: Shared) -> String {
    let app = Router::new().fallback(any(handler)).with_state(seen);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}")
}

fn fast(base: &str, max_attempts: u32) -> ClientOptions {
    ClientOptions {
        api_endpoint: Some(base.to_string()),
        retry: RetryPolicy {
            max_attempts,
            min_delay: Duration::from_millis(1),
            max_delay: Duration::from_millis(5),
        },
        poll: PollPolicy::fast_for_tests(),
        ..ClientOptions::default()
    }
}

#[tokio::test]
async fn request_id_is_stable_across_retries() {
    let seen: Shared = Arc::new(Mutex::new(Seen {
        fail_first: 2,
        fail_status: 503,
        fail_body: r#"{"error":{"code":503,"message":"backend","status":"UNAVAILABLE"}}"#.into(),
        ..Seen::default()
    }));
    let base = server(seen.clone()).await;
    let client = CloudClient::new(fast(&base, 5)).unwrap();
    let req = Request::new(
        Method::POST,
        "compute.resourcePolicies.insert",
        format!("{base}/compute/v1/projects/p/regions/r/resourcePolicies"),
    )
    .json(&serde_json::json!({"name": "x"}))
    .unwrap()
    .with_request_id();
    let id = req.request_id().unwrap().to_string();
    assert!(uuid::Uuid::parse_str(&id).is_ok());
    let op: crate::resource::compute::Operation = client.inner.call(&req).await.unwrap();
    assert_eq!(op.status, "DONE");
    let s = seen.lock().unwrap();
    assert_eq!(s.queries.len(), 3, "two failures then success");
    for q in &s.queries {
        assert_eq!(q, &format!("requestId={id}"));
    }
    let stats = client.stats();
    assert_eq!((stats.reads, stats.writes, stats.retries), (0, 3, 2));
    // A second logical call gets a new id.
    let again = Request::new(Method::POST, "m", String::new()).with_request_id();
    assert_ne!(again.request_id(), Some(id.as_str()));
}

#[tokio::test]
async fn gives_up_after_max_attempts_with_the_last_error() {
    let seen: Shared = Arc::new(Mutex::new(Seen {
        fail_first: 100,
        fail_status: 429,
        fail_body: r#"{"error":{"code":429,"message":"slow down","status":"RESOURCE_EXHAUSTED","errors":[{"reason":"rateLimitExceeded"}]}}"#.into(),
        ..Seen::default()
    }));
    let base = server(seen.clone()).await;
    let client = CloudClient::new(fast(&base, 3)).unwrap();
    let req = Request::new(Method::GET, "m.get", format!("{base}/x"));
    let err = client
        .inner
        .call::<serde_json::Value>(&req)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, CloudError::Api { status: 429, reason: Some(r), .. } if r == "rateLimitExceeded")
    );
    assert_eq!(seen.lock().unwrap().queries.len(), 3);
    assert_eq!(client.stats().reads, 3);
}

#[tokio::test]
async fn permanent_errors_are_not_retried() {
    let seen: Shared = Arc::new(Mutex::new(Seen {
        fail_first: 100,
        fail_status: 404,
        fail_body: r#"{"error":{"code":404,"message":"gone","status":"NOT_FOUND"}}"#.into(),
        ..Seen::default()
    }));
    let base = server(seen.clone()).await;
    let client = CloudClient::new(fast(&base, 5)).unwrap();
    let req = Request::new(Method::GET, "m.get", format!("{base}/x"));
    let err = client
        .inner
        .call::<serde_json::Value>(&req)
        .await
        .unwrap_err();
    assert!(err.is_not_found());
    assert_eq!(seen.lock().unwrap().queries.len(), 1);
}

#[tokio::test]
async fn bearer_token_is_sent_when_a_source_gives_one_and_not_otherwise() {
    let seen: Shared = Arc::new(Mutex::new(Seen::default()));
    let base = server(seen.clone()).await;
    // Loopback endpoint: NoAuth by default.
    let client = CloudClient::new(fast(&base, 1)).unwrap();
    let req = Request::new(Method::GET, "m.get", format!("{base}/x"));
    client.inner.call::<serde_json::Value>(&req).await.unwrap();
    // Injected token source.
    let opts = ClientOptions {
        token_source: Some(Arc::new(StaticToken::new("tok-123"))),
        ..fast(&base, 1)
    };
    let client = CloudClient::new(opts).unwrap();
    client.inner.call::<serde_json::Value>(&req).await.unwrap();
    let s = seen.lock().unwrap();
    assert_eq!(s.auth, vec![None, Some("Bearer tok-123".to_string())]);
}

#[tokio::test]
async fn bad_success_json_is_a_decode_error_with_context() {
    let seen: Shared = Arc::new(Mutex::new(Seen::default()));
    let base = server(seen.clone()).await;
    let client = CloudClient::new(fast(&base, 3)).unwrap();
    let req = Request::new(Method::GET, "m.get", format!("{base}/x"));
    // The body is an object, not a list.
    let err = client.inner.call::<Vec<u32>>(&req).await.unwrap_err();
    match &err {
        CloudError::Decode {
            method,
            url,
            snippet,
            ..
        } => {
            assert_eq!(method, "m.get");
            assert!(url.ends_with("/x"));
            assert!(snippet.contains("op-1"));
        }
        other => panic!("unexpected {other:?}"),
    }
    assert!(!err.is_retryable());
    assert_eq!(seen.lock().unwrap().queries.len(), 1);
}

#[tokio::test]
async fn connection_refused_is_a_retryable_transport_error() {
    // Bind and drop to get a port nobody listens on.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let base = format!("http://{addr}");
    let client = CloudClient::new(fast(&base, 2)).unwrap();
    let req = Request::new(Method::GET, "m.get", format!("{base}/x"));
    let err = client
        .inner
        .call::<serde_json::Value>(&req)
        .await
        .unwrap_err();
    assert!(matches!(&err, CloudError::Transport { url, .. } if url.ends_with("/x")));
    assert!(err.is_retryable());
    assert_eq!(client.stats().retries, 1);
}
