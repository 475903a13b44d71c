//! What CloudStack answers about load-balancer rules, public addresses, firewall rules, network
//! ACLs and networks, as far as the load balancers read it (the shapes cloudstack-go v2.19.0
//! decodes: a rule's ports are strings, a firewall rule's numbers, an ACL's strings again; a
//! load-balancer rule's `cidrlist` is separated by spaces, a firewall rule's and an ACL's by
//! commas).

use serde::Deserialize;

/// A rule of `listLoadBalancerRules`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub(crate) struct LbRule {
    pub id: String,
    pub name: String,
    pub description: String,
    pub publicipid: String,
    pub publicip: String,
    pub publicport: String,
    pub privateport: String,
    pub protocol: String,
    pub algorithm: String,
    pub cidrlist: String,
    pub networkid: String,
}

impl LbRule {
    /// The rule's source CIDRs, sorted (CloudStack lists them separated by spaces; a comma is
    /// read too, whatever a server version writes).
    pub fn cidrs(&self) -> Vec<String> {
        split_cidrs(&self.cidrlist)
    }
}

/// A CIDR list as a sorted set, separated by spaces or commas.
pub(crate) fn split_cidrs(list: &str) -> Vec<String> {
    let mut v: Vec<String> = list
        .split([' ', ','])
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .map(str::to_owned)
        .collect();
    v.sort();
    v.dedup();
    v
}

/// An address of `listPublicIpAddresses`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub(crate) struct PublicIp {
    pub id: String,
    pub ipaddress: String,
    /// When it was allocated; absent for a free address.
    pub allocated: Option<String>,
    pub issourcenat: bool,
    pub isstaticnat: bool,
}

/// A rule of `listFirewallRules` (ingress to one public address).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub(crate) struct FirewallRule {
    pub id: String,
    pub protocol: String,
    pub startport: Option<u32>,
    pub endport: Option<u32>,
    pub cidrlist: String,
}

/// A rule of `listNetworkACLs`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub(crate) struct AclRule {
    pub id: String,
    pub protocol: String,
    pub startport: Option<String>,
    pub endport: Option<String>,
    pub cidrlist: String,
    pub action: String,
    pub traffictype: String,
    /// The creator's text: ours is the load-balancer rule's name.
    pub reason: String,
}

/// A network of `listNetworks`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub(crate) struct Network {
    pub id: String,
    pub name: String,
    pub zoneid: String,
    pub vpcid: Option<String>,
    pub aclid: Option<String>,
    pub service: Vec<NetworkService>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub(crate) struct NetworkService {
    pub name: String,
}

/// An ACL list of `listNetworkACLLists`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub(crate) struct AclList {
    pub id: String,
    pub name: String,
}

/// How a network filters what reaches a load balancer's address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Filter {
    /// An isolated network: firewall rules on the public address.
    Firewall,
    /// A VPC tier: rules of the tier's network ACL list.
    Acl,
    /// Neither (a shared network): nothing filters.
    None,
}

impl Network {
    fn offers(&self, service: &str) -> bool {
        self.service.iter().any(|s| s.name == service)
    }

    /// Firewall or ACL, by the services the network offers (upstream decides so on create and by
    /// `vpcid` on delete; one rule here for both).
    pub fn filter(&self) -> Filter {
        if self.offers("Firewall") {
            Filter::Firewall
        } else if self.offers("NetworkACL") || self.vpcid.as_deref().is_some_and(|v| !v.is_empty())
        {
            Filter::Acl
        } else {
            Filter::None
        }
    }

    pub fn vpc(&self) -> Option<&str> {
        self.vpcid.as_deref().filter(|v| !v.is_empty())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn rules_read_as_cloudstack_go_reads_them() {
        let r: LbRule = serde_json::from_value(json!({"id": "r", "publicport": "80",
            "privateport": "30080", "cidrlist": "10.0.0.0/8 192.168.0.0/16"}))
        .unwrap();
        assert_eq!(r.cidrs(), ["10.0.0.0/8", "192.168.0.0/16"]);
        let f: FirewallRule =
            serde_json::from_value(json!({"id": "f", "startport": 80, "endport": 80})).unwrap();
        assert_eq!(f.startport, Some(80));
        assert_eq!(split_cidrs("b,a, a"), ["a", "b"]);
        let n: Network = serde_json::from_value(
            json!({"id": "n", "service": [{"name": "Lb"}, {"name": "NetworkACL"}], "vpcid": "v"}),
        )
        .unwrap();
        assert_eq!(n.filter(), Filter::Acl);
    }
}
