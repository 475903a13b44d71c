//! The cloud-agnostic surface the controllers program against.
//!
//! Controllers hold `Arc<dyn Instances>`, `Arc<dyn LoadBalancers>` and `Arc<dyn Routes>`, so a second cloud
//! can be added without touching them. All types are plain Rust (no kube types): the controller converts
//! Node/Service objects into these and the results back.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;

use crate::error::CloudError;
use crate::stats::ClientStats;

// ------------------------------------------------------------------------------------------------
// Instances (upstream InstancesV2)
// ------------------------------------------------------------------------------------------------

/// What a controller knows about a Node when it asks the cloud about it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeRef {
    /// `metadata.name` of the Node. Used for the lookup when `provider_id` is absent.
    pub name: String,
    /// `spec.providerID`, when set (empty strings are treated as absent).
    pub provider_id: Option<String>,
    /// The Node's InternalIPs as reported (kubelet's `--node-ip`): a dedicated server's private
    /// addresses are known only from there (`ROBOT_FORWARD_INTERNAL_IPS`).
    pub internal_ips: Vec<String>,
    /// The Node's annotations the provider reads ([`Instances::node_annotations`]), e.g. Hetzner's
    /// `instance.hetzner.cloud/external-ipv6`.
    pub annotations: BTreeMap<String, String>,
}

impl NodeRef {
    /// A Node known by name only.
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            provider_id: None,
            internal_ips: Vec::new(),
            annotations: BTreeMap::new(),
        }
    }

    /// A Node with a providerID (an empty string is stored as `None`).
    pub fn with_provider_id(name: impl Into<String>, provider_id: impl Into<String>) -> Self {
        let p = provider_id.into();
        Self {
            name: name.into(),
            provider_id: (!p.is_empty()).then_some(p),
            internal_ips: Vec::new(),
            annotations: BTreeMap::new(),
        }
    }

    /// The Node's annotations the provider reads.
    pub fn with_annotations(mut self, annotations: BTreeMap<String, String>) -> Self {
        self.annotations = annotations;
        self
    }

    /// The Node's reported InternalIPs.
    pub fn with_internal_ips(mut self, ips: impl IntoIterator<Item = String>) -> Self {
        self.internal_ips = ips.into_iter().collect();
        self
    }
}

/// Kind of a node address; `as_str()` returns the Kubernetes `NodeAddressType` name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum AddressKind {
    Hostname,
    ExternalIP,
    InternalIP,
    ExternalDNS,
    InternalDNS,
}

impl AddressKind {
    /// The Kubernetes name (`Hostname`, `ExternalIP`, `InternalIP`, `ExternalDNS`, `InternalDNS`).
    pub fn as_str(self) -> &'static str {
        match self {
            AddressKind::Hostname => "Hostname",
            AddressKind::ExternalIP => "ExternalIP",
            AddressKind::InternalIP => "InternalIP",
            AddressKind::ExternalDNS => "ExternalDNS",
            AddressKind::InternalDNS => "InternalDNS",
        }
    }
}

impl fmt::Display for AddressKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One entry of `node.status.addresses`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct NodeAddress {
    pub kind: AddressKind,
    pub address: String,
}

impl NodeAddress {
    pub fn new(kind: AddressKind, address: impl Into<String>) -> Self {
        Self {
            kind,
            address: address.into(),
        }
    }
}

