//! The process runtime: parse config → telemetry → clients → admin server → leader gate → controller.
//!
//! Controllers implement only their reconcile logic and hand a closure to [`Runtime::run`]; tests build
//! a [`Runtime`] around their own `kube::Client` and CancellationToken with [`Runtime::new`].

use std::future::Future;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::EventType;
use prometheus_client::registry::Registry;
use tokio_util::sync::CancellationToken;

use crate::admin::{self, Readiness};
use crate::budget::ApiBudget;
use crate::config::{CommonArgs, Config, ConfigError, MetricsServing, Problems};
use crate::events::Events;
use crate::info::ControllerInfo;
use crate::leader::LeaderGate;
use crate::metrics::{
    CloudStatsCollector, CredentialsCollector, KitMetrics, KubeApiMetrics, PlannedWritesCollector,
    Registries,
};
use crate::telemetry;
use crate::upstream_metrics::{ApiFamiliesCollector, ProcessCollector};

/// What a controller gets when it starts (after winning the Lease).
#[derive(Clone)]
pub struct Context {
    /// Kubernetes client.
    pub client: kube::Client,
    /// Validated configuration.
    pub config: Arc<Config>,
    /// The process's event publisher.
    pub events: Events,
    /// Kit metrics (reconcile counters, queue depth, ...).
    pub metrics: KitMetrics,
    /// Flip `set_synced(true)` once the reflector stores are ready.
    pub readiness: Readiness,
    /// Cancelled on shutdown or lost leadership: stop reconciling and return.
    pub shutdown: CancellationToken,
}

impl Context {
    /// The Event publisher and kit metrics, for a reconciler.
    pub fn reporters(&self) -> crate::events::Reporters {
        crate::events::Reporters {
            events: self.events.clone(),
            kit: self.metrics.clone(),
        }
    }
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// Why [`Runtime::run`] ended with an error.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The Lease was lost; reconciling stopped at once.
    #[error("leadership lost: {0}")]
    LeaseLost(String),
    /// The admin server could not bind.
    #[error("admin server on {addr}: {source}")]
    Admin {
        /// Address.
        addr: SocketAddr,
        /// Cause.
        source: std::io::Error,
    },
    /// The metrics address could not be bound (on a host network, most likely taken by another
    /// controller given the same address).
    #[error(
        "{setting}={addr}: {source} (on a shared host network each controller needs its own \
         address; unset it to serve /metrics on the admin port)"
    )]
    Metrics {
        /// The provider's setting that named it (HCCM's metrics address variable).
        setting: &'static str,
        /// Address.
        addr: SocketAddr,
        /// Cause.
        source: std::io::Error,
    },
    /// The controller failed.
    #[error("controller failed: {0:#}")]
    Controller(anyhow::Error),
    /// The configuration is wrong in a way only the cloud could tell (a configured network that does
    /// not exist, a token it refuses): exit code 2, like a flag that does not parse.
    #[error("invalid configuration: {0}")]
    Config(String),
}

