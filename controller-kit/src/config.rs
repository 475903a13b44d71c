//! Process configuration shared by the four controller binaries: clap flags with env fallbacks, the
//! upstream cloud-controller-manager flags that apply, and HCCM's `HCLOUD_*` environment variables.
//!
//! Parsing is two-staged. clap reads the raw strings (so one bad value never hides the others), then
//! [`CommonArgs::validate`] checks everything and returns either a typed [`Config`] or ONE
//! [`ConfigError`] listing every problem (the binaries exit with code 2 on it).
//!
//! The `HCLOUD_*` variables are only declared here (so `--help` lists them): cloud-client parses
//! and checks them, in one pass, and its problems are folded into the same error. The token goes
//! env → clap ([`CloudArgs::hcloud_token`], a redacted [`Token`] from the start) →
//! [`HcloudConfig`] → the transport.

use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{ArgAction, Args, ValueEnum};

use cloud_client::CloudError;
use cloud_client::hcloud::{HcloudConfig, Token};
use cloud_client::values::{BOOL_EXPECTED, parse_bool, parse_go_duration};

use crate::ControllerInfo;

/// clap's parser for the token: straight into the redacted type. Surrounding whitespace is
/// dropped (a Secret made with `--from-file` usually ends in a newline).
fn parse_token(s: &str) -> Result<Token, std::convert::Infallible> {
    Ok(Token::new(s))
}

/// Log output format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Default)]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

/// Flags and environment variables every controller binary accepts.
///
/// All binaries accept the same upstream flags (so one manifest's argument list works for each of
/// them); each controller uses the ones that apply to it.
#[derive(Args, Debug, Clone, Default)]
pub struct CommonArgs {
    /// Path to a kubeconfig file; in-cluster configuration when unset.
    #[arg(long, env = "KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,

    /// Upstream `--controllers` syntax (`*`, `name`, `-name`, aliases), restricted to this binary's controller.
    #[arg(long, default_value = "*", env = "CONTROLLERS")]
    pub controllers: String,

    /// Admin HTTP server (/healthz, /readyz, /metrics) address: `host:port` or `:port`.
    /// Defaults to `0.0.0.0:<controller default port>`.
    #[arg(long, env = "ADMIN_ADDRESS")]
    pub admin_address: Option<String>,

    /// HCCM's switch for the `/metrics` page (default true).
    #[arg(long, env = "HCLOUD_METRICS_ENABLED")]
    pub hcloud_metrics_enabled: Option<String>,
    /// Serve `/metrics` on this address (`host:port` or `:port`) instead of the admin address
    /// (HCCM's variable; HCCM's default `:8233` is not assumed: on a shared host network the four
    /// controllers could not all bind it). Each controller needs its own on a host network.
    #[arg(long, env = "HCLOUD_METRICS_ADDRESS")]
    pub hcloud_metrics_address: Option<String>,

    /// Log format (`--logging-format`, upstream's name, is the same flag).
    #[arg(long, alias = "logging-format", value_enum, default_value_t = LogFormat::Text, env = "LOG_FORMAT")]
    pub log_format: LogFormat,

    /// Kubernetes API server address, overriding the kubeconfig's (upstream `--master`).
    #[arg(long)]
    pub master: Option<String>,
    /// Requests per second this controller sends to the API server at most (client-side token
    /// bucket). Default: no client-side limit, the apiserver's priority and fairness applies; when
    /// only `--kube-api-burst` is given, upstream's 20.
    #[arg(long)]
    pub kube_api_qps: Option<String>,
    /// Requests the token bucket lets through at once. Default with `--kube-api-qps`: upstream's 30.
    #[arg(long)]
    pub kube_api_burst: Option<String>,

    /// Run leader election on a coordination.k8s.io Lease before reconciling anything.
    #[arg(long, default_value_t = true, action = ArgAction::Set, num_args = 0..=1, default_missing_value = "true", env = "LEADER_ELECT")]
    pub leader_elect: bool,
    /// Lease duration (Go duration, e.g. `15s`).
    #[arg(long, default_value = "15s")]
    pub leader_elect_lease_duration: String,
    /// How long the leader keeps retrying to renew before giving up (Go duration).
    #[arg(long, default_value = "10s")]
    pub leader_elect_renew_deadline: String,
    /// How often a standby retries to acquire the Lease (Go duration).
    #[arg(long, default_value = "2s")]
    pub leader_elect_retry_period: String,
    /// Lease name; default `cloud-controller-manager-<controller>`.
    #[arg(long)]
    pub leader_elect_resource_name: Option<String>,
    /// Lease namespace.
    #[arg(long, default_value = "kube-system", env = "LEADER_ELECT_NAMESPACE")]
    pub leader_elect_resource_namespace: String,
    /// Lock type; only `leases` is supported (as upstream).
    #[arg(long, default_value = "leases")]
    pub leader_elect_resource_lock: String,
    /// Lease holder identity; default `<hostname>_<random>`.
    #[arg(long, env = "POD_NAME")]
    pub leader_elect_identity: Option<String>,

