//! What creates and changes the world: accounts, projects, zones, offerings, networks, VMs and
//! their lifecycle, public IPs. World building (`/_sim/cloudstack`) and the API commands share
//! these, so a VM made either way is the same VM.

use std::net::Ipv4Addr;

use super::error::{CsError, code, cs_code};
use super::model::{
    Account, AclList, NetworkKind, Nic, Offering, Owner, Project, PublicIp, Role, Transition, Vm,
    VmState, Vpc, World, Zone,
};
use crate::cidr::Ipv4Net;
use crate::clock::now_ms;

/// A network to create: `zone`, `vpc` and `acl` by id or name.
#[derive(Debug, Clone)]
pub struct NetworkSpec {
    pub name: String,
    pub zone: String,
    pub kind: NetworkKind,
    /// Default: the next free `10.N.0.0/16`; in a VPC the next /24 of the VPC's CIDR.
    pub cidr: Option<String>,
    /// `None`: a shared network anyone may use (only for `Shared`).
    pub owner: Option<Owner>,
    /// A VPC tier's VPC, created (the next free `172.N.0.0/16`) when none has this name.
    pub vpc: Option<String>,
    /// A VPC tier's ACL list: `default_allow` (default), `default_deny`, or a list of the VPC,
    /// created when none has this name.
    pub acl: Option<String>,
}

/// A VM to create.
#[derive(Debug, Clone)]
pub struct VmSpec {
    pub name: String,
    pub display_name: Option<String>,
    pub owner: Owner,
    /// Zone id or name; default: the network's zone, else `zone-1`.
    pub zone: Option<String>,
    /// Offering id or name; default `Small Instance`.
    pub offering: Option<String>,
    /// Network id or name; default: the first network of the zone the owner may use.
    pub network: Option<String>,
    pub state: VmState,
    /// The NIC's address; default the network's next free one.
    pub ip: Option<Ipv4Addr>,
}

/// A lifecycle step of a VM, as the world builder asks for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VmOp {
    /// `Starting` for the job duration, then `Running` on a host.
    Start,
    /// `Stopping` for the job duration, then `Stopped`.
    Stop,
    /// `Destroyed` at once (recoverable, still listed to admins).
    Destroy,
    /// `Expunging` for the job duration, then gone from every list.
    Expunge,
    /// Straight into this state.
    Set(VmState),
}

const ISOLATED_SERVICES: &[&str] = &[
    "Dhcp",
    "Dns",
    "UserData",
    "Firewall",
    "Gateway",
    "SourceNat",
    "StaticNat",
    "PortForwarding",
    "Lb",
    "Vpn",
];
const VPC_TIER_SERVICES: &[&str] = &[
    "Dhcp",
    "Dns",
    "UserData",
    "Gateway",
    "SourceNat",
    "StaticNat",
    "PortForwarding",
    "Lb",
    "NetworkACL",
    "Vpn",
];
const SHARED_SERVICES: &[&str] = &["Dhcp", "Dns", "UserData"];

impl World {
    /// An account with its key pair; `keys: None` makes the primary account (the fixture).
    pub fn add_account(
        &mut self,
        name: &str,
        role: Role,
        keys: Option<(String, String)>,
    ) -> String {
        let (id, seq) = self.new_id();
        let (user_id, _) = self.new_id();
        let primary = keys.is_none();
        let (api_key, secret_key) = keys.unzip();
        self.accounts.push(Account {
            id: id.clone(),
            seq,
            user_id,
            name: name.into(),
            role,
            primary,
            api_key,
            secret_key,
            enabled: true,
        });
        id
    }

    pub fn add_project(&mut self, name: &str, members: Vec<String>) -> String {
        let (id, seq) = self.new_id();
        self.projects.push(Project {
            id: id.clone(),
            seq,
            name: name.into(),
            display_text: name.into(),
            members,
            created_ms: now_ms(),
        });
        id
    }

    pub fn add_zone(&mut self, name: &str) -> String {
        let (id, seq) = self.new_id();
        let (public_network_id, _) = self.new_id();
        let index = u8::try_from(self.zones.len() + 1).unwrap_or(u8::MAX);
        self.zones.push(Zone {
            id: id.clone(),
            seq,
            name: name.into(),
            index,
            public_network_id,
            public_ips_used: 0,
            hosts: 4,
        });
        id
    }

