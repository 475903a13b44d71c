//! Desired state from the spec, and the minimal list of operations that turns the actual load balancer
//! into it (for a new one: what its create request carries). Pure functions: no I/O, so the "zero
//! writes when nothing changed" rule is unit-testable.

use std::collections::{BTreeMap, BTreeSet};

use super::annotations as a;
use super::ops::{NewLb, Op};
use super::ownership::SERVICE_UID_LABEL;
use super::spec::{LbProtocol, LbSpec, Placement};
use crate::error::CloudError;
use crate::hcloud::provider_id::ProviderId;
use crate::hcloud::wire::{HealthCheck, HealthCheckHttp, LbService, LbServiceHttp, LoadBalancer};
use crate::provider::{LbNode, PortProtocol, ServicePort, Warning};

/// Load balancer type used when neither annotation nor env names one (HCCM's fallback).
pub const DEFAULT_LB_TYPE: &str = "lb11";

/// `max_targets` of the known types, for types we have not read from the API (a new load balancer,
/// or the type a `change_type` is about to switch to).
pub fn known_max_targets(lb_type: &str) -> u32 {
    match lb_type {
        "lb21" => 75,
        "lb31" => 150,
        _ => 25,
    }
}

/// `max_services` of the known types, like [`known_max_targets`].
pub fn known_max_services(lb_type: &str) -> u32 {
    match lb_type {
        "lb21" => 15,
        "lb31" => 30,
        _ => 5,
    }
}

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
/// [`HealthCheckSpec::custom`](super::spec::HealthCheckSpec::custom), else TCP on the NodePort.
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
            path: hc
                .http_path
                .clone()
                .or_else(|| kube_proxy.map(|_| super::spec::KUBE_PROXY_HEALTHZ_PATH.to_string())),
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

/// The type a reconcile will switch `lb` to, if any: only an explicit type is enforced
/// ([`LbSpec::type_explicit`]).
pub fn type_change<'a>(lb: &LoadBalancer, spec: &'a LbSpec) -> Option<&'a str> {
    let want = spec.lb_type.as_deref().filter(|_| spec.type_explicit())?;
    (lb.load_balancer_type.as_ref().map(|t| t.name.as_str()) != Some(want)).then_some(want)
}

/// The type the load balancer will have once the plan ran: the `change_type` target, else what
/// it has now; for a new one (`lb` is `None`) the spec's type or the default.
fn type_after(lb: Option<&LoadBalancer>, spec: &LbSpec) -> String {
    match lb {
        None => spec
            .lb_type
            .as_deref()
            .unwrap_or(DEFAULT_LB_TYPE)
            .to_string(),
        Some(lb) => type_change(lb, spec)
            .map(str::to_string)
            .or_else(|| lb.load_balancer_type.as_ref().map(|t| t.name.clone()))
            .unwrap_or_else(|| DEFAULT_LB_TYPE.to_string()),
    }
}

/// `max_services` of the type after the plan: the load balancer's own (as the API reports it)
/// unless it changes type; the known figure for a new type.
fn max_services_after(lb: Option<&LoadBalancer>, spec: &LbSpec) -> u32 {
    let current = lb
        .filter(|lb| type_change(lb, spec).is_none())
        .and_then(|lb| lb.load_balancer_type.as_ref())
        .and_then(|t| t.max_services);
    current.unwrap_or_else(|| known_max_services(&type_after(lb, spec)))
}

/// `max_targets` of the type after the plan (see [`max_services_after`]).
pub fn max_targets_after(lb: &LoadBalancer, spec: &LbSpec) -> u32 {
    match type_change(lb, spec) {
        Some(t) => known_max_targets(t),
        None => lb
            .load_balancer_type
            .as_ref()
            .and_then(|t| t.max_targets)
            .unwrap_or_else(|| known_max_targets(&type_after(Some(lb), spec))),
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

/// A Service's nodes as load-balancer targets.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DesiredTargets {
    /// Server ids in node order.
    pub servers: Vec<i64>,
    /// Server id → Node name, so warnings about a server name its Node.
    pub nodes: BTreeMap<i64, String>,
    /// Dedicated servers' addresses (IP targets), in node order.
    pub ips: Vec<String>,
    /// Address → Node name.
    pub ip_nodes: BTreeMap<String, String>,
    pub warnings: Vec<Warning>,
}

/// What the controller knows of dedicated servers when it plans targets.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RobotTargets {
    /// `ROBOT_ENABLED`.
    pub enabled: bool,
    /// Server number → main IPv4, from the Robot API (empty without credentials).
    pub public_ips: BTreeMap<i64, String>,
    /// Whether the Robot API could be asked (credentials given).
    pub api: bool,
}

