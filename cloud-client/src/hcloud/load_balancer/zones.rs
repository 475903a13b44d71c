//! Which nodes a load balancer can reach. Hetzner adds a server, or a dedicated server's IP, only
//! to a load balancer of the server's own network zone, and refuses a whole request that names one
//! of another zone (`422 unsupported_error`): one node in `ash` kept a load balancer in `fsn1` from
//! ever being made. So a node of another zone is left out before any write, in the create as in
//! later updates, and the Service is told which nodes and why ([`NODES_OUTSIDE_ZONE`]).
//!
//! A node's location is its `topology.kubernetes.io/region` label (set at initialization by us or
//! HCCM, so it costs no call), else its server's (the shared server snapshot) or, for a dedicated
//! server, its data center in the Robot list. The zone of a location is the catalog's
//! ([`Catalog::zone_of`]), and the load balancer's is the one the API reports for it, or the one
//! its create asks for. A node whose location is not known is neither a target nor reported.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::annotations as a;
use super::catalog::Catalog;
use super::spec::{LbSpec, Placement};
use crate::capabilities::{LbNode, NO_NODE_IN_ZONE, NODES_OUTSIDE_ZONE, Warning};
use crate::error::CloudError;
use crate::hcloud::provider_id::ProviderId;
use crate::hcloud::servers::{ServerCache, ServerKey};
use crate::hcloud::transport::Transport;
use crate::hcloud::wire::LoadBalancer;

/// The node label that names a node's location (HCCM's and ours), and its deprecated twin.
const REGION_LABELS: [&str; 2] = [
    "topology.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/region",
];

/// How many left-out nodes a warning names before it counts the rest.
const NAMED: usize = 10;

/// The load balancer's network zone and the zones of the nodes, as [`desired_targets`] asks.
///
/// [`desired_targets`]: super::plan::desired_targets
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
                "{head}. Left out {}. To serve them, give them a Service of their own whose \
                 load balancer is in their zone (annotation {} with a location there, or {} \
                 with {zone_list}), and keep this one to its zone's nodes with annotation {}",
                named.join("; "),
                a::LOCATION,
                a::NETWORK_ZONE,
                a::NODE_SELECTOR,
            ),
        ))
    }
}

/// The network zone of `lb`, or of the load balancer a create for `spec` would make; `None` when
/// it is not known (a location the catalog lacks, or no placement: the create refuses that).
pub(crate) async fn lb_zone(
    catalog: &Catalog,
    t: &Transport,
    spec: &LbSpec,
    lb: Option<&LoadBalancer>,
) -> Result<Option<String>, CloudError> {
    let location = match lb {
        Some(lb) => {
            let Some(location) = &lb.location else {
                return Ok(None);
            };
            if let Some(zone) = location.network_zone.as_ref().filter(|z| !z.is_empty()) {
                return Ok(Some(zone.clone()));
            }
            location.name.clone()
        }
        None => match spec.placement() {
            Ok((Placement::NetworkZone(zone), _)) => return Ok(Some(zone)),
            Ok((Placement::Location(location), _)) => location,
            Err(_) => return Ok(None),
        },
    };
    catalog.zone_of(t, &location).await
}

/// Where each node `spec` would target is, for a load balancer in `lb_zone`: its label, else its
/// server's location (`servers`) or its dedicated server's data center (`robot_dcs`: server
/// number → data center, e.g. `FSN1-DC10`), then the catalog's zone of that location.
pub(crate) async fn reach(
    catalog: &Catalog,
    t: &Transport,
    servers: &ServerCache,
    lb_zone: Option<String>,
    spec: &LbSpec,
    nodes: &[LbNode],
    robot_dcs: &BTreeMap<i64, String>,
) -> Result<Reach, CloudError> {
    let Some(lb_zone) = lb_zone else {
        return Ok(Reach::everywhere());
    };
    let mut located: Vec<(&str, String)> = Vec::new();
    for n in nodes {
        if spec
            .node_selector
            .as_ref()
            .is_some_and(|s| !s.matches(&n.labels))
        {
            continue;
        }
        if let Some(location) = location(n, servers, robot_dcs).await? {
            located.push((&n.name, location));
        }
    }
    let mut zones: HashMap<String, Option<String>> = HashMap::new();
    for (_, location) in &located {
        if !zones.contains_key(location) {
            let zone = catalog.zone_of(t, location).await?;
            zones.insert(location.clone(), zone);
        }
    }
    let nodes = located.into_iter().filter_map(|(node, location)| {
        let zone = zones.get(&location).cloned().flatten()?;
        Some((node.to_owned(), (location, zone)))
    });
    Ok(Reach::new(&lb_zone, nodes))
}

/// The node's location: its region label, else its server's; `None` while not known.
async fn location(
    n: &LbNode,
    servers: &ServerCache,
    robot_dcs: &BTreeMap<i64, String>,
) -> Result<Option<String>, CloudError> {
    if let Some(label) = REGION_LABELS
        .iter()
        .find_map(|l| n.labels.get(*l).filter(|v| !v.is_empty()))
    {
        return Ok(Some(label.clone()));
    }
    let Some(pid) = n.provider_id.as_deref().filter(|p| !p.is_empty()) else {
        return Ok(None);
    };
    Ok(match ProviderId::parse(pid) {
        Ok(ProviderId::Cloud(id)) => servers
            .lookup(&ServerKey::Id(id))
            .await?
            .and_then(|s| s.location_name().map(str::to_owned)),
        // `FSN1-DC10` is in fsn1, as the node's region label would say.
        Ok(ProviderId::Robot(number)) => robot_dcs
            .get(&number)
            .and_then(|dc| dc.split('-').next())
            .map(str::to_ascii_lowercase),
        Err(_) => None,
    })
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
