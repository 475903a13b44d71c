//! SimClient building at scale, private addresses, the metadata service and persistence.

mod common;

use std::collections::HashSet;
use std::time::{Duration, Instant};

use cloud_sim::{Sim, SimConfig};
use common::{assert_error, send};
use reqwest::Method;
use serde_json::{Value, json};

#[tokio::test]
async fn ten_thousand_servers_get_unique_addresses() {
    let sim = Sim::start().await;
    let w = sim.client();
    let t = Instant::now();
    let ids = w.create_servers(10_000, "n", "cx22", "fsn1").await.unwrap();
    assert_eq!(ids.len(), 10_000);
    eprintln!("10 000 servers in {:?}", t.elapsed());
    let all = w.list_servers().await.unwrap();
    assert_eq!(all.len(), 10_000);
    let v4: HashSet<&str> = all
        .iter()
        .map(|s| s["public_net"]["ipv4"]["ip"].as_str().unwrap())
        .collect();
    let v6: HashSet<&str> = all
        .iter()
        .map(|s| s["public_net"]["ipv6"]["ip"].as_str().unwrap())
        .collect();
    assert_eq!((v4.len(), v6.len()), (10_000, 10_000));
    assert!(all.iter().all(|s| s["status"] == "running"));
    // Same validation as POST /servers.
    let r = w
        .raw(
            Method::POST,
            "/_sim/batch/servers",
            Some(json!({"count": 1, "prefix": "n", "server_type": "cx22"})),
        )
        .await
        .unwrap();
    assert_error(&r, 409, "uniqueness_error");
}

#[tokio::test]
async fn a_server_for_a_real_machine_gets_its_name_and_address() {
    let sim = Sim::start().await;
    let w = sim.client();
    let body = json!({"count": 1, "prefix": "x", "name": "vm", "public_ipv4": "192.0.2.2",
                      "server_type": "cx22", "location": "fsn1"});
    let r = w
        .raw(Method::POST, "/_sim/batch/servers", Some(body.clone()))
        .await
        .unwrap();
    assert_eq!(r.status, 201, "{:?}", r.body);
    let id = r.body["servers"][0].as_u64().unwrap();
    let server = w.get_server(id).await.unwrap();
    assert_eq!(server["name"], "vm");
    assert_eq!(server["public_net"]["ipv4"]["ip"], "192.0.2.2");
    assert_eq!(
        server["public_net"]["ipv4"]["dns_ptr"],
        "static.192.0.2.2.clients.your-server.de"
    );
    // Names stay unique; both fields need count 1; no address without a public IPv4.
    let again = w.raw(Method::POST, "/_sim/batch/servers", Some(body)).await;
    assert_error(&again.unwrap(), 409, "uniqueness_error");
    for body in [
        json!({"count": 2, "prefix": "y", "public_ipv4": "192.0.2.3", "server_type": "cx22"}),
        json!({"count": 1, "prefix": "y", "public_ipv4": "192.0.2.3", "server_type": "cx22",
               "public_net": {"enable_ipv4": false, "enable_ipv6": true}}),
    ] {
        let r = w.raw(Method::POST, "/_sim/batch/servers", Some(body)).await;
        assert_error(&r.unwrap(), 400, "invalid_input");
    }
}

