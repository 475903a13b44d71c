//! The demo's world: cloud-sim servers in a private network, and their Nodes registered as kubelets
//! with `--cloud-provider=external` register them.

use anyhow::Context as _;
use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use kube::Client;
use serde_json::{Value, json};
use testenv::KubeletNode;

pub const NETWORK: &str = "k8s";
/// HCCM's annotation: the load balancer targets only the Nodes matching this label selector.
pub const NODE_SELECTOR: &str = "load-balancer.hetzner.cloud/node-selector";
/// Where the demo's pod CIDRs (`10.244.<i>.0/24`) come from: route-controller's `--cluster-cidr`.
pub const CLUSTER_CIDR: &str = "10.244.0.0/16";
pub const UNINITIALIZED: &str = "node.cloudprovider.kubernetes.io/uninitialized";

/// A server of the demo.
#[derive(Debug, Clone)]
pub struct Server {
    pub id: u64,
    pub name: String,
    pub private_ip: String,
    pub pod_cidr: String,
    /// Labels its kubelet registers the Node with (`--node-labels`).
    pub labels: Vec<(String, String)>,
}

/// Creates the network (10.0.0.0/8, subnet 10.0.0.0/16 in eu-central).
pub async fn network(sim: &cloud_sim::Sim) -> anyhow::Result<u64> {
    sim.client()
        .create_network(NETWORK, "10.0.0.0/8", "10.0.0.0/16")
        .await
        .map_err(|e| anyhow::anyhow!("creating the network: {e}"))
}

/// Creates server `demo-<i>` attached to `network`; odd ones in fsn1, even ones in nbg1. Fault
/// rules leave its calls alone (a server joining mid-chaos must join), the rate limit does not.
pub async fn server(sim: &cloud_sim::Sim, network: u64, i: usize) -> anyhow::Result<Server> {
    let client = sim.client().unfaulted();
    let name = format!("demo-{i}");
    let (location, server_type) = if i % 2 == 1 {
        ("fsn1", "cx22")
    } else {
        ("nbg1", "cx32")
    };
    let id = client
        .create_server_with(json!({
            "name": name, "server_type": server_type, "location": location,
            "image": "ubuntu-24.04", "networks": [network],
        }))
        .await
        .map_err(|e| anyhow::anyhow!("creating server {name}: {e}"))?;
    let v = client
        .get_server(id)
        .await
        .map_err(|e| anyhow::anyhow!("reading server {name}: {e}"))?;
    let s: &Value = v.get("server").unwrap_or(&v);
    let private_ip = s["private_net"][0]["ip"]
        .as_str()
        .context("the server has no private IP")?
        .to_string();
    Ok(Server {
        id,
        name,
        private_ip,
        pod_cidr: format!("10.244.{i}.0/24"),
        labels: Vec::new(),
    })
}

/// The server's Node as its kubelet registers it with `--cloud-provider=external --node-ip=<private
/// IP>` (the uninitialized taint, the provided-node-ip annotation), with the podCIDR
/// kube-controller-manager's IPAM assigns.
pub fn kubelet(server: &Server) -> KubeletNode {
    KubeletNode {
        node_ip: Some(server.private_ip.clone()),
        labels: server.labels.clone(),
        pod_cidr: Some(server.pod_cidr.clone()),
        ..KubeletNode::new(&server.name)
    }
}

/// Registers the server's Node ([`kubelet`]), Ready.
pub async fn register_node(client: &Client, server: &Server) -> anyhow::Result<()> {
    kubelet(server)
        .register(client)
        .await
        .with_context(|| format!("registering node {}", server.name))
}

/// Writes the node's Ready condition, as kubelet's heartbeat (or its absence) would.
pub async fn set_ready(client: &Client, name: &str, ready: bool) -> anyhow::Result<()> {
    testenv::set_node_ready(client, name, ready)
        .await
        .with_context(|| format!("setting Ready={ready} on {name}"))
}

/// LoadBalancer Service `svc-<i>` with one TCP port, its load balancer targeting only the Nodes
/// labelled `label=pool` (HCCM's `node-selector` annotation), so an lb11's 25 targets suffice.
pub fn pool_service(i: usize, label: &str, pool: &str) -> Service {
    let mut svc = Service::default();
    svc.metadata.name = Some(format!("svc-{i}"));
    svc.metadata.annotations =
        Some([(NODE_SELECTOR.to_string(), format!("{label}={pool}"))].into());
    svc.spec = Some(ServiceSpec {
        type_: Some("LoadBalancer".into()),
        ports: Some(vec![ServicePort {
            name: Some("http".into()),
            port: 80,
            protocol: Some("TCP".into()),
            ..Default::default()
        }]),
        selector: Some([("app".to_string(), format!("app-{i}"))].into()),
        ..Default::default()
    });
    svc
}
