//! Builds the cloud from the provider's checked settings ([`crate::config::Config::cloud`]).

use cloud_client::{Cloud, CloudError};

use crate::config::Config;
use crate::runtime::RunError;

/// Builds the selected provider's cloud. What the cloud says about the configuration itself (a
/// configured network does not exist, the token is refused) is a [`RunError::Config`] (exit 2);
/// anything else (unreachable, 5xx) is a failure to retry (exit 1).
pub async fn build(config: &Config) -> Result<Cloud, RunError> {
    let cloud = config
        .cloud
        .as_ref()
        .ok_or_else(|| RunError::Config("no cloud settings".into()))?;
    cloud.build().await.map_err(|e| match &e {
        // RunError::Config says "invalid configuration" itself.
        CloudError::InvalidConfig { problems } => RunError::Config(problems.join("; ")),
        CloudError::NotFound { .. } => RunError::Config(e.to_string()),
        _ => RunError::Controller(e.into()),
    })
}