#[tokio::test]
async fn private_ips_come_from_the_subnet() {
    let sim = Sim::start().await;
    sim.set_action_duration(Duration::ZERO);
    let w = sim.client();
    let net = w
        .create_network("k8s", "10.0.0.0/16", "10.0.1.0/24")
        .await
        .unwrap();
    let ids = w.create_servers(3, "n", "cx22", "fsn1").await.unwrap();
    for id in &ids {
        w.attach_to_network(*id, net, None).await.unwrap();
    }
    let ips: Vec<String> = futures_ips(&w, &ids).await;
    assert_eq!(ips, ["10.0.1.2", "10.0.1.3", "10.0.1.4"]);
    let n = w.get_network(net).await.unwrap();
    assert_eq!(n["servers"], json!(ids));
    assert_eq!(n["subnets"][0]["gateway"], "10.0.0.1");
    w.detach_from_network(ids[0], net).await.unwrap();
    assert_eq!(
        w.get_server(ids[0]).await.unwrap()["private_net"],
        json!([])
    );
    // The freed address is handed out again.
    w.attach_to_network(ids[0], net, None).await.unwrap();
    assert_eq!(futures_ips(&w, &ids[..1]).await, ["10.0.1.2"]);
    // Servers created into a network.
    let id = w
        .create_server_with(
            json!({"name": "x", "server_type": "cx22", "image": "ubuntu-24.04", "networks": [net],
        "public_net": {"enable_ipv4": false, "enable_ipv6": true}}),
        )
        .await
        .unwrap();
    let s = w.get_server(id).await.unwrap();
    assert_eq!(s["public_net"]["ipv4"], Value::Null);
    assert_eq!(s["private_net"][0]["ip"], "10.0.1.5");
    // Deleting frees everything; the server is gone.
    w.delete_server(id).await.unwrap();
    assert_error(
        &send(&w, Method::GET, &format!("/servers/{id}"), None).await,
        404,
        "not_found",
    );
    assert_eq!(w.get_network(net).await.unwrap()["servers"], json!(ids));
}

async fn futures_ips(w: &cloud_sim::SimClient, ids: &[u64]) -> Vec<String> {
    let mut out = Vec::new();
    for id in ids {
        out.push(
            w.get_server(*id).await.unwrap()["private_net"][0]["ip"]
                .as_str()
                .unwrap()
                .to_owned(),
        );
    }
    out
}

#[tokio::test]
async fn metadata_service_answers_per_server() {
    let sim = Sim::start().await;
    let w = sim.client();
    let net = w
        .create_network("k8s", "10.0.0.0/16", "10.0.1.0/24")
        .await
        .unwrap();
    let id = w.create_server("node-a", "cx22", "hel1").await.unwrap();
    w.attach_to_network(id, net, None).await.unwrap();
    let ip = w.get_server(id).await.unwrap()["public_net"]["ipv4"]["ip"]
        .as_str()
        .unwrap()
        .to_owned();
    let http = reqwest::Client::new();
    let get = |url: String| {
        let http = http.clone();
        async move {
            let r = http.get(url).send().await.unwrap();
            (r.status().as_u16(), r.text().await.unwrap())
        }
    };
    let base = sim.metadata_url(&id.to_string());
    assert_eq!(
        get(format!("{base}/hetzner/v1/metadata/instance-id")).await,
        (200, id.to_string())
    );
    assert_eq!(
        get(format!("{base}/hetzner/v1/metadata/hostname")).await,
        (200, "node-a".into())
    );
    assert_eq!(
        get(format!("{base}/hetzner/v1/metadata/public-ipv4")).await,
        (200, ip.clone())
    );
    assert_eq!(
        get(format!("{base}/hetzner/v1/metadata/region")).await,
        (200, "eu-central".into())
    );
    assert_eq!(
        get(format!("{base}/hetzner/v1/metadata/availability-zone")).await,
        (200, "hel1-dc2".into())
    );
    let (status, nets) = get(format!("{base}/hetzner/v1/metadata/private-networks")).await;
    assert_eq!(status, 200);
    assert!(
        nets.contains("- ip: 10.0.1.2")
            && nets.contains(&format!("network_id: {net}"))
            && nets.contains("gateway: 10.0.0.1"),
        "{nets}"
    );
    let (_, summary) = get(format!("{base}/hetzner/v1/metadata")).await;
    assert!(
        summary.contains("hostname: node-a") && summary.contains(&format!("instance-id: {id}")),
        "{summary}"
    );
    // By name, by query, by header, by default; unknown keys and servers are 404.
    let root = sim.base_url();
    assert_eq!(
        get(format!(
            "{}/hetzner/v1/metadata/instance-id",
            sim.metadata_url("node-a")
        ))
        .await
        .1,
        id.to_string()
    );
    assert_eq!(
        get(format!("{root}/hetzner/v1/metadata/hostname?server={id}"))
            .await
            .1,
        "node-a"
    );
    let r = http
        .get(format!("{root}/hetzner/v1/metadata/hostname"))
        .header("X-Sim-Server", "node-a")
        .send()
        .await
        .unwrap();
    assert_eq!(r.text().await.unwrap(), "node-a");
    assert_eq!(
        get(format!("{root}/hetzner/v1/metadata/hostname")).await.0,
        404
    );
    sim.set_metadata_server(Some(id));
    assert_eq!(
        get(format!("{root}/hetzner/v1/metadata/hostname")).await,
        (200, "node-a".into())
    );
    assert_eq!(get(format!("{base}/hetzner/v1/metadata/nope")).await.0, 404);
    assert_eq!(
        get(format!(
            "{}/hetzner/v1/metadata/hostname",
            sim.metadata_url("ghost")
        ))
        .await
        .0,
        404
    );
    // The metadata service is neither authenticated nor counted.
    assert_eq!(
        sim.total_requests() - sim.requests("GET", "/actions/{id}"),
        4
    );
}

