//! One Service's reconcile: clean up, or ensure its load balancer, or update its targets, or do
//! nothing, depending on what changed since this process last applied it (see [`crate::applied`]).

use controller_kit::budget::{ASK_AGAIN_AFTER, ApiBudget, Deferrable, RATE_LIMITED_RETRY};
use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use cloud_client::{
    CERTIFICATE_SECRET_UNUSABLE, LEFT_OUT_REASONS, LbNode, LoadBalancers, NO_NODE_IN_ZONE,
    ServiceRef, Warning,
};
use controller_kit::backoff::{Backoff, PerObject};
use controller_kit::{Events, KitMetrics, Reporters};
use k8s_openapi::api::core::v1::{Secret, Service};
use kube::ResourceExt;
use kube::runtime::controller::Action;
use kube::runtime::reflector::Store;
use tracing::{Instrument, info, info_span, warn};

use crate::applied::{AppliedSet, Work};
use crate::condition::{self, Want};
use crate::endpoints::EndpointNodes;
use crate::error::Error;
use crate::kube_proxy_probe::{self, KubeProxyProbe, Policy, Verdict};
use crate::metrics::ServiceMetrics;
use crate::nodes::{EligibleSet, NodeCache};
use crate::service::{self, ClassFilter};
use crate::{nodes, patches, reasons, source_ranges};

mod cleanup;
mod ensure;

/// Shared state of the reconciler.
pub struct ServiceReconciler {
    /// Kubernetes client (Service patches go through `services/status`).
    pub client: kube::Client,
    /// The cloud's load balancers.
    pub lbs: Arc<dyn LoadBalancers>,
    /// What the load balancers target the Nodes by, and the eligible set.
    pub nodes: Arc<NodeCache>,
    /// Which `loadBalancerClass` values are ours.
    pub classes: ClassFilter,
    /// What was last applied per Service.
    pub applied: AppliedSet,
    /// Event publisher.
    pub events: Events,
    /// Kit metrics.
    pub kit: KitMetrics,
    /// Controller metrics.
    pub metrics: ServiceMetrics,
    /// Failures in a row per Service UID: 5 s doubling to 5 min (upstream's figures).
    failures: PerObject<String>,
    /// Shadow mode (`--dry-run`): writes are planned, conditions left alone.
    pub dry_run: bool,
    /// The Service cache, to name the Service a shared load balancer's conflict is with.
    services: Option<Store<Service>>,
    /// `--refuse-unenforced-source-ranges` (see [`source_ranges`]).
    refuse_unenforced_source_ranges: bool,
    /// Whether kube-proxy answers the health checks that would ask it (see [`kube_proxy_probe`]).
    kube_proxy: KubeProxyProbe,
    /// Per Service UID, the provider's last word on eligible nodes its load balancer leaves out
    /// ([`LEFT_OUT_REASONS`]: a type's target limit, another zone; and a certificate Secret that
    /// cannot be used): the first reason and every
    /// such message, kept until an ensure or target update says otherwise, since an unchanged
    /// Service is not ensured again.
    left_out: Mutex<HashMap<String, (&'static str, String)>>,
    /// Whether drift checks may run now (see `controller_kit::budget`).
    budget: ApiBudget,
    /// The nodes running each Service's endpoints, for load balancers that target only those.
    endpoints: Arc<EndpointNodes>,
    /// The labelled TLS Secrets (`--certificate-secrets`), for certificates from Secrets.
    tls_secrets: Option<Store<Secret>>,
}

impl std::fmt::Debug for ServiceReconciler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceReconciler")
            .field("classes", &self.classes)
            .finish_non_exhaustive()
    }
}

impl ServiceReconciler {
    /// A reconciler context.
    pub fn new(
        client: kube::Client,
        lbs: Arc<dyn LoadBalancers>,
        nodes: Arc<NodeCache>,
        classes: ClassFilter,
        drift_period: Duration,
        Reporters { events, kit }: Reporters,
        metrics: ServiceMetrics,
    ) -> Self {
        Self {
            client,
            lbs,
            nodes,
            classes,
            applied: AppliedSet::new(drift_period),
            events,
            kit,
            failures: PerObject::new(Backoff::new(
                Duration::from_secs(5),
                Duration::from_secs(300),
            )),
            dry_run: false,
            services: None,
            refuse_unenforced_source_ranges: false,
            kube_proxy: KubeProxyProbe::new(metrics.kube_proxy_fallbacks.clone()),
            left_out: Mutex::default(),
            metrics,
            budget: ApiBudget::unlimited(),
            endpoints: Arc::default(),
            tls_secrets: None,
        }
    }

