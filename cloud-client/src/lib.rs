//! Cloud-agnostic provider traits the four controllers consume, and their Hetzner Cloud implementation.
//!
//! This crate knows nothing about Kubernetes controllers: it speaks plain Rust types.
//!
//! The floor every provider stands on, naming no cloud:
//! - [`capabilities`]: the traits ([`Instances`], [`LoadBalancers`], [`Routes`]) and their plain types.
//! - [`error`]: [`CloudError`], classified into not-found / retryable / permanent.
//! - [`stats`]: API call counters and rate-limit budget for the controllers' metrics.
//! - [`secret`]: [`Secret`], the one redacted type of every credential.
//! - [`credentials`]: an API token, rotated from its file while running.
//! - [`shadow`]: shadow mode's planned writes (`--dry-run`).
//! - [`registry`]: providers by name (`--cloud-provider`), each declaring and checking its own
//!   settings; [`providers`] lists the built-in ones.
//! - [`values`], [`label_selector`]: the value parsers and the label-selector grammar settings and
//!   annotations share.
//! - `http`: the HTTP client builder every API client uses; [`retry`]: the retry policy and
//!   backoff every transport shares.
//!
//! The providers above it, siblings that never import each other except where said:
//! - [`hcloud`]: the Hetzner Cloud implementation (HCCM-compatible). Its instances and load
//!   balancers use [`robot`] on purpose: dedicated servers join a cluster as Cloud instances do, and
//!   become load-balancer IP targets.
//! - [`robot`]: Hetzner's dedicated servers (the Robot webservice).
//! - [`cloudstack`]: Apache CloudStack (upstream's `external-cloudstack`), node side.
//!
//! ```no_run
//! # async fn demo() -> Result<(), cloud_client::CloudError> {
//! use cloud_client::hcloud::{HcloudConfig, HcloudClients};
//! let config = HcloudConfig::from_env()?; // HCLOUD_* as HCCM reads them; all problems at once
//! let cloud = HcloudClients::new(config).await?.cloud();
//! let instances = cloud.instances.clone().expect("always present on Hetzner");
//! let md = instances.instance_metadata(&cloud_client::NodeRef::new("node-1")).await?;
//! // Metrics: pull `cloud.stats.snapshot()` at scrape time, or install an `ApiObserver`.
//! let remaining = cloud.stats.remaining_budget();
//! # let _ = (md, remaining); Ok(()) }
//! ```
//!
//! Every HTTP request runs in a `cloud_request` debug span with `method`, `path` (template),
//! `status` and `correlation_id`.

pub mod capabilities;
pub mod cloudstack;
pub mod credentials;
pub mod error;
pub mod hcloud;
pub(crate) mod http;
pub mod label_selector;
pub mod providers;
pub mod registry;
pub mod retry;
pub mod robot;
pub mod scrub;
pub mod secret;
pub mod shadow;
pub mod stats;
pub mod values;

/// The prefix of every key this project adds to Kubernetes or cloud objects (labels, annotations,
/// condition types). Keys named before it was chosen keep their names (the Service condition
/// `cloud-controllers.github.io/LoadBalancerReady`, the shared load balancers' labels
/// `shared.cloud-controllers/<uid>` and `cloud-controllers/shared-targets`) and are still read and
/// written; a key users write by hand is read in both spellings (`cloud-controllers/adopt`).
/// `xtask/tests/own_keys.rs` holds new keys to it.
pub const KEY_PREFIX: &str = "cloud-controllers.io/";

pub use capabilities::*;
pub use credentials::{Credentials, CredentialsStatus};
pub use error::{ApiError, CloudError, ErrorClass};
pub use secret::Secret;
pub use stats::{ApiObserver, CallKey, ClientStats, RateLimitSnapshot, StatsSnapshot};
