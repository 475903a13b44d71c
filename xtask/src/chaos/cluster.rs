//! The world a chaos scenario runs in, and its audit.
//!
//! Servers in one private network with their Nodes registered as kubelets do (the demo's
//! `register_node`), spread over pools of at most [`POOL`] nodes, and LoadBalancer Services that
//! each target one pool through HCCM's `node-selector` annotation (an lb11 takes 25 targets). The
//! audit reads the cloud through cloud-sim's inventory (uncounted, untouched by fault rules) and
//! the cluster through the admin client, so it sees the truth while the API misbehaves.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Namespace, Node, Service};
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::{Api, Client, ResourceExt};

use crate::demo::machines::{self as machines, Server};

/// Nodes per pool, so every load balancer's target set fits an lb11 (25 targets).
pub const POOL: usize = 20;
pub const NAMESPACE: &str = "chaos";
const POOL_LABEL: &str = "chaos.cloud-controllers.dev/pool";
/// The ownership label HCCM and we put on a Service's load balancer.
const SERVICE_UID: &str = "hcloud-ccm/service-uid";
/// A shared load balancer's label per Service on it (`<prefix><uid>=<ports>`).
const MEMBER_PREFIX: &str = "shared.cloud-controllers/";
const UNINITIALIZED: &str = machines::UNINITIALIZED;
/// Servers and Nodes created at once while building.
const PARALLEL: usize = 16;

/// How big a world is.
#[derive(Debug, Clone, Copy)]
pub struct Size {
    pub nodes: usize,
    pub services: usize,
}

impl std::fmt::Display for Size {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} nodes, {} Services", self.nodes, self.services)
    }
}

/// A control plane, a cloud-sim and what the scenario created in them.
pub struct ChaosCluster {
    pub plane: testenv::ControlPlane,
    pub admin: Client,
    pub sim: cloud_sim::Sim,
    pub network: u64,
    /// Every server ever created, by Node name; [`ChaosCluster::remove_server`] forgets one.
    pub servers: BTreeMap<String, Server>,
    /// Index of the next server (`demo-<i>`, pod CIDR `10.244.<i>.0/24`).
    next: usize,
    pools: usize,
    /// The Services of a pool share one load balancer (see [`ChaosCluster::build_shared`]).
    shared: bool,
    /// A load balancer made outside the cluster, which a Service of another namespace names: no
    /// controller may ever write to it (see [`ChaosCluster::not_ours`]).
    pub not_ours: NotOurs,
}

/// The load balancer no controller may write to, as it was made.
#[derive(Debug, Clone)]
pub struct NotOurs {
    pub id: u64,
    labels: BTreeMap<String, String>,
    targets: Vec<u64>,
    ports: Vec<u16>,
}

/// The load balancer made outside the cluster, and the Service that names it.
const NOT_OURS_LB: &str = "made-outside-the-cluster";
const TENANT_NAMESPACE: &str = "chaos-tenant";

impl ChaosCluster {
    /// Starts the control plane and cloud-sim, then creates the network, `size.nodes` servers
    /// with their Nodes (Ready, uninitialized) and `size.services` Services. The sim's counters
    /// are reset afterwards, so they count what the controllers do.
    pub async fn build(size: Size, sim: cloud_sim::SimConfig) -> anyhow::Result<ChaosCluster> {
        Self::build_as(size, sim, false).await
    }

    /// [`ChaosCluster::build`] with the Services of each pool on one shared lb31 named after the
    /// pool, each with a listen port of its own.
    pub async fn build_shared(
        size: Size,
        sim: cloud_sim::SimConfig,
    ) -> anyhow::Result<ChaosCluster> {
        Self::build_as(size, sim, true).await
    }