/// What the cloud says about a Node's server. The controller writes these onto the Node.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InstanceMetadata {
    /// Always non-empty, e.g. `hcloud://123`. Set as `spec.providerID` only if the Node has none.
    pub provider_id: String,
    /// Value for `node.kubernetes.io/instance-type` (and the beta key).
    pub instance_type: String,
    /// Value for `topology.kubernetes.io/zone` (and the beta key); `None` = do not set the label.
    pub zone: Option<String>,
    /// Value for `topology.kubernetes.io/region` (and the beta key); `None` = do not set the label.
    pub region: Option<String>,
    /// Addresses in the order the cloud prefers them (Hostname first, then External/Internal IPs).
    pub addresses: Vec<NodeAddress>,
    /// Extra labels (e.g. `instance.hetzner.cloud/provided-by=cloud`); the controller never overwrites
    /// existing Node labels with these and drops reserved Kubernetes prefixes.
    pub additional_labels: BTreeMap<String, String>,
    /// Addresses among `addresses` that the Node's own annotations stated rather than the cloud
    /// (e.g. Hetzner's `external-ipv6`): the controller refuses them when another Node has one.
    pub stated_by_node: Vec<String>,
    /// What the Node's operator should hear about (e.g. an annotation the configuration ignores):
    /// the controller publishes each as a Warning on the Node.
    pub warnings: Vec<Warning>,
}

/// Node/server lookups (upstream `InstancesV2`). Lookups are served from a shared snapshot; a "not found"
/// answer is always confirmed by a fresh cloud read, and "gone" by a read of the server itself, so
/// neither a stale cache nor a lagging list causes a Node deletion.
#[async_trait]
pub trait Instances: Send + Sync {
    /// `Ok(false)` ONLY when the cloud positively said the server does not exist: a not-found for the
    /// server's own id, never a list that misses it. Any doubt (transport error, rate limit,
    /// unsupported providerID such as `hrobot://`, a node without providerID whose name no server
    /// has: `CloudError::NotFound`) is an `Err`, never `false`.
    async fn instance_exists(&self, node: &NodeRef) -> Result<bool, CloudError>;

    /// `Ok(true)` when the server exists and is powered off (Hetzner: status `off`).
    /// A server that does not exist yields `CloudError::NotFound`.
    async fn instance_shutdown(&self, node: &NodeRef) -> Result<bool, CloudError>;

    /// Metadata for initializing/refreshing the Node. Not found → `CloudError::NotFound` whose message
    /// lists what was tried (providerID/id, name). Unsupported providerIDs → `CloudError::Unsupported`.
    /// A bad value in one of the Node's annotations → `CloudError::InvalidNodeInput`.
    async fn instance_metadata(&self, node: &NodeRef) -> Result<InstanceMetadata, CloudError>;

    /// The Node annotations this provider reads ([`NodeRef::annotations`]); the controllers keep
    /// these in their caches and look again when one changes.
    fn node_annotations(&self) -> &'static [&'static str] {
        &[]
    }
}

// ------------------------------------------------------------------------------------------------
// Load balancers (upstream LoadBalancer)
// ------------------------------------------------------------------------------------------------

/// Protocol of a Service port, as written in the Service spec.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum PortProtocol {
    Tcp,
    Udp,
    Sctp,
    Other(String),
}

impl PortProtocol {
    /// Parses the Kubernetes spelling (`TCP`, `UDP`, `SCTP`); empty means TCP (API default).
    pub fn parse(s: &str) -> Self {
        match s {
            "" | "TCP" => PortProtocol::Tcp,
            "UDP" => PortProtocol::Udp,
            "SCTP" => PortProtocol::Sctp,
            o => PortProtocol::Other(o.to_string()),
        }
    }

    /// The Kubernetes spelling.
    pub fn as_str(&self) -> &str {
        match self {
            PortProtocol::Tcp => "TCP",
            PortProtocol::Udp => "UDP",
            PortProtocol::Sctp => "SCTP",
            PortProtocol::Other(s) => s,
        }
    }
}

/// One entry of `spec.ports` of a `type: LoadBalancer` Service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServicePort {
    pub name: Option<String>,
    pub protocol: PortProtocol,
    /// `port`: the port the load balancer listens on.
    pub port: u16,
    /// `nodePort`: where the load balancer sends traffic on the targets. 0 = not allocated yet.
    pub node_port: u16,
}

