//! Firewall rules (isolated networks: ingress to a public address) and network ACLs (VPC tiers:
//! rules of an ACL list). `default_allow` and `default_deny` are lists every VPC shares and no
//! one may change.

use serde_json::{Value, json};

use super::addresses::denied;
use super::{Ctx, like};
use crate::cloudstack::access::Scope;
use crate::cloudstack::error::{CsError, code, cs_code};
use crate::cloudstack::model::{AclList, AclRule, FirewallRule};
use crate::cloudstack::params::paged;
use crate::cloudstack::render_rules;

/// Rules by `id`, `ipaddressid`, `networkid`, in the scope of `projectid`/`listall`.
pub fn list_firewall_rules(ctx: &mut Ctx) -> Result<Value, CsError> {
    let (w, caller, params) = (&*ctx.world, &ctx.caller, ctx.params);
    if let Some(id) = params.get("id")
        && !w.firewall_rules.iter().any(|r| r.id == id)
    {
        return Err(params.unknown_id("id", id));
    }
    if let Some(ip) = params.get("ipaddressid")
        && w.ip(ip).is_none()
    {
        return Err(params.unknown_id("ipaddressid", ip));
    }
    let scope = Scope::of(w, caller, params)?;
    let rules: Vec<_> = w
        .firewall_rules
        .iter()
        .filter(|r| scope.covers(w, caller, &r.owner))
        .filter(|r| params.get("id").is_none_or(|id| r.id == id))
        .filter(|r| {
            params
                .get("ipaddressid")
                .is_none_or(|i| r.public_ip_id == i)
        })
        .filter(|r| params.get("networkid").is_none_or(|n| r.network_id == n))
        .collect();
    paged(
        params,
        w.settings.default_page_size,
        "firewallrule",
        &rules,
        |r| render_rules::firewall_rule(w, r),
    )
}

/// `protocol` of a rule: `tcp`, `udp`, `icmp` or `all`, lower-cased.
fn protocol(ctx: &Ctx) -> Result<String, CsError> {
    let p = ctx.params.required("protocol")?.to_ascii_lowercase();
    if ["tcp", "udp", "icmp", "all"].contains(&p.as_str()) {
        Ok(p)
    } else {
        Err(CsError::invalid(format!("Invalid protocol: {p}")))
    }
}

/// `startport`/`endport` (`endport` defaults to `startport`; neither: every port).
fn ports(ctx: &Ctx) -> Result<(Option<u16>, Option<u16>), CsError> {
    let start = ctx.params.int("startport")?;
    let end = ctx.params.int("endport")?.or(start);
    let check = |p: Option<i64>| {
        p.map(|n| {
            u16::try_from(n)
                .ok()
                .filter(|p| *p > 0)
                .ok_or_else(|| CsError::invalid(format!("Invalid port: {n}")))
        })
        .transpose()
    };
    let (start, end) = (check(start)?, check(end)?);
    if let (Some(s), Some(e)) = (start, end)
        && s > e
    {
        return Err(CsError::invalid(format!("Invalid port range {s}-{e}")));
    }
    Ok((start, end))
}

fn cidr_list(ctx: &Ctx) -> Result<Vec<String>, CsError> {
    let list = ctx.params.list("cidrlist");
    for c in &list {
        if crate::cidr::Ipv4Net::parse(c).is_none() {
            return Err(CsError::invalid(format!(
                "Source cidrs formatting error {c}"
            )));
        }
    }
    Ok(if list.is_empty() {
        vec!["0.0.0.0/0".into()]
    } else {
        list
    })
}

fn overlap(a: (Option<u16>, Option<u16>), b: (Option<u16>, Option<u16>)) -> bool {
    match (a, b) {
        ((Some(s1), Some(e1)), (Some(s2), Some(e2))) => s1 <= e2 && s2 <= e1,
        _ => true,
    }
}

