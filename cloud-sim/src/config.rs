//! How a simulator is set up; the binary's flags map onto these fields one to one.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

#[derive(Clone)]
pub struct SimConfig {
    /// Where to listen; port 0 picks a free one.
    pub listen: SocketAddr,
    /// The only token accepted. `None` accepts any 64-character bearer token (the length of a
    /// Hetzner token); `Sim::token()` then hands out a fixed valid one.
    pub token: Option<String>,
    /// A token that may only `GET`; anything else answers 403 `token_readonly`.
    pub readonly_token: Option<String>,
    /// Rate limit bucket: capacity and hourly refill (the real default is 3600).
    pub rate_limit_per_hour: u32,
    /// How long actions stay `running` (and lock their resource).
    pub action_duration: Duration,
    /// Keeps the world across restarts: loaded at start, written after mutations and at stop.
    pub state_file: Option<PathBuf>,
    /// Seed for fault probabilities, so a failing run can be replayed.
    pub fault_seed: u64,
    /// How many requests the request log keeps.
    pub request_log_capacity: usize,
    /// Routes one network may hold; more answer 403 `resource_limit_exceeded`. Hetzner's limit
    /// is 100 (docs/hetzner-api.md, "Networks and routes"); benchmarks raise it.
    pub max_routes_per_network: usize,
    /// Robot webservice (`/robot`) HTTP basic auth user.
    pub robot_user: String,
    /// Robot webservice HTTP basic auth password.
    pub robot_password: String,
    /// Robot rate limit of the `server` resource (`GET /server` and `GET /server/{n}` share it):
    /// requests per sliding hour. The real limit is 200.
    pub robot_server_requests_per_hour: u32,
    /// Robot rate limit of the `reset` resource (`GET /reset/{n}`) per sliding hour (real: 500).
    pub robot_reset_requests_per_hour: u32,
    /// The CloudStack API's (`/client/api`) key pair of the primary account, `admin`: the
    /// `api-key` and `secret-key` a CloudStack client is configured with.
    pub cloudstack_api_key: String,
    /// Signs requests made with [`SimConfig::cloudstack_api_key`].
    pub cloudstack_secret_key: String,
    /// Load balancers that carry TCP traffic and run real health checks (`data_plane` module).
    /// `None` (the default): load balancers are JSON only and start no task.
    pub data_plane: Option<DataPlaneConfig>,
}

/// How the data plane listens, checks and speaks (docs/hetzner-api.md, "Load balancers that
/// carry traffic").
#[derive(Debug, Clone, PartialEq)]
pub struct DataPlaneConfig {
    /// Where every load balancer service listens, each on an ephemeral port (real listen ports
    /// are below 1024 and need root; tests run as non-root).
    pub listen_ip: IpAddr,
    /// Health-check interval and timeout are divided by this, so a 15 s interval takes 300 ms
    /// at 50. Changeable at runtime through `PUT /_sim/config`.
    pub health_check_speedup: f64,
    /// PROXY protocol version written to targets of a service with `proxyprotocol`: 1 (text,
    /// the default) or 2 (binary). Hetzner does not document which one it sends.
    pub proxy_protocol_version: u8,
}

impl Default for DataPlaneConfig {
    fn default() -> Self {
        DataPlaneConfig {
            listen_ip: IpAddr::V4(Ipv4Addr::LOCALHOST),
            health_check_speedup: 1.0,
            proxy_protocol_version: 1,
        }
    }
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            token: None,
            readonly_token: None,
            rate_limit_per_hour: 3600,
            action_duration: Duration::from_millis(50),
            state_file: None,
            fault_seed: 0x5eed,
            request_log_capacity: 10_000,
            max_routes_per_network: MAX_ROUTES,
            robot_user: DEFAULT_ROBOT_USER.to_owned(),
            robot_password: DEFAULT_ROBOT_PASSWORD.to_owned(),
            robot_server_requests_per_hour: 200,
            robot_reset_requests_per_hour: 500,
            cloudstack_api_key: DEFAULT_CLOUDSTACK_API_KEY.to_owned(),
            cloudstack_secret_key: DEFAULT_CLOUDSTACK_SECRET_KEY.to_owned(),
            data_plane: None,
        }
    }
}

// Tokens stay out of Debug output: secrets never appear in logs (docs/architecture.md,
// "Conventions").
impl fmt::Debug for SimConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let redact = |t: &Option<String>| t.as_ref().map(|_| "<redacted>");
        f.debug_struct("SimConfig")
            .field("listen", &self.listen)
            .field("token", &redact(&self.token))
            .field("readonly_token", &redact(&self.readonly_token))
            .field("rate_limit_per_hour", &self.rate_limit_per_hour)
            .field("action_duration", &self.action_duration)
            .field("state_file", &self.state_file)
            .field("fault_seed", &self.fault_seed)
            .field("request_log_capacity", &self.request_log_capacity)
            .field("max_routes_per_network", &self.max_routes_per_network)
            .field("robot_user", &self.robot_user)
            .field("robot_password", &"<redacted>")
            .field(
                "robot_server_requests_per_hour",
                &self.robot_server_requests_per_hour,
            )
            .field(
                "robot_reset_requests_per_hour",
                &self.robot_reset_requests_per_hour,
            )
            .field("cloudstack_api_key", &"<redacted>")
            .field("cloudstack_secret_key", &"<redacted>")
            .field("data_plane", &self.data_plane)
            .finish()
    }
}

/// Routes per network on Hetzner, the limit large clusters run into; the default of
/// [`SimConfig::max_routes_per_network`].
pub const MAX_ROUTES: usize = 100;

/// The token `Sim::token()` returns when any token is accepted: 64 characters, like a real one.
pub const DEFAULT_TOKEN: &str = "cloudsimcloudsimcloudsimcloudsimcloudsimcloudsimcloudsimcloudsim";

/// The Robot webservice user a default `SimConfig` accepts (`Sim::robot_user()`).
pub const DEFAULT_ROBOT_USER: &str = "cloudsim-robot";

/// The Robot webservice password a default `SimConfig` accepts (`Sim::robot_password()`).
pub const DEFAULT_ROBOT_PASSWORD: &str = "cloudsim-robot-password";

/// The CloudStack API key a default `SimConfig` accepts (`Sim::cloudstack_api_key()`), shaped
/// like a real one (86 characters of base64url).
pub const DEFAULT_CLOUDSTACK_API_KEY: &str =
    "uQNwp2QVKAtwdLvzInv9zHDQIIN0UMezv4VYLziFRiPLae5ZGUXxKnOKbzoaUGDIPd3TLLpSoLzzPCLzpwpgvg";

/// The secret key of [`DEFAULT_CLOUDSTACK_API_KEY`] (`Sim::cloudstack_secret_key()`).
pub const DEFAULT_CLOUDSTACK_SECRET_KEY: &str =
    "t0ZXopIKyf_D3Ya05BGa_Olgbtdq7jLXsECVfL0Zv5MEz-RkXn4Z3YsbIy7FS3Xt4PeUM9j2a-1SYpISbfsOCw";
