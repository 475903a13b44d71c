//! `cargo xtask bench [nodes|services|routes|system|admission|data-path|cloudstack-nodes|cloudstack-services|all]`: benchmarks. They
//! print figures (and write them as JSON with `--json`) and assert nothing.
//!
//! Every controller scenario runs one controller binary (profile `release` by default, what the
//! images ship) as a child process against a fresh testenv control plane (real kube-apiserver +
//! etcd) and an in-process cloud-sim. Cloud calls are the sim's request log; memory is the child's
//! `/proc/<pid>/status`. `admission` runs no controller: it times Service writes with and without
//! the chart's ValidatingAdmissionPolicy; `data-path` none either: it measures what one cloud-sim
//! load balancer adds to a request.

mod admission;
mod budget;
mod certificate_rotation;
mod cloudstack_nodes;
mod cloudstack_services;
mod data_path;
mod nodes;
pub mod plot;
mod routes;
mod services;
mod shared;
pub mod system;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use kube::api::PostParams;
use kube::{Api, ResourceExt};
use serde::Serialize;

pub use crate::fleet::Memory;
use crate::fleet::{Launch, Output, Process};

/// Which benchmark(s) to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Scenario {
    /// node-controller: initialize many tainted Nodes at once.
    Nodes,
    /// service-controller: LoadBalancer Services created at once, a node join, idle.
    Services,
    /// route-controller: pod-CIDR routes for many Nodes created at once, then idle.
    Routes,
    /// All four controllers at once on kubelet-shaped Nodes: converge, then kubelet status
    /// churn with Nodes joining and leaving; memory, CPU, cloud calls and apiserver traffic per
    /// controller.
    System,
    /// The chart's ValidatingAdmissionPolicy for Service annotations: latency of Service creates
    /// (dry run) with and without it. No controller.
    Admission,
    /// One cloud-sim load balancer carrying traffic: requests per second and the latency it adds
    /// against a direct connection. No controller.
    DataPath,
    /// The four controllers' Cloud API calls per hour once converged, idle and under churn
    /// (Nodes replaced and rebooted, Services created and deleted), against the 3600/h budget.
    Budget,
    /// node-controller with `--cloud-provider=external-cloudstack` beside upstream's CloudStack
    /// CCM (v1.2.0, built by testenv): many tainted Nodes at once on cloud-sim's CloudStack API.
    /// Not part of `all`.
    CloudstackNodes,
    /// service-controller with `--cloud-provider=external-cloudstack` beside upstream's
    /// CloudStack CCM: LoadBalancer Services created at once, a node join, idle. Not part of
    /// `all`.
    CloudstackServices,
    /// `nodes`, then `services`, then `routes`, then `system`, then `admission`, then `data-path`.
    All,
}

/// The JSON report's keys: one per scenario `all` runs (`budget` runs alone: it takes minutes
/// per size).
pub const REPORTED: &[&str] = &[
    "nodes",
    "services",
    "routes",
    "system",
    "admission",
    "data_path",
];

