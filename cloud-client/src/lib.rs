//! Cloud-agnostic provider traits the four controllers consume, and their Hetzner Cloud implementation.
//!
//! This crate knows nothing about Kubernetes controllers: it speaks plain Rust types.
//!
//! - [`provider`]: the traits ([`Instances`], [`LoadBalancers`], [`Routes`]) and their plain types.
//! - [`error`]: [`CloudError`], classified into not-found / retryable / permanent.
//! - [`stats`]: API call counters and rate-limit budget for the controllers' metrics.
//! - [`credentials`]: the token, rotated from `HCLOUD_TOKEN_FILE` while running.
//! - [`plan`]: shadow mode's planned writes (`--dry-run`).
//! - [`hcloud`]: the Hetzner Cloud implementation (HCCM-compatible).
//!
//! ```no_run
//! # async fn demo() -> Result<(), cloud_client::CloudError> {
//! use cloud_client::hcloud::{HcloudConfig, HcloudProvider};
//! let config = HcloudConfig::from_env()?; // HCLOUD_* as HCCM reads them; all problems at once
//! let cloud = HcloudProvider::new(config).await?.cloud();
//! let instances = cloud.instances.clone().expect("always present on Hetzner");
//! let md = instances.instance_metadata(&cloud_client::NodeRef::new("node-1")).await?;
//! // Metrics: pull `cloud.stats.snapshot()` at scrape time, or install an `ApiObserver`.
//! let remaining = cloud.stats.remaining_budget();
//! # let _ = (md, remaining); Ok(()) }
//! ```
//!
//! Every HTTP request runs in a `cloud_request` debug span with `method`, `path` (template),
//! `status` and `correlation_id`.

pub mod credentials;
pub mod error;
pub mod hcloud;
pub mod plan;
pub mod provider;
pub mod robot;
pub mod stats;

pub use credentials::{Credentials, CredentialsStatus};
pub use error::{ApiError, CloudError, ErrorClass};
pub use provider::*;
pub use stats::{ApiObserver, CallKey, ClientStats, RateLimitSnapshot, StatsSnapshot};