/// The parts of a Service a load-balancer implementation needs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServiceRef {
    /// `metadata.uid`: identity of the load balancer (label `hcloud-ccm/service-uid` on Hetzner).
    pub uid: String,
    pub namespace: String,
    pub name: String,
    /// `metadata.annotations` (all of them; the provider picks its own prefix).
    pub annotations: BTreeMap<String, String>,
    pub ports: Vec<ServicePort>,
    /// `spec.externalTrafficPolicy`, with the port kube-proxy answers health checks on for `Local`.
    pub traffic_policy: TrafficPolicy,
    /// Other Services by UID, for messages that name the Service a request conflicts with.
    pub names: ServiceNames,
    /// The controller found kube-proxy's health port unreachable on every node it probed (see
    /// [`LoadBalancers::kube_proxy_health_port`]): the load balancer checks the NodePort instead,
    /// as it would without kube-proxy checks, so it does not take every target out at once.
    pub kube_proxy_unreachable: bool,
    /// `spec.ipFamilies`: the address families kube-proxy serves the Service's NodePorts on.
    pub ip_families: IpFamilies,
    /// The IPs `status.loadBalancer.ingress` publishes now: a load balancer leaving the Service
    /// (one zone's of several) goes only once its addresses are no longer published.
    pub ingress_ips: Vec<String>,
}

/// A Service's `spec.ipFamilies`. Neither set (a Service the apiserver did not default, as in
/// tests): IPv4, the single-stack default.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct IpFamilies {
    pub ipv4: bool,
    pub ipv6: bool,
}

impl IpFamilies {
    /// From the Kubernetes names (`IPv4`, `IPv6`).
    pub fn from_names<'a>(names: impl IntoIterator<Item = &'a str>) -> Self {
        let mut f = Self::default();
        for n in names {
            match n {
                "IPv4" => f.ipv4 = true,
                "IPv6" => f.ipv6 = true,
                _ => {}
            }
        }
        f
    }

    /// Whether NodePorts answer on IPv4 (also when nothing is known).
    pub fn has_v4(self) -> bool {
        self.ipv4 || !self.ipv6
    }

    pub fn has_v6(self) -> bool {
        self.ipv6
    }
}

/// Finds a Service's `namespace/name` by UID (the controller's Service cache), so a refusal can
/// name the Service it conflicts with. Looked up only when a message needs it.
#[derive(Clone, Default)]
pub struct ServiceNames(Option<Arc<NameLookup>>);

/// UID → `namespace/name`.
type NameLookup = dyn Fn(&str) -> Option<String> + Send + Sync;

impl ServiceNames {
    pub fn new(lookup: impl Fn(&str) -> Option<String> + Send + Sync + 'static) -> Self {
        Self(Some(Arc::new(lookup)))
    }

    /// `Service namespace/name`, or `Service UID <uid>` when the cache does not know it.
    pub fn describe(&self, uid: &str) -> String {
        match self.0.as_ref().and_then(|f| f(uid)) {
            Some(name) => format!("Service {name}"),
            None => format!("Service UID {uid}"),
        }
    }

    /// The namespace of the Service with `uid`, when the cache knows it (without a cache,
    /// nothing is known).
    pub fn namespace_of(&self, uid: &str) -> Option<String> {
        let key = self.0.as_ref().and_then(|f| f(uid))?;
        key.split_once('/')
            .map(|(namespace, _)| namespace.to_owned())
    }
}

impl std::fmt::Debug for ServiceNames {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ServiceNames")
    }
}

/// A lookup is not part of a Service's identity.
impl PartialEq for ServiceNames {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for ServiceNames {}

/// Which nodes can serve a Service's traffic (`spec.externalTrafficPolicy`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum TrafficPolicy {
    /// Every node forwards to any endpoint (the Kubernetes default).
    #[default]
    Cluster,
    /// Only nodes with a ready local endpoint serve; kube-proxy answers `GET /healthz` on
    /// `spec.healthCheckNodePort` with 200 on those nodes and 503 on the others. `None` until the
    /// apiserver allocated the port.
    Local { health_check_node_port: Option<u16> },
}

