//! The route pass and the loop that schedules it. All writes to the network go through this one
//! loop, as many at once as the provider says (`Routes::support`), each awaited: Hetzner locks a
//! network while a route action runs, so there it is one at a time (parallel writes would only
//! collect `423 locked` answers). Node events are coalesced into one
//! pass; a slow resync catches changes made behind our back.
//!
//! Because every write is ours and goes through here, the routes read at the start of one pass
//! stay true for the next once our writes are applied to them: the network is read again only
//! when something says that view may be wrong — a write failed, or the safety resync is due.

use controller_kit::budget::{ASK_AGAIN_AFTER, ApiBudget, Deferrable, RATE_LIMITED_RETRY};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cloud_client::{CloudError, Route, Routes};
use controller_kit::backoff::{Backoff, PerObject};
use controller_kit::slim_node::SlimNode;
use controller_kit::{Events, KitMetrics, Reporters};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::runtime::reflector::{ObjectRef, Store};
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::cidr::ClusterCidrs;
use crate::condition::{self, Routed};
use crate::metrics::RouteMetrics;
use crate::plan::{self, Create, Plan, Problem};
use crate::reasons;

/// Shared state of the pass.
pub struct RoutePass {
    /// Node API (status patches for the condition).
    pub nodes: Api<Node>,
    /// Node cache.
    pub store: Store<SlimNode>,
    /// The cloud's routes.
    pub routes: Arc<dyn Routes>,
    /// `--cluster-cidr`.
    pub cluster: ClusterCidrs,
    /// Event publisher.
    pub events: Events,
    /// Kit metrics.
    pub kit: KitMetrics,
    /// Controller metrics.
    pub metrics: RouteMetrics,
    /// Nodes whose route creation failed: attempts and when to try again.
    failures: PerObject<String>,
    /// Problems already reported as events (reported again once they went away and came back).
    reported: Mutex<HashSet<(String, &'static str)>>,
    /// The network's routes after the last pass, our writes applied. `None`: the next pass reads
    /// the network (at start, after a failed write, at the safety resync).
    kept: Mutex<Option<Vec<Route>>>,
    /// Whether the safety resync may run now (see `controller_kit::budget`).
    budget: ApiBudget,
}

impl std::fmt::Debug for RoutePass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RoutePass")
            .field("cluster", &self.cluster)
            .finish_non_exhaustive()
    }
}

/// Condition writes sent to the apiserver at once (they are cheap; the routes are serial).
const CONDITION_WRITES_IN_FLIGHT: usize = 16;

/// Backoff after a failed create (per node), delete or route list: 5 s doubling to 5 min.
const RETRY: Backoff = Backoff::new(Duration::from_secs(5), Duration::from_secs(300));

impl RoutePass {
    /// A pass context.
    pub fn new(
        client: kube::Client,
        store: Store<SlimNode>,
        routes: Arc<dyn Routes>,
        cluster: ClusterCidrs,
        Reporters { events, kit }: Reporters,
        metrics: RouteMetrics,
    ) -> Self {
        Self {
            nodes: Api::all(client),
            store,
            routes,
            cluster,
            events,
            kit,
            metrics,
            failures: PerObject::new(RETRY),
            reported: Mutex::new(HashSet::new()),
            kept: Mutex::new(None),
            budget: ApiBudget::unlimited(),
        }
    }

    /// Says when the safety resync may run (it waits while the cloud API budget is low).
    pub fn with_api_budget(mut self, budget: ApiBudget) -> Self {
        self.budget = budget;
        self
    }

    /// Makes the next pass read the network instead of trusting what the last one left (the
    /// safety resync: catches routes changed behind our back).
    pub fn forget_routes(&self) {
        *self.kept.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }

    /// The routes the last pass left, or a fresh read of the network.
    async fn view(&self) -> Result<View, CloudError> {
        let kept = self.kept.lock().unwrap_or_else(|e| e.into_inner()).take();
        Ok(match kept {
            Some(routes) => View {
                routes,
                fresh: false,
                doubtful: false,
                rate_limited: false,
            },
            None => View {
                routes: self.routes.list_routes_unresolved().await?,
                fresh: true,
                doubtful: false,
                rate_limited: false,
            },
        })
    }

