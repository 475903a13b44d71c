//! Which nodes a load balancer can reach. Hetzner adds a server, or a dedicated server's IP, only
//! to a load balancer of the server's own network zone, and refuses a whole request that names one
//! of another zone (`422 unsupported_error`): one node in `ash` kept a load balancer in `fsn1` from
//! ever being made. So a node of another zone is left out before any write, in the create as in
//! later updates, and the Service is told which nodes and why ([`Reach::warning`]).
//!
//! A node's location is its `topology.kubernetes.io/region` label (set at initialization by us or
//! HCCM, so it costs no call), else its server's (the shared server snapshot) or, for a dedicated
//! server, its data center in the Robot list. The zone of a location is the catalog's
//! ([`Catalog::zone_of`]), and the load balancer's is the one the API reports for it, or the one
//! its create asks for. A node whose location is not known is neither a target nor reported.
//! This module finds where things are; [`Reach`] (in the pure plan) decides what that means.

use std::collections::{BTreeMap, HashMap};

use super::catalog::Catalog;
use super::plan::Reach;
use super::spec::{LbSpec, Placement};
use crate::capabilities::LbNode;
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

/// The network zone of `lb`, or of the load balancer a create for `spec` would make; `None` when
/// it is not known (a location the catalog lacks, or no placement: the create refuses that).
async fn lb_zone(
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

/// Where `lb` (or the one a create for `spec` would make) is, and each node `spec` would target
/// ([`locate`]).
pub(crate) async fn reach(
    catalog: &Catalog,
    t: &Transport,
    servers: &ServerCache,
    spec: &LbSpec,
    lb: Option<&LoadBalancer>,
    nodes: &[LbNode],
    robot_dcs: &BTreeMap<i64, String>,
) -> Result<Reach, CloudError> {
    let Some(lb_zone) = lb_zone(catalog, t, spec, lb).await? else {
        return Ok(Reach::everywhere());
    };
    let located = locate(catalog, t, servers, spec, nodes, robot_dcs).await?;
    let nodes = located
        .into_iter()
        .map(|(node, location, zone)| (node.name.clone(), (location, zone)));
    Ok(Reach::new(&lb_zone, nodes))
}

/// The zone a create for `spec` places its load balancer in; `None` when not known.
pub(crate) async fn placement_zone(
    catalog: &Catalog,
    t: &Transport,
    spec: &LbSpec,
) -> Result<Option<String>, CloudError> {
    lb_zone(catalog, t, spec, None).await
}

/// The nodes `spec` selects, by network zone; a node whose location is not known yet is in none.
pub(crate) async fn by_zone(
    catalog: &Catalog,
    t: &Transport,
    servers: &ServerCache,
    spec: &LbSpec,
    nodes: &[LbNode],
    robot_dcs: &BTreeMap<i64, String>,
) -> Result<BTreeMap<String, Vec<LbNode>>, CloudError> {
    let mut zones: BTreeMap<String, Vec<LbNode>> = BTreeMap::new();
    for (node, _, zone) in locate(catalog, t, servers, spec, nodes, robot_dcs).await? {
        zones.entry(zone).or_default().push(node.clone());
    }
    Ok(zones)
}

/// Each node `spec` selects whose place is known, with its location and network zone: its
/// label, else its server's location (`servers`) or its dedicated server's data center
/// (`robot_dcs`: server number → data center, e.g. `FSN1-DC10`), then the catalog's zone of that
/// location.
async fn locate<'n>(
    catalog: &Catalog,
    t: &Transport,
    servers: &ServerCache,
    spec: &LbSpec,
    nodes: &'n [LbNode],
    robot_dcs: &BTreeMap<i64, String>,
) -> Result<Vec<(&'n LbNode, String, String)>, CloudError> {
    let mut located: Vec<(&LbNode, String)> = Vec::new();
    for n in nodes {
        if spec
            .node_selector
            .as_ref()
            .is_some_and(|s| !s.matches(&n.labels))
        {
            continue;
        }
        if let Some(location) = location(n, servers, robot_dcs).await? {
            located.push((n, location));
        }
    }
    let mut zones: HashMap<String, Option<String>> = HashMap::new();
    for (_, location) in &located {
        if !zones.contains_key(location) {
            let zone = catalog.zone_of(t, location).await?;
            zones.insert(location.clone(), zone);
        }
    }
    Ok(located
        .into_iter()
        .filter_map(|(node, location)| {
            let zone = zones.get(&location).cloned().flatten()?;
            Some((node, location, zone))
        })
        .collect())
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
