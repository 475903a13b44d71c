//! Every error code the simulator models (docs/hetzner-api.md, "Errors"), each reached over HTTP.

mod common;

use std::time::Duration;

use cloud_sim::test_certs;
use cloud_sim::{Sim, SimConfig};
use common::{assert_error, invalid_fields, send};
use reqwest::Method;
use serde_json::json;

#[tokio::test]
async fn server_and_name_errors() {
    let sim = Sim::start().await;
    let w = sim.client();
    w.create_server("dup", "cx22", "fsn1").await.unwrap();
    let body = json!({"name": "dup", "server_type": "cx22", "image": "ubuntu-24.04"});
    let r = send(&w, Method::POST, "/servers", Some(body)).await;
    assert_error(&r, 409, "uniqueness_error");
    assert_eq!(r.body["error"]["details"]["fields"][0]["name"], "name");

    let r = send(
        &w,
        Method::POST,
        "/servers",
        Some(json!({"name": "bad name!", "server_type": "cx22", "image": "ubuntu-24.04"})),
    )
    .await;
    assert_error(&r, 400, "invalid_input");
    assert_eq!(invalid_fields(&r), ["name"]);
    // Wrong JSON type for a field: invalid_input naming it.
    let r = send(
        &w,
        Method::POST,
        "/servers",
        Some(json!({"name": 5, "server_type": "cx22", "image": "ubuntu-24.04"})),
    )
    .await;
    assert_error(&r, 400, "invalid_input");
    assert_eq!(invalid_fields(&r), ["name"]);
    // A deprecated server type is gone.
    let r = send(
        &w,
        Method::POST,
        "/servers",
        Some(json!({"name": "old", "server_type": "cx11", "image": "ubuntu-24.04"})),
    )
    .await;
    assert_error(&r, 400, "invalid_input");
}

#[tokio::test]
async fn protection_and_locking() {
    let sim = Sim::start().await;
    let w = sim.client();
    let lb = w.create_load_balancer("lb", "lb11", "fsn1").await.unwrap();
    w.load_balancer_action(lb, "change_protection", json!({"delete": true}))
        .await
        .unwrap();
    let r = send(&w, Method::DELETE, &format!("/load_balancers/{lb}"), None).await;
    assert_error(&r, 423, "protected");
    w.load_balancer_action(lb, "change_protection", json!({"delete": false}))
        .await
        .unwrap();

    // While one action runs on the LB, a second mutation is locked.
    sim.set_action_duration(Duration::from_secs(30));
    let r = send(
        &w,
        Method::POST,
        &format!("/load_balancers/{lb}/actions/change_algorithm"),
        Some(json!({"type": "least_connections"})),
    )
    .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["action"]["status"], "running");
    let r = send(
        &w,
        Method::POST,
        &format!("/load_balancers/{lb}/actions/change_algorithm"),
        Some(json!({"type": "round_robin"})),
    )
    .await;
    assert_error(&r, 423, "locked");
    let r = send(&w, Method::DELETE, &format!("/load_balancers/{lb}"), None).await;
    assert_error(&r, 423, "locked");
    // Reads are never locked.
    assert_eq!(
        send(&w, Method::GET, &format!("/load_balancers/{lb}"), None)
            .await
            .status,
        200
    );
}

