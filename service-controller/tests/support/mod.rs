//! Service-controller test fixture: the controller in-process under its chart RBAC (impersonated
//! ServiceAccount), watching one namespace and one run's Nodes, against its own cloud-sim; the
//! Services and load balancers of the tests.
#![allow(dead_code)]

pub mod certificates;
pub mod traffic;

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Deref;
use std::sync::Arc;
use std::time::Duration;

use cloud_client::hcloud::HcloudConfig;
use cloud_client::{ClientStats, StatsSnapshot};
use cloud_sim::SimConfig;
use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, Client, ResourceExt};
use serde_json::{Value, json};
use service_controller::Settings;
use test_support::e2e::run::{Running, sim_config};
use test_support::e2e::test_run::{TestRun, calls_since, writes};
use test_support::e2e::{NodeSpecT, create_node, eventually, unique};

/// Poll deadline of every wait.
pub use test_support::e2e::T;
pub const LB_UID_LABEL: &str = "hcloud-ccm/service-uid";
pub const PREFIX: &str = "load-balancer.hetzner.cloud/";
/// The label that places a Node in its server's location.
pub const REGION_LABEL: &str = "topology.kubernetes.io/region";

/// A load balancer HCCM built for a Service ([`Fixture::hccm_service`]).
#[derive(Debug, Clone)]
pub struct HccmLb {
    pub id: u64,
    pub ipv4: String,
    pub ipv6: String,
}

/// A server and the Node standing for it.
#[derive(Debug, Clone)]
pub struct TestNode {
    pub name: String,
    pub server: u64,
}

pub struct Fixture {
    pub world: TestRun,
    pub ctl: Option<Running>,
    /// The running controller's cloud-client counters.
    pub stats: Option<Arc<ClientStats>>,
    /// The running controller's planned writes, in shadow mode.
    pub planned_writes: Option<Arc<cloud_client::shadow::PlannedWrites>>,
    /// The controller watches every namespace, not only the run's (for a test binary of one
    /// test: the control plane is the binary's own).
    pub all_namespaces: bool,
}

/// The tests read the world's parts (`fx.admin`, `fx.sim`, `fx.ns`) as the fixture's own.
impl Deref for Fixture {
    type Target = TestRun;
    fn deref(&self) -> &TestRun {
        &self.world
    }
}

/// Adjusts the cloud client of a test (retries, LB defaults).
pub type CloudTweak = Box<dyn FnOnce(&mut HcloudConfig) + Send>;

/// Options of [`Fixture::start_with`].
#[derive(Default)]
pub struct Options {
    pub settings: Settings,
    pub cloud: Option<CloudTweak>,
    pub sim: Option<SimConfig>,
    /// See [`Fixture::all_namespaces`].
    pub all_namespaces: bool,
}

impl Fixture {
    pub async fn start() -> Fixture {
        Self::start_with(Options::default()).await
    }

    pub async fn start_with(opts: Options) -> Fixture {
        let mut fx = Self::without_controller(opts.sim).await;
        fx.all_namespaces = opts.all_namespaces;
        let sa = fx.service_account().await;
        fx.spawn(sa, opts.settings, opts.cloud).await;
        fx
    }

    /// The world (namespace, chart RBAC, cloud-sim) without a controller, e.g. to run the binary.
    pub async fn without_controller(sim: Option<SimConfig>) -> Fixture {
        Fixture {
            world: TestRun::start("service-controller", "svc", sim).await,
            ctl: None,
            stats: None,
            planned_writes: None,
            all_namespaces: false,
        }
    }

    async fn spawn(&mut self, client: Client, settings: Settings, tweak: Option<CloudTweak>) {
        self.spawn_as(client, settings, tweak, false).await
    }

    /// Starts the controller in shadow mode (`--dry-run`; default settings, chart RBAC).
    pub async fn start_shadow(&mut self) {
        let sa = self.service_account().await;
        self.spawn_as(sa, Settings::default(), None, true).await;
    }

