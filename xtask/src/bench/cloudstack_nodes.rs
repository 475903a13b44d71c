//! `cargo xtask bench cloudstack-nodes`: node initialization at scale on CloudStack, ours beside
//! upstream's CCM (apache/cloudstack-kubernetes-provider v1.2.0, `testenv::cloudstack_ccm()`).
//!
//! cloud-sim's CloudStack API with N VMs, one manager at a time against a fresh control plane
//! (ours: the node-controller binary; upstream: `--controllers=cloud-node`), the same
//! cloud-config file, N Nodes created tainted at once. Reports the time until every Node is
//! initialized, the CloudStack calls the manager made (cloud-sim's counters) and its peak RSS
//! (VmHWM).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::ListParams;
use serde::Serialize;
use testenv::KubeletNode;

use super::plot::Curve;
use super::{BenchArgs, Controller, Env, Memory, create_nodes, mib};
use crate::fleet::{Launch, Output};

const UNINITIALIZED: &str = "node.cloudprovider.kubernetes.io/uninitialized";

/// Which CCM initializes the Nodes.
#[derive(Debug, Clone, Copy)]
pub enum Manager<'a> {
    Ours(&'a Path),
    Upstream(&'a Path),
}

impl Manager<'_> {
    pub fn name(&self) -> &'static str {
        match self {
            Manager::Ours(_) => "ours",
            Manager::Upstream(_) => "upstream",
        }
    }

    /// The call each makes once at start (then it is idle until Nodes come).
    fn start_call(&self) -> &'static str {
        match self {
            Manager::Ours(_) => "listZones",
            Manager::Upstream(_) => "listManagementServersMetrics",
        }
    }
}

/// What `bench cloudstack-nodes` measured for one manager.
#[derive(Debug, Serialize)]
pub struct Figures {
    pub nodes: usize,
    /// `ours` or `upstream`.
    pub manager: &'static str,
    pub created_s: f64,
    /// Until no Node is tainted any more; `None` when that never happened.
    pub all_initialized_s: Option<f64>,
    pub still_tainted: usize,
    /// CloudStack calls from the Nodes' creation on.
    pub calls: u64,
    /// Command → calls.
    pub by_command: BTreeMap<String, u64>,
    pub memory_before: Memory,
    pub memory_after: Memory,
    pub convergence: Curve,
}

