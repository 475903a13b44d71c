//! Load-balancer rules: list, create, update, delete, and their members (assign, remove, list).
//! A rule balances one public port of one public address to one private port of its members,
//! VMs with a NIC in the rule's network, which must offer the Lb service. Checks the API makes
//! before the job (unknown ids, ports, protocol, algorithm, conflicts) answer the request;
//! checks the job makes (a member's state or network) fail the job.

use serde_json::{Value, json};

use super::addresses::denied;
use super::{Ctx, like};
use crate::cloudstack::access::Scope;
use crate::cloudstack::error::{CsError, code, cs_code};
use crate::cloudstack::model::{FirewallRule, LbRule};
use crate::cloudstack::params::paged;
use crate::cloudstack::{render, render_rules};

const PROTOCOLS: [&str; 3] = ["tcp", "udp", "tcp-proxy"];
const ALGORITHMS: [&str; 3] = ["roundrobin", "leastconn", "source"];

/// Rules by `id`, `name` (exact), `keyword` (a substring of the name), `publicipid`,
/// `networkid`, `zoneid`, `virtualmachineid` (rules it is a member of), in the scope of
/// `projectid`/`listall`.
pub fn list_rules(ctx: &mut Ctx) -> Result<Value, CsError> {
    let (w, caller, params) = (&*ctx.world, &ctx.caller, ctx.params);
    for (name, known) in [
        ("id", params.get("id").map(|i| w.lb_rule(i).is_some())),
        (
            "publicipid",
            params.get("publicipid").map(|i| w.ip(i).is_some()),
        ),
        (
            "virtualmachineid",
            params.get("virtualmachineid").map(|i| w.vm(i).is_some()),
        ),
    ] {
        if known == Some(false) {
            return Err(params.unknown_id(name, params.get(name).unwrap_or_default()));
        }
    }
    let scope = Scope::of(w, caller, params)?;
    let zone_of = |r: &LbRule| w.ip(&r.public_ip_id).map(|i| i.zone_id.clone());
    let rules: Vec<_> = w
        .lb_rules
        .iter()
        .filter(|r| scope.covers(w, caller, &r.owner))
        .filter(|r| params.get("id").is_none_or(|id| r.id == id))
        .filter(|r| params.get("name").is_none_or(|n| r.name == n))
        .filter(|r| params.get("keyword").is_none_or(|k| like(&r.name, k)))
        .filter(|r| params.get("publicipid").is_none_or(|i| r.public_ip_id == i))
        .filter(|r| params.get("networkid").is_none_or(|n| r.network_id == n))
        .filter(|r| {
            params
                .get("zoneid")
                .is_none_or(|z| zone_of(r).as_deref() == Some(z))
        })
        .filter(|r| {
            params
                .get("virtualmachineid")
                .is_none_or(|v| r.members.iter().any(|m| m == v))
        })
        .collect();
    paged(
        params,
        w.settings.default_page_size,
        "loadbalancerrule",
        &rules,
        |r| render_rules::lb_rule(w, r),
    )
}

fn port(ctx: &Ctx, name: &str) -> Result<u16, CsError> {
    let n = ctx.params.required_int(name)?;
    u16::try_from(n)
        .ok()
        .filter(|p| *p > 0)
        .ok_or_else(|| CsError::invalid(format!("Invalid value of {name}: {n}")))
}

fn protocol(ctx: &Ctx) -> Result<Option<String>, CsError> {
    match ctx.params.get("protocol") {
        None => Ok(None),
        Some(p) if PROTOCOLS.contains(&p.to_ascii_lowercase().as_str()) => {
            Ok(Some(p.to_ascii_lowercase()))
        }
        Some(p) => Err(CsError::invalid(format!("Invalid protocol: {p}"))),
    }
}

