//! `add_service` / `update_service` / `delete_service`: a service is built from the request over
//! the API's defaults (or the existing service), then checked as a whole.

use axum::extract::State as AppState;

use super::common::lb_action;
use crate::app::App;
use crate::catalog;
use crate::error::ApiError;
use crate::handlers::{ApiResult, Body, Id};
use crate::state::{HealthCheck, HealthCheckHttp, LbService, LoadBalancer, ServiceHttp, State};
use crate::wire::{ListenPortReq, ServiceReq};

fn port(field: &str, p: u32) -> Result<u16, ApiError> {
    u16::try_from(p)
        .ok()
        .filter(|p| *p >= 1)
        .ok_or_else(|| ApiError::invalid_input(field, "port must be between 1 and 65535"))
}

/// Builds a service from an `add_service` body (`existing: None`, API defaults filled in) or
/// merges an `update_service` body into the existing one, then checks the result.
pub(super) fn build_service(
    st: &State,
    lb: &LoadBalancer,
    existing: Option<&LbService>,
    req: &ServiceReq,
) -> Result<LbService, ApiError> {
    let protocol = req
        .protocol
        .clone()
        .or_else(|| existing.map(|e| e.protocol.clone()))
        .unwrap_or_else(|| "tcp".to_owned());
    if !["tcp", "http", "https"].contains(&protocol.as_str()) {
        return Err(ApiError::invalid_input(
            "protocol",
            "must be tcp, http or https",
        ));
    }
    let default_port = match protocol.as_str() {
        "http" => Some(80),
        "https" => Some(443),
        _ => None,
    };
    let listen_port = match (req.listen_port, existing) {
        (Some(p), _) => port("listen_port", p)?,
        (None, Some(e)) => e.listen_port,
        (None, None) => default_port.ok_or_else(|| {
            ApiError::invalid_input("listen_port", "listen_port is required for tcp")
        })?,
    };
    let destination_port = match (req.destination_port, existing) {
        (Some(p), _) => port("destination_port", p)?,
        (None, Some(e)) => e.destination_port,
        (None, None) => match protocol.as_str() {
            "tcp" => {
                return Err(ApiError::invalid_input(
                    "destination_port",
                    "destination_port is required for tcp",
                ));
            }
            _ => 80,
        },
    };
    let http = if protocol == "tcp" {
        if req.http.is_some() {
            return Err(ApiError::invalid_input(
                "http",
                "http settings need protocol http or https",
            ));
        }
        None
    } else {
        let base = existing
            .and_then(|e| e.http.clone())
            .unwrap_or(ServiceHttp {
                cookie_name: "HCLBSTICKY".to_owned(),
                cookie_lifetime: 300,
                certificates: Vec::new(),
                redirect_http: false,
                sticky_sessions: false,
                timeout_idle: 60,
            });
        let r = req.http.as_ref();
        let h = ServiceHttp {
            cookie_name: r
                .and_then(|r| r.cookie_name.clone())
                .unwrap_or(base.cookie_name),
            cookie_lifetime: r
                .and_then(|r| r.cookie_lifetime)
                .unwrap_or(base.cookie_lifetime),
            certificates: r
                .and_then(|r| r.certificates.clone())
                .unwrap_or(base.certificates),
            redirect_http: r
                .and_then(|r| r.redirect_http)
                .unwrap_or(base.redirect_http),
            sticky_sessions: r
                .and_then(|r| r.sticky_sessions)
                .unwrap_or(base.sticky_sessions),
            timeout_idle: r.and_then(|r| r.timeout_idle).unwrap_or(base.timeout_idle),
        };
        if !(30..=300).contains(&h.timeout_idle) {
            return Err(ApiError::invalid_input(
                "http.timeout_idle",
                "must be between 30 and 300 seconds",
            ));
        }
        if protocol == "https" && h.certificates.is_empty() {
            return Err(ApiError::invalid_input(
                "http.certificates",
                "an https service needs at least one certificate",
            ));
        }
        if protocol == "http" && h.redirect_http {
            return Err(ApiError::invalid_input(
                "http.redirect_http",
                "redirect_http needs protocol https",
            ));
        }
        if protocol == "http" && !h.certificates.is_empty() {
            return Err(ApiError::invalid_input(
                "http.certificates",
                "certificates need protocol https",
            ));
        }
        for c in &h.certificates {
            if !st.certificates.contains_key(c) {
                return Err(ApiError::invalid_input(
                    "http.certificates",
                    format!("certificate {c} not found"),
                ));
            }
        }
        let max = catalog::lb_type(lb.lb_type).max_assigned_certificates;
        if h.certificates.len() > max {
            return Err(ApiError::resource_limit(
                "max_assigned_certificates",
                format!("at most {max} certificates"),
            ));
        }
        Some(h)
    };
    let hc_base = existing
        .map(|e| e.health_check.clone())
        .unwrap_or(HealthCheck {
            protocol: "tcp".to_owned(),
            port: destination_port,
            interval: 15,
            timeout: 10,
            retries: 3,
            http: None,
        });
    let hr = req.health_check.as_ref();
    let hc_protocol = hr
        .and_then(|h| h.protocol.clone())
        .unwrap_or(hc_base.protocol);
    if !["tcp", "http", "https"].contains(&hc_protocol.as_str()) {
        return Err(ApiError::invalid_input(
            "health_check.protocol",
            "must be tcp, http or https",
        ));
    }
    let hc_http = if hc_protocol == "tcp" {
        None
    } else {
        let base = hc_base.http.unwrap_or(HealthCheckHttp {
            domain: None,
            path: "/".to_owned(),
            response: String::new(),
            status_codes: vec!["2??".to_owned(), "3??".to_owned()],
            tls: false,
        });
        let r = hr.and_then(|h| h.http.as_ref());
        Some(HealthCheckHttp {
            domain: r.and_then(|r| r.domain.clone()).or(base.domain),
            path: r.and_then(|r| r.path.clone()).unwrap_or(base.path),
            response: r.and_then(|r| r.response.clone()).unwrap_or(base.response),
            status_codes: r
                .and_then(|r| r.status_codes.clone())
                .unwrap_or(base.status_codes),
            tls: r.and_then(|r| r.tls).unwrap_or(base.tls),
        })
    };
    let health_check = HealthCheck {
        protocol: hc_protocol,
        port: match hr.and_then(|h| h.port) {
            Some(p) => port("health_check.port", p)?,
            None => hc_base.port,
        },
        interval: hr.and_then(|h| h.interval).unwrap_or(hc_base.interval),
        timeout: hr.and_then(|h| h.timeout).unwrap_or(hc_base.timeout),
        retries: hr.and_then(|h| h.retries).unwrap_or(hc_base.retries),
        http: hc_http,
    };
    if health_check.interval == 0 || health_check.timeout == 0 {
        return Err(ApiError::invalid_input(
            "health_check.interval",
            "interval and timeout must be positive",
        ));
    }
    if existing.is_none() {
        if lb.services.iter().any(|s| s.listen_port == listen_port) {
            return Err(ApiError::unprocessable(
                "source_port_already_used",
                format!("listen port {listen_port} is already used by another service"),
            ));
        }
        let max = catalog::lb_type(lb.lb_type).max_services;
        if lb.services.len() >= max {
            return Err(ApiError::resource_limit(
                "max_services",
                format!("the load balancer type allows {max} services"),
            ));
        }
    }
    Ok(LbService {
        protocol,
        listen_port,
        destination_port,
        proxyprotocol: req
            .proxyprotocol
            .or(existing.map(|e| e.proxyprotocol))
            .unwrap_or(false),
        http,
        health_check,
    })
}

