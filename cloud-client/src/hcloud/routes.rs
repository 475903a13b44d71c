//! `Routes` for the Hetzner network named by `HCLOUD_NETWORK` (see docs/hetzner-api.md, "Networks
//! and routes").

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use serde_json::json;

use crate::capabilities::{AddressKind, Routability, Route, RouteRequest, RouteSupport, Routes};
use crate::error::CloudError;
use crate::hcloud::actions::ActionWaiter;
use crate::hcloud::load_balancer::catalog::known_zone;
use crate::hcloud::provider_id::{ProviderId, ServerKind};
use crate::hcloud::servers::{ServerCache, ServerKey};
use crate::hcloud::transport::{Req, Transport};
use crate::hcloud::wire::{ActionResponse, Network, NetworkResponse, Server};

#[derive(Debug)]
pub struct HcloudRoutes {
    transport: Transport,
    actions: ActionWaiter,
    servers: ServerCache,
    network: i64,
    server_max_age: Duration,
    /// The network as the start-up check of `HCLOUD_NETWORK` read it, for the first list.
    startup_read: Mutex<Option<(Instant, Network)>>,
    /// The network's name, range and subnets as last read: which zones its servers can join
    /// from ([`routability`](Routes::routability)).
    subnets: Mutex<Network>,
}

/// How old the start-up read of the network may be and still serve the first list of routes. A
/// restarted controller lists them within a second or two of that read: reading again would cost
/// a call for nothing. A standby that waited for its Lease longer than this reads afresh. The
/// passes after the first trust their own view for longer than this anyway (until the resync).
const STARTUP_READ_SERVES_FOR: Duration = Duration::from_secs(10);

/// `<gateway>-<destination>`, HCCM's route name.
pub fn route_name(gateway: &str, destination: &str) -> String {
    format!("{gateway}-{destination}")
}

impl HcloudRoutes {
    pub(crate) fn new(
        transport: Transport,
        actions: ActionWaiter,
        servers: ServerCache,
        network: &Network,
        server_max_age: Duration,
    ) -> Self {
        Self {
            transport,
            actions,
            servers,
            network: network.id,
            server_max_age,
            startup_read: Mutex::new(Some((Instant::now(), network.clone()))),
            subnets: Mutex::new(without_routes(network)),
        }
    }

    async fn network(&self) -> Result<Network, CloudError> {
        let startup_read = self
            .startup_read
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some((read_at, network)) = startup_read
            && read_at.elapsed() < STARTUP_READ_SERVES_FOR
        {
            return Ok(network);
        }
        let r: NetworkResponse = self
            .transport
            .call(&Req::get(
                "/networks/{id}",
                format!("/networks/{}", self.network),
            ))
            .await?;
        *self.subnets.lock().unwrap_or_else(|e| e.into_inner()) = without_routes(&r.network);
        Ok(r.network)
    }

    /// Whether the server of a node can reach the network: attached, or its zone has a subnet.
    /// From the server snapshot and the network as last read, without a call: a server not in the
    /// snapshot yet counts as reachable (the route's create reads it, and says why it fails).
    fn zone_verdict(&self, server: &Server) -> Routability {
        if server.private_ip(self.network).is_some() {
            return Routability::Routable;
        }
        let zone = server
            .location
            .as_ref()
            .and_then(|l| l.network_zone.clone())
            .or_else(|| {
                server
                    .location_name()
                    .and_then(known_zone)
                    .map(str::to_owned)
            });
        let (Some(zone), Some(location)) = (zone, server.location_name()) else {
            return Routability::Routable;
        };
        let net = self.subnets.lock().unwrap_or_else(|e| e.into_inner());
        if net
            .subnets
            .iter()
            .any(|s| s.network_zone == zone && s.kind != "vswitch")
        {
            return Routability::Routable;
        }
        let name = if net.name.is_empty() {
            net.id.to_string()
        } else {
            net.name.clone()
        };
        Routability::Unroutable {
            reason: NETWORK_ZONE_WITHOUT_SUBNET,
            message: format!(
                "server {} ({}) is in {location}, network zone {zone}, where network {name} has \
                 no subnet: the server cannot join the network, so its podCIDR is not routed. Add \
                 a subnet there (hcloud network add-subnet {name} --network-zone {zone} --type \
                 cloud --ip-range <a free range of {}>) and attach the server (hcloud server \
                 attach-to-network {} --network {name})",
                server.name, server.id, net.ip_range, server.name
            ),
        }
    }

    async fn route_action(
        &self,
        action: &'static str,
        destination: &str,
        gateway: &str,
    ) -> Result<(), CloudError> {
        let template = if action == "add_route" {
            "/networks/{id}/actions/add_route"
        } else {
            "/networks/{id}/actions/delete_route"
        };
        let req = Req::post(
            template,
            format!("/networks/{}/actions/{action}", self.network),
            json!({"destination": destination, "gateway": gateway}),
        );
        let r: ActionResponse = self.transport.call(&req).await?;
        self.actions.wait(&r.action).await
    }

