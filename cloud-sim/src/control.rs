//! Control endpoints under `/_sim`, outside the API: no authentication, no rate limit, not
//! counted. They drive what a test needs and a real cloud would never offer.
//!
//! | method + path | body | effect |
//! |---|---|---|
//! | `GET /_sim/health` | | `ok` |
//! | `GET /_sim/counters` | | `{"total": n, "endpoints": {"GET /servers": n, ...}}` |
//! | `DELETE /_sim/counters` | | resets counters and the request log |
//! | `GET /_sim/requests` | | the request log, oldest first |
//! | `GET /_sim/faults` | | `{"faults": [{"id", ...rule}]}` |
//! | `POST /_sim/faults` | a [`FaultRule`] | `{"id": n}` |
//! | `DELETE /_sim/faults` / `DELETE /_sim/faults/{id}` | | clears all / one |
//! | `GET /_sim/rate_limit` / `PUT /_sim/rate_limit` | `{"limit"?, "remaining"?}` | bucket state / change it |
//! | `GET /_sim/config` / `PUT /_sim/config` | `{"action_duration_ms"?}` | live settings |
//! | `PUT /_sim/metadata` | `{"server": id}` | default server of the metadata service |
//! | `POST /_sim/batch/servers` | `{"count", "prefix", "server_type", "image"?, "location"?, "labels"?, "networks"?, "public_net"?}` | `{"servers": [ids]}` |
//! | `POST /_sim/state/save` | | writes the `--state` file now |
//!
//! The batch endpoint exists because benchmarks need 1 000–10 000 servers: through
//! `POST /servers` that is one request plus an action wait each, minutes of setup and the whole
//! rate-limit budget. The batch runs the very same validation (`create_server`) under one lock
//! and creates the servers already `running`, without actions.

use std::time::Duration;

use axum::extract::{Path, State as AppState};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post, put};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::app::App;
use crate::error::ApiError;
use crate::faults::FaultRule;
use crate::handlers::{Body, servers};

pub fn routes() -> Router<App> {
    Router::new()
        .route("/_sim/health", get(|| async { "ok" }))
        .route("/_sim/counters", get(counters).delete(reset_counters))
        .route("/_sim/requests", get(requests))
        .route(
            "/_sim/faults",
            get(list_faults).post(add_fault).delete(clear_faults),
        )
        .route("/_sim/faults/{id}", delete(remove_fault))
        .route("/_sim/rate_limit", get(rate_limit).put(set_rate_limit))
        .route("/_sim/config", get(config).put(set_config))
        .route("/_sim/metadata", put(set_metadata))
        .route("/_sim/batch/servers", post(batch_servers))
        .route("/_sim/state/save", post(save_state))
}

async fn counters(AppState(app): AppState<App>) -> Json<Value> {
    Json(json!({"total": app.counters.total(), "endpoints": app.counters.snapshot()}))
}

async fn reset_counters(AppState(app): AppState<App>) -> StatusCode {
    app.counters.reset();
    StatusCode::NO_CONTENT
}

async fn requests(AppState(app): AppState<App>) -> Json<Value> {
    Json(json!({"requests": app.counters.log()}))
}

async fn list_faults(AppState(app): AppState<App>) -> Json<Value> {
    let faults: Vec<Value> = app
        .faults
        .list()
        .into_iter()
        .map(|(id, rule)| {
            let mut v = serde_json::to_value(rule).unwrap_or(Value::Null);
            v["id"] = json!(id);
            v
        })
        .collect();
    Json(json!({"faults": faults}))
}

async fn add_fault(
    AppState(app): AppState<App>,
    Body(rule): Body<FaultRule>,
) -> Result<Response, ApiError> {
    if !(0.0..=1.0).contains(&rule.probability) {
        return Err(ApiError::invalid_input(
            "probability",
            "must be between 0 and 1",
        ));
    }
    if let crate::faults::FaultKind::OmitItems { share } = rule.kind
        && !(0.0..=1.0).contains(&share)
    {
        return Err(ApiError::invalid_input("share", "must be between 0 and 1"));
    }
    let id = app.faults.add(rule);
    Ok((StatusCode::CREATED, Json(json!({"id": id}))).into_response())
}

async fn clear_faults(AppState(app): AppState<App>) -> StatusCode {
    app.faults.clear();
    StatusCode::NO_CONTENT
}

async fn remove_fault(AppState(app): AppState<App>, Path(id): Path<u64>) -> StatusCode {
    if app.faults.remove(id) {
        StatusCode::NO_CONTENT
    } else {
        StatusCode::NOT_FOUND
    }
}

async fn rate_limit(AppState(app): AppState<App>) -> Json<Value> {
    Json(json!(app.rate.status()))
}

#[derive(Debug, Deserialize)]
struct RateLimitReq {
    limit: Option<u32>,
    remaining: Option<u32>,
}

async fn set_rate_limit(
    AppState(app): AppState<App>,
    Body(req): Body<RateLimitReq>,
) -> Json<Value> {
    app.rate.set(req.limit, req.remaining);
    Json(json!(app.rate.status()))
}

async fn config(AppState(app): AppState<App>) -> Json<Value> {
    Json(json!({
        "action_duration_ms": app.action_ms.load(std::sync::atomic::Ordering::Relaxed),
        "rate_limit": app.rate.status(),
        "state_file": app.config.state_file,
        "max_routes_per_network": app.config.max_routes_per_network,
    }))
}

#[derive(Debug, Deserialize)]
struct ConfigReq {
    action_duration_ms: Option<u64>,
}

async fn set_config(AppState(app): AppState<App>, Body(req): Body<ConfigReq>) -> Json<Value> {
    if let Some(ms) = req.action_duration_ms {
        app.set_action_duration(Duration::from_millis(ms));
    }
    config(AppState(app)).await
}

#[derive(Debug, Deserialize)]
struct MetadataReq {
    server: Option<u64>,
}

async fn set_metadata(AppState(app): AppState<App>, Body(req): Body<MetadataReq>) -> StatusCode {
    *app.metadata_server
        .lock()
        .unwrap_or_else(|e| e.into_inner()) = req.server;
    StatusCode::NO_CONTENT
}

#[derive(Debug, Deserialize)]
struct BatchReq {
    count: usize,
    prefix: String,
    #[serde(flatten)]
    template: serde_json::Map<String, Value>,
}

async fn batch_servers(
    AppState(app): AppState<App>,
    Body(req): Body<BatchReq>,
) -> Result<Response, ApiError> {
    if req.count > 100_000 {
        return Err(ApiError::invalid_input(
            "count",
            "at most 100000 servers per batch",
        ));
    }
    let mut template = Value::Object(req.template);
    if template.get("image").is_none() {
        template["image"] = json!("ubuntu-24.04");
    }
    let mut st = app.write();
    let ids = servers::create_batch(&mut st, &template, req.count, &req.prefix)?;
    Ok((StatusCode::CREATED, Json(json!({"servers": ids}))).into_response())
}

async fn save_state(AppState(app): AppState<App>) -> Result<StatusCode, ApiError> {
    app.mark_dirty();
    app.flush()
        .map(|()| StatusCode::NO_CONTENT)
        .map_err(|e| ApiError::new(500, "server_error", format!("cannot write state: {e}")))
}