/// Options of `cargo xtask bench`.
#[derive(Debug, clap::Args)]
pub struct BenchArgs {
    /// Scenario to run.
    #[arg(value_enum, default_value_t = Scenario::Nodes)]
    pub scenario: Scenario,
    /// Shorter idle phases and smaller default sizes, for iterating.
    #[arg(long)]
    pub quick: bool,
    /// `nodes`, `system`: number of servers and Nodes [default: 1000, 100 with --quick].
    #[arg(long)]
    pub nodes: Option<usize>,
    /// `services`, `cloudstack-services`: number of LoadBalancer Services [default: 20, 5 with
    /// --quick]; `system`: [default: 100, 10 with --quick]; `admission`: Service creates per
    /// measured row [default: 500, 50 with --quick].
    #[arg(long)]
    pub services: Option<usize>,
    /// `services`: instead, the same Services (one port each) on one shared load balancer
    /// against a load balancer each, side by side.
    #[arg(long)]
    pub shared: bool,
    /// `services`: a cluster across two network zones: 5 more nodes in ash (us-east) beside
    /// the 10 in fsn1, and the joining node in ash. The load balancers (in fsn1) leave the ash
    /// nodes out; HCCM is not run (it serves no such cluster).
    #[arg(long)]
    pub zones: bool,
    /// `routes`: number of servers, Nodes and routes [default: 1000, 100 with --quick].
    #[arg(long)]
    pub routes: Option<usize>,
    /// `routes`: how long each route action runs in cloud-sim, in milliseconds [default: 50].
    #[arg(long)]
    pub action_ms: Option<u64>,
    /// `routes`: the Nodes (with providerIDs, podCIDRs and addresses) exist before the controller
    /// starts, as after a restart or a failover, instead of joining it.
    #[arg(long)]
    pub existing_nodes: bool,
    /// `budget`: how many times faster than real time the controllers' periods run (an hour is
    /// simulated in 3600 / scale seconds) [default: 30].
    #[arg(long)]
    pub time_scale: Option<u32>,
    /// `system`: minutes of kubelet status churn [default: 10, 1 with --quick].
    #[arg(long)]
    pub churn_minutes: Option<f64>,
    /// `system`: dedicated (Robot) servers among the Nodes, in the pools of the Services, served by
    /// the sim's Robot webservice under Robot's rate limit [default: 200, 20 with --quick].
    #[arg(long)]
    pub robot_nodes: Option<usize>,
    /// Cargo profile the controllers are built with (`release` is what the images ship;
    /// `dev-image` builds faster).
    #[arg(long, default_value = "release")]
    pub profile: String,
    /// Run the controller binaries in this directory instead of building them (e.g. copies of an
    /// earlier build, to compare two versions).
    #[arg(long)]
    pub binaries: Option<PathBuf>,
    /// Extra controller flag (repeatable) for every controller run, e.g.
    /// `--arg=--concurrent-node-syncs=32`.
    #[arg(long = "arg", allow_hyphen_values = true)]
    pub extra: Vec<String>,
    /// Extra environment variable (repeatable, `KEY=VALUE`) for every controller run, e.g.
    /// `--env=MALLOC_ARENA_MAX=1`.
    #[arg(long, value_parser = parse_env)]
    pub env: Vec<(String, String)>,
    /// hcloud-cloud-controller-manager's binary: `nodes`, `services` and `routes` then also run
    /// it (with only the matching controller enabled) on the same scenario and print its figures
    /// beside ours; `budget` runs it with all of them on the same world after ours.
    #[arg(long)]
    pub hccm: Option<PathBuf>,
    /// Run the controller under a wrapper, e.g. `--wrapper=heaptrack` (the RSS figures are then
    /// the wrapper's, not the controller's).
    #[arg(long)]
    pub wrapper: Option<String>,
    /// Also write the figures of the scenarios that ran to this file (JSON), to compare runs.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Also draw objects converged over time, one line per scenario, into this PNG.
    #[arg(long)]
    pub plot: Option<PathBuf>,
}

impl BenchArgs {
    /// How a whole-system bench starts the four controllers: one replica each, logging warnings,
    /// routing the bench's pod CIDRs, with this run's `--arg`s and `--wrapper`.
    fn fleet_options<'a>(
        &'a self,
        controller_args: &'a [(&'a str, String)],
        extra_env: &'a [(String, String)],
        dir: &'a Path,
    ) -> crate::fleet::Options<'a> {
        crate::fleet::Options {
            replicas: 1,
            stable_identities: false,
            rust_log: "warn",
            cluster_cidr: routes::CLUSTER_CIDR,
            extra_args: &self.extra,
            controller_args,
            extra_env,
            wrapper: self.wrapper.as_deref(),
            dir,
        }
    }
}

fn parse_env(s: &str) -> Result<(String, String), String> {
    s.split_once('=')
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .ok_or_else(|| format!("expected KEY=VALUE, got {s:?}"))
}

/// One scenario's line in the table printed after all scenarios ran.
#[derive(Debug, Clone)]
pub struct Row {
    pub scenario: &'static str,
    /// `ours` or `HCCM` (`--hccm`).
    pub manager: &'static str,
    pub size: String,
    /// Seconds until everything converged (`None`: not within the timeout).
    pub converged_s: Option<f64>,
    pub calls: u64,
    /// 423 (locked) and 429 (rate limited) answers.
    pub refused: u64,
    pub peak_rss_kib: u64,
    /// The busiest endpoints, e.g. `POST /x: 20, GET /actions: 6`.
    pub busiest: String,
}

