//! One etcd + kube-apiserver pair on 127.0.0.1, with free ports and its own certificates.

use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use kube::config::{
    AuthInfo, Cluster, Context, KubeConfigOptions, Kubeconfig, NamedAuthInfo, NamedCluster,
    NamedContext,
};
use serde::{Deserialize, Serialize};

use crate::binaries::{self, Binaries};
use crate::error::{Error, Result};
use crate::pki::Pki;
use crate::process::{Lifetime, Process};

/// Every control plane's files live under this directory (inside the system temp dir unless a
/// persistent directory is asked for), so `pgrep -f cloud-controllers-testenv` finds every process
/// a test ever started.
pub const TEMP_ROOT: &str = "cloud-controllers-testenv";

const READY_TIMEOUT: Duration = Duration::from_secs(90);
const STOP_GRACE: Duration = Duration::from_secs(10);
/// Attempts to start when a freshly picked port was taken by someone else in the meantime.
const START_ATTEMPTS: usize = 3;

/// Where a control plane keeps its files and how long its processes live.
#[derive(Debug, Clone)]
pub struct Options {
    /// `None`: a fresh temporary directory, removed on stop.
    pub dir: Option<PathBuf>,
    pub lifetime: Lifetime,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            dir: None,
            lifetime: Lifetime::TiedToParent,
        }
    }
}

/// A running etcd + kube-apiserver. Stopped (apiserver first, then etcd) when dropped, unless it was
/// [detached](ControlPlane::detach).
#[derive(Debug)]
pub struct ControlPlane {
    dir: Directory,
    connection: Connection,
    state: State,
    etcd: Process,
    apiserver: Process,
    /// How the apiserver was started, so it can be restarted on the same etcd; `None` when
    /// re-attached.
    apiserver_launch: Option<Launch>,
    detached: bool,
}

/// A process's program, arguments and lifetime.
#[derive(Debug, Clone)]
struct Launch {
    program: PathBuf,
    args: Vec<String>,
    lifetime: Lifetime,
    restarts: u32,
}

#[derive(Debug)]
enum Directory {
    Temporary(tempfile::TempDir),
    Persistent(PathBuf),
}

impl Directory {
    fn path(&self) -> &Path {
        match self {
            Directory::Temporary(t) => t.path(),
            Directory::Persistent(p) => p,
        }
    }
}

/// What a detached control plane writes down so a later `control-plane down` can find it.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct State {
    apiserver_pid: u32,
    etcd_pid: u32,
    apiserver_port: u16,
    etcd_port: u16,
    startup_millis: u64,
}

impl ControlPlane {
    /// Starts a control plane in a temporary directory whose processes die with this process.
    pub async fn start() -> Result<ControlPlane> {
        Self::start_with(Options::default()).await
    }

    pub async fn start_with(options: Options) -> Result<ControlPlane> {
        let binaries = tokio::task::spawn_blocking(binaries::ensure)
            .await
            .expect("building the control-plane binaries panicked")?;
        let mut attempt = 1;
        loop {
            match Self::start_once(&binaries, &options).await {
                Err(e @ (Error::ExitedEarly { .. } | Error::NotReady { .. }))
                    if attempt < START_ATTEMPTS
                        && e.to_string().contains("address already in use") =>
                {
                    tracing::warn!("control plane lost a port race, retrying: {e}");
                    attempt += 1;
                }
                other => return other,
            }
        }
    }

