//! `cargo xtask bench system`: the four controllers together, on a cluster shaped like a real one.
//!
//! cloud-sim with N servers in network `k8s` (`10.0.0.0/8`); the four controllers as the chart
//! runs them (one process each, its own ServiceAccount, see [`crate::fleet`]); N Nodes registered
//! the way kubelet v1.36 registers them ([`testenv::KubeletNode`]: 50 images, five conditions,
//! managedFields of four field managers), each with its own pod CIDR; S LoadBalancer Services, each
//! targeting its own pool of N/S Nodes through HCCM's `node-selector` annotation. Two phases:
//! 1. **converge**: everything at once, until every Node is initialized and routed and every
//!    Service has its load balancer;
//! 2. **churn**: kubelet status reports at kubelet's cadence (every Node every 5 minutes, an
//!    image pulled every fourth report), and a Node leaving (its server deleted, its kubelet
//!    silent) or joining every minute.
//!
//! Per controller and phase: peak and steady RSS, CPU seconds, cloud calls, apiserver requests
//! and the watch events it decoded; then the sum of all four.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Node, Service};
use kube::api::{ListParams, PostParams};
use kube::{Api, Client};
use serde::Serialize;
use serde_json::json;
use testenv::KubeletNode;

use super::plot::Series;
use super::routes::{CLUSTER_CIDR, pod_cidr, servers};
use super::{BenchArgs, Env, PROBE_QUERY, mib};
use crate::demo::world::{NETWORK, UNINITIALIZED};
use crate::fleet::{self, Fleet};

const POOL_LABEL: &str = "bench.cloud-controllers.dev/pool";
const NAMESPACE: &str = "default";
/// Nodes registered (or Services created) at once.
const PARALLEL: usize = 32;
/// kubelet's `--node-status-report-frequency` default: with Node leases, a Node's status is
/// written this often when nothing changes.
const REPORT_PERIOD: Duration = Duration::from_secs(300);
/// How often memory is sampled.
const SAMPLE: Duration = Duration::from_secs(2);

/// What `bench system` measured.
#[derive(Debug, Serialize)]
pub struct Figures {
    pub nodes: usize,
    pub services: usize,
    pub profile: String,
    /// One Node as the apiserver serves it after convergence (JSON bytes).
    pub node_bytes: usize,
    pub converge: Phase,
    pub churn: Phase,
    /// Every controller restarted at once: until each has listed every Node, plus 10 s (`None`:
    /// not every one listed within two minutes).
    pub restart: Phase,
    pub churn_minutes: f64,
    pub report_period_s: u64,
    pub status_reports: u64,
    pub joins: usize,
    pub removals: usize,
}

/// One phase, per controller in the order of [`fleet::ALL`].
#[derive(Debug, Serialize)]
pub struct Phase {
    /// Seconds the phase took (`converge`: until converged; `None`: never).
    pub seconds: Option<f64>,
    pub controllers: Vec<Usage>,
}

/// What one controller spent in one phase.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Usage {
    pub controller: String,
    pub peak_rss_mib: f64,
    /// The median of the samples of the phase's second half.
    pub steady_rss_mib: f64,
    pub cpu_s: f64,
    pub cloud_calls: u64,
    pub kube_requests: u64,
    pub watch_events: u64,
}

/// Cumulative counters of one controller at one moment.
#[derive(Debug, Clone, Copy, Default)]
struct Counters {
    cpu_s: f64,
    cloud_calls: u64,
    kube_requests: u64,
    watch_events: u64,
}

async fn counters(fleet: &Fleet) -> Vec<Counters> {
    let mut out = Vec::new();
    for r in &fleet.replicas {
        let m = r.metrics().await;
        out.push(Counters {
            cpu_s: r.cpu_seconds(),
            cloud_calls: fleet::cloud_calls(&m),
            kube_requests: fleet::metric(&m, "cloud_controllers_kube_api_requests_total") as u64,
            watch_events: fleet::metric(&m, "cloud_controllers_watch_events_total") as u64,
        });
    }
    out
}

/// RSS over time, per controller (MiB), for the steady figure and the plot.
struct Samples {
    started: Instant,
    series: Vec<Series>,
}

impl Samples {
    fn new(fleet: &Fleet, started: Instant) -> Self {
        let series = fleet
            .replicas
            .iter()
            .map(|r| Series::new(r.spec.name))
            .collect();
        Samples { started, series }
    }

