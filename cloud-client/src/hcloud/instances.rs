//! `Instances` for Hetzner Cloud servers, served from the shared server snapshot (see
//! docs/hetzner-api.md, "Servers").

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;

use crate::capabilities::{AddressKind, InstanceMetadata, Instances, NodeAddress, NodeRef};
use crate::error::CloudError;
use crate::hcloud::config::AddressFamily;
use crate::hcloud::external_ipv6::{self, EXTERNAL_IPV6, Stated, first_address, robot_derived};
use crate::hcloud::provider_id::ProviderId;
use crate::hcloud::servers::{ServerCache, ServerKey};
use crate::hcloud::wire::Server;
use crate::robot::{RobotClient, RobotServer};

/// Label HCCM puts on every node it manages, telling Cloud from Robot servers.
pub const PROVIDED_BY_LABEL: &str = "instance.hetzner.cloud/provided-by";

/// Zone label values HCCM derived from the (now removed) `datacenter` field; kept so existing
/// clusters' topology labels do not change on migration.
pub fn legacy_zone(location: &str) -> String {
    match location {
        "nbg1" => "nbg1-dc3",
        "hel1" => "hel1-dc2",
        "fsn1" => "fsn1-dc14",
        "ash" => "ash-dc1",
        "hil" => "hil-dc1",
        "sin" => "sin-dc1",
        other => other,
    }
    .to_string()
}

/// Node addresses in HCCM order: Hostname, ExternalIP v4, ExternalIP v6, InternalIP. The IPv6
/// ExternalIP is `stated_v6` when the Node states one, else derived from the server's /64.
pub(crate) fn node_addresses(
    s: &Server,
    family: AddressFamily,
    network: Option<i64>,
    stated_v6: Option<&str>,
) -> Vec<NodeAddress> {
    let mut out = vec![NodeAddress::new(AddressKind::Hostname, s.name.clone())];
    let public = s.public_net.as_ref();
    if family.has_v4()
        && let Some(v4) = public
            .and_then(|p| p.ipv4.as_ref())
            .filter(|v| !v.ip.is_empty())
    {
        out.push(NodeAddress::new(AddressKind::ExternalIP, v4.ip.clone()));
    }
    if family.has_v6()
        && let Some(v6) = stated_v6.map(str::to_owned).or_else(|| {
            public
                .and_then(|p| p.ipv6.as_ref())
                .and_then(|v| first_address(&v.ip))
        })
    {
        out.push(NodeAddress::new(AddressKind::ExternalIP, v6));
    }
    if let Some(net) = network
        && let Some(ip) = s.private_ip(net)
    {
        out.push(NodeAddress::new(AddressKind::InternalIP, ip));
    }
    out
}

#[derive(Debug, Clone)]
pub struct HcloudInstances {
    pub(crate) cache: ServerCache,
    pub(crate) network_id: Option<i64>,
    pub(crate) family: AddressFamily,
    pub(crate) zone_label_enabled: bool,
    /// Dedicated servers (`ROBOT_ENABLED` with credentials); `None`: Robot Nodes are refused.
    pub(crate) robot: Option<RobotClient>,
    /// `ROBOT_FORWARD_INTERNAL_IPS`.
    pub(crate) forward_internal_ips: bool,
}

/// The server behind a Node: a Cloud server or a dedicated one.
#[derive(Debug, Clone)]
enum Found {
    Cloud(Arc<Server>),
    Robot(RobotServer),
}

