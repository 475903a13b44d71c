//! The configured CloudStack provider: one transport, the project and zone of the cloud-config
//! resolved once at start (upstream resolves a project name before every call, and never uses
//! the zone), and the [`Cloud`] the controllers get: instances only, for now.

use std::sync::Arc;

use super::client::CloudStackApi;
use super::config::CloudStackConfig;
use super::errors::REFUSED_KEYS;
use super::instances::CloudStackInstances;
use super::load_balancer::CloudStackLoadBalancers;
use super::provider_id::PROVIDER_NAME;
use super::transport::Transport;
use super::wire::Zone;
use crate::capabilities::{Capability, Cloud, Instances, LoadBalancers};
use crate::error::CloudError;
use crate::shadow::PlannedWrites;
use crate::stats::ClientStats;

/// Why route-controller has nothing to do with this provider.
pub const NO_ROUTES: &str =
    "CloudStack offers no routes (nor does upstream's CCM: the pod network is the CNI's)";

/// The configured CloudStack clients (what `CloudStackProvider` builds).
#[derive(Debug, Clone)]
pub struct CloudStackClients {
    api: CloudStackApi,
    zone: Option<Zone>,
    project_id: Option<String>,
    instances: Arc<CloudStackInstances>,
    load_balancers: Arc<CloudStackLoadBalancers>,
}

impl CloudStackClients {
    /// Checks the keys and resolves the project and zone (one `listProjects` when a project is
    /// configured, one `listZones`): what the cloud says about them is a
    /// [`CloudError::InvalidConfig`] naming the setting.
    pub async fn new(config: CloudStackConfig) -> Result<Self, CloudError> {
        Self::with_planned_writes(config, None).await
    }

    /// Like [`new`](Self::new); in shadow mode (`planned_writes` given) every write is recorded
    /// there instead of being sent.
    pub async fn with_planned_writes(
        config: CloudStackConfig,
        planned_writes: Option<Arc<PlannedWrites>>,
    ) -> Result<Self, CloudError> {
        let transport = Transport::new(&config, ClientStats::new(), planned_writes)?;
        let unscoped = CloudStackApi::new(transport.clone(), None, config.client.jobs);
        let project_id = match &config.project_id {
            Some(p) => Some(resolve_project(&unscoped, p).await.map_err(refused)?),
            None => None,
        };
        let zones = unscoped.zones().await.map_err(refused)?;
        let zone = match &config.zone {
            Some(z) => Some(resolve_zone(&zones, z)?),
            None => None,
        };
        if config.ssl_no_verify {
            tracing::warn!(
                "ssl-no-verify is set: the CloudStack API's TLS certificate is not verified"
            );
        }
        let api = CloudStackApi::new(transport, project_id.clone(), config.client.jobs);
        let scope = match (&zone, &config.project_id) {
            (Some(z), Some(p)) => format!(", in zone {} and project {p}", z.name),
            (Some(z), None) => format!(", in zone {}", z.name),
            (None, Some(p)) => format!(", in project {p}"),
            (None, None) => String::new(),
        };
        let instances = Arc::new(CloudStackInstances::new(
            api.clone(),
            zone.as_ref().map(|z| z.id.clone()),
            scope,
            config.region.clone(),
        ));
        let load_balancers = Arc::new(CloudStackLoadBalancers::new(api.clone()));
        Ok(Self {
            api,
            zone,
            project_id,
            instances,
            load_balancers,
        })
    }

    /// What the controllers use: instances and load balancers; no routes, and why.
    pub fn cloud(&self) -> Cloud {
        let transport = self.api.transport();
        Cloud {
            provider_name: PROVIDER_NAME,
            instances: Some(self.instances()),
            load_balancers: Some(self.load_balancers()),
            routes: None,
            switched_off: vec![(Capability::Routes, NO_ROUTES.to_owned())],
            stats: transport.stats().clone(),
            other_api_stats: Vec::new(),
            credentials: Some(transport.credentials().clone()),
            // Upstream's CCM serves no metrics of its API calls.
            api_metric_families: None,
        }
    }

    pub fn instances(&self) -> Arc<dyn Instances> {
        self.instances.clone()
    }

