//! Configuration of the Hetzner provider, readable from the same env vars HCCM uses, with HCCM's
//! defaults (the `HCLOUD_LOAD_BALANCERS_*` ones are listed in docs/annotations.md).

use std::collections::BTreeSet;
use std::time::Duration;

use crate::error::CloudError;
use crate::values::{BOOL_EXPECTED, DURATION_EXPECTED, parse_bool, parse_duration};

/// Default API endpoint (`HCLOUD_ENDPOINT`).
pub const DEFAULT_ENDPOINT: &str = "https://api.hetzner.cloud/v1";

/// How often `HCLOUD_TOKEN_FILE` is read again. The kubelet takes up to a minute to update a
/// mounted Secret; once it has, the new token is in use within this.
pub const DEFAULT_TOKEN_FILE_POLL: Duration = Duration::from_secs(2);

/// The API token (`HCLOUD_TOKEN`).
pub type Token = crate::secret::Secret;

/// `HCLOUD_INSTANCES_ADDRESS_FAMILY`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AddressFamily {
    #[default]
    Ipv4,
    Ipv6,
    DualStack,
}

impl AddressFamily {
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "ipv4" => Some(AddressFamily::Ipv4),
            "ipv6" => Some(AddressFamily::Ipv6),
            "dualstack" => Some(AddressFamily::DualStack),
            _ => None,
        }
    }

    pub fn has_v4(self) -> bool {
        matches!(self, AddressFamily::Ipv4 | AddressFamily::DualStack)
    }

    pub fn has_v6(self) -> bool {
        matches!(self, AddressFamily::Ipv6 | AddressFamily::DualStack)
    }
}

/// Process-wide load-balancer defaults (`HCLOUD_LOAD_BALANCERS_*`); annotations override them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LbDefaults {
    pub location: Option<String>,
    pub network_zone: Option<String>,
    pub lb_type: Option<String>,
    pub algorithm: Option<String>,
    pub use_private_ip: bool,
    pub disable_private_ingress: bool,
    pub disable_public_network: Option<bool>,
    pub disable_ipv6: bool,
    pub uses_proxyprotocol: Option<bool>,
    pub private_subnet_ip_range: Option<String>,
    pub health_check_interval: Option<Duration>,
    pub health_check_timeout: Option<Duration>,
    pub health_check_retries: Option<u32>,
    /// `HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_KUBE_PROXY`: the default of the
    /// `health-check-kube-proxy` annotation.
    pub health_check_kube_proxy: bool,
    /// `HCLOUD_LOAD_BALANCERS_SHARE_ACROSS_NAMESPACES` and `HCLOUD_LOAD_BALANCERS_ADOPT_BY_NAME`:
    /// whose load balancers a Service may write to (no annotation overrides them; the rules are
    /// `load_balancer::tenancy`'s).
    pub tenancy: Tenancy,
}

/// `HCLOUD_LOAD_BALANCERS_SHARE_ACROSS_NAMESPACES`: which namespaces' Services may be on one load
/// balancer together. Within a namespace they always may.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum ShareAcrossNamespaces {
    /// Unset: each namespace on its own load balancers.
    #[default]
    Never,
    /// `team-a,team-a-canary;ingress,platform`: the namespaces of one group share with each other.
    Groups(Vec<BTreeSet<String>>),
    /// `*`: every namespace with every other (what the controller did before it asked).
    Any,
}

impl ShareAcrossNamespaces {
    /// Parses the setting's value; `None` when a group names no namespace or a name is not a
    /// namespace name.
    pub fn parse(value: &str) -> Option<Self> {
        let value = value.trim();
        if value.is_empty() {
            return Some(Self::Never);
        }
        if value == "*" {
            return Some(Self::Any);
        }
        let mut groups = Vec::new();
        for group in value.split(';').filter(|g| !g.trim().is_empty()) {
            let names: BTreeSet<String> = group.split(',').map(|n| n.trim().to_owned()).collect();
            if names.iter().any(|n| !is_namespace_name(n)) {
                return None;
            }
            groups.push(names);
        }
        Some(Self::Groups(groups))
    }

    /// Whether Services of namespaces `a` and `b` may be on one load balancer.
    pub fn allows(&self, a: &str, b: &str) -> bool {
        a == b
            || match self {
                Self::Never => false,
                Self::Groups(groups) => groups.iter().any(|g| g.contains(a) && g.contains(b)),
                Self::Any => true,
            }
    }
}

