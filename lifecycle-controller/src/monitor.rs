//! The node monitor pass, upstream's per-node rules (docs/upstream-behavior.md): Ready nodes lose
//! the shutdown taint; for NotReady nodes the cloud decides: positively gone → delete the Node;
//! powered off → shutdown taint. Cloud errors never delete anything. Many nodes are checked in
//! parallel (bounded), served by cloud-client's shared server snapshot.
//!
//! Unlike upstream, a NotReady Node whose server was there is not asked about at every pass: its
//! next check comes 2 monitor periods later, then 4, 8, at most 12 (1 min at the default 5 s).
//! The first check of a Node that went NotReady is at once, so a server deleted before its Node
//! stopped reporting (an autoscaler's scale-down, `hcloud server delete`) is found as soon as
//! before; a reboot of 2 minutes costs 4 checks instead of 12 (docs/benchmarks.md, "At the
//! cloud's ceilings").

use std::sync::Arc;
use std::time::Duration;

use cloud_client::{CloudError, Instances, NodeRef};
use controller_kit::backoff::{Backoff, PerObject};
use controller_kit::slim_node::SlimNode;
use controller_kit::{Events, KitMetrics};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Taint};
use kube::api::{DeleteParams, Patch, PatchParams, Preconditions};
use kube::runtime::reflector::Store;
use kube::{Api, ResourceExt};
use tracing::{Instrument, debug, info, info_span, warn};

use crate::filter::NodeFilter;
use crate::reasons;

/// Taint added to NotReady nodes whose server is powered off.
pub const TAINT_SHUTDOWN: &str = "node.cloudprovider.kubernetes.io/shutdown";

/// Shared state of the monitor.
pub struct Monitor {
    /// Node API.
    pub nodes: Api<Node>,
    /// Cloud instances.
    pub instances: Arc<dyn Instances>,
    /// Events.
    pub events: Events,
    /// Kit metrics.
    pub kit: KitMetrics,
    /// Hybrid-cluster opt-out.
    pub filter: NodeFilter,
    /// Nodes checked at once.
    pub concurrency: usize,
    /// Per-node backoff after cloud errors: the next pass, then 2 s doubling to 5 min.
    failures: PerObject<String>,
    /// NotReady nodes whose server was found (running or off), and when each is due again: 2
    /// monitor periods, doubling to 12. Forgotten when the Node is Ready.
    rechecks: PerObject<String>,
}

impl std::fmt::Debug for Monitor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Monitor")
            .field("filter", &self.filter)
            .finish_non_exhaustive()
    }
}

/// Ready condition status: `True`, `False` or `Unknown` (missing condition = `Unknown`).
pub fn ready_status(node: &SlimNode) -> &str {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
        .map(|c| c.status.as_str())
        .unwrap_or("Unknown")
}

fn taints(node: &SlimNode) -> Vec<Taint> {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default()
}

fn is_shutdown_taint(t: &Taint) -> bool {
    t.key == TAINT_SHUTDOWN && t.effect == "NoSchedule"
}

/// What one node evaluation did (for logs and tests).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Excluded by the hybrid-cluster filter.
    Excluded,
    /// Ready; nothing to do (or shutdown taint removed).
    Ready,
    /// NotReady, server exists and runs.
    Running,
    /// NotReady, server powered off (taint present/added).
    Shutdown,
    /// NotReady, its server found at a recent check: not asked about again yet.
    NotDue,
    /// Node deleted (server gone).
    Deleted,
    /// Skipped: cloud or API error, or backing off.
    Error,
}

impl Monitor {
    /// A monitor whose [`pass`](Self::pass) runs every `monitor_period`.
    pub fn new(
        client: kube::Client,
        instances: Arc<dyn Instances>,
        events: Events,
        kit: KitMetrics,
        filter: NodeFilter,
        concurrency: usize,
        monitor_period: Duration,
    ) -> Self {
        Self {
            nodes: Api::all(client),
            instances,
            events,
            kit,
            filter,
            concurrency: concurrency.max(1),
            failures: PerObject::new(Backoff::after_one_free_retry(
                Duration::from_secs(1),
                Duration::from_secs(300),
            )),
            rechecks: PerObject::new(Backoff::new(2 * monitor_period, 12 * monitor_period)),
        }
    }

    /// One pass over every node in `store`.
    pub async fn pass(self: &Arc<Self>, store: &Store<SlimNode>) {
        let nodes = store.state();
        futures::stream::iter(nodes)
            .for_each_concurrent(self.concurrency, |node| {
                let this = self.clone();
                let span = info_span!("reconcile", node = %node.name_any());
                async move {
                    let mut timer = this.kit.reconcile_timer();
                    let why = format!(
                        "Node {}: shutdown taint differs from the server's power state",
                        node.name_any()
                    );
                    let outcome = cloud_client::shadow::with_reason(why, this.check(&node)).await;
                    timer.set_result(match outcome {
                        Outcome::Error => "error",
                        Outcome::Deleted => "deleted",
                        _ => "ok",
                    });
                }
                .instrument(span)
            })
            .await;
    }