    async fn build_as(
        size: Size,
        sim: cloud_sim::SimConfig,
        shared: bool,
    ) -> anyhow::Result<ChaosCluster> {
        anyhow::ensure!(
            size.nodes < 250,
            "at most 249 nodes: pod CIDRs are 10.244.<i>.0/24"
        );
        let plane = testenv::ControlPlane::start()
            .await
            .context("starting the control plane")?;
        let admin = plane.client().await?;
        let sim = cloud_sim::Sim::start_with(sim).await;
        let network = machines::network(&sim).await?;
        let not_ours = not_ours(&sim, &admin).await?;
        let mut world = ChaosCluster {
            plane,
            admin,
            sim,
            network,
            servers: BTreeMap::new(),
            next: 1,
            pools: size.nodes.div_ceil(POOL).max(1),
            shared,
            not_ours,
        };
        world.add_nodes(size.nodes).await?;
        create_namespace(&world.admin, NAMESPACE).await?;
        futures::stream::iter(0..size.services)
            .map(|i| world.create_service(i))
            .buffer_unordered(PARALLEL)
            .try_collect::<Vec<()>>()
            .await?;
        world.sim.reset_counters();
        Ok(world)
    }

    /// Creates `n` more servers and registers their Nodes.
    pub async fn add_nodes(&mut self, n: usize) -> anyhow::Result<Vec<String>> {
        let created = self.add_servers(n).await?;
        self.register_nodes(created).await
    }

    /// Creates `n` more servers, in their pools; their Nodes are not registered yet.
    pub async fn add_servers(&mut self, n: usize) -> anyhow::Result<Vec<Server>> {
        let first = self.next;
        self.next += n;
        let (sim, network, pools) = (&self.sim, self.network, self.pools);
        futures::stream::iter(first..first + n)
            .map(|i| async move {
                let mut server = machines::server(sim, network, i).await?;
                server
                    .labels
                    .push((POOL_LABEL.into(), format!("p{}", i % pools)));
                anyhow::Ok(server)
            })
            .buffer_unordered(PARALLEL)
            .try_collect()
            .await
    }

    /// Registers the Nodes of `servers` (made by [`add_servers`](Self::add_servers)).
    pub async fn register_nodes(&mut self, servers: Vec<Server>) -> anyhow::Result<Vec<String>> {
        let admin = &self.admin;
        futures::stream::iter(&servers)
            .map(|server| machines::register_node(admin, server))
            .buffer_unordered(PARALLEL)
            .try_collect::<Vec<()>>()
            .await?;
        let names = servers.iter().map(|s| s.name.clone()).collect();
        for s in servers {
            self.servers.insert(s.name.clone(), s);
        }
        Ok(names)
    }

    /// Deletes a server as its owner would (untouched by fault rules); its Node stays until the
    /// lifecycle controller sees it NotReady without a server (the caller stops its "kubelet").
    pub async fn remove_server(&mut self, name: &str) -> anyhow::Result<()> {
        let server = self
            .servers
            .remove(name)
            .with_context(|| format!("no server {name}"))?;
        self.sim
            .client()
            .unfaulted()
            .delete_server(server.id)
            .await
            .map_err(|e| anyhow::anyhow!("deleting server {name}: {e}"))
    }

    /// Creates [`ChaosCluster::service`] `i`.
    pub async fn create_service(&self, i: usize) -> anyhow::Result<()> {
        self.services()
            .create(&PostParams::default(), &self.service(i))
            .await
            .with_context(|| format!("creating Service svc-{i}"))?;
        Ok(())
    }

    /// Service `svc-<i>`: one TCP port, targeting pool `i % pools`; shared, port `8000 + i` on
    /// the pool's load balancer.
    pub fn service(&self, i: usize) -> Service {
        let pool = format!("p{}", i % self.pools);
        let mut svc = machines::pool_service(i, POOL_LABEL, &pool);
        if self.shared {
            let ann = svc.metadata.annotations.get_or_insert_default();
            for (k, v) in [
                ("name", format!("shared-{pool}")),
                ("shared", "true".to_string()),
                ("type", "lb31".to_string()),
            ] {
                ann.insert(format!("load-balancer.hetzner.cloud/{k}"), v);
            }
            if let Some(p) = svc.spec.as_mut().and_then(|s| s.ports.as_mut()) {
                p[0].port = 8000 + i as i32;
            }
        }
        svc
    }

    pub fn services(&self) -> Api<Service> {
        Api::namespaced(self.admin.clone(), NAMESPACE)
    }