impl Row {
    /// The row of a burst phase measured by `calls`.
    pub fn new(
        scenario: &'static str,
        manager: &'static str,
        size: String,
        converged_s: Option<f64>,
        calls: &Calls,
        peak_rss_kib: u64,
    ) -> Self {
        let mut endpoints: Vec<(&String, &u64)> = calls.by_endpoint.iter().collect();
        endpoints.sort_by(|a, b| b.1.cmp(a.1));
        let busiest = endpoints
            .iter()
            .take(3)
            .map(|(e, n)| format!("{e}: {n}"))
            .collect::<Vec<_>>()
            .join(", ");
        let refused = [423, 429]
            .iter()
            .filter_map(|s| calls.by_status.get(s))
            .sum();
        Self {
            scenario,
            manager,
            size,
            converged_s,
            calls: calls.total,
            refused,
            peak_rss_kib,
            busiest,
        }
    }
}

fn print_table(rows: &[Row]) {
    println!(
        "\nall scenarios (each controller a separate release process; calls of the burst phase)"
    );
    println!(
        "  {:<15} {:<22} {:>10} {:>7} {:>8} {:>9}  busiest endpoints",
        "scenario", "size", "converged", "calls", "423/429", "peak RSS"
    );
    for r in rows {
        let converged = r
            .converged_s
            .map_or("never".to_string(), |s| format!("{s:.2} s"));
        let scenario = match r.manager {
            "ours" => r.scenario.to_string(),
            other => format!("{}, {other}", r.scenario),
        };
        println!(
            "  {:<15} {:<22} {:>10} {:>7} {:>8} {:>5.1} MiB  {}",
            scenario,
            r.size,
            converged,
            r.calls,
            r.refused,
            mib(r.peak_rss_kib),
            r.busiest
        );
    }
}

/// Runs the benchmark(s).
pub fn run(args: BenchArgs) -> anyhow::Result<()> {
    testenv::install_crypto_provider();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let mut figures = BTreeMap::new();
    let mut curves = Vec::new();
    let mut rows = Vec::new();
    if matches!(args.scenario, Scenario::Nodes | Scenario::All) {
        let binary = controller_binary("node-controller", &args)?;
        let f = rt.block_on(nodes::run(&args, Manager::Ours(&binary)))?;
        let hccm = match &args.hccm {
            Some(h) => Some(rt.block_on(nodes::run(&args, Manager::Hccm(h)))?),
            None => None,
        };
        nodes::print(&f, hccm.as_ref());
        curves.push(f.convergence.clone());
        rows.push(f.row());
        figures.insert("nodes", serde_json::to_value(f)?);
        if let Some(h) = hccm {
            rows.push(h.row());
            figures.insert("nodes_hccm", serde_json::to_value(h)?);
        }
    }
    if args.scenario == Scenario::CloudstackNodes {
        let binary = controller_binary("node-controller", &args)?;
        let upstream = testenv::cloudstack_ccm()?;
        let ours = rt.block_on(cloudstack_nodes::run(
            &args,
            cloudstack_nodes::Manager::Ours(&binary),
        ))?;
        let theirs = rt.block_on(cloudstack_nodes::run(
            &args,
            cloudstack_nodes::Manager::Upstream(&upstream),
        ))?;
        cloudstack_nodes::print(&ours, &theirs);
        curves.extend([ours.convergence.clone(), theirs.convergence.clone()]);
        rows.extend([ours.row(), theirs.row()]);
        figures.insert("cloudstack_nodes", serde_json::to_value(ours)?);
        figures.insert("cloudstack_nodes_upstream", serde_json::to_value(theirs)?);
    }
    if args.scenario == Scenario::CloudstackServices {
        cloudstack_services::run_both(&rt, &args, &mut figures, &mut curves, &mut rows)?;
    }
    if matches!(args.scenario, Scenario::Services | Scenario::All) {
        let binary = controller_binary("service-controller", &args)?;
        if args.shared {
            let f = rt.block_on(shared::run(&args, &binary))?;
            figures.insert("services_shared", serde_json::to_value(f)?);
        } else {
            let f = rt.block_on(services::run(&args, Manager::Ours(&binary)))?;
            let hccm = match &args.hccm {
                Some(_) if args.zones => {
                    eprintln!(
                        "bench services --zones: HCCM not run (it serves no cluster across zones)"
                    );
                    None
                }
                Some(h) => Some(rt.block_on(services::run(&args, Manager::Hccm(h)))?),
                None => None,
            };
            services::print(&f, hccm.as_ref());
            curves.push(f.convergence.clone());
            rows.push(f.row());
            figures.insert("services", serde_json::to_value(f)?);
            if let Some(h) = hccm {
                rows.push(h.row());
                figures.insert("services_hccm", serde_json::to_value(h)?);
            }
        }
    }
    if matches!(args.scenario, Scenario::Routes | Scenario::All) {
        let binary = controller_binary("route-controller", &args)?;
        let f = rt.block_on(routes::run(
            &args,
            Manager::Ours(&binary),
            args.existing_nodes,
        ))?;
        let hccm = match &args.hccm {
            Some(h) => {
                Some(rt.block_on(routes::run(&args, Manager::Hccm(h), args.existing_nodes))?)
            }
            None => None,
        };
        routes::print(&f, hccm.as_ref());
        curves.push(f.convergence.clone());
        rows.push(f.row());
        figures.insert("routes", serde_json::to_value(f)?);
        if let Some(h) = hccm {
            rows.push(h.row());
            figures.insert("routes_hccm", serde_json::to_value(h)?);
        }
    }
    if matches!(args.scenario, Scenario::System | Scenario::All) {
        let binaries = crate::fleet::ALL
            .iter()
            .map(|spec| controller_binary(spec.name, &args))
            .collect::<anyhow::Result<Vec<_>>>()?;
        let f = rt.block_on(system::run(&args, &binaries))?;
        figures.insert("system", serde_json::to_value(f)?);
    }
    if args.scenario == Scenario::Budget {
        let binaries = crate::fleet::ALL
            .iter()
            .map(|spec| controller_binary(spec.name, &args))
            .collect::<anyhow::Result<Vec<_>>>()?;
        let f = rt.block_on(budget::run(&args, &binaries))?;
        figures.insert("budget", serde_json::to_value(f)?);
    }
    if matches!(args.scenario, Scenario::Admission | Scenario::All) {
        let f = rt.block_on(admission::run(&args))?;
        figures.insert("admission", serde_json::to_value(f)?);
    }
    if matches!(args.scenario, Scenario::DataPath | Scenario::All) {
        let f = rt.block_on(data_path::run(&args))?;
        figures.insert("data_path", serde_json::to_value(f)?);
    }
    if !rows.is_empty() {
        print_table(&rows);
    }
    if let Some(path) = &args.plot {
        plot::write_png(&curves, path)?;
        eprintln!("bench: plot written to {}", path.display());
    }
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&figures)?)
            .with_context(|| format!("writing {}", path.display()))?;
        eprintln!("bench: figures written to {}", path.display());
    }
    Ok(())
}