    pub fn add_offering(
        &mut self,
        name: &str,
        cpu_number: u32,
        cpu_speed: u32,
        memory: u32,
    ) -> String {
        let (id, seq) = self.new_id();
        self.offerings.push(Offering {
            id: id.clone(),
            seq,
            name: name.into(),
            display_text: name.into(),
            cpu_number,
            cpu_speed,
            memory,
            created_ms: now_ms(),
        });
        id
    }

    pub fn add_network(&mut self, spec: NetworkSpec) -> Result<String, String> {
        let zone_id = self
            .zone_ref(&spec.zone)
            .map(|z| z.id.clone())
            .ok_or_else(|| format!("no zone {:?}", spec.zone))?;
        if spec.owner.is_none() && spec.kind != NetworkKind::Shared {
            return Err("only a shared network may have no owner".into());
        }
        let (vpc_id, acl_id) = match spec.kind {
            NetworkKind::VpcTier => {
                let owner = spec.owner.clone().unwrap_or_else(|| self.primary_owner());
                let vpc = spec.vpc.as_deref().unwrap_or("vpc-1");
                let vpc_id = self.vpc_or_new(vpc, &zone_id, owner)?;
                let acl = spec.acl.as_deref().unwrap_or("default_allow");
                (Some(vpc_id.clone()), Some(self.acl_or_new(acl, &vpc_id)))
            }
            _ => (None, None),
        };
        let cidr = match &spec.cidr {
            Some(c) => Ipv4Net::parse(c).ok_or_else(|| format!("bad cidr {c:?}"))?,
            None => self.free_cidr(vpc_id.as_deref())?,
        };
        let services = match spec.kind {
            NetworkKind::Isolated => ISOLATED_SERVICES,
            NetworkKind::VpcTier => VPC_TIER_SERVICES,
            NetworkKind::Shared => SHARED_SERVICES,
        };
        let (id, seq) = self.new_id();
        self.networks.push(super::model::Network {
            id: id.clone(),
            seq,
            name: spec.name,
            zone_id: zone_id.clone(),
            kind: spec.kind,
            cidr,
            owner: spec.owner.clone(),
            vpc_id,
            acl_id,
            services: services.iter().map(|s| (*s).to_owned()).collect(),
            last_host: 1,
            created_ms: now_ms(),
        });
        // An isolated network's virtual router gets its source NAT address when it comes up.
        if let (NetworkKind::Isolated, Some(owner)) = (spec.kind, spec.owner) {
            let ip = self
                .allocate_ip(&zone_id, owner, Some(&id), None, None)
                .map_err(|e| e.text)?;
            if let Some(ip) = self.ip_mut(&ip) {
                ip.source_nat = true;
            }
        }
        Ok(id)
    }

    fn primary_owner(&self) -> Owner {
        Owner::Account(self.primary().id.clone())
    }

    /// The first block of `prefix` bits inside `within` that overlaps none of `taken`.
    fn free_block(within: Ipv4Net, prefix: u8, taken: &[Ipv4Net]) -> Option<Ipv4Net> {
        let step = 1u64 << (32 - u32::from(prefix));
        (0..within.size() / step)
            .map(|i| Ipv4Net::new_unchecked(within.first() + (i * step) as u32, prefix))
            .find(|c| !taken.iter().any(|t| t.overlaps(c)))
    }

    /// A network's default CIDR: a tier takes the next /24 of its VPC; any other network the
    /// next `10.N.0.0/16`.
    fn free_cidr(&self, vpc: Option<&str>) -> Result<Ipv4Net, String> {
        let found = match vpc.and_then(|v| self.vpcs.iter().find(|x| x.id == v)) {
            Some(vpc) => {
                let tiers: Vec<Ipv4Net> = self
                    .networks
                    .iter()
                    .filter(|n| n.vpc_id.as_deref() == Some(vpc.id.as_str()))
                    .map(|n| n.cidr)
                    .collect();
                Self::free_block(vpc.cidr, 24, &tiers)
            }
            None => {
                let taken: Vec<Ipv4Net> = self.networks.iter().map(|n| n.cidr).collect();
                Self::free_block(Ipv4Net::new_unchecked(0x0A00_0000, 8), 16, &taken)
            }
        };
        found.ok_or_else(|| "no free CIDR left".to_owned())
    }

