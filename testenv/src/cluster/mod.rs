//! A real one-node Kubernetes cluster on this machine (`cargo xtask cluster up|down|env`).
//!
//! The node is the machine itself: kubelet (`--cloud-provider=external`, so the Node registers
//! with the `uninitialized` taint), kube-proxy (iptables), containerd with Debian's runc (through
//! an `oom_score_adj` clamp, see [`config::runc_wrapper`]), the CNI bridge, and a local registry
//! (`crane registry serve`) containerd pulls from over plain HTTP. The control plane is etcd,
//! kube-apiserver (Node + RBAC authorization, NodeRestriction, a client certificate for the
//! kubelets), kube-scheduler and kube-controller-manager (node IPAM gives the node its podCIDR; no
//! cloud controllers). Everything is built from source ([`crate::ensure_binaries`],
//! [`crate::binaries::ensure_cluster`]) and runs detached, so the cluster outlives `up`.
//!
//! Files, logs and the record of what `up` changed live in [`state_dir`]
//! (`~/.cache/cloud-controllers/cluster/`). [`down`] stops every process and undoes every change to
//! the host (see [`host`]); it works from a separate invocation and after a `kill -9` of the whole
//! tree, and [`up`] runs it first when it finds leftovers.

mod config;
pub mod host;

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ConfigMap, Node, ServiceAccount};
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use kube::api::{Api, PostParams};
use serde::{Deserialize, Serialize};

use crate::binaries::{self, Binaries, ClusterBinaries};
use crate::error::{Error, Result};
use crate::pki::Pki;
use crate::process::{Lifetime, Process};

/// The podCIDRs kube-controller-manager hands out (one /24 per node).
pub const CLUSTER_CIDR: &str = "10.244.0.0/16";
/// ClusterIPs; the `kubernetes` Service is the first.
pub const SERVICE_CIDR: &str = "10.96.0.0/16";
const KUBERNETES_SERVICE_IP: &str = "10.96.0.1";
/// What kubelet writes into pods' resolv.conf (no DNS server runs yet).
pub const CLUSTER_DNS: &str = "10.96.0.10";
/// The local registry: containerd pulls `localhost:5001/...` over plain HTTP.
pub const REGISTRY: &str = "localhost:5001";
const REGISTRY_PORT: u16 = 5001;
pub const APISERVER_PORT: u16 = 6443;
/// cloud-sim, when `up` starts it: `http://<node IP>:8780/v1`, so pods reach it (see
/// [`start_cloud_sim`]).
pub const CLOUD_SIM_PORT: u16 = 8780;
const ETCD_PORT: u16 = 12379;
const ETCD_PEER_PORT: u16 = 12380;
/// The pod network's bridge and CNI network name.
pub const BRIDGE: &str = "cc-cni0";
pub const CNI_NETWORK: &str = "cloud-controllers";
/// The sandbox (pause) image and a small HTTP server for test pods, pushed by `up`.
pub const PAUSE_IMAGE: &str = "localhost:5001/cloud-controllers/pause:1";
pub const HELLO_IMAGE: &str = "localhost:5001/cloud-controllers/hello:1";

const READY_TIMEOUT: Duration = Duration::from_secs(120);
const STOP_GRACE: Duration = Duration::from_secs(10);
/// Debian packages the node needs: the OCI runtime, iptables + conntrack for kubelet, kube-proxy
/// and the CNI plugins, and nft, with which `down` removes the (nf_tables) tables they created.
const PACKAGES: [(&str, &str); 4] = [
    ("runc", "/usr/sbin/runc"),
    ("iptables", "/usr/sbin/iptables"),
    ("conntrack", "/usr/sbin/conntrack"),
    ("nftables", "/usr/sbin/nft"),
];

/// `~/.cache/cloud-controllers/cluster/`: the cluster's files, logs and state.
pub fn state_dir() -> PathBuf {
    binaries::home_cache().join("cluster")
}

/// Paths inside a cluster's state directory.
#[derive(Debug, Clone)]
pub struct Layout {
    root: PathBuf,
}

impl Layout {
    pub fn new(root: impl Into<PathBuf>) -> Layout {
        Layout { root: root.into() }
    }
    pub fn root(&self) -> &Path {
        &self.root
    }
    fn pki(&self) -> PathBuf {
        self.root.join("pki")
    }
    fn logs(&self) -> PathBuf {
        self.root.join("logs")
    }
    /// Tools for people: kubectl, ctr, crane (see `cluster env`).
    pub fn bin(&self) -> PathBuf {
        self.root.join("bin")
    }
    fn containerd(&self) -> PathBuf {
        self.root.join("containerd")
    }
    fn containerd_socket(&self) -> PathBuf {
        self.containerd().join("containerd.sock")
    }
    fn runc_wrapper(&self) -> PathBuf {
        self.containerd().join("runc-wrap")
    }
    fn cni_bin(&self) -> PathBuf {
        self.root.join("cni/bin")
    }
    fn cni_conf(&self) -> PathBuf {
        self.root.join("cni/conf")
    }
    fn cni_ipam(&self) -> PathBuf {
        self.root.join("cni/ipam")
    }
    fn kubelet(&self) -> PathBuf {
        self.root.join("kubelet")
    }
    /// The admin (`system:masters`) kubeconfig.
    pub fn kubeconfig(&self) -> PathBuf {
        self.root.join("admin.kubeconfig")
    }
    fn state_file(&self) -> PathBuf {
        self.root.join("state.json")
    }
}

impl Default for Layout {
    fn default() -> Self {
        Layout::new(state_dir())
    }
}

