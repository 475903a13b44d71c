//! An in-memory cloud: a second provider behind the controllers' seam, for the fast suites.
//!
//! [`MemoryCloud`] implements every provider trait ([`Instances`], [`LoadBalancers`], [`Routes`])
//! with plain data: servers by id and name, one load balancer per Service UID, the network's
//! routes. It records every call it gets ([`MemoryCloud::calls`]), can fail any operation with a
//! chosen error ([`MemoryCloud::fail`]), and builds the `Cloud` bundle a controller runs with
//! ([`MemoryCloud::cloud`], provider `memory`). Its providerIDs are `memory://<id>`.
//!
//! ```
//! use test_support::fakes::memory_cloud::{MemoryCloud, Server};
//! let cloud = MemoryCloud::new();
//! let id = cloud.add_server(Server::new("node-a").public_ip("203.0.113.10"));
//! assert_eq!(cloud.provider_id(id), "memory://1");
//! ```

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;
use cloud_client::registry::{Provider, ProviderConfig, Setting, SettingValues, Uses};
use cloud_client::{
    AddressKind, ApiError, Capability, ClientStats, Cloud, CloudError, DeleteOutcome,
    EnsureOutcome, InstanceMetadata, Instances, LbNode, LoadBalancerIngress, LoadBalancerStatus,
    LoadBalancers, NodeAddress, NodeRef, Routability, Route, RouteRequest, RouteSupport, Routes,
    ServiceRef, UpdateOutcome, Warning,
};

/// The provider's name in its `Cloud` bundle.
pub const PROVIDER_NAME: &str = "memory";
/// The providerID scheme: `memory://<server id>`.
pub const SCHEME: &str = "memory://";
/// The providerID scheme of a dedicated server, which the network's routes cannot reach (as
/// Hetzner's Robot servers): `memory-dedicated://<n>`.
pub const DEDICATED_SCHEME: &str = "memory-dedicated://";

/// The Node annotation that states a Node's public address over its server's (as Hetzner's
/// `instance.hetzner.cloud/external-ipv6` states the IPv6 one): a provider that reads a Node's
/// own annotations, for the fast suites.
pub const STATED_PUBLIC_IP: &str = "memory.test/public-ip";

/// The Warning reason of a stated public address that is no IP address.
pub const INVALID_STATED_PUBLIC_IP: &str = "InvalidStatedPublicIP";

/// One server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Server {
    /// Set by [`MemoryCloud::add_server`].
    pub id: u64,
    pub name: String,
    pub instance_type: String,
    pub zone: Option<String>,
    pub region: Option<String>,
    pub public_ip: Option<String>,
    /// The server's IP in the network: the gateway of its routes.
    pub private_ip: Option<String>,
    /// Powered off.
    pub shut_off: bool,
    /// Reported as `InstanceMetadata::additional_labels`.
    pub labels: BTreeMap<String, String>,
}

impl Server {
    /// A running `m1.small` in `zone-a`/`region-1`, without addresses.
    pub fn new(name: &str) -> Self {
        Self {
            id: 0,
            name: name.into(),
            instance_type: "m1.small".into(),
            zone: Some("zone-a".into()),
            region: Some("region-1".into()),
            public_ip: None,
            private_ip: None,
            shut_off: false,
            labels: BTreeMap::new(),
        }
    }

    pub fn public_ip(mut self, ip: &str) -> Self {
        self.public_ip = Some(ip.into());
        self
    }

    pub fn private_ip(mut self, ip: &str) -> Self {
        self.private_ip = Some(ip.into());
        self
    }

    pub fn shut_off(mut self) -> Self {
        self.shut_off = true;
        self
    }

    pub fn label(mut self, key: &str, value: &str) -> Self {
        self.labels.insert(key.into(), value.into());
        self
    }

