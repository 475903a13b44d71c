//! `cargo xtask bench budget`: what the four controllers spend of the project's hourly Cloud API
//! budget (3600 calls, refilled one a second, shared with everything else holding the token) once
//! the cluster has converged.
//!
//! The world is `bench system`'s without dedicated servers: N kubelet-shaped Nodes in network
//! `k8s`, S LoadBalancer Services each on its own pool of Nodes. After convergence, two phases of
//! one simulated hour each:
//! 1. **idle**: nothing changes; what is left is the periodic work (address sync, drift checks,
//!    route resyncs, the lists' max ages);
//! 2. **churn**: in the hour, 5 % of the Nodes replaced as an autoscaler does (server deleted,
//!    Node NotReady, a new server and Node), 2 % rebooted (NotReady for two minutes, then Ready),
//!    and 10 Services created and deleted ten minutes later.
//!
//! An hour is simulated by running every period the controllers have `--time-scale` times faster
//! (the flags and variables are printed): a run of 3600 / scale seconds covers every periodic task
//! as often as an hour does. The calls counted in that window are the calls per hour.
//!
//! `--hccm PATH` then runs the same world again under HCCM (one process, every controller of it,
//! its periods scaled alike) and prints its hours beside ours.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use k8s_openapi::api::core::v1::Service;
use kube::Api;
use kube::api::DeleteParams;
use serde::Serialize;

use super::routes::{CLUSTER_CIDR, servers};
use super::system::{Cluster, NAMESPACE, counters, create_service, register_all, wait_converged};
use super::{BenchArgs, Calls, Controller, Env, Manager};
use crate::demo::machines::NETWORK;
use crate::fleet::Fleet;

/// Hetzner's budget per project: 3600 requests an hour.
pub const BUDGET_PER_HOUR: u64 = 3600;
/// The controllers' periods this bench scales, at their defaults: `(controller, flag, default)`.
const PERIODS: &[(&str, &str, Duration)] = &[
    (
        "node-controller",
        "--node-status-update-frequency",
        Duration::from_secs(300),
    ),
    (
        // The fleet passes 1 s (a demo's NotReady Nodes go at once); a real hour has the default.
        "lifecycle-controller",
        "--node-monitor-period",
        Duration::from_secs(5),
    ),
    (
        "service-controller",
        "--load-balancer-drift-check-period",
        Duration::from_secs(600),
    ),
    (
        "route-controller",
        "--route-reconciliation-period",
        Duration::from_secs(300),
    ),
];
/// HCCM's periods this bench scales, at HCCM's defaults (`--hccm`): its route controller's,
/// its lifecycle controller's and its node controller's status updates.
const HCCM_PERIODS: &[(&str, Duration)] = &[
    ("--node-status-update-frequency", Duration::from_secs(300)),
    ("--route-reconciliation-period", Duration::from_secs(10)),
    ("--node-monitor-period", Duration::from_secs(5)),
];
/// The variables this bench scales, at their defaults (every controller gets them; HCCM reads
/// the first).
const VARIABLES: &[(&str, Duration)] = &[
    ("HCLOUD_SERVER_CACHE_MAX_AGE", Duration::from_secs(10)),
    (
        "HCLOUD_SERVER_CACHE_RELIST_PERIOD",
        Duration::from_secs(3600),
    ),
];
/// How long a rebooted Node stays NotReady, and how long a churn Service lives (simulated).
const REBOOT: Duration = Duration::from_secs(120);
const SERVICE_LIFE: Duration = Duration::from_secs(600);
/// Services created (and deleted) per hour of churn.
const CHURN_SERVICES: usize = 10;

/// What one size measured under one manager.
#[derive(Debug, Serialize)]
pub struct Figures {
    /// `ours` or `HCCM`.
    pub manager: &'static str,
    pub nodes: usize,
    pub services: usize,
    pub time_scale: u32,
    /// cloud-sim's routes-per-network limit for this run (a real network holds 100).
    pub max_routes_per_network: usize,
    /// Whether the Nodes were routed: always for ours; for HCCM only where a real network holds
    /// a route per Node (its route controller reads every route's server on each pass).
    pub routes: bool,
    pub converge_s: Option<f64>,
    pub idle: Hour,
    pub churn: Hour,
}

