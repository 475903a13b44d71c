//! `cargo xtask bench system`: the four controllers together, on a cluster shaped like a real one.
//!
//! cloud-sim with N servers in network `k8s` (`10.0.0.0/8`); the four controllers as the chart
//! runs them (one process each, its own ServiceAccount, see [`crate::fleet`]); N Nodes registered
//! the way kubelet v1.36 registers them ([`testenv::KubeletNode`]: 50 images, five conditions,
//! managedFields of four field managers), each with its own pod CIDR; S LoadBalancer Services, each
//! targeting its own pool of N/S Nodes through HCCM's `node-selector` annotation; and R dedicated
//! (Robot) servers, their Nodes in the same pools (so every load balancer has IP targets too),
//! served by the sim's Robot webservice under Robot's own rate limit, with one account for all
//! controllers as in a cluster. Two phases:
//! 1. **converge**: everything at once, until every Node is initialized and routed and every
//!    Service has its load balancer;
//! 2. **churn**: kubelet status reports at kubelet's cadence (every Node every 5 minutes, an
//!    image pulled every fourth report), and a Node leaving (its server deleted, its kubelet
//!    silent) or joining every minute.
//!
//! Per controller and phase: peak and steady RSS, CPU seconds, Cloud and Robot calls, apiserver
//! requests and the watch events it decoded; then the sum of all four, and the Robot calls per
//! hour against Robot's limit.

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
use super::routes::{MAX_NODES, pod_cidr, servers};
use super::{BenchArgs, Env, PROBE_QUERY, mib};
use crate::demo::machines::{NETWORK, UNINITIALIZED};
use crate::fleet::{self, Fleet};

pub(super) const POOL_LABEL: &str = "bench.cloud-controllers.dev/pool";
const LB_TYPE: &str = "load-balancer.hetzner.cloud/type";
/// Hetzner's load balancer types and how many targets each holds (`GET /load_balancer_types`).
const LB_TYPES: [(&str, usize); 3] = [("lb11", 25), ("lb21", 75), ("lb31", 150)];
pub(super) const NAMESPACE: &str = "default";
/// Nodes registered (or Services created) at once.
pub(super) const PARALLEL: usize = 32;
/// kubelet's `--node-status-report-frequency` default: with Node leases, a Node's status is
/// written this often when nothing changes.
const REPORT_PERIOD: Duration = Duration::from_secs(300);
/// How often memory is sampled.
const SAMPLE: Duration = Duration::from_secs(2);

/// What `bench system` measured.
#[derive(Debug, Serialize)]
pub struct Figures {
    pub nodes: usize,
    /// Dedicated (Robot) servers and their Nodes, besides the `nodes` Cloud ones.
    pub robot_nodes: usize,
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
    pub robot: RobotFigures,
}

/// The Robot webservice's side of the run: all controllers together, one account.
#[derive(Debug, Serialize)]
pub struct RobotFigures {
    /// Robot's limit on `GET /server` and `GET /server/{n}`: per account, in any hour.
    pub limit_per_hour: u32,
    pub converge_calls: u64,
    pub churn_calls: u64,
    pub restart_calls: u64,
    /// The churn's calls scaled to an hour: the steady cost of a mixed cluster.
    pub churn_calls_per_hour: f64,
    /// `server` requests the sim counted within the last hour when the run ended (the whole run,
    /// when it took less than an hour).
    pub used_in_last_hour: u32,
    /// Robot's rate-limit refusals (403) the controllers got.
    pub rate_limited: u64,
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
    pub robot_calls: u64,
    pub kube_requests: u64,
    pub watch_events: u64,
}

/// Cumulative counters of one controller at one moment.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Counters {
    cpu_s: f64,
    pub(super) cloud_calls: u64,
    robot_calls: u64,
    kube_requests: u64,
    watch_events: u64,
}

