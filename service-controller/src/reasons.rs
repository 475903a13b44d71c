//! Event reasons of the service controller (upstream's, so existing alerts and runbooks still match).

/// Before a full ensure (Normal).
pub const ENSURING: &str = "EnsuringLoadBalancer";
/// After a full ensure (Normal).
pub const ENSURED: &str = "EnsuredLoadBalancer";
/// Any failed sync: ensure, cleanup, finalizer or status write (Warning).
pub const SYNC_FAILED: &str = "SyncLoadBalancerFailed";
/// No eligible node: the load balancer is kept without targets (Warning).
pub const UNAVAILABLE: &str = "UnAvailableLoadBalancer";
/// Targets updated after a node-set change (Normal).
pub const UPDATED: &str = "UpdatedLoadBalancer";
/// A target update failed (Warning).
pub const UPDATE_FAILED: &str = "UpdateLoadBalancerFailed";
/// Before deleting the load balancer (Normal).
pub const DELETING: &str = "DeletingLoadBalancer";
/// After cleanup (Normal).
pub const DELETED: &str = "DeletedLoadBalancer";
/// Metric label of invalid Service input (the event itself uses [`SYNC_FAILED`], as upstream).
pub const INVALID_INPUT: &str = "InvalidLoadBalancerInput";
/// Condition reason: the load balancer's health checks fail on every target it has.
pub const NO_HEALTHY_TARGETS: &str = "NoHealthyTargets";
/// Condition reason and metric label: a shared load balancer's port, settings or capacity are
/// another Service's (the event itself uses [`SYNC_FAILED`], as every failed sync).
pub const CONFLICT: &str = "LoadBalancerConflict";
/// kube-proxy's health port answers on no node, so the load balancer checks the NodePort instead
/// (Warning, condition reason while it lasts, and metric label).
pub const KUBE_PROXY_UNREACHABLE: &str = "KubeProxyHealthCheckUnreachable";
/// kube-proxy answers again and the load balancer follows it again (Normal).
pub const KUBE_PROXY_RESTORED: &str = "KubeProxyHealthCheckRestored";