/// The nodes that should be targets, in node order: Cloud servers by id, dedicated servers by IP
/// as HCCM targets them (the server's public IPv4 from the Robot API; with `use-private-ip`, the
/// Node's InternalIP, e.g. its vSwitch address). Nodes rejected by the node selector are dropped
/// silently; foreign providerIDs, and Robot ones without Robot support, with a warning (HCCM's
/// `UnknownProviderIDPrefix`); nodes without providerID (not initialized yet) are skipped.
pub fn desired_targets(spec: &LbSpec, nodes: &[LbNode], robot: &RobotTargets) -> DesiredTargets {
    let mut d = DesiredTargets::default();
    for n in nodes {
        if let Some(sel) = &spec.node_selector
            && !sel.matches(&n.labels)
        {
            continue;
        }
        let Some(pid) = n.provider_id.as_deref().filter(|p| !p.is_empty()) else {
            continue;
        };
        match ProviderId::parse(pid) {
            Ok(ProviderId::Cloud(id)) => {
                if d.nodes.insert(id, n.name.clone()).is_none() {
                    d.servers.push(id);
                }
            }
            Ok(ProviderId::Robot(_)) if !robot.enabled => d.warnings.push(Warning::on_node(
                &n.name,
                "RobotServerNotSupported",
                format!(
                    "node {} is a Robot server ({pid}); it is not added as a load balancer target \
                     while Robot support is off (ROBOT_ENABLED)",
                    n.name
                ),
            )),
            Ok(ProviderId::Robot(number)) => {
                let internal = n.internal_ips.first();
                let ip = match (spec.use_private_ip, internal) {
                    (true, Some(ip)) => Some(ip.clone()),
                    (true, None) => {
                        d.warnings.push(Warning::new(
                            "InternalIPNotConfigured",
                            format!(
                                "use-private-ip is set, but Robot node {} has no InternalIP \
                                 (kubelet --node-ip); {}",
                                n.name,
                                if robot.api {
                                    "targeting its public IP instead"
                                } else {
                                    "it is skipped (without Robot credentials there is no other address)"
                                }
                            ),
                        ));
                        robot.public_ips.get(&number).cloned()
                    }
                    (false, _) => robot.public_ips.get(&number).cloned(),
                };
                match ip {
                    Some(ip) if d.ip_nodes.insert(ip.clone(), n.name.clone()).is_none() => {
                        d.ips.push(ip)
                    }
                    Some(_) => {}
                    None if robot.api => d.warnings.push(Warning::on_node(
                        &n.name,
                        "ServerNotFound",
                        format!("No server with id {number} was found in Robot"),
                    )),
                    None if !spec.use_private_ip => d.warnings.push(Warning::on_node(
                        &n.name,
                        "RobotServerNotSupported",
                        format!(
                            "node {} is a Robot server ({pid}): without Robot credentials \
                             (ROBOT_USER, ROBOT_PASSWORD) only use-private-ip targets it, by \
                             its InternalIP",
                            n.name
                        ),
                    )),
                    None => {}
                }
            }
            Err(_) => d.warnings.push(Warning::on_node(
                &n.name,
                "UnknownProviderIDPrefix",
                format!(
                    "node {} has providerID {pid:?} which is not a Hetzner Cloud server; skipped \
                     (expected hcloud://<server id>)",
                    n.name
                ),
            )),
        }
    }
    d
}

/// What the Service asks for, with bad input already refused.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Desired {
    pub services: DesiredServices,
    pub targets: DesiredTargets,
}

/// The create request for a new load balancer, plus a warning when no type is configured.
pub fn plan_create(
    spec: &LbSpec,
    labels: BTreeMap<String, String>,
    placement: Placement,
    network: Option<i64>,
    desired: &Desired,
) -> (NewLb, Option<Warning>) {
    let warning = spec.lb_type.is_none().then(|| {
        Warning::new(
            "LoadBalancerTypeUnconfigured",
            format!(
                "no load balancer type configured, using {DEFAULT_LB_TYPE}; set {} or HCLOUD_LOAD_BALANCERS_TYPE",
                a::TYPE
            ),
        )
    });
    let lb_type = spec
        .lb_type
        .clone()
        .unwrap_or_else(|| DEFAULT_LB_TYPE.to_string());
    let network =
        network.filter(|_| spec.private_ipv4.is_none() && spec.private_subnet_ip_range.is_none());
    let targets = (network.is_some() || !spec.use_private_ip).then(|| {
        let max = known_max_targets(&lb_type) as usize;
        desired.targets.servers.iter().take(max).copied().collect()
    });
    let new = NewLb {
        name: spec.name.clone(),
        labels,
        lb_type,
        placement,
        algorithm: spec.algorithm,
        public_interface: spec.disable_public_network.map(|d| !d),
        network,
        services: desired.services.services.clone(),
        targets,
        use_private_ip: spec.use_private_ip,
    };
    (new, warning)
}

/// A Service's place on a shared load balancer, as the plan needs it (decided by
/// [`super::sharing::join`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Membership {
    /// Listen ports this Service made (and may change or delete).
    pub claimed: BTreeSet<u16>,
    /// No other Service is on the load balancer: its settings follow this Service.
    pub alone: bool,
    /// Labels while ports are added: the claim covers old and new ports, so a crash between two
    /// writes never leaves a port that no label claims.
    pub labels_during: BTreeMap<String, String>,
    /// Labels once the ports this Service dropped are deleted.
    pub labels_after: BTreeMap<String, String>,
}

