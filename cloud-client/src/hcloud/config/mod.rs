//! Configuration of the Hetzner provider: the environment variables HCCM reads, with its
//! defaults, grouped by concern as HCCM's `internal/config` groups them (client, instances,
//! server cache, load balancers, network, routes, Robot). Each group reads its own settings;
//! [`HcloudConfig::from_settings`] puts them together and returns every problem at once.

mod address_family;
mod load_balancers;
#[cfg(test)]
mod tests;

use std::path::PathBuf;
use std::time::Duration;

use crate::credentials;
use crate::error::CloudError;
use crate::robot::RobotConfig;
use crate::values::{SettingsReader, url_problem};

/// The client-side retry policy, shared by every provider's transport.
pub use crate::retry::RetryPolicy;

pub use address_family::AddressFamily;
pub use load_balancers::{
    LbDefaults, LoadBalancersConfig, SHARE_ACROSS_NAMESPACES_EXPECTED, ShareAcrossNamespaces,
    Tenancy,
};

/// Default API endpoint (`HCLOUD_ENDPOINT`).
pub const DEFAULT_ENDPOINT: &str = "https://api.hetzner.cloud/v1";

/// How often `HCLOUD_TOKEN_FILE` is read again. The kubelet takes up to a minute to update a
/// mounted Secret; once it has, the new token is in use within this.
pub const DEFAULT_TOKEN_FILE_POLL: Duration = Duration::from_secs(2);

/// The API token (`HCLOUD_TOKEN`).
pub type Token = crate::secret::Secret;

/// What a missing token is called, whichever way it was (not) given.
const TOKEN_REQUIRED: &str = "HCLOUD_TOKEN (or HCLOUD_TOKEN_FILE) is required";

/// Everything the Hetzner provider needs, by concern. Build with
/// [`from_settings`](Self::from_settings) (the controllers: the values clap read),
/// [`from_env`](Self::from_env), or [`new`](Self::new) and adjust fields (tests).
#[derive(Debug, Clone)]
pub struct HcloudConfig {
    pub client: ClientConfig,
    pub instances: InstancesConfig,
    pub server_cache: ServerCacheConfig,
    pub load_balancers: LoadBalancersConfig,
    pub network: NetworkConfig,
    pub routes: RoutesConfig,
    /// `ROBOT_*`: dedicated servers.
    pub robot: RobotConfig,
    /// Settings that are accepted but deserve a word at startup (logged when the clients are
    /// built), e.g. both `HCLOUD_TOKEN` and `HCLOUD_TOKEN_FILE` set.
    pub startup_warnings: Vec<String>,
}

/// How the API is called: `HCLOUD_TOKEN`, `HCLOUD_ENDPOINT`, `HCLOUD_DEBUG` and the client's own
/// timeouts and retries.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// `HCLOUD_TOKEN` / `HCLOUD_TOKEN_FILE`.
    pub token: Token,
    /// `HCLOUD_TOKEN_FILE`, when the token came from it: read again every `token_file_poll`,
    /// and a changed token is used from then on (see [`crate::credentials`]).
    pub token_file: Option<PathBuf>,
    /// How often `token_file` is read again.
    pub token_file_poll: Duration,
    /// `HCLOUD_ENDPOINT`, without trailing slash.
    pub endpoint: String,
    /// `HCLOUD_REQUEST_TIMEOUT`: per request (HCCM: 15 s).
    pub request_timeout: Duration,
    pub retry: RetryPolicy,
    pub action_poll: ActionPollPolicy,
    /// Requests kept in reserve from the project's rate-limit budget (other tools share it).
    pub rate_limit_reserve: u32,
    /// Value of the `User-Agent` header.
    pub user_agent: String,
    /// `HCLOUD_DEBUG`: log every request and response (token redacted), as HCCM dumps them.
    pub debug: bool,
}

/// `HCLOUD_INSTANCES_*`: what node-controller reads from a server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InstancesConfig {
    /// `HCLOUD_INSTANCES_ADDRESS_FAMILY`.
    pub address_family: AddressFamily,
    /// `HCLOUD_INSTANCES_ZONE_LABEL_ENABLED`.
    pub zone_label_enabled: bool,
}

/// `HCLOUD_SERVER_CACHE_*`: how server lookups are cached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerCacheConfig {
    /// `HCLOUD_SERVER_CACHE_MODE`.
    pub mode: ServerCacheMode,
    /// `HCLOUD_SERVER_CACHE_MAX_AGE`: age after which the shared server list is refreshed.
    pub max_age: Duration,
    /// A miss in a snapshot younger than this is final; an older snapshot is refreshed once first.
    pub miss_fresh: Duration,
    /// `HCLOUD_SERVER_CACHE_RELIST_PERIOD`: until the list is this old, one call to the servers'
    /// action list confirms it when nothing changed; 0 lists every time.
    pub relist_period: Duration,
}

