//! `add_target` / `remove_target`: server, label-selector and IP targets, with the zone, network
//! and limit rules the API enforces.

use std::net::IpAddr;

use axum::extract::State as AppState;

use super::common::{lb_action, zone_of};
use crate::app::App;
use crate::catalog;
use crate::clock::now_ms;
use crate::error::ApiError;
use crate::handlers::{ApiResult, Body, Id};
use crate::label_selector::Selector;
use crate::state::{LoadBalancer, State, Target, TargetKind};
use crate::wire::TargetReq;

pub(super) fn build_target(
    st: &State,
    lb: &LoadBalancer,
    req: &TargetReq,
) -> Result<Target, ApiError> {
    let use_private_ip = req.use_private_ip.unwrap_or(false);
    let kind = match req.kind.as_str() {
        "server" => {
            let sid = req
                .server
                .as_ref()
                .ok_or_else(|| ApiError::invalid_input("server", "server target needs server.id"))?
                .id;
            let server = st.servers.get(&sid).ok_or_else(|| {
                ApiError::invalid_input("server.id", format!("server {sid} not found"))
            })?;
            let server_zone = catalog::location(server.location).network_zone;
            if server_zone != zone_of(lb) {
                return Err(ApiError::unprocessable(
                    "unsupported_error",
                    format!(
                        "server {sid} is in network zone {server_zone}, the load balancer in {}",
                        zone_of(lb)
                    ),
                ));
            }
            if use_private_ip {
                if lb.private_net.is_empty() {
                    return Err(ApiError::unprocessable(
                        "load_balancer_not_attached_to_network",
                        "use_private_ip needs the load balancer in a network",
                    ));
                }
                if !server
                    .private_net
                    .iter()
                    .any(|p| lb.private_net.iter().any(|l| l.network == p.network))
                {
                    return Err(ApiError::unprocessable(
                        "server_not_attached_to_network",
                        format!("server {sid} is not attached to the load balancer's network"),
                    ));
                }
            }
            TargetKind::Server(sid)
        }
        "label_selector" => {
            let sel = req.label_selector.as_ref().ok_or_else(|| {
                ApiError::invalid_input(
                    "label_selector",
                    "label_selector target needs label_selector.selector",
                )
            })?;
            Selector::parse(&sel.selector)
                .map_err(|e| ApiError::invalid_input("label_selector.selector", e))?;
            if use_private_ip && lb.private_net.is_empty() {
                return Err(ApiError::unprocessable(
                    "load_balancer_not_attached_to_network",
                    "use_private_ip needs the load balancer in a network",
                ));
            }
            TargetKind::LabelSelector(sel.selector.clone())
        }
        "ip" => {
            let raw = &req
                .ip
                .as_ref()
                .ok_or_else(|| ApiError::invalid_input("ip", "ip target needs ip.ip"))?
                .ip;
            let ip: IpAddr = raw
                .parse()
                .map_err(|_| ApiError::invalid_input("ip.ip", "not an IP address"))?;
            // Cloud servers and LBs must be server targets; IP targets are for Robot machines.
            let cloud = st.servers.values().any(|s| {
                s.ipv4.as_ref().is_some_and(|v4| IpAddr::V4(v4.ip) == ip)
                    || s.ipv6.as_ref().is_some_and(|v6| match ip {
                        IpAddr::V6(a) => u128::from(a) >> 64 == u128::from(v6.network) >> 64,
                        IpAddr::V4(_) => false,
                    })
            }) || st
                .load_balancers
                .values()
                .any(|l| IpAddr::V4(l.ipv4) == ip || IpAddr::V6(l.ipv6) == ip);
            if cloud {
                return Err(ApiError::unprocessable(
                    "cloud_resource_ip_not_allowed",
                    format!("{ip} belongs to a cloud resource"),
                ));
            }
            if ip.is_loopback() || ip.is_unspecified() || ip.is_multicast() {
                return Err(ApiError::unprocessable(
                    "ip_not_owned",
                    format!("{ip} cannot be a target"),
                ));
            }
            TargetKind::Ip(ip.to_string())
        }
        other => {
            return Err(ApiError::invalid_input(
                "type",
                format!("unknown target type '{other}'"),
            ));
        }
    };
    if lb.targets.iter().any(|t| t.kind == kind) {
        return Err(ApiError::unprocessable(
            "target_already_defined",
            "the target is already defined",
        ));
    }
    let max = catalog::lb_type(lb.lb_type).max_targets;
    if lb.targets.len() >= max {
        return Err(ApiError::resource_limit(
            "max_targets",
            format!("the load balancer type allows {max} targets"),
        ));
    }
    Ok(Target {
        kind,
        use_private_ip,
        added_ms: now_ms(),
    })
}

pub(super) async fn add_target(
    AppState(app): AppState<App>,
    Id(id): Id,
    Body(req): Body<TargetReq>,
) -> ApiResult {
    lb_action(&app, id, "add_target", |st, lb| {
        let t = build_target(st, lb, &req)?;
        lb.targets.push(t);
        Ok(())
    })
}

pub(super) async fn remove_target(
    AppState(app): AppState<App>,
    Id(id): Id,
    Body(req): Body<TargetReq>,
) -> ApiResult {
    lb_action(&app, id, "remove_target", |_, lb| {
        let kind = match req.kind.as_str() {
            "server" => TargetKind::Server(req.server.as_ref().map(|s| s.id).unwrap_or_default()),
            "label_selector" => TargetKind::LabelSelector(
                req.label_selector
                    .as_ref()
                    .map(|s| s.selector.clone())
                    .unwrap_or_default(),
            ),
            "ip" => TargetKind::Ip(
                req.ip
                    .as_ref()
                    .and_then(|i| i.ip.parse::<IpAddr>().ok())
                    .map(|i| i.to_string())
                    .unwrap_or_default(),
            ),
            other => {
                return Err(ApiError::invalid_input(
                    "type",
                    format!("unknown target type '{other}'"),
                ));
            }
        };
        let before = lb.targets.len();
        lb.targets.retain(|t| t.kind != kind);
        if lb.targets.len() == before {
            return Err(ApiError::invalid_input(
                "target",
                "the load balancer has no such target",
            ));
        }
        Ok(())
    })
}