/// `ipaddressid` and `protocol` required; `cidrlist` (default `0.0.0.0/0`), `startport`,
/// `endport`. The address's network must offer the Firewall service (a VPC tier does not).
/// A rule with the same protocol, overlapping ports and the same CIDRs conflicts (537).
pub fn create_firewall_rule(ctx: &mut Ctx) -> Result<Value, CsError> {
    let params = ctx.params;
    let ip_id = params.required("ipaddressid")?;
    let ip = ctx
        .world
        .ip(ip_id)
        .ok_or_else(|| params.unknown_id("ipaddressid", ip_id))?;
    let protocol = protocol(ctx)?;
    let ports = ports(ctx)?;
    let cidrs = cidr_list(ctx)?;
    let owner = ip
        .owner
        .clone()
        .ok_or_else(|| CsError::invalid(format!("Ip address id={ip_id} is not allocated")))?;
    if !ctx.caller.may_use(ctx.world, &owner) {
        return Err(denied(ctx, &owner));
    }
    let network = ip
        .network_id
        .as_deref()
        .and_then(|n| ctx.world.network(n))
        .ok_or_else(|| {
            CsError::invalid(format!(
                "Unable to create firewall rule for the ip id={ip_id}: it is not associated with a network"
            ))
        })?;
    if !network.services.iter().any(|s| s == "Firewall") {
        return Err(CsError::invalid(format!(
            "Firewall service is not supported in network id={}",
            network.id
        )));
    }
    let network_id = network.id.clone();
    let mut sorted = cidrs.clone();
    sorted.sort();
    if let Some(other) = ctx.world.firewall_rules.iter().find(|r| {
        let mut theirs = r.cidrs.clone();
        theirs.sort();
        r.public_ip_id == ip_id
            && r.protocol == protocol
            && overlap((r.start_port, r.end_port), ports)
            && theirs == sorted
    }) {
        let range = |(s, e): (Option<u16>, Option<u16>)| {
            format!("{}-{}", s.unwrap_or(1), e.unwrap_or(65535))
        };
        return Err(CsError::new(
            code::NETWORK_RULE_CONFLICT_ERROR,
            cs_code::NETWORK_RULE_CONFLICT,
            format!(
                "The range specified, {}, conflicts with rule {} which has {}",
                range(ports),
                other.id,
                range((other.start_port, other.end_port))
            ),
        ));
    }
    let (id, seq) = ctx.world.new_id();
    if ctx.job_runs() {
        ctx.world.firewall_rules.push(FirewallRule {
            id: id.clone(),
            seq,
            public_ip_id: ip_id.to_owned(),
            protocol,
            start_port: ports.0,
            end_port: ports.1,
            cidrs,
            network_id,
            owner,
        });
    }
    let rule_id = id.clone();
    ctx.job("FirewallRule", Some(id), move |w| {
        let rule = w
            .firewall_rules
            .iter()
            .find(|r| r.id == rule_id)
            .ok_or_else(|| CsError::invalid("rule vanished"))?;
        Ok(json!({"firewallrule": render_rules::firewall_rule(w, rule)}))
    })
}

pub fn delete_firewall_rule(ctx: &mut Ctx) -> Result<Value, CsError> {
    let params = ctx.params;
    let id = params.required("id")?.to_owned();
    let rule = ctx
        .world
        .firewall_rules
        .iter()
        .find(|r| r.id == id)
        .ok_or_else(|| params.unknown_id("id", &id))?;
    if !ctx.caller.may_use(ctx.world, &rule.owner) {
        return Err(denied(ctx, &rule.owner));
    }
    ctx.job("FirewallRule", None, move |w| {
        w.firewall_rules.retain(|r| r.id != id);
        Ok(json!({"success": true}))
    })
}

/// Whether the caller may see (and, unless it is a default list, change) an ACL list.
fn may_use_list(ctx: &Ctx, list: &AclList) -> bool {
    match &list.vpc_id {
        None => true,
        Some(vpc) => ctx
            .world
            .vpcs
            .iter()
            .find(|v| v.id == *vpc)
            .is_some_and(|v| ctx.caller.may_use(ctx.world, &v.owner)),
    }
}

/// ACL lists by `id`, `name`, `vpcid`, `networkid` (the tier's list) or `keyword`.
pub fn list_acl_lists(ctx: &mut Ctx) -> Result<Value, CsError> {
    let (w, params) = (&*ctx.world, ctx.params);
    if let Some(id) = params.get("id")
        && w.acl_list(id).is_none()
    {
        return Err(params.unknown_id("id", id));
    }
    let tier_list = match params.get("networkid") {
        Some(n) => Some(
            w.network(n)
                .ok_or_else(|| params.unknown_id("networkid", n))?
                .acl_id
                .clone(),
        ),
        None => None,
    };
    let lists: Vec<_> = w
        .acl_lists
        .iter()
        .filter(|l| may_use_list(ctx, l))
        .filter(|l| params.get("id").is_none_or(|id| l.id == id))
        .filter(|l| params.get("name").is_none_or(|n| l.name == n))
        .filter(|l| params.get("keyword").is_none_or(|k| like(&l.name, k)))
        .filter(|l| {
            params
                .get("vpcid")
                .is_none_or(|v| l.vpc_id.is_none() || l.vpc_id.as_deref() == Some(v))
        })
        .filter(|l| {
            tier_list
                .as_ref()
                .is_none_or(|t| t.as_deref() == Some(l.id.as_str()))
        })
        .collect();
    paged(
        params,
        w.settings.default_page_size,
        "networkacllist",
        &lists,
        |l| render_rules::acl_list(w, l),
    )
}

/// The ACL list a request names: `aclid`, else the list of tier `networkid`.
fn target_list<'a>(ctx: &'a Ctx) -> Result<Option<&'a AclList>, CsError> {
    let params = ctx.params;
    if let Some(id) = params.get("aclid") {
        return ctx
            .world
            .acl_list(id)
            .map(Some)
            .ok_or_else(|| params.unknown_id("aclid", id));
    }
    match params.get("networkid") {
        Some(n) => {
            let net = ctx
                .world
                .network(n)
                .ok_or_else(|| params.unknown_id("networkid", n))?;
            Ok(net.acl_id.as_deref().and_then(|a| ctx.world.acl_list(a)))
        }
        None => Ok(None),
    }
}

