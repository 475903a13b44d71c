//! The provided-node-ip annotation and the node-IP address filter: the node IP's cloud addresses
//! come first and are the only ones of their type.

use std::net::IpAddr;

use cloud_client::{AddressKind, NodeAddress};

/// Why the annotation or the filter failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NodeIpError {
    /// The annotation value cannot be parsed.
    #[error(
        "invalid value {value:?} for annotation alpha.kubernetes.io/provided-node-ip: {reason} (expected one IP, or an IPv4,IPv6 dual-stack pair)"
    )]
    Invalid {
        /// The raw value.
        value: String,
        /// What is wrong.
        reason: String,
    },
    /// No cloud address equals the node IP.
    #[error("failed to get node address from cloud provider that matches ip: {ip} (annotation alpha.kubernetes.io/provided-node-ip; expected one of the cloud addresses: {})", if cloud.is_empty() { "none".to_string() } else { cloud.join(", ") })]
    NotFound {
        /// The node IP.
        ip: IpAddr,
        /// The cloud's addresses, `Type=address`.
        cloud: Vec<String>,
    },
}

/// Parses the annotation: comma-separated, one IP or a dual-stack pair; no whitespace trimming.
pub fn parse(value: &str) -> Result<Vec<IpAddr>, NodeIpError> {
    let invalid = |reason: String| NodeIpError::Invalid {
        value: value.to_string(),
        reason,
    };
    let parts: Vec<&str> = value.split(',').collect();
    if parts.len() > 2 {
        return Err(invalid(format!("{} entries", parts.len())));
    }
    let mut ips = Vec::with_capacity(parts.len());
    for p in &parts {
        let ip: IpAddr = p
            .parse()
            .map_err(|_| invalid(format!("{p:?} is not an IP address")))?;
        ips.push(ip);
    }
    if ips.len() == 2 {
        if ips[0].is_ipv4() == ips[1].is_ipv4() {
            return Err(invalid(
                "a dual-stack pair needs one IPv4 and one IPv6 address".into(),
            ));
        }
        if ips.iter().any(IpAddr::is_unspecified) {
            return Err(invalid(
                "an unspecified address (0.0.0.0 or ::) cannot be part of a pair".into(),
            ));
        }
    }
    Ok(ips)
}

/// Applies the node-IP filter: each node IP (annotation order) first, with its type pinned, then the
/// remaining cloud addresses whose type is not pinned, in the cloud's order.
pub fn filter(node_ips: &[IpAddr], cloud: &[NodeAddress]) -> Result<Vec<NodeAddress>, NodeIpError> {
    filter_with(node_ips, cloud, false).map(|f| f.addresses)
}

/// The addresses of a Node, and the node IPs its server does not have.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Filtered {
    pub addresses: Vec<NodeAddress>,
    /// Node IPs the cloud does not know, kept as InternalIPs (only when accepted).
    pub outside_cloud: Vec<IpAddr>,
}

