//! What every load-balancer handler shares: the frame of an action, and lookups in the catalog.

use std::net::IpAddr;

use crate::actions::{Effect, ResourceRef};
use crate::app::App;
use crate::catalog::{self, LbType};
use crate::error::ApiError;
use crate::handlers::{ApiResult, action};
use crate::state::{LoadBalancer, State};
use crate::wire::AlgorithmReq;

/// The common frame of every LB action: the LB must exist and be unlocked; `change` validates
/// and mutates a copy, which replaces the stored LB only when everything passed.
pub(super) fn lb_action(
    app: &App,
    id: u64,
    command: &str,
    change: impl FnOnce(&mut State, &mut LoadBalancer) -> Result<(), ApiError>,
) -> ApiResult {
    let mut st = app.write();
    let mut lb = st
        .load_balancers
        .get(&id)
        .cloned()
        .ok_or_else(|| ApiError::not_found("load_balancer"))?;
    st.ensure_unlocked("load_balancer", id)?;
    change(&mut st, &mut lb)?;
    st.load_balancers.insert(id, lb);
    let a = st.start_action(
        command,
        vec![ResourceRef::new("load_balancer", id)],
        Effect::None,
    );
    action(&st, a)
}

pub(super) fn zone_of(lb: &LoadBalancer) -> &'static str {
    catalog::location(lb.location).network_zone
}

pub(super) fn lb_type_of(value: &serde_json::Value) -> Result<&'static LbType, ApiError> {
    catalog::find_lb_type(value)
        .ok_or_else(|| ApiError::invalid_input("load_balancer_type", "unknown load balancer type"))
}

pub(super) fn check_algorithm(a: &AlgorithmReq) -> Result<(), ApiError> {
    if a.kind == "round_robin" || a.kind == "least_connections" {
        Ok(())
    } else {
        Err(ApiError::invalid_input(
            "algorithm.type",
            "must be round_robin or least_connections",
        ))
    }
}

pub(super) fn default_ptr(ip: &IpAddr) -> String {
    match ip {
        IpAddr::V4(v4) => format!("static.{v4}.clients.your-server.de"),
        IpAddr::V6(_) => "static.clients.your-server.de".to_owned(),
    }
}
