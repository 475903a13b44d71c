//! What a Service asks of its CloudStack load balancer, read from its spec and upstream's
//! annotations and checked before anything is written: every invalid value is a
//! [`CloudError::InvalidInput`] naming the field or annotation.

use std::net::Ipv4Addr;

use crate::capabilities::{PortProtocol, ServiceRef, default_load_balancer_name};
use crate::error::CloudError;

/// Upstream's annotations (cloudstack_loadbalancer.go:37-59), read as upstream reads them.
pub const PROXY_PROTOCOL: &str =
    "service.beta.kubernetes.io/cloudstack-load-balancer-proxy-protocol";
pub const HOSTNAME: &str = "service.beta.kubernetes.io/cloudstack-load-balancer-hostname";
pub const SOURCE_CIDRS: &str = "service.beta.kubernetes.io/cloudstack-load-balancer-source-cidrs";
/// Upstream writes it `"true"` when it associated the address `spec.loadBalancerIP` named; it
/// then releases that address on delete. Read here (see `docs/cloudstack.md`).
pub const IP_ASSOCIATED: &str =
    "service.beta.kubernetes.io/cloudstack-load-balancer-ip-associated-by-controller";

/// Every address.
pub const EVERYONE: &str = "0.0.0.0/0";

/// A rule's protocol, CloudStack's spelling.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Proto {
    Tcp,
    Udp,
    TcpProxy,
}

impl Proto {
    pub fn as_str(self) -> &'static str {
        match self {
            Proto::Tcp => "tcp",
            Proto::Udp => "udp",
            Proto::TcpProxy => "tcp-proxy",
        }
    }

    /// The transport, for firewall and ACL rules (`tcp-proxy` is TCP).
    pub fn transport(self) -> &'static str {
        match self {
            Proto::Udp => "udp",
            Proto::Tcp | Proto::TcpProxy => "tcp",
        }
    }
}

/// One load-balancer rule the Service asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleSpec {
    /// `<lb name>-<protocol>-<port>`, upstream's.
    pub name: String,
    pub protocol: Proto,
    pub public_port: u16,
    /// The NodePort.
    pub private_port: u16,
}

/// The Service's load balancer, as asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LbSpec {
    /// `a` + UID without dashes, 32 characters: upstream's name, the prefix of every rule's.
    pub name: String,
    pub rules: Vec<RuleSpec>,
    /// `roundrobin`, or `source` for `sessionAffinity: ClientIP` (upstream's choice).
    pub algorithm: &'static str,
    /// The load-balancer rules' `cidrlist`: the source-cidrs annotation, sorted, else
    /// `0.0.0.0/0` (upstream's).
    pub rule_cidrs: Vec<String>,
    /// Who the firewall or ACL lets in: `spec.loadBalancerSourceRanges`, sorted, else
    /// `0.0.0.0/0`.
    pub allowed: Vec<String>,
    /// Whether `allowed` restricts anything (so it must be enforced).
    pub restricts: bool,
    pub hostname: Option<String>,
    pub address: Option<Ipv4Addr>,
    /// Upstream's annotation says it associated `address`.
    pub address_associated: bool,
}

