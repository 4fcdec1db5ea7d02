#![cfg(test)]
use super::*;

async fn get(addr: SocketAddr, path: &str) -> (u16, String) {
    let r = reqwest::get(format!("http://{addr}{path}")).await.unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

#[tokio::test]
async fn ready_only_once_synced_and_metrics_are_served() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let h = Arc::new(Health {
        waiting: std::sync::Mutex::new(None),
        ready: AtomicBool::new(false),
        metrics: Metrics::new(),
    });
    let addr = serve("127.0.0.1:0".parse().unwrap(), h.clone())
        .await
        .unwrap();
    assert_eq!(get(addr, "/healthz").await.0, 200);
    assert_eq!(get(addr, "/readyz").await.0, 503);
    h.ready.store(true, Ordering::Relaxed);
    assert_eq!(get(addr, "/readyz").await.0, 200);
    let (code, body) = get(addr, "/metrics").await;
    assert_eq!(code, 200);
    assert!(body.contains("slicectl_leader 0"), "{body}");
    assert!(body.contains("slicectl_other_mode_waiting 0"), "{body}");
    assert!(body.ends_with("# EOF\n"), "{body}");
    // Waiting for the other mode: still ready (a standby), and says why.
    *h.waiting.lock().unwrap() = Some("the leader Lease slicectl is live".into());
    let (code, body) = get(addr, "/readyz").await;
    assert_eq!(code, 200);
    assert_eq!(body, "ok, standing by: the leader Lease slicectl is live\n");
}
