//! The processes `up` starts (recorded as they start), waiting on them, the known causes of their
//! exits, and the timed steps `up` reports.

use std::path::Path;
use std::time::{Duration, Instant};

use super::host;
use super::layout::Layout;
use super::state::{RecordedProcess, State};
use crate::error::{Error, Result};
use crate::process::{Lifetime, Process};

pub(super) const READY_TIMEOUT: Duration = Duration::from_secs(120);
pub(super) const STOP_GRACE: Duration = Duration::from_secs(10);

/// One timed step of `up`.
#[derive(Debug, Clone)]
pub struct Step {
    pub name: String,
    pub took: Duration,
}

/// Records and prints how long each step took.
pub(super) struct Timer {
    pub(super) steps: Vec<Step>,
    pub(super) quiet: bool,
}

impl Timer {
    pub(super) fn time<T>(&mut self, name: &str, f: impl FnOnce() -> Result<T>) -> Result<T> {
        let started = Instant::now();
        let out = f()?;
        self.done(name, started);
        Ok(out)
    }
    pub(super) fn done(&mut self, name: &str, started: Instant) {
        let took = started.elapsed();
        if !self.quiet {
            eprintln!("cluster: {name} ({took:.1?})");
        }
        self.steps.push(Step {
            name: name.to_owned(),
            took,
        });
    }
}

/// kubelet's refusal of a cgroup v1 host (kubelet >= 1.35 with `failCgroupV1` unset or true).
pub const KUBELET_CGROUP_V1_REFUSAL: &str =
    "kubelet is configured to not run on a host using cgroup v1";

/// What `cluster up` says when kubelet refuses this host's cgroup v1.
pub const CGROUP_V1_CAUSE: &str = "this host runs cgroup v1 (hybrid, /sys/fs/cgroup/unified), and \
    kubelet 1.35 and later refuse cgroup v1 unless their KubeletConfiguration says \
    `failCgroupV1: false`. The cluster's kubelet.yaml sets it; a KubeletConfiguration of your own \
    needs the same line (kubelet and containerd then log deprecation warnings that change nothing), \
    or boot the host with cgroup v2 (systemd.unified_cgroup_hierarchy=1).";

/// The cause behind a component's exit, for exits this machine is known for.
pub fn known_cause(component: &str, log: &str) -> Option<&'static str> {
    match component {
        "kubelet" if log.contains(KUBELET_CGROUP_V1_REFUSAL) => Some(CGROUP_V1_CAUSE),
        _ => None,
    }
}

pub(super) fn cluster_error(step: &str, message: impl Into<String>) -> Error {
    Error::Cluster {
        step: step.to_owned(),
        message: message.into(),
    }
}

/// The processes `up` started, recorded in the state file as they start.
pub(super) struct Procs {
    pub(super) layout: Layout,
    pub(super) state: State,
    pub(super) running: Vec<Process>,
}

impl Procs {
    pub(super) fn spawn(
        &mut self,
        name: &'static str,
        program: &Path,
        args: &[String],
        env: &[(&str, String)],
    ) -> Result<()> {
        let log = self.layout.logs().join(format!("{name}.log"));
        let process = Process::spawn_with_env(name, program, args, env, log, Lifetime::Detached)?;
        let start = host::start_ticks(process.pid).unwrap_or_default();
        self.state.processes.push(RecordedProcess {
            name: name.to_owned(),
            pid: process.pid,
            start,
        });
        self.running.push(process);
        self.state.write(&self.layout)
    }

    /// Fails with the log tail of the first process that exited, and what it means when the log
    /// says something this machine is known for.
    pub(super) fn check(&mut self) -> Result<()> {
        for p in &mut self.running {
            if let Some(status) = p.exit_status() {
                let tail = p.log_tail(40);
                if let Some(cause) = known_cause(p.name, &tail) {
                    return Err(cluster_error(
                        p.name,
                        format!(
                            "exited ({status}): {cause}\nlog tail ({}):\n{tail}",
                            p.log.display()
                        ),
                    ));
                }
                return Err(Error::ExitedEarly {
                    component: p.name,
                    status,
                    log: p.log.clone(),
                    tail: p.log_tail(40),
                });
            }
        }
        Ok(())
    }

    /// Polls `probe` until it returns `Some`, failing when a process exits or after the timeout.
    pub(super) async fn wait<T, F, Fut>(&mut self, what: &'static str, mut probe: F) -> Result<T>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Option<T>>,
    {
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            if let Some(v) = probe().await {
                return Ok(v);
            }
            self.check()?;
            if Instant::now() > deadline {
                let tails = self
                    .running
                    .iter()
                    .map(|p| format!("--- {} ---\n{}", p.log.display(), p.log_tail(15)))
                    .collect::<Vec<_>>()
                    .join("\n");
                return Err(cluster_error(
                    what,
                    format!(
                        "not done within {} s; log tails:\n{tails}",
                        READY_TIMEOUT.as_secs()
                    ),
                ));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}