/// Inputs of [`plan`] that do not come from the spec.
#[derive(Debug, Clone)]
pub struct PlanInput<'a> {
    pub uid: &'a str,
    /// `namespace/name`, for warnings that end up on a Node.
    pub service: &'a str,
    pub network: Option<i64>,
    pub services: &'a DesiredServices,
    pub targets: &'a DesiredTargets,
    /// On a shared load balancer: what this Service owns there and the labels that say so.
    pub shared: Option<&'a Membership>,
}

/// The writes needed to turn `lb` into the desired state, in a safe order, plus warnings.
pub fn plan(lb: &LoadBalancer, spec: &LbSpec, input: &PlanInput<'_>) -> (Vec<Op>, Vec<Warning>) {
    let mut ops = Vec::new();
    let mut warnings = Vec::new();
    // Identity first, so a crash after this point still finds the LB by label next time (and
    // on a shared one, a port about to be added is already claimed).
    match input.shared {
        None => ops.extend(identity_op(lb, spec, input.uid)),
        Some(m) => ops.extend(labels_op(lb, spec, &m.labels_during)),
    }
    // Other Services on a shared load balancer: its settings stay as they are (a member that
    // disagrees was refused before).
    if input.shared.is_none_or(|m| m.alone) {
        ops.extend(settings_ops(lb, spec));
    }
    warnings.extend(deprecation_warning(lb));
    ops.extend(network_ops(lb, spec, input.network));
    ops.extend(service_ops(
        lb,
        input.services,
        input.shared.map(|m| &m.claimed),
    ));
    if let Some(m) = input.shared.filter(|m| m.labels_after != m.labels_during) {
        // Ports it dropped are deleted: release their claim.
        ops.push(Op::Update {
            name: None,
            labels: Some(m.labels_after.clone()),
        });
    }
    let max = max_targets_after(lb, spec);
    let (target_ops, skipped) = target_ops(lb, spec, input.targets, max);
    ops.extend(target_ops);
    warnings.extend(skipped.iter().map(|target| match target {
        Target::Server(id) => max_targets_warning(
            max,
            &id.to_string(),
            input.targets.nodes.get(id),
            input.service,
        ),
        Target::Ip(ip) => {
            max_targets_warning(max, ip, input.targets.ip_nodes.get(ip), input.service)
        }
    }));
    (ops, warnings)
}

/// `PUT` the UID label when it is missing or another Service's, and the name only when the `name`
/// annotation asks for a different one (HCCM `changeHCLBInfo`).
fn identity_op(lb: &LoadBalancer, spec: &LbSpec, uid: &str) -> Option<Op> {
    let labels = (lb.labels.get(SERVICE_UID_LABEL).map(String::as_str) != Some(uid)).then(|| {
        let mut l = lb.labels.clone();
        l.insert(SERVICE_UID_LABEL.to_string(), uid.to_string());
        l
    });
    let name = (spec.name_annotated && lb.name != spec.name).then(|| spec.name.clone());
    (labels.is_some() || name.is_some()).then_some(Op::Update { name, labels })
}

/// A shared load balancer's `PUT` to labels `to`, renamed like [`identity_op`].
fn labels_op(lb: &LoadBalancer, spec: &LbSpec, to: &BTreeMap<String, String>) -> Option<Op> {
    let labels = (&lb.labels != to).then(|| to.clone());
    let name = (spec.name_annotated && lb.name != spec.name).then(|| spec.name.clone());
    (labels.is_some() || name.is_some()).then_some(Op::Update { name, labels })
}

/// Reverse DNS, algorithm and type.
fn settings_ops(lb: &LoadBalancer, spec: &LbSpec) -> Vec<Op> {
    let mut ops = Vec::new();
    let public = lb.public_net.clone().unwrap_or_default();
    for (want, ip) in [
        (&spec.ipv4_rdns, &public.ipv4),
        (&spec.ipv6_rdns, &public.ipv6),
    ] {
        if let (Some(want), Some(ip)) = (want, ip)
            && let Some(addr) = ip.ip.as_deref()
            && ip.dns_ptr.as_deref() != Some(want.as_str())
        {
            ops.push(Op::ChangeDnsPtr {
                ip: addr.to_string(),
                dns_ptr: want.clone(),
            });
        }
    }
    if let Some(alg) = spec.algorithm
        && lb.algorithm.as_ref().map(|a| a.kind.as_str()) != Some(alg.as_str())
    {
        ops.push(Op::ChangeAlgorithm(alg));
    }
    if let Some(t) = type_change(lb, spec) {
        ops.push(Op::ChangeType(t.to_string()));
    }
    ops
}

fn deprecation_warning(lb: &LoadBalancer) -> Option<Warning> {
    let t = lb.load_balancer_type.as_ref()?;
    t.deprecation.as_ref().filter(|d| !d.is_null())?;
    Some(Warning::new(
        "LoadBalancerTypeDeprecated",
        format!(
            "load balancer type {} is deprecated; set {} to a current type",
            t.name,
            a::TYPE
        ),
    ))
}

