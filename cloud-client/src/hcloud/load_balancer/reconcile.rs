//! Desired state from the spec, and the minimal list of operations that turns the actual load balancer
//! into it. Pure functions: no I/O, so the "zero writes when nothing changed" rule is unit-testable.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use super::spec::{LbProtocol, LbSpec};
use crate::hcloud::label_selector::SERVICE_UID_LABEL;
use crate::hcloud::provider_id::ProviderId;
use crate::hcloud::wire::{HealthCheck, HealthCheckHttp, LbService, LbServiceHttp, LoadBalancer};
use crate::provider::{LbNode, PortProtocol, ServicePort, Warning};

/// Load balancer type used when neither annotation nor env names one (HCCM's fallback).
pub const DEFAULT_LB_TYPE: &str = "lb11";

/// `max_targets` of the known types, used before the load balancer exists (create request).
pub fn known_max_targets(lb_type: &str) -> u32 {
    match lb_type {
        "lb21" => 75,
        "lb31" => 150,
        _ => 25,
    }
}

/// One write against a load balancer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    Update {
        name: String,
        labels: BTreeMap<String, String>,
    },
    ChangeDnsPtr {
        ip: String,
        dns_ptr: String,
    },
    ChangeAlgorithm(String),
    ChangeType(String),
    DetachNetwork(i64),
    AttachNetwork {
        network: i64,
        ip: Option<String>,
        ip_range: Option<String>,
    },
    EnablePublicInterface,
    DisablePublicInterface,
    DeleteService(u16),
    UpdateService(LbService),
    AddService(LbService),
    RemoveTarget(i64),
    AddTarget {
        server: i64,
        use_private_ip: bool,
    },
}

impl Op {
    /// `(action name or None for PUT, body)`.
    pub fn request(&self) -> (Option<&'static str>, Value) {
        match self {
            Op::Update { name, labels } => (None, json!({"name": name, "labels": labels})),
            Op::ChangeDnsPtr { ip, dns_ptr } => (
                Some("change_dns_ptr"),
                json!({"ip": ip, "dns_ptr": dns_ptr}),
            ),
            Op::ChangeAlgorithm(t) => (Some("change_algorithm"), json!({"type": t})),
            Op::ChangeType(t) => (Some("change_type"), json!({"load_balancer_type": t})),
            Op::DetachNetwork(n) => (Some("detach_from_network"), json!({"network": n})),
            Op::AttachNetwork {
                network,
                ip,
                ip_range,
            } => {
                let mut b = json!({"network": network});
                if let Some(ip) = ip {
                    b["ip"] = json!(ip);
                }
                if let Some(r) = ip_range {
                    b["ip_range"] = json!(r);
                }
                (Some("attach_to_network"), b)
            }
            Op::EnablePublicInterface => (Some("enable_public_interface"), json!({})),
            Op::DisablePublicInterface => (Some("disable_public_interface"), json!({})),
            Op::DeleteService(p) => (Some("delete_service"), json!({"listen_port": p})),
            Op::UpdateService(s) => (
                Some("update_service"),
                serde_json::to_value(s).unwrap_or_default(),
            ),
            Op::AddService(s) => (
                Some("add_service"),
                serde_json::to_value(s).unwrap_or_default(),
            ),
            Op::RemoveTarget(id) => (
                Some("remove_target"),
                json!({"type": "server", "server": {"id": id}}),
            ),
            Op::AddTarget {
                server,
                use_private_ip,
            } => (
                Some("add_target"),
                json!({"type": "server", "server": {"id": server}, "use_private_ip": use_private_ip}),
            ),
        }
    }
}

