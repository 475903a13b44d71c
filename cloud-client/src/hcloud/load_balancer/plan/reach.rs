//! Which nodes a load balancer in a network zone can target ([`Reach`]), from where
//! [`zones`](crate::hcloud::load_balancer::zones) found them, and the Service-level warning that
//! names the ones left out. Pure.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::capabilities::{NO_NODE_IN_ZONE, NODES_OUTSIDE_ZONE, Warning};
use crate::hcloud::load_balancer::annotations as a;

/// How many left-out nodes a warning names before it counts the rest.
const NAMED: usize = 10;

/// The load balancer's network zone and the zones of the nodes, as [`desired_targets`] asks.
///
/// [`desired_targets`]: super::desired_targets
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reach {
    /// `None`: not known, and every node is a target (as before zones were known).
    lb_zone: Option<String>,
    /// Node name → its location and that location's zone, for every node whose zone is known.
    nodes: HashMap<String, (String, String)>,
}

/// Whether a load balancer can target one node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict<'a> {
    Reachable,
    /// Its location is not known yet: neither a target nor reported.
    Unknown,
    /// In another network zone: `(location, zone)`.
    Outside(&'a str, &'a str),
}

impl Reach {
    /// Every node is a target: the load balancer's zone is not known.
    pub fn everywhere() -> Self {
        Self::default()
    }

    /// A load balancer in `lb_zone`, with each node's `(location, zone)`.
    pub fn new(lb_zone: &str, nodes: impl IntoIterator<Item = (String, (String, String))>) -> Self {
        Self {
            lb_zone: Some(lb_zone.to_owned()),
            nodes: nodes.into_iter().collect(),
        }
    }

    pub fn verdict(&self, node: &str) -> Verdict<'_> {
        let Some(lb_zone) = &self.lb_zone else {
            return Verdict::Reachable;
        };
        match self.nodes.get(node) {
            None => Verdict::Unknown,
            Some((_, zone)) if zone == lb_zone => Verdict::Reachable,
            Some((location, zone)) => Verdict::Outside(location, zone),
        }
    }

    /// The Service-level warning for the nodes left out (`(node, location, zone)`, in node
    /// order); `reachable` is how many nodes stay targets.
    pub fn warning(
        &self,
        left_out: &[(String, String, String)],
        reachable: usize,
    ) -> Option<Warning> {
        let lb_zone = self.lb_zone.as_deref()?;
        if left_out.is_empty() {
            return None;
        }
        let mut zones: BTreeMap<&str, Vec<String>> = BTreeMap::new();
        for (node, location, zone) in left_out.iter().take(NAMED) {
            zones
                .entry(zone)
                .or_default()
                .push(format!("{node} ({location})"));
        }
        let mut named: Vec<String> = zones
            .iter()
            .map(|(zone, nodes)| format!("in {zone}: {}", nodes.join(", ")))
            .collect();
        if left_out.len() > NAMED {
            named.push(format!("and {} more", left_out.len() - NAMED));
        }
        let other: BTreeSet<&str> = left_out.iter().map(|(_, _, z)| z.as_str()).collect();
        let (reason, head) = if reachable == 0 {
            (
                NO_NODE_IN_ZONE,
                format!(
                    "none of the {} nodes is a target of the load balancer, so it gets no \
                     traffic: it is in network zone {lb_zone}, and a load balancer reaches only \
                     servers of its own zone",
                    left_out.len()
                ),
            )
        } else {
            (
                NODES_OUTSIDE_ZONE,
                format!(
                    "{} of {} nodes are not targets of the load balancer and get no traffic from \
                     it: it is in network zone {lb_zone}, and a load balancer reaches only servers \
                     of its own zone",
                    left_out.len(),
                    left_out.len() + reachable
                ),
            )
        };
        let zone_list = other.into_iter().collect::<Vec<_>>().join(", ");
        Some(Warning::new(
            reason,
            format!(
                "{head}. Left out {}. To serve them, set annotation {}: \"true\" (one load \
                 balancer per zone that has nodes), or give them a Service of their own whose \
                 load balancer is in their zone (annotation {} with a location there, or {} \
                 with {zone_list}) and keep this one to its zone's nodes with annotation {}",
                named.join("; "),
                a::ONE_PER_NETWORK_ZONE,
                a::LOCATION,
                a::NETWORK_ZONE,
                a::NODE_SELECTOR,
            ),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reach() -> Reach {
        Reach::new(
            "eu-central",
            [
                ("a".into(), ("fsn1".into(), "eu-central".into())),
                ("c".into(), ("ash".into(), "us-east".into())),
            ],
        )
    }

    #[test]
    fn a_node_is_reachable_in_the_load_balancers_zone_only() {
        let r = reach();
        assert_eq!(r.verdict("a"), Verdict::Reachable);
        assert_eq!(r.verdict("c"), Verdict::Outside("ash", "us-east"));
        assert_eq!(r.verdict("b"), Verdict::Unknown, "no location yet");
        assert_eq!(Reach::everywhere().verdict("c"), Verdict::Reachable);
    }

    #[test]
    fn the_warning_names_the_nodes_their_zone_and_the_fixes() {
        let out = [("c".to_string(), "ash".to_string(), "us-east".to_string())];
        let w = reach().warning(&out, 2).unwrap();
        assert_eq!(w.reason, NODES_OUTSIDE_ZONE);
        for part in [
            "1 of 3 nodes",
            "network zone eu-central",
            "in us-east: c (ash)",
            a::LOCATION,
            a::NETWORK_ZONE,
            a::NODE_SELECTOR,
        ] {
            assert!(w.message.contains(part), "{part}: {}", w.message);
        }
        let none = reach().warning(&out, 0).unwrap();
        assert_eq!(none.reason, NO_NODE_IN_ZONE);
        assert!(
            none.message.contains("none of the 1 nodes"),
            "{}",
            none.message
        );
        assert!(reach().warning(&[], 3).is_none());
        assert!(Reach::everywhere().warning(&out, 2).is_none());
    }

    #[test]
    fn a_long_list_is_cut() {
        let out: Vec<_> = (0..13)
            .map(|i| (format!("n{i}"), "ash".to_string(), "us-east".to_string()))
            .collect();
        let w = reach().warning(&out, 1).unwrap();
        assert!(w.message.contains("n9 (ash)") && !w.message.contains("n10 (ash)"));
        assert!(w.message.contains("and 3 more"), "{}", w.message);
    }
}
