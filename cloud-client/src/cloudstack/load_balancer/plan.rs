//! The writes that take a Service's rules, members and filters from what CloudStack has to what
//! the Service asks for: a pure function of both, so every case is a unit test.
//!
//! - A rule of ours (named `<lb>-<protocol>-<port>`) is kept when its address, ports, algorithm
//!   and `cidrlist` are the wanted ones; else it is deleted and created anew (the port's
//!   traffic stops for the two jobs; upstream does the same, but for an algorithm it updates).
//!   Rules no port asks for any more are deleted.
//! - Members: the difference, one assign and one remove per rule, so a member removed by hand
//!   is added back (upstream assigns members only when it creates a rule).
//! - Firewall rules (isolated networks) on the address, for our ports: one per port with the
//!   allowed ranges; any other of ours on that port and protocol goes (after the new one is
//!   made, so the port is never closed in between).
//! - ACL rules (VPC tiers): one per port, on the NodePort the members receive on, with the
//!   allowed ranges, `reason` = the load-balancer rule's name (how ours are told from others').

use std::collections::BTreeSet;

use super::spec::{LbSpec, RuleSpec, parse_rule_name};
use super::wire::{AclRule, Filter, FirewallRule, LbRule, split_cidrs};

/// What CloudStack has of the Service's.
#[derive(Debug, Clone, Default)]
pub struct Have {
    /// Our rules and their members' VM ids.
    pub rules: Vec<(LbRule, Vec<String>)>,
    /// Every firewall rule on the address (isolated networks).
    pub firewall: Vec<FirewallRule>,
    /// Every ACL rule of the tier's list (VPC tiers).
    pub acl: Vec<AclRule>,
}

/// Where the rules go and who their members are.
#[derive(Debug, Clone)]
pub struct Target<'a> {
    pub ip_id: &'a str,
    pub members: &'a BTreeSet<String>,
    pub filter: Filter,
}

/// An ACL rule we want.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AclWant {
    pub protocol: &'static str,
    pub port: u16,
    pub cidrs: Vec<String>,
    pub reason: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    DeleteRule {
        id: String,
        name: String,
    },
    /// Create `spec.rules[index]` and assign every member.
    CreateRule {
        index: usize,
    },
    Assign {
        rule_id: String,
        vms: Vec<String>,
    },
    Remove {
        rule_id: String,
        vms: Vec<String>,
    },
    CreateFirewall {
        protocol: &'static str,
        port: u16,
        cidrs: Vec<String>,
    },
    CreateAcl(AclWant),
    DeleteFirewall {
        id: String,
    },
    DeleteAcl {
        id: String,
    },
}

/// The writes, in the order they are made.
pub fn plan(spec: &LbSpec, have: &Have, target: &Target<'_>) -> Vec<Op> {
    let mut ops = Vec::new();
    let mut kept: Vec<Option<&(LbRule, Vec<String>)>> = vec![None; spec.rules.len()];
    for current in &have.rules {
        let (rule, _) = current;
        let slot = spec
            .rules
            .iter()
            .position(|r| r.name == rule.name)
            .filter(|i| kept[*i].is_none() && same_rule(spec, &spec.rules[*i], rule, target));
        match slot {
            Some(i) => kept[i] = Some(current),
            None => ops.push(Op::DeleteRule {
                id: rule.id.clone(),
                name: rule.name.clone(),
            }),
        }
    }
    let mut member_ops = Vec::new();
    for (index, slot) in kept.iter().enumerate() {
        match slot {
            None => ops.push(Op::CreateRule { index }),
            Some((rule, members)) => {
                let have: BTreeSet<&String> = members.iter().collect();
                let add: Vec<String> = target
                    .members
                    .iter()
                    .filter(|m| !have.contains(m))
                    .cloned()
                    .collect();
                let remove: Vec<String> = members
                    .iter()
                    .filter(|m| !target.members.contains(*m))
                    .cloned()
                    .collect();
                if !add.is_empty() {
                    member_ops.push(Op::Assign {
                        rule_id: rule.id.clone(),
                        vms: add,
                    });
                }
                if !remove.is_empty() {
                    member_ops.push(Op::Remove {
                        rule_id: rule.id.clone(),
                        vms: remove,
                    });
                }
            }
        }
    }
    ops.extend(member_ops);
    match target.filter {
        Filter::Firewall => firewall(spec, have, &mut ops),
        Filter::Acl => acl(spec, have, &mut ops),
        Filter::None => {}
    }
    ops
}

