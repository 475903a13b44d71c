//! `/load_balancers`: CRUD and every load-balancer action of the API with the validation rules the
//! CCM has to live with (zones, limits, ports, certificates, private networks).

use std::net::{IpAddr, Ipv4Addr};

use axum::Router;
use axum::extract::State as AppState;
use axum::routing::{get, post};
use serde_json::json;

use super::{ApiResult, Body, Id, action, check_labels, created, no_content, ok, validate_name};
use crate::actions::{Effect, ResourceRef};
use crate::app::App;
use crate::catalog::{self, LbType};
use crate::cidr::Ipv4Net;
use crate::clock::now_ms;
use crate::error::ApiError;
use crate::label_selector::{Labels, Selector};
use crate::pagination::{ListParams, Listable, SortKey};
use crate::state::{
    HealthCheck, HealthCheckHttp, LbPrivateNet, LbService, LoadBalancer, ServiceHttp, State,
    Target, TargetKind,
};
use crate::wire::{
    self, AlgorithmReq, ChangeTypeReq, CreateLoadBalancerReq, DnsPtrReq, ListenPortReq, NetworkRef,
    ProtectionReq, ServiceReq, TargetReq, UpdateReq,
};

pub fn routes() -> Router<App> {
    Router::new()
        .route("/v1/load_balancers", get(list).post(create))
        .route(
            "/v1/load_balancers/{id}",
            get(get_one).put(update).delete(delete),
        )
        .route(
            "/v1/load_balancers/{id}/actions/add_target",
            post(add_target),
        )
        .route(
            "/v1/load_balancers/{id}/actions/remove_target",
            post(remove_target),
        )
        .route(
            "/v1/load_balancers/{id}/actions/add_service",
            post(add_service),
        )
        .route(
            "/v1/load_balancers/{id}/actions/update_service",
            post(update_service),
        )
        .route(
            "/v1/load_balancers/{id}/actions/delete_service",
            post(delete_service),
        )
        .route(
            "/v1/load_balancers/{id}/actions/attach_to_network",
            post(attach),
        )
        .route(
            "/v1/load_balancers/{id}/actions/detach_from_network",
            post(detach),
        )
        .route(
            "/v1/load_balancers/{id}/actions/change_type",
            post(change_type),
        )
        .route(
            "/v1/load_balancers/{id}/actions/change_algorithm",
            post(change_algorithm),
        )
        .route(
            "/v1/load_balancers/{id}/actions/enable_public_interface",
            post(enable_public),
        )
        .route(
            "/v1/load_balancers/{id}/actions/disable_public_interface",
            post(disable_public),
        )
        .route(
            "/v1/load_balancers/{id}/actions/change_dns_ptr",
            post(change_dns_ptr),
        )
        .route(
            "/v1/load_balancers/{id}/actions/change_protection",
            post(change_protection),
        )
}

impl Listable for LoadBalancer {
    fn id(&self) -> u64 {
        self.id
    }
    fn name(&self) -> Option<&str> {
        Some(&self.name)
    }
    fn labels(&self) -> Option<&Labels> {
        Some(&self.labels)
    }
    fn sort_key(&self, field: &str) -> Option<SortKey> {
        Some(match field {
            "id" => SortKey::Int(self.id as i64),
            "name" => SortKey::Str(self.name.clone()),
            "created" => SortKey::Int(self.created_ms as i64),
            _ => return None,
        })
    }
}

async fn list(AppState(app): AppState<App>, params: ListParams) -> ApiResult {
    let st = app.read();
    params.respond("load_balancers", st.load_balancers.values(), |lb| {
        wire::load_balancer(&st, lb)
    })
}

async fn get_one(AppState(app): AppState<App>, Id(id): Id) -> ApiResult {
    let st = app.read();
    let lb = st
        .load_balancers
        .get(&id)
        .ok_or_else(|| ApiError::not_found("load_balancer"))?;
    ok(json!({"load_balancer": wire::load_balancer(&st, lb)}))
}

fn lb_type_of(value: &serde_json::Value) -> Result<&'static LbType, ApiError> {
    catalog::find_lb_type(value)
        .ok_or_else(|| ApiError::invalid_input("load_balancer_type", "unknown load balancer type"))
}

fn check_algorithm(a: &AlgorithmReq) -> Result<(), ApiError> {
    if a.kind == "round_robin" || a.kind == "least_connections" {
        Ok(())
    } else {
        Err(ApiError::invalid_input(
            "algorithm.type",
            "must be round_robin or least_connections",
        ))
    }
}

async fn create(AppState(app): AppState<App>, Body(req): Body<CreateLoadBalancerReq>) -> ApiResult {
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

fn default_ptr(ip: &IpAddr) -> String {
    match ip {
        IpAddr::V4(v4) => format!("static.{v4}.clients.your-server.de"),
        IpAddr::V6(_) => "static.clients.your-server.de".to_owned(),
    }
}

async fn update(AppState(app): AppState<App>, Id(id): Id, Body(req): Body<UpdateReq>) -> ApiResult {
    let mut st = app.write();
    super::apply_update(&mut st.load_balancers, id, req.name, req.labels)?;
    ok(json!({"load_balancer": wire::load_balancer(&st, &st.load_balancers[&id])}))
}

async fn delete(AppState(app): AppState<App>, Id(id): Id) -> ApiResult {
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

/// The common frame of every LB action: the LB must exist and be unlocked; `change` validates
/// and mutates a copy, which replaces the stored LB only when everything passed.
fn lb_action(
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

fn zone_of(lb: &LoadBalancer) -> &'static str {
    catalog::location(lb.location).network_zone
}

fn build_target(st: &State, lb: &LoadBalancer, req: &TargetReq) -> Result<Target, ApiError> {
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

async fn add_target(
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

async fn remove_target(
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

fn port(field: &str, p: u32) -> Result<u16, ApiError> {
    u16::try_from(p)
        .ok()
        .filter(|p| *p >= 1)
        .ok_or_else(|| ApiError::invalid_input(field, "port must be between 1 and 65535"))
}

/// Builds a service from an `add_service` body (`existing: None`, API defaults filled in) or
/// merges an `update_service` body into the existing one, then checks the result.
fn build_service(
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

async fn add_service(
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

async fn update_service(
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

async fn delete_service(
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

/// Puts the LB into `network` (IP claimed by the caller once the whole change is accepted).
fn attach_lb(
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
struct LbAttachReq {
    network: u64,
    ip: Option<String>,
    ip_range: Option<String>,
}

async fn attach(
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

async fn detach(
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

async fn change_type(
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

async fn change_algorithm(
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

async fn enable_public(AppState(app): AppState<App>, Id(id): Id) -> ApiResult {
    lb_action(&app, id, "enable_public_interface", |_, lb| {
        lb.public_enabled = true;
        Ok(())
    })
}

async fn disable_public(AppState(app): AppState<App>, Id(id): Id) -> ApiResult {
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

async fn change_dns_ptr(
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

async fn change_protection(
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
