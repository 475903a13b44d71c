//! The tables the data plane's tasks share: its configuration, the health-check speedup, the measured
//! health (the world renders `health_status` from the same table) and the target faults.

use tokio::sync::watch;

use super::faults::TargetFaults;
use crate::config::DataPlaneConfig;
use crate::state::TargetHealth;

#[derive(Debug)]
pub struct Tables {
    pub config: DataPlaneConfig,
    /// The health-check speedup now; checkers watch it, so a change applies to the waits under
    /// way.
    speedup: watch::Sender<f64>,
    /// Measured health; the world renders `health_status` from the same table.
    pub health: TargetHealth,
    pub faults: TargetFaults,
}

impl Tables {
    pub fn new(config: DataPlaneConfig) -> Tables {
        let speedup = valid_speedup(config.health_check_speedup).unwrap_or(1.0);
        Tables {
            speedup: watch::Sender::new(speedup),
            config,
            health: TargetHealth::default(),
            faults: TargetFaults::default(),
        }
    }

    pub fn speedup(&self) -> f64 {
        *self.speedup.borrow()
    }

    /// Sets the health-check speedup; `false` (and no change) unless it is a positive number.
    pub fn set_speedup(&self, speedup: f64) -> bool {
        match valid_speedup(speedup) {
            Some(s) => {
                self.speedup.send_replace(s);
                true
            }
            None => false,
        }
    }

    pub(super) fn subscribe_speedup(&self) -> watch::Receiver<f64> {
        self.speedup.subscribe()
    }
}

fn valid_speedup(s: f64) -> Option<f64> {
    (s.is_finite() && s > 0.0).then_some(s)
}
