//! Failover: two replicas of every controller. For each controller, `kill -9` the leader and
//! time until the standby holds the Lease (bounded by the lease duration, 15 s), then `SIGTERM`
//! the new leader, which releases the Lease on its way out (the standby re-reads it every retry
//! period, 2 s). Afterwards the new leaders must still do their jobs. The controllers log at
//! `trace` here, so the token scan covers every level.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::Serialize;

use super::cluster::{ChaosCluster, Size};
use super::secrets::Scanner;
use super::{ChaosArgs, Row, await_convergence, cloud, log_dir, start_fleet, tear_down};
use crate::fleet::{self, Fleet};

const TAKEOVER_TIMEOUT: Duration = Duration::from_secs(60);

/// The takeover gaps of one controller.
#[derive(Debug, Clone, Serialize)]
pub struct Gap {
    pub controller: String,
    /// From `kill -9` of the leader until the standby holds the Lease.
    pub kill_s: f64,
    /// From `SIGTERM` to the leader until the standby holds the Lease.
    pub sigterm_s: f64,
    /// The exit code after SIGTERM (0 expected).
    pub sigterm_exit: Option<i32>,
}

pub async fn run(
    args: &ChaosArgs,
    binaries: &[PathBuf],
    logs: &Path,
    scan: &mut Scanner,
) -> anyhow::Result<(Row, Vec<Gap>)> {
    let size = Size {
        nodes: 10,
        services: 5,
    };
    let mut world = ChaosCluster::build(size, cloud::sim_config()).await?;
    let mut fleet = start_fleet(&world, binaries, 2, "trace", &log_dir(logs, "failover")).await?;
    let first = await_convergence(&world, &fleet, args, "failover").await?;
    anyhow::ensure!(first.is_some(), "the failover world never converged");

    let mut gaps = Vec::new();
    for spec in fleet::ALL {
        let leader = wait_leader(&fleet, spec.name).await?;
        let killed = Instant::now();
        fleet.kill(leader).await;
        let (standby, _) = fleet
            .wait_new_leader(spec.name, leader, TAKEOVER_TIMEOUT)
            .await?;
        let kill_s = killed.elapsed().as_secs_f64();
        fleet.restart(leader)?;

        let terminated = Instant::now();
        let sigterm_exit = fleet.terminate(standby, Duration::from_secs(10)).await?;
        fleet
            .wait_new_leader(spec.name, standby, TAKEOVER_TIMEOUT)
            .await?;
        let sigterm_s = terminated.elapsed().as_secs_f64();
        fleet.restart(standby)?;
        gaps.push(Gap {
            controller: spec.name.into(),
            kill_s,
            sigterm_s,
            sigterm_exit,
        });
    }

    // The new leaders at work: a node joins and a Service arrives.
    let started = Instant::now();
    world.add_nodes(1).await?;
    world.create_service(size.services).await?;
    let converged = await_convergence(&world, &fleet, args, "failover").await?;
    let audit = world.audit().await?;
    let end = tear_down(world, fleet, scan).await?;
    let bad_exits: Vec<String> = gaps
        .iter()
        .filter(|g| g.sigterm_exit != Some(0))
        .map(|g| format!("{} exited {:?} on SIGTERM", g.controller, g.sigterm_exit))
        .collect();
    let row = Row {
        scenario: "failover".into(),
        faults: "kill -9, then SIGTERM, each leader".into(),
        size: format!("{size}, 2 replicas each"),
        converged_s: converged.map(|_| started.elapsed().as_secs_f64()),
        calls: end.calls,
        rate_limited: end.rate_limited,
        duplicates: audit.duplicates,
        leaks: audit.leaks,
        wrong_deletions: audit.wrong_deletions,
        crashes: end.exited.len() + bad_exits.len(),
        not_ours_writes: end.not_ours_writes,
        unreached: Vec::new(),
        notes: format!(
            "longest gap: kill -9 {:.1} s, SIGTERM {:.1} s; a node and a Service after the \
             failovers converged{}",
            gaps.iter().map(|g| g.kill_s).fold(0.0, f64::max),
            gaps.iter().map(|g| g.sigterm_s).fold(0.0, f64::max),
            if end.exited.is_empty() && bad_exits.is_empty() {
                String::new()
            } else {
                format!("; {}", [end.exited, bad_exits].concat().join(", "))
            }
        ),
    };
    Ok((row, gaps))
}

/// The replica holding `spec`'s Lease, waiting for one to.
async fn wait_leader(fleet: &Fleet, spec: &str) -> anyhow::Result<usize> {
    let deadline = Instant::now() + TAKEOVER_TIMEOUT;
    loop {
        if let Some(i) = fleet.leader(spec).await? {
            return Ok(i);
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "nobody holds the Lease of {spec}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