    async fn spawn_as(
        &mut self,
        client: Client,
        mut settings: Settings,
        tweak: Option<CloudTweak>,
        dry_run: bool,
    ) {
        let mut cfg = sim_config(&self.sim);
        cfg.load_balancers.defaults.location = Some("fsn1".into());
        cfg.load_balancers.defaults.lb_type = Some("lb11".into());
        if let Some(t) = tweak {
            t(&mut cfg);
        }
        settings.namespace = (!self.all_namespaces).then(|| self.ns.clone());
        settings.node_sync_window = Duration::from_millis(200);
        let mut config = test_support::e2e::run::test_config(&service_controller::INFO, &self.run);
        self.planned_writes = dry_run.then(|| test_support::e2e::run::shadow(&mut config));
        let (ctl, stats) = self
            .world
            .spawn_with(
                &service_controller::INFO,
                client,
                cfg,
                config,
                move |rt, cloud| service_controller::start(rt, cloud, settings),
            )
            .await;
        self.ctl = Some(ctl);
        self.stats = Some(stats);
    }

    /// Starts the controller (default settings, chart RBAC) with `tweak` applied to its cloud
    /// configuration: for settings that need the world's sim, e.g. its Robot webservice.
    pub async fn start_controller(&mut self, tweak: CloudTweak) {
        let sa = self.service_account().await;
        self.spawn(sa, Settings::default(), Some(tweak)).await;
    }

    /// Starts the controller with `settings` (chart RBAC).
    pub async fn start_controller_with(&mut self, settings: Settings) {
        let sa = self.service_account().await;
        self.spawn(sa, settings, None).await;
    }

    /// Starts the controller again (default settings) with `client`.
    pub async fn restart(&mut self, client: Client) {
        self.stop().await;
        self.spawn(client, Settings::default(), None).await;
    }

    /// Stops the controller (e.g. to change the world behind its back).
    pub async fn stop(&mut self) {
        if let Some(c) = self.ctl.take() {
            c.stop().await.expect("controller stops cleanly");
        }
    }

    /// `n` servers and their initialized, Ready Nodes.
    pub async fn nodes(&self, n: usize) -> Vec<TestNode> {
        let mut out = Vec::new();
        for _ in 0..n {
            out.push(self.node(BTreeMap::new()).await);
        }
        out
    }

    /// One server in fsn1 and its Node with `labels`.
    pub async fn node(&self, labels: BTreeMap<String, String>) -> TestNode {
        self.node_in("fsn1", labels).await
    }

    /// One server in `location` and its Node with `labels`, and the region label the
    /// node-controller gives it (unless `labels` has one).
    pub async fn node_in(&self, location: &str, mut labels: BTreeMap<String, String>) -> TestNode {
        labels
            .entry(REGION_LABEL.into())
            .or_insert_with(|| location.into());
        self.node_labelled(location, labels).await
    }

    /// One server in `location` and its Node without a region label (a Node no cloud controller
    /// initialized: its providerID came from the kubelet's flags).
    pub async fn node_without_region(&self, location: &str) -> TestNode {
        self.node_labelled(location, BTreeMap::new()).await
    }

    async fn node_labelled(&self, location: &str, labels: BTreeMap<String, String>) -> TestNode {
        let name = unique("node");
        let server = self.server_in(&name, location).await;
        create_node(
            &self.admin,
            &self.run,
            &name,
            NodeSpecT {
                provider_id: Some(format!("hcloud://{}", server.id)),
                labels,
                ready: Some(true),
                ..Default::default()
            },
        )
        .await;
        TestNode {
            name,
            server: server.id,
        }
    }

    pub fn services(&self) -> Api<Service> {
        Api::namespaced(self.admin.clone(), &self.ns)
    }

    /// Creates a `type: LoadBalancer` Service with TCP `ports` (nodePorts allocated by the apiserver:
    /// they are cluster-wide, and tests run in parallel).
    pub async fn service(&self, name: &str, ports: &[i32], ann: &[(&str, &str)]) -> Service {
        self.service_with(name, ports, ann, |_| {}).await
    }

    pub async fn service_with(
        &self,
        name: &str,
        ports: &[i32],
        ann: &[(&str, &str)],
        f: impl FnOnce(&mut ServiceSpec),
    ) -> Service {
        self.service_in(&self.ns, name, ports, ann, f).await
    }

