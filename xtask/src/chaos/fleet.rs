//! The four controllers as processes under their chart RBAC, `replicas` of each, each replica with
//! a stable identity (its pod name in a cluster) so a restarted process is the same "pod". The
//! suite kills (`SIGKILL`), stops (`SIGTERM`) and restarts them, and reads their `/metrics`.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;

use super::world::World;
use crate::demo::controllers::{self, Launch, Spec};

/// One replica of one controller.
pub struct Replica {
    pub spec: Spec,
    pub identity: String,
    pub admin: std::net::SocketAddr,
    pub log: PathBuf,
    kubeconfig: PathBuf,
    binary: PathBuf,
    child: Option<tokio::process::Child>,
}

impl Replica {
    /// Its `/metrics` text (empty while it is down).
    pub async fn metrics(&self) -> String {
        controllers::http_get(self.admin, "/metrics")
            .await
            .unwrap_or_default()
    }
}

/// Every replica the suite runs.
pub struct Fleet {
    pub replicas: Vec<Replica>,
    rust_log: String,
    /// Exits the suite did not cause (a crash, a lost Lease), as `<identity> (<status>)`.
    exits: Vec<String>,
}

impl Fleet {
    /// Binds each controller's chart RBAC, then starts `replicas` of each (`binaries` in the order
    /// of [`controllers::ALL`]); logs go to `dir`.
    pub async fn start(
        world: &World,
        binaries: &[PathBuf],
        replicas: usize,
        rust_log: &str,
        dir: &Path,
    ) -> anyhow::Result<Fleet> {
        std::fs::create_dir_all(dir)?;
        let mut fleet = Fleet {
            replicas: Vec::new(),
            rust_log: rust_log.to_owned(),
            exits: Vec::new(),
        };
        for (spec, binary) in controllers::ALL.iter().zip(binaries) {
            let kubeconfig = controllers::authorize(*spec, &world.plane, &world.admin, dir).await?;
            for i in 0..replicas {
                let identity = format!("{}-{i}", spec.name);
                fleet.replicas.push(Replica {
                    spec: *spec,
                    admin: controllers::free_port()?,
                    log: dir.join(format!("{identity}.log")),
                    identity,
                    kubeconfig: kubeconfig.clone(),
                    binary: binary.clone(),
                    child: None,
                });
            }
        }
        for i in 0..fleet.replicas.len() {
            fleet.start_replica(world, i)?;
        }
        Ok(fleet)
    }

    fn start_replica(&mut self, world: &World, i: usize) -> anyhow::Result<()> {
        let r = &mut self.replicas[i];
        let child = controllers::spawn(
            r.spec,
            &world.sim,
            &Launch {
                binary: &r.binary,
                kubeconfig: &r.kubeconfig,
                admin: r.admin,
                log: &r.log,
                identity: Some(&r.identity),
                rust_log: &self.rust_log,
            },
        )?;
        r.child = Some(child);
        Ok(())
    }

    /// `kill -9`, then starts it again at once (a container restart in the same pod).
    pub async fn crash_and_restart(&mut self, world: &World, i: usize) -> anyhow::Result<()> {
        self.kill(i).await;
        self.start_replica(world, i)
    }

    /// `kill -9`; returns when the process is gone.
    pub async fn kill(&mut self, i: usize) {
        if let Some(mut child) = self.replicas[i].child.take() {
            let _ = child.start_kill();
            let _ = child.wait().await;
        }
    }

    /// `SIGTERM`; waits up to `grace` for the exit (then kills), and returns the exit code.
    pub async fn terminate(&mut self, i: usize, grace: Duration) -> anyhow::Result<Option<i32>> {
        let Some(mut child) = self.replicas[i].child.take() else {
            return Ok(None);
        };
        let pid = child.id().context("no pid")?;
        std::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()?;
        match tokio::time::timeout(grace, child.wait()).await {
            Ok(status) => Ok(status?.code()),
            Err(_) => {
                let _ = child.start_kill();
                let _ = child.wait().await;
                anyhow::bail!(
                    "{} did not exit within {grace:?} of SIGTERM",
                    self.replicas[i].identity
                )
            }
        }
    }

    /// Starts a replica that [`Fleet::kill`] or [`Fleet::terminate`] stopped.
    pub fn restart(&mut self, world: &World, i: usize) -> anyhow::Result<()> {
        self.start_replica(world, i)
    }

    /// Records replicas that exited on their own since the last call; those exits.
    pub fn reap(&mut self) -> Vec<String> {
        let mut exited = Vec::new();
        for r in &mut self.replicas {
            if let Some(child) = r.child.as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                r.child = None;
                exited.push(format!("{} ({status})", r.identity));
            }
        }
        self.exits.extend(exited.iter().cloned());
        exited
    }

    /// Every exit the suite did not cause so far (reaping first).
    pub fn unexpected_exits(&mut self) -> Vec<String> {
        self.reap();
        self.exits.clone()
    }

    /// The replica holding `spec`'s Lease, by its `holderIdentity` (`<identity>_<random>`: like
    /// upstream, each process start gets a fresh holder id, so a restarted "pod" waits for its
    /// predecessor's Lease to expire like anyone else).
    pub async fn leader(&self, world: &World, spec: &str) -> anyhow::Result<Option<usize>> {
        let leases: Api<Lease> = Api::namespaced(world.admin.clone(), controllers::NAMESPACE);
        let lease = leases
            .get_opt(&format!("cloud-controller-manager-{spec}"))
            .await?;
        let holder = lease
            .and_then(|l| l.spec)
            .and_then(|s| s.holder_identity)
            .unwrap_or_default();
        Ok(self.replicas.iter().position(|r| {
            holder
                .strip_prefix(r.identity.as_str())
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('_'))
        }))
    }

    /// Polls until a replica other than `old` holds `spec`'s Lease; how long that took.
    pub async fn wait_new_leader(
        &self,
        world: &World,
        spec: &str,
        old: usize,
        timeout: Duration,
    ) -> anyhow::Result<(usize, Duration)> {
        let started = Instant::now();
        loop {
            if let Some(i) = self.leader(world, spec).await?
                && i != old
            {
                return Ok((i, started.elapsed()));
            }
            anyhow::ensure!(
                started.elapsed() < timeout,
                "no replica of {spec} took the Lease within {timeout:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Every log file.
    pub fn logs(&self) -> Vec<PathBuf> {
        self.replicas.iter().map(|r| r.log.clone()).collect()
    }

    /// The last lines of every log, for a failure report.
    pub fn log_tails(&self, lines: usize) -> String {
        self.replicas
            .iter()
            .map(|r| {
                let text = std::fs::read_to_string(&r.log).unwrap_or_default();
                let all: Vec<&str> = text.lines().collect();
                format!(
                    "--- {} ---\n{}",
                    r.identity,
                    all[all.len().saturating_sub(lines)..].join("\n")
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// A gauge or counter's value in a `/metrics` text (summed over label sets).
pub fn metric(text: &str, name: &str) -> f64 {
    text.lines()
        .filter(|l| {
            l.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with(' ') || rest.starts_with('{'))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}
