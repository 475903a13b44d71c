//! The end-to-end harness: what a test needs that runs against the testenv control plane and a
//! cloud-sim. Here the Nodes as kubelet creates them, the chart's RBAC applied and bound, polling
//! with a deadline ([`T`], [`eventually`]); [`test_run`] puts one test's pieces together, [`run`]
//! starts a controller in-process and [`process`] as a built binary, [`sim`] builds the cloud side
//! ([`cloudstack`] CloudStack's), [`hccm_switch`] checks what an operator switching from HCCM
//! keeps.

use std::collections::BTreeMap;
use std::future::Future;
use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::events::v1::Event;
use kube::api::{ListParams, PostParams};
use kube::{Api, Client};

pub mod cloudstack;
pub mod hccm_switch;
pub mod process;
pub mod run;
pub mod sim;
pub mod test_run;

pub const UNINITIALIZED: &str = "node.cloudprovider.kubernetes.io/uninitialized";
pub const TEST_LABEL: &str = "cloud-controllers.test/run";

/// Poll deadline of the tests' waits: generous, because tests share two cores and one apiserver.
pub const T: Duration = Duration::from_secs(30);

/// A unique, DNS-safe name.
pub fn unique(prefix: &str) -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!("{prefix}-{:x}{}", nanos, N.fetch_add(1, Ordering::Relaxed))
}

/// How a test node looks when created.
#[derive(Debug, Clone, Default)]
pub struct NodeSpecT {
    pub tainted: bool,
    pub provider_id: Option<String>,
    pub node_ip: Option<String>,
    pub labels: BTreeMap<String, String>,
    /// `Some(true)` = Ready, `Some(false)` = NotReady, `None` = no status at all.
    pub ready: Option<bool>,
    /// Annotations the Node is created with, beside kubelet's (e.g. one the provider reads).
    pub annotations: BTreeMap<String, String>,
}

/// Creates a Node labelled with `run` (the controller under test only watches its run's nodes).
///
/// The Node is the one a real kubelet registers ([`testenv::KubeletNode`]: images, nodeInfo,
/// capacity, kubelet's labels and annotations, its conditions), so every test also shows that no
/// controller depends on a field its cache drops. `spec` then decides the taint, the providerID,
/// the labels and readiness (`None`: no conditions at all).
pub async fn create_node(client: &Client, run: &str, name: &str, spec: NodeSpecT) -> Node {
    let api: Api<Node> = Api::all(client.clone());
    let mut labels: Vec<(String, String)> = spec.labels.clone().into_iter().collect();
    labels.push((TEST_LABEL.into(), run.into()));
    let kubelet = testenv::KubeletNode {
        node_ip: spec.node_ip.clone(),
        labels,
        uninitialized: spec.tainted,
        provider_id: spec.provider_id.clone(),
        ..testenv::KubeletNode::new(name)
    };
    let mut node = kubelet.registration();
    node.metadata
        .annotations
        .get_or_insert_with(BTreeMap::new)
        .extend(spec.annotations.clone());
    if spec.ready.is_none()
        && let Some(status) = node.status.as_mut()
    {
        status.conditions = None;
    }
    let created = api
        .create(&PostParams::default(), &node)
        .await
        .expect("create node");
    if let Some(ready) = spec.ready {
        set_ready(client, name, ready).await;
    }
    created
}

/// Patches the node's Ready condition, as kubelet would.
pub async fn set_ready(client: &Client, name: &str, ready: bool) {
    testenv::set_node_ready(client, name, ready)
        .await
        .expect("patch node status");
}

/// Polls `f` until it returns `Some`, or panics with `what` after `timeout`.
pub async fn eventually<T, F, Fut>(what: &str, timeout: Duration, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(v) = f().await {
            return v;
        }
        if tokio::time::Instant::now() > deadline {
            panic!("timed out after {timeout:?} waiting for: {what}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The node, if it exists.
pub async fn get_node(client: &Client, name: &str) -> Option<Node> {
    Api::<Node>::all(client.clone())
        .get_opt(name)
        .await
        .expect("get node")
}

/// True when the node carries the uninitialized taint.
pub fn has_taint(node: &Node, key: &str) -> bool {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|t| t.iter().any(|t| t.key == key))
}

/// events.k8s.io Events about the node (they land in `default`).
pub async fn node_events(client: &Client, node: &str) -> Vec<Event> {
    let api: Api<Event> = Api::all(client.clone());
    api.list(&ListParams::default())
        .await
        .expect("list events")
        .items
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(node))
        .collect()
}

/// The first event on `node` with `reason`.
pub async fn event_with_reason(client: &Client, node: &str, reason: &str) -> Option<Event> {
    node_events(client, node)
        .await
        .into_iter()
        .find(|e| e.reason.as_deref() == Some(reason))
}

pub async fn ensure_namespace(client: &Client, ns: &str) {
    let api: Api<Namespace> = Api::all(client.clone());
    let mut n = Namespace::default();
    n.metadata.name = Some(ns.into());
    match api.create(&PostParams::default(), &n).await {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 409 => {}
        Err(e) => panic!("create namespace {ns}: {e}"),
    }
}

/// Applies the chart's RBAC file (ClusterRole + Role), renamed for this run so parallel tests do not
/// clash, and binds both to ServiceAccount `ns/sa`. Use
/// `testenv::TestKube::service_account_client(ns, sa)` afterwards.
pub async fn apply_chart_rbac(client: &Client, file: &Path, ns: &str, sa: &str) {
    testenv::bind_chart_rbac(client, file, ns, sa)
        .await
        .expect("bind the chart's RBAC");
}

/// Whether the apiserver refused the request with 403 (what RBAC answers for a verb the role lacks).
pub fn forbidden<T>(r: &Result<T, kube::Error>) -> bool {
    matches!(r, Err(kube::Error::Api(e)) if e.code == 403)
}

/// Binds `controller`'s chart RBAC to its ServiceAccount in `ns` and returns a client acting as
/// that ServiceAccount: the controller's permissions, nothing more.
pub async fn chart_service_account(
    k: &testenv::TestKube,
    admin: &Client,
    controller: &str,
    ns: &str,
) -> Client {
    apply_chart_rbac(admin, &rbac_file(controller), ns, controller).await;
    k.service_account_client(ns, controller).await
}

/// Path of `controller`'s chart RBAC file.
pub fn rbac_file(controller: &str) -> std::path::PathBuf {
    testenv::workspace_root()
        .join("charts/cloud-controllers/files/rbac")
        .join(format!("{controller}.yaml"))
}
