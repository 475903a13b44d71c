//! The CloudStack chaos world: a real kube-apiserver + etcd, cloud-sim's CloudStack API with VMs
//! in the default isolated network and their Nodes registered as kubelets do (uninitialized,
//! Ready), and LoadBalancer Services with a TCP and a UDP port and `loadBalancerSourceRanges`.
//! The audit reads the cloud through a second root-admin account of its own: its calls are
//! neither faulted, nor throttled with the controllers' account, nor counted in their figures.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use cloud_sim::{CloudStackClient, CsVmSpec};
use k8s_openapi::api::core::v1::{Namespace, Node, Service, ServicePort, ServiceSpec};
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::{Api, Client, ResourceExt};
use serde_json::Value;
use testenv::KubeletNode;

/// The namespace of the world's Services.
pub const NAMESPACE: &str = "chaos-cloudstack";
/// The ranges every Service admits (firewall rules on its address).
pub const RANGES: [&str; 2] = ["198.51.100.0/24", "203.0.113.0/24"];
const PROVIDER_ID: &str = "external-cloudstack://";
const UNINITIALIZED: &str = "node.cloudprovider.kubernetes.io/uninitialized";
const SHUTDOWN: &str = "node.cloudprovider.kubernetes.io/shutdown";

pub struct CsWorld {
    pub plane: testenv::ControlPlane,
    pub admin: Client,
    pub sim: cloud_sim::Sim,
    /// The auditor's client (its own keys).
    audit: CloudStackClient,
    /// VM name → id, of every VM the world made and has not destroyed.
    pub vms: BTreeMap<String, String>,
    /// Names of the Nodes whose VMs were destroyed: the lifecycle controller must delete them.
    pub gone: BTreeSet<String>,
    next: usize,
}

impl CsWorld {
    /// `nodes` VMs and their Nodes; no Service yet.
    pub async fn build(nodes: usize, sim: cloud_sim::SimConfig) -> anyhow::Result<CsWorld> {
        let plane = testenv::ControlPlane::start()
            .await
            .context("starting the control plane")?;
        let admin = plane.client().await?;
        let sim = cloud_sim::Sim::start_with(sim).await;
        let (_, audit) = sim
            .cloudstack_client()
            .create_account("chaos-auditor", "admin")
            .await
            .map_err(|e| anyhow::anyhow!("creating the auditor's account: {e}"))?;
        let ns = Namespace {
            metadata: kube::api::ObjectMeta {
                name: Some(NAMESPACE.into()),
                ..Default::default()
            },
            ..Default::default()
        };
        Api::<Namespace>::all(admin.clone())
            .create(&PostParams::default(), &ns)
            .await
            .context("creating the Services' namespace")?;
        let mut world = CsWorld {
            plane,
            admin,
            sim,
            audit: audit.unfaulted(),
            vms: BTreeMap::new(),
            gone: BTreeSet::new(),
            next: 1,
        };
        world.add_nodes(nodes).await?;
        Ok(world)
    }

    /// `n` more VMs and their Nodes (uninitialized, Ready); their names.
    pub async fn add_nodes(&mut self, n: usize) -> anyhow::Result<Vec<String>> {
        let cs = self.sim.cloudstack_client();
        let mut names = Vec::new();
        for _ in 0..n {
            let name = format!("cs-node-{}", self.next);
            self.next += 1;
            let id = cs
                .create_vm(&CsVmSpec::named(&name))
                .await
                .map_err(|e| anyhow::anyhow!("creating VM {name}: {e}"))?;
            let ip = cs
                .vm(&id)
                .await
                .map_err(|e| anyhow::anyhow!("reading VM {name}: {e}"))?["ip"]
                .as_str()
                .map(str::to_owned);
            KubeletNode {
                node_ip: ip,
                ..KubeletNode::new(&name)
            }
            .register(&self.admin)
            .await
            .with_context(|| format!("registering node {name}"))?;
            self.vms.insert(name.clone(), id);
            names.push(name);
        }
        Ok(names)
    }

    /// Destroys the VM of Node `name` as its owner would, and its kubelet stops reporting.
    pub async fn destroy_vm(&mut self, name: &str) -> anyhow::Result<()> {
        let id = self.vms.remove(name).context("no such VM")?;
        self.sim
            .cloudstack_client()
            .destroy_vm(&id)
            .await
            .map_err(|e| anyhow::anyhow!("destroying VM {name}: {e}"))?;
        self.gone.insert(name.to_owned());
        self.set_ready(name, false).await
    }

    pub async fn set_ready(&self, name: &str, ready: bool) -> anyhow::Result<()> {
        testenv::set_node_ready(&self.admin, name, ready)
            .await
            .with_context(|| format!("setting Ready={ready} on {name}"))
    }

    pub fn services(&self) -> Api<Service> {
        Api::namespaced(self.admin.clone(), NAMESPACE)
    }