    fn take(&mut self, fleet: &Fleet) {
        let t = self.started.elapsed().as_secs_f64();
        for (s, r) in self.series.iter_mut().zip(&fleet.replicas) {
            s.points.push((t, mib(r.memory().rss_kib)));
        }
    }

    /// Controller `i`'s peak and median RSS among the samples taken after `from` seconds.
    fn peak_and_median(&self, i: usize, from: f64) -> (f64, f64) {
        let mut v: Vec<f64> = self.series[i]
            .points
            .iter()
            .filter(|(t, _)| *t >= from)
            .map(|(_, m)| *m)
            .collect();
        v.sort_by(f64::total_cmp);
        (
            v.last().copied().unwrap_or(0.0),
            v.get(v.len() / 2).copied().unwrap_or(0.0),
        )
    }
}

fn phase(
    fleet: &Fleet,
    before: &[Counters],
    after: &[Counters],
    samples: &Samples,
    span: (f64, f64),
    peak_from_hwm: bool,
) -> Vec<Usage> {
    let (start, end) = span;
    fleet
        .replicas
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let (sampled_peak, steady) = samples.peak_and_median(i, start + (end - start) / 2.0);
            let (b, a) = (before[i], after[i]);
            Usage {
                controller: r.spec.name.to_string(),
                peak_rss_mib: if peak_from_hwm {
                    mib(r.memory().peak_rss_kib)
                } else {
                    sampled_peak.max(samples.peak_and_median(i, start).0)
                },
                steady_rss_mib: steady,
                cpu_s: a.cpu_s - b.cpu_s,
                cloud_calls: a.cloud_calls - b.cloud_calls,
                kube_requests: a.kube_requests - b.kube_requests,
                watch_events: a.watch_events - b.watch_events,
            }
        })
        .collect()
}

/// The simulated cluster: its servers, Nodes and what changes them.
struct Cluster<'a> {
    client: Client,
    sim: &'a cloud_sim::Sim,
    network: u64,
    pools: usize,
    /// Live Nodes (their kubelets report) with their servers' ids, oldest first.
    live: Vec<(KubeletNode, u64)>,
    /// Index of the next Node (its pod CIDR).
    next: usize,
}

impl Cluster<'_> {
    fn kubelet(&self, i: usize, name: String, ip: String) -> KubeletNode {
        KubeletNode {
            node_ip: Some(ip),
            labels: vec![(POOL_LABEL.into(), format!("p{}", i % self.pools))],
            pod_cidr: Some(pod_cidr(i)),
            ..KubeletNode::new(name)
        }
    }

    /// A new server in the network and its Node, registered.
    async fn join(&mut self) -> anyhow::Result<()> {
        let i = self.next;
        self.next += 1;
        let name = format!("bench-node-{}", i + 1);
        let world = self.sim.world();
        let id = world
            .create_server_with(json!({
                "name": name, "server_type": "cx22", "location": "fsn1",
                "image": "ubuntu-24.04", "networks": [self.network],
            }))
            .await
            .map_err(|e| anyhow::anyhow!("creating server {name}: {e}"))?;
        let server = world
            .get_server(id)
            .await
            .map_err(|e| anyhow::anyhow!("reading server {name}: {e}"))?;
        let s = server.get("server").unwrap_or(&server);
        let ip = s["private_net"][0]["ip"]
            .as_str()
            .context("the new server has no private IP")?
            .to_string();
        let kubelet = self.kubelet(i, name, ip);
        kubelet.register(&self.client).await?;
        self.live.push((kubelet, id));
        Ok(())
    }

    /// The oldest Node's server deleted and its kubelet silent (its last report says NotReady,
    /// what kube-controller-manager would write after the grace period).
    async fn remove(&mut self) -> anyhow::Result<()> {
        let (kubelet, id) = self.live.remove(0);
        self.sim
            .world()
            .delete_server(id)
            .await
            .map_err(|e| anyhow::anyhow!("deleting server {}: {e}", kubelet.name))?;
        kubelet.report_status(&self.client, false, 1).await?;
        Ok(())
    }
}

