//! The simulated project: every resource a client can create, plus id and address allocation.
//! Serialized as a whole to the `--state` file, so only plain data lives here.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use serde::{Deserialize, Serialize};

use crate::catalog;
use crate::cidr::Ipv4Net;
use crate::label_selector::{Labels, Selector};

#[derive(Debug, Default, Serialize, Deserialize)]
pub struct State {
    pub next: NextIds,
    pub servers: BTreeMap<u64, Server>,
    pub load_balancers: BTreeMap<u64, LoadBalancer>,
    pub networks: BTreeMap<u64, Network>,
    pub certificates: BTreeMap<u64, Certificate>,
    pub actions: BTreeMap<u64, Action>,
    /// Dedicated servers of the Robot webservice, by server number. Missing in state files
    /// written before Robot support: empty then.
    #[serde(default)]
    pub robot_servers: BTreeMap<u64, RobotServer>,
    /// The CloudStack cloud (`/client/api`), fixtures included. Missing in state files written
    /// before CloudStack support: a fresh one then.
    #[serde(default)]
    pub cloudstack: crate::cloudstack::model::World,
    /// Ids of actions still running; the only ones `advance` has to look at.
    #[serde(skip)]
    pub running: BTreeSet<u64>,
    /// Server name → id, so creating 10 000 servers does not scan for duplicates each time.
    #[serde(skip)]
    pub server_names: HashMap<String, u64>,
    /// Private IPs taken per network (servers, alias IPs and load balancers).
    #[serde(skip)]
    pub private_ips: HashMap<u64, HashSet<u32>>,
    /// How long new actions run, copied in from the live config whenever the state is locked.
    #[serde(skip)]
    pub action_ms: u64,
    /// Target health as the data plane measures it; `None` while the data plane is off, and
    /// `health_status` is then derived from the server status instead (`wire`).
    #[serde(skip)]
    pub target_health: Option<TargetHealth>,
}

/// Counters for ids and addresses. Ids are never reused, like the real API's.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct NextIds {
    pub server: u64,
    pub load_balancer: u64,
    pub network: u64,
    pub certificate: u64,
    pub action: u64,
    pub public_ip: u64,
    pub mac: u64,
    /// Robot server numbers handed out (offset by [`ROBOT_NUMBER_BASE`]).
    #[serde(default)]
    pub robot_server: u64,
    /// Robot main addresses handed out.
    #[serde(default)]
    pub robot_ip: u64,
}

/// Robot server numbers start above this, so they never look like the small Cloud server ids
/// a test creates next to them (a Cloud id passed where a Robot number belongs stays unknown).
pub const ROBOT_NUMBER_BASE: u64 = 1_000_000;

/// A dedicated (Robot) server. Its wire shape is in `handlers::robot`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RobotServer {
    pub number: u64,
    pub name: String,
    /// Main IPv4 (`server_ip`); `None` for an IPv6-only server.
    pub ipv4: Option<Ipv4Addr>,
    /// Network address of the main /64 (`server_ipv6_net`, shown without prefix length); `None`
    /// for a server Robot reports no subnet for (`server_ipv6_net: ""`).
    #[serde(default)]
    pub ipv6_net: Option<Ipv6Addr>,
    pub product: String,
    pub dc: String,
    pub traffic: String,
    /// `ready` | `in process`
    pub status: String,
    pub cancelled: bool,
    /// `YYYY-MM-DD`
    pub paid_until: String,
    pub powered_on: bool,
    /// Whether the model reports its power state; tower-case models answer `not supported`.
    pub operating_status_supported: bool,
    /// Whether resets are available at all (`reset` in `GET /server/{n}`); without them
    /// `GET /reset/{n}` answers `RESET_NOT_AVAILABLE`.
    pub reset_available: bool,
    pub created_ms: u64,
}

impl RobotServer {
    /// `server_ipv6_net` as Robot shows it: the /64's address without prefix length, or `""`.
    pub fn ipv6_net_shown(&self) -> String {
        self.ipv6_net.map(|n| n.to_string()).unwrap_or_default()
    }