    /// Hostname, ExternalIP, InternalIP: the order a cloud reports them in.
    pub fn addresses(&self) -> Vec<NodeAddress> {
        let mut out = vec![NodeAddress::new(AddressKind::Hostname, self.name.clone())];
        out.extend(
            self.public_ip
                .iter()
                .map(|ip| NodeAddress::new(AddressKind::ExternalIP, ip.clone())),
        );
        out.extend(
            self.private_ip
                .iter()
                .map(|ip| NodeAddress::new(AddressKind::InternalIP, ip.clone())),
        );
        out
    }
}

/// One load balancer, keyed by its Service's UID.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadBalancer {
    /// `namespace/name` of the Service.
    pub service: String,
    /// `(port, nodePort)` per Service port.
    pub ports: Vec<(u16, u16)>,
    /// Target node names, sorted.
    pub targets: Vec<String>,
    pub ip: String,
}

/// Every provider operation, to fail one ([`MemoryCloud::fail`]) or pick calls out of the record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Op {
    InstanceExists,
    InstanceShutdown,
    InstanceMetadata,
    GetLoadBalancer,
    EnsureLoadBalancer,
    UpdateTargets,
    DeleteLoadBalancer,
    ListRoutes,
    CreateRoute,
    DeleteRoute,
}

impl Op {
    /// Whether the operation changes the cloud (when it succeeds).
    pub fn is_write(self) -> bool {
        matches!(
            self,
            Op::EnsureLoadBalancer
                | Op::UpdateTargets
                | Op::DeleteLoadBalancer
                | Op::CreateRoute
                | Op::DeleteRoute
        )
    }
}

/// One call the provider got: the operation and what it was about, e.g. `(EnsureLoadBalancer,
/// "ns/web [a, b]")`, `(InstanceMetadata, "node-a")`, `(CreateRoute, "10.244.1.0/24 via 10.0.0.2")`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    pub op: Op,
    pub subject: String,
}

