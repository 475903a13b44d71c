//! Where a test finds a CloudStack load-balancer rule on the wire (`data_plane::rules`): the
//! rule's public address is simulated, so the local address that carries it has to be asked
//! for, as a Hetzner load balancer's listeners are (`GET /_sim/load_balancers/{id}/listeners`).
//!
//! | method + path | answer |
//! |---|---|
//! | `GET /_sim/cloudstack/load_balancer_rules/{id}/listeners` | `{"listeners": [{"rule_id", "protocol", "address", "connections": {"accepted", "forwarded", "refused", "active"}}]}`: one, or none with the data plane off or before the reconciler opened it; 404 for an unknown rule |

use axum::extract::{Path, State as AppState};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{Value, json};

use crate::app::App;
use crate::data_plane::rules::RuleListenerInfo;
use crate::error::ApiError;
use crate::server::Sim;

pub fn routes() -> Router<App> {
    Router::new().route(
        "/_sim/cloudstack/load_balancer_rules/{id}/listeners",
        get(listeners),
    )
}

async fn listeners(
    AppState(app): AppState<App>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    if app.read().cloudstack.lb_rule(&id).is_none() {
        return Err(ApiError::not_found("load_balancer_rule"));
    }
    let listeners: Vec<RuleListenerInfo> = app
        .data_plane
        .as_ref()
        .and_then(|dp| dp.rule_listener(&id))
        .into_iter()
        .collect();
    Ok(Json(json!({"listeners": listeners})))
}

impl Sim {
    /// Where CloudStack load-balancer rule `id` takes connections (TCP) or datagrams (UDP), with
    /// its counts; `None` while it has no listener (data plane off, no such rule, or not
    /// reconciled yet: poll).
    pub fn rule_listener(&self, id: &str) -> Option<RuleListenerInfo> {
        self.app()
            .data_plane
            .as_ref()
            .and_then(|dp| dp.rule_listener(id))
    }
}
