//! `/networks`: create/delete, subnets and the API's route rules (see `check_route`).

use std::net::Ipv4Addr;

use axum::Router;
use axum::extract::State as AppState;
use axum::routing::{get, post};
use serde_json::{Value, json};

use super::collection::{list, update};
use super::{ApiResult, Body, Id, action, check_labels, created, no_content, ok, validate_name};
use crate::actions::{Effect, ResourceRef};
use crate::app::App;
use crate::catalog;
use crate::cidr::Ipv4Net;
use crate::clock::now_ms;
use crate::error::ApiError;
use crate::resource::{Resource, resource_accessors};
use crate::state::{Network, Route, State, Subnet};
use crate::wire::{self, CreateNetworkReq, DeleteSubnetReq, ProtectionReq, RouteReq, SubnetReq};

pub fn routes() -> Router<App> {
    Router::new()
        .route("/v1/networks", get(list::<Network>).post(create))
        .route(
            "/v1/networks/{id}",
            get(get_one).put(update::<Network>).delete(delete),
        )
        .route("/v1/networks/{id}/actions/add_subnet", post(add_subnet))
        .route(
            "/v1/networks/{id}/actions/delete_subnet",
            post(delete_subnet),
        )
        .route("/v1/networks/{id}/actions/add_route", post(add_route))
        .route("/v1/networks/{id}/actions/delete_route", post(delete_route))
        .route(
            "/v1/networks/{id}/actions/change_protection",
            post(change_protection),
        )
}

impl Resource for Network {
    const KIND: &'static str = "network";
    const COLLECTION: &'static str = "networks";
    resource_accessors!(networks);

    fn render(&self, st: &State) -> Value {
        wire::network(st, self)
    }
}

async fn get_one(AppState(app): AppState<App>, Id(id): Id) -> ApiResult {
    let st = app.read();
    let n = st
        .networks
        .get(&id)
        .ok_or_else(|| ApiError::not_found("network"))?;
    ok(json!({"network": wire::network(&st, n)}))
}

fn build_subnet(net: &Network, req: &SubnetReq) -> Result<Subnet, ApiError> {
    if !["cloud", "server", "vswitch"].contains(&req.kind.as_str()) {
        return Err(ApiError::invalid_input(
            "type",
            "must be cloud, server or vswitch",
        ));
    }
    if !catalog::NETWORK_ZONES.contains(&req.network_zone.as_str()) {
        return Err(ApiError::invalid_input(
            "network_zone",
            "unknown network zone",
        ));
    }
    if req.kind == "vswitch" && req.vswitch_id.is_none() {
        return Err(ApiError::invalid_input(
            "vswitch_id",
            "a vswitch subnet needs vswitch_id",
        ));
    }
    let ip_range = match &req.ip_range {
        Some(r) => Ipv4Net::parse(r)
            .ok_or_else(|| ApiError::invalid_input("ip_range", "not a valid IP range"))?,
        // Without ip_range the API picks the next free /24 of the network.
        None => (0..net.ip_range.size() / 256)
            .map(|i| {
                Ipv4Net::new_unchecked(
                    net.ip_range.first() + (i as u32) * 256,
                    24.max(net.ip_range.prefix()),
                )
            })
            .find(|c| !net.subnets.iter().any(|s| s.ip_range.overlaps(c)))
            .ok_or_else(|| {
                ApiError::unprocessable("no_subnet_available", "no free /24 left in the network")
            })?,
    };
    if !net.ip_range.contains_net(&ip_range) {
        return Err(ApiError::invalid_input(
            "ip_range",
            "subnet must be inside the network's ip_range",
        ));
    }
    if net.subnets.iter().any(|s| s.ip_range.overlaps(&ip_range)) {
        return Err(ApiError::invalid_input(
            "ip_range",
            "subnet overlaps an existing subnet",
        ));
    }
    if net.routes.iter().any(|r| r.destination.overlaps(&ip_range)) {
        return Err(ApiError::invalid_input(
            "ip_range",
            "subnet overlaps a route destination",
        ));
    }
    Ok(Subnet {
        kind: req.kind.clone(),
        ip_range,
        network_zone: req.network_zone.clone(),
        gateway: net.gateway(),
        vswitch_id: if req.kind == "vswitch" {
            req.vswitch_id
        } else {
            None
        },
    })
}

