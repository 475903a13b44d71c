use std::time::Duration;

use super::*;

fn svc(pairs: &[(&str, &str)]) -> ServiceRef {
    ServiceRef {
        uid: "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0".into(),
        namespace: "default".into(),
        name: "web".into(),
        annotations: pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        ports: vec![],
        ..Default::default()
    }
}

fn parse(pairs: &[(&str, &str)]) -> Result<LbSpec, CloudError> {
    LbSpec::parse(&svc(pairs), &LbDefaults::default())
}

fn bad(key: &str, value: &str) -> String {
    let e = parse(&[(key, value)]).unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, CloudError::InvalidInput { .. }), "{msg}");
    assert!(msg.contains(key), "{msg} should name {key}");
    assert!(msg.contains(value), "{msg} should name {value}");
    msg
}

#[test]
fn default_name_is_upstreams() {
    assert_eq!(
        default_name("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"),
        "a0f1e2d3c4b5a69788796a5b4c3d2e1f"
    );
    assert_eq!(
        default_name("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0").len(),
        32
    );
    assert_eq!(parse(&[]).unwrap().name, "a0f1e2d3c4b5a69788796a5b4c3d2e1f");
}

#[test]
fn every_annotation_parses_good_values() {
    let s = parse(&[
        (a::NAME, "my-lb"),
        (a::TYPE, "lb21"),
        (a::LOCATION, "fsn1"),
        (a::ALGORITHM_TYPE, "least_connections"),
        (a::PROTOCOL, "https"),
        (a::USES_PROXYPROTOCOL, "true"),
        (a::IPV6_DISABLED, "1"),
        (a::DISABLE_PUBLIC_NETWORK, "F"),
        (a::DISABLE_PRIVATE_INGRESS, "TRUE"),
        (a::USE_PRIVATE_IP, "t"),
        (a::PRIVATE_IPV4, "10.0.0.9"),
        (a::PRIVATE_SUBNET_IP_RANGE, "10.0.1.0/24"),
        (a::HOSTNAME, "lb.example.com"),
        (a::NODE_SELECTOR, "role=edge"),
        (a::IPV4_RDNS, "v4.example.com"),
        (a::IPV6_RDNS, "v6.example.com"),
        (a::HTTP_COOKIE_NAME, "SESS"),
        (a::HTTP_COOKIE_LIFETIME, "300"),
        (a::HTTP_TIMEOUT_IDLE, "1m"),
        (a::HTTP_STICKY_SESSIONS, "true"),
        (a::HTTP_REDIRECT_HTTP, "true"),
        (a::CERTIFICATE_TYPE, "uploaded"),
        (a::HTTP_CERTIFICATES, "12, my-cert"),
        (a::HEALTH_CHECK_PROTOCOL, "http"),
        (a::HEALTH_CHECK_PORT, "10256"),
        (a::HEALTH_CHECK_INTERVAL, "15s"),
        (a::HEALTH_CHECK_TIMEOUT, "10"),
        (a::HEALTH_CHECK_RETRIES, "3"),
        (a::HEALTH_CHECK_HTTP_DOMAIN, "example.com"),
        (a::HEALTH_CHECK_HTTP_PATH, "/healthz"),
        (a::HEALTH_CHECK_HTTP_VALIDATE_CERTIFICATE, "false"),
        (a::HEALTH_CHECK_KUBE_PROXY, "true"),
        (a::HTTP_STATUS_CODES, "2??,301"),
        (a::IPV4, "1.2.3.4"),
        (a::IPV6, "::1"),
        (a::ID, "77"),
    ])
    .unwrap();
    assert_eq!(s.name, "my-lb");
    assert_eq!(s.lb_type.as_deref(), Some("lb21"));
    assert_eq!(s.location.as_deref(), Some("fsn1"));
    assert_eq!(
        s.algorithm.map(LbAlgorithm::as_str),
        Some("least_connections")
    );
    assert_eq!(s.protocol, LbProtocol::Https);
    assert!(s.name_annotated);
    assert_eq!(s.proxy_protocol, Some(true));
    assert!(s.ipv6_disabled && s.disable_private_ingress && s.use_private_ip);
    assert_eq!(s.disable_public_network, Some(false));
    assert_eq!(s.private_ipv4, Some(Ipv4Addr::new(10, 0, 0, 9)));
    assert_eq!(s.private_subnet_ip_range.as_deref(), Some("10.0.1.0/24"));
    assert_eq!(s.hostname.as_deref(), Some("lb.example.com"));
    assert!(s.node_selector.is_some());
    assert_eq!(s.ipv4_rdns.as_deref(), Some("v4.example.com"));
    assert_eq!(s.ipv6_rdns.as_deref(), Some("v6.example.com"));
    assert_eq!(s.http.cookie_name.as_deref(), Some("SESS"));
    assert_eq!(s.http.cookie_lifetime, Some(Duration::from_secs(300)));
    assert_eq!(s.http.timeout_idle, Some(Duration::from_secs(60)));
    assert_eq!(s.http.sticky_sessions, Some(true));
    assert_eq!(s.http.redirect_http, Some(true));
    assert_eq!(s.http.certificates, ["12", "my-cert"]);
    let hc = &s.health_check;
    assert!(hc.custom);
    assert_eq!(hc.protocol, Some(LbProtocol::Http));
    assert_eq!(hc.port, Some(10256));
    assert_eq!(hc.interval, Some(Duration::from_secs(15)));
    assert_eq!(hc.timeout, Some(Duration::from_secs(10)));
    assert_eq!(hc.retries, Some(3));
    assert_eq!(hc.http_domain.as_deref(), Some("example.com"));
    assert_eq!(hc.http_path.as_deref(), Some("/healthz"));
    assert_eq!(hc.http_validate_certificate, Some(false));
    assert_eq!(hc.http_status_codes, ["2??", "301"]);
}