    /// Whether the load balancer made outside the cluster is as it was made: `None`, or what
    /// changed.
    pub fn not_ours_changed(&self) -> Option<String> {
        let inventory = self.sim.inventory();
        let Some(lb) = inventory
            .load_balancers
            .iter()
            .find(|lb| lb.id == self.not_ours.id)
        else {
            return Some(format!("load balancer {NOT_OURS_LB} is gone"));
        };
        let was = &self.not_ours;
        (lb.labels != was.labels || lb.target_servers != was.targets || lb.ports != was.ports)
            .then(|| {
                format!(
                    "load balancer {NOT_OURS_LB} was written: labels {:?}, targets {:?}, ports {:?}",
                    lb.labels, lb.target_servers, lb.ports
                )
            })
    }

    pub fn nodes(&self) -> Api<Node> {
        Api::all(self.admin.clone())
    }

    /// Deletes every Service (the controllers' finalizers keep them until their load balancers
    /// are gone).
    pub async fn delete_services(&self) -> anyhow::Result<()> {
        self.services()
            .delete_collection(&DeleteParams::default(), &ListParams::default())
            .await?;
        Ok(())
    }

    /// Every live Node's kubelet sends its periodic status report (`n`-th of the run).
    pub async fn report_status(&self, n: u64) -> anyhow::Result<()> {
        futures::stream::iter(self.servers.values())
            .map(|s| async move {
                machines::kubelet(s)
                    .report_status(&self.admin, true, n)
                    .await
            })
            .buffer_unordered(PARALLEL)
            .try_collect::<Vec<()>>()
            .await?;
        Ok(())
    }

    /// Sets the Ready condition of `names`, as their kubelets' heartbeats (or silence) would.
    pub async fn set_ready(&self, names: &[String], ready: bool) -> anyhow::Result<()> {
        futures::stream::iter(names)
            .map(|n| machines::set_ready(&self.admin, n, ready))
            .buffer_unordered(PARALLEL)
            .try_collect::<Vec<()>>()
            .await?;
        Ok(())
    }

    /// What the cluster and the cloud look like now, against what they should.
    pub async fn audit(&self) -> anyhow::Result<Audit> {
        let nodes = self.nodes().list(&ListParams::default()).await?.items;
        let services = self.services().list(&ListParams::default()).await?.items;
        let inventory = self.sim.inventory();
        Ok(Audit::of(
            &nodes,
            &services,
            &inventory,
            &self.servers,
            self.not_ours.id,
        ))
    }

    /// Polls [`ChaosCluster::audit`] until `done` says yes; the time it took, or the last audit.
    pub async fn wait_for(
        &self,
        timeout: Duration,
        done: impl Fn(&Audit) -> bool,
    ) -> anyhow::Result<Result<Duration, Audit>> {
        let started = Instant::now();
        loop {
            let audit = self.audit().await;
            match audit {
                Ok(a) if done(&a) => return Ok(Ok(started.elapsed())),
                Ok(a) if started.elapsed() > timeout => return Ok(Err(a)),
                Err(e) if started.elapsed() > timeout => return Err(e),
                // The apiserver may be restarting: keep polling until the deadline.
                _ => tokio::time::sleep(Duration::from_millis(500)).await,
            }
        }
    }
}

/// The state of the world measured against the ideal. Counts, so a report can show them.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Audit {
    pub nodes: usize,
    /// Nodes with a providerID and without the uninitialized taint.
    pub initialized: usize,
    /// Nodes saying `NetworkUnavailable=False`.
    pub network_ready: usize,
    /// Nodes with exactly one route, to their private IP.
    pub routed: usize,
    pub services: usize,
    /// Services with an ingress IP whose load balancer targets exactly their pool.
    pub served: usize,
    /// Load balancers beyond the first of a Service, and routes beyond the first of a podCIDR.
    pub duplicates: usize,
    /// Load balancers whose Service is gone (or was never ours), and routes for no Node.
    pub leaks: usize,
    /// Nodes missing whose server still exists.
    pub wrong_deletions: usize,
    /// Listen ports of Services missing from the load balancer that serves them.
    pub ports_lost: usize,
    /// Up to five examples of what is off, for the report.
    pub problems: Vec<String>,
}

