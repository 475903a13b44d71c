//! A deleted Service's (or a Service that stopped being a LoadBalancer's) load balancer
//! released, then its finalizer.

use super::*;

impl ServiceReconciler {
    /// Releases the Service's load balancer, then the Service (see [`cleanup`]).
    pub(super) async fn cleanup(&self, svc: &Service) -> Result<(), Error> {
        cleanup(svc, self).await
    }
}

/// Deletes the load balancer, then lets the Service go: finalizer off, status cleared.
async fn cleanup(svc: &Service, ctx: &ServiceReconciler) -> Result<(), Error> {
    let key = service::key(svc);
    ctx.events
        .normal(
            svc,
            reasons::DELETING,
            "DeleteLoadBalancer",
            "Deleting load balancer".into(),
        )
        .await;
    let outcome = match ctx.lbs.delete(&ctx.service_ref(svc)).await {
        Ok(o) => o,
        Err(source) => {
            let e = Error::Cloud {
                service: key,
                op: "delete load balancer",
                source,
            };
            return Err(sync_failed(svc, ctx, e).await);
        }
    };
    publish_warnings(svc, ctx, &outcome.warnings, false).await;
    if let Err(source) = patches::remove_finalizer(&ctx.client, svc).await {
        return Err(sync_failed(svc, ctx, kube_error(&key, "remove finalizer", source)).await);
    }
    ctx.events
        .normal(
            svc,
            reasons::DELETED,
            "DeleteLoadBalancer",
            "Deleted load balancer".into(),
        )
        .await;
    if !service::current_ingress(svc).is_empty()
        && let Err(source) = patches::set_ingress(&ctx.client, svc, &[]).await
    {
        return Err(sync_failed(svc, ctx, kube_error(&key, "clear status", source)).await);
    }
    info!(deleted = outcome.deleted, "load balancer cleaned up");
    ctx.forget(svc);
    Ok(())
}
