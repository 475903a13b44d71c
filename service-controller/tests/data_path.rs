//! Load balancers that carry traffic, against cloud-sim's data plane: every node is a stand-in
//! bound to its server's local address (its Service NodePorts answer with the node's name, and
//! kube-proxy's health answers say 200 or 503 as the test says).
//!
//! - a request through the load balancer reaches a node; with PROXY protocol the node sees the
//!   client's address;
//! - `externalTrafficPolicy: Local` with `health-check-kube-proxy`: the API reports 1 healthy and
//!   2 unhealthy targets, every request lands on the node with the endpoint, the Service's
//!   condition and metric show the figure, and no healthy target at all is `NoHealthyTargets`;
//!
//! Draining under load is `tests/drain.rs`.

mod support;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use cloud_sim::stand_in;
use k8s_openapi::api::core::v1::Service;
use kube::ResourceExt;
use serde_json::json;
use support::traffic::*;
use support::*;
use test_support::e2e::eventually;

#[tokio::test]
async fn a_request_through_the_load_balancer_reaches_a_node_and_proxy_protocol_names_the_client() {
    let fx = fixture(Duration::from_secs(600)).await;
    let nodes = fx.nodes(2).await;
    let mut stand_ins = Vec::new();
    for n in &nodes {
        stand_ins.push(stand_in(&fx, n).await);
    }
    let plain = fx.service("plain", &[80], &[]).await;
    let proxied = fx
        .service("proxied", &[80], &[("uses-proxyprotocol", "true")])
        .await;
    for svc in [&plain, &proxied] {
        for s in &mut stand_ins {
            s.serve_node_port(node_port(svc, 80)).await.expect("bind");
        }
    }
    let names: Vec<&str> = nodes.iter().map(|n| n.name.as_str()).collect();
    for (svc, proxy) in [(&plain, false), (&proxied, true)] {
        let ingress = ingress_ips(&fx.wait_ingress(&svc.name_any()).await);
        let lb = wait_health(&fx, svc, (2, 0, 0)).await;
        let addr = listener(&fx, &lb, 80).await;
        let (status, body) = stand_in::get(addr, REQUEST_TIMEOUT)
            .await
            .expect("an answer");
        eprintln!(
            "$ curl {addr}   # {}'s load balancer {} ({}), port 80\n{status} {body}",
            svc.name_any(),
            lb["id"],
            ingress.join(", ")
        );
        assert_eq!(status, 200);
        assert!(names.contains(&answered_by(&body)), "{body}");
        let client = body.lines().find_map(|l| l.strip_prefix("client="));
        if proxy {
            // The stand-in saw the client's address in the PROXY header, not the load balancer's.
            let c: SocketAddr = client.expect("a PROXY header").parse().expect("an address");
            assert!(c.ip().is_loopback(), "{c}");
        } else {
            assert_eq!(client, None, "no PROXY header without uses-proxyprotocol");
        }
    }
}

#[tokio::test]
async fn external_traffic_policy_local_with_kube_proxy_checks_sends_everything_to_the_endpoint() {
    // A short drift check, so the condition and metric follow the health checks quickly.
    let fx = fixture(Duration::from_secs(1)).await;
    let nodes = fx.nodes(3).await;
    let svc = fx
        .service_with(
            "local",
            &[80],
            &[("health-check-kube-proxy", "true")],
            |s| {
                s.external_traffic_policy = Some("Local".into());
            },
        )
        .await;
    let (np, hc) = (node_port(&svc, 80), health_check_node_port(&svc));
    let mut stand_ins = Vec::new();
    for n in &nodes {
        let mut s = stand_in(&fx, n).await;
        // Every node answers on the NodePort, so a request sent to the wrong one would show.
        s.serve_node_port(np).await.expect("bind");
        s.serve_healthz(hc).await.expect("bind");
        stand_ins.push(s);
    }
    // The endpoint runs on the first node only: kube-proxy answers 503 on the others.
    stand_ins[1].set_healthy(false);
    stand_ins[2].set_healthy(false);

    let lb = wait_health(&fx, &svc, (1, 2, 0)).await;
    let service = &lb["services"][0];
    eprintln!(
        "load balancer {}: health check {}\ntargets: {}",
        lb["id"], service["health_check"], lb["targets"]
    );
    assert_eq!(service["health_check"]["protocol"], "http");
    assert_eq!(service["health_check"]["port"], json!(hc));
    assert_eq!(service["health_check"]["http"]["path"], "/healthz");

    let addr = listener(&fx, &lb, 80).await;
    let mut by_node: BTreeMap<String, usize> = BTreeMap::new();
    for _ in 0..20 {
        let batch = (0..50).map(|_| stand_in::get(addr, REQUEST_TIMEOUT));
        for r in futures::future::join_all(batch).await {
            let (status, body) = r.expect("an answer");
            assert_eq!(status, 200);
            *by_node.entry(answered_by(&body).to_string()).or_default() += 1;
        }
    }
    eprintln!("1000 requests: {by_node:?}");
    assert_eq!(by_node, BTreeMap::from([(nodes[0].name.clone(), 1000)]));

    // The condition and the metric say so, from the drift check's read (no extra call).
    let key = format!("{}/local", fx.ns);
    let message = eventually("the condition to count the targets", T, || async {
        let s = fx.get("local").await?;
        let c = service_condition(&s)?;
        // Every target checked: the other two unhealthy, none "not checked yet".
        (c.0 == "True" && c.2.ends_with("1 of 3 targets healthy")).then_some(c.2)
    })
    .await;
    eprintln!("condition: {message}");
    let metrics = fx.metrics().await;
    for (state, n) in [("healthy", 1), ("unhealthy", 2), ("unknown", 0)] {
        let line = format!(
            r#"cloud_controllers_load_balancer_targets{{service="{key}",state="{state}"}} {n}"#
        );
        assert!(metrics.contains(&line), "{line} in\n{metrics}");
    }

    // The endpoint goes away: no target can serve, and the condition says so.
    stand_ins[0].set_healthy(false);
    wait_health(&fx, &svc, (0, 3, 0)).await;
    let (status, reason, message) = eventually("NoHealthyTargets", T, || async {
        service_condition(&fx.get("local").await?).filter(|c| c.0 == "False")
    })
    .await;
    eprintln!("condition: {status} {reason}: {message}");
    assert_eq!(reason, "NoHealthyTargets");
    assert!(message.starts_with("0 of 3 targets healthy"), "{message}");
}

/// `(status, reason, message)` of the Service's LoadBalancerReady condition.
fn service_condition(svc: &Service) -> Option<(String, String, String)> {
    svc.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == service_controller::condition::TYPE)
        .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
}
