//! The load balancer's targets: which nodes should be there (Cloud servers by id, dedicated
//! servers by IP), and what to add or remove without going past the type's limit.

use std::collections::{BTreeMap, BTreeSet};

use super::reach::{Reach, Verdict};
use crate::capabilities::{IpFamilies, LbNode, TARGETS_LEFT_OUT, Warning};
use crate::hcloud::load_balancer::annotations as a;
use crate::hcloud::load_balancer::ops::Op;
use crate::hcloud::load_balancer::spec::LbSpec;
use crate::hcloud::provider_id::ProviderId;
use crate::hcloud::wire::LoadBalancer;

/// A Service's nodes as load-balancer targets.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DesiredTargets {
    /// Server ids in node order.
    pub servers: Vec<i64>,
    /// Server id → Node name, so warnings about a server name its Node.
    pub nodes: BTreeMap<i64, String>,
    /// Dedicated servers' addresses (IP targets), in node order.
    pub ips: Vec<String>,
    /// Address → Node name.
    pub ip_nodes: BTreeMap<String, String>,
    pub warnings: Vec<Warning>,
}

/// What the controller knows of dedicated servers when it plans targets.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RobotTargets {
    /// `ROBOT_ENABLED`.
    pub enabled: bool,
    /// Server number → its public addresses, from the Robot API (empty without credentials).
    pub public_ips: BTreeMap<i64, RobotAddresses>,
    /// Server number → its data center (e.g. `FSN1-DC10`), from the same list.
    pub dcs: BTreeMap<i64, String>,
    /// Whether the Robot API could be asked (credentials given).
    pub api: bool,
    /// Which of a dedicated server's addresses are targets: the `robot-target-address-family`
    /// annotation (or its env default), else the Service's `ipFamilies`. An IPv6 target in a
    /// Service kube-proxy serves over IPv4 only would fail its health check for ever.
    pub family: IpFamilies,
}

/// A dedicated server's public addresses: its main IPv4 and the first address of its /64.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RobotAddresses {
    pub ipv4: Option<String>,
    pub ipv6: Option<String>,
}

/// Whether `family` takes the address `ip`.
fn allows(family: IpFamilies, ip: &str) -> bool {
    if ip.contains(':') {
        family.has_v6()
    } else {
        family.has_v4()
    }
}

fn describe(family: IpFamilies) -> &'static str {
    match (family.has_v4(), family.has_v6()) {
        (true, true) => "IPv4 or IPv6",
        (false, true) => "IPv6",
        _ => "IPv4",
    }
}

/// The nodes that should be targets, in node order: Cloud servers by id, dedicated servers by IP
/// as HCCM targets them (the server's public IPv4 from the Robot API; with `use-private-ip`, the
/// Node's InternalIP, e.g. its vSwitch address). Nodes rejected by the node selector are dropped
/// silently; foreign providerIDs, and Robot ones without Robot support, with a warning (HCCM's
/// `UnknownProviderIDPrefix`); nodes without providerID (not initialized yet) are skipped. Nodes
/// the load balancer cannot reach (another network zone, see [`Reach`]) are left out, and one
/// Service-level warning names them.
pub fn desired_targets(
    spec: &LbSpec,
    nodes: &[LbNode],
    robot: &RobotTargets,
    reach: &Reach,
) -> DesiredTargets {
    let mut d = DesiredTargets::default();
    let mut outside = Vec::new();
    let mut reachable = 0;
    for n in nodes {
        if let Some(sel) = &spec.node_selector
            && !sel.matches(&n.labels)
        {
            continue;
        }
        let Some(pid) = n.provider_id.as_deref().filter(|p| !p.is_empty()) else {
            continue;
        };
        let parsed = ProviderId::parse(pid);
        if matches!(parsed, Ok(ProviderId::Cloud(_))) || robot.enabled {
            match reach.verdict(&n.name) {
                Verdict::Reachable => reachable += 1,
                Verdict::Unknown => continue,
                Verdict::Outside(location, zone) => {
                    outside.push((n.name.clone(), location.to_owned(), zone.to_owned()));
                    continue;
                }
            }
        }
        match parsed {
            Ok(ProviderId::Cloud(id)) => {
                if d.nodes.insert(id, n.name.clone()).is_none() {
                    d.servers.push(id);
                }
            }
            Ok(ProviderId::Robot(_)) if !robot.enabled => d.warnings.push(Warning::on_node(
                &n.name,
                "RobotServerNotSupported",
                format!(
                    "node {} is a Robot server ({pid}); it is not added as a load balancer target \
                     while Robot support is off (ROBOT_ENABLED)",
                    n.name
                ),
            )),
            Ok(ProviderId::Robot(number)) => robot_targets(&mut d, spec, n, pid, number, robot),
            Err(_) => d.warnings.push(Warning::on_node(
                &n.name,
                "UnknownProviderIDPrefix",
                format!(
                    "node {} has providerID {pid:?} which is not a Hetzner Cloud server; skipped \
                     (expected hcloud://<server id>)",
                    n.name
                ),
            )),
        }
    }
    d.warnings.extend(reach.warning(&outside, reachable));
    d
}

