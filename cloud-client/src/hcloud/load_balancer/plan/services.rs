//! The load balancer's services (one per listen port) and their health checks, built the way
//! HCCM sends them, so a load balancer it made is matched as it is rather than rewritten.

use std::collections::{BTreeMap, BTreeSet};

use super::lb_type::{max_services_after, type_after};
use crate::capabilities::{PortProtocol, ServicePort, Warning};
use crate::error::CloudError;
use crate::hcloud::load_balancer::annotations as a;
use crate::hcloud::load_balancer::ops::Op;
use crate::hcloud::load_balancer::spec::{LbProtocol, LbSpec};
use crate::hcloud::wire::{HealthCheck, HealthCheckHttp, LbService, LbServiceHttp, LoadBalancer};

/// The load-balancer services a Service asks for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DesiredServices {
    /// One per TCP port with a nodePort; https ones without certificates until
    /// [`with_certificates`] fills them in.
    pub services: Vec<LbService>,
    /// Listen ports of TCP ports without a nodePort (`allocateLoadBalancerNodePorts: false`): an
    /// existing load-balancer service there is left exactly as it is, since we cannot build one.
    pub untouched: BTreeSet<u16>,
    /// Ports skipped for their protocol, as `53/UDP`.
    pub unsupported: Vec<String>,
    pub warnings: Vec<Warning>,
}

/// The TCP ports of the Service as load-balancer services. Other protocols are skipped with
/// HCCM's `UnsupportedProtocolConfigured` warning, ports without a nodePort with
/// `NodePortNotAllocated`.
pub fn desired_services(spec: &LbSpec, ports: &[ServicePort]) -> DesiredServices {
    let mut d = DesiredServices::default();
    for p in ports {
        if p.protocol != PortProtocol::Tcp {
            d.unsupported
                .push(format!("{}/{}", p.port, p.protocol.as_str()));
            d.warnings.push(Warning::new(
                "UnsupportedProtocolConfigured",
                format!(
                    "port {} uses protocol {}; Hetzner load balancers only forward TCP, the port is skipped",
                    p.port,
                    p.protocol.as_str()
                ),
            ));
        } else if p.node_port == 0 {
            d.untouched.insert(p.port);
            d.warnings.push(Warning::new(
                "NodePortNotAllocated",
                format!(
                    "port {} has no nodePort (allocateLoadBalancerNodePorts is false?); the load \
                     balancer forwards to nodePorts, so no service is added for it and an existing \
                     one is left as it is",
                    p.port
                ),
            ));
        } else {
            d.services.push(service_for(spec.for_port(p.port), p));
        }
    }
    d
}

/// Sets the resolved certificate ids on the https services: a port's own, else the Service's.
pub fn with_certificates(
    mut services: Vec<LbService>,
    certificates: &[i64],
    by_port: &BTreeMap<u16, Vec<i64>>,
) -> Vec<LbService> {
    for s in &mut services {
        if s.protocol == LbProtocol::Https.as_str()
            && let Some(h) = &mut s.http
        {
            h.certificates = by_port
                .get(&s.listen_port)
                .map_or(certificates, Vec::as_slice)
                .to_vec();
        }
    }
    services
}

/// The load-balancer service for one port, with what HCCM's `hclbServiceOptsBuilder` would send;
/// fields it leaves out stay `None` (API default on add, unchanged on update).
fn service_for(spec: &LbSpec, p: &ServicePort) -> LbService {
    // http/https always carry the block, so the certificates are explicit (none for http).
    let http = (spec.protocol != LbProtocol::Tcp).then(|| LbServiceHttp {
        cookie_name: spec.http.cookie_name.clone(),
        cookie_lifetime: spec.http.cookie_lifetime.map(|d| d.as_secs()),
        certificates: Vec::new(),
        redirect_http: spec
            .http
            .redirect_http
            .filter(|_| spec.protocol == LbProtocol::Https),
        sticky_sessions: spec.http.sticky_sessions,
        timeout_idle: spec.http.timeout_idle.map(|d| d.as_secs()),
    });
    LbService {
        protocol: spec.protocol.as_str().to_string(),
        listen_port: p.port,
        destination_port: p.node_port,
        proxyprotocol: spec.proxy_protocol,
        http,
        health_check: Some(health_check_for(spec, p.node_port)),
    }
}

/// HCCM `buildAddServiceOpts`/`buildUpdateServiceOpts`: the custom block when
/// [`HealthCheckSpec::custom`](crate::hcloud::load_balancer::spec::HealthCheckSpec::custom), else TCP on the
/// NodePort.
/// Precedence, field by field: the `health-check-*` annotation, then `health-check-kube-proxy`
/// (HTTP `GET /healthz` on kube-proxy's port), then the env default, then HCCM's default.
fn health_check_for(spec: &LbSpec, node_port: u16) -> HealthCheck {
    let hc = &spec.health_check;
    if !hc.custom {
        return HealthCheck {
            protocol: LbProtocol::Tcp.as_str().to_string(),
            port: node_port,
            ..Default::default()
        };
    }
    // kube-proxy's answer is HTTP: 200 on a node that can serve, 503 on one that cannot.
    let kube_proxy = hc.kube_proxy_port;
    let protocol = hc.protocol.unwrap_or(if kube_proxy.is_some() {
        LbProtocol::Http
    } else {
        spec.protocol
    });
    HealthCheck {
        protocol: protocol.as_str().to_string(),
        port: hc.port.or(kube_proxy).unwrap_or(node_port),
        interval: hc.interval.map(|d| d.as_secs()),
        timeout: hc.timeout.map(|d| d.as_secs()),
        retries: hc.retries,
        http: (protocol != LbProtocol::Tcp).then(|| HealthCheckHttp {
            domain: hc.http_domain.clone(),
            path: hc.http_path.clone().or_else(|| {
                kube_proxy.map(|_| {
                    crate::hcloud::load_balancer::spec::KUBE_PROXY_HEALTHZ_PATH.to_string()
                })
            }),
            status_codes: (!hc.http_status_codes.is_empty()).then(|| hc.http_status_codes.clone()),
            tls: hc.http_validate_certificate,
        }),
    }
}

