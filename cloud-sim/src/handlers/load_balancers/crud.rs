//! `/load_balancers` and `/load_balancers/{id}`: read, create (with network, services and
//! targets inline, checked by the same rules as the actions), delete; listing and renaming or
//! relabelling are the shared `handlers::collection` endpoints.

use std::net::IpAddr;

use axum::extract::State as AppState;
use serde_json::{Value, json};

use super::common::{check_algorithm, default_ptr, lb_type_of};
use super::network::attach_lb;
use super::services::build_service;
use super::targets::build_target;
use crate::actions::{Effect, ResourceRef};
use crate::app::App;
use crate::catalog;
use crate::clock::now_ms;
use crate::error::ApiError;
use crate::handlers::{ApiResult, Body, Id, check_labels, created, no_content, ok, validate_name};
use crate::resource::{Resource, resource_accessors};
use crate::state::{LoadBalancer, State};
use crate::wire::{self, CreateLoadBalancerReq};

impl Resource for LoadBalancer {
    const KIND: &'static str = "load_balancer";
    const COLLECTION: &'static str = "load_balancers";
    resource_accessors!(load_balancers);

    fn render(&self, st: &State) -> Value {
        wire::load_balancer(st, self)
    }
}

pub(super) async fn get_one(AppState(app): AppState<App>, Id(id): Id) -> ApiResult {
    let st = app.read();
    let lb = st
        .load_balancers
        .get(&id)
        .ok_or_else(|| ApiError::not_found("load_balancer"))?;
    ok(json!({"load_balancer": wire::load_balancer(&st, lb)}))
}

pub(super) async fn create(
    AppState(app): AppState<App>,
    Body(req): Body<CreateLoadBalancerReq>,
) -> ApiResult {
    validate_name(&req.name, false)?;
    let lb_type = lb_type_of(&req.load_balancer_type)?;
    let location = match (&req.location, &req.network_zone) {
        (Some(_), Some(_)) | (None, None) => {
            return Err(ApiError::invalid_input(
                "location",
                "exactly one of location and network_zone is required",
            ));
        }
        (Some(l), None) => catalog::find_location(l)
            .ok_or_else(|| ApiError::invalid_input("location", "unknown location"))?,
        (None, Some(z)) => catalog::LOCATIONS
            .iter()
            .find(|l| l.network_zone == z)
            .ok_or_else(|| ApiError::invalid_input("network_zone", "unknown network zone"))?,
    };
    if let Some(a) = &req.algorithm {
        check_algorithm(a)?;
    }
    let labels = req.labels.clone().unwrap_or_default();
    check_labels(&labels)?;

    let mut st = app.write();
    if st.load_balancers.values().any(|lb| lb.name == req.name) {
        return Err(ApiError::uniqueness("name"));
    }
    let id = State::next_id(&mut st.next.load_balancer);
    let (_, v4, v6) = st.alloc_public_ips();
    let v6 = std::net::Ipv6Addr::from(u128::from(v6) | 1);
    let mut lb = LoadBalancer {
        id,
        name: req.name.clone(),
        lb_type: lb_type.id,
        location: location.id,
        algorithm: req
            .algorithm
            .as_ref()
            .map(|a| a.kind.clone())
            .unwrap_or_else(|| "round_robin".to_owned()),
        labels,
        public_enabled: req.public_interface.unwrap_or(true),
        ipv4: v4,
        ipv4_dns_ptr: default_ptr(&IpAddr::V4(v4)),
        ipv6: v6,
        ipv6_dns_ptr: default_ptr(&IpAddr::V6(v6)),
        private_net: Vec::new(),
        services: Vec::new(),
        targets: Vec::new(),
        protection_delete: false,
        created_ms: now_ms(),
    };
    // Inline network, services and targets go through the same rules as the actions.
    if let Some(network) = req.network {
        attach_lb(&mut st, &mut lb, network, None, None)?;
    }
    for (i, svc) in req.services.iter().flatten().enumerate() {
        let service = build_service(&st, &lb, None, svc)
            .map_err(|e| prefix_field(e, &format!("services[{i}]")))?;
        lb.services.push(service);
    }
    for t in req.targets.iter().flatten() {
        let target = build_target(&st, &lb, t)?;
        lb.targets.push(target);
    }
    for p in &lb.private_net {
        let (net, ip) = (p.network, p.ip);
        st.claim_private_ip(net, ip);
    }
    st.load_balancers.insert(id, lb);
    let a = st.start_action(
        "create_load_balancer",
        vec![ResourceRef::new("load_balancer", id)],
        Effect::None,
    );
    created(
        json!({"load_balancer": wire::load_balancer(&st, &st.load_balancers[&id]), "action": st.action_json(a)}),
    )
}

fn prefix_field(mut e: ApiError, prefix: &str) -> ApiError {
    if let Some(fields) = e
        .details
        .as_mut()
        .and_then(|d| d.get_mut("fields"))
        .and_then(|f| f.as_array_mut())
    {
        for f in fields {
            if let Some(name) = f.get("name").and_then(|n| n.as_str()).map(str::to_owned) {
                f["name"] = json!(format!("{prefix}.{name}"));
            }
        }
    }
    e
}

pub(super) async fn delete(AppState(app): AppState<App>, Id(id): Id) -> ApiResult {
    let mut st = app.write();
    let lb = st
        .load_balancers
        .get(&id)
        .ok_or_else(|| ApiError::not_found("load_balancer"))?;
    if lb.protection_delete {
        return Err(ApiError::protected("load_balancer", id));
    }
    st.ensure_unlocked("load_balancer", id)?;
    if let Some(lb) = st.load_balancers.remove(&id) {
        for p in lb.private_net {
            st.release_private_ip(p.network, p.ip);
        }
    }
    no_content()
}
