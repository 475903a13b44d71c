//! A Node as the controllers that read only a few of its fields keep it in their stores.
//!
//! `k8s_openapi`'s `Node` is 1.5 KB before any of its strings (its status alone is 0.9 KB of
//! fields, most of them empty once slimmed), and a store holds one per Node. This type has only
//! the fields node-, lifecycle- and route-controller read, so a store of 1200 Nodes is about a megabyte
//! smaller, and the watch never decodes the rest (images, capacity, `nodeInfo`): serde skips
//! fields a type does not name. It is read from the same `/api/v1/nodes` as a `Node`.

use k8s_openapi::api::core::v1::{Node, NodeAddress, NodeCondition, Taint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};

/// The fields of a Node that node-, lifecycle- and route-controller read.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
pub struct SlimNode {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<SlimNodeSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<SlimNodeStatus>,
}

/// `spec`: how the cloud knows the node, its pod network, its taints.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SlimNodeSpec {
    #[serde(
        default,
        rename = "providerID",
        skip_serializing_if = "Option::is_none"
    )]
    pub provider_id: Option<String>,
    #[serde(default, rename = "podCIDR", skip_serializing_if = "Option::is_none")]
    pub pod_cidr: Option<String>,
    #[serde(default, rename = "podCIDRs", skip_serializing_if = "Option::is_none")]
    pub pod_cidrs: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub taints: Option<Vec<Taint>>,
}

/// `status`: addresses and conditions.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
pub struct SlimNodeStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub addresses: Option<Vec<NodeAddress>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<NodeCondition>>,
}

impl k8s_openapi::Resource for SlimNode {
    const API_VERSION: &'static str = <Node as k8s_openapi::Resource>::API_VERSION;
    const GROUP: &'static str = <Node as k8s_openapi::Resource>::GROUP;
    const KIND: &'static str = <Node as k8s_openapi::Resource>::KIND;
    const VERSION: &'static str = <Node as k8s_openapi::Resource>::VERSION;
    const URL_PATH_SEGMENT: &'static str = <Node as k8s_openapi::Resource>::URL_PATH_SEGMENT;
    type Scope = <Node as k8s_openapi::Resource>::Scope;
}

impl k8s_openapi::Metadata for SlimNode {
    type Ty = ObjectMeta;
    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn metadata_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

impl From<Node> for SlimNode {
    fn from(node: Node) -> Self {
        SlimNode {
            metadata: node.metadata,
            spec: node.spec.map(|s| SlimNodeSpec {
                provider_id: s.provider_id,
                pod_cidr: s.pod_cidr,
                pod_cidrs: s.pod_cidrs,
                taints: s.taints,
            }),
            status: node.status.map(|s| SlimNodeStatus {
                addresses: s.addresses,
                conditions: s.conditions,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_reads_what_a_node_says_and_nothing_else() {
        let node = testenv::KubeletNode {
            node_ip: Some("10.0.0.7".into()),
            provider_id: Some("hcloud://7".into()),
            pod_cidr: Some("10.244.7.0/24".into()),
            uninitialized: true,
            ..testenv::KubeletNode::new("worker-7")
        }
        .registration();
        let json = serde_json::to_value(&node).unwrap();
        let read: SlimNode = serde_json::from_value(json).unwrap();
        assert_eq!(read, SlimNode::from(node.clone()));
        let again: SlimNode = serde_json::from_value(serde_json::to_value(&read).unwrap()).unwrap();
        assert_eq!(again, read, "what it writes reads back the same");
        let spec = read.spec.as_ref().unwrap();
        assert_eq!(spec.provider_id.as_deref(), Some("hcloud://7"));
        assert_eq!(
            spec.pod_cidrs.as_deref(),
            Some(&["10.244.7.0/24".to_string()][..])
        );
        assert!(spec.taints.as_ref().is_some_and(|t| !t.is_empty()));
        let status = read.status.as_ref().unwrap();
        assert!(
            status
                .addresses
                .as_ref()
                .is_some_and(|a| a.iter().any(|a| a.address == "10.0.0.7"))
        );
        assert!(
            status
                .conditions
                .as_ref()
                .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready"))
        );
        assert!(size_of::<SlimNode>() * 2 < size_of::<Node>());
    }
}