/// What the setting accepts, for its error message.
pub const SHARE_ACROSS_NAMESPACES_EXPECTED: &str = "`*`, or groups of namespace names separated \
     by `;`, each group's names separated by `,` (e.g. `team-a,team-a-canary;ingress,platform`)";

/// A DNS label, as namespace names are.
fn is_namespace_name(n: &str) -> bool {
    !n.is_empty()
        && n.len() <= 63
        && n.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !n.starts_with('-')
        && !n.ends_with('-')
}

/// The administrator's rules for whose load balancers a Service may write to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tenancy {
    pub share_across_namespaces: ShareAcrossNamespaces,
    /// `HCLOUD_LOAD_BALANCERS_ADOPT_BY_NAME`: adopt a load balancer nobody in the cluster made,
    /// by its name alone, as HCCM does (off by default; for a migration).
    pub adopt_by_name: bool,
}

/// Client-side retry policy for retryable errors (jittered exponential backoff).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Total attempts including the first (1 = no retry).
    pub max_attempts: u32,
    pub base: Duration,
    pub cap: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: 5,
            base: Duration::from_millis(500),
            cap: Duration::from_secs(30),
        }
    }
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

/// Everything the Hetzner provider needs. Build with [`HcloudConfig::from_settings`] (the controllers:
/// the values clap read), [`HcloudConfig::from_env`], or [`HcloudConfig::new`] and adjust fields
/// (tests); each reports all problems at once.
#[derive(Debug, Clone)]
pub struct HcloudConfig {
    /// `HCLOUD_TOKEN` / `HCLOUD_TOKEN_FILE`.
    pub token: Token,
    /// `HCLOUD_TOKEN_FILE`, when the token came from it: read again every `token_file_poll`,
    /// and a changed token is used from then on (see [`crate::credentials`]).
    pub token_file: Option<std::path::PathBuf>,
    /// How often `token_file` is read again.
    pub token_file_poll: Duration,
    /// `HCLOUD_ENDPOINT`, without trailing slash.
    pub endpoint: String,
    /// Per-request timeout (HCCM: 15 s).
    pub request_timeout: Duration,
    /// `HCLOUD_NETWORK`: network id or name.
    pub network: Option<String>,
    /// `HCLOUD_NETWORK_ROUTES_ENABLED` (only meaningful with a network).
    pub network_routes_enabled: bool,
    /// `HCLOUD_LOAD_BALANCERS_ENABLED`.
    pub load_balancers_enabled: bool,
    /// `HCLOUD_INSTANCES_ADDRESS_FAMILY`.
    pub address_family: AddressFamily,
    /// `HCLOUD_INSTANCES_ZONE_LABEL_ENABLED`.
    pub zone_label_enabled: bool,
    /// `HCLOUD_SERVER_CACHE_MAX_AGE`: age after which the shared server list is refreshed.
    pub server_cache_max_age: Duration,
    /// A miss in a snapshot younger than this is final; an older snapshot is refreshed once first.
    pub server_cache_miss_fresh: Duration,
    /// `HCLOUD_LOAD_BALANCERS_*` defaults.
    pub lb_defaults: LbDefaults,
    pub retry: RetryPolicy,
    pub action_poll: ActionPollPolicy,
    /// Requests kept in reserve from the project's rate-limit budget (other tools share it).
    pub rate_limit_reserve: u32,
    /// Value of the `User-Agent` header.
    pub user_agent: String,
    /// `HCLOUD_DEBUG`: log every request and response (token redacted), as HCCM dumps them.
    pub debug: bool,
    /// `HCLOUD_SERVER_CACHE_MODE`: how server lookups are cached.
    pub server_cache_mode: ServerCacheMode,
    /// `ROBOT_*`: dedicated servers.
    pub robot: crate::robot::RobotConfig,
    /// Shadow mode (`--dry-run`): writes are planned here instead of being sent.
    pub planned_writes: Option<std::sync::Arc<crate::shadow::PlannedWrites>>,
    /// Settings that are accepted but deserve a word at startup (logged when the provider is
    /// built), e.g. both `HCLOUD_TOKEN` and `HCLOUD_TOKEN_FILE` set.
    pub startup_warnings: Vec<String>,
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
            token,
            token_file: None,
            token_file_poll: DEFAULT_TOKEN_FILE_POLL,
            endpoint: DEFAULT_ENDPOINT.to_string(),
            request_timeout: Duration::from_secs(15),
            network: None,
            network_routes_enabled: true,
            load_balancers_enabled: true,
            address_family: AddressFamily::Ipv4,
            zone_label_enabled: true,
            server_cache_max_age: Duration::from_secs(10),
            server_cache_miss_fresh: Duration::from_secs(1),
            lb_defaults: LbDefaults::default(),
            retry: RetryPolicy::default(),
            action_poll: ActionPollPolicy::default(),
            rate_limit_reserve: 2,
            user_agent: format!("cloud-controllers/{}", env!("CARGO_PKG_VERSION")),
            debug: false,
            server_cache_mode: ServerCacheMode::All,
            robot: crate::robot::RobotConfig::default(),
            planned_writes: None,
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