    /// Evaluates one node.
    pub async fn check(&self, node: &SlimNode) -> Outcome {
        let name = node.name_any();
        let provider_id = node
            .spec
            .as_ref()
            .and_then(|s| s.provider_id.as_deref())
            .filter(|p| !p.is_empty());
        if let Some(why) = self.filter.excluded(node.labels(), provider_id) {
            debug!(reason = why, "node excluded from lifecycle management");
            return Outcome::Excluded;
        }
        if ready_status(node) == "True" {
            if taints(node).iter().any(is_shutdown_taint) {
                let keep: Vec<Taint> = taints(node)
                    .into_iter()
                    .filter(|t| !is_shutdown_taint(t))
                    .collect();
                match self.write_taints(node, keep).await {
                    Ok(()) => info!("node is Ready again; removed the shutdown taint"),
                    Err(e) => warn!(error = %e, "removing the shutdown taint failed"),
                }
            }
            self.rechecks.succeeded(&name);
            return Outcome::Ready;
        }
        if self.failures.waiting(&name) {
            return Outcome::Error;
        }
        if self.rechecks.waiting(&name) {
            return Outcome::NotDue;
        }
        let node_ref = NodeRef::with_provider_id(name.clone(), provider_id.unwrap_or_default());
        let exists = match self.instances.instance_exists(&node_ref).await {
            Ok(e) => e,
            Err(e) => {
                // Never delete on an error. A providerID this cloud cannot use is the node's own bad
                // input: say so on the Node, or nobody learns why it is never cleaned up.
                if provider_id.is_none() && e.is_not_found() {
                    // Only a server's id can prove it gone; a name lookup cannot (lists lag).
                    self.kit.count_warning(reasons::SERVER_NOT_FOUND);
                    self.events
                        .warning(
                            node,
                            reasons::SERVER_NOT_FOUND,
                            "CheckNodeExists",
                            format!(
                                "Node is not deleted although {e}: without a providerID only a \
                                 server name could be looked up, and a name lookup cannot prove \
                                 a server is gone. Delete the Node yourself if its server is."
                            ),
                        )
                        .await;
                } else if matches!(
                    e,
                    CloudError::InvalidInput { .. } | CloudError::Unsupported { .. }
                ) {
                    self.kit.count_warning(reasons::UNKNOWN_PROVIDER_ID);
                    self.events
                        .warning(
                            node,
                            reasons::UNKNOWN_PROVIDER_ID,
                            "CheckNodeExists",
                            format!("Node is never deleted or tainted while its providerID cannot be used: {e}"),
                        )
                        .await;
                }
                warn!(error = %e, "cloud lookup failed; not touching the node");
                self.failures.failed(name.clone());
                return Outcome::Error;
            }
        };
        if !exists {
            self.events
                .normal(
                    node,
                    reasons::DELETING_NODE,
                    "DeleteNode",
                    format!("Deleting node {name} because it does not exist in the cloud provider"),
                )
                .await;
            info!("server does not exist; deleting the node");
            // Preconditions: only the Node we evaluated. If it changed since it was cached (e.g.
            // kubelet reported Ready again), the apiserver answers 409 and the next pass re-evaluates.
            let dp = DeleteParams {
                preconditions: Some(Preconditions {
                    resource_version: node.resource_version(),
                    uid: node.uid(),
                }),
                ..DeleteParams::default()
            };
            let why = format!("Node {name}: its server does not exist in the cloud");
            let deleted = cloud_client::shadow::with_reason(why, self.nodes.delete(&name, &dp));
            let outcome = match deleted.await {
                Ok(_) => Outcome::Deleted,
                Err(kube::Error::Api(s)) if s.code == 404 => Outcome::Deleted,
                Err(kube::Error::Api(s)) if s.code == 409 => {
                    info!("node changed since it was read; re-evaluating on the next pass");
                    Outcome::Error
                }
                Err(e) => {
                    self.events
                        .warning(
                            node,
                            reasons::DELETING_NODE_FAILED,
                            "DeleteNode",
                            format!("Failed deleting node {name}: {e}"),
                        )
                        .await;
                    Outcome::Error
                }
            };
            if outcome == Outcome::Deleted {
                // A Node of the same name that registers later starts afresh.
                self.failures.succeeded(&name);
                self.rechecks.succeeded(&name);
            }
            return outcome;
        }
        match self.instances.instance_shutdown(&node_ref).await {
            Ok(true) => {
                self.failures.succeeded(&name);
                self.rechecks.failed(name.clone());
                if !taints(node).iter().any(is_shutdown_taint) {
                    let mut t = taints(node);
                    t.push(Taint {
                        key: TAINT_SHUTDOWN.into(),
                        effect: "NoSchedule".into(),
                        ..Default::default()
                    });
                    match self.write_taints(node, t).await {
                        Ok(()) => info!("server is powered off; added the shutdown taint"),
                        Err(e) => warn!(error = %e, "adding the shutdown taint failed"),
                    }
                }
                Outcome::Shutdown
            }
            Ok(false) => {
                self.failures.succeeded(&name);
                self.rechecks.failed(name.clone());
                Outcome::Running
            }
            Err(e) => {
                warn!(error = %e, "cloud shutdown check failed");
                self.failures.failed(name.clone());
                Outcome::Error
            }
        }
    }

    /// Writes the full taint list with the cached resourceVersion (taints have no merge key, so the
    /// list is replaced under an optimistic lock; a conflict is retried on the next pass).
    async fn write_taints(&self, node: &SlimNode, taints: Vec<Taint>) -> Result<(), kube::Error> {
        let patch = serde_json::json!({
            "metadata": { "resourceVersion": node.resource_version() },
            "spec": { "taints": if taints.is_empty() { serde_json::Value::Null } else { serde_json::to_value(&taints).unwrap_or_default() } },
        });
        self.nodes
            .patch(
                &node.name_any(),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
            .map(|_| ())
    }
}
