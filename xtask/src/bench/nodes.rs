//! `cargo xtask bench nodes`: node initialization at scale.
//!
//! cloud-sim with N servers, the node-controller binary, N Nodes created tainted at once. Reports
//! the time until every Node is initialized, the cloud API calls the controller made and its
//! peak RSS (VmHWM).

use std::fmt::Display;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::ListParams;
use serde::Serialize;
use testenv::KubeletNode;

use super::plot::Curve;
use super::{BenchArgs, Calls, Env, Manager, Memory, create_nodes, mib};

const UNINITIALIZED: &str = "node.cloudprovider.kubernetes.io/uninitialized";

/// What `bench nodes` measured.
#[derive(Debug, Serialize)]
pub struct Figures {
    pub nodes: usize,
    /// `ours` or `HCCM`.
    pub manager: &'static str,
    pub profile: String,
    pub created_s: f64,
    /// Until no Node is tainted any more; `None` when that never happened.
    pub all_initialized_s: Option<f64>,
    pub still_tainted: usize,
    pub calls: Calls,
    pub memory_before: Memory,
    pub memory_after: Memory,
    /// Initialized Nodes over time (for `--plot`).
    pub convergence: Curve,
}

pub async fn run(args: &BenchArgs, manager: Manager<'_>) -> anyhow::Result<Figures> {
    let n = args.nodes.unwrap_or(if args.quick { 100 } else { 1000 });
    let env = Env::start(None).await?;
    let servers = env.servers(n, "bench-node").await?;
    let mut ctl = env
        .launch(args, manager, "cloud-node-controller", &[], &[])
        .await?;
    let memory_before = ctl.memory();

    let start = Instant::now();
    let nodes = servers
        .into_iter()
        .map(|(_, name)| KubeletNode::new(name).registration());
    create_nodes(&env.client, nodes.collect()).await;
    let created = start.elapsed();

    let api: Api<Node> = Api::all(env.client.clone());
    let mut still_tainted = n;
    let mut convergence = Curve::new(format!("nodes: {n} initialized"), n);
    let done = ctl
        .wait_until(Duration::from_secs(300), async || {
            let list = api.list(&ListParams::default()).await?;
            still_tainted = n.saturating_sub(list.items.len())
                + list.items.iter().filter(|n| tainted(n)).count();
            convergence.record(start.elapsed().as_secs_f64(), n - still_tainted);
            Ok(still_tainted == 0)
        })
        .await?;
    let elapsed = start.elapsed();
    let figures = Figures {
        nodes: n,
        manager: manager.name(),
        profile: args.profile.clone(),
        created_s: created.as_secs_f64(),
        all_initialized_s: done.then_some(elapsed.as_secs_f64()),
        still_tainted,
        calls: Calls::of(&env.sim),
        memory_before,
        memory_after: ctl.memory(),
        convergence,
    };
    ctl.stop().await;
    Ok(figures)
}

impl Figures {
    /// This scenario's line in the summary table.
    pub fn row(&self) -> super::Row {
        super::Row::new(
            "nodes",
            self.manager,
            format!("{} Nodes", self.nodes),
            self.all_initialized_s,
            &self.calls,
            self.memory_after.peak_rss_kib,
        )
    }
}

fn tainted(node: &Node) -> bool {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|t| t.iter().any(|t| t.key == UNINITIALIZED))
}

/// HCCM (built from source, defaults, `--controllers=cloud-node`) on this scenario at 1000 Nodes,
/// measured earlier; printed when `--hccm` is not given.
mod hccm {
    pub const NODES: usize = 1000;
    pub const ALL_INITIALIZED_S: u64 = 150;
    pub const CALLS: u64 = 301;
    pub const PEAK_RSS_MIB: u64 = 81;
}

/// Prints our figures beside HCCM's: measured in this run (`--hccm`), else recorded earlier.
pub fn print(f: &Figures, hccm: Option<&Figures>) {
    let n = f.nodes;
    let (before, after) = (&f.memory_before, &f.memory_after);
    println!(
        "node-controller bench ({n} nodes, {n} servers, profile {})",
        f.profile
    );
    let initialized = |f: &Figures| match f.all_initialized_s {
        Some(s) => format!("{s:.2} s"),
        None => format!("never ({} tainted)", f.still_tainted),
    };
    let peak = |f: &Figures| format!("{:.1} MiB", mib(f.memory_after.peak_rss_kib));
    let (heading, h_initialized, h_calls, h_peak) = match hccm {
        Some(h) => (
            format!("HCCM, this run ({} Nodes)", h.nodes),
            initialized(h),
            h.calls.total.to_string(),
            peak(h),
        ),
        None => (
            format!("HCCM, recorded ({} Nodes)", hccm::NODES),
            format!("{} s", hccm::ALL_INITIALIZED_S),
            hccm::CALLS.to_string(),
            format!("{} MiB", hccm::PEAK_RSS_MIB),
        ),
    };
    #[rustfmt::skip]
    let rows = [
        row("",                          "ours",                          &heading,      "target"),
        row("nodes created in",          format!("{:.2} s", f.created_s), "",            ""),
        row("all initialized after",     initialized(f),                  &h_initialized, "<= 10 s"),
        row("cloud API calls",           f.calls.total,                   &h_calls,      "<= 30"),
        row("threads after the burst",   after.threads,                   "",            ""),
        row("RSS after: anonymous",      format!("{:.1} MiB", mib(after.rss_anon_kib)), "", ""),
        row("RSS after: file-backed (code)", format!("{:.1} MiB", mib(after.rss_file_kib)), "", ""),
        row("RSS before the burst",      format!("{:.1} MiB", mib(before.peak_rss_kib)), "", ""),
        row("peak RSS (VmHWM)",          peak(f),                         &h_peak,       "<= 25 MiB"),
    ];
    for line in rows {
        println!("{}", line.trim_end());
    }
    for f in std::iter::once(f).chain(hccm) {
        println!("  cloud calls by endpoint ({})", f.manager);
        f.calls.print_endpoints("      ");
    }
}

/// One line of the table: figure, ours, HCCM's, target.
fn row(figure: impl Display, ours: impl Display, hccm: impl Display, target: &str) -> String {
    format!("  {figure:<32}{ours:<14}{hccm:<29}{target}")
}
