//! The configured Hetzner provider: one transport, one server snapshot and one action waiter
//! shared by instances, load balancers and routes.

use std::sync::Arc;
use std::time::Duration;

use super::actions::ActionWaiter;
use super::servers::ServerCache;
use super::transport::Req;
use super::wire::{Network, NetworkResponse, NetworksPage};
use crate::capabilities::{
    ApiMetricFamilies, Capability, Cloud, Instances, LoadBalancers, MetricFamily, Routes,
};
use crate::error::CloudError;
use crate::shadow::PlannedWrites;
use crate::stats::ClientStats;

use super::config::HcloudConfig;
use super::instances::HcloudInstances;
use super::load_balancer::HcloudLoadBalancers;
use super::routes::HcloudRoutes;
use super::transport::Transport;

/// Provider name (`--cloud-provider=hcloud`) and providerID scheme.
pub const PROVIDER_NAME: &str = "hcloud";

/// Routes may use an older server snapshot than node lookups (HCCM uses 1 minute for routes).
const ROUTES_SERVER_MAX_AGE: Duration = Duration::from_secs(60);

/// The configured Hetzner clients (what `HcloudProvider` builds): one transport, one server snapshot, one action waiter shared by
/// instances, load balancers and routes.
#[derive(Debug, Clone)]
pub struct HcloudClients {
    config: Arc<HcloudConfig>,
    transport: Transport,
    network: Option<Network>,
    instances: Arc<HcloudInstances>,
    load_balancers: Arc<HcloudLoadBalancers>,
    routes: Option<Arc<HcloudRoutes>>,
}

impl HcloudClients {
    /// Validates `config`, builds the HTTP client and, when `HCLOUD_NETWORK` is set, resolves the network
    /// once (by id, else by name); a missing network fails here, like HCCM's startup check.
    pub async fn new(config: HcloudConfig) -> Result<Self, CloudError> {
        Self::with_planned_writes(config, None).await
    }

    /// Like [`new`](Self::new); in shadow mode (`planned_writes` given) every write is recorded
    /// there instead of being sent.
    pub async fn with_planned_writes(
        config: HcloudConfig,
        planned_writes: Option<Arc<PlannedWrites>>,
    ) -> Result<Self, CloudError> {
        config.validate()?;
        for warning in &config.startup_warnings {
            tracing::warn!("{warning}");
        }
        if config.client.token.len() != 64 {
            tracing::warn!(
                len = config.client.token.len(),
                "HCLOUD_TOKEN is not 64 characters long"
            );
        }
        let transport = Transport::new(&config.client, ClientStats::new(), planned_writes)?;
        transport
            .credentials()
            .watch_file(config.client.token_file_poll);
        let servers = ServerCache::new(transport.clone(), &config.server_cache);
        let actions = ActionWaiter::new(transport.clone(), config.client.action_poll);
        let network = match &config.network.name_or_id {
            Some(n) => Some(resolve_network(&transport, n).await?),
            None => None,
        };
        let network_id = network.as_ref().map(|n| n.id);
        // One Robot client (one cached list) for nodes and targets, with its own call counters:
        // HCCM counts Robot calls apart (`hcloud_robot_*`).
        let robot = crate::robot::RobotClient::new(&config.robot, ClientStats::new())?;
        let instances = Arc::new(HcloudInstances {
            cache: servers.clone(),
            network_id,
            family: config.instances.address_family,
            zone_label_enabled: config.instances.zone_label_enabled,
            robot: robot.clone(),
            forward_internal_ips: config.robot.forward_internal_ips,
        });
        let load_balancers = Arc::new(
            HcloudLoadBalancers::new(
                transport.clone(),
                actions.clone(),
                servers.clone(),
                network_id,
                config.load_balancers.defaults.clone(),
            )
            .with_robot(config.robot.enabled, robot),
        );
        let routes = match (&network, config.routes.enabled) {
            (Some(n), true) => Some(Arc::new(HcloudRoutes::new(
                transport.clone(),
                actions.clone(),
                servers.clone(),
                n,
                ROUTES_SERVER_MAX_AGE,
            ))),
            _ => None,
        };
        Ok(Self {
            config: Arc::new(config),
            transport,
            network,
            instances,
            load_balancers,
            routes,
        })
    }

    /// The load balancers' client itself, for the stages' unit tests.
    #[cfg(test)]
    pub(crate) fn load_balancer_client(&self) -> Arc<HcloudLoadBalancers> {
        self.load_balancers.clone()
    }