/// `package`'s binary: from `--binaries`, else built with `--profile`.
fn controller_binary(package: &str, args: &BenchArgs) -> anyhow::Result<PathBuf> {
    if let Some(dir) = &args.binaries {
        let path = dir.join(package);
        anyhow::ensure!(path.is_file(), "--binaries: no {}", path.display());
        return Ok(path);
    }
    let mut built = crate::build::build_controllers(&[package], &args.profile, true)?;
    Ok(built.remove(0))
}

/// What manages a controller scenario's world: one of our controllers, or HCCM (`--hccm`).
#[derive(Debug, Clone, Copy)]
pub enum Manager<'a> {
    Ours(&'a Path),
    Hccm(&'a Path),
}

impl Manager<'_> {
    /// The column heading for its figures.
    pub fn name(&self) -> &'static str {
        match self {
            Manager::Ours(_) => "ours",
            Manager::Hccm(_) => "HCCM",
        }
    }
}

/// A control plane, its admin client and a cloud-sim: the world a scenario runs in.
pub struct Env {
    pub plane: testenv::ControlPlane,
    pub client: kube::Client,
    pub sim: cloud_sim::Sim,
}

impl Env {
    /// Starts both with [`Env::sim_config`].
    pub async fn start(action_duration: Option<Duration>) -> anyhow::Result<Env> {
        Self::start_with(Self::sim_config(action_duration)).await
    }

    /// The benchmarks' sim: a rate limit no benchmark reaches and a request log that keeps every
    /// call; actions take `action_duration` (default: the sim's).
    pub fn sim_config(action_duration: Option<Duration>) -> cloud_sim::SimConfig {
        let defaults = cloud_sim::SimConfig::default();
        cloud_sim::SimConfig {
            rate_limit_per_hour: 1_000_000,
            action_duration: action_duration.unwrap_or(defaults.action_duration),
            request_log_capacity: 1_000_000,
            ..defaults
        }
    }

    /// Starts a control plane and a sim configured as `sim`.
    pub async fn start_with(sim: cloud_sim::SimConfig) -> anyhow::Result<Env> {
        let plane = testenv::ControlPlane::start()
            .await
            .context("starting the control plane")?;
        let client = plane.client().await?;
        let sim = cloud_sim::Sim::start_with(sim).await;
        Ok(Env { plane, client, sim })
    }

