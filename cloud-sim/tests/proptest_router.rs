//! Random methods, paths, queries and bodies against a populated simulator: every answer is
//! well-formed and below 500 (no fault is injected), and nothing panics (a panicking handler
//! would drop the connection and fail the request at the transport level).

use std::time::Duration;

use cloud_sim::{Sim, SimClient, SimConfig};
use proptest::prelude::*;
use reqwest::Method;
use serde_json::{Value, json};

const SEGMENTS: &[&str] = &[
    "v1",
    "servers",
    "load_balancers",
    "networks",
    "certificates",
    "actions",
    "locations",
    "server_types",
    "load_balancer_types",
    "images",
    "1",
    "2",
    "3",
    "0",
    "99999999999999999999",
    "-1",
    "abc",
    "%zz",
    "%2F",
    "",
    "add_target",
    "remove_target",
    "add_service",
    "update_service",
    "delete_service",
    "attach_to_network",
    "detach_from_network",
    "change_type",
    "change_algorithm",
    "enable_public_interface",
    "disable_public_interface",
    "change_dns_ptr",
    "change_protection",
    "add_route",
    "delete_route",
    "add_subnet",
    "delete_subnet",
    "poweroff",
    "poweron",
    "shutdown",
    "reboot",
    "reset",
    "retry",
    "metadata",
    "hetzner",
    "_sim",
    "faults",
    "hostname",
];

const QUERY_KEYS: &[&str] = &[
    "page",
    "per_page",
    "name",
    "label_selector",
    "sort",
    "status",
    "id",
    "type",
    "server",
];
const FIELDS: &[&str] = &[
    "name",
    "type",
    "server_type",
    "image",
    "location",
    "network_zone",
    "labels",
    "network",
    "ip",
    "ip_range",
    "subnets",
    "routes",
    "destination",
    "gateway",
    "listen_port",
    "destination_port",
    "protocol",
    "http",
    "health_check",
    "server",
    "label_selector",
    "use_private_ip",
    "load_balancer_type",
    "certificates",
    "delete",
    "dns_ptr",
    "domain_names",
    "certificate",
    "private_key",
    "networks",
    "public_net",
    "algorithm",
    "services",
    "targets",
    "count",
    "prefix",
    "kind",
    "endpoint",
    "probability",
];

fn method() -> impl Strategy<Value = Method> {
    prop::sample::select(vec![
        Method::GET,
        Method::POST,
        Method::PUT,
        Method::DELETE,
        Method::PATCH,
        Method::HEAD,
        Method::OPTIONS,
    ])
}

/// Real routes, so random bodies reach the validation code and not only the 404 fallback.
const ROUTES: &[&str] = &[
    "/v1/servers",
    "/v1/servers/{id}",
    "/v1/servers/{id}/actions/poweroff",
    "/v1/servers/{id}/actions/poweron",
    "/v1/servers/{id}/actions/attach_to_network",
    "/v1/servers/{id}/actions/detach_from_network",
    "/v1/servers/{id}/actions/change_protection",
    "/v1/load_balancers",
    "/v1/load_balancers/{id}",
    "/v1/load_balancers/{id}/actions/add_target",
    "/v1/load_balancers/{id}/actions/remove_target",
    "/v1/load_balancers/{id}/actions/add_service",
    "/v1/load_balancers/{id}/actions/update_service",
    "/v1/load_balancers/{id}/actions/delete_service",
    "/v1/load_balancers/{id}/actions/attach_to_network",
    "/v1/load_balancers/{id}/actions/detach_from_network",
    "/v1/load_balancers/{id}/actions/change_type",
    "/v1/load_balancers/{id}/actions/change_algorithm",
    "/v1/load_balancers/{id}/actions/disable_public_interface",
    "/v1/load_balancers/{id}/actions/enable_public_interface",
    "/v1/load_balancers/{id}/actions/change_dns_ptr",
    "/v1/load_balancers/{id}/actions/change_protection",
    "/v1/networks",
    "/v1/networks/{id}",
    "/v1/networks/{id}/actions/add_route",
    "/v1/networks/{id}/actions/delete_route",
    "/v1/networks/{id}/actions/add_subnet",
    "/v1/networks/{id}/actions/delete_subnet",
    "/v1/certificates",
    "/v1/certificates/{id}",
    "/v1/certificates/{id}/actions/retry",
    "/v1/actions",
    "/v1/actions/{id}",
    "/v1/load_balancers/actions/{id}",
    "/v1/servers/{id}/actions",
    "/hetzner/v1/metadata/{id}",
    "/metadata/{id}/hetzner/v1/metadata",
    "/_sim/batch/servers",
    "/_sim/faults/{id}",
];

