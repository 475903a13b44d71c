//! Address merge, validation and change detection, by upstream's rules (docs/upstream-behavior.md).

use std::collections::HashMap;

use cloud_client::{AddressKind, NodeAddress};
// The store's Node: only the fields this controller reads (see controller_kit::slim_node).
use controller_kit::slim_node::SlimNode as Node;
use k8s_openapi::api::core::v1::NodeAddress as K8sAddress;
use kube::ResourceExt;
use kube::runtime::reflector::Store;

use crate::keys::ANNOTATION_PROVIDED_NODE_IP;
use crate::nodeip::{self, NodeIpError};

/// Outcome of computing a node's addresses.
#[derive(Debug, PartialEq, Eq)]
pub enum AddressUpdate {
    /// Nothing to write.
    Unchanged,
    /// The cloud returned no address: never clear addresses.
    NoCloudAddresses,
    /// Write this list (replacing the old one).
    Changed(Vec<NodeAddress>),
}

fn kind_from_str(s: &str) -> Option<AddressKind> {
    Some(match s {
        "Hostname" => AddressKind::Hostname,
        "ExternalIP" => AddressKind::ExternalIP,
        "InternalIP" => AddressKind::InternalIP,
        "ExternalDNS" => AddressKind::ExternalDNS,
        "InternalDNS" => AddressKind::InternalDNS,
        _ => return None,
    })
}

/// The node's current addresses.
pub fn current(node: &Node) -> Vec<K8sAddress> {
    node.status
        .as_ref()
        .and_then(|s| s.addresses.clone())
        .unwrap_or_default()
}

/// Computes the desired addresses of `node` from the cloud's list: an empty list changes nothing,
/// the node's own Hostname is kept when the cloud has none, the node-IP filter applies (with
/// `accept_outside_cloud`, a node IP the cloud does not know stays, first).
pub fn desired(
    node: &Node,
    cloud: &[NodeAddress],
    accept_outside_cloud: bool,
) -> Result<AddressUpdate, NodeIpError> {
    if cloud.is_empty() {
        return Ok(AddressUpdate::NoCloudAddresses);
    }
    let old = current(node);
    let mut new: Vec<NodeAddress> = cloud.to_vec();
    if !new.iter().any(|a| a.kind == AddressKind::Hostname) {
        new.extend(
            old.iter()
                .filter(|a| a.type_ == "Hostname")
                .map(|a| NodeAddress::new(AddressKind::Hostname, a.address.clone())),
        );
    }
    if let Some(v) = node
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ANNOTATION_PROVIDED_NODE_IP))
    {
        let ips = nodeip::parse(v)?;
        new = nodeip::filter_with(&ips, &new, accept_outside_cloud)?.addresses;
    }
    Ok(if changed(&old, &new) {
        AddressUpdate::Changed(new)
    } else {
        AddressUpdate::Unchanged
    })
}

/// Upstream change detection: lengths differ, or an address differs from the old value recorded for
/// its type (old list reduced to type → address, last entry wins).
pub fn changed(old: &[K8sAddress], new: &[NodeAddress]) -> bool {
    if old.len() != new.len() {
        return true;
    }
    let by_type: HashMap<Option<AddressKind>, &str> = old
        .iter()
        .map(|a| (kind_from_str(&a.type_), a.address.as_str()))
        .collect();
    new.iter()
        .any(|a| by_type.get(&Some(a.kind)).copied() != Some(a.address.as_str()))
}

/// The first of `stated` (addresses `node`'s own annotations state) that another Node in `store`
/// has, with that Node's name. Only stated addresses are checked: the cloud's own may move from
/// a deleted server's Node to a new one before the old Node is gone.
pub fn held_by_another(
    store: &Store<Node>,
    node: &Node,
    stated: &[String],
) -> Option<(String, String)> {
    if stated.is_empty() {
        return None;
    }
    let name = node.name_any();
    store.state().iter().find_map(|other| {
        if other.name_any() == name {
            return None;
        }
        current(other)
            .iter()
            .find(|a| stated.contains(&a.address))
            .map(|a| (a.address.clone(), other.name_any()))
    })
}

