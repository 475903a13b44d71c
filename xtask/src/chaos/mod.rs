//! `cargo xtask chaos [cloud|cloudstack|crash|certificates|apiserver|failover|soak|all] [--quick]`:
//! the reliability suite.
//!
//! Every scenario builds a [`cluster::ChaosCluster`] (a real kube-apiserver + etcd, cloud-sim, servers in a
//! private network with their Nodes, LoadBalancer Services), runs the four controllers as
//! processes under their chart RBAC ([`Fleet`]), does something bad to them, and audits the
//! end state: converged, no duplicate load balancer or route, nothing leaked, no Node deleted
//! whose server exists. An audit that fails, a controller that exits on its own, a panic or an
//! API token (the soak rotates it: old and new) or a TLS Secret's private key in any log, Event
//! or metric fails the suite (exit 1). Timings, 429s, failover gaps and memory are reported in a
//! table and never judged.
//!
//! `--quick` (what `cargo xtask test` runs) uses small worlds and short phases; the full run is
//! what the figures in docs/reliability.md come from.

mod apiserver;
mod certificates;
mod cloud;
mod cloudstack;
mod cluster;
mod crash;
mod failover;
mod secrets;
mod soak;
mod uploads;

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context as _;
use serde::Serialize;

use crate::build::build_controllers;
use crate::fleet::{self, Fleet};
use cluster::{ChaosCluster, Size};

/// Which part of the suite to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Scenario {
    /// Cloud faults through cloud-sim's rules: 5xx, 429 under a low rate limit, latency, slow
    /// actions, locked/conflict, server lists that omit servers.
    Cloud,
    /// CloudStack (`external-cloudstack`): API errors 431 and 530, async jobs that fail (or never
    /// end), throttling, an unreachable management server; one world, a row per fault.
    Cloudstack,
    /// `kill -9` a random controller at random points, 20 times, restarting it each time; then
    /// the certificate-rotation row (see `certificates`).
    Crash,
    /// Only the crash row's certificate-rotation world: TLS Secrets renewed again and again while
    /// service-controller is killed between an upload and the switch of the ports.
    Certificates,
    /// The crash scenario with each node pool's Services on one shared load balancer.
    CrashShared,
    /// Stop and start kube-apiserver on the same etcd during reconciliation.
    Apiserver,
    /// Two replicas per controller: kill -9, then SIGTERM, the leader; the takeover gaps.
    Failover,
    /// The demo world running with a node churning, RSS/tasks/fds at start and end.
    Soak,
    /// Every scenario above, in that order (the certificate row once, after the crash row).
    All,
}

/// Options of `cargo xtask chaos`.
#[derive(Debug, Clone, clap::Args)]
pub struct ChaosArgs {
    #[arg(value_enum, default_value_t = Scenario::All)]
    pub scenario: Scenario,
    /// Small worlds and short phases (CI): 10 nodes and 5 Services, a 1 min soak.
    #[arg(long)]
    pub quick: bool,
    /// Nodes in the cloud, crash and apiserver worlds [default: 200, 10 with --quick].
    #[arg(long)]
    pub nodes: Option<usize>,
    /// LoadBalancer Services in those worlds [default: 100, 5 with --quick].
    #[arg(long)]
    pub services: Option<usize>,
    /// `cloud`, `cloudstack`: run only the faults whose name contains this (`5xx`, `429`,
    /// `latency`, `slow`, `locked`, `omit`; CloudStack's `cs 431/530`, `cs jobs`, `cs 429`,
    /// `cs unreachable`, or `cs` for all four).
    #[arg(long)]
    pub fault: Option<String>,
    /// Length of the soak [default: 30, 1 with --quick].
    #[arg(long)]
    pub soak_minutes: Option<u64>,
    /// Cargo profile of the controller binaries.
    #[arg(long, default_value = "dev")]
    pub profile: String,
    /// Also write the results as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

impl ChaosArgs {
    fn size(&self) -> Size {
        Size {
            nodes: self.nodes.unwrap_or(if self.quick { 10 } else { 200 }),
            services: self.services.unwrap_or(if self.quick { 5 } else { 100 }),
        }
    }

