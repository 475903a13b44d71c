//! A Node's IPv6 ExternalIP. Hetzner gives each server a /64; HCCM reports its first address
//! (`<prefix>::1`), which is wrong for a server that uses another one, and Robot does not report a
//! subnet for every server. HCCM v1.37's Node annotation `instance.hetzner.cloud/external-ipv6`
//! states the address instead, for Cloud and Robot servers alike; this reads it as HCCM does:
//! only with an IPv6 address family (else ignored, with a Warning), one global unicast IPv6
//! address (else the Node is refused with a Warning and its addresses stay as they are).

use std::net::{IpAddr, Ipv6Addr};

use crate::capabilities::{NodeRef, Warning};
use crate::error::CloudError;
use crate::hcloud::config::AddressFamily;

/// The annotation, HCCM's key.
pub const EXTERNAL_IPV6: &str = "instance.hetzner.cloud/external-ipv6";

/// HCCM's Warning reasons.
pub const INVALID_EXTERNAL_IPV6: &str = "InvalidExternalIPv6";
pub const IGNORED_EXTERNAL_IPV6: &str = "IgnoredExternalIPv6";
pub const INVALID_IPV6_NET: &str = "InvalidIPv6Net";

/// What the Node states about its IPv6 ExternalIP.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Stated {
    /// No annotation: the address is derived from the server's /64.
    Nothing,
    /// The annotation's address, normalised.
    Address(String),
    /// The annotation, which the address family makes meaningless.
    Ignored(Warning),
}

impl Stated {
    /// The address the Node states, and what to tell its operator.
    pub(crate) fn split(self) -> (Option<String>, Vec<Warning>) {
        match self {
            Stated::Nothing => (None, Vec::new()),
            Stated::Address(a) => (Some(a), Vec::new()),
            Stated::Ignored(w) => (None, vec![w]),
        }
    }
}

/// Reads the Node's annotation for `family`; an invalid value is the Node's error.
pub(crate) fn stated(node: &NodeRef, family: AddressFamily) -> Result<Stated, CloudError> {
    let Some(value) = node.annotations.get(EXTERNAL_IPV6) else {
        return Ok(Stated::Nothing);
    };
    if !family.has_v6() {
        return Ok(Stated::Ignored(Warning::new(
            IGNORED_EXTERNAL_IPV6,
            format!(
                "annotation {EXTERNAL_IPV6}={value:?} is ignored: HCLOUD_INSTANCES_ADDRESS_FAMILY \
                 is ipv4, so Nodes get no IPv6 address; set it to dualstack or ipv6, or remove \
                 the annotation"
            ),
        )));
    }
    match parse(value) {
        Ok(address) => Ok(Stated::Address(address.to_string())),
        Err(why) => Err(CloudError::InvalidNodeInput {
            reason: INVALID_EXTERNAL_IPV6,
            message: format!(
                "invalid value {value:?} for annotation {EXTERNAL_IPV6}: {why}; expected one \
                 global unicast IPv6 address, e.g. 2001:db8:1234::5. The Node's addresses are \
                 left as they are"
            ),
        }),
    }
}

/// One global unicast IPv6 address, as Go's `net.IP.IsGlobalUnicast` has it (ULA included).
fn parse(value: &str) -> Result<Ipv6Addr, &'static str> {
    let value = value.trim();
    if value.contains('/') {
        return Err("a subnet, not an address");
    }
    let address: Ipv6Addr = match value.parse::<IpAddr>() {
        Ok(IpAddr::V6(a)) => a,
        Ok(IpAddr::V4(_)) => return Err("an IPv4 address"),
        Err(_) => return Err("not an IP address"),
    };
    if address.to_ipv4_mapped().is_some() {
        return Err("an IPv4-mapped address");
    }
    if address.is_unspecified()
        || address.is_loopback()
        || address.is_multicast()
        || address.is_unicast_link_local()
    {
        return Err("not a global unicast address");
    }
    Ok(address)
}

/// `<prefix>::1` of a server's IPv6 network (`2001:db8::/64`, or Robot's `2001:db8::`): the
/// address HCCM derives. `None` for something that is no IPv6 network.
pub fn first_address(network: &str) -> Option<String> {
    let prefix = network.split('/').next()?;
    let addr: Ipv6Addr = prefix.trim().parse().ok()?;
    let mut octets = addr.octets();
    octets[15] |= 1;
    Some(Ipv6Addr::from(octets).to_string())
}

/// A dedicated server's derived IPv6 ExternalIP: none for an empty subnet (Robot reports none
/// for some servers; HCCM before v1.37 wrote the address `1` then), a Warning for a malformed one.
pub(crate) fn robot_derived(server_number: i64, network: &str) -> Result<Option<String>, Warning> {
    if network.trim().is_empty() {
        return Ok(None);
    }
    first_address(network).map(Some).ok_or_else(|| {
        Warning::new(
            INVALID_IPV6_NET,
            format!(
                "Robot server {server_number} reports the IPv6 subnet {network:?}, which is no \
                 IPv6 network: the Node gets no IPv6 ExternalIP from it (annotation \
                 {EXTERNAL_IPV6} states one)"
            ),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn node(value: &str) -> NodeRef {
        NodeRef::new("n").with_annotations(BTreeMap::from([(
            EXTERNAL_IPV6.to_owned(),
            value.to_owned(),
        )]))
    }

    #[test]
    fn a_stated_address_is_normalised_and_needs_an_ipv6_family() {
        assert_eq!(
            stated(&node("2001:DB8:0:0::5"), AddressFamily::DualStack).unwrap(),
            Stated::Address("2001:db8::5".into())
        );
        assert_eq!(
            stated(&NodeRef::new("n"), AddressFamily::Ipv6).unwrap(),
            Stated::Nothing
        );
        let Stated::Ignored(w) = stated(&node("2001:db8::5"), AddressFamily::Ipv4).unwrap() else {
            panic!("ipv4 ignores it")
        };
        assert_eq!(w.reason, IGNORED_EXTERNAL_IPV6);
    }

    #[test]
    fn bad_values_name_the_annotation_and_why() {
        for (value, why) in [
            ("2001:db8::/64", "a subnet"),
            ("10.0.0.1", "an IPv4 address"),
            ("::ffff:10.0.0.1", "IPv4-mapped"),
            ("fe80::1", "not a global unicast"),
            ("::1", "not a global unicast"),
            ("ff02::1", "not a global unicast"),
            ("nonsense", "not an IP address"),
        ] {
            let err = stated(&node(value), AddressFamily::Ipv6).unwrap_err();
            let CloudError::InvalidNodeInput { reason, message } = &err else {
                panic!("{err:?}")
            };
            assert_eq!(*reason, INVALID_EXTERNAL_IPV6);
            assert!(
                message.contains(EXTERNAL_IPV6) && message.contains(why),
                "{value}: {message}"
            );
        }
    }

    #[test]
    fn robot_subnets_empty_prefixed_or_malformed() {
        assert_eq!(robot_derived(1, ""), Ok(None));
        assert_eq!(
            robot_derived(1, "2a01:4f8:111:4221::"),
            Ok(Some("2a01:4f8:111:4221::1".into()))
        );
        assert_eq!(
            robot_derived(1, "2a01:4f8:111:4221::/64"),
            Ok(Some("2a01:4f8:111:4221::1".into())),
            "not `…::/641` as HCCM once wrote"
        );
        assert_eq!(
            robot_derived(1, "garbage").unwrap_err().reason,
            INVALID_IPV6_NET
        );
    }
}