/// One simulated hour.
#[derive(Debug, Serialize)]
pub struct Hour {
    /// Calls per controller, in the order of [`fleet::ALL`].
    pub per_controller: Vec<(String, u64)>,
    /// Calls per endpoint (`METHOD /template`), all controllers together.
    pub per_endpoint: BTreeMap<String, u64>,
    pub total: u64,
    /// What happened in the hour (churn only).
    pub events: Vec<String>,
}

impl Hour {
    fn share(&self) -> f64 {
        100.0 * self.total as f64 / BUDGET_PER_HOUR as f64
    }
}

/// The sizes to run: `--nodes`/`--services` if given, else 100 and 1000 Nodes with 20 Services
/// and 1000 with 200 (`--quick`: 100 with 20).
pub fn sizes(args: &BenchArgs) -> Vec<(usize, usize)> {
    match (args.nodes, args.services) {
        (None, None) if args.quick => vec![(100, 20)],
        (None, None) => vec![(100, 20), (1000, 20), (1000, 200)],
        (n, s) => vec![(n.unwrap_or(1000), s.unwrap_or(20))],
    }
}

pub async fn run(args: &BenchArgs, binaries: &[PathBuf]) -> anyhow::Result<Vec<Figures>> {
    let scale = args.time_scale.unwrap_or(30);
    anyhow::ensure!((1..=300).contains(&scale), "--time-scale must be 1..=300");
    let mut all = Vec::new();
    for (n, s) in sizes(args) {
        anyhow::ensure!(n >= s && s > 0, "--nodes must be at least --services (> 0)");
        all.push(run_one(args, Start::Ours(binaries), n, s, scale).await?);
        if let Some(hccm) = &args.hccm {
            all.push(run_one(args, Start::Hccm(hccm), n, s, scale).await?);
        }
    }
    print_summary(&all);
    Ok(all)
}

fn scaled(d: Duration, scale: u32) -> String {
    format!("{}ms", (d / scale).as_millis().max(1))
}

/// What to start on the world: our four controllers, or HCCM.
#[derive(Clone, Copy)]
enum Start<'a> {
    Ours(&'a [PathBuf]),
    Hccm(&'a Path),
}

/// The managers of a run, started.
enum Running {
    Ours(Fleet),
    Hccm(Controller),
}

impl Running {
    fn name(&self) -> &'static str {
        match self {
            Running::Ours(_) => "ours",
            Running::Hccm(_) => "HCCM",
        }
    }

    /// Cloud calls so far per controller process. HCCM counts none itself: every call the sim
    /// counted (`all`) is its (the bench's own are tagged and left out).
    async fn calls(&self, all: &Calls) -> Vec<(String, u64)> {
        match self {
            Running::Ours(fleet) => fleet
                .replicas
                .iter()
                .zip(counters(fleet).await)
                .map(|(r, c)| (r.spec.name.to_string(), c.cloud_calls))
                .collect(),
            Running::Hccm(_) => vec![("hcloud-cloud-controller-manager".into(), all.total)],
        }
    }

    /// Fails if a controller exited.
    fn ensure_running(&mut self) -> anyhow::Result<()> {
        match self {
            Running::Ours(fleet) => {
                let exits = fleet.reap();
                anyhow::ensure!(
                    exits.is_empty(),
                    "a controller exited: {exits:?}\n{}",
                    fleet.log_tails(20)
                );
            }
            Running::Hccm(hccm) => {
                if let Some(status) = hccm.try_wait()? {
                    let log = super::hccm_log("*");
                    anyhow::bail!("HCCM exited: {status} (its log: {})", log.display());
                }
            }
        }
        Ok(())
    }

    async fn stop(self) {
        match self {
            Running::Ours(mut fleet) => {
                for i in 0..fleet.replicas.len() {
                    fleet.kill(i).await;
                }
            }
            Running::Hccm(hccm) => hccm.stop().await,
        }
    }
}