/// Bodies that are nearly valid, to be perturbed.
fn plausible() -> Vec<Value> {
    vec![
        json!({"name": "n", "server_type": "cx22", "image": "ubuntu-24.04", "location": "fsn1"}),
        json!({"name": "lb2", "load_balancer_type": "lb11", "location": "fsn1"}),
        json!({"name": "net2", "ip_range": "10.1.0.0/16", "subnets": [{"type": "cloud", "ip_range": "10.1.0.0/24", "network_zone": "eu-central"}]}),
        json!({"type": "server", "server": {"id": 1}, "use_private_ip": true}),
        json!({"type": "ip", "ip": {"ip": "203.0.113.9"}}),
        json!({"type": "label_selector", "label_selector": {"selector": "a=b"}}),
        json!({"protocol": "http", "listen_port": 8080, "destination_port": 30000, "health_check": {"protocol": "http", "http": {"path": "/"}}}),
        json!({"listen_port": 80, "health_check": {"interval": 3}}),
        json!({"network": 1, "ip": "10.0.1.50"}),
        json!({"destination": "10.244.0.0/24", "gateway": "10.0.1.2"}),
        json!({"type": "cloud", "network_zone": "eu-central"}),
        json!({"load_balancer_type": "lb21"}),
        json!({"type": "least_connections"}),
        json!({"ip": "100.64.0.4", "dns_ptr": null}),
        json!({"delete": true}),
        json!({"name": "crt", "type": "managed", "domain_names": ["example.com"]}),
        json!({"count": 3, "prefix": "b", "server_type": "cx22"}),
    ]
}

/// Matching (method, route, body) triples, so perturbed requests reach deep validation and
/// real mutations happen between the random ones.
fn templates() -> Vec<(Method, &'static str, Value)> {
    vec![
        (
            Method::POST,
            "/v1/servers",
            json!({"name": "n", "server_type": "cx22", "image": "ubuntu-24.04", "location": "fsn1"}),
        ),
        (
            Method::POST,
            "/v1/servers/{id}/actions/attach_to_network",
            json!({"network": 1}),
        ),
        (
            Method::POST,
            "/v1/servers/{id}/actions/detach_from_network",
            json!({"network": 1}),
        ),
        (Method::POST, "/v1/servers/{id}/actions/poweroff", json!({})),
        (
            Method::POST,
            "/v1/load_balancers",
            json!({"name": "lb2", "load_balancer_type": "lb11", "location": "fsn1"}),
        ),
        (
            Method::POST,
            "/v1/load_balancers/{id}/actions/add_target",
            json!({"type": "server", "server": {"id": 1}}),
        ),
        (
            Method::POST,
            "/v1/load_balancers/{id}/actions/add_target",
            json!({"type": "ip", "ip": {"ip": "203.0.113.9"}}),
        ),
        (
            Method::POST,
            "/v1/load_balancers/{id}/actions/remove_target",
            json!({"type": "server", "server": {"id": 1}}),
        ),
        (
            Method::POST,
            "/v1/load_balancers/{id}/actions/add_service",
            json!({"protocol": "http", "listen_port": 8080, "destination_port": 30000}),
        ),
        (
            Method::POST,
            "/v1/load_balancers/{id}/actions/update_service",
            json!({"listen_port": 80, "health_check": {"interval": 3, "protocol": "http"}}),
        ),
        (
            Method::POST,
            "/v1/load_balancers/{id}/actions/delete_service",
            json!({"listen_port": 80}),
        ),
        (
            Method::POST,
            "/v1/load_balancers/{id}/actions/attach_to_network",
            json!({"network": 1}),
        ),
        (
            Method::POST,
            "/v1/load_balancers/{id}/actions/detach_from_network",
            json!({"network": 1}),
        ),
        (
            Method::POST,
            "/v1/load_balancers/{id}/actions/change_type",
            json!({"load_balancer_type": "lb21"}),
        ),
        (
            Method::POST,
            "/v1/load_balancers/{id}/actions/change_dns_ptr",
            json!({"ip": "100.64.0.4", "dns_ptr": null}),
        ),
        (
            Method::POST,
            "/v1/networks",
            json!({"name": "net2", "ip_range": "10.1.0.0/16", "subnets": [{"type": "cloud", "ip_range": "10.1.0.0/24", "network_zone": "eu-central"}]}),
        ),
        (
            Method::POST,
            "/v1/networks/{id}/actions/add_route",
            json!({"destination": "10.244.0.0/24", "gateway": "10.0.1.2"}),
        ),
        (
            Method::POST,
            "/v1/networks/{id}/actions/delete_route",
            json!({"destination": "10.244.0.0/24", "gateway": "10.0.1.2"}),
        ),
        (
            Method::POST,
            "/v1/networks/{id}/actions/add_subnet",
            json!({"type": "cloud", "network_zone": "eu-central"}),
        ),
        (
            Method::POST,
            "/v1/networks/{id}/actions/delete_subnet",
            json!({"ip_range": "10.0.1.0/24"}),
        ),
        (
            Method::POST,
            "/v1/certificates",
            json!({"name": "crt", "type": "managed", "domain_names": ["example.com"]}),
        ),
        (
            Method::PUT,
            "/v1/servers/{id}",
            json!({"name": "renamed", "labels": {"a": "b"}}),
        ),
        (Method::DELETE, "/v1/networks/{id}", Value::Null),
        (Method::DELETE, "/v1/servers/{id}", Value::Null),
        (
            Method::POST,
            "/_sim/batch/servers",
            json!({"count": 2, "prefix": "b", "server_type": "cx22"}),
        ),
    ]
}

