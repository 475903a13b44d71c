//! The cluster CIDR(s) of `--cluster-cidr` and the membership test upstream uses to decide which
//! routes are this controller's.

use std::fmt;
use std::net::IpAddr;

/// One IPv4 or IPv6 network.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    addr: IpAddr,
    prefix: u8,
}

impl Cidr {
    /// Parses `a.b.c.d/n` or `x::/n` (the address may have host bits set, as Go's ParseCIDR allows).
    pub fn parse(s: &str) -> Result<Self, String> {
        let (ip, len) = s
            .split_once('/')
            .ok_or_else(|| format!("{s:?} is not a CIDR (expected address/prefix)"))?;
        let addr: IpAddr = ip
            .parse()
            .map_err(|_| format!("{s:?}: {ip:?} is not an IP address"))?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix: u8 = len
            .parse()
            .ok()
            .filter(|p| *p <= max)
            .ok_or_else(|| format!("{s:?}: prefix must be 0-{max}"))?;
        Ok(Self { addr, prefix })
    }

    /// True for an IPv6 network.
    pub fn is_ipv6(&self) -> bool {
        self.addr.is_ipv6()
    }

    fn bits(ip: IpAddr) -> (u128, u32) {
        match ip {
            IpAddr::V4(v) => (u128::from(u32::from(v)), 32),
            IpAddr::V6(v) => (u128::from(v), 128),
        }
    }

    /// The first and last address of the network.
    fn range(&self) -> (u128, u128) {
        let (bits, width) = Self::bits(self.addr);
        let host = width - u32::from(self.prefix);
        let host_mask = if host == 128 {
            u128::MAX
        } else {
            (1u128 << host) - 1
        };
        let first = bits & !host_mask;
        (first, first | host_mask)
    }

    /// True when `ip` lies inside this network.
    pub fn contains(&self, ip: IpAddr) -> bool {
        if ip.is_ipv4() != self.addr.is_ipv4() {
            return false;
        }
        let (first, last) = self.range();
        let (b, _) = Self::bits(ip);
        first <= b && b <= last
    }

    fn edge(&self, last: bool) -> IpAddr {
        let (first, end) = self.range();
        let v = if last { end } else { first };
        match self.addr {
            IpAddr::V4(_) => IpAddr::from((v as u32).to_be_bytes()),
            IpAddr::V6(_) => IpAddr::from(v.to_be_bytes()),
        }
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

/// `--cluster-cidr`: one network, or a dual-stack pair (one per family).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClusterCidrs(Vec<Cidr>);

impl ClusterCidrs {
    /// Parses the flag value as upstream does (comma-separated, at most one per family).
    pub fn parse(s: &str) -> Result<Self, String> {
        let cidrs = s
            .trim()
            .split(',')
            .map(|c| Cidr::parse(c.trim()))
            .collect::<Result<Vec<_>, _>>()?;
        match cidrs.as_slice() {
            [] => Err("no CIDR given".into()),
            [_] => Ok(Self(cidrs)),
            [a, b] if a.is_ipv6() != b.is_ipv6() => Ok(Self(cidrs)),
            [_, _] => Err("two CIDRs must be a dual-stack pair (one IPv4, one IPv6)".into()),
            _ => Err("at most two CIDRs (a dual-stack pair)".into()),
        }
    }

    /// Upstream's test for "this route is ours": its first or last address is inside a cluster CIDR.
    /// Anything else (another cluster's routes, hand-made routes) is never touched.
    pub fn owns(&self, destination: &str) -> bool {
        let Ok(d) = Cidr::parse(destination) else {
            return false;
        };
        self.0
            .iter()
            .any(|c| c.contains(d.edge(false)) || c.contains(d.edge(true)))
    }

    /// True when the whole of `cidr` lies inside a cluster CIDR.
    pub fn covers(&self, cidr: &Cidr) -> bool {
        self.0
            .iter()
            .any(|c| c.contains(cidr.edge(false)) && c.contains(cidr.edge(true)))
    }
}

impl fmt::Display for ClusterCidrs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self.0.iter().map(Cidr::to_string).collect();
        f.write_str(&parts.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn membership_by_first_or_last_address() {
        let c = ClusterCidrs::parse("10.244.0.0/16").unwrap();
        assert!(c.owns("10.244.3.0/24"));
        assert!(c.owns("10.244.0.0/16"));
        // Neither its first nor its last address is inside: not ours, even though it overlaps.
        assert!(!c.owns("10.240.0.0/12"));
        assert!(!c.owns("10.245.0.0/24"));
        assert!(!c.owns("192.168.0.0/24"));
        assert!(!c.owns("garbage"));
        assert!(c.covers(&Cidr::parse("10.244.7.0/24").unwrap()));
        assert!(!c.covers(&Cidr::parse("10.0.0.0/8").unwrap()));
    }

    #[test]
    fn dual_stack_rules() {
        assert!(ClusterCidrs::parse("10.244.0.0/16,fd00:10:244::/56").is_ok());
        assert!(ClusterCidrs::parse("10.244.0.0/16,10.245.0.0/16").is_err());
        assert!(ClusterCidrs::parse("10.0.0.0/8,fd00::/8,10.1.0.0/16").is_err());
        assert!(ClusterCidrs::parse("").is_err());
        assert!(ClusterCidrs::parse("10.0.0.0/33").is_err());
        let v6 = ClusterCidrs::parse("fd00:10:244::/56").unwrap();
        assert!(v6.owns("fd00:10:244:1::/64"));
        assert!(!v6.owns("10.244.0.0/24"));
        assert_eq!(
            ClusterCidrs::parse(" 10.244.0.0/16 ").unwrap().to_string(),
            "10.244.0.0/16"
        );
    }
}