/// One controller process (or one in-process instance in tests).
pub struct Runtime {
    info: &'static ControllerInfo,
    config: Arc<Config>,
    client: kube::Client,
    shutdown: CancellationToken,
    registries: Registries,
    metrics: KitMetrics,
    readiness: Readiness,
    instance: Option<String>,
    listener: Option<tokio::net::TcpListener>,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("controller", &self.info.name)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Runtime {
    /// A runtime around an existing client; `shutdown` stops it.
    pub fn new(
        info: &'static ControllerInfo,
        config: Config,
        client: kube::Client,
        shutdown: CancellationToken,
    ) -> Self {
        let mut registries = Registries::default();
        let mut metrics = KitMetrics::register(info.name, &mut registries.ours);
        registries
            .ours
            .register_collector(Box::new(crate::metrics::RuntimeCollector));
        registries
            .upstream
            .register_collector(Box::new(ProcessCollector::default()));
        if let Some(le) = &config.leader_election {
            metrics.register_leader_status(&le.lease_name, &mut registries.upstream);
        }
        if let Some(plan) = &config.planned_writes {
            registries
                .ours
                .register_collector(Box::new(PlannedWritesCollector::new(
                    info.name,
                    plan.clone(),
                )));
            tracing::warn!(
                "shadow mode (--dry-run): planning writes instead of making them; see /plan"
            );
        }
        let client = match &config.planned_writes {
            Some(plan) => crate::dry_run::client(client, plan.clone()),
            None => client,
        };
        let instance = config
            .leader_election
            .as_ref()
            .map(|l| l.identity.clone())
            .or_else(|| std::env::var("POD_NAME").ok())
            .or_else(|| std::env::var("HOSTNAME").ok());
        Self {
            info,
            config: Arc::new(config),
            client,
            shutdown,
            registries,
            metrics,
            readiness: Readiness::default(),
            instance,
            listener: None,
        }
    }

    /// Exposes `metrics` (those the Kubernetes client counts into, see [`kube_client`]) on
    /// `/metrics`, and hands them to the controller through [`Runtime::metrics`].
    pub fn with_kube_api_metrics(mut self, metrics: KubeApiMetrics) -> Self {
        metrics.register(&mut self.registries.ours);
        self.metrics.kube_api = metrics;
        self
    }

    /// The controller's identity.
    pub fn info(&self) -> &'static ControllerInfo {
        self.info
    }
    /// The configuration.
    pub fn config(&self) -> &Arc<Config> {
        &self.config
    }
    /// Cancelled on SIGTERM/SIGINT (before the controller runs; [`Context::shutdown`] after).
    pub fn shutdown(&self) -> &CancellationToken {
        &self.shutdown
    }
    /// The Kubernetes client.
    pub fn client(&self) -> &kube::Client {
        &self.client
    }
    /// Kit metrics.
    pub fn metrics(&self) -> &KitMetrics {
        &self.metrics
    }
    /// Readiness handle (e.g. for tests).
    pub fn readiness(&self) -> Readiness {
        self.readiness.clone()
    }
    /// Where a controller registers its own metrics before [`Runtime::run`]: ours (names get the
    /// `cloud_controllers_` prefix), and upstream's (unprefixed, e.g. k8s.io/cloud-provider's
    /// `service_controller_*`, so that HCCM's dashboards find them).
    pub fn registries_mut(&mut self) -> (&mut Registry, &mut Registry) {
        (&mut self.registries.ours, &mut self.registries.upstream)
    }
    /// Exposes the cloud's call counters and rate-limit budget on `/metrics`, under our names
    /// and under the names the provider declares (Hetzner: hcloud-go's and HCCM's); those of the provider's other APIs (Hetzner's Robot
    /// webservice) as `cloud_controllers_<name>_*`.
    ///
    /// Returns what says when periodic work may run (see [`crate::budget`]).
    pub fn register_cloud_stats(&mut self, cloud: &cloud_client::Cloud) -> ApiBudget {
        self.registries
            .ours
            .register_collector(Box::new(CloudStatsCollector::new(cloud.stats.clone())));
        let budget = ApiBudget::new(
            cloud.stats.clone(),
            self.config.api_budget_floor,
            &mut self.registries.ours,
        );
        if let Some(families) = cloud.api_metric_families {
            self.registries
                .upstream
                .register_collector(Box::new(ApiFamiliesCollector::new(
                    cloud.stats.clone(),
                    families,
                )));
        }
        if let Some(credentials) = &cloud.credentials {
            self.registries
                .ours
                .register_collector(Box::new(CredentialsCollector(credentials.clone())));
            self.readiness.watch_credentials(credentials.clone());
        }
        for (name, stats) in &cloud.other_api_stats {
            self.registries
                .ours
                .register_collector(Box::new(CloudStatsCollector::named(stats.clone(), name)));
        }
        budget
    }

