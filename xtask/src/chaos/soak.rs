//! Soak: the demo-sized world left running with a node churning — every period one server is
//! deleted (its kubelet goes silent first) or one joins, alternately — while the other kubelets
//! send their periodic status reports. Each controller's resident
//! memory, live tokio tasks and open file descriptors are read from its `/metrics` once the world
//! first converged and again at the end; its cloud calls over the soak are scaled to an hour.
//! Halfway through, the project's token is rotated: the sim refuses the old one from then on and
//! the controllers' token file (`HCLOUD_TOKEN_FILE`) holds the new one, with no restart.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::Serialize;

use super::cluster::{ChaosCluster, Size};
use super::secrets::Scanner;
use super::{ChaosArgs, Row, await_convergence, cloud, log_dir, start_fleet, tear_down};
use crate::fleet::{Fleet, cloud_calls, metric};

/// The soak's figures.
#[derive(Debug, Clone, Serialize)]
pub struct Figures {
    pub minutes: f64,
    pub churn_period_s: u64,
    pub joins: usize,
    pub removals: usize,
    pub controllers: Vec<Sample>,
}

/// One controller at the start and the end of the soak.
#[derive(Debug, Clone, Serialize)]
pub struct Sample {
    pub controller: String,
    pub rss_start_mib: f64,
    pub rss_end_mib: f64,
    pub tasks_start: f64,
    pub tasks_end: f64,
    pub fds_start: f64,
    pub fds_end: f64,
    pub calls_per_hour: f64,
}

#[derive(Debug, Clone, Copy)]
struct Reading {
    rss_mib: f64,
    tasks: f64,
    fds: f64,
    calls: u64,
}

async fn read(fleet: &Fleet) -> Vec<Reading> {
    let mut out = Vec::new();
    for r in &fleet.replicas {
        let m = r.metrics().await;
        out.push(Reading {
            rss_mib: metric(&m, "process_resident_memory_bytes") / 1048576.0,
            tasks: metric(&m, "cloud_controllers_runtime_alive_tasks"),
            fds: metric(&m, "process_open_fds"),
            calls: cloud_calls(&m),
        });
    }
    out
}

/// The project's token after the soak's rotation: 64 random-looking characters, like a real one
/// (a padded one, `…000000000000`, would match every correlation id in the secret scan).
const ROTATED_TOKEN: &str = "Rq7vKp2LwX9mZc4TbN8sYh3JdF6gA1eU5iO0oPxQrWtEyVuCzBnMlKjHgFdSaQw3";

