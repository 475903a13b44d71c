//! Running what a rendered Deployment describes, without a kubelet, in one of two ways
//! ([`Runtime`]):
//!
//! - **process**: the binary its image holds, as a local process with exactly the container's
//!   `args` and `env` (secretKeyRef read from the apiserver, fieldRef from the pod we pretend to
//!   be), `--kubeconfig` added so it acts as the pod's ServiceAccount (impersonation: only the
//!   applied RBAC applies), emptyDir and Secret volumes as temp directories (a Secret's keys
//!   written as files, as the kubelet projects them; the mount path in args and env mapped there);
//! - **container**: the image itself under podman, as a kubelet would start it: the same args and
//!   env, the rendered securityContext (user, read-only root, capabilities, no privilege
//!   escalation), the ServiceAccount's token, CA and namespace mounted at the in-cluster path and
//!   `KUBERNETES_SERVICE_HOST`/`PORT` naming the apiserver, emptyDir and Secret volumes as bind
//!   mounts (Secrets read-only). The
//!   pod network is the host's (the test's apiserver and cloud-sim listen on loopback).
//!
//! Either way its readiness probe is polled over HTTP.

use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use serde_json::Value;

/// A Deployment's pod template, as rendered.
#[derive(Debug, Clone)]
pub struct PodTemplate {
    pub deployment: String,
    pub namespace: String,
    pub service_account: Option<String>,
    /// The (only) container.
    pub container: Value,
    pub volumes: Vec<Value>,
    /// The pod's securityContext.
    pub pod_security: Value,
    /// `enableServiceLinks` (default true): the namespace's Service variables for `$(NAME)`.
    pub service_links: bool,
}

impl PodTemplate {
    /// The pod template of rendered Deployment `deploy`; it must have exactly one container.
    pub fn of(deploy: &Value) -> PodTemplate {
        assert_eq!(
            crate::kind(deploy),
            "Deployment",
            "{}",
            crate::describe(deploy)
        );
        let spec = &deploy["spec"]["template"]["spec"];
        let containers = spec["containers"].as_array().expect("containers");
        assert_eq!(containers.len(), 1, "one container per pod");
        assert!(
            spec["initContainers"].is_null(),
            "init containers are not emulated"
        );
        PodTemplate {
            deployment: crate::name(deploy).to_owned(),
            namespace: crate::namespace(deploy)
                .expect("a namespaced Deployment")
                .to_owned(),
            service_account: spec["serviceAccountName"].as_str().map(str::to_owned),
            container: containers[0].clone(),
            volumes: spec["volumes"].as_array().cloned().unwrap_or_default(),
            pod_security: spec["securityContext"].clone(),
            service_links: spec["enableServiceLinks"].as_bool().unwrap_or(true),
        }
    }

