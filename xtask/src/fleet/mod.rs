//! Controllers as child processes: the one launcher of the demo, the chaos suite and the benchmarks.
//!
//! [`Launch`] / [`Process`] start a binary with its flags and environment and stop it; [`Fleet`]
//! runs the four controllers as the chart configures them (each as its own ServiceAccount with only
//! its chart RBAC, through impersonation; its Lease in [`NAMESPACE`]; its own admin port; the
//! `HCLOUD_*` environment), `replicas` of each, and kills, stops and restarts them.

mod process;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;

pub use process::{Launch, Memory, Output, Process};

use crate::demo::machines::NETWORK;

/// Namespace of the ServiceAccounts and Leases (the chart's release namespace).
pub const NAMESPACE: &str = "kube-system";

/// A controller and the flags the chart passes to it besides the common ones.
#[derive(Debug, Clone, Copy)]
pub struct Spec {
    pub name: &'static str,
    pub args: &'static [&'static str],
}

/// The four controllers, in the order their binaries are built and started.
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
        // `--cluster-cidr` comes from [`Options::cluster_cidr`].
        args: &[],
    },
];

/// Binds `spec`'s chart RBAC to its ServiceAccount and writes a kubeconfig acting as that
/// ServiceAccount into `dir`; returns its path.
pub async fn authorize(
    spec: Spec,
    plane: &testenv::ControlPlane,
    admin: &kube::Client,
    dir: &Path,
) -> anyhow::Result<PathBuf> {
    let rbac = testenv::workspace_root()
        .join("charts/cloud-controllers/files/rbac")
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

/// How [`Fleet::start`] runs the controllers.
#[derive(Debug, Clone, Copy)]
pub struct Options<'a> {
    pub replicas: usize,
    /// Passes each replica `--leader-elect-identity=<controller>-<i>` (its pod name in a
    /// cluster), so a restarted process is the same "pod"; otherwise the binary picks its own.
    pub stable_identities: bool,
    pub rust_log: &'a str,
    /// route-controller's `--cluster-cidr`: where the world's pod CIDRs come from.
    pub cluster_cidr: &'a str,
    /// Flags and environment variables every replica gets besides the chart's (experiments).
    pub extra_args: &'a [String],
    /// Flags for one controller only: `(controller name, flag)`.
    pub controller_args: &'a [(&'a str, String)],
    pub extra_env: &'a [(String, String)],
    /// Runs every replica under this, e.g. `heaptrack` (memory figures are then the wrapper's).
    pub wrapper: Option<&'a str>,
    /// Kubeconfigs and logs go here.
    pub dir: &'a Path,
}

/// One replica of one controller.
#[derive(Debug)]
pub struct Replica {
    pub spec: Spec,
    /// `<controller>-<i>` with stable identities, else the controller's name; names its log.
    pub identity: String,
    pub admin: std::net::SocketAddr,
    pub log: PathBuf,
    launch: Launch,
    process: Option<Process>,
}

impl Replica {
    /// Its `/metrics` text (empty while it is down).
    pub async fn metrics(&self) -> String {
        http_get(self.admin, "/metrics").await.unwrap_or_default()
    }

    /// Its `/plan` text: shadow mode's planned writes, or why there are none (empty while it is
    /// down).
    pub async fn plan(&self) -> String {
        http_get(self.admin, "/plan").await.unwrap_or_default()
    }

    /// Cloud API calls it made, from its `/metrics`.
    pub async fn cloud_calls(&self) -> u64 {
        cloud_calls(&self.metrics().await)
    }

    /// Peak resident memory (VmHWM) in MiB; 0 while it is down.
    pub fn peak_rss_mib(&self) -> f64 {
        self.process
            .as_ref()
            .map_or(0.0, |p| p.memory().peak_rss_kib as f64 / 1024.0)
    }

    /// Its memory now (zeros while it is down).
    pub fn memory(&self) -> Memory {
        self.process
            .as_ref()
            .map_or(Memory::default(), Process::memory)
    }

    /// CPU seconds it has used (0 while it is down).
    pub fn cpu_seconds(&self) -> f64 {
        self.process.as_ref().map_or(0.0, Process::cpu_seconds)
    }

    /// The last `lines` of its log.
    pub fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }
}