/// An error to answer an operation with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// `CloudError::NotFound`.
    NotFound,
    /// HTTP 503 `unavailable`: retryable.
    Retryable,
    /// HTTP 403 `forbidden`: permanent.
    Permanent,
    /// `CloudError::InvalidInput` about this field (user input the provider refuses).
    InvalidInput(&'static str),
    /// An API error with this status and code (e.g. 403 `resource_limit_exceeded`).
    Code(u16, &'static str),
}

impl Fault {
    fn error(&self, op: Op) -> CloudError {
        let api = |status: u16, code: &str| {
            CloudError::from(ApiError {
                status,
                code: code.into(),
                message: format!("injected for {op:?}"),
                correlation_id: None,
                method: "MEMORY".into(),
                endpoint: format!("{op:?}"),
                retry_after: None,
            })
        };
        match self {
            Fault::NotFound => CloudError::NotFound {
                what: format!("{op:?}"),
                tried: vec!["an injected fault".into()],
            },
            Fault::Retryable => api(503, "unavailable"),
            Fault::Permanent => api(403, "forbidden"),
            Fault::InvalidInput(field) => {
                CloudError::invalid_input(*field, "injected", "a value the memory cloud accepts")
            }
            Fault::Code(status, code) => api(*status, code),
        }
    }
}

#[derive(Debug, Default)]
struct State {
    servers: BTreeMap<u64, Server>,
    load_balancers: BTreeMap<String, LoadBalancer>,
    routes: Vec<Route>,
    calls: Vec<Call>,
    faults: BTreeMap<Op, Fault>,
    next_id: u64,
    /// `None`: [`MEMORY_ROUTE_SUPPORT`].
    route_support: Option<RouteSupport>,
}

/// What the memory network's routes can do unless a test says otherwise: unlike Hetzner's, it
/// routes IPv6 and takes several writes at once, so a test shows the route controller follows
/// the provider rather than Hetzner's limits.
pub const MEMORY_ROUTE_SUPPORT: RouteSupport = RouteSupport {
    ipv6_unsupported: None,
    writes_at_once: 4,
};

/// The in-memory cloud. Cheap to share: every handle sees the same state.
#[derive(Debug, Default)]
pub struct MemoryCloud {
    state: Mutex<State>,
    /// Route writes running now, and the most seen at once.
    route_writes: std::sync::atomic::AtomicUsize,
    most_route_writes: std::sync::atomic::AtomicUsize,
}

impl MemoryCloud {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// What the network's routes can do from now on (see [`MEMORY_ROUTE_SUPPORT`]).
    pub fn set_route_support(&self, support: RouteSupport) {
        self.state().route_support = Some(support);
    }

    /// The most route writes that were in flight at once so far.
    pub fn most_route_writes_at_once(&self) -> usize {
        self.most_route_writes
            .load(std::sync::atomic::Ordering::SeqCst)
    }

    /// The bundle a controller's `start` takes: every capability, provider `memory`.
    pub fn cloud(self: &Arc<Self>) -> Cloud {
        Cloud {
            provider_name: PROVIDER_NAME,
            instances: Some(self.clone()),
            load_balancers: Some(self.clone()),
            routes: Some(self.clone()),
            switched_off: Vec::new(),
            stats: ClientStats::new(),
            other_api_stats: Vec::new(),
            api_metric_families: None,
            credentials: None,
        }
    }

    // ---- the world --------------------------------------------------------------------------

    /// Adds a server (ids count from 1) and returns its id.
    pub fn add_server(&self, mut server: Server) -> u64 {
        let mut s = self.state();
        s.next_id += 1;
        server.id = s.next_id;
        s.servers.insert(server.id, server);
        s.next_id
    }

    /// `memory://<id>`.
    pub fn provider_id(&self, id: u64) -> String {
        format!("{SCHEME}{id}")
    }

    pub fn delete_server(&self, id: u64) {
        self.state().servers.remove(&id);
    }

    /// Changes a server in place (power, addresses, ...).
    pub fn update_server(&self, id: u64, f: impl FnOnce(&mut Server)) {
        if let Some(server) = self.state().servers.get_mut(&id) {
            f(server);
        }
    }

    /// The load balancer of the Service with this UID.
    pub fn load_balancer(&self, service_uid: &str) -> Option<LoadBalancer> {
        self.state().load_balancers.get(service_uid).cloned()
    }

    /// Every load balancer, by Service UID.
    pub fn load_balancers(&self) -> BTreeMap<String, LoadBalancer> {
        self.state().load_balancers.clone()
    }

    /// A route made behind the controller's back (`target_node` is resolved when listed).
    pub fn add_route(&self, destination: &str, gateway: &str) {
        self.state().routes.push(Route {
            name: format!("{gateway}-{destination}"),
            target_node: String::new(),
            destination_cidr: destination.into(),
            gateway: gateway.into(),
            blackhole: false,
        });
    }

    /// `(destination, gateway)` of every route, sorted.
    pub fn routes(&self) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = self
            .state()
            .routes
            .iter()
            .map(|r| (r.destination_cidr.clone(), r.gateway.clone()))
            .collect();
        out.sort();
        out
    }

    // ---- the record and the faults ----------------------------------------------------------

    /// Every call so far, in order.
    pub fn calls(&self) -> Vec<Call> {
        self.state().calls.clone()
    }

    /// The calls of operations that change the cloud, in order.
    pub fn writes(&self) -> Vec<Call> {
        self.calls()
            .into_iter()
            .filter(|c| c.op.is_write())
            .collect()
    }

    /// Forgets the calls so far (to look at one step's calls only).
    pub fn clear_calls(&self) {
        self.state().calls.clear();
    }

    /// Answers every later call of `op` with `fault`, until [`MemoryCloud::heal`].
    pub fn fail(&self, op: Op, fault: Fault) {
        self.state().faults.insert(op, fault);
    }

    /// Removes every fault.
    pub fn heal(&self) {
        self.state().faults.clear();
    }

    /// Records the call and returns the state, or the injected error.
    fn call(&self, op: Op, subject: String) -> Result<MutexGuard<'_, State>, CloudError> {
        let mut s = self.state();
        s.calls.push(Call { op, subject });
        match s.faults.get(&op) {
            Some(fault) => Err(fault.error(op)),
            None => Ok(s),
        }
    }
}