/// [`filter`], and with `accept_outside_cloud` a node IP the cloud does not know is no error: it
/// becomes an InternalIP in its place (first, for a single one), pinning nothing, so the cloud's
/// addresses follow as they would without it.
pub fn filter_with(
    node_ips: &[IpAddr],
    cloud: &[NodeAddress],
    accept_outside_cloud: bool,
) -> Result<Filtered, NodeIpError> {
    let mut out = Vec::with_capacity(cloud.len() + node_ips.len());
    let mut pinned: Vec<AddressKind> = Vec::new();
    let mut outside_cloud = Vec::new();
    for ip in node_ips {
        let mut found = false;
        for a in cloud {
            if a.address.parse::<IpAddr>().ok() == Some(*ip) {
                out.push(a.clone());
                if !pinned.contains(&a.kind) {
                    pinned.push(a.kind);
                }
                found = true;
            }
        }
        if !found && accept_outside_cloud {
            out.push(NodeAddress::new(AddressKind::InternalIP, ip.to_string()));
            outside_cloud.push(*ip);
        } else if !found {
            return Err(NodeIpError::NotFound {
                ip: *ip,
                cloud: cloud
                    .iter()
                    .map(|a| format!("{}={}", a.kind, a.address))
                    .collect(),
            });
        }
    }
    out.extend(cloud.iter().filter(|a| !pinned.contains(&a.kind)).cloned());
    Ok(Filtered {
        addresses: out,
        outside_cloud,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use AddressKind::*;

    fn a(kind: AddressKind, s: &str) -> NodeAddress {
        NodeAddress::new(kind, s)
    }

    #[test]
    fn parse_rules() {
        assert_eq!(parse("10.0.0.1").unwrap().len(), 1);
        assert_eq!(parse("10.0.0.1,2001:db8::1").unwrap().len(), 2);
        assert!(parse("10.0.0.1, 2001:db8::1").is_err(), "no trimming");
        assert!(parse("10.0.0.1,10.0.0.2").is_err());
        assert!(parse("0.0.0.0,2001:db8::1").is_err());
        assert!(parse("a,b,c").is_err());
        assert!(parse("nonsense").is_err());
        assert!(parse("").is_err());
    }

    #[test]
    fn filter_pins_type_and_orders_node_ip_first() {
        let cloud = vec![
            a(Hostname, "n1"),
            a(ExternalIP, "1.2.3.4"),
            a(InternalIP, "10.0.0.2"),
            a(InternalIP, "10.0.0.3"),
        ];
        let got = filter(&parse("10.0.0.3").unwrap(), &cloud).unwrap();
        assert_eq!(
            got,
            vec![
                a(InternalIP, "10.0.0.3"),
                a(Hostname, "n1"),
                a(ExternalIP, "1.2.3.4")
            ]
        );
    }

    #[test]
    fn filter_dual_stack_and_ipv6_normalisation() {
        let cloud = vec![
            a(Hostname, "n1"),
            a(ExternalIP, "1.2.3.4"),
            a(ExternalIP, "2001:db8:0::1"),
        ];
        let got = filter(&parse("1.2.3.4,2001:db8::1").unwrap(), &cloud).unwrap();
        assert_eq!(
            got,
            vec![
                a(ExternalIP, "1.2.3.4"),
                a(ExternalIP, "2001:db8:0::1"),
                a(Hostname, "n1")
            ]
        );
    }

    #[test]
    fn an_accepted_node_ip_outside_the_cloud_comes_first_and_the_cloud_follows() {
        let cloud = vec![
            a(Hostname, "n1"),
            a(ExternalIP, "1.2.3.4"),
            a(InternalIP, "10.0.0.2"),
        ];
        let wireguard = parse("100.64.0.5").unwrap();
        assert!(filter_with(&wireguard, &cloud, false).is_err());
        let got = filter_with(&wireguard, &cloud, true).unwrap();
        assert_eq!(
            got.addresses,
            vec![
                a(InternalIP, "100.64.0.5"),
                a(Hostname, "n1"),
                a(ExternalIP, "1.2.3.4"),
                a(InternalIP, "10.0.0.2"),
            ]
        );
        assert_eq!(got.outside_cloud, wireguard);
        // The cloud's own IP is no outside one, accepted or not.
        let own = filter_with(&parse("10.0.0.2").unwrap(), &cloud, true).unwrap();
        assert!(own.outside_cloud.is_empty());
        assert_eq!(
            own.addresses,
            filter(&parse("10.0.0.2").unwrap(), &cloud).unwrap()
        );
    }

    #[test]
    fn filter_mismatch_lists_cloud_addresses() {
        let cloud = vec![a(ExternalIP, "1.2.3.4")];
        let err = filter(&parse("10.9.9.9").unwrap(), &cloud).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains("10.9.9.9") && msg.contains("ExternalIP=1.2.3.4"),
            "{msg}"
        );
    }
}