/// What `up` recorded: enough for `down` to undo it from another process.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct State {
    pub node: String,
    pub node_ip: String,
    /// Values of [`host::SYSCTLS`] before `up`.
    pub sysctls_before: BTreeMap<String, String>,
    /// [`host::HOST_PATHS`] that did not exist before `up`.
    pub absent_paths: Vec<String>,
    /// The iptables/ip6tables tables (`ip nat`, `ip6 filter`, ...) that existed before `up`.
    #[serde(default)]
    pub tables_before: Vec<String>,
    /// In start order.
    pub processes: Vec<RecordedProcess>,
    #[serde(default)]
    pub cloud_sim: Option<CloudSim>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RecordedProcess {
    pub name: String,
    pub pid: u32,
    /// See [`host::start_ticks`].
    pub start: u64,
}

impl RecordedProcess {
    fn alive(&self) -> bool {
        crate::process::pid_alive(self.pid) && host::start_ticks(self.pid) == Some(self.start)
    }
}

impl State {
    fn read(l: &Layout) -> Option<State> {
        serde_json::from_slice(&std::fs::read(l.state_file()).ok()?).ok()
    }
    fn write(&self, l: &Layout) -> Result<()> {
        let path = l.state_file();
        let json = serde_json::to_vec_pretty(self).expect("state serializes");
        std::fs::write(&path, json).map_err(Error::io(format!("writing {}", path.display())))
    }
    /// Whether every recorded process still runs.
    pub fn running(&self) -> bool {
        !self.processes.is_empty() && self.processes.iter().all(RecordedProcess::alive)
    }
}

/// The state of the cluster in the default state directory, if `up` ran and `down` did not.
pub fn status() -> Option<State> {
    State::read(&Layout::default())
}

/// One timed step of `up`.
#[derive(Debug, Clone)]
pub struct Step {
    pub name: String,
    pub took: Duration,
}

/// A running cluster, as `up` leaves it.
#[derive(Debug, Clone)]
pub struct Cluster {
    pub layout: Layout,
    pub node: String,
    pub node_ip: String,
    pub pod_cidr: String,
    pub steps: Vec<Step>,
    pub binaries: ClusterBinaries,
    pub cloud_sim: Option<CloudSim>,
}

impl Cluster {
    pub fn kubeconfig(&self) -> PathBuf {
        self.layout.kubeconfig()
    }
    pub fn apiserver_url(&self) -> String {
        format!("https://127.0.0.1:{APISERVER_PORT}")
    }
    /// An admin client.
    pub async fn client(&self) -> Result<kube::Client> {
        client(&self.kubeconfig()).await
    }
}

async fn client(kubeconfig: &Path) -> Result<kube::Client> {
    crate::install_crypto_provider();
    let kc = kube::config::Kubeconfig::read_from(kubeconfig)?;
    let config =
        kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
            .await?;
    Ok(kube::Client::try_from(config)?)
}

/// Records and prints how long each step took.
struct Timer {
    steps: Vec<Step>,
    quiet: bool,
}

impl Timer {
    fn time<T>(&mut self, name: &str, f: impl FnOnce() -> Result<T>) -> Result<T> {
        let started = Instant::now();
        let out = f()?;
        self.done(name, started);
        Ok(out)
    }
    fn done(&mut self, name: &str, started: Instant) {
        let took = started.elapsed();
        if !self.quiet {
            eprintln!("cluster: {name} ({took:.1?})");
        }
        self.steps.push(Step {
            name: name.to_owned(),
            took,
        });
    }
}

/// kubelet's refusal of a cgroup v1 host (kubelet >= 1.35 with `failCgroupV1` unset or true).
pub const KUBELET_CGROUP_V1_REFUSAL: &str =
    "kubelet is configured to not run on a host using cgroup v1";

/// What `cluster up` says when kubelet refuses this host's cgroup v1.
pub const CGROUP_V1_CAUSE: &str = "this host runs cgroup v1 (hybrid, /sys/fs/cgroup/unified), and \
    kubelet 1.35 and later refuse cgroup v1 unless their KubeletConfiguration says \
    `failCgroupV1: false`. The cluster's kubelet.yaml sets it; a KubeletConfiguration of your own \
    needs the same line (kubelet and containerd then log deprecation warnings that change nothing), \
    or boot the host with cgroup v2 (systemd.unified_cgroup_hierarchy=1).";

/// The cause behind a component's exit, for exits this machine is known for.
pub fn known_cause(component: &str, log: &str) -> Option<&'static str> {
    match component {
        "kubelet" if log.contains(KUBELET_CGROUP_V1_REFUSAL) => Some(CGROUP_V1_CAUSE),
        _ => None,
    }
}

fn cluster_error(step: &str, message: impl Into<String>) -> Error {
    Error::Cluster {
        step: step.to_owned(),
        message: message.into(),
    }
}

/// Starts the cluster in the default state directory (see the module docs). Needs root. Cleans up
/// the leftovers of an earlier cluster first; fails when one is running (`down` it first).
pub async fn up(options: &UpOptions) -> Result<Cluster> {
    up_in(&Layout::default(), options).await
}

/// What `up` starts besides the cluster itself.
#[derive(Debug, Clone, Default)]
pub struct UpOptions {
    /// No progress lines on stderr.
    pub quiet: bool,
    /// A cloud-sim binary: started next to the cluster, holding a server named like the node
    /// whose public IPv4 is the node's address (see [`CloudSim`]).
    pub cloud_sim: Option<PathBuf>,
}

/// The cloud-sim `up` started: where it answers, its token, and the node's server.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CloudSim {
    /// `HCLOUD_ENDPOINT`.
    pub endpoint: String,
    /// `HCLOUD_TOKEN`.
    pub token: String,
    pub server_id: u64,
}