pub(super) async fn counters(fleet: &Fleet) -> Vec<Counters> {
    let mut out = Vec::new();
    for r in &fleet.replicas {
        let m = r.metrics().await;
        out.push(Counters {
            cpu_s: r.cpu_seconds(),
            cloud_calls: fleet::cloud_calls(&m),
            robot_calls: fleet::metric(&m, "cloud_controllers_robot_api_requests_total") as u64,
            kube_requests: fleet::metric(&m, "cloud_controllers_kube_api_requests_total") as u64,
            watch_events: fleet::metric(&m, "cloud_controllers_watch_events_total") as u64,
        });
    }
    out
}

/// RSS over time, per controller (MiB), for the steady figure and the plot.
pub(super) struct Samples {
    started: Instant,
    series: Vec<Series>,
}

impl Samples {
    pub(super) fn new(fleet: &Fleet, started: Instant) -> Self {
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
                robot_calls: a.robot_calls - b.robot_calls,
                kube_requests: a.kube_requests - b.kube_requests,
                watch_events: a.watch_events - b.watch_events,
            }
        })
        .collect()
}

/// The simulated cluster: its servers, Nodes and what changes them.
pub(super) struct Cluster<'a> {
    pub(super) client: Client,
    pub(super) sim: &'a cloud_sim::Sim,
    pub(super) network: u64,
    pub(super) pools: usize,
    /// Live Nodes (their kubelets report) with their servers' ids, oldest first.
    pub(super) live: Vec<(KubeletNode, u64)>,
    /// The dedicated servers' Nodes: they report, and neither join nor leave.
    pub(super) robot: Vec<KubeletNode>,
    /// Index of the next Node (its pod CIDR).
    pub(super) next: usize,
    /// Whether a route-controller routes the Cloud Nodes (converged means routed too).
    pub(super) routed: bool,
}

