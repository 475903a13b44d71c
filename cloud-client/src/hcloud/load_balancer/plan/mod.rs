//! Desired state from the spec, and the minimal list of operations that turns the actual load balancer
//! into it (for a new one: what its create request carries). Pure functions: no I/O, so the "zero
//! writes when nothing changed" rule is unit-testable.

mod lb_type;
mod reach;
mod services;
mod targets;

use std::collections::{BTreeMap, BTreeSet};

use super::annotations as a;
use super::ops::{NewLb, Op};
use super::ownership::SERVICE_UID_LABEL;
use super::spec::{LbSpec, Placement};
use crate::capabilities::Warning;
use crate::hcloud::wire::LoadBalancer;
use lb_type::type_after;
use services::service_ops;
use targets::{Target, target_ops};

pub use lb_type::{
    DEFAULT_LB_TYPE, known_max_services, known_max_targets, max_targets_after, type_change,
};
pub use reach::{Reach, Verdict};
pub use services::{
    DesiredServices, check_services, desired_services, service_matches, with_certificates,
};
use targets::targets_left_out_warning;
pub use targets::{
    DesiredTargets, RobotAddresses, RobotTargets, desired_targets, max_targets_warning,
};

/// What the Service asks for, with bad input already refused.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Desired {
    pub services: DesiredServices,
    pub targets: DesiredTargets,
}

/// The create request for a new load balancer, plus a warning when no type is configured.
pub fn plan_create(
    spec: &LbSpec,
    labels: BTreeMap<String, String>,
    placement: Placement,
    network: Option<i64>,
    desired: &Desired,
) -> (NewLb, Option<Warning>) {
    let warning = spec.lb_type.is_none().then(|| {
        Warning::new(
            "LoadBalancerTypeUnconfigured",
            format!(
                "no load balancer type configured, using {DEFAULT_LB_TYPE}; set {} or HCLOUD_LOAD_BALANCERS_TYPE",
                a::TYPE
            ),
        )
    });
    let lb_type = spec
        .lb_type
        .clone()
        .unwrap_or_else(|| DEFAULT_LB_TYPE.to_string());
    let network =
        network.filter(|_| spec.private_ipv4.is_none() && spec.private_subnet_ip_range.is_none());
    let targets = (network.is_some() || !spec.use_private_ip).then(|| {
        let max = known_max_targets(&lb_type) as usize;
        desired.targets.servers.iter().take(max).copied().collect()
    });
    let new = NewLb {
        name: spec.name.clone(),
        labels,
        lb_type,
        placement,
        algorithm: spec.algorithm,
        public_interface: spec.disable_public_network.map(|d| !d),
        network,
        services: desired.services.services.clone(),
        targets,
        use_private_ip: spec.use_private_ip,
    };
    (new, warning)
}

/// A Service's place on a shared load balancer, as the plan needs it (decided by
/// [`super::sharing::join`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Membership {
    /// Listen ports this Service made (and may change or delete).
    pub claimed: BTreeSet<u16>,
    /// No other Service is on the load balancer: its settings follow this Service.
    pub alone: bool,
    /// Labels while ports are added: the claim covers old and new ports, so a crash between two
    /// writes never leaves a port that no label claims.
    pub labels_during: BTreeMap<String, String>,
    /// Labels once the ports this Service dropped are deleted.
    pub labels_after: BTreeMap<String, String>,
}

/// Inputs of [`plan`] that do not come from the spec.
#[derive(Debug, Clone)]
pub struct PlanInput<'a> {
    pub uid: &'a str,
    /// `namespace/name`, for warnings that end up on a Node.
    pub service: &'a str,
    pub network: Option<i64>,
    pub services: &'a DesiredServices,
    pub targets: &'a DesiredTargets,
    /// On a shared load balancer: what this Service owns there and the labels that say so.
    pub shared: Option<&'a Membership>,
}

/// The writes needed to turn `lb` into the desired state, in a safe order, plus warnings.
pub fn plan(lb: &LoadBalancer, spec: &LbSpec, input: &PlanInput<'_>) -> (Vec<Op>, Vec<Warning>) {
    let mut ops = Vec::new();
    let mut warnings = Vec::new();
    // Identity first, so a crash after this point still finds the LB by label next time (and
    // on a shared one, a port about to be added is already claimed).
    match input.shared {
        None => ops.extend(identity_op(lb, spec, input.uid)),
        Some(m) => ops.extend(labels_op(lb, spec, &m.labels_during)),
    }
    // Other Services on a shared load balancer: its settings stay as they are (a member that
    // disagrees was refused before).
    if input.shared.is_none_or(|m| m.alone) {
        ops.extend(settings_ops(lb, spec));
    }
    warnings.extend(deprecation_warning(lb));
    ops.extend(network_ops(lb, spec, input.network));
    ops.extend(service_ops(
        lb,
        input.services,
        input.shared.map(|m| &m.claimed),
    ));
    if let Some(m) = input.shared.filter(|m| m.labels_after != m.labels_during) {
        // Ports it dropped are deleted: release their claim.
        ops.push(Op::Update {
            name: None,
            labels: Some(m.labels_after.clone()),
        });
    }
    let max = max_targets_after(lb, spec);
    let (target_ops, skipped) = target_ops(lb, spec, input.targets, max);
    ops.extend(target_ops);
    warnings.extend(skipped.iter().map(|target| match target {
        Target::Server(id) => max_targets_warning(
            max,
            &id.to_string(),
            input.targets.nodes.get(id),
            input.service,
        ),
        Target::Ip(ip) => {
            max_targets_warning(max, ip, input.targets.ip_nodes.get(ip), input.service)
        }
    }));
    if !skipped.is_empty() {
        let wanted = input.targets.servers.len() + input.targets.ips.len();
        warnings.push(targets_left_out_warning(
            skipped.len(),
            wanted,
            max,
            &type_after(Some(lb), spec),
        ));
    }
    (ops, warnings)
}