    /// Where the labelled TLS Secrets are read (`None`: the controller reads no Secrets).
    pub fn with_tls_secrets(mut self, secrets: Option<Store<Secret>>) -> Self {
        self.tls_secrets = secrets;
        self
    }

    /// Where the nodes running each Service's endpoints are read (the EndpointSlice watch).
    pub fn with_endpoint_nodes(mut self, endpoints: Arc<EndpointNodes>) -> Self {
        self.endpoints = endpoints;
        self
    }

    /// The nodes `svc`'s load balancer targets, and their fingerprint: every eligible node, or,
    /// when the provider targets only nodes running the Service's endpoints, those of them (see
    /// [`crate::endpoints`]). `None` while the EndpointSlices are not listed yet.
    fn targets<'a>(
        &self,
        sref: &ServiceRef,
        eligible: &'a EligibleSet,
    ) -> Option<(Cow<'a, [LbNode]>, u64)> {
        let (namespace, name) = (&sref.namespace, &sref.name);
        if !self.lbs.targets_nodes_with_endpoints(sref) {
            self.endpoints.unfollow(namespace, name);
            return Some((Cow::Borrowed(&eligible.nodes), eligible.fingerprint));
        }
        let with_endpoints = self.endpoints.follow(namespace, name)?;
        let nodes: Vec<LbNode> = eligible
            .nodes
            .iter()
            .filter(|n| with_endpoints.contains(&n.name))
            .cloned()
            .collect();
        let fingerprint = nodes::fingerprint(&nodes);
        Some((Cow::Owned(nodes), fingerprint))
    }

    /// Says when drift checks may run (they wait while the cloud API budget is low).
    pub fn with_api_budget(mut self, budget: ApiBudget) -> Self {
        self.budget = budget;
        self
    }

    /// Remembers what the provider said, this time, about nodes the load balancer leaves out
    /// and unusable certificate Secrets. A targets update (`full` false) reads no Secret, so it
    /// keeps a certificate note the last full ensure left.
    fn note_left_out(&self, uid: &str, warnings: &[Warning], full: bool) {
        let mut left_out = self.left_out.lock().unwrap_or_else(PoisonError::into_inner);
        let certificate_note = left_out
            .get(uid)
            .filter(|(reason, _)| !full && *reason == CERTIFICATE_SECRET_UNUSABLE)
            .cloned();
        let said = LEFT_OUT_REASONS.iter().filter_map(|reason| {
            let w = warnings.iter().find(|w| w.reason == *reason)?;
            Some((*reason, w.message.as_str()))
        });
        let mut first = None;
        let mut messages = Vec::new();
        for (reason, message) in said {
            first.get_or_insert(reason);
            messages.push(message);
        }
        match (first, certificate_note) {
            (Some(reason), _) => left_out.insert(uid.to_owned(), (reason, messages.join(". "))),
            (None, Some(kept)) => left_out.insert(uid.to_owned(), kept),
            (None, None) => left_out.remove(uid),
        };
    }

    /// Why and which nodes `uid`'s load balancer leaves out, as the provider said it.
    fn left_out(&self, uid: &str) -> Option<(&'static str, String)> {
        self.left_out
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(uid)
            .cloned()
    }

    /// Refuse, instead of warn about, source ranges the load balancers cannot enforce.
    pub fn refusing_unenforced_source_ranges(mut self, refuse: bool) -> Self {
        self.refuse_unenforced_source_ranges = refuse;
        self
    }

    /// The ranges `svc` restricts its load balancer to that the provider cannot enforce, with
    /// why; `None` when there are none (or they are enforced).
    fn unenforced_source_ranges(
        &self,
        svc: &Service,
    ) -> Option<(source_ranges::Ranges, &'static str)> {
        let why = self.lbs.unenforced_source_ranges()?;
        Some((source_ranges::restricting(svc)?, why))
    }

    /// Conflict messages name other Services from this cache (else by UID).
    pub fn with_services(mut self, services: Store<Service>) -> Self {
        self.services = Some(services);
        self
    }

    /// The Service as the load-balancer provider sees it: one per reconcile, asked everything,
    /// so the provider reads its annotations once.
    fn service_ref(&self, svc: &Service) -> ServiceRef {
        let mut r = service::service_ref(svc);
        if let Some(store) = &self.services {
            r.names = service::names(store.clone());
        }
        r.kube_proxy_unreachable = self.kube_proxy.is_falling_back(&r.uid);
        r.tls_secrets = crate::certificate_secrets::lookup(self.tls_secrets.clone(), &r.namespace);
        // A shadow writes nothing, so it records nothing either: the provider does without.
        if !self.dry_run {
            r.recorder = patches::recorder(&self.client, svc);
        }
        r
    }

    /// Shadow mode: writes are planned (see [`cloud_client::shadow`]), conditions left alone.
    pub fn in_dry_run(mut self, dry_run: bool) -> Self {
        self.dry_run = dry_run;
        self
    }

    fn forget(&self, svc: &Service) {
        let uid = svc.uid().unwrap_or_default();
        if self.applied.forget(&uid) {
            self.metrics.load_balancers.set(self.applied.len() as i64);
        }
        self.metrics.target_health.forget(&uid);
        self.kube_proxy.set_falling_back(&uid, false);
        self.left_out
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&uid);
        self.failures.succeeded(&uid);
        self.endpoints
            .unfollow(&svc.namespace().unwrap_or_default(), &svc.name_any());
    }
}

