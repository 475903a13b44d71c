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

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use k8s_openapi::api::core::v1::Service;
use kube::Api;
use kube::api::DeleteParams;
use serde::Serialize;

use super::routes::{CLUSTER_CIDR, servers};
use super::system::{
    Cluster, Counters, NAMESPACE, Samples, counters, create_service, register_all, wait_converged,
};
use super::{BenchArgs, Calls, Env};
use crate::fleet::{self, Fleet};

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
/// The variables this bench scales, at their defaults (every controller gets them).
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

/// What one size measured.
#[derive(Debug, Serialize)]
pub struct Figures {
    pub nodes: usize,
    pub services: usize,
    pub time_scale: u32,
    /// cloud-sim's routes-per-network limit for this run (a real network holds 100).
    pub max_routes_per_network: usize,
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
        all.push(run_one(args, binaries, n, s, scale).await?);
    }
    print_summary(&all);
    Ok(all)
}

fn scaled(d: Duration, scale: u32) -> String {
    format!("{}ms", (d / scale).as_millis().max(1))
}

async fn run_one(
    args: &BenchArgs,
    binaries: &[PathBuf],
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
    let network = crate::demo::world::network(&env.sim).await?;
    let created = servers(&env, n, network).await?;
    let mut cluster = Cluster {
        client: env.client.clone(),
        sim: &env.sim,
        network,
        pools: s,
        live: Vec::new(),
        robot: Vec::new(),
        next: n,
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
    let mut fleet = Fleet::start(
        &env.plane,
        &env.client,
        &env.sim,
        binaries,
        fleet::Options {
            replicas: 1,
            stable_identities: false,
            rust_log: "warn",
            cluster_cidr: CLUSTER_CIDR,
            extra_args: &args.extra,
            controller_args: &controller_args,
            extra_env: &extra_env,
            wrapper: args.wrapper.as_deref(),
            dir: &dir,
        },
    )
    .await?;
    println!(
        "bench budget: {n} Nodes, {s} LoadBalancer Services; one hour simulated in {} s (time \
         scale {scale}: {}{}{}); cloud-sim's route limit raised from {} to {max_routes} (logs in \
         {})",
        hour.as_secs(),
        controller_args
            .iter()
            .map(|(c, f)| format!("{c} {f}"))
            .collect::<Vec<_>>()
            .join(", "),
        if extra_env.is_empty() { "" } else { ", " },
        extra_env
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(", "),
        cloud_sim::SimConfig::default().max_routes_per_network,
        dir.display()
    );

    // Converge.
    let started = Instant::now();
    let mut samples = Samples::new(&fleet, started);
    cluster.live = created
        .into_iter()
        .enumerate()
        .map(|(i, srv)| (cluster.kubelet(i, srv.name, srv.ip), srv.id))
        .collect();
    register_all(&cluster, s).await?;
    let converged = wait_converged(
        &env,
        &fleet,
        &cluster,
        &mut samples,
        Duration::from_secs(900),
    )
    .await?;
    let converge_s = converged.then(|| started.elapsed().as_secs_f64());
    match converge_s {
        Some(t) => println!("  converged in {t:.1} s"),
        None => println!("  did not converge within 900 s; measuring anyway"),
    }
    // Past the first round of every periodic task (they start with the process).
    let longest = PERIODS.iter().map(|(_, _, d)| *d).max().unwrap_or_default() / scale;
    watch(&mut fleet, longest).await?;

    // 1. Idle.
    let mark = Mark::take(&env.sim, &fleet).await;
    watch(&mut fleet, hour).await?;
    let idle = mark.hour(&env.sim, &fleet, &BTreeMap::new()).await;
    print_hour("idle", &idle);

    // 2. Churn.
    let plan = ChurnPlan::new(n, s, hour, scale);
    let mark = Mark::take(&env.sim, &fleet).await;
    let own_calls = plan.run(&mut cluster, &mut fleet).await?;
    watch(&mut fleet, hour.saturating_sub(mark.at.elapsed())).await?;
    let mut churn = mark.hour(&env.sim, &fleet, &own_calls).await;
    churn.events = plan.describe();
    print_hour("churn", &churn);
    for i in 0..fleet.replicas.len() {
        fleet.kill(i).await;
    }
    Ok(Figures {
        nodes: n,
        services: s,
        time_scale: scale,
        max_routes_per_network: max_routes,
        converge_s,
        idle,
        churn,
    })
}

/// Keeps an eye on the controllers for `d`: none may exit.
async fn watch(fleet: &mut Fleet, d: Duration) -> anyhow::Result<()> {
    let until = Instant::now() + d;
    while Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(500).min(until - Instant::now())).await;
        let exits = fleet.reap();
        anyhow::ensure!(
            exits.is_empty(),
            "a controller exited: {exits:?}\n{}",
            fleet.log_tails(20)
        );
    }
    Ok(())
}