/// Detach from foreign networks or a wrong fixed IP, attach, then the public interface.
fn network_ops(lb: &LoadBalancer, spec: &LbSpec, network: Option<i64>) -> Vec<Op> {
    let mut ops = Vec::new();
    if let Some(net) = network {
        let mut attached = false;
        for p in &lb.private_net {
            let wrong_ip = p.network == net
                && spec
                    .private_ipv4
                    .is_some_and(|want| p.ip.as_deref() != Some(want.to_string().as_str()));
            if p.network != net || wrong_ip {
                ops.push(Op::DetachNetwork(p.network));
            } else {
                attached = true;
            }
        }
        if !attached {
            ops.push(Op::AttachNetwork {
                network: net,
                ip: spec.private_ipv4.map(|i| i.to_string()),
                ip_range: spec.private_subnet_ip_range.clone(),
            });
        }
    }
    let public_enabled = lb.public_net.as_ref().is_some_and(|p| p.enabled);
    match spec.disable_public_network {
        Some(true) if public_enabled => ops.push(Op::DisablePublicInterface),
        Some(false) if !public_enabled => ops.push(Op::EnablePublicInterface),
        _ => {}
    }
    ops
}

/// Delete services of removed ports, update changed ones, add new ones. Untouched ports (no
/// nodePort) are neither: never delete what we cannot build again. On a shared load balancer
/// only the `claimed` ports are this Service's to delete.
fn service_ops(
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

/// A target that did not fit.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Target {
    Server(i64),
    Ip(String),
}

/// Remove unwanted or wrong-mode server targets and IP targets that are no dedicated server's
/// (HCCM removes those whether Robot is on or not: the load balancer is ours), then add up to
/// `max`; returns what did not fit. Label-selector targets (not made by us) stay and count.
fn target_ops(
    lb: &LoadBalancer,
    spec: &LbSpec,
    targets: &DesiredTargets,
    max: u32,
) -> (Vec<Op>, Vec<Target>) {
    let mut ops = Vec::new();
    let want: BTreeSet<i64> = targets.servers.iter().copied().collect();
    let want_ips: BTreeSet<&str> = targets.ips.iter().map(String::as_str).collect();
    let mut kept = BTreeSet::new();
    let mut kept_ips = BTreeSet::new();
    let mut other_targets = 0u32;
    for t in &lb.targets {
        match (t.kind.as_str(), &t.server, &t.ip) {
            ("server", Some(s), _)
                if want.contains(&s.id) && t.use_private_ip == spec.use_private_ip =>
            {
                kept.insert(s.id);
            }
            ("server", Some(s), _) => ops.push(Op::RemoveTarget(s.id)),
            ("ip", _, Some(ip)) if want_ips.contains(ip.ip.as_str()) => {
                kept_ips.insert(ip.ip.clone());
            }
            ("ip", _, Some(ip)) => ops.push(Op::RemoveIpTarget(ip.ip.clone())),
            _ => other_targets += 1,
        }
    }
    let mut room = max.saturating_sub((kept.len() + kept_ips.len()) as u32 + other_targets);
    let mut skipped = Vec::new();
    let missing = targets
        .servers
        .iter()
        .filter(|id| !kept.contains(*id))
        .map(|id| Target::Server(*id))
        .chain(
            targets
                .ips
                .iter()
                .filter(|ip| !kept_ips.contains(*ip))
                .map(|ip| Target::Ip(ip.clone())),
        );
    for target in missing {
        if room == 0 {
            skipped.push(target);
            continue;
        }
        room -= 1;
        ops.push(match target {
            Target::Server(server) => Op::AddTarget {
                server,
                use_private_ip: spec.use_private_ip,
            },
            Target::Ip(ip) => Op::AddIpTarget(ip),
        });
    }
    (ops, skipped)
}