pub async fn up_in(l: &Layout, options: &UpOptions) -> Result<Cluster> {
    let quiet = options.quiet;
    let mut t = Timer {
        steps: Vec::new(),
        quiet,
    };
    if !is_root() {
        return Err(cluster_error(
            "checking privileges",
            "a real node needs root (mounts, iptables, cgroups, network namespaces)",
        ));
    }
    if State::read(l).is_some_and(|s| s.running()) {
        return Err(cluster_error(
            "checking for a running cluster",
            format!(
                "a cluster is already running (state in {}); `cargo xtask cluster down` first",
                l.root().display()
            ),
        ));
    }
    let started = Instant::now();
    if ensure_packages()? {
        t.done(
            "installed Debian packages (runc, iptables, conntrack, nftables)",
            started,
        );
    }
    let started = Instant::now();
    let report = down_in(l)?;
    if !report.is_empty() {
        if !quiet {
            eprintln!(
                "cluster: cleaned up an earlier cluster's leftovers:\n  {}",
                report.join("\n  ")
            );
        }
        t.done("cleaned up leftovers", started);
    }
    let (cp, nb) = t.time("found or built the binaries", || {
        Ok((binaries::ensure()?, binaries::ensure_cluster()?))
    })?;
    check_ports()?;
    match start(l, t, nb, cp, options).await {
        Ok(cluster) => Ok(cluster),
        Err(e) => {
            // Leave the host clean; the logs stay in the state directory.
            let _ = down_in(l);
            Err(e)
        }
    }
}

/// The fixed ports the cluster listens on, by what listens there.
const PORTS: [(u16, &str); 11] = [
    (CLOUD_SIM_PORT, "cloud-sim"),
    (APISERVER_PORT, "kube-apiserver"),
    (ETCD_PORT, "etcd"),
    (ETCD_PEER_PORT, "etcd (peers)"),
    (REGISTRY_PORT, "the registry"),
    (10248, "kubelet (healthz)"),
    (10249, "kube-proxy (metrics)"),
    (10250, "kubelet"),
    (10256, "kube-proxy (healthz)"),
    (10257, "kube-controller-manager"),
    (10259, "kube-scheduler"),
];

/// Fails early, naming the port, when something else listens on one of [`PORTS`].
fn check_ports() -> Result<()> {
    for (port, what) in PORTS {
        if std::net::TcpListener::bind((Ipv4Addr::UNSPECIFIED, port)).is_err() {
            return Err(cluster_error(
                "checking ports",
                format!(
                    "port {port} (for {what}) is in use; is another cluster running? \
                     (`cargo xtask cluster down`, or `ss -ltnp 'sport = :{port}'`)"
                ),
            ));
        }
    }
    Ok(())
}

async fn start(
    l: &Layout,
    mut t: Timer,
    nb: ClusterBinaries,
    cp: Binaries,
    options: &UpOptions,
) -> Result<Cluster> {
    t.time("prepared the state directory", || prepare_dir(l))?;

    let node = node_name();
    let node_ip = node_ip()?;
    // Before any change to the host: what `down` restores.
    let state = State {
        node: node.clone(),
        node_ip: node_ip.clone(),
        sysctls_before: host::read_sysctls(),
        absent_paths: host::absent_host_paths(),
        tables_before: host::iptables_tables(),
        processes: Vec::new(),
        cloud_sim: None,
    };
    state.write(l)?;
    let mut procs = Procs {
        layout: l.clone(),
        state,
        running: Vec::new(),
    };

    let started = Instant::now();
    let pki = write_pki(l, &node, &node_ip)?;
    link_tools(l, &nb)?;
    t.done("wrote certificates, kubeconfigs and configs", started);

    let started = Instant::now();
    start_control_plane(&mut procs, &cp, &pki, &node_ip).await?;
    let admin = client(&l.kubeconfig()).await?;
    bind_kubelet_client(&admin).await?;
    t.done("started etcd and kube-apiserver", started);

    let started = Instant::now();
    start_registry(&mut procs, &nb)?;
    push_images(l, &nb)?;
    t.done(
        "started the registry and pushed the pause and hello images",
        started,
    );

    let started = Instant::now();
    start_containerd(&mut procs, &nb).await?;
    t.done("started containerd", started);

    let started = Instant::now();
    start_controllers(&mut procs, &nb, &pki)?;
    start_kubelet(&mut procs, &nb, &pki, &node, &node_ip)?;
    let pod_cidr = wait_for_pod_cidr(&mut procs, &admin, &node).await?;
    t.done(
        &format!("kubelet registered node {node}, podCIDR {pod_cidr}"),
        started,
    );

    let started = Instant::now();
    write_file(
        &l.cni_conf().join("10-cloud-controllers.conflist"),
        &config::cni_conflist(l, &pod_cidr),
    )?;
    start_kube_proxy(&mut procs, &nb, &node)?;
    wait_ready(&mut procs, &admin, &node).await?;
    t.done(
        "node Ready (pod network, kube-proxy, default ServiceAccount)",
        started,
    );

    let cloud_sim = match &options.cloud_sim {
        Some(binary) => {
            let started = Instant::now();
            let sim = start_cloud_sim(&mut procs, binary, &node, &node_ip).await?;
            procs.state.cloud_sim = Some(sim.clone());
            procs.state.write(l)?;
            t.done(
                &format!(
                    "started cloud-sim with server {node} ({node_ip}, id {})",
                    sim.server_id
                ),
                started,
            );
            Some(sim)
        }
        None => None,
    };

    Ok(Cluster {
        layout: l.clone(),
        node,
        node_ip,
        pod_cidr,
        steps: t.steps,
        binaries: nb,
        cloud_sim,
    })
}

