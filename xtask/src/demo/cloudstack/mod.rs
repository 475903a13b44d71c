//! `cargo xtask demo --cloud cloudstack`: the node and load-balancer story on CloudStack. A real
//! kube-apiserver + etcd (testenv) and cloud-sim's CloudStack API with its data plane on, VMs in
//! two zones (one with a static-NAT public address) with their Nodes registered as kubelets
//! would, and node-controller, lifecycle-controller and service-controller as separate processes
//! started as the chart's `cloud: cloudstack` starts them: `--cloud-provider=external-cloudstack
//! --cloud-config=<file>` (upstream's `[Global]` cloud-config), each as its own ServiceAccount
//! with its chart RBAC and its own Lease. CloudStack offers no routes, so no route-controller.
//! The load-balancer steps come last and are short (`load_balancers`): CI runs this demo.

mod load_balancers;
mod story;

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context as _;

use super::progress::Progress;
use super::story::{label, provider_id, taints};
use crate::fleet::{self, Launch, Output, Process, Spec};
use story::Story;

/// The controllers this story runs (by their names in [`fleet::ALL`]).
pub const CONTROLLERS: [&str; 3] = [
    "node-controller",
    "lifecycle-controller",
    "service-controller",
];

/// One controller process of the demo.
struct Controller {
    spec: Spec,
    admin: std::net::SocketAddr,
    log: PathBuf,
    process: Process,
}

impl Controller {
    async fn cloud_calls(&self) -> u64 {
        fleet::cloud_calls(
            &fleet::http_get(self.admin, "/metrics")
                .await
                .unwrap_or_default(),
        )
    }

    fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }
}