#[test]
fn managed_certificates() {
    let s = parse(&[
        (a::CERTIFICATE_TYPE, "managed"),
        (
            a::HTTP_MANAGED_CERTIFICATE_DOMAINS,
            "a.example.com,b.example.com",
        ),
        (a::HTTP_MANAGED_CERTIFICATE_ACME_STAGING, "true"),
    ])
    .unwrap();
    assert_eq!(s.http.certificate_type, CertificateType::Managed);
    assert_eq!(s.http.managed_certificate_domains.len(), 2);
    assert!(s.http.managed_certificate_acme_staging);
    assert_eq!(
        s.http.managed_certificate_name.as_deref(),
        Some("ccm-managed-certificate-0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0")
    );
    let named = parse(&[
        (a::CERTIFICATE_TYPE, "managed"),
        (a::HTTP_MANAGED_CERTIFICATE_DOMAINS, "a.example.com"),
        (a::HTTP_MANAGED_CERTIFICATE_NAME, "mine"),
    ])
    .unwrap();
    assert_eq!(named.http.managed_certificate_name.as_deref(), Some("mine"));
    let e = parse(&[(a::CERTIFICATE_TYPE, "managed")]).unwrap_err();
    assert!(e.to_string().contains(a::HTTP_MANAGED_CERTIFICATE_DOMAINS));
}