/// The server a Node names: by providerID when it has one, else by name.
fn find<'a>(s: &'a State, node: &NodeRef) -> Result<Option<&'a Server>, CloudError> {
    let Some(pid) = node.provider_id.as_deref() else {
        return Ok(s.servers.values().find(|v| v.name == node.name));
    };
    let Some(id) = pid.strip_prefix(SCHEME) else {
        return Err(CloudError::unsupported(format!(
            "providerID {pid:?} is not a {SCHEME} server"
        )));
    };
    let id: u64 = id
        .parse()
        .map_err(|_| CloudError::invalid_input("providerID", pid, "memory://<number>"))?;
    Ok(s.servers.get(&id))
}

fn not_found(node: &NodeRef) -> CloudError {
    let mut tried = Vec::new();
    if let Some(pid) = &node.provider_id {
        tried.push(format!("providerID {pid}"));
    }
    tried.push(format!("server name {:?}", node.name));
    CloudError::NotFound {
        what: "server".into(),
        tried,
    }
}

#[async_trait]
impl Instances for MemoryCloud {
    async fn instance_exists(&self, node: &NodeRef) -> Result<bool, CloudError> {
        let s = self.call(Op::InstanceExists, node.name.clone())?;
        match find(&s, node)? {
            Some(_) => Ok(true),
            // Only a server's own id proves it gone; a name that no server has proves nothing.
            None if node.provider_id.is_some() => Ok(false),
            None => Err(not_found(node)),
        }
    }

    async fn instance_shutdown(&self, node: &NodeRef) -> Result<bool, CloudError> {
        let s = self.call(Op::InstanceShutdown, node.name.clone())?;
        let server = find(&s, node)?.ok_or_else(|| not_found(node))?;
        Ok(server.shut_off)
    }

    async fn instance_metadata(&self, node: &NodeRef) -> Result<InstanceMetadata, CloudError> {
        let s = self.call(Op::InstanceMetadata, node.name.clone())?;
        let stated = match node.annotations.get(STATED_PUBLIC_IP) {
            None => None,
            Some(v) if v.parse::<std::net::IpAddr>().is_ok() => Some(v.clone()),
            Some(v) => {
                return Err(CloudError::InvalidNodeInput {
                    reason: INVALID_STATED_PUBLIC_IP,
                    message: format!(
                        "invalid value {v:?} for annotation {STATED_PUBLIC_IP}: expected an IP address"
                    ),
                });
            }
        };
        let server = find(&s, node)?.ok_or_else(|| not_found(node))?;
        let mut addresses = server.addresses();
        if let Some(ip) = &stated {
            addresses.retain(|a| a.kind != AddressKind::ExternalIP);
            addresses.insert(1, NodeAddress::new(AddressKind::ExternalIP, ip.clone()));
        }
        Ok(InstanceMetadata {
            provider_id: format!("{SCHEME}{}", server.id),
            instance_type: server.instance_type.clone(),
            zone: server.zone.clone(),
            region: server.region.clone(),
            addresses,
            additional_labels: server.labels.clone(),
            stated_by_node: stated.into_iter().collect(),
            warnings: Vec::new(),
        })
    }

    fn node_annotations(&self) -> &'static [&'static str] {
        &[STATED_PUBLIC_IP]
    }
}

fn status(lb: &LoadBalancer) -> LoadBalancerStatus {
    LoadBalancerStatus {
        ingress: vec![LoadBalancerIngress {
            ip: Some(lb.ip.clone()),
            hostname: None,
            ip_mode: None,
        }],
    }
}