    /// How long a world may take to converge before the scenario fails.
    fn converge_timeout(&self) -> Duration {
        Duration::from_secs(if self.quick { 180 } else { 900 })
    }
}

/// One line of the results table.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub scenario: String,
    pub faults: String,
    pub size: String,
    /// Seconds until the audit said converged (`None`: never, within the timeout).
    pub converged_s: Option<f64>,
    /// Cloud API calls the controllers made, and how many were answered 429.
    pub calls: u64,
    pub rate_limited: u64,
    pub duplicates: usize,
    pub leaks: usize,
    pub wrong_deletions: usize,
    /// Controller exits the suite did not cause.
    pub crashes: usize,
    /// Controllers the scenario's fault was meant to reach and never did: the row proves
    /// nothing for them.
    pub unreached: Vec<String>,
    /// Writes to the load balancer made outside the cluster that a Service of another namespace
    /// names (requests, plus 1 when its state changed): must stay 0.
    pub not_ours_writes: usize,
    pub notes: String,
}

impl Row {
    fn failed(&self) -> bool {
        self.converged_s.is_none()
            || self.duplicates + self.leaks + self.wrong_deletions + self.crashes > 0
            || !self.unreached.is_empty()
            || self.not_ours_writes > 0
    }
}

/// Everything the suite reports.
#[derive(Debug, Default, Serialize)]
pub struct Report {
    pub rows: Vec<Row>,
    pub failover: Vec<failover::Gap>,
    pub soak: Option<soak::Figures>,
    pub secrets: secrets::Scan,
}

/// Runs the suite; fails when any scenario did.
pub fn run(args: &ChaosArgs) -> anyhow::Result<()> {
    let names: Vec<&str> = fleet::ALL.iter().map(|c| c.name).collect();
    let binaries = build_controllers(&names, &args.profile, true)?;
    testenv::install_crypto_provider();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let report = rt.block_on(suite(args, &binaries))?;
    print_report(&report);
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&report)?)
            .with_context(|| format!("writing {}", path.display()))?;
        eprintln!("chaos: results written to {}", path.display());
    }
    let failed: Vec<&str> = report
        .rows
        .iter()
        .filter(|r| r.failed())
        .map(|r| r.scenario.as_str())
        .collect();
    anyhow::ensure!(failed.is_empty(), "chaos scenarios failed: {failed:?}");
    anyhow::ensure!(
        report.secrets.clean(),
        "the API token or a panic showed up: {:?}",
        report.secrets
    );
    Ok(())
}

async fn suite(args: &ChaosArgs, binaries: &[PathBuf]) -> anyhow::Result<Report> {
    let all = args.scenario == Scenario::All;
    let mut report = Report::default();
    let logs = std::env::temp_dir().join(format!("cloud-controllers-chaos-{}", std::process::id()));
    println!("chaos: controller logs in {}", logs.display());
    let mut scan = secrets::Scanner::default();
    if all || args.scenario == Scenario::Cloud {
        let wanted = |f: &cloud::Fault| match &args.fault {
            Some(w) => f.name.contains(w.as_str()),
            None => true,
        };
        for fault in cloud::faults(args).into_iter().filter(wanted) {
            let row = cloud::run(args, binaries, &fault, &logs, &mut scan).await?;
            print_row(&row);
            report.rows.push(row);
        }
    }
    if all || args.scenario == Scenario::Cloudstack {
        let wanted = |name: &str| args.fault.as_deref().is_none_or(|w| name.contains(w));
        let rows = cloudstack::run(args, binaries, wanted, &logs, &mut scan).await?;
        report.rows.extend(rows);
    }
    if all || args.scenario == Scenario::Crash {
        let row = crash::run(args, binaries, &logs, &mut scan, false).await?;
        print_row(&row);
        report.rows.push(row);
    }
    if all || matches!(args.scenario, Scenario::Crash | Scenario::Certificates) {
        let row = certificates::run(args, binaries, &logs, &mut scan).await?;
        print_row(&row);
        report.rows.push(row);
    }
    if all || args.scenario == Scenario::CrashShared {
        let row = crash::run(args, binaries, &logs, &mut scan, true).await?;
        print_row(&row);
        report.rows.push(row);
    }
    if all || args.scenario == Scenario::Apiserver {
        let row = apiserver::run(args, binaries, &logs, &mut scan).await?;
        print_row(&row);
        report.rows.push(row);
    }
    if all || args.scenario == Scenario::Failover {
        let (row, gaps) = failover::run(args, binaries, &logs, &mut scan).await?;
        print_row(&row);
        report.rows.push(row);
        report.failover = gaps;
    }
    if all || args.scenario == Scenario::Soak {
        let (row, figures) = soak::run(args, binaries, &logs, &mut scan).await?;
        print_row(&row);
        report.rows.push(row);
        report.soak = Some(figures);
    }
    report.secrets = scan.finish();
    if report.rows.iter().all(|r| !r.failed()) {
        let _ = std::fs::remove_dir_all(&logs);
    }
    Ok(report)
}

