//! What every handler shares: the world behind one mutex, the live configuration, the rate
//! limiters (Cloud and Robot), fault rules and counters, and the data plane's shared half.

use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::clock::now_ms;
use crate::config::SimConfig;
use crate::counters::Counters;
use crate::data_plane::addresses::AddressMap;
use crate::data_plane::{DataPlane, Host, Tables};
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
    /// Simulated address → local address (`data_plane::addresses`). Always there: it is a
    /// plain table, and tests bind their responders through it before they need any traffic.
    pub addresses: AddressMap,
    /// Listeners, checkers and their tables; `None` unless `config.data_plane` is set.
    pub data_plane: Option<Arc<DataPlane>>,
}

impl AppInner {
    pub fn new(config: SimConfig, mut state: State) -> App {
        let data_plane = config
            .data_plane
            .clone()
            .map(|c| Arc::new(DataPlane::new(c)));
        state.target_health = data_plane.as_ref().map(|dp| dp.health.clone());
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
            addresses: AddressMap::default(),
            data_plane,
            config,
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panicking handler must not take the whole simulator down with a poisoned lock.
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        st.action_ms = self.action_ms.load(Ordering::Relaxed);
        if st.advance(now_ms()) {
            self.dirty.store(true, Ordering::Relaxed);
            // A finished action can change the world too (a server powered off); the data plane
            // re-reads it once this lock is released.
            self.world_changed();
        }
        st
    }

    /// The world, with finished actions applied.
    pub fn read(&self) -> MutexGuard<'_, State> {
        self.lock()
    }

    /// The world for a mutation; marks it for the next state-file write and, once the guard is
    /// dropped, tells the data plane to reconcile.
    pub fn write(&self) -> WriteGuard<'_> {
        let st = self.lock();
        self.dirty.store(true, Ordering::Relaxed);
        WriteGuard {
            guard: Some(st),
            app: self,
        }
    }

    /// Wakes the data plane's reconciler (no-op when it is off).
    fn world_changed(&self) {
        if let Some(dp) = &self.data_plane {
            dp.world_changed();
        }
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

/// The world locked for a mutation. Dropping it releases the lock first and then signals the
/// data plane, so the woken reconciler does not queue on a lock that is still held.
#[derive(Debug)]
pub struct WriteGuard<'a> {
    /// `Some` until dropped; taken in `drop` to unlock before signalling.
    guard: Option<MutexGuard<'a, State>>,
    app: &'a AppInner,
}

impl Deref for WriteGuard<'_> {
    type Target = State;

    fn deref(&self) -> &State {
        self.guard
            .as_deref()
            .expect("the guard is held until dropped")
    }
}

impl DerefMut for WriteGuard<'_> {
    fn deref_mut(&mut self) -> &mut State {
        self.guard
            .as_deref_mut()
            .expect("the guard is held until dropped")
    }
}

impl Drop for WriteGuard<'_> {
    fn drop(&mut self) {
        drop(self.guard.take());
        self.app.world_changed();
    }
}

impl Host for AppInner {
    fn state(&self) -> MutexGuard<'_, State> {
        self.read()
    }

    fn tables(&self) -> Option<&Tables> {
        self.data_plane.as_deref().map(|dp| &dp.tables)
    }

    fn addresses(&self) -> &AddressMap {
        &self.addresses
    }
}
