//! The route controller (upstream `node-route-controller`): a route in the Hetzner network for
//! every node's pod CIDR, pointing at the node's private IP, and the node's `NetworkUnavailable`
//! condition kept in step.
//!
//! Better than upstream: event-driven with a slow safety resync instead of a full pass every 10 s
//! (one network read per pass, no server list); writes serialised per network, so no `423 locked`
//! answers in normal operation; `NetworkUnavailable=True` from the moment a node has a podCIDR; a
//! Warning on the Node for every podCIDR that cannot be routed and why; routes outside
//! `--cluster-cidr` are never touched.

pub mod cidr;
pub mod condition;
pub mod metrics;
pub mod plan;
pub mod reasons;
pub mod sync;

use controller_kit::budget::ApiBudget;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use cloud_client::{Capability, Cloud, Routes};
use controller_kit::first_list::{FirstList, WatchTask};
use controller_kit::slim_node::{SlimNode, SlimNodeStatus};
use controller_kit::watch::slimmed;
use controller_kit::{CommonArgs, Context, ControllerInfo, Problems, RunError, Runtime};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kube::{Api, ResourceExt};

use crate::cidr::ClusterCidrs;
use crate::metrics::RouteMetrics;
use crate::sync::RoutePass;

/// Identity of this controller.
pub const INFO: ControllerInfo = ControllerInfo {
    name: "route-controller",
    canonical: "node-route-controller",
    alias: "route",
    component: "route_controller",
    default_admin_port: 10274,
    node_syncs_default: None,
    reads_load_balancer_settings: false,
};

/// Flags of this controller only (the other binaries accept upstream's without effect).
#[derive(Args, Debug, Clone)]
pub struct RouteArgs {
    /// How long node changes are collected before a pass.
    #[arg(long, default_value = "500ms")]
    pub route_sync_window: String,
    /// The pod network(s): routes are kept for podCIDRs inside it (comma-separated CIDRs).
    #[arg(long)]
    pub cluster_cidr: Option<String>,
    /// Whether routes are configured at all.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub configure_cloud_routes: bool,
    /// Safety resync of the routes besides the node watch (Go duration).
    #[arg(long, default_value = "5m")]
    pub route_reconciliation_period: String,
}

/// Validated settings of this controller; `None` cluster CIDRs = routes disabled.
#[derive(Debug, Clone)]
pub struct Settings {
    /// `--cluster-cidr`, `None` when `--configure-cloud-routes=false`.
    pub cluster: Option<ClusterCidrs>,
    /// Safety resync (`--route-reconciliation-period`).
    pub resync: Duration,
    /// Node-change coalescing window.
    pub window: Duration,
}

impl RouteArgs {
    /// Validates this controller's settings: with routes on, `--cluster-cidr` and what the
    /// provider's routes need are required (upstream crashes later on the first; HCCM silently
    /// runs without routes when its network is missing).
    pub fn validate(&self, common: &CommonArgs, p: &mut Problems) -> Settings {
        let mut cluster = None;
        if self.configure_cloud_routes {
            match self.cluster_cidr.as_deref().map(str::trim) {
                None | Some("") => p.push(
                    "--cluster-cidr is required when routes are configured (--configure-cloud-routes=true, the default): the pod network(s), e.g. 10.244.0.0/16",
                ),
                Some(v) => match ClusterCidrs::parse(v) {
                    Ok(c) => cluster = Some(c),
                    Err(e) => p.push(format!(
                        "--cluster-cidr={v:?}: {e}; expected comma-separated CIDRs, e.g. 10.244.0.0/16"
                    )),
                },
            }
            // The provider says what its routes need (on Hetzner: a network).
            for problem in common.cloud.requirements(Capability::Routes) {
                p.push(problem);
            }
        }
        Settings {
            cluster,
            resync: p.positive_duration(
                "--route-reconciliation-period",
                &self.route_reconciliation_period,
                Duration::from_secs(300),
            ),
            window: p.duration(
                "--route-sync-window",
                &self.route_sync_window,
                Duration::from_millis(500),
            ),
        }
    }
}

/// Runs the controller in `rt` with `cloud` until shutdown (or lost leadership).
pub async fn start(mut rt: Runtime, cloud: Cloud, settings: Settings) -> Result<(), RunError> {
    let budget = rt.register_cloud_stats(&cloud);
    let (ours, upstream) = rt.registries_mut();
    let metrics = RouteMetrics::register(ours, upstream);
    let Some(cluster) = settings.cluster.clone() else {
        return rt
            .idle("routes are disabled (--configure-cloud-routes=false)")
            .await;
    };
    let Some(routes) = cloud.routes.clone() else {
        let why = format!(
            "routes are disabled ({})",
            cloud.why_off(Capability::Routes)
        );
        return rt.idle(&why).await;
    };
    rt.run(move |ctx| run(ctx, routes, cluster, settings, metrics, budget))
        .await
}