    fn vpc_or_new(&mut self, key: &str, zone_id: &str, owner: Owner) -> Result<String, String> {
        if let Some(v) = self.vpcs.iter().find(|v| v.id == key || v.name == key) {
            return Ok(v.id.clone());
        }
        // VPCs take 172.16.0.0/16, 172.17.0.0/16, ...: apart from other networks' 10.N/16.
        let taken: Vec<Ipv4Net> = self.vpcs.iter().map(|v| v.cidr).collect();
        let vpc_cidr = Self::free_block(Ipv4Net::new_unchecked(0xAC10_0000, 12), 16, &taken)
            .ok_or("no free VPC CIDR left")?;
        let (id, seq) = self.new_id();
        self.vpcs.push(Vpc {
            id: id.clone(),
            seq,
            name: key.into(),
            zone_id: zone_id.into(),
            cidr: vpc_cidr,
            owner: owner.clone(),
        });
        // A VPC's router takes the source NAT address, associated with the VPC, not a tier.
        let ip = self
            .allocate_ip(zone_id, owner, None, Some(&id), None)
            .map_err(|e| e.text)?;
        if let Some(ip) = self.ip_mut(&ip) {
            ip.source_nat = true;
        }
        Ok(id)
    }

    fn acl_or_new(&mut self, key: &str, vpc_id: &str) -> String {
        let existing = self.acl_lists.iter().find(|a| {
            (a.id == key || a.name == key)
                && (a.vpc_id.is_none() || a.vpc_id.as_deref() == Some(vpc_id))
        });
        if let Some(a) = existing {
            return a.id.clone();
        }
        let (id, seq) = self.new_id();
        self.acl_lists.push(AclList {
            id: id.clone(),
            seq,
            name: key.into(),
            description: key.into(),
            vpc_id: Some(vpc_id.into()),
        });
        id
    }

    /// Allocates a public address of `zone_id` to `owner` (a given one, or the next free one).
    pub fn allocate_ip(
        &mut self,
        zone_id: &str,
        owner: Owner,
        network_id: Option<&str>,
        vpc_id: Option<&str>,
        address: Option<Ipv4Addr>,
    ) -> Result<String, CsError> {
        let id = match address {
            Some(a) => self.ip_record(zone_id, a)?,
            None => self.next_free_ip(zone_id)?,
        };
        let ip = self.ip_mut(&id).expect("just found or made");
        if ip.owner.is_some() {
            return Err(CsError::invalid(format!(
                "Unable to allocate ip address {}: it is already allocated",
                ip.address
            )));
        }
        ip.owner = Some(owner);
        ip.allocated_ms = Some(now_ms());
        ip.network_id = network_id.map(str::to_owned);
        ip.vpc_id = vpc_id.map(str::to_owned);
        Ok(id)
    }

    /// The record of public address `a` of `zone_id`, made (free) on first sight.
    pub fn ip_record(&mut self, zone_id: &str, a: Ipv4Addr) -> Result<String, CsError> {
        if let Some(ip) = self.public_ips.iter().find(|i| i.address == a) {
            return Ok(ip.id.clone());
        }
        let zone = self
            .zone(zone_id)
            .ok_or_else(|| CsError::invalid("Unknown zone"))?;
        let [x, y, ..] = a.octets();
        if x != 100 || u32::from(y) != 100 + u32::from(zone.index) {
            return Err(CsError::invalid(format!(
                "Unable to find public ip address {a} in zone {}",
                zone.name
            )));
        }
        let (id, seq) = self.new_id();
        self.public_ips.push(PublicIp {
            id: id.clone(),
            seq,
            address: a,
            zone_id: zone_id.into(),
            owner: None,
            allocated_ms: None,
            network_id: None,
            vpc_id: None,
            source_nat: false,
            static_nat_vm: None,
        });
        Ok(id)
    }

    /// Makes the zone's next `n` never-seen addresses visible as free ones, without using them:
    /// `next_free_ip` hands them out in the same order (or skips those allocated by address).
    pub fn show_free_ips(&mut self, zone_id: &str, n: u32) -> Result<(), CsError> {
        let zone = self
            .zone(zone_id)
            .ok_or_else(|| CsError::invalid("Unknown zone"))?;
        let (index, used) = (zone.index, zone.public_ips_used);
        for k in used..(used + n).min(256 * 254) {
            let a = Ipv4Addr::new(100, 100 + index, (k / 254) as u8, (k % 254 + 1) as u8);
            self.ip_record(zone_id, a)?;
        }
        Ok(())
    }