    /// [`Fixture::service_with`] in `namespace`.
    pub async fn service_in(
        &self,
        namespace: &str,
        name: &str,
        ports: &[i32],
        ann: &[(&str, &str)],
        f: impl FnOnce(&mut ServiceSpec),
    ) -> Service {
        let services: Api<Service> = Api::namespaced(self.admin.clone(), namespace);
        let mut s = Service::default();
        s.metadata.name = Some(name.into());
        s.metadata.annotations = Some(
            ann.iter()
                .map(|(k, v)| (format!("{PREFIX}{k}"), v.to_string()))
                .collect(),
        );
        let mut spec = ServiceSpec {
            type_: Some("LoadBalancer".into()),
            selector: Some([("app".to_string(), name.to_string())].into()),
            ports: Some(
                ports
                    .iter()
                    .map(|p| ServicePort {
                        name: Some(format!("p{p}")),
                        port: *p,
                        protocol: Some("TCP".into()),
                        ..Default::default()
                    })
                    .collect(),
            ),
            ..Default::default()
        };
        f(&mut spec);
        s.spec = Some(spec);
        // A kept-alive connection the apiserver has just closed fails the request before any
        // answer (`UnexpectedEof` on a busy machine); the client does not resend a POST itself.
        for attempt in 1.. {
            match services.create(&PostParams::default(), &s).await {
                Ok(created) => return created,
                Err(kube::Error::Service(e)) if attempt < 3 => {
                    eprintln!("create service {name}: {e}; sending it again");
                }
                // The lost answer's create did happen.
                Err(kube::Error::Api(e)) if attempt > 1 && e.code == 409 => {
                    return services.get(name).await.expect("the created service");
                }
                Err(e) => panic!("create service: {e:?}"),
            }
        }
        unreachable!("the loop returns or panics")
    }

    pub async fn get(&self, name: &str) -> Option<Service> {
        self.services().get_opt(name).await.expect("get service")
    }

    pub async fn patch(&self, name: &str, patch: Value) {
        self.services()
            .patch(name, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .expect("patch service");
    }

    pub async fn delete(&self, name: &str) {
        self.services()
            .delete(name, &DeleteParams::default())
            .await
            .expect("delete service");
    }

    /// Waits until the Service has an ingress IP; returns the Service.
    pub async fn wait_ingress(&self, name: &str) -> Service {
        eventually(&format!("ingress of {name}"), T, || async {
            self.get(name).await.filter(|s| !ingress_ips(s).is_empty())
        })
        .await
    }

    /// The load balancers carrying the Service's UID label.
    pub async fn lbs_of(&self, svc: &Service) -> Vec<Value> {
        let uid = svc.uid().unwrap();
        self.sim
            .client()
            .list_load_balancers()
            .await
            .expect("list load balancers")
            .into_iter()
            .filter(|lb| lb["labels"][LB_UID_LABEL].as_str() == Some(uid.as_str()))
            .collect()
    }

    /// The one load balancer of the Service (panics on zero or several).
    pub async fn lb_of(&self, svc: &Service) -> Value {
        let mut lbs = self.lbs_of(svc).await;
        assert_eq!(
            lbs.len(),
            1,
            "exactly one load balancer for {}",
            svc.name_any()
        );
        lbs.remove(0)
    }

    /// Waits until the Service's load balancer targets exactly `servers`.
    pub async fn wait_targets(&self, svc: &Service, servers: &[u64]) -> Value {
        let mut want: Vec<u64> = servers.to_vec();
        want.sort_unstable();
        eventually(&format!("targets {want:?}"), T, || async {
            let lbs = self.lbs_of(svc).await;
            let lb = lbs.into_iter().next()?;
            (target_ids(&lb) == want).then_some(lb)
        })
        .await
    }

    /// The controller's cloud calls so far (its own client's counters: the test's calls through
    /// cloud-sim's world client are not in them).
    pub fn mark(&self) -> StatsSnapshot {
        self.stats.as_ref().expect("running").snapshot()
    }

    /// `(method, endpoint)` of every cloud write the controller made after `mark`.
    pub fn writes_since(&self, mark: &StatsSnapshot) -> Vec<(String, String)> {
        writes(self.calls_since(mark))
    }

    /// `(method, endpoint)` of every cloud call the controller made after `mark`, one per call.
    pub fn calls_since(&self, mark: &StatsSnapshot) -> Vec<(String, String)> {
        calls_since(&self.mark(), mark)
    }

    /// A Service as HCCM left it: its load balancer built as HCCM builds it (name `a` + UID, the
    /// ownership label, a TCP service per port with HCCM's health check, every node a target),
    /// the cleanup finalizer and the ingress.
    pub async fn hccm_service(&self, name: &str, ports: &[i32], nodes: &[TestNode]) -> HccmLb {
        let svc = self.service(name, ports, &[]).await;
        let uid = svc.uid().unwrap();
        let lb_name = format!("a{}", uid.replace('-', ""))[..32].to_string();
        let client = self.sim.client();
        let id = client
            .create_load_balancer_with(json!({
                "name": lb_name, "load_balancer_type": "lb11", "location": "fsn1",
                "labels": {LB_UID_LABEL: uid},
            }))
            .await
            .unwrap();
        for (port, node_port) in node_ports(&svc) {
            client
                .load_balancer_action(
                    id,
                    "add_service",
                    json!({
                        "protocol": "tcp", "listen_port": port, "destination_port": node_port,
                        "proxyprotocol": false,
                        "health_check": {"protocol": "tcp", "port": node_port, "interval": 15,
                            "timeout": 10, "retries": 3}
                    }),
                )
                .await
                .unwrap();
        }
        for n in nodes {
            client
                .load_balancer_action(
                    id,
                    "add_target",
                    json!({"type": "server", "server": {"id": n.server}, "use_private_ip": false}),
                )
                .await
                .unwrap();
        }
        let lb = client.get_load_balancer(id).await.unwrap();
        let ip = |family: &str| lb["public_net"][family]["ip"].as_str().unwrap().to_string();
        let (ipv4, ipv6) = (ip("ipv4"), ip("ipv6"));
        self.services()
            .patch_status(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({
                    "metadata": {"finalizers": [service_controller::patches::FINALIZER]},
                    "status": {"loadBalancer": {"ingress": [
                        {"ip": ipv4, "ipMode": "VIP"}, {"ip": ipv6, "ipMode": "VIP"}
                    ]}}
                })),
            )
            .await
            .unwrap();
        HccmLb { id, ipv4, ipv6 }
    }

