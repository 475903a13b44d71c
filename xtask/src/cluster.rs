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
        #[arg(long, conflicts_with = "with_chart")]
        no_cloud_sim: bool,
        /// Then build the five images from the working tree (`cargo xtask images`), push them to
        /// the cluster's registry, create the `hcloud` Secret with cloud-sim's token and `helm
        /// install` the chart into kube-system, pointed at cloud-sim (see docs/real-cluster.md).
        #[arg(long)]
        with_chart: bool,
        /// With --with-chart: `networking.enabled=true` (route-controller, hostNetwork pods), a
        /// network `cluster` in cloud-sim with the node's server attached (10.0.0.2), and the
        /// Secret's network key naming it.
        #[arg(long, requires = "with_chart")]
        networking: bool,
        /// With --with-chart: cargo profile of the images (dev-image or release).
        #[arg(long, default_value = "dev-image", requires = "with_chart")]
        profile: String,
        /// With --with-chart: more `helm install --set` values (repeatable).
        #[arg(long = "set", value_name = "KEY=VALUE", requires = "with_chart")]
        set: Vec<String>,
        /// kubelet's `--node-ip`: this address, added to `lo` while the cluster runs, instead of
        /// the machine's; the node's server in cloud-sim does not have it, as Hetzner does not
        /// know a WireGuard or Tailscale address (see docs/running.md).
        #[arg(long, value_name = "IP")]
        kubelet_node_ip: Option<std::net::IpAddr>,
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

/// helm and skaffold (testenv's builds) next to kubectl in `bin/`, for `helm install` and
/// `skaffold dev` by hand after `eval "$(cargo xtask cluster env)"`.
fn link_tools(layout: &Layout) -> anyhow::Result<()> {
    let tools = testenv::ensure_tools()?;
    for tool in [&tools.helm, &tools.skaffold] {
        let link = layout
            .bin()
            .join(tool.file_name().context("a tool path names a file")?);
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(tool, &link)?;
    }
    Ok(())
}

