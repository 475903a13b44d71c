//! `cargo xtask cluster up|down|env`: a real one-node Kubernetes cluster on this machine (see
//! `testenv::cluster` and docs/real-cluster.md).

use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context as _;
use clap::Subcommand;
use testenv::cluster::{self, Layout};

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Build what is missing, start the cluster (cleaning up an earlier one's leftovers first)
    /// and cloud-sim with a server for the node, and print the `export` lines. Needs root.
    Up {
        /// Without cloud-sim.
        #[arg(long)]
        no_cloud_sim: bool,
    },
    /// Stop every process of the cluster and undo its changes to the host.
    Down,
    /// Print the `export KUBECONFIG=…` (PATH, for kubectl; HCLOUD_ENDPOINT and HCLOUD_TOKEN of
    /// cloud-sim) lines of the running cluster.
    Env,
}

fn export_lines(layout: &Layout, sim: Option<&cluster::CloudSim>) -> String {
    let mut lines = format!(
        "export KUBECONFIG={}\nexport PATH={}:$PATH",
        layout.kubeconfig().display(),
        layout.bin().display()
    );
    if let Some(sim) = sim {
        lines.push_str(&format!(
            "\nexport HCLOUD_ENDPOINT={}\nexport HCLOUD_TOKEN={}",
            sim.endpoint, sim.token
        ));
    }
    lines
}

pub fn run(cmd: Command) -> anyhow::Result<ExitCode> {
    let layout = Layout::default();
    match cmd {
        Command::Up { no_cloud_sim } => {
            let started = Instant::now();
            let cloud_sim = if no_cloud_sim {
                None
            } else {
                let built = Instant::now();
                let path = crate::build::build_controllers(&["cloud-sim"], "dev", true)?.remove(0);
                eprintln!("cluster: built cloud-sim (cargo) ({:.1?})", built.elapsed());
                Some(path)
            };
            let runtime = tokio::runtime::Runtime::new()?;
            let options = cluster::UpOptions {
                quiet: false,
                cloud_sim,
            };
            let cluster = runtime
                .block_on(cluster::up(&options))
                .context("starting the cluster")?;
            eprintln!(
                "\ncluster: node {} ({}) Ready, podCIDR {}, apiserver {}, in {:.1?}:",
                cluster.node,
                cluster.node_ip,
                cluster.pod_cidr,
                cluster.apiserver_url(),
                started.elapsed()
            );
            for step in &cluster.steps {
                eprintln!("  {:>7.1?}  {}", step.took, step.name);
            }
            eprintln!(
                "files and logs in {}; images: {} and {} (registry {})\n\
                 stop it with: cargo xtask cluster down",
                layout.root().display(),
                cluster::PAUSE_IMAGE,
                cluster::HELLO_IMAGE,
                cluster::REGISTRY,
            );
            if let Some(sim) = &cluster.cloud_sim {
                eprintln!(
                    "cloud-sim at {} holds server {} (id {}) with public IPv4 {}",
                    sim.endpoint, cluster.node, sim.server_id, cluster.node_ip
                );
            }
            println!("{}", export_lines(&layout, cluster.cloud_sim.as_ref()));
            Ok(ExitCode::SUCCESS)
        }
        Command::Down => {
            let started = Instant::now();
            let log = cluster::down().context("stopping the cluster")?;
            if log.is_empty() {
                eprintln!("no cluster was running and nothing was left behind");
            } else {
                for line in &log {
                    eprintln!("  {line}");
                }
                eprintln!("cluster down in {:.1?}", started.elapsed());
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Env => match cluster::status() {
            Some(state) if state.running() => {
                println!("{}", export_lines(&layout, state.cloud_sim.as_ref()));
                Ok(ExitCode::SUCCESS)
            }
            _ => {
                eprintln!("no cluster is running; start one with: cargo xtask cluster up");
                Ok(ExitCode::FAILURE)
            }
        },
    }
}