pub async fn run(
    args: &ChaosArgs,
    binaries: &[PathBuf],
    logs: &Path,
    scan: &mut Scanner,
) -> anyhow::Result<(Row, Figures)> {
    let minutes = args.soak_minutes.unwrap_or(if args.quick { 1 } else { 30 });
    let period = Duration::from_secs(if args.quick { 10 } else { 30 });
    let size = Size {
        nodes: 6,
        services: 2,
    };
    let mut world = ChaosCluster::build(size, cloud::sim_config()).await?;
    let mut fleet = start_fleet(&world, binaries, 1, "info", &log_dir(logs, "soak")).await?;
    let first = await_convergence(&world, &fleet, args, "soak").await?;
    anyhow::ensure!(first.is_some(), "the soak world never converged");
    let start = read(&fleet).await;
    world.sim.reset_counters();

    let soak = Duration::from_secs(minutes * 60);
    let started = Instant::now();
    let (mut joins, mut removals) = (0, 0);
    // Kubelet's status reports: every 5 minutes, as with Node leases; a short soak scales that
    // down so every Node still reports several times.
    let report_every = (soak / 3).min(Duration::from_secs(300));
    let mut reports = 0;
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    // Request-log positions: when the token was rotated, and a period later (the controllers read
    // their token file every 2 s; a period is at least 10 s).
    let (mut rotated_at, mut settled_at) = (None, None);
    let last_seq = |world: &ChaosCluster| world.sim.request_log().last().map_or(0, |e| e.seq);
    while started.elapsed() < soak {
        tick.tick().await;
        if rotated_at.is_some() && settled_at.is_none() {
            settled_at = Some(last_seq(&world));
        }
        if rotated_at.is_none() && started.elapsed() >= soak / 2 {
            rotated_at = Some(last_seq(&world));
            fleet.rotate_token(&world.sim, ROTATED_TOKEN)?;
        }
        if started.elapsed() >= report_every * (reports + 1) {
            reports += 1;
            world.report_status(u64::from(reports)).await?;
        }
        if (joins + removals) % 2 == 0 {
            let name = world.servers.keys().next().cloned().unwrap_or_default();
            world.set_ready(std::slice::from_ref(&name), false).await?;
            world.remove_server(&name).await?;
            removals += 1;
        } else {
            world.add_nodes(1).await?;
            joins += 1;
        }
        let exited = fleet.reap();
        anyhow::ensure!(
            exited.is_empty(),
            "controllers exited during the soak: {exited:?}"
        );
    }
    let hours = started.elapsed().as_secs_f64() / 3600.0;
    let converged = await_convergence(&world, &fleet, args, "soak").await?;
    // Calls refused with the old token: only in the moment before the controllers read the file,
    // never after.
    let refused = |after: Option<u64>| {
        after.map_or(0, |seq| {
            let log = world.sim.request_log();
            log.iter()
                .filter(|e| e.seq > seq && e.status == 401)
                .count()
        })
    };
    let refused_later = refused(settled_at);
    let refused_at_switch = refused(rotated_at) - refused_later;
    anyhow::ensure!(
        refused_later == 0,
        "{refused_later} calls were made with the old token after the controllers had {} s to \
         read the new one",
        period.as_secs()
    );
    let end = read(&fleet).await;
    let audit = world.audit().await?;
    let controllers: Vec<Sample> = fleet
        .replicas
        .iter()
        .zip(start.iter().zip(&end))
        .map(|(r, (s, e))| Sample {
            controller: r.spec.name.into(),
            rss_start_mib: s.rss_mib,
            rss_end_mib: e.rss_mib,
            tasks_start: s.tasks,
            tasks_end: e.tasks,
            fds_start: s.fds,
            fds_end: e.fds,
            calls_per_hour: e.calls.saturating_sub(s.calls) as f64 / hours,
        })
        .collect();
    let ending = tear_down(world, fleet, scan).await?;
    let figures = Figures {
        minutes: hours * 60.0,
        churn_period_s: period.as_secs(),
        joins,
        removals,
        controllers,
    };
    let row = Row {
        scenario: "soak".into(),
        faults: format!(
            "{minutes} min, a node churning every {} s",
            period.as_secs()
        ),
        size: format!("{size} at the start"),
        converged_s: converged.map(|t| t.as_secs_f64()),
        calls: ending.calls,
        rate_limited: ending.rate_limited,
        duplicates: audit.duplicates,
        leaks: audit.leaks,
        wrong_deletions: audit.wrong_deletions,
        crashes: ending.exited.len(),
        not_ours_writes: ending.not_ours_writes,
        unreached: Vec::new(),
        notes: format!(
            "{joins} joins, {removals} removals; {:.0} cloud calls/h in all (the world's own \
             server creates and deletes included); token rotated halfway: {refused_at_switch} \
             calls refused with the old one before the controllers read the file, 0 after",
            ending.calls as f64 / hours
        ),
    };
    Ok((row, figures))
}

pub fn print(f: &Figures) {
    println!(
        "\nsoak: {:.1} min, a node churning every {} s ({} joins, {} removals)",
        f.minutes, f.churn_period_s, f.joins, f.removals
    );
    println!(
        "  {:<22} {:>17} {:>13} {:>9} {:>12}",
        "controller", "RSS start → end", "tasks", "fds", "calls/hour"
    );
    for s in &f.controllers {
        println!(
            "  {:<22} {:>6.1} → {:>5.1} MiB {:>5} → {:<5} {:>3} → {:<3} {:>12.0}",
            s.controller,
            s.rss_start_mib,
            s.rss_end_mib,
            s.tasks_start,
            s.tasks_end,
            s.fds_start,
            s.fds_end,
            s.calls_per_hour
        );
    }
}