    /// Points the request's destination at its node's private IP, given the network's current
    /// `(destination, gateway)` pairs: no-op when already so, replaced when another gateway has it.
    /// Returns the route as it now is.
    async fn add_or_replace(
        &self,
        req: &RouteRequest,
        current: &[(&str, &str)],
    ) -> Result<Route, CloudError> {
        ipv4_only(req)?;
        let internal: Vec<&str> = req
            .target_addresses
            .iter()
            .filter(|a| a.kind == AddressKind::InternalIP)
            .map(|a| a.address.as_str())
            .collect();
        let fits = |g: &Option<String>| {
            g.as_deref()
                .is_some_and(|g| internal.is_empty() || internal.contains(&g))
        };
        // Routes read servers from a snapshot up to a minute old (HCCM does too); when it lacks
        // the node's server (just created: the Node says it exists) or does not fit what the node
        // already shows (just attached, private IP changed), look again, fresh.
        let mut found = self.gateway(req, self.server_max_age).await?;
        if !found.as_ref().is_some_and(|(_, g)| fits(g)) {
            found = self.gateway(req, Duration::ZERO).await?;
        }
        let Some((server, gateway)) = found else {
            return Err(no_server(req));
        };
        let Some(gateway) = gateway else {
            if let Routability::Unroutable { message, .. } = self.zone_verdict(&server) {
                return Err(CloudError::unsupported(message));
            }
            return Err(CloudError::Inconsistent {
                message: format!(
                    "server {} ({}) of node {} is not attached to network {}",
                    server.name, server.id, req.target_node.name, self.network
                ),
            });
        };
        if !internal.is_empty() && !internal.contains(&gateway.as_str()) {
            return Err(CloudError::invalid_input(
                format!("InternalIP addresses of node {}", req.target_node.name),
                internal.join(","),
                format!(
                    "the server's private IP {gateway} in network {} among them",
                    self.network
                ),
            ));
        }
        let made = Route {
            name: route_name(&gateway, &req.destination_cidr),
            target_node: req.target_node.name.clone(),
            destination_cidr: req.destination_cidr.clone(),
            gateway,
            blackhole: false,
        };
        if let Some((dest, old)) = current
            .iter()
            .find(|(dest, _)| *dest == req.destination_cidr)
        {
            if *old == made.gateway {
                return Ok(made);
            }
            self.route_action("delete_route", dest, old).await?;
        }
        self.route_action("add_route", &made.destination_cidr, &made.gateway)
            .await?;
        Ok(made)
    }

    /// The node's server, from a snapshot at most `max_age` old, and its private IP in the network
    /// (`None` when it is not attached). `None` when the snapshot has no such server.
    async fn gateway(
        &self,
        req: &RouteRequest,
        max_age: Duration,
    ) -> Result<Option<(Arc<Server>, Option<String>)>, CloudError> {
        let node = &req.target_node;
        let key = match node.provider_id.as_deref().filter(|p| !p.is_empty()) {
            Some(pid) => ServerKey::Id(ProviderId::cloud_id(pid)?),
            None => ServerKey::Name(&node.name),
        };
        let server = self.servers.lookup_with_age(&key, max_age).await?;
        Ok(server.map(|s| {
            let gateway = s.private_ip(self.network).map(str::to_string);
            (s, gateway)
        }))
    }
}

/// The Warning's reason for a node whose server's zone has no subnet in the network.
pub const NETWORK_ZONE_WITHOUT_SUBNET: &str = "NetworkZoneWithoutSubnet";

/// What [`HcloudRoutes::zone_verdict`] keeps of a network read.
fn without_routes(network: &Network) -> Network {
    Network {
        id: network.id,
        name: network.name.clone(),
        ip_range: network.ip_range.clone(),
        routes: Vec::new(),
        subnets: network.subnets.clone(),
    }
}

/// "Not found" for the node's server, naming what it was looked up by.
fn no_server(req: &RouteRequest) -> CloudError {
    let node = &req.target_node;
    let tried = match node.provider_id.as_deref().filter(|p| !p.is_empty()) {
        Some(pid) => format!("providerID {pid}"),
        None => format!("server name {:?}", node.name),
    };
    CloudError::NotFound {
        what: format!("server for node {:?}", node.name),
        tried: vec![tried],
    }
}

fn is_ipv6(cidr: &str) -> bool {
    cidr.contains(':')
}

/// Hetzner networks are IPv4-only: an IPv6 route is refused before any call.
fn ipv4_only(req: &RouteRequest) -> Result<(), CloudError> {
    if is_ipv6(&req.destination_cidr) {
        return Err(CloudError::unsupported(format!(
            "route {} for node {}: Hetzner private networks are IPv4-only; IPv6 pod routes must be handled by the CNI",
            req.destination_cidr, req.target_node.name
        )));
    }
    Ok(())
}

