//! The plan's unit tests: desired state from annotations, and the writes (or none) it leads to
//! against a load balancer as the API reports it.

use super::*;
use crate::capabilities::{LbNode, PortProtocol, ServicePort, ServiceRef, TrafficPolicy};
use crate::hcloud::config::LbDefaults;
use crate::hcloud::wire::{HealthCheck, HealthCheckHttp, IdRef, LbService, LbTarget, LbType};
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
    desired_targets(
        &LbSpec::default(),
        &nodes,
        &RobotTargets::default(),
        &Reach::everywhere(),
    )
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
        let mut spec = LbSpec::parse(s, &LbDefaults::default()).unwrap();
        // What the provider sends once the controller found kube-proxy unreachable.
        assert!(spec.kube_proxy_health_port().is_some());
        if s.kube_proxy_unreachable {
            spec = spec.without_kube_proxy_checks();
        }
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
    assert_eq!(w.len(), 6);
    assert!(w[..5].iter().all(|w| w.reason == "MaxTargetsReached"));
    assert_eq!(w[0].node.as_deref(), Some("n26"));
    assert!(w[0].message.contains("server 26") && w[0].message.contains("ns/web"));
    // And one for the Service: how many, why, and the ways out.
    assert_eq!(w[5].reason, crate::capabilities::TARGETS_LEFT_OUT);
    assert_eq!(w[5].node, None);
    assert!(
        w[5].message.starts_with("5 of 30 nodes are not targets")
            && w[5].message.contains("lb11 holds 25 targets")
            && w[5].message.contains(a::NODE_SELECTOR)
            && w[5].message.contains(a::TYPE),
        "{}",
        w[5].message
    );
    // The same 25 on every reconcile: those already targets stay, whatever the node order.
    let reversed = DesiredTargets {
        servers: t.servers.iter().rev().copied().collect(),
        ..t.clone()
    };
    let (ops, _) = plan(&lb, &spec, &input(&d, &reversed));
    assert!(ops.is_empty(), "no target swapped: {ops:?}");
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
        &Reach::everywhere(),
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

/// A dedicated server's targets follow the family asked for: the Service's `ipFamilies` by
/// default (an IPv4 Service never gets an IPv6 target, which would fail its check for ever), the
/// annotation over it; with `use-private-ip`, the first InternalIP of each family.
#[test]
fn robot_targets_follow_the_family() {
    use crate::capabilities::IpFamilies;
    use crate::hcloud::load_balancer::plan::RobotAddresses;
    let node = LbNode {
        name: "bm".into(),
        provider_id: Some("hrobot://7".into()),
        labels: Default::default(),
        internal_ips: vec!["fd00::7".into(), "10.1.0.7".into(), "10.1.0.8".into()],
    };
    let robot = |ipv4, ipv6| RobotTargets {
        enabled: true,
        api: true,
        public_ips: BTreeMap::from([(
            7,
            RobotAddresses {
                ipv4: Some("203.0.113.7".into()),
                ipv6: Some("2001:db8:7::1".into()),
            },
        )]),
        family: IpFamilies { ipv4, ipv6 },
        dcs: BTreeMap::new(),
    };
    let ips = |spec: &LbSpec, r: &RobotTargets| {
        desired_targets(spec, std::slice::from_ref(&node), r, &Reach::everywhere()).ips
    };
    let public = LbSpec::default();
    assert_eq!(ips(&public, &robot(true, false)), ["203.0.113.7"]);
    assert_eq!(ips(&public, &robot(false, true)), ["2001:db8:7::1"]);
    assert_eq!(
        ips(&public, &robot(true, true)),
        ["203.0.113.7", "2001:db8:7::1"]
    );
    let private = LbSpec {
        use_private_ip: true,
        ..LbSpec::default()
    };
    assert_eq!(ips(&private, &robot(true, false)), ["10.1.0.7"]);
    assert_eq!(ips(&private, &robot(true, true)), ["fd00::7", "10.1.0.7"]);
    // No address of the family: said, not guessed.
    let mut v4_only = robot(false, true);
    v4_only.public_ips.get_mut(&7).unwrap().ipv6 = None;
    let d = desired_targets(
        &public,
        std::slice::from_ref(&node),
        &v4_only,
        &Reach::everywhere(),
    );
    assert!(d.ips.is_empty());
    assert_eq!(d.warnings[0].reason, "RobotTargetFamilyMissing");
}

/// A node of another network zone is no target, in the create as in an update; a node whose
/// location is not known yet is neither a target nor reported; dedicated servers follow the rule.
#[test]
fn nodes_outside_the_load_balancers_zone_are_left_out_and_named() {
    let zone = |n: &str, l: &str, z: &str| (n.to_string(), (l.to_string(), z.to_string()));
    let reach = Reach::new(
        "eu-central",
        [
            zone("n1", "fsn1", "eu-central"),
            zone("n2", "nbg1", "eu-central"),
            zone("n3", "ash", "us-east"),
            zone("n5", "ash", "us-east"),
        ],
    );
    let mut robot_node = node(5);
    robot_node.provider_id = Some("hrobot://7".into());
    let robot = RobotTargets {
        enabled: true,
        api: true,
        family: crate::capabilities::IpFamilies {
            ipv4: true,
            ipv6: false,
        },
        public_ips: [(
            7,
            RobotAddresses {
                ipv4: Some("203.0.113.7".into()),
                ipv6: None,
            },
        )]
        .into(),
        dcs: BTreeMap::new(),
    };
    let nodes = [node(1), node(2), node(3), node(4), robot_node];
    let t = desired_targets(&LbSpec::default(), &nodes, &robot, &reach);
    assert_eq!(t.servers, [1, 2], "n3 is in us-east, n4 not located yet");
    assert!(t.ips.is_empty(), "the dedicated server is in ash");
    let [w] = &t.warnings[..] else {
        panic!("one warning: {:?}", t.warnings)
    };
    assert_eq!(w.reason, crate::capabilities::NODES_OUTSIDE_ZONE);
    assert!(w.message.contains("2 of 4 nodes"), "{}", w.message);
    assert!(
        w.message.contains("in us-east: n3 (ash), n5 (ash)"),
        "{}",
        w.message
    );

    // Every node elsewhere: no target, and the warning says none is left.
    let t = desired_targets(&LbSpec::default(), &[node(3)], &robot, &reach);
    assert!(t.servers.is_empty());
    assert_eq!(t.warnings[0].reason, crate::capabilities::NO_NODE_IN_ZONE);

    // The create carries only the zone's servers.
    let s = svc(&[]);
    let spec = spec_of(&s);
    let desired = Desired {
        services: desired_services(&spec, &s.ports),
        targets: desired_targets(&spec, &nodes, &robot, &reach),
    };
    let placement = crate::hcloud::load_balancer::spec::Placement::Location("fsn1".into());
    let (new, _) = plan_create(&spec, BTreeMap::new(), placement, None, &desired);
    assert_eq!(new.targets, Some(vec![1, 2]));
}