impl ServiceRef {
    /// `namespace/name`, for messages.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

/// A candidate target node (the controller already dropped excluded/not-ready nodes).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LbNode {
    pub name: String,
    pub provider_id: Option<String>,
    /// Node labels (for provider-level node selectors). Shared: a controller rebuilds its node
    /// set on every change while reconciles still hold the previous ones, and each Node's labels
    /// are the bulk of a set.
    pub labels: Arc<BTreeMap<String, String>>,
    /// `InternalIP` addresses from `node.status.addresses`.
    pub internal_ips: Vec<String>,
}

/// `status.loadBalancer.ingress[].ipMode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IpMode {
    /// Traffic arrives with the load balancer IP as destination (kube-proxy may short-circuit it).
    Vip,
    /// The load balancer proxies (PROXY protocol etc.); kube-proxy must not short-circuit it.
    Proxy,
}

impl IpMode {
    /// The Kubernetes spelling: `VIP` or `Proxy`.
    pub fn as_str(self) -> &'static str {
        match self {
            IpMode::Vip => "VIP",
            IpMode::Proxy => "Proxy",
        }
    }
}

/// One entry of `status.loadBalancer.ingress`; exactly one of `ip`/`hostname` is set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadBalancerIngress {
    pub ip: Option<String>,
    pub hostname: Option<String>,
    pub ip_mode: Option<IpMode>,
}

/// `status.loadBalancer` to write onto the Service.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LoadBalancerStatus {
    pub ingress: Vec<LoadBalancerIngress>,
}

/// The reason of the Service-level [`Warning`] a provider gives when its load balancer cannot hold
/// every eligible node (a type's target limit): the controller also says it in the Service's
/// `LoadBalancerReady` condition, since those nodes get no traffic from it.
pub const TARGETS_LEFT_OUT: &str = "TargetsLeftOut";

/// The reason of the Service-level [`Warning`] a provider gives when some eligible nodes are in
/// another zone than the load balancer, which cannot reach them: like [`TARGETS_LEFT_OUT`], the
/// controller says it in `LoadBalancerReady`.
pub const NODES_OUTSIDE_ZONE: &str = "NodesOutsideLoadBalancerZone";

/// [`NODES_OUTSIDE_ZONE`] when not one node is left as a target: `LoadBalancerReady` is False.
pub const NO_NODE_IN_ZONE: &str = "NoNodeInLoadBalancerZone";

/// The reasons of the warnings that say some eligible nodes get no traffic from the load
/// balancer, in the order the condition prefers them.
pub const LEFT_OUT_REASONS: [&str; 3] = [NO_NODE_IN_ZONE, NODES_OUTSIDE_ZONE, TARGETS_LEFT_OUT];

/// Something the user should see as a Warning Event on the Service (or Node); the operation continued.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Warning {
    /// Event reason, e.g. `UnsupportedProtocolConfigured`, `MaxTargetsReached`.
    pub reason: String,
    pub message: String,
    /// The Node the warning is about (the event goes on that Node); `None` = about the Service.
    pub node: Option<String>,
}

impl Warning {
    /// A warning about the Service.
    pub fn new(reason: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            reason: reason.into(),
            message: message.into(),
            node: None,
        }
    }

    /// A warning about one Node (e.g. it could not be added as a target).
    pub fn on_node(
        node: impl Into<String>,
        reason: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Self {
            node: Some(node.into()),
            ..Self::new(reason, message)
        }
    }
}

/// How many of a load balancer's targets its health checks pass, as the cloud reported them in the
/// load balancer the reconcile read or wrote (no extra call): as fresh as that read. A target counts
/// as healthy when every port's check passes, unhealthy when any fails, unknown otherwise (not
/// checked yet). Targets a label selector resolves count one by one.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TargetHealth {
    pub healthy: u32,
    pub unhealthy: u32,
    pub unknown: u32,
}

impl TargetHealth {
    pub fn total(&self) -> u32 {
        self.healthy + self.unhealthy + self.unknown
    }
}