    fn next_free_ip(&mut self, zone_id: &str) -> Result<String, CsError> {
        loop {
            let zone = self
                .zones
                .iter_mut()
                .find(|z| z.id == zone_id)
                .ok_or_else(|| CsError::invalid("Unknown zone"))?;
            let n = zone.public_ips_used;
            if n >= 256 * 254 {
                return Err(CsError::new(
                    code::INSUFFICIENT_CAPACITY_ERROR,
                    cs_code::INSUFFICIENT_ADDRESS_CAPACITY,
                    format!("Insufficient address capacity in zone {}", zone.name),
                ));
            }
            zone.public_ips_used += 1;
            let a = Ipv4Addr::new(100, 100 + zone.index, (n / 254) as u8, (n % 254 + 1) as u8);
            let id = self.ip_record(zone_id, a)?;
            if self.ip(&id).is_some_and(|i| i.owner.is_none()) {
                return Ok(id);
            }
        }
    }

    /// Gives a public address back to the zone, with the rules on it.
    pub fn release_ip(&mut self, id: &str) {
        self.lb_rules.retain(|r| r.public_ip_id != id);
        self.firewall_rules.retain(|r| r.public_ip_id != id);
        if let Some(ip) = self.ip_mut(id) {
            ip.owner = None;
            ip.allocated_ms = None;
            ip.network_id = None;
            ip.vpc_id = None;
            ip.source_nat = false;
            ip.static_nat_vm = None;
        }
    }

    pub fn add_vm(&mut self, spec: VmSpec) -> Result<String, String> {
        let network = match &spec.network {
            Some(key) => self
                .network_ref(key)
                .ok_or_else(|| format!("no network {key:?}"))?,
            None => {
                let zone = spec.zone.as_deref().unwrap_or("zone-1");
                let zone_id = self
                    .zone_ref(zone)
                    .ok_or_else(|| format!("no zone {zone:?}"))?
                    .id
                    .clone();
                let mine =
                    |n: &&super::model::Network| n.owner.as_ref().is_none_or(|o| *o == spec.owner);
                self.networks
                    .iter()
                    .filter(|n| n.zone_id == zone_id)
                    .find(mine)
                    .or_else(|| self.networks.iter().find(|n| n.zone_id == zone_id))
                    .ok_or_else(|| format!("no network in zone {zone:?}"))?
            }
        };
        let (network_id, zone_id) = (network.id.clone(), network.zone_id.clone());
        if let Some(z) = &spec.zone
            && self.zone_ref(z).map(|z| &z.id) != Some(&zone_id)
        {
            return Err(format!("network {} is not in zone {z:?}", network.name));
        }
        let offering = spec.offering.as_deref().unwrap_or("Small Instance");
        let offering_id = self
            .offering_ref(offering)
            .ok_or_else(|| format!("no offering {offering:?}"))?
            .id
            .clone();
        let duplicate = self.vms.iter().any(|v| {
            !v.expunged
                && v.name == spec.name
                && v.owner == spec.owner
                && v.nics.iter().any(|n| n.network_id == network_id)
        });
        if duplicate {
            return Err(format!(
                "a VM named {:?} is already in this network",
                spec.name
            ));
        }
        let ip = match spec.ip {
            Some(ip) => ip,
            None => self.next_guest_ip(&network_id)?,
        };
        let (id, seq) = self.new_id();
        let (nic_id, _) = self.new_id();
        let host = spec.state.on_host().then(|| self.host_for(&zone_id, seq));
        self.vms.push(Vm {
            id: id.clone(),
            seq,
            display_name: spec.display_name.unwrap_or_else(|| spec.name.clone()),
            name: spec.name,
            owner: spec.owner,
            zone_id,
            offering_id,
            state: spec.state,
            transition: None,
            host,
            nics: vec![Nic {
                id: nic_id,
                network_id,
                ip,
                mac: format!(
                    "02:00:{:02x}:{:02x}:{:02x}:{:02x}",
                    seq >> 24 & 0xff,
                    seq >> 16 & 0xff,
                    seq >> 8 & 0xff,
                    seq & 0xff
                ),
                default: true,
            }],
            created_ms: now_ms(),
            expunged: false,
        });
        Ok(id)
    }