fn algorithm(ctx: &Ctx, required: bool) -> Result<Option<String>, CsError> {
    let value = if required {
        Some(ctx.params.required("algorithm")?)
    } else {
        ctx.params.get("algorithm")
    };
    match value {
        None => Ok(None),
        Some(a) if ALGORITHMS.contains(&a) => Ok(Some(a.to_owned())),
        Some(a) => Err(CsError::invalid(format!("Invalid algorithm: {a}"))),
    }
}

/// `cidrlist`, each entry checked as an IPv4 prefix.
fn cidrs(ctx: &Ctx) -> Result<Option<Vec<String>>, CsError> {
    let list = ctx.params.list("cidrlist");
    if ctx.params.get("cidrlist").is_none() {
        return Ok(None);
    }
    for c in &list {
        if crate::cidr::Ipv4Net::parse(c).is_none() {
            return Err(CsError::invalid(format!(
                "Source cidrs formatting error {c}"
            )));
        }
    }
    Ok(Some(list))
}

/// The transport a rule's protocol takes a port of: `tcp-proxy` is TCP.
fn transport(protocol: &str) -> &str {
    if protocol == "udp" { "udp" } else { "tcp" }
}

/// `name`, `algorithm`, `publicport`, `privateport` required; `publicipid` (else the source NAT
/// address of `networkid`), `networkid` (else the address's network), `protocol` (`tcp`),
/// `cidrlist`, `openfirewall` (default true outside VPCs: a firewall rule for the public port).
pub fn create_rule(ctx: &mut Ctx) -> Result<Value, CsError> {
    let params = ctx.params;
    let name = params.required("name")?.to_owned();
    let algorithm = algorithm(ctx, true)?.unwrap_or_default();
    let public_port = port(ctx, "publicport")?;
    let private_port = port(ctx, "privateport")?;
    let protocol = protocol(ctx)?.unwrap_or_else(|| "tcp".into());
    let cidrs = cidrs(ctx)?.unwrap_or_default();
    if let Some(n) = params.get("networkid")
        && ctx.world.network(n).is_none()
    {
        return Err(params.unknown_id("networkid", n));
    }
    let ip = match params.get("publicipid") {
        Some(i) => ctx
            .world
            .ip(i)
            .ok_or_else(|| params.unknown_id("publicipid", i))?,
        None => {
            let net = params.required("networkid")?;
            ctx.world
                .public_ips
                .iter()
                .find(|i| i.source_nat && i.network_id.as_deref() == Some(net))
                .ok_or_else(|| CsError::invalid("The network has no source nat ip address"))?
        }
    };
    let owner = ip.owner.clone().ok_or_else(|| {
        CsError::invalid(format!(
            "Unable to create load balancer rule; ip id={} is not allocated",
            ip.id
        ))
    })?;
    if !ctx.caller.may_use(ctx.world, &owner) {
        return Err(denied(ctx, &owner));
    }
    let network_id = match (params.get("networkid"), &ip.network_id) {
        (Some(n), Some(assoc)) if n != assoc => {
            return Err(CsError::invalid(format!(
                "The ip address id={} is associated with another network",
                ip.id
            )));
        }
        (Some(n), _) => n.to_owned(),
        (None, Some(assoc)) => assoc.clone(),
        (None, None) => {
            return Err(CsError::invalid(
                "Unable to create load balancer rule: networkid is required for an ip address of a VPC",
            ));
        }
    };
    let network = ctx.world.network(&network_id).expect("checked above");
    if let Some(vpc) = &ip.vpc_id
        && network.vpc_id.as_ref() != Some(vpc)
    {
        return Err(CsError::invalid(
            "The network is not a tier of the ip address's VPC",
        ));
    }
    if !network.services.iter().any(|s| s == "Lb") {
        return Err(CsError::invalid(
            "LB service is not supported in specified network id",
        ));
    }
    let open_firewall = params
        .flag("openfirewall")
        .unwrap_or(network.vpc_id.is_none())
        && network.services.iter().any(|s| s == "Firewall");
    let ip_id = ip.id.clone();
    if let Some(other) = ctx.world.lb_rules.iter().find(|r| {
        r.public_ip_id == ip_id
            && r.public_port == public_port
            && transport(&r.protocol) == transport(&protocol)
    }) {
        return Err(CsError::new(
            code::NETWORK_RULE_CONFLICT_ERROR,
            cs_code::NETWORK_RULE_CONFLICT,
            format!(
                "The range specified, {public_port}-{public_port}, conflicts with rule {} which has {}-{}",
                other.id, other.public_port, other.public_port
            ),
        ));
    }
    let (id, seq) = ctx.world.new_id();
    if ctx.job_runs() {
        ctx.world.lb_rules.push(LbRule {
            id: id.clone(),
            seq,
            name,
            description: params.get("description").unwrap_or_default().to_owned(),
            public_ip_id: ip_id.clone(),
            public_port,
            private_port,
            protocol: protocol.clone(),
            algorithm,
            network_id: network_id.clone(),
            cidrs: cidrs.clone(),
            owner: owner.clone(),
            members: Vec::new(),
        });
        // The address belongs to the tier from its first rule on.
        if let Some(ip) = ctx.world.ip_mut(&ip_id) {
            ip.network_id = Some(network_id.clone());
        }
        if open_firewall {
            let (fw_id, fw_seq) = ctx.world.new_id();
            ctx.world.firewall_rules.push(FirewallRule {
                id: fw_id,
                seq: fw_seq,
                public_ip_id: ip_id,
                protocol: transport(&protocol).into(),
                start_port: Some(public_port),
                end_port: Some(public_port),
                cidrs: if cidrs.is_empty() {
                    vec!["0.0.0.0/0".into()]
                } else {
                    cidrs
                },
                network_id,
                owner,
            });
        }
    }
    let rule_id = id.clone();
    ctx.job("LoadBalancerRule", Some(id), move |w| {
        rule_result(w, &rule_id)
    })
}

