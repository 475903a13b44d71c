//! The demo's world: cloud-sim servers in a private network, and their Nodes registered as kubelets
//! with `--cloud-provider=external` register them.

use anyhow::Context as _;
use k8s_openapi::api::core::v1::{Node, NodeSpec, Taint};
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::{Value, json};

pub const NETWORK: &str = "k8s";
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
    sim.world()
        .create_network(NETWORK, "10.0.0.0/8", "10.0.0.0/16")
        .await
        .map_err(|e| anyhow::anyhow!("creating the network: {e}"))
}

/// Creates server `demo-<i>` attached to `network`; odd ones in fsn1, even ones in nbg1.
pub async fn server(sim: &cloud_sim::Sim, network: u64, i: usize) -> anyhow::Result<Server> {
    let world = sim.world();
    let name = format!("demo-{i}");
    let (location, server_type) = if i % 2 == 1 {
        ("fsn1", "cx22")
    } else {
        ("nbg1", "cx32")
    };
    let id = world
        .create_server_with(json!({
            "name": name, "server_type": server_type, "location": location,
            "image": "ubuntu-24.04", "networks": [network],
        }))
        .await
        .map_err(|e| anyhow::anyhow!("creating server {name}: {e}"))?;
    let v = world
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

/// Registers the server's Node as kubelet does with `--cloud-provider=external --node-ip=<private
/// IP>`: the uninitialized taint, the provided-node-ip annotation, a podCIDR (as the
/// kube-controller-manager's IPAM would assign) and a Ready condition.
pub async fn register_node(client: &Client, server: &Server) -> anyhow::Result<()> {
    let nodes: Api<Node> = Api::all(client.clone());
    let mut node = Node::default();
    node.metadata.name = Some(server.name.clone());
    node.metadata.labels = Some(server.labels.iter().cloned().collect());
    node.metadata.annotations = Some(
        [(
            "alpha.kubernetes.io/provided-node-ip".to_string(),
            server.private_ip.clone(),
        )]
        .into(),
    );
    node.spec = Some(NodeSpec {
        taints: Some(vec![Taint {
            key: UNINITIALIZED.into(),
            value: Some("true".into()),
            effect: "NoSchedule".into(),
            ..Default::default()
        }]),
        pod_cidr: Some(server.pod_cidr.clone()),
        pod_cidrs: Some(vec![server.pod_cidr.clone()]),
        ..Default::default()
    });
    nodes
        .create(&PostParams::default(), &node)
        .await
        .with_context(|| format!("registering node {}", server.name))?;
    set_ready(client, &server.name, true).await?;
    clear_not_ready_taint(client, &server.name).await
}

/// The apiserver taints a new Node `node.kubernetes.io/not-ready` until kube-controller-manager
/// sees it Ready; no kube-controller-manager runs here, so the demo does its part. The patch
/// carries the resourceVersion it was computed from, so it never undoes a controller's change.
async fn clear_not_ready_taint(client: &Client, name: &str) -> anyhow::Result<()> {
    const NOT_READY: &str = "node.kubernetes.io/not-ready";
    let nodes: Api<Node> = Api::all(client.clone());
    for _ in 0..10 {
        let node = nodes.get(name).await?;
        let taints = node.spec.and_then(|s| s.taints).unwrap_or_default();
        if !taints.iter().any(|t| t.key == NOT_READY) {
            return Ok(());
        }
        let kept: Vec<&Taint> = taints.iter().filter(|t| t.key != NOT_READY).collect();
        let patch = json!({
            "metadata": {"resourceVersion": node.metadata.resource_version},
            "spec": {"taints": kept},
        });
        match nodes
            .patch(name, &PatchParams::default(), &Patch::Merge(patch))
            .await
        {
            Ok(_) => return Ok(()),
            Err(kube::Error::Api(e)) if e.code == 409 => continue,
            Err(e) => return Err(e.into()),
        }
    }
    anyhow::bail!("could not clear the not-ready taint of {name}")
}

/// Writes the node's Ready condition, as kubelet's heartbeat (or its absence) would.
pub async fn set_ready(client: &Client, name: &str, ready: bool) -> anyhow::Result<()> {
    testenv::set_node_ready(client, name, ready)
        .await
        .with_context(|| format!("setting Ready={ready} on {name}"))
}