/// Keeps only what the controller reads (podCIDRs, providerID, addresses, its own condition).
fn slim(node: &mut SlimNode) {
    node.metadata.managed_fields = None;
    node.metadata.annotations = None;
    node.metadata.labels = None;
    if let Some(status) = node.status.as_mut() {
        let conditions = status.conditions.take().map(|c| {
            c.into_iter()
                .filter(|c| c.type_ == reasons::CONDITION)
                .collect()
        });
        *status = SlimNodeStatus {
            addresses: status.addresses.take(),
            conditions,
        };
    }
}

/// What a pass depends on: a change in any of these triggers one.
fn relevant(node: &SlimNode) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    plan::pod_cidrs(node).hash(&mut h);
    node.spec
        .as_ref()
        .and_then(|s| s.provider_id.as_ref())
        .hash(&mut h);
    node.metadata.deletion_timestamp.is_some().hash(&mut h);
    if let Some(a) = node.status.as_ref().and_then(|s| s.addresses.as_ref()) {
        for a in a {
            (&a.type_, &a.address).hash(&mut h);
        }
    }
    h.finish()
}

/// The controller body: the Node reflector feeding the coalesced pass loop.
pub async fn run(
    ctx: Context,
    routes: Arc<dyn Routes>,
    cluster: ClusterCidrs,
    settings: Settings,
    metrics: RouteMetrics,
    budget: ApiBudget,
) -> anyhow::Result<()> {
    let client = ctx.client.clone();
    let (store, writer) = reflector::store::<SlimNode>();
    let changed = Arc::new(tokio::sync::Notify::new());
    let stream = slimmed(
        Api::<SlimNode>::all(client.clone()),
        ctx.config.node_watcher_config(),
        ctx.metrics.kube_api().watch_events("nodes"),
        slim,
    )
    .reflect(writer);
    // No pass before the first list is complete: the store is empty until then, and a pass
    // planned against it would delete the route of every Node not yet listed. A stop before it
    // is a clean exit.
    let mut watch = {
        let changed = changed.clone();
        let readiness = ctx.readiness.clone();
        // Only changes a pass depends on wake it: our own condition writes do not.
        let mut seen: HashMap<String, u64> = HashMap::new();
        WatchTask::spawn(stream, ctx.shutdown.clone(), move |ev| match ev {
            Ok(watcher::Event::InitDone) => {
                readiness.set_synced(true);
                changed.notify_one();
            }
            Ok(watcher::Event::Apply(n) | watcher::Event::InitApply(n)) => {
                if seen.insert(n.name_any(), relevant(&n)) != Some(relevant(&n)) {
                    changed.notify_one();
                }
            }
            Ok(watcher::Event::Delete(n)) => {
                seen.remove(&n.name_any());
                changed.notify_one();
            }
            Ok(watcher::Event::Init) => {}
            Err(e) => tracing::warn!(error = %e, "node watch error"),
        })
    };
    if watch.first_list(&ctx.shutdown).await == FirstList::Stopping {
        return Ok(());
    }
    tracing::info!(nodes = store.len(), "node cache synced");
    let pass_ctx = Arc::new(
        RoutePass::new(client, store, routes, cluster, ctx.reporters(), metrics)
            .with_api_budget(budget),
    );
    sync::run(
        pass_ctx,
        changed,
        settings.window,
        settings.resync,
        ctx.shutdown.clone(),
    )
    .await;
    watch.abort();
    Ok(())
}

#[cfg(test)]
mod slim_tests {
    use super::*;

    #[test]
    fn the_cache_keeps_everything_a_pass_reads() {
        let full = testenv::KubeletNode {
            node_ip: Some("10.0.0.7".into()),
            provider_id: Some("sim://7".into()),
            uninitialized: false,
            pod_cidr: Some("10.244.7.0/24".into()),
            ..testenv::KubeletNode::new("worker-7")
        }
        .registration();
        let full = SlimNode::from(full);
        let mut slimmed = full.clone();
        slim(&mut slimmed);
        assert_eq!(relevant(&full), relevant(&slimmed));
        assert_eq!(plan::pod_cidrs(&full), plan::pod_cidrs(&slimmed));
        assert_eq!(full.spec, slimmed.spec);
        assert!(slimmed.metadata.labels.is_none());
    }
}