/// The status patch body (JSON merge patch: the list is replaced as a whole).
pub fn status_patch(addresses: &[NodeAddress]) -> serde_json::Value {
    let list: Vec<serde_json::Value> = addresses
        .iter()
        .map(|a| serde_json::json!({"type": a.kind.as_str(), "address": a.address}))
        .collect();
    serde_json::json!({"status": {"addresses": list}})
}

#[cfg(test)]
mod tests {
    use super::*;
    use AddressKind::*;
    use controller_kit::slim_node::SlimNodeStatus as NodeStatus;

    fn node(old: &[(&str, &str)], node_ip: Option<&str>) -> Node {
        let mut n = Node {
            status: Some(NodeStatus {
                addresses: Some(
                    old.iter()
                        .map(|(t, a)| K8sAddress {
                            type_: t.to_string(),
                            address: a.to_string(),
                        })
                        .collect(),
                ),
                ..Default::default()
            }),
            ..Default::default()
        };
        if let Some(ip) = node_ip {
            n.metadata.annotations = Some(
                [(ANNOTATION_PROVIDED_NODE_IP.to_string(), ip.to_string())]
                    .into_iter()
                    .collect(),
            );
        }
        n
    }

    fn desired_strict(node: &Node, cloud: &[NodeAddress]) -> Result<AddressUpdate, NodeIpError> {
        desired(node, cloud, false)
    }

    #[test]
    fn empty_cloud_never_clears() {
        assert_eq!(
            desired_strict(&node(&[("InternalIP", "10.0.0.1")], None), &[]).unwrap(),
            AddressUpdate::NoCloudAddresses
        );
    }

    #[test]
    fn hostname_kept_when_cloud_has_none() {
        let n = node(&[("Hostname", "n1")], None);
        let got = desired_strict(&n, &[NodeAddress::new(ExternalIP, "1.2.3.4")]).unwrap();
        assert_eq!(
            got,
            AddressUpdate::Changed(vec![
                NodeAddress::new(ExternalIP, "1.2.3.4"),
                NodeAddress::new(Hostname, "n1")
            ])
        );
    }

    #[test]
    fn unchanged_and_reorder_is_not_a_change() {
        let n = node(&[("ExternalIP", "1.2.3.4"), ("Hostname", "n1")], None);
        let cloud = [
            NodeAddress::new(Hostname, "n1"),
            NodeAddress::new(ExternalIP, "1.2.3.4"),
        ];
        assert_eq!(
            desired_strict(&n, &cloud).unwrap(),
            AddressUpdate::Unchanged
        );
        let cloud2 = [
            NodeAddress::new(Hostname, "n1"),
            NodeAddress::new(ExternalIP, "1.2.3.5"),
        ];
        assert!(matches!(
            desired_strict(&n, &cloud2).unwrap(),
            AddressUpdate::Changed(_)
        ));
    }

    #[test]
    fn node_ip_filter_applies_and_errors() {
        let n = node(&[], Some("10.0.0.9"));
        let cloud = [NodeAddress::new(ExternalIP, "1.2.3.4")];
        assert!(matches!(
            desired_strict(&n, &cloud),
            Err(NodeIpError::NotFound { .. })
        ));
        let n = node(&[], Some("bogus"));
        assert!(matches!(
            desired_strict(&n, &cloud),
            Err(NodeIpError::Invalid { .. })
        ));
    }

    #[test]
    fn patch_replaces_list() {
        let p = status_patch(&[NodeAddress::new(InternalIP, "10.0.0.1")]);
        assert_eq!(
            p,
            serde_json::json!({"status": {"addresses": [{"type": "InternalIP", "address": "10.0.0.1"}]}})
        );
    }
}
