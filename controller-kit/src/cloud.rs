//! Builds the cloud from the configuration cloud-client parsed ([`crate::config::CloudArgs`]).

use cloud_client::hcloud::HcloudProvider;
use cloud_client::{Cloud, CloudError};

use crate::config::Config;
use crate::runtime::RunError;

/// Builds the Hetzner provider from `config.cloud` (which must be set). What the cloud says about
/// the configuration itself — the `HCLOUD_NETWORK` does not exist, the token is refused — is a
/// [`RunError::Config`] (exit 2); anything else (unreachable, 5xx) is a failure to retry (exit 1).
pub async fn build(config: &Config) -> Result<Cloud, RunError> {
    let hcloud = config
        .cloud
        .clone()
        .ok_or_else(|| RunError::Config("no cloud settings (HCLOUD_TOKEN)".into()))?;
    let provider = HcloudProvider::new(hcloud).await;
    provider.map(|p| p.cloud()).map_err(|e| match &e {
        CloudError::NotFound { .. } | CloudError::InvalidConfig { .. } => {
            RunError::Config(e.to_string())
        }
        CloudError::Api(api) if matches!(api.status, 401 | 403) => {
            RunError::Config(format!("HCLOUD_TOKEN was refused: {e}"))
        }
        _ => RunError::Controller(e.into()),
    })
}
