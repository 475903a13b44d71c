//! What every handler shares: the world behind one mutex, the live configuration, the rate
//! limiters (Cloud and Robot), fault rules and counters.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::clock::now_ms;
use crate::config::SimConfig;
use crate::counters::Counters;
use crate::faults::Faults;
use crate::persistence;
use crate::rate_limit::{RateLimiter, RobotRateLimiter};
use crate::state::State;

pub type App = Arc<AppInner>;

#[derive(Debug)]
pub struct AppInner {
    state: Mutex<State>,
    pub config: SimConfig,
    pub action_ms: AtomicU64,
    pub rate: RateLimiter,
    /// The Robot webservice's per-resource limits (`/robot`).
    pub robot_rate: RobotRateLimiter,
    pub faults: Faults,
    pub counters: Counters,
    dirty: AtomicBool,
    /// The server the metadata service answers for when the request names none.
    pub metadata_server: Mutex<Option<u64>>,
    /// The token accepted now: `config.token` at start, changed by `Sim::set_token` (a token
    /// rotated in the project; the old one is refused from then on).
    pub token: Mutex<Option<String>>,
}

impl AppInner {
    pub fn new(config: SimConfig, state: State) -> App {
        Arc::new(AppInner {
            state: Mutex::new(state),
            action_ms: AtomicU64::new(config.action_duration.as_millis() as u64),
            rate: RateLimiter::new(config.rate_limit_per_hour),
            robot_rate: RobotRateLimiter::new(&[
                ("server", config.robot_server_requests_per_hour),
                ("reset", config.robot_reset_requests_per_hour),
            ]),
            faults: Faults::new(config.fault_seed),
            counters: Counters::new(config.request_log_capacity),
            dirty: AtomicBool::new(false),
            metadata_server: Mutex::new(None),
            token: Mutex::new(config.token.clone()),
            config,
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panicking handler must not take the whole simulator down with a poisoned lock.
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        st.action_ms = self.action_ms.load(Ordering::Relaxed);
        if st.advance(now_ms()) {
            self.dirty.store(true, Ordering::Relaxed);
        }
        st
    }

    /// The world, with finished actions applied.
    pub fn read(&self) -> MutexGuard<'_, State> {
        self.lock()
    }

    /// The world for a mutation; marks it for the next state-file write.
    pub fn write(&self) -> MutexGuard<'_, State> {
        let st = self.lock();
        self.dirty.store(true, Ordering::Relaxed);
        st
    }

    /// Writes the state file if one is configured and something changed since the last write.
    pub fn flush(&self) -> std::io::Result<()> {
        let Some(path) = &self.config.state_file else {
            return Ok(());
        };
        if !self.dirty.swap(false, Ordering::Relaxed) {
            return Ok(());
        }
        let st = self.lock();
        let result = persistence::save(path, &st);
        if result.is_err() {
            self.dirty.store(true, Ordering::Relaxed);
        }
        result
    }
}

impl AppInner {
    pub fn set_action_duration(&self, d: std::time::Duration) {
        self.action_ms
            .store(d.as_millis() as u64, Ordering::Relaxed);
    }

    pub fn mark_dirty(&self) {
        self.dirty.store(true, Ordering::Relaxed);
    }
}