async fn run_one(
    args: &BenchArgs,
    start: Start<'_>,
    n: usize,
    s: usize,
    scale: u32,
) -> anyhow::Result<Figures> {
    let hour = Duration::from_secs(3600) / scale;
    // A route per Node: the run raises the sim's limit, and says so.
    let max_routes = cloud_sim::SimConfig::default()
        .max_routes_per_network
        .max(n + n / 10 + 10);
    let env = Env::start_with(cloud_sim::SimConfig {
        max_routes_per_network: max_routes,
        ..Env::sim_config(None)
    })
    .await?;
    let network = crate::demo::machines::network(&env.sim).await?;
    let created = servers(&env, n, network).await?;
    // HCCM's route controller reads each route's server on every pass: past a real network's
    // route limit (where no real cluster routes through the network anyway) it runs without.
    let default_routes = cloud_sim::SimConfig::default().max_routes_per_network;
    let routed = matches!(start, Start::Ours(_)) || n <= default_routes;
    let mut cluster = Cluster {
        client: env.client.clone(),
        sim: &env.sim,
        network,
        pools: s,
        live: Vec::new(),
        robot: Vec::new(),
        next: n,
        routed,
    };
    let controller_args: Vec<(&str, String)> = PERIODS
        .iter()
        .map(|(c, flag, d)| (*c, format!("{flag}={}", scaled(*d, scale))))
        .collect();
    let extra_env: Vec<(String, String)> = VARIABLES
        .iter()
        .map(|(k, d)| (k.to_string(), scaled(*d, scale)))
        .chain(args.env.iter().cloned())
        .collect();
    let dir = env.plane.dir().join("bench-budget");
    let (mut running, scaled_settings) = match start {
        Start::Ours(binaries) => {
            let fleet = Fleet::start(
                &env.plane,
                &env.client,
                &env.sim,
                binaries,
                args.fleet_options(&controller_args, &extra_env, &dir),
            )
            .await?;
            let settings = controller_args
                .iter()
                .map(|(c, f)| format!("{c} {f}"))
                .chain(extra_env.iter().map(|(k, v)| format!("{k}={v}")))
                .collect::<Vec<_>>();
            (Running::Ours(fleet), settings)
        }
        Start::Hccm(binary) => {
            let (hccm, settings) = start_hccm(&env, args, binary, routed, scale)?;
            (Running::Hccm(hccm), settings)
        }
    };
    println!(
        "bench budget ({}): {n} Nodes, {s} LoadBalancer Services; one hour simulated in {} s \
         (time scale {scale}: {}); {}",
        running.name(),
        hour.as_secs(),
        scaled_settings.join(", "),
        if routed {
            format!("cloud-sim's route limit raised from {default_routes} to {max_routes}")
        } else {
            format!("no routes: a real network holds {default_routes}")
        },
    );
    if let Running::Ours(_) = running {
        println!("  logs in {}", dir.display());
    }

    // Converge.
    let started = Instant::now();
    cluster.live = created
        .into_iter()
        .enumerate()
        .map(|(i, srv)| (cluster.kubelet(i, srv.name, srv.ip), srv.id))
        .collect();
    register_all(&cluster, s).await?;
    let converged = wait_converged(&env, &cluster, Duration::from_secs(900), || ()).await?;
    let converge_s = converged.then(|| started.elapsed().as_secs_f64());
    match converge_s {
        Some(t) => println!("  converged in {t:.1} s"),
        None => println!("  did not converge within 900 s; measuring anyway"),
    }
    // Past the first round of every periodic task (they start with the process).
    let longest = PERIODS.iter().map(|(_, _, d)| *d).max().unwrap_or_default() / scale;
    watch(&mut running, longest).await?;

    // 1. Idle.
    let mark = Mark::take(&env.sim, &running).await;
    watch(&mut running, hour).await?;
    let idle = mark.hour(&env.sim, &running).await;
    print_hour("idle", &idle);

    // 2. Churn.
    let plan = ChurnPlan::new(n, s, hour, scale);
    let mark = Mark::take(&env.sim, &running).await;
    plan.run(&mut cluster, &mut running).await?;
    watch(&mut running, hour.saturating_sub(mark.at.elapsed())).await?;
    let mut churn = mark.hour(&env.sim, &running).await;
    churn.events = plan.describe();
    print_hour("churn", &churn);
    let manager = running.name();
    running.stop().await;
    Ok(Figures {
        manager,
        nodes: n,
        services: s,
        time_scale: scale,
        max_routes_per_network: max_routes,
        routes: routed,
        converge_s,
        idle,
        churn,
    })
}

