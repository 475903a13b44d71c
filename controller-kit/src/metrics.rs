//! Prometheus metrics every controller exposes (prometheus-client, no global state).
//!
//! Names (prefix `cloud_controllers_`): `reconciles_total{controller,result}`,
//! `reconcile_duration_seconds{controller}`, `queue_depth{controller}`, `leader{controller}`,
//! `cloud_api_requests_total{endpoint,method,status}`, `cloud_api_rate_limit_remaining`,
//! `cloud_api_budget_remaining`, `deferred_work_total{kind}`, `api_budget_low`,
//! `cloud_api_rate_limit_limit`, `cloud_api_rate_limited_total`, `cloud_api_retries_total`,
//! `cloud_api_token_rotations_total`, `cloud_api_token_refused`, `kube_api_requests_total{verb}`,
//! `watch_events_total{resource}`, `runtime_alive_tasks`, plus
//! whatever a controller registers itself through [`crate::Runtime::registries_mut`]. HCCM's and
//! upstream's families (`hcloud_api_*`, `process_*`, ...) are served next to them under their own
//! names: [`crate::upstream_metrics`].

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Instant;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// Labels of per-controller metrics.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ControllerLabels {
    /// Controller name, e.g. `node-controller`.
    pub controller: String,
}

/// Labels of the reconcile counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabels {
    /// Controller name.
    pub controller: String,
    /// `ok`, `requeue` or an error category (bounded set, from the controller's error type).
    pub result: String,
}

/// Labels of the bad-input counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabels {
    /// Controller name.
    pub controller: String,
    /// Warning event reason, e.g. `InvalidNodeIP`.
    pub reason: String,
}

/// The metrics controller-kit maintains for every controller.
#[derive(Debug, Clone)]
pub struct KitMetrics {
    controller: String,
    reconciles: Family<ResultLabels, Counter>,
    reconcile_duration: Family<ControllerLabels, Histogram>,
    queue_depth: Family<ControllerLabels, Gauge>,
    leader: Family<ControllerLabels, Gauge>,
    warnings: Family<ReasonLabels, Counter>,
    /// client-go's `leader_election_master_status{name}`, with leader election only.
    leader_status: Option<Gauge>,
    pub(crate) kube_api: KubeApiMetrics,
}

impl KitMetrics {
    /// Creates the metrics and registers them.
    pub fn register(controller: &str, registry: &mut Registry) -> Self {
        let m = Self {
            controller: controller.to_string(),
            reconciles: Family::default(),
            reconcile_duration: Family::new_with_constructor(|| {
                Histogram::new(exponential_buckets(0.001, 4.0, 10))
            }),
            queue_depth: Family::default(),
            leader: Family::default(),
            warnings: Family::default(),
            leader_status: None,
            kube_api: KubeApiMetrics::default(),
        };
        registry.register("reconciles", "Reconciles by result", m.reconciles.clone());
        registry.register(
            "reconcile_duration_seconds",
            "Duration of one reconcile",
            m.reconcile_duration.clone(),
        );
        registry.register(
            "queue_depth",
            "Objects waiting for or in reconciliation",
            m.queue_depth.clone(),
        );
        registry.register(
            "leader",
            "1 while this process holds the controller's Lease (or runs without leader election)",
            m.leader.clone(),
        );
        registry.register(
            "bad_input_warnings",
            "Warning events about invalid input on objects, by reason",
            m.warnings.clone(),
        );
        // Make the series visible from the start.
        m.leader_gauge().set(0);
        m.queue_gauge().set(0);
        m
    }

    fn labels(&self) -> ControllerLabels {
        ControllerLabels {
            controller: self.controller.clone(),
        }
    }

    /// Kubernetes API requests and watch events (registered by
    /// [`crate::Runtime::with_kube_api_metrics`]).
    pub fn kube_api(&self) -> &KubeApiMetrics {
        &self.kube_api
    }

    /// Serves client-go's `leader_election_master_status{name="<lease>"}` in `upstream` too.
    pub fn register_leader_status(&mut self, lease: &str, upstream: &mut Registry) {
        let family = Family::<Vec<(String, String)>, Gauge>::default();
        upstream.register(
            "leader_election_master_status",
            "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master. 'name' is the string used to identify the lease. Please make sure to group by name.",
            family.clone(),
        );
        let gauge = family
            .get_or_create(&vec![("name".to_string(), lease.to_string())])
            .clone();
        gauge.set(0);
        self.leader_status = Some(gauge);
    }