    /// Binds the admin server now (run binds it otherwise) and returns its address.
    pub async fn bind_admin(&mut self) -> Result<SocketAddr, RunError> {
        let addr = self.config.admin_address;
        if self.listener.is_none() {
            let l = tokio::net::TcpListener::bind(addr)
                .await
                .map_err(|source| RunError::Admin { addr, source })?;
            self.listener = Some(l);
        }
        self.listener
            .as_ref()
            .and_then(|l| l.local_addr().ok())
            .ok_or(RunError::Admin {
                addr,
                source: std::io::Error::other("no local address"),
            })
    }

    /// Runs as a controller with nothing to do (its cloud capability is disabled): the admin
    /// endpoints answer, `/readyz` reports idle, and it stops on shutdown. `why` is logged once.
    pub async fn idle(self, why: &str) -> Result<(), RunError> {
        tracing::warn!("{why}; idling");
        self.run(|ctx| async move {
            ctx.readiness.set_idle(true);
            ctx.shutdown.cancelled().await;
            Ok(())
        })
        .await
    }

    /// Serves the admin endpoints, waits for the Lease (when electing), then runs `controller` until
    /// shutdown. Losing the Lease cancels the controller at once and returns [`RunError::LeaseLost`];
    /// a graceful shutdown releases the Lease.
    pub async fn run<F, Fut>(mut self, controller: F) -> Result<(), RunError>
    where
        F: FnOnce(Context) -> Fut,
        Fut: Future<Output = anyhow::Result<()>> + Send + 'static,
    {
        self.bind_admin().await?;
        let listener = self.listener.take().expect("bound above");
        let admin_token = CancellationToken::new();
        let _admin_guard = admin_token.clone().drop_guard();
        let registries = Arc::new(std::mem::take(&mut self.registries));
        let on_admin = match self.config.metrics {
            MetricsServing::OnAdmin => Some(registries.clone()),
            MetricsServing::Off => None,
            MetricsServing::At { addr, setting } => {
                let metrics_listener =
                    tokio::net::TcpListener::bind(addr)
                        .await
                        .map_err(|source| RunError::Metrics {
                            setting,
                            addr,
                            source,
                        })?;
                admin::spawn_server(
                    metrics_listener,
                    admin::metrics_router(registries.clone()),
                    admin_token.clone(),
                );
                None
            }
        };
        admin::spawn_server(
            listener,
            admin::router(
                on_admin,
                self.readiness.clone(),
                self.config.planned_writes.clone(),
            ),
            admin_token.clone(),
        );

        let events = Events::new(
            self.client.clone(),
            self.info.component,
            self.instance.clone(),
        );
        if !self.config.enabled {
            tracing::warn!(
                controller = self.info.canonical,
                "disabled by --controllers; idling"
            );
            self.readiness.set_idle(true);
            self.shutdown.cancelled().await;
            return Ok(());
        }

        let leadership = match &self.config.leader_election {
            Some(le) => {
                self.readiness.set_standby(true);
                let gate = LeaderGate::new(self.client.clone(), le.clone());
                let Some(l) = gate.acquire(&self.shutdown).await else {
                    return Ok(());
                };
                self.readiness.set_standby(false);
                let lease_ref = ObjectReference {
                    api_version: Some("coordination.k8s.io/v1".into()),
                    kind: Some("Lease".into()),
                    name: Some(le.lease_name.clone()),
                    namespace: Some(le.namespace.clone()),
                    ..Default::default()
                };
                events
                    .publish_ref(
                        &lease_ref,
                        EventType::Normal,
                        "LeaderElection",
                        "Elect",
                        format!("{} became leader", le.identity),
                    )
                    .await;
                Some(l)
            }
            None => None,
        };
        self.metrics.set_leader(true);

        let ctrl_token = self.shutdown.child_token();
        let ctx = Context {
            client: self.client.clone(),
            config: self.config.clone(),
            events,
            metrics: self.metrics.clone(),
            readiness: self.readiness.clone(),
            shutdown: ctrl_token.clone(),
        };
        let mut task = tokio::spawn(controller(ctx));
        let shutdown = self.shutdown.clone();
        let drain_deadline = async move {
            shutdown.cancelled().await;
            tokio::time::sleep(Duration::from_secs(20)).await;
        };

        let join = |r: Result<anyhow::Result<()>, tokio::task::JoinError>| match r {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(RunError::Controller(e)),
            Err(e) => Err(RunError::Controller(anyhow::anyhow!(
                "controller task: {e}"
            ))),
        };

        let result = match &leadership {
            Some(l) => tokio::select! {
                r = &mut task => join(r),
                reason = l.lost() => {
                    ctrl_token.cancel();
                    task.abort();
                    self.metrics.set_leader(false);
                    tracing::error!(%reason, "leadership lost; stopped reconciling");
                    return Err(RunError::LeaseLost(reason));
                }
                _ = drain_deadline => {
                    tracing::warn!("controller did not stop within 20s; aborting it");
                    task.abort();
                    Ok(())
                }
            },
            None => tokio::select! {
                r = &mut task => join(r),
                _ = drain_deadline => {
                    tracing::warn!("controller did not stop within 20s; aborting it");
                    task.abort();
                    Ok(())
                }
            },
        };
        ctrl_token.cancel();
        self.metrics.set_leader(false);
        if let Some(l) = leadership {
            l.release().await;
        }
        result
    }
}

