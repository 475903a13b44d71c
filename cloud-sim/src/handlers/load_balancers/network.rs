//! The load balancer's networks: attaching to and detaching from a private network, and the public
//! interface.

use std::net::Ipv4Addr;

use axum::extract::State as AppState;

use super::common::{lb_action, zone_of};
use crate::app::App;
use crate::cidr::Ipv4Net;
use crate::error::ApiError;
use crate::handlers::{ApiResult, Body, Id};
use crate::state::{LbPrivateNet, LoadBalancer, State, TargetKind};
use crate::wire::NetworkRef;

/// Puts the LB into `network` (IP claimed by the caller once the whole change is accepted).
pub(super) fn attach_lb(
    st: &mut State,
    lb: &mut LoadBalancer,
    network: u64,
    ip: Option<&str>,
    ip_range: Option<&str>,
) -> Result<(), ApiError> {
    if lb.private_net.iter().any(|p| p.network == network) {
        return Err(ApiError::unprocessable(
            "load_balancer_already_attached",
            "load balancer is already attached to this network",
        ));
    }
    let net = st.networks.get(&network).ok_or_else(|| {
        ApiError::invalid_input("network", format!("network {network} not found"))
    })?;
    let zone = zone_of(lb);
    let mut subnets: Vec<Ipv4Net> = net
        .subnets
        .iter()
        .filter(|s| s.network_zone == zone && s.kind != "vswitch")
        .map(|s| s.ip_range)
        .collect();
    if subnets.is_empty() {
        return Err(ApiError::invalid_input(
            "network",
            format!("network {network} has no subnet in network zone {zone}"),
        ));
    }
    if let Some(r) = ip_range {
        let r = Ipv4Net::parse(r)
            .ok_or_else(|| ApiError::invalid_input("ip_range", "not a valid IP range"))?;
        if !subnets.contains(&r) {
            return Err(ApiError::invalid_input(
                "ip_range",
                "no subnet with this IP range in the load balancer's zone",
            ));
        }
        subnets = vec![r];
    }
    let ip = match ip {
        Some(raw) => {
            let ip: Ipv4Addr = raw
                .parse()
                .map_err(|_| ApiError::invalid_input("ip", "not an IPv4 address"))?;
            let sub = subnets.iter().find(|s| s.contains(ip)).ok_or_else(|| {
                ApiError::invalid_input(
                    "ip",
                    "IP is not inside a subnet of the load balancer's zone",
                )
            })?;
            if u32::from(ip) < sub.first() + 2 || u32::from(ip) >= sub.last() {
                return Err(ApiError::invalid_input("ip", "IP is reserved"));
            }
            if st.private_ip_taken(network, ip) {
                return Err(ApiError::unprocessable(
                    "ip_not_available",
                    format!("IP {ip} is already in use"),
                ));
            }
            ip
        }
        None => subnets
            .iter()
            .find_map(|s| st.free_ip_in(network, s))
            .ok_or_else(|| {
                ApiError::unprocessable(
                    "no_subnet_available",
                    "no free IP left in the network's subnets",
                )
            })?,
    };
    lb.private_net.push(LbPrivateNet { network, ip });
    Ok(())
}

#[derive(Debug, serde::Deserialize)]
pub(super) struct LbAttachReq {
    network: u64,
    ip: Option<String>,
    ip_range: Option<String>,
}

pub(super) async fn attach(
    AppState(app): AppState<App>,
    Id(id): Id,
    Body(req): Body<LbAttachReq>,
) -> ApiResult {
    lb_action(&app, id, "attach_to_network", |st, lb| {
        attach_lb(
            st,
            lb,
            req.network,
            req.ip.as_deref(),
            req.ip_range.as_deref(),
        )?;
        let ip = lb
            .private_net
            .last()
            .map(|p| p.ip)
            .unwrap_or(Ipv4Addr::UNSPECIFIED);
        st.claim_private_ip(req.network, ip);
        Ok(())
    })
}

pub(super) async fn detach(
    AppState(app): AppState<App>,
    Id(id): Id,
    Body(req): Body<NetworkRef>,
) -> ApiResult {
    lb_action(&app, id, "detach_from_network", |st, lb| {
        let pos = lb
            .private_net
            .iter()
            .position(|p| p.network == req.network)
            .ok_or_else(|| {
                ApiError::unprocessable(
                    "load_balancer_not_attached_to_network",
                    "load balancer is not attached to this network",
                )
            })?;
        let p = lb.private_net.remove(pos);
        st.release_private_ip(p.network, p.ip);
        Ok(())
    })
}

pub(super) async fn enable_public(AppState(app): AppState<App>, Id(id): Id) -> ApiResult {
    lb_action(&app, id, "enable_public_interface", |_, lb| {
        lb.public_enabled = true;
        Ok(())
    })
}

pub(super) async fn disable_public(AppState(app): AppState<App>, Id(id): Id) -> ApiResult {
    lb_action(&app, id, "disable_public_interface", |_, lb| {
        // Without a public interface the LB can only reach targets over its private network.
        if lb
            .targets
            .iter()
            .any(|t| !t.use_private_ip && !matches!(t.kind, TargetKind::Ip(_)))
        {
            return Err(ApiError::unprocessable(
                "targets_without_use_private_ip",
                "the load balancer has targets that do not use private IPs",
            ));
        }
        lb.public_enabled = false;
        Ok(())
    })
}
