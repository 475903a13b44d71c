//! Instances (upstream InstancesV2): what a controller asks the cloud about a Node.

use std::collections::BTreeMap;
use std::fmt;

use async_trait::async_trait;

use super::warning::Warning;
use crate::error::CloudError;

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
