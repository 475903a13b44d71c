//! The lifecycle controller (upstream `cloud-node-lifecycle-controller`): deletes NotReady Nodes whose
//! server is positively gone, and keeps `node.cloudprovider.kubernetes.io/shutdown:NoSchedule` on
//! NotReady nodes whose server is powered off.
//!
//! Better than upstream: an opt-out for hybrid clusters (`--exclude-nodes-selector`,
//! `--provider-id-prefixes`), parallel checks with a limit and per-node backoff, and one shared
//! server snapshot for all NotReady nodes.

pub mod filter;
pub mod monitor;
pub mod reasons;

use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use cloud_client::label_selector::LabelSelector;
use cloud_client::{Cloud, Instances};
use controller_kit::slim_node::{SlimNode, SlimNodeStatus};
use controller_kit::watch::slimmed;
use controller_kit::{CommonArgs, Context, ControllerInfo, Problems, RunError, Runtime};
use futures::StreamExt;
use k8s_openapi::api::core::v1::NodeCondition;
use kube::Api;
use kube::runtime::{WatchStreamExt, reflector};

use crate::filter::NodeFilter;
use crate::monitor::Monitor;

/// Identity of this controller.
pub const INFO: ControllerInfo = ControllerInfo {
    name: "lifecycle-controller",
    canonical: "cloud-node-lifecycle-controller",
    alias: "cloud-node-lifecycle",
    component: "cloud-node-lifecycle-controller",
    default_admin_port: 10272,
    node_syncs_default: Some(8),
    reads_load_balancer_settings: false,
};

/// Flags of this controller only.
#[derive(Args, Debug, Clone, Default)]
pub struct LifecycleArgs {
    /// Nodes matching this label selector are never tainted or deleted (hybrid clusters).
    #[arg(long, env = "LIFECYCLE_EXCLUDE_NODES_SELECTOR", default_value = "")]
    pub exclude_nodes_selector: String,
    /// Comma-separated providerID prefixes (e.g. the provider's for its servers); when set, only nodes whose providerID
    /// starts with one of them are managed (nodes without providerID are left alone).
    #[arg(long, env = "LIFECYCLE_PROVIDER_ID_PREFIXES", default_value = "")]
    pub provider_id_prefixes: String,
    /// Period of the NotReady-node pass (Go duration).
    #[arg(long, default_value = "5s")]
    pub node_monitor_period: String,
}

/// The validated [`LifecycleArgs`].
#[derive(Debug, Clone)]
pub struct Settings {
    /// Which nodes this controller may act on.
    pub filter: NodeFilter,
    /// `--node-monitor-period`.
    pub monitor_period: Duration,
}

impl Default for Settings {
    /// Every node, upstream's 5 s period.
    fn default() -> Self {
        Self {
            filter: NodeFilter::default(),
            monitor_period: Duration::from_secs(5),
        }
    }
}

impl LifecycleArgs {
    /// Validates into the shared problem list.
    pub fn validate(&self, common: &CommonArgs, p: &mut Problems) -> Settings {
        let monitor_period = p.positive_duration(
            "--node-monitor-period",
            &self.node_monitor_period,
            Settings::default().monitor_period,
        );
        let exclude = Some(self.exclude_nodes_selector.trim())
            .filter(|s| !s.is_empty())
            .and_then(|s| {
                LabelSelector::parse("--exclude-nodes-selector", s)
                    .map_err(|e| p.push(e.to_string()))
                    .ok()
            });
        let provider_id_prefixes: Vec<String> = self
            .provider_id_prefixes
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect();
        for pre in &provider_id_prefixes {
            if !pre.contains("://") {
                p.push(format!(
                    "--provider-id-prefixes: {pre:?} is not a providerID prefix (e.g. {})",
                    common.cloud.provider_id_example()
                ));
            }
        }
        Settings {
            filter: NodeFilter {
                exclude,
                provider_id_prefixes,
            },
            monitor_period,
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
    rt.register_cloud_stats(&cloud);
    rt.run(move |ctx| run(ctx, instances, settings)).await
}

/// Keeps what the monitor reads: name, labels (the exclusion selector), the spec (providerID,
/// taints) and the Ready condition's status.
fn slim(node: &mut SlimNode) {
    node.metadata.managed_fields = None;
    node.metadata.annotations = None;
    // What to keep, not what to drop: a field a newer kubelet adds is dropped too.
    if let Some(status) = node.status.as_mut() {
        let ready = status.conditions.take().map(|c| {
            c.into_iter()
                .filter(|c| c.type_ == "Ready")
                .map(|c| NodeCondition {
                    type_: c.type_,
                    status: c.status,
                    ..Default::default()
                })
                .collect()
        });
        *status = SlimNodeStatus {
            conditions: ready,
            addresses: None,
        };
    }
}

/// The controller body: a Node reflector and the periodic monitor pass.
pub async fn run(
    ctx: Context,
    instances: Arc<dyn Instances>,
    settings: Settings,
) -> anyhow::Result<()> {
    let cfg = ctx.config.clone();
    let monitor = Arc::new(Monitor::new(
        ctx.client.clone(),
        instances,
        ctx.events.clone(),
        ctx.metrics.clone(),
        settings.filter,
        usize::from(cfg.concurrent_node_syncs),
        settings.monitor_period,
    ));
    let (store, writer) = reflector::store::<SlimNode>();
    let reflector = slimmed(
        Api::<SlimNode>::all(ctx.client.clone()),
        ctx.config.node_watcher_config(),
        ctx.metrics.kube_api().watch_events("nodes"),
        slim,
    )
    .reflect(writer)
    .for_each(|r| async move {
        if let Err(e) = r {
            tracing::warn!(error = %e, "node watch error");
        }
    });
    let shutdown = ctx.shutdown.clone();
    let driver = tokio::spawn(async move {
        tokio::select! {
            _ = shutdown.cancelled() => {}
            _ = reflector => {}
        }
    });

    tokio::select! {
        _ = ctx.shutdown.cancelled() => { driver.abort(); return Ok(()) }
        r = store.wait_until_ready() => r?,
    }
    tracing::info!(nodes = store.len(), "node cache synced");
    ctx.readiness.set_synced(true);
    loop {
        monitor.pass(&store).await;
        tokio::select! {
            _ = ctx.shutdown.cancelled() => break,
            _ = tokio::time::sleep(settings.monitor_period) => {}
        }
    }
    driver.abort();
    Ok(())
}

#[cfg(test)]
mod slim_tests {
    use super::*;

    #[test]
    fn the_cache_keeps_readiness_taints_and_the_provider_id() {
        for ready in [true, false] {
            let full = testenv::KubeletNode {
                node_ip: Some("10.0.0.7".into()),
                provider_id: Some("memory://7".into()),
                ..testenv::KubeletNode::new("worker-7")
            }
            .registration();
            let mut full = SlimNode::from(full);
            if !ready {
                let conditions = full.status.as_mut().unwrap().conditions.as_mut().unwrap();
                let c = conditions.iter_mut().find(|c| c.type_ == "Ready").unwrap();
                c.status = "False".into();
            }
            let mut slimmed = full.clone();
            slim(&mut slimmed);
            assert_eq!(
                monitor::ready_status(&full),
                monitor::ready_status(&slimmed)
            );
            assert_eq!(full.spec, slimmed.spec);
            assert_eq!(full.metadata.labels, slimmed.metadata.labels);
            assert!(slimmed.status.as_ref().unwrap().addresses.is_none());
        }
    }
}