/// cloud-sim on [`CLOUD_SIM_PORT`] with a fresh token, its world kept in the state directory, and
/// the node's server: named like the node, its public IPv4 the node's address (what kubelet
/// serves on), so node-controller writes addresses that work.
///
/// It listens on the node's IP, not on 127.0.0.1: pods on the pod network reach that address
/// through the bridge (their gateway is the host), hostNetwork pods and the host itself reach it
/// directly, so the chart's controllers run in pods against this cloud-sim outside the cluster.
/// The price: whoever reaches the node's IP reaches cloud-sim (its API wants the token, its
/// `/_sim` control endpoints do not).
async fn start_cloud_sim(
    procs: &mut Procs,
    binary: &Path,
    node: &str,
    node_ip: &str,
) -> Result<CloudSim> {
    let dir = procs.layout.root().join("cloud-sim");
    std::fs::create_dir_all(&dir).map_err(Error::io(format!("creating {}", dir.display())))?;
    // A copy: a rebuild of the original must not change what runs, and `down` finds it by path.
    let copy = procs.layout.bin().join("cloud-sim");
    std::fs::copy(binary, &copy).map_err(Error::io(format!("copying {}", binary.display())))?;
    let token = random_token()?;
    procs.spawn(
        "cloud-sim",
        &copy,
        &[
            format!("--listen={node_ip}:{CLOUD_SIM_PORT}"),
            format!("--state={}", dir.join("world.json").display()),
            format!("--token={token}"),
            // Load balancers carry traffic to the node (listeners on 127.0.0.1, see
            // docs/real-cluster.md), health checks 10 times faster than configured.
            "--data-plane".to_string(),
            "--health-check-speedup=10".to_string(),
        ],
        &[],
    )?;
    procs
        .wait("cloud-sim to answer", || async {
            http_request("GET", node_ip, CLOUD_SIM_PORT, "/_sim/health", None)
                .filter(|(status, _)| *status == 200)
                .map(|_| ())
        })
        .await?;
    let body = serde_json::json!({
        "count": 1, "prefix": node, "name": node, "public_ipv4": node_ip,
        "server_type": "cx22", "location": "fsn1", "image": "debian-12",
    });
    let (status, answer) = http_request(
        "POST",
        node_ip,
        CLOUD_SIM_PORT,
        "/_sim/batch/servers",
        Some(&body),
    )
    .ok_or_else(|| cluster_error("creating the node's server", "no answer"))?;
    let server_id = serde_json::from_str::<serde_json::Value>(&answer)
        .ok()
        .and_then(|v| v["servers"][0].as_u64())
        .filter(|_| status == 201)
        .ok_or_else(|| {
            cluster_error(
                "creating the node's server in cloud-sim",
                format!("{status}: {answer}"),
            )
        })?;
    Ok(CloudSim {
        endpoint: format!("http://{node_ip}:{CLOUD_SIM_PORT}/v1"),
        token,
        server_id,
    })
}

