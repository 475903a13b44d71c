//! Desired routes from the Nodes, compared with the routes the cloud has: which to keep, create or
//! delete, and which podCIDRs cannot be routed (and why). Pure: no I/O.

use cloud_client::{AddressKind, NodeAddress, NodeRef, Routability, Route, RouteRequest};
use controller_kit::slim_node::SlimNode as Node;
use kube::ResourceExt;

use crate::cidr::{Cidr, ClusterCidrs};
use crate::reasons;

/// A route a node needs and the cloud does not have (or has pointing elsewhere).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Create {
    pub node: String,
    pub request: RouteRequest,
}

/// A podCIDR that will not be routed, with the Warning to show on its Node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub node: String,
    pub reason: &'static str,
    pub message: String,
}

/// What one pass has to do.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Plan {
    /// Routes of ours (inside the cluster CIDR) that no node wants: stale, blackhole, node gone.
    pub deletes: Vec<Route>,
    pub creates: Vec<Create>,
    pub problems: Vec<Problem>,
    /// Nodes with at least one routable podCIDR, and whether all of theirs exist already.
    pub nodes: Vec<(String, bool)>,
    /// Nodes the provider's routes should reach but cannot ([`Routability::Unroutable`]), with
    /// why and what to do: their `NetworkUnavailable` condition says so.
    pub unroutable: Vec<(String, String)>,
}

/// The node's podCIDRs (`spec.podCIDRs`, else the legacy `spec.podCIDR`).
pub fn pod_cidrs(node: &Node) -> Vec<String> {
    let Some(spec) = node.spec.as_ref() else {
        return Vec::new();
    };
    match (&spec.pod_cidrs, &spec.pod_cidr) {
        (Some(list), _) if !list.is_empty() => list.clone(),
        (_, Some(one)) if !one.is_empty() => vec![one.clone()],
        _ => Vec::new(),
    }
}

fn provider_id(node: &Node) -> Option<&str> {
    node.spec
        .as_ref()
        .and_then(|s| s.provider_id.as_deref())
        .filter(|p| !p.is_empty())
}

