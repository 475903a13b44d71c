//! Cloud-agnostic provider traits the four controllers consume, and their Hetzner Cloud implementation.
//!
//! This crate knows nothing about Kubernetes controllers: it speaks plain Rust types.
//!
//! - [`provider`]: the traits ([`Instances`], [`LoadBalancers`], [`Routes`]) and their plain types.
//! - [`error`]: [`CloudError`], classified into not-found / retryable / permanent.
//! - [`stats`]: API call counters and rate-limit budget for the controllers' metrics.

// CloudError carries the cloud's code, message and correlation id inline so controllers can match on
// them directly; it travels only on the slow path after a network call, so its size does not matter.
#![allow(clippy::result_large_err)]

pub mod error;
pub mod hcloud;
pub mod provider;
pub mod stats;

pub use error::{CloudError, ErrorClass};
pub use provider::*;
pub use stats::{ApiObserver, CallKey, ClientStats, RateLimitSnapshot, StatsSnapshot};
