//! The data plane: load balancers that carry TCP traffic and run real health checks. Off by
//! default (`SimConfig::data_plane`); then nothing here runs and load balancers are JSON only.
//!
//! - `mod.rs` (this file): [`DataPlane`] (kept in `AppInner`: the shared tables, the registry of
//!   listeners and checkers) and the reconciler task that makes listeners and checkers follow
//!   the world.
//! - `tables`: what the tasks share (configuration, speedup, health table, faults); `host`: what
//!   they need of the simulator (the world, `tables`, the address map), which `AppInner`
//!   implements, so nothing here names the app.
//! - `addresses`: simulated address → local address.
//! - `targets`: a load balancer's targets resolved to addresses.
//! - `listener`: accepting, balancing, relaying; `tls`: ending TLS for `https` services with
//!   their certificates.
//! - `health`: the checks and the status they decide.
//! - `proxy_protocol`: PROXY headers v1 and v2.
//! - `faults`: target faults (refuse, hang, fail health).
//! - `rules` and `rule_traffic`: CloudStack load-balancer rules, a listener per rule with the
//!   firewall or ACL enforced (the same reconciler opens and closes them).
//!
//! Reconciling: every mutation (`AppInner::write`) and every finished action wakes the
//! reconciler once the world's lock is released; a slow tick is the safety net. Per load
//! balancer with the public interface enabled, each service gets a listener on
//! `listen_ip:0`; a service that changes keeps its listener and address, one that goes (or
//! whose load balancer goes, or loses its public interface) closes it. Per load balancer,
//! service and resolved target a checker runs; its status is dropped with it.
//!
//! Locks are taken in one order only: the world, then the registry (`tasks`), then the health
//! table; none is held across an `.await`.

pub mod addresses;
pub mod faults;
mod health;
mod host;
mod listener;
mod proxy_protocol;
mod rule_traffic;
pub mod rules;
mod tables;
mod targets;
mod tls;

use std::collections::{BTreeMap, HashSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::net::TcpListener;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

pub use faults::TargetFault;
pub use host::{Host, HostRef};
pub use listener::ConnectionCounts;
use listener::ListenerRecord;
pub use tables::Tables;

use crate::config::DataPlaneConfig;
use crate::state::{HealthKey, State};

/// How often the reconciler looks at the world without being woken: only a safety net, the
/// change signal normally wakes it within a millisecond of a mutation.
const SAFETY_TICK: Duration = Duration::from_secs(1);

/// One listener as `GET /_sim/load_balancers/{id}/listeners` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListenerInfo {
    pub listen_port: u16,
    /// The service's protocol (`tcp`, `http`, `https`); `https` ends TLS at the listener, all
    /// are otherwise relayed as TCP.
    pub protocol: String,
    /// Where to connect to reach the service.
    pub address: SocketAddr,
    pub connections: ConnectionCounts,
}

/// The data plane: what its tasks share ([`Tables`], also reachable through `Deref`), the
/// reconciler's wake-up signal and the registry of running tasks; lives in
/// `AppInner::data_plane`.
#[derive(Debug)]
pub struct DataPlane {
    pub tables: Tables,
    /// Wakes the reconciler. `Notify` keeps one permit, so bursts of mutations coalesce and a
    /// change during a reconcile still triggers the next one.
    changed: Notify,
    tasks: Mutex<Tasks>,
}

impl std::ops::Deref for DataPlane {
    type Target = Tables;
    fn deref(&self) -> &Tables {
        &self.tables
    }
}

#[derive(Debug, Default)]
struct Tasks {
    /// Set by `stop`: nothing is started afterwards (a reconcile under way finds it).
    stopped: bool,
    reconciler: Option<JoinHandle<()>>,
    listeners: BTreeMap<(u64, u16), Listener>,
    checkers: BTreeMap<HealthKey, Checker>,
    /// CloudStack load-balancer rules' listeners, by rule id.
    rules: BTreeMap<String, rules::RuleListener>,
}

#[derive(Debug)]
struct Listener {
    address: SocketAddr,
    protocol: String,
    record: Arc<ListenerRecord>,
    task: JoinHandle<()>,
}

#[derive(Debug)]
struct Checker {
    /// Cleared when retired, so a check finishing just then does not write a status back.
    alive: Arc<AtomicBool>,
    task: JoinHandle<()>,
}

impl DataPlane {
    /// The tables only; [`start`] runs it.
    pub fn new(config: DataPlaneConfig) -> DataPlane {
        DataPlane {
            tables: Tables::new(config),
            changed: Notify::new(),
            tasks: Mutex::new(Tasks::default()),
        }
    }

    fn tasks(&self) -> MutexGuard<'_, Tasks> {
        self.tasks.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The world changed: reconcile soon.
    pub fn world_changed(&self) {
        self.changed.notify_one();
    }

    /// The listeners of load balancer `lb`, by listen port.
    pub fn listeners(&self, lb: u64) -> Vec<ListenerInfo> {
        self.tasks()
            .listeners
            .range((lb, 0)..=(lb, u16::MAX))
            .map(|((_, port), l)| ListenerInfo {
                listen_port: *port,
                protocol: l.protocol.clone(),
                address: l.address,
                connections: l.record.counts(),
            })
            .collect()
    }

    pub fn listener(&self, lb: u64, listen_port: u16) -> Option<SocketAddr> {
        self.tasks()
            .listeners
            .get(&(lb, listen_port))
            .map(|l| l.address)
    }