    fn earliest_retry(&self) -> Option<Instant> {
        self.failures.earliest_retry().map(Instant::from_std)
    }

    /// Publishes `problems` that were not reported yet; forgets the ones that went away.
    async fn report(&self, problems: &[Problem]) {
        let new: Vec<&Problem> = {
            let mut seen = self.reported.lock().unwrap_or_else(|e| e.into_inner());
            let now: HashSet<(String, &'static str)> = problems
                .iter()
                .map(|p| (p.node.clone(), p.reason))
                .collect();
            seen.retain(|k| now.contains(k));
            problems
                .iter()
                .filter(|p| seen.insert((p.node.clone(), p.reason)))
                .collect()
        };
        for p in new {
            warn!(node = %p.node, reason = p.reason, "{}", p.message);
            self.kit.count_warning(p.reason);
            self.warn_node(&p.node, p.reason, p.message.clone()).await;
        }
    }

    async fn warn_node(&self, node: &str, reason: &str, note: String) {
        if let Some(n) = self.store.get(&ObjectRef::new(node)) {
            self.events
                .warning(n.as_ref(), reason, "CreateRoute", note)
                .await;
        }
    }

    /// Brings every planned node's condition in line before the route writes start (a new node
    /// says NoRouteCreated at once), a few nodes at a time. Returns what was written.
    async fn set_conditions(&self, plan: &Plan) -> HashMap<String, Routed> {
        let routable = plan
            .nodes
            .iter()
            .map(|(n, present)| (n.clone(), if *present { Routed::Yes } else { Routed::No }));
        let unroutable = plan
            .unroutable
            .iter()
            .map(|(n, why)| (n.clone(), Routed::Cannot(why.clone())));
        let due: Vec<(String, Routed)> = routable
            .chain(unroutable)
            .filter(|(n, want)| {
                self.store
                    .get(&ObjectRef::new(n))
                    .is_some_and(|node| condition::needs_write(&node, want))
            })
            .collect();
        futures::stream::iter(due)
            .map(|(node, want)| async move {
                match condition::write(&self.nodes, &node, &want).await {
                    Ok(()) => Some((node, want)),
                    Err(e) => {
                        warn!(%node, error = %e, "writing the NetworkUnavailable condition failed");
                        None
                    }
                }
            })
            .buffer_unordered(CONDITION_WRITES_IN_FLIGHT)
            .filter_map(futures::future::ready)
            .collect()
            .await
    }

    /// Whether the node's condition must be written to say `want`: not when this pass already
    /// wrote it, or the cache shows it.
    fn condition_due(&self, node: &str, want: &Routed, written: &HashMap<String, Routed>) -> bool {
        match written.get(node) {
            Some(w) => w != want,
            None => self
                .store
                .get(&ObjectRef::new(node))
                .is_some_and(|n| condition::needs_write(&n, want)),
        }
    }
}

/// Whether a failed write says the network may not be what we think: the cloud refused it, or we
/// cannot tell what happened. A refusal before any call (no such server, IPv6, an InternalIP
/// outside the network) says nothing about the routes.
fn puts_routes_in_doubt(e: &CloudError) -> bool {
    matches!(
        e,
        CloudError::Api(_)
            | CloudError::ActionFailed { .. }
            | CloudError::RetriesExhausted { .. }
            | CloudError::Timeout { .. }
            | CloudError::Transport { .. }
            | CloudError::Decode { .. }
    )
}

/// The Warning reason for a failed create: bad input gets its own reason (and counts as such).
fn create_failure_reason(e: &CloudError) -> (&'static str, bool) {
    match e {
        CloudError::Inconsistent { .. } => (reasons::SERVER_NOT_IN_NETWORK, true),
        CloudError::InvalidInput { .. } => (reasons::NODE_IP_NOT_IN_NETWORK, true),
        e if e.code() == Some("resource_limit_exceeded") => (reasons::ROUTE_LIMIT_REACHED, true),
        _ => (reasons::FAILED_TO_CREATE_ROUTE, false),
    }
}

/// One pass: list the routes once, delete ours that nobody wants, create the missing ones one by
/// one, and keep each node's condition in step. Returns when a failed node should be retried.
pub async fn pass(ctx: &RoutePass) -> Result<Option<Instant>, CloudError> {
    ctx.metrics.route_sync.inc();
    let mut timer = ctx.kit.reconcile_timer();
    let mut view = match ctx.view().await {
        Ok(v) => v,
        Err(e) => {
            timer.set_result("cloud_error");
            if e.is_not_found() {
                network_not_found(ctx, &e).await;
            }
            return Err(e);
        }
    };
    let plan = {
        let state = ctx.store.state();
        plan::plan(
            state.iter().map(|n| n.as_ref()),
            &view.routes,
            &ctx.cluster,
            |provider_id| ctx.routes.routability(provider_id),
            ctx.routes.support().ipv6_unsupported,
        )
    };
    ctx.report(&plan.problems).await;

    let mut written = ctx.set_conditions(&plan).await;
    let deletes_pending = delete_stale(ctx, &plan, &mut view).await;
    let pending = create_missing(ctx, &plan, &mut view, &mut written).await;

    ctx.metrics.routes.set(
        view.routes
            .iter()
            .filter(|r| ctx.cluster.owns(&r.destination_cidr))
            .count() as i64,
    );
    ctx.metrics.pending.set(pending as i64);
    timer.set_result("ok");
    let (doubtful, fresh) = (view.doubtful, view.fresh);
    if !doubtful {
        *ctx.kept.lock().unwrap_or_else(|e| e.into_inner()) = Some(view.routes);
    }
    // A write that failed against routes this pass did not read may have failed because they
    // were out of date: read them and try again at once, before anyone is warned.
    if doubtful && !fresh {
        return Ok(Some(Instant::now()));
    }
    // The next pass: when a failed node's backoff ends, a failed delete is retried, or a write
    // refused for the rate limit is tried again, whichever comes first.
    let now = Instant::now();
    let retry_deletes = deletes_pending.then(|| now + RETRY.delay(1));
    let retry_rate_limited = view.rate_limited.then(|| now + RATE_LIMITED_RETRY);
    Ok([ctx.earliest_retry(), retry_deletes, retry_rate_limited]
        .into_iter()
        .flatten()
        .min())
}

/// The network's routes as one pass sees them.
struct View {
    routes: Vec<Route>,
    /// Read from the network by this pass, not kept from an earlier one.
    fresh: bool,
    /// A write failed: the network may not be what `routes` says.
    doubtful: bool,
    /// A write was refused for the rate limit: the next pass comes soon.
    rate_limited: bool,
}

async fn network_not_found(ctx: &RoutePass, e: &CloudError) {
    let problems: Vec<Problem> = {
        let state = ctx.store.state();
        state
            .iter()
            .filter(|n| !plan::pod_cidrs(n).is_empty())
            .map(|n| Problem {
                node: kube::ResourceExt::name_any(n.as_ref()),
                reason: reasons::NETWORK_NOT_FOUND,
                message: format!(
                    "no route can be created: the cloud network the routes go into was not found ({e})"
                ),
            })
            .collect()
    };
    ctx.report(&problems).await;
}

/// Deletes stale routes first: it frees room under the network's route limit. Returns whether a
/// delete was not made (the pass is then retried soon).
async fn delete_stale(ctx: &RoutePass, plan: &Plan, view: &mut View) -> bool {
    let mut failed = false;
    for r in &plan.deletes {
        let reason = format!(
            "route {} via {}: no node wants it",
            r.destination_cidr, r.gateway
        );
        match cloud_client::shadow::with_reason(reason, ctx.routes.delete_route(r)).await {
            Ok(()) => {
                ctx.metrics.count_write("delete", true);
                info!(destination = %r.destination_cidr, gateway = %r.gateway, "deleted a route no node wants");
                view.routes
                    .retain(|x| x.destination_cidr != r.destination_cidr);
            }
            // Shadow mode: planned, not made; the pass goes on.
            Err(e) if e.is_dry_run() => failed = true,
            Err(e) => {
                failed = true;
                view.doubtful = true;
                ctx.metrics.count_write("delete", false);
                warn!(destination = %r.destination_cidr, error = %e, "deleting a stale route failed; retrying soon");
            }
        }
    }
    failed
}

/// Creates the missing routes, as many nodes at once as the provider allows
/// ([`RouteSupport::writes_at_once`](cloud_client::RouteSupport), one on Hetzner), writing each
/// node's condition as soon as its routes exist. Returns how many nodes are still without their
/// routes.
async fn create_missing(
    ctx: &RoutePass,
    plan: &Plan,
    view: &mut View,
    written: &mut HashMap<String, Routed>,
) -> usize {
    let mut by_node: HashMap<&str, Vec<&Create>> = HashMap::new();
    for c in &plan.creates {
        by_node.entry(c.node.as_str()).or_default().push(c);
    }
    let mut pending = plan.nodes.iter().filter(|(_, present)| !present).count();
    let mut confirmations = tokio::task::JoinSet::new();
    let due: Vec<(&str, Vec<&Create>, bool)> = plan
        .nodes
        .iter()
        .filter(|(node, present)| !present && !ctx.failures.waiting(node))
        .map(|(node, _)| {
            let blocked = plan
                .problems
                .iter()
                .any(|p| &p.node == node && p.reason == reasons::CLUSTER_CIDR_MISCONFIGURED);
            let creates = by_node.remove(node.as_str()).unwrap_or_default();
            (node.as_str(), creates, blocked)
        })
        .collect();
    let at_once = ctx.routes.support().writes_at_once.max(1);
    'batches: for batch in due.chunks(at_once) {
        // Each node of a batch writes against the routes as they were before the batch: the
        // provider allows that many writes at once, so none of them depends on another's.
        let (before, fresh) = (&view.routes, view.fresh);
        let done = futures::future::join_all(batch.iter().map(|(node, creates, blocked)| {
            create_node(ctx, node, creates, *blocked, before, fresh)
        }))
        .await;
        let mut doubted = false;
        let mut full = false;
        for ((node, _, blocked), made) in batch.iter().zip(done) {
            full |= made.full;
            for route in made.routes {
                view.routes
                    .retain(|r| r.destination_cidr != route.destination_cidr);
                view.routes.push(route);
            }
            view.doubtful |= made.doubtful;
            view.rate_limited |= made.rate_limited;
            if made.stopped {
                doubted = true;
                continue;
            }
            if made.ok {
                pending -= 1;
                ctx.failures.succeeded(&node.to_string());
                // The node learns its route exists without holding up the next route write.
                if ctx.condition_due(node, &Routed::Yes, written) {
                    let (nodes, name) = (ctx.nodes.clone(), node.to_string());
                    confirmations.spawn(async move {
                        let r = condition::write(&nodes, &name, &Routed::Yes).await;
                        (name, r)
                    });
                }
            } else if !blocked && !made.rate_limited {
                ctx.failures.failed(node.to_string());
            }
        }
        // A write failed against kept routes: the pass ends and the next one, at once, reads them.
        if doubted {
            break 'batches;
        }
        // The network is full: every further create would be refused the same way. The nodes
        // not tried wait, unwarned and not backed off, for the next pass, which tries one again
        // (a route deleted meanwhile, or a raised limit, makes room): one call per pass, not
        // one per node.
        ctx.metrics.network_full.set(i64::from(full));
        if full {
            info!(
                "the network holds as many routes as the cloud allows; the other nodes wait for the next pass"
            );
            break 'batches;
        }
    }
    while let Some(done) = confirmations.join_next().await {
        match done {
            Ok((name, Ok(()))) => {
                written.insert(name, Routed::Yes);
            }
            Ok((name, Err(e))) => {
                warn!(node = %name, error = %e, "writing the NetworkUnavailable condition failed")
            }
            Err(e) => warn!(error = %e, "a condition write did not finish"),
        }
    }
    pending
}