/// The nodes a load balancer can target: those whose providerID names a server of this cloud. The
/// others get a Warning each.
fn targets(s: &State, nodes: &[LbNode]) -> (Vec<String>, Vec<Warning>) {
    let mut targets = Vec::new();
    let mut warnings = Vec::new();
    for n in nodes {
        let node = NodeRef::with_provider_id(&n.name, n.provider_id.clone().unwrap_or_default());
        match find(s, &node) {
            Ok(Some(_)) if node.provider_id.is_some() => targets.push(n.name.clone()),
            _ => warnings.push(Warning::on_node(
                &n.name,
                "TargetNotFound",
                format!("node {} is not a server of the memory cloud", n.name),
            )),
        }
    }
    targets.sort();
    (targets, warnings)
}

fn subject(svc: &ServiceRef, nodes: &[LbNode]) -> String {
    let names: Vec<&str> = nodes.iter().map(|n| n.name.as_str()).collect();
    format!("{} [{}]", svc.key(), names.join(", "))
}

/// How many targets differ between two sorted lists.
fn target_changes(old: &[String], new: &[String]) -> u32 {
    let added = new.iter().filter(|t| !old.contains(t)).count();
    let removed = old.iter().filter(|t| !new.contains(t)).count();
    (added + removed) as u32
}

#[async_trait]
impl LoadBalancers for MemoryCloud {
    fn load_balancer_name(&self, svc: &ServiceRef) -> String {
        format!("memory-{}", svc.uid)
    }

    async fn get(&self, svc: &ServiceRef) -> Result<Option<LoadBalancerStatus>, CloudError> {
        let s = self.call(Op::GetLoadBalancer, svc.key())?;
        Ok(s.load_balancers.get(&svc.uid).map(status))
    }

    async fn ensure(
        &self,
        svc: &ServiceRef,
        nodes: &[LbNode],
    ) -> Result<EnsureOutcome, CloudError> {
        let mut s = self.call(Op::EnsureLoadBalancer, subject(svc, nodes))?;
        let (targets, warnings) = targets(&s, nodes);
        let ports: Vec<(u16, u16)> = svc.ports.iter().map(|p| (p.port, p.node_port)).collect();
        let n = s.load_balancers.len() + 1;
        let (lb, writes) = match s.load_balancers.get(&svc.uid) {
            None => {
                let lb = LoadBalancer {
                    service: svc.key(),
                    ports,
                    targets,
                    ip: format!("198.51.100.{n}"),
                };
                (lb, 1)
            }
            Some(old) => {
                let writes = u32::from(old.ports != ports) + target_changes(&old.targets, &targets);
                let lb = LoadBalancer {
                    ports,
                    targets,
                    ..old.clone()
                };
                (lb, writes)
            }
        };
        let status = status(&lb);
        s.load_balancers.insert(svc.uid.clone(), lb);
        Ok(EnsureOutcome {
            status,
            warnings,
            writes,
            target_health: None,
        })
    }

    async fn update_targets(
        &self,
        svc: &ServiceRef,
        nodes: &[LbNode],
    ) -> Result<UpdateOutcome, CloudError> {
        let mut s = self.call(Op::UpdateTargets, subject(svc, nodes))?;
        let (targets, warnings) = targets(&s, nodes);
        let Some(lb) = s.load_balancers.get_mut(&svc.uid) else {
            return Ok(UpdateOutcome::default());
        };
        let writes = target_changes(&lb.targets, &targets);
        lb.targets = targets;
        Ok(UpdateOutcome {
            found: true,
            warnings,
            writes,
            target_health: None,
        })
    }

    async fn delete(&self, svc: &ServiceRef) -> Result<DeleteOutcome, CloudError> {
        let mut s = self.call(Op::DeleteLoadBalancer, svc.key())?;
        Ok(DeleteOutcome {
            deleted: s.load_balancers.remove(&svc.uid).is_some(),
            warnings: Vec::new(),
        })
    }
}

#[async_trait]
impl Routes for MemoryCloud {
    /// Each route's target is the server whose private IP is the gateway; none = blackhole.
    async fn list_routes(&self) -> Result<Vec<Route>, CloudError> {
        let s = self.call(Op::ListRoutes, String::new())?;
        let resolve = |r: &Route| {
            let owner = s
                .servers
                .values()
                .find(|v| v.private_ip.as_deref() == Some(r.gateway.as_str()));
            Route {
                target_node: owner.map(|v| v.name.clone()).unwrap_or_default(),
                blackhole: owner.is_none(),
                ..r.clone()
            }
        };
        Ok(s.routes.iter().map(resolve).collect())
    }