/// Every replica of the four controllers.
pub struct Fleet {
    pub replicas: Vec<Replica>,
    admin: kube::Client,
    /// Exits the caller did not cause (a crash, a lost Lease), as `<identity> (<status>)`.
    exits: Vec<String>,
    /// The file every replica reads its token from (`HCLOUD_TOKEN_FILE`, as the chart mounts it).
    token_file: PathBuf,
    /// Every token the fleet was given, the current one last.
    tokens: Vec<String>,
}

impl Fleet {
    /// Binds each controller's chart RBAC, then starts `options.replicas` of each (`binaries` in
    /// the order of [`ALL`]) against `sim`.
    pub async fn start(
        plane: &testenv::ControlPlane,
        admin: &kube::Client,
        sim: &cloud_sim::Sim,
        binaries: &[PathBuf],
        options: Options<'_>,
    ) -> anyhow::Result<Fleet> {
        std::fs::create_dir_all(options.dir)?;
        let token_file = options.dir.join("hcloud-token");
        write_atomically(&token_file, &sim.token())?;
        let mut fleet = Fleet {
            replicas: Vec::new(),
            admin: admin.clone(),
            exits: Vec::new(),
            token_file: token_file.clone(),
            tokens: vec![sim.token()],
        };
        for (spec, binary) in ALL.iter().zip(binaries) {
            let kubeconfig = authorize(*spec, plane, admin, options.dir).await?;
            for i in 0..options.replicas {
                let identity = if options.stable_identities {
                    format!("{}-{i}", spec.name)
                } else {
                    spec.name.to_string()
                };
                let admin_addr = free_port()?;
                let log = options.dir.join(format!("{identity}.log"));
                let mut launch = Launch::new(binary, &kubeconfig)
                    .wrapper(options.wrapper)
                    .arg(format!("--admin-address={admin_addr}"))
                    .arg(format!("--leader-elect-resource-namespace={NAMESPACE}"))
                    .args(spec.args.iter().copied());
                if spec.name == "route-controller" {
                    launch = launch.arg(format!("--cluster-cidr={}", options.cluster_cidr));
                }
                if options.stable_identities {
                    launch = launch.arg(format!("--leader-elect-identity={identity}"));
                }
                let launch = launch
                    .env("HCLOUD_TOKEN_FILE", &token_file.display().to_string())
                    .env("HCLOUD_ENDPOINT", &sim.endpoint())
                    .env("HCLOUD_NETWORK", NETWORK)
                    .env("HCLOUD_LOAD_BALANCERS_LOCATION", "fsn1")
                    .env("HCLOUD_LOAD_BALANCERS_TYPE", "lb11")
                    .env("RUST_LOG", options.rust_log)
                    .args(options.extra_args)
                    .args(
                        options
                            .controller_args
                            .iter()
                            .filter(|(name, _)| *name == spec.name)
                            .map(|(_, flag)| flag.as_str()),
                    )
                    .output(Output::Log(log.clone()));
                let launch = options
                    .extra_env
                    .iter()
                    .fold(launch, |l, (k, v)| l.env(k, v));
                fleet.replicas.push(Replica {
                    spec: *spec,
                    identity,
                    admin: admin_addr,
                    log,
                    launch,
                    process: None,
                });
            }
        }
        for i in 0..fleet.replicas.len() {
            fleet.restart(i)?;
        }
        Ok(fleet)
    }

    /// Rotates the project's token: `sim` accepts `token` alone from now on, and the fleet's token
    /// file holds it (replaced at once, as the kubelet swaps a Secret volume's files).
    pub fn rotate_token(&mut self, sim: &cloud_sim::Sim, token: &str) -> anyhow::Result<()> {
        write_atomically(&self.token_file, token)?;
        sim.set_token(Some(token));
        self.tokens.push(token.to_owned());
        Ok(())
    }

    /// Every token the fleet was given, the current one last.
    pub fn tokens(&self) -> &[String] {
        &self.tokens
    }

    /// Starts replica `i`, e.g. again after [`Fleet::kill`] or [`Fleet::terminate`].
    pub fn restart(&mut self, i: usize) -> anyhow::Result<()> {
        let r = &mut self.replicas[i];
        r.process = Some(r.launch.spawn()?);
        Ok(())
    }

    /// `kill -9`, then starts it again at once (a container restart in the same pod).
    pub async fn crash_and_restart(&mut self, i: usize) -> anyhow::Result<()> {
        self.kill(i).await;
        self.restart(i)
    }

    /// `kill -9`; returns when the process is gone.
    pub async fn kill(&mut self, i: usize) {
        if let Some(p) = self.replicas[i].process.take() {
            p.kill().await;
        }
    }