#[tokio::test]
async fn load_balancer_rules() {
    let sim = Sim::start().await;
    let w = sim.client();
    let lb = w.create_load_balancer("lb", "lb11", "fsn1").await.unwrap();
    let s1 = w.create_server("s1", "cx22", "nbg1").await.unwrap();
    let us = w.create_server("us", "cpx11", "ash").await.unwrap();
    let act = |name: &str| format!("/load_balancers/{lb}/actions/{name}");

    // Duplicate name.
    let r = send(
        &w,
        Method::POST,
        "/load_balancers",
        Some(json!({"name": "lb", "load_balancer_type": "lb11", "location": "fsn1"})),
    )
    .await;
    assert_error(&r, 409, "uniqueness_error");
    // Neither location nor network_zone.
    let r = send(
        &w,
        Method::POST,
        "/load_balancers",
        Some(json!({"name": "x", "load_balancer_type": "lb11"})),
    )
    .await;
    assert_error(&r, 400, "invalid_input");

    // Cross network-zone target.
    let r = send(
        &w,
        Method::POST,
        &act("add_target"),
        Some(json!({"type": "server", "server": {"id": us}})),
    )
    .await;
    assert_error(&r, 422, "unsupported_error");
    // use_private_ip without the LB in a network.
    let r = send(
        &w,
        Method::POST,
        &act("add_target"),
        Some(json!({"type": "server", "server": {"id": s1}, "use_private_ip": true})),
    )
    .await;
    assert_error(&r, 422, "load_balancer_not_attached_to_network");
    let net = w
        .create_network("net", "10.0.0.0/16", "10.0.1.0/24")
        .await
        .unwrap();
    w.load_balancer_action(lb, "attach_to_network", json!({"network": net}))
        .await
        .unwrap();
    let r = send(
        &w,
        Method::POST,
        &act("add_target"),
        Some(json!({"type": "server", "server": {"id": s1}, "use_private_ip": true})),
    )
    .await;
    assert_error(&r, 422, "server_not_attached_to_network");
    w.attach_to_network(s1, net, None).await.unwrap();
    w.load_balancer_action(
        lb,
        "add_target",
        json!({"type": "server", "server": {"id": s1}, "use_private_ip": true}),
    )
    .await
    .unwrap();
    let r = send(
        &w,
        Method::POST,
        &act("add_target"),
        Some(json!({"type": "server", "server": {"id": s1}})),
    )
    .await;
    assert_error(&r, 422, "target_already_defined");
    // A cloud server's public IP cannot be an IP target.
    let s1_ip = w.get_server(s1).await.unwrap()["public_net"]["ipv4"]["ip"]
        .as_str()
        .unwrap()
        .to_owned();
    let r = send(
        &w,
        Method::POST,
        &act("add_target"),
        Some(json!({"type": "ip", "ip": {"ip": s1_ip}})),
    )
    .await;
    assert_error(&r, 422, "cloud_resource_ip_not_allowed");

    // Services: duplicate port, https without certificate, max services.
    let svc = |port: u16| json!({"protocol": "tcp", "listen_port": port, "destination_port": 30000 + port});
    w.load_balancer_action(lb, "add_service", svc(80))
        .await
        .unwrap();
    let r = send(&w, Method::POST, &act("add_service"), Some(svc(80))).await;
    assert_error(&r, 422, "source_port_already_used");
    let r = send(
        &w,
        Method::POST,
        &act("add_service"),
        Some(json!({"protocol": "https", "listen_port": 443, "destination_port": 30443})),
    )
    .await;
    assert_error(&r, 400, "invalid_input");
    assert_eq!(invalid_fields(&r), ["http.certificates"]);
    let (cert_pem, key_pem) = test_certs::self_signed(&["example.com"]);
    let cert = w
        .create_certificate("c", &cert_pem, &key_pem)
        .await
        .unwrap();
    w.load_balancer_action(lb, "add_service", json!({"protocol": "https", "listen_port": 443, "destination_port": 30443, "http": {"certificates": [cert]}}))
        .await
        .unwrap();
    for port in [81, 82, 83] {
        w.load_balancer_action(lb, "add_service", svc(port))
            .await
            .unwrap();
    }
    let r = send(&w, Method::POST, &act("add_service"), Some(svc(84))).await;
    assert_error(&r, 403, "resource_limit_exceeded");
    assert_eq!(
        r.body["error"]["details"]["limits"][0]["name"],
        "max_services"
    );
    // Removing the public interface while targets use public IPs.
    w.load_balancer_action(
        lb,
        "add_target",
        json!({"type": "label_selector", "label_selector": {"selector": "role=web"}}),
    )
    .await
    .unwrap();
    let r = send(&w, Method::POST, &act("disable_public_interface"), None).await;
    assert_error(&r, 422, "targets_without_use_private_ip");
}

async fn add_server_targets(w: &cloud_sim::client::SimClient, lb: u64, servers: &[u64]) {
    for id in servers {
        let target = json!({"type": "server", "server": {"id": id}});
        w.load_balancer_action(lb, "add_target", target)
            .await
            .unwrap();
    }
}

