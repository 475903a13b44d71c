//! What the simulated project holds, read straight from the state: no request is counted, no
//! fault rule or rate limit applies. The chaos suite and tests audit end states with it
//! (duplicate or leaked load balancers, routes, certificates) while faults make the API itself
//! unreliable.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::state::{State, TargetKind};

/// Everything a CCM audit looks at.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Inventory {
    pub servers: Vec<ServerItem>,
    pub load_balancers: Vec<LoadBalancerItem>,
    pub routes: Vec<RouteItem>,
    pub certificates: Vec<CertificateItem>,
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
    /// The certificate ids each `https` service (by listen port) serves.
    pub certificates: BTreeMap<u16, Vec<u64>>,
}

/// A certificate, uploaded or managed; never its private key.
#[derive(Debug, Clone, Serialize)]
pub struct CertificateItem {
    pub id: u64,
    pub name: String,
    pub labels: BTreeMap<String, String>,
    /// `uploaded` or `managed`.
    pub kind: String,
    /// The leaf's serial as [`crate::test_certs::serial`] gives it (`None`: no readable chain,
    /// e.g. a managed certificate still pending).
    pub serial: Option<String>,
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
                    certificates: lb
                        .services
                        .iter()
                        .filter_map(|s| {
                            Some((s.listen_port, s.http.as_ref()?.certificates.clone()))
                        })
                        .filter(|(_, ids)| !ids.is_empty())
                        .collect(),
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
            certificates: st
                .certificates
                .values()
                .map(|c| CertificateItem {
                    id: c.id,
                    name: c.name.clone(),
                    labels: c.labels.clone(),
                    kind: c.kind.clone(),
                    serial: c.certificate.as_deref().and_then(crate::test_certs::serial),
                })
                .collect(),
        }
    }
}
