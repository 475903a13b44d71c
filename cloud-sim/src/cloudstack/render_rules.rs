//! The JSON of public IPs, load-balancer rules, firewall rules and network ACLs, as cloudstack-go
//! v2.19.0's `PublicIpAddress`, `LoadBalancerRule`, `FirewallRule`, `NetworkACLList` and
//! `NetworkACL` decode them: a rule's `publicport`/`privateport` and an ACL's `startport`/`endport`
//! are strings, a firewall rule's ports numbers; a load-balancer rule's `cidrlist` is separated
//! by spaces, a firewall rule's and an ACL's by commas.

use serde_json::{Value, json};

use super::model::{AclList, AclRule, FirewallRule, LbRule, PublicIp, World};
use super::render::{cs_date, object, stable_id, zone_name};

pub fn public_ip(world: &World, ip: &PublicIp) -> Value {
    let zone = world.zone(&ip.zone_id);
    let mut m = object(json!({
        "id": ip.id,
        "ipaddress": ip.address.to_string(),
        "zoneid": ip.zone_id,
        "zonename": zone.map(|z| z.name.as_str()).unwrap_or_default(),
        "issourcenat": ip.source_nat,
        "isstaticnat": ip.static_nat_vm.is_some(),
        "issystem": false,
        "isportable": false,
        "forvirtualnetwork": true,
        "fordisplay": true,
        "hasannotations": false,
        "hasrules": world.lb_rules.iter().any(|r| r.public_ip_id == ip.id)
            || world.firewall_rules.iter().any(|r| r.public_ip_id == ip.id),
        "networkid": zone.map(|z| z.public_network_id.as_str()).unwrap_or_default(),
        "physicalnetworkid": stable_id(world, "physical-network"),
        "vlanid": stable_id(world, &format!("public-vlan-{}", ip.zone_id)),
        "vlanname": "vlan://untagged",
        "state": if ip.owner.is_some() { "Allocated" } else { "Free" },
        "tags": [],
    }));
    if let Some(owner) = &ip.owner {
        m.extend(world.owner_fields(owner));
    }
    if let Some(ms) = ip.allocated_ms {
        m.insert("allocated".into(), json!(cs_date(ms)));
    }
    if let Some(net) = ip.network_id.as_deref().and_then(|n| world.network(n)) {
        m.insert("associatednetworkid".into(), json!(net.id));
        m.insert("associatednetworkname".into(), json!(net.name));
    }
    if let Some(vpc) = ip.vpc_id.as_ref().or_else(|| {
        ip.network_id
            .as_deref()
            .and_then(|n| world.network(n)?.vpc_id.as_ref())
    }) {
        m.insert("vpcid".into(), json!(vpc));
        m.insert("vpcname".into(), json!(world.vpc_name(vpc)));
    }
    if let Some(vm) = ip.static_nat_vm.as_deref().and_then(|v| world.vm(v)) {
        m.insert("virtualmachineid".into(), json!(vm.id));
        m.insert("virtualmachinename".into(), json!(vm.name));
        m.insert("virtualmachinedisplayname".into(), json!(vm.display_name));
        m.insert("virtualmachinetype".into(), json!("User"));
        if let Some(n) = vm.nics.iter().find(|n| n.default) {
            m.insert("vmipaddress".into(), json!(n.ip.to_string()));
        }
    }
    Value::Object(m)
}

pub fn lb_rule(world: &World, r: &LbRule) -> Value {
    let ip = world.ip(&r.public_ip_id);
    let zone_id = ip.map(|i| i.zone_id.clone()).unwrap_or_default();
    let mut m = object(json!({
        "id": r.id,
        "name": r.name,
        "description": r.description,
        "publicipid": r.public_ip_id,
        "publicip": ip.map(|i| i.address.to_string()).unwrap_or_default(),
        "publicport": r.public_port.to_string(),
        "privateport": r.private_port.to_string(),
        "algorithm": r.algorithm,
        // Space-separated on load-balancer rules (comma-separated on firewall rules).
        "cidrlist": r.cidrs.join(" "),
        "state": "Active",
        "zonename": zone_name(world, &zone_id),
        "zoneid": zone_id,
        "networkid": r.network_id,
        "protocol": r.protocol,
        "tags": [],
        "fordisplay": true,
    }));
    m.extend(world.owner_fields(&r.owner));
    Value::Object(m)
}

pub fn firewall_rule(world: &World, r: &FirewallRule) -> Value {
    let mut m = object(json!({
        "id": r.id,
        "protocol": r.protocol,
        "ipaddressid": r.public_ip_id,
        "ipaddress": world.ip(&r.public_ip_id).map(|i| i.address.to_string()).unwrap_or_default(),
        "networkid": r.network_id,
        "state": "Active",
        "cidrlist": r.cidrs.join(","),
        "destcidrlist": "",
        "traffictype": "Ingress",
        "tags": [],
        "fordisplay": true,
    }));
    if let (Some(s), Some(e)) = (r.start_port, r.end_port) {
        m.insert("startport".into(), json!(s));
        m.insert("endport".into(), json!(e));
    }
    Value::Object(m)
}

pub fn acl_list(world: &World, l: &AclList) -> Value {
    let mut m = object(json!({
        "id": l.id,
        "name": l.name,
        "description": l.description,
        "fordisplay": true,
    }));
    if let Some(vpc) = &l.vpc_id {
        m.insert("vpcid".into(), json!(vpc));
        m.insert("vpcname".into(), json!(world.vpc_name(vpc)));
    }
    Value::Object(m)
}

pub fn acl_rule(world: &World, r: &AclRule) -> Value {
    let mut m = object(json!({
        "id": r.id,
        "protocol": r.protocol,
        "traffictype": r.traffic_type,
        "state": "Active",
        "cidrlist": r.cidrs.join(","),
        "action": r.action,
        "number": r.number,
        "aclid": r.acl_id,
        "aclname": world.acl_list(&r.acl_id).map(|a| a.name.as_str()).unwrap_or_default(),
        "reason": r.reason,
        "tags": [],
        "fordisplay": true,
    }));
    if let (Some(s), Some(e)) = (r.start_port, r.end_port) {
        m.insert("startport".into(), json!(s.to_string()));
        m.insert("endport".into(), json!(e.to_string()));
    }
    Value::Object(m)
}
