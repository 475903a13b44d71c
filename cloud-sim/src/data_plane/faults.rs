//! Target faults: a target that misbehaves on the wire, keyed by its *simulated* IP (the one the
//! API shows), so a test can break "server 3" without knowing where it is reached locally.
//! They act on the data plane only; the API fault rules (`crate::faults`) are separate.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

/// How a target misbehaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TargetFault {
    /// Forwarded connections and health checks fail at once, as if the port refused them.
    Refuse,
    /// Forwarded connections stay open but nothing is ever relayed; health checks time out.
    Hang,
    /// Health checks fail; traffic still flows (a target that is up but reports itself bad).
    FailHealth,
}

#[derive(Debug, Default)]
pub struct TargetFaults {
    faults: Mutex<BTreeMap<IpAddr, TargetFault>>,
}

impl TargetFaults {
    pub fn set(&self, ip: IpAddr, fault: TargetFault) {
        self.lock().insert(ip, fault);
    }

    /// `true` if there was one.
    pub fn clear(&self, ip: IpAddr) -> bool {
        self.lock().remove(&ip).is_some()
    }

    pub fn get(&self, ip: IpAddr) -> Option<TargetFault> {
        self.lock().get(&ip).copied()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<IpAddr, TargetFault>> {
        self.faults.lock().unwrap_or_else(|e| e.into_inner())
    }
}
