//! Admin HTTP server: `/healthz` (liveness), `/readyz` (readiness), `/metrics` (OpenMetrics text).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use prometheus_client::registry::Registry;
use tokio_util::sync::CancellationToken;

/// Readiness of one process: ready while standing by for the Lease, or once the leader's caches
/// synced, or when the controller is disabled by `--controllers`.
#[derive(Debug, Clone, Default)]
pub struct Readiness {
    inner: Arc<ReadinessInner>,
}

#[derive(Debug, Default)]
struct ReadinessInner {
    standby: AtomicBool,
    synced: AtomicBool,
    idle: AtomicBool,
}

impl Readiness {
    /// Marks the caches synced (called by the controller once its reflector stores are ready).
    pub fn set_synced(&self, v: bool) {
        self.inner.synced.store(v, Ordering::Release);
    }
    /// Marks the process a standby waiting for the Lease.
    pub fn set_standby(&self, v: bool) {
        self.inner.standby.store(v, Ordering::Release);
    }
    /// Marks the controller disabled (nothing to sync; always ready).
    pub fn set_idle(&self, v: bool) {
        self.inner.idle.store(v, Ordering::Release);
    }
    /// Whether `/readyz` answers 200.
    pub fn is_ready(&self) -> bool {
        self.inner.idle.load(Ordering::Acquire)
            || self.inner.standby.load(Ordering::Acquire)
            || self.inner.synced.load(Ordering::Acquire)
    }
    /// Whether the caches synced.
    pub fn is_synced(&self) -> bool {
        self.inner.synced.load(Ordering::Acquire)
    }
}

#[derive(Clone)]
struct AdminState {
    registry: Arc<Registry>,
    readiness: Readiness,
}

async fn healthz() -> &'static str {
    "ok"
}

async fn readyz(State(s): State<AdminState>) -> impl IntoResponse {
    if s.readiness.is_ready() {
        (StatusCode::OK, "ok")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "caches not synced")
    }
}

async fn metrics(State(s): State<AdminState>) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        crate::metrics::encode(&s.registry),
    )
}

/// The router, for tests that call it without a socket.
pub fn router(registry: Arc<Registry>, readiness: Readiness) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/livez", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .with_state(AdminState {
            registry,
            readiness,
        })
}

/// Binds the admin server and serves it until `shutdown` is cancelled. Returns the bound address
/// (useful with port 0) and the serving task.
pub async fn serve(
    addr: SocketAddr,
    registry: Arc<Registry>,
    readiness: Readiness,
    shutdown: CancellationToken,
) -> std::io::Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    let app = router(registry, readiness);
    let task = tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app)
            .with_graceful_shutdown(shutdown.cancelled_owned())
            .await
        {
            tracing::error!(error = %e, "admin server failed");
        }
    });
    Ok((local, task))
}
