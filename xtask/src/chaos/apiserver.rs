//! kube-apiserver restart: stopped (SIGTERM) halfway through convergence, kept down for a few
//! seconds (less than the leaders' renew deadline, as a rolling restart of one apiserver is),
//! started again on the same etcd. The controllers must carry on without being restarted:
//! their watches resume, and Nodes and Services created after the restart converge too.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::cluster::ChaosCluster;
use super::secrets::Scanner;
use super::{ChaosArgs, Row, await_convergence, cloud, log_dir, start_fleet, tear_down};

/// How long the apiserver stays down.
const DOWN: Duration = Duration::from_secs(5);

pub async fn run(
    args: &ChaosArgs,
    binaries: &[PathBuf],
    logs: &Path,
    scan: &mut Scanner,
) -> anyhow::Result<Row> {
    let size = args.size();
    let mut world = ChaosCluster::build(size, cloud::sim_config()).await?;
    let fleet = start_fleet(&world, binaries, 1, "debug", &log_dir(logs, "apiserver")).await?;
    let started = Instant::now();
    // Mid-reconciliation: the first route or load balancer is done, the rest still to do.
    let midway = world
        .wait_for(args.converge_timeout(), |a| a.routed + a.served > 0)
        .await?;
    anyhow::ensure!(midway.is_ok(), "no route or load balancer was ever done");
    let before = world.audit().await?;
    let stopped_at = started.elapsed();
    world.plane.stop_apiserver();
    let shutdown = started.elapsed() - stopped_at;
    tokio::time::sleep(DOWN).await;
    world.plane.start_apiserver().await?;
    let down = started.elapsed() - stopped_at;

    // Created after the restart: only resumed watches see them.
    let joined = world.add_nodes(2).await?;
    for i in size.services..size.services + 2 {
        world.create_service(i).await?;
    }
    let converged_s = await_convergence(&world, &fleet, args, "apiserver")
        .await?
        .map(|_| started.elapsed().as_secs_f64());
    let audit = world.audit().await?;
    // Nobody restarts a controller here: one that exited counts as a crash.
    let end = tear_down(world, fleet, scan).await?;
    Ok(Row {
        scenario: "apiserver restart".into(),
        faults: format!(
            "kube-apiserver restart, {:.1} s without it",
            down.as_secs_f64()
        ),
        size: size.to_string(),
        converged_s,
        calls: end.calls,
        rate_limited: end.rate_limited,
        duplicates: audit.duplicates,
        leaks: audit.leaks,
        wrong_deletions: audit.wrong_deletions,
        crashes: end.exited.len(),
        not_ours_writes: end.not_ours_writes,
        unreached: Vec::new(),
        notes: format!(
            "SIGTERM at {:.1} s ({}/{} routed, {}/{} Services served), its graceful shutdown took \
             {:.1} s, then {} s down; {} and 2 Services created after the restart converged; {}",
            stopped_at.as_secs_f64(),
            before.routed,
            before.nodes,
            before.served,
            before.services,
            shutdown.as_secs_f64(),
            DOWN.as_secs(),
            joined.join(", "),
            if end.exited.is_empty() {
                "every controller process lived through it".to_string()
            } else {
                format!("exited: {}", end.exited.join(", "))
            }
        ),
    })
}