/// The route rules: RFC 1918 destination that overlaps neither subnets nor other routes nor
/// the reserved addresses; gateway inside the network, not its first IP, not 172.31.1.1, not
/// behind a vSwitch; at most `max_routes` routes per network.
fn check_route(net: &Network, req: &RouteReq, max_routes: usize) -> Result<Route, ApiError> {
    let destination = Ipv4Net::parse(&req.destination).ok_or_else(|| {
        ApiError::invalid_input(
            "destination",
            "not a valid IPv4 prefix (IPv6 routes are not supported)",
        )
    })?;
    let gateway: Ipv4Addr = req
        .gateway
        .parse()
        .map_err(|_| ApiError::invalid_input("gateway", "not an IPv4 address"))?;
    let reserved = Ipv4Addr::new(172, 31, 1, 1);
    if !destination.is_rfc1918() {
        return Err(ApiError::invalid_input(
            "destination",
            "destination must be inside 10.0.0.0/8, 172.16.0.0/12 or 192.168.0.0/16",
        ));
    }
    if net
        .subnets
        .iter()
        .any(|s| s.ip_range.overlaps(&destination))
    {
        return Err(ApiError::invalid_input(
            "destination",
            "destination overlaps a subnet",
        ));
    }
    if net
        .routes
        .iter()
        .any(|r| r.destination.overlaps(&destination))
    {
        return Err(ApiError::invalid_input(
            "destination",
            "destination overlaps another route",
        ));
    }
    if destination.contains(net.gateway()) || destination.contains(reserved) {
        return Err(ApiError::invalid_input(
            "destination",
            "destination contains a reserved address",
        ));
    }
    if !net.ip_range.contains(gateway) {
        return Err(ApiError::invalid_input(
            "gateway",
            "gateway must be inside the network's ip_range",
        ));
    }
    if gateway == net.gateway() || u32::from(gateway) == net.ip_range.first() || gateway == reserved
    {
        return Err(ApiError::invalid_input(
            "gateway",
            "gateway must not be a reserved address",
        ));
    }
    if net
        .subnets
        .iter()
        .any(|s| s.kind == "vswitch" && s.ip_range.contains(gateway))
    {
        return Err(ApiError::invalid_input(
            "gateway",
            "gateway must not be behind a vSwitch",
        ));
    }
    if net.routes.len() >= max_routes {
        return Err(ApiError::resource_limit(
            "routes",
            format!("a network has at most {max_routes} routes"),
        ));
    }
    Ok(Route {
        destination,
        gateway,
    })
}

async fn create(AppState(app): AppState<App>, Body(req): Body<CreateNetworkReq>) -> ApiResult {
    validate_name(&req.name, false)?;
    let ip_range = Ipv4Net::parse(&req.ip_range)
        .ok_or_else(|| ApiError::invalid_input("ip_range", "not a valid IP range"))?;
    if !ip_range.is_rfc1918() || ip_range.prefix() > 24 {
        return Err(ApiError::invalid_input(
            "ip_range",
            "ip_range must be a private (RFC 1918) range of at least /24",
        ));
    }
    let labels = req.labels.clone().unwrap_or_default();
    check_labels(&labels)?;
    let mut st = app.write();
    if st.networks.values().any(|n| n.name == req.name) {
        return Err(ApiError::uniqueness("name"));
    }
    let mut net = Network {
        id: 0,
        name: req.name.clone(),
        ip_range,
        subnets: Vec::new(),
        routes: Vec::new(),
        labels,
        protection_delete: false,
        expose_routes_to_vswitch: req.expose_routes_to_vswitch.unwrap_or(false),
        created_ms: now_ms(),
    };
    for s in req.subnets.iter().flatten() {
        let subnet = build_subnet(&net, s)?;
        net.subnets.push(subnet);
    }
    for r in req.routes.iter().flatten() {
        let route = check_route(&net, r, app.config.max_routes_per_network)?;
        net.routes.push(route);
    }
    net.id = State::next_id(&mut st.next.network);
    let id = net.id;
    st.networks.insert(id, net);
    created(json!({"network": wire::network(&st, &st.networks[&id])}))
}

