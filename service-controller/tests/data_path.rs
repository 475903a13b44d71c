//! Load balancers that carry traffic, against cloud-sim's data plane: every node is a stand-in
//! bound to its server's local address (its Service NodePorts answer with the node's name, and
//! kube-proxy's health answers say 200 or 503 as the test says).
//!
//! - a request through the load balancer reaches a node; with PROXY protocol the node sees the
//!   client's address;
//! - `externalTrafficPolicy: Local` with `health-check-kube-proxy`: the API reports 1 healthy and
//!   2 unhealthy targets, every request lands on the node with the endpoint, the Service's
//!   condition and metric show the figure, and no healthy target at all is `NoHealthyTargets`;
//! - draining under load: requests at 50/s while one node is excluded, tainted, its kube-proxy
//!   stops, and its server is deleted after a drain; failed requests per step, with kube-proxy
//!   health checks (ours) and with HCCM's TCP check on the nodePort (HCCM itself cannot be built
//!   here, so that column is our controller configuring the load balancer as HCCM does; both
//!   drain on the same upstream node predicates).

mod support;

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use cloud_sim::stand_in::{self, NodeStandIn};
use cloud_sim::{DataPlaneConfig, SimConfig};
use k8s_openapi::api::core::v1::{Node, Service};
use kube::api::{Patch, PatchParams};
use kube::{Api, ResourceExt};
use serde_json::{Value, json};
use service_controller::Settings;
use support::*;
use test_support::eventually;

/// Health checks run 50 times faster than their settings say: HCCM's 15 s interval is 300 ms.
const SPEEDUP: f64 = 50.0;
const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);

fn data_plane() -> SimConfig {
    SimConfig {
        action_duration: Duration::from_millis(50),
        data_plane: Some(DataPlaneConfig {
            health_check_speedup: SPEEDUP,
            ..Default::default()
        }),
        ..SimConfig::default()
    }
}

async fn fixture(drift_period: Duration) -> Fixture {
    Fixture::start_with(Options {
        sim: Some(data_plane()),
        settings: Settings {
            drift_period,
            ..Settings::default()
        },
        ..Options::default()
    })
    .await
}

/// A node's stand-in at its server's local address.
async fn stand_in(fx: &Fixture, node: &TestNode) -> NodeStandIn {
    let v = fx
        .sim
        .world()
        .get_server(node.server)
        .await
        .expect("server");
    let s = v.get("server").unwrap_or(&v);
    let ip: IpAddr = s["public_net"]["ipv4"]["ip"]
        .as_str()
        .and_then(|ip| ip.parse().ok())
        .expect("the server's IPv4");
    NodeStandIn::new(&node.name, fx.sim.local_address(ip))
}

fn node_port(svc: &Service, port: u64) -> u16 {
    node_ports(svc)
        .into_iter()
        .find(|(p, _)| *p == port)
        .map(|(_, n)| n as u16)
        .expect("a nodePort")
}

fn health_check_node_port(svc: &Service) -> u16 {
    svc.spec
        .as_ref()
        .and_then(|s| s.health_check_node_port)
        .expect("a healthCheckNodePort") as u16
}

/// Where the load balancer's service on `port` accepts connections.
async fn listener(fx: &Fixture, lb: &Value, port: u16) -> SocketAddr {
    let id = lb["id"].as_u64().expect("lb id");
    eventually(&format!("a listener for port {port}"), T, || async {
        fx.sim.listener(id, port)
    })
    .await
}

/// `(healthy, unhealthy, unknown)` over the load balancer's targets, as the API reports them.
fn health_counts(lb: &Value) -> (usize, usize, usize) {
    let mut c = (0, 0, 0);
    for t in lb["targets"].as_array().into_iter().flatten() {
        let states: Vec<&str> = t["health_status"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|h| h["status"].as_str())
            .collect();
        if states.contains(&"unhealthy") {
            c.1 += 1;
        } else if !states.is_empty() && states.iter().all(|s| *s == "healthy") {
            c.0 += 1;
        } else {
            c.2 += 1;
        }
    }
    c
}

async fn wait_health(fx: &Fixture, svc: &Service, want: (usize, usize, usize)) -> Value {
    eventually(&format!("target health {want:?}"), T, || async {
        let lb = fx.lbs_of(svc).await.into_iter().next()?;
        (health_counts(&lb) == want).then_some(lb)
    })
    .await
}

/// The first line of the answer: the node's name.
fn answered_by(body: &str) -> &str {
    body.lines().next().unwrap_or_default()
}

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
        (c.0 == "True" && c.2.contains("1 of 3 targets healthy")).then_some(c.2)
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

/// Requests sent and failed during each step of a drain.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct StepCount {
    sent: usize,
    failed: usize,
}

const STEPS: [&str; 5] = [
    "before (all three nodes in rotation)",
    "node labelled exclude-from-external-load-balancers",
    "node tainted ToBeDeletedByClusterAutoscaler",
    "kube-proxy stopping: /healthz 503, NodePort closed 3 s later",
    "server deleted after its node was labelled and tainted",
];

