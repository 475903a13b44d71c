//! Route-controller metrics: k8s.io/cloud-provider's `route_controller_route_sync_total` under its
//! upstream name, ours under the `cloud_controllers_` prefix.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// Labels of the route-write counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WriteLabels {
    /// `create` or `delete`.
    pub op: String,
    /// `ok` or `error`.
    pub result: String,
}

/// Registered once per process.
#[derive(Debug, Clone)]
pub struct RouteMetrics {
    /// Passes over all routes (upstream `route_sync_total`).
    pub route_sync: Counter,
    /// Route writes by operation and result.
    pub writes: Family<WriteLabels, Counter>,
    /// Routes inside the cluster CIDR the cloud reported in the last pass.
    pub routes: Gauge,
    /// Nodes still waiting for a route after the last pass.
    pub pending: Gauge,
    /// 1 while the network holds as many routes as the cloud allows (the last create was
    /// refused for it), else 0.
    pub network_full: Gauge,
}

impl RouteMetrics {
    /// Creates the metrics, registering upstream's series in `upstream` and ours in `registry`.
    pub fn register(registry: &mut Registry, upstream: &mut Registry) -> Self {
        let m = Self {
            route_sync: Counter::default(),
            writes: Family::default(),
            routes: Gauge::default(),
            pending: Gauge::default(),
            network_full: Gauge::default(),
        };
        upstream.register(
            "route_controller_route_sync",
            "A metric counting the amount of times routes have been synced with the cloud provider.",
            m.route_sync.clone(),
        );
        registry.register(
            "route_controller_route_writes",
            "Route writes by operation and result",
            m.writes.clone(),
        );
        registry.register(
            "route_controller_routes",
            "Routes inside the cluster CIDR after the last pass",
            m.routes.clone(),
        );
        registry.register(
            "route_controller_nodes_without_route",
            "Nodes still waiting for a route after the last pass",
            m.pending.clone(),
        );
        registry.register(
            "route_controller_network_full",
            "1 while the network holds as many routes as the cloud allows, else 0",
            m.network_full.clone(),
        );
        m
    }

    /// Counts one route write.
    pub fn count_write(&self, op: &str, ok: bool) {
        self.writes
            .get_or_create(&WriteLabels {
                op: op.to_string(),
                result: if ok { "ok" } else { "error" }.to_string(),
            })
            .inc();
    }
}