fn same_rule(spec: &LbSpec, want: &RuleSpec, have: &LbRule, target: &Target<'_>) -> bool {
    have.publicipid == target.ip_id
        && have.publicport == want.public_port.to_string()
        && have.privateport == want.private_port.to_string()
        && have.protocol.eq_ignore_ascii_case(want.protocol.as_str())
        && have.algorithm == spec.algorithm
        && have.cidrs() == spec.rule_cidrs
}

/// Our ports on the address: the ones we want and the ones our rules have now.
fn our_ports(spec: &LbSpec, have: &Have) -> BTreeSet<(&'static str, u16)> {
    let mut ports: BTreeSet<(&'static str, u16)> = spec
        .rules
        .iter()
        .map(|r| (r.protocol.transport(), r.public_port))
        .collect();
    for (rule, _) in &have.rules {
        if let Some((p, port)) = parse_rule_name(&spec.name, &rule.name) {
            ports.insert((p.transport(), port));
        }
    }
    ports
}

fn firewall(spec: &LbSpec, have: &Have, ops: &mut Vec<Op>) {
    let ours = our_ports(spec, have);
    let on_port = |f: &FirewallRule| -> Option<(&'static str, u16)> {
        let port = u16::try_from(f.startport?).ok()?;
        (f.endport == f.startport)
            .then(|| {
                ours.iter()
                    .copied()
                    .find(|(p, q)| *q == port && f.protocol == *p)
            })
            .flatten()
    };
    let mut keep = BTreeSet::new();
    let mut seen = BTreeSet::new();
    for r in &spec.rules {
        let key = (r.protocol.transport(), r.public_port);
        if !seen.insert(key) {
            continue;
        }
        let found = have
            .firewall
            .iter()
            .find(|f| on_port(f) == Some(key) && split_cidrs(&f.cidrlist) == spec.allowed);
        match found {
            Some(f) => {
                keep.insert(f.id.clone());
            }
            None => ops.push(Op::CreateFirewall {
                protocol: key.0,
                port: key.1,
                cidrs: spec.allowed.clone(),
            }),
        }
    }
    for f in &have.firewall {
        if on_port(f).is_some() && !keep.contains(&f.id) {
            ops.push(Op::DeleteFirewall { id: f.id.clone() });
        }
    }
}

fn acl(spec: &LbSpec, have: &Have, ops: &mut Vec<Op>) {
    let ours = |a: &AclRule| parse_rule_name(&spec.name, &a.reason).is_some();
    let mut keep = BTreeSet::new();
    for r in &spec.rules {
        let want = AclWant {
            protocol: r.protocol.transport(),
            port: r.private_port,
            cidrs: spec.allowed.clone(),
            reason: r.name.clone(),
        };
        let port = want.port.to_string();
        let found = have.acl.iter().find(|a| {
            ours(a)
                && a.reason == want.reason
                && a.protocol.eq_ignore_ascii_case(want.protocol)
                && a.startport.as_deref() == Some(port.as_str())
                && a.endport.as_deref() == Some(port.as_str())
                && a.action.eq_ignore_ascii_case("allow")
                && a.traffictype.eq_ignore_ascii_case("ingress")
                && split_cidrs(&a.cidrlist) == want.cidrs
                && !keep.contains(&a.id)
        });
        match found {
            Some(a) => {
                keep.insert(a.id.clone());
            }
            None => ops.push(Op::CreateAcl(want)),
        }
    }
    for a in &have.acl {
        if ours(a) && !keep.contains(&a.id) {
            ops.push(Op::DeleteAcl { id: a.id.clone() });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::spec::{EVERYONE, LbSpec};
    use super::*;
    use crate::capabilities::{PortProtocol, ServicePort, ServiceRef};

    fn spec(ports: &[(PortProtocol, u16, u16)], ranges: &[&str]) -> LbSpec {
        let svc = ServiceRef {
            uid: "0216b82c-7038-4967-824d-fd72bf91f4f0".into(),
            ports: ports
                .iter()
                .map(|(p, port, np)| ServicePort {
                    name: None,
                    protocol: p.clone(),
                    port: *port,
                    node_port: *np,
                })
                .collect(),
            source_ranges: ranges.iter().map(|r| r.to_string()).collect(),
            ..Default::default()
        };
        LbSpec::parse(&svc).unwrap()
    }

    /// CloudStack's rule for `spec.rules[i]`, as made.
    fn made(spec: &LbSpec, i: usize, id: &str) -> LbRule {
        let r = &spec.rules[i];
        LbRule {
            id: id.into(),
            name: r.name.clone(),
            publicipid: "ip".into(),
            publicport: r.public_port.to_string(),
            privateport: r.private_port.to_string(),
            protocol: r.protocol.as_str().into(),
            algorithm: "roundrobin".into(),
            cidrlist: EVERYONE.into(),
            ..Default::default()
        }
    }

    fn fw(id: &str, proto: &str, port: u32, cidrs: &str) -> FirewallRule {
        FirewallRule {
            id: id.into(),
            protocol: proto.into(),
            startport: Some(port),
            endport: Some(port),
            cidrlist: cidrs.into(),
        }
    }

    fn members(ids: &[&str]) -> BTreeSet<String> {
        ids.iter().map(|s| s.to_string()).collect()
    }

    fn target<'a>(m: &'a BTreeSet<String>, filter: Filter) -> Target<'a> {
        Target {
            ip_id: "ip",
            members: m,
            filter,
        }
    }

    const TCP: PortProtocol = PortProtocol::Tcp;
    const UDP: PortProtocol = PortProtocol::Udp;

    #[test]
    fn a_new_service_gets_a_rule_and_a_firewall_rule_per_port() {
        let s = spec(&[(TCP, 80, 30080), (UDP, 53, 30053)], &["203.0.113.0/24"]);
        let m = members(&["vm1"]);
        let ops = plan(&s, &Have::default(), &target(&m, Filter::Firewall));
        assert_eq!(
            ops,
            [
                Op::CreateRule { index: 0 },
                Op::CreateRule { index: 1 },
                Op::CreateFirewall {
                    protocol: "tcp",
                    port: 80,
                    cidrs: vec!["203.0.113.0/24".into()]
                },
                Op::CreateFirewall {
                    protocol: "udp",
                    port: 53,
                    cidrs: vec!["203.0.113.0/24".into()]
                },
            ]
        );
    }

    #[test]
    fn nothing_changed_is_no_write() {
        let s = spec(&[(TCP, 80, 30080)], &[]);
        let m = members(&["vm1", "vm2"]);
        let have = Have {
            rules: vec![(made(&s, 0, "r1"), vec!["vm2".into(), "vm1".into()])],
            firewall: vec![
                fw("f1", "tcp", 80, EVERYONE),
                fw("other", "tcp", 22, EVERYONE),
            ],
            acl: vec![],
        };
        assert_eq!(plan(&s, &have, &target(&m, Filter::Firewall)), []);
    }

    #[test]
    fn members_follow_the_nodes_and_drift_is_repaired() {
        let s = spec(&[(TCP, 80, 30080)], &[]);
        let m = members(&["vm1", "vm3"]);
        let have = Have {
            rules: vec![(made(&s, 0, "r1"), vec!["vm1".into(), "vm2".into()])],
            ..Default::default()
        };
        assert_eq!(
            plan(&s, &have, &target(&m, Filter::None)),
            [
                Op::Assign {
                    rule_id: "r1".into(),
                    vms: vec!["vm3".into()]
                },
                Op::Remove {
                    rule_id: "r1".into(),
                    vms: vec!["vm2".into()]
                },
            ]
        );
    }

    #[test]
    fn a_changed_port_replaces_its_rule_and_firewall_rule_only() {
        let old = spec(&[(TCP, 80, 30080), (TCP, 443, 30443)], &[]);
        let new = spec(&[(TCP, 80, 30080), (TCP, 8443, 30443)], &[]);
        let m = members(&["vm1"]);
        let have = Have {
            rules: vec![
                (made(&old, 0, "r80"), vec!["vm1".into()]),
                (made(&old, 1, "r443"), vec!["vm1".into()]),
            ],
            firewall: vec![
                fw("f80", "tcp", 80, EVERYONE),
                fw("f443", "tcp", 443, EVERYONE),
            ],
            acl: vec![],
        };
        assert_eq!(
            plan(&new, &have, &target(&m, Filter::Firewall)),
            [
                Op::DeleteRule {
                    id: "r443".into(),
                    name: old.rules[1].name.clone()
                },
                Op::CreateRule { index: 1 },
                Op::CreateFirewall {
                    protocol: "tcp",
                    port: 8443,
                    cidrs: vec![EVERYONE.into()]
                },
                Op::DeleteFirewall { id: "f443".into() },
            ]
        );
    }

    #[test]
    fn changed_ranges_open_the_new_before_closing_the_old() {
        let s = spec(&[(TCP, 80, 30080)], &["198.51.100.0/24", "203.0.113.0/24"]);
        let m = members(&["vm1"]);
        let have = Have {
            rules: vec![(made(&s, 0, "r1"), vec!["vm1".into()])],
            firewall: vec![fw("f1", "tcp", 80, "203.0.113.0/24")],
            acl: vec![],
        };
        assert_eq!(
            plan(&s, &have, &target(&m, Filter::Firewall)),
            [
                Op::CreateFirewall {
                    protocol: "tcp",
                    port: 80,
                    cidrs: vec!["198.51.100.0/24".into(), "203.0.113.0/24".into()]
                },
                Op::DeleteFirewall { id: "f1".into() },
            ]
        );
        // Order of the list does not matter.
        let same = Have {
            firewall: vec![fw("f1", "tcp", 80, "203.0.113.0/24,198.51.100.0/24")],
            ..have
        };
        assert_eq!(plan(&s, &same, &target(&m, Filter::Firewall)), []);
    }

    #[test]
    fn proxy_and_address_changes_recreate_the_rule() {
        let s = spec(&[(TCP, 80, 30080)], &[]);
        let m = members(&["vm1"]);
        let mut moved = made(&s, 0, "r1");
        moved.publicipid = "other-ip".into();
        let have = Have {
            rules: vec![(moved, vec!["vm1".into()])],
            ..Default::default()
        };
        assert_eq!(
            plan(&s, &have, &target(&m, Filter::None)),
            [
                Op::DeleteRule {
                    id: "r1".into(),
                    name: s.rules[0].name.clone()
                },
                Op::CreateRule { index: 0 },
            ]
        );
    }

    #[test]
    fn vpc_tiers_get_acl_rules_on_the_nodeport_and_leave_others_alone() {
        let s = spec(&[(TCP, 80, 30080)], &["203.0.113.0/24"]);
        let m = members(&["vm1"]);
        let theirs = AclRule {
            id: "theirs".into(),
            protocol: "tcp".into(),
            startport: Some("30080".into()),
            endport: Some("30080".into()),
            cidrlist: EVERYONE.into(),
            action: "Allow".into(),
            traffictype: "Ingress".into(),
            reason: String::new(),
        };
        let stale = AclRule {
            id: "stale".into(),
            reason: format!("{}-tcp-81", s.name),
            ..theirs.clone()
        };
        let have = Have {
            rules: vec![(made(&s, 0, "r1"), vec!["vm1".into()])],
            acl: vec![theirs, stale],
            ..Default::default()
        };
        assert_eq!(
            plan(&s, &have, &target(&m, Filter::Acl)),
            [
                Op::CreateAcl(AclWant {
                    protocol: "tcp",
                    port: 30080,
                    cidrs: vec!["203.0.113.0/24".into()],
                    reason: s.rules[0].name.clone(),
                }),
                Op::DeleteAcl { id: "stale".into() },
            ]
        );
    }
}
