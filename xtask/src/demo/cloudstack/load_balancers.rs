//! The CloudStack load-balancer steps: service-controller makes upstream's rules for a TCP and a
//! UDP Service, and cloud-sim's data plane carries them to stand-ins at the nodes' VMs, so the
//! demo shows the rules answer rather than only exist. The rules' network is the one most of the
//! nodes' VMs are in (zone-1's or zone-2's, two each here); VMs of the other zone are left out,
//! as CloudStack allows members of the rule's network only.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, Service, ServicePort, ServiceSpec};
use kube::Api;
use kube::api::PostParams;

use super::super::story::until;
use super::story::Story;
use cloud_sim::stand_in::{self, NodeStandIn};
use cloud_sim::stand_in_udp::{self, UdpStandIn};

const NAMESPACE: &str = "demo";
/// The Services: name, port, protocol.
pub const SERVICES: [(&str, i32, &str); 2] = [("web", 80, "TCP"), ("dns", 53, "UDP")];
/// How long one request or datagram may take before it is tried again.
const ATTEMPT: Duration = Duration::from_secs(1);

/// One rule as the summary shows it.
#[derive(Debug, Clone)]
pub struct RuleRow {
    pub service: String,
    pub name: String,
    pub protocol: String,
    /// `<public IP>:<public port>`.
    pub public: String,
    pub private_port: String,
    pub zone: String,
    pub members: Vec<String>,
}

/// What answers the rules' traffic: held until the demo ends.
#[derive(Debug, Default)]
pub struct StandIns {
    pub tcp: Vec<NodeStandIn>,
    pub udp: Vec<UdpStandIn>,
}

