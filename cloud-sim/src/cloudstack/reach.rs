//! Who may reach a load-balancer rule and where its traffic goes, read from the world as plain
//! data so the data plane (`data_plane::rules`) asks the model rather than knowing CloudStack's
//! rules itself, and so the rules are unit-tested without sockets.
//!
//! Filtering is CloudStack's, not the rule's own `cidrlist`: the virtual router applies the
//! firewall (isolated networks) or the tier's network ACL (VPCs), and a rule's `cidrlist` only
//! reaches the wire through the firewall rule `openfirewall` makes from it (CloudStack 4.22's
//! HAProxy ACL from `cidrlist` is not modelled; our provider and upstream's make the firewall or
//! ACL rules themselves).
//! - Isolated network: a public address denies all ingress until a firewall rule opens it; the
//!   source passes when a firewall rule of that address with the rule's transport (`tcp` for
//!   `tcp` and `tcp-proxy`, `udp`) or `all`, a port range holding the public port (no range: all
//!   ports) and a CIDR holding the source exists.
//! - VPC tier: the tier's ACL list on the private port (the NodePort the VM is reached at):
//!   `default_allow` admits everyone, `default_deny` no one; a list of the VPC's own is read in
//!   rule-number order, Ingress rules only, the first matching one decides (`Allow` or `Deny`)
//!   and none matching denies, as CloudStack's implicit last rule does.

use std::net::Ipv4Addr;

use super::model::{AclRule, LbRule, NetworkKind, VmState, World};
use crate::cidr::Ipv4Net;

/// A member a rule's traffic may go to now: a running VM's NIC in the rule's network.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    pub vm_id: String,
    pub vm_name: String,
    pub ip: Ipv4Addr,
}

/// The transport a rule's protocol runs over: `tcp-proxy` is TCP.
pub fn transport(protocol: &str) -> &'static str {
    if protocol.eq_ignore_ascii_case("udp") {
        "udp"
    } else {
        "tcp"
    }
}

/// The rules the data plane carries: every rule whose public address is still allocated, by id,
/// with its protocol.
pub fn carried(w: &World) -> Vec<(String, String)> {
    w.lb_rules
        .iter()
        .filter(|r| w.ip(&r.public_ip_id).is_some_and(|ip| ip.owner.is_some()))
        .map(|r| (r.id.clone(), r.protocol.clone()))
        .collect()
}

/// The rule's members that can take traffic, in membership order: running, not expunged, with a
/// NIC in the rule's network.
pub fn members(w: &World, rule: &LbRule) -> Vec<Member> {
    rule.members
        .iter()
        .filter_map(|id| w.vm(id))
        .filter(|vm| !vm.expunged && vm.state == VmState::Running)
        .filter_map(|vm| {
            let nic = vm.nics.iter().find(|n| n.network_id == rule.network_id)?;
            Some(Member {
                vm_id: vm.id.clone(),
                vm_name: vm.name.clone(),
                ip: nic.ip,
            })
        })
        .collect()
}

/// The rule's public address and port, as a client would dial it.
pub fn public_address(w: &World, rule: &LbRule) -> Option<(Ipv4Addr, u16)> {
    w.ip(&rule.public_ip_id)
        .map(|ip| (ip.address, rule.public_port))
}

/// Whether traffic from `source` reaches the rule (see the module doc).
pub fn admits(w: &World, rule: &LbRule, source: Ipv4Addr) -> bool {
    let proto = transport(&rule.protocol);
    let tier = w
        .network(&rule.network_id)
        .filter(|n| n.kind == NetworkKind::VpcTier);
    match tier {
        Some(net) => {
            let Some(list) = net.acl_id.as_deref().and_then(|a| w.acl_list(a)) else {
                return false;
            };
            if list.vpc_id.is_none() {
                return list.name == "default_allow";
            }
            let mut rules: Vec<&AclRule> = w
                .acl_rules
                .iter()
                .filter(|r| r.acl_id == list.id && r.traffic_type == "Ingress")
                .collect();
            rules.sort_by_key(|r| r.number);
            rules
                .into_iter()
                .find(|r| {
                    matches(
                        &r.protocol,
                        (r.start_port, r.end_port),
                        &r.cidrs,
                        proto,
                        rule.private_port,
                        source,
                    )
                })
                .is_some_and(|r| r.action == "Allow")
        }
        None => w.firewall_rules.iter().any(|f| {
            f.public_ip_id == rule.public_ip_id
                && matches(
                    &f.protocol,
                    (f.start_port, f.end_port),
                    &f.cidrs,
                    proto,
                    rule.public_port,
                    source,
                )
        }),
    }
}

/// Whether a firewall or ACL rule's protocol, ports and CIDRs cover a packet.
fn matches(
    protocol: &str,
    (start, end): (Option<u16>, Option<u16>),
    cidrs: &[String],
    proto: &str,
    port: u16,
    source: Ipv4Addr,
) -> bool {
    let proto_ok = protocol.eq_ignore_ascii_case("all") || protocol.eq_ignore_ascii_case(proto);
    let port_ok = match (start, end) {
        (Some(s), Some(e)) => (s..=e).contains(&port),
        (Some(s), None) => s == port,
        _ => true,
    };
    proto_ok
        && port_ok
        && cidrs
            .iter()
            .filter_map(|c| Ipv4Net::parse(c))
            .any(|net| net.contains(source))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(
        cidrs: &[&str],
        ports: (Option<u16>, Option<u16>),
    ) -> (String, (Option<u16>, Option<u16>), Vec<String>) {
        (
            "tcp".into(),
            ports,
            cidrs.iter().map(|c| (*c).to_owned()).collect(),
        )
    }

    #[test]
    fn protocol_port_and_source_must_all_match() {
        let src: Ipv4Addr = "127.0.0.2".parse().unwrap();
        let (p, ports, cidrs) = rule(&["127.0.0.2/32"], (Some(80), Some(80)));
        assert!(matches(&p, ports, &cidrs, "tcp", 80, src));
        assert!(!matches(&p, ports, &cidrs, "udp", 80, src));
        assert!(!matches(&p, ports, &cidrs, "tcp", 81, src));
        assert!(!matches(
            &p,
            ports,
            &cidrs,
            "tcp",
            80,
            "127.0.0.3".parse().unwrap()
        ));
        let (_, all_ports, everyone) = rule(&["0.0.0.0/0"], (None, None));
        assert!(matches("all", all_ports, &everyone, "udp", 53, src));
    }

    #[test]
    fn tcp_proxy_runs_over_tcp() {
        assert_eq!(transport("tcp-proxy"), "tcp");
        assert_eq!(transport("UDP"), "udp");
    }
}
