//! Builds the cloud from the validated `HCLOUD_*` settings: our validated values for the keys this
//! crate checks (token, endpoint, network, address family, zone labels, cache age), the process
//! environment for every other HCCM variable (e.g. `HCLOUD_LOAD_BALANCERS_*`), all mapped into
//! cloud-client's [`HcloudConfig`].

use cloud_client::hcloud::{HcloudConfig, HcloudProvider};
use cloud_client::{Cloud, CloudError};

use crate::config::{AddressFamily, CloudSettings, Config};
use crate::runtime::RunError;

/// The `HcloudConfig` for `settings`; `env` supplies the variables this crate does not model.
pub fn hcloud_config(
    settings: &CloudSettings,
    env: impl Fn(&str) -> Option<String>,
) -> Result<HcloudConfig, CloudError> {
    let family = match settings.address_family {
        AddressFamily::Ipv4 => "ipv4",
        AddressFamily::Ipv6 => "ipv6",
        AddressFamily::DualStack => "dualstack",
    };
    let max_age = settings
        .server_cache_max_age
        .map(|d| format!("{}ms", d.as_millis()));
    HcloudConfig::from_lookup(|k| match k {
        "HCLOUD_TOKEN" => Some(settings.token.expose().to_string()),
        "HCLOUD_TOKEN_FILE" => None,
        "HCLOUD_ENDPOINT" => settings.endpoint.clone(),
        "HCLOUD_NETWORK" => settings.network.clone(),
        "HCLOUD_INSTANCES_ADDRESS_FAMILY" => Some(family.to_string()),
        "HCLOUD_INSTANCES_ZONE_LABEL_ENABLED" => Some(settings.zone_label_enabled.to_string()),
        "HCLOUD_SERVER_CACHE_MAX_AGE" => max_age.clone(),
        other => env(other),
    })
}

/// Builds the Hetzner provider from `config.cloud` (which must be set). What the cloud says about
/// the configuration itself — the `HCLOUD_NETWORK` does not exist, the token is refused — is a
/// [`RunError::Config`] (exit 2); anything else (unreachable, 5xx) is a failure to retry (exit 1).
pub async fn build(config: &Config) -> Result<Cloud, RunError> {
    let settings = config
        .cloud
        .as_ref()
        .ok_or_else(|| RunError::Config("no cloud settings (HCLOUD_TOKEN)".into()))?;
    let connect = async {
        let hc = hcloud_config(settings, |k| std::env::var(k).ok())?;
        Ok::<_, CloudError>(HcloudProvider::new(hc).await?.cloud())
    };
    connect.await.map_err(|e| match &e {
        CloudError::NotFound { .. } | CloudError::InvalidConfig { .. } => {
            RunError::Config(e.to_string())
        }
        CloudError::Api(api) if matches!(api.status, 401 | 403) => {
            RunError::Config(format!("HCLOUD_TOKEN was refused: {e}"))
        }
        _ => RunError::Controller(e.into()),
    })
}
