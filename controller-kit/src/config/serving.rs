//! Where the controller answers: the admin server (`/healthz`, `/readyz`, `/metrics`, `/plan`) and,
//! when the provider's settings say so, `/metrics` on an address of its own or not at all. Those
//! two settings go by the provider's names (HCCM's metrics variables on Hetzner), so an operator's
//! environment keeps working unchanged.

use std::net::SocketAddr;

use clap::Args;
use cloud_client::registry::{KitSetting, Provider, SettingValues};

use super::problems::Problems;
use super::problems::parse_listen_address;
use crate::info::ControllerInfo;

/// The admin server's flag.
#[derive(Args, Debug, Clone, Default)]
pub struct ServingArgs {
    /// Admin HTTP server (/healthz, /readyz, /metrics) address: `host:port` or `:port`.
    /// Defaults to `0.0.0.0:<controller default port>`.
    #[arg(long, env = "ADMIN_ADDRESS")]
    pub admin_address: Option<String>,
}

impl ServingArgs {
    /// The admin server's address.
    pub fn admin_address(&self, info: &ControllerInfo, p: &mut Problems) -> SocketAddr {
        let default = SocketAddr::from(([0, 0, 0, 0], info.default_admin_port));
        match &self.admin_address {
            Some(a) => parse_listen_address("--admin-address", a).unwrap_or_else(|e| {
                p.push(e);
                default
            }),
            None => default,
        }
    }
}

/// Where the `/metrics` page is served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricsServing {
    /// On the admin address, next to the probes (the default).
    OnAdmin,
    /// On its own address, named by the provider's `setting`.
    At {
        addr: SocketAddr,
        setting: &'static str,
    },
    /// Not at all.
    Off,
}

/// The provider's metrics settings (empty values count as unset).
pub fn metrics_serving(
    provider: &dyn Provider,
    values: &SettingValues,
    p: &mut Problems,
) -> MetricsServing {
    let setting = |kit: KitSetting| {
        provider
            .settings()
            .iter()
            .find(|s| s.kit == Some(kit))
            .map(|s| s.env)
    };
    let value = |env: Option<&'static str>| {
        env.and_then(|e| values.get(e))
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
            .zip(env)
    };
    let enabled = match value(setting(KitSetting::MetricsEnabled)) {
        Some((v, name)) => p.bool(name, &v, true),
        None => true,
    };
    match value(setting(KitSetting::MetricsAddress)) {
        _ if !enabled => MetricsServing::Off,
        Some((a, name)) => match parse_listen_address(name, &a) {
            Ok(addr) => MetricsServing::At {
                addr,
                setting: name,
            },
            Err(e) => {
                p.push(e);
                MetricsServing::OnAdmin
            }
        },
        None => MetricsServing::OnAdmin,
    }
}