    /// `SIGTERM`; waits up to `grace` for the exit (then kills), and returns the exit code.
    pub async fn terminate(&mut self, i: usize, grace: Duration) -> anyhow::Result<Option<i32>> {
        let Some(p) = self.replicas[i].process.take() else {
            return Ok(None);
        };
        match p.terminate(grace).await? {
            Some(status) => Ok(status.code()),
            None => anyhow::bail!(
                "{} did not exit within {grace:?} of SIGTERM",
                self.replicas[i].identity
            ),
        }
    }

    /// Records replicas that exited on their own since the last call; those exits.
    pub fn reap(&mut self) -> Vec<String> {
        let mut exited = Vec::new();
        for r in &mut self.replicas {
            if let Some(p) = r.process.as_mut()
                && let Ok(Some(status)) = p.try_wait()
            {
                r.process = None;
                exited.push(format!("{} ({status})", r.identity));
            }
        }
        self.exits.extend(exited.iter().cloned());
        exited
    }

    /// Every exit the caller did not cause so far (reaping first).
    pub fn unexpected_exits(&mut self) -> Vec<String> {
        self.reap();
        self.exits.clone()
    }

    /// The replica holding `spec`'s Lease, by its `holderIdentity` (`<identity>_<random>`: like
    /// upstream, each process start gets a fresh holder id, so a restarted "pod" waits for its
    /// predecessor's Lease to expire like anyone else).
    pub async fn leader(&self, spec: &str) -> anyhow::Result<Option<usize>> {
        let leases: Api<Lease> = Api::namespaced(self.admin.clone(), NAMESPACE);
        let lease = leases
            .get_opt(&format!("cloud-controller-manager-{spec}"))
            .await?;
        let holder = lease
            .and_then(|l| l.spec)
            .and_then(|s| s.holder_identity)
            .unwrap_or_default();
        Ok(self.replicas.iter().position(|r| {
            holder
                .strip_prefix(r.identity.as_str())
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('_'))
        }))
    }

    /// Polls until a replica other than `old` holds `spec`'s Lease; how long that took.
    pub async fn wait_new_leader(
        &self,
        spec: &str,
        old: usize,
        timeout: Duration,
    ) -> anyhow::Result<(usize, Duration)> {
        let started = Instant::now();
        loop {
            if let Some(i) = self.leader(spec).await?
                && i != old
            {
                return Ok((i, started.elapsed()));
            }
            anyhow::ensure!(
                started.elapsed() < timeout,
                "no replica of {spec} took the Lease within {timeout:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Every log file.
    pub fn logs(&self) -> Vec<PathBuf> {
        self.replicas.iter().map(|r| r.log.clone()).collect()
    }

    /// The last lines of every log, for a failure report.
    pub fn log_tails(&self, lines: usize) -> String {
        self.replicas
            .iter()
            .map(|r| format!("--- {} ---\n{}", r.identity, r.log_tail(lines)))
            .collect::<Vec<_>>()
            .join("\n")
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

/// Cloud API calls answered with HTTP `status`, from a `/metrics` text.
pub fn cloud_calls_with_status(metrics: &str, status: u16) -> u64 {
    let label = format!("status=\"{status}\"");
    metrics
        .lines()
        .filter(|l| {
            l.starts_with("cloud_controllers_cloud_api_requests_total{") && l.contains(&label)
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

/// A gauge or counter's value in a `/metrics` text (summed over label sets).
pub fn metric(text: &str, name: &str) -> f64 {
    text.lines()
        .filter(|l| {
            l.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with(' ') || rest.starts_with('{'))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// `ROBOT_*` for the sim's Robot webservice (dedicated servers on).
pub fn robot_env(sim: &cloud_sim::Sim) -> Vec<(String, String)> {
    [
        ("ROBOT_ENABLED", "true".to_string()),
        ("ROBOT_USER", sim.robot_user()),
        ("ROBOT_PASSWORD", sim.robot_password()),
        ("ROBOT_ENDPOINT", sim.robot_endpoint()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
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

/// A loopback address nothing listens on now, for a controller's admin server.
pub fn free_port() -> anyhow::Result<std::net::SocketAddr> {
    let l = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(l.local_addr()?)
}

/// Writes `text` to a temporary file beside `path`, then renames it over `path`: a reader sees the
/// old content or the new, never a half-written file.
fn write_atomically(path: &Path, text: &str) -> anyhow::Result<()> {
    let tmp = path.with_extension("new");
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, path)?;
    Ok(())
}
