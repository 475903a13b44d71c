//! The world's fixtures, id allocation, lookups and the passage of time (VM transitions). What
//! creates and changes things is in `build`.

use std::collections::HashMap;

use super::model::{
    Account, AclList, LbRule, Network, Offering, Owner, Project, PublicIp, Role, Settings, Vm,
    World, Zone,
};
use crate::clock::now_ms;

/// Zones every new world has.
pub const FIXTURE_ZONES: [&str; 2] = ["zone-1", "zone-2"];
/// Service offerings every new world has (CloudStack's own defaults): name, CPUs, MHz, MiB.
pub const FIXTURE_OFFERINGS: [(&str, u32, u32, u32); 2] = [
    ("Small Instance", 1, 500, 512),
    ("Medium Instance", 1, 1000, 1024),
];
/// The primary account (the configured key pair's): a root admin, as CloudStack's `admin`.
pub const PRIMARY_ACCOUNT: &str = "admin";

impl Default for World {
    fn default() -> Self {
        World::new(now_ms() ^ 0x0c5c_10d5_u64.rotate_left(17))
    }
}

impl World {
    /// A world with the fixtures: the primary account, zones `zone-1` and `zone-2`, the two
    /// offerings, the ACL lists `default_allow` and `default_deny`, and in each zone an isolated
    /// network `default-<zone>` (10.1.0.0/16 and 10.2.0.0/16) of the primary account.
    pub fn new(seed: u64) -> World {
        let mut w = World {
            seed,
            next: 0,
            settings: Settings::default(),
            accounts: Vec::new(),
            projects: Vec::new(),
            zones: Vec::new(),
            offerings: Vec::new(),
            vpcs: Vec::new(),
            networks: Vec::new(),
            acl_lists: Vec::new(),
            vms: Vec::new(),
            public_ips: Vec::new(),
            lb_rules: Vec::new(),
            firewall_rules: Vec::new(),
            acl_rules: Vec::new(),
            jobs: Default::default(),
            throttle_windows: HashMap::new(),
        };
        w.add_account(PRIMARY_ACCOUNT, Role::Admin, None);
        for zone in FIXTURE_ZONES {
            w.add_zone(zone);
        }
        for (name, cpu, speed, memory) in FIXTURE_OFFERINGS {
            w.add_offering(name, cpu, speed, memory);
        }
        for name in ["default_allow", "default_deny"] {
            let (id, seq) = w.new_id();
            w.acl_lists.push(AclList {
                id,
                seq,
                name: name.into(),
                description: name.replace('_', " "),
                vpc_id: None,
            });
        }
        let owner = Owner::Account(w.primary().id.clone());
        for (i, zone) in FIXTURE_ZONES.iter().enumerate() {
            let spec = super::build::NetworkSpec {
                name: format!("default-{zone}"),
                zone: (*zone).into(),
                kind: super::model::NetworkKind::Isolated,
                cidr: Some(format!("10.{}.0.0/16", i + 1)),
                owner: Some(owner.clone()),
                vpc: None,
                acl: None,
            };
            if let Err(e) = w.add_network(spec) {
                unreachable!("fixture network: {e}");
            }
        }
        w
    }