/// `PUT` the UID label when it is missing or another Service's, and the name only when the `name`
/// annotation asks for a different one (HCCM `changeHCLBInfo`).
fn identity_op(lb: &LoadBalancer, spec: &LbSpec, uid: &str) -> Option<Op> {
    let labels = (lb.labels.get(SERVICE_UID_LABEL).map(String::as_str) != Some(uid)).then(|| {
        let mut l = lb.labels.clone();
        l.insert(SERVICE_UID_LABEL.to_string(), uid.to_string());
        l
    });
    let name = (spec.name_annotated && lb.name != spec.name).then(|| spec.name.clone());
    (labels.is_some() || name.is_some()).then_some(Op::Update { name, labels })
}

/// A shared load balancer's `PUT` to labels `to`, renamed like [`identity_op`].
fn labels_op(lb: &LoadBalancer, spec: &LbSpec, to: &BTreeMap<String, String>) -> Option<Op> {
    let labels = (&lb.labels != to).then(|| to.clone());
    let name = (spec.name_annotated && lb.name != spec.name).then(|| spec.name.clone());
    (labels.is_some() || name.is_some()).then_some(Op::Update { name, labels })
}

/// Reverse DNS, algorithm and type.
fn settings_ops(lb: &LoadBalancer, spec: &LbSpec) -> Vec<Op> {
    let mut ops = Vec::new();
    let public = lb.public_net.clone().unwrap_or_default();
    for (want, ip) in [
        (&spec.ipv4_rdns, &public.ipv4),
        (&spec.ipv6_rdns, &public.ipv6),
    ] {
        if let (Some(want), Some(ip)) = (want, ip)
            && let Some(addr) = ip.ip.as_deref()
            && ip.dns_ptr.as_deref() != Some(want.as_str())
        {
            ops.push(Op::ChangeDnsPtr {
                ip: addr.to_string(),
                dns_ptr: want.clone(),
            });
        }
    }
    if let Some(alg) = spec.algorithm
        && lb.algorithm.as_ref().map(|a| a.kind.as_str()) != Some(alg.as_str())
    {
        ops.push(Op::ChangeAlgorithm(alg));
    }
    if let Some(t) = type_change(lb, spec) {
        ops.push(Op::ChangeType(t.to_string()));
    }
    ops
}

fn deprecation_warning(lb: &LoadBalancer) -> Option<Warning> {
    let t = lb.load_balancer_type.as_ref()?;
    t.deprecation.as_ref().filter(|d| !d.is_null())?;
    Some(Warning::new(
        "LoadBalancerTypeDeprecated",
        format!(
            "load balancer type {} is deprecated; set {} to a current type",
            t.name,
            a::TYPE
        ),
    ))
}

/// Detach from foreign networks or a wrong fixed IP, attach, then the public interface.
fn network_ops(lb: &LoadBalancer, spec: &LbSpec, network: Option<i64>) -> Vec<Op> {
    let mut ops = Vec::new();
    if let Some(net) = network {
        let mut attached = false;
        for p in &lb.private_net {
            let wrong_ip = p.network == net
                && spec
                    .private_ipv4
                    .is_some_and(|want| p.ip.as_deref() != Some(want.to_string().as_str()));
            if p.network != net || wrong_ip {
                ops.push(Op::DetachNetwork(p.network));
            } else {
                attached = true;
            }
        }
        if !attached {
            ops.push(Op::AttachNetwork {
                network: net,
                ip: spec.private_ipv4.map(|i| i.to_string()),
                ip_range: spec.private_subnet_ip_range.clone(),
            });
        }
    }
    let public_enabled = lb.public_net.as_ref().is_some_and(|p| p.enabled);
    match spec.disable_public_network {
        Some(true) if public_enabled => ops.push(Op::DisablePublicInterface),
        Some(false) if !public_enabled => ops.push(Op::EnablePublicInterface),
        _ => {}
    }
    ops
}

#[cfg(test)]
mod tests;