/// Result of [`LoadBalancers::ensure`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EnsureOutcome {
    pub status: LoadBalancerStatus,
    pub warnings: Vec<Warning>,
    /// Number of cloud write calls the reconcile made (0 when nothing changed).
    pub writes: u32,
    /// `None` when the provider does not report target health.
    pub target_health: Option<TargetHealth>,
}

/// Result of [`LoadBalancers::update_targets`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UpdateOutcome {
    /// False when no load balancer exists for the Service (nothing was done).
    pub found: bool,
    pub warnings: Vec<Warning>,
    pub writes: u32,
    /// As in [`EnsureOutcome::target_health`].
    pub target_health: Option<TargetHealth>,
}

/// Result of [`LoadBalancers::delete`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeleteOutcome {
    /// True when a load balancer was deleted by this call; false when none existed or it was kept.
    pub deleted: bool,
    /// E.g. `DeleteProtected` when the cloud object has delete protection and was left in place.
    pub warnings: Vec<Warning>,
}

/// Service ↔ cloud load balancer (upstream LoadBalancer interface). All methods are idempotent and write
/// only differences between desired and actual state.
#[async_trait]
pub trait LoadBalancers: Send + Sync {
    /// Cloud name the provider would use for this Service (upstream `GetLoadBalancerName`).
    fn load_balancer_name(&self, svc: &ServiceRef) -> String;

    /// `None` when the provider's load balancers enforce `spec.loadBalancerSourceRanges`; else
    /// why they cannot and what a user can do instead (for the Warning and the condition).
    fn unenforced_source_ranges(&self) -> Option<&'static str> {
        None
    }

    /// The port on which this Service's load balancer would ask kube-proxy `GET /healthz` whether
    /// a node can serve it (its health checks follow kube-proxy), with
    /// [`ServiceRef::kube_proxy_unreachable`] unset; `None` when they do not. The controller probes
    /// that port on the nodes and, when nothing answers anywhere, sets the flag. Pure: no call.
    fn kube_proxy_health_port(&self, _svc: &ServiceRef) -> Option<u16> {
        None
    }

    /// Whether this Service's targets are only the nodes running a serving endpoint of it (the
    /// controller then passes only those nodes); `false` when every eligible node is a target.
    /// Pure: no call.
    fn targets_nodes_with_endpoints(&self, _svc: &ServiceRef) -> bool {
        false
    }

    /// Status of the existing load balancer, `None` when the Service has none. No writes.
    async fn get(&self, svc: &ServiceRef) -> Result<Option<LoadBalancerStatus>, CloudError>;

    /// Create or reconcile the load balancer (settings, services/ports, targets) and return its status.
    /// Invalid annotations → `CloudError::InvalidInput` naming the annotation, before any write.
    async fn ensure(&self, svc: &ServiceRef, nodes: &[LbNode])
    -> Result<EnsureOutcome, CloudError>;

    /// A periodic drift check of a Service ensured before: [`ensure`](Self::ensure), except that
    /// the provider may compare against a read of the load balancer up to `read_age` old that it
    /// shares with the other drift checks (one list of every load balancer instead of a read
    /// each). Drift made outside the controller is then repaired at most a period plus
    /// `read_age` after it was made.
    async fn check_drift(
        &self,
        svc: &ServiceRef,
        nodes: &[LbNode],
        read_age: std::time::Duration,
    ) -> Result<EnsureOutcome, CloudError> {
        let _ = read_age;
        self.ensure(svc, nodes).await
    }

    /// Reconcile an existing load balancer for a changed node set (upstream `UpdateLoadBalancer`); never
    /// creates one. Returns `found: false` when the Service has no load balancer.
    async fn update_targets(
        &self,
        svc: &ServiceRef,
        nodes: &[LbNode],
    ) -> Result<UpdateOutcome, CloudError>;

    /// Delete the Service's load balancer. Idempotent: absent → `Ok(deleted: false)`. A delete-protected load
    /// balancer is kept and reported as a `DeleteProtected` warning with `Ok` (same as HCCM), so the
    /// Service's finalizer can be removed.
    async fn delete(&self, svc: &ServiceRef) -> Result<DeleteOutcome, CloudError>;
}