    /// Service `name`: TCP 80 and UDP 53, admitting [`RANGES`].
    pub async fn create_service(&self, name: &str) -> anyhow::Result<()> {
        let port = |n: &str, p: i32, proto: &str| ServicePort {
            name: Some(n.into()),
            port: p,
            protocol: Some(proto.into()),
            ..Default::default()
        };
        let mut s = Service::default();
        s.metadata.name = Some(name.into());
        s.spec = Some(ServiceSpec {
            type_: Some("LoadBalancer".into()),
            selector: Some([("app".to_string(), name.to_string())].into()),
            ports: Some(vec![port("http", 80, "TCP"), port("dns", 53, "UDP")]),
            load_balancer_source_ranges: Some(RANGES.iter().map(|r| r.to_string()).collect()),
            ..Default::default()
        });
        self.services()
            .create(&PostParams::default(), &s)
            .await
            .with_context(|| format!("creating Service {name}"))?;
        Ok(())
    }

    /// Deletes every Service (the finalizers keep them until their rules are gone).
    pub async fn delete_services(&self) -> anyhow::Result<()> {
        self.services()
            .delete_collection(&DeleteParams::default(), &ListParams::default())
            .await?;
        Ok(())
    }

    async fn list(
        &self,
        command: &str,
        params: &[(&str, &str)],
        key: &str,
    ) -> anyhow::Result<Vec<Value>> {
        let v = self
            .audit
            .call(command, params)
            .await
            .map_err(|e| anyhow::anyhow!("{command}: {e}"))?;
        Ok(v[key].as_array().cloned().unwrap_or_default())
    }

    /// What the cluster and the cloud look like now, against what they should.
    pub async fn audit(&self) -> anyhow::Result<CsAudit> {
        let nodes = Api::<Node>::all(self.admin.clone())
            .list(&ListParams::default())
            .await?
            .items;
        let services = self.services().list(&ListParams::default()).await?.items;
        let all = [("listall", "true")];
        let mut rules = Vec::new();
        for r in self
            .list("listLoadBalancerRules", &all, "loadbalancerrule")
            .await?
        {
            let id = r["id"].as_str().unwrap_or_default().to_owned();
            let members: BTreeSet<String> = self
                .list(
                    "listLoadBalancerRuleInstances",
                    &[("id", &id)],
                    "loadbalancerruleinstance",
                )
                .await?
                .iter()
                .filter_map(|v| v["id"].as_str().map(str::to_owned))
                .collect();
            rules.push(CsRule {
                name: r["name"].as_str().unwrap_or_default().to_owned(),
                ip_id: r["publicipid"].as_str().unwrap_or_default().to_owned(),
                members,
            });
        }
        let firewall: Vec<String> = self
            .list("listFirewallRules", &all, "firewallrule")
            .await?
            .iter()
            .filter(|f| {
                let mut c: Vec<&str> = f["cidrlist"]
                    .as_str()
                    .unwrap_or_default()
                    .split(',')
                    .collect();
                c.sort_unstable();
                c == RANGES
            })
            .filter_map(|f| f["ipaddressid"].as_str().map(str::to_owned))
            .collect();
        let held: Vec<String> = self
            .list(
                "listPublicIpAddresses",
                &[("issourcenat", "false"), ("listall", "true")],
                "publicipaddress",
            )
            .await?
            .iter()
            .filter(|ip| ip["isstaticnat"] != true)
            .filter_map(|ip| ip["id"].as_str().map(str::to_owned))
            .collect();
        Ok(CsAudit::of(
            &nodes, &services, &rules, &firewall, &held, self,
        ))
    }