/// Reconciles one Service.
pub async fn reconcile(svc: Arc<Service>, ctx: Arc<ServiceReconciler>) -> Result<Action, Error> {
    let span = info_span!("reconcile", service = %service::key(&svc));
    async move {
        let mut timer = ctx.kit.reconcile_timer();
        let result = sync(&svc, &ctx).await;
        report_condition(&svc, &ctx, &result).await;
        match &result {
            Ok(_) => {
                timer.set_result("ok");
                ctx.failures.succeeded(&svc.uid().unwrap_or_default());
            }
            Err(e) => {
                timer.set_result(e.metric_label());
                if e.is_bad_input() {
                    ctx.kit.count_warning(reasons::INVALID_INPUT);
                }
                if e.is_conflict() {
                    ctx.kit.count_warning(reasons::CONFLICT);
                }
            }
        }
        result
    }
    .instrument(span)
    .await
}

/// Keeps the Service's [`condition`] true to what this reconcile found: one status patch when it
/// changed, none otherwise; removed once the Service is no longer ours to serve. A failed write
/// is logged and left to the next reconcile (the load balancer work itself is done).
async fn report_condition(svc: &Service, ctx: &ServiceReconciler, result: &Result<Action, Error>) {
    // A shadow reports through /plan; the condition belongs to the acting controller.
    if ctx.dry_run {
        return;
    }
    let serving = service::wants_load_balancer(svc, &ctx.classes)
        && svc.metadata.deletion_timestamp.is_none();
    let write = if !serving {
        if condition::current(svc).is_none() {
            return;
        }
        condition::remove(&ctx.client, svc).await
    } else {
        let want = match result {
            Err(e) => Want::failed(e),
            Ok(_) if ctx.nodes.eligible().nodes.is_empty() => Want::unavailable(),
            Ok(_) => {
                let uid = svc.uid().unwrap_or_default();
                let want = Want::ready(ctx.metrics.target_health.get(&uid));
                let left_out = ctx.left_out(&uid);
                if want.ready && ctx.kube_proxy.is_falling_back(&uid) {
                    want.because(reasons::KUBE_PROXY_UNREACHABLE)
                        .noting(kube_proxy_probe::FALLING_BACK_NOTE)
                } else if let Some((NO_NODE_IN_ZONE, note)) = left_out {
                    Want::not_serving(NO_NODE_IN_ZONE, note)
                } else if let Some((reason, note)) = left_out.filter(|_| want.ready) {
                    want.because(reason).noting(&note)
                } else {
                    want
                }
            }
        };
        let want = match ctx.unenforced_source_ranges(svc) {
            Some((ranges, why)) if result.is_ok() => {
                want.noting(&source_ranges::not_enforced(&ranges, why))
            }
            _ => want,
        };
        if !condition::needs_write(svc, &want) {
            return;
        }
        condition::write(&ctx.client, svc, &want).await
    };
    if let Err(e) = write {
        warn!(service = %service::key(svc), error = %e, "updating the Service condition failed");
    }
}