pub async fn run(args: &BenchArgs, binaries: &[PathBuf]) -> anyhow::Result<Figures> {
    let n = args.nodes.unwrap_or(if args.quick { 100 } else { 1000 });
    let s = args.services.unwrap_or(if args.quick { 10 } else { 100 });
    anyhow::ensure!(n >= s && s > 0, "--nodes must be at least --services (> 0)");
    let churn = Duration::from_secs_f64(
        60.0 * args
            .churn_minutes
            .unwrap_or(if args.quick { 1.0 } else { 10.0 }),
    );
    // The churn keeps kubelet's cadence; a short churn scales it down so every Node reports
    // twice, as in the 10-minute one.
    let report_period = REPORT_PERIOD.min(churn / 2);
    let membership_period = Duration::from_secs(if args.quick { 15 } else { 60 });

    let env = Env::start_with(cloud_sim::SimConfig {
        max_routes_per_network: 2 * n + 100,
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
        next: n,
    };
    let dir = env.plane.dir().join("bench-system");
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
            extra_env: &args.env,
            dir: &dir,
        },
    )
    .await?;
    println!(
        "bench system: {n} servers in network {NETWORK}, 4 controllers started (logs in {})",
        dir.display()
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    let started = Instant::now();
    let mut samples = Samples::new(&fleet, started);
    samples.take(&fleet);
    let zero = counters(&fleet).await;

    // 1. Converge.
    cluster.live = created
        .into_iter()
        .enumerate()
        .map(|(i, srv)| (cluster.kubelet(i, srv.name, srv.ip), srv.id))
        .collect();
    let client = env.client.clone();
    futures::stream::iter(cluster.live.iter().map(|(k, _)| k))
        .map(|k| k.register(&client))
        .buffer_unordered(PARALLEL)
        .try_collect::<Vec<()>>()
        .await
        .context("registering the Nodes")?;
    futures::stream::iter(0..s)
        .map(|i| create_service(&client, i))
        .buffer_unordered(PARALLEL)
        .try_collect::<Vec<()>>()
        .await?;
    println!(
        "  registered {n} Nodes and created {s} Services in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let converged = wait_converged(
        &env,
        &fleet,
        &cluster,
        &mut samples,
        Duration::from_secs(900),
    )
    .await?;
    let converged_at = started.elapsed().as_secs_f64();
    let node_bytes = node_bytes(&env.client, &cluster.live[0].0.name).await?;
    let after_converge = counters(&fleet).await;
    let converge = Phase {
        seconds: converged.then_some(converged_at),
        controllers: phase(
            &fleet,
            &zero,
            &after_converge,
            &samples,
            (0.0, converged_at),
            true,
        ),
    };
    print_phase("converge", &converge);

    // 2. Churn.
    println!(
        "  churn: {:.0} s, each Node reporting every {} s, a Node leaving or joining every {} s",
        churn.as_secs_f64(),
        report_period.as_secs(),
        membership_period.as_secs()
    );
    let churn_start = Instant::now();
    let (mut reports, mut joins, mut removals) = (0u64, 0usize, 0usize);
    let mut next_sample = churn_start;
    let mut next_change = churn_start + membership_period;
    while churn_start.elapsed() < churn {
        let now = Instant::now();
        if now >= next_sample {
            samples.take(&fleet);
            next_sample += SAMPLE;
        }
        if now >= next_change {
            if removals <= joins {
                cluster.remove().await?;
                removals += 1;
            } else {
                cluster.join().await?;
                joins += 1;
            }
            next_change += membership_period;
        }
        let k = &cluster.live[reports as usize % cluster.live.len()].0;
        k.report_status(&env.client, true, reports / cluster.live.len() as u64 + 1)
            .await
            .with_context(|| format!("status report of {}", k.name))?;
        reports += 1;
        let spacing = report_period / cluster.live.len() as u32;
        tokio::time::sleep_until((churn_start + spacing * reports as u32).into()).await;
        anyhow::ensure!(
            fleet.reap().is_empty(),
            "a controller exited during the churn:\n{}",
            fleet.log_tails(20)
        );
    }
    let churn_s = churn_start.elapsed().as_secs_f64();
    let after_churn = counters(&fleet).await;
    let from = churn_start.duration_since(started).as_secs_f64();
    let churn_phase = Phase {
        seconds: Some(churn_s),
        controllers: phase(
            &fleet,
            &after_converge,
            &after_churn,
            &samples,
            (from, from + churn_s),
            false,
        ),
    };
    print_phase("churn", &churn_phase);
    let settled = wait_converged(
        &env,
        &fleet,
        &cluster,
        &mut samples,
        Duration::from_secs(120),
    )
    .await?;
    if !settled {
        println!("  the world did not converge again within 120 s of the churn's end");
    }

    // 3. Restart: every controller at once, as a rollout does, each listing every Node again.
    let restart_start = Instant::now();
    for i in 0..fleet.replicas.len() {
        fleet.terminate(i, Duration::from_secs(30)).await?;
        fleet.restart(i)?;
    }
    let from = restart_start.duration_since(started).as_secs_f64();
    let listed = wait_listed(&fleet, &mut samples, cluster.live.len()).await?;
    println!(
        "  restart: every controller listed {} Nodes {:.1} s after SIGTERM",
        cluster.live.len(),
        restart_start.elapsed().as_secs_f64()
    );
    // Ten more seconds: what the first passes after the list cost.
    let settle = Instant::now() + Duration::from_secs(10);
    while Instant::now() < settle {
        samples.take(&fleet);
        tokio::time::sleep(SAMPLE).await;
    }
    let after_restart = counters(&fleet).await;
    let restart = Phase {
        seconds: listed.then_some(restart_start.elapsed().as_secs_f64()),
        controllers: phase(
            &fleet,
            &vec![Counters::default(); fleet.replicas.len()],
            &after_restart,
            &samples,
            (from, started.elapsed().as_secs_f64()),
            true,
        ),
    };
    print_phase("restart", &restart);

    let figures = Figures {
        nodes: n,
        services: s,
        profile: args.profile.clone(),
        node_bytes,
        converge,
        churn: churn_phase,
        restart,
        churn_minutes: churn_s / 60.0,
        report_period_s: report_period.as_secs(),
        status_reports: reports,
        joins,
        removals,
    };
    print_summary(&figures);
    if let Some(path) = &args.plot {
        let path = memory_plot(path);
        let mut series = samples.series;
        series.push(Series::sum("all four", &series));
        super::plot::write_series_png(
            "bench system: resident memory per controller",
            "seconds",
            "MiB",
            &series,
            &path,
        )?;
        eprintln!("bench: memory plot written to {}", path.display());
    }
    for i in 0..fleet.replicas.len() {
        fleet.kill(i).await;
    }
    Ok(figures)
}

