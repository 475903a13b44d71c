//! What every controller binary shares on the Kubernetes side: configuration (flags + HCCM env),
//! tracing/OTLP, the admin server (`/healthz`, `/readyz`, `/metrics`), leader election on a Lease,
//! event publishing, graceful shutdown and the runtime that ties them together.
//!
//! A controller's `main.rs` parses its clap struct and calls [`runtime::main`]; its library exposes a
//! `start(Runtime, …)` that tests call with [`Runtime::new`].

pub mod admin;
pub mod allocator;
pub mod backoff;
pub mod cli;
pub mod cloud;
pub mod config;
pub mod dry_run;
pub mod events;
pub mod kube_rate;
pub mod leader;
pub mod metrics;
pub mod runtime;
pub mod shutdown;
pub mod telemetry;
pub mod upstream_metrics;
pub mod watch;

pub use admin::Readiness;
pub use config::{CommonArgs, Config, ConfigError, Problems};
pub use events::Events;
pub use leader::{LeaderGate, Leadership};
pub use metrics::KitMetrics;
pub use runtime::{Context, RunError, Runtime};

/// Where a controller's reconciler reports: its Event publisher and the kit's metrics (a
/// [`Context`]'s, or a test's own).
#[derive(Clone)]
pub struct Reporters {
    pub events: Events,
    pub kit: KitMetrics,
}

impl std::fmt::Debug for Reporters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reporters").finish_non_exhaustive()
    }
}

/// Static identity of one controller binary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ControllerInfo {
    /// Binary / crate name, e.g. `node-controller`; Lease name suffix and metric label.
    pub name: &'static str,
    /// Upstream canonical name, e.g. `cloud-node-controller`.
    pub canonical: &'static str,
    /// Upstream alias, e.g. `cloud-node`.
    pub alias: &'static str,
    /// Event reporting component, e.g. `cloud-node-controller`.
    pub component: &'static str,
    /// Default admin port (distinct per controller).
    pub default_admin_port: u16,
    /// Default for `--concurrent-node-syncs`; `None` when this controller does not read it (the
    /// flag is then accepted without effect, and named in the startup Warning when given).
    pub node_syncs_default: Option<u16>,
    /// Whether this controller reads the provider's load-balancer settings. The others never
    /// parse them, so a wrong one stops only the controller it concerns.
    pub reads_load_balancer_settings: bool,
}

/// Installs aws-lc-rs as the process-wide rustls provider (call first in `main` and in tests).
pub fn install_crypto_provider() {
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
}