/// True when `actual` already has everything `desired` asks for. Fields the desired side leaves unset
/// are the API's to default, so they never cause an update.
pub fn service_matches(actual: &LbService, desired: &LbService) -> bool {
    actual.protocol == desired.protocol
        && actual.destination_port == desired.destination_port
        && opt(&desired.proxyprotocol, &actual.proxyprotocol)
        && http_matches(actual.http.as_ref(), desired.http.as_ref())
        && health_check_matches(actual.health_check.as_ref(), desired.health_check.as_ref())
}

/// An unset wish matches anything.
fn opt<T: PartialEq>(want: &Option<T>, have: &Option<T>) -> bool {
    want.is_none() || want == have
}

fn http_matches(actual: Option<&LbServiceHttp>, desired: Option<&LbServiceHttp>) -> bool {
    match (desired, actual) {
        (None, _) => true,
        (Some(_), None) => false,
        (Some(d), Some(a)) => {
            let mut dc = d.certificates.clone();
            let mut ac = a.certificates.clone();
            dc.sort_unstable();
            ac.sort_unstable();
            opt(&d.cookie_name, &a.cookie_name)
                && opt(&d.cookie_lifetime, &a.cookie_lifetime)
                && opt(&d.redirect_http, &a.redirect_http)
                && opt(&d.sticky_sessions, &a.sticky_sessions)
                && opt(&d.timeout_idle, &a.timeout_idle)
                && dc == ac
        }
    }
}

fn health_check_matches(actual: Option<&HealthCheck>, desired: Option<&HealthCheck>) -> bool {
    match (desired, actual) {
        (None, _) => true,
        (Some(_), None) => false,
        (Some(d), Some(a)) => {
            d.protocol == a.protocol
                && d.port == a.port
                && opt(&d.interval, &a.interval)
                && opt(&d.timeout, &a.timeout)
                && opt(&d.retries, &a.retries)
                && match (&d.http, &a.http) {
                    (None, _) => true,
                    (Some(_), None) => false,
                    (Some(dh), Some(ah)) => {
                        opt(&dh.domain, &ah.domain)
                            && opt(&dh.path, &ah.path)
                            && opt(&dh.status_codes, &ah.status_codes)
                            && opt(&dh.tls, &ah.tls)
                    }
                }
        }
    }
}

/// Bad input that must stop a reconcile before its first write: a new load balancer with no
/// port it could serve, or more ports than the (resulting) type allows services.
pub fn check_services(
    desired: &DesiredServices,
    lb: Option<&LoadBalancer>,
    spec: &LbSpec,
) -> Result<(), CloudError> {
    if lb.is_none() && desired.services.is_empty() {
        let mut unusable = desired.unsupported.clone();
        unusable.extend(
            desired
                .untouched
                .iter()
                .map(|p| format!("{p}/TCP without nodePort")),
        );
        return Err(CloudError::invalid_input(
            "Service ports",
            unusable.join(", "),
            "at least one TCP port with an allocated nodePort (Hetzner load balancers forward TCP \
             to nodePorts); no load balancer is created without one",
        ));
    }
    // Services we leave alone on untouched ports still take a slot.
    let kept = lb.map_or(0, |lb| {
        lb.services
            .iter()
            .filter(|s| desired.untouched.contains(&s.listen_port))
            .count()
    });
    let count = desired.services.len() + kept;
    let max = max_services_after(lb, spec);
    if count > max as usize {
        let ty = type_after(lb, spec);
        return Err(CloudError::invalid_input(
            "Service ports",
            format!("{count} ports"),
            format!(
                "at most {max} for load balancer type {ty}; choose a larger type with {} \
                 (lb11: 5, lb21: 15, lb31: 30)",
                a::TYPE
            ),
        ));
    }
    Ok(())
}

/// Delete services of removed ports, update changed ones, add new ones. Untouched ports (no
/// nodePort) are neither: never delete what we cannot build again. On a shared load balancer
/// only the `claimed` ports are this Service's to delete.
pub(super) fn service_ops(
    lb: &LoadBalancer,
    desired: &DesiredServices,
    claimed: Option<&BTreeSet<u16>>,
) -> Vec<Op> {
    let mut ops = Vec::new();
    let wanted: BTreeSet<u16> = desired.services.iter().map(|s| s.listen_port).collect();
    for a in &lb.services {
        let ours = claimed.is_none_or(|c| c.contains(&a.listen_port));
        if ours && !wanted.contains(&a.listen_port) && !desired.untouched.contains(&a.listen_port) {
            ops.push(Op::DeleteService(a.listen_port));
        }
    }
    for d in &desired.services {
        match lb.services.iter().find(|a| a.listen_port == d.listen_port) {
            Some(a) if service_matches(a, d) => {}
            Some(_) => ops.push(Op::UpdateService(d.clone())),
            None => ops.push(Op::AddService(d.clone())),
        }
    }
    ops
}