/// Network routes reach Cloud servers only: a dedicated (Robot) server is not in the network.
/// HCCM refuses to start with routes and Robot together; a mixed cluster here keeps its Cloud
/// nodes' routes and says why the dedicated ones have none.
fn routability(provider_id: &str) -> Routability {
    match ProviderId::kind(provider_id) {
        Some(ServerKind::Cloud) => Routability::Routable,
        Some(ServerKind::Robot) => Routability::Unreachable {
            reason: "RobotServerNotRoutable",
            why: format!(
                "node is a dedicated (Robot) server ({provider_id}): network routes reach Cloud \
                 servers only"
            ),
            remedy: "let the CNI route it (e.g. over a vSwitch)",
        },
        None => Routability::Foreign,
    }
}

#[async_trait]
impl Routes for HcloudRoutes {
    async fn list_routes(&self) -> Result<Vec<Route>, CloudError> {
        self.transport.stats().record_operation("hcloud/ListRoutes");
        let net = self.network().await?;
        let mut out = Vec::with_capacity(net.routes.len());
        for r in &net.routes {
            let server = self
                .servers
                .lookup_with_age(&ServerKey::PrivateIp(&r.gateway), self.server_max_age)
                .await?;
            let target = server.filter(|s| s.private_ip(self.network) == Some(r.gateway.as_str()));
            out.push(Route {
                name: route_name(&r.gateway, &r.destination),
                target_node: target.as_ref().map(|s| s.name.clone()).unwrap_or_default(),
                destination_cidr: r.destination.clone(),
                gateway: r.gateway.clone(),
                blackhole: target.is_none(),
            });
        }
        Ok(out)
    }

    async fn list_routes_unresolved(&self) -> Result<Vec<Route>, CloudError> {
        self.transport.stats().record_operation("hcloud/ListRoutes");
        let net = self.network().await?;
        Ok(net
            .routes
            .iter()
            .map(|r| Route {
                name: route_name(&r.gateway, &r.destination),
                target_node: String::new(),
                destination_cidr: r.destination.clone(),
                gateway: r.gateway.clone(),
                blackhole: false,
            })
            .collect())
    }

    async fn create_route(&self, req: &RouteRequest) -> Result<Route, CloudError> {
        self.transport
            .stats()
            .record_operation("hcloud/CreateRoute");
        ipv4_only(req)?;
        let net = self.network().await?;
        let current: Vec<(&str, &str)> = net
            .routes
            .iter()
            .map(|r| (r.destination.as_str(), r.gateway.as_str()))
            .collect();
        self.add_or_replace(req, &current).await
    }

    async fn create_route_in(
        &self,
        req: &RouteRequest,
        current: &[Route],
    ) -> Result<Route, CloudError> {
        self.transport
            .stats()
            .record_operation("hcloud/CreateRoute");
        let current: Vec<(&str, &str)> = current
            .iter()
            .map(|r| (r.destination_cidr.as_str(), r.gateway.as_str()))
            .collect();
        self.add_or_replace(req, &current).await
    }

    async fn delete_route(&self, route: &Route) -> Result<(), CloudError> {
        self.transport
            .stats()
            .record_operation("hcloud/DeleteRoute");
        let gateway = if route.gateway.is_empty() {
            let net = self.network().await?;
            match net
                .routes
                .into_iter()
                .find(|r| r.destination == route.destination_cidr)
            {
                Some(r) => r.gateway,
                None => return Ok(()),
            }
        } else {
            route.gateway.clone()
        };
        match self
            .route_action("delete_route", &route.destination_cidr, &gateway)
            .await
        {
            Err(e) if e.is_not_found() => Ok(()),
            r => r,
        }
    }

    fn routability(&self, provider_id: &str) -> Routability {
        match routability(provider_id) {
            Routability::Routable => ProviderId::cloud_id(provider_id)
                .ok()
                .and_then(|id| self.servers.peek(id))
                .map_or(Routability::Routable, |s| self.zone_verdict(&s)),
            other => other,
        }
    }

    /// Hetzner locks a network while a route action runs: one write at a time, each awaited.
    fn support(&self) -> RouteSupport {
        RouteSupport {
            ipv6_unsupported: Some("Hetzner networks are IPv4-only"),
            writes_at_once: 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_reach_cloud_servers_not_dedicated_or_foreign_ones() {
        assert_eq!(routability("hcloud://7"), Routability::Routable);
        for robot in ["hrobot://1000001", "hcloud://bm-1000002"] {
            match routability(robot) {
                Routability::Unreachable { reason, why, .. } => {
                    assert_eq!(reason, "RobotServerNotRoutable");
                    assert!(why.contains(robot), "{why}");
                }
                other => panic!("{robot}: {other:?}"),
            }
        }
        assert_eq!(
            routability("aws:///eu-central-1a/i-1"),
            Routability::Foreign
        );
    }

    #[test]
    fn names_and_families() {
        assert_eq!(
            route_name("10.0.0.2", "10.244.1.0/24"),
            "10.0.0.2-10.244.1.0/24"
        );
        assert!(is_ipv6("fd00::/64"));
        assert!(!is_ipv6("10.244.0.0/24"));
    }
}