    /// Records whether this process leads (or runs without leader election).
    pub fn set_leader(&self, leads: bool) {
        self.leader_gauge().set(i64::from(leads));
        if let Some(g) = &self.leader_status {
            g.set(i64::from(leads));
        }
    }

    /// The leader gauge.
    pub fn leader_gauge(&self) -> Gauge {
        self.leader.get_or_create(&self.labels()).clone()
    }

    /// The queue-depth gauge.
    pub fn queue_gauge(&self) -> Gauge {
        self.queue_depth.get_or_create(&self.labels()).clone()
    }

    /// Counts one reconcile with `result`.
    pub fn count_reconcile(&self, result: &str) {
        self.reconciles
            .get_or_create(&ResultLabels {
                controller: self.controller.clone(),
                result: result.to_string(),
            })
            .inc();
    }

    /// Counts one bad-input warning.
    pub fn count_warning(&self, reason: &str) {
        self.warnings
            .get_or_create(&ReasonLabels {
                controller: self.controller.clone(),
                reason: reason.to_string(),
            })
            .inc();
    }

    /// Starts timing a reconcile; the duration is observed and the result counted when the guard drops
    /// (so early `?` returns are measured too). The queue-depth gauge counts the reconcile while it runs.
    pub fn reconcile_timer(&self) -> ReconcileTimer {
        let queue = self.queue_gauge();
        queue.inc();
        ReconcileTimer {
            metrics: self.clone(),
            start: Instant::now(),
            result: "error",
            queue,
        }
    }
}

/// RAII guard from [`KitMetrics::reconcile_timer`].
#[derive(Debug)]
pub struct ReconcileTimer {
    metrics: KitMetrics,
    start: Instant,
    result: &'static str,
    queue: Gauge,
}

impl ReconcileTimer {
    /// Sets the result label (default `error`, for early returns).
    pub fn set_result(&mut self, result: &'static str) {
        self.result = result;
    }
}

impl Drop for ReconcileTimer {
    fn drop(&mut self) {
        self.queue.dec();
        self.metrics
            .reconcile_duration
            .get_or_create(&self.metrics.labels())
            .observe(self.start.elapsed().as_secs_f64());
        self.metrics.count_reconcile(self.result);
    }
}

/// Exposes cloud-client's [`cloud_client::ClientStats`] as metrics, read at scrape time.
#[derive(Debug)]
pub struct CloudStatsCollector {
    stats: Arc<cloud_client::ClientStats>,
    /// The families' common stem: `cloud_api` (`cloud_api_requests_total`, ...).
    stem: &'static str,
}

impl CloudStatsCollector {
    /// Wraps the stats of the cloud client (`cloud_api_*`).
    pub fn new(stats: Arc<cloud_client::ClientStats>) -> Self {
        Self::named(stats, "cloud_api")
    }

    /// Wraps the stats of another API client, its families named `<stem>_requests_total`, ...
    pub fn named(stats: Arc<cloud_client::ClientStats>, stem: &'static str) -> Self {
        Self { stats, stem }
    }
}

impl Collector for CloudStatsCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let snap = self.stats.snapshot();
        {
            let name = format!("{}_requests", self.stem);
            let mut calls = encoder.encode_descriptor(
                &name,
                "Cloud API calls by endpoint template, method and HTTP status (0 = no response)",
                None,
                MetricType::Counter,
            )?;
            for (key, count) in &snap.calls {
                let labels = [
                    ("endpoint", key.endpoint.clone()),
                    ("method", key.method.clone()),
                    ("status", key.status.to_string()),
                ];
                calls
                    .encode_family(&labels)?
                    .encode_counter::<NoLabelSet, _, u64>(count, None)?;
            }
        }
        if let Some(rl) = snap.rate_limit {
            encoder
                .encode_descriptor(
                    &format!("{}_rate_limit_remaining", self.stem),
                    "Cloud API requests left in the rate-limit budget, as last reported by the cloud",
                    None,
                    MetricType::Gauge,
                )?
                .encode_gauge(&rl.remaining)?;
            encoder
                .encode_descriptor(
                    &format!("{}_rate_limit_limit", self.stem),
                    "Cloud API rate-limit budget size (requests per hour)",
                    None,
                    MetricType::Gauge,
                )?
                .encode_gauge(&rl.limit)?;
        }
        if let (Some(left), Some(rl)) = (self.stats.budget_left(), snap.rate_limit) {
            encoder
                .encode_descriptor(
                    &format!("{}_budget_remaining", self.stem),
                    "Cloud API requests left in the rate-limit budget now: the last reported \
                     remainder plus what refilled since (what --api-budget-floor compares)",
                    None,
                    MetricType::Gauge,
                )?
                .encode_gauge(&(left * rl.limit as f64))?;
        }
        encoder
            .encode_descriptor(
                &format!("{}_rate_limited", self.stem),
                "Cloud API responses with HTTP 429",
                None,
                MetricType::Counter,
            )?
            .encode_counter::<NoLabelSet, _, u64>(&snap.rate_limited, None)?;
        encoder
            .encode_descriptor(
                &format!("{}_retries", self.stem),
                "Cloud API retries performed by the client",
                None,
                MetricType::Counter,
            )?
            .encode_counter::<NoLabelSet, _, u64>(&snap.retries, None)?;
        Ok(())
    }
}

