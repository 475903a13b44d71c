//! The simulated CloudStack as plain data: accounts and their API keys, projects, zones, service
//! offerings, VPCs, networks and ACL lists, VMs, public IPs, load-balancer, firewall and ACL rules,
//! and async jobs. Part of the `--state` file. Ids are UUIDs, as the API shows them; every object
//! also carries `seq`, its creation order, which is the order lists answer in (CloudStack sorts by
//! its internal id).

use std::collections::{BTreeMap, HashMap};
use std::net::Ipv4Addr;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::cidr::Ipv4Net;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct World {
    /// Mixed into every generated UUID, so two worlds do not hand out the same ids.
    pub seed: u64,
    /// The last sequence number handed out (ids and `seq` alike).
    pub next: u64,
    pub settings: Settings,
    pub accounts: Vec<Account>,
    pub projects: Vec<Project>,
    pub zones: Vec<Zone>,
    pub offerings: Vec<Offering>,
    pub vpcs: Vec<Vpc>,
    pub networks: Vec<Network>,
    pub acl_lists: Vec<AclList>,
    pub vms: Vec<Vm>,
    pub public_ips: Vec<PublicIp>,
    pub lb_rules: Vec<LbRule>,
    pub firewall_rules: Vec<FirewallRule>,
    pub acl_rules: Vec<AclRule>,
    pub jobs: BTreeMap<u64, Job>,
    /// API throttling: per account, when its window started and what it has used.
    #[serde(skip)]
    pub throttle_windows: HashMap<String, (u64, u32)>,
}

/// Live settings of the management server (`/_sim/cloudstack/config`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Settings {
    /// `default.page.size`: a list without `page`/`pagesize` answers this many, and `pagesize`
    /// may not exceed it.
    pub default_page_size: usize,
    /// `allow.user.view.destroyed.vm`: whether non-admin callers see `Destroyed`/`Expunging` VMs.
    pub allow_user_view_destroyed_vm: bool,
    /// `api.throttling.*`: at most `max` requests per account within `interval_ms`; `None`
    /// (the default, as CloudStack ships) does not throttle.
    pub throttling: Option<Throttling>,
    /// Every request answers 503 from the proxy in front of the management server.
    pub unreachable: bool,
    /// What `listManagementServersMetrics` and `listCapabilities` report.
    pub version: String,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub struct Throttling {
    pub max: u32,
    pub interval_ms: u64,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            default_page_size: 500,
            allow_user_view_destroyed_vm: false,
            throttling: None,
            unreachable: false,
            version: "4.20.1.0".into(),
        }
    }
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Root admin: sees every account with `listall=true`, destroyed VMs and hypervisor hosts.
    Admin,
    User,
}

/// An account with one user and its key pair. The primary account's keys are the simulator's
/// configured ones (`SimConfig::cloudstack_api_key`) and are not stored here.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Account {
    pub id: String,
    pub seq: u64,
    pub user_id: String,
    pub name: String,
    pub role: Role,
    pub primary: bool,
    pub api_key: Option<String>,
    pub secret_key: Option<String>,
    pub enabled: bool,
}