#[test]
fn every_annotation_rejects_bad_values() {
    for key in [
        a::USES_PROXYPROTOCOL,
        a::IPV6_DISABLED,
        a::DISABLE_PUBLIC_NETWORK,
        a::DISABLE_PRIVATE_INGRESS,
        a::USE_PRIVATE_IP,
        a::HTTP_STICKY_SESSIONS,
        a::HTTP_REDIRECT_HTTP,
        a::HTTP_MANAGED_CERTIFICATE_ACME_STAGING,
        a::HEALTH_CHECK_HTTP_VALIDATE_CERTIFICATE,
    ] {
        assert!(bad(key, "maybe").contains("ParseBool") || bad(key, "maybe").contains("boolean"));
    }
    bad(a::ALGORITHM_TYPE, "random");
    bad(a::PROTOCOL, "udp");
    bad(a::HEALTH_CHECK_PROTOCOL, "grpc");
    bad(a::CERTIFICATE_TYPE, "selfsigned");
    bad(a::PRIVATE_IPV4, "10.0.0.300");
    bad(a::PRIVATE_SUBNET_IP_RANGE, "10.0.0.0");
    bad(a::NODE_SELECTOR, "zone in (a");
    bad(a::HEALTH_CHECK_PORT, "http");
    bad(a::HEALTH_CHECK_PORT, "70000");
    bad(a::HEALTH_CHECK_PORT, "0");
    bad(a::HEALTH_CHECK_RETRIES, "-1");
    bad(a::HEALTH_CHECK_INTERVAL, "soon");
    bad(a::HEALTH_CHECK_INTERVAL, "500ms");
    bad(a::HEALTH_CHECK_TIMEOUT, "10x");
    bad(a::HTTP_COOKIE_LIFETIME, "forever");
    bad(a::HTTP_TIMEOUT_IDLE, "10s");
    bad(a::HTTP_TIMEOUT_IDLE, "301");
    bad(a::HTTP_STATUS_CODES, "2xx");
    bad(a::NAME, &"x".repeat(64));
    bad(a::HOSTNAME, "Not_A_Host");
    bad(a::HOSTNAME, "10.0.0.1");
    bad(a::IPV4_RDNS, "bad rdns!");
    bad(a::IPV6_RDNS, "-lead.example.com");
    bad(a::HEALTH_CHECK_HTTP_DOMAIN, "exa mple.com");
    bad(a::HEALTH_CHECK_HTTP_PATH, "healthz");
    bad(a::HTTP_MANAGED_CERTIFICATE_DOMAINS, "bad_domain");
}

#[test]
fn host_names() {
    for ok in ["example.com", "a-b.c", "x", "Example.COM.", "*.example.com"] {
        assert!(is_dns_name(ok.strip_prefix("*.").unwrap_or(ok)), "{ok}");
    }
    for bad in ["", "a..b", "-a.b", "a-.b", "a_b", "a b", &"x".repeat(64)] {
        assert!(!is_dns_name(bad), "{bad}");
    }
    assert!(is_dns1123_subdomain("lb.example.com"));
    assert!(!is_dns1123_subdomain("LB.example.com"));
    assert!(!is_dns1123_subdomain("1.2.3.4"));
    // Wildcards are fine for managed certificates.
    assert!(
        parse(&[
            (a::CERTIFICATE_TYPE, "managed"),
            (
                a::HTTP_MANAGED_CERTIFICATE_DOMAINS,
                "*.example.com,example.com"
            ),
        ])
        .is_ok()
    );
}

#[test]
fn all_errors_are_reported_together() {
    let e = parse(&[(a::PROTOCOL, "udp"), (a::USE_PRIVATE_IP, "nah")])
        .unwrap_err()
        .to_string();
    assert!(e.contains("udp") && e.contains("nah"), "{e}");
}

#[test]
fn env_defaults_apply_and_annotations_override() {
    let d = LbDefaults {
        location: Some("nbg1".into()),
        lb_type: Some("lb31".into()),
        use_private_ip: true,
        uses_proxyprotocol: Some(true),
        health_check_interval: Some(Duration::from_secs(5)),
        ..Default::default()
    };
    let s = LbSpec::parse(&svc(&[]), &d).unwrap();
    assert_eq!(s.location.as_deref(), Some("nbg1"));
    assert_eq!(s.lb_type.as_deref(), Some("lb31"));
    assert!(s.use_private_ip);
    assert_eq!(s.proxy_protocol, Some(true));
    assert_eq!(s.health_check.interval, Some(Duration::from_secs(5)));
    // An env health-check default switches the custom block on, as in HCCM.
    assert!(s.health_check.custom);
    let s = LbSpec::parse(&svc(&[(a::USE_PRIVATE_IP, "false")]), &d).unwrap();
    assert!(!s.use_private_ip);
    // An empty location annotation resets the env default.
    let s = LbSpec::parse(&svc(&[(a::LOCATION, "")]), &d).unwrap();
    assert_eq!(s.location, None);
}