    /// The one parser of HCCM's `HCLOUD_*` settings: `token` is `HCLOUD_TOKEN` as given (kept out
    /// of `lookup` so that it never travels as a plain string), `lookup` answers every other
    /// variable by name with its raw value. Every problem is returned at once, each naming the
    /// variable, its value (never the token's) and what is accepted.
    ///
    /// An empty value counts as unset, as in HCCM (whose templates render `HCLOUD_NETWORK=""` when
    /// no network is configured).
    pub fn from_settings(
        token: Option<Token>,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, CloudError> {
        let get = |k: &str| {
            lookup(k)
                .filter(|v| !v.trim().is_empty())
                .map(|v| v.trim().to_string())
        };
        let mut problems = Vec::new();

        let token_file = get("HCLOUD_TOKEN_FILE");
        let mut startup_warnings = Vec::new();
        let watched = token.is_none().then(|| token_file.clone()).flatten();
        let token = match (token, token_file) {
            (Some(t), None) => {
                if t.is_empty() {
                    problems.push("HCLOUD_TOKEN is empty".to_string());
                }
                t
            }
            (None, Some(path)) => match std::fs::read_to_string(&path) {
                Ok(t) if t.trim().is_empty() => {
                    problems.push(format!("HCLOUD_TOKEN_FILE={path}: the file is empty"));
                    Token::new("")
                }
                Ok(t) => Token::new(t),
                Err(e) => {
                    problems.push(format!("HCLOUD_TOKEN_FILE={path}: cannot read: {e}"));
                    Token::new("")
                }
            },
            // HCCM reads the file only when the variable is unset; so does this, but says so.
            (Some(t), Some(path)) => {
                startup_warnings.push(format!(
                    "HCLOUD_TOKEN and HCLOUD_TOKEN_FILE={path} are both set: using HCLOUD_TOKEN, \
                     as HCCM does; unset one of them"
                ));
                if t.is_empty() {
                    problems.push("HCLOUD_TOKEN is empty".to_string());
                }
                t
            }
            (None, None) => {
                problems.push(TOKEN_REQUIRED.to_string());
                Token::new("")
            }
        };
        // A space, newline or control character inside cannot go into the Authorization header
        // (typically a Secret holding two lines). Never quote the value: it is a credential.
        if token
            .expose()
            .chars()
            .any(|c| c.is_whitespace() || c.is_control())
        {
            problems.push(format!(
                "HCLOUD_TOKEN contains whitespace or control characters ({} characters, value not \
                 shown): expected the 64-character API token alone",
                token.len()
            ));
        }
        let mut c = Self::new(token);
        c.token_file = watched.map(std::path::PathBuf::from);
        c.startup_warnings = startup_warnings;

        if let Some(v) = get("HCLOUD_ENDPOINT") {
            c.endpoint = v.trim_end_matches('/').to_string();
            if let Some(problem) = crate::values::unexpanded_reference("HCLOUD_ENDPOINT", &v) {
                problems.push(problem);
            } else if !(c.endpoint.starts_with("http://") || c.endpoint.starts_with("https://")) {
                problems.push(format!(
                    "HCLOUD_ENDPOINT={v:?}: must be an http:// or https:// URL"
                ));
            }
        }
        c.network = get("HCLOUD_NETWORK");
        if let Some(v) = get("HCLOUD_SERVER_CACHE_MODE") {
            match ServerCacheMode::parse(&v) {
                Some(m) => c.server_cache_mode = m,
                None => problems.push(format!(
                    "HCLOUD_SERVER_CACHE_MODE={v:?}: must be all, one or off"
                )),
            }
        }
        if get("HCLOUD_NETWORK_DISABLE_ATTACHED_CHECK").is_some() {
            c.startup_warnings.push(
                "HCLOUD_NETWORK_DISABLE_ATTACHED_CHECK has no effect: no startup check asks the \
                 metadata service whether this host is in the network (a missing network still \
                 fails startup)"
                    .to_string(),
            );
        }
        if let Some(v) = get("HCLOUD_INSTANCES_ADDRESS_FAMILY") {
            match AddressFamily::parse(&v) {
                Some(f) => c.address_family = f,
                None => problems.push(format!(
                    "HCLOUD_INSTANCES_ADDRESS_FAMILY={v:?}: must be ipv4, ipv6 or dualstack"
                )),
            }
        }

        let bool_var = |name: &str, problems: &mut Vec<String>| {
            let v = get(name)?;
            let b = parse_bool(&v);
            if b.is_none() {
                problems.push(format!("{name}={v:?}: not {BOOL_EXPECTED}"));
            }
            b
        };
        let d = &mut c;
        for (name, target) in [
            (
                "HCLOUD_NETWORK_ROUTES_ENABLED",
                &mut d.network_routes_enabled,
            ),
            (
                "HCLOUD_LOAD_BALANCERS_ENABLED",
                &mut d.load_balancers_enabled,
            ),
            (
                "HCLOUD_INSTANCES_ZONE_LABEL_ENABLED",
                &mut d.zone_label_enabled,
            ),
            ("HCLOUD_DEBUG", &mut d.debug),
            (
                "HCLOUD_LOAD_BALANCERS_USE_PRIVATE_IP",
                &mut d.lb_defaults.use_private_ip,
            ),
            (
                "HCLOUD_LOAD_BALANCERS_DISABLE_PRIVATE_INGRESS",
                &mut d.lb_defaults.disable_private_ingress,
            ),
            (
                "HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_KUBE_PROXY",
                &mut d.lb_defaults.health_check_kube_proxy,
            ),
            (
                "HCLOUD_LOAD_BALANCERS_DISABLE_IPV6",
                &mut d.lb_defaults.disable_ipv6,
            ),
            (
                "HCLOUD_LOAD_BALANCERS_ADOPT_BY_NAME",
                &mut d.lb_defaults.tenancy.adopt_by_name,
            ),
        ] {
            if let Some(b) = bool_var(name, &mut problems) {
                *target = b;
            }
        }
        for (name, target) in [
            (
                "HCLOUD_LOAD_BALANCERS_DISABLE_PUBLIC_NETWORK",
                &mut d.lb_defaults.disable_public_network,
            ),
            (
                "HCLOUD_LOAD_BALANCERS_USES_PROXYPROTOCOL",
                &mut d.lb_defaults.uses_proxyprotocol,
            ),
        ] {
            if let Some(b) = bool_var(name, &mut problems) {
                *target = Some(b);
            }
        }

        if let Some(v) = get("HCLOUD_LOAD_BALANCERS_SHARE_ACROSS_NAMESPACES") {
            match ShareAcrossNamespaces::parse(&v) {
                Some(s) => d.lb_defaults.tenancy.share_across_namespaces = s,
                None => problems.push(format!(
                    "HCLOUD_LOAD_BALANCERS_SHARE_ACROSS_NAMESPACES={v:?}: expected \
                     {SHARE_ACROSS_NAMESPACES_EXPECTED}"
                )),
            }
        }

        let duration_var = |name: &str, problems: &mut Vec<String>| {
            let v = get(name)?;
            let d = parse_duration(&v);
            if d.is_none() {
                problems.push(format!("{name}={v:?}: expected {DURATION_EXPECTED}"));
            }
            d
        };
        for (name, target) in [
            ("HCLOUD_SERVER_CACHE_MAX_AGE", &mut d.server_cache_max_age),
            ("HCLOUD_REQUEST_TIMEOUT", &mut d.request_timeout),
        ] {
            if let Some(v) = duration_var(name, &mut problems) {
                *target = v;
            }
        }
        for (name, target) in [
            (
                "HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_INTERVAL",
                &mut d.lb_defaults.health_check_interval,
            ),
            (
                "HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_TIMEOUT",
                &mut d.lb_defaults.health_check_timeout,
            ),
        ] {
            if let Some(v) = duration_var(name, &mut problems) {
                *target = Some(v);
            }
        }
        if let Some(v) = get("HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_RETRIES") {
            match v.parse::<u32>() {
                Ok(n) => c.lb_defaults.health_check_retries = Some(n),
                Err(_) => problems.push(format!(
                    "HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_RETRIES={v:?}: expected a non-negative integer"
                )),
            }
        }
        c.lb_defaults.location = get("HCLOUD_LOAD_BALANCERS_LOCATION");
        c.lb_defaults.network_zone = get("HCLOUD_LOAD_BALANCERS_NETWORK_ZONE");
        c.lb_defaults.lb_type = get("HCLOUD_LOAD_BALANCERS_TYPE");
        // Lowercased like HCCM's parseLoadBalancerAlgorithmType.
        c.lb_defaults.algorithm =
            get("HCLOUD_LOAD_BALANCERS_ALGORITHM_TYPE").map(|v| v.to_ascii_lowercase());
        c.lb_defaults.private_subnet_ip_range =
            get("HCLOUD_LOAD_BALANCERS_PRIVATE_SUBNET_IP_RANGE");

        match crate::robot::RobotConfig::from_lookup(&lookup) {
            Ok(robot) => c.robot = robot,
            Err(robot_problems) => problems.extend(robot_problems),
        }
        problems.extend(c.combination_problems());
        if problems.is_empty() {
            Ok(c)
        } else {
            Err(CloudError::InvalidConfig { problems })
        }
    }

    /// Checks the whole configuration and returns every problem found, not just the first (for a
    /// configuration built in code; [`from_settings`](Self::from_settings) checks as it parses).
    pub fn validate(&self) -> Result<(), CloudError> {
        let mut problems = Vec::new();
        if self.token.is_empty() {
            problems.push(TOKEN_REQUIRED.to_string());
        }
        if !(self.endpoint.starts_with("http://") || self.endpoint.starts_with("https://")) {
            problems.push(format!(
                "HCLOUD_ENDPOINT={:?}: must be an http:// or https:// URL",
                self.endpoint
            ));
        }
        problems.extend(self.combination_problems());
        if problems.is_empty() {
            Ok(())
        } else {
            Err(CloudError::InvalidConfig { problems })
        }
    }

    /// Values that are each well-formed but wrong in themselves or together.
    fn combination_problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if self.request_timeout.is_zero() {
            problems.push("HCLOUD_REQUEST_TIMEOUT must be greater than zero".to_string());
        }
        if self.lb_defaults.location.is_some() && self.lb_defaults.network_zone.is_some() {
            problems.push(
                "HCLOUD_LOAD_BALANCERS_LOCATION and HCLOUD_LOAD_BALANCERS_NETWORK_ZONE are mutually exclusive".into(),
            );
        }
        if let Some(a) = &self.lb_defaults.algorithm
            && a != "round_robin"
            && a != "least_connections"
        {
            problems.push(format!(
                "HCLOUD_LOAD_BALANCERS_ALGORITHM_TYPE={a:?}: expected round_robin or least_connections"
            ));
        }
        // Checked per Service otherwise, where the Warning would blame an annotation nobody set.
        if let Some(r) = &self.lb_defaults.private_subnet_ip_range
            && !r.split_once('/').is_some_and(|(ip, len)| {
                ip.parse::<std::net::Ipv4Addr>().is_ok() && len.parse::<u8>().is_ok_and(|l| l <= 32)
            })
        {
            problems.push(format!(
                "HCLOUD_LOAD_BALANCERS_PRIVATE_SUBNET_IP_RANGE={r:?}: expected an IPv4 CIDR such as 10.0.1.0/24"
            ));
        }
        if self.retry.max_attempts == 0 {
            problems.push("retry attempts must be >= 1".to_string());
        }
        problems
    }
}