    /// Nodes processed concurrently (node initialization; lifecycle checks). Default per controller.
    #[arg(long)]
    pub concurrent_node_syncs: Option<String>,

    /// Shadow mode: watch, plan and reconcile as usual, but write nothing. Cloud writes are not
    /// sent, Kubernetes writes go with `dryRun=All`; both are listed on `/plan` and counted in
    /// `cloud_controllers_planned_writes_total`. Takes its own Lease (`<name>-dry-run`), so it runs
    /// next to HCCM or to the acting controllers without touching their leadership.
    #[arg(long, env = "DRY_RUN", default_value_t = false, action = ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub dry_run: bool,

    /// Only watch Nodes matching this label selector (sharding, tests). Default: all Nodes.
    #[arg(long, env = "NODE_LABEL_SELECTOR", hide = true)]
    pub node_label_selector: Option<String>,

    /// Upstream flags every binary reads (the others are accepted by [`crate::cli`]).
    #[command(flatten)]
    pub compat: CompatArgs,

    /// Cloud (Hetzner) settings, HCCM environment names.
    #[command(flatten)]
    pub cloud: CloudArgs,
}

/// Upstream cloud-controller-manager flags every binary reads. Flags one controller uses live in its
/// own crate; the rest of upstream's are accepted without effect by [`crate::cli::parse`].
#[derive(Args, Debug, Clone, Default)]
pub struct CompatArgs {
    /// Must be `hcloud` when given.
    #[arg(long)]
    pub cloud_provider: Option<String>,
    /// Cluster name (accepted; load balancers are named and labelled as HCCM does, without it).
    #[arg(long, default_value = "kubernetes")]
    pub cluster_name: String,
    /// klog verbosity, mapped to the log level when RUST_LOG is unset: 0-3 info, 4-5 debug, 6 and
    /// more trace.
    #[arg(long = "v", short = 'v')]
    pub verbosity: Option<String>,
    /// klog's per-file verbosity, `pattern=N,...`, mapped to per-module levels when RUST_LOG is
    /// unset: a pattern names a module path (`cloud_client=6`, `service_controller::node_sync=4`);
    /// a trailing `*` is dropped, `-` reads as `_`.
    #[arg(long)]
    pub vmodule: Option<String>,
}

/// HCCM's `HCLOUD_*` variables this binary lists in `--help` (flags exist for local runs). They are
/// handed to cloud-client unparsed ([`CloudArgs::hcloud_config`]); the others it reads (e.g.
/// `HCLOUD_LOAD_BALANCERS_*`) come from the environment directly.
#[derive(Args, Debug, Clone, Default)]
pub struct CloudArgs {
    /// API token (env only in production; never logged).
    #[arg(long, env = "HCLOUD_TOKEN", hide_env_values = true, value_parser = parse_token)]
    pub hcloud_token: Option<Token>,
    /// File holding the API token (content trimmed).
    #[arg(long, env = "HCLOUD_TOKEN_FILE")]
    pub hcloud_token_file: Option<String>,
    /// API endpoint.
    #[arg(long, env = "HCLOUD_ENDPOINT")]
    pub hcloud_endpoint: Option<String>,
    /// Network ID or name.
    #[arg(long, env = "HCLOUD_NETWORK")]
    pub hcloud_network: Option<String>,
    /// `ipv4` (default), `ipv6` or `dualstack`.
    #[arg(long, env = "HCLOUD_INSTANCES_ADDRESS_FAMILY")]
    pub hcloud_instances_address_family: Option<String>,
    /// Set zone labels (default true).
    #[arg(long, env = "HCLOUD_INSTANCES_ZONE_LABEL_ENABLED")]
    pub hcloud_instances_zone_label_enabled: Option<String>,
    /// Server snapshot max age (Go duration, default 10s).
    #[arg(long, env = "HCLOUD_SERVER_CACHE_MAX_AGE")]
    pub hcloud_server_cache_max_age: Option<String>,
    /// Log every cloud request and response, the token redacted.
    #[arg(long, env = "HCLOUD_DEBUG")]
    pub hcloud_debug: Option<String>,
}

