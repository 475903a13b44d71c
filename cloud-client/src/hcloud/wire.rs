//! Hetzner Cloud JSON shapes, decoded tolerantly: every field the API may drop or null (`datacenter`,
//! `ipv4: null`, ...) is optional or defaulted, and unknown fields are ignored.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Deserialize, Default)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(Debug, Clone, Deserialize, Default)]
pub struct ErrorDetail {
    #[serde(default)]
    pub code: String,
    #[serde(default)]
    pub message: String,
    #[serde(default)]
    pub details: Option<serde_json::Value>,
}

#[derive(Debug, Clone, Deserialize, Default)]
pub struct Meta {
    #[serde(default)]
    pub pagination: Option<Pagination>,
}

#[derive(Debug, Clone, Deserialize, Default)]
pub struct Pagination {
    #[serde(default)]
    pub next_page: Option<u64>,
}

// --- actions -------------------------------------------------------------------------------------

#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
pub struct Action {
    pub id: i64,
    #[serde(default)]
    pub command: String,
    #[serde(default)]
    pub status: String,
    /// Percent done (0-100); the API rounds down.
    #[serde(default)]
    pub progress: u8,
    #[serde(default)]
    pub error: Option<ActionError>,
    /// What the action acts on.
    #[serde(default)]
    pub resources: Vec<ResourceRef>,
}

/// A resource an action acts on.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
pub struct ResourceRef {
    pub id: i64,
    #[serde(rename = "type", default)]
    pub kind: String,
}

impl Action {
    pub fn is_running(&self) -> bool {
        self.status == "running"
    }
}

#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
pub struct ActionError {
    #[serde(default)]
    pub code: String,
    #[serde(default)]
    pub message: String,
}

#[derive(Debug, Deserialize)]
pub struct ActionResponse {
    pub action: Action,
}

#[derive(Debug, Deserialize)]
pub struct ActionsResponse {
    #[serde(default)]
    pub actions: Vec<Action>,
}

// --- locations -----------------------------------------------------------------------------------

#[derive(Debug, Clone, Deserialize, Default, PartialEq, Eq)]
pub struct Location {
    #[serde(default)]
    pub id: i64,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub network_zone: Option<String>,
}

// --- servers -------------------------------------------------------------------------------------

#[derive(Debug, Clone, Deserialize, Default, PartialEq, Eq)]
pub struct Server {
    pub id: i64,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub status: String,
    #[serde(default)]
    pub public_net: Option<ServerPublicNet>,
    #[serde(default)]
    pub private_net: Vec<ServerPrivateNet>,
    #[serde(default)]
    pub server_type: Option<NamedRef>,
    #[serde(default)]
    pub location: Option<Location>,
    /// Removed from the API on 2026-07-01; only a fallback for the location.
    #[serde(default)]
    pub datacenter: Option<Datacenter>,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
}

impl Server {
    /// Location name, from `location` or (older API) `datacenter.location`.
    pub fn location_name(&self) -> Option<&str> {
        self.location
            .as_ref()
            .map(|l| l.name.as_str())
            .or_else(|| {
                self.datacenter
                    .as_ref()
                    .and_then(|d| d.location.as_ref())
                    .map(|l| l.name.as_str())
            })
            .filter(|n| !n.is_empty())
    }

    pub fn private_ip(&self, network: i64) -> Option<&str> {
        self.private_net
            .iter()
            .find(|p| p.network == network)
            .map(|p| p.ip.as_str())
            .filter(|ip| !ip.is_empty())
    }
}

#[derive(Debug, Clone, Deserialize, Default, PartialEq, Eq)]
pub struct Datacenter {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub location: Option<Location>,
}

#[derive(Debug, Clone, Deserialize, Default, PartialEq, Eq)]
pub struct NamedRef {
    #[serde(default)]
    pub id: i64,
    #[serde(default)]
    pub name: String,
}

#[derive(Debug, Clone, Deserialize, Default, PartialEq, Eq)]
pub struct ServerPublicNet {
    #[serde(default)]
    pub ipv4: Option<IpEntry>,
    #[serde(default)]
    pub ipv6: Option<IpEntry>,
}

#[derive(Debug, Clone, Deserialize, Default, PartialEq, Eq)]
pub struct IpEntry {
    #[serde(default)]
    pub ip: String,
}