/// Upstream's cloud-config (`[Global]`, `api-url`, `api-key`, `secret-key`) for `sim`'s primary
/// account: the file the chart mounts from the Secret `cloudstack-secret` at
/// `/config/cloud-config`.
fn write_cloud_config(sim: &cloud_sim::Sim, path: &Path) -> anyhow::Result<()> {
    let text = format!(
        "[Global]\napi-url = {}\napi-key = {}\nsecret-key = {}\n",
        sim.cloudstack_endpoint(),
        sim.cloudstack_api_key(),
        sim.cloudstack_secret_key()
    );
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

/// Binds each controller's chart RBAC and starts it with the chart's CloudStack arguments.
async fn start_controllers(
    plane: &testenv::ControlPlane,
    admin: &kube::Client,
    binaries: &[(Spec, PathBuf)],
    cloud_config: &Path,
    dir: &Path,
) -> anyhow::Result<Vec<Controller>> {
    let mut out = Vec::new();
    for (spec, binary) in binaries {
        let kubeconfig = fleet::authorize(*spec, plane, admin, dir).await?;
        let admin_addr = fleet::free_port()?;
        let log = dir.join(format!("{}.log", spec.name));
        let process = Launch::new(binary, &kubeconfig)
            .arg(format!("--admin-address={admin_addr}"))
            .arg(format!(
                "--leader-elect-resource-namespace={}",
                fleet::NAMESPACE
            ))
            .args(spec.args.iter().copied())
            .arg("--cloud-provider=external-cloudstack")
            .arg(format!("--cloud-config={}", cloud_config.display()))
            .env("RUST_LOG", "info")
            .output(Output::Log(log.clone()))
            .spawn()?;
        out.push(Controller {
            spec: *spec,
            admin: admin_addr,
            log,
            process,
        });
    }
    Ok(out)
}

/// Plays the CloudStack story with `binaries` (node- and lifecycle-controller, in the order of
/// [`CONTROLLERS`]).
pub async fn demo(keep: bool, profile: &str, binaries: &[PathBuf]) -> anyhow::Result<()> {
    let progress = Progress::new();
    let (plane, sim) = progress
        .step(
            "local control plane (kube-apiserver + etcd) and cloud-sim's CloudStack API (data plane on) up",
            async {
                let plane = testenv::ControlPlane::start()
                    .await
                    .context("starting the control plane")?;
                // Stopping, expunging and async jobs take 200 ms; load-balancer rules carry
                // traffic.
                let sim = cloud_sim::Sim::start_with(cloud_sim::SimConfig {
                    action_duration: Duration::from_millis(200),
                    data_plane: Some(cloud_sim::DataPlaneConfig::default()),
                    ..Default::default()
                })
                .await;
                Ok((plane, sim))
            },
        )
        .await?;
    let admin = plane.client().await?;
    let vms = progress
        .step(
            "4 VMs in zone-1 and zone-2 (cs-1 with a static-NAT public IP), Nodes registered by \"kubelets\"",
            async {
                let mut vms = Vec::new();
                for i in 1..=4 {
                    let vm = story::create_vm(&sim, i).await?;
                    story::register_node(&admin, &vm).await?;
                    vms.push(vm);
                }
                Ok(vms)
            },
        )
        .await?;
    let dir = plane.dir().join("controllers");
    std::fs::create_dir_all(&dir)?;
    let cloud_config = dir.join("cloud-config");
    write_cloud_config(&sim, &cloud_config)?;
    let specs: Vec<(Spec, PathBuf)> = CONTROLLERS
        .iter()
        .zip(binaries)
        .map(|(name, binary)| {
            let spec = fleet::ALL
                .into_iter()
                .find(|s| s.name == *name)
                .expect("a controller of fleet::ALL");
            (spec, binary.clone())
        })
        .collect();
    let controllers = start_controllers(&plane, &admin, &specs, &cloud_config, &dir).await?;
    println!(
        "  {} started as ServiceAccounts in {} (chart RBAC only) with --cloud-provider=external-cloudstack --cloud-config={}, logs in {}",
        CONTROLLERS.join(", "),
        fleet::NAMESPACE,
        cloud_config.display(),
        dir.display()
    );

    let mut story = Story {
        admin: admin.clone(),
        sim: &sim,
        vms,
        progress: &progress,
    };
    let played = async {
        story.play().await?;
        let rows = progress
            .step(
                "LoadBalancer Services demo/web (TCP 80) and demo/dns (UDP 53) get an ingress IP and a rule each, their zone's VMs as members",
                story.services_get_rules(),
            )
            .await?;
        let (answers, stand_ins) = progress
            .step(
                "a request through demo/web's rule and a datagram through demo/dns's rule are answered by nodes",
                story.traffic_through_rules(&rows),
            )
            .await?;
        for a in answers {
            println!("  {a}");
        }
        anyhow::Ok(stand_ins)
    }
    .await;
    let _stand_ins = match played {
        Ok(s) => s,
        Err(e) => {
            for c in &controllers {
                eprintln!("--- last lines of {} ---\n{}", c.spec.name, c.log_tail(15));
            }
            return Err(e);
        }
    };
    summary(&story, &controllers, profile).await?;

    if keep {
        println!(
            "\nStill running. In another shell:\n  export KUBECONFIG={}\n  kubectl get nodes -o wide\n  cat {}   # the cloud-config\nCtrl-C stops everything.",
            plane.kubeconfig().display(),
            cloud_config.display()
        );
        std::future::pending::<()>().await;
    }
    drop(controllers);
    plane.stop();
    Ok(())
}

async fn summary(
    story: &Story<'_>,
    controllers: &[Controller],
    profile: &str,
) -> anyhow::Result<()> {
    println!("\nNodes");
    println!(
        "  {:<6} {:<58} {:<16} {:<8} {:<28} taints",
        "name", "providerID", "type", "zone", "addresses"
    );
    for n in story.all_nodes().await? {
        let addresses: Vec<String> = n
            .status
            .as_ref()
            .and_then(|s| s.addresses.as_ref())
            .map(|a| {
                a.iter()
                    .filter(|a| a.type_ != "Hostname")
                    .map(|a| a.address.clone())
                    .collect()
            })
            .unwrap_or_default();
        let taints = taints(&n);
        println!(
            "  {:<6} {:<58} {:<16} {:<8} {:<28} {}",
            kube::ResourceExt::name_any(&n),
            provider_id(&n).unwrap_or_default(),
            label(&n, "node.kubernetes.io/instance-type"),
            label(&n, "topology.kubernetes.io/zone"),
            addresses.join(","),
            if taints.is_empty() {
                "-".to_string()
            } else {
                taints.join(",")
            }
        );
    }
    println!("\nVMs (cloud-sim's CloudStack API)");
    println!(
        "  {:<6} {:<36} {:<8} {:<10} {:<12} public IP",
        "name", "id", "zone", "state", "IP"
    );
    for v in story.vm_rows().await? {
        println!(
            "  {:<6} {:<36} {:<8} {:<10} {:<12} {}",
            v[0], v[1], v[2], v[3], v[4], v[5]
        );
    }
    println!("\nLoad-balancer rules (cloud-sim's CloudStack API; members by VM name)");
    println!(
        "  {:<9} {:<40} {:<5} {:<20}   {:<7} {:<7} members",
        "Service", "rule", "proto", "public", "private", "zone"
    );
    for line in load_balancers::summary_lines(&story.rule_rows().await?) {
        println!("{line}");
    }
    let mut by_command: Vec<(String, u64)> = story
        .sim
        .request_counts()
        .into_iter()
        .filter_map(|(k, v)| Some((k.strip_prefix("CLOUDSTACK ")?.to_owned(), v)))
        .collect();
    by_command.sort();
    println!(
        "\nCloudStack API calls by command (the demo's own reads of rules and members included): {}",
        by_command
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    println!("\nControllers (profile {profile})");
    println!("  {:<22} {:>11} {:>14}", "", "cloud calls", "peak RSS");
    for c in controllers {
        println!(
            "  {:<22} {:>11} {:>10.1} MiB",
            c.spec.name,
            c.cloud_calls().await,
            c.process.memory().peak_rss_kib as f64 / 1024.0
        );
    }
    Ok(())
}

/// A VM's row in the summary: name, id, zone, state, IP, public IP.
type VmRow = [String; 6];
