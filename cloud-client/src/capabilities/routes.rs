//! Routes (upstream Routes): pod-CIDR routes in the cloud's network.

use async_trait::async_trait;

use super::instances::{NodeAddress, NodeRef};
use crate::error::CloudError;

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