    /// A fresh UUID (lower-case, version 4 layout, as cloudstack-go's `IsID` expects) and its
    /// sequence number.
    pub fn new_id(&mut self) -> (String, u64) {
        self.next += 1;
        let a = splitmix(self.seed ^ self.next.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let b = splitmix(a);
        let hi = (a & 0xFFFF_FFFF_FFFF_0FFF) | 0x4000;
        let lo = (b & 0x3FFF_FFFF_FFFF_FFFF) | 0x8000_0000_0000_0000;
        let id = format!(
            "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
            hi >> 32,
            (hi >> 16) & 0xFFFF,
            hi & 0xFFFF,
            lo >> 48,
            lo & 0xFFFF_FFFF_FFFF
        );
        (id, self.next)
    }

    pub fn primary(&self) -> &Account {
        self.accounts
            .iter()
            .find(|a| a.primary)
            .expect("every world has its primary account")
    }

    pub fn account(&self, id: &str) -> Option<&Account> {
        self.accounts.iter().find(|a| a.id == id)
    }

    pub fn account_by_name(&self, name: &str) -> Option<&Account> {
        self.accounts.iter().find(|a| a.name == name)
    }

    pub fn project(&self, id: &str) -> Option<&Project> {
        self.projects.iter().find(|p| p.id == id)
    }

    /// A project by id or name (world building accepts both).
    pub fn project_ref(&self, key: &str) -> Option<&Project> {
        self.projects.iter().find(|p| p.id == key || p.name == key)
    }

    pub fn zone(&self, id: &str) -> Option<&Zone> {
        self.zones.iter().find(|z| z.id == id)
    }

    /// A zone by id or name.
    pub fn zone_ref(&self, key: &str) -> Option<&Zone> {
        self.zones.iter().find(|z| z.id == key || z.name == key)
    }

    pub fn offering(&self, id: &str) -> Option<&Offering> {
        self.offerings.iter().find(|o| o.id == id)
    }

    /// An offering by id or name.
    pub fn offering_ref(&self, key: &str) -> Option<&Offering> {
        self.offerings.iter().find(|o| o.id == key || o.name == key)
    }

    pub fn network(&self, id: &str) -> Option<&Network> {
        self.networks.iter().find(|n| n.id == id)
    }

    /// A network by id or name.
    pub fn network_ref(&self, key: &str) -> Option<&Network> {
        self.networks.iter().find(|n| n.id == key || n.name == key)
    }

    pub fn vpc_name(&self, id: &str) -> String {
        self.vpcs
            .iter()
            .find(|v| v.id == id)
            .map(|v| v.name.clone())
            .unwrap_or_default()
    }

    pub fn acl_list(&self, id: &str) -> Option<&AclList> {
        self.acl_lists.iter().find(|a| a.id == id)
    }

    /// A VM by id, expunged ones included (their ids stay known).
    pub fn vm(&self, id: &str) -> Option<&Vm> {
        self.vms.iter().find(|v| v.id == id)
    }

    pub fn vm_mut(&mut self, id: &str) -> Option<&mut Vm> {
        self.vms.iter_mut().find(|v| v.id == id)
    }

    pub fn ip(&self, id: &str) -> Option<&PublicIp> {
        self.public_ips.iter().find(|i| i.id == id)
    }

    pub fn ip_mut(&mut self, id: &str) -> Option<&mut PublicIp> {
        self.public_ips.iter_mut().find(|i| i.id == id)
    }

    pub fn lb_rule(&self, id: &str) -> Option<&LbRule> {
        self.lb_rules.iter().find(|r| r.id == id)
    }

    pub fn lb_rule_mut(&mut self, id: &str) -> Option<&mut LbRule> {
        self.lb_rules.iter_mut().find(|r| r.id == id)
    }

    /// The owner's `account`/`domain`/`project` fields as every response shows them: a project's
    /// resources name the project and no account.
    pub fn owner_fields(&self, owner: &Owner) -> serde_json::Map<String, serde_json::Value> {
        let mut m = serde_json::Map::new();
        match owner {
            Owner::Account(id) => {
                let name = self.account(id).map(|a| a.name.clone()).unwrap_or_default();
                m.insert("account".into(), name.into());
            }
            Owner::Project(id) => {
                let name = self.project(id).map(|p| p.name.clone()).unwrap_or_default();
                m.insert("projectid".into(), id.clone().into());
                m.insert("project".into(), name.into());
            }
        }
        m.insert("domainid".into(), ROOT_DOMAIN_ID.into());
        m.insert("domain".into(), "ROOT".into());
        m.insert("domainpath".into(), "ROOT".into());
        m
    }

    /// Lets VM transitions that are due happen (`Stopping` → `Stopped`, `Expunging` → gone).
    pub fn settle(&mut self, now: u64) {
        let mut removed = Vec::new();
        for vm in self.vms.iter_mut().filter(|v| !v.expunged) {
            let Some(t) = vm.transition.filter(|t| t.at_ms <= now) else {
                continue;
            };
            vm.transition = None;
            vm.state = t.to;
            if !t.to.on_host() {
                vm.host = None;
            }
            if t.remove {
                vm.expunged = true;
                removed.push(vm.id.clone());
            }
        }
        for id in removed {
            self.forget_vm(&id);
        }
    }

    /// What goes with an expunged VM: its static NAT and its load-balancer memberships.
    pub fn forget_vm(&mut self, id: &str) {
        for ip in &mut self.public_ips {
            if ip.static_nat_vm.as_deref() == Some(id) {
                ip.static_nat_vm = None;
            }
        }
        for rule in &mut self.lb_rules {
            rule.members.retain(|m| m != id);
        }
    }
}

/// The ROOT domain's id, the one domain of the simulator.
pub const ROOT_DOMAIN_ID: &str = "7c4a5e52-0000-4000-8000-00000000d001";

/// splitmix64: spreads a counter over 64 bits.
fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_look_like_uuids_and_differ() {
        let mut w = World::new(1);
        let (a, _) = w.new_id();
        let (b, _) = w.new_id();
        assert_ne!(a, b);
        for id in [&a, &b] {
            assert_eq!(id.len(), 36);
            let parts: Vec<&str> = id.split('-').collect();
            assert_eq!(
                parts.iter().map(|p| p.len()).collect::<Vec<_>>(),
                [8, 4, 4, 4, 12]
            );
            assert!(
                id.chars()
                    .all(|c| c == '-' || c.is_ascii_digit() || ('a'..='f').contains(&c))
            );
        }
    }

    #[test]
    fn fixtures() {
        let w = World::new(7);
        assert_eq!(w.primary().name, "admin");
        assert!(w.zone_ref("zone-2").is_some());
        assert!(w.offering_ref("Medium Instance").is_some());
        let net = w.network_ref("default-zone-1").unwrap();
        assert!(net.services.iter().any(|s| s == "Firewall"));
        assert!(net.services.iter().any(|s| s == "Lb"));
        // The isolated networks' source NAT addresses.
        assert_eq!(w.public_ips.iter().filter(|i| i.source_nat).count(), 2);
    }
}