impl HcloudInstances {
    /// Finds the node's server: by providerID when set (HCCM does not fall back to the name then),
    /// else by node name. By providerID, `Ok(None)` is the server's own 404: a fresh list that
    /// misses it is asked again with `GET /servers/{id}`, since lists lag behind creates (and
    /// `cargo xtask chaos` makes them miss servers). By name, `Ok(None)` is only a fresh list's
    /// miss. The second value lists what was tried.
    ///
    /// Dedicated servers: by providerID (`hrobot://N`, `hcloud://bm-N`) from the cached Robot
    /// list, a miss asked again with `GET /server/{N}` (gone only on its 404); by name from the
    /// list. A name both APIs know is an error, as in HCCM: nobody can tell which server it is.
    async fn find(&self, node: &NodeRef) -> Result<(Option<Found>, Vec<String>), CloudError> {
        match node.provider_id.as_deref().filter(|p| !p.is_empty()) {
            Some(pid) => match ProviderId::parse(pid)? {
                ProviderId::Cloud(id) => {
                    let s = self.cache.by_id(id).await?;
                    Ok((
                        s.map(Found::Cloud),
                        vec![format!("providerID {pid} (server id {id})")],
                    ))
                }
                ProviderId::Robot(number) => {
                    let robot = self.robot(pid)?;
                    let s = match robot.cached(number).await? {
                        Some(s) => Some(s),
                        None => robot.server(number).await?,
                    };
                    Ok((
                        s.map(Found::Robot),
                        vec![format!("providerID {pid} (Robot server {number})")],
                    ))
                }
            },
            None => {
                let cloud = self.cache.lookup(&ServerKey::Name(&node.name)).await?;
                // A Cloud server's name is checked against the cached Robot list only; a name
                // Cloud does not know may refresh it (a dedicated server just added).
                let robot = match (&self.robot, &cloud) {
                    (Some(r), Some(_)) => r.cached_by_name(&node.name).await?,
                    (Some(r), None) => r.by_name(&node.name).await?,
                    (None, _) => None,
                };
                let tried = vec![format!(
                    "server name {:?} (node has no providerID){}",
                    node.name,
                    if self.robot.is_some() {
                        ", in Cloud and Robot"
                    } else {
                        ""
                    }
                )];
                match (cloud, robot) {
                    (Some(c), Some(r)) => Err(CloudError::Inconsistent {
                        message: format!(
                            "node {:?} could not be uniquely associated with a Cloud or Robot \
                             server: Cloud server {} and Robot server {} both have this name; \
                             set its providerID",
                            node.name, c.id, r.server_number
                        ),
                    }),
                    (Some(c), None) => Ok((Some(Found::Cloud(c)), tried)),
                    (None, Some(r)) => Ok((Some(Found::Robot(r)), tried)),
                    (None, None) => Ok((None, tried)),
                }
            }
        }
    }

    /// The Robot client, or why a Robot providerID cannot be served.
    fn robot(&self, pid: &str) -> Result<&RobotClient, CloudError> {
        self.robot.as_ref().ok_or_else(|| {
            CloudError::unsupported(format!(
                "providerID {pid:?} names a Robot (dedicated) server; set ROBOT_ENABLED=true with \
                 ROBOT_USER and ROBOT_PASSWORD to serve it"
            ))
        })
    }

    async fn get(&self, node: &NodeRef) -> Result<Found, CloudError> {
        match self.find(node).await? {
            (Some(s), _) => Ok(s),
            (None, tried) => Err(CloudError::NotFound {
                what: format!("server for node {:?}", node.name),
                tried,
            }),
        }
    }