#[tokio::test]
async fn max_targets_per_lb_type() {
    let sim = Sim::start().await;
    let w = sim.client();
    // lb01 (deprecated, still orderable) allows 10 targets.
    let lb = w
        .create_load_balancer("small", "lb01", "fsn1")
        .await
        .unwrap();
    let ids = w.create_servers(11, "t", "cx22", "fsn1").await.unwrap();
    add_server_targets(&w, lb, &ids[..10]).await;
    let r = send(
        &w,
        Method::POST,
        &format!("/load_balancers/{lb}/actions/add_target"),
        Some(json!({"type": "server", "server": {"id": ids[10]}})),
    )
    .await;
    assert_error(&r, 403, "resource_limit_exceeded");
    assert_eq!(
        r.body["error"]["details"]["limits"][0]["name"],
        "max_targets"
    );
    // Downgrading below the current target count is refused too.
    let lb2 = w.create_load_balancer("big", "lb21", "fsn1").await.unwrap();
    add_server_targets(&w, lb2, &ids[..11]).await;
    let r = send(
        &w,
        Method::POST,
        &format!("/load_balancers/{lb2}/actions/change_type"),
        Some(json!({"load_balancer_type": "lb01"})),
    )
    .await;
    assert_error(&r, 403, "resource_limit_exceeded");
}

#[tokio::test]
async fn route_rules() {
    let sim = Sim::start().await;
    let w = sim.client();
    let net = w
        .create_network("net", "10.0.0.0/8", "10.0.0.0/24")
        .await
        .unwrap();
    let path = format!("/networks/{net}/actions/add_route");
    let bad = [
        ("100.64.0.0/16", "10.0.0.2", "destination"), // not RFC 1918
        ("10.0.0.0/25", "10.0.0.2", "destination"),   // overlaps the subnet
        ("2001:db8::/64", "10.0.0.2", "destination"), // IPv6
        ("10.244.0.0/24", "192.168.0.2", "gateway"),  // gateway outside ip_range
        ("10.244.0.0/24", "10.0.0.1", "gateway"),     // the network gateway
        ("10.244.0.0/24", "10.0.0.0", "gateway"),     // the network address
        ("10.244.0.7/24", "10.0.0.2", "destination"), // not a network address
    ];
    for (destination, gateway, field) in bad {
        let r = send(
            &w,
            Method::POST,
            &path,
            Some(json!({"destination": destination, "gateway": gateway})),
        )
        .await;
        assert_error(&r, 400, "invalid_input");
        assert_eq!(invalid_fields(&r), [field], "{destination} via {gateway}");
    }
    // 172.31.1.1 is reserved as gateway and inside destinations.
    let net2 = w
        .create_network("net2", "172.16.0.0/12", "172.16.0.0/24")
        .await
        .unwrap();
    let r = send(
        &w,
        Method::POST,
        &format!("/networks/{net2}/actions/add_route"),
        Some(json!({"destination": "172.20.0.0/16", "gateway": "172.31.1.1"})),
    )
    .await;
    assert_error(&r, 400, "invalid_input");
    let r = send(
        &w,
        Method::POST,
        &format!("/networks/{net2}/actions/add_route"),
        Some(json!({"destination": "172.31.0.0/16", "gateway": "172.16.0.5"})),
    )
    .await;
    assert_error(&r, 400, "invalid_input");

    w.add_route(net, "10.244.0.0/24", "10.0.0.2").await.unwrap();
    let r = send(
        &w,
        Method::POST,
        &path,
        Some(json!({"destination": "10.244.0.0/16", "gateway": "10.0.0.3"})),
    )
    .await;
    assert_error(&r, 400, "invalid_input"); // overlaps another route
    // Delete must match destination and gateway exactly.
    let r = send(
        &w,
        Method::POST,
        &format!("/networks/{net}/actions/delete_route"),
        Some(json!({"destination": "10.244.0.0/24", "gateway": "10.0.0.3"})),
    )
    .await;
    assert_error(&r, 400, "invalid_input");
    w.delete_route(net, "10.244.0.0/24", "10.0.0.2")
        .await
        .unwrap();
    assert_eq!(w.get_network(net).await.unwrap()["routes"], json!([]));

    // About 100 routes per network.
    sim.set_action_duration(Duration::ZERO);
    for i in 0..100 {
        w.add_route(net, &format!("10.{}.0.0/24", 100 + i), "10.0.0.2")
            .await
            .unwrap();
    }
    let r = send(
        &w,
        Method::POST,
        &path,
        Some(json!({"destination": "10.250.0.0/24", "gateway": "10.0.0.2"})),
    )
    .await;
    assert_error(&r, 403, "resource_limit_exceeded");
}

