//! `listPublicIpAddresses`, `associateIpAddress` and `disassociateIpAddress`. Each zone's public
//! addresses are `100.(100 + zone index).x.y`; an isolated network and a VPC hold one as source
//! NAT from the start.

use std::net::Ipv4Addr;

use serde_json::{Value, json};

use super::{Ctx, like};
use crate::cloudstack::access::Scope;
use crate::cloudstack::error::CsError;
use crate::cloudstack::model::{Owner, PublicIp};
use crate::cloudstack::params::paged;
use crate::cloudstack::render_rules;

/// Addresses by `id`, `ipaddress`, `associatednetworkid`, `vpcid`, `zoneid`, `isstaticnat`,
/// `issourcenat`, `keyword`, `state` (`Free`, `Allocated`), in the scope of `projectid`/`listall`.
/// `allocatedonly` (default true) false adds free addresses: the ones seen before, the one
/// `ipaddress` names, and with `zoneid` a page of the zone's next free ones.
pub fn list_public_ip_addresses(ctx: &mut Ctx) -> Result<Value, CsError> {
    let params = ctx.params;
    let allocated_only = params.flag("allocatedonly").unwrap_or(true);
    if let Some(id) = params.get("id")
        && ctx.world.ip(id).is_none()
    {
        return Err(params.unknown_id("id", id));
    }
    let address = match params.get("ipaddress") {
        Some(a) => Some(
            a.parse::<Ipv4Addr>()
                .map_err(|_| params.bad_value("ipaddress", a))?,
        ),
        None => None,
    };
    // An address never seen yet exists as a free one of its zone; so do the zone's next free
    // ones when free addresses of a zone are asked for (CloudStack lists its whole range).
    if let (Some(a), false) = (address, allocated_only)
        && let Some(zone) = zone_of(ctx, a)
    {
        ctx.world.ip_record(&zone, a)?;
    }
    if let (None, false, Some(zone)) = (address, allocated_only, params.get("zoneid")) {
        let n = params
            .get("pagesize")
            .and_then(|p| p.parse::<u32>().ok())
            .unwrap_or(u32::try_from(ctx.world.settings.default_page_size).unwrap_or(500));
        ctx.world.show_free_ips(zone, n.min(500))?;
    }
    let (w, caller) = (&*ctx.world, &ctx.caller);
    let scope = Scope::of(w, caller, params)?;
    let flag = |name: &str, value: bool| params.flag(name).is_none_or(|f| f == value);
    let shown = |ip: &&PublicIp| match &ip.owner {
        Some(owner) => scope.covers(w, caller, owner),
        None => !allocated_only,
    };
    let ips: Vec<_> = w
        .public_ips
        .iter()
        .filter(shown)
        .filter(|i| params.get("id").is_none_or(|id| i.id == id))
        .filter(|i| address.is_none_or(|a| i.address == a))
        .filter(|i| {
            params
                .get("associatednetworkid")
                .is_none_or(|n| i.network_id.as_deref() == Some(n))
        })
        .filter(|i| {
            params
                .get("vpcid")
                .is_none_or(|v| ip_vpc(ctx, i).as_deref() == Some(v))
        })
        .filter(|i| params.get("zoneid").is_none_or(|z| i.zone_id == z))
        .filter(|i| match params.get("state") {
            Some(s) if s.eq_ignore_ascii_case("free") => i.owner.is_none(),
            Some(s) if s.eq_ignore_ascii_case("allocated") => i.owner.is_some(),
            _ => true,
        })
        .filter(|i| flag("isstaticnat", i.static_nat_vm.is_some()))
        .filter(|i| flag("issourcenat", i.source_nat))
        .filter(|i| {
            params
                .get("keyword")
                .is_none_or(|k| like(&i.address.to_string(), k))
        })
        .collect();
    paged(
        params,
        w.settings.default_page_size,
        "publicipaddress",
        &ips,
        |i| render_rules::public_ip(w, i),
    )
}

/// The VPC an address belongs to: its own, or its tier's.
fn ip_vpc(ctx: &Ctx, ip: &PublicIp) -> Option<String> {
    ip.vpc_id.clone().or_else(|| {
        let net = ctx.world.network(ip.network_id.as_deref()?)?;
        net.vpc_id.clone()
    })
}

/// The zone whose public range holds `a` (`zoneid` if given).
fn zone_of(ctx: &Ctx, a: Ipv4Addr) -> Option<String> {
    if let Some(z) = ctx.params.get("zoneid") {
        return Some(z.to_owned());
    }
    let [x, y, ..] = a.octets();
    ctx.world
        .zones
        .iter()
        .find(|z| x == 100 && u32::from(y) == 100 + u32::from(z.index))
        .map(|z| z.id.clone())
}

