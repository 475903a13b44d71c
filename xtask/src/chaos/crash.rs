//! Crashes: `kill -9` a random controller at random moments while the world converges (15
//! times) and while its Services are deleted (5 times), restarting it at once each time, as a
//! kubelet restarts a crashed container in the same pod. The `shared` variant runs it with the
//! Services of each node pool on one shared load balancer.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::cluster::ChaosCluster;
use super::secrets::Scanner;
use super::{ChaosArgs, Row, await_convergence, cloud, log_dir, start_fleet, tear_down};

const KILLS_CONVERGING: usize = 15;
const KILLS_DELETING: usize = 5;

pub async fn run(
    args: &ChaosArgs,
    binaries: &[PathBuf],
    logs: &Path,
    scan: &mut Scanner,
    shared: bool,
) -> anyhow::Result<Row> {
    let size = args.size();
    let (world, name) = if shared {
        let w = ChaosCluster::build_shared(size, cloud::sim_config()).await?;
        (w, "crash, shared LBs")
    } else {
        (
            ChaosCluster::build(size, cloud::sim_config()).await?,
            "crash",
        )
    };
    let dir = if shared { "crash-shared" } else { "crash" };
    let mut fleet = start_fleet(&world, binaries, 1, "debug", &log_dir(logs, dir)).await?;
    // Seeded, so a failing run can be repeated; printed so it can be.
    let seed = std::process::id() as u64;
    let mut rng = fastrand::Rng::with_seed(seed);
    let pause = |rng: &mut fastrand::Rng| {
        Duration::from_millis(if args.quick {
            rng.u64(200..1_500)
        } else {
            rng.u64(500..4_000)
        })
    };
    let started = Instant::now();
    let mut killed = Vec::new();
    for _ in 0..KILLS_CONVERGING {
        tokio::time::sleep(pause(&mut rng)).await;
        let i = rng.usize(..fleet.replicas.len());
        killed.push(fleet.replicas[i].spec.name);
        fleet.crash_and_restart(i).await?;
    }
    let last_kill = started.elapsed();
    let converged_s = await_convergence(&world, &fleet, args, name)
        .await?
        .map(|_| started.elapsed().as_secs_f64());
    let audit = world.audit().await?;

    world.delete_services().await?;
    for _ in 0..KILLS_DELETING {
        tokio::time::sleep(pause(&mut rng)).await;
        let i = rng.usize(..fleet.replicas.len());
        killed.push(fleet.replicas[i].spec.name);
        fleet.crash_and_restart(i).await?;
    }
    let cleaned = world
        .wait_for(args.converge_timeout(), |a| a.services == 0 && a.leaks == 0)
        .await?;
    let after = world.audit().await?;
    let end = tear_down(world, fleet, scan).await?;
    let per_controller: Vec<String> = crate::fleet::ALL
        .iter()
        .map(|c| {
            format!(
                "{} ×{}",
                c.name,
                killed.iter().filter(|k| **k == c.name).count()
            )
        })
        .collect();
    Ok(Row {
        scenario: name.into(),
        faults: format!("kill -9 ×{} (seed {seed})", killed.len()),
        size: size.to_string(),
        converged_s,
        calls: end.calls,
        rate_limited: end.rate_limited,
        duplicates: audit.duplicates,
        leaks: after.leaks,
        wrong_deletions: after.wrong_deletions,
        crashes: end.exited.len(),
        not_ours_writes: end.not_ours_writes,
        unreached: Vec::new(),
        notes: format!(
            "last kill while converging at {:.1} s; killed {}; {} ports lost; {}{}",
            last_kill.as_secs_f64(),
            per_controller.join(", "),
            audit.ports_lost + after.ports_lost,
            if cleaned.is_ok() {
                "every load balancer deleted"
            } else {
                "load balancers left"
            },
            end.exits_note()
        ),
    })
}