impl Audit {
    fn of(
        nodes: &[Node],
        services: &[Service],
        inventory: &cloud_sim::Inventory,
        servers: &BTreeMap<String, Server>,
        not_ours: u64,
    ) -> Audit {
        let mut a = Audit {
            nodes: nodes.len(),
            services: services.len(),
            ..Audit::default()
        };
        let problem = |a: &mut Audit, p: String| {
            if a.problems.len() < 5 {
                a.problems.push(p);
            }
        };
        let existing: BTreeSet<u64> = inventory.servers.iter().map(|s| s.id).collect();
        let node_names: BTreeSet<String> = nodes.iter().map(|n| n.name_any()).collect();
        for (name, server) in servers {
            if existing.contains(&server.id) && !node_names.contains(name) {
                a.wrong_deletions += 1;
                problem(&mut a, format!("Node {name} deleted, its server exists"));
            }
        }

        let mut routes: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for r in &inventory.routes {
            routes
                .entry(r.destination.as_str())
                .or_default()
                .push(r.gateway.as_str());
        }
        let mut wanted_routes = BTreeSet::new();
        for n in nodes {
            let name = n.name_any();
            let initialized = n.spec.as_ref().is_some_and(|s| {
                s.provider_id.is_some()
                    && !s.taints.iter().flatten().any(|t| t.key == UNINITIALIZED)
            });
            a.initialized += usize::from(initialized);
            if crate::demo::story::condition(n, "NetworkUnavailable").as_deref() == Some("False") {
                a.network_ready += 1;
            }
            if let Some(server) = servers.get(&name) {
                wanted_routes.insert(server.pod_cidr.as_str());
                match routes.get(server.pod_cidr.as_str()) {
                    Some(gws) if gws == &[server.private_ip.as_str()] => a.routed += 1,
                    Some(gws) => {
                        problem(&mut a, format!("{}: routes via {gws:?}", server.pod_cidr))
                    }
                    None => {}
                }
            }
        }
        for (dest, gws) in &routes {
            a.duplicates += gws.len().saturating_sub(1);
            if gws.len() > 1 {
                problem(&mut a, format!("route {dest} {} times", gws.len()));
            }
            if !wanted_routes.contains(dest) {
                a.leaks += gws.len();
                problem(&mut a, format!("route {dest} for no Node"));
            }
        }

        // A load balancer is its Service's, or each of its members' when shared.
        let mut lbs: BTreeMap<&str, Vec<&cloud_sim::LoadBalancerItem>> = BTreeMap::new();
        for lb in inventory
            .load_balancers
            .iter()
            .filter(|lb| lb.id != not_ours)
        {
            let members: Vec<&str> = lb
                .labels
                .keys()
                .filter_map(|k| k.strip_prefix(MEMBER_PREFIX))
                .collect();
            if members.is_empty() {
                let owner = lb.labels.get(SERVICE_UID).map_or("", String::as_str);
                lbs.entry(owner).or_default().push(lb);
            }
            for m in members {
                lbs.entry(m).or_default().push(lb);
            }
        }
        let mut owners = BTreeSet::new();
        for svc in services {
            let uid = svc.metadata.uid.clone().unwrap_or_default();
            owners.insert(uid.clone());
            let mine = lbs.get(uid.as_str()).map(Vec::as_slice).unwrap_or(&[]);
            if mine.len() > 1 {
                a.duplicates += mine.len() - 1;
                problem(
                    &mut a,
                    format!("{} has {} load balancers", svc.name_any(), mine.len()),
                );
            }
            let has_ingress = svc
                .status
                .as_ref()
                .and_then(|s| s.load_balancer.as_ref())
                .and_then(|lb| lb.ingress.as_ref())
                .is_some_and(|i| !i.is_empty());
            let wanted = pool_servers(svc, nodes, servers);
            let ports: Vec<u16> = svc
                .spec
                .iter()
                .flat_map(|s| s.ports.iter().flatten())
                .filter_map(|p| u16::try_from(p.port).ok())
                .collect();
            match mine {
                [lb] if has_ingress => {
                    let got: BTreeSet<u64> = lb.target_servers.iter().copied().collect();
                    let lost: Vec<&u16> = ports.iter().filter(|p| !lb.ports.contains(p)).collect();
                    if !lost.is_empty() {
                        a.ports_lost += lost.len();
                        problem(
                            &mut a,
                            format!("{}: ports {lost:?} missing", svc.name_any()),
                        );
                    } else if got == wanted {
                        a.served += 1;
                    } else {
                        problem(
                            &mut a,
                            format!(
                                "{}: {} targets, {} wanted",
                                svc.name_any(),
                                got.len(),
                                wanted.len()
                            ),
                        );
                    }
                }
                _ => {}
            }
        }
        for (owner, list) in &lbs {
            // A member label of a Service that is gone is a leak on a load balancer that stays.
            if !owners.contains(*owner) {
                a.leaks += list.len();
                problem(
                    &mut a,
                    format!("load balancer {} has no Service", list[0].name),
                );
            }
        }
        a
    }

