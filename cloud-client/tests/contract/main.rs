//! Contract tests: every client call against cloud-sim over HTTP. cloud-sim keeps its own wire
//! types, so these compare two independent readings of the Hetzner API.
//!
//! Figures are printed with `--nocapture` (lines starting with `FIGURE`). One test binary, one
//! module per API area; the helpers below are shared by all of them.

#[path = "../common/mod.rs"]
mod common;

mod actions;
mod instances;
mod load_balancers;
mod robot;
mod routes;
mod transport;

use std::time::Duration;

use cloud_client::{LbNode, PortProtocol, ServicePort, ServiceRef};
use cloud_sim::Sim;

const LB_PREFIX: &str = "load-balancer.hetzner.cloud/";

async fn sim_fast() -> Sim {
    common::sim_with_actions(Duration::from_millis(50)).await
}

/// Network `k8s` (10.0.0.0/16, subnet 10.0.1.0/24) with server `name` attached: (network, server).
/// cloud-sim's network `k8s`, 10.0.0.0/16 with the subnet 10.0.1.0/24.
async fn k8s_network(sim: &Sim) -> u64 {
    sim.client()
        .create_network("k8s", "10.0.0.0/16", "10.0.1.0/24")
        .await
        .unwrap()
}

async fn server_in_network(sim: &Sim, name: &str) -> (u64, u64) {
    let w = sim.client();
    let net = k8s_network(sim).await;
    let id = w.create_server(name, "cx22", "fsn1").await.unwrap();
    w.attach_to_network(id, net, None).await.unwrap();
    (net, id)
}

fn svc(uid: &str, ann: &[(&str, &str)]) -> ServiceRef {
    ServiceRef {
        uid: uid.to_string(),
        namespace: "default".into(),
        name: format!("svc-{uid}"),
        annotations: ann
            .iter()
            .map(|(k, v)| (format!("{LB_PREFIX}{k}"), v.to_string()))
            .collect(),
        ports: vec![
            ServicePort {
                name: Some("http".into()),
                protocol: PortProtocol::Tcp,
                port: 80,
                node_port: 30080,
            },
            ServicePort {
                name: Some("https".into()),
                protocol: PortProtocol::Tcp,
                port: 443,
                node_port: 30443,
            },
        ],
        ..Default::default()
    }
}

/// Nodes of servers in fsn1, as the node-controller labels them.
fn lb_nodes(ids: &[u64]) -> Vec<LbNode> {
    let region: std::sync::Arc<std::collections::BTreeMap<String, String>> = std::sync::Arc::new(
        [(
            "topology.kubernetes.io/region".to_string(),
            "fsn1".to_string(),
        )]
        .into(),
    );
    ids.iter()
        .map(|id| LbNode {
            name: format!("n{id}"),
            provider_id: Some(format!("hcloud://{id}")),
            labels: region.clone(),
            internal_ips: vec![],
        })
        .collect()
}

fn calls(sim: &Sim) -> u64 {
    sim.total_requests()
}