/// 64 hex characters from the kernel's random source (cloud-sim wants 64 characters).
fn random_token() -> Result<String> {
    use std::io::Read as _;
    let mut bytes = [0u8; 32];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(Error::io("reading /dev/urandom"))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// A plain HTTP/1.0 request to `ip`:`port`; (status, body).
fn http_request(
    method: &str,
    ip: &str,
    port: u16,
    path: &str,
    body: Option<&serde_json::Value>,
) -> Option<(u16, String)> {
    use std::io::{Read as _, Write as _};
    let addr = SocketAddr::from((ip.parse::<Ipv4Addr>().ok()?, port));
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_millis(500)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    write!(
        s,
        "{method} {path} HTTP/1.0\r\nHost: {ip}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .ok()?;
    let mut answer = String::new();
    s.read_to_string(&mut answer).ok()?;
    let status = answer.split_whitespace().nth(1)?.parse().ok()?;
    let body = answer.split_once("\r\n\r\n").map(|(_, b)| b.to_owned())?;
    Some((status, body))
}

/// The processes `up` started, recorded in the state file as they start.
struct Procs {
    layout: Layout,
    state: State,
    running: Vec<Process>,
}

impl Procs {
    fn spawn(
        &mut self,
        name: &'static str,
        program: &Path,
        args: &[String],
        env: &[(&str, String)],
    ) -> Result<()> {
        let log = self.layout.logs().join(format!("{name}.log"));
        let process = Process::spawn_with_env(name, program, args, env, log, Lifetime::Detached)?;
        let start = host::start_ticks(process.pid).unwrap_or_default();
        self.state.processes.push(RecordedProcess {
            name: name.to_owned(),
            pid: process.pid,
            start,
        });
        self.running.push(process);
        self.state.write(&self.layout)
    }

    /// Fails with the log tail of the first process that exited, and what it means when the log
    /// says something this machine is known for.
    fn check(&mut self) -> Result<()> {
        for p in &mut self.running {
            if let Some(status) = p.exit_status() {
                let tail = p.log_tail(40);
                if let Some(cause) = known_cause(p.name, &tail) {
                    return Err(cluster_error(
                        p.name,
                        format!(
                            "exited ({status}): {cause}\nlog tail ({}):\n{tail}",
                            p.log.display()
                        ),
                    ));
                }
                return Err(Error::ExitedEarly {
                    component: p.name,
                    status,
                    log: p.log.clone(),
                    tail: p.log_tail(40),
                });
            }
        }
        Ok(())
    }

    /// Polls `probe` until it returns `Some`, failing when a process exits or after the timeout.
    async fn wait<T, F, Fut>(&mut self, what: &'static str, mut probe: F) -> Result<T>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Option<T>>,
    {
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            if let Some(v) = probe().await {
                return Ok(v);
            }
            self.check()?;
            if Instant::now() > deadline {
                let tails = self
                    .running
                    .iter()
                    .map(|p| format!("--- {} ---\n{}", p.log.display(), p.log_tail(15)))
                    .collect::<Vec<_>>()
                    .join("\n");
                return Err(cluster_error(
                    what,
                    format!(
                        "not done within {} s; log tails:\n{tails}",
                        READY_TIMEOUT.as_secs()
                    ),
                ));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

fn is_root() -> bool {
    use std::os::unix::fs::MetadataExt as _;
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

/// Installs the Debian packages the node needs when one is missing (root only); whether it did.
pub fn ensure_packages() -> Result<bool> {
    let missing: Vec<&str> = PACKAGES
        .iter()
        .filter(|(_, path)| !binaries::is_executable(Path::new(path)))
        .map(|(name, _)| *name)
        .collect();
    if missing.is_empty() {
        return Ok(false);
    }
    eprintln!(
        "cluster: installing {} from Debian's packages",
        missing.join(", ")
    );
    for args in [
        vec!["update", "-qq"],
        [
            vec!["install", "-y", "-qq", "--no-install-recommends"],
            missing,
        ]
        .concat(),
    ] {
        let out = std::process::Command::new("apt-get")
            .args(&args)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .output()
            .map_err(Error::io("running apt-get"))?;
        if !out.status.success() {
            return Err(Error::ToolMissing {
                tool: "runc, iptables, conntrack, nftables".into(),
                how: format!(
                    "apt-get {} failed:\n{}",
                    args.join(" "),
                    binaries::tail(&String::from_utf8_lossy(&out.stderr), 20)
                ),
            });
        }
    }
    Ok(true)
}

/// The machine's hostname, as the Node's name (and later its cloud-sim server's).
pub fn node_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_lowercase())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "node".into())
}

/// The IPv4 address of the interface the default route goes through: what kubelet serves on.
pub fn node_ip() -> Result<String> {
    let route = std::process::Command::new("ip")
        .args(["-o", "-4", "route", "show", "default"])
        .output()
        .map_err(Error::io("running ip route"))?;
    let route = String::from_utf8_lossy(&route.stdout);
    let words: Vec<&str> = route.split_whitespace().collect();
    let dev = words
        .windows(2)
        .find(|w| w[0] == "dev")
        .map(|w| w[1].to_owned())
        .ok_or_else(|| cluster_error("finding the node IP", "no default route"))?;
    let addr = std::process::Command::new("ip")
        .args(["-o", "-4", "addr", "show", "dev", &dev, "scope", "global"])
        .output()
        .map_err(Error::io("running ip addr"))?;
    let addr = String::from_utf8_lossy(&addr.stdout);
    addr.split_whitespace()
        .skip_while(|w| *w != "inet")
        .nth(1)
        .and_then(|cidr| cidr.split('/').next())
        .map(str::to_owned)
        .ok_or_else(|| cluster_error("finding the node IP", format!("{dev} has no IPv4 address")))
}

fn write_file(path: &Path, content: &str) -> Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(Error::io(format!("creating {}", dir.display())))?;
    }
    std::fs::write(path, content).map_err(Error::io(format!("writing {}", path.display())))
}

/// Empties the state directory (after `down_in`, so nothing is mounted there any more).
fn prepare_dir(l: &Layout) -> Result<()> {
    let left = host::mounts_under(l.root());
    if !left.is_empty() {
        return Err(cluster_error(
            "preparing the state directory",
            format!("still mounted: {left:?}"),
        ));
    }
    if l.root().exists() {
        std::fs::remove_dir_all(l.root())
            .map_err(Error::io(format!("emptying {}", l.root().display())))?;
    }
    for dir in [
        l.pki(),
        l.logs(),
        l.bin(),
        l.containerd(),
        l.cni_conf(),
        l.cni_ipam(),
        l.kubelet(),
    ] {
        std::fs::create_dir_all(&dir).map_err(Error::io(format!("creating {}", dir.display())))?;
    }
    Ok(())
}

/// Links people's tools into `bin/` and the CNI plugins where containerd looks.
fn link_tools(l: &Layout, nb: &ClusterBinaries) -> Result<()> {
    let links = [
        (nb.kubectl.clone(), l.bin().join("kubectl")),
        (nb.containerd_bin.join("ctr"), l.bin().join("ctr")),
        (nb.crane.clone(), l.bin().join("crane")),
        (nb.cni_bin.clone(), l.cni_bin()),
    ];
    for (target, link) in links {
        std::os::unix::fs::symlink(&target, &link)
            .map_err(Error::io(format!("linking {}", link.display())))?;
    }
    // The wrapper must be a file of its own: containerd execs it as the runtime.
    let wrapper = l.runc_wrapper();
    write_file(&wrapper, &config::runc_wrapper(Path::new("/usr/sbin/runc")))?;
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).map_err(Error::io(
        format!("making {} executable", wrapper.display()),
    ))
}

/// Certificates and kubeconfigs of every component.
struct ClusterPki {
    pki: Pki,
    kubelet_client: (PathBuf, PathBuf),
    kubeconfigs: BTreeMap<&'static str, PathBuf>,
}

fn write_pki(l: &Layout, node: &str, node_ip: &str) -> Result<ClusterPki> {
    let dir = l.pki();
    let sans = [
        node_ip.to_owned(),
        KUBERNETES_SERVICE_IP.to_owned(),
        "kubernetes.default.svc.cluster.local".to_owned(),
        node.to_owned(),
    ];
    let (pki, ca) = Pki::generate_with(&dir, &sans)?;
    let server = format!("https://127.0.0.1:{APISERVER_PORT}");
    let kubelet_client = ca.client(
        "apiserver-kubelet-client",
        "kube-apiserver-kubelet-client",
        &[],
    )?;
    let node_cn = format!("system:node:{node}");
    let identities: [(&'static str, &str, &[&str]); 4] = [
        ("kubelet", &node_cn, &["system:nodes"]),
        ("kube-proxy", "system:kube-proxy", &[]),
        ("kube-scheduler", "system:kube-scheduler", &[]),
        (
            "kube-controller-manager",
            "system:kube-controller-manager",
            &[],
        ),
    ];
    let mut kubeconfigs = BTreeMap::new();
    crate::control_plane::write_kubeconfig_with(
        &l.kubeconfig(),
        &server,
        &pki.ca_cert,
        &pki.admin_cert,
        &pki.admin_key,
    )?;
    for (name, cn, orgs) in identities {
        let (cert, key) = ca.client(name, cn, orgs)?;
        let path = dir.join(format!("{name}.kubeconfig"));
        crate::control_plane::write_kubeconfig_with(&path, &server, &pki.ca_cert, &cert, &key)?;
        kubeconfigs.insert(name, path);
    }
    Ok(ClusterPki {
        pki,
        kubelet_client,
        kubeconfigs,
    })
}

async fn start_control_plane(
    procs: &mut Procs,
    cp: &Binaries,
    pki: &ClusterPki,
    node_ip: &str,
) -> Result<()> {
    let root = procs.layout.root().to_path_buf();
    let etcd_url = format!("http://127.0.0.1:{ETCD_PORT}");
    let peer_url = format!("http://127.0.0.1:{ETCD_PEER_PORT}");
    procs.spawn(
        "etcd",
        &cp.etcd,
        &[
            "--name=cluster".to_owned(),
            format!("--data-dir={}", root.join("etcd").display()),
            format!("--listen-client-urls={etcd_url}"),
            format!("--advertise-client-urls={etcd_url}"),
            format!("--listen-peer-urls={peer_url}"),
            format!("--initial-advertise-peer-urls={peer_url}"),
            format!("--initial-cluster=cluster={peer_url}"),
            "--unsafe-no-fsync".to_owned(),
            "--log-level=warn".to_owned(),
        ],
        &[],
    )?;
    procs
        .wait("etcd to listen", || async { port_open(ETCD_PORT) })
        .await?;
    let p = &pki.pki;
    let args = [
        format!("--etcd-servers={etcd_url}"),
        // The node's address too: pods reach the `kubernetes` Service's endpoint there.
        "--bind-address=0.0.0.0".to_owned(),
        format!("--secure-port={APISERVER_PORT}"),
        format!("--advertise-address={node_ip}"),
        format!("--tls-cert-file={}", p.serving_cert.display()),
        format!("--tls-private-key-file={}", p.serving_key.display()),
        format!("--client-ca-file={}", p.ca_cert.display()),
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local".to_owned(),
        format!(
            "--service-account-key-file={}",
            p.service_account_pub.display()
        ),
        format!(
            "--service-account-signing-key-file={}",
            p.service_account_key.display()
        ),
        format!("--service-cluster-ip-range={SERVICE_CIDR}"),
        // What a real cluster runs: kubelets are authorized by the Node authorizer and limited
        // to their own Node and pods by NodeRestriction.
        "--authorization-mode=Node,RBAC".to_owned(),
        "--enable-admission-plugins=NodeRestriction".to_owned(),
        // `kubectl logs/exec/port-forward`: the apiserver's identity towards the kubelets.
        format!(
            "--kubelet-client-certificate={}",
            pki.kubelet_client.0.display()
        ),
        format!("--kubelet-client-key={}", pki.kubelet_client.1.display()),
        "--allow-privileged=true".to_owned(),
        format!("--cert-dir={}", root.join("apiserver-certs").display()),
        "--profiling=false".to_owned(),
    ];
    procs.spawn("kube-apiserver", &cp.kube_apiserver, &args, &[])?;
    let kubeconfig = procs.layout.kubeconfig();
    let admin = client(&kubeconfig).await?;
    procs
        .wait("kube-apiserver to be ready", || {
            let admin = admin.clone();
            async move {
                let request = http::Request::get("/readyz").body(Vec::new()).ok()?;
                let body = admin.request_text(request).await.ok()?;
                (body.trim() == "ok").then_some(())
            }
        })
        .await
}

/// Lets the apiserver's kubelet client use the kubelet API (logs, exec, port-forward, metrics).
async fn bind_kubelet_client(admin: &kube::Client) -> Result<()> {
    let binding: ClusterRoleBinding = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "cloud-controllers:kube-apiserver-kubelet-client"},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": "system:kubelet-api-admin"
        },
        "subjects": [{
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "User",
            "name": "kube-apiserver-kubelet-client"
        }]
    }))
    .expect("a valid ClusterRoleBinding");
    Api::<ClusterRoleBinding>::all(admin.clone())
        .create(&PostParams::default(), &binding)
        .await?;
    Ok(())
}