fn rule_result(w: &crate::cloudstack::model::World, id: &str) -> Result<Value, CsError> {
    let rule = w
        .lb_rule(id)
        .ok_or_else(|| CsError::invalid("rule vanished"))?;
    Ok(json!({"loadbalancer": render_rules::lb_rule(w, rule)}))
}

/// A rule by `id` that the caller may use.
fn rule<'a>(ctx: &'a Ctx) -> Result<&'a LbRule, CsError> {
    let id = ctx.params.required("id")?;
    let rule = ctx
        .world
        .lb_rule(id)
        .ok_or_else(|| ctx.params.unknown_id("id", id))?;
    if !ctx.caller.may_use(ctx.world, &rule.owner) {
        return Err(denied(ctx, &rule.owner));
    }
    Ok(rule)
}

/// Whether the management server's version is at least `major.minor`.
fn version_at_least(version: &str, major: u32, minor: u32) -> bool {
    let mut parts = version.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    let have = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    have >= (major, minor)
}

/// `algorithm`, `protocol`, `name`, `description`; `cidrlist` from CloudStack 4.22 on (an
/// older server ignores it, as any unknown parameter).
pub fn update_rule(ctx: &mut Ctx) -> Result<Value, CsError> {
    let id = rule(ctx)?.id.clone();
    let algorithm = algorithm(ctx, false)?;
    let protocol = protocol(ctx)?;
    let cidrs = if version_at_least(&ctx.world.settings.version, 4, 22) {
        cidrs(ctx)?
    } else {
        None
    };
    let (name, description) = (
        ctx.params.get("name").map(str::to_owned),
        ctx.params.get("description").map(str::to_owned),
    );
    ctx.job("LoadBalancerRule", None, move |w| {
        let rule = w
            .lb_rule_mut(&id)
            .ok_or_else(|| CsError::invalid("rule vanished"))?;
        if let Some(a) = algorithm {
            rule.algorithm = a;
        }
        if let Some(p) = protocol {
            rule.protocol = p;
        }
        if let Some(c) = cidrs {
            rule.cidrs = c;
        }
        if let Some(n) = name {
            rule.name = n;
        }
        if let Some(d) = description {
            rule.description = d;
        }
        rule_result(w, &id)
    })
}

