//! Event reasons of the lifecycle controller.

/// Node about to be deleted because its server is gone (Normal; upstream's reason).
pub const DELETING_NODE: &str = "DeletingNode";
/// Node deletion failed (Warning; upstream's reason).
pub const DELETING_NODE_FAILED: &str = "DeletingNodeFailed";
/// The server of a node was not found, and the Node is kept (Warning; HCCM's reason).
pub const SERVER_NOT_FOUND: &str = "ServerNotFound";
/// A providerID is malformed or not ours (Warning; HCCM's reason).
pub const UNKNOWN_PROVIDER_ID: &str = "UnknownProviderIDPrefix";