impl LbSpec {
    pub fn parse(svc: &ServiceRef) -> Result<Self, CloudError> {
        let name = default_load_balancer_name(&svc.uid);
        let ann = |k: &str| svc.annotations.get(k).map(String::as_str);
        // As upstream: exactly "true" turns it on, anything else off.
        let proxy = ann(PROXY_PROTOCOL) == Some("true");
        let mut rules = Vec::new();
        for (i, p) in svc.ports.iter().enumerate() {
            let protocol = match &p.protocol {
                PortProtocol::Tcp if proxy => Proto::TcpProxy,
                PortProtocol::Tcp => Proto::Tcp,
                PortProtocol::Udp => Proto::Udp,
                other => {
                    return Err(CloudError::invalid_input(
                        format!("spec.ports[{i}].protocol"),
                        other.as_str(),
                        "TCP or UDP (CloudStack's load balancers forward no other protocol)",
                    ));
                }
            };
            if p.node_port == 0 {
                return Err(CloudError::invalid_input(
                    format!("spec.ports[{i}].nodePort"),
                    "0",
                    "a NodePort (CloudStack's rules forward to one; \
                     allocateLoadBalancerNodePorts: false is not supported)",
                ));
            }
            rules.push(RuleSpec {
                name: rule_name(&name, protocol, p.port),
                protocol,
                public_port: p.port,
                private_port: p.node_port,
            });
        }
        let rule_cidrs = match ann(SOURCE_CIDRS) {
            None => vec![EVERYONE.to_owned()],
            Some(v) => cidrs(&format!("annotation {SOURCE_CIDRS}"), v.split(','))?,
        };
        let allowed = cidrs(
            "spec.loadBalancerSourceRanges",
            svc.source_ranges.iter().map(String::as_str),
        )?;
        let restricts = !allowed.is_empty() && !allowed.iter().any(|c| c == EVERYONE);
        let allowed = if restricts {
            allowed
        } else {
            vec![EVERYONE.to_owned()]
        };
        let address = match svc.load_balancer_ip.as_deref().map(str::trim) {
            None | Some("") => None,
            Some(a) => Some(a.parse::<Ipv4Addr>().map_err(|_| {
                CloudError::invalid_input(
                    "spec.loadBalancerIP",
                    a,
                    "an IPv4 address the project holds, or a free one of the zone",
                )
            })?),
        };
        Ok(Self {
            name,
            rules,
            algorithm: if svc.session_affinity_client_ip {
                "source"
            } else {
                "roundrobin"
            },
            rule_cidrs,
            allowed,
            restricts,
            hostname: ann(HOSTNAME)
                .map(str::trim)
                .filter(|h| !h.is_empty())
                .map(str::to_owned),
            address,
            address_associated: ann(IP_ASSOCIATED) == Some("true"),
        })
    }
}

/// Upstream's rule name: `<lb name>-<tcp|udp|tcp-proxy>-<port>`.
pub fn rule_name(lb: &str, protocol: Proto, port: u16) -> String {
    format!("{lb}-{}-{port}", protocol.as_str())
}

/// The protocol and port of a rule named by [`rule_name`] for `lb`; `None` for any other name.
pub fn parse_rule_name(lb: &str, name: &str) -> Option<(Proto, u16)> {
    let rest = name.strip_prefix(lb)?.strip_prefix('-')?;
    let (protocol, port) = rest.rsplit_once('-')?;
    let protocol = match protocol {
        "tcp" => Proto::Tcp,
        "udp" => Proto::Udp,
        "tcp-proxy" => Proto::TcpProxy,
        _ => return None,
    };
    let port: u16 = port.parse().ok().filter(|p| *p > 0)?;
    (port.to_string() == rest.rsplit_once('-')?.1).then_some((protocol, port))
}