/// What [`create_node`] did for one node.
struct NodeRoutes {
    /// The routes it made, as they now are.
    routes: Vec<Route>,
    /// Every route of the node exists.
    ok: bool,
    /// A write failed in a way that says the network may not be what the pass thinks.
    doubtful: bool,
    /// It stopped because a write failed against routes kept from an earlier pass: maybe only
    /// because they were out of date, so the pass ends and the next one reads them first.
    stopped: bool,
    /// The cloud refused a route because the network holds as many as it allows.
    full: bool,
    /// The cloud refused a write for the project's rate limit: the node is tried again soon,
    /// unwarned and not backed off (the refusal says nothing about it).
    rate_limited: bool,
}

/// Creates one node's missing routes one after another against `routes` (read by this pass when
/// `fresh`), warning the node about each that fails for good.
async fn create_node(
    ctx: &RoutePass,
    node: &str,
    creates: &[&Create],
    blocked: bool,
    routes: &[Route],
    fresh: bool,
) -> NodeRoutes {
    let mut out = NodeRoutes {
        routes: Vec::new(),
        ok: !blocked,
        doubtful: false,
        stopped: false,
        full: false,
        rate_limited: false,
    };
    for c in creates {
        let started = std::time::Instant::now();
        let reason = format!(
            "Node {node}: podCIDR {} has no route",
            c.request.destination_cidr
        );
        let created = ctx.routes.create_route_in(&c.request, routes);
        match cloud_client::shadow::with_reason(reason, created).await {
            Ok(route) => {
                ctx.metrics.count_write("create", true);
                debug!(node, destination = %c.request.destination_cidr, "route created");
                out.routes.push(route);
            }
            // Shadow mode: planned, not made; the node waits like one whose create failed.
            Err(e) if e.is_dry_run() => out.ok = false,
            Err(e) if e.is_rate_limited() => {
                ctx.metrics.count_write("create", false);
                debug!(node, error = %e, "creating a route was refused for the rate limit; trying again soon");
                out.ok = false;
                out.rate_limited = true;
                return out;
            }
            Err(e) if !fresh && puts_routes_in_doubt(&e) => {
                ctx.metrics.count_write("create", false);
                out.doubtful = true;
                out.stopped = true;
                info!(node, error = %e, "creating a route failed against the routes kept from the last pass; reading the network and trying again");
                return out;
            }
            Err(e) => {
                ctx.metrics.count_write("create", false);
                out.doubtful |= puts_routes_in_doubt(&e);
                out.ok = false;
                let (reason, bad_input) = create_failure_reason(&e);
                if bad_input {
                    ctx.kit.count_warning(reason);
                }
                out.full |= reason == reasons::ROUTE_LIMIT_REACHED;
                let note = format!(
                    "Could not create route {} {} for node {node} after {:?}: {e}",
                    c.request.name_hint,
                    c.request.destination_cidr,
                    started.elapsed()
                );
                warn!(node, reason, "{note}");
                ctx.warn_node(node, reason, note).await;
            }
        }
    }
    out
}