/// Where `--plot FILE.png` puts this scenario's memory plot: `FILE-system-rss.png`.
pub fn memory_plot(plot: &Path) -> PathBuf {
    plot.with_file_name(format!(
        "{}-system-rss.png",
        plot.file_stem().and_then(|s| s.to_str()).unwrap_or("bench")
    ))
}

/// Service `svc-<i>`: one TCP port, targeting pool `p<i>`.
async fn create_service(client: &Client, i: usize) -> anyhow::Result<()> {
    let svc = crate::demo::world::pool_service(i, POOL_LABEL, &format!("p{i}"));
    Api::<Service>::namespaced(client.clone(), NAMESPACE)
        .create(&PostParams::default(), &svc)
        .await
        .with_context(|| format!("creating Service svc-{i}"))?;
    Ok(())
}

/// Polls until every live Node is initialized and routed, no other Node is left and every
/// Service has an ingress, sampling memory meanwhile; `false` after `timeout`.
async fn wait_converged(
    env: &Env,
    fleet: &Fleet,
    cluster: &Cluster<'_>,
    samples: &mut Samples,
    timeout: Duration,
) -> anyhow::Result<bool> {
    let deadline = Instant::now() + timeout;
    let nodes: Api<Node> = Api::all(env.client.clone());
    let services: Api<Service> = Api::namespaced(env.client.clone(), NAMESPACE);
    let cached = ListParams::default().match_any();
    loop {
        samples.take(fleet);
        let listed = nodes.list(&cached).await?.items;
        let initialized = listed.iter().filter(|n| initialized(n)).count();
        let routed = listed.iter().filter(|n| routed(n)).count();
        // The namespace's own `kubernetes` Service is not ours.
        let balanced: Vec<Service> = services
            .list(&cached)
            .await?
            .items
            .into_iter()
            .filter(is_load_balancer)
            .collect();
        let served = balanced.iter().filter(|s| has_ingress(s)).count();
        let total = balanced.len();
        let routes = env.sim.inventory().routes.len();
        let live = cluster.live.len();
        if listed.len() == live
            && initialized == live
            && routed == live
            && routes == live
            && served == total
        {
            return Ok(true);
        }
        if Instant::now() > deadline {
            println!(
                "  not converged: {} Nodes ({live} live), {initialized} initialized, {routed} \
                 routed, {routes} routes, {served}/{total} Services served",
                listed.len()
            );
            return Ok(false);
        }
        tokio::time::sleep(SAMPLE).await;
    }
}