pub(super) async fn add_service(
    AppState(app): AppState<App>,
    Id(id): Id,
    Body(req): Body<ServiceReq>,
) -> ApiResult {
    lb_action(&app, id, "add_service", |st, lb| {
        let s = build_service(st, lb, None, &req)?;
        lb.services.push(s);
        Ok(())
    })
}

pub(super) async fn update_service(
    AppState(app): AppState<App>,
    Id(id): Id,
    Body(req): Body<ServiceReq>,
) -> ApiResult {
    lb_action(&app, id, "update_service", |st, lb| {
        let lp = req
            .listen_port
            .ok_or_else(|| ApiError::invalid_input("listen_port", "listen_port is required"))?;
        let pos = lb
            .services
            .iter()
            .position(|s| u32::from(s.listen_port) == lp)
            .ok_or_else(|| {
                ApiError::invalid_input("listen_port", format!("no service listens on port {lp}"))
            })?;
        let s = build_service(st, lb, Some(&lb.services[pos]), &req)?;
        lb.services[pos] = s;
        Ok(())
    })
}

pub(super) async fn delete_service(
    AppState(app): AppState<App>,
    Id(id): Id,
    Body(req): Body<ListenPortReq>,
) -> ApiResult {
    lb_action(&app, id, "delete_service", |_, lb| {
        let before = lb.services.len();
        lb.services
            .retain(|s| u32::from(s.listen_port) != req.listen_port);
        if lb.services.len() == before {
            return Err(ApiError::invalid_input(
                "listen_port",
                format!("no service listens on port {}", req.listen_port),
            ));
        }
        Ok(())
    })
}
