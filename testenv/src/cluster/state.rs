//! What `up` records in the state directory, so `down` can undo it from another process.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::host;
use super::layout::Layout;
use crate::error::{Error, Result};

/// What `up` recorded: enough for `down` to undo it from another process.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct State {
    pub node: String,
    pub node_ip: String,
    /// Values of [`host::SYSCTLS`] before `up`.
    pub sysctls_before: BTreeMap<String, String>,
    /// [`host::HOST_PATHS`] that did not exist before `up`.
    pub absent_paths: Vec<String>,
    /// The iptables/ip6tables tables (`ip nat`, `ip6 filter`, ...) that existed before `up`.
    #[serde(default)]
    pub tables_before: Vec<String>,
    /// In start order.
    pub processes: Vec<RecordedProcess>,
    #[serde(default)]
    pub cloud_sim: Option<CloudSim>,
    /// The address `up` added to `lo` for kubelet's `--node-ip`, if any.
    #[serde(default)]
    pub added_address: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RecordedProcess {
    pub name: String,
    pub pid: u32,
    /// See [`host::start_ticks`].
    pub start: u64,
}

impl RecordedProcess {
    pub(super) fn alive(&self) -> bool {
        crate::process::pid_alive(self.pid) && host::start_ticks(self.pid) == Some(self.start)
    }
}

impl State {
    pub(super) fn read(l: &Layout) -> Option<State> {
        serde_json::from_slice(&std::fs::read(l.state_file()).ok()?).ok()
    }
    pub(super) fn write(&self, l: &Layout) -> Result<()> {
        let path = l.state_file();
        let json = serde_json::to_vec_pretty(self).expect("state serializes");
        std::fs::write(&path, json).map_err(Error::io(format!("writing {}", path.display())))
    }
    /// Whether every recorded process still runs.
    pub fn running(&self) -> bool {
        !self.processes.is_empty() && self.processes.iter().all(RecordedProcess::alive)
    }
}

/// The state of the cluster in the default state directory, if `up` ran and `down` did not.
pub fn status() -> Option<State> {
    State::read(&Layout::default())
}

/// The cloud-sim `up` started: where it answers, its token, and the node's server.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CloudSim {
    /// `HCLOUD_ENDPOINT`.
    pub endpoint: String,
    /// `HCLOUD_TOKEN`.
    pub token: String,
    pub server_id: u64,
}
