//! The story the demo plays, one step per controller behaviour, each waiting (with a deadline) for
//! what a person would check with kubectl.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, Node, Service, ServicePort, ServiceSpec};
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::{Api, Client, ResourceExt};
use serde_json::Value;

use cloud_client::hcloud::load_balancer::target_health_json;
use cloud_sim::stand_in::NodeStandIn;

use super::machines::{self, Server, UNINITIALIZED};
use super::progress::Progress;

const SHUTDOWN: &str = "node.cloudprovider.kubernetes.io/shutdown";
const DEADLINE: Duration = Duration::from_secs(60);
const NAMESPACE: &str = "demo";
const SERVICE: &str = "web";
/// A Service with a typo in an annotation: refused by the controller, and it says so.
const BAD_SERVICE: &str = "typo";
/// service-controller's condition on the Services it serves.
const READY_CONDITION: &str = "cloud-controllers.github.io/LoadBalancerReady";

/// Polls `check` every 200 ms until it yields a value, or fails after [`DEADLINE`].
pub(super) async fn until<T>(
    mut check: impl AsyncFnMut() -> anyhow::Result<Option<T>>,
) -> anyhow::Result<T> {
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        if let Some(v) = check().await? {
            return Ok(v);
        }
        anyhow::ensure!(
            tokio::time::Instant::now() < deadline,
            "not done after {DEADLINE:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// What the story leaves for the summary.
#[derive(Debug, Default)]
pub struct Outcome {
    /// The Service's ingress IPs while it existed.
    pub ingress: Vec<String>,
    /// Each Service's ready condition once the bad one was refused: name, ingress, status,
    /// reason, message.
    pub conditions: Vec<[String; 5]>,
    /// A request through demo/web's load balancer: where it went and what came back, then each
    /// target's health as the API reports it.
    pub traffic: Vec<String>,
    /// Two Services on one shared load balancer: its ports, owners and their ingress.
    pub shared: Vec<String>,
}

/// The demo world's handles.
pub struct Story<'a> {
    pub admin: Client,
    pub sim: &'a cloud_sim::Sim,
    pub network: u64,
    pub servers: Vec<Server>,
    pub progress: &'a Progress,
    /// What each server's node answers on demo/web's NodePorts (cloud-sim's load balancers carry
    /// traffic to them); a deleted server's goes with it.
    pub stand_ins: Vec<NodeStandIn>,
}

impl Story<'_> {
    fn nodes(&self) -> Api<Node> {
        Api::all(self.admin.clone())
    }

    fn services(&self) -> Api<Service> {
        Api::namespaced(self.admin.clone(), NAMESPACE)
    }

    async fn node(&self, name: &str) -> anyhow::Result<Option<Node>> {
        Ok(self.nodes().get_opt(name).await?)
    }

    async fn load_balancers(&self) -> anyhow::Result<Vec<Value>> {
        self.sim
            .client()
            .list_load_balancers()
            .await
            .map_err(|e| anyhow::anyhow!("listing load balancers: {e}"))
    }

    /// `(destination, gateway)` of the network's routes.
    pub async fn routes(&self) -> anyhow::Result<Vec<(String, String)>> {
        let net = self
            .sim
            .client()
            .get_network(self.network)
            .await
            .map_err(|e| anyhow::anyhow!("reading the network: {e}"))?;
        let mut routes: Vec<(String, String)> = net["routes"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|r| {
                (
                    r["destination"].as_str().unwrap_or_default().to_string(),
                    r["gateway"].as_str().unwrap_or_default().to_string(),
                )
            })
            .collect();
        routes.sort();
        Ok(routes)
    }

    /// Plays every step.
    pub async fn play(&mut self) -> anyhow::Result<Outcome> {
        let mut outcome = Outcome::default();
        let progress = self.progress;
        let names: Vec<String> = self.servers.iter().map(|s| s.name.clone()).collect();
        progress
            .step(
                &format!(
                    "{} nodes initialized (providerID, zone, addresses; taint removed)",
                    names.len()
                ),
                self.initialized(&names),
            )
            .await?;
        outcome.ingress = progress
            .step(
                "LoadBalancer Service demo/web gets an ingress IP",
                self.service_gets_ingress(),
            )
            .await?;
        outcome.traffic = progress
            .step(
                "a request through demo/web's load balancer reaches a node; every target healthy",
                self.traffic_flows(),
            )
            .await?;
        outcome.conditions = progress
            .step(
                "Service demo/typo with a bad annotation → no load balancer, its condition says why",
                self.bad_service_is_refused(),
            )
            .await?;
        outcome.shared = progress
            .step(
                "Services demo/shop and demo/shop-api share one load balancer; each leaves with its own port",
                self.services_share_a_load_balancer(),
            )
            .await?;
        progress
            .step(
                "a route per podCIDR, NetworkUnavailable=False on every node",
                self.routed(),
            )
            .await?;
        let off = self.servers[1].clone();
        progress
            .step(
                &format!("{}'s server powered off → shutdown taint", off.name),
                self.powered_off(&off),
            )
            .await?;
        let gone = self.servers.remove(2);
        progress
            .step(
                &format!(
                    "{}'s server deleted → its Node deleted, LB target and route gone",
                    gone.name
                ),
                self.server_deleted(&gone),
            )
            .await?;
        progress
            .step(
                "a new node joins → initialized, LB target and route follow",
                self.node_joins(),
            )
            .await?;
        progress
            .step(
                "a dedicated (Robot) server joins → initialized from Robot, an IP target of demo/web",
                self.dedicated_server_joins(),
            )
            .await?;
        progress
            .step(
                "Service deleted → load balancer gone, finalizer removed",
                self.service_deleted(),
            )
            .await?;
        Ok(outcome)
    }

    async fn initialized(&self, names: &[String]) -> anyhow::Result<()> {
        until(async || {
            for name in names {
                let Some(node) = self.node(name).await? else {
                    return Ok(None);
                };
                if has_taint(&node, UNINITIALIZED) || provider_id(&node).is_none() {
                    return Ok(None);
                }
            }
            Ok(Some(()))
        })
        .await
    }

    async fn service_gets_ingress(&self) -> anyhow::Result<Vec<String>> {
        let mut ns = Namespace::default();
        ns.metadata.name = Some(NAMESPACE.into());
        Api::<Namespace>::all(self.admin.clone())
            .create(&PostParams::default(), &ns)
            .await?;
        let mut svc = Service::default();
        svc.metadata.name = Some(SERVICE.into());
        svc.spec = Some(ServiceSpec {
            type_: Some("LoadBalancer".into()),
            selector: Some(BTreeMap::from([("app".into(), SERVICE.into())])),
            ports: Some(
                [("http", 80), ("https", 443)]
                    .map(|(name, port)| ServicePort {
                        name: Some(name.into()),
                        port,
                        ..Default::default()
                    })
                    .to_vec(),
            ),
            ..Default::default()
        });
        self.services().create(&PostParams::default(), &svc).await?;
        until(async || {
            let svc = self.services().get(SERVICE).await?;
            let ips = ingress(&svc);
            Ok((!ips.is_empty()).then_some(ips))
        })
        .await
    }

    /// Every node answers on demo/web's NodePorts (a stand-in at its server's address, see
    /// `cloud_sim::stand_in`); once the load balancer's health checks pass on every target, one
    /// request goes through its port 80.
    async fn traffic_flows(&mut self) -> anyhow::Result<Vec<String>> {
        let svc = self.services().get(SERVICE).await?;
        let node_ports: Vec<u16> = svc
            .spec
            .iter()
            .flat_map(|s| s.ports.iter().flatten())
            .filter_map(|p| p.node_port.and_then(|n| u16::try_from(n).ok()))
            .collect();
        let lb = until(async || {
            let lbs = self.load_balancers().await?;
            Ok(lbs.into_iter().find(|lb| !targets(lb).is_empty()))
        })
        .await?;
        let private = lb["targets"][0]["use_private_ip"] == true;
        for server in &self.servers {
            let v = self
                .sim
                .client()
                .get_server(server.id)
                .await
                .map_err(|e| anyhow::anyhow!("reading server {}: {e}", server.name))?;
            let ip = if private {
                server.private_ip.clone()
            } else {
                v.get("server").unwrap_or(&v)["public_net"]["ipv4"]["ip"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string()
            };
            let mut node = NodeStandIn::new(&server.name, self.sim.local_address(ip.parse()?));
            for port in &node_ports {
                node.serve_node_port(*port).await?;
            }
            self.stand_ins.push(node);
        }
        let id = lb["id"].as_u64().unwrap_or_default();
        let lb = until(async || {
            let lb = self
                .sim
                .client()
                .get_load_balancer(id)
                .await
                .map_err(|e| anyhow::anyhow!("reading the load balancer: {e}"))?;
            // Counted by the rule the controller reports target health with.
            let health = target_health_json(&lb)?;
            let all_healthy = health.healthy > 0 && health.healthy == health.total();
            Ok(all_healthy.then_some(lb))
        })
        .await?;
        let addr = until(async || Ok(self.sim.listener(id, 80))).await?;
        let (status, body) = cloud_sim::stand_in::get(addr, Duration::from_secs(5)).await?;
        let mut lines = vec![format!(
            "GET {} (port 80 of load balancer {}, listening at {addr}) → {status} from {}",
            ingress(&svc).first().cloned().unwrap_or_default(),
            lb["name"].as_str().unwrap_or_default(),
            body.lines().next().unwrap_or_default()
        )];
        for t in lb["targets"].as_array().into_iter().flatten() {
            let server = t["server"]["id"].as_u64().unwrap_or_default();
            let name = self
                .servers
                .iter()
                .find(|s| s.id == server)
                .map_or(server.to_string(), |s| s.name.clone());
            let health: Vec<String> = t["health_status"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|h| {
                    format!(
                        "{} {}",
                        h["listen_port"],
                        h["status"].as_str().unwrap_or("?")
                    )
                })
                .collect();
            lines.push(format!("target {name}: {}", health.join(", ")));
        }
        Ok(lines)
    }

    /// `uses-proxyprotocol: "yes"` (a boolean is expected): no load balancer for it, demo/web
    /// untouched, and its condition False with the controller's message. Returns both Services'
    /// conditions.
    async fn bad_service_is_refused(&self) -> anyhow::Result<Vec<[String; 5]>> {
        let mut svc = Service::default();
        svc.metadata.name = Some(BAD_SERVICE.into());
        svc.metadata.annotations = Some(BTreeMap::from([(
            "load-balancer.hetzner.cloud/uses-proxyprotocol".into(),
            "yes".into(),
        )]));
        svc.spec = Some(ServiceSpec {
            type_: Some("LoadBalancer".into()),
            selector: Some(BTreeMap::from([("app".into(), BAD_SERVICE.into())])),
            ports: Some(vec![ServicePort {
                name: Some("http".into()),
                port: 80,
                ..Default::default()
            }]),
            ..Default::default()
        });
        self.services().create(&PostParams::default(), &svc).await?;
        until(async || {
            let bad = self.services().get(BAD_SERVICE).await?;
            let refused = ready_condition(&bad).is_some_and(|[status, reason, _]| {
                status == "False" && reason == "InvalidLoadBalancerInput"
            });
            if !refused || self.load_balancers().await?.len() != 1 {
                return Ok(None);
            }
            let mut rows = Vec::new();
            for name in [SERVICE, BAD_SERVICE] {
                let svc = self.services().get(name).await?;
                let [status, reason, message] = ready_condition(&svc).unwrap_or_default();
                let ips = ingress(&svc);
                let ips = if ips.is_empty() {
                    "<pending>".into()
                } else {
                    ips.join(",")
                };
                rows.push([format!("{NAMESPACE}/{name}"), ips, status, reason, message]);
            }
            Ok(Some(rows))
        })
        .await
    }

    /// Two Services name one load balancer with `shared`: one load balancer with both ports and
    /// a label per Service, the same ingress for both; deleting the first removes only its port,
    /// the second deletes the load balancer.
    async fn services_share_a_load_balancer(&self) -> anyhow::Result<Vec<String>> {
        const LB: &str = "shop-lb";
        let shared = |name: &str, port: i32| {
            let mut svc = Service::default();
            svc.metadata.name = Some(name.into());
            svc.metadata.annotations = Some(BTreeMap::from([
                ("load-balancer.hetzner.cloud/name".into(), LB.into()),
                ("load-balancer.hetzner.cloud/shared".into(), "true".into()),
            ]));
            svc.spec = Some(ServiceSpec {
                type_: Some("LoadBalancer".into()),
                selector: Some(BTreeMap::from([("app".into(), name.into())])),
                ports: Some(vec![ServicePort {
                    name: Some("http".into()),
                    port,
                    ..Default::default()
                }]),
                ..Default::default()
            });
            svc
        };
        let pp = PostParams::default();
        self.services().create(&pp, &shared("shop", 80)).await?;
        self.services()
            .create(&pp, &shared("shop-api", 8080))
            .await?;
        let shop_lb = async || -> anyhow::Result<Option<Value>> {
            Ok(self
                .load_balancers()
                .await?
                .into_iter()
                .find(|lb| lb["name"] == LB))
        };
        let ports = |lb: &Value| -> Vec<u64> {
            let mut p: Vec<u64> = lb["services"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|s| s["listen_port"].as_u64())
                .collect();
            p.sort_unstable();
            p
        };
        let mut lines = until(async || {
            let Some(lb) = shop_lb().await? else {
                return Ok(None);
            };
            let mut lines = Vec::new();
            for name in ["shop", "shop-api"] {
                let ips = ingress(&self.services().get(name).await?);
                if ips.is_empty() {
                    return Ok(None);
                }
                lines.push(format!("{NAMESPACE}/{name}: ingress {}", ips.join(", ")));
            }
            if ports(&lb) != [80, 8080] || self.load_balancers().await?.len() != 2 {
                return Ok(None);
            }
            lines.insert(
                0,
                format!(
                    "load balancer {LB} ({}), ports {:?}, labels {}",
                    lb["id"],
                    ports(&lb),
                    lb["labels"]
                ),
            );
            Ok(Some(lines))
        })
        .await?;
        let dp = DeleteParams::default();
        self.services().delete("shop", &dp).await?;
        let left = until(async || {
            Ok(shop_lb()
                .await?
                .filter(|lb| ports(lb) == [8080])
                .map(|lb| format!("after deleting demo/shop: ports {:?}", ports(&lb))))
        })
        .await?;
        lines.push(left);
        self.services().delete("shop-api", &dp).await?;
        until(async || Ok(shop_lb().await?.is_none().then_some(()))).await?;
        lines.push("after deleting demo/shop-api: load balancer deleted".into());
        Ok(lines)
    }

    async fn routed(&self) -> anyhow::Result<()> {
        until(async || {
            let routes = self.routes().await?;
            for s in &self.servers {
                if !routes.contains(&(s.pod_cidr.clone(), s.private_ip.clone())) {
                    return Ok(None);
                }
                let Some(node) = self.node(&s.name).await? else {
                    return Ok(None);
                };
                if condition(&node, "NetworkUnavailable").as_deref() != Some("False") {
                    return Ok(None);
                }
            }
            Ok(Some(()))
        })
        .await
    }

    /// Whether a load balancer targets the server, and the gateway of its podCIDR's route.
    async fn serves(&self, server: &Server) -> anyhow::Result<(bool, Option<String>)> {
        let targeted = self
            .load_balancers()
            .await?
            .iter()
            .any(|lb| targets(lb).contains(&server.id));
        let gateway = self
            .routes()
            .await?
            .into_iter()
            .find(|(dest, _)| dest == &server.pod_cidr)
            .map(|(_, gw)| gw);
        Ok((targeted, gateway))
    }

    async fn powered_off(&self, server: &Server) -> anyhow::Result<()> {
        self.sim
            .client()
            .poweroff(server.id)
            .await
            .map_err(|e| anyhow::anyhow!("powering off: {e}"))?;
        // kubelet stops reporting: the node goes NotReady.
        machines::set_ready(&self.admin, &server.name, false).await?;
        until(async || {
            let node = self.node(&server.name).await?;
            Ok(node.filter(|n| has_taint(n, SHUTDOWN)).map(drop))
        })
        .await
    }

    async fn server_deleted(&mut self, server: &Server) -> anyhow::Result<()> {
        // The machine is gone, and what answered on it.
        self.stand_ins.retain(|s| s.name() != server.name);
        self.sim
            .client()
            .delete_server(server.id)
            .await
            .map_err(|e| anyhow::anyhow!("deleting the server: {e}"))?;
        machines::set_ready(&self.admin, &server.name, false).await?;
        until(async || {
            if self.node(&server.name).await?.is_some() {
                return Ok(None);
            }
            let (targeted, routed) = self.serves(server).await?;
            Ok((!targeted && routed.is_none()).then_some(()))
        })
        .await
    }

    async fn node_joins(&mut self) -> anyhow::Result<()> {
        let server = machines::server(self.sim, self.network, 7).await?;
        machines::register_node(&self.admin, &server).await?;
        self.servers.push(server.clone());
        self.initialized(std::slice::from_ref(&server.name)).await?;
        until(async || {
            let (targeted, routed) = self.serves(&server).await?;
            Ok((targeted && routed.as_ref() == Some(&server.private_ip)).then_some(()))
        })
        .await
    }

    /// A dedicated server's Node, registered by its kubelet with `--node-ip` on a vSwitch: the
    /// node-controller finds it in Robot by name, and the load balancer targets its public IP.
    async fn dedicated_server_joins(&self) -> anyhow::Result<()> {
        let name = "demo-dedicated-1";
        let client = self.sim.client();
        let number = client
            .create_robot_server(name, "AX41-NVMe", "FSN1-DC14")
            .await
            .map_err(|e| anyhow::anyhow!("creating the dedicated server: {e}"))?;
        let ip = self
            .sim
            .robot_servers()
            .iter()
            .map(|s| s.get("server").unwrap_or(s))
            .find(|s| s["server_number"] == number)
            .and_then(|s| s["server_ip"].as_str().map(str::to_string))
            .ok_or_else(|| anyhow::anyhow!("dedicated server {number} has no IPv4"))?;
        testenv::KubeletNode {
            node_ip: Some("10.1.0.10".into()),
            ..testenv::KubeletNode::new(name)
        }
        .register(&self.admin)
        .await?;
        machines::set_ready(&self.admin, name, true).await?;
        until(async || {
            let Some(node) = self.node(name).await? else {
                return Ok(None);
            };
            let robot_id = provider_id(&node).filter(|p| p.starts_with("hrobot://"));
            if has_taint(&node, UNINITIALIZED) || robot_id.is_none() {
                return Ok(None);
            }
            let targeted = self.load_balancers().await?.iter().any(|lb| {
                lb["targets"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|t| t["ip"]["ip"].as_str() == Some(ip.as_str()))
            });
            Ok(targeted.then_some(()))
        })
        .await
    }

    async fn service_deleted(&self) -> anyhow::Result<()> {
        self.services()
            .delete(SERVICE, &DeleteParams::default())
            .await?;
        until(async || {
            let gone = self.services().get_opt(SERVICE).await?.is_none();
            Ok((gone && self.load_balancers().await?.is_empty()).then_some(()))
        })
        .await
    }

    /// All Nodes, for the summary.
    pub async fn all_nodes(&self) -> anyhow::Result<Vec<Node>> {
        Ok(self.nodes().list(&ListParams::default()).await?.items)
    }
}

/// Whether the node has a taint with `key`.
pub fn has_taint(node: &Node, key: &str) -> bool {
    taints(node).iter().any(|t| t == key)
}

/// The node's taint keys.
pub fn taints(node: &Node) -> Vec<String> {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .map(|t| t.iter().map(|t| t.key.clone()).collect())
        .unwrap_or_default()
}

/// The node's providerID.
pub fn provider_id(node: &Node) -> Option<String> {
    node.spec.as_ref()?.provider_id.clone()
}

/// The status of the node's condition `kind`.
pub fn condition(node: &Node, kind: &str) -> Option<String> {
    node.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == kind)
        .map(|c| c.status.clone())
}

/// Status, reason and message of service-controller's ready condition.
fn ready_condition(svc: &Service) -> Option<[String; 3]> {
    let c = svc
        .status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == READY_CONDITION)?;
    Some([c.status.clone(), c.reason.clone(), c.message.clone()])
}

fn ingress(svc: &Service) -> Vec<String> {
    svc.status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref())
        .and_then(|l| l.ingress.as_ref())
        .map(|i| i.iter().filter_map(|i| i.ip.clone()).collect())
        .unwrap_or_default()
}

fn targets(lb: &Value) -> Vec<u64> {
    lb["targets"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["server"]["id"].as_u64())
        .collect()
}

/// A label of the node.
pub fn label(node: &Node, key: &str) -> String {
    node.labels().get(key).cloned().unwrap_or_default()
}