fn port_open(port: u16) -> Option<()> {
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    TcpStream::connect_timeout(&addr, Duration::from_millis(200))
        .ok()
        .map(|_| ())
}

fn start_registry(procs: &mut Procs, nb: &ClusterBinaries) -> Result<()> {
    let disk = procs.layout.root().join("registry");
    std::fs::create_dir_all(&disk).map_err(Error::io(format!("creating {}", disk.display())))?;
    procs.spawn(
        "registry",
        &nb.crane,
        &[
            "registry".to_owned(),
            "serve".to_owned(),
            format!("--address=127.0.0.1:{REGISTRY_PORT}"),
            format!("--disk={}", disk.display()),
        ],
        &[],
    )?;
    let deadline = Instant::now() + READY_TIMEOUT;
    while port_open(REGISTRY_PORT).is_none() {
        procs.check()?;
        if Instant::now() > deadline {
            return Err(cluster_error("starting the registry", "it does not listen"));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(())
}

/// Packs each static binary as the only file of a one-layer image and pushes it.
fn push_images(l: &Layout, nb: &ClusterBinaries) -> Result<()> {
    let platform = format!(
        "linux/{}",
        match std::env::consts::ARCH {
            "x86_64" => "amd64",
            "aarch64" => "arm64",
            other => other,
        }
    );
    for (binary, name, image, env) in [
        (&nb.pause, "pause", PAUSE_IMAGE, None),
        (&nb.hello, "hello", HELLO_IMAGE, Some("LISTEN=:8080")),
    ] {
        let dir = l.root().join("images").join(name);
        std::fs::create_dir_all(&dir).map_err(Error::io(format!("creating {}", dir.display())))?;
        std::fs::copy(binary, dir.join(name))
            .map_err(Error::io(format!("copying {}", binary.display())))?;
        let layer = l.root().join("images").join(format!("{name}.tar"));
        let layer_arg = layer.display().to_string();
        let dir_arg = dir.display().to_string();
        run_tool("tar", &["-C", &dir_arg, "-cf", &layer_arg, name])?;
        let crane = nb.crane.display().to_string();
        run_tool(
            &crane,
            &["append", "--insecure", "-f", &layer_arg, "-t", image],
        )?;
        let entrypoint = format!("--entrypoint=/{name}");
        let platform_arg = format!("--set-platform={platform}");
        let mut args = vec![
            "mutate",
            "--insecure",
            image,
            &entrypoint,
            &platform_arg,
            "-t",
            image,
        ];
        if let Some(env) = env {
            args.extend(["--env", env]);
        }
        run_tool(&crane, &args)?;
    }
    Ok(())
}

fn run_tool(program: &str, args: &[&str]) -> Result<String> {
    let out = std::process::Command::new(program)
        .args(args)
        .output()
        .map_err(Error::io(format!("running {program}")))?;
    if !out.status.success() {
        return Err(cluster_error(
            &format!("{program} {}", args.join(" ")),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn system_path(extra: &Path) -> String {
    format!(
        "{}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        extra.display()
    )
}

async fn start_containerd(procs: &mut Procs, nb: &ClusterBinaries) -> Result<()> {
    let l = procs.layout.clone();
    let config = l.containerd().join("config.toml");
    write_file(&config, &config::containerd(&l, PAUSE_IMAGE))?;
    write_file(
        &l.containerd()
            .join("certs.d")
            .join(REGISTRY)
            .join("hosts.toml"),
        &config::registry_hosts(),
    )?;
    procs.spawn(
        "containerd",
        &nb.containerd_bin.join("containerd"),
        &[format!("--config={}", config.display())],
        // It finds containerd-shim-runc-v2 on PATH.
        &[("PATH", system_path(&nb.containerd_bin))],
    )?;
    let socket = l.containerd_socket();
    procs
        .wait("containerd to listen", || {
            let ok = std::os::unix::net::UnixStream::connect(&socket).is_ok();
            async move { ok.then_some(()) }
        })
        .await
}

fn start_controllers(procs: &mut Procs, nb: &ClusterBinaries, pki: &ClusterPki) -> Result<()> {
    let root = procs.layout.root().to_path_buf();
    let kcm = pki.kubeconfigs["kube-controller-manager"]
        .display()
        .to_string();
    let kcm_args = vec![
        format!("--kubeconfig={kcm}"),
        format!("--authentication-kubeconfig={kcm}"),
        format!("--authorization-kubeconfig={kcm}"),
        "--bind-address=127.0.0.1".to_owned(),
        format!(
            "--cert-dir={}",
            root.join("kube-controller-manager").display()
        ),
        // /usr/libexec/kubernetes/... otherwise, created at start.
        format!(
            "--flex-volume-plugin-dir={}",
            root.join("kube-controller-manager/volume-plugins")
                .display()
        ),
        "--leader-elect=false".to_owned(),
        format!(
            "--service-account-private-key-file={}",
            pki.pki.service_account_key.display()
        ),
        format!("--root-ca-file={}", pki.pki.ca_cert.display()),
        "--use-service-account-credentials=true".to_owned(),
        // Node IPAM: the node's podCIDR.
        "--allocate-node-cidrs=true".to_owned(),
        format!("--cluster-cidr={CLUSTER_CIDR}"),
        "--node-cidr-mask-size=24".to_owned(),
        format!("--service-cluster-ip-range={SERVICE_CIDR}"),
        // The cloud's part is ours (the controllers under test). v1.36 has no cloud controllers
        // left in kube-controller-manager; `external` says so explicitly.
        "--cloud-provider=external".to_owned(),
    ];
    procs.spawn(
        "kube-controller-manager",
        &nb.kube_controller_manager,
        &kcm_args,
        &[],
    )?;
    let sched = pki.kubeconfigs["kube-scheduler"].display().to_string();
    procs.spawn(
        "kube-scheduler",
        &nb.kube_scheduler,
        &[
            format!("--kubeconfig={sched}"),
            format!("--authentication-kubeconfig={sched}"),
            format!("--authorization-kubeconfig={sched}"),
            "--bind-address=127.0.0.1".to_owned(),
            format!("--cert-dir={}", root.join("kube-scheduler").display()),
            "--leader-elect=false".to_owned(),
        ],
        &[],
    )
}

fn start_kubelet(
    procs: &mut Procs,
    nb: &ClusterBinaries,
    pki: &ClusterPki,
    node: &str,
    node_ip: &str,
) -> Result<()> {
    let l = procs.layout.clone();
    let config = l.kubelet().join("config.yaml");
    write_file(&config, &config::kubelet(&l, &pki.pki.ca_cert))?;
    for dir in ["manifests", "volume-plugins", "pod-logs", "root", "pki"] {
        let dir = l.kubelet().join(dir);
        std::fs::create_dir_all(&dir).map_err(Error::io(format!("creating {}", dir.display())))?;
    }
    procs.spawn(
        "kubelet",
        &nb.kubelet,
        &[
            format!("--config={}", config.display()),
            format!("--kubeconfig={}", pki.kubeconfigs["kubelet"].display()),
            format!("--root-dir={}", l.kubelet().join("root").display()),
            format!("--cert-dir={}", l.kubelet().join("pki").display()),
            // As on Hetzner with a cloud-controller-manager: registers with the uninitialized taint.
            "--cloud-provider=external".to_owned(),
            format!("--node-ip={node_ip}"),
            format!("--hostname-override={node}"),
            "--v=2".to_owned(),
        ],
        &[("PATH", system_path(Path::new("/usr/sbin")))],
    )
}

async fn wait_for_pod_cidr(procs: &mut Procs, admin: &kube::Client, node: &str) -> Result<String> {
    let nodes: Api<Node> = Api::all(admin.clone());
    procs
        .wait("the node to register and get a podCIDR", || {
            let nodes = nodes.clone();
            async move {
                let n = nodes.get_opt(node).await.ok()??;
                n.spec?.pod_cidr
            }
        })
        .await
}

fn start_kube_proxy(procs: &mut Procs, nb: &ClusterBinaries, node: &str) -> Result<()> {
    let l = procs.layout.clone();
    let kubeconfig = l.pki().join("kube-proxy.kubeconfig");
    let config = l.root().join("kube-proxy.yaml");
    write_file(&config, &config::kube_proxy(&kubeconfig, node))?;
    procs.spawn(
        "kube-proxy",
        &nb.kube_proxy,
        &[format!("--config={}", config.display()), "--v=2".to_owned()],
        &[("PATH", system_path(Path::new("/usr/sbin")))],
    )
}

/// The node Ready, and what kube-controller-manager gives a namespace (the `default`
/// ServiceAccount, `kube-root-ca.crt`) in `default`, so pods can be created right away.
async fn wait_ready(procs: &mut Procs, admin: &kube::Client, node: &str) -> Result<()> {
    let nodes: Api<Node> = Api::all(admin.clone());
    procs
        .wait("the node to be Ready", || {
            let nodes = nodes.clone();
            async move {
                let n = nodes.get_opt(node).await.ok()??;
                n.status?
                    .conditions?
                    .iter()
                    .any(|c| c.type_ == "Ready" && c.status == "True")
                    .then_some(())
            }
        })
        .await?;
    let accounts: Api<ServiceAccount> = Api::namespaced(admin.clone(), "default");
    let maps: Api<ConfigMap> = Api::namespaced(admin.clone(), "default");
    procs
        .wait("the default ServiceAccount and kube-root-ca.crt", || {
            let (accounts, maps) = (accounts.clone(), maps.clone());
            async move {
                accounts.get_opt("default").await.ok()??;
                maps.get_opt("kube-root-ca.crt").await.ok()??;
                Some(())
            }
        })
        .await?;
    procs
        .wait("kube-proxy to be healthy", || async { port_open(10256) })
        .await
}

/// Stops the cluster in the default state directory and undoes its changes to the host; returns
/// what it did, one line per action. Safe to run when nothing runs.
pub fn down() -> Result<Vec<String>> {
    down_in(&Layout::default())
}

pub fn down_in(l: &Layout) -> Result<Vec<String>> {
    let mut log = Vec::new();
    let state = State::read(l);
    let recorded: Vec<RecordedProcess> = state
        .as_ref()
        .map(|s| s.processes.clone())
        .unwrap_or_default();
    let stop = |names: &[&str], log: &mut Vec<String>| {
        for p in recorded.iter().rev() {
            if names.contains(&p.name.as_str()) && p.alive() {
                host::stop_pid(p.pid, STOP_GRACE);
                log.push(format!("stopped {} (pid {})", p.name, p.pid));
            }
        }
    };
    // The node's agents first, so nothing restarts pods or rewrites rules while we clean up.
    stop(
        &[
            "kube-proxy",
            "kubelet",
            "kube-scheduler",
            "kube-controller-manager",
        ],
        &mut log,
    );
    host::remove_kubepods_cgroups(&mut log);
    stop(
        &[
            "cloud-sim",
            "containerd",
            "registry",
            "kube-apiserver",
            "etcd",
        ],
        &mut log,
    );
    // containerd's shims outlive it; after a crash, anything `up` started without recording it
    // (cloud-sim runs from a copy in bin/).
    let strays: Vec<(u32, String)> = [binaries::cache_dir(), l.bin()]
        .iter()
        .flat_map(|root| host::stray_processes(root, l.root()))
        .collect();
    for (pid, cmdline) in strays {
        host::stop_pid(pid, Duration::from_secs(2));
        log.push(format!(
            "stopped stray process {pid}: {}",
            binaries::tail(&cmdline, 1)
                .chars()
                .take(100)
                .collect::<String>()
        ));
    }
    host::remove_kubepods_cgroups(&mut log);
    host::unmount_under(l.root(), &mut log);
    host::remove_links(&mut log);
    host::remove_iptables_rules(&mut log);
    if let Some(state) = &state {
        host::restore_sysctls(&state.sysctls_before, &mut log);
        host::remove_created_paths(&state.absent_paths, &mut log);
        host::remove_empty_tables(&state.tables_before, &mut log);
    }
    let remaining = host::mounts_under(l.root());
    if !remaining.is_empty() {
        return Err(cluster_error(
            "unmounting",
            format!("still mounted: {remaining:?}"),
        ));
    }
    let _ = std::fs::remove_file(l.state_file());
    if state.is_some() {
        log.push(format!("removed {}", l.state_file().display()));
    }
    Ok(log)
}
