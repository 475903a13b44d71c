//! Running a controller in-process against the test control plane and a cloud-sim.

use std::time::Duration;

use cloud_client::Cloud;
use cloud_client::hcloud::{HcloudClients, HcloudConfig, Token};
use controller_kit::{Config, ControllerInfo, RunError, Runtime};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// The cloud-client configuration for `sim`: a short snapshot max age so tests see cloud changes
/// quickly, and quick retries.
pub fn sim_config(sim: &cloud_sim::Sim) -> HcloudConfig {
    let mut cfg = HcloudConfig::new(Token::new(sim.token()));
    cfg.client.endpoint = sim.endpoint().trim_end_matches('/').to_string();
    cfg.server_cache.max_age = Duration::from_millis(300);
    cfg.client.retry.max_attempts = 3;
    cfg.client.retry.base = Duration::from_millis(20);
    cfg.client.retry.cap = Duration::from_millis(200);
    cfg
}

/// [`sim_config`] with Robot on: `sim`'s Robot webservice and credentials, its InternalIPs
/// forwarded, and a server list kept 200 ms (so tests see removed servers quickly).
pub fn sim_config_with_robot(sim: &cloud_sim::Sim) -> HcloudConfig {
    use cloud_client::Secret;
    use cloud_client::robot::{RobotConfig, RobotCredentials};
    let mut cfg = sim_config(sim);
    cfg.robot = RobotConfig {
        enabled: true,
        credentials: Some(RobotCredentials {
            user: Secret::new(sim.robot_user()),
            password: Secret::new(sim.robot_password()),
        }),
        forward_internal_ips: true,
        cache_timeout: Duration::from_millis(200),
        endpoint: sim.robot_endpoint(),
        ..RobotConfig::default()
    };
    cfg
}

/// The cloud built from `cfg`.
pub async fn cloud_with(cfg: HcloudConfig) -> Cloud {
    HcloudClients::new(cfg)
        .await
        .expect("hcloud provider for the sim")
        .cloud()
}

/// The cloud built from `cfg` for a controller configured as `config`: in shadow mode
/// ([`shadow`]) its writes are recorded in the controller's planned writes instead of sent.
pub async fn cloud_of(cfg: HcloudConfig, config: &Config) -> Cloud {
    HcloudClients::with_planned_writes(cfg, config.planned_writes.clone())
        .await
        .expect("hcloud provider for the sim")
        .cloud()
}

/// A cloud client for `sim` (see [`sim_config`]), giving up after two attempts.
pub async fn cloud_for(sim: &cloud_sim::Sim) -> Cloud {
    let mut cfg = sim_config(sim);
    cfg.client.retry.max_attempts = 2;
    cfg.client.retry.base = Duration::from_millis(50);
    cloud_with(cfg).await
}

/// The test configuration of `info`, watching only nodes labelled with `run`.
pub fn test_config(info: &ControllerInfo, run: &str) -> Config {
    let mut c = Config::for_tests(info);
    c.node_label_selector = Some(format!("{}={run}", crate::e2e::TEST_LABEL));
    c
}

/// Shadow mode (`--dry-run`) for a test controller: its writes, Kubernetes and cloud (built by
/// [`cloud_of`]), are recorded in the returned planned writes and served on `/plan`.
pub fn shadow(config: &mut Config) -> std::sync::Arc<cloud_client::shadow::PlannedWrites> {
    let plan = cloud_client::shadow::PlannedWrites::new();
    config.planned_writes = Some(plan.clone());
    plan
}

/// The admin server's `/plan` as JSON (shadow mode).
pub async fn planned_writes(admin: std::net::SocketAddr) -> Vec<serde_json::Value> {
    let (status, body) = http_status(admin, "/plan").await.expect("GET /plan");
    assert_eq!(status, 200, "/plan: {body}");
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("/plan is not JSON ({e}): {body}"))
}

/// A running in-process controller.
#[derive(Debug)]
pub struct Running {
    pub token: CancellationToken,
    pub task: JoinHandle<Result<(), RunError>>,
    pub admin: std::net::SocketAddr,
}

impl Running {
    /// Cancels and waits for the controller.
    pub async fn stop(self) -> Result<(), RunError> {
        self.token.cancel();
        tokio::time::timeout(Duration::from_secs(30), self.task)
            .await
            .expect("controller stops within 30s")
            .expect("controller task")
    }

    /// The admin server's /metrics text.
    pub async fn metrics(&self) -> String {
        http_get(self.admin, "/metrics").await
    }
}

/// Minimal HTTP/1.0 GET on loopback (no extra client dependency): the whole response.
pub async fn try_http_get(addr: std::net::SocketAddr, path: &str) -> std::io::Result<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await?;
    s.write_all(format!("GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").as_bytes())
        .await?;
    let mut out = String::new();
    s.read_to_string(&mut out).await?;
    Ok(out)
}

/// [`try_http_get`] of a server that must answer.
pub async fn http_get(addr: std::net::SocketAddr, path: &str) -> String {
    try_http_get(addr, path)
        .await
        .unwrap_or_else(|e| panic!("GET {path} on {addr}: {e}"))
}

/// [`try_http_get`]'s status code and body.
pub async fn http_status(addr: std::net::SocketAddr, path: &str) -> std::io::Result<(u16, String)> {
    let response = try_http_get(addr, path).await?;
    let status = response
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    Ok((status, body))
}

/// Starts `start(rt)` on a fresh runtime with `config` and `client`.
pub async fn spawn<F, Fut>(
    info: &'static ControllerInfo,
    config: Config,
    client: kube::Client,
    start: F,
) -> Running
where
    F: FnOnce(Runtime) -> Fut,
    Fut: std::future::Future<Output = Result<(), RunError>> + Send + 'static,
{
    controller_kit::install_crypto_provider();
    std::mem::forget(controller_kit::telemetry::init(
        "test",
        controller_kit::config::LogFormat::Text,
        "info",
    ));
    let token = CancellationToken::new();
    let mut rt = Runtime::new(info, config, client, token.clone());
    let admin = rt.bind_admin().await.expect("bind admin");
    let task = tokio::spawn(start(rt));
    Running { token, task, admin }
}

/// Leader-election settings for tests: short durations, a Lease in `ns`, identity `id`.
pub fn lease(info: &ControllerInfo, ns: &str, id: &str) -> controller_kit::config::LeaderElection {
    controller_kit::config::LeaderElection {
        lease_name: format!("cloud-controller-manager-{}", info.name),
        namespace: ns.to_string(),
        identity: id.to_string(),
        lease_duration: Duration::from_secs(4),
        renew_deadline: Duration::from_secs(3),
        retry_period: Duration::from_millis(500),
    }
}