#[test]
fn location_wins_over_network_zone_with_a_warning() {
    // HCCM's Create keeps the location and drops the zone; this used to be an error here.
    let s = parse(&[(a::LOCATION, "fsn1"), (a::NETWORK_ZONE, "eu-central")]).unwrap();
    let (p, w) = s.placement().unwrap();
    assert_eq!(p, Placement::Location("fsn1".into()));
    let w = w.unwrap();
    assert_eq!(w.reason, "NetworkZoneIgnored");
    assert!(w.message.contains("eu-central"), "{}", w.message);
    // Also across sources: env location, zone annotation (an empty location annotation is
    // how HCCM users pick the zone then).
    let env = LbDefaults {
        location: Some("nbg1".into()),
        ..Default::default()
    };
    let zone = LbSpec::parse(&svc(&[(a::NETWORK_ZONE, "eu-central")]), &env).unwrap();
    assert_eq!(
        zone.placement().unwrap().0,
        Placement::Location("nbg1".into())
    );
    let cleared = LbSpec::parse(
        &svc(&[(a::NETWORK_ZONE, "eu-central"), (a::LOCATION, "")]),
        &env,
    )
    .unwrap();
    assert_eq!(
        cleared.placement().unwrap(),
        (Placement::NetworkZone("eu-central".into()), None)
    );
    let nowhere = parse(&[]).unwrap().placement().unwrap_err().to_string();
    assert!(nowhere.contains(a::LOCATION) && nowhere.contains(a::NETWORK_ZONE));
}

#[test]
fn protocols_and_algorithm_accept_any_case() {
    let s = parse(&[
        (a::PROTOCOL, "HTTP"),
        (a::HEALTH_CHECK_PROTOCOL, "Tcp"),
        (a::ALGORITHM_TYPE, "Round_Robin"),
    ])
    .unwrap();
    assert_eq!(s.protocol, LbProtocol::Http);
    assert_eq!(s.health_check.protocol, Some(LbProtocol::Tcp));
    assert_eq!(s.algorithm.map(LbAlgorithm::as_str), Some("round_robin"));
    // HCCM compares certificate-type exactly; a capitalised one is refused, not guessed.
    bad(a::CERTIFICATE_TYPE, "Managed");
}

#[test]
fn empty_annotations_mean_unset() {
    let env = LbDefaults {
        lb_type: Some("lb21".into()),
        algorithm: Some("least_connections".into()),
        ..Default::default()
    };
    let keys = [
        a::NAME,
        a::TYPE,
        a::ALGORITHM_TYPE,
        a::PROTOCOL,
        a::HOSTNAME,
        a::NODE_SELECTOR,
        a::PRIVATE_IPV4,
        a::IPV4_RDNS,
        a::CERTIFICATE_TYPE,
        a::HEALTH_CHECK_PROTOCOL,
        a::HEALTH_CHECK_HTTP_PATH,
        a::HTTP_COOKIE_NAME,
    ];
    let empty: Vec<(&str, &str)> = keys.iter().map(|k| (*k, " ")).collect();
    let s = LbSpec::parse(&svc(&empty), &env).unwrap();
    let unset = LbSpec::parse(&svc(&[]), &env).unwrap();
    assert_eq!(s, unset);
    assert_eq!(s.lb_type.as_deref(), Some("lb21"));
    assert!(!s.name_annotated);
    assert_eq!(parse(&[(a::TYPE, "")]).unwrap().lb_type, None);
}

