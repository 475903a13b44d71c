//! `cargo xtask bench`: node initialization at scale. Prints figures, asserts nothing.
//!
//! A real kube-apiserver + etcd (testenv), cloud-sim with N servers, the node-controller binary
//! (profile `release` by default) as a child process, N Nodes created tainted at once.
//! Reports the time until every Node is initialized, the cloud API calls the controller made (sim
//! counters) and the controller's peak RSS (VmHWM).

use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, NodeSpec, Taint};
use kube::api::{ListParams, PostParams};
use kube::{Api, ResourceExt};

const UNINITIALIZED: &str = "node.cloudprovider.kubernetes.io/uninitialized";

/// Options of `cargo xtask bench`.
#[derive(Debug, clap::Args)]
pub struct BenchArgs {
    /// Number of servers and Nodes.
    #[arg(long, default_value_t = 1000)]
    pub nodes: usize,
    /// Cargo profile the node-controller is built with (`release` is what the images ship;
    /// `dev-image` builds faster).
    #[arg(long, default_value = "release")]
    pub profile: String,
    /// Extra node-controller flag (repeatable), e.g. `--arg=--concurrent-node-syncs=32`.
    #[arg(long = "arg", allow_hyphen_values = true)]
    pub extra: Vec<String>,
    /// Run the controller under a wrapper, e.g. `--wrapper=heaptrack` (the RSS figure is then the
    /// wrapper's, not the controller's).
    #[arg(long)]
    pub wrapper: Option<String>,
}

fn build_controller(profile: &str) -> anyhow::Result<std::path::PathBuf> {
    eprintln!("bench: building node-controller (profile {profile}) …");
    let status =
        std::process::Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
            .args([
                "build",
                "--quiet",
                "-p",
                "node-controller",
                "--profile",
                profile,
            ])
            .status()
            .context("running cargo build")?;
    anyhow::ensure!(status.success(), "building node-controller failed");
    let dir = if profile == "dev" { "debug" } else { profile };
    let target = std::env::var("CARGO_TARGET_DIR").unwrap_or_else(|_| "target".into());
    Ok(std::path::Path::new(&target)
        .join(dir)
        .join("node-controller"))
}

fn vm_hwm_kib(pid: u32) -> Option<u64> {
    proc_status(pid, "VmHWM:")
}

fn proc_status(pid: u32, key: &str) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines()
        .find(|l| l.starts_with(key))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// Runs the benchmark.
pub fn run(args: BenchArgs) -> anyhow::Result<()> {
    let binary = build_controller(&args.profile)?;
    testenv::install_crypto_provider();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(bench(args, binary))
}

async fn bench(args: BenchArgs, binary: std::path::PathBuf) -> anyhow::Result<()> {
    let n = args.nodes;
    let plane = testenv::ControlPlane::start()
        .await
        .context("starting the control plane")?;
    let client = plane.client().await?;
    let sim = cloud_sim::Sim::start_with(cloud_sim::SimConfig {
        rate_limit_per_hour: 1_000_000,
        ..Default::default()
    })
    .await;
    let world = sim.world();
    let prefix = "bench-node";
    world
        .create_servers(n, prefix, "cx22", "fsn1")
        .await
        .map_err(|e| anyhow::anyhow!("creating servers: {e}"))?;
    let names: Vec<String> = world
        .list_servers()
        .await
        .map_err(|e| anyhow::anyhow!("listing servers: {e}"))?
        .iter()
        .filter_map(|s| s["name"].as_str().map(String::from))
        .collect();
    anyhow::ensure!(
        names.len() == n,
        "expected {n} servers, sim has {}",
        names.len()
    );

    let mut cmd = match &args.wrapper {
        Some(w) => {
            let mut c = tokio::process::Command::new(w);
            c.arg(&binary);
            c
        }
        None => tokio::process::Command::new(&binary),
    };
    let mut child = cmd
        .args([
            "--kubeconfig",
            &plane.kubeconfig().display().to_string(),
            "--leader-elect=false",
            "--admin-address=127.0.0.1:0",
        ])
        .args(&args.extra)
        .env("HCLOUD_TOKEN", sim.token())
        .env("HCLOUD_ENDPOINT", sim.endpoint())
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("starting {}", binary.display()))?;
    let pid = child.id().context("child pid")?;
    // Let the controller list the (empty) Node set and go idle before the burst.
    tokio::time::sleep(Duration::from_secs(2)).await;
    sim.reset_counters();
    let idle_kib = vm_hwm_kib(pid).unwrap_or(0);

    let nodes: Api<Node> = Api::all(client.clone());
    let start = Instant::now();
    futures::stream::iter(names.iter().cloned())
        .for_each_concurrent(64, |name| {
            let nodes = nodes.clone();
            async move {
                let mut node = Node::default();
                node.metadata.name = Some(name);
                node.spec = Some(NodeSpec {
                    taints: Some(vec![Taint {
                        key: UNINITIALIZED.into(),
                        value: Some("true".into()),
                        effect: "NoSchedule".into(),
                        ..Default::default()
                    }]),
                    ..Default::default()
                });
                if let Err(e) = nodes.create(&PostParams::default(), &node).await {
                    eprintln!("bench: creating node {}: {e}", node.name_any());
                }
            }
        })
        .await;
    let created = start.elapsed();

    let deadline = Instant::now() + Duration::from_secs(300);
    let mut remaining;
    loop {
        let list = nodes.list(&ListParams::default()).await?;
        remaining = list
            .items
            .iter()
            .filter(|n| {
                n.spec
                    .as_ref()
                    .and_then(|s| s.taints.as_ref())
                    .is_some_and(|t| t.iter().any(|t| t.key == UNINITIALIZED))
            })
            .count();
        if (remaining == 0 && list.items.len() >= n) || Instant::now() > deadline {
            break;
        }
        if let Ok(Some(status)) = child.try_wait() {
            anyhow::bail!("node-controller exited early: {status}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let elapsed = start.elapsed();
    let calls = sim.total_requests();
    let hwm = vm_hwm_kib(pid).unwrap_or(0);
    let threads = proc_status(pid, "Threads:").unwrap_or(0);
    let anon = proc_status(pid, "RssAnon:").unwrap_or(0);
    let file = proc_status(pid, "RssFile:").unwrap_or(0);
    let _ = child.start_kill();
    let _ = child.wait().await;
    plane.stop();

    println!(
        "node-controller bench ({n} nodes, {n} servers, profile {})",
        args.profile
    );
    println!("  nodes created in          {:.2} s", created.as_secs_f64());
    if remaining == 0 {
        println!(
            "  all initialized after     {:.2} s   (target <= 10 s)",
            elapsed.as_secs_f64()
        );
    } else {
        println!(
            "  NOT all initialized: {remaining} still tainted after {:.1} s",
            elapsed.as_secs_f64()
        );
    }
    println!("  cloud API calls           {calls}   (target <= 30)");
    for (k, v) in sim.request_counts() {
        println!("      {k}: {v}");
    }
    println!("  threads after the burst   {threads}");
    println!(
        "  RSS after the burst       {:.1} MiB anonymous + {:.1} MiB file-backed (code)",
        anon as f64 / 1024.0,
        file as f64 / 1024.0
    );
    println!(
        "  RSS before the burst      {:.1} MiB",
        idle_kib as f64 / 1024.0
    );
    println!(
        "  peak RSS (VmHWM)          {:.1} MiB   (target <= 25 MiB)",
        hwm as f64 / 1024.0
    );
    Ok(())
}