impl Cluster<'_> {
    pub(super) fn kubelet(&self, i: usize, name: String, ip: String) -> KubeletNode {
        KubeletNode {
            node_ip: Some(ip),
            labels: vec![(POOL_LABEL.into(), format!("p{}", i % self.pools))],
            pod_cidr: Some(pod_cidr(i)),
            ..KubeletNode::new(name)
        }
    }

    /// The smallest load balancer type whose targets hold a pool with room for the churn's
    /// joins (a tenth more), as an operator sizes it; `None` while the default lb11 does. Past
    /// lb31's 150 the pools are more than any type holds, and the Services say so
    /// (`TargetsLeftOut`).
    pub(super) fn load_balancer_type(&self) -> Option<&'static str> {
        let pool = (self.live.len() + self.robot.len()).div_ceil(self.pools.max(1));
        let needed = pool + pool.div_ceil(10);
        LB_TYPES
            .iter()
            .find(|(_, targets)| needed <= *targets)
            .or(LB_TYPES.last())
            .and_then(|(name, _)| (*name != "lb11").then_some(*name))
    }

    /// Targets the load balancers hold together once converged: each Service's pool of Nodes,
    /// up to what its type holds (Cloud and dedicated alike count).
    fn expected_targets(&self) -> usize {
        let capacity = LB_TYPES
            .iter()
            .find(|(name, _)| *name == self.load_balancer_type().unwrap_or("lb11"))
            .map_or(LB_TYPES[0].1, |(_, targets)| *targets);
        let mut pools = vec![0usize; self.pools];
        let labels = self
            .live
            .iter()
            .map(|(k, _)| &k.labels)
            .chain(self.robot.iter().map(|k| &k.labels));
        for labels in labels {
            let pool = labels
                .iter()
                .find(|(k, _)| k.as_str() == POOL_LABEL)
                .and_then(|(_, v)| v.strip_prefix('p')?.parse::<usize>().ok());
            if let Some(slot) = pool.and_then(|p| pools.get_mut(p)) {
                *slot += 1;
            }
        }
        pools.iter().map(|p| (*p).min(capacity)).sum()
    }

    /// Dedicated server `j`'s Node, as its kubelet registers it with `--node-ip` on a vSwitch; its
    /// pod CIDR from the top of the cluster CIDR, clear of the Cloud Nodes'.
    fn robot_kubelet(&self, j: usize, name: String) -> KubeletNode {
        KubeletNode {
            node_ip: Some(format!("172.16.{}.{}", j / 250, j % 250 + 2)),
            labels: vec![(POOL_LABEL.into(), format!("p{}", j % self.pools))],
            pod_cidr: Some(pod_cidr(MAX_NODES - 1 - j)),
            ..KubeletNode::new(name)
        }
    }

    /// Every Node whose kubelet reports: the live Cloud ones, then the dedicated ones.
    pub(super) fn kubelets(&self) -> impl Iterator<Item = &KubeletNode> {
        self.live.iter().map(|(k, _)| k).chain(&self.robot)
    }

    /// A new server in the network and its Node, registered.
    pub(super) async fn join(&mut self) -> anyhow::Result<()> {
        let i = self.next;
        self.next += 1;
        let name = format!("bench-node-{}", i + 1);
        let client = self.world();
        let id = client
            .create_server_with(json!({
                "name": name, "server_type": "cx22", "location": "fsn1",
                "image": "ubuntu-24.04", "networks": [self.network],
            }))
            .await
            .map_err(|e| anyhow::anyhow!("creating server {name}: {e}"))?;
        let server = client
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

    /// The bench's own client of the sim: its calls (and their action polls) are tagged with
    /// [`PROBE_QUERY`], so they are not counted as the controllers'.
    fn world(&self) -> cloud_sim::SimClient {
        self.sim.client().tagged(PROBE_QUERY)
    }

    /// The oldest Node's server deleted and its kubelet silent (its last report says NotReady,
    /// what kube-controller-manager would write after the grace period).
    pub(super) async fn remove(&mut self) -> anyhow::Result<()> {
        let (kubelet, id) = self.live.remove(0);
        self.world()
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
    let r = args
        .robot_nodes
        .unwrap_or(if args.quick { 20 } else { 200 });
    anyhow::ensure!(n >= s && s > 0, "--nodes must be at least --services (> 0)");
    anyhow::ensure!(
        n + r <= MAX_NODES,
        "--nodes plus --robot-nodes must be at most {MAX_NODES}"
    );
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
    let network = crate::demo::machines::network(&env.sim).await?;
    let created = servers(&env, n, network).await?;
    let dedicated = robot_servers(&env.sim, r).await?;
    let mut cluster = Cluster {
        client: env.client.clone(),
        sim: &env.sim,
        network,
        pools: s,
        live: Vec::new(),
        robot: Vec::new(),
        next: n,
        routed: true,
    };
    let extra_env: Vec<(String, String)> = fleet::robot_env(&env.sim)
        .into_iter()
        .chain(args.env.iter().cloned())
        .collect();
    let dir = env.plane.dir().join("bench-system");
    let mut fleet = Fleet::start(
        &env.plane,
        &env.client,
        &env.sim,
        binaries,
        args.fleet_options(&[], &extra_env, &dir),
    )
    .await?;
    println!(
        "bench system: {n} servers in network {NETWORK} and {r} dedicated servers, 4 controllers \
         started (logs in {})",
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
    cluster.robot = dedicated
        .into_iter()
        .enumerate()
        .map(|(j, name)| cluster.robot_kubelet(j, name))
        .collect();
    register_all(&cluster, s).await?;
    println!(
        "  registered {} Nodes and created {s} Services in {:.1} s",
        n + r,
        started.elapsed().as_secs_f64()
    );
    let converged = wait_converged(&env, &cluster, Duration::from_secs(900), || {
        samples.take(&fleet)
    })
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
        let reporting = cluster.live.len() + cluster.robot.len();
        let k = cluster
            .kubelets()
            .nth(reports as usize % reporting)
            .expect("an index below the count");
        k.report_status(&env.client, true, reports / reporting as u64 + 1)
            .await
            .with_context(|| format!("status report of {}", k.name))?;
        reports += 1;
        let spacing = report_period / reporting as u32;
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
    let settled = wait_converged(&env, &cluster, Duration::from_secs(120), || {
        samples.take(&fleet)
    })
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
    let listed = wait_listed(&fleet, &mut samples, cluster.live.len() + r).await?;
    println!(
        "  restart: every controller listed {} Nodes {:.1} s after SIGTERM",
        cluster.live.len() + r,
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

    let robot_limit = env.sim.robot_rate_limit("server");
    let robot = RobotFigures {
        limit_per_hour: robot_limit.as_ref().map_or(0, |l| l.max_request),
        converge_calls: converge.sum().robot_calls,
        churn_calls: churn_phase.sum().robot_calls,
        restart_calls: restart.sum().robot_calls,
        churn_calls_per_hour: churn_phase.sum().robot_calls as f64 * 3600.0 / churn_s,
        used_in_last_hour: robot_limit.as_ref().map_or(0, |l| l.used),
        rate_limited: env
            .sim
            .request_log()
            .iter()
            .filter(|e| e.uri.starts_with("/robot/") && e.status == 403)
            .count() as u64,
    };
    let figures = Figures {
        nodes: n,
        robot_nodes: r,
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
        robot,
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

/// Every kubelet of `cluster` registers its Node, and Services `svc-0 .. svc-<s-1>` are created,
/// `PARALLEL` at a time.
pub(super) async fn register_all(cluster: &Cluster<'_>, s: usize) -> anyhow::Result<()> {
    futures::stream::iter(cluster.kubelets())
        .map(|k| k.register(&cluster.client))
        .buffer_unordered(PARALLEL)
        .try_collect::<Vec<()>>()
        .await
        .context("registering the Nodes")?;
    futures::stream::iter(0..s)
        .map(|i| create_service(cluster, i))
        .buffer_unordered(PARALLEL)
        .try_collect::<Vec<()>>()
        .await?;
    Ok(())
}

/// Service `svc-<i>`: one TCP port, targeting pool `p<i>`.
/// `r` dedicated servers `bench-dedicated-1 ..= r` in the sim's Robot webservice (through its
/// uncounted control API): their names.
async fn robot_servers(sim: &cloud_sim::Sim, r: usize) -> anyhow::Result<Vec<String>> {
    let client = sim.client();
    futures::stream::iter(1..=r)
        .map(|j| {
            let client = &client;
            async move {
                let name = format!("bench-dedicated-{j}");
                client
                    .create_robot_server(&name, "AX41-NVMe", "FSN1-DC14")
                    .await
                    .map_err(|e| anyhow::anyhow!("creating dedicated server {name}: {e}"))?;
                Ok(name)
            }
        })
        .buffered(PARALLEL)
        .try_collect()
        .await
}

pub(super) async fn create_service(cluster: &Cluster<'_>, i: usize) -> anyhow::Result<()> {
    let mut svc = crate::demo::machines::pool_service(i, POOL_LABEL, &format!("p{i}"));
    if let Some(lb_type) = cluster.load_balancer_type() {
        svc.metadata
            .annotations
            .get_or_insert_default()
            .insert(LB_TYPE.into(), lb_type.into());
    }
    Api::<Service>::namespaced(cluster.client.clone(), NAMESPACE)
        .create(&PostParams::default(), &svc)
        .await
        .with_context(|| format!("creating Service svc-{i}"))?;
    Ok(())
}

/// Polls until every live Node is initialized, every Cloud one routed (if the cluster is), no
/// other Node is left, every Service has an ingress, every dedicated server is an IP target and
/// every load balancer targets its pool up to what its type holds, sampling memory meanwhile;
/// `false` after `timeout`.
pub(super) async fn wait_converged(
    env: &Env,
    cluster: &Cluster<'_>,
    timeout: Duration,
    mut sample: impl FnMut(),
) -> anyhow::Result<bool> {
    let deadline = Instant::now() + timeout;
    let nodes: Api<Node> = Api::all(env.client.clone());
    let services: Api<Service> = Api::namespaced(env.client.clone(), NAMESPACE);
    let cached = ListParams::default().match_any();
    loop {
        sample();
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
        let inventory = env.sim.inventory();
        let routes = inventory.routes.len();
        let ip_targets: usize = inventory
            .load_balancers
            .iter()
            .map(|lb| lb.target_ips.len())
            .sum();
        let targets = ip_targets
            + inventory
                .load_balancers
                .iter()
                .map(|lb| lb.target_servers.len())
                .sum::<usize>();
        let expected_targets = cluster.expected_targets();
        let (cloud, dedicated) = (cluster.live.len(), cluster.robot.len());
        let live = cloud + dedicated;
        if listed.len() == live
            && initialized == live
            && (!cluster.routed || (routed == cloud && routes == cloud))
            && served == total
            && ip_targets == dedicated
            && targets == expected_targets
        {
            return Ok(true);
        }
        if Instant::now() > deadline {
            println!(
                "  not converged: {} Nodes ({live} live), {initialized} initialized, {routed} \
                 routed, {routes} routes, {served}/{total} Services served, {ip_targets}/\
                 {dedicated} dedicated servers targeted, {targets}/{expected_targets} targets",
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
        "\nbench system: {} kubelet-shaped Nodes ({:.1} KB each as served; {} of them dedicated \
         servers), {} LoadBalancer Services, a route per Cloud Node; churn {:.1} min: {} status \
         reports, {} joins, {} removals",
        f.nodes + f.robot_nodes,
        f.node_bytes as f64 / 1000.0,
        f.robot_nodes,
        f.services,
        f.churn_minutes,
        f.status_reports,
        f.joins,
        f.removals
    );
    println!(
        "  {:<9} {:<21} {:>9} {:>9} {:>7} {:>6} {:>7} {:>6} {:>8} {:>8}",
        "phase",
        "controller",
        "peak RSS",
        "steady",
        "CPU s",
        "CPU",
        "cloud",
        "robot",
        "kube req",
        "watch ev"
    );
    for (name, phase) in [
        ("converge", &f.converge),
        ("churn", &f.churn),
        ("restart", &f.restart),
    ] {
        for u in phase.controllers.iter().chain([&phase.sum()]) {
            // A phase that never ended has no length to share the CPU seconds over.
            let cpu_share = phase.seconds.map_or("–".into(), |seconds| {
                format!("{:.2}%", u.cpu_s * 100.0 / seconds.max(0.001))
            });
            println!(
                "  {:<9} {:<21} {:>5.1} MiB {:>5.1} MiB {:>7.2} {:>6} {:>7} {:>6} {:>8} {:>8}",
                name,
                u.controller,
                u.peak_rss_mib,
                u.steady_rss_mib,
                u.cpu_s,
                cpu_share,
                u.cloud_calls,
                u.robot_calls,
                u.kube_requests,
                u.watch_events
            );
        }
    }
    // Linear growth shows as the same figure at every size; the slope between two sizes (their
    // difference over the difference in Nodes) is the marginal cost, without the fixed part.
    let thousands = (f.nodes + f.robot_nodes) as f64 / 1000.0;
    let per_thousand: Vec<String> = f
        .churn
        .controllers
        .iter()
        .chain([&f.churn.sum()])
        .map(|u| format!("{} {:.1}", u.controller, u.steady_rss_mib / thousands))
        .collect();
    println!(
        "  steady RSS in the churn per 1000 Nodes (MiB): {}",
        per_thousand.join(", ")
    );
    let r = &f.robot;
    println!(
        "  Robot webservice, one account for all controllers (limit {} GET /server per hour): \
         converge {}, churn {} ({:.0} per hour), restart {}; {} in the last hour of the run, \
         {} refused for the rate limit",
        r.limit_per_hour,
        r.converge_calls,
        r.churn_calls,
        r.churn_calls_per_hour,
        r.restart_calls,
        r.used_in_last_hour,
        r.rate_limited
    );
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
                sum.robot_calls += u.robot_calls;
                sum.kube_requests += u.kube_requests;
                sum.watch_events += u.watch_events;
                sum
            },
        )
    }
}
