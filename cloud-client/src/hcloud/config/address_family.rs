//! `ipv4`, `ipv6` or `dualstack`, as HCCM's settings spell an address family.

/// An address family setting: `HCLOUD_INSTANCES_ADDRESS_FAMILY`, and which addresses of a dedicated
/// server a load balancer targets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AddressFamily {
    #[default]
    Ipv4,
    Ipv6,
    DualStack,
}

impl AddressFamily {
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "ipv4" => Some(AddressFamily::Ipv4),
            "ipv6" => Some(AddressFamily::Ipv6),
            "dualstack" => Some(AddressFamily::DualStack),
            _ => None,
        }
    }

    pub fn has_v4(self) -> bool {
        matches!(self, AddressFamily::Ipv4 | AddressFamily::DualStack)
    }

    pub fn has_v6(self) -> bool {
        matches!(self, AddressFamily::Ipv6 | AddressFamily::DualStack)
    }
}

/// What the settings accept, for their error messages.
pub const ADDRESS_FAMILY_EXPECTED: &str = "must be ipv4, ipv6 or dualstack";
