//! The service controller (upstream `service-lb-controller`): a cloud load balancer for every
//! `type: LoadBalancer` Service, its targets following the eligible nodes, cleaned up through the
//! `service.kubernetes.io/load-balancer-cleanup` finalizer.
//!
//! Better than upstream: a node-set change touches only load balancers whose targets change
//! (coalesced, no Ready-flip churn); a reconcile with nothing changed makes no cloud call; a
//! jittered drift check repairs changes made behind our back; a terminating Service is never given
//! a finalizer; and an opt-in `loadBalancerClass` of our own lets it run next to MetalLB or Cilium.

pub mod applied;
pub mod certificate_secrets;
pub mod condition;
pub mod controller;
pub mod endpoints;
pub mod error;
pub mod kube_proxy_probe;
pub mod metrics;
pub mod node_sync;
pub mod nodes;
pub mod patches;
pub mod reasons;
pub mod service;
pub mod source_ranges;
pub mod target_health;

use controller_kit::budget::ApiBudget;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use cloud_client::{Capability, Cloud, LoadBalancers};
use controller_kit::first_list::{FirstList, WatchTask};
use controller_kit::watch::slimmed;
use controller_kit::{Context, ControllerInfo, Problems, RunError, Runtime};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Secret, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::Api;
use kube::runtime::controller as kctrl;
use kube::runtime::{Controller, WatchStreamExt, reflector, watcher};

use crate::controller::{ServiceReconciler, error_policy, reconcile};
use crate::metrics::ServiceMetrics;
use crate::service::ClassFilter;

/// Identity of this controller.
pub const INFO: ControllerInfo = ControllerInfo {
    name: "service-controller",
    canonical: "service-lb-controller",
    alias: "service",
    component: "service-controller",
    default_admin_port: 10273,
    node_syncs_default: None,
    reads_load_balancer_settings: true,
};

/// Flags of this controller only.
#[derive(Args, Debug, Clone)]
pub struct ServiceArgs {
    /// A `spec.loadBalancerClass` this controller serves in addition to Services without a class
    /// (so it can run next to another load-balancer implementation). Other classes are ignored.
    #[arg(long, env = "SERVICE_LOAD_BALANCER_CLASS")]
    pub load_balancer_class: Option<String>,
    /// How often each load balancer is re-read and repaired when nothing changed (±10 % jitter).
    /// Default 10m.
    #[arg(long)]
    pub load_balancer_drift_check_period: Option<String>,
    /// Upstream's periodic node sync, deprecated there; here it sets the drift check period
    /// unless `--load-balancer-drift-check-period` is given (node changes reach the load
    /// balancers by watch either way).
    #[arg(long)]
    pub node_sync_period: Option<String>,
    /// How long node changes are collected before the load balancers follow them.
    #[arg(long, default_value = "1s")]
    pub node_sync_window: String,
    /// For a Service whose load balancer targets only the nodes running its endpoints: how long
    /// after one change of those nodes the next reaches the targets (a rolling update moves
    /// them one pod at a time).
    #[arg(long, default_value = "5s")]
    pub endpoint_sync_window: String,
    /// Only watch Services in this namespace (tests and sharding; default: all namespaces).
    #[arg(long, hide = true)]
    pub watch_namespace: Option<String>,
    /// Services reconciled concurrently.
    #[arg(long, default_value = "10")]
    pub concurrent_service_syncs: String,
    /// Refuse a Service whose `spec.loadBalancerSourceRanges` the cloud's load balancers cannot
    /// enforce, instead of serving it to every address with a Warning.
    // `--flag`, `--flag=true` and `--flag=false`, as Go's flags and the chart write it.
    #[arg(long, env = "SERVICE_REFUSE_UNENFORCED_SOURCE_RANGES", action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true", default_value_t = false)]
    pub refuse_unenforced_source_ranges: bool,
    /// Read the TLS Secrets Services name for their load balancers' certificates (annotation
    /// `load-balancer.hetzner.cloud/http-certificate-secret`): a watch of the Secrets labelled
    /// `cloud-controllers.io/load-balancer-certificate=true`, which needs list/watch on Secrets.
    #[arg(long, env = "SERVICE_CERTIFICATE_SECRETS", action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true", default_value_t = false)]
    pub certificate_secrets: bool,
}

/// Validated settings of this controller.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Which classes are ours.
    pub classes: ClassFilter,
    /// Drift-check period.
    pub drift_period: Duration,
    /// Node-change coalescing window.
    pub node_sync_window: Duration,
    /// At most one endpoint node-set change per Service per this window (see [`endpoints`]).
    pub endpoint_sync_window: Duration,
    /// Watch only this namespace's Services (tests); `None` = all namespaces.
    pub namespace: Option<String>,
    /// `--concurrent-service-syncs`.
    pub concurrency: u16,
    /// `--refuse-unenforced-source-ranges`.
    pub refuse_unenforced_source_ranges: bool,
    /// `--certificate-secrets`.
    pub certificate_secrets: bool,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            classes: ClassFilter::default(),
            drift_period: Duration::from_secs(600),
            node_sync_window: Duration::from_secs(1),
            endpoint_sync_window: Duration::from_secs(5),
            namespace: None,
            concurrency: 10,
            refuse_unenforced_source_ranges: false,
            certificate_secrets: false,
        }
    }
}

