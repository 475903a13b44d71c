//! Where the load balancer is attached and how it reaches its targets: the private network, its
//! IP and subnet, the public interface, and the target selection (node selector, private IPs).

use std::net::Ipv4Addr;

use super::reader::{Reader, is_ipv4_cidr};
use crate::hcloud::config::{AddressFamily, LbDefaults};
use crate::hcloud::load_balancer::annotations as a;
use crate::hcloud::load_balancer::ownership::fingerprint;
use crate::label_selector::LabelSelector;

/// The network part of an `LbSpec`.
#[derive(Debug, Default)]
pub(super) struct NetworkSpec {
    pub use_private_ip: bool,
    pub private_ipv4: Option<Ipv4Addr>,
    pub private_subnet_ip_range: Option<String>,
    pub node_selector: Option<LabelSelector>,
    pub robot_target_family: Option<AddressFamily>,
    pub target_selection: String,
    pub target_nodes_with_endpoints: bool,
}

/// Private network, target selection.
pub(super) fn parse_network(r: &mut Reader<'_>, defaults: &LbDefaults) -> NetworkSpec {
    let mut s = NetworkSpec::default();
    let private_ip = r.bool(a::USE_PRIVATE_IP);
    s.use_private_ip = r.or_env_flag(a::USE_PRIVATE_IP, private_ip, defaults.use_private_ip);
    if let Some(ip) = r.string(a::PRIVATE_IPV4) {
        match ip.parse::<Ipv4Addr>() {
            Ok(v) => s.private_ipv4 = Some(v),
            Err(_) => r.fail(a::PRIVATE_IPV4, &ip, "an IPv4 address"),
        }
    }
    let range = r.string(a::PRIVATE_SUBNET_IP_RANGE);
    s.private_subnet_ip_range = r.or_env(
        a::PRIVATE_SUBNET_IP_RANGE,
        range,
        defaults.private_subnet_ip_range.clone(),
    );
    if let Some(c) = s.private_subnet_ip_range.clone()
        && !is_ipv4_cidr(&c)
    {
        r.fail(
            a::PRIVATE_SUBNET_IP_RANGE,
            &c,
            "an IPv4 CIDR such as 10.0.1.0/24",
        );
        s.private_subnet_ip_range = None;
    }
    let selector = r.string(a::NODE_SELECTOR);
    if let Some(sel) = &selector {
        match LabelSelector::parse(&format!("annotation {}", a::NODE_SELECTOR), sel) {
            Ok(x) => s.node_selector = Some(x),
            Err(e) => r.errors.push(e),
        }
    }
    let family = r.string(a::ROBOT_TARGET_ADDRESS_FAMILY);
    let family = family.and_then(|v| {
        let parsed = AddressFamily::parse(&v);
        if parsed.is_none() {
            r.fail(
                a::ROBOT_TARGET_ADDRESS_FAMILY,
                &v,
                "ipv4, ipv6 or dualstack",
            );
        }
        parsed
    });
    s.robot_target_family = r.or_env(
        a::ROBOT_TARGET_ADDRESS_FAMILY,
        family,
        defaults.robot_target_family,
    );
    s.target_selection =
        target_selection(selector.as_deref(), s.use_private_ip, s.robot_target_family);
    let with_endpoints = r.bool(a::TARGET_NODES_WITH_ENDPOINTS);
    s.target_nodes_with_endpoints = r.or_env_flag(
        a::TARGET_NODES_WITH_ENDPOINTS,
        with_endpoints,
        defaults.target_nodes_with_endpoints,
    );
    s
}

/// The fingerprint of a target selection: the selector's requirements in order, so that
/// `a=1,b=2` and `b=2, a=1` agree, whether targets are reached by private IP, and a dedicated
/// server's address family when one is set (left out otherwise, so fingerprints made before it
/// existed stay the same).
pub(super) fn target_selection(
    selector: Option<&str>,
    use_private_ip: bool,
    robot_family: Option<AddressFamily>,
) -> String {
    let mut parts: Vec<&str> = selector
        .unwrap_or("")
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .collect();
    parts.sort_unstable();
    let family = robot_family.map_or(String::new(), |f| format!("|robot={f:?}"));
    fingerprint(&format!(
        "{}|private={use_private_ip}{family}",
        parts.join(",")
    ))
}
