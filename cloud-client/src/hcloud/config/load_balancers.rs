//! `HCLOUD_LOAD_BALANCERS_*`: whether the controllers manage load balancers, the defaults the
//! Services' annotations override (listed in docs/annotations.md), and whose load balancers a
//! Service may write to.

use std::collections::BTreeSet;
use std::time::Duration;

use super::address_family::{ADDRESS_FAMILY_EXPECTED, AddressFamily};
use crate::values::SettingsReader;

/// `HCLOUD_LOAD_BALANCERS_*`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadBalancersConfig {
    /// `HCLOUD_LOAD_BALANCERS_ENABLED` (default true).
    pub enabled: bool,
    pub defaults: LbDefaults,
}

impl Default for LoadBalancersConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            defaults: LbDefaults::default(),
        }
    }
}

impl LoadBalancersConfig {
    pub(super) fn read(settings: &mut SettingsReader) -> Self {
        let mut c = Self::default();
        let d = &mut c.defaults;
        if let Some(b) = settings.bool("HCLOUD_LOAD_BALANCERS_ENABLED") {
            c.enabled = b;
        }
        for (name, target) in [
            (
                "HCLOUD_LOAD_BALANCERS_USE_PRIVATE_IP",
                &mut d.use_private_ip,
            ),
            (
                "HCLOUD_LOAD_BALANCERS_DISABLE_PRIVATE_INGRESS",
                &mut d.disable_private_ingress,
            ),
            (
                "HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_KUBE_PROXY",
                &mut d.health_check_kube_proxy,
            ),
            ("HCLOUD_LOAD_BALANCERS_DISABLE_IPV6", &mut d.disable_ipv6),
            (
                "HCLOUD_LOAD_BALANCERS_TARGET_NODES_WITH_ENDPOINTS",
                &mut d.target_nodes_with_endpoints,
            ),
            (
                "HCLOUD_LOAD_BALANCERS_ONE_PER_NETWORK_ZONE",
                &mut d.one_per_network_zone,
            ),
            (
                "HCLOUD_LOAD_BALANCERS_ADOPT_BY_NAME",
                &mut d.tenancy.adopt_by_name,
            ),
        ] {
            if let Some(b) = settings.bool(name) {
                *target = b;
            }
        }
        d.disable_public_network = settings.bool("HCLOUD_LOAD_BALANCERS_DISABLE_PUBLIC_NETWORK");
        d.uses_proxyprotocol = settings.bool("HCLOUD_LOAD_BALANCERS_USES_PROXYPROTOCOL");
        if let Some(s) = settings.parsed(
            "HCLOUD_LOAD_BALANCERS_SHARE_ACROSS_NAMESPACES",
            ShareAcrossNamespaces::parse,
            &format!("expected {SHARE_ACROSS_NAMESPACES_EXPECTED}"),
        ) {
            d.tenancy.share_across_namespaces = s;
        }
        d.health_check_interval = settings.duration("HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_INTERVAL");
        d.health_check_timeout = settings.duration("HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_TIMEOUT");
        d.health_check_retries = settings.parsed(
            "HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_RETRIES",
            |v| v.parse::<u32>().ok(),
            "expected a non-negative integer",
        );
        d.location = settings.text("HCLOUD_LOAD_BALANCERS_LOCATION");
        d.network_zone = settings.text("HCLOUD_LOAD_BALANCERS_NETWORK_ZONE");
        d.lb_type = settings.text("HCLOUD_LOAD_BALANCERS_TYPE");
        // Lowercased like HCCM's parseLoadBalancerAlgorithmType.
        d.algorithm = settings
            .text("HCLOUD_LOAD_BALANCERS_ALGORITHM_TYPE")
            .map(|v| v.to_ascii_lowercase());
        d.private_subnet_ip_range = settings.text("HCLOUD_LOAD_BALANCERS_PRIVATE_SUBNET_IP_RANGE");
        d.robot_target_family = settings.parsed(
            "HCLOUD_LOAD_BALANCERS_ROBOT_TARGET_ADDRESS_FAMILY",
            AddressFamily::parse,
            ADDRESS_FAMILY_EXPECTED,
        );
        c
    }

    /// Values that are each well-formed but wrong in themselves or together.
    pub(super) fn problems(&self) -> Vec<String> {
        let d = &self.defaults;
        let mut problems = Vec::new();
        if d.location.is_some() && d.network_zone.is_some() {
            problems.push(
                "HCLOUD_LOAD_BALANCERS_LOCATION and HCLOUD_LOAD_BALANCERS_NETWORK_ZONE are \
                 mutually exclusive"
                    .into(),
            );
        }
        if let Some(a) = &d.algorithm
            && a != "round_robin"
            && a != "least_connections"
        {
            problems.push(format!(
                "HCLOUD_LOAD_BALANCERS_ALGORITHM_TYPE={a:?}: expected round_robin or least_connections"
            ));
        }
        // Checked per Service otherwise, where the Warning would blame an annotation nobody set.
        if let Some(r) = &d.private_subnet_ip_range
            && !r.split_once('/').is_some_and(|(ip, len)| {
                ip.parse::<std::net::Ipv4Addr>().is_ok() && len.parse::<u8>().is_ok_and(|l| l <= 32)
            })
        {
            problems.push(format!(
                "HCLOUD_LOAD_BALANCERS_PRIVATE_SUBNET_IP_RANGE={r:?}: expected an IPv4 CIDR such as 10.0.1.0/24"
            ));
        }
        problems
    }
}