/// Polls until every controller has received `nodes` Node watch events (its initial list), sampling
/// memory meanwhile; `false` after two minutes.
async fn wait_listed(fleet: &Fleet, samples: &mut Samples, nodes: usize) -> anyhow::Result<bool> {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        samples.take(fleet);
        let mut done = true;
        for r in &fleet.replicas {
            let m = r.metrics().await;
            done &= fleet::metric(
                &m,
                "cloud_controllers_watch_events_total{resource=\"nodes\"}",
            ) >= nodes as f64;
        }
        if done {
            return Ok(true);
        }
        if Instant::now() > deadline {
            println!("  not every controller listed the Nodes within 120 s of its restart");
            return Ok(false);
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

fn initialized(node: &Node) -> bool {
    let spec = node.spec.as_ref();
    spec.and_then(|s| s.provider_id.as_ref()).is_some()
        && !spec
            .and_then(|s| s.taints.as_ref())
            .is_some_and(|t| t.iter().any(|t| t.key == UNINITIALIZED))
}

fn routed(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| {
            c.iter()
                .any(|c| c.type_ == "NetworkUnavailable" && c.status == "False")
        })
}

fn is_load_balancer(svc: &Service) -> bool {
    svc.spec.as_ref().and_then(|s| s.type_.as_deref()) == Some("LoadBalancer")
}

fn has_ingress(svc: &Service) -> bool {
    svc.status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref())
        .and_then(|lb| lb.ingress.as_ref())
        .is_some_and(|i| !i.is_empty())
}

/// The size of `name` as the apiserver serves it (JSON, managedFields included).
async fn node_bytes(client: &Client, name: &str) -> anyhow::Result<usize> {
    let request = http::Request::get(format!("/api/v1/nodes/{name}?{PROBE_QUERY}"))
        .body(Vec::new())
        .context("building the request")?;
    let text = client.request_text(request).await?;
    Ok(text.len())
}

fn print_phase(name: &str, phase: &Phase) {
    let seconds = phase
        .seconds
        .map_or("never".to_string(), |s| format!("{s:.1} s"));
    println!("  {name}: {seconds}");
}

fn print_summary(f: &Figures) {
    println!(
        "\nbench system: {} kubelet-shaped Nodes ({:.1} KB each as served), {} LoadBalancer \
         Services, a route per Node; churn {:.1} min: {} status reports, {} joins, {} removals",
        f.nodes,
        f.node_bytes as f64 / 1000.0,
        f.services,
        f.churn_minutes,
        f.status_reports,
        f.joins,
        f.removals
    );
    println!(
        "  {:<9} {:<21} {:>9} {:>9} {:>7} {:>6} {:>7} {:>8} {:>8}",
        "phase",
        "controller",
        "peak RSS",
        "steady",
        "CPU s",
        "CPU",
        "cloud",
        "kube req",
        "watch ev"
    );
    for (name, phase) in [
        ("converge", &f.converge),
        ("churn", &f.churn),
        ("restart", &f.restart),
    ] {
        let seconds = phase.seconds.unwrap_or(0.0).max(0.001);
        for u in phase.controllers.iter().chain([&phase.sum()]) {
            println!(
                "  {:<9} {:<21} {:>5.1} MiB {:>5.1} MiB {:>7.2} {:>5.2}% {:>7} {:>8} {:>8}",
                name,
                u.controller,
                u.peak_rss_mib,
                u.steady_rss_mib,
                u.cpu_s,
                u.cpu_s * 100.0 / seconds,
                u.cloud_calls,
                u.kube_requests,
                u.watch_events
            );
        }
    }
}

impl Phase {
    /// The four controllers together (peaks added up: the worst case, all at once).
    pub fn sum(&self) -> Usage {
        self.controllers.iter().fold(
            Usage {
                controller: "all four".into(),
                ..Usage::default()
            },
            |mut sum, u| {
                sum.peak_rss_mib += u.peak_rss_mib;
                sum.steady_rss_mib += u.steady_rss_mib;
                sum.cpu_s += u.cpu_s;
                sum.cloud_calls += u.cloud_calls;
                sum.kube_requests += u.kube_requests;
                sum.watch_events += u.watch_events;
                sum
            },
        )
    }
}