/// The TCP ports of the Service as load-balancer services; other protocols are skipped with a warning.
pub fn desired_services(
    spec: &LbSpec,
    ports: &[ServicePort],
    certificates: &[i64],
) -> (Vec<LbService>, Vec<Warning>) {
    let mut warnings = Vec::new();
    let mut out = Vec::new();
    for p in ports {
        if p.protocol != PortProtocol::Tcp {
            warnings.push(Warning::new(
                "UnsupportedProtocolConfigured",
                format!(
                    "port {} uses protocol {}; Hetzner load balancers only forward TCP, the port is skipped",
                    p.port,
                    p.protocol.as_str()
                ),
            ));
            continue;
        }
        if p.node_port == 0 {
            continue;
        }
        out.push(service_for(spec, p, certificates));
    }
    (out, warnings)
}

fn service_for(spec: &LbSpec, p: &ServicePort, certificates: &[i64]) -> LbService {
    let http = match spec.protocol {
        LbProtocol::Tcp => None,
        proto => Some(LbServiceHttp {
            cookie_name: spec.http.cookie_name.clone(),
            cookie_lifetime: spec.http.cookie_lifetime.map(|d| d.as_secs()),
            certificates: if proto == LbProtocol::Https {
                certificates.to_vec()
            } else {
                Vec::new()
            },
            redirect_http: if proto == LbProtocol::Https {
                spec.http.redirect_http
            } else {
                None
            },
            sticky_sessions: spec.http.sticky_sessions,
            timeout_idle: spec.http.timeout_idle.map(|d| d.as_secs()),
        }),
    };
    let hc = &spec.health_check;
    let hc_proto = if hc.custom {
        hc.protocol.unwrap_or(spec.protocol)
    } else {
        LbProtocol::Tcp
    };
    let health_http = (hc_proto != LbProtocol::Tcp).then(|| HealthCheckHttp {
        domain: hc.http_domain.clone(),
        path: Some(hc.http_path.clone().unwrap_or_else(|| "/".to_string())),
        status_codes: (!hc.http_status_codes.is_empty()).then(|| hc.http_status_codes.clone()),
        tls: hc.http_validate_certificate,
    });
    LbService {
        protocol: spec.protocol.as_str().to_string(),
        listen_port: p.port,
        destination_port: p.node_port,
        proxyprotocol: spec.proxy_protocol,
        http,
        health_check: Some(HealthCheck {
            protocol: hc_proto.as_str().to_string(),
            port: hc.port.unwrap_or(p.node_port),
            interval: hc.interval.map(|d| d.as_secs()),
            timeout: hc.timeout.map(|d| d.as_secs()),
            retries: hc.retries,
            http: health_http,
        }),
    }
}

/// True when `actual` already has everything `desired` asks for. Fields the desired side leaves unset
/// are the API's to default, so they never cause an update.
pub fn service_matches(actual: &LbService, desired: &LbService) -> bool {
    fn opt<T: PartialEq>(want: &Option<T>, have: &Option<T>) -> bool {
        want.is_none() || want == have
    }
    if actual.protocol != desired.protocol
        || actual.destination_port != desired.destination_port
        || actual.proxyprotocol != desired.proxyprotocol
    {
        return false;
    }
    let http_ok = match (&desired.http, &actual.http) {
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
    };
    let hc_ok = match (&desired.health_check, &actual.health_check) {
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
    };
    http_ok && hc_ok
}

/// Server ids of the nodes that should be targets, in node order. Nodes rejected by the node selector
/// are dropped silently; foreign or Robot providerIDs with a warning (like HCCM's
/// `UnknownProviderIDPrefix`); nodes without providerID (not initialized yet) are skipped.
pub fn desired_targets(spec: &LbSpec, nodes: &[LbNode]) -> (Vec<i64>, Vec<Warning>) {
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    let mut warnings = Vec::new();
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
                if seen.insert(id) {
                    out.push(id);
                }
            }
            Ok(ProviderId::Robot(_)) => warnings.push(Warning::on_node(
                &n.name,
                "RobotServerNotSupported",
                format!(
                    "node {} is a Robot server ({pid}); it is not added as a load balancer target",
                    n.name
                ),
            )),
            Err(_) => warnings.push(Warning::on_node(
                &n.name,
                "UnknownProviderIDPrefix",
                format!(
                    "node {} has providerID {pid:?} which is not a Hetzner Cloud server; skipped",
                    n.name
                ),
            )),
        }
    }
    (out, warnings)
}

