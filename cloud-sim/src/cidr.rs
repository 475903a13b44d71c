//! IPv4 prefixes for networks, subnets and routes.

use std::fmt;
use std::net::Ipv4Addr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// An IPv4 prefix whose address is the network address (`10.0.1.0/24`, never `10.0.1.7/24`),
/// which is what the API demands for `ip_range` and route destinations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv4Net {
    base: u32,
    prefix: u8,
}

fn mask(prefix: u8) -> u32 {
    if prefix == 0 {
        0
    } else {
        u32::MAX << (32 - u32::from(prefix))
    }
}

impl Ipv4Net {
    pub fn parse(s: &str) -> Option<Self> {
        let (addr, prefix) = s.split_once('/')?;
        let addr: Ipv4Addr = addr.parse().ok()?;
        let prefix: u8 = prefix.parse().ok()?;
        if prefix > 32 {
            return None;
        }
        let base = u32::from(addr);
        if base & !mask(prefix) != 0 {
            return None;
        }
        Some(Ipv4Net { base, prefix })
    }

    pub fn new_unchecked(base: u32, prefix: u8) -> Self {
        Ipv4Net {
            base: base & mask(prefix),
            prefix,
        }
    }

    pub fn prefix(&self) -> u8 {
        self.prefix
    }

    pub fn first(&self) -> u32 {
        self.base
    }

    pub fn last(&self) -> u32 {
        self.base | !mask(self.prefix)
    }

    pub fn size(&self) -> u64 {
        1u64 << (32 - u32::from(self.prefix))
    }

    pub fn contains(&self, ip: Ipv4Addr) -> bool {
        self.contains_u32(u32::from(ip))
    }

    pub fn contains_u32(&self, ip: u32) -> bool {
        ip & mask(self.prefix) == self.base
    }

    pub fn contains_net(&self, other: &Ipv4Net) -> bool {
        other.prefix >= self.prefix && self.contains_u32(other.base)
    }

    pub fn overlaps(&self, other: &Ipv4Net) -> bool {
        self.contains_u32(other.base) || other.contains_u32(self.base)
    }

    /// Inside 10/8, 172.16/12 or 192.168/16: the only destinations routes may have.
    pub fn is_rfc1918(&self) -> bool {
        ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"]
            .iter()
            .filter_map(|s| Ipv4Net::parse(s))
            .any(|private| private.contains_net(self))
    }
}

impl fmt::Display for Ipv4Net {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", Ipv4Addr::from(self.base), self.prefix)
    }
}

impl Serialize for Ipv4Net {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Ipv4Net {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Ipv4Net::parse(&s).ok_or_else(|| serde::de::Error::custom(format!("bad prefix {s}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_compares() {
        let net = Ipv4Net::parse("10.0.0.0/16").unwrap();
        let sub = Ipv4Net::parse("10.0.1.0/24").unwrap();
        assert!(net.contains_net(&sub) && net.overlaps(&sub) && sub.overlaps(&net));
        assert!(!sub.contains_net(&net));
        assert!(Ipv4Net::parse("10.0.1.7/24").is_none());
        assert!(Ipv4Net::parse("10.0.0.0/33").is_none());
        assert!(sub.is_rfc1918());
        assert!(!Ipv4Net::parse("100.64.0.0/10").unwrap().is_rfc1918());
        assert_eq!(sub.to_string(), "10.0.1.0/24");
        assert_eq!(sub.size(), 256);
    }
}
