//! Route-controller test fixture: a cloud-sim with a network and attached servers, Nodes with
//! podCIDRs and InternalIPs as node-controller leaves them, and the controller in-process under its
//! chart RBAC (impersonated ServiceAccount).
#![allow(dead_code)]

use std::ops::Deref;
use std::sync::Arc;
use std::time::Duration;

use cloud_client::hcloud::HcloudConfig;
use cloud_client::{ClientStats, StatsSnapshot};
use cloud_sim::SimConfig;
use k8s_openapi::api::core::v1::{Node, NodeAddress, NodeStatus};
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use route_controller::Settings;
use route_controller::cidr::ClusterCidrs;
use serde_json::json;
use test_support::e2e::run::{Running, sim_config};
use test_support::e2e::test_run::TestRun;
use test_support::e2e::{TEST_LABEL, eventually, unique};

pub use test_support::e2e::T;
pub const CLUSTER_CIDR: &str = "10.244.0.0/16";

/// A server in the network and the Node standing for it.
#[derive(Debug, Clone)]
pub struct TestNode {
    pub name: String,
    pub server: u64,
    pub private_ip: String,
}

pub struct Fixture {
    pub world: TestRun,
    pub network: u64,
    pub ctl: Option<Running>,
    pub stats: Option<Arc<ClientStats>>,
    /// Next free /24 of the cluster CIDR (tests of one binary share nothing but the apiserver).
    next_cidr: std::sync::atomic::AtomicU32,
    /// `--route-sync-window` of the next controller started.
    window: Duration,
    /// `--route-reconciliation-period` of the next controller started.
    resync: Duration,
}

/// The tests read the world's parts (`fx.admin`, `fx.sim`, `fx.run`) as the fixture's own.
impl Deref for Fixture {
    type Target = TestRun;
    fn deref(&self) -> &TestRun {
        &self.world
    }
}

impl Fixture {
    /// The world without a controller: sim, network (10.0.0.0/8, subnet 10.0.0.0/16), namespace
    /// with the chart RBAC bound to ServiceAccount `route-controller`.
    pub async fn world(sim: Option<SimConfig>) -> Fixture {
        let world = TestRun::start("route-controller", "rt", sim).await;
        let network = world
            .sim
            .client()
            .create_network("k8s", "10.0.0.0/8", "10.0.0.0/16")
            .await
            .expect("create network");
        Fixture {
            world,
            network,
            ctl: None,
            stats: None,
            next_cidr: 1.into(),
            window: Duration::from_millis(100),
            resync: Duration::from_secs(300),
        }
    }

    pub async fn start() -> Fixture {
        let mut fx = Self::world(None).await;
        fx.spawn(|_| {}).await;
        fx
    }

    /// [`start`](Self::start) with a safety resync every `resync` (5 minutes otherwise).
    pub async fn start_resyncing(resync: Duration) -> Fixture {
        let mut fx = Self::world(None).await;
        fx.resync = resync;
        fx.spawn(|_| {}).await;
        fx
    }

    /// Starts the controller as the chart's ServiceAccount; `tweak` adjusts the cloud client.
    pub async fn spawn(&mut self, tweak: impl FnOnce(&mut HcloudConfig)) {
        self.spawn_as(tweak, false).await
    }

    /// Stops the controller and starts a new one, as a rollout does, whose passes follow Node
    /// events after `window` (100 ms otherwise).
    pub async fn restart(&mut self, window: Duration) {
        if let Some(ctl) = self.ctl.take() {
            ctl.stop().await.expect("the controller stops cleanly");
        }
        self.window = window;
        self.spawn(|_| {}).await;
    }

    /// Starts the controller in shadow mode (`--dry-run`).
    pub async fn spawn_shadow(&mut self) {
        self.spawn_as(|_| {}, true).await
    }

    async fn spawn_as(&mut self, tweak: impl FnOnce(&mut HcloudConfig), dry_run: bool) {
        let mut cfg = sim_config(&self.sim);
        cfg.network.name_or_id = Some(self.network.to_string());
        tweak(&mut cfg);
        let settings = Settings {
            cluster: Some(ClusterCidrs::parse(CLUSTER_CIDR).unwrap()),
            resync: self.resync,
            window: self.window,
        };
        let sa = self.service_account().await;
        let mut config = test_support::e2e::run::test_config(&route_controller::INFO, &self.run);
        if dry_run {
            test_support::e2e::run::shadow(&mut config);
        }
        let (ctl, stats) = self
            .world
            .spawn_with(
                &route_controller::INFO,
                sa,
                cfg,
                config,
                move |rt, cloud| route_controller::start(rt, cloud, settings),
            )
            .await;
        self.ctl = Some(ctl);
        self.stats = Some(stats);
    }

