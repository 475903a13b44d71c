//! Node changes reach the load balancers only when they change the eligible node set, coalesced
//! over a short window: a burst of joins costs one pass, and Ready flips or heartbeats cost none
//! (upstream re-synced every LB on every node transition: kubernetes/kubernetes#111539).

use std::sync::Arc;
use std::time::Duration;

use futures::channel::mpsc;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::metrics::ServiceMetrics;
use crate::nodes::NodeCache;

/// Waits for node events (`changed`), lets them settle for `window`, and sends one trigger when the
/// eligible set differs from the last one sent. Each Service then decides in its reconcile whether
/// its own targets changed; unchanged load balancers cost no cloud call.
pub async fn run(
    nodes: Arc<NodeCache>,
    changed: Arc<Notify>,
    window: Duration,
    mut trigger: mpsc::Sender<()>,
    metrics: ServiceMetrics,
    shutdown: CancellationToken,
) {
    let mut last = nodes.eligible().fingerprint;
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = changed.notified() => {}
        }
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(window) => {}
        }
        let now = nodes.eligible().fingerprint;
        if now != last {
            last = now;
            metrics.node_set_changed();
            // A full channel means a pass is already pending; it will see this set too.
            let _ = trigger.try_send(());
        }
    }
}
