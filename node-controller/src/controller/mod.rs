//! Node initialization and label reconciliation of initialized nodes, as upstream's
//! cloud-node-controller does them (docs/upstream-behavior.md).

use std::collections::{BTreeMap, HashSet};
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use cloud_client::{CloudError, ErrorClass, InstanceMetadata, Instances, NodeRef};
use controller_kit::backoff::{Backoff, PerObject};
use controller_kit::{Events, KitMetrics};
// The store's Node: only the fields this controller reads (see controller_kit::slim_node).
use controller_kit::slim_node::SlimNode as Node;
use k8s_openapi::api::core::v1::Taint;
use kube::api::{Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::Store;
use kube::{Api, ResourceExt};
use tracing::{Instrument, debug, info, info_span, warn};

use crate::addresses::{self, AddressUpdate};
use crate::error::Error;
use crate::keys::{ANNOTATION_PROVIDED_NODE_IP, LABEL_NODE_IP_OUTSIDE_CLOUD, TAINT_UNINITIALIZED};
use crate::labels;
use crate::metrics::NodeMetrics;
use crate::nodeip;
use crate::reasons;

mod initialize;

/// Shared state of the reconciler.
pub struct NodeReconciler {
    /// Node API (cluster scoped).
    pub nodes: Api<Node>,
    /// Cloud instances.
    pub instances: Arc<dyn Instances>,
    /// The Node cache: another Node's addresses, for addresses a Node states itself.
    pub store: Store<Node>,
    /// Event publisher.
    pub events: Events,
    /// Kit metrics.
    pub kit: KitMetrics,
    /// Controller metrics.
    pub metrics: NodeMetrics,
    /// `--accept-node-ip-outside-cloud`.
    accept_node_ip_outside_cloud: bool,
    /// Failures in a row per node: 1 s doubling to 5 min.
    failures: PerObject<String>,
    /// Nodes (by UID) already warned about as never initialized: one Warning per node and process,
    /// however often the node is reconciled (label edits, watch relists).
    never_initialized: Mutex<HashSet<String>>,
}

impl std::fmt::Debug for NodeReconciler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeReconciler").finish_non_exhaustive()
    }
}

impl NodeReconciler {
    /// A reconciler context.
    pub fn new(
        client: kube::Client,
        instances: Arc<dyn Instances>,
        store: Store<Node>,
        events: Events,
        kit: KitMetrics,
        metrics: NodeMetrics,
    ) -> Self {
        Self {
            nodes: Api::all(client),
            instances,
            store,
            events,
            kit,
            metrics,
            accept_node_ip_outside_cloud: false,
            failures: PerObject::new(Backoff::new(
                Duration::from_secs(1),
                Duration::from_secs(300),
            )),
            never_initialized: Mutex::default(),
        }
    }

    /// Forgets the nodes warned about as never initialized that are no longer in `store`
    /// (deleted), so the set only holds nodes that exist.
    pub fn forget_deleted(&self, store: &Store<Node>) {
        let mut warned = self.warned();
        if warned.is_empty() {
            return;
        }
        // Read under the lock: a node warned about is in the store before its reconcile starts.
        let live: HashSet<String> = store.state().iter().map(|n| warn_key(n)).collect();
        warned.retain(|k| live.contains(k));
    }

    /// Lets kubelet's node IP stand on every Node although its server does not have it
    /// (`--accept-node-ip-outside-cloud`).
    pub fn accepting_node_ips_outside_cloud(mut self, accept: bool) -> Self {
        self.accept_node_ip_outside_cloud = accept;
        self
    }

    /// Whether `node`'s kubelet node IP may be one its server does not have: for every Node by
    /// the flag, for one by its label.
    pub fn accepts_node_ip_outside_cloud(&self, node: &Node) -> bool {
        self.accept_node_ip_outside_cloud || labelled_outside_cloud(node)
    }

    /// What the cloud lookup needs about `node`.
    pub fn node_ref(&self, node: &Node) -> NodeRef {
        node_ref(node, self.instances.node_annotations())
    }

