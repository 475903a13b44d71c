//! The four controllers as separate processes, configured as the chart configures them: own
//! ServiceAccount (its chart RBAC only, through impersonation), own Lease in kube-system, own
//! admin port, `HCLOUD_*` environment.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use anyhow::Context as _;

use super::world::NETWORK;

/// Namespace of the ServiceAccounts and Leases (the chart's release namespace).
pub const NAMESPACE: &str = "kube-system";

/// A controller the demo runs.
#[derive(Debug, Clone, Copy)]
pub struct Spec {
    pub name: &'static str,
    /// Flags the chart passes to this controller besides the common ones.
    pub args: &'static [&'static str],
}

pub const ALL: [Spec; 4] = [
    Spec {
        name: "node-controller",
        args: &[],
    },
    Spec {
        name: "lifecycle-controller",
        args: &["--node-monitor-period=1s"],
    },
    Spec {
        name: "service-controller",
        args: &[],
    },
    Spec {
        name: "route-controller",
        // The pod CIDRs the demo's Nodes get (see world::register_node).
        args: &["--cluster-cidr=10.244.0.0/16"],
    },
];

/// A running controller process (killed when dropped).
#[derive(Debug)]
pub struct Running {
    pub name: &'static str,
    /// Held so the process is killed when the demo ends (`kill_on_drop`).
    _process: tokio::process::Child,
    pub pid: u32,
    pub admin: std::net::SocketAddr,
    pub log: PathBuf,
}

impl Running {
    /// Peak resident memory (VmHWM) in MiB.
    pub fn peak_rss_mib(&self) -> f64 {
        let status =
            std::fs::read_to_string(format!("/proc/{}/status", self.pid)).unwrap_or_default();
        status
            .lines()
            .find(|l| l.starts_with("VmHWM:"))
            .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
            .unwrap_or(0.0)
            / 1024.0
    }

    /// Cloud API calls the controller made, from its `/metrics`.
    pub async fn cloud_calls(&self) -> u64 {
        let text = http_get(self.admin, "/metrics").await.unwrap_or_default();
        cloud_calls(&text)
    }

    /// The last lines of its log, for a failure report.
    pub fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }
}

/// The sum of `cloud_api_requests_total` in a `/metrics` text.
pub fn cloud_calls(metrics: &str) -> u64 {
    metrics
        .lines()
        .filter(|l| l.starts_with("cloud_controllers_cloud_api_requests_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

/// Minimal HTTP/1.0 GET on loopback.
pub async fn http_get(addr: std::net::SocketAddr, path: &str) -> std::io::Result<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await?;
    s.write_all(format!("GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").as_bytes())
        .await?;
    let mut out = String::new();
    s.read_to_string(&mut out).await?;
    Ok(out)
}

pub fn free_port() -> anyhow::Result<std::net::SocketAddr> {
    let l = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(l.local_addr()?)
}

/// Binds `spec`'s chart RBAC to its ServiceAccount and writes a kubeconfig acting as that
/// ServiceAccount into `dir`; returns its path.
pub async fn authorize(
    spec: Spec,
    plane: &testenv::ControlPlane,
    admin: &kube::Client,
    dir: &Path,
) -> anyhow::Result<PathBuf> {
    let rbac = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../charts/cloud-controllers/files/rbac")
        .join(format!("{}.yaml", spec.name));
    testenv::bind_chart_rbac(admin, &rbac, NAMESPACE, spec.name)
        .await
        .with_context(|| format!("binding the RBAC of {}", spec.name))?;
    let kubeconfig = dir.join(format!("{}.kubeconfig", spec.name));
    plane
        .connection()
        .write_service_account_kubeconfig(&kubeconfig, NAMESPACE, spec.name)?;
    Ok(kubeconfig)
}

/// How one controller process is started.
#[derive(Debug, Clone)]
pub struct Launch<'a> {
    pub binary: &'a Path,
    pub kubeconfig: &'a Path,
    pub admin: std::net::SocketAddr,
    /// Stdout and stderr are appended here, so a restarted process adds to its predecessor's log.
    pub log: &'a Path,
    /// `--leader-elect-identity` (the pod name in a cluster); `None`: the binary's default.
    pub identity: Option<&'a str>,
    pub rust_log: &'a str,
}

/// Starts `spec` as the chart does: `HCLOUD_*` environment, Lease in [`NAMESPACE`], its own
/// admin port. The process is killed when the handle is dropped.
pub fn spawn(
    spec: Spec,
    sim: &cloud_sim::Sim,
    launch: &Launch<'_>,
) -> anyhow::Result<tokio::process::Child> {
    let out = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(launch.log)?;
    let mut cmd = tokio::process::Command::new(launch.binary);
    cmd.arg("--kubeconfig")
        .arg(launch.kubeconfig)
        .args([
            &format!("--admin-address={}", launch.admin),
            &format!("--leader-elect-resource-namespace={NAMESPACE}"),
        ])
        .args(spec.args);
    if let Some(identity) = launch.identity {
        cmd.arg(format!("--leader-elect-identity={identity}"));
    }
    cmd.env("HCLOUD_TOKEN", sim.token())
        .env("HCLOUD_ENDPOINT", sim.endpoint())
        .env("HCLOUD_NETWORK", NETWORK)
        .env("HCLOUD_LOAD_BALANCERS_LOCATION", "fsn1")
        .env("HCLOUD_LOAD_BALANCERS_TYPE", "lb11")
        .env("RUST_LOG", launch.rust_log)
        .stdout(Stdio::from(out.try_clone()?))
        .stderr(Stdio::from(out))
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("starting {}", launch.binary.display()))
}

/// [`authorize`]s and [`spawn`]s `spec`; logs go to `<dir>/<name>.log`.
pub async fn start(
    spec: Spec,
    binary: &Path,
    plane: &testenv::ControlPlane,
    admin: &kube::Client,
    sim: &cloud_sim::Sim,
    dir: &Path,
) -> anyhow::Result<Running> {
    let kubeconfig = authorize(spec, plane, admin, dir).await?;
    let log = dir.join(format!("{}.log", spec.name));
    let admin_addr = free_port()?;
    let child = spawn(
        spec,
        sim,
        &Launch {
            binary,
            kubeconfig: &kubeconfig,
            admin: admin_addr,
            log: &log,
            identity: None,
            rust_log: "info",
        },
    )?;
    let pid = child.id().context("child pid")?;
    Ok(Running {
        name: spec.name,
        _process: child,
        pid,
        admin: admin_addr,
        log,
    })
}