#[test]
fn https_needs_a_certificate() {
    let e = parse(&[(a::PROTOCOL, "https")]).unwrap_err().to_string();
    assert!(
        e.contains(a::HTTP_CERTIFICATES) && e.contains("https"),
        "{e}"
    );
    assert!(parse(&[(a::PROTOCOL, "https"), (a::HTTP_CERTIFICATES, "7")]).is_ok());
    assert!(
        parse(&[
            (a::PROTOCOL, "https"),
            (a::CERTIFICATE_TYPE, "managed"),
            (a::HTTP_MANAGED_CERTIFICATE_DOMAINS, "example.com"),
        ])
        .is_ok()
    );
}

#[test]
fn provenance_says_where_each_value_came_from() {
    let env = LbDefaults {
        lb_type: Some("lb21".into()),
        location: Some("nbg1".into()),
        use_private_ip: true,
        ..Default::default()
    };
    let s = LbSpec::parse(
        &svc(&[(a::LOCATION, "fsn1"), (a::USE_PRIVATE_IP, "false")]),
        &env,
    )
    .unwrap();
    assert_eq!(s.source(a::LOCATION), Source::Annotation);
    assert_eq!(s.source(a::USE_PRIVATE_IP), Source::Annotation);
    assert_eq!(s.source(a::TYPE), Source::Env);
    assert_eq!(s.source(a::NETWORK_ZONE), Source::Default);
    assert_eq!(s.set_by(a::LOCATION), format!("annotation {}", a::LOCATION));
    assert_eq!(s.set_by(a::TYPE), "HCLOUD_LOAD_BALANCERS_TYPE");
    // A built-in default is named by the variable that would change it.
    assert_eq!(
        s.set_by(a::NETWORK_ZONE),
        "HCLOUD_LOAD_BALANCERS_NETWORK_ZONE"
    );
    assert!(s.type_explicit());
    assert!(!parse(&[]).unwrap().type_explicit());
    assert!(parse(&[(a::TYPE, "lb11")]).unwrap().type_explicit());
}

#[test]
fn one_per_zone_is_never_a_shared_load_balancer() {
    let env = LbDefaults {
        one_per_network_zone: true,
        ..LbDefaults::default()
    };
    let shared = [(a::NAME, "team"), (a::SHARED, "true")];
    assert!(LbSpec::parse(&svc(&[]), &env).unwrap().one_per_zone);
    assert!(
        !LbSpec::parse(&svc(&shared), &env).unwrap().one_per_zone,
        "env: not for shared"
    );
    let asked = [shared[0], shared[1], (a::ONE_PER_NETWORK_ZONE, "true")];
    let msg = LbSpec::parse(&svc(&asked), &LbDefaults::default())
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains(a::ONE_PER_NETWORK_ZONE) && msg.contains(a::SHARED),
        "{msg}"
    );
    assert!(
        !parse(&[(a::ONE_PER_NETWORK_ZONE, "false")])
            .unwrap()
            .one_per_zone
    );
}

/// For a kind the table declares, a value it refuses, one it accepts, and the refusal's words.
fn probe(kind: a::Kind) -> Option<(&'static str, String, &'static str)> {
    use crate::values::{BOOL_EXPECTED, DURATION_EXPECTED};
    Some(match kind {
        a::Kind::Bool => ("maybe", "false".into(), BOOL_EXPECTED),
        a::Kind::Duration { min, .. } => ("soon", format!("{min}s"), DURATION_EXPECTED),
        a::Kind::Protocol => ("udp", "HTTP".into(), "tcp, http or https"),
        a::Kind::HostName => ("not a host", "lb.example.com".into(), HOST_NAME_EXPECTED),
        a::Kind::OwnRule | a::Kind::Text | a::Kind::Reserved => return None,
    })
}

