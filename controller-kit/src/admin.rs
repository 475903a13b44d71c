//! Admin HTTP server: `/healthz` (liveness), `/readyz` (readiness), `/metrics` (OpenMetrics text),
//! and in shadow mode `/plan` (the writes not made, JSON).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;

use crate::metrics::Registries;
use tokio_util::sync::CancellationToken;

/// Readiness of one process: ready while standing by for the Lease, or once the leader's caches
/// synced and the cloud accepts its token, or when the controller is disabled by `--controllers`.
#[derive(Debug, Clone, Default)]
pub struct Readiness {
    inner: Arc<ReadinessInner>,
}

#[derive(Debug, Default)]
struct ReadinessInner {
    standby: AtomicBool,
    synced: AtomicBool,
    idle: AtomicBool,
    /// The cloud token, when the controller calls the cloud: not ready while it is refused.
    credentials: OnceLock<Arc<cloud_client::Credentials>>,
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
    /// Makes readiness fail while the cloud refuses `credentials`' current token.
    pub fn watch_credentials(&self, credentials: Arc<cloud_client::Credentials>) {
        let _ = self.inner.credentials.set(credentials);
    }
    /// Whether `/readyz` answers 200.
    pub fn is_ready(&self) -> bool {
        self.why_not_ready().is_none()
    }
    /// What `/readyz` says when it answers 503.
    pub fn why_not_ready(&self) -> Option<&'static str> {
        let inner = &self.inner;
        if inner.idle.load(Ordering::Acquire) || inner.standby.load(Ordering::Acquire) {
            return None;
        }
        if !inner.synced.load(Ordering::Acquire) {
            return Some("caches not synced");
        }
        if inner.credentials.get().is_some_and(|c| c.status().refused) {
            return Some("the cloud API refuses the current token (401): waiting for a new one");
        }
        None
    }
    /// Whether the caches synced.
    pub fn is_synced(&self) -> bool {
        self.inner.synced.load(Ordering::Acquire)
    }
}

#[derive(Clone)]
struct AdminState {
    readiness: Readiness,
}

async fn healthz() -> &'static str {
    "ok"
}

async fn readyz(State(s): State<AdminState>) -> impl IntoResponse {
    match s.readiness.why_not_ready() {
        None => (StatusCode::OK, "ok"),
        Some(why) => (StatusCode::SERVICE_UNAVAILABLE, why),
    }
}

async fn metrics(State(registries): State<Arc<Registries>>) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        crate::metrics::encode(&registries),
    )
}

/// The probes, plus `/metrics` when `registries` is given and `/plan` in shadow mode.
pub fn router(
    registries: Option<Arc<Registries>>,
    readiness: Readiness,
    plan: Option<Arc<cloud_client::shadow::PlannedWrites>>,
) -> Router {
    let probes = Router::new()
        .route("/healthz", get(healthz))
        .route("/livez", get(healthz))
        .route("/readyz", get(readyz))
        .with_state(AdminState { readiness })
        .merge(
            Router::new()
                .route("/plan", get(planned_writes_json))
                .with_state(plan),
        );
    match registries {
        Some(r) => probes.merge(metrics_router(r)),
        None => probes,
    }
}

/// `/plan`: every write shadow mode planned instead of making it, oldest first.
async fn planned_writes_json(
    State(plan): State<Option<Arc<cloud_client::shadow::PlannedWrites>>>,
) -> axum::response::Response {
    match plan {
        Some(plan) => axum::Json(plan.entries()).into_response(),
        None => (
            StatusCode::NOT_FOUND,
            "not in shadow mode: /plan lists planned writes with --dry-run",
        )
            .into_response(),
    }
}

/// `/metrics` alone (served on the provider's metrics address).
pub fn metrics_router(registries: Arc<Registries>) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .with_state(registries)
}

/// Serves `app` on `listener` until `shutdown` is cancelled.
pub fn spawn_server(
    listener: tokio::net::TcpListener,
    app: Router,
    shutdown: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app)
            .with_graceful_shutdown(shutdown.cancelled_owned())
            .await
        {
            tracing::error!(error = %e, "admin server failed");
        }
    })
}