    /// The container's `args` (strings only).
    pub fn args(&self) -> Vec<String> {
        self.container["args"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|v| v.as_str().expect("args are strings").to_owned())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The value of `--flag=value` in the args.
    pub fn flag(&self, flag: &str) -> Option<String> {
        let prefix = format!("--{flag}=");
        self.args()
            .into_iter()
            .find_map(|a| a.strip_prefix(&prefix).map(str::to_owned))
    }

    /// A container port by name.
    pub fn port(&self, name: &str) -> u16 {
        self.container["ports"]
            .as_array()
            .and_then(|ports| ports.iter().find(|p| p["name"] == name))
            .and_then(|p| p["containerPort"].as_u64())
            .unwrap_or_else(|| panic!("{}: no container port {name}", self.deployment))
            as u16
    }

    /// The env entry `name`, as rendered.
    pub fn env_entry(&self, name: &str) -> Option<&Value> {
        self.container["env"]
            .as_array()?
            .iter()
            .find(|e| e["name"] == name)
    }

    /// (path, port) of an httpGet probe (`readinessProbe`, `livenessProbe`).
    pub fn http_probe(&self, probe: &str) -> (String, u16) {
        let get = &self.container[probe]["httpGet"];
        let path = get["path"].as_str().expect("probe path").to_owned();
        let port = match &get["port"] {
            Value::String(name) => self.port(name),
            Value::Number(n) => n.as_u64().expect("port number") as u16,
            other => panic!("{}: probe port {other}", self.deployment),
        };
        (path, port)
    }

    /// The container environment as the kubelet would build it for pod `pod_name`: plain values
    /// with their `$(NAME)` references expanded (earlier variables, then the namespace's Service
    /// variables: [`Self::service_env`]), `secretKeyRef` read from the apiserver (a missing optional
    /// key is left out, a missing required one is an error, like CreateContainerConfigError),
    /// `fieldRef` metadata.name/namespace.
    pub async fn resolve_env(
        &self,
        client: &kube::Client,
        pod_name: &str,
    ) -> Result<Vec<(String, String)>, String> {
        if !self.container["envFrom"].is_null() {
            return Err("envFrom is not emulated".into());
        }
        let mut out: Vec<(String, String)> = Vec::new();
        let mut services: Option<Vec<(String, String)>> = None;
        for entry in self.container["env"]
            .as_array()
            .cloned()
            .unwrap_or_default()
        {
            let name = entry["name"]
                .as_str()
                .ok_or("env entry without name")?
                .to_owned();
            if let Some(v) = entry.get("value") {
                let value = v.as_str().unwrap_or_default();
                if value.contains('$') && services.is_none() {
                    services = Some(self.service_env(client).await?);
                }
                let known = services.as_deref().unwrap_or_default();
                // The container's earlier variables first, then the Services' (the kubelet's order).
                let expanded = expand(value, |n| {
                    out.iter()
                        .rev()
                        .chain(known.iter())
                        .find(|(k, _)| k == n)
                        .map(|(_, v)| v.clone())
                });
                out.push((name, expanded));
                continue;
            }
            let from = &entry["valueFrom"];
            if let Some(r) = from.get("secretKeyRef") {
                let secret = r["name"].as_str().ok_or("secretKeyRef without name")?;
                let key = r["key"].as_str().ok_or("secretKeyRef without key")?;
                let optional = r["optional"].as_bool().unwrap_or(false);
                let found = Api::<Secret>::namespaced(client.clone(), &self.namespace)
                    .get_opt(secret)
                    .await
                    .map_err(|e| format!("reading Secret {secret}: {e}"))?;
                let value = found
                    .as_ref()
                    .and_then(|s| s.data.as_ref())
                    .and_then(|d| d.get(key))
                    .map(|b| String::from_utf8_lossy(&b.0).into_owned());
                match (value, optional) {
                    (Some(v), _) => out.push((name, v)),
                    (None, true) => {}
                    (None, false) => {
                        return Err(format!(
                            "env {name}: Secret {}/{secret} has no key {key:?} (exists: {})",
                            self.namespace,
                            found.is_some()
                        ));
                    }
                }
            } else if let Some(r) = from.get("fieldRef") {
                let value = match r["fieldPath"].as_str() {
                    Some("metadata.name") => pod_name.to_owned(),
                    Some("metadata.namespace") => self.namespace.clone(),
                    other => return Err(format!("env {name}: fieldRef {other:?} is not emulated")),
                };
                out.push((name, value));
            } else {
                return Err(format!("env {name}: {from} is not emulated"));
            }
        }
        Ok(out)
    }

    /// The Service variables the kubelet gives a pod of this namespace (with `enableServiceLinks`;
    /// the `kubernetes` Service's from `default` always): `<NAME>_SERVICE_HOST` (the cluster IP),
    /// `<NAME>_SERVICE_PORT` (the first port) and `<NAME>_SERVICE_PORT_<PORT NAME>`, NAME the
    /// Service's name upper-cased with `-` as `_`. Services without a cluster IP give none.
    pub async fn service_env(
        &self,
        client: &kube::Client,
    ) -> Result<Vec<(String, String)>, String> {
        use k8s_openapi::api::core::v1::Service;
        let mut services = Vec::new();
        if self.service_links {
            services.extend(
                Api::<Service>::namespaced(client.clone(), &self.namespace)
                    .list(&Default::default())
                    .await
                    .map_err(|e| format!("listing the Services of {}: {e}", self.namespace))?
                    .items,
            );
        }
        if let Some(k) = Api::<Service>::namespaced(client.clone(), "default")
            .get_opt("kubernetes")
            .await
            .map_err(|e| format!("reading Service default/kubernetes: {e}"))?
        {
            services.push(k);
        }
        let mut vars = Vec::new();
        for s in services {
            let name = s
                .metadata
                .name
                .unwrap_or_default()
                .to_uppercase()
                .replace('-', "_");
            let spec = s.spec.unwrap_or_default();
            let Some(ip) = spec.cluster_ip.filter(|ip| !ip.is_empty() && ip != "None") else {
                continue;
            };
            let ports = spec.ports.unwrap_or_default();
            vars.push((format!("{name}_SERVICE_HOST"), ip));
            if let Some(first) = ports.first() {
                vars.push((format!("{name}_SERVICE_PORT"), first.port.to_string()));
            }
            for p in &ports {
                if let Some(port_name) = &p.name {
                    vars.push((
                        format!(
                            "{name}_SERVICE_PORT_{}",
                            port_name.to_uppercase().replace('-', "_")
                        ),
                        p.port.to_string(),
                    ));
                }
            }
        }
        Ok(vars)
    }
}

/// `$(NAME)` references expanded as the kubelet expands a container's variables: `$$` is `$`, a
/// known NAME its value, an unknown NAME (or an unclosed reference) stays as written.
pub fn expand(input: &str, lookup: impl Fn(&str) -> Option<String>) -> String {
    let mut out = String::new();
    let mut rest = input;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            out.push('$');
            rest = tail;
        } else if let Some(reference) = after.strip_prefix('(')
            && let Some(end) = reference.find(')')
        {
            let name = &reference[..end];
            match lookup(name) {
                Some(value) => out.push_str(&value),
                None => {
                    out.push_str("$(");
                    out.push_str(name);
                    out.push(')');
                }
            }
            rest = &reference[end + 1..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

/// A pod template started as a local process.
#[derive(Debug)]
pub struct Process {
    pub name: String,
    pub child: tokio::process::Child,
    pub log: PathBuf,
    pub ready: (String, u16),
    pub started: std::time::Instant,
    /// The container to remove when this is dropped (container runtime only): killing `podman run`
    /// leaves its container running.
    container: Option<(testenv::Podman, String)>,
}

/// Where the pod template's container runs.
#[derive(Debug)]
pub enum Runtime {
    /// `program` (the binary the image holds) as a local process; `kubeconfig` is added as
    /// `--kubeconfig=…`, the only flag added to the rendered args.
    Process {
        program: PathBuf,
        kubeconfig: Option<PathBuf>,
    },
    /// The rendered image under podman. `service_account` is the directory mounted at
    /// `/var/run/secrets/kubernetes.io/serviceaccount` (see
    /// `testenv::Connection::write_service_account_volume`); `apiserver` the port of the
    /// apiserver on 127.0.0.1.
    Container {
        podman: testenv::Podman,
        service_account: Option<PathBuf>,
        apiserver: u16,
    },
}

/// Where the kubelet mounts a pod's ServiceAccount token, CA and namespace.
pub const SERVICE_ACCOUNT_MOUNT: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// How to start a [`PodTemplate`].
#[derive(Debug)]
pub struct Launch<'a> {
    pub template: &'a PodTemplate,
    pub runtime: Runtime,
    pub pod_name: String,
    /// Replaces (name, value) after resolving: only for what Kubernetes itself would change, e.g. a
    /// Service's DNS name that only cluster DNS resolves.
    pub env_rewrites: Vec<(String, String, String)>,
    /// Where logs and emptyDir volumes go.
    pub dir: &'a Path,
}

impl Launch<'_> {
    /// Starts the container: rendered args and environment (emptyDir mount paths mapped into `dir`
    /// for a process), as a process or under podman.
    pub async fn start(self, client: &kube::Client) -> Result<Process, String> {
        let t = self.template;
        let mut env = t.resolve_env(client, &self.pod_name).await?;
        let volumes = self.volumes(client).await?;
        for (var, from, to) in &self.env_rewrites {
            for (name, value) in env.iter_mut() {
                if name == var {
                    *value = value.replace(from, to);
                }
            }
        }
        let log = self.dir.join(format!("{}.log", self.pod_name));
        let file = std::fs::File::create(&log).map_err(|e| format!("creating log: {e}"))?;
        let err = file.try_clone().map_err(|e| e.to_string())?;
        let (mut cmd, container) = match &self.runtime {
            Runtime::Process {
                program,
                kubeconfig,
            } => (
                self.process(program, kubeconfig.as_deref(), env, &volumes),
                None,
            ),
            Runtime::Container {
                podman,
                service_account,
                apiserver,
            } => {
                let name = format!("{}-{}", self.pod_name, std::process::id());
                let cmd = self.container(
                    podman,
                    &name,
                    service_account.as_deref(),
                    *apiserver,
                    env,
                    &volumes,
                )?;
                (cmd, Some((podman.clone(), name)))
            }
        };
        let started = std::time::Instant::now();
        let child = cmd
            .stdin(std::process::Stdio::null())
            .stdout(file)
            .stderr(err)
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("starting {}: {e}", self.pod_name))?;
        Ok(Process {
            name: self.pod_name,
            child,
            log,
            ready: t.http_probe("readinessProbe"),
            started,
            container,
        })
    }