impl CloudArgs {
    /// Hands the settings to cloud-client, the one parser of `HCLOUD_*`: what clap read for the
    /// variables declared here, `env` for the rest. Without `load_balancers`, the
    /// `HCLOUD_LOAD_BALANCERS_*` variables are not even read.
    pub fn hcloud_config(
        &self,
        env: impl Fn(&str) -> Option<String>,
        load_balancers: bool,
    ) -> Result<HcloudConfig, Vec<String>> {
        let declared = |name: &str| match name {
            "HCLOUD_TOKEN_FILE" => Some(self.hcloud_token_file.clone()),
            "HCLOUD_ENDPOINT" => Some(self.hcloud_endpoint.clone()),
            "HCLOUD_NETWORK" => Some(self.hcloud_network.clone()),
            "HCLOUD_INSTANCES_ADDRESS_FAMILY" => Some(self.hcloud_instances_address_family.clone()),
            "HCLOUD_INSTANCES_ZONE_LABEL_ENABLED" => {
                Some(self.hcloud_instances_zone_label_enabled.clone())
            }
            "HCLOUD_SERVER_CACHE_MAX_AGE" => Some(self.hcloud_server_cache_max_age.clone()),
            "HCLOUD_DEBUG" => Some(self.hcloud_debug.clone()),
            _ => None,
        };
        HcloudConfig::from_settings(self.hcloud_token.clone(), |name| {
            if !load_balancers && name.starts_with("HCLOUD_LOAD_BALANCERS_") {
                return None;
            }
            declared(name).unwrap_or_else(|| env(name))
        })
        .map_err(|e| match e {
            CloudError::InvalidConfig { problems } => problems,
            other => vec![other.to_string()],
        })
    }
}

/// Leader-election settings.
#[derive(Debug, Clone)]
pub struct LeaderElection {
    /// Lease name.
    pub lease_name: String,
    /// Lease namespace.
    pub namespace: String,
    /// Holder identity.
    pub identity: String,
    /// Lease duration.
    pub lease_duration: Duration,
    /// Renew deadline.
    pub renew_deadline: Duration,
    /// Standby retry period.
    pub retry_period: Duration,
}

/// Where the `/metrics` page is served (`HCLOUD_METRICS_ENABLED`, `HCLOUD_METRICS_ADDRESS`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricsServing {
    /// On the admin address, next to the probes (the default).
    OnAdmin,
    /// On its own address.
    At(SocketAddr),
    /// Not at all.
    Off,
}

/// A client-side limit on Kubernetes API requests (a token bucket, as client-go's).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct KubeApiRate {
    /// Tokens added per second.
    pub qps: f64,
    /// Bucket size.
    pub burst: u32,
}

/// The validated configuration every controller reads.
#[derive(Debug, Clone)]
pub struct Config {
    /// Kubeconfig path; in-cluster when `None`.
    pub kubeconfig: Option<PathBuf>,
    /// Whether `--controllers` enables this binary's controller.
    pub enabled: bool,
    /// Admin server address.
    pub admin_address: SocketAddr,
    /// Where `/metrics` is served.
    pub metrics: MetricsServing,
    /// Log format.
    pub log_format: LogFormat,
    /// The log filter used when RUST_LOG is unset (from `--v` and `--vmodule`).
    pub log_filter: String,
    /// `--master`: the API server address, overriding the kubeconfig's.
    pub master: Option<String>,
    /// `--kube-api-qps`/`--kube-api-burst`; `None`: no client-side limit.
    pub kube_api_rate: Option<KubeApiRate>,
    /// Leader election, `None` when disabled.
    pub leader_election: Option<LeaderElection>,
    /// `--concurrent-node-syncs` (controller default applied).
    pub concurrent_node_syncs: u16,
    /// `--cluster-name`.
    pub cluster_name: String,
    /// The cloud's configuration; `None` when the controller runs without a cloud (tests inject
    /// one).
    pub cloud: Option<HcloudConfig>,
    /// Label selector restricting the Node watch (not a flag: tests and sharding set it in code).
    pub node_label_selector: Option<String>,
    /// Shadow mode (`--dry-run`): where the writes not made are planned; `None` acts.
    pub plan: Option<std::sync::Arc<cloud_client::shadow::PlannedWrites>>,
}