#[derive(Debug, Clone, Deserialize, Default, PartialEq, Eq)]
pub struct ServerPrivateNet {
    #[serde(default)]
    pub network: i64,
    #[serde(default)]
    pub ip: String,
}

#[derive(Debug, Deserialize)]
pub struct ServerResponse {
    pub server: Server,
}

#[derive(Debug, Deserialize)]
pub struct ServersPage {
    #[serde(default)]
    pub servers: Vec<Server>,
    #[serde(default)]
    pub meta: Option<Meta>,
}

// --- networks ------------------------------------------------------------------------------------

#[derive(Debug, Clone, Deserialize, Default, PartialEq, Eq)]
pub struct Network {
    pub id: i64,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub ip_range: String,
    #[serde(default)]
    pub routes: Vec<NetworkRoute>,
    #[serde(default)]
    pub subnets: Vec<Subnet>,
}

/// A network's subnet: servers of `network_zone` attach to the network through it.
#[derive(Debug, Clone, Deserialize, Serialize, Default, PartialEq, Eq)]
pub struct Subnet {
    #[serde(default, rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub ip_range: String,
    #[serde(default)]
    pub network_zone: String,
}

#[derive(Debug, Clone, Deserialize, Serialize, Default, PartialEq, Eq)]
pub struct NetworkRoute {
    pub destination: String,
    pub gateway: String,
}

#[derive(Debug, Deserialize)]
pub struct NetworkResponse {
    pub network: Network,
}

#[derive(Debug, Deserialize)]
pub struct NetworksPage {
    #[serde(default)]
    pub networks: Vec<Network>,
    #[serde(default)]
    pub meta: Option<Meta>,
}

// --- certificates --------------------------------------------------------------------------------

#[derive(Debug, Clone, Deserialize, Default, PartialEq, Eq)]
pub struct Certificate {
    pub id: i64,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// The load balancers using it.
    #[serde(default)]
    pub used_by: Vec<UsedBy>,
}

/// One entry of a certificate's `used_by`.
#[derive(Debug, Clone, Deserialize, Default, PartialEq, Eq)]
pub struct UsedBy {
    pub id: i64,
    #[serde(rename = "type", default)]
    pub kind: String,
}

#[derive(Debug, Deserialize)]
pub struct CertificatesPage {
    #[serde(default)]
    pub certificates: Vec<Certificate>,
    #[serde(default)]
    pub meta: Option<Meta>,
}

#[derive(Debug, Deserialize)]
pub struct CertificateResponse {
    pub certificate: Certificate,
    #[serde(default)]
    pub action: Option<Action>,
}

// --- load balancers ------------------------------------------------------------------------------

#[derive(Debug, Clone, Deserialize, Default, PartialEq, Eq)]
pub struct LoadBalancer {
    pub id: i64,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    #[serde(default)]
    pub public_net: Option<LbPublicNet>,
    #[serde(default)]
    pub private_net: Vec<LbPrivateNet>,
    #[serde(default)]
    pub location: Option<Location>,
    #[serde(default)]
    pub load_balancer_type: Option<LbType>,
    #[serde(default)]
    pub algorithm: Option<Algorithm>,
    #[serde(default)]
    pub protection: Option<Protection>,
    #[serde(default)]
    pub services: Vec<LbService>,
    #[serde(default)]
    pub targets: Vec<LbTarget>,
}

#[derive(Debug, Clone, Deserialize, Default, PartialEq, Eq)]
pub struct LbPublicNet {
    #[serde(default)]
    pub enabled: bool,
    #[serde(default)]
    pub ipv4: Option<LbIp>,
    #[serde(default)]
    pub ipv6: Option<LbIp>,
}

#[derive(Debug, Clone, Deserialize, Default, PartialEq, Eq)]
pub struct LbIp {
    #[serde(default)]
    pub ip: Option<String>,
    #[serde(default)]
    pub dns_ptr: Option<String>,
}

#[derive(Debug, Clone, Deserialize, Default, PartialEq, Eq)]
pub struct LbPrivateNet {
    #[serde(default)]
    pub network: i64,
    #[serde(default)]
    pub ip: Option<String>,
}

#[derive(Debug, Clone, Deserialize, Default, PartialEq, Eq)]
pub struct LbType {
    #[serde(default)]
    pub id: i64,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub max_targets: Option<u32>,
    #[serde(default)]
    pub max_services: Option<u32>,
    #[serde(default)]
    pub deprecation: Option<serde_json::Value>,
}