/// Process entry point for a controller binary: validates `common` plus the controller's own flags
/// (`extra`, into the same problem list), then runs `start` on a Tokio runtime. Exit codes: 0 clean
/// shutdown, 1 failure or lost Lease, 2 invalid configuration (including [`RunError::Config`]).
pub fn main<T, S, Fut>(
    info: &'static ControllerInfo,
    common: CommonArgs,
    extra: impl FnOnce(&mut Problems) -> T,
    start: S,
) -> ExitCode
where
    S: FnOnce(Runtime, T) -> Fut,
    Fut: Future<Output = Result<(), RunError>>,
{
    crate::allocator::tune();
    crate::crypto::install_crypto_provider();
    let mut problems = Problems::default();
    let config = common.validate_into(info, true, &mut problems);
    let extra = extra(&mut problems);
    let config = match config.and_then(|c| problems.finish(c)) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{}: {e}", info.name);
            return ExitCode::from(2);
        }
    };
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("{}: cannot start the Tokio runtime: {e}", info.name);
            return ExitCode::from(1);
        }
    };
    let _telemetry = rt.block_on(async {
        let guard = telemetry::init(info.name, config.log_format, &config.log_filter);
        crate::cli::warn_ignored(&config.ignored_flags);
        guard
    });
    let code = rt.block_on(async move {
        let shutdown = crate::shutdown::signal_token();
        tokio::spawn(crate::allocator::trim_periodically(shutdown.clone()));
        let kube_api = KubeApiMetrics::default();
        let client = match kube_client(&config, kube_api.clone()).await {
            Ok(c) => c,
            Err(e) => {
                tracing::error!(error = %e, "cannot build the Kubernetes client");
                return ExitCode::from(1);
            }
        };
        tracing::info!(
            controller = info.name,
            version = env!("CARGO_PKG_VERSION"),
            "starting"
        );
        let runtime = Runtime::new(info, config, client, shutdown).with_kube_api_metrics(kube_api);
        match start(runtime, extra).await {
            Ok(()) => {
                tracing::info!("stopped");
                ExitCode::SUCCESS
            }
            Err(e @ RunError::Config(_)) => {
                tracing::error!(error = %e, "exiting");
                eprintln!("{}: {e}", info.name);
                ExitCode::from(2)
            }
            Err(e) => {
                tracing::error!(error = %e, "exiting");
                ExitCode::from(1)
            }
        }
    });
    rt.shutdown_timeout(Duration::from_secs(2));
    code
}

