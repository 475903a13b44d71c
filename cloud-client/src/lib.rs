//! Cloud-agnostic provider traits the four controllers consume, and their Hetzner Cloud implementation.
//!
//! This crate knows nothing about Kubernetes controllers: it speaks plain Rust types.
//!
//! - [`provider`]: the traits ([`Instances`], [`LoadBalancers`], [`Routes`]) and their plain types.
//! - [`error`]: [`CloudError`], classified into not-found / retryable / permanent.
//! - [`stats`]: API call counters and rate-limit budget for the controllers' metrics.

pub mod error;
pub mod provider;
pub mod stats;

pub use error::{CloudError, ErrorClass};
pub use provider::*;
pub use stats::{ApiObserver, CallKey, ClientStats, RateLimitSnapshot, StatsSnapshot};
