//! The JSON each object answers with, field names and types as cloudstack-go v2.19.0's structs
//! decode them (`VirtualMachine`, `Nic`, `Zone`, `ServiceOffering`, `Network`, `Project`).
//! Where Go declares a number the value is a number, where it declares a string (a NIC's
//! `deviceid`) a string.

use std::net::Ipv4Addr;

use serde_json::{Map, Value, json};

use super::access::Caller;
use super::model::{Network, NetworkKind, Nic, Offering, Project, Vm, World, Zone};
use crate::clock::rfc3339;

/// CloudStack's date format: `2026-01-02T03:04:05+0000`.
pub fn cs_date(ms: u64) -> String {
    rfc3339(ms).replace("+00:00", "+0000")
}

/// A UUID that stays the same for a name within one world (hosts, templates, offerings of
/// networks): things the simulator names but does not model.
pub fn stable_id(world: &World, name: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ world.seed;
    for b in name.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    let l = h.rotate_left(29).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    format!(
        "{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}",
        h >> 32,
        (h >> 16) & 0xFFFF,
        h & 0xFFF,
        (l >> 52) & 0xFFF,
        l & 0xFFFF_FFFF_FFFF
    )
}

pub(super) fn object(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

fn netmask(prefix: u8) -> String {
    let mask = if prefix == 0 {
        0
    } else {
        u32::MAX << (32 - u32::from(prefix))
    };
    Ipv4Addr::from(mask).to_string()
}

pub(super) fn zone_name(world: &World, id: &str) -> String {
    world.zone(id).map(|z| z.name.clone()).unwrap_or_default()
}

pub fn vm(world: &World, caller: &Caller, vm: &Vm) -> Value {
    let offering = world.offering(&vm.offering_id);
    let mut m = object(json!({
        "id": vm.id,
        "name": vm.name,
        "displayname": vm.display_name,
        "created": cs_date(vm.created_ms),
        "state": vm.state.as_str(),
        "haenable": false,
        "zoneid": vm.zone_id,
        "zonename": zone_name(world, &vm.zone_id),
        "templateid": stable_id(world, "template"),
        "templatename": "ubuntu-22.04-kube",
        "templatedisplaytext": "Ubuntu 22.04 for Kubernetes",
        "passwordenabled": false,
        "serviceofferingid": vm.offering_id,
        "serviceofferingname": offering.map(|o| o.name.as_str()).unwrap_or_default(),
        "cpunumber": offering.map_or(0, |o| o.cpu_number),
        "cpuspeed": offering.map_or(0, |o| o.cpu_speed),
        "memory": offering.map_or(0, |o| o.memory),
        "guestosid": stable_id(world, "guestos"),
        "ostypeid": stable_id(world, "guestos"),
        "osdisplayname": "Ubuntu 22.04 LTS",
        "rootdeviceid": 0,
        "rootdevicetype": "ROOT",
        "securitygroup": [],
        "affinitygroup": [],
        "nic": vm.nics.iter().map(|n| nic(world, vm, n)).collect::<Vec<_>>(),
        "hypervisor": "KVM",
        "arch": "x86_64",
        "tags": [],
        "displayvm": true,
        "isdynamicallyscalable": false,
    }));
    m.extend(world.owner_fields(&vm.owner));
    // Only admins see where a VM runs (`ResponseView.Full`).
    if caller.admin {
        m.insert("instancename".into(), json!(format!("i-2-{}-VM", vm.seq)));
        if let Some(host) = &vm.host {
            m.insert("hostid".into(), json!(stable_id(world, host)));
            m.insert("hostname".into(), json!(host));
        }
    }
    if let Some(ip) = world.static_nat_of(&vm.id) {
        m.insert("publicip".into(), json!(ip.address.to_string()));
        m.insert("publicipid".into(), json!(ip.id));
    }
    Value::Object(m)
}

fn nic(world: &World, vm: &Vm, n: &Nic) -> Value {
    let net = world.network(&n.network_id);
    let vlan = net.map_or(0, |net| 100 + net.seq % 3900);
    let mut m = object(json!({
        "id": n.id,
        "networkid": n.network_id,
        "networkname": net.map(|n| n.name.as_str()).unwrap_or_default(),
        "netmask": net.map(|n| netmask(n.cidr.prefix())).unwrap_or_default(),
        "gateway": net.map(|n| Ipv4Addr::from(n.cidr.first() + 1).to_string()).unwrap_or_default(),
        "ipaddress": n.ip.to_string(),
        "isolationuri": format!("vlan://{vlan}"),
        "broadcasturi": format!("vlan://{vlan}"),
        "traffictype": "Guest",
        "type": if net.is_some_and(|n| n.kind == NetworkKind::Shared) { "Shared" } else { "Isolated" },
        "isdefault": n.default,
        "macaddress": n.mac,
        "secondaryip": [],
        "deviceid": "0",
        "virtualmachineid": vm.id,
    }));
    if let Some(vpc) = net.and_then(|n| n.vpc_id.as_ref()) {
        m.insert("vpcid".into(), json!(vpc));
        m.insert("vpcname".into(), json!(world.vpc_name(vpc)));
    }
    Value::Object(m)
}

pub fn zone(world: &World, z: &Zone) -> Value {
    json!({
        "id": z.id,
        "name": z.name,
        "description": format!("{} (cloud-sim)", z.name),
        "dns1": "8.8.8.8",
        "internaldns1": "10.0.0.2",
        "guestcidraddress": "10.0.0.0/8",
        "networktype": "Advanced",
        "securitygroupsenabled": false,
        "allocationstate": "Enabled",
        "zonetoken": stable_id(world, &format!("zonetoken-{}", z.name)),
        "dhcpprovider": "VirtualRouter",
        "localstorageenabled": false,
        "tags": [],
        "type": "Core",
        "ismultiarch": false,
        "hasannotations": false,
        "routedmodeenabled": false,
        "allowuserspecifyvrmtu": false,
        "routerprivateinterfacemaxmtu": 1500,
        "routerpublicinterfacemaxmtu": 1500,
    })
}

pub fn offering(o: &Offering) -> Value {
    json!({
        "id": o.id,
        "name": o.name,
        "displaytext": o.display_text,
        "cpunumber": o.cpu_number,
        "cpuspeed": o.cpu_speed,
        "memory": o.memory,
        "created": cs_date(o.created_ms),
        "storagetype": "shared",
        "provisioningtype": "thin",
        "offerha": false,
        "limitcpuuse": false,
        "isvolatile": false,
        "issystem": false,
        "defaultuse": false,
        "iscustomized": false,
        "hasannotations": false,
        "dynamicscalingenabled": true,
        "diskofferingstrictness": false,
        "encryptroot": false,
        "cacheMode": "none",
        "rootdisksize": 0,
        "state": "Active",
    })
}

/// One entry of a network's `service` list; Lb and Firewall carry the capabilities a client
/// may look at.
fn service(name: &str, provider: &str) -> Value {
    let caps: Vec<Value> = match name {
        "Lb" => vec![
            cap("SupportedLBAlgorithms", "roundrobin,leastconn,source"),
            cap("SupportedProtocols", "tcp, udp, tcp-proxy"),
            cap("SupportedLBIsolation", "dedicated"),
        ],
        "Firewall" => vec![
            cap("SupportedProtocols", "tcp,udp,icmp"),
            cap("SupportedTrafficDirection", "ingress, egress"),
            cap("MultipleIps", "true"),
        ],
        _ => Vec::new(),
    };
    json!({"name": name, "provider": [{"name": provider}], "capability": caps})
}

fn cap(name: &str, value: &str) -> Value {
    json!({"name": name, "value": value, "canchooseservicecapability": false})
}

pub fn network(world: &World, n: &Network) -> Value {
    let (offering, provider) = match n.kind {
        NetworkKind::Isolated => (
            "DefaultIsolatedNetworkOfferingWithSourceNatService",
            "VirtualRouter",
        ),
        NetworkKind::VpcTier => (
            "DefaultIsolatedNetworkOfferingForVpcNetworks",
            "VpcVirtualRouter",
        ),
        NetworkKind::Shared => ("DefaultSharedNetworkOffering", "VirtualRouter"),
    };
    let shared = n.kind == NetworkKind::Shared;
    let mut m = object(json!({
        "id": n.id,
        "name": n.name,
        "displaytext": n.name,
        "broadcastdomaintype": "Vlan",
        "traffictype": "Guest",
        "gateway": Ipv4Addr::from(n.cidr.first() + 1).to_string(),
        "netmask": netmask(n.cidr.prefix()),
        "cidr": n.cidr.to_string(),
        "zoneid": n.zone_id,
        "zonename": zone_name(world, &n.zone_id),
        "networkofferingid": stable_id(world, offering),
        "networkofferingname": offering,
        "networkofferingdisplaytext": offering,
        "networkofferingconservemode": true,
        "networkofferingavailability": if shared { "Optional" } else { "Required" },
        "issystem": false,
        "state": "Implemented",
        "related": n.id,
        "dns1": "8.8.8.8",
        "type": if shared { "Shared" } else { "Isolated" },
        "acltype": if shared { "Domain" } else { "Account" },
        "service": n.services.iter().map(|s| service(s, provider)).collect::<Vec<_>>(),
        "networkdomain": format!("cs{}cloud.internal", n.seq),
        "physicalnetworkid": stable_id(world, "physical-network"),
        "restartrequired": false,
        "specifyipranges": shared,
        "canusefordeploy": true,
        "ispersistent": false,
        "tags": [],
        "displaynetwork": true,
        "redundantrouter": false,
        "egressdefaultpolicy": false,
        "supportsvmautoscaling": !shared,
        "strechedl2subnet": false,
        "created": cs_date(n.created_ms),
    }));
    match &n.owner {
        Some(owner) => m.extend(world.owner_fields(owner)),
        None => {
            m.insert("domainid".into(), json!(super::world::ROOT_DOMAIN_ID));
            m.insert("domain".into(), json!("ROOT"));
        }
    }
    if let Some(vpc) = &n.vpc_id {
        m.insert("vpcid".into(), json!(vpc));
        m.insert("vpcname".into(), json!(world.vpc_name(vpc)));
    }
    if let Some(acl) = n.acl_id.as_deref().and_then(|a| world.acl_list(a)) {
        m.insert("aclid".into(), json!(acl.id));
        m.insert("aclname".into(), json!(acl.name));
    }
    Value::Object(m)
}

pub fn project(world: &World, p: &Project) -> Value {
    let owner = p
        .members
        .first()
        .and_then(|a| world.account(a))
        .unwrap_or_else(|| world.primary());
    let vms = world
        .vms
        .iter()
        .filter(|v| !v.expunged && v.owner == super::model::Owner::Project(p.id.clone()));
    let (mut total, mut running, mut stopped) = (0i64, 0i64, 0i64);
    for v in vms {
        total += 1;
        running += i64::from(v.state == super::model::VmState::Running);
        stopped += i64::from(v.state == super::model::VmState::Stopped);
    }
    json!({
        "id": p.id,
        "name": p.name,
        "displaytext": p.display_text,
        "domainid": super::world::ROOT_DOMAIN_ID,
        "domain": "ROOT",
        "owner": [{"account": owner.name, "accountid": owner.id}],
        "projectaccountname": format!("PrjAcct-{}-{}", p.name, p.seq),
        "state": "Active",
        "created": cs_date(p.created_ms),
        "tags": [],
        "vmtotal": total,
        "vmrunning": running,
        "vmstopped": stopped,
    })
}