    pub fn load_balancers(&self) -> Arc<dyn LoadBalancers> {
        self.load_balancers.clone()
    }

    /// The API (async jobs).
    pub fn api(&self) -> &CloudStackApi {
        &self.api
    }

    /// API call counters (for `/metrics`), by method and call template.
    pub fn stats(&self) -> Arc<ClientStats> {
        self.api.transport().stats().clone()
    }

    /// The configured zone's id, resolved.
    pub fn zone_id(&self) -> Option<&str> {
        self.zone.as_ref().map(|z| z.id.as_str())
    }

    /// The configured project's id, resolved.
    pub fn project_id(&self) -> Option<&str> {
        self.project_id.as_deref()
    }
}

/// `project-id` as an id: given as one (any case), or the one project the keys may use by that
/// name.
async fn resolve_project(api: &CloudStackApi, given: &str) -> Result<String, CloudError> {
    let problem = |why: String| CloudError::InvalidConfig {
        problems: vec![format!("project-id {given:?} in the cloud-config: {why}")],
    };
    let (found, asked) = if is_uuid(given) {
        let id = given.to_ascii_lowercase();
        match api.projects(Some(&id), None).await {
            Ok(found) => (found, "id"),
            // CloudStack answers an id it does not know with 431.
            Err(CloudError::Api(e)) if e.status == 431 => (Vec::new(), "id"),
            Err(e) => return Err(e),
        }
    } else {
        (api.projects(None, Some(given)).await?, "name")
    };
    let found: Vec<_> = found
        .into_iter()
        .filter(|p| {
            p.id.eq_ignore_ascii_case(given)
                || (asked == "name" && p.name.eq_ignore_ascii_case(given))
        })
        .collect();
    match found.as_slice() {
        [one] => Ok(one.id.clone()),
        [] => Err(problem(format!(
            "no project with this {asked} that these keys may use"
        ))),
        many => Err(problem(format!(
            "{} projects have this name ({}); give the project's id",
            many.len(),
            many.iter()
                .map(|p| p.id.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

/// `zone` as a zone: by id, else by name (case-insensitive).
fn resolve_zone(zones: &[Zone], given: &str) -> Result<Zone, CloudError> {
    zones
        .iter()
        .find(|z| z.id.eq_ignore_ascii_case(given))
        .or_else(|| zones.iter().find(|z| z.name.eq_ignore_ascii_case(given)))
        .cloned()
        .ok_or_else(|| CloudError::InvalidConfig {
            problems: vec![format!(
                "zone {given:?} in the cloud-config: no zone has this name or id (zones: {})",
                zones
                    .iter()
                    .map(|z| z.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )],
        })
}

/// A start-up call the keys themselves were refused for is the configuration's problem.
fn refused(e: CloudError) -> CloudError {
    match &e {
        CloudError::Api(api) if api.status == 401 => CloudError::InvalidConfig {
            problems: vec![format!("{REFUSED_KEYS}: {e}")],
        },
        _ => e,
    }
}

/// A UUID, in any case (CloudStack writes them in lower case).
fn is_uuid(s: &str) -> bool {
    let parts: Vec<&str> = s.split('-').collect();
    parts.len() == 5
        && parts
            .iter()
            .zip([8, 4, 4, 4, 12])
            .all(|(p, n)| p.len() == n && p.chars().all(|c| c.is_ascii_hexdigit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zones_by_id_or_name_and_projects_by_uuid_shape() {
        let zones = [
            Zone {
                id: "z1".into(),
                name: "Zone-1".into(),
            },
            Zone {
                id: "z2".into(),
                name: "zone-2".into(),
            },
        ];
        assert_eq!(resolve_zone(&zones, "zone-1").unwrap().id, "z1");
        assert_eq!(resolve_zone(&zones, "z2").unwrap().id, "z2");
        let e = resolve_zone(&zones, "zone-3").unwrap_err().to_string();
        assert!(
            e.contains("zone \"zone-3\"") && e.contains("Zone-1, zone-2"),
            "{e}"
        );
        assert!(is_uuid("6A4E0B52-2c8b-4a43-9d5e-5a1b2c3d4e5f"));
        assert!(!is_uuid("team-a"));
        assert!(!is_uuid("-1"));
    }
}