/// `HCLOUD_NETWORK`: the private network nodes, load balancers and routes are in.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NetworkConfig {
    /// The network's id or name.
    pub name_or_id: Option<String>,
}

/// `HCLOUD_NETWORK_ROUTES_ENABLED`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RoutesConfig {
    /// Only meaningful with a network (default true).
    pub enabled: bool,
}

/// How actions are polled: first after `initial`, then ×`factor` up to `max`, giving up after `timeout`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ActionPollPolicy {
    pub initial: Duration,
    pub factor: f64,
    pub max: Duration,
    pub timeout: Duration,
}

impl Default for ActionPollPolicy {
    fn default() -> Self {
        Self {
            initial: Duration::from_millis(100),
            factor: 2.0,
            max: Duration::from_secs(2),
            timeout: Duration::from_secs(300),
        }
    }
}

/// `HCLOUD_SERVER_CACHE_MODE`, HCCM's names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ServerCacheMode {
    /// One shared list of all servers serves every lookup until it is older than the max age.
    #[default]
    All,
    /// Each server is read by itself (by id, or by name) and kept for the max age.
    One,
    /// Each lookup reads the server by itself, nothing is kept.
    Off,
}

impl ServerCacheMode {
    /// HCCM's value names, exactly.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "all" => Some(Self::All),
            "one" => Some(Self::One),
            "off" => Some(Self::Off),
            _ => None,
        }
    }
}

impl HcloudConfig {
    /// Defaults as HCCM has them, with the given token.
    pub fn new(token: Token) -> Self {
        Self {
            client: ClientConfig::new(token),
            instances: InstancesConfig::default(),
            server_cache: ServerCacheConfig::default(),
            load_balancers: LoadBalancersConfig::default(),
            network: NetworkConfig::default(),
            routes: RoutesConfig::default(),
            robot: RobotConfig::default(),
            startup_warnings: Vec::new(),
        }
    }

    /// Reads the HCCM env vars from the process environment. All problems are returned together.
    pub fn from_env() -> Result<Self, CloudError> {
        Self::from_lookup(|k| std::env::var(k).ok())
    }

    /// Like [`from_env`](Self::from_env) with an injectable lookup (tests, maps).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, CloudError> {
        Self::from_settings(lookup("HCLOUD_TOKEN").map(Token::new), lookup)
    }

    /// The one parser of HCCM's `HCLOUD_*` and `ROBOT_*` settings: `token` is `HCLOUD_TOKEN` as
    /// given (kept out of `lookup` so that it never travels as a plain string), `lookup` answers
    /// every other variable by name with its raw value. Every problem is returned at once, each
    /// naming the variable, its value (never a credential's) and what is accepted.
    pub fn from_settings(
        token: Option<Token>,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, CloudError> {
        let mut settings = SettingsReader::new(&lookup);
        let config = Self {
            client: ClientConfig::read(token, &mut settings),
            instances: InstancesConfig::read(&mut settings),
            server_cache: ServerCacheConfig::read(&mut settings),
            load_balancers: LoadBalancersConfig::read(&mut settings),
            network: NetworkConfig::read(&mut settings),
            routes: RoutesConfig::read(&mut settings),
            robot: RobotConfig::read(&mut settings),
            startup_warnings: Vec::new(),
        };
        for problem in config.combination_problems() {
            settings.problem(problem);
        }
        match settings.finish() {
            Ok(startup_warnings) => Ok(Self {
                startup_warnings,
                ..config
            }),
            Err(problems) => Err(CloudError::InvalidConfig { problems }),
        }
    }

    /// Checks the whole configuration and returns every problem found, not just the first (for a
    /// configuration built in code; [`from_settings`](Self::from_settings) checks as it parses).
    pub fn validate(&self) -> Result<(), CloudError> {
        let mut problems = Vec::new();
        if self.client.token.is_empty() {
            problems.push(TOKEN_REQUIRED.to_string());
        }
        problems.extend(url_problem("HCLOUD_ENDPOINT", &self.client.endpoint));
        problems.extend(self.combination_problems());
        if problems.is_empty() {
            Ok(())
        } else {
            Err(CloudError::InvalidConfig { problems })
        }
    }

    /// Values that are each well-formed but wrong in themselves or together.
    fn combination_problems(&self) -> Vec<String> {
        let mut problems = self.client.problems();
        problems.extend(self.load_balancers.problems());
        problems
    }
}