    fn process(
        &self,
        program: &Path,
        kubeconfig: Option<&Path>,
        mut env: Vec<(String, String)>,
        volumes: &[Volume],
    ) -> tokio::process::Command {
        let mut args = self.template.args();
        for v in volumes {
            let local = v.local.display().to_string();
            for a in args.iter_mut() {
                *a = a.replace(&v.mount, &local);
            }
            for (_, value) in env.iter_mut() {
                *value = value.replace(&v.mount, &local);
            }
        }
        if let Some(k) = kubeconfig {
            args.push(format!("--kubeconfig={}", k.display()));
        }
        let mut cmd = tokio::process::Command::new(program);
        cmd.args(&args).env_clear().envs(env);
        cmd
    }

    /// `podman run` as a kubelet would start the container. Values of the environment go to podman
    /// through its own environment (`--env NAME`), so no secret shows in a process list.
    fn container(
        &self,
        podman: &testenv::Podman,
        name: &str,
        service_account: Option<&Path>,
        apiserver: u16,
        env: Vec<(String, String)>,
        volumes: &[Volume],
    ) -> Result<tokio::process::Command, String> {
        let t = self.template;
        let image = t.container["image"]
            .as_str()
            .ok_or("container without image")?;
        let mut cmd = podman.tokio_command();
        cmd.args([
            "run",
            "--rm",
            "--name",
            name,
            "--network=host",
            "--pull=never",
        ]);
        cmd.args(security_flags(
            &t.pod_security,
            &t.container["securityContext"],
        )?);
        let kubelet_env = [
            ("KUBERNETES_SERVICE_HOST".to_owned(), "127.0.0.1".to_owned()),
            ("KUBERNETES_SERVICE_PORT".to_owned(), apiserver.to_string()),
        ];
        for (var, value) in env.into_iter().chain(kubelet_env) {
            cmd.arg("--env").arg(&var).env(var, value);
        }
        if let Some(dir) = service_account {
            cmd.arg("--volume")
                .arg(format!("{}:{SERVICE_ACCOUNT_MOUNT}:ro", dir.display()));
        }
        for v in volumes {
            let mode = if v.read_only { ":ro" } else { "" };
            cmd.arg("--volume")
                .arg(format!("{}:{}{mode}", v.local.display(), v.mount));
        }
        cmd.arg(image).args(t.args());
        Ok(cmd)
    }

