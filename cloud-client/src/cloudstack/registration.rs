//! CloudStack as a registered provider (`--cloud-provider=external-cloudstack`, upstream's
//! name): one setting, the cloud-config file, given as upstream's deployment gives it
//! (`--cloud-config=/config/cloud-config`), and how it becomes a [`Cloud`].

use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;

use super::cloud::{CloudStackClients, NO_ROUTES};
use super::config::{CloudStackConfig, UPSTREAM_PATH};
use super::provider_id::{PREFIX, PROVIDER_NAME};
use crate::capabilities::{Capability, Cloud};
use crate::error::CloudError;
use crate::registry::{Provider, ProviderConfig, Setting, SettingValues, Uses};
use crate::shadow::PlannedWrites;

/// The variable (and flag, `--cloud-config`) naming the cloud-config file.
pub const CLOUD_CONFIG: &str = "CLOUD_CONFIG";

const SETTINGS: &[Setting] = &[Setting {
    env: CLOUD_CONFIG,
    help: "external-cloudstack: the cloud-config file (upstream's INI, section [Global] with \
           api-url, api-key, secret-key, project-id, zone, region, ssl-no-verify); upstream's \
           deployment mounts the Secret cloudstack-secret, key cloud-config, at \
           /config/cloud-config.",
    secret: false,
    kit: None,
}];

/// The CloudStack provider's registration.
#[derive(Debug, Clone, Copy, Default)]
pub struct CloudStackProvider;

impl Provider for CloudStackProvider {
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
        let Some(path) = values.get(CLOUD_CONFIG).filter(|p| !p.trim().is_empty()) else {
            return Err(vec![format!(
                "--cloud-config (or {CLOUD_CONFIG}) is required with \
                 --cloud-provider={PROVIDER_NAME}: the cloud-config file, as upstream's \
                 deployment passes it (--cloud-config={UPSTREAM_PATH})"
            )]);
        };
        let config = CloudStackConfig::from_file(Path::new(path.trim()))?;
        Ok(Arc::new(ConfiguredCloudStack {
            config,
            planned_writes: uses.shadow.clone(),
        }))
    }

    fn requirements(&self, capability: Capability, _values: &SettingValues) -> Vec<String> {
        match capability {
            // Upstream's CCM does not start its route controller for this cloud; a
            // route-controller started anyway stops at once and says why.
            Capability::Routes => vec![format!(
                "--cloud-provider={PROVIDER_NAME}: {NO_ROUTES}; do not run route-controller \
                 (or pass --configure-cloud-routes=false)"
            )],
            _ => Vec::new(),
        }
    }

    fn provider_id_example(&self) -> &'static str {
        PREFIX
    }
}

/// The CloudStack provider as one controller configured it.
#[derive(Debug)]
pub struct ConfiguredCloudStack {
    pub config: CloudStackConfig,
    pub planned_writes: Option<Arc<PlannedWrites>>,
}

#[async_trait]
impl ProviderConfig for ConfiguredCloudStack {
    async fn build(&self) -> Result<Cloud, CloudError> {
        let clients = CloudStackClients::with_planned_writes(
            self.config.clone(),
            self.planned_writes.clone(),
        )
        .await?;
        Ok(clients.cloud())
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn values(path: Option<&str>) -> SettingValues {
        let mut v = SettingValues::with_env(|_| None);
        v.give(CLOUD_CONFIG, path.map(str::to_owned));
        v
    }

    #[test]
    fn the_file_is_required_and_read_at_configure() {
        let missing = CloudStackProvider
            .configure(&values(None), &Uses::default())
            .unwrap_err();
        assert!(missing[0].contains("--cloud-config"), "{missing:?}");
        assert!(missing[0].contains("/config/cloud-config"), "{missing:?}");

        let mut f = tempfile::NamedTempFile::new().unwrap();
        write!(
            f,
            "[Global]\napi-url = http://127.0.0.1:1/client/api\napi-key = AKEYakeyAKEYakey\n\
             secret-key = SKEYskeySKEYskey\nfoo = bar\n"
        )
        .unwrap();
        let path = f.path().to_str().unwrap().to_owned();
        let problems = CloudStackProvider
            .configure(&values(Some(&path)), &Uses::default())
            .unwrap_err();
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(
            problems[0].contains(&format!("{path} line 5")),
            "{problems:?}"
        );

        let mut ok = tempfile::NamedTempFile::new().unwrap();
        write!(
            ok,
            "[Global]\napi-url = http://127.0.0.1:1/client/api\napi-key = AKEYakeyAKEYakey\n\
             secret-key = SKEYskeySKEYskey\n"
        )
        .unwrap();
        let configured = CloudStackProvider
            .configure(&values(Some(ok.path().to_str().unwrap())), &Uses::default())
            .unwrap();
        let shown = format!("{configured:?}");
        assert!(
            !shown.contains("skeySKEY") && !shown.contains("akeyAKEY"),
            "{shown}"
        );
    }

    #[test]
    fn routes_are_refused_with_one_line_and_the_rest_is_not() {
        let v = values(None);
        let routes = CloudStackProvider.requirements(Capability::Routes, &v);
        assert_eq!(routes.len(), 1);
        assert!(!routes[0].contains('\n'));
        assert!(
            routes[0].contains("--configure-cloud-routes=false"),
            "{routes:?}"
        );
        assert!(
            CloudStackProvider
                .requirements(Capability::Instances, &v)
                .is_empty()
        );
        assert!(
            CloudStackProvider
                .requirements(Capability::LoadBalancers, &v)
                .is_empty()
        );
    }
}
