//! Hetzner Cloud implementation of the provider traits, wire-compatible with
//! hcloud-cloud-controller-manager (providerIDs, labels, annotations, LB ownership label).
//!
//! Build it with [`HcloudClients::new`] from an [`HcloudConfig`] and hand [`HcloudClients::cloud`] to
//! the controllers.

pub mod cloud;
pub mod config;
pub mod external_ipv6;
pub mod instances;
pub mod load_balancer;
pub mod provider_id;
pub mod registration;
pub mod routes;

pub(crate) mod actions;
pub(crate) mod change_probe;
pub(crate) mod pagination;
pub(crate) mod rate_limit;
pub(crate) mod retry;
pub(crate) mod servers;
pub(crate) mod transport;
pub(crate) mod wire;

pub use cloud::{HcloudClients, PROVIDER_NAME};
pub use config::{
    ActionPollPolicy, AddressFamily, HcloudConfig, LbDefaults, RetryPolicy, ServerCacheMode, Token,
};
pub use instances::HcloudInstances;
pub use load_balancer::HcloudLoadBalancers;
pub use provider_id::ProviderId;
pub use registration::HcloudProvider;
pub use routes::HcloudRoutes;
pub use transport::Transport;
