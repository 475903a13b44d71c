//! Settings of the load balancer itself: type, algorithm, reverse DNS, protection.

use std::net::IpAddr;

use axum::extract::State as AppState;

use super::common::{check_algorithm, default_ptr, lb_action, lb_type_of};
use crate::app::App;
use crate::error::ApiError;
use crate::handlers::{ApiResult, Body, Id};
use crate::wire::{AlgorithmReq, ChangeTypeReq, DnsPtrReq, ProtectionReq};

pub(super) async fn change_type(
    AppState(app): AppState<App>,
    Id(id): Id,
    Body(req): Body<ChangeTypeReq>,
) -> ApiResult {
    lb_action(&app, id, "change_type", |_, lb| {
        let t = lb_type_of(&req.load_balancer_type)?;
        if lb.targets.len() > t.max_targets {
            return Err(ApiError::resource_limit(
                "max_targets",
                format!("{} allows only {} targets", t.name, t.max_targets),
            ));
        }
        if lb.services.len() > t.max_services {
            return Err(ApiError::resource_limit(
                "max_services",
                format!("{} allows only {} services", t.name, t.max_services),
            ));
        }
        lb.lb_type = t.id;
        Ok(())
    })
}

pub(super) async fn change_algorithm(
    AppState(app): AppState<App>,
    Id(id): Id,
    Body(req): Body<AlgorithmReq>,
) -> ApiResult {
    lb_action(&app, id, "change_algorithm", |_, lb| {
        check_algorithm(&req).map_err(|_| {
            ApiError::invalid_input("type", "must be round_robin or least_connections")
        })?;
        lb.algorithm = req.kind.clone();
        Ok(())
    })
}

pub(super) async fn change_dns_ptr(
    AppState(app): AppState<App>,
    Id(id): Id,
    Body(req): Body<DnsPtrReq>,
) -> ApiResult {
    lb_action(&app, id, "change_dns_ptr", |_, lb| {
        let ip: IpAddr = req
            .ip
            .parse()
            .map_err(|_| ApiError::invalid_input("ip", "not an IP address"))?;
        let ptr = req.dns_ptr.clone().unwrap_or_else(|| default_ptr(&ip));
        if ip == IpAddr::V4(lb.ipv4) {
            lb.ipv4_dns_ptr = ptr;
        } else if ip == IpAddr::V6(lb.ipv6) {
            lb.ipv6_dns_ptr = ptr;
        } else {
            return Err(ApiError::invalid_input(
                "ip",
                "IP does not belong to the load balancer",
            ));
        }
        Ok(())
    })
}

pub(super) async fn change_protection(
    AppState(app): AppState<App>,
    Id(id): Id,
    Body(req): Body<ProtectionReq>,
) -> ApiResult {
    lb_action(&app, id, "change_protection", |_, lb| {
        if let Some(d) = req.delete {
            lb.protection_delete = d;
        }
        Ok(())
    })
}
