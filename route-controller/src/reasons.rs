//! Event reasons and condition values of the route controller.

/// A route could not be created (Warning; upstream's reason).
pub const FAILED_TO_CREATE_ROUTE: &str = "FailedToCreateRoute";
/// podCIDR outside `--cluster-cidr` (Warning; HCCM's reason).
pub const CLUSTER_CIDR_MISCONFIGURED: &str = "ClusterCIDRMisconfigured";
/// IPv6 podCIDR where the provider's routes are IPv4-only, as Hetzner's are (Warning).
pub const IPV6_UNSUPPORTED: &str = "IPv6PodCIDRUnsupported";
/// A podCIDR that does not parse (Warning).
pub const INVALID_POD_CIDR: &str = "InvalidPodCIDR";
/// The node's server is not attached to the network (Warning).
pub const SERVER_NOT_IN_NETWORK: &str = "ServerNotInNetwork";
/// The node's InternalIPs do not include its server's private IP (Warning).
pub const NODE_IP_NOT_IN_NETWORK: &str = "NodeIPNotInNetwork";
/// The network's route limit is reached (Warning).
pub const ROUTE_LIMIT_REACHED: &str = "RouteLimitReached";
/// The cloud network the routes go into does not exist (Warning).
pub const NETWORK_NOT_FOUND: &str = "NetworkNotFound";

/// The node condition this controller owns.
pub const CONDITION: &str = "NetworkUnavailable";
/// Condition reason once the node's routes exist (upstream).
pub const ROUTE_CREATED: &str = "RouteCreated";
/// Condition reason while a route is missing (upstream).
pub const NO_ROUTE_CREATED: &str = "NoRouteCreated";
/// Condition reason while the provider cannot route the node until the operator acts (the
/// message says what to do).
pub const NODE_NOT_ROUTABLE: &str = "NodeNotRoutable";