/// Every problem found in the configuration, reported at once.
#[derive(Debug, thiserror::Error)]
pub struct ConfigError {
    /// One line per problem.
    pub problems: Vec<String>,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "invalid configuration ({} problem(s)):",
            self.problems.len()
        )?;
        for p in &self.problems {
            writeln!(f, "  - {p}")?;
        }
        Ok(())
    }
}

/// Collects configuration problems; controller crates use it for their own flags too.
#[derive(Debug, Default)]
pub struct Problems(Vec<String>);

impl Problems {
    /// Records a problem.
    pub fn push(&mut self, problem: impl Into<String>) {
        self.0.push(problem.into());
    }
    /// Parses a Go duration (`500ms`, `15s`, `5m`, `1h30m`); records a problem and returns `fallback` on error.
    pub fn duration(&mut self, flag: &str, value: &str, fallback: Duration) -> Duration {
        match parse_go_duration(value) {
            Ok(d) => d,
            Err(e) => {
                self.push(format!("{flag}={value:?}: {e}"));
                fallback
            }
        }
    }
    /// Parses a positive duration.
    pub fn positive_duration(&mut self, flag: &str, value: &str, fallback: Duration) -> Duration {
        let d = self.duration(flag, value, fallback);
        if d.is_zero() {
            self.push(format!("{flag}={value:?}: must be greater than zero"));
            return fallback;
        }
        d
    }
    /// Parses an integer in `min..=max`.
    pub fn int(&mut self, flag: &str, value: &str, min: u64, max: u64, fallback: u64) -> u64 {
        match value.trim().parse::<u64>() {
            Ok(n) if (min..=max).contains(&n) => n,
            Ok(n) => {
                self.push(format!("{flag}={n}: must be between {min} and {max}"));
                fallback
            }
            Err(_) => {
                self.push(format!("{flag}={value:?}: not a non-negative integer"));
                fallback
            }
        }
    }
    /// Parses a boolean the way Go's `strconv.ParseBool` does.
    pub fn bool(&mut self, flag: &str, value: &str, fallback: bool) -> bool {
        match parse_bool(value) {
            Some(b) => b,
            None => {
                self.push(format!("{flag}={value:?}: not {BOOL_EXPECTED}"));
                fallback
            }
        }
    }
    /// True when no problem was recorded.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    /// `Ok(value)` when no problem was recorded, else the combined error.
    pub fn finish<T>(self, value: T) -> Result<T, ConfigError> {
        if self.0.is_empty() {
            Ok(value)
        } else {
            Err(ConfigError { problems: self.0 })
        }
    }
}

/// Evaluates upstream `--controllers` syntax for one controller.
///
/// `*` enables all default-on controllers (ours is default-on), `name`/`alias` enables, `-name`
/// disables, the first matching entry wins. Names of the other cloud-controllers are accepted
/// (manifests written for the all-in-one CCM list them); anything else is an error.
pub fn controller_enabled(info: &ControllerInfo, spec: &str, problems: &mut Problems) -> bool {
    const KNOWN: &[&str] = &[
        "cloud-node-controller",
        "cloud-node",
        "cloud-node-lifecycle-controller",
        "cloud-node-lifecycle",
        "service-lb-controller",
        "service",
        "node-route-controller",
        "route",
    ];
    let mut decision: Option<bool> = None;
    let mut star = false;
    for raw in spec.split(',') {
        let entry = raw.trim();
        if entry.is_empty() {
            continue;
        }
        if entry == "*" {
            star = true;
            continue;
        }
        let (negated, name) = match entry.strip_prefix('-') {
            Some(n) => (true, n),
            None => (false, entry),
        };
        if !KNOWN.contains(&name) {
            problems.push(format!(
                "--controllers: {name:?} is not in the list of known controllers ({})",
                KNOWN.join(", ")
            ));
            continue;
        }
        if decision.is_none() && (name == info.canonical || name == info.alias) {
            decision = Some(!negated);
        }
    }
    decision.unwrap_or(star)
}

/// `host:port` or `:port` (all interfaces), as Go's listeners take it.
fn parse_listen_address(name: &str, value: &str) -> Result<SocketAddr, String> {
    let v = value.trim();
    let full = if v.starts_with(':') {
        format!("0.0.0.0{v}")
    } else {
        v.to_string()
    };
    full.parse::<SocketAddr>()
        .map_err(|_| format!("{name}={value:?}: expected host:port or :port"))
}