#[tokio::test]
async fn route_limit_is_configurable() {
    // Lowered: the limit holds for add_route and for routes given at network creation.
    let sim = Sim::start_with(SimConfig {
        action_duration: Duration::ZERO,
        max_routes_per_network: 3,
        ..SimConfig::default()
    })
    .await;
    let w = sim.client();
    let net = w
        .create_network("net", "10.0.0.0/8", "10.0.0.0/24")
        .await
        .unwrap();
    for i in 0..3 {
        w.add_route(net, &format!("10.{}.0.0/24", 100 + i), "10.0.0.2")
            .await
            .unwrap();
    }
    let r = send(
        &w,
        Method::POST,
        &format!("/networks/{net}/actions/add_route"),
        Some(json!({"destination": "10.250.0.0/24", "gateway": "10.0.0.2"})),
    )
    .await;
    assert_error(&r, 403, "resource_limit_exceeded");
    assert!(
        r.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("at most 3 routes"),
        "{:?}",
        r.body
    );
    let routes: Vec<_> = (0..4)
        .map(|i| json!({"destination": format!("10.{}.0.0/24", 100 + i), "gateway": "10.0.0.2"}))
        .collect();
    let r = send(
        &w,
        Method::POST,
        "/networks",
        Some(json!({"name": "n2", "ip_range": "10.0.0.0/8", "routes": routes})),
    )
    .await;
    assert_error(&r, 403, "resource_limit_exceeded");
    let config = w.raw(Method::GET, "/_sim/config", None).await.unwrap().body;
    assert_eq!(config["max_routes_per_network"], 3);

    // Raised above Hetzner's 100 (benchmarks route 1000 nodes).
    let sim = Sim::start_with(SimConfig {
        action_duration: Duration::ZERO,
        max_routes_per_network: 150,
        ..SimConfig::default()
    })
    .await;
    let w = sim.client();
    let net = w
        .create_network("net", "10.0.0.0/8", "10.0.0.0/24")
        .await
        .unwrap();
    for i in 0..150 {
        w.add_route(net, &format!("10.128.{i}.0/24"), "10.0.0.2")
            .await
            .unwrap();
    }
    let r = send(
        &w,
        Method::POST,
        &format!("/networks/{net}/actions/add_route"),
        Some(json!({"destination": "10.250.0.0/24", "gateway": "10.0.0.2"})),
    )
    .await;
    assert_error(&r, 403, "resource_limit_exceeded");
    let routes = w.get_network(net).await.unwrap()["routes"]
        .as_array()
        .unwrap()
        .len();
    assert_eq!(routes, 150);
}

#[tokio::test]
async fn network_and_subnet_rules() {
    let sim = Sim::start().await;
    let w = sim.client();
    let r = send(
        &w,
        Method::POST,
        "/networks",
        Some(json!({"name": "n", "ip_range": "10.0.0.0/16", "subnets": [
            {"type": "cloud", "ip_range": "10.0.1.0/24", "network_zone": "eu-central"},
            {"type": "cloud", "ip_range": "10.0.1.0/25", "network_zone": "eu-central"},
        ]})),
    )
    .await;
    assert_error(&r, 400, "invalid_input");
    let r = send(
        &w,
        Method::POST,
        "/networks",
        Some(json!({"name": "n", "ip_range": "8.8.0.0/16"})),
    )
    .await;
    assert_error(&r, 400, "invalid_input");
    let net = w
        .create_network("n", "10.0.0.0/16", "10.0.1.0/24")
        .await
        .unwrap();
    let r = send(
        &w,
        Method::POST,
        "/networks",
        Some(json!({"name": "n", "ip_range": "10.0.0.0/16"})),
    )
    .await;
    assert_error(&r, 409, "uniqueness_error");
    // A server in another zone cannot join an eu-central-only network.
    let us = w.create_server("us", "cpx11", "ash").await.unwrap();
    let r = send(
        &w,
        Method::POST,
        &format!("/servers/{us}/actions/attach_to_network"),
        Some(json!({"network": net})),
    )
    .await;
    assert_error(&r, 400, "invalid_input");
    // Requested IP already taken.
    let a = w.create_server("a", "cx22", "fsn1").await.unwrap();
    let b = w.create_server("b", "cx22", "fsn1").await.unwrap();
    w.attach_to_network(a, net, Some("10.0.1.10"))
        .await
        .unwrap();
    let r = send(
        &w,
        Method::POST,
        &format!("/servers/{b}/actions/attach_to_network"),
        Some(json!({"network": net, "ip": "10.0.1.10"})),
    )
    .await;
    assert_error(&r, 422, "ip_not_available");
    let r = send(
        &w,
        Method::POST,
        &format!("/servers/{a}/actions/attach_to_network"),
        Some(json!({"network": net})),
    )
    .await;
    assert_error(&r, 422, "server_already_attached");
}