/// Runs passes until shutdown: after node changes (coalesced over `window`), when a failed node's
/// backoff ends, and at least every `resync`.
pub async fn run(
    ctx: Arc<RoutePass>,
    changed: Arc<Notify>,
    window: Duration,
    resync: Duration,
    shutdown: CancellationToken,
) {
    let mut retry_at: Option<Instant> = None;
    let mut next_resync = Instant::now() + resync;
    let mut list_failures = 0u32;
    loop {
        let wake = retry_at.map_or(next_resync, |r| r.min(next_resync));
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = changed.notified() => {
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    _ = tokio::time::sleep(window) => {}
                }
            }
            _ = tokio::time::sleep_until(wake) => {}
        }
        // On its own clock: passes after Node changes trust the kept routes, so they must not
        // push the resync back.
        if Instant::now() >= next_resync {
            // The safety resync only confirms what is known: it waits while the budget is low.
            if ctx.budget.allows(Deferrable::RouteResync) {
                ctx.forget_routes();
                next_resync = Instant::now() + resync;
            } else {
                next_resync = Instant::now() + resync.min(ASK_AGAIN_AFTER);
            }
        }
        match pass(&ctx).await {
            Ok(next) => {
                list_failures = 0;
                retry_at = next;
            }
            Err(e) => {
                list_failures += 1;
                let delay = RETRY.delay(list_failures);
                warn!(error = %e, retry_in = ?delay, "listing the network's routes failed");
                retry_at = Some(Instant::now() + delay);
            }
        }
    }
}