/// `HCLOUD_METRICS_ENABLED` and `HCLOUD_METRICS_ADDRESS` (empty values count as unset).
fn metrics_serving(
    enabled: Option<&str>,
    address: Option<&str>,
    p: &mut Problems,
) -> MetricsServing {
    let enabled = match enabled.map(str::trim).filter(|v| !v.is_empty()) {
        Some(v) => p.bool("HCLOUD_METRICS_ENABLED", v, true),
        None => true,
    };
    match address.map(str::trim).filter(|v| !v.is_empty()) {
        _ if !enabled => MetricsServing::Off,
        Some(a) => match parse_listen_address("HCLOUD_METRICS_ADDRESS", a) {
            Ok(addr) => MetricsServing::At(addr),
            Err(e) => {
                p.push(e);
                MetricsServing::OnAdmin
            }
        },
        None => MetricsServing::OnAdmin,
    }
}

fn default_identity() -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.is_empty())
        .or_else(|| {
            std::fs::read_to_string("/proc/sys/kernel/hostname")
                .ok()
                .map(|s| s.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into());
    format!("{host}_{}", random_suffix())
}

/// A random hex string from std's randomly seeded hasher (no extra dependency).
pub fn random_suffix() -> String {
    use std::collections::hash_map::RandomState;
    use std::hash::{BuildHasher, Hasher};
    let mut h = RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default(),
    );
    format!("{:016x}", h.finish())
}

impl CommonArgs {
    /// Validates everything; `need_cloud` false skips the cloud settings (tests inject a cloud).
    pub fn validate(&self, info: &ControllerInfo, need_cloud: bool) -> Result<Config, ConfigError> {
        let mut p = Problems::default();
        self.validate_into(info, need_cloud, &mut p)
            .and_then(|c| p.finish(c))
    }

    /// Like [`CommonArgs::validate`], adding problems to `p` (controller crates validate their own
    /// flags into the same collector before calling [`Problems::finish`]).
    pub fn validate_into(
        &self,
        info: &ControllerInfo,
        need_cloud: bool,
        p: &mut Problems,
    ) -> Result<Config, ConfigError> {
        let enabled = controller_enabled(info, &self.controllers, p);
        let admin_address = match &self.admin_address {
            Some(a) => parse_listen_address("--admin-address", a).unwrap_or_else(|e| {
                p.push(e);
                SocketAddr::from(([0, 0, 0, 0], info.default_admin_port))
            }),
            None => SocketAddr::from(([0, 0, 0, 0], info.default_admin_port)),
        };

        let lease_duration = p.positive_duration(
            "--leader-elect-lease-duration",
            &self.leader_elect_lease_duration,
            Duration::from_secs(15),
        );
        let renew_deadline = p.positive_duration(
            "--leader-elect-renew-deadline",
            &self.leader_elect_renew_deadline,
            Duration::from_secs(10),
        );
        let retry_period = p.positive_duration(
            "--leader-elect-retry-period",
            &self.leader_elect_retry_period,
            Duration::from_secs(2),
        );
        if self.leader_elect {
            if renew_deadline >= lease_duration {
                p.push(format!(
                    "--leader-elect-renew-deadline ({renew_deadline:?}) must be less than --leader-elect-lease-duration ({lease_duration:?})"
                ));
            }
            if retry_period >= renew_deadline {
                p.push(format!(
                    "--leader-elect-retry-period ({retry_period:?}) must be less than --leader-elect-renew-deadline ({renew_deadline:?})"
                ));
            }
            if lease_duration.as_secs() < 2 || lease_duration.subsec_nanos() != 0 {
                p.push(format!(
                    "--leader-elect-lease-duration ({lease_duration:?}) must be whole seconds, at least 2s (Lease granularity)"
                ));
            }
            if self.leader_elect_resource_lock != "leases" {
                p.push(format!(
                    "--leader-elect-resource-lock={:?}: only \"leases\" is supported",
                    self.leader_elect_resource_lock
                ));
            }
            if self.leader_elect_resource_namespace.is_empty() {
                p.push("--leader-elect-resource-namespace must not be empty");
            }
        }
        let plan = self.dry_run.then(cloud_client::shadow::PlannedWrites::new);
        let leader_election = self.leader_elect.then(|| LeaderElection {
            // A shadow never holds the acting controllers' Lease: it takes one named apart.
            lease_name: format!(
                "{}{}",
                self.leader_elect_resource_name
                    .clone()
                    .unwrap_or_else(|| format!("cloud-controller-manager-{}", info.name)),
                if self.dry_run { "-dry-run" } else { "" }
            ),
            namespace: self.leader_elect_resource_namespace.clone(),
            identity: self
                .leader_elect_identity
                .clone()
                .filter(|s| !s.is_empty())
                .map(|s| format!("{s}_{}", random_suffix()))
                .unwrap_or_else(default_identity),
            lease_duration,
            renew_deadline,
            retry_period,
        });

        let concurrent_node_syncs = match (&self.concurrent_node_syncs, info.node_syncs_default) {
            (Some(v), Some(_)) => p.int("--concurrent-node-syncs", v, 1, 1024, 1) as u16,
            (None, Some(default)) => default,
            (given, None) => {
                if given.is_some() {
                    crate::cli::note_ignored(
                        "concurrent-node-syncs",
                        crate::cli::Why::ReadBy("node-controller and lifecycle-controller"),
                    );
                }
                1
            }
        };
        if let Some(cp) = &self.compat.cloud_provider
            && cp != "hcloud"
        {
            p.push(format!(
                "--cloud-provider={cp:?}: only \"hcloud\" is supported"
            ));
        }
        let metrics = metrics_serving(
            self.hcloud_metrics_enabled.as_deref(),
            self.hcloud_metrics_address.as_deref(),
            p,
        );
        let log_filter = log_filter(
            self.compat.verbosity.as_deref(),
            self.compat.vmodule.as_deref(),
            p,
        );
        let kube_api_rate = kube_api_rate(
            self.kube_api_qps.as_deref(),
            self.kube_api_burst.as_deref(),
            p,
        );
        let master = self.master.clone().filter(|m| !m.trim().is_empty());
        if let Some(m) = &master
            && !(m.starts_with("https://") || m.starts_with("http://"))
        {
            p.push(format!(
                "--master={m:?}: expected the API server's URL, e.g. https://10.0.0.1:6443"
            ));
        }
        let cloud = if need_cloud {
            match self.cloud.hcloud_config(
                |name| std::env::var(name).ok(),
                info.reads_load_balancer_settings,
            ) {
                Ok(config) => Some(HcloudConfig {
                    plan: plan.clone(),
                    ..config
                }),
                Err(problems) => {
                    problems.into_iter().for_each(|problem| p.push(problem));
                    None
                }
            }
        } else {
            None
        };
        Ok(Config {
            kubeconfig: self.kubeconfig.clone(),
            enabled,
            admin_address,
            metrics,
            log_format: self.log_format,
            log_filter,
            master,
            kube_api_rate,
            leader_election,
            concurrent_node_syncs,
            cluster_name: self.compat.cluster_name.clone(),
            cloud,
            node_label_selector: self.node_label_selector.clone().filter(|s| !s.is_empty()),
            plan,
        })
    }
}