fn templated() -> impl Strategy<Value = (Method, String, BodyKind)> {
    (
        prop::sample::select(templates()),
        0u64..5,
        prop::collection::vec((prop::sample::select(FIELDS), json_value()), 0..2),
        prop::option::weighted(0.3, prop::sample::select(FIELDS)),
        "[a-z]{1,4}",
    )
        .prop_map(|((m, route, mut body), id, extra, drop, suffix)| {
            if let Some(map) = body.as_object_mut() {
                // Vary names so creations do not all collide.
                if let Some(Value::String(n)) = map.get_mut("name") {
                    n.push_str(&suffix);
                }
                if let Some(d) = drop {
                    map.remove(d);
                }
                for (k, x) in extra {
                    map.insert(k.to_owned(), x);
                }
            }
            let body = if body.is_null() {
                BodyKind::None
            } else {
                BodyKind::Json(body)
            };
            (m, route.replace("{id}", &id.to_string()), body)
        })
}

fn request() -> impl Strategy<Value = (Method, String, BodyKind)> {
    prop_oneof![
        1 => (method(), path(), body()),
        1 => templated(),
    ]
}

fn path() -> impl Strategy<Value = String> {
    prop_oneof![
        2 => random_path(),
        3 => (prop::sample::select(ROUTES), 0u64..5, prop_oneof![Just(String::new()), "[?][a-z_]{1,6}=[a-z0-9:=,]{0,6}"])
            .prop_map(|(r, id, q)| format!("{}{q}", r.replace("{id}", &id.to_string()))),
    ]
}

fn random_path() -> impl Strategy<Value = String> {
    let seg = prop_oneof![
        4 => prop::sample::select(SEGMENTS).prop_map(str::to_owned),
        1 => "[a-z0-9_%.~-]{0,12}",
    ];
    let query = prop::collection::vec(
        (
            prop::sample::select(QUERY_KEYS),
            prop_oneof!["[a-z0-9=!,:() %-]{0,16}", "[0-9]{1,3}"],
        ),
        0..3,
    );
    (
        prop::bool::weighted(0.9),
        prop::collection::vec(seg, 0..6),
        query,
    )
        .prop_map(|(v1, segs, query)| {
            let mut p = String::new();
            if v1 {
                p.push_str("/v1");
            }
            for s in segs {
                p.push('/');
                p.push_str(&s);
            }
            if p.is_empty() {
                p.push('/');
            }
            if !query.is_empty() {
                let q: Vec<String> = query
                    .iter()
                    .map(|(k, v)| format!("{k}={}", v.replace(' ', "+")))
                    .collect();
                p.push('?');
                p.push_str(&q.join("&"));
            }
            p
        })
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        (0u64..70_000).prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        "[a-z0-9./:=, -]{0,20}".prop_map(Value::from),
        prop::sample::select(vec![
            "10.0.0.0/16",
            "10.0.1.0/24",
            "10.0.1.5",
            "cx22",
            "lb11",
            "fsn1",
            "eu-central",
            "tcp",
            "https",
            "server",
            "ip",
            "cloud"
        ])
        .prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 24, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec((prop::sample::select(FIELDS), inner), 0..6).prop_map(|kv| {
                Value::Object(kv.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
            }),
        ]
    })
}