#[test]
fn the_parser_refuses_what_each_declared_kind_refuses_in_the_tables_order() {
    let mut all_bad = Vec::new();
    for ann in a::all() {
        let Some((bad, good, words)) = probe(ann.kind) else {
            continue;
        };
        let msg = parse(&[(ann.key, bad)]).unwrap_err().to_string();
        assert!(msg.contains(ann.key) && msg.contains(words), "{msg}");
        assert!(parse(&[(ann.key, &good)]).is_ok(), "{}={good}", ann.key);
        let scoped = a::for_port(ann.key, 443);
        match with_ports(&[(&scoped, bad)], &[443]) {
            Err(e) if ann.per_port => {
                let msg = e.to_string();
                assert!(
                    msg.contains(&format!("{scoped}:")) && msg.contains(words),
                    "{msg}"
                );
            }
            Err(e) => assert!(e.to_string().contains("no port suffix"), "{e}"),
            Ok(_) => panic!("{scoped}={bad} accepted"),
        }
        all_bad.push((ann.key, bad));
    }
    assert!(all_bad.len() >= 20, "{all_bad:?}");
    // All at once: each named, in the order of the table (the admission policy's order).
    let msg = parse(&all_bad).unwrap_err().to_string();
    let at: Vec<usize> = all_bad
        .iter()
        .map(|(key, _)| msg.find(&format!("annotation {key}:")).expect(key))
        .collect();
    assert!(at.is_sorted(), "{msg}");
}

fn with_ports(pairs: &[(&str, &str)], ports: &[u16]) -> Result<LbSpec, CloudError> {
    let mut s = svc(pairs);
    s.ports = ports
        .iter()
        .map(|p| crate::capabilities::ServicePort {
            name: None,
            protocol: crate::capabilities::PortProtocol::Tcp,
            port: *p,
            node_port: 30_000 + p % 1000,
        })
        .collect();
    LbSpec::parse(&s, &LbDefaults::default())
}

#[test]
fn a_port_scoped_annotation_wins_for_its_port_only() {
    let https = a::for_port(a::PROTOCOL, 443);
    let certs = a::for_port(a::HTTP_CERTIFICATES, 443);
    let proxy = a::for_port(a::USES_PROXYPROTOCOL, 80);
    let s = with_ports(
        &[
            (a::PROTOCOL, "http"),
            (&https, "https"),
            (&certs, "web-cert"),
            (a::USES_PROXYPROTOCOL, "false"),
            (&proxy, "true"),
        ],
        &[80, 443, 8080],
    )
    .unwrap();
    assert_eq!(s.protocol, LbProtocol::Http);
    assert_eq!(s.for_port(8080).protocol, LbProtocol::Http);
    assert_eq!(s.for_port(443).protocol, LbProtocol::Https);
    assert_eq!(s.for_port(443).http.certificates, ["web-cert"]);
    assert_eq!(s.for_port(443).proxy_protocol, Some(false));
    assert_eq!(s.for_port(80).proxy_protocol, Some(true));
    assert_eq!(s.for_port(80).protocol, LbProtocol::Http);
    assert_eq!(s.ports.keys().copied().collect::<Vec<_>>(), [80, 443]);
}

#[test]
fn port_scoped_mistakes_name_the_scoped_annotation() {
    let bad = a::for_port(a::HEALTH_CHECK_INTERVAL, 443);
    let e = with_ports(&[(&bad, "soon")], &[443])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains(&format!("invalid value \"soon\" for annotation {bad}:")),
        "{e}"
    );
    // https on one port needs certificates for that port.
    let https = a::for_port(a::PROTOCOL, 443);
    let e = with_ports(&[(&https, "https")], &[80, 443])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains(&format!("annotation {}.443", a::HTTP_CERTIFICATES)),
        "{e}"
    );
    // A port the Service does not have, or a key that is per load balancer.
    let e = with_ports(&[(&a::for_port(a::PROTOCOL, 8443), "http")], &[80])
        .unwrap_err()
        .to_string();
    assert!(e.contains("one of the Service's ports (80)"), "{e}");
    let e = with_ports(&[(&a::for_port(a::TYPE, 80), "lb21")], &[80])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("only these can be set for one port: protocol,"),
        "{e}"
    );
}