/// The Kubernetes client for `config`: `--kubeconfig` when given, else in-cluster/default
/// inference, `--master` overriding the address. Every request it sends is counted into
/// `metrics`, and waits for the `--kube-api-qps` token bucket when one is set.
pub async fn kube_client(config: &Config, metrics: KubeApiMetrics) -> anyhow::Result<kube::Client> {
    let mut kc = match &config.kubeconfig {
        Some(path) => {
            let kubeconfig = kube::config::Kubeconfig::read_from(path)?;
            kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await?
        }
        None => kube::Config::infer().await?,
    };
    if let Some(master) = &config.master {
        kc.cluster_url = master.parse()?;
    }
    let count = tower::util::MapRequestLayer::new(move |request: http::Request<_>| {
        metrics.count_request(&request);
        request
    });
    let builder = kube::client::ClientBuilder::try_from(kc)?.with_layer(&count);
    Ok(match config.kube_api_rate {
        Some(rate) => builder
            .with_layer(&crate::kube_rate::RateLimitLayer::new(rate))
            .build(),
        None => builder.build(),
    })
}

/// Drives a kube-runtime controller's result stream to its end. Reconcile errors are the
/// controller's `error_policy`'s to log; anything else (watch or queue trouble) is logged here.
///
/// A shutdown that arrives before `store` first listed ends it at once: kube-runtime's runner holds
/// queued work until the store is ready, and once graceful shutdown has cut the watch, that never
/// happens, so the stream would stay pending until the runtime's drain deadline (20 s of a leader
/// holding its Lease while stopping; found by `cargo xtask chaos failover`, which SIGTERMs a leader
/// right after it took over). Nothing can be in flight before the store is ready.
pub async fn drain<T, E, Q, K>(
    results: impl futures::Stream<Item = Result<T, kube::runtime::controller::Error<E, Q>>>,
    controller: &str,
    store: &kube::runtime::reflector::Store<K>,
    shutdown: &CancellationToken,
) where
    E: std::error::Error + 'static,
    Q: std::error::Error + 'static,
    K: kube::runtime::reflector::Lookup + Clone + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    use futures::{FutureExt, StreamExt};
    let all = results.for_each(|r| async move {
        match r {
            Ok(_) | Err(kube::runtime::controller::Error::ReconcilerFailed(..)) => {}
            Err(e) => tracing::warn!(error = %e, controller, "controller stream error"),
        }
    });
    let stopped_before_ready = async {
        shutdown.cancelled().await;
        if store.wait_until_ready().now_or_never().is_some() {
            std::future::pending::<()>().await;
        }
        tracing::info!(
            controller,
            "shutdown before the first list completed: nothing to drain"
        );
    };
    tokio::select! {
        () = all => {}
        () = stopped_before_ready => {}
    }
}

/// Turns a validated-but-failed config into the standard message (for controllers validating later).
pub fn config_error(problems: Vec<String>) -> ConfigError {
    ConfigError { problems }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::runtime::controller::{Action, Controller};
    use kube::runtime::reflector;
    use tokio_util::sync::CancellationToken;

    #[derive(Debug, thiserror::Error)]
    #[error("never")]
    struct Never;

    /// kube-runtime's runner never ends while its store is not ready; `drain` must not wait
    /// for it when the shutdown comes first.
    #[tokio::test]
    async fn shutdown_before_the_store_is_ready_ends_the_drain() {
        let (store, _writer) = reflector::store::<ConfigMap>();
        let shutdown = CancellationToken::new();
        let watch = futures::stream::pending::<Result<ConfigMap, kube::runtime::watcher::Error>>();
        let results = Controller::for_stream(watch, store.clone())
            .graceful_shutdown_on(shutdown.clone().cancelled_owned())
            .run(
                |_: Arc<ConfigMap>, _: Arc<()>| async { Ok::<_, Never>(Action::await_change()) },
                |_, _: &Never, _| Action::await_change(),
                Arc::new(()),
            );
        shutdown.cancel();
        tokio::time::timeout(
            Duration::from_secs(5),
            super::drain(results, "test", &store, &shutdown),
        )
        .await
        .expect("drain returned although the store never became ready");
    }
}
