//! Which Nodes a load balancer sends traffic to (upstream's stable node set, KEP-3458), as the cloud
//! sees them.

use std::collections::{BTreeMap, HashMap};
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex, PoisonError};

use cloud_client::LbNode;
use cloud_client::values::parse_bool;
use k8s_openapi::api::core::v1::Node;
use kube::ResourceExt;

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

/// What service-controller keeps of the Nodes: per Node, what a load balancer targets it by (its
/// [`LbNode`], when it is eligible) and a hash of that, instead of the Node objects. A reflector of
/// slimmed Nodes held each Node's labels twice at 1200 Nodes (in the Node, and shared by the
/// eligible sets), beside metadata and spec no load balancer reads.
///
/// Every reconcile shares the eligible set, built at most once per change: during a join burst
/// ten concurrent reconciles each building their own held 20 MB of cloned labels
/// (`cargo xtask bench system`); the sets share each Node's labels while they stay the same.
#[derive(Debug, Default)]
pub struct NodeCache(Mutex<Nodes>);

#[derive(Debug, Default)]
struct Nodes {
    by_name: HashMap<String, Entry>,
    /// Counts relists: an entry a relist did not deliver is gone when it completes.
    relist: u32,
    /// The eligible set, built when first asked for after a change.
    set: Option<Arc<EligibleSet>>,
}

#[derive(Debug)]
struct Entry {
    /// [`target_hash`] of the Node: a kubelet's status report leaves it alone.
    target: u64,
    /// The Node as a load balancer targets it; `None` while it is not eligible.
    node: Option<LbNode>,
    /// For Events about the Node.
    uid: Option<String>,
    /// The relist that last delivered it.
    relist: u32,
}

impl NodeCache {
    fn lock(&self) -> std::sync::MutexGuard<'_, Nodes> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records a Node from the watch; whether what a load balancer targets by changed.
    pub fn apply(&self, node: &Node) -> bool {
        let (name, target, eligible) = (node.name_any(), target_hash(node), is_eligible(node));
        let mut nodes = self.lock();
        let relist = nodes.relist;
        let old = nodes.by_name.remove(&name);
        let was_eligible = old.as_ref().is_some_and(|e| e.node.is_some());
        let unchanged =
            old.as_ref().is_some_and(|e| e.target == target) && was_eligible == eligible;
        let old = old.and_then(|e| e.node);
        let uid = node.metadata.uid.clone();
        let node = if unchanged {
            old
        } else {
            // Labels that stayed the same stay shared with the sets built before.
            let kept = old.map(|n| n.labels).filter(|l| **l == *node.labels());
            eligible.then(|| lb_node(node, kept))
        };
        nodes.by_name.insert(
            name,
            Entry {
                target,
                node,
                uid,
                relist,
            },
        );
        if !unchanged && (eligible || was_eligible) {
            nodes.set = None;
        }
        !unchanged
    }

    /// Forgets a deleted Node.
    pub fn delete(&self, node: &Node) {
        let mut nodes = self.lock();
        if let Some(gone) = nodes.by_name.remove(&node.name_any())
            && gone.node.is_some()
        {
            nodes.set = None;
        }
    }

    /// A relist starts: the Nodes it does not deliver are forgotten when it completes.
    pub fn relist(&self) {
        let mut nodes = self.lock();
        nodes.relist = nodes.relist.wrapping_add(1);
    }

    /// The relist is complete.
    pub fn relisted(&self) {
        let mut nodes = self.lock();
        let relist = nodes.relist;
        let before = nodes.by_name.len();
        nodes.by_name.retain(|_, e| e.relist == relist);
        if nodes.by_name.len() != before {
            nodes.set = None;
        }
    }

    /// The Node called `name`, as much of it as an Event about it needs (name and UID).
    pub fn event_target(&self, name: &str) -> Option<Node> {
        let nodes = self.lock();
        let entry = nodes.by_name.get(name)?;
        let mut node = Node::default();
        node.metadata.name = Some(name.to_string());
        node.metadata.uid = entry.uid.clone();
        Some(node)
    }

    /// How many Nodes it holds.
    pub fn len(&self) -> usize {
        self.lock().by_name.len()
    }

    /// Whether it holds no Node.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The eligible set now.
    pub fn eligible(&self) -> Arc<EligibleSet> {
        let mut nodes = self.lock();
        if let Some(set) = &nodes.set {
            return set.clone();
        }
        let mut eligible: Vec<LbNode> = nodes
            .by_name
            .values()
            .filter_map(|e| e.node.clone())
            .collect();
        eligible.sort_by(|a, b| a.name.cmp(&b.name));
        let set = Arc::new(EligibleSet {
            fingerprint: fingerprint(&eligible),
            nodes: eligible,
        });
        nodes.set = Some(set.clone());
        set
    }
}

/// The node as the load-balancer provider needs it, with `labels` when they are the Node's.
fn lb_node(node: &Node, labels: Option<Arc<BTreeMap<String, String>>>) -> LbNode {
    LbNode {
        name: node.name_any(),
        provider_id: provider_id(node).map(str::to_string),
        labels: labels.unwrap_or_else(|| Arc::new(node.labels().clone())),
        internal_ips: internal_ips(node).map(str::to_string).collect(),
    }
}

/// The eligible Nodes, sorted by name (so equal sets compare and hash equal), and their
/// [`fingerprint`].
#[derive(Debug, Default)]
pub struct EligibleSet {
    /// Sorted by name.
    pub nodes: Vec<LbNode>,
    pub fingerprint: u64,
}

