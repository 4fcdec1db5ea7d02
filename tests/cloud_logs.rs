//! Logs of Google Cloud calls (and their retries) never contain the access
//! token. Its own test binary: tracing's per-callsite interest cache makes
//! capturing logs with a thread-local subscriber racy when other tests run
//! concurrently in the same process.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::any;
use slicectl::cloud::{ClientOptions, CloudClient, ClusterRef, RetryPolicy, StaticToken};

#[derive(Clone, Default)]
struct LogBuf(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for LogBuf {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn call_and_retry_logs_never_contain_the_token() {
    let logs = LogBuf::default();
    let writer = logs.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_writer(move || writer.clone())
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    // A server that answers 503 once, then an empty node pool list, and
    // records the Authorization headers it got.
    let auth: Arc<Mutex<Vec<String>>> = Arc::default();
    let seen = auth.clone();
    let app = Router::new().fallback(any(move |headers: HeaderMap| {
        let seen = seen.clone();
        async move {
            let mut seen = seen.lock().unwrap();
            seen.push(
                headers
                    .get("authorization")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or_default()
                    .to_string(),
            );
            if seen.len() == 1 {
                (
                    StatusCode::SERVICE_UNAVAILABLE,
                    r#"{"error":{"code":503,"message":"backend","status":"UNAVAILABLE"}}"#,
                )
            } else {
                (StatusCode::OK, r#"{"nodePools":[]}"#)
            }
        }
    }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

    let client = CloudClient::new(ClientOptions {
        api_endpoint: Some(format!("http://{addr}")),
        token_source: Some(Arc::new(StaticToken::new("ya29.very-secret"))),
        retry: RetryPolicy {
            max_attempts: 3,
            min_delay: Duration::from_millis(1),
            max_delay: Duration::from_millis(2),
        },
        ..ClientOptions::default()
    })
    .unwrap();
    let pools = client
        .gke()
        .list_node_pools(&ClusterRef::new("p", "l", "c"))
        .await
        .unwrap();
    assert!(pools.is_empty());

    let text = String::from_utf8(logs.0.lock().unwrap().clone()).unwrap();
    assert!(text.contains("retrying Google Cloud call"), "{text}");
    assert!(
        text.contains("container.projects.locations.clusters.nodePools.list"),
        "{text}"
    );
    assert!(!text.contains("very-secret"), "{text}");
    assert_eq!(
        *auth.lock().unwrap(),
        vec!["Bearer ya29.very-secret".to_string(); 2]
    );
}