/// What a scenario's end leaves for its row.
struct Ending {
    /// Cloud calls the controllers made since the sim's counters were last reset, and the 429s.
    calls: u64,
    rate_limited: u64,
    /// Every exit the suite did not cause during the scenario, as `<identity> (<status>)`.
    exited: Vec<String>,
    /// See [`Row::not_ours_writes`].
    not_ours_writes: usize,
}

impl Ending {
    /// `"; exited: …"`, or nothing when no controller exited on its own.
    fn exits_note(&self) -> String {
        if self.exited.is_empty() {
            String::new()
        } else {
            format!("; exited: {}", self.exited.join(", "))
        }
    }
}

/// What every scenario does at its end: count the calls, collect the exits nobody caused, scan
/// what the world and the fleet produced for the secrets, stop the processes and the control plane.
async fn tear_down(
    world: ChaosCluster,
    mut fleet: Fleet,
    scan: &mut secrets::Scanner,
) -> anyhow::Result<Ending> {
    let log = world.sim.request_log();
    let rate_limited = log.iter().filter(|r| r.status == 429).count() as u64;
    let not_ours = format!("/v1/load_balancers/{}", world.not_ours.id);
    let changed = world.not_ours_changed();
    if let Some(what) = &changed {
        eprintln!("chaos: {what}");
    }
    let not_ours_writes = log
        .iter()
        .filter(|r| {
            r.method != "GET" && (r.uri == not_ours || r.uri.starts_with(&format!("{not_ours}/")))
        })
        .count()
        + usize::from(changed.is_some());
    let exited = fleet.unexpected_exits();
    // The secrets the controllers were given: every token of the fleet's token file (the soak
    // rotates it) and the Robot credentials, the world's sim's.
    for token in fleet.tokens() {
        scan.watch(token);
    }
    scan.watch(&world.sim.robot_user());
    scan.watch(&world.sim.robot_password());
    for r in &fleet.replicas {
        scan.text(&format!("{} /metrics", r.identity), &r.metrics().await);
        scan.text(&format!("{} /plan", r.identity), &r.plan().await);
    }
    scan.events(&world.admin).await?;
    scan.objects(&world.admin).await?;
    for log in fleet.logs() {
        scan.file(&log);
    }
    drop(fleet);
    world.plane.stop();
    Ok(Ending {
        calls: log.len() as u64,
        rate_limited,
        exited,
        not_ours_writes,
    })
}

/// Waits until the world converged: how long it took, or `None` after printing what is still
/// off and the controllers' last log lines.
async fn await_convergence(
    world: &ChaosCluster,
    fleet: &Fleet,
    args: &ChaosArgs,
    scenario: &str,
) -> anyhow::Result<Option<Duration>> {
    match world
        .wait_for(args.converge_timeout(), |a| a.converged())
        .await?
    {
        Ok(took) => Ok(Some(took)),
        Err(last) => {
            eprintln!(
                "chaos {scenario}: not converged: {}\n{}",
                last.summary(),
                fleet.log_tails(10)
            );
            Ok(None)
        }
    }
}