pub async fn run(args: &BenchArgs, manager: Manager<'_>) -> anyhow::Result<Figures> {
    let n = args.nodes.unwrap_or(if args.quick { 100 } else { 1000 });
    let env = Env::start(None).await?;
    let cs = env.sim.cloudstack_client();
    let ids = cs
        .create_vms(n, "cs-node", &cloud_sim::CsVmSpec::default())
        .await
        .map_err(|e| anyhow::anyhow!("creating VMs: {e}"))?;
    anyhow::ensure!(ids.len() == n, "asked for {n} VMs, got {}", ids.len());
    let dir = std::env::temp_dir().join(format!("bench-cloudstack-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let cloud_config = dir.join("cloud-config");
    std::fs::write(
        &cloud_config,
        format!(
            "[Global]\napi-url = {}\napi-key = {}\nsecret-key = {}\n",
            env.sim.cloudstack_endpoint(),
            env.sim.cloudstack_api_key(),
            env.sim.cloudstack_secret_key()
        ),
    )?;
    let mut ctl = spawn(args, &env, manager, (&cloud_config, "cloud-node"), &dir)?;
    // Started once it has made its start-up call and listed the (empty) Nodes.
    let start_call = manager.start_call();
    let up = ctl
        .wait_until(Duration::from_secs(60), async || {
            Ok(env.sim.cloudstack_calls(start_call) > 0)
        })
        .await?;
    anyhow::ensure!(up, "{}: no {start_call} within 60 s", manager.name());
    env.sim.reset_counters();
    let memory_before = ctl.memory();

    let start = Instant::now();
    let nodes = (1..=n).map(|i| {
        KubeletNode {
            uninitialized: true,
            ..KubeletNode::new(format!("cs-node-{i}"))
        }
        .registration()
    });
    create_nodes(&env.client, nodes.collect()).await;
    let created = start.elapsed();

    let api: Api<Node> = Api::all(env.client.clone());
    let mut still_tainted = n;
    let mut convergence = Curve::new(
        format!("cloudstack-nodes: {n} initialized ({})", manager.name()),
        n,
    );
    let done = ctl
        .wait_until(Duration::from_secs(900), async || {
            let list = api.list(&ListParams::default()).await?;
            still_tainted = n.saturating_sub(list.items.len())
                + list.items.iter().filter(|n| tainted(n)).count();
            convergence.record(start.elapsed().as_secs_f64(), n - still_tainted);
            Ok(still_tainted == 0)
        })
        .await?;
    let elapsed = start.elapsed();
    let by_command = env
        .sim
        .request_counts()
        .into_iter()
        .filter_map(|(k, v)| Some((k.strip_prefix("CLOUDSTACK ")?.to_owned(), v)))
        .collect();
    let figures = Figures {
        nodes: n,
        manager: manager.name(),
        created_s: created.as_secs_f64(),
        all_initialized_s: done.then_some(elapsed.as_secs_f64()),
        still_tainted,
        calls: env.sim.cloudstack_total_calls(),
        by_command,
        memory_before,
        memory_after: ctl.memory(),
        convergence,
    };
    ctl.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(figures)
}

/// Starts `manager` with the cloud-config at `cloud_config`; upstream's CCM runs only
/// `upstream_controllers` (its `--controllers`).
pub(super) fn spawn(
    args: &BenchArgs,
    env: &Env,
    manager: Manager<'_>,
    (cloud_config, upstream_controllers): (&Path, &str),
    dir: &Path,
) -> anyhow::Result<Controller> {
    let config = format!("--cloud-config={}", cloud_config.display());
    let controllers = format!("--controllers={upstream_controllers}");
    let launch = match manager {
        Manager::Ours(binary) => Launch::new(binary, env.plane.kubeconfig())
            .wrapper(args.wrapper.as_deref())
            .args([
                "--leader-elect=false",
                "--admin-address=127.0.0.1:0",
                "--cloud-provider=external-cloudstack",
                &config,
            ])
            .args(&args.extra)
            .env("RUST_LOG", "warn")
            .output(Output::Stderr),
        Manager::Upstream(binary) => Launch::new(binary, env.plane.kubeconfig())
            .args([
                "--cloud-provider=external-cloudstack",
                &config,
                &controllers,
                "--leader-elect=false",
                "--secure-port=0",
                "--authentication-skip-lookup",
                "--configure-cloud-routes=false",
            ])
            .output(Output::Log(dir.join("upstream.log"))),
    };
    let launch = args.env.iter().fold(launch, |l, (k, v)| l.env(k, v));
    let process = launch.spawn().context("starting the CCM")?;
    Ok(Controller { process })
}

fn tainted(node: &Node) -> bool {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|t| t.iter().any(|t| t.key == UNINITIALIZED))
}

impl Figures {
    /// This scenario's line in the summary table.
    pub fn row(&self) -> super::Row {
        let calls = super::Calls {
            total: self.calls,
            by_endpoint: self.by_command.clone(),
            ..Default::default()
        };
        super::Row::new(
            "cloudstack-nodes",
            self.manager,
            format!("{} Nodes", self.nodes),
            self.all_initialized_s,
            &calls,
            self.memory_after.peak_rss_kib,
        )
    }
}

/// Prints ours beside upstream's, with upstream's figure divided by ours (> 1: ours is ahead).
pub fn print(ours: &Figures, upstream: &Figures) {
    let n = ours.nodes;
    println!(
        "CloudStack node initialization ({n} Nodes, {n} VMs): ours beside upstream's CCM v1.2.0"
    );
    let initialized = |f: &Figures| match f.all_initialized_s {
        Some(s) => format!("{s:.2} s"),
        None => format!("never ({} tainted)", f.still_tainted),
    };
    let ratio = |o: Option<f64>, u: Option<f64>| match (o, u) {
        (Some(o), Some(u)) if o > 0.0 => format!("{:.1}×", u / o),
        _ => "-".to_string(),
    };
    let peak = |f: &Figures| f.memory_after.peak_rss_kib as f64;
    let rows = [
        row("", "ours", "upstream", "upstream / ours"),
        row(
            "all initialized after",
            initialized(ours),
            initialized(upstream),
            ratio(ours.all_initialized_s, upstream.all_initialized_s),
        ),
        row(
            "CloudStack calls",
            ours.calls,
            upstream.calls,
            ratio(Some(ours.calls as f64), Some(upstream.calls as f64)),
        ),
        row(
            "peak RSS (VmHWM)",
            format!("{:.1} MiB", mib(ours.memory_after.peak_rss_kib)),
            format!("{:.1} MiB", mib(upstream.memory_after.peak_rss_kib)),
            ratio(Some(peak(ours)), Some(peak(upstream))),
        ),
        row(
            "RSS before the burst",
            format!("{:.1} MiB", mib(ours.memory_before.peak_rss_kib)),
            format!("{:.1} MiB", mib(upstream.memory_before.peak_rss_kib)),
            "",
        ),
        row(
            "threads after",
            ours.memory_after.threads,
            upstream.memory_after.threads,
            "",
        ),
    ];
    for line in rows {
        println!("{}", line.trim_end());
    }
    for f in [ours, upstream] {
        println!("  CloudStack calls by command ({})", f.manager);
        for (k, v) in &f.by_command {
            println!("      {k}: {v}");
        }
    }
}

fn row(
    figure: impl std::fmt::Display,
    ours: impl std::fmt::Display,
    upstream: impl std::fmt::Display,
    ratio: impl std::fmt::Display,
) -> String {
    format!("  {figure:<26}{ours:<16}{upstream:<20}{ratio}")
}
