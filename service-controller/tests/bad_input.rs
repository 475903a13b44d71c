//! Bad-input catalogue of the service controller: every `load-balancer.hetzner.cloud/*`
//! annotation it parses given a malformed value, Service specs no load balancer can serve, and a
//! Node it cannot target. Each must end in a Warning that names the field, the offending value and
//! what is accepted, with no cloud write, while the controller keeps running and a good Service
//! next to the bad ones converges. The README's "Messages for bad input" table lists the same.

mod support;

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ServicePort;
use k8s_openapi::api::events::v1::Event;
use kube::Api;
use kube::api::ListParams;
use support::{Fixture, T, annotation_patch};
use test_support::{NodeSpecT, create_node, eventually, unique};

/// The ports of a case's Service.
#[derive(Debug, Clone, Copy)]
enum Ports {
    /// TCP ports.
    Tcp(&'static [i32]),
    /// One UDP port (Hetzner load balancers forward TCP only).
    Udp(i32),
}

/// One bad Service and what its `SyncLoadBalancerFailed` Warning must contain.
#[derive(Debug)]
struct Case {
    /// The Service's name.
    name: &'static str,
    /// Annotations, without the `load-balancer.hetzner.cloud/` prefix.
    ann: &'static [(&'static str, &'static str)],
    ports: Ports,
    /// The annotation or field the note names.
    field: &'static str,
    /// The offending value, as the note quotes it.
    value: &'static str,
    /// Part of the accepted forms the note lists.
    hint: &'static str,
}

const P80: Ports = Ports::Tcp(&[80]);
const BOOL: &str = "a boolean (1, t, T, TRUE, true, True, 0, f, F, FALSE, false, False)";
const DURATION: &str = "a duration: whole seconds";

macro_rules! case {
    ($name:literal, [$(($k:literal, $v:expr)),*], $field:literal, $value:expr, $hint:expr) => {
        case!($name, [$(($k, $v)),*], P80, $field, $value, $hint)
    };
    ($name:literal, [$(($k:literal, $v:expr)),*], $ports:expr, $field:literal, $value:expr, $hint:expr) => {
        Case { name: $name, ann: &[$(($k, $v)),*], ports: $ports, field: $field, value: $value, hint: $hint }
    };
}

const LONG_NAME: &str = "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx";
const SIXTEEN: &[i32] = &[
    80, 81, 82, 83, 84, 85, 86, 87, 88, 89, 90, 91, 92, 93, 94, 95,
];

/// The catalogue. The fixture's controller has no `HCLOUD_NETWORK` and the env defaults
/// `HCLOUD_LOAD_BALANCERS_LOCATION=fsn1`, `HCLOUD_LOAD_BALANCERS_TYPE=lb11`.
const CASES: &[Case] = &[
    // Booleans (Go strconv.ParseBool).
    case!(
        "b-private-ip",
        [("use-private-ip", "maybe")],
        "use-private-ip",
        "maybe",
        BOOL
    ),
    case!(
        "b-proxy",
        [("uses-proxyprotocol", "yes")],
        "uses-proxyprotocol",
        "yes",
        BOOL
    ),
    case!(
        "b-ipv6",
        [("ipv6-disabled", "nope")],
        "ipv6-disabled",
        "nope",
        BOOL
    ),
    case!(
        "b-public",
        [("disable-public-network", "2")],
        "disable-public-network",
        "2",
        BOOL
    ),
    case!(
        "b-ingress",
        [("disable-private-ingress", "on")],
        "disable-private-ingress",
        "on",
        BOOL
    ),
    case!(
        "b-sticky",
        [("http-sticky-sessions", "sure")],
        "http-sticky-sessions",
        "sure",
        BOOL
    ),
    case!(
        "b-redirect",
        [("http-redirect-http", "y")],
        "http-redirect-http",
        "y",
        BOOL
    ),
    case!(
        "b-staging",
        [("http-managed-certificate-acme-staging", "staging")],
        "http-managed-certificate-acme-staging",
        "staging",
        BOOL
    ),
    case!(
        "b-validate",
        [("health-check-http-validate-certificate", "tru")],
        "health-check-http-validate-certificate",
        "tru",
        BOOL
    ),
    // Enums.
    case!(
        "e-algorithm",
        [("algorithm-type", "random")],
        "algorithm-type",
        "random",
        "round_robin or least_connections"
    ),
    case!(
        "e-protocol",
        [("protocol", "udp")],
        "protocol",
        "udp",
        "tcp, http or https"
    ),
    case!(
        "e-hc-protocol",
        [("health-check-protocol", "grpc")],
        "health-check-protocol",
        "grpc",
        "tcp, http or https"
    ),
    case!(
        "e-cert-type",
        [("certificate-type", "selfsigned")],
        "certificate-type",
        "selfsigned",
        "uploaded or managed"
    ),
    case!(
        "e-type",
        [("type", "lb99")],
        "type",
        "lb99",
        "lb11, lb21, lb31"
    ),
    case!(
        "e-location",
        [("location", "mars1")],
        "location",
        "mars1",
        "fsn1, nbg1, hel1, ash, hil, sin"
    ),
    case!(
        "e-zone",
        [("location", ""), ("network-zone", "moon-central")],
        "network-zone",
        "moon-central",
        "eu-central, us-east, us-west, ap-southeast"
    ),
    case!(
        "e-location-zone",
        [("location", "ash"), ("network-zone", "eu-central")],
        "location",
        "ash",
        "a location in network zone eu-central"
    ),
    // Numbers, durations, addresses.
    case!(
        "n-hc-port",
        [("health-check-port", "http")],
        "health-check-port",
        "http",
        "a port number 1-65535"
    ),
    case!(
        "n-hc-port-range",
        [("health-check-port", "70000")],
        "health-check-port",
        "70000",
        "a port number 1-65535"
    ),
    case!(
        "n-retries",
        [("health-check-retries", "-1")],
        "health-check-retries",
        "-1",
        "a non-negative integer"
    ),
    case!(
        "d-interval",
        [("health-check-interval", "soon")],
        "health-check-interval",
        "soon",
        DURATION
    ),
    case!(
        "d-interval-ms",
        [("health-check-interval", "500ms")],
        "health-check-interval",
        "500ms",
        "of at least 1s"
    ),
    case!(
        "d-timeout",
        [("health-check-timeout", "10x")],
        "health-check-timeout",
        "10x",
        DURATION
    ),
    case!(
        "d-cookie",
        [("http-cookie-lifetime", "forever")],
        "http-cookie-lifetime",
        "forever",
        DURATION
    ),
    case!(
        "d-idle",
        [("http-timeout-idle", "10s")],
        "http-timeout-idle",
        "10s",
        "between 30s and 300s"
    ),
    case!(
        "n-status-codes",
        [("http-status-codes", "2xx")],
        "http-status-codes",
        "2xx",
        "3-character codes"
    ),
    case!(
        "n-private-ipv4",
        [("private-ipv4", "10.0.0.300")],
        "private-ipv4",
        "10.0.0.300",
        "an IPv4 address"
    ),
    case!(
        "n-subnet",
        [("private-subnet-ip-range", "10.0.0.0")],
        "private-subnet-ip-range",
        "10.0.0.0",
        "an IPv4 CIDR"
    ),
    case!(
        "n-selector",
        [("node-selector", "role in (a")],
        "node-selector",
        "role in (a",
        "a label selector"
    ),
    case!(
        "n-name",
        [("name", LONG_NAME)],
        "name",
        LONG_NAME,
        "at most 63 characters"
    ),
    // Names the API or the apiserver would refuse only after the load balancer exists.
    case!(
        "h-hostname",
        [("hostname", "Not_A_Host")],
        "hostname",
        "Not_A_Host",
        "a lowercase DNS name"
    ),
    case!(
        "h-rdns4",
        [("ipv4-rdns", "bad rdns!")],
        "ipv4-rdns",
        "bad rdns!",
        "a host name"
    ),
    case!(
        "h-rdns6",
        [("ipv6-rdns", "-v6.example.com")],
        "ipv6-rdns",
        "-v6.example.com",
        "a host name"
    ),
    case!(
        "h-hc-domain",
        [("health-check-http-domain", "exa mple.com")],
        "health-check-http-domain",
        "exa mple.com",
        "a host name"
    ),
    case!(
        "h-hc-path",
        [("health-check-http-path", "healthz")],
        "health-check-http-path",
        "healthz",
        "an absolute HTTP path"
    ),
    // Certificates.
    case!(
        "c-https",
        [("protocol", "https")],
        "http-certificates",
        "https",
        "at least one certificate id or name"
    ),
    case!(
        "c-cert-name",
        [("protocol", "https"), ("http-certificates", "no-such-cert")],
        "http-certificates",
        "no-such-cert",
        "ids or names of existing certificates"
    ),
    case!(
        "c-cert-id",
        [("protocol", "https"), ("http-certificates", "999999")],
        "http-certificates",
        "999999",
        "ids or names of existing certificates"
    ),
    case!(
        "c-managed",
        [("protocol", "https"), ("certificate-type", "managed")],
        "http-managed-certificate-domains",
        "managed",
        "at least one domain"
    ),
    case!(
        "c-domains",
        [
            ("protocol", "https"),
            ("certificate-type", "managed"),
            ("http-managed-certificate-domains", "bad_domain")
        ],
        "http-managed-certificate-domains",
        "bad_domain",
        "domain names such as example.com"
    ),
    // Private network settings without HCLOUD_NETWORK.
    case!(
        "p-private-ip",
        [("use-private-ip", "true")],
        "use-private-ip",
        "true",
        "HCLOUD_NETWORK"
    ),
    // Two mistakes at once: both are reported.
    case!(
        "m-two",
        [("protocol", "udp"), ("use-private-ip", "nah")],
        "use-private-ip",
        "nah",
        "tcp, http or https"
    ),
    // Service specs.
    case!(
        "s-udp",
        [],
        Ports::Udp(53),
        "Service ports",
        "53/UDP",
        "at least one TCP port"
    ),
    case!(
        "s-six-ports",
        [],
        Ports::Tcp(&[80, 81, 82, 83, 84, 85]),
        "Service ports",
        "6 ports",
        "at most 5 for load balancer type lb11"
    ),
    case!(
        "s-sixteen-ports",
        [("type", "lb21")],
        Ports::Tcp(SIXTEEN),
        "Service ports",
        "16 ports",
        "at most 15 for load balancer type lb21"
    ),
];

/// The Warning notes of `reason` per object name, in namespace `ns`.
async fn warnings(fx: &Fixture, ns: &str, reason: &str) -> BTreeMap<String, String> {
    Api::<Event>::namespaced(fx.admin.clone(), ns)
        .list(&ListParams::default())
        .await
        .expect("list events")
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some(reason) && e.type_.as_deref() == Some("Warning"))
        .filter_map(|e| Some((e.regarding?.name?, e.note.unwrap_or_default())))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_bad_input_warns_with_field_value_and_accepted_forms_and_writes_nothing() {
    let fx = Fixture::start().await;
    let node = fx.nodes(1).await.remove(0);
    // A Node this cloud cannot target: skipped with a Warning on the Node.
    let foreign = unique("aws-node");
    let foreign_pid = "aws:///eu-central-1a/i-0abc";
    create_node(
        &fx.admin,
        &fx.run,
        &foreign,
        NodeSpecT {
            provider_id: Some(foreign_pid.into()),
            ready: Some(true),
            ..Default::default()
        },
    )
    .await;
    let mark = fx.mark();
    let started = std::time::Instant::now();
    for c in CASES {
        match c.ports {
            Ports::Tcp(p) => fx.service(c.name, p, c.ann).await,
            Ports::Udp(port) => {
                fx.service_with(c.name, &[], c.ann, |s| {
                    s.ports = Some(vec![ServicePort {
                        name: Some("dns".into()),
                        port,
                        protocol: Some("UDP".into()),
                        ..Default::default()
                    }])
                })
                .await
            }
        };
    }
    // A good Service next to the bad ones converges, targeting only the Hetzner node.
    fx.service("good", &[80], &[]).await;
    let good = fx.wait_ingress("good").await;
    fx.wait_targets(&good, &[node.server]).await;

    let notes = eventually(
        "a SyncLoadBalancerFailed Warning on every case",
        T,
        || async {
            let w = warnings(&fx, &fx.ns, "SyncLoadBalancerFailed").await;
            CASES.iter().all(|c| w.contains_key(c.name)).then_some(w)
        },
    )
    .await;
    let mut failures = Vec::new();
    for c in CASES {
        let note = &notes[c.name];
        for part in [c.field, c.value, c.hint] {
            if !note.contains(part) {
                failures.push(format!("{}: {part:?} missing from {note:?}", c.name));
            }
        }
        if c.field != "Service ports" && !note.contains(&format!("{}{}", support::PREFIX, c.field))
        {
            failures.push(format!(
                "{}: the full annotation key is missing: {note}",
                c.name
            ));
        }
    }
    // Both mistakes of the two-at-once case are named.
    assert!(notes["m-two"].contains("\"udp\""), "{}", notes["m-two"]);
    assert!(!notes.contains_key("good"), "{notes:?}");
    assert!(failures.is_empty(), "{}", failures.join("\n"));

    let note = eventually("UnknownProviderIDPrefix on the foreign node", T, || async {
        warnings(&fx, "default", "UnknownProviderIDPrefix")
            .await
            .remove(&foreign)
    })
    .await;
    assert!(
        note.contains(foreign_pid) && note.contains("hcloud://<server id>"),
        "{note}"
    );

    let writes = fx.writes_since(&mark);
    assert_eq!(
        writes,
        [("POST".to_string(), "/load_balancers".to_string())],
        "only the good Service's create"
    );
    for c in CASES {
        let svc = fx.get(c.name).await.expect("the Service exists");
        assert!(
            fx.lbs_of(&svc).await.is_empty(),
            "{}: no load balancer",
            c.name
        );
        assert!(
            support::ingress_ips(&svc).is_empty(),
            "{}: no ingress",
            c.name
        );
    }
    let ctl = fx.ctl.as_ref().expect("started");
    assert!(!ctl.task.is_finished(), "the controller is still running");
    let metrics = fx.metrics().await;
    let counted: u64 = metrics
        .lines()
        .find(|l| l.contains("bad_input_warnings_total") && l.contains("InvalidLoadBalancerInput"))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
        .unwrap_or(0);
    assert!(
        counted >= CASES.len() as u64,
        "{counted} < {}: {metrics}",
        CASES.len()
    );
    println!(
        "{} bad Services warned, 0 cloud writes for them, good Service converged ({:.1?})",
        CASES.len(),
        started.elapsed()
    );

    // Fixing a bad value is all it takes.
    fx.patch("e-type", annotation_patch("type", Some("lb11")))
        .await;
    fx.wait_ingress("e-type").await;
}

/// HCCM ignores `private-ipv4` and `private-subnet-ip-range` without a network; Services it served
/// with them must keep being served after a switch. They are ignored here too, with a Warning.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn private_network_annotations_without_a_network_warn_and_still_serve() {
    let fx = Fixture::start().await;
    fx.nodes(1).await;
    for (name, key, value) in [
        ("p-fixed-ip", "private-ipv4", "10.0.0.5"),
        ("p-subnet", "private-subnet-ip-range", "10.0.1.0/24"),
    ] {
        fx.service(name, &[80], &[(key, value)]).await;
        fx.wait_ingress(name).await;
        let note = fx
            .wait_event("Service", name, "PrivateNetworkIgnored")
            .await;
        assert!(
            note.contains(&format!("{}{key}", support::PREFIX))
                && note.contains(value)
                && note.contains("HCLOUD_NETWORK"),
            "{note}"
        );
    }
}