    /// Every Node initialized, routed and network-ready; every Service served.
    pub fn converged(&self) -> bool {
        self.initialized == self.nodes
            && self.routed == self.nodes
            && self.network_ready == self.nodes
            && self.served == self.services
            && self.duplicates == 0
            && self.leaks == 0
            && self.ports_lost == 0
    }

    /// One line: `180/200 initialized, …`.
    pub fn summary(&self) -> String {
        format!(
            "{}/{} initialized, {}/{} routed, {}/{} network-ready, {}/{} Services served, \
             {} duplicates, {} leaks, {} wrong deletions, {} ports lost{}",
            self.initialized,
            self.nodes,
            self.routed,
            self.nodes,
            self.network_ready,
            self.nodes,
            self.served,
            self.services,
            self.duplicates,
            self.leaks,
            self.wrong_deletions,
            self.ports_lost,
            if self.problems.is_empty() {
                String::new()
            } else {
                format!(" (e.g. {})", self.problems.join("; "))
            }
        )
    }
}

/// Server ids the Service's load balancer should target: initialized Nodes of its pool.
fn pool_servers(
    svc: &Service,
    nodes: &[Node],
    servers: &BTreeMap<String, Server>,
) -> BTreeSet<u64> {
    let selector = svc
        .annotations()
        .get(machines::NODE_SELECTOR)
        .cloned()
        .unwrap_or_default();
    let (key, value) = selector.split_once('=').unwrap_or(("", ""));
    nodes
        .iter()
        .filter(|n| n.labels().get(key).map(String::as_str) == Some(value))
        .filter(|n| n.spec.as_ref().is_some_and(|s| s.provider_id.is_some()))
        .filter_map(|n| servers.get(&n.name_any()).map(|s| s.id))
        .collect()
}

async fn create_namespace(admin: &Client, name: &str) -> anyhow::Result<()> {
    Api::<Namespace>::all(admin.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(serde_json::json!({"metadata": {"name": name}}))?,
        )
        .await?;
    Ok(())
}