/// Allocates an address (the next free one, or `ipaddress`) for the guest network `networkid`
/// or the VPC `vpcid` (or, with `zoneid` alone, for no network yet), owned by the caller or the
/// project of `projectid`. The address is allocated at once (CloudStack's create phase); the
/// job associates it.
pub fn associate_ip_address(ctx: &mut Ctx) -> Result<Value, CsError> {
    let params = ctx.params;
    let owner = ctx.caller.new_owner(ctx.world, params)?;
    let network = match params.get("networkid") {
        Some(n) => Some(
            ctx.world
                .network(n)
                .ok_or_else(|| params.unknown_id("networkid", n))?,
        ),
        None => None,
    };
    let vpc = match params.get("vpcid") {
        Some(v) => Some(
            ctx.world
                .vpcs
                .iter()
                .find(|x| x.id == v)
                .ok_or_else(|| params.unknown_id("vpcid", v))?,
        ),
        None => None,
    };
    if let Some(net) = network {
        if net.owner.as_ref().is_some_and(|o| *o != owner) {
            return Err(CsError::invalid(format!(
                "Unable to associate the ip address with network id={}: it belongs to another owner",
                net.id
            )));
        }
        if !net.services.iter().any(|s| s == "SourceNat") {
            return Err(CsError::invalid(format!(
                "Can't allocate a public ip address to network id={}: it has no SourceNat service",
                net.id
            )));
        }
    }
    if let Some(v) = vpc
        && v.owner != owner
    {
        return Err(CsError::denied(format!(
            "Account {} does not have permission to operate within vpc id={}",
            ctx.caller.name, v.id
        )));
    }
    let zone = match (network, vpc, params.get("zoneid")) {
        (Some(n), _, _) => n.zone_id.clone(),
        (None, Some(v), _) => v.zone_id.clone(),
        (None, None, Some(z)) if ctx.world.zone(z).is_some() => z.to_owned(),
        (None, None, Some(z)) => return Err(params.unknown_id("zoneid", z)),
        (None, None, None) => {
            return Err(CsError::invalid(
                "One of the following parameters must be specified: networkid, vpcid, zoneid",
            ));
        }
    };
    let network_id = network.map(|n| n.id.clone());
    let vpc_id = vpc.map(|v| v.id.clone());
    let address = match params.get("ipaddress") {
        Some(a) => Some(
            a.parse::<Ipv4Addr>()
                .map_err(|_| params.bad_value("ipaddress", a))?,
        ),
        None => None,
    };
    let id = if ctx.job_runs() {
        ctx.world.allocate_ip(
            &zone,
            owner,
            network_id.as_deref(),
            vpc_id.as_deref(),
            address,
        )?
    } else {
        ctx.world.new_id().0
    };
    let ip_id = id.clone();
    ctx.job("IpAddress", Some(id), move |w| {
        let ip = w
            .ip(&ip_id)
            .ok_or_else(|| CsError::invalid("address vanished"))?;
        Ok(json!({"ipaddress": render_rules::public_ip(w, ip)}))
    })
}

/// Releases an address (`id`) with the load-balancer and firewall rules on it. A source NAT
/// address cannot be released.
pub fn disassociate_ip_address(ctx: &mut Ctx) -> Result<Value, CsError> {
    let params = ctx.params;
    let id = params.required("id")?.to_owned();
    let ip = ctx
        .world
        .ip(&id)
        .ok_or_else(|| params.unknown_id("id", &id))?;
    let Some(owner) = ip.owner.clone() else {
        return Err(CsError::invalid(format!(
            "Unable to release ip address id={id}: it is not allocated"
        )));
    };
    if !ctx.caller.may_use(ctx.world, &owner) {
        return Err(denied(ctx, &owner));
    }
    if ip.source_nat {
        return Err(CsError::invalid(format!(
            "Can't release ip address id={id} as it's used as source nat ip address"
        )));
    }
    ctx.job("IpAddress", None, move |w| {
        w.release_ip(&id);
        Ok(json!({"success": true}))
    })
}

/// The caller may not touch `owner`'s resources.
pub fn denied(ctx: &Ctx, owner: &Owner) -> CsError {
    let whose = match owner {
        Owner::Account(a) => ctx.world.account(a).map(|a| a.name.clone()),
        Owner::Project(p) => ctx.world.project(p).map(|p| p.name.clone()),
    };
    CsError::denied(format!(
        "Account {} does not have permission to access resources of {}",
        ctx.caller.name,
        whose.unwrap_or_default()
    ))
}