    /// The container's volume mounts, each made a local directory: an emptyDir empty and writable
    /// by every user of the pod; a Secret volume holding the Secret's keys (or its `items`) as
    /// files, read-only, as the kubelet projects it.
    async fn volumes(&self, client: &kube::Client) -> Result<Vec<Volume>, String> {
        use std::os::unix::fs::PermissionsExt as _;
        let mut out = Vec::new();
        for m in self.template.container["volumeMounts"]
            .as_array()
            .cloned()
            .unwrap_or_default()
        {
            let vol = self
                .template
                .volumes
                .iter()
                .find(|v| v["name"] == m["name"])
                .ok_or_else(|| format!("volumeMount {} without volume", m["name"]))?;
            let local = self.dir.join(format!(
                "{}-{}",
                self.pod_name,
                m["name"].as_str().unwrap_or("vol")
            ));
            std::fs::create_dir_all(&local).map_err(|e| e.to_string())?;
            let read_only = if vol.get("emptyDir").is_some() {
                std::fs::set_permissions(&local, std::fs::Permissions::from_mode(0o777))
                    .map_err(|e| e.to_string())?;
                m["readOnly"] == true
            } else if let Some(secret) = vol.get("secret") {
                self.project_secret(client, secret, &local).await?;
                true
            } else {
                return Err(format!(
                    "volume {vol} is not emulated (only emptyDir and secret)"
                ));
            };
            out.push(Volume {
                mount: m["mountPath"].as_str().unwrap_or_default().to_owned(),
                local,
                read_only,
            });
        }
        Ok(out)
    }

