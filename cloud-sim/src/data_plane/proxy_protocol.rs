//! PROXY protocol headers (haproxy's spec, "The PROXY protocol", versions 1 and 2): what a
//! service with `proxyprotocol` writes to its target before the client's bytes, so the target
//! learns the client's address. Hetzner does not document which version it sends; version 1 is
//! the default here and 2 is a configuration choice (`DataPlaneConfig::proxy_protocol_version`).

use std::net::{IpAddr, SocketAddr};

/// Version 2's fixed 12-byte signature.
const V2_SIGNATURE: [u8; 12] = [
    0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d, 0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a,
];

/// The header for a connection from `source` to `destination` (the load balancer's public
/// address and listen port). Both must be of one family; an IPv4-mapped IPv6 address counts as
/// IPv4. Mixed families produce the spec's "unknown" form, which carries no addresses.
pub fn header(version: u8, source: SocketAddr, destination: SocketAddr) -> Vec<u8> {
    let (src, dst) = (canonical(source), canonical(destination));
    if version == 2 {
        v2(src, dst)
    } else {
        v1(src, dst)
    }
}

fn canonical(a: SocketAddr) -> SocketAddr {
    match a.ip() {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => SocketAddr::new(IpAddr::V4(v4), a.port()),
            None => a,
        },
        IpAddr::V4(_) => a,
    }
}

/// `PROXY TCP4 192.0.2.1 100.64.0.9 56324 80\r\n`
fn v1(src: SocketAddr, dst: SocketAddr) -> Vec<u8> {
    let family = match (src, dst) {
        (SocketAddr::V4(_), SocketAddr::V4(_)) => "TCP4",
        (SocketAddr::V6(_), SocketAddr::V6(_)) => "TCP6",
        _ => return b"PROXY UNKNOWN\r\n".to_vec(),
    };
    format!(
        "PROXY {family} {} {} {} {}\r\n",
        src.ip(),
        dst.ip(),
        src.port(),
        dst.port()
    )
    .into_bytes()
}

/// Signature, version 2 + PROXY command, family + STREAM, length, addresses, ports.
fn v2(src: SocketAddr, dst: SocketAddr) -> Vec<u8> {
    let mut out = V2_SIGNATURE.to_vec();
    out.push(0x21);
    let (family, mut addresses) = match (src, dst) {
        (SocketAddr::V4(s), SocketAddr::V4(d)) => {
            (0x11, [s.ip().octets(), d.ip().octets()].concat())
        }
        (SocketAddr::V6(s), SocketAddr::V6(d)) => {
            (0x21, [s.ip().octets(), d.ip().octets()].concat())
        }
        // AF_UNSPEC: the receiver uses the connection's own addresses.
        _ => {
            out.extend_from_slice(&[0x00, 0x00, 0x00]);
            return out;
        }
    };
    addresses.extend_from_slice(&src.port().to_be_bytes());
    addresses.extend_from_slice(&dst.port().to_be_bytes());
    out.push(family);
    out.extend_from_slice(&(addresses.len() as u16).to_be_bytes());
    out.extend_from_slice(&addresses);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v1_text_line() {
        let h = header(
            1,
            "192.0.2.1:56324".parse().unwrap(),
            "100.64.0.9:80".parse().unwrap(),
        );
        assert_eq!(h, b"PROXY TCP4 192.0.2.1 100.64.0.9 56324 80\r\n");
        let h = header(
            1,
            "[2001:db8::1]:1000".parse().unwrap(),
            "[2001:db8::2]:443".parse().unwrap(),
        );
        assert_eq!(h, b"PROXY TCP6 2001:db8::1 2001:db8::2 1000 443\r\n");
    }

    #[test]
    fn v2_binary_ipv4() {
        let h = header(
            2,
            "192.0.2.1:56324".parse().unwrap(),
            "100.64.0.9:80".parse().unwrap(),
        );
        let mut want = V2_SIGNATURE.to_vec();
        want.extend_from_slice(&[0x21, 0x11, 0x00, 0x0c]);
        want.extend_from_slice(&[192, 0, 2, 1, 100, 64, 0, 9]);
        want.extend_from_slice(&56324u16.to_be_bytes());
        want.extend_from_slice(&80u16.to_be_bytes());
        assert_eq!(h, want);
    }

    #[test]
    fn mapped_addresses_count_as_ipv4_and_mixed_families_are_unknown() {
        let h = header(
            1,
            "[::ffff:192.0.2.1]:5".parse().unwrap(),
            "100.64.0.9:80".parse().unwrap(),
        );
        assert_eq!(h, b"PROXY TCP4 192.0.2.1 100.64.0.9 5 80\r\n");
        let h = header(
            1,
            "[2001:db8::1]:5".parse().unwrap(),
            "100.64.0.9:80".parse().unwrap(),
        );
        assert_eq!(h, b"PROXY UNKNOWN\r\n");
    }
}