    /// HCCM's metadata of a dedicated server (`robotServer.Metadata`): the product as instance
    /// type, the data center lowercased as zone and its location as region, addresses from the
    /// server plus, with `ROBOT_FORWARD_INTERNAL_IPS`, the Node's own InternalIPs of the
    /// configured family that are not already an ExternalIP.
    fn robot_metadata(&self, s: &RobotServer, node: &NodeRef, stated: Stated) -> InstanceMetadata {
        let zone = s.dc.to_ascii_lowercase();
        let region = zone.split('-').next().unwrap_or_default().to_string();
        let mut addresses = vec![NodeAddress::new(
            AddressKind::Hostname,
            s.server_name.clone(),
        )];
        let (stated_v6, mut warnings) = stated.split();
        if self.family.has_v6() {
            let v6 = match stated_v6.clone() {
                Some(v6) => Some(v6),
                None => robot_derived(s.server_number, s.server_ipv6_net.as_deref().unwrap_or(""))
                    .unwrap_or_else(|w| {
                        warnings.push(w);
                        None
                    }),
            };
            if let Some(v6) = v6 {
                addresses.push(NodeAddress::new(AddressKind::ExternalIP, v6));
            }
        }
        if self.family.has_v4()
            && let Some(ip) = s.server_ip.as_deref().filter(|ip| !ip.is_empty())
        {
            addresses.push(NodeAddress::new(AddressKind::ExternalIP, ip.to_string()));
        }
        if self.forward_internal_ips {
            for ip in &node.internal_ips {
                let v4 = ip.parse::<std::net::Ipv4Addr>().is_ok();
                let family_fits = if v4 {
                    self.family.has_v4()
                } else {
                    self.family.has_v6()
                };
                if family_fits && !addresses.iter().any(|a| &a.address == ip) {
                    addresses.push(NodeAddress::new(AddressKind::InternalIP, ip.clone()));
                }
            }
        }
        InstanceMetadata {
            provider_id: ProviderId::robot(s.server_number),
            instance_type: s.product.replace(' ', "-"),
            zone: Some(zone).filter(|z| !z.is_empty()),
            region: Some(region).filter(|r| !r.is_empty()),
            addresses,
            additional_labels: BTreeMap::from([(
                PROVIDED_BY_LABEL.to_string(),
                "robot".to_string(),
            )]),
            stated_by_node: stated_v6.into_iter().collect(),
            warnings,
        }
    }

    pub(crate) fn metadata_of(&self, s: &Server, stated: Stated) -> InstanceMetadata {
        let (stated_v6, warnings) = stated.split();
        let region = s.location_name().map(str::to_string);
        let zone = if self.zone_label_enabled {
            region.as_deref().map(legacy_zone)
        } else {
            None
        };
        InstanceMetadata {
            provider_id: ProviderId::cloud(s.id),
            instance_type: s
                .server_type
                .as_ref()
                .map(|t| t.name.clone())
                .unwrap_or_default(),
            zone,
            region,
            addresses: node_addresses(s, self.family, self.network_id, stated_v6.as_deref()),
            additional_labels: BTreeMap::from([(
                PROVIDED_BY_LABEL.to_string(),
                "cloud".to_string(),
            )]),
            stated_by_node: stated_v6.into_iter().collect(),
            warnings,
        }
    }
}

#[async_trait]
impl Instances for HcloudInstances {
    /// The answer decides whether a Node is deleted, so `false` is only ever the server's own 404
    /// (see [`HcloudInstances::find`]). A node known only by its name has no such question: its
    /// miss is a `NotFound` error, which nobody deletes on.
    async fn instance_exists(&self, node: &NodeRef) -> Result<bool, CloudError> {
        self.cache
            .stats()
            .record_operation("hcloud/instancesv2.InstanceExists");
        match self.find(node).await? {
            (Some(_), _) => Ok(true),
            (None, _) if node.provider_id.as_deref().is_some_and(|p| !p.is_empty()) => Ok(false),
            (None, tried) => Err(CloudError::NotFound {
                what: format!("server for node {:?}", node.name),
                tried,
            }),
        }
    }

    async fn instance_shutdown(&self, node: &NodeRef) -> Result<bool, CloudError> {
        self.cache
            .stats()
            .record_operation("hcloud/instancesv2.InstanceShutdown");
        match self.get(node).await? {
            Found::Cloud(s) => Ok(s.status == "off"),
            Found::Robot(s) => {
                let pid = ProviderId::robot(s.server_number);
                self.robot(&pid)?.is_shut_off(s.server_number).await
            }
        }
    }