// ------------------------------------------------------------------------------------------------
// Routes (upstream Routes)
// ------------------------------------------------------------------------------------------------

/// A pod-CIDR route as it exists in the cloud.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    /// Stable name, e.g. `<gateway>-<destination>` on Hetzner.
    pub name: String,
    /// Node (server) name whose private IP is the gateway; empty when `blackhole`.
    pub target_node: String,
    pub destination_cidr: String,
    /// Next hop IP in the cloud network.
    pub gateway: String,
    /// True when no current server owns the gateway (upstream deletes these inside the cluster CIDR).
    pub blackhole: bool,
}

/// A route the controller wants to exist.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteRequest {
    /// Upstream's `nameHint` (node UID); informational.
    pub name_hint: String,
    pub target_node: NodeRef,
    /// The node's addresses (InternalIP is used to pick/verify the gateway).
    pub target_addresses: Vec<NodeAddress>,
    pub destination_cidr: String,
}

/// Pod-CIDR routes in the cloud network (upstream Routes). `locked`/`conflict` errors are retryable.
#[async_trait]
pub trait Routes: Send + Sync {
    /// All routes of the cluster network (one network read + the shared server snapshot).
    async fn list_routes(&self) -> Result<Vec<Route>, CloudError>;

    /// The network's routes without working out which node each one targets (`target_node` empty,
    /// `blackhole` false): one cloud read, for a caller that matches gateways to node IPs itself.
    async fn list_routes_unresolved(&self) -> Result<Vec<Route>, CloudError> {
        self.list_routes().await
    }

    /// Make `destination_cidr` point at the target node. No-op when already so; a route with the same
    /// destination and another gateway is replaced. IPv6 → `CloudError::Unsupported`. Returns the
    /// route as it now is (`target_node` is the requested node), so a caller can keep its own list
    /// current without reading the network again.
    async fn create_route(&self, route: &RouteRequest) -> Result<Route, CloudError>;

    /// [`Routes::create_route`] for a caller that serialises all route writes and keeps the
    /// routes it listed current with what its writes return (`current`): the provider trusts that
    /// list instead of reading the network again.
    async fn create_route_in(
        &self,
        route: &RouteRequest,
        current: &[Route],
    ) -> Result<Route, CloudError> {
        let _ = current;
        self.create_route(route).await
    }

    /// Delete the route. Already absent → `Ok`.
    async fn delete_route(&self, route: &Route) -> Result<(), CloudError>;

    /// Whether these routes can reach the node with `provider_id`.
    fn routability(&self, provider_id: &str) -> Routability;

    /// What these routes can do; the route controller follows it.
    fn support(&self) -> RouteSupport {
        RouteSupport::default()
    }
}

/// What a provider's routes can do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RouteSupport {
    /// `None` when IPv6 podCIDRs can be routed; else why not, for the Node's Warning (the CNI must
    /// route them then), e.g. "Hetzner networks are IPv4-only".
    pub ipv6_unsupported: Option<&'static str>,
    /// Route writes the controller may have in flight at once: 1 where the cloud locks the
    /// network while a route action runs, so a second write would only be refused.
    pub writes_at_once: usize,
}

impl Default for RouteSupport {
    fn default() -> Self {
        Self {
            ipv6_unsupported: None,
            writes_at_once: 1,
        }
    }
}