/// Starts `replicas` of each controller against `world`, each replica with a stable identity (its
/// pod name in a cluster) so a restarted process is the same "pod"; logs go to `dir`.
async fn start_fleet(
    world: &ChaosCluster,
    binaries: &[PathBuf],
    replicas: usize,
    rust_log: &str,
    dir: &Path,
) -> anyhow::Result<Fleet> {
    start_fleet_with(world, binaries, replicas, rust_log, dir, &[]).await
}

/// [`start_fleet`] with flags for one controller only: `(controller name, flag)`.
async fn start_fleet_with(
    world: &ChaosCluster,
    binaries: &[PathBuf],
    replicas: usize,
    rust_log: &str,
    dir: &Path,
    controller_args: &[(&str, String)],
) -> anyhow::Result<Fleet> {
    // Robot on, with the sim's webservice: its credentials are secrets the scan looks for too.
    let robot_env = fleet::robot_env(&world.sim);
    Fleet::start(
        &world.plane,
        &world.admin,
        &world.sim,
        binaries,
        fleet::Options {
            replicas,
            stable_identities: true,
            rust_log,
            cluster_cidr: crate::demo::machines::CLUSTER_CIDR,
            extra_args: &[],
            controller_args,
            extra_env: &robot_env,
            wrapper: None,
            dir,
        },
    )
    .await
}

/// Where a scenario's controllers log.
fn log_dir(logs: &Path, scenario: &str) -> PathBuf {
    logs.join(scenario.replace([' ', '/', '%'], "-"))
}

fn print_row(r: &Row) {
    println!(
        "chaos: {:<22} {} — {} ({}){}{}",
        r.scenario,
        if r.failed() { "FAILED" } else { "ok" },
        r.converged_s.map_or("never converged".into(), |s| format!(
            "converged in {s:.1} s"
        )),
        r.notes,
        if r.unreached.is_empty() {
            String::new()
        } else {
            format!("; the fault never reached {}", r.unreached.join(", "))
        },
        if r.not_ours_writes == 0 {
            String::new()
        } else {
            format!(
                "; {} writes to the load balancer made outside the cluster",
                r.not_ours_writes
            )
        }
    );
}

fn print_report(report: &Report) {
    println!("\nchaos results (controllers as separate processes under their chart RBAC)");
    let width = |f: fn(&Row) -> &str| report.rows.iter().map(|r| f(r).chars().count()).max();
    let s = width(|r| &r.scenario).unwrap_or(0).max(8);
    let w = width(|r| &r.faults).unwrap_or(0).max(15);
    println!(
        "  {:<s$} {:<w$} {:>10} {:>7} {:>5} {:>5} {:>5} {:>6} {:>7}",
        "scenario",
        "faults injected",
        "converged",
        "calls",
        "429s",
        "dups",
        "leaks",
        "wrong",
        "crashes"
    );
    for r in &report.rows {
        println!(
            "  {:<s$} {:<w$} {:>10} {:>7} {:>5} {:>5} {:>5} {:>6} {:>7}",
            r.scenario,
            r.faults,
            r.converged_s
                .map_or("never".into(), |s| format!("{s:.1} s")),
            r.calls,
            r.rate_limited,
            r.duplicates,
            r.leaks,
            r.wrong_deletions,
            r.crashes
        );
    }
    if !report.failover.is_empty() {
        println!("\nfailover (2 replicas each; gap = old leader gone → standby holds the Lease)");
        println!("  {:<22} {:>12} {:>12}", "controller", "kill -9", "SIGTERM");
        for g in &report.failover {
            println!(
                "  {:<22} {:>10.2} s {:>10.2} s",
                g.controller, g.kill_s, g.sigterm_s
            );
        }
    }
    if let Some(s) = &report.soak {
        soak::print(s);
    }
    println!(
        "\nsecrets: {} files, {} Events, {} Services and Nodes, {} /metrics and /plan pages \
         scanned for any {} characters of a secret: found {} times, {} panics",
        report.secrets.files,
        report.secrets.events,
        report.secrets.objects,
        report.secrets.metrics,
        secrets::RUN,
        report.secrets.token_hits.len(),
        report.secrets.panics.len()
    );
}