/// Process-wide load-balancer defaults; annotations override them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LbDefaults {
    pub location: Option<String>,
    pub network_zone: Option<String>,
    pub lb_type: Option<String>,
    pub algorithm: Option<String>,
    pub use_private_ip: bool,
    pub disable_private_ingress: bool,
    pub disable_public_network: Option<bool>,
    pub disable_ipv6: bool,
    pub uses_proxyprotocol: Option<bool>,
    pub private_subnet_ip_range: Option<String>,
    pub health_check_interval: Option<Duration>,
    pub health_check_timeout: Option<Duration>,
    pub health_check_retries: Option<u32>,
    /// `HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_KUBE_PROXY`: the default of the
    /// `health-check-kube-proxy` annotation.
    pub health_check_kube_proxy: bool,
    /// `HCLOUD_LOAD_BALANCERS_ROBOT_TARGET_ADDRESS_FAMILY` (the name syself's fork gave it): which
    /// addresses of a dedicated server are its targets. `None`: the Service's `ipFamilies`.
    pub robot_target_family: Option<AddressFamily>,
    /// `HCLOUD_LOAD_BALANCERS_TARGET_NODES_WITH_ENDPOINTS`: the default of the
    /// `target-nodes-with-endpoints` annotation.
    pub target_nodes_with_endpoints: bool,
    /// `HCLOUD_LOAD_BALANCERS_ONE_PER_NETWORK_ZONE`: the default of the `one-per-network-zone`
    /// annotation.
    pub one_per_network_zone: bool,
    /// `HCLOUD_LOAD_BALANCERS_SHARE_ACROSS_NAMESPACES` and `HCLOUD_LOAD_BALANCERS_ADOPT_BY_NAME`:
    /// whose load balancers a Service may write to (no annotation overrides them; the rules are
    /// `load_balancer::tenancy`'s).
    pub tenancy: Tenancy,
}

/// `HCLOUD_LOAD_BALANCERS_SHARE_ACROSS_NAMESPACES`: which namespaces' Services may be on one load
/// balancer together. Within a namespace they always may.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum ShareAcrossNamespaces {
    /// Unset: each namespace on its own load balancers.
    #[default]
    Never,
    /// `team-a,team-a-canary;ingress,platform`: the namespaces of one group share with each other.
    Groups(Vec<BTreeSet<String>>),
    /// `*`: every namespace with every other (what the controller did before it asked).
    Any,
}

impl ShareAcrossNamespaces {
    /// Parses the setting's value; `None` when a group names no namespace or a name is not a
    /// namespace name.
    pub fn parse(value: &str) -> Option<Self> {
        let value = value.trim();
        if value.is_empty() {
            return Some(Self::Never);
        }
        if value == "*" {
            return Some(Self::Any);
        }
        let mut groups = Vec::new();
        for group in value.split(';').filter(|g| !g.trim().is_empty()) {
            let names: BTreeSet<String> = group.split(',').map(|n| n.trim().to_owned()).collect();
            if names.iter().any(|n| !is_namespace_name(n)) {
                return None;
            }
            groups.push(names);
        }
        Some(Self::Groups(groups))
    }

    /// Whether Services of namespaces `a` and `b` may be on one load balancer.
    pub fn allows(&self, a: &str, b: &str) -> bool {
        a == b
            || match self {
                Self::Never => false,
                Self::Groups(groups) => groups.iter().any(|g| g.contains(a) && g.contains(b)),
                Self::Any => true,
            }
    }
}

/// What the setting accepts, for its error message.
pub const SHARE_ACROSS_NAMESPACES_EXPECTED: &str = "`*`, or groups of namespace names separated \
     by `;`, each group's names separated by `,` (e.g. `team-a,team-a-canary;ingress,platform`)";

/// A DNS label, as namespace names are.
fn is_namespace_name(n: &str) -> bool {
    !n.is_empty()
        && n.len() <= 63
        && n.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !n.starts_with('-')
        && !n.ends_with('-')
}

/// The administrator's rules for whose load balancers a Service may write to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tenancy {
    pub share_across_namespaces: ShareAcrossNamespaces,
    /// `HCLOUD_LOAD_BALANCERS_ADOPT_BY_NAME`: adopt a load balancer nobody in the cluster made,
    /// by its name alone, as HCCM does (off by default; for a migration).
    pub adopt_by_name: bool,
}