/// HCCM on the world with every controller of it, as its own deployment runs it (the network
/// `NETWORK`, load balancers in fsn1), its periods and server cache scaled like ours. Returns the
/// process and the scaled settings.
fn start_hccm(
    env: &Env,
    args: &BenchArgs,
    binary: &Path,
    routed: bool,
    scale: u32,
) -> anyhow::Result<(Controller, Vec<String>)> {
    let periods: Vec<String> = HCCM_PERIODS
        .iter()
        .map(|(flag, d)| format!("{flag}={}", scaled(*d, scale)))
        .collect();
    let cluster_cidr = format!("--cluster-cidr={CLUSTER_CIDR}");
    let routes = format!("--configure-cloud-routes={routed}");
    let flags: Vec<&str> = periods
        .iter()
        .map(String::as_str)
        .chain([
            cluster_cidr.as_str(),
            "--allocate-node-cidrs=true",
            routes.as_str(),
        ])
        .collect();
    let (cache_var, cache_default) = VARIABLES[0];
    let cache = scaled(cache_default, scale);
    let environment = [
        ("HCLOUD_NETWORK", NETWORK),
        (
            "HCLOUD_NETWORK_ROUTES_ENABLED",
            if routed { "true" } else { "false" },
        ),
        ("HCLOUD_LOAD_BALANCERS_LOCATION", "fsn1"),
        (cache_var, cache.as_str()),
    ];
    let hccm = env.spawn(args, Manager::Hccm(binary), "*", &flags, &environment)?;
    let settings = periods
        .into_iter()
        .chain([format!("{cache_var}={cache}")])
        .collect();
    Ok((hccm, settings))
}

/// Keeps an eye on the controllers for `d`: none may exit.
async fn watch(running: &mut Running, d: Duration) -> anyhow::Result<()> {
    let until = Instant::now() + d;
    while Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(500).min(until - Instant::now())).await;
        running.ensure_running()?;
    }
    Ok(())
}

/// The counters when a phase began.
struct Mark {
    at: Instant,
    controllers: Vec<(String, u64)>,
    calls: Calls,
}

impl Mark {
    async fn take(sim: &cloud_sim::Sim, running: &Running) -> Mark {
        let calls = Calls::of(sim);
        Mark {
            at: Instant::now(),
            controllers: running.calls(&calls).await,
            calls,
        }
    }

    /// The calls since the mark (the bench's own are tagged, and not counted).
    async fn hour(&self, sim: &cloud_sim::Sim, running: &Running) -> Hour {
        let calls = Calls::of(sim);
        let after = running.calls(&calls).await;
        let per_controller: Vec<(String, u64)> = self
            .controllers
            .iter()
            .zip(after)
            .map(|((name, b), (_, a))| (name.clone(), a.saturating_sub(*b)))
            .collect();
        let per_endpoint = calls
            .by_endpoint
            .iter()
            .filter_map(|(k, v)| {
                let before = self.calls.by_endpoint.get(k).copied().unwrap_or(0);
                let d = v.saturating_sub(before);
                (d > 0).then(|| (k.clone(), d))
            })
            .collect();
        Hour {
            total: per_controller.iter().map(|(_, c)| c).sum(),
            per_controller,
            per_endpoint,
            events: Vec::new(),
        }
    }
}

/// One hour of churn, spread evenly over the (scaled) hour.
struct ChurnPlan {
    hour: Duration,
    /// Simulated durations, scaled.
    reboot: Duration,
    service_life: Duration,
    replacements: usize,
    reboots: usize,
    services: usize,
    /// The first churn Service's index (after the `s` standing ones).
    first_service: usize,
}

/// One thing the churn does, at its offset into the hour.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Step {
    Replace,
    RebootDown(usize),
    RebootUp(usize),
    CreateService(usize),
    DeleteService(usize),
}