/// Requeue policy: invalid input waits for the Service to change (its Warning says what to fix);
/// a refusal for the cloud's rate limit is tried again soon, at a fixed pace (see
/// [`RATE_LIMITED_RETRY`]); a write the cloud refused as unprocessable (`422`) waits at least a
/// drift-check period; everything else backs off per Service, 5 s doubling to 5 min (upstream),
/// or longer when the cloud's rate limit asks for it.
pub fn error_policy(svc: Arc<Service>, err: &Error, ctx: Arc<ServiceReconciler>) -> Action {
    if err.is_dry_run() {
        // Planned, not made: look again later (the plan keeps one entry per write).
        return Action::requeue(DRY_RUN_RECHECK);
    }
    if err.is_bad_input() {
        warn!(service = %service::key(&svc), error = %err, "invalid load balancer configuration; waiting for the Service to change");
        return Action::await_change();
    }
    if err.is_rate_limited() {
        let delay = err
            .retry_after()
            .map_or(RATE_LIMITED_RETRY, |r| r.max(RATE_LIMITED_RETRY));
        info!(service = %service::key(&svc), retry_in = ?delay, "refused for the cloud's rate limit; trying again soon");
        return Action::requeue(delay);
    }
    let (n, backoff) = ctx.failures.failed(svc.uid().unwrap_or_default());
    let mut delay = err.retry_after().map_or(backoff, |r| r.max(backoff));
    if err.is_refused_as_unprocessable() {
        // Sent again as it is, it is refused again: once per drift-check period at most, the
        // pace at which an unchanged Service is looked at anyway.
        delay = delay.max(ctx.applied.drift_period());
    }
    warn!(service = %service::key(&svc), error = %err, attempt = n, retry_in = ?delay, "reconcile failed");
    Action::requeue(delay)
}

/// How soon a Service that targets the nodes of its endpoints is looked at again while the
/// EndpointSlices are not listed yet.
const ENDPOINTS_NOT_LISTED_RECHECK: Duration = Duration::from_secs(2);

/// Shadow mode: how soon a Service whose write was planned is looked at again.
const DRY_RUN_RECHECK: Duration = Duration::from_secs(60);

async fn sync(svc: &Service, ctx: &ServiceReconciler) -> Result<Action, Error> {
    let key = service::key(svc);
    if service::needs_cleanup(svc, &ctx.classes) {
        let reason = format!("Service {key}: deleted or no longer a load balancer of ours");
        cloud_client::shadow::with_reason(reason, ctx.cleanup(svc)).await?;
        return Ok(Action::await_change());
    }
    // Not ours, or terminating without our finalizer: adding one now would be refused by the
    // apiserver and loop forever (kubernetes/cloud-provider-gcp#981), and there is nothing to clean.
    if !service::wants_load_balancer(svc, &ctx.classes) || svc.metadata.deletion_timestamp.is_some()
    {
        ctx.forget(svc);
        return Ok(Action::await_change());
    }
    let uid = svc.uid().unwrap_or_default();
    let mut sref = ctx.service_ref(svc);
    let eligible = ctx.nodes.eligible();
    let Some((nodes, fingerprint)) = ctx.targets(&sref, &eligible) else {
        info!("waiting for the EndpointSlices to be listed before choosing targets");
        return Ok(Action::requeue(ENDPOINTS_NOT_LISTED_RECHECK));
    };
    let nodes = &*nodes;
    let follows_kube_proxy = follow_kube_proxy(svc, &sref, ctx, nodes).await;
    sref.kube_proxy_unreachable = ctx.kube_proxy.is_falling_back(&uid);
    let sref = &sref;
    let spec = applied_spec(svc, ctx);
    let with_reason = |why: &str| format!("Service {key}: {why}");
    use cloud_client::shadow::with_reason as planned_as;
    let drift_allowed = || ctx.budget.allows(Deferrable::DriftCheck);
    let work = ctx
        .applied
        .work_within_budget(&uid, spec, fingerprint, drift_allowed);
    match work {
        Work::Nothing => {}
        Work::DriftDeferred => return Ok(Action::requeue(ASK_AGAIN_AFTER)),
        Work::Ensure => {
            let why = with_reason("new, changed, or not yet ensured by this process");
            planned_as(why, ctx.ensure(svc, sref, nodes, (spec, true))).await?
        }
        Work::DriftCheck => {
            let why = with_reason("drift check found the load balancer changed");
            planned_as(why, ctx.ensure(svc, sref, nodes, (spec, false))).await?
        }
        Work::UpdateTargets => {
            let why = with_reason("the eligible node set changed");
            planned_as(why, ctx.update_targets(svc, sref, nodes, spec)).await?
        }
    }
    let next = ctx.applied.next_check_in(&uid);
    Ok(Action::requeue(if follows_kube_proxy {
        next.min(kube_proxy_probe::PROBE_PERIOD)
    } else {
        next
    }))
}