    fn next_guest_ip(&mut self, network_id: &str) -> Result<Ipv4Addr, String> {
        let net = self
            .networks
            .iter_mut()
            .find(|n| n.id == network_id)
            .ok_or("no such network")?;
        let host = net.last_host + 1;
        // The last address of the range is its broadcast address.
        if u64::from(host) + 1 >= net.cidr.size() {
            return Err(format!("network {} has no address left", net.name));
        }
        net.last_host = host;
        Ok(Ipv4Addr::from(net.cidr.first() + host))
    }

    /// The hypervisor host a VM lands on: one of its zone's, spread by creation order.
    fn host_for(&self, zone_id: &str, seq: u64) -> String {
        let zone = self.zone(zone_id);
        let hosts = zone.map_or(1, |z| z.hosts.max(1));
        let name = zone.map_or("zone", |z| z.name.as_str());
        format!("{name}-host-{}", seq % u64::from(hosts) + 1)
    }

    /// Applies a lifecycle step; transitional states settle after `duration_ms`.
    pub fn vm_op(&mut self, id: &str, op: VmOp, duration_ms: u64) -> Result<(), String> {
        let now = now_ms();
        let at_ms = now + duration_ms;
        let vm = self
            .vms
            .iter()
            .find(|v| v.id == id && !v.expunged)
            .ok_or("no such VM")?;
        let (zone_id, seq) = (vm.zone_id.clone(), vm.seq);
        let host = self.host_for(&zone_id, seq);
        let vm = self.vm_mut(id).ok_or("no such VM")?;
        let (state, transition) = match op {
            VmOp::Start => (
                VmState::Starting,
                Some(Transition {
                    to: VmState::Running,
                    at_ms,
                    remove: false,
                }),
            ),
            VmOp::Stop => (
                VmState::Stopping,
                Some(Transition {
                    to: VmState::Stopped,
                    at_ms,
                    remove: false,
                }),
            ),
            VmOp::Destroy => (VmState::Destroyed, None),
            VmOp::Expunge => (
                VmState::Expunging,
                Some(Transition {
                    to: VmState::Expunging,
                    at_ms,
                    remove: true,
                }),
            ),
            VmOp::Set(s) => (s, None),
        };
        vm.state = state;
        vm.transition = transition;
        // A VM is placed on a host when it starts and leaves it once stopped (`settle`).
        vm.host = (state.on_host() || state == VmState::Starting).then_some(host);
        self.settle(now);
        Ok(())
    }

    /// Static NAT for a VM: a public address (the given one, or the next free one) allocated to
    /// its owner and pointed at its default NIC. Replaces any it had.
    pub fn set_static_nat(
        &mut self,
        vm_id: &str,
        address: Option<Ipv4Addr>,
    ) -> Result<String, String> {
        let vm = self.vm(vm_id).filter(|v| !v.expunged).ok_or("no such VM")?;
        let (zone_id, owner) = (vm.zone_id.clone(), vm.owner.clone());
        let network_id = vm
            .nics
            .iter()
            .find(|n| n.default)
            .map(|n| n.network_id.clone());
        self.clear_static_nat(vm_id);
        let ip = self
            .allocate_ip(&zone_id, owner, network_id.as_deref(), None, address)
            .map_err(|e| e.text)?;
        if let Some(ip) = self.ip_mut(&ip) {
            ip.static_nat_vm = Some(vm_id.into());
        }
        Ok(ip)
    }

    /// Takes a VM's static NAT away and releases its address.
    pub fn clear_static_nat(&mut self, vm_id: &str) {
        let ids: Vec<String> = self
            .public_ips
            .iter()
            .filter(|i| i.static_nat_vm.as_deref() == Some(vm_id))
            .map(|i| i.id.clone())
            .collect();
        for id in ids {
            self.release_ip(&id);
        }
    }

    /// The static NAT address of a VM, if it has one.
    pub fn static_nat_of(&self, vm_id: &str) -> Option<&PublicIp> {
        self.public_ips
            .iter()
            .find(|i| i.static_nat_vm.as_deref() == Some(vm_id))
    }
}
