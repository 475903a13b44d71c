//! What the data plane's tasks need of the simulator: the world to read, the tables they share
//! and the address map. `AppInner` provides it, so the data plane never names the app and the app
//! can hold the data plane without an import circle.

use std::sync::{Arc, MutexGuard};

use super::addresses::AddressMap;
use super::tables::Tables;
use crate::state::State;

pub trait Host: Send + Sync + 'static {
    /// The world, with finished actions applied.
    fn state(&self) -> MutexGuard<'_, State>;
    /// The tables the tasks share; `None` while the data plane is off.
    fn tables(&self) -> Option<&Tables>;
    fn addresses(&self) -> &AddressMap;
}

/// The simulator as the data plane's tasks hold it.
pub type HostRef = Arc<dyn Host>;
