//! Event reasons of the node controller.

/// Node initialized (Normal; upstream's reason).
pub const SYNCED: &str = "Synced";
/// A node could not be initialized yet (Warning; ours, upstream is silent).
pub const INITIALIZATION_BLOCKED: &str = "NodeInitializationBlocked";
/// The server of a node was not found (Warning; HCCM's reason).
pub const SERVER_NOT_FOUND: &str = "ServerNotFound";
/// The provided node IP is not among the cloud's addresses (Warning).
pub const NODE_IP_NOT_FOUND: &str = "NodeIPNotFound";
/// The provided node IP annotation cannot be parsed (Warning).
pub const INVALID_NODE_IP: &str = "InvalidNodeIP";
/// A providerID is malformed or not ours (Warning; HCCM's reason).
pub const UNKNOWN_PROVIDER_ID: &str = "UnknownProviderIDPrefix";
/// A cloud lookup failed (Warning; HCCM's reason).
pub const INSTANCE_LOOKUP_FAILED: &str = "InstanceLookupFailed";
/// A node with neither the uninitialized taint nor a providerID: its kubelet does not run with
/// `--cloud-provider=external` (or the taint was removed by hand), so it is never initialized
/// (Warning, once per node and process; ours, upstream is silent).
pub const NOT_INITIALIZED_BY_CLOUD_PROVIDER: &str = "NotInitializedByCloudProvider";
/// An address a Node's annotations state is another Node's (Warning; ours).
pub const NODE_ADDRESS_CONFLICT: &str = "NodeAddressConflict";
/// kubelet's node IP is not the server's and was kept, as accepted (Normal, once; ours).
pub const NODE_IP_OUTSIDE_CLOUD: &str = "NodeIPOutsideCloud";
/// The Node's label accepts a node IP outside the cloud, but its node IP is the server's own
/// (Warning; ours).
pub const NODE_IP_OUTSIDE_CLOUD_UNNEEDED: &str = "NodeIPOutsideCloudUnneeded";
