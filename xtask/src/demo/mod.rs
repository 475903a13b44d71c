//! `cargo xtask demo`: the whole system on this machine. A real kube-apiserver + etcd (testenv) and
//! cloud-sim, six servers in a private network with their Nodes registered as kubelets would, the
//! four controllers as separate processes configured as the chart configures them, and a story
//! that shows each of them at work. Every step waits for what it shows, with a deadline, so the
//! demo is also an end-to-end check (`cargo xtask test` runs it). `--cloud cloudstack` plays the
//! node and load-balancer story against cloud-sim's CloudStack API instead ([`cloudstack`]).

mod cloudstack;
pub(crate) mod machines;
mod progress;
pub(crate) mod story;

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;

use crate::build::build_controllers;
use crate::fleet::{self, Fleet};
use progress::Progress;
use story::Story;

/// Options of `cargo xtask demo`.
#[derive(Debug, clap::Args)]
pub struct DemoArgs {
    /// Leave everything running at the end and print how to reach it; Ctrl-C stops it.
    #[arg(long)]
    pub keep: bool,
    /// Cargo profile of the controller binaries (`dev` is what `cargo xtask test` builds;
    /// `release` is what the images ship).
    #[arg(long, default_value = "dev")]
    pub profile: String,
    /// The cloud: `hcloud` (the whole system on Hetzner Cloud) or `cloudstack` (the node and
    /// load-balancer story with `--cloud-provider=external-cloudstack`).
    #[arg(long, value_enum, default_value_t = DemoCloud::Hcloud)]
    pub cloud: DemoCloud,
}

/// The cloud `cargo xtask demo` plays against (cloud-sim simulates both).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DemoCloud {
    Hcloud,
    Cloudstack,
}

/// Runs the demo; Ctrl-C stops every process it started, at any point.
pub fn run(args: &DemoArgs) -> anyhow::Result<()> {
    let names: Vec<&str> = match args.cloud {
        DemoCloud::Hcloud => fleet::ALL.iter().map(|c| c.name).collect(),
        DemoCloud::Cloudstack => cloudstack::CONTROLLERS.to_vec(),
    };
    let binaries = build_controllers(&names, &args.profile, false)?;
    testenv::install_crypto_provider();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let played = async {
            match args.cloud {
                DemoCloud::Hcloud => demo(args, &binaries).await,
                DemoCloud::Cloudstack => {
                    cloudstack::demo(args.keep, &args.profile, &binaries).await
                }
            }
        };
        tokio::select! {
            r = played => r,
            _ = tokio::signal::ctrl_c() => {
                println!("\ninterrupted: stopping every process the demo started");
                Ok(())
            }
        }
    })
}

