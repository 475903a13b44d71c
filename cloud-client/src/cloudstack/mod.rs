//! Apache CloudStack as a provider, a drop-in for upstream's CCM
//! (apache/cloudstack-kubernetes-provider v1.2.0): its name `external-cloudstack`, its
//! cloud-config file and Secret, its providerIDs, labels and addresses (docs/cloudstack.md).
//! Instances and load balancers; CloudStack has no routes.
//!
//! By concern:
//! - the configuration: [`config`] (upstream's cloud-config, read by `ini`);
//! - the API: `signing` (cloudstack-go's request signature), `transport` (one HTTP path:
//!   retries, errors, counters, shadow mode), `errors` (CloudStack's error answers), `wire`
//!   (its answers), [`client`] (the calls, lists read page by page, async jobs);
//! - the provider: [`provider_id`], [`metadata`] (a VM as its Node's metadata),
//!   [`instances`] (the VM of a Node), [`load_balancer`] (a Service's rules), [`cloud`] (start-up: keys, project, zone; the `Cloud`),
//!   [`registration`] (`--cloud-provider=external-cloudstack`).

pub mod client;
pub mod cloud;
pub mod config;
mod errors;
mod ini;
pub mod instances;
pub mod load_balancer;
pub mod metadata;
pub mod provider_id;
pub mod registration;
mod signing;
mod transport;
mod wire;

pub use client::CloudStackApi;
pub use cloud::CloudStackClients;
pub use config::{ClientSettings, CloudStackConfig, JobPolling};
pub use instances::CloudStackInstances;
pub use load_balancer::CloudStackLoadBalancers;
pub use provider_id::PROVIDER_NAME;
pub use registration::CloudStackProvider;