/// HCCM's `MaxTargetsReached`, one per Node that could not be added (the event goes on the Node).
/// `target` is the server id or, for a dedicated server, its address.
pub fn max_targets_warning(
    max: u32,
    target: &str,
    node: Option<&String>,
    service: &str,
) -> Warning {
    let message = |who: &str| {
        format!(
            "{who} (server {target}) could not be added to the load balancer of Service {service}: \
             its type allows {max} targets. Choose a larger type with {}",
            a::TYPE
        )
    };
    match node {
        Some(n) => Warning::on_node(n, "MaxTargetsReached", message(&format!("node {n}"))),
        None => Warning::new("MaxTargetsReached", message("a node")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hcloud::config::LbDefaults;
    use crate::hcloud::wire::{IdRef, LbTarget, LbType};
    use crate::provider::{ServiceRef, TrafficPolicy};
    use serde_json::json;

    fn port(protocol: PortProtocol, port: u16, node_port: u16) -> ServicePort {
        ServicePort {
            name: None,
            protocol,
            port,
            node_port,
        }
    }

    fn svc(ann: &[(&str, &str)]) -> ServiceRef {
        ServiceRef {
            uid: "u-1".into(),
            namespace: "ns".into(),
            name: "web".into(),
            annotations: ann
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ports: vec![
                port(PortProtocol::Tcp, 80, 30080),
                port(PortProtocol::Tcp, 443, 30443),
                port(PortProtocol::Udp, 53, 30053),
            ],
            ..Default::default()
        }
    }

    fn spec_of(s: &ServiceRef) -> LbSpec {
        LbSpec::parse(s, &LbDefaults::default()).unwrap()
    }

    fn node(i: i64) -> LbNode {
        LbNode {
            name: format!("n{i}"),
            provider_id: Some(format!("hcloud://{i}")),
            ..Default::default()
        }
    }

    fn targets(ids: impl IntoIterator<Item = i64>) -> DesiredTargets {
        let nodes: Vec<LbNode> = ids.into_iter().map(node).collect();
        desired_targets(&LbSpec::default(), &nodes, &RobotTargets::default())
    }

    fn input<'a>(services: &'a DesiredServices, targets: &'a DesiredTargets) -> PlanInput<'a> {
        PlanInput {
            uid: "u-1",
            service: "ns/web",
            network: None,
            services,
            targets,
            shared: None,
        }
    }

    /// What the API shows after creating exactly what we asked (filling in its own defaults).
    fn as_created(services: &[LbService], targets: &[i64], uid: &str) -> LoadBalancer {
        LoadBalancer {
            id: 1,
            name: "a-lb".into(),
            labels: BTreeMap::from([(SERVICE_UID_LABEL.to_string(), uid.to_string())]),
            load_balancer_type: Some(LbType {
                name: "lb11".into(),
                max_targets: Some(25),
                max_services: Some(5),
                ..Default::default()
            }),
            services: services.iter().map(api_defaults).collect(),
            targets: targets
                .iter()
                .map(|id| LbTarget {
                    kind: "server".into(),
                    server: Some(IdRef { id: *id }),
                    ..Default::default()
                })
                .collect(),
            public_net: Some(Default::default()),
            ..Default::default()
        }
    }

    fn api_defaults(s: &LbService) -> LbService {
        let mut s = s.clone();
        s.proxyprotocol.get_or_insert(false);
        let hc = s.health_check.as_mut().unwrap();
        hc.interval.get_or_insert(15);
        hc.timeout.get_or_insert(10);
        hc.retries.get_or_insert(3);
        if let Some(h) = &mut hc.http {
            h.path.get_or_insert_with(|| "/".into());
            h.status_codes
                .get_or_insert_with(|| vec!["2??".into(), "3??".into()]);
            h.tls.get_or_insert(false);
        }
        if let Some(h) = &mut s.http {
            h.cookie_name.get_or_insert_with(|| "HCLBSTICKY".into());
            h.cookie_lifetime.get_or_insert(300);
            h.sticky_sessions.get_or_insert(false);
            h.redirect_http.get_or_insert(false);
            h.timeout_idle.get_or_insert(60);
        }
        s
    }

    fn names(ops: &[Op]) -> Vec<&'static str> {
        ops.iter()
            .map(|o| o.action().map_or("PUT", |a| a.name))
            .collect()
    }

    #[test]
    fn udp_is_skipped_with_warning() {
        let s = svc(&[]);
        let d = desired_services(&spec_of(&s), &s.ports);
        assert_eq!(d.services.len(), 2);
        assert_eq!(d.unsupported, ["53/UDP"]);
        assert_eq!(d.warnings.len(), 1);
        assert_eq!(d.warnings[0].reason, "UnsupportedProtocolConfigured");
        assert_eq!(d.services[0].destination_port, 30080);
        assert_eq!(d.services[0].health_check.as_ref().unwrap().port, 30080);
    }

    #[test]
    fn nothing_changed_means_no_ops() {
        let s = svc(&[]);
        let d = desired_services(&spec_of(&s), &s.ports);
        let t = targets(1..=10);
        assert!(t.warnings.is_empty());
        let lb = as_created(&d.services, &t.servers, "u-1");
        let (ops, warnings) = plan(&lb, &spec_of(&s), &input(&d, &t));
        assert!(ops.is_empty(), "{ops:?}");
        assert!(warnings.is_empty());
    }

    #[test]
    fn diffs_only_what_changed() {
        let s = svc(&[]);
        let spec = spec_of(&s);
        let d = desired_services(&spec, &s.ports);
        let lb = as_created(&d.services, &[1, 2, 3], "u-1");
        // Node 3 left, node 4 joined; PROXY protocol switched on.
        let spec2 = LbSpec {
            proxy_protocol: Some(true),
            ..spec
        };
        let d2 = desired_services(&spec2, &s.ports);
        let t = targets([1, 2, 4]);
        let (ops, _) = plan(&lb, &spec2, &input(&d2, &t));
        assert_eq!(
            names(&ops),
            [
                "update_service",
                "update_service",
                "remove_target",
                "add_target"
            ]
        );
        assert!(ops.contains(&Op::RemoveTarget(3)));
    }

    #[test]
    fn port_without_node_port_is_neither_updated_nor_deleted() {
        let s = svc(&[]);
        let spec = spec_of(&s);
        let d = desired_services(&spec, &s.ports);
        let lb = as_created(&d.services, &[], "u-1");
        // 443 lost its nodePort, and PROXY protocol is switched on for what can be built.
        let mut s2 = s.clone();
        s2.ports[1].node_port = 0;
        let spec2 = LbSpec {
            proxy_protocol: Some(true),
            ..spec
        };
        let d2 = desired_services(&spec2, &s2.ports);
        assert_eq!(d2.untouched, BTreeSet::from([443]));
        assert!(
            d2.warnings
                .iter()
                .any(|w| w.reason == "NodePortNotAllocated" && w.message.contains("443"))
        );
        let t = targets([]);
        let (ops, _) = plan(&lb, &spec2, &input(&d2, &t));
        assert_eq!(ops.len(), 1, "{ops:?}");
        assert!(matches!(&ops[0], Op::UpdateService(x) if x.listen_port == 80));
        // Nor is one added where none exists.
        let mut lb80 = lb.clone();
        lb80.services.retain(|x| x.listen_port == 80);
        let d3 = desired_services(&spec_of(&s2), &s2.ports);
        let (ops, _) = plan(&lb80, &spec_of(&s2), &input(&d3, &t));
        assert!(ops.is_empty(), "{ops:?}");
    }

    #[test]
    fn renames_only_when_the_name_annotation_asks() {
        let s = svc(&[]);
        let spec = spec_of(&s);
        let d = desired_services(&spec, &s.ports);
        let t = targets([]);
        let lb = as_created(&d.services, &[], "u-1");
        assert_ne!(lb.name, spec.name);
        assert!(plan(&lb, &spec, &input(&d, &t)).0.is_empty());
        // Adopted without a label: the label is set, the name kept.
        let mut unlabelled = lb.clone();
        unlabelled.labels.clear();
        let (ops, _) = plan(&unlabelled, &spec, &input(&d, &t));
        assert_eq!(
            ops,
            [Op::Update {
                name: None,
                labels: Some(BTreeMap::from([(
                    SERVICE_UID_LABEL.to_string(),
                    "u-1".to_string()
                )]))
            }]
        );
        assert_eq!(ops[0].body(), json!({"labels": {SERVICE_UID_LABEL: "u-1"}}));
        let named = spec_of(&svc(&[(a::NAME, "new-name")]));
        let (ops, _) = plan(&lb, &named, &input(&d, &t));
        assert_eq!(ops[0].body(), json!({"name": "new-name"}));
    }

    #[test]
    fn unset_proxy_protocol_and_health_check_path_leave_the_lb_as_it_is() {
        let hc = [(a::PROTOCOL, "http"), (a::HEALTH_CHECK_PROTOCOL, "http")];
        let s = svc(&hc);
        let spec = spec_of(&s);
        assert_eq!(spec.proxy_protocol, None);
        assert_eq!(spec.health_check.http_path, None);
        let d = desired_services(&spec, &s.ports);
        let wire = serde_json::to_value(&d.services[0]).unwrap();
        assert!(wire.get("proxyprotocol").is_none(), "{wire}");
        assert!(wire["health_check"]["http"].get("path").is_none(), "{wire}");
        // Someone switched PROXY protocol on and set a path: unset annotations keep that.
        let mut lb = as_created(&d.services, &[], "u-1");
        for x in &mut lb.services {
            x.proxyprotocol = Some(true);
            x.health_check.as_mut().unwrap().http.as_mut().unwrap().path = Some("/healthz".into());
        }
        let t = targets([]);
        assert!(plan(&lb, &spec, &input(&d, &t)).0.is_empty());
        // Set explicitly, they are enforced.
        let off = spec_of(&svc(&[
            hc[0],
            hc[1],
            (a::USES_PROXYPROTOCOL, "false"),
            (a::HEALTH_CHECK_HTTP_PATH, "/"),
        ]));
        let d_off = desired_services(&off, &s.ports);
        assert_eq!(plan(&lb, &off, &input(&d_off, &t)).0.len(), 2);
    }

    #[test]
    fn kube_proxy_health_checks_ask_healthz_where_kube_proxy_answers() {
        let hc_of = |ann: &[(&str, &str)], d: &LbDefaults, traffic: TrafficPolicy| {
            let s = ServiceRef {
                traffic_policy: traffic,
                ..svc(ann)
            };
            let spec = LbSpec::parse(&s, d).unwrap();
            let services = desired_services(&spec, &s.ports).services;
            let hc: Vec<HealthCheck> = services
                .iter()
                .map(|s| s.health_check.clone().unwrap())
                .collect();
            hc[0].clone()
        };
        let local = TrafficPolicy::Local {
            health_check_node_port: Some(31999),
        };
        let on = [(a::HEALTH_CHECK_KUBE_PROXY, "true")];
        let none = LbDefaults::default();
        let healthz = |port| HealthCheck {
            protocol: "http".into(),
            port,
            http: Some(HealthCheckHttp {
                path: Some("/healthz".into()),
                ..Default::default()
            }),
            ..Default::default()
        };
        // Local: the Service's healthCheckNodePort; Cluster: kube-proxy's own health server.
        assert_eq!(hc_of(&on, &none, local), healthz(31999));
        let s = ServiceRef {
            traffic_policy: local,
            ..svc(&on)
        };
        let spec = LbSpec::parse(&s, &none).unwrap();
        let all = desired_services(&spec, &s.ports).services;
        assert!(all.len() > 1 && all.iter().all(|x| x.health_check == Some(healthz(31999))));
        assert_eq!(hc_of(&on, &none, TrafficPolicy::Cluster), healthz(10256));
        // Off by default (HCCM's TCP check on the NodePort), on for all by the env variable,
        // and the annotation's "false" wins over the env.
        let env = LbDefaults {
            health_check_kube_proxy: true,
            ..Default::default()
        };
        assert_eq!(hc_of(&[], &none, local).port, 30080);
        assert_eq!(hc_of(&[], &env, local), healthz(31999));
        let off = [(a::HEALTH_CHECK_KUBE_PROXY, "false")];
        assert_eq!(hc_of(&off, &env, local).protocol, "tcp");
        // An explicit health-check annotation wins, field by field.
        let explicit = [
            (a::HEALTH_CHECK_KUBE_PROXY, "true"),
            (a::HEALTH_CHECK_PORT, "8080"),
            (a::HEALTH_CHECK_HTTP_PATH, "/ready"),
        ];
        let hc = hc_of(&explicit, &none, local);
        assert_eq!((hc.protocol.as_str(), hc.port), ("http", 8080));
        assert_eq!(hc.http.unwrap().path.as_deref(), Some("/ready"));
        let tcp = [
            (a::HEALTH_CHECK_KUBE_PROXY, "true"),
            (a::HEALTH_CHECK_PROTOCOL, "tcp"),
        ];
        let hc = hc_of(&tcp, &none, local);
        assert_eq!(
            (hc.protocol.as_str(), hc.port, hc.http),
            ("tcp", 31999, None)
        );
        // Local before the apiserver allocated the port: HCCM's check until it has.
        let unallocated = TrafficPolicy::Local {
            health_check_node_port: None,
        };
        assert_eq!(hc_of(&on, &none, unallocated).port, 30080);
    }

    #[test]
    fn kube_proxy_unreachable_falls_back_to_tcp_on_the_node_port() {
        let check = |s: &ServiceRef| {
            let spec = LbSpec::parse(s, &LbDefaults::default()).unwrap();
            desired_services(&spec, &s.ports).services[0]
                .health_check
                .clone()
                .unwrap()
        };
        for traffic in [
            TrafficPolicy::Cluster,
            TrafficPolicy::Local {
                health_check_node_port: Some(31999),
            },
        ] {
            let asking = ServiceRef {
                traffic_policy: traffic,
                ..svc(&[(a::HEALTH_CHECK_KUBE_PROXY, "true")])
            };
            assert_eq!(check(&asking).protocol, "http");
            let unreachable = ServiceRef {
                kube_proxy_unreachable: true,
                ..asking
            };
            // The block HCCM sends without the option: it replaces kube-proxy's HTTP check.
            let hc = check(&unreachable);
            assert_eq!(
                (hc.protocol.as_str(), hc.port, hc.http),
                ("tcp", 30080, None),
                "{traffic:?}"
            );
        }
        // Other health-check annotations still apply to the NodePort check.
        let timed = ServiceRef {
            kube_proxy_unreachable: true,
            ..svc(&[
                (a::HEALTH_CHECK_KUBE_PROXY, "true"),
                (a::HEALTH_CHECK_INTERVAL, "5s"),
            ])
        };
        let hc = check(&timed);
        assert_eq!((hc.port, hc.interval), (30080, Some(5)));
    }

    #[test]
    fn health_check_block_only_when_hccm_would_send_it() {
        let hc_of = |ann: &[(&str, &str)], d: &LbDefaults| {
            let s = svc(ann);
            let spec = LbSpec::parse(&s, d).unwrap();
            desired_services(&spec, &s.ports).services[0]
                .health_check
                .clone()
                .unwrap()
        };
        let none = LbDefaults::default();
        let tcp_on_node_port = HealthCheck {
            protocol: "tcp".into(),
            port: 30080,
            ..Default::default()
        };
        // HTTP service, only HTTP health-check details: still TCP on the NodePort.
        let details = [
            (a::PROTOCOL, "http"),
            (a::HEALTH_CHECK_HTTP_PATH, "/healthz"),
            (a::HEALTH_CHECK_HTTP_DOMAIN, "example.com"),
            (a::HEALTH_CHECK_HTTP_VALIDATE_CERTIFICATE, "true"),
            (a::HTTP_STATUS_CODES, "200"),
        ];
        assert_eq!(hc_of(&details, &none), tcp_on_node_port);
        // Any of protocol/port/interval/timeout/retries switches the block on, with the
        // Service's protocol and the details.
        let mut with_retries = details.to_vec();
        with_retries.push((a::HEALTH_CHECK_RETRIES, "5"));
        let hc = hc_of(&with_retries, &none);
        assert_eq!(
            (hc.protocol.as_str(), hc.port, hc.retries),
            ("http", 30080, Some(5))
        );
        assert_eq!(hc.http.unwrap().path.as_deref(), Some("/healthz"));
        // So does an env default.
        let env = LbDefaults {
            health_check_interval: Some(std::time::Duration::from_secs(5)),
            ..Default::default()
        };
        let hc = hc_of(&[], &env);
        assert_eq!(
            (hc.protocol.as_str(), hc.interval, hc.http),
            ("tcp", Some(5), None)
        );
        // A zero env default does not (HCCM checks `!= 0`).
        let zero = LbDefaults {
            health_check_retries: Some(0),
            ..Default::default()
        };
        assert_eq!(hc_of(&[], &zero), tcp_on_node_port);
    }

    #[test]
    fn max_targets_warns_per_node_and_a_type_change_makes_room() {
        let s = svc(&[(a::TYPE, "lb11")]);
        let spec = spec_of(&s);
        let d = desired_services(&spec, &s.ports);
        let lb = as_created(&d.services, &(1..=25).collect::<Vec<_>>(), "u-1");
        let t = targets(1..=30);
        let (ops, w) = plan(&lb, &spec, &input(&d, &t));
        assert!(ops.is_empty(), "{ops:?}");
        assert_eq!(w.len(), 5);
        assert!(w.iter().all(|w| w.reason == "MaxTargetsReached"));
        assert_eq!(w[0].node.as_deref(), Some("n26"));
        assert!(w[0].message.contains("server 26") && w[0].message.contains("ns/web"));
        // Changing to lb21: the room comes from lb21 (75), not the current lb11.
        let bigger = spec_of(&svc(&[(a::TYPE, "lb21")]));
        let (ops, w) = plan(&lb, &bigger, &input(&d, &t));
        assert!(w.is_empty(), "{w:?}");
        assert_eq!(ops[0], Op::ChangeType("lb21".into()));
        assert_eq!(names(&ops[1..]), ["add_target"; 5]);
    }

    #[test]
    fn bad_service_sets_are_refused_before_any_write() {
        let spec = spec_of(&svc(&[]));
        let many: Vec<ServicePort> = (0..6)
            .map(|i| port(PortProtocol::Tcp, 8000 + i, 30000 + i))
            .collect();
        let d = desired_services(&spec, &many);
        // New lb11: 6 > 5.
        let e = check_services(&d, None, &spec).unwrap_err().to_string();
        assert!(e.contains("6 ports") && e.contains("lb11"), "{e}");
        // An existing lb21 has room; an existing lb11 has not, unless it is being changed to lb21.
        let mut lb21 = as_created(&[], &[], "u-1");
        lb21.load_balancer_type = Some(LbType {
            name: "lb21".into(),
            max_services: Some(15),
            ..Default::default()
        });
        assert!(check_services(&d, Some(&lb21), &spec).is_ok());
        let lb11 = as_created(&[], &[], "u-1");
        assert!(check_services(&d, Some(&lb11), &spec).is_err());
        let to21 = spec_of(&svc(&[(a::TYPE, "lb21")]));
        assert!(check_services(&d, Some(&lb11), &to21).is_ok());
        // Nothing servable and no LB yet: no empty LB.
        let useless = [
            port(PortProtocol::Udp, 53, 30053),
            port(PortProtocol::Tcp, 80, 0),
        ];
        let d = desired_services(&spec, &useless);
        let e = check_services(&d, None, &spec).unwrap_err().to_string();
        assert!(
            e.contains("53/UDP") && e.contains("80/TCP without nodePort"),
            "{e}"
        );
        // With an LB, rule "leave untouched" applies instead.
        assert!(check_services(&d, Some(&lb11), &spec).is_ok());
    }

    #[test]
    fn node_selector_and_foreign_ids() {
        let s = svc(&[("load-balancer.hetzner.cloud/node-selector", "role=edge")]);
        let spec = spec_of(&s);
        let mut edge = node(1);
        std::sync::Arc::make_mut(&mut edge.labels).insert("role".into(), "edge".into());
        let mut robot = node(2);
        std::sync::Arc::make_mut(&mut robot.labels).insert("role".into(), "edge".into());
        robot.provider_id = Some("hrobot://7".into());
        let mut aws = node(3);
        std::sync::Arc::make_mut(&mut aws.labels).insert("role".into(), "edge".into());
        aws.provider_id = Some("aws:///i-1".into());
        let t = desired_targets(
            &spec,
            &[edge, robot, aws, node(4)],
            &RobotTargets::default(),
        );
        assert_eq!(t.servers, [1]);
        assert_eq!(t.nodes[&1], "n1");
        let reasons: Vec<&str> = t.warnings.iter().map(|w| w.reason.as_str()).collect();
        assert_eq!(
            reasons,
            ["RobotServerNotSupported", "UnknownProviderIDPrefix"]
        );
    }

    #[test]
    fn network_and_private_ip_flip() {
        let s = svc(&[("load-balancer.hetzner.cloud/use-private-ip", "true")]);
        let spec = spec_of(&s);
        let d = desired_services(&spec, &s.ports);
        let lb = as_created(&d.services, &[1], "u-1");
        let t = targets([1]);
        let mut inp = input(&d, &t);
        inp.network = Some(9);
        let (ops, _) = plan(&lb, &spec, &inp);
        assert_eq!(
            ops,
            [
                Op::AttachNetwork {
                    network: 9,
                    ip: None,
                    ip_range: None
                },
                Op::RemoveTarget(1),
                Op::AddTarget {
                    server: 1,
                    use_private_ip: true
                }
            ]
        );
    }
}