#[derive(Debug, Clone, Deserialize, Serialize, Default, PartialEq, Eq)]
pub struct Algorithm {
    #[serde(rename = "type", default)]
    pub kind: String,
}

#[derive(Debug, Clone, Deserialize, Default, PartialEq, Eq)]
pub struct Protection {
    #[serde(default)]
    pub delete: bool,
}

/// A load-balancer service, used both to read the current state and (serialized) to write it.
#[derive(Debug, Clone, Deserialize, Serialize, Default, PartialEq, Eq)]
pub struct LbService {
    pub protocol: String,
    pub listen_port: u16,
    pub destination_port: u16,
    /// Always present when read; `None` when writing = leave it (or the API default, off).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxyprotocol: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<LbServiceHttp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health_check: Option<HealthCheck>,
}

#[derive(Debug, Clone, Deserialize, Serialize, Default, PartialEq, Eq)]
pub struct LbServiceHttp {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cookie_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cookie_lifetime: Option<u64>,
    #[serde(default)]
    pub certificates: Vec<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redirect_http: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sticky_sessions: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_idle: Option<u64>,
}

#[derive(Debug, Clone, Deserialize, Serialize, Default, PartialEq, Eq)]
pub struct HealthCheck {
    pub protocol: String,
    pub port: u16,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retries: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<HealthCheckHttp>,
}

#[derive(Debug, Clone, Deserialize, Serialize, Default, PartialEq, Eq)]
pub struct HealthCheckHttp {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub domain: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_codes: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<bool>,
}

#[derive(Debug, Clone, Deserialize, Default, PartialEq, Eq)]
pub struct LbTarget {
    #[serde(rename = "type", default)]
    pub kind: String,
    #[serde(default)]
    pub server: Option<IdRef>,
    #[serde(default)]
    pub ip: Option<IpRef>,
    #[serde(default)]
    pub use_private_ip: bool,
    /// One entry per service (listen port): `healthy`, `unhealthy` or `unknown`.
    #[serde(default)]
    pub health_status: Vec<LbTargetHealth>,
    /// A `label_selector` target's resolved server targets, each with its own `health_status`.
    #[serde(default)]
    pub targets: Vec<LbTarget>,
}

#[derive(Debug, Clone, Deserialize, Default, PartialEq, Eq)]
pub struct LbTargetHealth {
    #[serde(default)]
    pub listen_port: u16,
    #[serde(default)]
    pub status: String,
}

#[derive(Debug, Clone, Deserialize, Serialize, Default, PartialEq, Eq)]
pub struct IdRef {
    pub id: i64,
}

#[derive(Debug, Clone, Deserialize, Serialize, Default, PartialEq, Eq)]
pub struct IpRef {
    pub ip: String,
}

#[derive(Debug, Deserialize)]
pub struct LoadBalancerResponse {
    pub load_balancer: LoadBalancer,
    #[serde(default)]
    pub action: Option<Action>,
}

#[derive(Debug, Deserialize)]
pub struct LoadBalancersPage {
    #[serde(default)]
    pub load_balancers: Vec<LoadBalancer>,
    #[serde(default)]
    pub meta: Option<Meta>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_decodes_without_datacenter_and_with_null_ipv4() {
        let s: Server = serde_json::from_value(serde_json::json!({
            "id": 7, "name": "n1", "status": "running",
            "public_net": {"ipv4": null, "ipv6": {"ip": "2001:db8:1::/64"}},
            "server_type": {"id": 1, "name": "cx22"},
            "location": {"id": 1, "name": "fsn1", "network_zone": "eu-central"},
            "private_net": [{"network": 4, "ip": "10.0.0.2", "alias_ips": []}],
            "brand_new_field": {"x": 1}
        }))
        .unwrap();
        assert_eq!(s.location_name(), Some("fsn1"));
        assert!(s.public_net.as_ref().unwrap().ipv4.is_none());
        assert_eq!(s.private_ip(4), Some("10.0.0.2"));
        let legacy: Server = serde_json::from_value(serde_json::json!({
            "id": 8, "datacenter": {"name": "nbg1-dc3", "location": {"name": "nbg1"}}
        }))
        .unwrap();
        assert_eq!(legacy.location_name(), Some("nbg1"));
        let minimal: Server = serde_json::from_value(serde_json::json!({"id": 9})).unwrap();
        assert_eq!(minimal.location_name(), None);
    }
}
