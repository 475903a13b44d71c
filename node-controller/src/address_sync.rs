//! Periodic address refresh of initialized nodes: every `--node-status-update-frequency`
//! (sliding), all nodes from the reflector store, `--concurrent-node-status-updates` at a time. The
//! cloud lookups are served by cloud-client's shared server snapshot (one list per max age). While
//! the cloud API budget is low the pass waits (see `controller_kit::budget`).

use std::sync::Arc;

use controller_kit::budget::{ASK_AGAIN_AFTER, ApiBudget, Deferrable};

use futures::StreamExt;
// The store's Node: only the fields this controller reads (see controller_kit::slim_node).
use controller_kit::slim_node::SlimNode as Node;
use kube::ResourceExt;
use kube::runtime::reflector::Store;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, debug, info_span};

use crate::controller::{NodeReconciler, is_uninitialized, write_addresses};

/// Runs until `shutdown`. The store must be driven by someone else (the controller's watch).
pub async fn run(
    ctx: Arc<NodeReconciler>,
    store: Store<Node>,
    mut synced: tokio::sync::watch::Receiver<bool>,
    period: std::time::Duration,
    concurrency: u16,
    budget: ApiBudget,
    shutdown: CancellationToken,
) {
    tokio::select! {
        _ = shutdown.cancelled() => return,
        r = synced.wait_for(|v| *v) => if r.is_err() { return },
    }
    loop {
        // A pass only confirms what is known: it waits while the API budget is low.
        let wait = if budget.allows(Deferrable::AddressSync) {
            let span = info_span!("address_sync");
            pass(&ctx, &store, concurrency).instrument(span).await;
            period
        } else {
            period.min(ASK_AGAIN_AFTER)
        };
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(wait) => {}
        }
    }
}

/// One pass over all initialized nodes.
pub async fn pass(ctx: &Arc<NodeReconciler>, store: &Store<Node>, concurrency: u16) {
    let nodes: Vec<Arc<Node>> = store
        .state()
        .into_iter()
        .filter(|n| !is_uninitialized(n))
        .collect();
    debug!(nodes = nodes.len(), "address sync pass");
    futures::stream::iter(nodes)
        .for_each_concurrent(usize::from(concurrency.max(1)), |node| {
            let ctx = ctx.clone();
            async move {
                // A Node's own annotations were judged when they changed (the reconcile warned
                // then); here a refused one only leaves the addresses as they are.
                match ctx.instances.instance_metadata(&ctx.node_ref(&node)).await {
                    Ok(meta) if crate::addresses::held_by_another(&ctx.store, &node, &meta.stated_by_node).is_some() => {
                        debug!(node = %node.name_any(), "address sync: a stated address is another Node's; skipping")
                    }
                    Ok(meta) => write_addresses(&node, &ctx, &meta.addresses).await,
                    Err(e) => debug!(node = %node.name_any(), error = %e, "address sync: cloud lookup failed; skipping"),
                }
            }
        })
        .await;
}