/// ACL rules by `id`, `aclid`, `networkid` (its tier's list), `traffictype`, `protocol`,
/// `action`.
pub fn list_acls(ctx: &mut Ctx) -> Result<Value, CsError> {
    let params = ctx.params;
    let list = target_list(ctx)?.map(|l| l.id.clone());
    let narrowed = params.get("aclid").is_some() || params.get("networkid").is_some();
    let w = &*ctx.world;
    if let Some(id) = params.get("id")
        && !w.acl_rules.iter().any(|r| r.id == id)
    {
        return Err(params.unknown_id("id", id));
    }
    let eq = |name: &str, v: &str| params.get(name).is_none_or(|p| p.eq_ignore_ascii_case(v));
    let rules: Vec<_> = w
        .acl_rules
        .iter()
        .filter(|r| w.acl_list(&r.acl_id).is_some_and(|l| may_use_list(ctx, l)))
        .filter(|r| !narrowed || list.as_deref() == Some(r.acl_id.as_str()))
        .filter(|r| params.get("id").is_none_or(|id| r.id == id))
        .filter(|r| eq("traffictype", &r.traffic_type))
        .filter(|r| eq("protocol", &r.protocol))
        .filter(|r| eq("action", &r.action))
        .collect();
    paged(
        params,
        w.settings.default_page_size,
        "networkacl",
        &rules,
        |r| render_rules::acl_rule(w, r),
    )
}

/// `protocol` required; the list from `aclid` or `networkid`; `action` (`Allow`), `cidrlist`,
/// `startport`, `endport`, `traffictype` (`Ingress`), `number` (after the last), `reason`. The default
/// lists cannot be changed.
pub fn create_acl(ctx: &mut Ctx) -> Result<Value, CsError> {
    let protocol = protocol(ctx)?;
    let list = target_list(ctx)?.ok_or_else(|| {
        CsError::invalid(
            "Unable to create network ACL: aclid or networkid of a VPC tier is required",
        )
    })?;
    if list.vpc_id.is_none() {
        return Err(CsError::invalid("Default ACL cannot be modified"));
    }
    if !may_use_list(ctx, list) {
        return Err(CsError::denied(format!(
            "Account {} does not have permission to change ACL list id={}",
            ctx.caller.name, list.id
        )));
    }
    let acl_id = list.id.clone();
    let ports = ports(ctx)?;
    let cidrs = cidr_list(ctx)?;
    let params = ctx.params;
    let action = match params
        .get("action")
        .unwrap_or("Allow")
        .to_ascii_lowercase()
        .as_str()
    {
        "allow" => "Allow",
        "deny" => "Deny",
        other => return Err(CsError::invalid(format!("Invalid action {other}"))),
    };
    let traffic_type = match params
        .get("traffictype")
        .unwrap_or("Ingress")
        .to_ascii_lowercase()
        .as_str()
    {
        "ingress" => "Ingress",
        "egress" => "Egress",
        other => return Err(CsError::invalid(format!("Invalid traffic type {other}"))),
    };
    let last = ctx
        .world
        .acl_rules
        .iter()
        .filter(|r| r.acl_id == acl_id)
        .map(|r| r.number)
        .max()
        .unwrap_or(0);
    let number = match params.int("number")? {
        Some(n) => u32::try_from(n).map_err(|_| params.bad_value("number", &n.to_string()))?,
        None => last + 1,
    };
    let (id, seq) = ctx.world.new_id();
    if ctx.job_runs() {
        ctx.world.acl_rules.push(AclRule {
            id: id.clone(),
            seq,
            acl_id,
            protocol,
            start_port: ports.0,
            end_port: ports.1,
            cidrs,
            action: action.into(),
            traffic_type: traffic_type.into(),
            number,
            reason: params.get("reason").unwrap_or_default().to_owned(),
        });
    }
    let rule_id = id.clone();
    ctx.job("NetworkAcl", Some(id), move |w| {
        let rule = w
            .acl_rules
            .iter()
            .find(|r| r.id == rule_id)
            .ok_or_else(|| CsError::invalid("rule vanished"))?;
        Ok(json!({"networkacl": render_rules::acl_rule(w, rule)}))
    })
}

pub fn delete_acl(ctx: &mut Ctx) -> Result<Value, CsError> {
    let params = ctx.params;
    let id = params.required("id")?.to_owned();
    let rule = ctx
        .world
        .acl_rules
        .iter()
        .find(|r| r.id == id)
        .ok_or_else(|| params.unknown_id("id", &id))?;
    let allowed = ctx
        .world
        .acl_list(&rule.acl_id)
        .is_some_and(|l| may_use_list(ctx, l));
    if !allowed {
        return Err(CsError::denied(format!(
            "Account {} does not have permission to change ACL list id={}",
            ctx.caller.name, rule.acl_id
        )));
    }
    ctx.job("NetworkAcl", None, move |w| {
        w.acl_rules.retain(|r| r.id != id);
        Ok(json!({"success": true}))
    })
}