/// Who owns a resource: an account, or a project (whose resources belong to no member).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Owner {
    Account(String),
    Project(String),
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Project {
    pub id: String,
    pub seq: u64,
    pub name: String,
    pub display_text: String,
    /// Accounts that may use the project (admins may anyway).
    pub members: Vec<String>,
    pub created_ms: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Zone {
    pub id: String,
    pub seq: u64,
    pub name: String,
    /// Public addresses come from `100.(100 + index).0.0/16`.
    pub index: u8,
    /// The zone's public network (what a public IP's `networkid` names).
    pub public_network_id: String,
    /// Public addresses handed out so far.
    pub public_ips_used: u32,
    /// Hypervisor hosts VMs run on, named `<zone>-host-N`.
    pub hosts: u32,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Offering {
    pub id: String,
    pub seq: u64,
    pub name: String,
    pub display_text: String,
    pub cpu_number: u32,
    pub cpu_speed: u32,
    pub memory: u32,
    pub created_ms: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Vpc {
    pub id: String,
    pub seq: u64,
    pub name: String,
    pub zone_id: String,
    pub cidr: Ipv4Net,
    pub owner: Owner,
}

/// What kind of guest network, which decides its services (`listNetworks`' `service`).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum NetworkKind {
    /// An isolated network with a virtual router: Firewall and Lb among its services.
    Isolated,
    /// A VPC tier: NetworkACL and Lb instead of Firewall.
    VpcTier,
    /// A shared network: DHCP, DNS and user data only; no Lb, no Firewall.
    Shared,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Network {
    pub id: String,
    pub seq: u64,
    pub name: String,
    pub zone_id: String,
    pub kind: NetworkKind,
    pub cidr: Ipv4Net,
    /// `None`: a shared network every account may use.
    pub owner: Option<Owner>,
    pub vpc_id: Option<String>,
    /// The ACL list of a VPC tier.
    pub acl_id: Option<String>,
    pub services: Vec<String>,
    /// Host part of the last address handed out (the gateway is 1).
    pub last_host: u32,
    pub created_ms: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AclList {
    pub id: String,
    pub seq: u64,
    pub name: String,
    pub description: String,
    /// `None` for the global `default_allow` / `default_deny`.
    pub vpc_id: Option<String>,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub enum VmState {
    Running,
    Stopped,
    Starting,
    Stopping,
    Migrating,
    Destroyed,
    Expunging,
    Error,
}

impl VmState {
    pub fn parse(s: &str) -> Option<VmState> {
        Some(match s.to_ascii_lowercase().as_str() {
            "running" => VmState::Running,
            "stopped" => VmState::Stopped,
            "starting" => VmState::Starting,
            "stopping" => VmState::Stopping,
            "migrating" => VmState::Migrating,
            "destroyed" => VmState::Destroyed,
            "expunging" => VmState::Expunging,
            "error" => VmState::Error,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            VmState::Running => "Running",
            VmState::Stopped => "Stopped",
            VmState::Starting => "Starting",
            VmState::Stopping => "Stopping",
            VmState::Migrating => "Migrating",
            VmState::Destroyed => "Destroyed",
            VmState::Expunging => "Expunging",
            VmState::Error => "Error",
        }
    }

    /// Whether a VM in this state sits on a hypervisor host (`hostid`/`hostname` are set).
    pub fn on_host(self) -> bool {
        matches!(
            self,
            VmState::Running | VmState::Stopping | VmState::Migrating
        )
    }

    /// `Destroyed` and `Expunging`: hidden from non-admin callers.
    pub fn gone(self) -> bool {
        matches!(self, VmState::Destroyed | VmState::Expunging)
    }
}

/// A state a VM reaches on its own once `at_ms` has passed (`Stopping` → `Stopped`, ...).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub struct Transition {
    pub to: VmState,
    pub at_ms: u64,
    /// The VM is removed for good when it gets there (an expunge).
    pub remove: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Vm {
    pub id: String,
    pub seq: u64,
    pub name: String,
    pub display_name: String,
    pub owner: Owner,
    pub zone_id: String,
    pub offering_id: String,
    pub state: VmState,
    pub transition: Option<Transition>,
    /// The hypervisor host while the VM is on one (admins see it as `hostname`).
    pub host: Option<String>,
    pub nics: Vec<Nic>,
    pub created_ms: u64,
    /// Expunged: gone from every list, but its id is still known to the API layer (asking for
    /// it answers an empty list, not an unknown-id error).
    pub expunged: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Nic {
    pub id: String,
    pub network_id: String,
    pub ip: Ipv4Addr,
    pub mac: String,
    pub default: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PublicIp {
    pub id: String,
    pub seq: u64,
    pub address: Ipv4Addr,
    pub zone_id: String,
    /// `None` while free.
    pub owner: Option<Owner>,
    pub allocated_ms: Option<u64>,
    /// The guest network it is associated with (`associatednetworkid`).
    pub network_id: Option<String>,
    pub vpc_id: Option<String>,
    pub source_nat: bool,
    pub static_nat_vm: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LbRule {
    pub id: String,
    pub seq: u64,
    pub name: String,
    pub description: String,
    pub public_ip_id: String,
    pub public_port: u16,
    pub private_port: u16,
    /// `tcp`, `udp` or `tcp-proxy`.
    pub protocol: String,
    /// `roundrobin`, `leastconn` or `source`.
    pub algorithm: String,
    pub network_id: String,
    pub cidrs: Vec<String>,
    pub owner: Owner,
    pub members: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FirewallRule {
    pub id: String,
    pub seq: u64,
    pub public_ip_id: String,
    /// `tcp`, `udp`, `icmp` or `all`.
    pub protocol: String,
    pub start_port: Option<u16>,
    pub end_port: Option<u16>,
    pub cidrs: Vec<String>,
    pub network_id: String,
    pub owner: Owner,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AclRule {
    pub id: String,
    pub seq: u64,
    pub acl_id: String,
    pub protocol: String,
    pub start_port: Option<u16>,
    pub end_port: Option<u16>,
    pub cidrs: Vec<String>,
    /// `Allow` or `Deny`.
    pub action: String,
    /// `Ingress` or `Egress`.
    pub traffic_type: String,
    pub number: u32,
    /// `reason`: why the rule exists, free text its creator gave (CloudStack 4.12+).
    #[serde(default)]
    pub reason: String,
}

/// An async job. Its effect is made when it is submitted (so lists show it at once); what it
/// answers to `queryAsyncJobResult` changes from pending to its outcome at `done_at_ms`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Job {
    pub id: String,
    pub seq: u64,
    /// The API command that started it (`createLoadBalancerRule`).
    pub command: String,
    pub account_id: String,
    pub user_id: String,
    pub created_ms: u64,
    /// `None`: never finishes.
    pub done_at_ms: Option<u64>,
    pub outcome: JobOutcome,
    /// `jobinstancetype` (`LoadBalancerRule`, `IpAddress`, ...).
    pub instance_type: String,
    pub instance_id: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "snake_case")]
pub enum JobOutcome {
    /// `jobresult` of a successful job (`{"loadbalancer": {...}}`, `{"success": true}`).
    Success(Value),
    Failure {
        errorcode: u16,
        text: String,
    },
}
