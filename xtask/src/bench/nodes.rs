//! `cargo xtask bench nodes`: node initialization at scale.
//!
//! cloud-sim with N servers, the node-controller binary, N Nodes created tainted at once. Reports
//! the time until every Node is initialized, the cloud API calls the controller made and its
//! peak RSS (VmHWM).

use std::path::Path;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::ListParams;
use serde::Serialize;
use testenv::KubeletNode;

use super::plot::Curve;
use super::{BenchArgs, Calls, Env, Memory, create_nodes, mib};

const UNINITIALIZED: &str = "node.cloudprovider.kubernetes.io/uninitialized";

/// What `bench nodes` measured.
#[derive(Debug, Serialize)]
pub struct Figures {
    pub nodes: usize,
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

pub async fn run(args: &BenchArgs, binary: &Path) -> anyhow::Result<Figures> {
    let n = args.nodes.unwrap_or(if args.quick { 100 } else { 1000 });
    let env = Env::start(None).await?;
    let servers = env.servers(n, "bench-node").await?;
    let mut ctl = env.controller(args, binary, &[]).await?;
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
    print(&figures, elapsed);
    Ok(figures)
}

impl Figures {
    /// This scenario's line in the summary table.
    pub fn row(&self) -> super::Row {
        super::Row::new(
            "nodes",
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

fn print(f: &Figures, elapsed: Duration) {
    let n = f.nodes;
    let (before, after) = (&f.memory_before, &f.memory_after);
    println!(
        "node-controller bench ({n} nodes, {n} servers, profile {})",
        f.profile
    );
    println!("  nodes created in          {:.2} s", f.created_s);
    match f.all_initialized_s {
        Some(s) => println!("  all initialized after     {s:.2} s   (target <= 10 s)"),
        None => println!(
            "  NOT all initialized: {} still tainted after {:.1} s",
            f.still_tainted,
            elapsed.as_secs_f64()
        ),
    }
    println!(
        "  cloud API calls           {}   (target <= 30)",
        f.calls.total
    );
    f.calls.print_endpoints("      ");
    println!("  threads after the burst   {}", after.threads);
    println!(
        "  RSS after the burst       {:.1} MiB anonymous + {:.1} MiB file-backed (code)",
        mib(after.rss_anon_kib),
        mib(after.rss_file_kib)
    );
    println!(
        "  RSS before the burst      {:.1} MiB",
        mib(before.peak_rss_kib)
    );
    println!(
        "  peak RSS (VmHWM)          {:.1} MiB   (target <= 25 MiB)",
        mib(after.peak_rss_kib)
    );
}