    async fn start_once(binaries: &Binaries, options: &Options) -> Result<ControlPlane> {
        let started = Instant::now();
        let dir = match &options.dir {
            Some(path) => {
                std::fs::create_dir_all(path)
                    .map_err(Error::io(format!("creating {}", path.display())))?;
                Directory::Persistent(path.clone())
            }
            None => Directory::Temporary(temp_dir()?),
        };
        let root = dir.path().to_path_buf();
        let pki = Pki::generate(&root)?;
        let [etcd_port, peer_port, apiserver_port] = free_ports()?;

        let etcd_data = root.join("etcd");
        let etcd_args = etcd_args("testenv", &etcd_data, etcd_port, peer_port);
        let mut etcd = Process::spawn(
            "etcd",
            &binaries.etcd,
            &etcd_args,
            root.join("etcd.log"),
            options.lifetime,
        )?;
        wait_for_port(&mut etcd, etcd_port).await?;

        let apiserver_args = ApiserverOptions {
            etcd_port,
            bind_address: "127.0.0.1",
            port: apiserver_port,
            advertise_address: "127.0.0.1",
            // Loopback addresses are invalid in Endpoints, so the `kubernetes` Service is not kept.
            endpoint_reconciler: false,
            service_cidr: "10.0.0.0/24",
            // RBAC, so tests can prove a chart's roles are sufficient by impersonation.
            authorization: Authorization::Rbac,
            cert_dir: root.join("apiserver-certs"),
        }
        .args(&pki);
        let apiserver = Process::spawn(
            "kube-apiserver",
            &binaries.kube_apiserver,
            &apiserver_args,
            root.join("kube-apiserver.log"),
            options.lifetime,
        )?;

        let apiserver_launch = Launch {
            program: binaries.kube_apiserver.clone(),
            args: apiserver_args.clone(),
            lifetime: options.lifetime,
            restarts: 0,
        };
        let kubeconfig = root.join("kubeconfig");
        write_kubeconfig(&kubeconfig, apiserver_port, &pki)?;
        let connection = Connection {
            kubeconfig,
            logs: vec![apiserver.log.clone(), etcd.log.clone()],
        };
        let mut plane = ControlPlane {
            dir,
            connection,
            state: State {
                apiserver_pid: apiserver.pid,
                etcd_pid: etcd.pid,
                apiserver_port,
                etcd_port,
                startup_millis: 0,
            },
            etcd,
            apiserver,
            apiserver_launch: Some(apiserver_launch),
            detached: false,
        };
        plane.wait_ready().await?;
        plane.state.startup_millis = started.elapsed().as_millis() as u64;
        tracing::info!(
            apiserver = %plane.apiserver_url(),
            startup = ?plane.startup_time(),
            "test control plane ready"
        );
        Ok(plane)
    }

