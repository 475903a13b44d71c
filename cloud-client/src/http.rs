//! The HTTP client every API client of this crate is built on.

use std::time::Duration;

use crate::error::CloudError;

/// The HTTP client of one API at `endpoint` (the Cloud API, the Robot webservice): rustls, a
/// per-request `timeout`, and no proxy from the environment for a loopback endpoint (simulator,
/// tests), which a proxy must never capture.
pub(crate) fn client(
    endpoint: &str,
    user_agent: &str,
    timeout: Duration,
) -> Result<reqwest::Client, CloudError> {
    client_with(endpoint, user_agent, timeout, false)
}

/// [`client`], accepting any certificate of any host when `insecure_tls` (an operator's explicit
/// choice, e.g. CloudStack's `ssl-no-verify`, as Go's `InsecureSkipVerify`).
pub(crate) fn client_with(
    endpoint: &str,
    user_agent: &str,
    timeout: Duration,
    insecure_tls: bool,
) -> Result<reqwest::Client, CloudError> {
    let mut builder = reqwest::Client::builder();
    if insecure_tls {
        builder = builder
            .tls_danger_accept_invalid_certs(true)
            .tls_danger_accept_invalid_hostnames(true);
    }
    if ["http://127.0.0.1", "http://localhost", "http://[::1]"]
        .iter()
        .any(|p| endpoint.starts_with(p))
    {
        builder = builder.no_proxy();
    }
    builder
        .tls_backend_rustls()
        .user_agent(user_agent)
        .timeout(timeout)
        .connect_timeout(timeout.min(Duration::from_secs(10)))
        .build()
        .map_err(|e| CloudError::InvalidConfig {
            problems: vec![format!("cannot build the HTTP client for {endpoint}: {e}")],
        })
}