    /// Writes Secret volume `secret`'s files into `dir`: its `items` (key → path), else every key.
    async fn project_secret(
        &self,
        client: &kube::Client,
        secret: &Value,
        dir: &Path,
    ) -> Result<(), String> {
        use std::os::unix::fs::PermissionsExt as _;
        let name = secret["secretName"]
            .as_str()
            .ok_or("secret volume without secretName")?;
        let found = Api::<Secret>::namespaced(client.clone(), &self.template.namespace)
            .get(name)
            .await
            .map_err(|e| format!("reading Secret {name} for its volume: {e}"))?;
        let data = found.data.unwrap_or_default();
        let files: Vec<(String, String)> = match secret["items"].as_array() {
            Some(items) => items
                .iter()
                .map(|i| {
                    (
                        i["key"].as_str().unwrap_or_default().to_owned(),
                        i["path"].as_str().unwrap_or_default().to_owned(),
                    )
                })
                .collect(),
            None => data.keys().map(|k| (k.clone(), k.clone())).collect(),
        };
        let mode = secret["defaultMode"].as_u64().unwrap_or(0o644) as u32;
        for (key, path) in files {
            let value = data.get(&key).ok_or_else(|| {
                format!("Secret {name} has no key {key:?} for its volume (the pod would not start)")
            })?;
            let file = dir.join(&path);
            std::fs::write(&file, &value.0).map_err(|e| e.to_string())?;
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(mode))
                .map_err(|e| e.to_string())?;
        }
        Ok(())
    }
}

/// One volume mount of the container and the local directory standing for it.
#[derive(Debug)]
struct Volume {
    mount: String,
    local: PathBuf,
    read_only: bool,
}

/// podman flags for a pod's and its container's securityContext (the container's wins). A field
/// this does not know is an error, so a chart change cannot go untested unnoticed.
pub fn security_flags(pod: &Value, container: &Value) -> Result<Vec<String>, String> {
    let known_pod = ["runAsNonRoot", "runAsUser", "runAsGroup", "seccompProfile"];
    let known_container = [
        "runAsNonRoot",
        "runAsUser",
        "runAsGroup",
        "seccompProfile",
        "allowPrivilegeEscalation",
        "readOnlyRootFilesystem",
        "capabilities",
    ];
    for (ctx, known) in [(pod, &known_pod[..]), (container, &known_container[..])] {
        let fields = ctx.as_object().into_iter().flat_map(|f| f.keys());
        if let Some(other) = fields.into_iter().find(|k| !known.contains(&k.as_str())) {
            return Err(format!("securityContext.{other} is not emulated"));
        }
    }
    let field = |name: &str| {
        let c = &container[name];
        if c.is_null() { &pod[name] } else { c }
    };
    let mut flags = Vec::new();
    match (field("runAsUser").as_u64(), field("runAsGroup").as_u64()) {
        (Some(u), Some(g)) => flags.push(format!("--user={u}:{g}")),
        (Some(u), None) => flags.push(format!("--user={u}")),
        (None, _) => {}
    }
    if field("runAsNonRoot") == true && field("runAsUser").as_u64() == Some(0) {
        return Err("runAsNonRoot with runAsUser 0: the kubelet refuses to start it".into());
    }
    match field("seccompProfile")["type"].as_str() {
        None | Some("RuntimeDefault") => {}
        Some("Unconfined") => flags.push("--security-opt=seccomp=unconfined".into()),
        Some(other) => return Err(format!("seccompProfile {other} is not emulated")),
    }
    if container["allowPrivilegeEscalation"] == false {
        flags.push("--security-opt=no-new-privileges".into());
    }
    if container["readOnlyRootFilesystem"] == true {
        // Kubernetes mounts nothing writable that the pod does not ask for; podman would add
        // tmpfs at /tmp and /run.
        flags.extend(["--read-only".into(), "--read-only-tmpfs=false".into()]);
    }
    let caps = &container["capabilities"];
    for (key, flag) in [("drop", "--cap-drop"), ("add", "--cap-add")] {
        for cap in caps[key].as_array().into_iter().flatten() {
            let cap = cap.as_str().ok_or("capabilities are strings")?;
            flags.push(format!("{flag}={}", cap.to_lowercase()));
        }
    }
    Ok(flags)
}

