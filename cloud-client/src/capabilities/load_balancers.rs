//! Load balancers (upstream LoadBalancer): a Service and its cloud load balancer.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;

use super::read_once::ReadOnce;
use super::recorder::Recorder;
use super::tls_secrets::TlsSecrets;
use super::warning::Warning;
use crate::error::CloudError;

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
    /// What the provider read from the annotations, on first use: build one `ServiceRef` per
    /// reconcile and ask everything of it, so they are read once.
    pub read_once: ReadOnce,
    /// `spec.loadBalancerIP`, when set: the address a provider that offers a choice of addresses
    /// gives the Service (CloudStack: an address the project holds, or one it may associate).
    pub load_balancer_ip: Option<String>,
    /// `spec.loadBalancerSourceRanges`, else upstream's older annotation
    /// `service.beta.kubernetes.io/load-balancer-source-ranges` (comma-separated), as given: the
    /// ranges a provider that enforces them (see [`LoadBalancers::unenforced_source_ranges`])
    /// lets in. Empty: every address.
    pub source_ranges: Vec<String>,
    /// `spec.sessionAffinity` is `ClientIP` (CloudStack balances such a Service by source
    /// address, as upstream).
    pub session_affinity_client_ip: bool,
    /// Writes an annotation on the Service before a cloud write a crash could orphan.
    pub recorder: Recorder,
    /// The TLS Secrets of the Service's namespace the controller may read, by name.
    pub tls_secrets: TlsSecrets,
}

/// Upstream's `DefaultLoadBalancerName` (cloud-provider `cloud.go`): `a` + the Service's UID
/// without dashes, at most 32 characters. Hetzner and CloudStack name their load balancers (and
/// CloudStack its rules) from it, as HCCM and upstream's CloudStack CCM do.
pub fn default_load_balancer_name(uid: &str) -> String {
    let mut n = String::from("a");
    n.extend(uid.chars().filter(|c| *c != '-'));
    n.truncate(32);
    n
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
    /// `lookup` answers `namespace/name` for a Service's UID, or for the load-balancer name
    /// [`default_load_balancer_name`] makes of it (CloudStack's rules carry only that).
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

/// The reason of the Service-level [`Warning`] a provider gives when a TLS Secret the Service
/// names cannot be used (missing, deleted, a key that is not the certificate's, expired, over the
/// cloud's limits) and the load balancer keeps serving the certificate it had from it: the
/// controller says it in `LoadBalancerReady` too, until the Secret is usable again.
pub const CERTIFICATE_SECRET_UNUSABLE: &str = "CertificateSecretUnusable";

/// The reasons of the warnings the `LoadBalancerReady` condition carries while they hold (some
/// eligible nodes get no traffic; a certificate Secret cannot be used), in the order the
/// condition prefers them.
pub const LEFT_OUT_REASONS: [&str; 4] = [
    NO_NODE_IN_ZONE,
    NODES_OUTSIDE_ZONE,
    TARGETS_LEFT_OUT,
    CERTIFICATE_SECRET_UNUSABLE,
];

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
    /// a node can serve it (its health checks follow kube-proxy), whatever
    /// [`ServiceRef::kube_proxy_unreachable`] says; `None` when they do not. The controller probes
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

    /// The annotations this provider writes on Services through [`ServiceRef::recorder`]:
    /// records, not wishes, so the controller does not take their change for a change of the
    /// Service.
    fn recorded_annotations(&self) -> &'static [&'static str] {
        &[]
    }

    /// The TLS Secrets (names, in the Service's namespace) this Service's load balancer takes
    /// certificates from, so the controller reconciles it when one changes. Pure: no call.
    fn certificate_secrets(&self, _svc: &ServiceRef) -> Vec<String> {
        Vec::new()
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
