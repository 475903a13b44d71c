//! Hetzner Cloud as a registered provider (`--cloud-provider=hcloud`, the default): the `HCLOUD_*`
//! settings every binary lists, with HCCM's names, and how they become a [`Cloud`].

use std::sync::Arc;

use async_trait::async_trait;

use super::cloud::{HcloudClients, PROVIDER_NAME};
use super::config::HcloudConfig;
use crate::capabilities::{Capability, Cloud};
use crate::error::CloudError;
use crate::registry::{KitSetting, Provider, ProviderConfig, Setting, SettingValues, Uses};
use crate::shadow::PlannedWrites;

/// The settings listed in `--help` (each also a flag). The rest of HCCM's variables, e.g. the
/// `HCLOUD_LOAD_BALANCERS_*` defaults and `ROBOT_*`, are read from the environment alone.
const SETTINGS: &[Setting] = &[
    Setting {
        env: "HCLOUD_METRICS_ENABLED",
        help: "HCCM's switch for the `/metrics` page (default true).",
        secret: false,
        kit: Some(KitSetting::MetricsEnabled),
    },
    Setting {
        env: "HCLOUD_METRICS_ADDRESS",
        help: "Serve `/metrics` on this address (`host:port` or `:port`) instead of the admin \
               address (HCCM's variable; HCCM's default `:8233` is not assumed: on a shared host \
               network the four controllers could not all bind it). Each controller needs its own \
               on a host network.",
        secret: false,
        kit: Some(KitSetting::MetricsAddress),
    },
    Setting {
        env: "HCLOUD_TOKEN",
        help: "API token (env only in production; never logged).",
        secret: true,
        kit: None,
    },
    Setting {
        env: "HCLOUD_TOKEN_FILE",
        help: "File holding the API token (content trimmed).",
        secret: false,
        kit: None,
    },
    Setting {
        env: "HCLOUD_ENDPOINT",
        help: "API endpoint.",
        secret: false,
        kit: None,
    },
    Setting {
        env: "HCLOUD_NETWORK",
        help: "Network ID or name.",
        secret: false,
        kit: None,
    },
    Setting {
        env: "HCLOUD_INSTANCES_ADDRESS_FAMILY",
        help: "`ipv4` (default), `ipv6` or `dualstack`.",
        secret: false,
        kit: None,
    },
    Setting {
        env: "HCLOUD_INSTANCES_ZONE_LABEL_ENABLED",
        help: "Set zone labels (default true).",
        secret: false,
        kit: None,
    },
    Setting {
        env: "HCLOUD_SERVER_CACHE_MAX_AGE",
        help: "Server snapshot max age (Go duration, default 10s).",
        secret: false,
        kit: None,
    },
    Setting {
        env: "HCLOUD_SERVER_CACHE_RELIST_PERIOD",
        help: "Until the server list is this old, one call to the servers' action list confirms it \
               when no server changed, instead of listing them all again (Go duration, default \
               1h; 0 lists every time).",
        secret: false,
        kit: None,
    },
    Setting {
        env: "HCLOUD_DEBUG",
        help: "Log every cloud request and response, the token redacted.",
        secret: false,
        kit: None,
    },
];

/// The Hetzner provider's registration.
#[derive(Debug, Clone, Copy, Default)]
pub struct HcloudProvider;