/// Shadow mode's planned writes, read at scrape time: `planned_writes_total{controller,api,operation}`,
/// distinct writes (object and operation) planned so far, as `/plan` lists them.
#[derive(Debug)]
pub struct PlannedWritesCollector {
    controller: &'static str,
    plan: Arc<cloud_client::shadow::PlannedWrites>,
}

impl PlannedWritesCollector {
    pub fn new(controller: &'static str, plan: Arc<cloud_client::shadow::PlannedWrites>) -> Self {
        Self { controller, plan }
    }
}

impl Collector for PlannedWritesCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let mut family = encoder.encode_descriptor(
            "planned_writes",
            "Shadow mode (--dry-run): distinct writes planned instead of made, by API and operation",
            None,
            MetricType::Counter,
        )?;
        for ((api, operation), count) in self.plan.counts() {
            let api = match api {
                cloud_client::shadow::Api::Cloud => "cloud",
                cloud_client::shadow::Api::Kubernetes => "kubernetes",
            };
            let labels = [
                ("controller", self.controller.to_string()),
                ("api", api.to_string()),
                ("operation", operation),
            ];
            family
                .encode_family(&labels)?
                .encode_counter::<NoLabelSet, _, u64>(&count, None)?;
        }
        Ok(())
    }
}

/// The cloud token's rotations and the cloud's verdict on it, read at scrape time:
/// `cloud_api_token_rotations_total` and `cloud_api_token_refused` (1 while the cloud answers the
/// current token with 401).
#[derive(Debug)]
pub struct CredentialsCollector(pub Arc<cloud_client::Credentials>);

impl Collector for CredentialsCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let status = self.0.status();
        encoder
            .encode_descriptor(
                "cloud_api_token_rotations",
                "API tokens swapped in from the token file since start",
                None,
                MetricType::Counter,
            )?
            .encode_counter::<NoLabelSet, _, u64>(&status.rotations, None)?;
        encoder
            .encode_descriptor(
                "cloud_api_token_refused",
                "1 while the cloud API refuses the current token (401) and no call with it has \
                 succeeded since",
                None,
                MetricType::Gauge,
            )?
            .encode_gauge(&i64::from(status.refused))?;
        Ok(())
    }
}

/// Live tokio tasks, read at scrape time: with `process_resident_memory_bytes` and
/// `process_open_fds` (served under their standard names, see [`crate::upstream_metrics`]) the
/// figures that grow when a controller leaks (the soak test watches them).
#[derive(Debug, Default)]
pub struct RuntimeCollector;

impl Collector for RuntimeCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            encoder
                .encode_descriptor(
                    "runtime_alive_tasks",
                    "Tokio tasks alive in this process",
                    None,
                    MetricType::Gauge,
                )?
                .encode_gauge(&(handle.metrics().num_alive_tasks() as i64))?;
        }
        Ok(())
    }
}

/// Labels of the Kubernetes API request counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct VerbLabels {
    /// `get` (reads and lists), `watch`, `create`, `update`, `patch` or `delete`.
    pub verb: String,
}

/// Labels of the watch event counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResourceLabels {
    /// The watched resource, e.g. `nodes`.
    pub resource: String,
}

/// What a controller asks of the apiserver: requests by verb, and the watch events it decodes
/// (each one a whole object, so with the request count the figure that says what a controller
/// costs the apiserver and itself).
#[derive(Debug, Clone, Default)]
pub struct KubeApiMetrics {
    requests: Family<VerbLabels, Counter>,
    watch_events: Family<ResourceLabels, Counter>,
}