    async fn list_routes_unresolved(&self) -> Result<Vec<Route>, CloudError> {
        let s = self.call(Op::ListRoutes, String::new())?;
        Ok(s.routes.clone())
    }

    /// The gateway is the node's InternalIP, or without one the private IP of the server of the
    /// node's name. A route to the same destination is replaced.
    async fn create_route(&self, route: &RouteRequest) -> Result<Route, CloudError> {
        let internal = route
            .target_addresses
            .iter()
            .find(|a| a.kind == AddressKind::InternalIP)
            .map(|a| a.address.clone());
        let to = internal.as_deref().unwrap_or("its server's private IP");
        let subject = format!("{} via {to}", route.destination_cidr);
        // A write takes a moment, during which others may start: counted, to show how many the
        // controller sends at once.
        use std::sync::atomic::Ordering::SeqCst;
        let now = self.route_writes.fetch_add(1, SeqCst) + 1;
        self.most_route_writes.fetch_max(now, SeqCst);
        tokio::task::yield_now().await;
        self.route_writes.fetch_sub(1, SeqCst);
        let mut s = self.call(Op::CreateRoute, subject)?;
        let support = s.route_support.unwrap_or(MEMORY_ROUTE_SUPPORT);
        if let Some(why) = support.ipv6_unsupported
            && route.destination_cidr.contains(':')
        {
            return Err(CloudError::unsupported(why));
        }
        let gateway = internal.or_else(|| {
            let server = s
                .servers
                .values()
                .find(|v| v.name == route.target_node.name);
            server.and_then(|v| v.private_ip.clone())
        });
        let Some(gateway) = gateway else {
            return Err(CloudError::Inconsistent {
                message: format!(
                    "server of node {} is not attached to the network",
                    route.target_node.name
                ),
            });
        };
        s.routes
            .retain(|r| r.destination_cidr != route.destination_cidr);
        let made = Route {
            name: format!("{gateway}-{}", route.destination_cidr),
            target_node: route.target_node.name.clone(),
            destination_cidr: route.destination_cidr.clone(),
            gateway,
            blackhole: false,
        };
        s.routes.push(made.clone());
        Ok(made)
    }

    async fn delete_route(&self, route: &Route) -> Result<(), CloudError> {
        let subject = format!("{} via {}", route.destination_cidr, route.gateway);
        let mut s = self.call(Op::DeleteRoute, subject)?;
        s.routes.retain(|r| {
            !(r.destination_cidr == route.destination_cidr && r.gateway == route.gateway)
        });
        Ok(())
    }

    fn support(&self) -> RouteSupport {
        self.state().route_support.unwrap_or(MEMORY_ROUTE_SUPPORT)
    }

    /// Routes reach `memory://` servers; a dedicated one gets a Warning, anything else is
    /// another cloud's node.
    fn routability(&self, provider_id: &str) -> Routability {
        if provider_id.starts_with(SCHEME) {
            Routability::Routable
        } else if provider_id.starts_with(DEDICATED_SCHEME) {
            Routability::Unreachable {
                reason: "DedicatedServerNotRoutable",
                why: format!(
                    "node is a dedicated server ({provider_id}): the network reaches servers only"
                ),
                remedy: "let the CNI route it",
            }
        } else {
            Routability::Foreign
        }
    }
}

/// The in-memory cloud as a registered provider, `--cloud-provider=memory`: it has no settings,
/// and every configuration builds the bundle of the one [`MemoryCloud`] it was registered with.
#[derive(Debug, Clone)]
pub struct MemoryProvider(pub Arc<MemoryCloud>);