#[tokio::test]
async fn injected_conflict_forbidden_and_5xx() {
    let sim = Sim::start().await;
    let w = sim.client();
    sim.faults()
        .fail_next(Some("GET /servers"), 1, 409, "conflict");
    assert_error(
        &send(&w, Method::GET, "/servers", None).await,
        409,
        "conflict",
    );
    sim.faults()
        .fail_next(Some("GET /servers"), 1, 403, "forbidden");
    assert_error(
        &send(&w, Method::GET, "/servers", None).await,
        403,
        "forbidden",
    );
    for (status, code) in [
        (500, "server_error"),
        (502, "bad_gateway"),
        (503, "unavailable"),
        (504, "timeout"),
    ] {
        sim.faults().fail_next(None, 1, status, code);
        assert_error(
            &send(&w, Method::GET, "/locations", None).await,
            status,
            code,
        );
    }
    assert_eq!(send(&w, Method::GET, "/servers", None).await.status, 200);
}

#[tokio::test]
async fn renames_keep_names_unique_and_findable() {
    let sim = Sim::start().await;
    let w = sim.client();
    let a = w.create_server("alpha", "cx22", "fsn1").await.unwrap();
    w.create_server("beta", "cx22", "fsn1").await.unwrap();

    // Taking another server's name is refused and changes nothing.
    let taken = json!({"name": "beta", "labels": {"x": "y"}});
    let r = send(&w, Method::PUT, &format!("/servers/{a}"), Some(taken)).await;
    assert_error(&r, 409, "uniqueness_error");
    let alpha = w.get(&format!("/servers/{a}")).await.unwrap();
    assert_eq!(
        (
            alpha["server"]["name"].as_str(),
            alpha["server"]["labels"].clone()
        ),
        (Some("alpha"), json!({}))
    );

    // A rename is what `?name=` finds afterwards; the old name finds nothing.
    let r = send(
        &w,
        Method::PUT,
        &format!("/servers/{a}"),
        Some(json!({"name": "gamma"})),
    )
    .await;
    assert_eq!(r.body["server"]["name"], "gamma");
    let by_new = w.get("/servers?name=gamma").await.unwrap();
    assert_eq!(by_new["servers"][0]["id"].as_u64(), Some(a));
    let by_old = w.get("/servers?name=alpha").await.unwrap();
    assert_eq!(by_old["servers"].as_array().map(Vec::len), Some(0));

    // The same rule for every renamable kind, e.g. networks.
    w.create_network("n1", "10.0.0.0/16", "10.0.1.0/24")
        .await
        .unwrap();
    let n2 = w
        .create_network("n2", "10.1.0.0/16", "10.1.1.0/24")
        .await
        .unwrap();
    let r = send(
        &w,
        Method::PUT,
        &format!("/networks/{n2}"),
        Some(json!({"name": "n1"})),
    )
    .await;
    assert_error(&r, 409, "uniqueness_error");
    let r = send(
        &w,
        Method::PUT,
        "/networks/999999",
        Some(json!({"name": "n3"})),
    )
    .await;
    assert_error(&r, 404, "not_found");
}
