//! What the simulated project holds, read straight from the state: no request is counted, no
//! fault rule or rate limit applies. The chaos suite and tests audit end states with it
//! (duplicate or leaked load balancers, routes) while faults make the API itself unreliable.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::state::{State, TargetKind};

/// Everything a CCM audit looks at.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Inventory {
    pub servers: Vec<ServerItem>,
    pub load_balancers: Vec<LoadBalancerItem>,
    pub routes: Vec<RouteItem>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ServerItem {
    pub id: u64,
    pub name: String,
    pub status: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct LoadBalancerItem {
    pub id: u64,
    pub name: String,
    pub labels: BTreeMap<String, String>,
    /// Server ids of the `server` targets.
    pub target_servers: Vec<u64>,
    /// Addresses of the `ip` targets (dedicated servers).
    pub target_ips: Vec<String>,
    /// Listen ports of its services.
    pub ports: Vec<u16>,
}

#[derive(Debug, Clone, Serialize)]
pub struct RouteItem {
    pub network: u64,
    pub destination: String,
    pub gateway: String,
}

impl Inventory {
    pub(crate) fn of(st: &State) -> Inventory {
        Inventory {
            servers: st
                .servers
                .values()
                .map(|s| ServerItem {
                    id: s.id,
                    name: s.name.clone(),
                    status: s.status.clone(),
                })
                .collect(),
            load_balancers: st
                .load_balancers
                .values()
                .map(|lb| LoadBalancerItem {
                    id: lb.id,
                    name: lb.name.clone(),
                    labels: lb.labels.clone(),
                    target_servers: lb
                        .targets
                        .iter()
                        .filter_map(|t| match t.kind {
                            TargetKind::Server(id) => Some(id),
                            _ => None,
                        })
                        .collect(),
                    target_ips: lb
                        .targets
                        .iter()
                        .filter_map(|t| match &t.kind {
                            TargetKind::Ip(ip) => Some(ip.clone()),
                            _ => None,
                        })
                        .collect(),
                    ports: lb.services.iter().map(|s| s.listen_port).collect(),
                })
                .collect(),
            routes: st
                .networks
                .values()
                .flat_map(|n| {
                    n.routes.iter().map(|r| RouteItem {
                        network: n.id,
                        destination: r.destination.to_string(),
                        gateway: r.gateway.to_string(),
                    })
                })
                .collect(),
        }
    }
}
