//! The demo's world: cloud-sim servers in a private network, and their Nodes registered as kubelets
//! with `--cloud-provider=external` register them.

use anyhow::Context as _;
use cloud_sim::client::{SimClient, SimClientError};
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

/// The world's own calls count against the project's rate limit, as any client's: under chaos the
/// controllers may have spent all of it when a server joins. A call refused for it is made again
/// each second, 30 times at most, as the budget refills.
async fn when_allowed<T>(
    mut call: impl AsyncFnMut() -> Result<T, SimClientError>,
) -> Result<T, SimClientError> {
    let mut refused = 0;
    loop {
        match call().await {
            Err(e) if is_rate_limited(&e) && refused < 30 => {
                refused += 1;
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
            }
            r => return r,
        }
    }
}

fn is_rate_limited(e: &SimClientError) -> bool {
    e.code() == Some("rate_limit_exceeded")
}

/// The id of the server named `name`, if it exists.
async fn find_server(client: &SimClient, name: &str) -> Result<Option<u64>, SimClientError> {
    let servers = client.list_servers().await?;
    Ok(servers
        .iter()
        .find(|s| s["name"] == name)
        .and_then(|s| s["id"].as_u64()))
}

/// Creates the network (10.0.0.0/8, subnet 10.0.0.0/16 in eu-central).
pub async fn network(sim: &cloud_sim::Sim) -> anyhow::Result<u64> {
    sim.client()
        .create_network(NETWORK, "10.0.0.0/8", "10.0.0.0/16")
        .await
        .map_err(|e| anyhow::anyhow!("creating the network: {e}"))
}

/// Creates server `demo-<i>` attached to `network`; odd ones in fsn1, even ones in nbg1. Fault
/// rules leave its calls alone (a server joining mid-chaos must join), the rate limit does not
/// ([`when_allowed`]).
pub async fn server(sim: &cloud_sim::Sim, network: u64, i: usize) -> anyhow::Result<Server> {
    let client = sim.client().unfaulted();
    let name = format!("demo-{i}");
    let (location, server_type) = if i % 2 == 1 {
        ("fsn1", "cx22")
    } else {
        ("nbg1", "cx32")
    };
    let body = json!({
        "name": name, "server_type": server_type, "location": location,
        "image": "ubuntu-24.04", "networks": [network],
    });
    let id = when_allowed(
        async || match client.create_server_with(body.clone()).await {
            // Refused for the rate limit after the create was made (its action's poll), or made by
            // an earlier attempt: it is there.
            Err(e) if is_rate_limited(&e) || e.code() == Some("uniqueness_error") => {
                match find_server(&client, &name).await? {
                    Some(id) => Ok(id),
                    None => Err(e),
                }
            }
            r => r,
        },
    )
    .await
    .map_err(|e| anyhow::anyhow!("creating server {name}: {e}"))?;
    let v = when_allowed(async || client.get_server(id).await)
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