    /// Stops the reconciler, every listener (and its connections) and every checker; returns
    /// their handles, already aborted, for a caller that wants to wait for them.
    pub fn stop(&self) -> Vec<JoinHandle<()>> {
        let mut tasks = self.tasks();
        tasks.stopped = true;
        let mut handles: Vec<JoinHandle<()>> = tasks.reconciler.take().into_iter().collect();
        handles.extend(
            std::mem::take(&mut tasks.listeners)
                .into_values()
                .map(|l| l.task),
        );
        handles.extend(
            std::mem::take(&mut tasks.rules)
                .into_values()
                .map(|l| l.task),
        );
        for c in std::mem::take(&mut tasks.checkers).into_values() {
            c.alive.store(false, Ordering::SeqCst);
            handles.push(c.task);
        }
        for h in &handles {
            h.abort();
        }
        handles
    }
}

/// Starts the reconciler (it starts everything else). Needs a Tokio runtime.
pub fn start(app: HostRef, dp: &Arc<DataPlane>) {
    let task = tokio::spawn(reconcile_forever(app, dp.clone()));
    let mut tasks = dp.tasks();
    if tasks.stopped {
        task.abort();
    } else {
        tasks.reconciler = Some(task);
    }
}

async fn reconcile_forever(app: HostRef, dp: Arc<DataPlane>) {
    loop {
        reconcile(&app, &dp).await;
        tokio::select! {
            () = dp.changed.notified() => {}
            () = tokio::time::sleep(SAFETY_TICK) => {}
        }
    }
}

/// What should run, read from the world.
#[derive(Debug, Default)]
struct Desired {
    /// (load balancer, listen port) → protocol.
    listeners: BTreeMap<(u64, u16), String>,
    checks: HashSet<HealthKey>,
}

impl Desired {
    fn of(st: &State) -> Desired {
        let mut want = Desired::default();
        for lb in st.load_balancers.values() {
            if lb.public_enabled {
                for svc in &lb.services {
                    want.listeners
                        .insert((lb.id, svc.listen_port), svc.protocol.clone());
                }
            }
            // Checks run whether or not the public interface is on: the real load balancer
            // keeps checking its targets over whichever network reaches them.
            let resolved = targets::resolve(st, lb);
            for svc in &lb.services {
                for r in &resolved {
                    want.checks.insert(HealthKey {
                        lb: lb.id,
                        listen_port: svc.listen_port,
                        subject: r.subject.clone(),
                    });
                }
            }
        }
        want
    }
}

async fn reconcile(app: &HostRef, dp: &DataPlane) {
    rules::reconcile(app, dp).await;
    let want = Desired::of(&app.state());

    // Listeners: close the retired, keep the rest (with their address), then open the new.
    let to_open: Vec<((u64, u16), String)> = {
        let mut tasks = dp.tasks();
        if tasks.stopped {
            return;
        }
        tasks
            .listeners
            .retain(|key, l| match want.listeners.get(key) {
                Some(protocol) => {
                    protocol.clone_into(&mut l.protocol);
                    true
                }
                None => {
                    l.task.abort();
                    false
                }
            });
        want.listeners
            .iter()
            .filter(|(k, _)| !tasks.listeners.contains_key(k))
            .map(|(k, protocol)| (*k, protocol.clone()))
            .collect()
    };
    for ((lb, listen_port), protocol) in to_open {
        let socket = match TcpListener::bind(SocketAddr::new(dp.config.listen_ip, 0)).await {
            Ok(s) => s,
            Err(e) => {
                // Tried again at the next reconcile.
                tracing::warn!(lb, listen_port, error = %e, "cloud-sim data plane cannot listen");
                continue;
            }
        };
        let Ok(address) = socket.local_addr() else {
            continue;
        };
        let record = Arc::new(ListenerRecord::new(lb, listen_port));
        let task = tokio::spawn(listener::serve(app.clone(), socket, record.clone()));
        let mut tasks = dp.tasks();
        if tasks.stopped {
            task.abort();
            return;
        }
        tracing::debug!(lb, listen_port, %address, "cloud-sim data plane listening");
        tasks.listeners.insert(
            (lb, listen_port),
            Listener {
                address,
                protocol,
                record,
                task,
            },
        );
    }

    // Checkers: retire those whose target, service or load balancer went (and forget their
    // status); start the new ones, and any that ended because it briefly found its target
    // gone while the reconciler still wants it.
    let mut tasks = dp.tasks();
    if tasks.stopped {
        return;
    }
    let retired: Vec<HealthKey> = tasks
        .checkers
        .keys()
        .filter(|k| !want.checks.contains(k))
        .cloned()
        .collect();
    for key in retired {
        if let Some(c) = tasks.checkers.remove(&key) {
            c.alive.store(false, Ordering::SeqCst);
            c.task.abort();
        }
        dp.health.remove(&key);
    }
    for key in &want.checks {
        if tasks
            .checkers
            .get(key)
            .is_some_and(|c| !c.task.is_finished())
        {
            continue;
        }
        let alive = Arc::new(AtomicBool::new(true));
        let task = tokio::spawn(health::run(app.clone(), key.clone(), alive.clone()));
        tasks.checkers.insert(key.clone(), Checker { alive, task });
    }
    drop(tasks);
    dp.health.retain(|k| want.checks.contains(k));
}
