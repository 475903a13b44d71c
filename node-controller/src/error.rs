//! Reconcile errors; every variant names the node and the failing call.

use cloud_client::CloudError;

use crate::nodeip::NodeIpError;

/// Why a node reconcile failed (it is requeued with backoff).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The cloud lookup failed (includes "server not found", with what was tried).
    #[error("node {node}: instance metadata: {source}")]
    Cloud {
        /// Node name.
        node: String,
        /// Cause.
        #[source]
        source: CloudError,
    },
    /// The provided node IP is invalid or not among the cloud's addresses.
    #[error("node {node}: provided node ip is not valid: {source}")]
    NodeIp {
        /// Node name.
        node: String,
        /// Cause.
        #[source]
        source: NodeIpError,
    },
    /// The Node states an address (an annotation) that another Node has.
    #[error("node {node}: the address {address} its annotations state is node {other}'s")]
    AddressConflict {
        /// Node name.
        node: String,
        /// The address.
        address: String,
        /// The Node that has it.
        other: String,
    },
    /// Neither the cloud nor the node has a providerID.
    #[error("node {node}: cloud provider does not set a provider ID")]
    NoProviderId {
        /// Node name.
        node: String,
    },
    /// A Kubernetes write failed.
    #[error("node {node}: {what}: {source}")]
    Kube {
        /// Node name.
        node: String,
        /// The call, e.g. `patch node`.
        what: &'static str,
        /// Cause.
        #[source]
        source: kube::Error,
    },
}

impl Error {
    /// Bounded metric label.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Error::Cloud { source, .. } if source.is_not_found() => "cloud_not_found",
            Error::Cloud { .. } => "cloud_error",
            Error::NodeIp { .. } => "node_ip",
            Error::AddressConflict { .. } => "address_conflict",
            Error::NoProviderId { .. } => "no_provider_id",
            Error::Kube { source, .. } if is_conflict(source) => "conflict",
            Error::Kube { .. } => "kube_error",
        }
    }

    /// True for optimistic-concurrency conflicts (retried quickly: the cache catches up).
    /// The cloud refused a request for the project's rate limit.
    pub fn is_rate_limited(&self) -> bool {
        matches!(self, Error::Cloud { source, .. } if source.is_rate_limited())
    }

    pub fn is_conflict(&self) -> bool {
        matches!(self, Error::Kube { source, .. } if is_conflict(source))
    }
}

/// HTTP 409 from the apiserver.
pub fn is_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409)
}