async fn demo(args: &DemoArgs, binaries: &[PathBuf]) -> anyhow::Result<()> {
    let progress = Progress::new();
    let (plane, sim) = progress
        .step(
            "local control plane (kube-apiserver + etcd) and cloud-sim up",
            async {
                let plane = testenv::ControlPlane::start()
                    .await
                    .context("starting the control plane")?;
                // Load balancers carry traffic; health checks run 15 times faster than configured
                // (HCCM's 15 s interval is 1 s).
                let sim = cloud_sim::Sim::start_with(cloud_sim::SimConfig {
                    action_duration: Duration::from_millis(200),
                    data_plane: Some(cloud_sim::DataPlaneConfig {
                        health_check_speedup: 15.0,
                        ..Default::default()
                    }),
                    ..Default::default()
                })
                .await;
                Ok((plane, sim))
            },
        )
        .await?;
    let admin = plane.client().await?;
    let (network, servers) = progress
        .step(
            "6 servers in fsn1 and nbg1, network 10.0.0.0/8, Nodes registered by \"kubelets\"",
            async {
                let network = machines::network(&sim).await?;
                let mut servers = Vec::new();
                for i in 1..=6 {
                    let s = machines::server(&sim, network, i).await?;
                    machines::register_node(&admin, &s).await?;
                    servers.push(s);
                }
                Ok((network, servers))
            },
        )
        .await?;
    let logs = plane.dir().join("controllers");
    // Dedicated servers on: the story adds one among the nodes.
    let robot_env = fleet::robot_env(&sim);
    let fleet = Fleet::start(
        &plane,
        &admin,
        &sim,
        binaries,
        fleet::Options {
            replicas: 1,
            stable_identities: false,
            rust_log: "info",
            cluster_cidr: crate::demo::machines::CLUSTER_CIDR,
            extra_args: &[],
            controller_args: &[],
            extra_env: &robot_env,
            wrapper: None,
            dir: &logs,
        },
    )
    .await?;
    println!(
        "  {} started as ServiceAccounts in {} (chart RBAC only), logs in {}",
        fleet
            .replicas
            .iter()
            .map(|r| r.spec.name)
            .collect::<Vec<_>>()
            .join(", "),
        fleet::NAMESPACE,
        logs.display()
    );

    let mut story = Story {
        admin: admin.clone(),
        sim: &sim,
        network,
        servers,
        progress: &progress,
        stand_ins: Vec::new(),
    };
    let outcome = match story.play().await {
        Ok(o) => o,
        Err(e) => {
            for r in &fleet.replicas {
                eprintln!("--- last lines of {} ---\n{}", r.spec.name, r.log_tail(15));
            }
            return Err(e);
        }
    };
    summary(&story, &outcome, &fleet, &args.profile).await?;

    if args.keep {
        println!(
            "\nStill running. In another shell:\n  export KUBECONFIG={}\n  kubectl get nodes -o wide\n  curl -H 'Authorization: Bearer {}' {}/servers\nCtrl-C stops everything.",
            plane.kubeconfig().display(),
            sim.token(),
            sim.endpoint().trim_end_matches('/')
        );
        std::future::pending::<()>().await;
    }
    drop(fleet);
    plane.stop();
    Ok(())
}

async fn summary(
    story: &Story<'_>,
    outcome: &story::Outcome,
    fleet: &Fleet,
    profile: &str,
) -> anyhow::Result<()> {
    println!("\nNodes");
    println!(
        "  {:<8} {:<12} {:<6} {:<10} {:<30} taints",
        "name", "providerID", "type", "zone", "addresses"
    );
    for n in story.all_nodes().await? {
        let addresses: Vec<String> = n
            .status
            .as_ref()
            .and_then(|s| s.addresses.as_ref())
            .map(|a| a.iter().map(|a| a.address.clone()).collect())
            .unwrap_or_default();
        let taints = story::taints(&n);
        println!(
            "  {:<8} {:<12} {:<6} {:<10} {:<30} {}",
            kube::ResourceExt::name_any(&n),
            story::provider_id(&n).unwrap_or_default(),
            story::label(&n, "node.kubernetes.io/instance-type"),
            story::label(&n, "topology.kubernetes.io/zone"),
            addresses.join(","),
            if taints.is_empty() {
                "-".to_string()
            } else {
                taints.join(",")
            }
        );
    }
    println!(
        "\nService demo/web ingress (until it was deleted): {}",
        outcome.ingress.join(", ")
    );
    println!("\nTraffic through demo/web's load balancer (cloud-sim's data plane)");
    for line in &outcome.traffic {
        println!("  {line}");
    }
    println!("\nTwo Services on one shared load balancer");
    for line in &outcome.shared {
        println!("  {line}");
    }
    println!("\nServices and their condition cloud-controllers.github.io/LoadBalancerReady");
    let w = outcome
        .conditions
        .iter()
        .map(|[_, ips, ..]| ips.len())
        .max()
        .unwrap_or(0)
        .max(11);
    println!(
        "  {:<10} {:<w$} {:<7} {:<26} message",
        "name", "external IP", "status", "reason"
    );
    for [name, ips, status, reason, message] in &outcome.conditions {
        println!("  {name:<10} {ips:<w$} {status:<7} {reason:<26} {message}");
    }
    println!("\nRoutes in network {}", machines::NETWORK);
    for (dest, gw) in story.routes().await? {
        println!("  {dest:<16} via {gw}");
    }
    println!("\nControllers (profile {profile})");
    println!("  {:<22} {:>11} {:>14}", "", "cloud calls", "peak RSS");
    for r in &fleet.replicas {
        println!(
            "  {:<22} {:>11} {:>10.1} MiB",
            r.spec.name,
            r.cloud_calls().await,
            r.peak_rss_mib()
        );
    }
    Ok(())
}