impl KubeApiMetrics {
    /// Registers both counters.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "kube_api_requests",
            "Requests sent to the Kubernetes API server, by verb",
            self.requests.clone(),
        );
        registry.register(
            "watch_events",
            "Watch events received and decoded, by resource",
            self.watch_events.clone(),
        );
    }

    /// Counts `request` (the client's tower layer calls this for every request it sends).
    pub fn count_request<B>(&self, request: &http::Request<B>) {
        let watch = request
            .uri()
            .query()
            .is_some_and(|q| q.split('&').any(|p| p == "watch=true" || p == "watch=1"));
        let verb = match *request.method() {
            http::Method::GET if watch => "watch",
            http::Method::GET => "get",
            http::Method::POST => "create",
            http::Method::PUT => "update",
            http::Method::PATCH => "patch",
            http::Method::DELETE => "delete",
            _ => "other",
        };
        self.requests
            .get_or_create(&VerbLabels { verb: verb.into() })
            .inc();
    }

    /// The counter of `resource`'s watch events.
    pub fn watch_events(&self, resource: &str) -> Counter {
        self.watch_events
            .get_or_create(&ResourceLabels {
                resource: resource.into(),
            })
            .clone()
    }
}

/// A gauge fed from an atomic the caller owns (e.g. "uninitialized nodes").
#[derive(Debug, Clone, Default)]
pub struct AtomicGauge(Arc<AtomicI64>);

impl AtomicGauge {
    /// Sets the value.
    pub fn set(&self, v: i64) {
        self.0.store(v, Ordering::Relaxed);
    }
    /// Reads the value.
    pub fn get(&self) -> i64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// A process's two registries: ours, every name prefixed `cloud_controllers_`, and the families
/// served under HCCM's and upstream's own names (see [`crate::upstream_metrics`]).
#[derive(Debug)]
pub struct Registries {
    /// `cloud_controllers_*`.
    pub ours: Registry,
    /// HCCM's and upstream's names, unprefixed.
    pub upstream: Registry,
}

impl Default for Registries {
    fn default() -> Self {
        Self {
            ours: Registry::with_prefix("cloud_controllers"),
            upstream: Registry::default(),
        }
    }
}

/// Renders both registries as one page in the OpenMetrics text format.
pub fn encode(registries: &Registries) -> String {
    use prometheus_client::encoding::text::{encode_eof, encode_registry};
    let mut out = String::new();
    let encoded = encode_registry(&mut out, &registries.ours)
        .and_then(|()| encode_registry(&mut out, &registries.upstream))
        .and_then(|()| encode_eof(&mut out));
    if encoded.is_err() {
        out.clear();
        out.push_str("# encoding failed\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timer_counts_and_observes() {
        let mut reg = Registries::default();
        let m = KitMetrics::register("node-controller", &mut reg.ours);
        {
            let mut t = m.reconcile_timer();
            assert_eq!(m.queue_gauge().get(), 1);
            t.set_result("ok");
        }
        {
            let _t = m.reconcile_timer();
        }
        let stats = cloud_client::ClientStats::new();
        reg.ours
            .register_collector(Box::new(CloudStatsCollector::new(stats)));
        let text = encode(&reg);
        assert!(
            text.contains(
                r#"cloud_controllers_reconciles_total{controller="node-controller",result="ok"} 1"#
            ),
            "{text}"
        );
        assert!(text.contains(r#"result="error"} 1"#), "{text}");
        assert!(text.contains(r#"cloud_controllers_queue_depth{controller="node-controller"} 0"#));
        assert!(
            text.contains("cloud_controllers_cloud_api_retries_total 0"),
            "{text}"
        );
        assert!(text.ends_with("# EOF\n"), "{text}");
    }

    #[tokio::test]
    async fn live_tasks_are_read_at_scrape_time() {
        let mut reg = Registries::default();
        reg.ours.register_collector(Box::new(RuntimeCollector));
        let tasks = |text: &str| -> f64 {
            text.lines()
                .find_map(|l| {
                    l.strip_prefix("cloud_controllers_runtime_alive_tasks")?
                        .trim()
                        .parse()
                        .ok()
                })
                .unwrap_or_else(|| panic!("no tasks in {text}"))
        };
        let before = tasks(&encode(&reg));
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let parked = tokio::spawn(async move { rx.await.ok() });
        assert_eq!(tasks(&encode(&reg)), before + 1.0);
        tx.send(()).unwrap();
        parked.await.unwrap();
    }
}
