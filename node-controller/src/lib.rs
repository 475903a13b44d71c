//! The node controller (upstream `cloud-node-controller`): initializes Nodes carrying
//! `node.cloudprovider.kubernetes.io/uninitialized` from the cloud's instance metadata, keeps the
//! stable topology labels in line with the beta ones, and refreshes node addresses periodically.
//!
//! Better than upstream: a node stuck in initialization gets a Warning event saying why; many nodes
//! initialize concurrently (`--concurrent-node-syncs`, default 8) from one shared server snapshot.

pub mod address_sync;
pub mod addresses;
pub mod controller;
pub mod error;
pub mod keys;
pub mod labels;
pub mod metrics;
pub mod nodeip;
pub mod reasons;

use controller_kit::budget::ApiBudget;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use cloud_client::{Cloud, Instances};
use controller_kit::watch::slimmed;
use controller_kit::{Context, ControllerInfo, Problems, RunError, Runtime};
use futures::StreamExt;
// The store's Node: only the fields this controller reads (see controller_kit::slim_node).
use controller_kit::slim_node::SlimNode as Node;
use controller_kit::slim_node::SlimNodeStatus;
use kube::Api;
use kube::runtime::controller as kctrl;
use kube::runtime::{Controller, WatchStreamExt, reflector, watcher};

use crate::controller::{NodeReconciler, error_policy, reconcile, relevant_hash};
use crate::metrics::NodeMetrics;

/// Identity of this controller.
pub const INFO: ControllerInfo = ControllerInfo {
    name: "node-controller",
    canonical: "cloud-node-controller",
    alias: "cloud-node",
    component: "cloud-node-controller",
    default_admin_port: 10271,
    node_syncs_default: Some(8),
    reads_load_balancer_settings: false,
};

/// Flags of this controller only.
#[derive(Args, Debug, Clone, Default)]
pub struct NodeArgs {
    /// Period of the address sync (Go duration).
    #[arg(long, default_value = "5m")]
    pub node_status_update_frequency: String,
    /// Parallelism of the address sync; 0 = `--concurrent-node-syncs`.
    #[arg(long, default_value = "0")]
    pub concurrent_node_status_updates: String,
    /// Initialize a Node whose kubelet `--node-ip` is not among its server's addresses (a node
    /// network over WireGuard, Tailscale or a Robot vSwitch): that IP becomes its first InternalIP,
    /// the server's addresses follow. Default: upstream's rule, such a Node stays tainted. The Node
    /// label `cloud-controllers.io/node-ip-outside-cloud=accept` does this for one Node.
    // `--flag`, `--flag=true` and `--flag=false`, as Go's flags and the chart write it.
    #[arg(long, env = "NODE_ACCEPT_NODE_IP_OUTSIDE_CLOUD", action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true", default_value_t = false)]
    pub accept_node_ip_outside_cloud: bool,
}

/// The validated [`NodeArgs`].
#[derive(Debug, Clone)]
pub struct Settings {
    /// `--node-status-update-frequency`.
    pub address_sync_period: Duration,
    /// `--concurrent-node-status-updates`; `None` (given as 0): `--concurrent-node-syncs`.
    pub address_sync_concurrency: Option<u16>,
    /// `--accept-node-ip-outside-cloud`.
    pub accept_node_ip_outside_cloud: bool,
}

impl Default for Settings {
    /// Upstream's defaults.
    fn default() -> Self {
        Self {
            address_sync_period: Duration::from_secs(300),
            address_sync_concurrency: None,
            accept_node_ip_outside_cloud: false,
        }
    }
}

impl NodeArgs {
    /// Validates into the shared problem list.
    pub fn validate(&self, p: &mut Problems) -> Settings {
        let defaults = Settings::default();
        let period = p.positive_duration(
            "--node-status-update-frequency",
            &self.node_status_update_frequency,
            defaults.address_sync_period,
        );
        let concurrency = p.int(
            "--concurrent-node-status-updates",
            &self.concurrent_node_status_updates,
            0,
            1024,
            0,
        ) as u16;
        Settings {
            address_sync_period: period,
            address_sync_concurrency: (concurrency > 0).then_some(concurrency),
            accept_node_ip_outside_cloud: self.accept_node_ip_outside_cloud,
        }
    }
}

/// Runs the controller in `rt` with `cloud` until shutdown (or lost leadership).
pub async fn start(mut rt: Runtime, cloud: Cloud, settings: Settings) -> Result<(), RunError> {
    let Some(instances) = cloud.instances.clone() else {
        return Err(RunError::Controller(anyhow::anyhow!(
            "the cloud provider {} does not support instances",
            cloud.provider_name
        )));
    };
    let budget = rt.register_cloud_stats(&cloud);
    let (ours, upstream) = rt.registries_mut();
    let metrics = NodeMetrics::register(ours, upstream);
    rt.run(move |ctx| run(ctx, instances, metrics, settings, budget))
        .await
}

/// Strips what the controller never reads, to keep the cache small: of the annotations, only
/// kubelet's node IP and the ones the provider reads (`provider_keys`) stay.
fn slim(node: &mut Node, provider_keys: &[&str]) {
    node.metadata.managed_fields = None;
    // What to keep, not what to drop: a field a newer kubelet adds is dropped too.
    if let Some(status) = node.status.as_mut() {
        *status = SlimNodeStatus {
            addresses: status.addresses.take(),
            conditions: None,
        };
    }
    if let Some(a) = node.metadata.annotations.as_mut() {
        a.retain(|k, _| {
            k == keys::ANNOTATION_PROVIDED_NODE_IP || provider_keys.contains(&k.as_str())
        });
    }
}