/// What a missing token is called, whichever way it was (not) given.
const TOKEN_REQUIRED: &str = "HCLOUD_TOKEN (or HCLOUD_TOKEN_FILE) is required";

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    const TOKEN: &str = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789ab";

    fn cfg(pairs: &[(&str, &str)]) -> Result<HcloudConfig, CloudError> {
        let m: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        HcloudConfig::from_lookup(|k| m.get(k).cloned())
    }

    #[test]
    fn defaults_match_hccm() {
        let c = cfg(&[("HCLOUD_TOKEN", TOKEN)]).unwrap();
        assert_eq!(c.endpoint, DEFAULT_ENDPOINT);
        assert_eq!(c.request_timeout, Duration::from_secs(15));
        assert_eq!(c.server_cache_max_age, Duration::from_secs(10));
        assert_eq!(c.address_family, AddressFamily::Ipv4);
        assert!(c.zone_label_enabled && c.load_balancers_enabled && c.network_routes_enabled);
        assert!(c.user_agent.starts_with("cloud-controllers/"));
    }

    #[test]
    fn reports_all_problems_at_once() {
        let err = cfg(&[
            ("HCLOUD_INSTANCES_ADDRESS_FAMILY", "ipv5"),
            ("HCLOUD_SERVER_CACHE_MAX_AGE", "soon"),
            ("HCLOUD_LOAD_BALANCERS_LOCATION", "fsn1"),
            ("HCLOUD_LOAD_BALANCERS_NETWORK_ZONE", "eu-central"),
            ("HCLOUD_LOAD_BALANCERS_USE_PRIVATE_IP", "yes"),
            ("HCLOUD_LOAD_BALANCERS_ALGORITHM_TYPE", "random"),
        ])
        .unwrap_err();
        let CloudError::InvalidConfig { problems } = &err else {
            panic!("{err}")
        };
        assert_eq!(problems.len(), 6, "one line per problem: {problems:#?}");
        for needle in [
            "HCLOUD_TOKEN",
            "ipv5",
            "soon",
            "mutually exclusive",
            "yes",
            "random",
        ] {
            assert!(
                err.to_string().contains(needle),
                "{needle} missing in {err}"
            );
        }
    }

    #[test]
    fn token_file_is_trimmed_and_never_printed() {
        let dir = std::env::temp_dir().join(format!("cc-token-{}", std::process::id()));
        std::fs::write(&dir, format!("  {TOKEN}\n")).unwrap();
        let c = cfg(&[
            ("HCLOUD_TOKEN_FILE", dir.to_str().unwrap()),
            ("HCLOUD_ENDPOINT", "http://x/v1/"),
        ])
        .unwrap();
        std::fs::remove_file(&dir).ok();
        assert_eq!(c.token.expose(), TOKEN);
        assert_eq!(c.endpoint, "http://x/v1");
        let dbg = format!("{c:?} {} {:?}", c.token, c.token);
        assert!(!dbg.contains(TOKEN), "{dbg}");
        assert!(dbg.contains("<redacted>"));
    }

    #[test]
    fn parses_lb_defaults_and_family() {
        let c = cfg(&[
            ("HCLOUD_TOKEN", TOKEN),
            ("HCLOUD_NETWORK", "k8s"),
            ("HCLOUD_INSTANCES_ADDRESS_FAMILY", "dualstack"),
            ("HCLOUD_INSTANCES_ZONE_LABEL_ENABLED", "false"),
            ("HCLOUD_SERVER_CACHE_MAX_AGE", "1m"),
            ("HCLOUD_LOAD_BALANCERS_TYPE", "lb21"),
            ("HCLOUD_LOAD_BALANCERS_USE_PRIVATE_IP", "1"),
            ("HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_INTERVAL", "5"),
            ("HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_TIMEOUT", "3s"),
            ("HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_RETRIES", "2"),
            ("HCLOUD_LOAD_BALANCERS_USES_PROXYPROTOCOL", "T"),
            ("HCLOUD_LOAD_BALANCERS_ALGORITHM_TYPE", "Least_Connections"),
        ])
        .unwrap();
        assert_eq!(c.network.as_deref(), Some("k8s"));
        assert_eq!(c.address_family, AddressFamily::DualStack);
        assert!(!c.zone_label_enabled);
        assert_eq!(c.server_cache_max_age, Duration::from_secs(60));
        assert_eq!(c.lb_defaults.lb_type.as_deref(), Some("lb21"));
        assert!(c.lb_defaults.use_private_ip);
        assert_eq!(
            c.lb_defaults.health_check_interval,
            Some(Duration::from_secs(5))
        );
        assert_eq!(
            c.lb_defaults.health_check_timeout,
            Some(Duration::from_secs(3))
        );
        assert_eq!(c.lb_defaults.health_check_retries, Some(2));
        assert_eq!(c.lb_defaults.uses_proxyprotocol, Some(true));
        assert_eq!(
            c.lb_defaults.algorithm.as_deref(),
            Some("least_connections")
        );
    }

    #[test]
    fn an_endpoint_the_kubelet_could_not_expand_stops_startup_and_says_why() {
        let err = cfg(&[
            ("HCLOUD_TOKEN", TOKEN),
            (
                "HCLOUD_ENDPOINT",
                "http://$(CC_SIMULATOR_SERVICE_HOST):$(CC_SIMULATOR_SERVICE_PORT)/v1",
            ),
        ])
        .unwrap_err();
        let CloudError::InvalidConfig { problems } = &err else {
            panic!("{err}")
        };
        assert_eq!(problems.len(), 1, "{problems:#?}");
        assert!(
            problems[0].contains("still holds $(CC_SIMULATOR_SERVICE_HOST)"),
            "{problems:#?}"
        );
    }

    #[test]
    fn empty_values_are_unset_as_in_hccm() {
        let c = cfg(&[
            ("HCLOUD_TOKEN", TOKEN),
            ("HCLOUD_ENDPOINT", ""),
            ("HCLOUD_NETWORK", " "),
            ("HCLOUD_INSTANCES_ADDRESS_FAMILY", ""),
            ("HCLOUD_SERVER_CACHE_MODE", ""),
        ])
        .unwrap();
        assert_eq!(c.endpoint, DEFAULT_ENDPOINT);
        assert_eq!(c.network, None);
        assert_eq!(c.server_cache_mode, ServerCacheMode::All);
        assert!(c.startup_warnings.is_empty());
    }

    #[test]
    fn hccm_settings_that_used_to_stop_startup() {
        // Private-IP targets without a network: a per-Service matter now (see LbSpec).
        let c = cfg(&[
            ("HCLOUD_TOKEN", TOKEN),
            ("HCLOUD_LOAD_BALANCERS_USE_PRIVATE_IP", "true"),
            ("HCLOUD_SERVER_CACHE_MAX_AGE", "0"),
            ("HCLOUD_SERVER_CACHE_MODE", "off"),
            ("HCLOUD_NETWORK_DISABLE_ATTACHED_CHECK", "true"),
        ])
        .unwrap();
        assert!(c.lb_defaults.use_private_ip);
        assert_eq!(c.server_cache_max_age, Duration::ZERO);
        assert_eq!(c.server_cache_mode, ServerCacheMode::Off);
        assert_eq!(c.startup_warnings.len(), 1, "{:?}", c.startup_warnings);
        assert!(c.startup_warnings[0].contains("HCLOUD_NETWORK_DISABLE_ATTACHED_CHECK"));
        let err = cfg(&[
            ("HCLOUD_TOKEN", TOKEN),
            ("HCLOUD_SERVER_CACHE_MODE", "some"),
        ])
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("HCLOUD_SERVER_CACHE_MODE=\"some\": must be all, one or off"),
            "{err}"
        );
    }

    #[test]
    fn the_variable_wins_over_the_file_with_a_warning() {
        let c = HcloudConfig::from_settings(Some(Token::new(TOKEN)), |k| {
            (k == "HCLOUD_TOKEN_FILE").then(|| "/nonexistent/token".to_string())
        })
        .unwrap();
        assert_eq!(c.token.expose(), TOKEN);
        assert_eq!(c.startup_warnings.len(), 1);
        assert!(
            c.startup_warnings[0].contains("using HCLOUD_TOKEN")
                && !c.startup_warnings[0].contains(TOKEN),
            "{:?}",
            c.startup_warnings
        );
    }

    #[test]
    fn address_family_parsing() {
        assert_eq!(AddressFamily::parse("ipv4"), Some(AddressFamily::Ipv4));
        assert_eq!(AddressFamily::parse("ipv6"), Some(AddressFamily::Ipv6));
        assert_eq!(
            AddressFamily::parse("dualstack"),
            Some(AddressFamily::DualStack)
        );
        assert_eq!(AddressFamily::parse("IPv4"), None);
        assert!(AddressFamily::DualStack.has_v4() && AddressFamily::DualStack.has_v6());
        assert!(!AddressFamily::Ipv6.has_v4());
    }
}
