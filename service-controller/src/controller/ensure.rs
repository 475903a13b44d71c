//! A Service's load balancer ensured in full, or only its targets updated, and what the
//! Service is told of the outcome.

use super::*;

impl ServiceReconciler {
    /// A full ensure (see [`ensure`]); `announce`: Events for a change, none for a drift check.
    pub(super) async fn ensure(
        &self,
        svc: &Service,
        sref: &ServiceRef,
        nodes: &[LbNode],
        (spec, announce): (u64, bool),
    ) -> Result<(), Error> {
        ensure(svc, sref, self, nodes, (spec, announce)).await
    }

    /// Only the targets (see [`update_targets`]).
    pub(super) async fn update_targets(
        &self,
        svc: &Service,
        sref: &ServiceRef,
        nodes: &[LbNode],
        spec: u64,
    ) -> Result<(), Error> {
        update_targets(svc, sref, self, nodes, spec).await
    }
}

/// Upstream's Warning for a load balancer without targets, or, for one that targets only the
/// nodes running the Service's endpoints, that none does.
fn no_targets_message(sref: &ServiceRef, ctx: &ServiceReconciler) -> String {
    if ctx.lbs.targets_nodes_with_endpoints(sref) {
        "No node runs a serving endpoint of this Service, and its load balancer targets only \
         such nodes: it has no targets"
            .into()
    } else {
        "There are no available nodes for LoadBalancer".into()
    }
}

/// Full ensure. `announce` is false for drift checks, which stay silent unless they repaired
/// something. `spec` is the applied-spec hash the reconcile started from, recorded on success:
/// not one computed now, which could already hold a Secret's change that arrived meanwhile and
/// would then be taken as applied (the renewal's own reconcile would find nothing to do).
async fn ensure(
    svc: &Service,
    sref: &ServiceRef,
    ctx: &ServiceReconciler,
    nodes: &[LbNode],
    (spec, announce): (u64, bool),
) -> Result<(), Error> {
    let key = service::key(svc);
    if announce {
        ctx.events
            .normal(
                svc,
                reasons::ENSURING,
                "EnsureLoadBalancer",
                "Ensuring load balancer".into(),
            )
            .await;
    }
    if !service::has_finalizer(svc)
        && let Err(source) = patches::add_finalizer(&ctx.client, svc).await
    {
        return Err(sync_failed(svc, ctx, kube_error(&key, "add finalizer", source)).await);
    }
    if nodes.is_empty() {
        ctx.events
            .warning(
                svc,
                reasons::UNAVAILABLE,
                "EnsureLoadBalancer",
                no_targets_message(sref, ctx),
            )
            .await;
    }
    if let Some((ranges, why)) = ctx.unenforced_source_ranges(svc) {
        if ctx.refuse_unenforced_source_ranges {
            let e = Error::Cloud {
                service: key,
                op: "ensure load balancer",
                source: source_ranges::refusal(&ranges, why),
            };
            return Err(sync_failed(svc, ctx, e).await);
        }
        let note = source_ranges::not_enforced(&ranges, why);
        warn!(service = %key, "{note}");
        ctx.kit.count_warning(source_ranges::IGNORED);
        ctx.events
            .warning(svc, source_ranges::IGNORED, "EnsureLoadBalancer", note)
            .await;
    }
    let ensured = if announce {
        ctx.lbs.ensure(sref, nodes).await
    } else {
        ctx.lbs
            .check_drift(sref, nodes, ctx.applied.drift_read_age())
            .await
    };
    let outcome = match ensured {
        Ok(o) => o,
        Err(source) => {
            let e = Error::Cloud {
                service: key,
                op: "ensure load balancer",
                source,
            };
            return Err(sync_failed(svc, ctx, e).await);
        }
    };
    publish_warnings(svc, ctx, &outcome.warnings, true).await;
    record_target_health(svc, ctx, outcome.target_health);
    let want = service::ingress(&outcome.status);
    if service::current_ingress(svc) != want
        && let Err(source) = patches::set_ingress(&ctx.client, svc, &want).await
    {
        return Err(sync_failed(svc, ctx, kube_error(&key, "update status", source)).await);
    }
    if announce || outcome.writes > 0 {
        let note = if announce {
            "Ensured load balancer".to_string()
        } else {
            format!(
                "Ensured load balancer: repaired {} change(s) made outside the controller",
                outcome.writes
            )
        };
        ctx.events
            .normal(svc, reasons::ENSURED, "EnsureLoadBalancer", note)
            .await;
    }
    info!(
        writes = outcome.writes,
        targets = nodes.len(),
        drift_check = !announce,
        "load balancer ensured"
    );
    ctx.applied.ensured(
        &svc.uid().unwrap_or_default(),
        spec,
        nodes::fingerprint(nodes),
    );
    ctx.metrics.load_balancers.set(ctx.applied.len() as i64);
    Ok(())
}

/// Only the node set changed: update the targets from the remembered load balancer (no read when
/// it is fresh). A load balancer that vanished is re-created by a full ensure.
async fn update_targets(
    svc: &Service,
    sref: &ServiceRef,
    ctx: &ServiceReconciler,
    nodes: &[LbNode],
    spec: u64,
) -> Result<(), Error> {
    let key = service::key(svc);
    ctx.metrics.loadbalancer_sync.inc();
    let started = std::time::Instant::now();
    let result = ctx.lbs.update_targets(sref, nodes).await;
    ctx.metrics
        .update_host_latency
        .observe(started.elapsed().as_secs_f64());
    let outcome = match result {
        Ok(o) if !o.found => {
            info!(
                "load balancer not found while updating targets, or a network zone gained or \
                 lost its load balancer: a full ensure"
            );
            return ensure(svc, sref, ctx, nodes, (spec, true)).await;
        }
        Ok(o) => {
            ctx.metrics.node_sync_done();
            o
        }
        Err(source) => {
            ctx.metrics.nodesync_errors.inc();
            let e = Error::Cloud {
                service: key,
                op: "update load balancer targets",
                source,
            };
            ctx.events
                .warning(
                    svc,
                    reasons::UPDATE_FAILED,
                    "UpdateLoadBalancer",
                    format!(
                        "Error updating load balancer with new hosts {} [total number of nodes: {}], error: {e}",
                        nodes::names_for_message(nodes),
                        nodes.len()
                    ),
                )
                .await;
            return Err(e);
        }
    };
    publish_warnings(svc, ctx, &outcome.warnings, false).await;
    record_target_health(svc, ctx, outcome.target_health);
    if nodes.is_empty() {
        ctx.events
            .warning(
                svc,
                reasons::UNAVAILABLE,
                "UpdateLoadBalancer",
                no_targets_message(sref, ctx),
            )
            .await;
    } else if outcome.writes > 0 {
        ctx.events
            .normal(
                svc,
                reasons::UPDATED,
                "UpdateLoadBalancer",
                "Updated load balancer with new hosts".into(),
            )
            .await;
    }
    info!(
        writes = outcome.writes,
        targets = nodes.len(),
        "load balancer targets updated"
    );
    ctx.applied
        .targets_updated(&svc.uid().unwrap_or_default(), nodes::fingerprint(nodes));
    Ok(())
}

fn record_target_health(
    svc: &Service,
    ctx: &ServiceReconciler,
    health: Option<cloud_client::TargetHealth>,
) {
    if let Some(h) = health {
        let uid = svc.uid().unwrap_or_default();
        ctx.metrics
            .target_health
            .record(&uid, &service::key(svc), h);
    }
}