/// A dedicated server's IP targets, of the family asked for: with `use-private-ip` its Node's
/// InternalIPs (e.g. its vSwitch address), else its public addresses from the Robot API (HCCM's
/// main IPv4; the first address of its /64 for IPv6).
fn robot_targets(
    d: &mut DesiredTargets,
    spec: &LbSpec,
    n: &LbNode,
    pid: &str,
    number: i64,
    robot: &RobotTargets,
) {
    let family = robot.family;
    let public: Vec<String> = robot
        .public_ips
        .get(&number)
        .map(|p| {
            [p.ipv4.clone(), p.ipv6.clone()]
                .into_iter()
                .flatten()
                .filter(|ip| allows(family, ip))
                .collect()
        })
        .unwrap_or_default();
    let internal: Vec<String> =
        n.internal_ips
            .iter()
            .filter(|ip| allows(family, ip))
            .fold(Vec::new(), |mut firsts, ip| {
                // The first InternalIP of each family.
                if !firsts
                    .iter()
                    .any(|f: &String| f.contains(':') == ip.contains(':'))
                {
                    firsts.push(ip.clone());
                }
                firsts
            });
    let ips = match (spec.use_private_ip, internal.is_empty()) {
        (true, false) => internal,
        (true, true) => {
            d.warnings.push(Warning::new(
                "InternalIPNotConfigured",
                format!(
                    "use-private-ip is set, but Robot node {} has no {} InternalIP (kubelet \
                     --node-ip); {}",
                    n.name,
                    describe(family),
                    if robot.api {
                        "targeting its public IP instead"
                    } else {
                        "it is skipped (without Robot credentials there is no other address)"
                    }
                ),
            ));
            public
        }
        (false, _) => public,
    };
    if !ips.is_empty() {
        for ip in ips {
            if d.ip_nodes.insert(ip.clone(), n.name.clone()).is_none() {
                d.ips.push(ip);
            }
        }
    } else if robot.api && robot.public_ips.contains_key(&number) {
        d.warnings.push(Warning::on_node(
            &n.name,
            "RobotTargetFamilyMissing",
            format!(
                "node {} (Robot server {number}) has no {} address to target; the targets' \
                 family comes from annotation {} (or HCLOUD_LOAD_BALANCERS_ROBOT_TARGET_ADDRESS_FAMILY), \
                 else from the Service's ipFamilies",
                n.name,
                describe(family),
                a::ROBOT_TARGET_ADDRESS_FAMILY
            ),
        ));
    } else if robot.api {
        d.warnings.push(Warning::on_node(
            &n.name,
            "ServerNotFound",
            format!("No server with id {number} was found in Robot"),
        ));
    } else if !spec.use_private_ip {
        d.warnings.push(Warning::on_node(
            &n.name,
            "RobotServerNotSupported",
            format!(
                "node {} is a Robot server ({pid}): without Robot credentials (ROBOT_USER, \
                 ROBOT_PASSWORD) only use-private-ip targets it, by its InternalIP",
                n.name
            ),
        ));
    }
}