    /// `operating_status` of `GET /reset/{n}`.
    pub fn operating_status(&self) -> &'static str {
        match (self.operating_status_supported, self.powered_on) {
            (false, _) => "not supported",
            (true, true) => "running",
            (true, false) => "shut off",
        }
    }

    /// `type` of `GET /reset/{n}`: the power button only where the power state is known.
    pub fn reset_types(&self) -> &'static [&'static str] {
        if self.operating_status_supported {
            &["power", "power_long", "sw", "hw", "man"]
        } else {
            &["sw", "hw", "man"]
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Server {
    pub id: u64,
    pub name: String,
    pub status: String,
    pub created_ms: u64,
    pub server_type: u64,
    pub location: u64,
    pub image: u64,
    pub labels: Labels,
    pub ipv4: Option<PublicIpv4>,
    pub ipv6: Option<PublicIpv6>,
    pub private_net: Vec<ServerPrivateNet>,
    pub protection_delete: bool,
    pub protection_rebuild: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PublicIpv4 {
    pub id: u64,
    pub ip: Ipv4Addr,
    pub dns_ptr: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PublicIpv6 {
    pub id: u64,
    /// The /64's network address; the API shows it as `<prefix>::/64`.
    pub network: Ipv6Addr,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ServerPrivateNet {
    pub network: u64,
    pub ip: Ipv4Addr,
    pub alias_ips: Vec<Ipv4Addr>,
    pub mac_address: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LoadBalancer {
    pub id: u64,
    pub name: String,
    pub lb_type: u64,
    pub location: u64,
    pub algorithm: String,
    pub labels: Labels,
    pub public_enabled: bool,
    pub ipv4: Ipv4Addr,
    pub ipv4_dns_ptr: String,
    pub ipv6: Ipv6Addr,
    pub ipv6_dns_ptr: String,
    pub private_net: Vec<LbPrivateNet>,
    pub services: Vec<LbService>,
    pub targets: Vec<Target>,
    pub protection_delete: bool,
    pub created_ms: u64,
}

// Load balancer services are stored exactly in their wire shape, so they render as they are.

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LbService {
    pub protocol: String,
    pub listen_port: u16,
    pub destination_port: u16,
    pub proxyprotocol: bool,
    pub http: Option<ServiceHttp>,
    pub health_check: HealthCheck,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServiceHttp {
    pub cookie_name: String,
    pub cookie_lifetime: u64,
    pub certificates: Vec<u64>,
    pub redirect_http: bool,
    pub sticky_sessions: bool,
    pub timeout_idle: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HealthCheck {
    pub protocol: String,
    pub port: u16,
    pub interval: u64,
    pub timeout: u64,
    pub retries: u64,
    pub http: Option<HealthCheckHttp>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HealthCheckHttp {
    pub domain: Option<String>,
    pub path: String,
    pub response: String,
    pub status_codes: Vec<String>,
    pub tls: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LbPrivateNet {
    pub network: u64,
    pub ip: Ipv4Addr,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum TargetKind {
    Server(u64),
    LabelSelector(String),
    Ip(String),
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Target {
    pub kind: TargetKind,
    pub use_private_ip: bool,
    /// Health checks report `unknown` for a while after a target is added, like the real LB.
    pub added_ms: u64,
}

// ---------------------------------------------------------------------------------------------
// Target health measured by the data plane. Plain data behind its own lock: the checkers write
// it without taking the world's lock, rendering reads it while holding the world's lock (so the
// order is always world, then health; never the other way round).

/// One resolved target: a server (reached at its public or, with `use_private_ip`, its private
/// address; both can be targets of the same load balancer at once) or an IP target.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum HealthSubject {
    Server { id: u64, private: bool },
    Ip(String),
}

/// A health status is kept per load balancer, service (listen port) and resolved target.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct HealthKey {
    pub lb: u64,
    pub listen_port: u16,
    pub subject: HealthSubject,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HealthStatus {
    Unknown,
    Healthy,
    Unhealthy,
}

impl HealthStatus {
    /// The value of `health_status[].status` in the API.
    pub fn as_str(self) -> &'static str {
        match self {
            HealthStatus::Unknown => "unknown",
            HealthStatus::Healthy => "healthy",
            HealthStatus::Unhealthy => "unhealthy",
        }
    }
}

/// The measured statuses, shared by the world (for rendering) and the data plane's checkers.
#[derive(Debug, Clone, Default)]
pub struct TargetHealth(Arc<RwLock<HashMap<HealthKey, HealthStatus>>>);

impl TargetHealth {
    /// `unknown` for a target no check has decided yet.
    pub fn status(&self, key: &HealthKey) -> HealthStatus {
        self.0
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(key)
            .copied()
            .unwrap_or(HealthStatus::Unknown)
    }

    /// Records `status` unless the checker writing it was retired (`alive` false): a checker
    /// that is being stopped must not bring back the entry of a target just removed.
    pub fn set_while(&self, key: &HealthKey, status: HealthStatus, alive: &AtomicBool) {
        let mut map = self.0.write().unwrap_or_else(|e| e.into_inner());
        if alive.load(Ordering::SeqCst) {
            map.insert(key.clone(), status);
        }
    }

    pub fn remove(&self, key: &HealthKey) {
        self.0
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(key);
    }

    /// Drops every status `keep` rejects.
    pub fn retain(&self, mut keep: impl FnMut(&HealthKey) -> bool) {
        self.0
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|k, _| keep(k));
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Network {
    pub id: u64,
    pub name: String,
    pub ip_range: Ipv4Net,
    pub subnets: Vec<Subnet>,
    pub routes: Vec<Route>,
    pub labels: Labels,
    pub protection_delete: bool,
    pub expose_routes_to_vswitch: bool,
    pub created_ms: u64,
}

impl Network {
    /// The network's first address: the gateway of every cloud subnet, never a route target.
    pub fn gateway(&self) -> Ipv4Addr {
        Ipv4Addr::from(self.ip_range.first() + 1)
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Subnet {
    pub kind: String,
    pub ip_range: Ipv4Net,
    pub network_zone: String,
    pub gateway: Ipv4Addr,
    pub vswitch_id: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Route {
    pub destination: Ipv4Net,
    pub gateway: Ipv4Addr,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Certificate {
    pub id: u64,
    pub name: String,
    pub labels: Labels,
    pub kind: String,
    pub certificate: Option<String>,
    /// Uploaded, or made by the issuance: what the data plane ends TLS with. Never rendered;
    /// `Debug` redacts it. Missing in state files written before TLS termination.
    #[serde(default)]
    pub private_key: Option<PrivateKeyPem>,
    pub created_ms: u64,
    pub not_valid_before_ms: Option<u64>,
    pub not_valid_after_ms: Option<u64>,
    pub domain_names: Vec<String>,
    pub fingerprint: Option<String>,
    /// Managed certificates only: `pending` | `completed` | `failed`.
    pub issuance: Option<String>,
    pub error: Option<(String, String)>,
}

impl State {
    /// Rebuilds the indexes that are not serialized; call after loading a state file.
    pub fn rebuild_indexes(&mut self) {
        self.server_names = self
            .servers
            .values()
            .map(|s| (s.name.clone(), s.id))
            .collect();
        self.running = self
            .actions
            .values()
            .filter(|a| a.status == "running")
            .map(|a| a.id)
            .collect();
        self.private_ips.clear();
        let claims: Vec<(u64, Ipv4Addr)> = self
            .servers
            .values()
            .flat_map(|s| {
                s.private_net.iter().flat_map(|p| {
                    std::iter::once((p.network, p.ip))
                        .chain(p.alias_ips.iter().map(|a| (p.network, *a)))
                })
            })
            .chain(
                self.load_balancers
                    .values()
                    .flat_map(|lb| lb.private_net.iter().map(|p| (p.network, p.ip))),
            )
            .collect();
        for (net, ip) in claims {
            self.claim_private_ip(net, ip);
        }
    }

    /// The servers a `label_selector` target of `lb` stands for: those whose labels match, in
    /// the load balancer's network zone, by id. What the API lists in the target's nested
    /// `targets`, and what the data plane forwards to.
    pub fn selected_servers<'a>(
        &'a self,
        lb: &LoadBalancer,
        selector: &'a Selector,
    ) -> impl Iterator<Item = &'a Server> + 'a {
        let zone = catalog::location(lb.location).network_zone;
        self.servers.values().filter(move |s| {
            selector.matches(&s.labels) && catalog::location(s.location).network_zone == zone
        })
    }

    pub fn next_id(counter: &mut u64) -> u64 {
        *counter += 1;
        *counter
    }

    /// A unique public IPv4 from 100.64.0.0/10 and IPv6 /64 from 2001:db8::/32: room for four
    /// million servers and load balancers, so benchmarks can tell every one apart by address.
    pub fn alloc_public_ips(&mut self) -> (u64, Ipv4Addr, Ipv6Addr) {
        let n = Self::next_id(&mut self.next.public_ip);
        let v4 = Ipv4Addr::from(u32::from(Ipv4Addr::new(100, 64, 0, 0)) + (n as u32 & 0x003f_ffff));
        let v6 = Ipv6Addr::new(0x2001, 0x0db8, (n >> 16) as u16, n as u16, 0, 0, 0, 0);
        (n, v4, v6)
    }

    /// A Robot server number: the next unused one above [`ROBOT_NUMBER_BASE`].
    pub fn alloc_robot_number(&mut self) -> u64 {
        loop {
            let n = ROBOT_NUMBER_BASE + Self::next_id(&mut self.next.robot_server);
            if !self.robot_servers.contains_key(&n) {
                return n;
            }
        }
    }

    /// A Robot main IPv4 from 198.18.0.0/15 and IPv6 /64 from 3fff::/20 (RFC 9637): ranges the
    /// Cloud side never hands out, so a dedicated server's address never equals a Cloud one.
    pub fn alloc_robot_ips(&mut self) -> (Ipv4Addr, Ipv6Addr) {
        let n = Self::next_id(&mut self.next.robot_ip);
        let v4 = Ipv4Addr::from(u32::from(Ipv4Addr::new(198, 18, 0, 0)) + (n as u32 & 0x0001_ffff));
        let v6 = Ipv6Addr::new(0x3fff, 0, (n >> 16) as u16, n as u16, 0, 0, 0, 0);
        (v4, v6)
    }

    pub fn alloc_mac(&mut self) -> String {
        let n = Self::next_id(&mut self.next.mac);
        format!(
            "86:00:00:{:02x}:{:02x}:{:02x}",
            (n >> 16) as u8,
            (n >> 8) as u8,
            n as u8
        )
    }

    pub fn claim_private_ip(&mut self, network: u64, ip: Ipv4Addr) {
        self.private_ips
            .entry(network)
            .or_default()
            .insert(u32::from(ip));
    }

    pub fn release_private_ip(&mut self, network: u64, ip: Ipv4Addr) {
        if let Some(set) = self.private_ips.get_mut(&network) {
            set.remove(&u32::from(ip));
        }
    }

    pub fn private_ip_taken(&self, network: u64, ip: Ipv4Addr) -> bool {
        self.private_ips
            .get(&network)
            .is_some_and(|s| s.contains(&u32::from(ip)))
    }

    /// The lowest free host address of `subnet` (skipping its network address, the address
    /// after it, which the cloud reserves, and the broadcast address).
    pub fn free_ip_in(&self, network: u64, subnet: &Ipv4Net) -> Option<Ipv4Addr> {
        let taken = self.private_ips.get(&network);
        (subnet.first() + 2..subnet.last())
            .find(|ip| !taken.is_some_and(|t| t.contains(ip)))
            .map(Ipv4Addr::from)
    }
}

// ---------------------------------------------------------------------------------------------
// Actions: the records only; `crate::actions` runs them.

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Action {
    pub id: u64,
    pub command: String,
    /// `running` | `success` | `error`
    pub status: String,
    pub started_ms: u64,
    pub finished_ms: Option<u64>,
    pub finish_at_ms: u64,
    /// The first entry is the resource the action locks.
    pub resources: Vec<ResourceRef>,
    pub error: Option<ActionFailure>,
    pub effect: Effect,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceRef {
    pub id: u64,
    #[serde(rename = "type")]
    pub kind: String,
}

impl ResourceRef {
    pub fn new(kind: &str, id: u64) -> Self {
        ResourceRef {
            id,
            kind: kind.to_owned(),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ActionFailure {
    pub code: String,
    pub message: String,
}

/// What becomes visible only when the action ends. Most mutations apply at once (as the real
/// API shows them) and only lock; these are the state changes clients are known to wait for.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Effect {
    None,
    ServerStatus { server: u64, status: String },
    CertificateIssued { certificate: u64 },
}

/// How long an issued (managed) certificate is valid, like a Let's Encrypt one.
pub const NINETY_DAYS_MS: u64 = 90 * 24 * 3600 * 1000;

/// A certificate's private key in PEM. Kept in the state (the data plane ends TLS with it, and
/// a state file must restore working https services), never rendered; its `Debug` is redacted
/// so no log or panic message of the state carries it.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct PrivateKeyPem(String);

impl PrivateKeyPem {
    pub fn new(pem: impl Into<String>) -> PrivateKeyPem {
        PrivateKeyPem(pem.into())
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for PrivateKeyPem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("PrivateKeyPem(<redacted>)")
    }
}