    /// The controller's /metrics text.
    pub async fn metrics(&self) -> String {
        self.ctl.as_ref().expect("running").metrics().await
    }
}

/// A cloud-sim load balancer's listen ports.
pub fn listen_ports(lb: &Value) -> BTreeSet<u64> {
    lb["services"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s["listen_port"].as_u64())
        .collect()
}

/// The server ids a cloud-sim load balancer targets.
pub fn target_servers(lb: &Value) -> BTreeSet<u64> {
    lb["targets"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["server"]["id"].as_u64())
        .collect()
}

pub fn ingress_ips(s: &Service) -> Vec<String> {
    s.status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref())
        .and_then(|l| l.ingress.as_ref())
        .map(|i| i.iter().filter_map(|i| i.ip.clone()).collect())
        .unwrap_or_default()
}

pub fn has_finalizer(s: &Service) -> bool {
    s.finalizers()
        .iter()
        .any(|f| f == service_controller::patches::FINALIZER)
}

/// Sorted `(port, nodePort)` of a Service.
pub fn node_ports(s: &Service) -> Vec<(u64, u64)> {
    let mut p: Vec<(u64, u64)> = s
        .spec
        .as_ref()
        .and_then(|s| s.ports.as_ref())
        .map(|ports| {
            ports
                .iter()
                .map(|p| (p.port as u64, p.node_port.unwrap_or(0) as u64))
                .collect()
        })
        .unwrap_or_default();
    p.sort_unstable();
    p
}

/// Sorted server ids of a load balancer's server targets.
pub fn target_ids(lb: &Value) -> Vec<u64> {
    let mut ids: Vec<u64> = lb["targets"]
        .as_array()
        .map(|t| {
            t.iter()
                .filter_map(|t| t["server"]["id"].as_u64())
                .collect()
        })
        .unwrap_or_default();
    ids.sort_unstable();
    ids
}

/// Sorted `(listen_port, destination_port)` of a load balancer's services.
pub fn lb_ports(lb: &Value) -> Vec<(u64, u64)> {
    let mut p: Vec<(u64, u64)> = lb["services"]
        .as_array()
        .map(|s| {
            s.iter()
                .map(|s| {
                    (
                        s["listen_port"].as_u64().unwrap_or(0),
                        s["destination_port"].as_u64().unwrap_or(0),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    p.sort_unstable();
    p
}

/// A JSON merge patch setting annotation `key` (without prefix) to `value` (`None` removes it).
pub fn annotation_patch(key: &str, value: Option<&str>) -> Value {
    json!({"metadata": {"annotations": {format!("{PREFIX}{key}"): value}}})
}