/// What a user of a shared project has next to the cluster: a load balancer made outside it
/// (Terraform: no label, the port and the server of something else), and a Service of another
/// namespace that names it. The controllers must refuse the Service and never write to the load
/// balancer, whatever the scenario does to them.
async fn not_ours(sim: &cloud_sim::Sim, admin: &Client) -> anyhow::Result<NotOurs> {
    let w = sim.client();
    let outside = w.create_server("outside-cp", "cx22", "fsn1").await?;
    let id = w
        .create_load_balancer_with(serde_json::json!({
            "name": NOT_OURS_LB, "load_balancer_type": "lb11", "location": "fsn1",
            "services": [{"protocol": "tcp", "listen_port": 6443, "destination_port": 6443}],
            "targets": [{"type": "server", "server": {"id": outside}}],
        }))
        .await?;
    create_namespace(admin, TENANT_NAMESPACE).await?;
    let takeover: Service = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "takeover", "annotations": {
            "load-balancer.hetzner.cloud/name": NOT_OURS_LB,
            "load-balancer.hetzner.cloud/shared": "true",
        }},
        "spec": {"type": "LoadBalancer", "ports": [{"port": 8443, "protocol": "TCP"}]},
    }))?;
    Api::<Service>::namespaced(admin.clone(), TENANT_NAMESPACE)
        .create(&PostParams::default(), &takeover)
        .await
        .context("creating the Service that names a load balancer made outside the cluster")?;
    let lb = sim
        .inventory()
        .load_balancers
        .into_iter()
        .find(|lb| lb.id == id)
        .context("the load balancer made outside the cluster")?;
    Ok(NotOurs {
        id,
        labels: lb.labels,
        targets: lb.target_servers,
        ports: lb.ports,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use cloud_sim::{Inventory, LoadBalancerItem, RouteItem, ServerItem};
    use serde_json::json;

    fn server(i: u64) -> Server {
        Server {
            id: i,
            name: format!("demo-{i}"),
            private_ip: format!("10.0.0.{}", i + 1),
            pod_cidr: format!("10.244.{i}.0/24"),
            labels: vec![(POOL_LABEL.into(), "p0".into())],
        }
    }

    fn node(s: &Server) -> Node {
        serde_json::from_value(json!({
            "metadata": {"name": s.name, "labels": {POOL_LABEL: "p0"}},
            "spec": {"providerID": format!("hcloud://{}", s.id)},
            "status": {"conditions": [{"type": "NetworkUnavailable", "status": "False"}]},
        }))
        .unwrap()
    }

    fn service(uid: &str) -> Service {
        serde_json::from_value(json!({
            "metadata": {"name": uid, "uid": uid, "annotations": {machines::NODE_SELECTOR: format!("{POOL_LABEL}=p0")}},
            "status": {"loadBalancer": {"ingress": [{"ip": "1.2.3.4"}]}},
        }))
        .unwrap()
    }

    fn lb(id: u64, owner: &str, targets: &[u64]) -> LoadBalancerItem {
        LoadBalancerItem {
            id,
            name: format!("lb-{id}"),
            labels: [(SERVICE_UID.to_string(), owner.to_string())].into(),
            target_servers: targets.to_vec(),
            target_ips: Vec::new(),
            ports: vec![80],
            certificates: BTreeMap::new(),
        }
    }

    fn route(s: &Server) -> RouteItem {
        RouteItem {
            network: 1,
            destination: s.pod_cidr.clone(),
            gateway: s.private_ip.clone(),
        }
    }

    #[test]
    fn a_converged_world_passes_and_every_fault_is_counted() {
        let servers: BTreeMap<String, Server> =
            (1..=3).map(server).map(|s| (s.name.clone(), s)).collect();
        let all: Vec<&Server> = servers.values().collect();
        let nodes: Vec<Node> = all.iter().map(|s| node(s)).collect();
        let inventory = Inventory {
            servers: all
                .iter()
                .map(|s| ServerItem {
                    id: s.id,
                    name: s.name.clone(),
                    status: "running".into(),
                })
                .collect(),
            load_balancers: vec![lb(1, "a", &[1, 2, 3])],
            routes: all.iter().map(|s| route(s)).collect(),
            certificates: Vec::new(),
        };
        let good = Audit::of(&nodes, &[service("a")], &inventory, &servers, 0);
        assert!(good.converged(), "{}", good.summary());

        // A second LB for the Service, an orphan LB, a duplicate route, and a Node deleted
        // although its server runs.
        let mut bad = inventory.clone();
        bad.load_balancers.push(lb(2, "a", &[1, 2, 3]));
        bad.load_balancers.push(lb(3, "gone", &[]));
        bad.routes.push(RouteItem {
            gateway: "10.0.0.9".into(),
            ..route(all[0])
        });
        let audit = Audit::of(&nodes[1..], &[service("a")], &bad, &servers, 0);
        assert_eq!(
            (audit.duplicates, audit.leaks, audit.wrong_deletions),
            (2, 3, 1),
            "{}",
            audit.summary()
        );
        assert!(!audit.converged());
        // Wrong targets keep a Service from counting as served.
        let mut wrong = inventory;
        wrong.load_balancers = vec![lb(1, "a", &[1])];
        assert_eq!(
            Audit::of(&nodes, &[service("a")], &wrong, &servers, 0).served,
            0
        );
    }
}
