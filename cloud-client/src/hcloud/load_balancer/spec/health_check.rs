//! The health check each port gets: HCCM's annotations and defaults, and kube-proxy's answer
//! when `health-check-kube-proxy` asks for it.

use std::time::Duration;

use super::reader::Reader;
use super::values::LbProtocol;
use crate::capabilities::{ServiceRef, TrafficPolicy};
use crate::hcloud::config::LbDefaults;
use crate::hcloud::load_balancer::annotations as a;

/// Health-check settings. `custom` is HCCM's `addHealthCheck` (hcops `extractHealthCheck`): true
/// when the protocol, port, interval, timeout or retries annotation is set, or a non-zero
/// `HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_{INTERVAL,TIMEOUT,RETRIES}` default applies. Only then is
/// the whole block sent; otherwise the check is "TCP on the NodePort" and interval, timeout and
/// retries stay whatever the load balancer has. The HTTP fields (domain, path, validate-certificate,
/// status codes) never switch it on by themselves.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HealthCheckSpec {
    pub custom: bool,
    pub protocol: Option<LbProtocol>,
    pub port: Option<u16>,
    pub interval: Option<Duration>,
    pub timeout: Option<Duration>,
    pub retries: Option<u32>,
    pub http_domain: Option<String>,
    /// `None` = leave the path as it is (the API's default `/` for a new check).
    pub http_path: Option<String>,
    pub http_validate_certificate: Option<bool>,
    pub http_status_codes: Vec<String>,
    /// With `health-check-kube-proxy`: the port kube-proxy answers `GET /healthz` on for this
    /// Service, the check's default port (the annotations above still win, field by field).
    pub kube_proxy_port: Option<u16>,
}

impl HealthCheckSpec {
    /// Whether a field that makes the check [`custom`](Self::custom) is set.
    fn sets_the_check(&self) -> bool {
        self.protocol.is_some()
            || self.kube_proxy_port.is_some()
            || self.port.is_some()
            || self.interval.is_some()
            || self.timeout.is_some()
            || self.retries.is_some()
    }

    /// The check when kube-proxy answers on no node: the NodePort check, as without
    /// `health-check-kube-proxy` (the controller says so), so every target is not taken out at once.
    pub(super) fn without_kube_proxy(&mut self) {
        self.kube_proxy_port = None;
        self.custom = self.sets_the_check();
    }
}

/// kube-proxy's health server (`--healthz-bind-address`, default `0.0.0.0:10256`): 200 while
/// kube-proxy runs and its node is not being deleted (KEP-3836), the check for
/// `externalTrafficPolicy: Cluster`.
pub const KUBE_PROXY_HEALTHZ_PORT: u16 = 10256;
/// Where kube-proxy answers on both its health server and a Service's `healthCheckNodePort`.
pub const KUBE_PROXY_HEALTHZ_PATH: &str = "/healthz";

/// Env health-check defaults count only when non-zero (HCCM: `cfg.HealthCheckInterval != 0`).
pub(super) fn nonzero_duration(d: Option<Duration>) -> Option<Duration> {
    d.filter(|d| !d.is_zero())
}

pub(super) fn parse_health_check(
    r: &mut Reader<'_>,
    defaults: &LbDefaults,
    svc: &ServiceRef,
) -> HealthCheckSpec {
    let mut hc = HealthCheckSpec {
        protocol: r.protocol(a::HEALTH_CHECK_PROTOCOL),
        ..Default::default()
    };
    let kube_proxy = r.bool(a::HEALTH_CHECK_KUBE_PROXY);
    if r.or_env_flag(
        a::HEALTH_CHECK_KUBE_PROXY,
        kube_proxy,
        defaults.health_check_kube_proxy,
    ) {
        hc.kube_proxy_port = match svc.traffic_policy {
            TrafficPolicy::Cluster => Some(KUBE_PROXY_HEALTHZ_PORT),
            // Not allocated yet: the NodePort check until it is (the Service changes then).
            TrafficPolicy::Local {
                health_check_node_port,
            } => health_check_node_port.filter(|p| *p > 0),
        };
    }
    hc.port = r
        .int::<u16>(a::HEALTH_CHECK_PORT, "a port number 1-65535")
        .filter(|p| *p > 0);
    if r.raw(a::HEALTH_CHECK_PORT).is_some_and(|p| p.trim() == "0") {
        r.fail(a::HEALTH_CHECK_PORT, "0", "a port number 1-65535");
    }
    let interval = r.duration(a::HEALTH_CHECK_INTERVAL, Duration::from_secs(1), None);
    hc.interval = r.or_env(
        a::HEALTH_CHECK_INTERVAL,
        interval,
        nonzero_duration(defaults.health_check_interval),
    );
    let timeout = r.duration(a::HEALTH_CHECK_TIMEOUT, Duration::from_secs(1), None);
    hc.timeout = r.or_env(
        a::HEALTH_CHECK_TIMEOUT,
        timeout,
        nonzero_duration(defaults.health_check_timeout),
    );
    let retries = r.int::<u32>(a::HEALTH_CHECK_RETRIES, "a non-negative integer");
    hc.retries = r.or_env(
        a::HEALTH_CHECK_RETRIES,
        retries,
        defaults.health_check_retries.filter(|n| *n != 0),
    );
    hc.custom = hc.sets_the_check();
    hc.http_domain = r.host_name(a::HEALTH_CHECK_HTTP_DOMAIN);
    hc.http_path = r.string(a::HEALTH_CHECK_HTTP_PATH);
    if let Some(p) = hc.http_path.clone()
        && (!p.starts_with('/') || p.chars().any(|c| c.is_whitespace() || c.is_control()))
    {
        r.fail(
            a::HEALTH_CHECK_HTTP_PATH,
            &p,
            "an absolute HTTP path without spaces, such as /healthz",
        );
        hc.http_path = None;
    }
    hc.http_validate_certificate = r.bool(a::HEALTH_CHECK_HTTP_VALIDATE_CERTIFICATE);
    hc.http_status_codes = r.csv(a::HTTP_STATUS_CODES);
    for code in hc.http_status_codes.clone() {
        if code.len() != 3 || !code.chars().all(|c| c.is_ascii_digit() || c == '?') {
            r.fail(
                a::HTTP_STATUS_CODES,
                &code,
                "comma-separated 3-character codes with ? wildcards, e.g. 2??,301",
            );
        }
    }
    hc
}