/// What decides whether the load balancer needs a full ensure: the Service's spec and whether its
/// health checks fall back from kube-proxy to the NodePort.
fn applied_spec(svc: &Service, ctx: &ServiceReconciler) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    service::spec_hash(svc, ctx.lbs.recorded_annotations()).hash(&mut h);
    ctx.kube_proxy
        .is_falling_back(&svc.uid().unwrap_or_default())
        .hash(&mut h);
    // A certificate Secret that changed (cert-manager renewed it) is a change of the Service.
    if let Some(secrets) = &ctx.tls_secrets {
        crate::certificate_secrets::fingerprints(ctx.lbs.as_ref(), secrets, svc).hash(&mut h);
    }
    h.finish()
}

/// For a Service whose load balancer would ask kube-proxy whether a node can serve: probes
/// kube-proxy on the nodes, records whether the load balancer falls back to the NodePort check,
/// and says so when that changes (a Warning with the cause and the fix, or a Normal Event on the
/// way back). Returns whether the Service's load balancer would ask kube-proxy (it is then looked
/// at again every [`kube_proxy_probe::PROBE_PERIOD`]).
async fn follow_kube_proxy(
    svc: &Service,
    sref: &ServiceRef,
    ctx: &ServiceReconciler,
    nodes: &[LbNode],
) -> bool {
    let uid = &sref.uid;
    let Some(port) = ctx.lbs.kube_proxy_health_port(sref) else {
        ctx.kube_proxy.set_falling_back(uid, false);
        return false;
    };
    let policy = match sref.traffic_policy {
        cloud_client::TrafficPolicy::Cluster => Policy::Cluster,
        cloud_client::TrafficPolicy::Local { .. } => Policy::Local,
    };
    let verdict = ctx.kube_proxy.verdict(port, policy, nodes).await;
    let falls_back = match verdict {
        Verdict::Answers => false,
        Verdict::Unreachable { .. } => true,
        // No node to ask: as it was.
        Verdict::Unknown => ctx.kube_proxy.is_falling_back(uid),
    };
    let was = ctx.kube_proxy.set_falling_back(uid, falls_back);
    let key = service::key(svc);
    if falls_back && !was {
        let note = kube_proxy_probe::unreachable_note(port, policy, verdict);
        warn!(service = %key, "{note}");
        ctx.kit.count_warning(reasons::KUBE_PROXY_UNREACHABLE);
        ctx.events
            .warning(
                svc,
                reasons::KUBE_PROXY_UNREACHABLE,
                "EnsureLoadBalancer",
                note,
            )
            .await;
    } else if was && !falls_back {
        let note = format!(
            "kube-proxy answers its health check on port {port} again: the load balancer asks it again"
        );
        info!(service = %key, "{note}");
        ctx.events
            .normal(
                svc,
                reasons::KUBE_PROXY_RESTORED,
                "EnsureLoadBalancer",
                note,
            )
            .await;
    }
    true
}

fn kube_error(service: &str, what: &'static str, source: kube::Error) -> Error {
    Error::Kube {
        service: service.to_string(),
        what,
        source,
    }
}

/// Upstream's Warning for any failed sync (invalid input reads as what to fix); returns `e`.
async fn sync_failed(svc: &Service, ctx: &ServiceReconciler, e: Error) -> Error {
    ctx.events
        .warning(
            svc,
            reasons::SYNC_FAILED,
            "SyncLoadBalancer",
            format!("Error syncing load balancer: {e}"),
        )
        .await;
    e
}

/// The provider's warnings as events: on the Node they name, else on the Service.
/// `full`: they come from a full ensure (not a targets update or a cleanup).
async fn publish_warnings(
    svc: &Service,
    ctx: &ServiceReconciler,
    warnings: &[Warning],
    full: bool,
) {
    ctx.note_left_out(&svc.uid().unwrap_or_default(), warnings, full);
    for w in warnings {
        warn!(reason = %w.reason, node = w.node.as_deref().unwrap_or(""), "{}", w.message);
        let node = w.node.as_deref().and_then(|n| ctx.nodes.event_target(n));
        match node {
            Some(node) => {
                ctx.events
                    .warning(
                        &node,
                        &w.reason,
                        "EnsureLoadBalancer",
                        format!("{} (Service {})", w.message, service::key(svc)),
                    )
                    .await
            }
            None => {
                ctx.events
                    .warning(svc, &w.reason, "EnsureLoadBalancer", w.message.clone())
                    .await
            }
        }
    }
}