pub fn delete_rule(ctx: &mut Ctx) -> Result<Value, CsError> {
    let id = rule(ctx)?.id.clone();
    ctx.job("LoadBalancerRule", None, move |w| {
        w.lb_rules.retain(|r| r.id != id);
        Ok(json!({"success": true}))
    })
}

/// The VMs of `virtualmachineids`, each known to the API layer.
fn vm_ids(ctx: &Ctx) -> Result<Vec<String>, CsError> {
    let ids = ctx.params.list("virtualmachineids");
    if ids.is_empty() {
        ctx.params.required("virtualmachineids")?;
    }
    for id in &ids {
        if ctx.world.vm(id).is_none() {
            return Err(ctx.params.unknown_id("virtualmachineids", id));
        }
    }
    Ok(ids)
}

/// Adds members: running or stopped VMs of the caller's with a NIC in the rule's network, not
/// members yet. The job fails otherwise, adding none.
pub fn assign(ctx: &mut Ctx) -> Result<Value, CsError> {
    let rule_id = rule(ctx)?.id.clone();
    let vms = vm_ids(ctx)?;
    let caller = ctx.caller.clone();
    ctx.job("LoadBalancerRule", None, move |w| {
        let rule = w
            .lb_rule(&rule_id)
            .ok_or_else(|| CsError::invalid("rule vanished"))?;
        for id in &vms {
            let vm = w.vm(id).expect("checked above");
            if vm.expunged || vm.state.gone() {
                return Err(CsError::invalid(format!("Invalid instance id: {id}")));
            }
            if !caller.may_use(w, &vm.owner) {
                return Err(CsError::denied(format!(
                    "Instance {id} belongs to another account"
                )));
            }
            if !vm.nics.iter().any(|n| n.network_id == rule.network_id) {
                return Err(CsError::invalid(format!(
                    "Instance {} is not in the network of load balancer rule {}",
                    vm.name, rule.name
                )));
            }
            if rule.members.contains(id) {
                return Err(CsError::invalid(format!(
                    "Instance {} is already mapped to load balancer rule {}",
                    vm.name, rule.name
                )));
            }
        }
        let rule = w.lb_rule_mut(&rule_id).expect("found above");
        rule.members.extend(vms);
        Ok(json!({"success": true}))
    })
}

/// Removes members; the job fails, removing none, if one is not a member.
pub fn remove(ctx: &mut Ctx) -> Result<Value, CsError> {
    let rule_id = rule(ctx)?.id.clone();
    let vms = vm_ids(ctx)?;
    ctx.job("LoadBalancerRule", None, move |w| {
        let rule = w
            .lb_rule_mut(&rule_id)
            .ok_or_else(|| CsError::invalid("rule vanished"))?;
        if let Some(id) = vms.iter().find(|id| !rule.members.contains(id)) {
            return Err(CsError::invalid(format!(
                "Instance {id} is not assigned to load balancer rule {}",
                rule.name
            )));
        }
        rule.members.retain(|m| !vms.contains(m));
        Ok(json!({"success": true}))
    })
}

/// The members of rule `id`, as VMs (`loadbalancerruleinstance`).
pub fn list_instances(ctx: &mut Ctx) -> Result<Value, CsError> {
    let rule = rule(ctx)?;
    let (w, caller) = (&*ctx.world, &ctx.caller);
    let members: Vec<_> = rule
        .members
        .iter()
        .filter_map(|id| w.vm(id))
        .filter(|v| !v.expunged)
        .collect();
    paged(
        ctx.params,
        w.settings.default_page_size,
        "loadbalancerruleinstance",
        &members,
        |v| render::vm(w, caller, v),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions() {
        assert!(version_at_least("4.22.0.0", 4, 22));
        assert!(version_at_least("5.0", 4, 22));
        assert!(!version_at_least("4.20.1.0", 4, 22));
    }
}