impl ServiceArgs {
    /// Validates into the shared problem list.
    pub fn validate(&self, p: &mut Problems) -> Settings {
        let d = Settings::default();
        let class = self
            .load_balancer_class
            .as_deref()
            .map(str::trim)
            .filter(|c| !c.is_empty());
        if let Some(c) = class
            && !c.contains('/')
        {
            p.push(format!(
                "--load-balancer-class={c:?}: a class must be a label-style name with a prefix, e.g. example.com/internal-vip"
            ));
        }
        Settings {
            classes: ClassFilter {
                own_class: class.map(str::to_string),
            },
            drift_period: match (
                &self.load_balancer_drift_check_period,
                &self.node_sync_period,
            ) {
                (Some(v), _) => {
                    p.positive_duration("--load-balancer-drift-check-period", v, d.drift_period)
                }
                (None, Some(v)) => p.positive_duration("--node-sync-period", v, d.drift_period),
                (None, None) => d.drift_period,
            },
            node_sync_window: p.duration(
                "--node-sync-window",
                &self.node_sync_window,
                d.node_sync_window,
            ),
            endpoint_sync_window: p.duration(
                "--endpoint-sync-window",
                &self.endpoint_sync_window,
                d.endpoint_sync_window,
            ),
            namespace: self.watch_namespace.clone(),
            concurrency: p.int(
                "--concurrent-service-syncs",
                &self.concurrent_service_syncs,
                1,
                1024,
                u64::from(d.concurrency),
            ) as u16,
            refuse_unenforced_source_ranges: self.refuse_unenforced_source_ranges,
            certificate_secrets: self.certificate_secrets,
        }
    }
}

/// Runs the controller in `rt` with `cloud` until shutdown (or lost leadership).
pub async fn start(mut rt: Runtime, cloud: Cloud, settings: Settings) -> Result<(), RunError> {
    let budget = rt.register_cloud_stats(&cloud);
    let (ours, upstream) = rt.registries_mut();
    let metrics = ServiceMetrics::register(ours, upstream);
    let Some(lbs) = cloud.load_balancers.clone() else {
        let why = format!(
            "load balancers are disabled ({})",
            cloud.why_off(Capability::LoadBalancers)
        );
        return rt.idle(&why).await;
    };
    rt.run(move |ctx| run(ctx, lbs, settings, metrics, budget))
        .await
}