/// Whether a provider's routes can reach a node, judged by its providerID.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Routability {
    Routable,
    /// Not a node of this provider (another cloud's, in a hybrid cluster): left alone, silently.
    Foreign,
    /// A node of this provider that its routes cannot reach: the route controller gives the Node
    /// a Warning, `"{why}, so its podCIDR … is not routed by the cloud; {remedy}"`.
    Unreachable {
        /// The Warning's reason, e.g. `RobotServerNotRoutable`.
        reason: &'static str,
        why: String,
        remedy: &'static str,
    },
    /// A node of this provider that its routes should reach but cannot until the operator acts
    /// (e.g. its server's zone has no subnet in the network). The route controller says so once
    /// in a Warning (`reason`) and in the Node's `NetworkUnavailable` condition (True, with
    /// `message`), and writes nothing for it until the provider's verdict changes.
    Unroutable {
        reason: &'static str,
        message: String,
    },
}

// ------------------------------------------------------------------------------------------------
// The bundle a controller binary builds once.
// ------------------------------------------------------------------------------------------------

/// One capability of a cloud, as the controllers use them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Capability {
    Instances,
    LoadBalancers,
    Routes,
}

/// The capabilities one configured cloud offers. `None` = not supported/disabled (e.g. routes without a
/// network); a controller whose capability is `None` should log and stay idle.
#[derive(Clone)]
pub struct Cloud {
    /// Provider name, e.g. `hcloud`.
    pub provider_name: &'static str,
    pub instances: Option<Arc<dyn Instances>>,
    pub load_balancers: Option<Arc<dyn LoadBalancers>>,
    pub routes: Option<Arc<dyn Routes>>,
    /// For each capability that is `None`, what turned it off, in the provider's words (e.g.
    /// `HCLOUD_LOAD_BALANCERS_ENABLED=false`), for the idle controller's message.
    pub switched_off: Vec<(Capability, String)>,
    /// API call counters and rate-limit budget for the controller's `/metrics`.
    pub stats: Arc<ClientStats>,
    /// The counters of further APIs the provider calls, each with the name its metrics carry
    /// (`cloud_controllers_<name>_*`; Hetzner: the Robot webservice's as `robot_api`).
    pub other_api_stats: Vec<(&'static str, Arc<ClientStats>)>,
    /// The API token and the cloud's verdict on it (for metrics and readiness).
    pub credentials: Option<Arc<crate::credentials::Credentials>>,
    /// The families the controller the users switch from served for this cloud's API (Hetzner:
    /// hcloud-go's `hcloud_api_*` and HCCM's operations), so their dashboards keep working; the
    /// controllers serve `stats` under these names too. `None`: only ours.
    pub api_metric_families: Option<ApiMetricFamilies>,
}

/// Names (and help texts) under which a cloud's API calls were counted by the controller users
/// switch from. Served from [`Cloud::stats`] at scrape time.
#[derive(Debug, Clone, Copy)]
pub struct ApiMetricFamilies {
    /// Answered requests, a counter labelled `code`, `method` (lowercase) and `api_endpoint`.
    pub requests: MetricFamily,
    /// Request latency, a histogram labelled `method` (lowercase).
    pub request_duration: MetricFamily,
    /// Requests in flight, a gauge.
    pub in_flight: MetricFamily,
    /// Operations by name (`Cloud::stats` operations), a counter labelled `op`.
    pub operations: MetricFamily,
    /// The `api_endpoint` label of a request's path template (e.g. `/servers/{id}`).
    pub api_endpoint: fn(&str) -> String,
}

/// A metric family's name (without a counter's `_total`) and help text.
#[derive(Debug, Clone, Copy)]
pub struct MetricFamily {
    pub name: &'static str,
    pub help: &'static str,
}

impl Cloud {
    /// What turned `capability` off, when it is.
    pub fn why_off(&self, capability: Capability) -> &str {
        self.switched_off
            .iter()
            .find(|(c, _)| *c == capability)
            .map(|(_, why)| why.as_str())
            .unwrap_or("the provider's settings")
    }
}

impl fmt::Debug for Cloud {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cloud")
            .field("provider_name", &self.provider_name)
            .field("instances", &self.instances.is_some())
            .field("load_balancers", &self.load_balancers.is_some())
            .field("routes", &self.routes.is_some())
            .finish()
    }
}