fn addresses(node: &Node) -> Vec<NodeAddress> {
    node.status
        .as_ref()
        .and_then(|s| s.addresses.as_ref())
        .map(|list| {
            list.iter()
                .filter_map(|a| {
                    let kind = match a.type_.as_str() {
                        "InternalIP" => AddressKind::InternalIP,
                        "ExternalIP" => AddressKind::ExternalIP,
                        "Hostname" => AddressKind::Hostname,
                        _ => return None,
                    };
                    Some(NodeAddress::new(kind, a.address.clone()))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// A route serves `node` when it is not a blackhole and its gateway is one of the node's
/// InternalIPs (or, without any, the cloud maps the gateway to a server of the node's name). A
/// node whose private IP changed therefore gets its route replaced as soon as its InternalIP
/// follows.
fn serves(route: &Route, node: &str, internal: &[&str]) -> bool {
    if internal.is_empty() {
        !route.blackhole && route.target_node == node
    } else {
        internal.contains(&route.gateway.as_str())
    }
}

/// Compares the nodes with the cloud's routes. `routability` is the provider's word on whether
/// its routes reach a node (by providerID): a node without one, or another cloud's node in a
/// hybrid cluster, gets no route.
pub fn plan<'a>(
    nodes: impl IntoIterator<Item = &'a Node>,
    routes: &[Route],
    cluster: &ClusterCidrs,
    routability: impl Fn(&str) -> Routability,
    ipv6_unsupported: Option<&str>,
) -> Plan {
    let mut plan = Plan::default();
    let mut wanted_destinations = Vec::new();
    for node in nodes {
        let cidrs = pod_cidrs(node);
        let verdict = provider_id(node).map(&routability);
        if !cidrs.is_empty()
            && let Some(Routability::Unreachable {
                reason,
                why,
                remedy,
            }) = &verdict
        {
            plan.problems.push(Problem {
                node: node.name_any(),
                reason,
                message: format!(
                    "{why}, so its podCIDR {} is not routed by the cloud; {remedy}",
                    cidrs.join(", ")
                ),
            });
            continue;
        }
        if !cidrs.is_empty()
            && let Some(Routability::Unroutable { reason, message }) = &verdict
        {
            let name = node.name_any();
            plan.problems.push(Problem {
                node: name.clone(),
                reason,
                message: message.clone(),
            });
            plan.unroutable.push((name, message.clone()));
            continue;
        }
        if cidrs.is_empty()
            || verdict != Some(Routability::Routable)
            || node.metadata.deletion_timestamp.is_some()
        {
            continue;
        }
        let name = node.name_any();
        let addrs = addresses(node);
        let internal: Vec<&str> = addrs
            .iter()
            .filter(|a| a.kind == AddressKind::InternalIP)
            .map(|a| a.address.as_str())
            .collect();
        let mut all_present = true;
        let mut any_routable = false;
        for cidr in cidrs {
            match Cidr::parse(&cidr) {
                Err(e) => {
                    plan.problems.push(Problem {
                        node: name.clone(),
                        reason: reasons::INVALID_POD_CIDR,
                        message: format!("podCIDR {cidr:?} cannot be routed: {e}"),
                    });
                    continue;
                }
                Ok(c) if c.is_ipv6() && ipv6_unsupported.is_some() => {
                    let why = ipv6_unsupported.unwrap_or_default();
                    plan.problems.push(Problem {
                        node: name.clone(),
                        reason: reasons::IPV6_UNSUPPORTED,
                        message: format!(
                            "podCIDR {cidr} is IPv6: {why}, so its routing must be done by the CNI (no route created)"
                        ),
                    });
                    continue;
                }
                Ok(c) if !cluster.covers(&c) => {
                    any_routable = true;
                    all_present = false;
                    plan.problems.push(Problem {
                        node: name.clone(),
                        reason: reasons::CLUSTER_CIDR_MISCONFIGURED,
                        message: format!(
                            "podCIDR {cidr} is outside --cluster-cidr {cluster}: no route created; fix --cluster-cidr or the node's podCIDR"
                        ),
                    });
                    continue;
                }
                Ok(_) => {}
            }
            any_routable = true;
            wanted_destinations.push(cidr.clone());
            let present = routes
                .iter()
                .any(|r| r.destination_cidr == cidr && serves(r, &name, &internal));
            if !present {
                all_present = false;
                plan.creates.push(Create {
                    node: name.clone(),
                    request: RouteRequest {
                        name_hint: node.uid().unwrap_or_default(),
                        target_node: NodeRef::with_provider_id(
                            name.clone(),
                            provider_id(node).unwrap_or_default(),
                        ),
                        target_addresses: addrs.clone(),
                        destination_cidr: cidr,
                    },
                });
            }
        }
        if any_routable {
            plan.nodes.push((name, all_present));
        }
    }
    // A wanted destination held by a wrong gateway is replaced by its create, not deleted here.
    plan.deletes = routes
        .iter()
        .filter(|r| cluster.owns(&r.destination_cidr))
        .filter(|r| !wanted_destinations.contains(&r.destination_cidr))
        .cloned()
        .collect();
    plan
}

#[cfg(test)]
mod tests {
    use super::*;
    use controller_kit::slim_node::{SlimNodeSpec as NodeSpec, SlimNodeStatus as NodeStatus};
    use k8s_openapi::api::core::v1::NodeAddress as KAddr;

    fn node(name: &str, cidrs: &[&str], ip: Option<&str>) -> Node {
        let mut n = Node::default();
        n.metadata.name = Some(name.into());
        n.spec = Some(NodeSpec {
            provider_id: Some(format!("sim://{}", name.len())),
            pod_cidrs: Some(cidrs.iter().map(|c| c.to_string()).collect()),
            ..Default::default()
        });
        n.status = Some(NodeStatus {
            addresses: ip.map(|ip| {
                vec![KAddr {
                    type_: "InternalIP".into(),
                    address: ip.into(),
                }]
            }),
            ..Default::default()
        });
        n
    }

    fn route(dest: &str, gw: &str, target: &str) -> Route {
        Route {
            name: format!("{gw}-{dest}"),
            target_node: target.into(),
            destination_cidr: dest.into(),
            gateway: gw.into(),
            blackhole: target.is_empty(),
        }
    }

    fn cluster() -> ClusterCidrs {
        ClusterCidrs::parse("10.244.0.0/16").unwrap()
    }

    /// A provider whose routes reach `sim://` nodes, not its `sim-dedicated://` ones, and know
    /// nothing of other schemes.
    fn routability(provider_id: &str) -> Routability {
        if provider_id.starts_with("sim://") {
            Routability::Routable
        } else if provider_id.starts_with("sim-dedicated://") {
            Routability::Unreachable {
                reason: "DedicatedServerNotRoutable",
                why: format!("node is a dedicated server ({provider_id})"),
                remedy: "let the CNI route it",
            }
        } else if provider_id.starts_with("sim-far://") {
            Routability::Unroutable {
                reason: "ZoneWithoutSubnet",
                message: format!("{provider_id} is where the network has no subnet"),
            }
        } else {
            Routability::Foreign
        }
    }

    fn plan<'a>(
        nodes: impl IntoIterator<Item = &'a Node>,
        routes: &[Route],
        cluster: &ClusterCidrs,
    ) -> Plan {
        super::plan(
            nodes,
            routes,
            cluster,
            routability,
            Some("Hetzner networks are IPv4-only"),
        )
    }

    #[test]
    fn keeps_creates_and_deletes_only_inside_the_cluster_cidr() {
        let a = node("a", &["10.244.1.0/24"], Some("10.0.0.2"));
        let b = node("b", &["10.244.2.0/24"], Some("10.0.0.3"));
        let routes = [
            route("10.244.1.0/24", "10.0.0.2", "a"),
            route("10.244.9.0/24", "10.0.0.9", ""), // stale blackhole
            route("10.244.8.0/24", "10.0.0.8", "gone"), // node gone
            route("192.168.0.0/24", "10.0.0.7", ""), // not ours
        ];
        let p = plan([&a, &b], &routes, &cluster());
        assert_eq!(p.creates.len(), 1);
        assert_eq!(p.creates[0].node, "b");
        assert_eq!(p.creates[0].request.destination_cidr, "10.244.2.0/24");
        let deleted: Vec<&str> = p
            .deletes
            .iter()
            .map(|r| r.destination_cidr.as_str())
            .collect();
        assert_eq!(deleted, ["10.244.9.0/24", "10.244.8.0/24"]);
        assert_eq!(p.nodes, [("a".into(), true), ("b".into(), false)]);
        assert!(p.problems.is_empty());
    }

    #[test]
    fn unroutable_nodes_get_no_route_a_warning_and_their_condition_says_why() {
        let mut far = node("far", &["10.244.3.0/24"], None);
        far.spec.as_mut().unwrap().provider_id = Some("sim-far://3".into());
        let mut far_no_cidr = node("far-2", &[], None);
        far_no_cidr.spec.as_mut().unwrap().provider_id = Some("sim-far://4".into());
        // A route left from before points at a gateway that no longer serves it: it goes.
        let routes = [route("10.244.3.0/24", "10.0.0.3", "")];
        let p = plan([&far, &far_no_cidr], &routes, &cluster());
        assert!(p.creates.is_empty() && p.nodes.is_empty());
        assert_eq!(p.deletes.len(), 1);
        let why = "sim-far://3 is where the network has no subnet".to_string();
        assert_eq!(p.unroutable, [("far".to_string(), why.clone())]);
        assert_eq!(
            p.problems,
            [Problem {
                node: "far".into(),
                reason: "ZoneWithoutSubnet",
                message: why
            }]
        );
    }

    #[test]
    fn unreachable_nodes_get_no_route_and_a_warning_and_foreign_ones_are_left_alone() {
        let a = node("a", &["10.244.1.0/24"], Some("10.0.0.2"));
        let mut dedicated = node("bm", &["10.244.7.0/24"], Some("10.1.0.7"));
        dedicated.spec.as_mut().unwrap().provider_id = Some("sim-dedicated://1000001".into());
        let mut foreign = node("other-cloud", &["10.244.8.0/24"], Some("10.2.0.8"));
        foreign.spec.as_mut().unwrap().provider_id = Some("aws:///eu-central-1a/i-1".into());
        let p = plan([&a, &dedicated, &foreign], &[], &cluster());
        assert_eq!(p.creates.len(), 1);
        assert_eq!(p.creates[0].node, "a");
        let reasons: Vec<(&str, &str)> = p
            .problems
            .iter()
            .map(|p| (p.node.as_str(), p.reason))
            .collect();
        assert_eq!(reasons, [("bm", "DedicatedServerNotRoutable")]);
        assert_eq!(
            p.problems[0].message,
            "node is a dedicated server (sim-dedicated://1000001), so its podCIDR 10.244.7.0/24 \
             is not routed by the cloud; let the CNI route it"
        );
    }

    #[test]
    fn changed_private_ip_replaces_the_route_without_deleting_it_first() {
        let a = node("a", &["10.244.1.0/24"], Some("10.0.0.5"));
        let routes = [route("10.244.1.0/24", "10.0.0.2", "")];
        let p = plan([&a], &routes, &cluster());
        assert_eq!(p.creates.len(), 1, "create_route replaces the old gateway");
        assert!(p.deletes.is_empty());
    }

    #[test]
    fn a_fresh_server_missing_from_an_old_snapshot_is_not_a_blackhole_to_us() {
        let a = node("a", &["10.244.1.0/24"], Some("10.0.0.2"));
        let routes = [route("10.244.1.0/24", "10.0.0.2", "")];
        let p = plan([&a], &routes, &cluster());
        assert!(p.creates.is_empty() && p.deletes.is_empty(), "{p:?}");
    }

    #[test]
    fn ipv6_and_out_of_cluster_cidrs_are_problems_not_calls() {
        let dual = node(
            "d",
            &["10.244.1.0/24", "fd00:10:244:1::/64"],
            Some("10.0.0.2"),
        );
        let outside = node("o", &["10.99.0.0/24"], Some("10.0.0.3"));
        let p = plan([&dual, &outside], &[], &cluster());
        assert_eq!(
            p.creates.len(),
            1,
            "the IPv4 half of a dual-stack node is routed"
        );
        let reasons: Vec<&str> = p.problems.iter().map(|x| x.reason).collect();
        assert_eq!(
            reasons,
            [
                reasons::IPV6_UNSUPPORTED,
                reasons::CLUSTER_CIDR_MISCONFIGURED
            ]
        );
        assert!(p.problems[0].message.contains("fd00:10:244:1::/64"));
        assert_eq!(p.nodes, [("d".into(), false), ("o".into(), false)]);
    }

    #[test]
    fn nodes_without_pod_cidrs_or_provider_ids_are_skipped_silently() {
        let mut uninitialized = node("u", &["10.244.4.0/24"], None);
        uninitialized.spec.as_mut().unwrap().provider_id = None;
        let bare = node("b", &[], None);
        let mut robot_without_cidr = node("r", &[], None);
        robot_without_cidr.spec.as_mut().unwrap().provider_id = Some("sim-dedicated://7".into());
        let p = plan(
            [&uninitialized, &bare, &robot_without_cidr],
            &[],
            &cluster(),
        );
        assert_eq!(p, Plan::default());
    }
}