/// One drain run under load: 50 requests/s through the load balancer of an
/// `externalTrafficPolicy: Cluster` Service on three nodes while the third goes through
/// [`STEPS`]; each step is undone (label and taint removed, kube-proxy back) before the next, so
/// each is counted on its own. Returns the failed requests per step.
async fn drain_run(kube_proxy_checks: bool) -> Vec<StepCount> {
    let fx = fixture(Duration::from_secs(600)).await;
    let nodes = fx.nodes(3).await;
    let ann: &[(&str, &str)] = if kube_proxy_checks {
        &[("health-check-kube-proxy", "true")]
    } else {
        &[]
    };
    let svc = fx.service("drain", &[80], ann).await;
    let np = node_port(&svc, 80);
    let mut stand_ins = Vec::new();
    for n in &nodes {
        let mut s = stand_in(&fx, n).await;
        s.serve_node_port(np).await.expect("bind");
        s.serve_healthz(10256).await.expect("bind");
        stand_ins.push(s);
    }
    let lb = wait_health(&fx, &svc, (3, 0, 0)).await;
    let addr = listener(&fx, &lb, 80).await;

    let step = Arc::new(AtomicUsize::new(0));
    let counts = Arc::new(std::sync::Mutex::new(vec![
        StepCount::default();
        STEPS.len()
    ]));
    let load = tokio::spawn({
        let (step, counts) = (step.clone(), counts.clone());
        async move {
            let mut tick = tokio::time::interval(Duration::from_millis(20));
            loop {
                tick.tick().await;
                let (step, counts) = (step.clone(), counts.clone());
                tokio::spawn(async move {
                    let at = step.load(Ordering::SeqCst);
                    let ok = matches!(stand_in::get(addr, REQUEST_TIMEOUT).await, Ok((200, _)));
                    let mut c = counts.lock().unwrap();
                    c[at].sent += 1;
                    c[at].failed += usize::from(!ok);
                });
            }
        }
    });
    let hold = || tokio::time::sleep(Duration::from_secs(2));
    let gone = &nodes[2];
    let nodes_api: Api<Node> = Api::all(fx.admin.clone());
    let all = [nodes[0].server, nodes[1].server, nodes[2].server];
    let two = [nodes[0].server, nodes[1].server];

    hold().await;

    // The two ways a node is marked as going, each set (`true`) or taken back (`false`).
    let exclude = |on: bool| {
        let label = "node.kubernetes.io/exclude-from-external-load-balancers";
        json!({"metadata": {"labels": {label: on.then_some("true")}}})
    };
    let to_be_deleted = |on: bool| {
        let taint = json!([{"key": "ToBeDeletedByClusterAutoscaler", "value": "1", "effect": "NoSchedule"}]);
        json!({"spec": {"taints": if on { taint } else { Value::Null }}})
    };

    step.store(1, Ordering::SeqCst);
    patch(&nodes_api, &gone.name, exclude(true)).await;
    fx.wait_targets(&svc, &two).await;
    hold().await;
    patch(&nodes_api, &gone.name, exclude(false)).await;
    fx.wait_targets(&svc, &all).await;
    wait_health(&fx, &svc, (3, 0, 0)).await;

    step.store(2, Ordering::SeqCst);
    // kube-proxy's /healthz turns 503 when its node carries the taint (KEP-3836).
    patch(&nodes_api, &gone.name, to_be_deleted(true)).await;
    stand_ins[2].set_healthy(false);
    fx.wait_targets(&svc, &two).await;
    hold().await;
    patch(&nodes_api, &gone.name, to_be_deleted(false)).await;
    stand_ins[2].set_healthy(true);
    fx.wait_targets(&svc, &all).await;
    wait_health(&fx, &svc, (3, 0, 0)).await;

    step.store(3, Ordering::SeqCst);
    stand_ins[2].set_healthy(false);
    // Ten health-check intervals at this speedup: what kube-proxy's termination gives the load
    // balancer to notice.
    tokio::time::sleep(Duration::from_secs(3)).await;
    stand_ins[2].stop();
    hold().await;
    stand_ins[2] = stand_in(&fx, gone).await;
    stand_ins[2].serve_node_port(np).await.expect("bind");
    stand_ins[2].serve_healthz(10256).await.expect("bind");
    wait_health(&fx, &svc, (3, 0, 0)).await;

    step.store(4, Ordering::SeqCst);
    // The autoscaler's order: the node is drained out of the load balancer, then its server goes.
    patch(&nodes_api, &gone.name, exclude(true)).await;
    patch(&nodes_api, &gone.name, to_be_deleted(true)).await;
    stand_ins[2].set_healthy(false);
    fx.wait_targets(&svc, &two).await;
    stand_ins[2].stop();
    fx.sim
        .world()
        .delete_server(gone.server)
        .await
        .expect("delete the server");
    fx.wait_targets(&svc, &two).await;
    hold().await;

    load.abort();
    // Requests still in flight finish within their timeout.
    tokio::time::sleep(REQUEST_TIMEOUT).await;
    counts.lock().unwrap().clone()
}

async fn patch(nodes: &Api<Node>, name: &str, p: Value) {
    nodes
        .patch(name, &PatchParams::default(), &Patch::Merge(&p))
        .await
        .expect("patch node");
}

#[tokio::test]
async fn draining_a_node_under_load_loses_no_request_with_kube_proxy_checks() {
    let ours = drain_run(true).await;
    let hccm = drain_run(false).await;
    eprintln!(
        "{:<62} {:>18} {:>24}",
        "step (50 requests/s)", "ours: failed/sent", "HCCM's check: failed/sent"
    );
    for (i, name) in STEPS.iter().enumerate() {
        eprintln!(
            "{name:<62} {:>18} {:>24}",
            format!("{}/{}", ours[i].failed, ours[i].sent),
            format!("{}/{}", hccm[i].failed, hccm[i].sent)
        );
    }
    for (i, c) in ours.iter().enumerate() {
        assert!(c.sent > 0, "step {i} sent nothing");
        assert_eq!(c.failed, 0, "ours, step {:?}: {c:?}", STEPS[i]);
    }
    // With HCCM's TCP check on the nodePort the load balancer keeps sending to the node whose
    // kube-proxy stopped until its NodePort refuses and the check has failed retries + 1 times.
    assert!(hccm[3].failed > 0, "HCCM's check lost nothing: {hccm:?}");
}