#[derive(Debug, Clone)]
enum BodyKind {
    None,
    Json(Value),
    Bytes(Vec<u8>),
}

fn body() -> impl Strategy<Value = BodyKind> {
    let perturbed = (
        prop::sample::select(plausible()),
        prop::collection::vec((prop::sample::select(FIELDS), json_value()), 0..2),
        prop::option::of(prop::sample::select(FIELDS)),
    )
        .prop_map(|(mut v, extra, drop)| {
            if let Some(map) = v.as_object_mut() {
                if let Some(d) = drop {
                    map.remove(d);
                }
                for (k, x) in extra {
                    map.insert(k.to_owned(), x);
                }
            }
            BodyKind::Json(v)
        });
    prop_oneof![
        4 => perturbed,
        1 => Just(BodyKind::None),
        4 => json_value().prop_map(BodyKind::Json),
        1 => prop::collection::vec(any::<u8>(), 0..64).prop_map(BodyKind::Bytes),
    ]
}

async fn populate(w: &SimClient) {
    let net = w
        .create_network("net", "10.0.0.0/16", "10.0.1.0/24")
        .await
        .unwrap();
    let s = w.create_server("s1", "cx22", "fsn1").await.unwrap();
    w.create_server("s2", "cpx11", "ash").await.unwrap();
    w.attach_to_network(s, net, None).await.unwrap();
    let lb = w.create_load_balancer("lb", "lb11", "fsn1").await.unwrap();
    w.load_balancer_action(
        lb,
        "add_service",
        json!({"protocol": "tcp", "listen_port": 80, "destination_port": 30080}),
    )
    .await
    .unwrap();
    let (cert_pem, key_pem) = cloud_sim::test_certs::self_signed(&["example.com"]);
    w.create_certificate("c", &cert_pem, &key_pem)
        .await
        .unwrap();
}

#[test]
fn random_requests_never_5xx_or_panic() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let sim = rt.block_on(Sim::start_with(SimConfig {
        rate_limit_per_hour: u32::MAX,
        action_duration: Duration::ZERO,
        ..SimConfig::default()
    }));
    let w = sim.client();
    rt.block_on(populate(&w));
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let base = sim.base_url();
    let token = sim.token();

    let config = ProptestConfig {
        cases: 1500,
        failure_persistence: None,
        ..ProptestConfig::default()
    };
    proptest!(config, |((m, p, b) in request(), authed in prop::bool::weighted(0.9))| {
        let (status, text) = rt.block_on(async {
            let mut req = http.request(m.clone(), format!("{base}{p}"));
            if authed {
                req = req.bearer_auth(&token);
            }
            req = match &b {
                BodyKind::None => req,
                BodyKind::Json(v) => req.json(v),
                BodyKind::Bytes(bytes) => req.body(bytes.clone()),
            };
            let resp = req.send().await.unwrap_or_else(|e| panic!("{m} {p}: transport error (panic?): {e}"));
            let status = resp.status().as_u16();
            (status, resp.text().await.unwrap_or_default())
        });
        prop_assert!(status < 500, "{} {} -> {} {}", m, p, status, text);
        if p.starts_with("/v1") && status >= 400 && m != Method::HEAD {
            let v: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
            prop_assert!(v.pointer("/error/code").is_some_and(Value::is_string), "{} {} -> {} non-JSON error {}", m, p, status, text);
        }
    });
    // Still alive and consistent afterwards.
    let r = rt
        .block_on(w.raw(Method::GET, "/_sim/health", None))
        .unwrap();
    assert_eq!(r.status, 200);
    rt.block_on(w.list_servers()).unwrap();
}