impl Story<'_> {
    fn services(&self) -> Api<Service> {
        Api::namespaced(self.admin.clone(), NAMESPACE)
    }

    /// Creates the Services and waits until each has its ingress IP and its rule has the VMs of
    /// the rule's zone among the nodes as members.
    pub async fn services_get_rules(&self) -> anyhow::Result<Vec<RuleRow>> {
        let mut ns = Namespace::default();
        ns.metadata.name = Some(NAMESPACE.into());
        Api::<Namespace>::all(self.admin.clone())
            .create(&PostParams::default(), &ns)
            .await?;
        for (name, port, protocol) in SERVICES {
            let mut svc = Service::default();
            svc.metadata.name = Some(name.into());
            svc.spec = Some(ServiceSpec {
                type_: Some("LoadBalancer".into()),
                selector: Some(BTreeMap::from([("app".into(), name.into())])),
                ports: Some(vec![ServicePort {
                    port,
                    protocol: Some(protocol.into()),
                    ..Default::default()
                }]),
                ..Default::default()
            });
            self.services().create(&PostParams::default(), &svc).await?;
        }
        until(async || {
            let rows = self.rule_rows().await?;
            let complete = rows.len() == SERVICES.len()
                && rows.iter().all(|r| {
                    let mut want: Vec<String> = self
                        .vms
                        .iter()
                        .filter(|v| v.zone == r.zone)
                        .map(|v| v.name.clone())
                        .collect();
                    want.sort();
                    !want.is_empty() && r.members == want
                });
            Ok(complete.then_some(rows))
        })
        .await
    }

    /// The Services' rules as the API shows them now, with their members' names.
    pub async fn rule_rows(&self) -> anyhow::Result<Vec<RuleRow>> {
        let cs = self.sim.cloudstack_client();
        let listed = cs
            .call("listLoadBalancerRules", &[("listall", "true")])
            .await
            .map_err(|e| anyhow::anyhow!("listing rules: {e}"))?;
        let rules = listed["loadbalancerrule"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let mut rows = Vec::new();
        for (name, _, _) in SERVICES {
            let Some(ip) = self.ingress(name).await? else {
                continue;
            };
            for r in rules.iter().filter(|r| r["publicip"] == ip.as_str()) {
                let s = |k: &str| r[k].as_str().unwrap_or_default().to_string();
                let instances = cs
                    .call("listLoadBalancerRuleInstances", &[("id", &s("id"))])
                    .await
                    .map_err(|e| anyhow::anyhow!("listing members: {e}"))?;
                let mut members: Vec<String> = instances["loadbalancerruleinstance"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|v| v["name"].as_str().map(str::to_string))
                    .collect();
                members.sort();
                rows.push(RuleRow {
                    service: format!("{NAMESPACE}/{name}"),
                    name: s("name"),
                    protocol: s("protocol"),
                    public: format!("{ip}:{}", s("publicport")),
                    private_port: s("privateport"),
                    zone: s("zonename"),
                    members,
                });
            }
        }
        Ok(rows)
    }

    async fn ingress(&self, name: &str) -> anyhow::Result<Option<String>> {
        let svc = self.services().get_opt(name).await?;
        Ok(svc
            .and_then(|s| s.status?.load_balancer?.ingress?.into_iter().next())
            .and_then(|i| i.ip))
    }

    /// Stand-ins at every node's VM on the rules' private ports (a NodePort answers on every
    /// node), then one request through the TCP rule and one datagram through the UDP rule; the
    /// lines say who answered.
    pub async fn traffic_through_rules(
        &self,
        rows: &[RuleRow],
    ) -> anyhow::Result<(Vec<String>, StandIns)> {
        let cs = self.sim.cloudstack_client();
        let mut stand_ins = StandIns::default();
        let mut lines = Vec::new();
        for row in rows {
            let port: u16 = row.private_port.parse()?;
            for vm in &self.vms {
                let local = self.sim.local_address(vm.ip.parse()?);
                if row.protocol == "udp" {
                    stand_ins
                        .udp
                        .push(UdpStandIn::bind(&vm.name, local, port).await?);
                } else {
                    let mut node = NodeStandIn::new(&vm.name, local);
                    node.serve_node_port(port).await?;
                    stand_ins.tcp.push(node);
                }
            }
            let id = rule_id(&cs, &row.name).await?;
            let listener = until(async || {
                cs.rule_listener(&id)
                    .await
                    .map_err(|e| anyhow::anyhow!("reading the rule's listener: {e}"))
            })
            .await?;
            let addr = listener.address;
            // The Service has its ingress once its rules and firewall rules are made; should a
            // firewall rule still be on its way, the next attempt gets through.
            let answer = if row.protocol == "udp" {
                let a =
                    until(async || Ok(stand_in_udp::ask(addr, None, b"demo", ATTEMPT).await.ok()))
                        .await?;
                format!(
                    "datagram to {} (rule {}, at {addr}) → answered by {}",
                    row.public,
                    row.name,
                    a.lines().next().unwrap_or_default()
                )
            } else {
                let (status, body) =
                    until(async || Ok(stand_in::get(addr, ATTEMPT).await.ok())).await?;
                format!(
                    "GET {} (rule {}, at {addr}) → {status} from {}",
                    row.public,
                    row.name,
                    body.lines().next().unwrap_or_default()
                )
            };
            lines.push(answer);
        }
        Ok((lines, stand_ins))
    }
}

/// The id of the rule called `name`.
async fn rule_id(cs: &cloud_sim::CloudStackClient, name: &str) -> anyhow::Result<String> {
    let listed = cs
        .call(
            "listLoadBalancerRules",
            &[("name", name), ("listall", "true")],
        )
        .await
        .map_err(|e| anyhow::anyhow!("finding rule {name}: {e}"))?;
    listed["loadbalancerrule"][0]["id"]
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| anyhow::anyhow!("no rule {name}"))
}

/// The summary's rows of `rows`: one line per rule.
pub fn summary_lines(rows: &[RuleRow]) -> Vec<String> {
    rows.iter()
        .map(|r| {
            format!(
                "  {:<9} {:<40} {:<5} {:<20} → :{:<6} {:<7} {}",
                r.service,
                r.name,
                r.protocol,
                r.public,
                r.private_port,
                r.zone,
                r.members.join(", ")
            )
        })
        .collect()
}