impl Provider for HcloudProvider {
    fn name(&self) -> &'static str {
        PROVIDER_NAME
    }

    fn settings(&self) -> &'static [Setting] {
        SETTINGS
    }

    fn configure(
        &self,
        values: &SettingValues,
        uses: &Uses,
    ) -> Result<Arc<dyn ProviderConfig>, Vec<String>> {
        // Without load balancers their defaults are not even read, so a bad one stops only the
        // controller it concerns.
        let lookup = |name: &str| {
            if !uses.load_balancers && name.starts_with("HCLOUD_LOAD_BALANCERS_") {
                return None;
            }
            values.get(name)
        };
        match HcloudConfig::from_settings(values.secret("HCLOUD_TOKEN"), lookup) {
            Ok(config) => Ok(Arc::new(ConfiguredHcloud {
                config,
                planned_writes: uses.shadow.clone(),
            })),
            Err(CloudError::InvalidConfig { problems }) => Err(problems),
            Err(other) => Err(vec![other.to_string()]),
        }
    }

    fn requirements(&self, capability: Capability, values: &SettingValues) -> Vec<String> {
        let network = values
            .get("HCLOUD_NETWORK")
            .filter(|n| !n.trim().is_empty());
        match capability {
            // HCCM silently runs without routes when no network is set; here it is a problem.
            Capability::Routes if network.is_none() => vec![
                "HCLOUD_NETWORK is required when routes are configured: the name or ID of the \
                 network the routes go into (or set --configure-cloud-routes=false)"
                    .to_string(),
            ],
            _ => Vec::new(),
        }
    }

    fn provider_id_example(&self) -> &'static str {
        "hcloud://"
    }
}

/// The Hetzner provider as one controller configured it: its settings and, in shadow mode, where
/// writes are recorded instead of sent.
#[derive(Debug)]
pub struct ConfiguredHcloud {
    pub config: HcloudConfig,
    pub planned_writes: Option<Arc<PlannedWrites>>,
}

#[async_trait]
impl ProviderConfig for ConfiguredHcloud {
    async fn build(&self) -> Result<Cloud, CloudError> {
        let clients =
            HcloudClients::with_planned_writes(self.config.clone(), self.planned_writes.clone());
        match clients.await {
            Ok(provider) => Ok(provider.cloud()),
            Err(CloudError::Api(api)) if matches!(api.status, 401 | 403) => {
                Err(CloudError::InvalidConfig {
                    problems: vec![format!(
                        "HCLOUD_TOKEN was refused: {}",
                        CloudError::Api(api)
                    )],
                })
            }
            Err(e) => Err(e),
        }
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Secret;

    fn values(pairs: &[(&'static str, &str)]) -> SettingValues {
        let owned: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        SettingValues::with_env(move |name| {
            owned
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
        })
    }

    #[test]
    fn load_balancer_defaults_are_read_only_by_who_uses_them() {
        let v = values(&[
            ("HCLOUD_TOKEN", "t"),
            ("HCLOUD_LOAD_BALANCERS_TYPE", ""),
            ("HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_RETRIES", "many"),
        ]);
        assert!(HcloudProvider.configure(&v, &Uses::default()).is_ok());
        let problems = HcloudProvider
            .configure(
                &v,
                &Uses {
                    load_balancers: true,
                    shadow: None,
                },
            )
            .unwrap_err();
        assert!(
            problems
                .iter()
                .any(|p| p.contains("HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_RETRIES")),
            "{problems:?}"
        );
    }

    #[test]
    fn a_declared_token_is_taken_as_given_and_never_shown() {
        let mut v = values(&[]);
        v.give_secret("HCLOUD_TOKEN", Some(Secret::new("t0ken\n")));
        let config = HcloudProvider.configure(&v, &Uses::default()).unwrap();
        assert!(!format!("{config:?}").contains("t0ken"));
        let missing = HcloudProvider
            .configure(&values(&[]), &Uses::default())
            .unwrap_err();
        assert!(
            missing.iter().any(|p| p.contains("HCLOUD_TOKEN")),
            "{missing:?}"
        );
    }

    #[test]
    fn routes_require_a_network() {
        let without = HcloudProvider.requirements(Capability::Routes, &values(&[]));
        assert!(without[0].starts_with("HCLOUD_NETWORK is required"));
        let with = values(&[("HCLOUD_NETWORK", "k8s")]);
        assert!(
            HcloudProvider
                .requirements(Capability::Routes, &with)
                .is_empty()
        );
        assert!(
            HcloudProvider
                .requirements(Capability::LoadBalancers, &values(&[]))
                .is_empty()
        );
    }
}