    /// Everything a controller needs, as trait objects. Load balancers are `None` when
    /// `HCLOUD_LOAD_BALANCERS_ENABLED=false`; routes are `None` without a network or when disabled.
    pub fn cloud(&self) -> Cloud {
        let mut switched_off = Vec::new();
        if !self.config.load_balancers.enabled {
            switched_off.push((
                Capability::LoadBalancers,
                "HCLOUD_LOAD_BALANCERS_ENABLED=false".to_string(),
            ));
        }
        if self.routes.is_none() {
            let why = match self.network {
                None => "no HCLOUD_NETWORK",
                Some(_) => "HCLOUD_NETWORK_ROUTES_ENABLED=false",
            };
            switched_off.push((Capability::Routes, why.to_string()));
        }
        Cloud {
            provider_name: PROVIDER_NAME,
            instances: Some(self.instances()),
            load_balancers: self.load_balancers(),
            routes: self.routes(),
            switched_off,
            stats: self.stats(),
            other_api_stats: (self.instances.robot.as_ref())
                .map(|robot| ("robot_api", robot.stats().clone()))
                .into_iter()
                .collect(),
            credentials: Some(self.transport.credentials().clone()),
            api_metric_families: Some(HCLOUD_GO_METRICS),
        }
    }

    pub fn instances(&self) -> Arc<dyn Instances> {
        self.instances.clone()
    }

    pub fn load_balancers(&self) -> Option<Arc<dyn LoadBalancers>> {
        self.config
            .load_balancers
            .enabled
            .then(|| self.load_balancers.clone() as Arc<dyn LoadBalancers>)
    }

    pub fn routes(&self) -> Option<Arc<dyn Routes>> {
        self.routes.clone().map(|r| r as Arc<dyn Routes>)
    }

    /// API call counters and rate-limit budget (for `/metrics`).
    pub fn stats(&self) -> Arc<ClientStats> {
        self.transport.stats().clone()
    }

    /// The resolved `HCLOUD_NETWORK` id, if configured.
    pub fn network_id(&self) -> Option<i64> {
        self.network.as_ref().map(|n| n.id)
    }

    pub fn config(&self) -> &HcloudConfig {
        &self.config
    }

    /// One cheap authenticated call (`GET /locations`), for startup/readiness checks of token and connectivity.
    pub async fn check_connectivity(&self) -> Result<(), CloudError> {
        self.transport
            .call_empty(&Req::get("/locations", "/locations").query("per_page", "1"))
            .await
    }
}

/// `HCLOUD_NETWORK` may be an id or a name (hcloud-go `GetByIDOrName`: id first, then name).
async fn resolve_network(t: &Transport, id_or_name: &str) -> Result<Network, CloudError> {
    if let Ok(id) = id_or_name.parse::<i64>() {
        match t
            .call::<NetworkResponse>(&Req::get("/networks/{id}", format!("/networks/{id}")))
            .await
        {
            Ok(r) => return Ok(r.network),
            Err(e) if e.is_not_found() => {}
            Err(e) => return Err(e),
        }
    }
    let found = super::pagination::list_all::<NetworksPage>(
        t,
        Req::get("/networks", "/networks").query("name", id_or_name),
    )
    .await?;
    found
        .into_iter()
        .find(|n| n.name == id_or_name)
        .ok_or_else(|| CloudError::NotFound {
            what: format!("network {id_or_name:?} (HCLOUD_NETWORK)"),
            tried: vec!["network id".into(), "network name".into()],
        })
}

/// hcloud-go's instrumentation (`hcloud_api_*`) and HCCM's `cloud_controller_manager_operations`,
/// as HCCM serves them.
pub const HCLOUD_GO_METRICS: ApiMetricFamilies = ApiMetricFamilies {
    requests: MetricFamily {
        name: "hcloud_api_requests",
        help: "A counter for requests to the hcloud api per endpoint.",
    },
    request_duration: MetricFamily {
        name: "hcloud_api_request_duration_seconds",
        help: "A histogram of request latencies to the hcloud api .",
    },
    in_flight: MetricFamily {
        name: "hcloud_api_in_flight_requests",
        help: "A gauge of in-flight requests to the hcloud api.",
    },
    operations: MetricFamily {
        name: "cloud_controller_manager_operations",
        help: "The total number of operation was called",
    },
    api_endpoint,
};

/// hcloud-go's `api_endpoint`: the path template with every placeholder as `-`
/// (`/servers/{id}` → `/servers/-`), as its `ctxutil.SetOpPath` writes it.
fn api_endpoint(template: &str) -> String {
    let mut out = String::with_capacity(template.len());
    let mut in_placeholder = false;
    for c in template.chars() {
        match c {
            '{' => {
                in_placeholder = true;
                out.push('-');
            }
            '}' => in_placeholder = false,
            c if !in_placeholder => out.push(c),
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod metric_tests {
    use super::*;

    #[test]
    fn api_endpoints_are_written_as_hcloud_go_writes_them() {
        assert_eq!(api_endpoint("/servers/{id}"), "/servers/-");
        assert_eq!(
            api_endpoint("/load_balancers/{id}/actions/add_target"),
            "/load_balancers/-/actions/add_target"
        );
        assert_eq!(api_endpoint("/servers"), "/servers");
    }
}