    /// `n` running servers `prefix-1 ..= prefix-n` (through the sim's uncounted batch endpoint):
    /// their `(id, name)`.
    pub async fn servers(&self, n: usize, prefix: &str) -> anyhow::Result<Vec<(u64, String)>> {
        self.servers_in(n, prefix, "cx22", "fsn1").await
    }

    /// [`servers`](Self::servers) of `server_type` in `location`.
    pub async fn servers_in(
        &self,
        n: usize,
        prefix: &str,
        server_type: &str,
        location: &str,
    ) -> anyhow::Result<Vec<(u64, String)>> {
        let ids = self
            .sim
            .client()
            .create_servers(n, prefix, server_type, location)
            .await
            .map_err(|e| anyhow::anyhow!("creating servers: {e}"))?;
        anyhow::ensure!(ids.len() == n, "asked for {n} servers, got {}", ids.len());
        Ok(ids
            .into_iter()
            .enumerate()
            .map(|(i, id)| (id, format!("{prefix}-{}", i + 1)))
            .collect())
    }

    /// Starts `binary` against this world with `env` on top of the token, endpoint and
    /// `RUST_LOG=warn`, waits 2 s for it to list the (empty) world and go idle, then resets the
    /// sim's counters.
    pub async fn controller(
        &self,
        args: &BenchArgs,
        binary: &Path,
        env: &[(&str, &str)],
    ) -> anyhow::Result<Controller> {
        self.controller_with(args, binary, &[], env).await
    }

    /// Starts `manager`: ours as [`Env::controller_with`] does, HCCM with only `hccm_controller`
    /// enabled (its name in `--controllers`), the same flags and environment, and what it needs to
    /// run outside a cluster (no leader election, no serving port, metrics off).
    pub async fn launch(
        &self,
        args: &BenchArgs,
        manager: Manager<'_>,
        hccm_controller: &str,
        flags: &[&str],
        env: &[(&str, &str)],
    ) -> anyhow::Result<Controller> {
        let ctl = self.spawn(args, manager, hccm_controller, flags, env)?;
        tokio::time::sleep(Duration::from_secs(2)).await;
        self.sim.reset_counters();
        Ok(ctl)
    }

    /// [`Env::launch`] without the wait and the reset: for a scenario whose work starts with the
    /// process (the Nodes exist already), whose first calls are part of the figure.
    pub fn spawn(
        &self,
        args: &BenchArgs,
        manager: Manager<'_>,
        hccm_controller: &str,
        flags: &[&str],
        env: &[(&str, &str)],
    ) -> anyhow::Result<Controller> {
        let binary = match manager {
            Manager::Ours(binary) => return self.spawn_controller(args, binary, flags, env),
            Manager::Hccm(binary) => binary,
        };
        let process = Launch::new(binary, self.plane.kubeconfig())
            .args([
                "--cloud-provider=hcloud",
                &format!("--controllers={hccm_controller}"),
                "--leader-elect=false",
                "--secure-port=0",
                "--allow-untagged-cloud=true",
                "--bind-address=127.0.0.1",
            ])
            .args(flags.iter().copied())
            .sim(&self.sim)
            .env("HCLOUD_METRICS_ENABLED", "false")
            // Its start-up check that it runs on a server in the network asks the metadata
            // service, which a benchmark has none of.
            .env("HCLOUD_NETWORK_DISABLE_ATTACHED_CHECK", "true");
        let process = env
            .iter()
            .fold(process, |l, (k, v)| l.env(k, v))
            .output(Output::Log(hccm_log(hccm_controller)))
            .spawn()?;
        Ok(Controller { process })
    }

    /// [`Env::controller`] with flags of the scenario's own besides the `--arg`s.
    pub async fn controller_with(
        &self,
        args: &BenchArgs,
        binary: &Path,
        flags: &[&str],
        env: &[(&str, &str)],
    ) -> anyhow::Result<Controller> {
        // The HCCM controller name is not read for ours.
        self.launch(args, Manager::Ours(binary), "", flags, env)
            .await
    }