impl ClientConfig {
    fn new(token: Token) -> Self {
        Self {
            token,
            token_file: None,
            token_file_poll: DEFAULT_TOKEN_FILE_POLL,
            endpoint: DEFAULT_ENDPOINT.to_string(),
            request_timeout: Duration::from_secs(15),
            retry: RetryPolicy::default(),
            action_poll: ActionPollPolicy::default(),
            rate_limit_reserve: 2,
            user_agent: format!("cloud-controllers/{}", env!("CARGO_PKG_VERSION")),
            debug: false,
        }
    }

    fn read(token: Option<Token>, settings: &mut SettingsReader) -> Self {
        let given = credentials::given("HCLOUD_TOKEN", token, settings);
        let mut c = match given {
            Some(given) => {
                if let Some(problem) = credentials::token_problem("HCLOUD_TOKEN", &given.secret) {
                    settings.problem(problem);
                }
                Self {
                    token_file: given.file,
                    ..Self::new(given.secret)
                }
            }
            None => {
                // Unreadable file: its problem is recorded; nothing given at all: say so.
                if settings.text("HCLOUD_TOKEN_FILE").is_none() {
                    settings.problem(TOKEN_REQUIRED);
                }
                Self::new(Token::new(""))
            }
        };
        if let Some(endpoint) = settings.url("HCLOUD_ENDPOINT") {
            c.endpoint = endpoint;
        }
        if let Some(t) = settings.duration("HCLOUD_REQUEST_TIMEOUT") {
            c.request_timeout = t;
        }
        if let Some(b) = settings.bool("HCLOUD_DEBUG") {
            c.debug = b;
        }
        c
    }

    fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if self.request_timeout.is_zero() {
            problems.push("HCLOUD_REQUEST_TIMEOUT must be greater than zero".to_string());
        }
        if self.retry.max_attempts == 0 {
            problems.push("retry attempts must be >= 1".to_string());
        }
        problems
    }
}

impl Default for InstancesConfig {
    fn default() -> Self {
        Self {
            address_family: AddressFamily::Ipv4,
            zone_label_enabled: true,
        }
    }
}

impl InstancesConfig {
    fn read(settings: &mut SettingsReader) -> Self {
        let mut c = Self::default();
        if let Some(f) = settings.parsed(
            "HCLOUD_INSTANCES_ADDRESS_FAMILY",
            AddressFamily::parse,
            address_family::ADDRESS_FAMILY_EXPECTED,
        ) {
            c.address_family = f;
        }
        if let Some(b) = settings.bool("HCLOUD_INSTANCES_ZONE_LABEL_ENABLED") {
            c.zone_label_enabled = b;
        }
        c
    }
}

impl Default for ServerCacheConfig {
    fn default() -> Self {
        Self {
            mode: ServerCacheMode::All,
            max_age: Duration::from_secs(10),
            miss_fresh: Duration::from_secs(1),
            relist_period: Duration::from_secs(3600),
        }
    }
}

impl ServerCacheConfig {
    fn read(settings: &mut SettingsReader) -> Self {
        let mut c = Self::default();
        if let Some(m) = settings.parsed(
            "HCLOUD_SERVER_CACHE_MODE",
            ServerCacheMode::parse,
            "must be all, one or off",
        ) {
            c.mode = m;
        }
        if let Some(d) = settings.duration("HCLOUD_SERVER_CACHE_MAX_AGE") {
            c.max_age = d;
        }
        if let Some(d) = settings.duration("HCLOUD_SERVER_CACHE_RELIST_PERIOD") {
            c.relist_period = d;
        }
        c
    }
}

impl NetworkConfig {
    fn read(settings: &mut SettingsReader) -> Self {
        if settings
            .text("HCLOUD_NETWORK_DISABLE_ATTACHED_CHECK")
            .is_some()
        {
            settings.warn(
                "HCLOUD_NETWORK_DISABLE_ATTACHED_CHECK has no effect: no startup check asks the \
                 metadata service whether this host is in the network (a missing network still \
                 fails startup)",
            );
        }
        Self {
            name_or_id: settings.text("HCLOUD_NETWORK"),
        }
    }
}

impl Default for RoutesConfig {
    fn default() -> Self {
        Self { enabled: true }
    }
}

impl RoutesConfig {
    fn read(settings: &mut SettingsReader) -> Self {
        Self {
            enabled: settings
                .bool("HCLOUD_NETWORK_ROUTES_ENABLED")
                .unwrap_or(true),
        }
    }
}