impl ChurnPlan {
    fn new(n: usize, s: usize, hour: Duration, scale: u32) -> Self {
        ChurnPlan {
            hour,
            reboot: REBOOT / scale,
            service_life: SERVICE_LIFE / scale,
            replacements: n.div_ceil(20),
            reboots: n.div_ceil(50),
            services: CHURN_SERVICES,
            first_service: s,
        }
    }

    /// Every step with its offset, in order; all end before 90 % of the hour.
    fn steps(&self) -> Vec<(Duration, Step)> {
        let span = self.hour.mul_f64(0.9).saturating_sub(self.service_life);
        let spread = |count: usize, i: usize| span.mul_f64((i as f64 + 0.5) / count as f64);
        let mut steps = Vec::new();
        for i in 0..self.replacements {
            steps.push((spread(self.replacements, i), Step::Replace));
        }
        for i in 0..self.reboots {
            let at = spread(self.reboots, i);
            steps.push((at, Step::RebootDown(i)));
            steps.push((at + self.reboot, Step::RebootUp(i)));
        }
        for i in 0..self.services {
            let at = spread(self.services, i);
            let svc = self.first_service + i;
            steps.push((at, Step::CreateService(svc)));
            steps.push((at + self.service_life, Step::DeleteService(svc)));
        }
        steps.sort();
        steps
    }

    fn describe(&self) -> Vec<String> {
        vec![
            format!(
                "{} Nodes replaced (server deleted, a new one joined)",
                self.replacements
            ),
            format!(
                "{} Nodes rebooted (NotReady for {} s simulated)",
                self.reboots,
                REBOOT.as_secs()
            ),
            format!(
                "{} Services created and deleted {} min later",
                self.services,
                SERVICE_LIFE.as_secs() / 60
            ),
        ]
    }

    /// Runs the steps at their times.
    async fn run(&self, cluster: &mut Cluster<'_>, running: &mut Running) -> anyhow::Result<()> {
        let start = Instant::now();
        let mut rebooted = Vec::new();
        let services: Api<Service> = Api::namespaced(cluster.client.clone(), NAMESPACE);
        for (at, step) in self.steps() {
            tokio::time::sleep_until((start + at).into()).await;
            running.ensure_running()?;
            match step {
                Step::Replace => {
                    cluster.remove().await?;
                    cluster.join().await?;
                }
                Step::RebootDown(i) => {
                    // From the newest end: a replacement takes the oldest, never a rebooting one.
                    let k = &cluster.live[cluster.live.len() - 1 - i].0;
                    k.report_status(&cluster.client, false, 1).await?;
                    rebooted.push((i, k.clone()));
                }
                Step::RebootUp(i) => {
                    if let Some((_, k)) = rebooted.iter().find(|(j, _)| *j == i) {
                        k.report_status(&cluster.client, true, 2).await?;
                    }
                }
                Step::CreateService(i) => {
                    create_service(cluster, i).await?;
                }
                Step::DeleteService(i) => {
                    services
                        .delete(&format!("svc-{i}"), &DeleteParams::default())
                        .await
                        .with_context(|| format!("deleting Service svc-{i}"))?;
                }
            }
        }
        Ok(())
    }
}

fn print_hour(name: &str, h: &Hour) {
    println!(
        "  {name}: {} calls in the hour ({:.1} % of {BUDGET_PER_HOUR})",
        h.total,
        h.share()
    );
    for (c, calls) in &h.per_controller {
        println!("    {c:<22} {calls:>6}");
    }
    for e in &h.events {
        println!("    churn: {e}");
    }
    println!("    per endpoint:");
    for (e, calls) in &h.per_endpoint {
        println!("      {e:<48} {calls:>6}");
    }
}

fn print_summary(all: &[Figures]) {
    println!("\nbench budget: Cloud API calls per hour, the four controllers together (or HCCM)");
    println!(
        "| manager | Nodes | Services | routes | idle calls/h | idle % of budget | churn calls/h | \
         churn % of budget |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for f in all {
        println!(
            "| {} | {} | {} | {} | {} | {:.1} % | {} | {:.1} % |",
            f.manager,
            f.nodes,
            f.services,
            if f.routes { "yes" } else { "no" },
            f.idle.total,
            f.idle.share(),
            f.churn.total,
            f.churn.share()
        );
    }
}