#[tokio::test]
async fn state_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("world.json");
    let cfg = || SimConfig {
        state_file: Some(file.clone()),
        ..SimConfig::default()
    };
    let (server, net, lb, cert) = {
        let sim = Sim::start_with(cfg()).await;
        let w = sim.client();
        let net = w
            .create_network("k8s", "10.0.0.0/16", "10.0.1.0/24")
            .await
            .unwrap();
        let server = w.create_server("keep", "cx22", "fsn1").await.unwrap();
        w.attach_to_network(server, net, None).await.unwrap();
        w.add_route(net, "10.244.0.0/24", "10.0.1.2").await.unwrap();
        let lb = w.create_load_balancer("lb", "lb11", "fsn1").await.unwrap();
        w.load_balancer_action(
            lb,
            "add_service",
            json!({"protocol": "tcp", "listen_port": 80, "destination_port": 30080}),
        )
        .await
        .unwrap();
        let cert = w
            .create_managed_certificate("c", &["example.com"])
            .await
            .unwrap();
        sim.shutdown().await;
        (server, net, lb, cert)
    };
    assert!(file.exists());
    let sim = Sim::start_with(cfg()).await;
    let w = sim.client();
    let s = w.get_server(server).await.unwrap();
    assert_eq!(
        (s["name"].as_str(), s["status"].as_str()),
        (Some("keep"), Some("running"))
    );
    assert_eq!(s["private_net"][0]["ip"], "10.0.1.2");
    assert_eq!(
        w.get_network(net).await.unwrap()["routes"][0]["destination"],
        "10.244.0.0/24"
    );
    assert_eq!(
        w.get_load_balancer(lb).await.unwrap()["services"][0]["listen_port"],
        80
    );
    assert_eq!(
        w.get_certificate(cert).await.unwrap()["status"]["issuance"],
        "completed"
    );
    // Indexes were rebuilt: names stay unique, ids and addresses keep counting.
    let dup = send(
        &w,
        Method::POST,
        "/servers",
        Some(json!({"name": "keep", "server_type": "cx22", "image": "ubuntu-24.04"})),
    )
    .await;
    assert_error(&dup, 409, "uniqueness_error");
    let other = w.create_server("other", "cx22", "fsn1").await.unwrap();
    assert!(other > server);
    w.attach_to_network(other, net, None).await.unwrap();
    assert_eq!(
        w.get_server(other).await.unwrap()["private_net"][0]["ip"],
        "10.0.1.3"
    );
    drop(sim);
    // Dropping writes too.
    let sim = Sim::start_with(cfg()).await;
    assert_eq!(sim.client().list_servers().await.unwrap().len(), 2);
    // A corrupt file is an error, not an empty world.
    std::fs::write(&file, "{oops").unwrap();
    assert!(Sim::try_start(cfg()).await.is_err());
}