async fn delete(AppState(app): AppState<App>, Id(id): Id) -> ApiResult {
    let mut st = app.write();
    let n = st
        .networks
        .get(&id)
        .ok_or_else(|| ApiError::not_found("network"))?;
    if n.protection_delete {
        return Err(ApiError::protected("network", id));
    }
    st.ensure_unlocked("network", id)?;
    // Attached servers and LBs are detached with the network, as in the real cloud.
    st.networks.remove(&id);
    st.private_ips.remove(&id);
    for s in st.servers.values_mut() {
        s.private_net.retain(|p| p.network != id);
    }
    for lb in st.load_balancers.values_mut() {
        lb.private_net.retain(|p| p.network != id);
    }
    no_content()
}

/// The frame of every network action: exists, unlocked, validate-and-mutate a copy, one action.
fn network_action(
    app: &App,
    id: u64,
    command: &str,
    change: impl FnOnce(&State, &mut Network) -> Result<(), ApiError>,
) -> ApiResult {
    let mut st = app.write();
    let mut net = st
        .networks
        .get(&id)
        .cloned()
        .ok_or_else(|| ApiError::not_found("network"))?;
    st.ensure_unlocked("network", id)?;
    change(&st, &mut net)?;
    st.networks.insert(id, net);
    let a = st.start_action(command, vec![ResourceRef::new("network", id)], Effect::None);
    action(&st, a)
}

async fn add_subnet(
    AppState(app): AppState<App>,
    Id(id): Id,
    Body(req): Body<SubnetReq>,
) -> ApiResult {
    network_action(&app, id, "add_subnet", |_, net| {
        let s = build_subnet(net, &req)?;
        net.subnets.push(s);
        Ok(())
    })
}

async fn delete_subnet(
    AppState(app): AppState<App>,
    Id(id): Id,
    Body(req): Body<DeleteSubnetReq>,
) -> ApiResult {
    network_action(&app, id, "delete_subnet", |st, net| {
        let range = Ipv4Net::parse(&req.ip_range)
            .ok_or_else(|| ApiError::invalid_input("ip_range", "not a valid IP range"))?;
        let pos = net
            .subnets
            .iter()
            .position(|s| s.ip_range == range)
            .ok_or_else(|| {
                ApiError::invalid_input("ip_range", "the network has no subnet with this ip_range")
            })?;
        let in_use = st
            .private_ips
            .get(&net.id)
            .is_some_and(|ips| ips.iter().any(|ip| range.contains_u32(*ip)));
        if in_use {
            return Err(ApiError::invalid_input(
                "ip_range",
                "servers or load balancers still use this subnet",
            ));
        }
        net.subnets.remove(pos);
        Ok(())
    })
}

async fn add_route(
    AppState(app): AppState<App>,
    Id(id): Id,
    Body(req): Body<RouteReq>,
) -> ApiResult {
    let max_routes = app.config.max_routes_per_network;
    network_action(&app, id, "add_route", |_, net| {
        let r = check_route(net, &req, max_routes)?;
        net.routes.push(r);
        Ok(())
    })
}

async fn delete_route(
    AppState(app): AppState<App>,
    Id(id): Id,
    Body(req): Body<RouteReq>,
) -> ApiResult {
    network_action(&app, id, "delete_route", |_, net| {
        let destination = Ipv4Net::parse(&req.destination)
            .ok_or_else(|| ApiError::invalid_input("destination", "not a valid IPv4 prefix"))?;
        let gateway: Ipv4Addr = req
            .gateway
            .parse()
            .map_err(|_| ApiError::invalid_input("gateway", "not an IPv4 address"))?;
        let wanted = Route {
            destination,
            gateway,
        };
        let pos = net
            .routes
            .iter()
            .position(|r| *r == wanted)
            .ok_or_else(|| {
                ApiError::invalid_input("destination", "no route with this destination and gateway")
            })?;
        net.routes.remove(pos);
        Ok(())
    })
}

async fn change_protection(
    AppState(app): AppState<App>,
    Id(id): Id,
    Body(req): Body<ProtectionReq>,
) -> ApiResult {
    network_action(&app, id, "change_protection", |_, net| {
        if let Some(d) = req.delete {
            net.protection_delete = d;
        }
        Ok(())
    })
}