/// A target that did not fit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Target {
    Server(i64),
    Ip(String),
}

/// Remove unwanted or wrong-mode server targets and IP targets that are no dedicated server's
/// (HCCM removes those whether Robot is on or not: the load balancer is ours), then add up to
/// `max`; returns what did not fit. Label-selector targets (not made by us) stay and count.
pub(super) fn target_ops(
    lb: &LoadBalancer,
    spec: &LbSpec,
    targets: &DesiredTargets,
    max: u32,
) -> (Vec<Op>, Vec<Target>) {
    let mut ops = Vec::new();
    let want: BTreeSet<i64> = targets.servers.iter().copied().collect();
    let want_ips: BTreeSet<&str> = targets.ips.iter().map(String::as_str).collect();
    let mut kept = BTreeSet::new();
    let mut kept_ips = BTreeSet::new();
    let mut other_targets = 0u32;
    for t in &lb.targets {
        match (t.kind.as_str(), &t.server, &t.ip) {
            ("server", Some(s), _)
                if want.contains(&s.id) && t.use_private_ip == spec.use_private_ip =>
            {
                kept.insert(s.id);
            }
            ("server", Some(s), _) => ops.push(Op::RemoveTarget(s.id)),
            ("ip", _, Some(ip)) if want_ips.contains(ip.ip.as_str()) => {
                kept_ips.insert(ip.ip.clone());
            }
            ("ip", _, Some(ip)) => ops.push(Op::RemoveIpTarget(ip.ip.clone())),
            _ => other_targets += 1,
        }
    }
    let mut room = max.saturating_sub((kept.len() + kept_ips.len()) as u32 + other_targets);
    let mut skipped = Vec::new();
    let missing = targets
        .servers
        .iter()
        .filter(|id| !kept.contains(*id))
        .map(|id| Target::Server(*id))
        .chain(
            targets
                .ips
                .iter()
                .filter(|ip| !kept_ips.contains(*ip))
                .map(|ip| Target::Ip(ip.clone())),
        );
    for target in missing {
        if room == 0 {
            skipped.push(target);
            continue;
        }
        room -= 1;
        ops.push(match target {
            Target::Server(server) => Op::AddTarget {
                server,
                use_private_ip: spec.use_private_ip,
            },
            Target::Ip(ip) => Op::AddIpTarget(ip),
        });
    }
    (ops, skipped)
}

/// The Service-level summary of the nodes its load balancer cannot hold ([`TARGETS_LEFT_OUT`]):
/// how many, why, which stay (the ones that were targets first, so no reconcile shuffles them)
/// and the fixes.
pub fn targets_left_out_warning(
    left_out: usize,
    wanted: usize,
    max: u32,
    lb_type: &str,
) -> Warning {
    Warning::new(
        TARGETS_LEFT_OUT,
        format!(
            "{left_out} of {wanted} nodes are not targets of the load balancer and get no traffic \
             from it: its type {lb_type} holds {max} targets, kept for the nodes that were targets \
             first (each left-out node has a MaxTargetsReached Warning). Choose fewer nodes with \
             annotation {}, a larger type with annotation {} (lb21 holds 75 targets, lb31 150), \
             or, with externalTrafficPolicy Local, only the nodes running the Service's pods \
             with annotation {}",
            a::NODE_SELECTOR,
            a::TYPE,
            a::TARGET_NODES_WITH_ENDPOINTS
        ),
    )
}

/// HCCM's `MaxTargetsReached`, one per Node that could not be added (the event goes on the Node).
/// `target` is the server id or, for a dedicated server, its address.
pub fn max_targets_warning(
    max: u32,
    target: &str,
    node: Option<&String>,
    service: &str,
) -> Warning {
    let message = |who: &str| {
        format!(
            "{who} (server {target}) could not be added to the load balancer of Service {service}: \
             its type allows {max} targets. Choose a larger type with {}",
            a::TYPE
        )
    };
    match node {
        Some(n) => Warning::on_node(n, "MaxTargetsReached", message(&format!("node {n}"))),
        None => Warning::new("MaxTargetsReached", message("a node")),
    }
}