    /// Polls `/readyz` until it answers `ok`, failing early if the apiserver exits.
    async fn wait_ready(&mut self) -> Result<()> {
        let client = self.connection.client().await?;
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            if apiserver_ready(&client).await {
                return Ok(());
            }
            for process in [&mut self.apiserver, &mut self.etcd] {
                if let Some(status) = process.exit_status() {
                    return Err(Error::ExitedEarly {
                        component: process.name,
                        status,
                        log: process.log.clone(),
                        tail: process.log_tail(40),
                    });
                }
            }
            if Instant::now() > deadline {
                return Err(Error::NotReady {
                    component: "kube-apiserver",
                    seconds: READY_TIMEOUT.as_secs(),
                    log: self.apiserver.log.clone(),
                    tail: self.apiserver.log_tail(40),
                });
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Re-attaches to a detached control plane kept in `dir`, if one is running there.
    pub fn attach(dir: &Path) -> Option<ControlPlane> {
        let state: State =
            serde_json::from_slice(&std::fs::read(dir.join("state.json")).ok()?).ok()?;
        let mut apiserver = Process::attach(
            "kube-apiserver",
            state.apiserver_pid,
            dir.join("kube-apiserver.log"),
        );
        let mut etcd = Process::attach("etcd", state.etcd_pid, dir.join("etcd.log"));
        if apiserver.exit_status().is_some() && etcd.exit_status().is_some() {
            return None;
        }
        let connection = Connection {
            kubeconfig: dir.join("kubeconfig"),
            logs: vec![apiserver.log.clone(), etcd.log.clone()],
        };
        Some(ControlPlane {
            dir: Directory::Persistent(dir.to_path_buf()),
            connection,
            state,
            etcd,
            apiserver,
            apiserver_launch: None,
            detached: true,
        })
    }

    /// Leaves the processes running after this handle is gone (for `cargo xtask control-plane up`).
    pub fn detach(mut self) -> Result<()> {
        let path = self.dir.path().join("state.json");
        let json = serde_json::to_vec_pretty(&self.state).expect("state serializes");
        std::fs::write(&path, json).map_err(Error::io(format!("writing {}", path.display())))?;
        self.detached = true;
        Ok(())
    }

    /// Stops the apiserver, then etcd (an apiserver left running would reconnect to the next etcd
    /// on the same port), and removes a temporary directory.
    pub fn stop(mut self) {
        self.stop_processes();
        if let Directory::Persistent(dir) = &self.dir {
            let _ = std::fs::remove_file(dir.join("state.json"));
        }
    }

    fn stop_processes(&mut self) {
        self.apiserver.stop(STOP_GRACE);
        self.etcd.stop(STOP_GRACE);
    }

    /// Stops kube-apiserver (SIGTERM, as a rolling restart does) and leaves etcd running; clients
    /// see connection errors until [`ControlPlane::start_apiserver`].
    pub fn stop_apiserver(&mut self) {
        self.apiserver.stop(STOP_GRACE);
    }

    /// Starts kube-apiserver again with its first arguments, on the same port and etcd, and waits
    /// for `/readyz`. Each restart logs to `kube-apiserver.<n>.log`. Call it from a thread that
    /// outlives the control plane (a runtime worker, not a blocking-pool thread): with
    /// [`Lifetime::TiedToParent`] the kernel kills the process when that thread ends.
    pub async fn start_apiserver(&mut self) -> Result<()> {
        let launch = self.apiserver_launch.as_mut().ok_or_else(|| {
            Error::Restart("a re-attached control plane cannot restart its apiserver".into())
        })?;
        if self.apiserver.exit_status().is_none() {
            return Err(Error::Restart("kube-apiserver is still running".into()));
        }
        launch.restarts += 1;
        let log = self
            .dir
            .path()
            .join(format!("kube-apiserver.{}.log", launch.restarts));
        self.apiserver = Process::spawn(
            "kube-apiserver",
            &launch.program,
            &launch.args,
            log.clone(),
            launch.lifetime,
        )?;
        self.state.apiserver_pid = self.apiserver.pid;
        self.connection.logs[0] = log;
        self.wait_ready().await
    }

    /// How to reach this control plane; cheap to clone and usable after the handle moved.
    pub fn connection(&self) -> Connection {
        self.connection.clone()
    }

    /// An admin (`system:masters`) client.
    pub async fn client(&self) -> Result<kube::Client> {
        self.connection.client().await
    }

    /// The admin kubeconfig file (for kubectl and for controllers run as binaries).
    pub fn kubeconfig(&self) -> &Path {
        &self.connection.kubeconfig
    }

    pub fn apiserver_url(&self) -> String {
        format!("https://127.0.0.1:{}", self.state.apiserver_port)
    }

    /// From `start` to the first `ok` from `/readyz`, binaries already built.
    pub fn startup_time(&self) -> Duration {
        Duration::from_millis(self.state.startup_millis)
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// (kube-apiserver, etcd) process ids.
    pub fn pids(&self) -> (u32, u32) {
        (self.apiserver.pid, self.etcd.pid)
    }

    pub fn ports(&self) -> (u16, u16) {
        (self.state.apiserver_port, self.state.etcd_port)
    }

    /// The last lines of both logs, for a failing test's output.
    pub fn log_tails(&self, lines: usize) -> String {
        self.connection.log_tails(lines)
    }
}

/// How to reach a control plane: its admin kubeconfig and logs.
#[derive(Debug, Clone)]
pub struct Connection {
    kubeconfig: PathBuf,
    logs: Vec<PathBuf>,
}

impl Connection {
    /// An admin (`system:masters`) client.
    pub async fn client(&self) -> Result<kube::Client> {
        Ok(kube::Client::try_from(self.config().await?)?)
    }

    /// A client whose requests are made as `user` in `groups` (impersonation), so RBAC applies.
    pub async fn impersonating_client(&self, user: &str, groups: &[&str]) -> Result<kube::Client> {
        let mut config = self.config().await?;
        config.auth_info.impersonate = Some(user.to_owned());
        config.auth_info.impersonate_groups = Some(groups.iter().map(|g| g.to_string()).collect());
        Ok(kube::Client::try_from(config)?)
    }

    /// A client acting as ServiceAccount `namespace/name`, with the groups the apiserver gives one.
    pub async fn service_account_client(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<kube::Client> {
        let user = format!("system:serviceaccount:{namespace}:{name}");
        let namespace_group = format!("system:serviceaccounts:{namespace}");
        let groups = [
            "system:serviceaccounts",
            namespace_group.as_str(),
            "system:authenticated",
        ];
        self.impersonating_client(&user, &groups).await
    }

    /// Writes a kubeconfig to `path` that acts as ServiceAccount `namespace/name` (impersonation
    /// from the admin identity, with the groups the apiserver gives a ServiceAccount), for running a
    /// controller binary with `--kubeconfig` under exactly that ServiceAccount's RBAC.
    pub fn write_service_account_kubeconfig(
        &self,
        path: &Path,
        namespace: &str,
        name: &str,
    ) -> Result<()> {
        let mut kubeconfig = Kubeconfig::read_from(&self.kubeconfig)?;
        for named in &mut kubeconfig.auth_infos {
            if let Some(auth) = named.auth_info.as_mut() {
                auth.impersonate = Some(format!("system:serviceaccount:{namespace}:{name}"));
                auth.impersonate_groups = Some(vec![
                    "system:serviceaccounts".to_owned(),
                    format!("system:serviceaccounts:{namespace}"),
                    "system:authenticated".to_owned(),
                ]);
            }
        }
        let json = serde_json::to_vec_pretty(&kubeconfig).expect("a kubeconfig serializes");
        std::fs::write(path, json).map_err(Error::io(format!("writing {}", path.display())))
    }

    /// Writes what the kubelet projects into a pod of ServiceAccount `namespace/name` at
    /// `/var/run/secrets/kubernetes.io/serviceaccount`: a bound `token` (TokenRequest, one hour),
    /// the cluster's `ca.crt` and the `namespace`, so a container mounting `dir` there finds the
    /// apiserver with kube's in-cluster configuration. The ServiceAccount must exist.
    pub async fn write_service_account_volume(
        &self,
        dir: &Path,
        namespace: &str,
        name: &str,
    ) -> Result<()> {
        use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
        use k8s_openapi::api::core::v1::ServiceAccount;
        let accounts: kube::Api<ServiceAccount> =
            kube::Api::namespaced(self.client().await?, namespace);
        let request = TokenRequest {
            spec: TokenRequestSpec {
                audiences: Vec::new(),
                expiration_seconds: Some(3600),
                ..TokenRequestSpec::default()
            },
            ..TokenRequest::default()
        };
        let token = accounts
            .create_token_request(name, &kube::api::PostParams::default(), &request)
            .await?
            .status
            .map(|s| s.token)
            .unwrap_or_default();
        let kubeconfig = Kubeconfig::read_from(&self.kubeconfig)?;
        let ca = kubeconfig
            .clusters
            .first()
            .and_then(|c| c.cluster.as_ref())
            .and_then(|c| c.certificate_authority.clone())
            .expect("testenv's kubeconfig names its CA file");
        std::fs::create_dir_all(dir).map_err(Error::io(format!("creating {}", dir.display())))?;
        for (file, content) in [
            ("token", token.into_bytes()),
            (
                "ca.crt",
                std::fs::read(&ca).map_err(Error::io(format!("reading {ca}")))?,
            ),
            ("namespace", namespace.as_bytes().to_vec()),
        ] {
            let path = dir.join(file);
            std::fs::write(&path, content)
                .map_err(Error::io(format!("writing {}", path.display())))?;
        }
        Ok(())
    }

    async fn config(&self) -> Result<kube::Config> {
        crate::crypto::install_crypto_provider();
        let kubeconfig = Kubeconfig::read_from(&self.kubeconfig)?;
        Ok(kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?)
    }

    /// The admin kubeconfig file (for kubectl and for controllers run as binaries).
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// The last `lines` lines of the apiserver and etcd logs.
    pub fn log_tails(&self, lines: usize) -> String {
        self.logs
            .iter()
            .map(|log| {
                let text =
                    String::from_utf8_lossy(&std::fs::read(log).unwrap_or_default()).into_owned();
                format!(
                    "--- {} ---\n{}",
                    log.display(),
                    crate::binaries::tail(&text, lines)
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        if !self.detached {
            self.stop_processes();
        }
    }
}

/// etcd's arguments, the same for every control plane: one member named `name` on loopback, its
/// data in `data_dir`. Test data is disposable, so no fsync (it dominates etcd latency on small VMs).
pub(crate) fn etcd_args(
    name: &str,
    data_dir: &Path,
    client_port: u16,
    peer_port: u16,
) -> Vec<String> {
    let etcd_url = format!("http://127.0.0.1:{client_port}");
    let peer_url = format!("http://127.0.0.1:{peer_port}");
    vec![
        format!("--name={name}"),
        format!("--data-dir={}", data_dir.display()),
        format!("--listen-client-urls={etcd_url}"),
        format!("--advertise-client-urls={etcd_url}"),
        format!("--listen-peer-urls={peer_url}"),
        format!("--initial-advertise-peer-urls={peer_url}"),
        format!("--initial-cluster={name}={peer_url}"),
        "--unsafe-no-fsync".to_owned(),
        "--log-level=warn".to_owned(),
    ]
}

/// How kube-apiserver is started: the tests' plane ([`ControlPlane`]) and the real cluster
/// (`cluster::up`) choose these; the rest of the arguments ([`ApiserverOptions::args`]) they share.
#[derive(Debug, Clone)]
pub(crate) struct ApiserverOptions<'a> {
    /// etcd's client port on 127.0.0.1.
    pub etcd_port: u16,
    pub bind_address: &'a str,
    pub port: u16,
    pub advertise_address: &'a str,
    /// Whether the apiserver keeps the `kubernetes` Service's endpoints (`false`:
    /// `--endpoint-reconciler-type=none`).
    pub endpoint_reconciler: bool,
    pub service_cidr: &'a str,
    pub authorization: Authorization<'a>,
    pub cert_dir: PathBuf,
}

/// Who the apiserver authorizes, and how.
#[derive(Debug, Clone)]
pub(crate) enum Authorization<'a> {
    /// RBAC only.
    Rbac,
    /// What a real cluster runs: kubelets are authorized by the Node authorizer and limited to
    /// their own Node and pods by NodeRestriction; the apiserver reaches the kubelets (`kubectl
    /// logs/exec/port-forward`) with this client certificate and key.
    NodeAndRbac {
        kubelet_client: (&'a Path, &'a Path),
    },
}

impl ApiserverOptions<'_> {
    pub(crate) fn args(&self, pki: &Pki) -> Vec<String> {
        let mut args = vec![
            format!("--etcd-servers=http://127.0.0.1:{}", self.etcd_port),
            format!("--bind-address={}", self.bind_address),
            format!("--secure-port={}", self.port),
            format!("--advertise-address={}", self.advertise_address),
        ];
        if !self.endpoint_reconciler {
            args.push("--endpoint-reconciler-type=none".to_owned());
        }
        args.extend([
            format!("--tls-cert-file={}", pki.serving_cert.display()),
            format!("--tls-private-key-file={}", pki.serving_key.display()),
            format!("--client-ca-file={}", pki.ca_cert.display()),
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local".to_owned(),
            format!(
                "--service-account-key-file={}",
                pki.service_account_pub.display()
            ),
            format!(
                "--service-account-signing-key-file={}",
                pki.service_account_key.display()
            ),
            format!("--service-cluster-ip-range={}", self.service_cidr),
        ]);
        match &self.authorization {
            Authorization::Rbac => args.push("--authorization-mode=RBAC".to_owned()),
            Authorization::NodeAndRbac {
                kubelet_client: (cert, key),
            } => args.extend([
                "--authorization-mode=Node,RBAC".to_owned(),
                "--enable-admission-plugins=NodeRestriction".to_owned(),
                format!("--kubelet-client-certificate={}", cert.display()),
                format!("--kubelet-client-key={}", key.display()),
            ]),
        }
        args.extend([
            "--allow-privileged=true".to_owned(),
            format!("--cert-dir={}", self.cert_dir.display()),
            "--profiling=false".to_owned(),
        ]);
        args
    }
}

/// Whether something accepts connections on `port` of 127.0.0.1 (etcd's readiness, the registry's).
pub(crate) fn port_open(port: u16) -> bool {
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok()
}

/// Whether the apiserver's `/readyz` answers `ok`.
pub(crate) async fn apiserver_ready(client: &kube::Client) -> bool {
    let Ok(request) = http::Request::get("/readyz").body(Vec::new()) else {
        return false;
    };
    client
        .request_text(request)
        .await
        .is_ok_and(|body| body.trim() == "ok")
}

/// A fresh directory under `$TMPDIR/cloud-controllers-testenv/`, named after this process so the
/// leftovers of a killed test binary can be recognised and removed by the next one.
fn temp_dir() -> Result<tempfile::TempDir> {
    let root = std::env::temp_dir().join(TEMP_ROOT);
    std::fs::create_dir_all(&root).map_err(Error::io(format!("creating {}", root.display())))?;
    remove_stale_dirs(&root);
    tempfile::Builder::new()
        .prefix(&format!("cp-{}-", std::process::id()))
        .tempdir_in(&root)
        .map_err(Error::io(format!(
            "creating a directory in {}",
            root.display()
        )))
}

fn remove_stale_dirs(root: &Path) {
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let owner = name
            .to_str()
            .and_then(|n| n.strip_prefix("cp-"))
            .and_then(|n| n.split('-').next())
            .and_then(|pid| pid.parse::<u32>().ok());
        if let Some(pid) = owner
            && !crate::process::pid_alive(pid)
        {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// Three distinct free ports. All listeners are held until all are picked, so they differ.
fn free_ports() -> Result<[u16; 3]> {
    let bind =
        || TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).map_err(Error::io("picking a free port"));
    let listeners = [bind()?, bind()?, bind()?];
    let port = |l: &TcpListener| {
        l.local_addr()
            .map(|a| a.port())
            .map_err(Error::io("reading a port"))
    };
    Ok([
        port(&listeners[0])?,
        port(&listeners[1])?,
        port(&listeners[2])?,
    ])
}

async fn wait_for_port(process: &mut Process, port: u16) -> Result<()> {
    let deadline = Instant::now() + READY_TIMEOUT;
    loop {
        if port_open(port) {
            return Ok(());
        }
        if let Some(status) = process.exit_status() {
            return Err(Error::ExitedEarly {
                component: process.name,
                status,
                log: process.log.clone(),
                tail: process.log_tail(40),
            });
        }
        if Instant::now() > deadline {
            return Err(Error::NotReady {
                component: process.name,
                seconds: READY_TIMEOUT.as_secs(),
                log: process.log.clone(),
                tail: process.log_tail(40),
            });
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn write_kubeconfig(path: &Path, port: u16, pki: &Pki) -> Result<()> {
    write_kubeconfig_with(
        path,
        &format!("https://127.0.0.1:{port}"),
        &pki.ca_cert,
        &pki.admin_cert,
        &pki.admin_key,
    )
}

/// A kubeconfig for `server` with a client certificate.
pub(crate) fn write_kubeconfig_with(
    path: &Path,
    server: &str,
    ca: &Path,
    cert: &Path,
    key: &Path,
) -> Result<()> {
    let name = "testenv".to_owned();
    let kubeconfig = Kubeconfig {
        clusters: vec![NamedCluster {
            name: name.clone(),
            cluster: Some(Cluster {
                server: Some(server.to_owned()),
                certificate_authority: Some(ca.display().to_string()),
                ..Cluster::default()
            }),
            other: Default::default(),
        }],
        auth_infos: vec![NamedAuthInfo {
            name: name.clone(),
            auth_info: Some(AuthInfo {
                client_certificate: Some(cert.display().to_string()),
                client_key: Some(key.display().to_string()),
                ..AuthInfo::default()
            }),
            other: Default::default(),
        }],
        contexts: vec![NamedContext {
            name: name.clone(),
            context: Some(Context {
                cluster: name.clone(),
                user: Some(name.clone()),
                ..Context::default()
            }),
            other: Default::default(),
        }],
        current_context: Some(name),
        ..Kubeconfig::default()
    };
    // JSON is valid YAML, so kubectl and every client library read this file.
    let json = serde_json::to_vec_pretty(&kubeconfig).expect("a kubeconfig serializes");
    std::fs::write(path, json).map_err(Error::io(format!("writing {}", path.display())))
}