/// The controller body: a Node watch feeding a reflector store and the reconciler, plus the
/// periodic address sync.
pub async fn run(
    ctx: Context,
    instances: Arc<dyn Instances>,
    metrics: NodeMetrics,
    settings: Settings,
    budget: ApiBudget,
) -> anyhow::Result<()> {
    let client = ctx.client.clone();
    let cfg = ctx.config.clone();
    let (store, writer) = reflector::store::<Node>();
    let provider_keys = instances.node_annotations();
    let rctx = Arc::new(
        NodeReconciler::new(
            client.clone(),
            instances,
            store.clone(),
            ctx.events.clone(),
            ctx.metrics.clone(),
            metrics,
        )
        .accepting_node_ips_outside_cloud(settings.accept_node_ip_outside_cloud),
    );

    // Readiness from the stream itself: kube's `Store::wait_until_ready` wakes only one of several
    // concurrent waiters, and the Controller already waits on it.
    let (synced_tx, synced_rx) = tokio::sync::watch::channel(false);
    let events = ctx.metrics.kube_api().watch_events("nodes");
    let stream = slimmed(
        Api::<Node>::all(client),
        cfg.node_watcher_config(),
        events,
        move |node| slim(node, provider_keys),
    )
    .reflect(writer)
    .inspect(move |ev| {
        if matches!(ev, Ok(watcher::Event::InitDone)) {
            synced_tx.send_replace(true);
        }
    })
    .applied_objects()
    .predicate_filter(
        move |node: &Node| relevant_hash(node, provider_keys),
        Default::default(),
    );

    let readiness = ctx.readiness.clone();
    let ready_store = store.clone();
    let shutdown = ctx.shutdown.clone();
    let mut synced = synced_rx.clone();
    tokio::spawn(async move {
        tokio::select! {
            _ = shutdown.cancelled() => {}
            r = synced.wait_for(|v| *v) => if r.is_ok() {
                tracing::info!(nodes = ready_store.len(), "node cache synced");
                readiness.set_synced(true);
            },
        }
    });
    // Initialization backlog, refreshed every second from the cache; deleted nodes are forgotten
    // by the never-initialized warning too.
    let backlog = {
        let store = store.clone();
        let gauge = rctx.metrics.uninitialized_nodes.clone();
        let rctx = rctx.clone();
        let shutdown = ctx.shutdown.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(std::time::Duration::from_secs(1));
            loop {
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    _ = tick.tick() => {
                        let n = store.state().iter().filter(|n| controller::is_uninitialized(n)).count();
                        gauge.set(n as i64);
                        rctx.forget_deleted(&store);
                    }
                }
            }
        })
    };
    let sync = tokio::spawn(address_sync::run(
        rctx.clone(),
        store.clone(),
        synced_rx,
        settings.address_sync_period,
        settings
            .address_sync_concurrency
            .unwrap_or(cfg.concurrent_node_syncs),
        budget,
        ctx.shutdown.clone(),
    ));

    let results = Controller::for_stream(stream, store.clone())
        .with_config(kctrl::Config::default().concurrency(cfg.concurrent_node_syncs))
        .graceful_shutdown_on(ctx.shutdown.clone().cancelled_owned())
        .run(reconcile, error_policy, rctx);
    controller_kit::runtime::drain(results, INFO.name, &store, &ctx.shutdown).await;
    sync.abort();
    backlog.abort();
    Ok(())
}

#[cfg(test)]
mod slim_tests {
    use super::*;

    /// An initialized Node as kubelet registered it.
    fn kubelet_node() -> k8s_openapi::api::core::v1::Node {
        testenv::KubeletNode {
            node_ip: Some("10.0.0.7".into()),
            labels: vec![("pool".into(), "a".into())],
            provider_id: Some("memory://7".into()),
            ..testenv::KubeletNode::new("worker-7")
        }
        .registration()
    }

    #[test]
    fn the_cache_keeps_everything_reconcile_reads() {
        let registered = kubelet_node();
        let full = Node::from(registered.clone());
        let mut slimmed = full.clone();
        slim(&mut slimmed, &["provider.example/key"]);
        assert_eq!(
            controller::relevant_hash(&full, &["provider.example/key"]),
            controller::relevant_hash(&slimmed, &["provider.example/key"])
        );
        assert_eq!(full.metadata.labels, slimmed.metadata.labels);
        assert_eq!(full.spec, slimmed.spec);
        assert_eq!(
            full.status.as_ref().and_then(|s| s.addresses.clone()),
            slimmed.status.as_ref().and_then(|s| s.addresses.clone())
        );
        let (kept, registered) = (
            serde_json::to_vec(&slimmed).unwrap().len(),
            serde_json::to_vec(&registered).unwrap().len(),
        );
        assert!(kept * 4 < registered, "{kept} of {registered}");
    }
}

#[cfg(test)]
mod args_tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: NodeArgs,
    }

    /// The chart writes `--accept-node-ip-outside-cloud=true`; Go's flags take all three forms.
    #[test]
    fn the_opt_in_flag_takes_a_value_as_go_flags_do() {
        for (given, want) in [
            (&["x", "--accept-node-ip-outside-cloud=true"][..], true),
            (&["x", "--accept-node-ip-outside-cloud"], true),
            (&["x", "--accept-node-ip-outside-cloud=false"], false),
            (&["x"], false),
        ] {
            let cli = Cli::try_parse_from(given).unwrap_or_else(|e| panic!("{given:?}: {e}"));
            assert_eq!(cli.args.accept_node_ip_outside_cloud, want, "{given:?}");
        }
    }
}
