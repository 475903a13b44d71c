//! Node-controller metrics: k8s.io/cloud-provider's `node_controller_*` histograms under their
//! upstream names, ours under the `cloud_controllers_` prefix.

use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// Registered once per process.
#[derive(Debug, Clone)]
pub struct NodeMetrics {
    /// Seconds from Node creation to removal of the uninitialized taint.
    pub taint_removal_delay: Histogram,
    /// Seconds from Node creation to the end of its initial sync (taint removed + addresses written).
    pub initial_sync_delay: Histogram,
    /// Nodes in the cache still carrying the uninitialized taint (the initialization backlog).
    pub uninitialized_nodes: Gauge,
}

impl NodeMetrics {
    /// Creates the metrics, registering upstream's series in `upstream` and ours in `registry`.
    pub fn register(registry: &mut Registry, upstream: &mut Registry) -> Self {
        let m = Self {
            taint_removal_delay: Histogram::new(exponential_buckets(0.25, 2.0, 14)),
            initial_sync_delay: Histogram::new(exponential_buckets(0.25, 2.0, 14)),
            uninitialized_nodes: Gauge::default(),
        };
        registry.register(
            "node_controller_uninitialized_nodes",
            "Nodes still carrying the uninitialized taint (initialization backlog)",
            m.uninitialized_nodes.clone(),
        );
        upstream.register(
            "node_controller_cloud_provider_taint_removal_delay_seconds",
            "Seconds from Node creation until the uninitialized taint was removed",
            m.taint_removal_delay.clone(),
        );
        upstream.register(
            "node_controller_initial_node_sync_delay_seconds",
            "Seconds from Node creation until its initial sync finished",
            m.initial_sync_delay.clone(),
        );
        m
    }
}