    /// A fresh /24 of the cluster CIDR.
    pub fn pod_cidr(&self) -> String {
        let n = self
            .next_cidr
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        format!("10.244.{n}.0/24")
    }

    /// A server attached to the network (private IP assigned by the sim).
    pub async fn server(&self, name: &str, attach: bool) -> (u64, String) {
        let client = self.sim.client();
        let id = client
            .create_server(name, "cx22", "fsn1")
            .await
            .expect("create server");
        if !attach {
            return (id, String::new());
        }
        client
            .attach_to_network(id, self.network, None)
            .await
            .expect("attach server");
        (id, self.private_ip(id).await)
    }

    pub async fn private_ip(&self, server: u64) -> String {
        let s = self.sim.client().get_server(server).await.expect("server");
        let s = if s.get("server").is_some() {
            &s["server"]
        } else {
            &s
        };
        s["private_net"][0]["ip"]
            .as_str()
            .expect("server has a private IP")
            .to_string()
    }

    /// A server in the network and its Node with `cidrs`, InternalIP = the private IP.
    pub async fn node(&self, cidrs: &[String]) -> TestNode {
        let name = unique("node");
        let (server, ip) = self.server(&name, true).await;
        self.create_node(&name, server, &ip, cidrs).await;
        TestNode {
            name,
            server,
            private_ip: ip,
        }
    }

    /// Creates the Node (podCIDRs, providerID) and writes its InternalIP as node-controller does.
    pub async fn create_node(&self, name: &str, server: u64, ip: &str, cidrs: &[String]) {
        let api: Api<Node> = Api::all(self.admin.clone());
        // As a real kubelet registers it (route-controller's cache drops most of it).
        let mut node = testenv::KubeletNode {
            labels: vec![(TEST_LABEL.to_string(), self.run.clone())],
            uninitialized: false,
            provider_id: Some(format!("hcloud://{server}")),
            ..testenv::KubeletNode::new(name)
        }
        .registration();
        if let Some(spec) = node.spec.as_mut() {
            spec.pod_cidr = cidrs.first().cloned();
            spec.pod_cidrs = Some(cidrs.to_vec());
        }
        api.create(&PostParams::default(), &node)
            .await
            .expect("create node");
        if !ip.is_empty() {
            self.set_internal_ip(name, ip).await;
        }
    }

    pub async fn set_internal_ip(&self, name: &str, ip: &str) {
        let status = NodeStatus {
            addresses: Some(vec![NodeAddress {
                type_: "InternalIP".into(),
                address: ip.into(),
            }]),
            ..Default::default()
        };
        Api::<Node>::all(self.admin.clone())
            .patch_status(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": status})),
            )
            .await
            .expect("patch node addresses");
    }

    /// The network's routes as `(destination, gateway)`, sorted.
    pub async fn routes(&self) -> Vec<(String, String)> {
        let net = self
            .sim
            .client()
            .get_network(self.network)
            .await
            .expect("get network");
        let mut r: Vec<(String, String)> = net["routes"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|r| {
                        (
                            r["destination"].as_str().unwrap_or_default().to_string(),
                            r["gateway"].as_str().unwrap_or_default().to_string(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        r.sort();
        r
    }

    /// Waits until the network's routes are exactly `want` (any order).
    pub async fn wait_routes(&self, want: &[(String, String)]) {
        let mut want = want.to_vec();
        want.sort();
        eventually(&format!("routes {want:?}"), T, || async {
            (self.routes().await == want).then_some(())
        })
        .await
    }

    /// `(status, reason)` of the node's NetworkUnavailable condition.
    pub async fn condition(&self, node: &str) -> Option<(String, String)> {
        let n = Api::<Node>::all(self.admin.clone())
            .get(node)
            .await
            .expect("get node");
        n.status?
            .conditions?
            .into_iter()
            .find(|c| c.type_ == "NetworkUnavailable")
            .map(|c| (c.status, c.reason.unwrap_or_default()))
    }

    /// Waits for the node's condition to be `status`/`reason`.
    pub async fn wait_condition(&self, node: &str, status: &str, reason: &str) {
        eventually(
            &format!("{node} NetworkUnavailable={status}/{reason}"),
            T,
            || async {
                (self.condition(node).await == Some((status.into(), reason.into()))).then_some(())
            },
        )
        .await
    }

    /// Waits for a Warning with `reason` on the node; returns its note.
    pub async fn wait_event(&self, node: &str, reason: &str) -> String {
        self.world.wait_event("Node", node, reason).await
    }

    /// The controller's cloud calls so far.
    pub fn mark(&self) -> StatsSnapshot {
        self.stats.as_ref().expect("running").snapshot()
    }
}