/// `--kube-api-qps` and `--kube-api-burst`: either one given sets a limit, the other taking
/// upstream's default.
fn kube_api_rate(qps: Option<&str>, burst: Option<&str>, p: &mut Problems) -> Option<KubeApiRate> {
    if qps.is_none() && burst.is_none() {
        return None;
    }
    let qps = match qps.map(str::trim) {
        None => 20.0,
        Some(v) => match v.parse::<f64>() {
            Ok(q) if q.is_finite() && q > 0.0 => q,
            _ => {
                p.push(format!(
                    "--kube-api-qps={v:?}: expected a number of requests per second above 0"
                ));
                20.0
            }
        },
    };
    let burst = match burst {
        None => 30,
        Some(v) => p.int("--kube-api-burst", v, 1, 100_000, 30) as u32,
    };
    Some(KubeApiRate { qps, burst })
}

/// klog's `-v` level as a tracing level.
fn klog_level(v: u64) -> &'static str {
    match v {
        0..=3 => "info",
        4..=5 => "debug",
        _ => "trace",
    }
}

/// The default log filter from `--v` and `--vmodule` (RUST_LOG, when set, replaces it).
fn log_filter(v: Option<&str>, vmodule: Option<&str>, p: &mut Problems) -> String {
    let mut directives = vec![match v {
        Some(v) => klog_level(p.int("--v", v, 0, 100, 0)).to_string(),
        None => "info".to_string(),
    }];
    for entry in vmodule.unwrap_or_default().split(',').map(str::trim) {
        if entry.is_empty() {
            continue;
        }
        let parsed = entry.split_once('=').and_then(|(pattern, n)| {
            let module = pattern.trim().trim_end_matches('*').replace('-', "_");
            let level = n.trim().parse::<u64>().ok()?;
            let valid = !module.is_empty()
                && module
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':');
            valid.then(|| format!("{module}={}", klog_level(level)))
        });
        match parsed {
            Some(d) => directives.push(d),
            None => p.push(format!(
                "--vmodule: {entry:?}: expected module=N, e.g. cloud_client=6"
            )),
        }
    }
    directives.join(",")
}

