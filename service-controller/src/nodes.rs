//! Which Nodes a load balancer sends traffic to (upstream's stable node set, KEP-3458), as the cloud
//! sees them.

use std::collections::{BTreeMap, HashMap};
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex, PoisonError};

use cloud_client::LbNode;
use cloud_client::values::parse_bool;
use k8s_openapi::api::core::v1::Node;
use kube::ResourceExt;
use kube::runtime::reflector::Store;

/// Nodes labelled with this are excluded unless the value parses as false.
pub const LABEL_EXCLUDE_FROM_LB: &str = "node.kubernetes.io/exclude-from-external-load-balancers";
/// Cluster-autoscaler's taint on nodes it is about to delete.
pub const TAINT_TO_BE_DELETED: &str = "ToBeDeletedByClusterAutoscaler";
/// The lifecycle controller's taint on nodes whose server the cloud reports powered off.
pub const TAINT_SHUTDOWN: &str = "node.cloudprovider.kubernetes.io/shutdown";

/// Upstream's predicates plus two of ours: not being deleted, not excluded by label, not about to
/// be removed by the autoscaler, not shut down, and a providerID (without one the cloud cannot
/// target the node; it gets one at initialization, which then counts as a node-set change).
///
/// The shutdown taint is where we drain earlier than upstream, which keeps a powered-off server
/// in rotation until its Node is deleted and leaves it to the health check: the taint is set only
/// when the cloud says the server is off, so it does not flap like readiness, which is deliberately
/// not a predicate (a flapping kubelet must not rewrite every load balancer, KEP-3458).
pub fn is_eligible(node: &Node) -> bool {
    node.metadata.deletion_timestamp.is_none()
        && !excluded_by_label(node)
        && !has_taint(node, TAINT_TO_BE_DELETED)
        && !has_taint(node, TAINT_SHUTDOWN)
        && provider_id(node).is_some()
}

/// Upstream parses the label as a Go bool: `false` keeps the node, `true` or anything unparsable
/// (including an empty value) excludes it (kubernetes/kubernetes#131085).
fn excluded_by_label(node: &Node) -> bool {
    node.labels()
        .get(LABEL_EXCLUDE_FROM_LB)
        .is_some_and(|v| parse_bool(v) != Some(false))
}

fn has_taint(node: &Node, key: &str) -> bool {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|t| t.iter().any(|t| t.key == key))
}

fn provider_id(node: &Node) -> Option<&str> {
    node.spec
        .as_ref()
        .and_then(|s| s.provider_id.as_deref())
        .filter(|p| !p.is_empty())
}

/// The node as the load-balancer provider needs it, its labels taken from `labels`.
fn lb_node(node: &Node, labels: &mut SharedLabels) -> LbNode {
    LbNode {
        name: node.name_any(),
        provider_id: provider_id(node).map(str::to_string),
        labels: labels.of(node),
        internal_ips: internal_ips(node).map(str::to_string).collect(),
    }
}

/// The eligible nodes, sorted by name (so equal sets compare and hash equal), their labels shared
/// through `labels`.
fn eligible<'a>(
    nodes: impl IntoIterator<Item = &'a Node>,
    labels: &mut SharedLabels,
) -> Vec<LbNode> {
    let mut out: Vec<LbNode> = nodes
        .into_iter()
        .filter(|n| is_eligible(n))
        .map(|n| lb_node(n, labels))
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    labels.keep_only(&out);
    out
}

/// Each Node's labels, shared by every eligible set built while they stayed the same. During a
/// join burst the set is rebuilt on nearly every Node change while up to ten reconciles still hold
/// the sets they started with: with a copy of the labels in each, service-controller's heap peaked
/// at 18 MiB of labels at 1200 Nodes (`cargo xtask bench system`, heaptrack).
#[derive(Debug, Default)]
struct SharedLabels(HashMap<String, Arc<BTreeMap<String, String>>>);

impl SharedLabels {
    fn of(&mut self, node: &Node) -> Arc<BTreeMap<String, String>> {
        let (name, labels) = (node.name_any(), node.labels());
        if let Some(shared) = self.0.get(&name)
            && **shared == *labels
        {
            return shared.clone();
        }
        let shared = Arc::new(labels.clone());
        self.0.insert(name, shared.clone());
        shared
    }