    fn warned(&self) -> std::sync::MutexGuard<'_, HashSet<String>> {
        self.never_initialized
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

/// Appended to `NodeIPNotFound`: the way out for a node network the cloud does not know.
const OUTSIDE_CLOUD_HINT: &str = ". If the node IP is on a network the cloud does not know \
    (WireGuard, Tailscale, a Robot vSwitch), start the node-controller with \
    --accept-node-ip-outside-cloud, or label this Node cloud-controllers.io/node-ip-outside-cloud=accept";

/// What the Warning on a node with neither the uninitialized taint nor a providerID says.
pub const NEVER_INITIALIZED_NOTE: &str = "Node has no providerID and no \
    node.cloudprovider.kubernetes.io/uninitialized taint, so no cloud controller will initialize \
    it: its kubelet does not run with --cloud-provider=external (or the taint was removed by \
    hand). It gets no providerID and no cloud labels (instance type, zone, region), load \
    balancers and routes leave it out, and it is not deleted when its server is. To fix: drain \
    it, delete the Node object and restart its kubelet with --cloud-provider=external; kubelet \
    registers it again with the taint, and it is initialized. A node that is not a cloud server \
    can ignore this.";

/// A node is remembered by its UID (a re-registered node is a new one), by name without one.
fn warn_key(node: &Node) -> String {
    node.uid().unwrap_or_else(|| node.name_any())
}

/// True when the node was never initialized and never will be: no uninitialized taint, so this
/// controller leaves it alone (as upstream), and no providerID, so no cloud controller set one.
/// A node with a providerID and no taint was initialized (or kubelet set `--provider-id`): fine.
pub fn is_never_initialized(node: &Node) -> bool {
    !is_uninitialized(node) && provider_id(node).is_none()
}

/// True when the Node's own label accepts a node IP outside the cloud.
fn labelled_outside_cloud(node: &Node) -> bool {
    node.labels()
        .get(LABEL_NODE_IP_OUTSIDE_CLOUD)
        .map(String::as_str)
        == Some("accept")
}

/// True when the node carries the uninitialized taint (value/effect ignored).
pub fn is_uninitialized(node: &Node) -> bool {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|t| t.iter().any(|t| t.key == TAINT_UNINITIALIZED))
}

/// The node's providerID, if set and non-empty.
pub fn provider_id(node: &Node) -> Option<&str> {
    node.spec
        .as_ref()
        .and_then(|s| s.provider_id.as_deref())
        .filter(|p| !p.is_empty())
}

