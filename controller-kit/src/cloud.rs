//! Builds the cloud from the provider's checked settings ([`crate::config::Config::cloud`]).

use std::time::{Duration, Instant};

use cloud_client::{Cloud, CloudError};

use crate::config::Config;
use crate::runtime::{RunError, Runtime};

/// How long a cloud that cannot be reached at start-up is waited for before the process gives up
/// (exit 1; the kubelet then restarts it with its own backoff). No new attempt starts after it:
/// the admin server listens only once the cloud is built, and the chart's liveness probe kills a
/// silent container after about 25 s (5 s initial delay, three failed probes 10 s apart).
const STARTUP_PATIENCE: Duration = Duration::from_secs(15);

/// Builds the selected provider's cloud. What the cloud says about the configuration itself (a
/// configured network does not exist, the token is refused) is a [`RunError::Config`] (exit 2);
/// anything else (unreachable, 5xx) is a failure to retry (exit 1).
pub async fn build(config: &Config) -> Result<Cloud, RunError> {
    attempt(config).await.map_err(run_error)
}

/// [`build`] for a controller process: a cloud that cannot be reached yet (an API blip, a proxy
/// or an in-cluster simulator rolling over) is retried for [`STARTUP_PATIENCE`] instead of
/// costing a container restart and the kubelet's crash backoff. What the cloud says about the
/// configuration still ends the process at once.
pub async fn connect(rt: &Runtime) -> Result<Cloud, RunError> {
    let started = Instant::now();
    let mut wait = Duration::from_secs(1);
    loop {
        let e = match attempt(rt.config()).await {
            Ok(cloud) => return Ok(cloud),
            Err(e) => e,
        };
        if !e.is_retryable() || started.elapsed() + wait >= STARTUP_PATIENCE {
            return Err(run_error(e));
        }
        tracing::warn!(error = %e, retry_in = ?wait, "the cloud cannot be reached yet; retrying");
        tokio::select! {
            _ = rt.shutdown().cancelled() => return Err(run_error(e)),
            _ = tokio::time::sleep(wait) => {}
        }
        wait *= 2;
    }
}

async fn attempt(config: &Config) -> Result<Cloud, CloudError> {
    let cloud = config
        .cloud
        .as_ref()
        .ok_or_else(|| CloudError::InvalidConfig {
            problems: vec!["no cloud settings".into()],
        })?;
    cloud.build().await
}

fn run_error(e: CloudError) -> RunError {
    match &e {
        // RunError::Config says "invalid configuration" itself.
        CloudError::InvalidConfig { problems } => RunError::Config(problems.join("; ")),
        CloudError::NotFound { .. } => RunError::Config(e.to_string()),
        _ => RunError::Controller(e.into()),
    }
}