    /// Forgets the Nodes that are not in `set` any more.
    fn keep_only(&mut self, set: &[LbNode]) {
        if self.0.len() > set.len() {
            let names: std::collections::HashSet<&str> =
                set.iter().map(|n| n.name.as_str()).collect();
            self.0.retain(|name, _| names.contains(name.as_str()));
        }
    }
}

/// The eligible node set and its fingerprint.
#[derive(Debug, Default)]
pub struct EligibleSet {
    /// Sorted by name.
    pub nodes: Vec<LbNode>,
    pub fingerprint: u64,
}

impl EligibleSet {
    fn of<'a>(nodes: impl IntoIterator<Item = &'a Node>, labels: &mut SharedLabels) -> Self {
        let nodes = eligible(nodes, labels);
        EligibleSet {
            fingerprint: fingerprint(&nodes),
            nodes,
        }
    }
}

/// Per Node, the hash of what a load balancer targets by (eligibility, name, providerID, labels,
/// internal IPs), so the watch can tell a change that matters from a kubelet status report.
#[derive(Debug, Default)]
pub struct TargetHashes {
    current: HashMap<String, u64>,
    /// Filled during a relist, then swapped in (Nodes deleted meanwhile drop out).
    relisting: Option<HashMap<String, u64>>,
}

impl TargetHashes {
    /// Records `node`; whether what a load balancer targets by changed.
    pub fn changed(&mut self, node: &Node) -> bool {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        is_eligible(node).hash(&mut h);
        hash_node(&mut h, node);
        let hash = h.finish();
        let map = self.relisting.as_mut().unwrap_or(&mut self.current);
        map.insert(node.name_any(), hash) != Some(hash)
    }

    pub fn deleted(&mut self, node: &Node) {
        self.current.remove(&node.name_any());
    }

    /// A relist starts.
    pub fn relist(&mut self) {
        self.relisting = Some(HashMap::new());
    }

    /// The relist is complete.
    pub fn relisted(&mut self) {
        if let Some(map) = self.relisting.take() {
            self.current = map;
        }
    }
}

/// The eligible set of the Node cache, built at most once per change of the cache and shared by
/// every reconcile: at 1000 Nodes, ten concurrent reconciles each building their own during a burst
/// of joins held 20 MB of cloned labels (`cargo xtask bench system`).
#[derive(Debug, Default)]
pub struct EligibleCache(Mutex<(Arc<EligibleSet>, SharedLabels)>);

impl EligibleCache {
    /// The eligible set of `store` now.
    pub fn current(&self, store: &Store<Node>) -> Arc<EligibleSet> {
        let state = store.state();
        let fingerprint = eligible_fingerprint(state.iter().map(|n| n.as_ref()));
        // Held while a new set is built, so a burst builds it once.
        let mut cached = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let (set, labels) = &mut *cached;
        if set.fingerprint != fingerprint {
            *set = Arc::new(EligibleSet::of(state.iter().map(|n| n.as_ref()), labels));
        }
        set.clone()
    }
}

/// Fingerprint of a node set: everything a provider may use to pick or address targets (name,
/// providerID, labels for node selectors, internal IPs), nothing that churns (conditions, heartbeats).
pub fn fingerprint(nodes: &[LbNode]) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for n in nodes {
        let ips = n.internal_ips.iter().map(String::as_str);
        hash_target(&mut h, &n.name, n.provider_id.as_deref(), &n.labels, ips);
    }
    h.finish()
}

/// [`fingerprint`] of [`eligible`]`(nodes)`, without building the set: what the node sync loop
/// computes after every burst of Node events (at 1000 Nodes, cloning each one's labels on every
/// heartbeat cost the controller more CPU than everything else in `bench system`'s churn).
pub fn eligible_fingerprint<'a>(nodes: impl IntoIterator<Item = &'a Node>) -> u64 {
    let mut nodes: Vec<&Node> = nodes.into_iter().filter(|n| is_eligible(n)).collect();
    nodes.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for n in nodes {
        hash_node(&mut h, n);
    }
    h.finish()
}

/// [`hash_target`] of what `node`'s [`LbNode`] would hold.
fn hash_node(h: &mut impl Hasher, node: &Node) {
    let name = node.metadata.name.as_deref().unwrap_or_default();
    hash_target(
        h,
        name,
        provider_id(node),
        node.labels(),
        internal_ips(node),
    );
}