/// What the cloud lookup needs about a node: its name, providerID, reported InternalIPs (a
/// dedicated server's private addresses are known only from kubelet's `--node-ip`) and the
/// annotations the provider reads (`keys`).
pub fn node_ref(node: &Node, keys: &[&str]) -> NodeRef {
    let annotations = node
        .annotations()
        .iter()
        .filter(|(k, _)| keys.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let internal_ips = node
        .status
        .as_ref()
        .and_then(|s| s.addresses.as_ref())
        .into_iter()
        .flatten()
        .filter(|a| a.type_ == "InternalIP")
        .map(|a| a.address.clone());
    NodeRef::with_provider_id(node.name_any(), provider_id(node).unwrap_or_default())
        .with_internal_ips(internal_ips)
        .with_annotations(annotations)
}

/// Hash of the fields this controller acts on, so kubelet status heartbeats do not trigger
/// reconciles: labels, taints, the providerID, kubelet's node IP and the annotations the provider
/// reads (`provider_keys`).
pub fn relevant_hash(node: &Node, provider_keys: &[&str]) -> Option<u64> {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    node.metadata.labels.hash(&mut h);
    for (k, v) in node.annotations() {
        if k == ANNOTATION_PROVIDED_NODE_IP || provider_keys.contains(&k.as_str()) {
            (k, v).hash(&mut h);
        }
    }
    provider_id(node).hash(&mut h);
    if let Some(taints) = node.spec.as_ref().and_then(|s| s.taints.as_ref()) {
        for t in taints {
            (&t.key, &t.effect, &t.value).hash(&mut h);
        }
    }
    Some(h.finish())
}

/// Reconciles one node.
pub async fn reconcile(node: Arc<Node>, ctx: Arc<NodeReconciler>) -> Result<Action, Error> {
    let name = node.name_any();
    let span = info_span!("reconcile", node = %name, initialized = !is_uninitialized(&node));
    async move {
        let mut timer = ctx.kit.reconcile_timer();
        warn_once_if_never_initialized(&node, &ctx).await;
        let result = if is_uninitialized(&node) {
            let why = format!("Node {name}: uninitialized (the cloud-provider taint is set)");
            cloud_client::shadow::with_reason(why, ctx.initialize(&node)).await
        } else {
            let why = format!("Node {name}: labels or addresses differ from the server's");
            cloud_client::shadow::with_reason(why, reconcile_initialized(&node, &ctx)).await
        };
        if result.is_ok() {
            timer.set_result("ok");
            ctx.failures.succeeded(&name);
        } else if let Err(e) = &result {
            timer.set_result(e.metric_label());
        }
        result
    }
    .instrument(span)
    .await
}

/// Requeue policy: conflicts retry quickly (the cache catches up); a refusal for the cloud's rate
/// limit is tried again soon at a fixed pace; other errors back off per node, 1 s doubling to
/// 5 min (kube has no per-object backoff of its own).
pub fn error_policy(node: Arc<Node>, err: &Error, ctx: Arc<NodeReconciler>) -> Action {
    if err.is_conflict() {
        debug!(node = %node.name_any(), "conflict; retrying");
        return Action::requeue(Duration::from_millis(200));
    }
    if err.is_rate_limited() {
        let delay = controller_kit::budget::RATE_LIMITED_RETRY;
        info!(node = %node.name_any(), retry_in = ?delay, "refused for the cloud's rate limit; trying again soon");
        return Action::requeue(delay);
    }
    let (n, delay) = ctx.failures.failed(node.name_any());
    warn!(node = %node.name_any(), error = %err, attempt = n, retry_in = ?delay, "reconcile failed");
    Action::requeue(delay)
}

/// Upstream leaves a node without the taint uninitialized, silently. It stays uninitialized (the
/// taint is kubelet's request to be initialized, and a node without it may deliberately be no cloud
/// node, as in hybrid clusters), but the operator is told once per node and process: a Warning, a
/// log line and the bad-input counter. Nodes outside the Node watch's label selector are never
/// seen, so never warned about.
async fn warn_once_if_never_initialized(node: &Node, ctx: &NodeReconciler) {
    let key = warn_key(node);
    let first = {
        let mut warned = ctx.warned();
        if is_never_initialized(node) {
            warned.insert(key)
        } else {
            warned.remove(&key);
            false
        }
    };
    if !first {
        return;
    }
    let reason = reasons::NOT_INITIALIZED_BY_CLOUD_PROVIDER;
    warn!(reason, "{NEVER_INITIALIZED_NOTE}");
    warn_bad_input(node, ctx, reason, NEVER_INITIALIZED_NOTE.into()).await;
}

/// Writes the node's addresses from `cloud` when they changed (rules in `addresses.rs`). Errors
/// are logged only.
pub async fn write_addresses(
    node: &Node,
    ctx: &NodeReconciler,
    cloud: &[cloud_client::NodeAddress],
) {
    if is_uninitialized(node) {
        return;
    }
    match addresses::desired(node, cloud, ctx.accepts_node_ip_outside_cloud(node)) {
        Ok(AddressUpdate::Changed(list)) => {
            let patch = addresses::status_patch(&list);
            match ctx
                .nodes
                .patch_status(
                    &node.name_any(),
                    &PatchParams::default(),
                    &Patch::Merge(&patch),
                )
                .await
            {
                Ok(_) => debug!(node = %node.name_any(), "addresses updated"),
                Err(e) => {
                    warn!(node = %node.name_any(), error = %e, "patching node addresses failed")
                }
            }
        }
        Ok(AddressUpdate::Unchanged) => {}
        Ok(AddressUpdate::NoCloudAddresses) => {
            debug!(node = %node.name_any(), "cloud reported no addresses; keeping the node's")
        }
        Err(e) => warn!(node = %node.name_any(), error = %e, "skipping address update"),
    }
}

/// An initialized node: its stable labels, and, when it carries annotations the provider reads
/// (e.g. a stated IPv6 address), its addresses at once rather than at the next address sync.
async fn reconcile_initialized(node: &Node, ctx: &NodeReconciler) -> Result<Action, Error> {
    let action = reconcile_labels(node, ctx).await?;
    let states_something = ctx
        .instances
        .node_annotations()
        .iter()
        .any(|k| node.annotations().contains_key(*k));
    if states_something {
        refresh_addresses(node, ctx).await?;
    }
    Ok(action)
}

/// Looks the node up and writes its addresses, telling its operator what the provider found wrong
/// with its annotations; an invalid one, or a stated address another Node has, writes nothing.
async fn refresh_addresses(node: &Node, ctx: &NodeReconciler) -> Result<(), Error> {
    let name = node.name_any();
    let meta = match ctx.instances.instance_metadata(&ctx.node_ref(node)).await {
        Ok(m) => m,
        Err(CloudError::InvalidNodeInput { reason, message }) => {
            ctx.kit.count_warning(reason);
            ctx.events
                .warning(node, reason, "UpdateNodeAddresses", message)
                .await;
            return Ok(());
        }
        Err(source) => return Err(Error::Cloud { node: name, source }),
    };
    publish_provider_warnings(node, ctx, &meta).await;
    if let Some((address, other)) =
        addresses::held_by_another(&ctx.store, node, &meta.stated_by_node)
    {
        ctx.kit.count_warning(reasons::NODE_ADDRESS_CONFLICT);
        let note = format!(
            "Addresses left as they are: its annotations state the address {address}, which is \
             Node {other}'s; two Nodes cannot have one address"
        );
        ctx.events
            .warning(
                node,
                reasons::NODE_ADDRESS_CONFLICT,
                "UpdateNodeAddresses",
                note,
            )
            .await;
        return Ok(());
    }
    write_addresses(node, ctx, &meta.addresses).await;
    Ok(())
}

/// The provider's Warnings about the node (e.g. an annotation the configuration ignores), each a
/// Warning Event on it, counted as bad input.
async fn publish_provider_warnings(node: &Node, ctx: &NodeReconciler, meta: &InstanceMetadata) {
    for w in &meta.warnings {
        ctx.kit.count_warning(&w.reason);
        ctx.events
            .warning(node, &w.reason, "UpdateNodeAddresses", w.message.clone())
            .await;
    }
}

/// The beta topology/instance-type labels are the source of truth for the stable ones (upstream's
/// rule, so a user editing only a stable label gets it reverted).
async fn reconcile_labels(node: &Node, ctx: &NodeReconciler) -> Result<Action, Error> {
    let want = labels::stable_from_beta(node.labels());
    if want.is_empty() {
        return Ok(Action::await_change());
    }
    info!(labels = ?want, "reconciling stable labels from beta labels");
    let patch = serde_json::json!({ "metadata": { "labels": want } });
    ctx.nodes
        .patch(
            &node.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
        .map_err(|source| Error::Kube {
            node: node.name_any(),
            what: "patch node labels",
            source,
        })?;
    Ok(Action::await_change())
}

/// A Warning Event about initializing `node` for something wrong in what the user gave, counted
/// in the bad-input warnings metric.
async fn warn_bad_input(node: &Node, ctx: &NodeReconciler, reason: &'static str, note: String) {
    ctx.kit.count_warning(reason);
    ctx.events
        .warning(node, reason, "InitializeNode", note)
        .await;
}
