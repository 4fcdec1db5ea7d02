//! `/healthz`, `/readyz` and `/metrics`.
//!
//! - `/healthz`: 200 while the process serves (liveness).
//! - `/readyz`: 200 once the specs were read once (the ConfigMap watch's
//!   first answer, or the mounted directory); a standby is ready without
//!   leading, and so is a replica waiting for a controller of the other
//!   mode (the body says why). 503 before.
//! - `/metrics`: the OpenMetrics text of [`super::metrics::Metrics`].

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use super::metrics::Metrics;

/// What the endpoints serve.
pub struct Health {
    /// Set once the caches are synced.
    pub ready: AtomicBool,
    /// Why this replica runs no cycle while a controller of the other mode
    /// writes the Targets ([`super::mode`]), said by `/readyz`.
    pub waiting: std::sync::Mutex<Option<String>>,
    /// The metrics.
    pub metrics: Metrics,
}

async fn healthz() -> &'static str {
    "ok\n"
}

async fn readyz(State(h): State<Arc<Health>>) -> Response {
    let waiting = h.waiting.lock().ok().and_then(|w| w.clone());
    if h.ready.load(Ordering::Relaxed) {
        // A replica waiting for the other mode is a ready standby: 503
        // would stall the rolling update that is to replace the other
        // mode's pods (its new pods never ready, its old ones never gone).
        match waiting {
            Some(why) => (StatusCode::OK, format!("ok, standing by: {why}\n")).into_response(),
            None => (StatusCode::OK, "ok\n").into_response(),
        }
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "not ready: the specs have not been read yet\n",
        )
            .into_response()
    }
}

async fn metrics(State(h): State<Arc<Health>>) -> Response {
    match h.metrics.encode() {
        Ok(body) => (
            [(
                header::CONTENT_TYPE,
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
            )],
            body,
        )
            .into_response(),
        Err(e) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("cannot encode metrics: {e}\n"),
        )
            .into_response(),
    }
}

/// The router.
pub fn router(h: Arc<Health>) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .with_state(h)
}

/// Binds `addr` and serves in a task; returns the bound address.
pub async fn serve(addr: SocketAddr, h: Arc<Health>) -> std::io::Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, router(h)).await {
            tracing::error!(error = %e, "the health and metrics server stopped");
        }
    });
    Ok(bound)
}

#[cfg(test)]
#[path = "server/tests.rs"]
mod tests;