/// IPv4 CIDRs of `field`, trimmed, empty entries left out, sorted and deduplicated; any other
/// entry is invalid input naming it.
fn cidrs<'a>(field: &str, given: impl Iterator<Item = &'a str>) -> Result<Vec<String>, CloudError> {
    let mut out = Vec::new();
    for c in given.map(str::trim).filter(|c| !c.is_empty()) {
        let valid = c.split_once('/').is_some_and(|(a, p)| {
            a.parse::<Ipv4Addr>().is_ok() && p.parse::<u8>().is_ok_and(|p| p <= 32)
        });
        if !valid {
            return Err(CloudError::invalid_input(
                field,
                c,
                "IPv4 CIDRs separated by commas, e.g. 10.0.0.0/8,192.168.0.0/16 (CloudStack's \
                 public addresses are IPv4)",
            ));
        }
        out.push(c.to_owned());
    }
    out.sort();
    out.dedup();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capabilities::ServicePort;

    pub(crate) fn svc(ports: &[(PortProtocol, u16, u16)], ann: &[(&str, &str)]) -> ServiceRef {
        ServiceRef {
            uid: "0216b82c-7038-4967-824d-fd72bf91f4f0".into(),
            namespace: "ns".into(),
            name: "web".into(),
            annotations: ann
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ports: ports
                .iter()
                .map(|(p, port, np)| ServicePort {
                    name: None,
                    protocol: p.clone(),
                    port: *port,
                    node_port: *np,
                })
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn names_protocols_and_cidrs_as_upstream() {
        let s = svc(
            &[
                (PortProtocol::Tcp, 443, 31735),
                (PortProtocol::Udp, 53, 30553),
            ],
            &[
                (PROXY_PROTOCOL, "true"),
                (SOURCE_CIDRS, " 192.168.0.0/16, 10.0.0.0/8"),
            ],
        );
        let spec = LbSpec::parse(&s).unwrap();
        assert_eq!(spec.name, "a0216b82c70384967824dfd72bf91f4f");
        assert_eq!(
            spec.rules[0].name,
            "a0216b82c70384967824dfd72bf91f4f-tcp-proxy-443"
        );
        assert_eq!(
            spec.rules[1].name,
            "a0216b82c70384967824dfd72bf91f4f-udp-53"
        );
        assert_eq!(spec.rule_cidrs, ["10.0.0.0/8", "192.168.0.0/16"]);
        assert_eq!(spec.allowed, [EVERYONE]);
        assert!(!spec.restricts);
        assert_eq!(spec.algorithm, "roundrobin");
        assert_eq!(
            parse_rule_name(&spec.name, &spec.rules[0].name),
            Some((Proto::TcpProxy, 443))
        );
        assert_eq!(
            parse_rule_name(&spec.name, &format!("{}x-tcp-80", spec.name)),
            None
        );
        assert_eq!(
            parse_rule_name(&spec.name, &format!("{}-tcp-080", spec.name)),
            None
        );
        // Anything but "true" is off, as upstream.
        let off = LbSpec::parse(&svc(
            &[(PortProtocol::Tcp, 80, 30080)],
            &[(PROXY_PROTOCOL, "yes")],
        ))
        .unwrap();
        assert_eq!(off.rules[0].protocol, Proto::Tcp);
    }

    #[test]
    fn bad_input_names_the_field_before_any_write() {
        let sctp = LbSpec::parse(&svc(&[(PortProtocol::Sctp, 80, 30080)], &[])).unwrap_err();
        assert!(
            sctp.to_string().contains("spec.ports[0].protocol"),
            "{sctp}"
        );
        let bad = LbSpec::parse(&svc(
            &[(PortProtocol::Tcp, 80, 30080)],
            &[(SOURCE_CIDRS, "10.0.0.0/8,nope")],
        ))
        .unwrap_err();
        assert!(bad.to_string().contains(SOURCE_CIDRS) && bad.to_string().contains("nope"));
        let mut s = svc(&[(PortProtocol::Tcp, 80, 30080)], &[]);
        s.source_ranges = vec!["10.0.0.0/33".into()];
        let e = LbSpec::parse(&s).unwrap_err().to_string();
        assert!(e.contains("spec.loadBalancerSourceRanges"), "{e}");
        s.source_ranges = vec!["203.0.113.0/24".into()];
        s.load_balancer_ip = Some("not-an-ip".into());
        let e = LbSpec::parse(&s).unwrap_err().to_string();
        assert!(e.contains("spec.loadBalancerIP"), "{e}");
        s.load_balancer_ip = None;
        s.session_affinity_client_ip = true;
        let spec = LbSpec::parse(&s).unwrap();
        assert!(spec.restricts && spec.algorithm == "source");
    }
}