/// Nodes per list request of the Node watches (1000 Nodes: 20 requests at start).
pub const NODE_LIST_PAGE: u32 = 50;

impl Config {
    /// The watcher configuration of every Node watch, honouring [`Config::node_label_selector`].
    ///
    /// Lists come in pages of [`NODE_LIST_PAGE`] instead of kube's 500: a page is buffered and
    /// decoded whole before the controller's `slim` runs on its Nodes, so at 12 KB a Node, a page
    /// of 500 costs 6 MB of JSON and several times that decoded, at every start and relist.
    pub fn node_watcher_config(&self) -> kube::runtime::watcher::Config {
        let config = kube::runtime::watcher::Config::default().page_size(NODE_LIST_PAGE);
        match &self.node_label_selector {
            Some(selector) => config.labels(selector),
            None => config,
        }
    }

    /// A configuration for in-process tests: no cloud settings, no leader election, admin server on
    /// an ephemeral loopback port.
    pub fn for_tests(info: &ControllerInfo) -> Config {
        let args = CommonArgs {
            controllers: "*".into(),
            leader_elect: false,
            leader_elect_lease_duration: "15s".into(),
            leader_elect_renew_deadline: "10s".into(),
            leader_elect_retry_period: "2s".into(),
            leader_elect_resource_namespace: "kube-system".into(),
            leader_elect_resource_lock: "leases".into(),
            admin_address: Some("127.0.0.1:0".into()),
            compat: CompatArgs {
                cluster_name: "kubernetes".into(),
                ..Default::default()
            },
            ..Default::default()
        };
        args.validate(info, false)
            .expect("the test configuration is valid")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    const INFO: ControllerInfo = ControllerInfo {
        name: "node-controller",
        canonical: "cloud-node-controller",
        alias: "cloud-node",
        component: "cloud-node-controller",
        default_admin_port: 10270,
        node_syncs_default: Some(16),
        reads_load_balancer_settings: false,
    };

    #[derive(Parser, Debug)]
    struct Cli {
        #[command(flatten)]
        common: CommonArgs,
    }

    fn parse(args: &[&str]) -> CommonArgs {
        let mut v = vec!["bin"];
        v.extend_from_slice(args);
        crate::cli::parse_from::<Cli, _, _>(v).0.common
    }

    #[test]
    fn controllers_flag() {
        let mut p = Problems::default();
        assert!(controller_enabled(&INFO, "*", &mut p));
        assert!(controller_enabled(&INFO, "*,-route", &mut p));
        assert!(!controller_enabled(&INFO, "*,-cloud-node", &mut p));
        assert!(!controller_enabled(
            &INFO,
            "-cloud-node-controller,*",
            &mut p
        ));
        assert!(controller_enabled(&INFO, "cloud-node,-cloud-node", &mut p));
        assert!(!controller_enabled(&INFO, "service,route", &mut p));
        assert!(p.is_empty());
        controller_enabled(&INFO, "*,-bogus", &mut p);
        assert_eq!(p.0.len(), 1);
    }

    #[test]
    fn every_problem_is_listed_once() {
        let args = parse(&[
            "--leader-elect-lease-duration=abc",
            "--leader-elect-retry-period=5x",
            "--concurrent-node-syncs=0",
            "--controllers=*,-nope",
            "--hcloud-instances-address-family=ipv5",
            "--admin-address=nonsense",
        ]);
        let err = args.validate(&INFO, true).unwrap_err();
        let text = err.to_string();
        for needle in [
            "--leader-elect-lease-duration",
            "--leader-elect-retry-period",
            "--concurrent-node-syncs",
            "nope",
            "HCLOUD_INSTANCES_ADDRESS_FAMILY",
            "--admin-address",
            "HCLOUD_TOKEN",
        ] {
            assert!(text.contains(needle), "{needle} missing in {text}");
        }
        assert_eq!(err.problems.len(), 7, "{text}");
    }

    #[test]
    fn defaults_and_hccm_env() {
        let mut args = parse(&[
            "--leader-elect=false",
            "--cloud-provider=hcloud",
            "--allow-untagged-cloud",
        ]);
        args.cloud.hcloud_token = Some(Token::new("t0ken"));
        args.cloud.hcloud_instances_address_family = Some("dualstack".into());
        let c = args.validate(&INFO, true).unwrap();
        assert!(c.enabled);
        assert!(c.leader_election.is_none());
        assert_eq!(c.concurrent_node_syncs, 16);
        assert_eq!(c.admin_address.port(), 10270);
        let cloud = c.cloud.unwrap();
        assert_eq!(
            cloud.address_family,
            cloud_client::hcloud::AddressFamily::DualStack
        );
        assert!(!format!("{cloud:?}").contains("t0ken"));
    }

    #[test]
    fn a_token_with_a_trailing_newline_is_trimmed_not_refused() {
        let args = parse(&["--hcloud-token", "t0ken\n"]);
        let cloud = args.validate(&INFO, true).unwrap().cloud.unwrap();
        assert_eq!(cloud.token, Token::new("t0ken"));
        let err = parse(&["--hcloud-token", "t0 ken"])
            .validate(&INFO, true)
            .unwrap_err();
        assert!(err.to_string().contains("whitespace"), "{err}");
    }

    #[test]
    fn lease_defaults() {
        let mut args = parse(&[]);
        args.cloud.hcloud_token = Some(Token::new("x"));
        let c = args.validate(&INFO, true).unwrap();
        let le = c.leader_election.unwrap();
        assert_eq!(le.lease_name, "cloud-controller-manager-node-controller");
        assert_eq!(le.namespace, "kube-system");
        assert_eq!(le.lease_duration, Duration::from_secs(15));
    }

    #[test]
    fn a_shadow_plans_into_its_cloud_and_takes_a_lease_of_its_own() {
        for (flags, lease) in [
            (
                &["--dry-run"][..],
                "cloud-controller-manager-node-controller-dry-run",
            ),
            (
                &["--dry-run=true", "--leader-elect-resource-name=ccm"][..],
                "ccm-dry-run",
            ),
        ] {
            let mut args = parse(flags);
            args.cloud.hcloud_token = Some(Token::new("x"));
            let c = args.validate(&INFO, true).unwrap();
            assert_eq!(c.leader_election.unwrap().lease_name, lease);
            let (plan, cloud_plan) = (c.plan.unwrap(), c.cloud.unwrap().plan.unwrap());
            assert!(std::sync::Arc::ptr_eq(&plan, &cloud_plan), "one plan");
        }
        let mut args = parse(&[]);
        args.cloud.hcloud_token = Some(Token::new("x"));
        let c = args.validate(&INFO, true).unwrap();
        assert!(
            c.plan.is_none() && c.cloud.unwrap().plan.is_none(),
            "acting by default"
        );
    }

    #[test]
    fn klog_verbosity_and_vmodule_become_the_log_filter() {
        let mut args = parse(&[
            "--v=4",
            "--vmodule=cloud-client=6,service_controller::node_sync*=2",
            "--logging-format=json",
        ]);
        args.cloud.hcloud_token = Some(Token::new("x"));
        let c = args.validate(&INFO, true).unwrap();
        assert_eq!(
            c.log_filter,
            "debug,cloud_client=trace,service_controller::node_sync=info"
        );
        assert_eq!(c.log_format, LogFormat::Json);
        assert_eq!(
            parse(&[]).validate(&INFO, false).unwrap().log_filter,
            "info"
        );
        let err = parse(&["--v=loud", "--vmodule=a.go"])
            .validate(&INFO, false)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("--v=\"loud\"") && err.contains("\"a.go\""),
            "{err}"
        );
    }

    #[test]
    fn kube_api_rate_and_master() {
        let c = parse(&[]).validate(&INFO, false).unwrap();
        assert_eq!((c.kube_api_rate, c.master), (None, None));
        let c = parse(&["--kube-api-qps=5.5", "--master=https://10.0.0.1:6443"])
            .validate(&INFO, false)
            .unwrap();
        assert_eq!(
            c.kube_api_rate,
            Some(KubeApiRate {
                qps: 5.5,
                burst: 30
            })
        );
        assert_eq!(c.master.as_deref(), Some("https://10.0.0.1:6443"));
        let c = parse(&["--kube-api-burst=50"])
            .validate(&INFO, false)
            .unwrap();
        assert_eq!(
            c.kube_api_rate,
            Some(KubeApiRate {
                qps: 20.0,
                burst: 50
            })
        );
        let err = parse(&[
            "--kube-api-qps=0",
            "--kube-api-burst=-1",
            "--master=10.0.0.1",
        ])
        .validate(&INFO, false)
        .unwrap_err();
        assert_eq!(err.problems.len(), 3, "{err}");
    }
}