    fn spawn_controller(
        &self,
        args: &BenchArgs,
        binary: &Path,
        flags: &[&str],
        env: &[(&str, &str)],
    ) -> anyhow::Result<Controller> {
        let process = Launch::new(binary, self.plane.kubeconfig())
            .wrapper(args.wrapper.as_deref())
            .args(["--leader-elect=false", "--admin-address=127.0.0.1:0"])
            .args(flags.iter().copied())
            .args(&args.extra)
            .sim(&self.sim)
            .env("RUST_LOG", "warn");
        let process = env
            .iter()
            .copied()
            .chain(args.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .fold(process, |l, (k, v)| l.env(k, v))
            .output(Output::Stderr)
            .spawn()?;
        Ok(Controller { process })
    }
}

/// Where HCCM's log goes when it runs `hccm_controller` (`*`: all of them).
pub fn hccm_log(hccm_controller: &str) -> PathBuf {
    let name = if hccm_controller == "*" {
        "all"
    } else {
        hccm_controller
    };
    std::env::temp_dir().join(format!("bench-hccm-{name}.log"))
}

/// A controller binary running as a child process (killed when dropped).
pub struct Controller {
    process: Process,
}

impl Controller {
    /// How the process ended, if it has.
    pub fn try_wait(&mut self) -> std::io::Result<Option<std::process::ExitStatus>> {
        self.process.try_wait()
    }

    /// The process's memory and threads now.
    pub fn memory(&self) -> Memory {
        self.process.memory()
    }

    /// Polls `done` every 200 ms until it says yes (→ `true`) or `timeout` passes (→ `false`);
    /// fails if the controller exits meanwhile.
    pub async fn wait_until(
        &mut self,
        timeout: Duration,
        mut done: impl AsyncFnMut() -> anyhow::Result<bool>,
    ) -> anyhow::Result<bool> {
        let deadline = Instant::now() + timeout;
        loop {
            if done().await? {
                return Ok(true);
            }
            if Instant::now() > deadline {
                return Ok(false);
            }
            if let Some(status) = self.process.try_wait()? {
                anyhow::bail!("the controller exited early: {status}");
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Stops the process.
    pub async fn stop(self) {
        self.process.kill().await;
    }
}

/// MiB, for printing.
pub fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// Creates `nodes` concurrently (64 at a time); a failure is printed, not fatal.
pub async fn create_nodes(client: &kube::Client, nodes: Vec<Node>) {
    let api: Api<Node> = Api::all(client.clone());
    futures::stream::iter(nodes)
        .for_each_concurrent(64, |node| {
            let api = api.clone();
            async move {
                if let Err(e) = api.create(&PostParams::default(), &node).await {
                    eprintln!("bench: creating node {}: {e}", node.name_any());
                }
            }
        })
        .await;
}

/// Query parameter the benchmark adds to its own reads of the sim, so they are left out of the
/// controller's call counts.
pub const PROBE_QUERY: &str = "bench=probe";

/// The controller's cloud calls since the sim's counters were last reset.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Calls {
    pub total: u64,
    /// `"METHOD /template"` → count.
    pub by_endpoint: BTreeMap<String, u64>,
    /// Load-balancer id → calls whose path names it (`/load_balancers/{id}/…`).
    pub by_load_balancer: BTreeMap<u64, u64>,
    /// HTTP status → count (`423` = a locked resource, `429` = rate limited).
    pub by_status: BTreeMap<u16, u64>,
}

impl Calls {
    /// From the sim's request log, without the benchmark's own probes.
    pub fn of(sim: &cloud_sim::Sim) -> Calls {
        let mut calls = Calls::default();
        for r in sim.request_log() {
            if r.uri.contains(PROBE_QUERY) {
                continue;
            }
            calls.total += 1;
            *calls.by_status.entry(r.status).or_default() += 1;
            *calls
                .by_endpoint
                .entry(format!("{} {}", r.method, r.endpoint))
                .or_default() += 1;
            if let Some(id) = r
                .uri
                .split_once("/load_balancers/")
                .and_then(|(_, rest)| rest.split(['/', '?']).next()?.parse().ok())
            {
                *calls.by_load_balancer.entry(id).or_default() += 1;
            }
        }
        calls
    }

    /// Calls to endpoints ending in `suffix`, e.g. `/actions/update_service`.
    pub fn to(&self, suffix: &str) -> u64 {
        self.by_endpoint
            .iter()
            .filter(|(k, _)| k.ends_with(suffix))
            .map(|(_, n)| n)
            .sum()
    }

    /// Responses with HTTP `status`.
    pub fn status(&self, status: u16) -> u64 {
        self.by_status.get(&status).copied().unwrap_or(0)
    }

    /// Prints one `endpoint: count` line per endpoint, indented.
    pub fn print_endpoints(&self, indent: &str) {
        for (k, v) in &self.by_endpoint {
            println!("{indent}{k}: {v}");
        }
    }
}