impl Provider for MemoryProvider {
    fn name(&self) -> &'static str {
        PROVIDER_NAME
    }

    fn settings(&self) -> &'static [Setting] {
        &[]
    }

    fn configure(
        &self,
        _values: &SettingValues,
        _uses: &Uses,
    ) -> Result<Arc<dyn ProviderConfig>, Vec<String>> {
        Ok(Arc::new(self.clone()))
    }

    fn requirements(&self, _capability: Capability, _values: &SettingValues) -> Vec<String> {
        Vec::new()
    }

    fn provider_id_example(&self) -> &'static str {
        SCHEME
    }
}

#[async_trait]
impl ProviderConfig for MemoryProvider {
    async fn build(&self) -> Result<Cloud, CloudError> {
        Ok(self.0.cloud())
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn svc(uid: &str) -> ServiceRef {
        ServiceRef {
            uid: uid.into(),
            namespace: "ns".into(),
            name: "web".into(),
            ..Default::default()
        }
    }

    fn lb_node(name: &str, pid: Option<String>) -> LbNode {
        LbNode {
            name: name.into(),
            provider_id: pid,
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn instances_by_id_and_by_name() {
        let c = MemoryCloud::new();
        let id = c.add_server(Server::new("a").public_ip("203.0.113.1").shut_off());
        let by_id = NodeRef::with_provider_id("other", c.provider_id(id));
        assert!(c.instance_exists(&by_id).await.unwrap());
        assert!(c.instance_shutdown(&by_id).await.unwrap());
        let md = c.instance_metadata(&NodeRef::new("a")).await.unwrap();
        assert_eq!(md.provider_id, "memory://1");
        assert_eq!(md.addresses[1].address, "203.0.113.1");
        c.delete_server(id);
        assert!(!c.instance_exists(&by_id).await.unwrap(), "gone by id");
        let by_name = c.instance_exists(&NodeRef::new("a")).await.unwrap_err();
        assert!(by_name.is_not_found(), "a name proves nothing: {by_name}");
        let foreign = NodeRef::with_provider_id("x", "hcloud://1");
        assert!(matches!(
            c.instance_exists(&foreign).await,
            Err(CloudError::Unsupported { .. })
        ));
        let bad = NodeRef::with_provider_id("x", "memory://one");
        assert!(matches!(
            c.instance_metadata(&bad).await,
            Err(CloudError::InvalidInput { .. })
        ));
        assert_eq!(c.calls().len(), 7);
        assert!(c.writes().is_empty());
    }

    #[tokio::test]
    async fn load_balancers_count_their_writes() {
        let c = MemoryCloud::new();
        let a = c.provider_id(c.add_server(Server::new("a")));
        let b = c.provider_id(c.add_server(Server::new("b")));
        let nodes = [lb_node("a", Some(a)), lb_node("b", Some(b))];
        let first = c.ensure(&svc("u1"), &nodes).await.unwrap();
        assert_eq!(first.writes, 1);
        assert_eq!(first.status.ingress[0].ip.as_deref(), Some("198.51.100.1"));
        let again = c.ensure(&svc("u1"), &nodes).await.unwrap();
        assert_eq!(again.writes, 0, "nothing changed");
        let with_stranger = [nodes[0].clone(), lb_node("stranger", None)];
        let up = c.update_targets(&svc("u1"), &with_stranger).await.unwrap();
        assert_eq!((up.found, up.writes), (true, 1));
        assert_eq!(up.warnings[0].node.as_deref(), Some("stranger"));
        assert_eq!(c.load_balancer("u1").unwrap().targets, ["a"]);
        assert!(c.delete(&svc("u1")).await.unwrap().deleted);
        assert!(!c.delete(&svc("u1")).await.unwrap().deleted, "idempotent");
        assert!(!c.update_targets(&svc("u1"), &nodes).await.unwrap().found);
    }

    #[tokio::test]
    async fn faults_answer_until_healed_and_calls_are_still_recorded() {
        let c = MemoryCloud::new();
        c.fail(Op::ListRoutes, Fault::Retryable);
        assert!(c.list_routes().await.unwrap_err().is_retryable());
        c.fail(Op::ListRoutes, Fault::NotFound);
        assert!(c.list_routes().await.unwrap_err().is_not_found());
        c.fail(Op::ListRoutes, Fault::Code(403, "resource_limit_exceeded"));
        let e = c.list_routes().await.unwrap_err();
        assert_eq!(e.code(), Some("resource_limit_exceeded"));
        c.heal();
        assert!(c.list_routes().await.unwrap().is_empty());
        assert_eq!(c.calls().len(), 4);
    }

    #[tokio::test]
    async fn routes_resolve_gateways_to_servers() {
        let c = MemoryCloud::new();
        c.add_server(Server::new("a").private_ip("10.0.0.2"));
        c.add_route("10.244.9.0/24", "10.0.0.9");
        let req = RouteRequest {
            name_hint: "uid".into(),
            target_node: NodeRef::new("a"),
            target_addresses: Vec::new(),
            destination_cidr: "10.244.1.0/24".into(),
        };
        c.create_route(&req).await.unwrap();
        let listed = c.list_routes().await.unwrap();
        assert!(listed[0].blackhole, "nobody owns 10.0.0.9");
        assert_eq!(listed[1].target_node, "a");
        assert_eq!(listed[1].gateway, "10.0.0.2");
        c.delete_route(&listed[0]).await.unwrap();
        assert_eq!(c.routes(), [("10.244.1.0/24".into(), "10.0.0.2".into())]);
        let stranger = RouteRequest {
            target_node: NodeRef::new("stranger"),
            ..req
        };
        assert!(matches!(
            c.create_route(&stranger).await,
            Err(CloudError::Inconsistent { .. })
        ));
    }

    /// The seam, end to end: registered by name next to Hetzner, selected by `--cloud-provider`
    /// through the kit's own validation, and built into the bundle a controller runs with.
    #[tokio::test]
    async fn registered_by_name_and_selected_by_the_kit() {
        use controller_kit::config::{CloudArgs, CommonArgs, Problems};
        const INFO: controller_kit::ControllerInfo = controller_kit::ControllerInfo {
            name: "node-controller",
            canonical: "cloud-node-controller",
            alias: "cloud-node",
            component: "cloud-node-controller",
            default_admin_port: 10270,
            node_syncs_default: Some(16),
            reads_load_balancer_settings: false,
        };
        let memory = MemoryCloud::new();
        memory.add_server(Server::new("node-a"));
        let mut registry = cloud_client::providers::builtin();
        registry.register(Arc::new(MemoryProvider(memory.clone())));
        assert_eq!(
            registry.names(),
            ["hcloud", "external-cloudstack", "memory"]
        );

        let args = CommonArgs {
            cloud: CloudArgs {
                cloud_provider: Some("memory".into()),
                ..Default::default()
            },
            ..Default::default()
        };
        let mut problems = Problems::default();
        let config = args
            .validate_with(&registry, &INFO, true, &mut problems)
            .and_then(|c| problems.finish(c))
            .expect("memory needs no settings");
        let cloud = controller_kit::cloud::build(&config).await.unwrap();
        assert_eq!(cloud.provider_name, "memory");
        let instances = cloud.instances.unwrap();
        assert!(
            instances
                .instance_exists(&NodeRef::new("node-a"))
                .await
                .unwrap()
        );
        let missing = instances.instance_exists(&NodeRef::new("node-b")).await;
        assert!(missing.is_err_and(|e| e.is_not_found()));

        let unknown = CommonArgs {
            cloud: CloudArgs {
                cloud_provider: Some("aws".into()),
                ..Default::default()
            },
            ..Default::default()
        };
        let mut problems = Problems::default();
        let _ = unknown.validate_with(&registry, &INFO, false, &mut problems);
        let text = problems.finish(()).unwrap_err().to_string();
        assert!(
            text.contains(
                "--cloud-provider=\"aws\": not a known provider (hcloud, external-cloudstack, memory)"
            ),
            "{text}"
        );
    }
}
