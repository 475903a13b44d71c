//! The data-path tests' world: cloud-sim with its data plane on, every node a stand-in at its
//! server's local address (`cloud_sim::stand_in`), and what they read back: listeners, the
//! targets' health as the API reports it, who answered.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use cloud_sim::stand_in::NodeStandIn;
use cloud_sim::{DataPlaneConfig, SimConfig};
use k8s_openapi::api::core::v1::Service;
use serde_json::Value;
use service_controller::Settings;
use test_support::e2e::{NodeSpecT, create_node, eventually, unique};

use super::{Fixture, Options, T, TestNode, node_ports};

/// Health checks run 50 times faster than their settings say: HCCM's 15 s interval is 300 ms.
pub const SPEEDUP: f64 = 50.0;
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);

pub fn data_plane() -> SimConfig {
    SimConfig {
        action_duration: Duration::from_millis(50),
        data_plane: Some(DataPlaneConfig {
            health_check_speedup: SPEEDUP,
            ..Default::default()
        }),
        ..SimConfig::default()
    }
}

pub async fn fixture(drift_period: Duration) -> Fixture {
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
pub async fn stand_in(fx: &Fixture, node: &TestNode) -> NodeStandIn {
    let v = fx
        .sim
        .client()
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

/// One server and its Ready Node whose `InternalIP` is the server's local address, with the
/// node's stand-in there: where anything in the cluster (the controller's probes of kube-proxy)
/// reaches the node, as the load balancer does.
pub async fn reachable_node(fx: &Fixture) -> (TestNode, NodeStandIn) {
    let name = unique("node");
    let server = fx.server(&name).await;
    let ip: IpAddr = server.ipv4.parse().expect("the server's IPv4");
    let local = fx.sim.local_address(ip);
    create_node(
        &fx.admin,
        &fx.run,
        &name,
        NodeSpecT {
            provider_id: Some(format!("hcloud://{}", server.id)),
            node_ip: Some(local.to_string()),
            ready: Some(true),
            ..Default::default()
        },
    )
    .await;
    let stand_in = NodeStandIn::new(&name, local);
    let node = TestNode {
        name,
        server: server.id,
    };
    (node, stand_in)
}

pub fn node_port(svc: &Service, port: u64) -> u16 {
    node_ports(svc)
        .into_iter()
        .find(|(p, _)| *p == port)
        .map(|(_, n)| n as u16)
        .expect("a nodePort")
}

pub fn health_check_node_port(svc: &Service) -> u16 {
    svc.spec
        .as_ref()
        .and_then(|s| s.health_check_node_port)
        .expect("a healthCheckNodePort") as u16
}

/// Where the load balancer's service on `port` accepts connections.
pub async fn listener(fx: &Fixture, lb: &Value, port: u16) -> SocketAddr {
    let id = lb["id"].as_u64().expect("lb id");
    eventually(&format!("a listener for port {port}"), T, || async {
        fx.sim.listener(id, port)
    })
    .await
}

/// `(healthy, unhealthy, unknown)` over the load balancer's targets, as the API reports them.
pub fn health_counts(lb: &Value) -> (usize, usize, usize) {
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

pub async fn wait_health(fx: &Fixture, svc: &Service, want: (usize, usize, usize)) -> Value {
    eventually(&format!("target health {want:?}"), T, || async {
        let lb = fx.lbs_of(svc).await.into_iter().next()?;
        (health_counts(&lb) == want).then_some(lb)
    })
    .await
}

/// The first line of the answer: the node's name.
pub fn answered_by(body: &str) -> &str {
    body.lines().next().unwrap_or_default()
}
