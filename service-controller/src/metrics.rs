//! Service-controller metrics (upstream names, under the `cloud_controllers_` prefix).

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// Registered once per process.
#[derive(Debug, Clone)]
pub struct ServiceMetrics {
    /// Target updates after a node-set change (upstream `loadbalancer_sync_total`).
    pub loadbalancer_sync: Counter,
    /// Failed target updates (upstream `nodesync_error_total`).
    pub nodesync_errors: Counter,
    /// Seconds one target update took (upstream `update_loadbalancer_host_latency_seconds`).
    pub update_host_latency: Histogram,
    /// Node-set changes that reached the Services (after coalescing).
    pub node_set_changes: Counter,
    /// Services that currently have a load balancer ensured by this process.
    pub load_balancers: Gauge,
}

impl ServiceMetrics {
    /// Creates and registers the metrics.
    pub fn register(registry: &mut Registry) -> Self {
        let m = Self {
            loadbalancer_sync: Counter::default(),
            nodesync_errors: Counter::default(),
            update_host_latency: Histogram::new(exponential_buckets(0.05, 2.0, 14)),
            node_set_changes: Counter::default(),
            load_balancers: Gauge::default(),
        };
        registry.register(
            "service_controller_loadbalancer_sync",
            "Load balancer target updates after a node-set change",
            m.loadbalancer_sync.clone(),
        );
        registry.register(
            "service_controller_nodesync_error",
            "Load balancer target updates that failed",
            m.nodesync_errors.clone(),
        );
        registry.register(
            "service_controller_update_loadbalancer_host_latency_seconds",
            "Seconds one load balancer target update took",
            m.update_host_latency.clone(),
        );
        registry.register(
            "service_controller_node_set_changes",
            "Changes of the eligible node set, after coalescing",
            m.node_set_changes.clone(),
        );
        registry.register(
            "service_controller_load_balancers",
            "Services whose load balancer this process has ensured",
            m.load_balancers.clone(),
        );
        m
    }
}
