//! What every controller binary shares on the Kubernetes side: configuration (flags + HCCM env),
//! tracing/OTLP, the admin server (`/healthz`, `/readyz`, `/metrics`), leader election on a Lease,
//! event publishing, graceful shutdown and the runtime that ties them together.
//!
//! A controller's `main.rs` parses its clap struct and calls [`runtime::main`]; its library exposes a
//! `start(Runtime, …)` that tests call with [`Runtime::new`].

pub mod admin;
pub mod allocator;
pub mod backoff;
pub mod budget;
pub mod cli;
pub mod cloud;
pub mod code_pages;
pub mod config;
mod crypto;
pub mod dry_run;
pub mod events;
pub mod first_list;
mod info;
pub mod kube_rate;
pub mod leader;
pub mod metrics;
pub mod runtime;
pub mod shutdown;
pub mod slim_node;
pub mod telemetry;
pub mod upstream_metrics;
pub mod watch;

pub use admin::Readiness;
pub use config::{CommonArgs, Config, ConfigError, Problems};
pub use crypto::install_crypto_provider;
pub use events::{Events, Reporters};
pub use info::ControllerInfo;
pub use leader::{LeaderGate, Leadership};
pub use metrics::KitMetrics;
pub use runtime::{Context, RunError, Runtime};
