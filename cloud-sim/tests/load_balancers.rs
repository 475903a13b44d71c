//! Load balancer CRUD and every action, checked through the resulting LB object.

mod common;

use std::time::Duration;

use cloud_sim::Sim;
use cloud_sim::test_certs;
use common::{assert_error, eventually, send};
use reqwest::Method;
use serde_json::{Value, json};

#[tokio::test]
async fn crud_and_every_action() {
    let sim = Sim::start().await;
    let w = sim.client();
    let net = w
        .create_network("net", "10.0.0.0/16", "10.0.1.0/24")
        .await
        .unwrap();
    let s1 = w.create_server("s1", "cx22", "fsn1").await.unwrap();
    let s2 = w.create_server("s2", "cx22", "nbg1").await.unwrap();
    w.attach_to_network(s1, net, None).await.unwrap();

    // Create with network_zone; defaults filled in.
    let r = send(
        &w,
        Method::POST,
        "/load_balancers",
        Some(json!({
            "name": "svc", "load_balancer_type": "lb11", "network_zone": "eu-central",
            "labels": {"hcloud-ccm/service-uid": "u1"},
        })),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(r.body["action"]["command"], "create_load_balancer");
    let lb = r.body["load_balancer"]["id"].as_u64().unwrap();
    w.wait_action(r.body["action"]["id"].as_u64().unwrap())
        .await
        .unwrap();
    let v = w.get_load_balancer(lb).await.unwrap();
    assert_eq!(v["location"]["network_zone"], "eu-central");
    assert_eq!(v["algorithm"]["type"], "round_robin");
    assert_eq!(v["public_net"]["enabled"], true);
    assert!(
        v["public_net"]["ipv4"]["ip"]
            .as_str()
            .unwrap()
            .starts_with("100.64.")
    );
    assert!(
        v["public_net"]["ipv6"]["ip"]
            .as_str()
            .unwrap()
            .starts_with("2001:db8:")
    );
    assert_eq!(v["load_balancer_type"]["max_targets"], 25);
    assert_eq!(v["load_balancer_type"]["max_services"], 5);
    assert_eq!(v["protection"]["delete"], false);

    let act = |cmd: &'static str, body: Value| {
        let w = w.clone();
        async move {
            w.load_balancer_action(lb, cmd, body)
                .await
                .unwrap_or_else(|e| panic!("{cmd}: {e}"))
        }
    };
    act(
        "attach_to_network",
        json!({"network": net, "ip": "10.0.1.100"}),
    )
    .await;
    act(
        "add_target",
        json!({"type": "server", "server": {"id": s1}, "use_private_ip": true}),
    )
    .await;
    act(
        "add_target",
        json!({"type": "server", "server": {"id": s2}}),
    )
    .await;
    act(
        "add_target",
        json!({"type": "ip", "ip": {"ip": "203.0.113.7"}}),
    )
    .await;
    act(
        "add_service",
        json!({"protocol": "tcp", "listen_port": 80, "destination_port": 30080}),
    )
    .await;
    act("add_service", json!({"protocol": "http", "listen_port": 8080, "destination_port": 30081,
        "health_check": {"protocol": "http", "port": 30081, "interval": 5, "timeout": 3, "retries": 2, "http": {"path": "/healthz"}}})).await;
    act("change_algorithm", json!({"type": "least_connections"})).await;
    act("change_type", json!({"load_balancer_type": "lb21"})).await;
    act(
        "change_dns_ptr",
        json!({"ip": v["public_net"]["ipv4"]["ip"], "dns_ptr": "lb.example.com"}),
    )
    .await;
    act("change_protection", json!({"delete": true})).await;

    let v = w.get_load_balancer(lb).await.unwrap();
    assert_eq!(
        v["private_net"],
        json!([{"network": net, "ip": "10.0.1.100"}])
    );
    assert_eq!(v["targets"].as_array().unwrap().len(), 3);
    assert_eq!(v["targets"][0]["use_private_ip"], true);
    assert_eq!(
        v["targets"][2],
        json!({"type": "ip", "ip": {"ip": "203.0.113.7"}, "health_status": v["targets"][2]["health_status"]})
    );
    assert_eq!(
        v["services"][0]["health_check"],
        json!({"protocol": "tcp", "port": 30080, "interval": 15, "timeout": 10, "retries": 3, "http": null})
    );
    assert_eq!(v["services"][0]["http"], Value::Null);
    assert_eq!(v["services"][1]["http"]["cookie_name"], "HCLBSTICKY");
    assert_eq!(v["services"][1]["health_check"]["http"]["path"], "/healthz");
    assert_eq!(
        v["services"][1]["health_check"]["http"]["status_codes"],
        json!(["2??", "3??"])
    );
    assert_eq!(v["algorithm"]["type"], "least_connections");
    assert_eq!(v["load_balancer_type"]["name"], "lb21");
    assert_eq!(v["public_net"]["ipv4"]["dns_ptr"], "lb.example.com");
    assert_eq!(v["protection"]["delete"], true);
    // The server shows which LBs target it.
    assert_eq!(
        w.get_server(s2).await.unwrap()["load_balancers"],
        json!([lb])
    );

    // Health: unknown at first, healthy once settled; a powered-off server turns unhealthy.
    let status_of = |v: &Value, i: usize| {
        v["targets"][i]["health_status"][0]["status"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    eventually("targets healthy", || {
        let w = w.clone();
        async move {
            let v = w.get_load_balancer(lb).await.unwrap();
            (status_of(&v, 0) == "healthy").then_some(())
        }
    })
    .await;
    sim.set_action_duration(Duration::ZERO);
    w.poweroff(s2).await.unwrap();
    assert_eq!(
        status_of(&w.get_load_balancer(lb).await.unwrap(), 1),
        "unhealthy"
    );

    // update_service is partial: only the named fields change.
    act("update_service", json!({"listen_port": 8080, "health_check": {"interval": 30}, "http": {"sticky_sessions": true}})).await;
    let svc = w.get_load_balancer(lb).await.unwrap()["services"][1].clone();
    assert_eq!(svc["health_check"]["interval"], 30);
    assert_eq!(svc["health_check"]["timeout"], 3);
    assert_eq!(svc["health_check"]["http"]["path"], "/healthz");
    assert_eq!(svc["http"]["sticky_sessions"], true);
    assert_eq!(svc["destination_port"], 30081);
    // Switch it to https with a certificate.
    let (cert_pem, key_pem) = test_certs::self_signed(&["example.com"]);
    let cert = w
        .create_certificate("c", &cert_pem, &key_pem)
        .await
        .unwrap();
    act("update_service", json!({"listen_port": 8080, "protocol": "https", "http": {"certificates": [cert], "redirect_http": true}})).await;
    assert_eq!(
        w.get_certificate(cert).await.unwrap()["used_by"],
        json!([{"id": lb, "type": "load_balancer"}])
    );
    let r = send(
        &w,
        Method::POST,
        &format!("/load_balancers/{lb}/actions/update_service"),
        Some(json!({"listen_port": 9999})),
    )
    .await;
    assert_error(&r, 400, "invalid_input");

    act("delete_service", json!({"listen_port": 80})).await;
    act(
        "remove_target",
        json!({"type": "ip", "ip": {"ip": "203.0.113.7"}}),
    )
    .await;
    act(
        "remove_target",
        json!({"type": "server", "server": {"id": s2}}),
    )
    .await;
    act("disable_public_interface", json!({})).await;
    assert_eq!(
        w.get_load_balancer(lb).await.unwrap()["public_net"]["enabled"],
        false
    );
    act("enable_public_interface", json!({})).await;
    act(
        "remove_target",
        json!({"type": "server", "server": {"id": s1}}),
    )
    .await;
    act("detach_from_network", json!({"network": net})).await;
    let v = w.get_load_balancer(lb).await.unwrap();
    assert_eq!(
        (
            v["services"].as_array().unwrap().len(),
            v["targets"].as_array().unwrap().len()
        ),
        (1, 0)
    );
    assert_eq!(v["private_net"], json!([]));
    let r = send(
        &w,
        Method::POST,
        &format!("/load_balancers/{lb}/actions/detach_from_network"),
        Some(json!({"network": net})),
    )
    .await;
    assert_error(&r, 422, "load_balancer_not_attached_to_network");

    // PUT renames and relabels.
    let r = send(
        &w,
        Method::PUT,
        &format!("/load_balancers/{lb}"),
        Some(json!({"name": "renamed", "labels": {"a": "b"}})),
    )
    .await;
    assert_eq!(
        (
            r.body["load_balancer"]["name"].as_str(),
            r.body["load_balancer"]["labels"].clone()
        ),
        (Some("renamed"), json!({"a": "b"}))
    );

    // Delete: protected first, then 204 with no body, then gone.
    assert_error(
        &send(&w, Method::DELETE, &format!("/load_balancers/{lb}"), None).await,
        423,
        "protected",
    );
    act("change_protection", json!({"delete": false})).await;
    let r = send(&w, Method::DELETE, &format!("/load_balancers/{lb}"), None).await;
    assert_eq!((r.status, r.body.clone()), (204, Value::Null));
    assert_error(
        &send(&w, Method::GET, &format!("/load_balancers/{lb}"), None).await,
        404,
        "not_found",
    );
    assert!(w.list_load_balancers().await.unwrap().is_empty());
}

#[tokio::test]
async fn label_selector_targets_resolve_servers() {
    let sim = Sim::start().await;
    sim.set_action_duration(Duration::ZERO);
    let w = sim.client();
    let lb = w.create_load_balancer("lb", "lb11", "fsn1").await.unwrap();
    w.create_servers_with(
        3,
        "web",
        json!({"server_type": "cx22", "location": "nbg1", "labels": {"role": "web"}}),
    )
    .await
    .unwrap();
    w.create_servers_with(
        2,
        "db",
        json!({"server_type": "cx22", "labels": {"role": "db"}}),
    )
    .await
    .unwrap();
    w.create_servers_with(
        1,
        "far",
        json!({"server_type": "cpx11", "location": "ash", "labels": {"role": "web"}}),
    )
    .await
    .unwrap();
    w.load_balancer_action(
        lb,
        "add_target",
        json!({"type": "label_selector", "label_selector": {"selector": "role=web"}}),
    )
    .await
    .unwrap();
    let v = w.get_load_balancer(lb).await.unwrap();
    // Only the servers in the LB's network zone.
    assert_eq!(v["targets"][0]["targets"].as_array().unwrap().len(), 3);
    let r = send(
        &w,
        Method::POST,
        &format!("/load_balancers/{lb}/actions/add_target"),
        Some(json!({"type": "label_selector", "label_selector": {"selector": "role in (web"}})),
    )
    .await;
    assert_error(&r, 400, "invalid_input");
}

#[tokio::test]
async fn create_with_inline_services_targets_and_network() {
    let sim = Sim::start().await;
    let w = sim.client();
    let net = w
        .create_network("net", "10.0.0.0/16", "10.0.1.0/24")
        .await
        .unwrap();
    let s = w.create_server("s", "cx22", "fsn1").await.unwrap();
    let lb = w.create_load_balancer_with(json!({
        "name": "inline", "load_balancer_type": "lb11", "location": "hel1", "network": net,
        "algorithm": {"type": "least_connections"}, "public_interface": false,
        "services": [{"protocol": "tcp", "listen_port": 443, "destination_port": 30443, "proxyprotocol": true}],
        "targets": [{"type": "server", "server": {"id": s}}],
    })).await.unwrap();
    let v = w.get_load_balancer(lb).await.unwrap();
    assert_eq!(v["private_net"][0]["ip"], "10.0.1.2");
    assert_eq!(v["services"][0]["proxyprotocol"], true);
    assert_eq!(v["public_net"]["enabled"], false);
    assert_eq!(
        w.get_network(net).await.unwrap()["load_balancers"],
        json!([lb])
    );
    // Inline validation errors name the field within the list.
    let r = send(
        &w,
        Method::POST,
        "/load_balancers",
        Some(json!({
            "name": "bad", "load_balancer_type": "lb11", "location": "fsn1",
            "services": [{"protocol": "https", "listen_port": 443, "destination_port": 1}],
        })),
    )
    .await;
    assert_error(&r, 400, "invalid_input");
    assert_eq!(
        r.body["error"]["details"]["fields"][0]["name"],
        "services[0].http.certificates"
    );
    let r = send(
        &w,
        Method::POST,
        "/load_balancers",
        Some(json!({"name": "bad", "load_balancer_type": "lb99", "location": "fsn1"})),
    )
    .await;
    assert_error(&r, 400, "invalid_input");
}