/// Inputs of [`plan`] that do not come from the spec.
#[derive(Debug, Clone)]
pub struct PlanInput<'a> {
    pub uid: &'a str,
    pub network: Option<i64>,
    pub services: &'a [LbService],
    pub targets: &'a [i64],
    /// Whether the type was set by annotation or env (only then is it enforced).
    pub type_explicit: bool,
}

/// The writes needed to turn `lb` into the desired state, in a safe order, plus warnings.
pub fn plan(lb: &LoadBalancer, spec: &LbSpec, input: &PlanInput<'_>) -> (Vec<Op>, Vec<Warning>) {
    let mut ops = Vec::new();
    let mut warnings = Vec::new();

    // Identity first, so a crash after this point still finds the LB by label next time.
    if lb.name != spec.name
        || lb.labels.get(SERVICE_UID_LABEL).map(String::as_str) != Some(input.uid)
    {
        let mut labels = lb.labels.clone();
        labels.insert(SERVICE_UID_LABEL.to_string(), input.uid.to_string());
        ops.push(Op::Update {
            name: spec.name.clone(),
            labels,
        });
    }

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
    if let Some(alg) = &spec.algorithm
        && lb.algorithm.as_ref().map(|a| a.kind.as_str()) != Some(alg.as_str())
    {
        ops.push(Op::ChangeAlgorithm(alg.clone()));
    }
    if input.type_explicit
        && let Some(t) = &spec.lb_type
        && lb.load_balancer_type.as_ref().map(|x| x.name.as_str()) != Some(t.as_str())
    {
        ops.push(Op::ChangeType(t.clone()));
    }
    if lb
        .load_balancer_type
        .as_ref()
        .is_some_and(|t| t.deprecation.as_ref().is_some_and(|d| !d.is_null()))
    {
        warnings.push(Warning::new(
            "LoadBalancerTypeDeprecated",
            format!(
                "load balancer type {} is deprecated; set {} to a current type",
                lb.load_balancer_type
                    .as_ref()
                    .map(|t| t.name.as_str())
                    .unwrap_or(""),
                super::annotations::TYPE
            ),
        ));
    }

    // Network: detach from foreign networks or a wrong fixed IP, then attach.
    let mut attached = false;
    if let Some(net) = input.network {
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
    match spec.disable_public_network {
        Some(true) if public.enabled => ops.push(Op::DisablePublicInterface),
        Some(false) if !public.enabled => ops.push(Op::EnablePublicInterface),
        _ => {}
    }

    // Services: delete removed ports, update changed ones, add new ones.
    let wanted: BTreeMap<u16, &LbService> =
        input.services.iter().map(|s| (s.listen_port, s)).collect();
    for a in &lb.services {
        if !wanted.contains_key(&a.listen_port) {
            ops.push(Op::DeleteService(a.listen_port));
        }
    }
    for d in input.services {
        match lb.services.iter().find(|a| a.listen_port == d.listen_port) {
            Some(a) if service_matches(a, d) => {}
            Some(_) => ops.push(Op::UpdateService(d.clone())),
            None => ops.push(Op::AddService(d.clone())),
        }
    }

    // Targets: remove unwanted or wrong-mode server targets, then add up to max_targets.
    let want: BTreeSet<i64> = input.targets.iter().copied().collect();
    let mut kept = BTreeSet::new();
    let mut other_targets = 0u32;
    for t in &lb.targets {
        match (t.kind.as_str(), &t.server) {
            ("server", Some(s))
                if want.contains(&s.id) && t.use_private_ip == spec.use_private_ip =>
            {
                kept.insert(s.id);
            }
            ("server", Some(s)) => ops.push(Op::RemoveTarget(s.id)),
            _ => other_targets += 1,
        }
    }
    let max = lb
        .load_balancer_type
        .as_ref()
        .and_then(|t| t.max_targets)
        .unwrap_or_else(|| known_max_targets(spec.lb_type.as_deref().unwrap_or(DEFAULT_LB_TYPE)));
    let mut room = max.saturating_sub(kept.len() as u32 + other_targets);
    let mut skipped = Vec::new();
    for id in input.targets {
        if kept.contains(id) {
            continue;
        }
        if room == 0 {
            skipped.push(*id);
            continue;
        }
        room -= 1;
        ops.push(Op::AddTarget {
            server: *id,
            use_private_ip: spec.use_private_ip,
        });
    }
    if !skipped.is_empty() {
        warnings.push(max_targets_warning(max, &skipped));
    }
    (ops, warnings)
}

pub fn max_targets_warning(max: u32, skipped: &[i64]) -> Warning {
    Warning::new(
        "MaxTargetsReached",
        format!(
            "load balancer type allows {max} targets; {} server(s) not added: {:?}. Choose a larger type with {}",
            skipped.len(),
            skipped,
            super::annotations::TYPE
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hcloud::config::LbDefaults;
    use crate::hcloud::wire::{IdRef, LbTarget, LbType};
    use crate::provider::ServiceRef;

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
                ServicePort {
                    name: None,
                    protocol: PortProtocol::Tcp,
                    port: 80,
                    node_port: 30080,
                },
                ServicePort {
                    name: None,
                    protocol: PortProtocol::Tcp,
                    port: 443,
                    node_port: 30443,
                },
                ServicePort {
                    name: None,
                    protocol: PortProtocol::Udp,
                    port: 53,
                    node_port: 30053,
                },
            ],
        }
    }

    fn node(i: i64) -> LbNode {
        LbNode {
            name: format!("n{i}"),
            provider_id: Some(format!("hcloud://{i}")),
            ..Default::default()
        }
    }

    /// What the API returns after creating exactly what we asked (plus its own defaults).
    fn as_created(
        spec: &LbSpec,
        services: &[LbService],
        targets: &[i64],
        uid: &str,
    ) -> LoadBalancer {
        LoadBalancer {
            id: 1,
            name: spec.name.clone(),
            labels: BTreeMap::from([(SERVICE_UID_LABEL.to_string(), uid.to_string())]),
            load_balancer_type: Some(LbType {
                name: "lb11".into(),
                max_targets: Some(25),
                ..Default::default()
            }),
            services: services
                .iter()
                .map(|s| {
                    let mut s = s.clone();
                    let hc = s.health_check.as_mut().unwrap();
                    hc.interval.get_or_insert(15);
                    hc.timeout.get_or_insert(10);
                    hc.retries.get_or_insert(3);
                    s
                })
                .collect(),
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

    #[test]
    fn udp_is_skipped_with_warning() {
        let s = svc(&[]);
        let spec = LbSpec::parse(&s, &LbDefaults::default()).unwrap();
        let (services, w) = desired_services(&spec, &s.ports, &[]);
        assert_eq!(services.len(), 2);
        assert_eq!(w.len(), 1);
        assert_eq!(w[0].reason, "UnsupportedProtocolConfigured");
        assert_eq!(services[0].destination_port, 30080);
        assert_eq!(services[0].health_check.as_ref().unwrap().port, 30080);
    }

    #[test]
    fn nothing_changed_means_no_ops() {
        let s = svc(&[]);
        let spec = LbSpec::parse(&s, &LbDefaults::default()).unwrap();
        let (services, _) = desired_services(&spec, &s.ports, &[]);
        let nodes: Vec<LbNode> = (1..=10).map(node).collect();
        let (targets, w) = desired_targets(&spec, &nodes);
        assert!(w.is_empty());
        let lb = as_created(&spec, &services, &targets, "u-1");
        let input = PlanInput {
            uid: "u-1",
            network: None,
            services: &services,
            targets: &targets,
            type_explicit: false,
        };
        let (ops, warnings) = plan(&lb, &spec, &input);
        assert!(ops.is_empty(), "{ops:?}");
        assert!(warnings.is_empty());
    }

    #[test]
    fn diffs_only_what_changed() {
        let s = svc(&[]);
        let spec = LbSpec::parse(&s, &LbDefaults::default()).unwrap();
        let (services, _) = desired_services(&spec, &s.ports, &[]);
        let lb = as_created(&spec, &services, &[1, 2, 3], "u-1");
        // Node 3 left, node 4 joined; port 443 now proxied.
        let spec2 = LbSpec {
            proxy_protocol: true,
            ..spec.clone()
        };
        let (services2, _) = desired_services(&spec2, &s.ports, &[]);
        let input = PlanInput {
            uid: "u-1",
            network: None,
            services: &services2,
            targets: &[1, 2, 4],
            type_explicit: false,
        };
        let (ops, _) = plan(&lb, &spec2, &input);
        let names: Vec<String> = ops.iter().map(|o| format!("{:?}", o.request().0)).collect();
        assert_eq!(ops.len(), 4, "{ops:?}");
        assert!(
            names
                .iter()
                .filter(|n| n.contains("update_service"))
                .count()
                == 2
        );
        assert!(ops.contains(&Op::RemoveTarget(3)));
        assert!(ops.contains(&Op::AddTarget {
            server: 4,
            use_private_ip: false
        }));
    }

    #[test]
    fn adoption_sets_label_and_max_targets_warns() {
        let s = svc(&[]);
        let spec = LbSpec::parse(&s, &LbDefaults::default()).unwrap();
        let (services, _) = desired_services(&spec, &s.ports, &[]);
        let mut lb = as_created(&spec, &services, &[], "u-1");
        lb.labels.clear();
        let targets: Vec<i64> = (1..=30).collect();
        let input = PlanInput {
            uid: "u-1",
            network: None,
            services: &services,
            targets: &targets,
            type_explicit: false,
        };
        let (ops, w) = plan(&lb, &spec, &input);
        assert!(matches!(&ops[0], Op::Update { labels, .. } if labels[SERVICE_UID_LABEL] == "u-1"));
        assert_eq!(
            ops.iter()
                .filter(|o| matches!(o, Op::AddTarget { .. }))
                .count(),
            25
        );
        assert_eq!(w[0].reason, "MaxTargetsReached");
    }

    #[test]
    fn node_selector_and_foreign_ids() {
        let s = svc(&[("load-balancer.hetzner.cloud/node-selector", "role=edge")]);
        let spec = LbSpec::parse(&s, &LbDefaults::default()).unwrap();
        let mut edge = node(1);
        edge.labels.insert("role".into(), "edge".into());
        let mut robot = node(2);
        robot.labels.insert("role".into(), "edge".into());
        robot.provider_id = Some("hrobot://7".into());
        let mut aws = node(3);
        aws.labels.insert("role".into(), "edge".into());
        aws.provider_id = Some("aws:///i-1".into());
        let (t, w) = desired_targets(&spec, &[edge, robot, aws, node(4)]);
        assert_eq!(t, [1]);
        let reasons: Vec<&str> = w.iter().map(|w| w.reason.as_str()).collect();
        assert_eq!(
            reasons,
            ["RobotServerNotSupported", "UnknownProviderIDPrefix"]
        );
    }

    #[test]
    fn network_and_private_ip_flip() {
        let s = svc(&[("load-balancer.hetzner.cloud/use-private-ip", "true")]);
        let spec = LbSpec::parse(&s, &LbDefaults::default()).unwrap();
        let (services, _) = desired_services(&spec, &s.ports, &[]);
        let lb = as_created(&spec, &services, &[1], "u-1");
        let input = PlanInput {
            uid: "u-1",
            network: Some(9),
            services: &services,
            targets: &[1],
            type_explicit: false,
        };
        let (ops, _) = plan(&lb, &spec, &input);
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
