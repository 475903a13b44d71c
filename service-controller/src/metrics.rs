//! Service-controller metrics: k8s.io/cloud-provider's `service_controller_*` series under their
//! upstream names, types and buckets (HCCM's dashboards read them), and ours under the
//! `cloud_controllers_` prefix.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use controller_kit::upstream_metrics::upstream_latency_histogram;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use crate::target_health::TargetHealthBook;

/// Registered once per process.
#[derive(Debug, Clone)]
pub struct ServiceMetrics {
    /// Target updates after a node-set change (upstream `loadbalancer_sync_total`).
    pub loadbalancer_sync: Counter,
    /// Failed target updates (upstream `nodesync_error_total`).
    pub nodesync_errors: Counter,
    /// Seconds one target update took (upstream `update_loadbalancer_host_latency_seconds`).
    pub update_host_latency: Histogram,
    /// Seconds from a node-set change until a load balancer's targets followed it (upstream
    /// `nodesync_latency_seconds`, observed there once per pass over all load balancers).
    pub nodesync_latency: Histogram,
    /// When the node set last changed (set by the node sync, read when targets are updated).
    pub node_set_changed_at: Arc<Mutex<Option<Instant>>>,
    /// Node-set changes that reached the Services (after coalescing).
    pub node_set_changes: Counter,
    /// Changes of a Service's endpoint node set that reached its targets (after the window; see
    /// [`crate::endpoints`]).
    pub endpoint_node_set_changes: Counter,
    /// Services that currently have a load balancer ensured by this process.
    pub load_balancers: Gauge,
    /// Services whose load balancer checks the NodePort because kube-proxy's health port
    /// answered on no node (see [`crate::kube_proxy_probe`]).
    pub kube_proxy_fallbacks: Gauge,
    /// Per Service, its load balancer's targets by health-check state
    /// (`load_balancer_targets{service,state}`).
    pub target_health: Arc<TargetHealthBook>,
}

impl ServiceMetrics {
    /// Creates the metrics, registering upstream's series in `upstream` and ours in `ours`.
    pub fn register(ours: &mut Registry, upstream: &mut Registry) -> Self {
        let m = Self {
            loadbalancer_sync: Counter::default(),
            nodesync_errors: Counter::default(),
            update_host_latency: upstream_latency_histogram(),
            nodesync_latency: upstream_latency_histogram(),
            node_set_changed_at: Arc::default(),
            node_set_changes: Counter::default(),
            endpoint_node_set_changes: Counter::default(),
            load_balancers: Gauge::default(),
            kube_proxy_fallbacks: Gauge::default(),
            target_health: Arc::default(),
        };
        upstream.register(
            "service_controller_loadbalancer_sync",
            "A metric counting the amount of times any load balancer has been configured, as an effect of service/node changes on the cluster",
            m.loadbalancer_sync.clone(),
        );
        upstream.register(
            "service_controller_nodesync_error",
            "A metric counting the amount of times any load balancer has been configured and errored, as an effect of node changes on the cluster",
            m.nodesync_errors.clone(),
        );
        upstream.register(
            "service_controller_update_loadbalancer_host_latency_seconds",
            "A metric measuring the latency for updating each load balancer hosts.",
            m.update_host_latency.clone(),
        );
        upstream.register(
            "service_controller_nodesync_latency_seconds",
            "A metric measuring the latency for nodesync which updates loadbalancer hosts on cluster node updates.",
            m.nodesync_latency.clone(),
        );
        ours.register(
            "service_controller_node_set_changes",
            "Changes of the eligible node set, after coalescing",
            m.node_set_changes.clone(),
        );
        ours.register(
            "service_controller_endpoint_node_set_changes",
            "Changes of the nodes running a Service's endpoints that reached its load balancer's targets (Services that target only those nodes), at most one per Service per --endpoint-sync-window",
            m.endpoint_node_set_changes.clone(),
        );
        ours.register(
            "service_controller_load_balancers",
            "Services whose load balancer this process has ensured",
            m.load_balancers.clone(),
        );
        ours.register(
            "service_controller_kube_proxy_fallbacks",
            "Services whose load balancer checks the NodePort over TCP because kube-proxy's health port answered on no node",
            m.kube_proxy_fallbacks.clone(),
        );
        ours.register(
            "load_balancer_targets",
            "Targets of each Service's load balancer by health-check state, as the cloud reported them at the controller's last read of it",
            m.target_health.gauge(),
        );
        m
    }

    /// Records a node-set change (the start of what `nodesync_latency_seconds` measures).
    pub fn node_set_changed(&self) {
        self.node_set_changes.inc();
        *self
            .node_set_changed_at
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Some(Instant::now());
    }

    /// Records that a load balancer's targets follow the current node set.
    pub fn node_sync_done(&self) {
        let changed = *self
            .node_set_changed_at
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(at) = changed {
            self.nodesync_latency.observe(at.elapsed().as_secs_f64());
        }
    }
}