impl Drop for Process {
    fn drop(&mut self) {
        if let Some((podman, name)) = &self.container {
            let _ = podman
                .command()
                .args(["rm", "--force", "--time=0", "--ignore", name])
                .output();
        }
    }
}

impl Process {
    /// The last lines of the process's output.
    pub fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// Polls the readiness probe until it answers 200; fails early when the process exits.
    pub async fn wait_ready(&mut self, timeout: Duration) -> Result<(), String> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait().map_err(|e| e.to_string())? {
                return Err(format!(
                    "{} exited before it was ready ({status}):\n{}",
                    self.name,
                    self.log_tail(40)
                ));
            }
            if http_status(self.ready.1, &self.ready.0).await == Some(200) {
                return Ok(());
            }
            if tokio::time::Instant::now() > deadline {
                return Err(format!(
                    "{}: GET :{}{} did not answer 200 within {timeout:?}:\n{}",
                    self.name,
                    self.ready.1,
                    self.ready.0,
                    self.log_tail(40)
                ));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Still running?
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// SIGTERM, then waits (at most 30 s) for the exit status.
    pub async fn terminate(&mut self) -> std::process::ExitStatus {
        let pid = self.child.id().expect("the process runs").to_string();
        let killed = std::process::Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .expect("run kill");
        assert!(killed.success(), "kill -TERM {pid}");
        tokio::time::timeout(Duration::from_secs(30), self.child.wait())
            .await
            .unwrap_or_else(|_| panic!("{} did not exit within 30 s of SIGTERM", self.name))
            .expect("wait for the process")
    }
}

/// The HTTP status of `GET path` on 127.0.0.1:`port`, `None` when nothing answers.
pub async fn http_status(port: u16, path: &str) -> Option<u16> {
    let text = http_get(port, path, &[]).await?;
    text.split_whitespace().nth(1)?.parse().ok()
}

/// A minimal HTTP/1.0 GET on loopback: the whole response, `None` when nothing answers.
pub async fn http_get(port: u16, path: &str, headers: &[(&str, &str)]) -> Option<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::time::timeout(
        Duration::from_secs(2),
        tokio::net::TcpStream::connect(("127.0.0.1", port)),
    )
    .await
    .ok()?
    .ok()?;
    let mut req = format!("GET {path} HTTP/1.0\r\nHost: localhost\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).await.ok()?;
    let mut out = String::new();
    tokio::time::timeout(Duration::from_secs(5), s.read_to_string(&mut out))
        .await
        .ok()?
        .ok()?;
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::expand;

    #[test]
    fn references_expand_as_the_kubelet_expands_them() {
        let lookup = |n: &str| match n {
            "A_SERVICE_HOST" => Some("10.0.0.7".to_owned()),
            "A_SERVICE_PORT" => Some("8080".to_owned()),
            _ => None,
        };
        assert_eq!(
            expand("http://$(A_SERVICE_HOST):$(A_SERVICE_PORT)/v1", lookup),
            "http://10.0.0.7:8080/v1"
        );
        assert_eq!(
            expand("http://$(B_SERVICE_HOST):$(A_SERVICE_PORT)/v1", lookup),
            "http://$(B_SERVICE_HOST):8080/v1",
            "an unknown name stays as written"
        );
        assert_eq!(
            expand("$$(A_SERVICE_HOST) $x $(open", lookup),
            "$(A_SERVICE_HOST) $x $(open"
        );
    }
}