    async fn instance_metadata(&self, node: &NodeRef) -> Result<InstanceMetadata, CloudError> {
        self.cache
            .stats()
            .record_operation("hcloud/instancesv2.InstanceMetadata");
        let stated = external_ipv6::stated(node, self.family)?;
        Ok(match self.get(node).await? {
            Found::Cloud(s) => self.metadata_of(&s, stated),
            Found::Robot(s) => self.robot_metadata(&s, node, stated),
        })
    }

    fn node_annotations(&self) -> &'static [&'static str] {
        &[EXTERNAL_IPV6]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hcloud::wire::{IpEntry, Location, NamedRef, ServerPrivateNet, ServerPublicNet};

    fn server() -> Server {
        Server {
            id: 5,
            name: "node-a".into(),
            status: "running".into(),
            public_net: Some(ServerPublicNet {
                ipv4: Some(IpEntry {
                    ip: "100.64.0.5".into(),
                }),
                ipv6: Some(IpEntry {
                    ip: "2001:db8:0:5::/64".into(),
                }),
            }),
            private_net: vec![ServerPrivateNet {
                network: 9,
                ip: "10.0.0.5".into(),
            }],
            server_type: Some(NamedRef {
                id: 1,
                name: "cx22".into(),
            }),
            location: Some(Location {
                id: 1,
                name: "fsn1".into(),
                network_zone: Some("eu-central".into()),
            }),
            ..Default::default()
        }
    }

    #[test]
    fn zone_map_is_hccms() {
        for (l, z) in [
            ("nbg1", "nbg1-dc3"),
            ("hel1", "hel1-dc2"),
            ("fsn1", "fsn1-dc14"),
            ("ash", "ash-dc1"),
            ("hil", "hil-dc1"),
            ("sin", "sin-dc1"),
            ("new1", "new1"),
        ] {
            assert_eq!(legacy_zone(l), z);
        }
    }

    #[test]
    fn the_derived_ipv6_is_the_first_address_of_the_64() {
        assert_eq!(
            first_address("2001:db8:0:5::/64").unwrap(),
            "2001:db8:0:5::1"
        );
        assert_eq!(
            first_address("2a01:4f8:1c1c:abcd::/64").unwrap(),
            "2a01:4f8:1c1c:abcd::1"
        );
        assert!(first_address("garbage").is_none());
    }

    #[test]
    fn addresses_follow_family() {
        let s = server();
        let kinds = |f, n| {
            node_addresses(&s, f, n, None)
                .into_iter()
                .map(|a| format!("{}={}", a.kind, a.address))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            kinds(AddressFamily::Ipv4, None),
            ["Hostname=node-a", "ExternalIP=100.64.0.5"]
        );
        assert_eq!(
            kinds(AddressFamily::Ipv6, None),
            ["Hostname=node-a", "ExternalIP=2001:db8:0:5::1"]
        );
        assert_eq!(
            kinds(AddressFamily::DualStack, Some(9)),
            [
                "Hostname=node-a",
                "ExternalIP=100.64.0.5",
                "ExternalIP=2001:db8:0:5::1",
                "InternalIP=10.0.0.5"
            ]
        );
        // Other networks do not leak in; ipv4: null is tolerated.
        assert_eq!(kinds(AddressFamily::Ipv4, Some(10)).len(), 2);
        let mut v6only = server();
        v6only.public_net.as_mut().unwrap().ipv4 = None;
        assert_eq!(
            node_addresses(&v6only, AddressFamily::Ipv4, None, None).len(),
            1
        );
        // A stated IPv6 replaces the derived one, in the same place; ipv4 has no IPv6 at all.
        let stated = |f| {
            node_addresses(&s, f, None, Some("2001:db8:0:5::abcd"))
                .into_iter()
                .map(|a| a.address)
                .collect::<Vec<_>>()
        };
        assert_eq!(
            stated(AddressFamily::DualStack),
            ["node-a", "100.64.0.5", "2001:db8:0:5::abcd"]
        );
        assert_eq!(stated(AddressFamily::Ipv4), ["node-a", "100.64.0.5"]);
    }
}
