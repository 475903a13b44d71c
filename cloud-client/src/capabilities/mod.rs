//! The cloud-agnostic surface the controllers program against.
//!
//! Controllers hold `Arc<dyn Instances>`, `Arc<dyn LoadBalancers>` and `Arc<dyn Routes>`, so a second cloud
//! can be added without touching them. All types are plain Rust (no kube types): the controller converts
//! Node/Service objects into these and the results back.
//!
//! By capability: [`instances`], [`load_balancers`], [`routes`]; here, the bundle a controller
//! binary builds once from them.

mod instances;
mod load_balancers;
mod read_once;
mod recorder;
mod routes;
mod tls_secrets;
mod warning;

pub use instances::*;
pub use load_balancers::*;
pub use read_once::ReadOnce;
pub use recorder::Recorder;
pub use routes::*;
pub use tls_secrets::{CERTIFICATE_SECRET_LABEL, SecretLookup, TlsSecret, TlsSecrets};
pub use warning::Warning;

use std::fmt;
use std::sync::Arc;

use crate::stats::ClientStats;

/// One capability of a cloud, as the controllers use them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Capability {
    Instances,
    LoadBalancers,
    Routes,
}

/// The capabilities one configured cloud offers. `None` = not supported/disabled (e.g. routes without a
/// network); a controller whose capability is `None` should log and stay idle.
#[derive(Clone)]
pub struct Cloud {
    /// Provider name, e.g. `hcloud`.
    pub provider_name: &'static str,
    pub instances: Option<Arc<dyn Instances>>,
    pub load_balancers: Option<Arc<dyn LoadBalancers>>,
    pub routes: Option<Arc<dyn Routes>>,
    /// For each capability that is `None`, what turned it off, in the provider's words (e.g.
    /// `HCLOUD_LOAD_BALANCERS_ENABLED=false`), for the idle controller's message.
    pub switched_off: Vec<(Capability, String)>,
    /// API call counters and rate-limit budget for the controller's `/metrics`.
    pub stats: Arc<ClientStats>,
    /// The counters of further APIs the provider calls, each with the name its metrics carry
    /// (`cloud_controllers_<name>_*`; Hetzner: the Robot webservice's as `robot_api`).
    pub other_api_stats: Vec<(&'static str, Arc<ClientStats>)>,
    /// The API token and the cloud's verdict on it (for metrics and readiness).
    pub credentials: Option<Arc<crate::credentials::Credentials>>,
    /// The families the controller the users switch from served for this cloud's API (Hetzner:
    /// hcloud-go's `hcloud_api_*` and HCCM's operations), so their dashboards keep working; the
    /// controllers serve `stats` under these names too. `None`: only ours.
    pub api_metric_families: Option<ApiMetricFamilies>,
}

/// Names (and help texts) under which a cloud's API calls were counted by the controller users
/// switch from. Served from [`Cloud::stats`] at scrape time.
#[derive(Debug, Clone, Copy)]
pub struct ApiMetricFamilies {
    /// Answered requests, a counter labelled `code`, `method` (lowercase) and `api_endpoint`.
    pub requests: MetricFamily,
    /// Request latency, a histogram labelled `method` (lowercase).
    pub request_duration: MetricFamily,
    /// Requests in flight, a gauge.
    pub in_flight: MetricFamily,
    /// Operations by name (`Cloud::stats` operations), a counter labelled `op`.
    pub operations: MetricFamily,
    /// The `api_endpoint` label of a request's path template (e.g. `/servers/{id}`).
    pub api_endpoint: fn(&str) -> String,
}

/// A metric family's name (without a counter's `_total`) and help text.
#[derive(Debug, Clone, Copy)]
pub struct MetricFamily {
    pub name: &'static str,
    pub help: &'static str,
}

impl Cloud {
    /// What turned `capability` off, when it is.
    pub fn why_off(&self, capability: Capability) -> &str {
        self.switched_off
            .iter()
            .find(|(c, _)| *c == capability)
            .map(|(_, why)| why.as_str())
            .unwrap_or("the provider's settings")
    }
}

impl fmt::Debug for Cloud {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cloud")
            .field("provider_name", &self.provider_name)
            .field("instances", &self.instances.is_some())
            .field("load_balancers", &self.load_balancers.is_some())
            .field("routes", &self.routes.is_some())
            .finish()
    }
}