    /// Polls [`CsWorld::audit`] until `done` says yes; the time it took, or the last audit.
    pub async fn wait_for(
        &self,
        timeout: Duration,
        done: impl Fn(&CsAudit) -> bool,
    ) -> anyhow::Result<Result<Duration, CsAudit>> {
        let started = Instant::now();
        let mut last = CsAudit::default();
        loop {
            match self.audit().await {
                Ok(a) if done(&a) => return Ok(Ok(started.elapsed())),
                Ok(a) => last = a,
                // The management server may be "unreachable" for the auditor too.
                Err(e) => last.problems = vec![format!("audit: {e:#}")],
            }
            if started.elapsed() > timeout {
                return Ok(Err(last));
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
}

/// A load-balancer rule, its address and members.
#[derive(Debug, Clone)]
pub struct CsRule {
    pub name: String,
    pub ip_id: String,
    pub members: BTreeSet<String>,
}

/// The state of the world measured against the ideal.
#[derive(Debug, Clone, Default)]
pub struct CsAudit {
    pub nodes: usize,
    pub initialized: usize,
    /// Nodes of destroyed VMs still there.
    pub undeleted: usize,
    pub services: usize,
    /// Services with an ingress, a rule per port with every eligible Node's VM as member, and
    /// a firewall rule with the ranges per port on that address.
    pub served: usize,
    /// Rule names more than one rule has.
    pub duplicates: usize,
    /// Rules, firewall rules and addresses no Service accounts for.
    pub leaks: usize,
    /// Nodes deleted whose VM exists.
    pub wrong_deletions: usize,
    pub problems: Vec<String>,
}

impl CsAudit {
    fn of(
        nodes: &[Node],
        services: &[Service],
        rules: &[CsRule],
        firewall: &[String],
        held: &[String],
        world: &CsWorld,
    ) -> CsAudit {
        let mut a = CsAudit {
            nodes: nodes.len(),
            services: services.len(),
            ..Default::default()
        };
        let present: BTreeSet<String> = nodes.iter().map(|n| n.name_any()).collect();
        for (name, _) in world
            .vms
            .iter()
            .filter(|(n, _)| !present.contains(n.as_str()))
        {
            a.wrong_deletions += 1;
            a.problems
                .push(format!("Node {name} deleted, its VM exists"));
        }
        let taints = |n: &Node| -> Vec<String> {
            n.spec
                .as_ref()
                .and_then(|s| s.taints.as_ref())
                .map(|t| t.iter().map(|t| t.key.clone()).collect())
                .unwrap_or_default()
        };
        let mut eligible = BTreeSet::new();
        for n in nodes {
            let pid = n.spec.as_ref().and_then(|s| s.provider_id.as_deref());
            let t = taints(n);
            if world.gone.contains(&n.name_any()) {
                a.undeleted += 1;
                a.problems
                    .push(format!("Node {} of a destroyed VM kept", n.name_any()));
                continue;
            }
            match pid.and_then(|p| p.strip_prefix(PROVIDER_ID)) {
                Some(id) if !t.iter().any(|k| k == UNINITIALIZED) => {
                    a.initialized += 1;
                    if !t.iter().any(|k| k == SHUTDOWN) {
                        eligible.insert(id.to_owned());
                    }
                }
                _ => a
                    .problems
                    .push(format!("Node {} not initialized", n.name_any())),
            }
        }
        let mut by_name: BTreeMap<&str, Vec<&CsRule>> = BTreeMap::new();
        for r in rules {
            by_name.entry(&r.name).or_default().push(r);
        }
        a.duplicates = by_name.values().filter(|v| v.len() > 1).count();
        let mut accounted_rules = BTreeSet::new();
        let mut accounted_ips = BTreeSet::new();
        for s in services {
            let lb = cloud_client::default_load_balancer_name(&s.uid().unwrap_or_default());
            let ports = s
                .spec
                .as_ref()
                .and_then(|s| s.ports.clone())
                .unwrap_or_default();
            let mut ok = s
                .status
                .as_ref()
                .and_then(|s| s.load_balancer.as_ref())
                .and_then(|l| l.ingress.as_ref())
                .is_some_and(|i| !i.is_empty());
            for p in &ports {
                let proto = p.protocol.as_deref().unwrap_or("TCP").to_ascii_lowercase();
                let name = format!("{lb}-{proto}-{}", p.port);
                accounted_rules.insert(name.clone());
                match by_name.get(name.as_str()).and_then(|v| v.first()) {
                    Some(r) => {
                        accounted_ips.insert(r.ip_id.clone());
                        ok &= r.members == eligible;
                        ok &= firewall.iter().filter(|f| **f == r.ip_id).count() == ports.len();
                    }
                    None => ok = false,
                }
            }
            if ok {
                a.served += 1;
            } else {
                a.problems
                    .push(format!("Service {} not served", s.name_any()));
            }
        }
        let leaked_rules = rules
            .iter()
            .filter(|r| !accounted_rules.contains(&r.name))
            .count();
        let leaked_fw = firewall
            .iter()
            .filter(|f| !accounted_ips.contains(*f))
            .count();
        let leaked_ips = held
            .iter()
            .filter(|ip| !accounted_ips.contains(*ip))
            .count();
        a.leaks = leaked_rules + leaked_fw + leaked_ips;
        if a.leaks > 0 {
            a.problems.push(format!(
                "left: {leaked_rules} rules, {leaked_fw} firewall rules, {leaked_ips} addresses"
            ));
        }
        a
    }

    /// Every Node initialized (the destroyed VMs' deleted), every Service served, nothing left
    /// over, nothing deleted wrongly.
    pub fn converged(&self) -> bool {
        self.undeleted == 0
            && self.initialized == self.nodes
            && self.served == self.services
            && self.duplicates == 0
            && self.leaks == 0
    }

    /// Every Service and everything it held gone.
    pub fn cleaned(&self) -> bool {
        self.services == 0 && self.leaks == 0
    }

    pub fn summary(&self) -> String {
        format!(
            "{}/{} Nodes initialized, {} of destroyed VMs kept, {}/{} Services served, {} duplicates, \
             {} leaks, {} wrong deletions; {}",
            self.initialized,
            self.nodes,
            self.undeleted,
            self.served,
            self.services,
            self.duplicates,
            self.leaks,
            self.wrong_deletions,
            self.problems
                .iter()
                .take(5)
                .cloned()
                .collect::<Vec<_>>()
                .join("; ")
        )
    }
}