/// The counters when a phase began.
struct Mark {
    at: Instant,
    controllers: Vec<Counters>,
    calls: Calls,
}

impl Mark {
    async fn take(sim: &cloud_sim::Sim, fleet: &Fleet) -> Mark {
        Mark {
            at: Instant::now(),
            controllers: counters(fleet).await,
            calls: Calls::of(sim),
        }
    }

    /// The calls since the mark, without `own_calls` (the bench's own, per endpoint).
    async fn hour(
        &self,
        sim: &cloud_sim::Sim,
        fleet: &Fleet,
        own_calls: &BTreeMap<String, u64>,
    ) -> Hour {
        let after = counters(fleet).await;
        let calls = Calls::of(sim);
        let per_controller: Vec<(String, u64)> = fleet
            .replicas
            .iter()
            .zip(self.controllers.iter().zip(&after))
            .map(|(r, (b, a))| (r.spec.name.to_string(), a.cloud_calls - b.cloud_calls))
            .collect();
        let per_endpoint = calls
            .by_endpoint
            .iter()
            .filter_map(|(k, v)| {
                let before = self.calls.by_endpoint.get(k).copied().unwrap_or(0);
                let own = own_calls.get(k).copied().unwrap_or(0);
                let d = v.saturating_sub(before + own);
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

    /// Runs the steps at their times; returns the bench's own Cloud calls per endpoint (creating
    /// and deleting servers), which are not the controllers'.
    async fn run(
        &self,
        cluster: &mut Cluster<'_>,
        fleet: &mut Fleet,
    ) -> anyhow::Result<BTreeMap<String, u64>> {
        let start = Instant::now();
        let mut own = BTreeMap::new();
        let mut rebooted = Vec::new();
        let services: Api<Service> = Api::namespaced(cluster.client.clone(), NAMESPACE);
        for (at, step) in self.steps() {
            tokio::time::sleep_until((start + at).into()).await;
            let exits = fleet.reap();
            anyhow::ensure!(
                exits.is_empty(),
                "a controller exited during the churn: {exits:?}\n{}",
                fleet.log_tails(20)
            );
            match step {
                Step::Replace => {
                    cluster.remove().await?;
                    cluster.join().await?;
                    for endpoint in ["DELETE /servers/{id}", "POST /servers", "GET /servers/{id}"] {
                        *own.entry(endpoint.to_string()).or_default() += 1;
                    }
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
        Ok(own)
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
    println!("\nbench budget: Cloud API calls per hour, the four controllers together");
    println!(
        "| Nodes | Services | idle calls/h | idle % of budget | churn calls/h | churn % of budget |"
    );
    println!("|---|---|---|---|---|---|");
    for f in all {
        println!(
            "| {} | {} | {} | {:.1} % | {} | {:.1} % |",
            f.nodes,
            f.services,
            f.idle.total,
            f.idle.share(),
            f.churn.total,
            f.churn.share()
        );
    }
}