pub fn run(cmd: Command) -> anyhow::Result<ExitCode> {
    let layout = Layout::default();
    match cmd {
        Command::Up {
            no_cloud_sim,
            with_chart,
            networking,
            profile,
            set,
            kubelet_node_ip,
        } => {
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
                kubelet_node_ip: kubelet_node_ip.map(|ip| ip.to_string()),
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
            link_tools(&layout)?;
            if with_chart {
                let chart = ChartOptions {
                    networking,
                    profile,
                    set,
                };
                runtime
                    .block_on(install_chart(&cluster, &chart))
                    .context("installing the chart")?;
                eprintln!("cluster and chart up in {:.1?}", started.elapsed());
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

/// What `up --with-chart` installs.
#[derive(Debug)]
struct ChartOptions {
    networking: bool,
    profile: String,
    set: Vec<String>,
}

/// The Helm release `up --with-chart` installs into kube-system.
pub const RELEASE: &str = "cloud-controllers";
/// The tag of the images `up --with-chart` builds and pushes.
pub const IMAGE_TAG: &str = "cluster";
/// The cloud-sim network `up --with-chart --networking` creates, and the node's address in it.
const NETWORK: &str = "cluster";
const NETWORK_IP_RANGE: &str = "10.0.0.0/8";
const NETWORK_SUBNET: &str = "10.0.0.0/24";
const NODE_PRIVATE_IP: &str = "10.0.0.2";

/// The chart's value prefix of each image (`<prefix>.image.*`).
const CHART_IMAGES: [(&str, &str); 4] = [
    ("node-controller", "nodeController"),
    ("lifecycle-controller", "lifecycleController"),
    ("service-controller", "serviceController"),
    ("route-controller", "routeController"),
];

/// Builds and pushes the images, creates the credentials Secret (and, for networking, the network
/// in cloud-sim), and runs `helm install --wait`, printing the command so it can be run by hand.
async fn install_chart(cluster: &cluster::Cluster, chart: &ChartOptions) -> anyhow::Result<()> {
    let sim = cluster
        .cloud_sim
        .as_ref()
        .context("--with-chart needs cloud-sim")?;
    let started = Instant::now();
    let built = crate::images::run(&crate::images::ImagesArgs {
        profile: chart.profile.clone(),
        tag: IMAGE_TAG.into(),
        rebuild_check: false,
        push: Some(cluster::REGISTRY.into()),
    })?;
    eprintln!(
        "cluster: built and pushed the images (profile {}) ({:.1?})",
        chart.profile,
        started.elapsed()
    );

    if chart.networking {
        let world = cloud_sim::SimClient::new(&sim.endpoint, &sim.token);
        let network = world
            .create_network_in_zone(NETWORK, NETWORK_IP_RANGE, NETWORK_SUBNET, "eu-central")
            .await
            .context("creating the network in cloud-sim")?;
        world
            .attach_to_network(sim.server_id, network, Some(NODE_PRIVATE_IP))
            .await
            .context("attaching the node's server to the network")?;
        eprintln!(
            "cluster: network {NETWORK} ({network}, {NETWORK_IP_RANGE}) in cloud-sim, server {} \
             attached as {NODE_PRIVATE_IP}",
            sim.server_id
        );
    }
    let client = cluster.client().await?;
    let mut data = std::collections::BTreeMap::from([("token".to_owned(), sim.token.clone())]);
    if chart.networking {
        data.insert("network".into(), NETWORK.into());
    }
    let secret = k8s_openapi::api::core::v1::Secret {
        metadata: kube::api::ObjectMeta {
            name: Some("hcloud".into()),
            ..Default::default()
        },
        string_data: Some(data),
        ..Default::default()
    };
    kube::Api::<k8s_openapi::api::core::v1::Secret>::namespaced(client, "kube-system")
        .create(&kube::api::PostParams::default(), &secret)
        .await
        .context("creating the Secret kube-system/hcloud")?;
    eprintln!(
        "cluster: Secret kube-system/hcloud with cloud-sim's token{}",
        if chart.networking { " and network" } else { "" }
    );

    let helm = testenv::ensure_tools()?.helm;

    let mut values = Vec::new();
    for (image, prefix) in CHART_IMAGES {
        let pushed = built
            .iter()
            .find_map(|b| b.pushed.as_ref().filter(|p| p.repository.ends_with(image)))
            .with_context(|| format!("{image} was not pushed"))?;
        values.push(format!("{prefix}.image.repository={}", pushed.repository));
        values.push(format!("{prefix}.image.tag={}", pushed.tag));
        values.push(format!("{prefix}.image.digest={}", pushed.digest));
    }
    values.push(format!("hcloud.endpoint={}", sim.endpoint));
    if chart.networking {
        // The network is for routes only: with HCLOUD_NETWORK node-controller would add the
        // private IP as the InternalIP, which kube-apiserver prefers for kubelet and which this
        // machine does not have (logs/exec would break). route-controller always gets it.
        values.push("networking.enabled=true".into());
        values.push("hcloud.network.enabled=false".into());
    }
    values.extend(chart.set.iter().cloned());
    let chart_dir = crate::images::repo().join("charts/cloud-controllers");
    let mut args: Vec<String> = vec![
        "install".into(),
        RELEASE.into(),
        chart_dir.display().to_string(),
        "--namespace".into(),
        "kube-system".into(),
        "--wait".into(),
        "--timeout".into(),
        "5m".into(),
    ];
    for v in &values {
        args.push("--set".into());
        args.push(v.clone());
    }
    eprintln!(
        "cluster: KUBECONFIG={} helm {}",
        cluster.kubeconfig().display(),
        args.join(" ")
    );
    let started = Instant::now();
    let status = std::process::Command::new(&helm)
        .args(&args)
        .env("KUBECONFIG", cluster.kubeconfig())
        .status()
        .context("running helm")?;
    anyhow::ensure!(status.success(), "helm install failed ({status})");
    eprintln!("cluster: helm install --wait ({:.1?})", started.elapsed());
    // helm's --wait counts a Deployment ready at `replicas - maxUnavailable` ready pods, and the
    // chart rolls hostNetwork pods with maxUnavailable 1: with `networking.enabled` (every pod on
    // the host network) helm returns before any of them is Ready. So wait for the pods themselves.
    let kubectl = cluster.layout.bin().join("kubectl");
    let out = std::process::Command::new(&kubectl)
        .args([
            "wait",
            "--namespace",
            "kube-system",
            "--for=condition=Ready",
            "pod",
        ])
        .arg(format!("--selector=app.kubernetes.io/instance={RELEASE}"))
        .arg("--timeout=180s")
        .env("KUBECONFIG", cluster.kubeconfig())
        .output()
        .context("running kubectl wait")?;
    anyhow::ensure!(
        out.status.success(),
        "the controller pods did not become Ready: {}",
        String::from_utf8_lossy(&out.stderr).trim()
    );
    eprintln!(
        "cluster: every controller pod Ready ({:.1?} after helm install started)",
        started.elapsed()
    );
    for what in [
        &["get", "pods", "-A", "-o", "wide"][..],
        &["get", "nodes", "-o", "wide"],
    ] {
        let out = std::process::Command::new(&kubectl)
            .args(what)
            .env("KUBECONFIG", cluster.kubeconfig())
            .output()?;
        eprintln!(
            "$ kubectl {}\n{}",
            what.join(" "),
            String::from_utf8_lossy(&out.stdout)
        );
    }
    Ok(())
}