fn internal_ips(node: &Node) -> impl Iterator<Item = &str> {
    node.status
        .as_ref()
        .and_then(|s| s.addresses.as_deref())
        .unwrap_or_default()
        .iter()
        .filter(|a| a.type_ == "InternalIP")
        .map(|a| a.address.as_str())
}

fn hash_target<'a>(
    h: &mut impl Hasher,
    name: &str,
    provider_id: Option<&str>,
    labels: &std::collections::BTreeMap<String, String>,
    internal_ips: impl Iterator<Item = &'a str>,
) {
    (name, provider_id, labels).hash(h);
    for ip in internal_ips {
        ip.hash(h);
    }
    h.write_u8(0xfe);
}

/// Strips what the controller never reads, to keep the Node cache small.
pub fn slim(node: &mut Node) {
    node.metadata.managed_fields = None;
    node.metadata.annotations = None;
    if let Some(status) = node.status.as_mut() {
        *status = k8s_openapi::api::core::v1::NodeStatus {
            addresses: status.addresses.take(),
            ..Default::default()
        };
    }
}

/// Node names for messages: the first 20, then a count (as upstream).
pub fn names_for_message(nodes: &[LbNode]) -> String {
    const MAX: usize = 20;
    let names: Vec<&str> = nodes.iter().take(MAX).map(|n| n.name.as_str()).collect();
    match nodes.len().checked_sub(MAX) {
        Some(more) if more > 0 => format!("{} and {more} more", names.join(", ")),
        _ => names.join(", "),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fingerprint_of_the_store_is_the_fingerprint_of_its_eligible_set() {
        let mut nodes: Vec<Node> = ["c", "a", "b", "d"]
            .iter()
            .map(|name| {
                testenv::KubeletNode {
                    node_ip: Some(format!("10.0.0.{}", name.len())),
                    labels: vec![("pool".into(), (*name).into())],
                    provider_id: (*name != "d").then(|| format!("memory://{name}")),
                    ..testenv::KubeletNode::new(*name)
                }
                .registration()
            })
            .collect();
        let of = |nodes: &[Node]| eligible_fingerprint(nodes.iter());
        assert_eq!(
            of(&nodes),
            EligibleSet::of(nodes.iter(), &mut SharedLabels::default()).fingerprint
        );
        let before = of(&nodes);
        nodes[0]
            .metadata
            .labels
            .as_mut()
            .unwrap()
            .insert("x".into(), "y".into());
        assert_ne!(of(&nodes), before);
        assert_eq!(
            of(&nodes),
            EligibleSet::of(nodes.iter(), &mut SharedLabels::default()).fingerprint
        );
    }

    #[test]
    fn a_status_report_is_no_target_change_but_a_label_is() {
        let mut node = testenv::KubeletNode {
            node_ip: Some("10.0.0.7".into()),
            provider_id: Some("memory://7".into()),
            ..testenv::KubeletNode::new("worker-7")
        }
        .registration();
        let mut seen = TargetHashes::default();
        assert!(seen.changed(&node));
        node.status.as_mut().unwrap().images = None;
        node.metadata.resource_version = Some("2".into());
        assert!(!seen.changed(&node));
        node.labels_mut().insert("pool".into(), "b".into());
        assert!(seen.changed(&node));
        node.spec.as_mut().unwrap().provider_id = None;
        assert!(seen.changed(&node), "no longer eligible");
    }

    #[test]
    fn the_cache_keeps_everything_the_eligible_set_reads() {
        let full = testenv::KubeletNode {
            node_ip: Some("10.0.0.7".into()),
            labels: vec![("pool".into(), "a".into())],
            provider_id: Some("memory://7".into()),
            ..testenv::KubeletNode::new("worker-7")
        }
        .registration();
        let mut slimmed = full.clone();
        slim(&mut slimmed);
        let (a, b) = (
            EligibleSet::of([&full], &mut SharedLabels::default()),
            EligibleSet::of([&slimmed], &mut SharedLabels::default()),
        );
        assert_eq!(a.fingerprint, b.fingerprint);
        assert_eq!(a.nodes, b.nodes);
        assert_eq!(a.nodes.len(), 1);
        assert_eq!(a.nodes[0].internal_ips, vec!["10.0.0.7".to_string()]);
    }
    use k8s_openapi::api::core::v1::{NodeSpec, Taint};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn node(name: &str, labels: &[(&str, &str)]) -> Node {
        let mut n = Node::default();
        n.metadata.name = Some(name.into());
        n.metadata.labels = Some(
            labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        );
        n.spec = Some(NodeSpec {
            provider_id: Some(format!("memory://{}", name.len())),
            ..Default::default()
        });
        n
    }

    #[test]
    fn exclusion_label_is_parsed_like_upstream() {
        assert!(is_eligible(&node("a", &[])));
        for v in ["false", "False", "0", "f"] {
            assert!(
                is_eligible(&node("a", &[(LABEL_EXCLUDE_FROM_LB, v)])),
                "{v}"
            );
        }
        for v in ["true", "1", "", "yes", "excluded"] {
            assert!(
                !is_eligible(&node("a", &[(LABEL_EXCLUDE_FROM_LB, v)])),
                "{v:?}"
            );
        }
    }

    #[test]
    fn deleting_autoscaled_away_shut_down_and_uninitialized_nodes_are_not_targets() {
        let mut deleting = node("a", &[]);
        deleting.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::now()));
        assert!(!is_eligible(&deleting));
        let mut tainted = node("a", &[]);
        tainted.spec.as_mut().unwrap().taints = Some(vec![Taint {
            key: TAINT_TO_BE_DELETED.into(),
            effect: "NoSchedule".into(),
            ..Default::default()
        }]);
        assert!(!is_eligible(&tainted));
        let mut shut_down = node("a", &[]);
        shut_down.spec.as_mut().unwrap().taints = Some(vec![Taint {
            key: TAINT_SHUTDOWN.into(),
            effect: "NoSchedule".into(),
            ..Default::default()
        }]);
        assert!(!is_eligible(&shut_down));
        let mut no_pid = node("a", &[]);
        no_pid.spec.as_mut().unwrap().provider_id = Some(String::new());
        assert!(!is_eligible(&no_pid));
    }

    #[test]
    fn fingerprint_ignores_order_and_status_but_not_labels() {
        let a = node("a", &[]);
        let b = node("bb", &[("role", "edge")]);
        let one = eligible([&a, &b], &mut SharedLabels::default());
        let two = eligible([&b, &a], &mut SharedLabels::default());
        assert_eq!(fingerprint(&one), fingerprint(&two));
        let mut ready = a.clone();
        ready.status = Some(k8s_openapi::api::core::v1::NodeStatus {
            conditions: Some(vec![Default::default()]),
            ..Default::default()
        });
        assert_eq!(
            fingerprint(&eligible([&ready, &b], &mut SharedLabels::default())),
            fingerprint(&one)
        );
        let relabelled = node("a", &[("role", "edge")]);
        assert_ne!(
            fingerprint(&eligible([&relabelled, &b], &mut SharedLabels::default())),
            fingerprint(&one)
        );
    }

    #[test]
    fn long_node_lists_are_cut_in_messages() {
        let nodes: Vec<LbNode> = (0..25)
            .map(|i| LbNode {
                name: format!("n{i}"),
                ..Default::default()
            })
            .collect();
        let m = names_for_message(&nodes);
        assert!(
            m.starts_with("n0, n1") && m.ends_with("n19 and 5 more"),
            "{m}"
        );
        assert_eq!(names_for_message(&nodes[..2]), "n0, n1");
    }

    #[test]
    fn successive_sets_share_the_labels_of_nodes_that_kept_them() {
        let mut labels = SharedLabels::default();
        let (a, b) = (node("a", &[("pool", "x")]), node("bb", &[("pool", "y")]));
        let first = EligibleSet::of([&a, &b], &mut labels);
        let relabelled = node("bb", &[("pool", "z")]);
        let second = EligibleSet::of([&a, &relabelled], &mut labels);
        assert!(Arc::ptr_eq(&first.nodes[0].labels, &second.nodes[0].labels));
        assert!(!Arc::ptr_eq(
            &first.nodes[1].labels,
            &second.nodes[1].labels
        ));
        assert_eq!(
            second.nodes[1].labels.get("pool").map(String::as_str),
            Some("z")
        );
        assert_ne!(first.fingerprint, second.fingerprint);
        // A Node that left is forgotten.
        EligibleSet::of([&a], &mut labels);
        assert_eq!(labels.0.len(), 1);
    }
}