/// The controller body: a Node reflector feeding the coalesced node-set trigger, and a Service
/// watch feeding the reconciler.
pub async fn run(
    ctx: Context,
    lbs: Arc<dyn LoadBalancers>,
    settings: Settings,
    metrics: ServiceMetrics,
    budget: ApiBudget,
) -> anyhow::Result<()> {
    let client = ctx.client.clone();
    let cfg = ctx.config.clone();

    // Nodes first: a Service ensured against an empty cache would lose all its targets.
    let node_cache = Arc::new(nodes::NodeCache::default());
    let node_changed = Arc::new(tokio::sync::Notify::new());
    let mut node_events = {
        let changed = node_changed.clone();
        let cache = node_cache.clone();
        let events = ctx.metrics.kube_api().watch_events("nodes");
        // Each Node is read into the cache as it arrives and dropped: nothing to slim.
        let stream = slimmed(
            Api::<Node>::all(client.clone()),
            cfg.node_watcher_config(),
            events,
            |_: &mut Node| {},
        );
        // Only changes of what a load balancer targets wake the node sync: kubelet's status
        // reports (every Node every few minutes) do not.
        WatchTask::spawn(stream, ctx.shutdown.clone(), move |ev| match ev {
            Ok(watcher::Event::Init) => cache.relist(),
            Ok(watcher::Event::InitApply(node)) => {
                cache.apply(&node);
            }
            Ok(watcher::Event::InitDone) => {
                cache.relisted();
                changed.notify_one();
            }
            Ok(watcher::Event::Apply(node)) => {
                if cache.apply(&node) {
                    changed.notify_one()
                }
            }
            Ok(watcher::Event::Delete(node)) => {
                cache.delete(&node);
                changed.notify_one()
            }
            Err(e) => tracing::warn!(error = %e, "node watch error"),
        })
    };
    if node_events.first_list(&ctx.shutdown).await == FirstList::Stopping {
        return Ok(());
    }
    tracing::info!(nodes = node_cache.len(), "node cache synced");

    let services: Api<Service> = match &settings.namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    let (svc_store, svc_writer) = reflector::store::<Service>();
    let readiness = ctx.readiness.clone();
    let events = ctx.metrics.kube_api().watch_events("services");
    let svc_stream = slimmed(services, watcher::Config::default(), events, service::slim)
        .reflect(svc_writer)
        .inspect(move |ev| {
            if matches!(ev, Ok(watcher::Event::InitDone)) {
                readiness.set_synced(true);
            }
        })
        .applied_objects()
        .predicate_filter(
            {
                let recorded = lbs.recorded_annotations();
                move |s: &Service| service::trigger_hash(s, recorded)
            },
            Default::default(),
        );

    let endpoint_nodes = Arc::new(endpoints::EndpointNodes::default());
    let endpoint_events = {
        let cache = endpoint_nodes.clone();
        let slices: Api<EndpointSlice> = match &settings.namespace {
            Some(ns) => Api::namespaced(client.clone(), ns),
            None => Api::all(client.clone()),
        };
        let events = ctx.metrics.kube_api().watch_events("endpointslices");
        // Each slice is read into the node sets as it arrives and dropped.
        let stream = slimmed(slices, watcher::Config::default(), events, |_| {});
        WatchTask::spawn(stream, ctx.shutdown.clone(), move |ev| match ev {
            Ok(watcher::Event::Init) => cache.relist(),
            Ok(watcher::Event::InitApply(s) | watcher::Event::Apply(s)) => cache.apply(&s),
            Ok(watcher::Event::InitDone) => cache.relisted(),
            Ok(watcher::Event::Delete(s)) => cache.delete(&s),
            Err(e) => tracing::warn!(error = %e, "EndpointSlice watch error"),
        })
    };
    let (endpoint_tx, endpoint_rx) = futures::channel::mpsc::unbounded();
    let endpoint_publisher = tokio::spawn(endpoints::publish(
        endpoint_nodes.clone(),
        settings.endpoint_sync_window,
        endpoint_tx,
        metrics.clone(),
        ctx.shutdown.clone(),
    ));

    // The labelled TLS Secrets, and the Services to reconcile when one changes.
    let (secret_store, secret_changes) = if settings.certificate_secrets {
        let secrets: Api<Secret> = match &settings.namespace {
            Some(ns) => Api::namespaced(client.clone(), ns),
            None => Api::all(client.clone()),
        };
        let (store, writer) = reflector::store::<Secret>();
        let events = ctx.metrics.kube_api().watch_events("secrets");
        let config = watcher::Config::default().labels(&certificate_secrets::selector());
        let (services, lbs) = (svc_store.clone(), lbs.clone());
        let changes = slimmed(secrets, config, events, |s: &mut Secret| {
            s.metadata.managed_fields = None;
        })
        .reflect(writer)
        .touched_objects()
        .filter_map(|s| std::future::ready(s.ok()))
        .flat_map(move |s| {
            futures::stream::iter(certificate_secrets::services_naming(
                lbs.as_ref(),
                &services,
                &s,
            ))
        })
        .boxed();
        (Some(store), changes)
    } else {
        (None, futures::stream::empty().boxed())
    };

    let (trigger_tx, trigger_rx) = futures::channel::mpsc::channel(1);
    let node_sync = tokio::spawn(node_sync::run(
        node_cache.clone(),
        node_changed,
        settings.node_sync_window,
        trigger_tx,
        metrics.clone(),
        ctx.shutdown.clone(),
    ));

    let rctx = Arc::new(
        ServiceReconciler::new(
            client,
            lbs,
            node_cache,
            settings.classes,
            settings.drift_period,
            ctx.reporters(),
            metrics,
        )
        .in_dry_run(cfg.planned_writes.is_some())
        .with_services(svc_store.clone())
        .refusing_unenforced_source_ranges(settings.refuse_unenforced_source_ranges)
        .with_api_budget(budget)
        .with_endpoint_nodes(endpoint_nodes)
        .with_tls_secrets(secret_store),
    );
    let results = Controller::for_stream(svc_stream, svc_store.clone())
        .reconcile_all_on(trigger_rx)
        .reconcile_on(endpoint_rx)
        .reconcile_on(secret_changes)
        .with_config(kctrl::Config::default().concurrency(settings.concurrency))
        .graceful_shutdown_on(ctx.shutdown.clone().cancelled_owned())
        .run(reconcile, error_policy, rctx);
    controller_kit::runtime::drain(results, INFO.name, &svc_store, &ctx.shutdown).await;
    node_sync.abort();
    node_events.abort();
    endpoint_publisher.abort();
    endpoint_events.abort();
    Ok(())
}

#[cfg(test)]
mod args_tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: ServiceArgs,
    }

    /// The chart writes `--refuse-unenforced-source-ranges=true`; Go's flags take all three forms.
    #[test]
    fn the_refuse_flag_takes_a_value_as_go_flags_do() {
        for (given, want) in [
            (&["x", "--refuse-unenforced-source-ranges=true"][..], true),
            (&["x", "--refuse-unenforced-source-ranges"], true),
            (&["x", "--refuse-unenforced-source-ranges=false"], false),
            (&["x"], false),
        ] {
            let cli = Cli::try_parse_from(given).unwrap_or_else(|e| panic!("{given:?}: {e}"));
            assert_eq!(cli.args.refuse_unenforced_source_ranges, want, "{given:?}");
        }
    }
}