/// What a load balancer targets `node` by (name, providerID, labels, internal IPs), hashed.
fn target_hash(node: &Node) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    let name = node.metadata.name.as_deref().unwrap_or_default();
    hash_target(
        &mut h,
        name,
        provider_id(node),
        node.labels(),
        internal_ips(node),
    );
    h.finish()
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

    fn kubelet_node(name: &str, pool: &str, provider_id: Option<&str>) -> Node {
        testenv::KubeletNode {
            node_ip: Some(format!("10.0.0.{}", name.len())),
            labels: vec![("pool".into(), pool.into())],
            provider_id: provider_id.map(str::to_string),
            ..testenv::KubeletNode::new(name)
        }
        .registration()
    }

    #[test]
    fn the_eligible_set_is_sorted_by_name_and_holds_what_a_load_balancer_targets_by() {
        let cache = NodeCache::default();
        for name in ["c", "a", "b"] {
            cache.apply(&kubelet_node(name, name, Some(&format!("memory://{name}"))));
        }
        cache.apply(&kubelet_node("d", "d", None));
        let set = cache.eligible();
        let names: Vec<&str> = set.nodes.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, ["a", "b", "c"], "d has no providerID");
        assert_eq!(set.nodes[0].internal_ips, ["10.0.0.1"]);
        assert_eq!(set.nodes[0].provider_id.as_deref(), Some("memory://a"));
        assert_eq!(
            set.nodes[0].labels.get("pool").map(String::as_str),
            Some("a")
        );
        assert_eq!(set.fingerprint, fingerprint(&set.nodes));
        assert!(Arc::ptr_eq(&set, &cache.eligible()), "built once");
    }

    #[test]
    fn a_status_report_is_no_target_change_but_a_label_is() {
        let cache = NodeCache::default();
        let mut node = kubelet_node("worker-7", "a", Some("memory://7"));
        assert!(cache.apply(&node));
        let before = cache.eligible();
        node.status.as_mut().unwrap().images = None;
        node.metadata.resource_version = Some("2".into());
        assert!(!cache.apply(&node));
        assert!(Arc::ptr_eq(&before, &cache.eligible()), "the set is kept");
        node.labels_mut().insert("zone".into(), "b".into());
        assert!(cache.apply(&node));
        assert_ne!(cache.eligible().fingerprint, before.fingerprint);
        node.spec.as_mut().unwrap().provider_id = None;
        assert!(cache.apply(&node), "no longer eligible");
        assert!(cache.eligible().nodes.is_empty());
        assert_eq!(cache.len(), 1, "still known, to see it come back");
    }

    #[test]
    fn successive_sets_share_the_labels_of_nodes_that_kept_them() {
        let cache = NodeCache::default();
        cache.apply(&node("a", &[("pool", "x")]));
        cache.apply(&node("bb", &[("pool", "y")]));
        let first = cache.eligible();
        cache.apply(&node("bb", &[("pool", "z")]));
        let mut moved = node("a", &[("pool", "x")]);
        moved.status = Some(k8s_openapi::api::core::v1::NodeStatus {
            addresses: Some(vec![k8s_openapi::api::core::v1::NodeAddress {
                type_: "InternalIP".into(),
                address: "10.0.0.9".into(),
            }]),
            ..Default::default()
        });
        cache.apply(&moved);
        let second = cache.eligible();
        assert!(Arc::ptr_eq(&first.nodes[0].labels, &second.nodes[0].labels));
        assert_eq!(second.nodes[0].internal_ips, ["10.0.0.9"]);
        assert!(!Arc::ptr_eq(
            &first.nodes[1].labels,
            &second.nodes[1].labels
        ));
        assert_eq!(
            second.nodes[1].labels.get("pool").map(String::as_str),
            Some("z")
        );
        assert_ne!(first.fingerprint, second.fingerprint);
    }

    #[test]
    fn a_relist_forgets_the_nodes_it_did_not_deliver() {
        let cache = NodeCache::default();
        for name in ["a", "bb", "ccc"] {
            cache.apply(&node(name, &[]));
        }
        cache.delete(&node("a", &[]));
        assert_eq!(cache.eligible().nodes.len(), 2);
        cache.relist();
        cache.apply(&node("bb", &[]));
        assert_eq!(
            cache.eligible().nodes.len(),
            2,
            "kept until the relist completes"
        );
        cache.relisted();
        let names: Vec<String> = cache
            .eligible()
            .nodes
            .iter()
            .map(|n| n.name.clone())
            .collect();
        assert_eq!(names, ["bb"]);
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
        let set = |nodes: &[&Node]| {
            let cache = NodeCache::default();
            for n in nodes {
                cache.apply(n);
            }
            cache.eligible().fingerprint
        };
        let a = node("a", &[]);
        let b = node("bb", &[("role", "edge")]);
        assert_eq!(set(&[&a, &b]), set(&[&b, &a]));
        let mut ready = a.clone();
        ready.status = Some(k8s_openapi::api::core::v1::NodeStatus {
            conditions: Some(vec![Default::default()]),
            ..Default::default()
        });
        assert_eq!(set(&[&ready, &b]), set(&[&a, &b]));
        let relabelled = node("a", &[("role", "edge")]);
        assert_ne!(set(&[&relabelled, &b]), set(&[&a, &b]));
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
}
