//! Helpers of the chart tests (dev only): where the chart and the binaries are, helm and skaffold run
//! in a throw-away home, rendered manifests as JSON values, and [`pod`]: running what a rendered
//! Deployment describes as a local process.
//!
//! helm and skaffold are built from source through the Go module proxy and cached, like the
//! control plane (`testenv::ensure_helm`, `testenv::ensure_skaffold`); `cargo xtask prepare` builds
//! them ahead of the tests.

pub mod pod;
pub mod run;
pub mod scenario;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use serde_json::Value;

/// The four controllers: binary name = image name = files/rbac/<name>.yaml = app.kubernetes.io/component.
pub const CONTROLLERS: [&str; 4] = [
    "node-controller",
    "lifecycle-controller",
    "service-controller",
    "route-controller",
];

/// The values block of a controller (`node-controller` → `nodeController`).
pub fn values_key(controller: &str) -> String {
    let mut out = String::new();
    let mut upper = false;
    for c in controller.chars() {
        if c == '-' {
            upper = true;
        } else if upper {
            out.extend(c.to_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out
}

/// The repository root.
pub fn repo() -> PathBuf {
    testenv::workspace_root()
}

/// `charts/cloud-controllers`.
pub fn chart() -> PathBuf {
    repo().join("charts/cloud-controllers")
}

/// The chart's `ci/*.yaml` value files, sorted.
pub fn ci_values() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(chart().join("ci"))
        .expect("read charts/cloud-controllers/ci")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    files
}

/// helm, built through the Go module proxy on first use and cached.
pub fn helm() -> &'static Path {
    static HELM: OnceLock<PathBuf> = OnceLock::new();
    HELM.get_or_init(|| testenv::ensure_helm().unwrap_or_else(|e| panic!("helm: {e}")))
}

/// skaffold, built through the Go module proxy on first use and cached.
pub fn skaffold() -> &'static Path {
    static SKAFFOLD: OnceLock<PathBuf> = OnceLock::new();
    SKAFFOLD.get_or_init(|| testenv::ensure_skaffold().unwrap_or_else(|e| panic!("skaffold: {e}")))
}

/// A home directory for helm and skaffold that lives as long as the test binary: no user config,
/// cache or repositories leak in, skaffold neither checks for updates nor collects metrics.
fn tool_home() -> &'static Path {
    static HOME: OnceLock<tempfile::TempDir> = OnceLock::new();
    HOME.get_or_init(|| {
        let dir = tempfile::Builder::new()
            .prefix("chart-tests-home-")
            .tempdir()
            .expect("temp home");
        let skaffold = dir.path().join(".skaffold");
        std::fs::create_dir_all(&skaffold).expect("create .skaffold");
        std::fs::write(
            skaffold.join("config"),
            "global:\n  collect-metrics: false\n  update-check: false\n  survey:\n    disable-prompt: true\nkubeContexts: []\n",
        )
        .expect("write skaffold config");
        dir
    })
    .path()
}

/// `program` with the repository as working directory and the throw-away home.
pub fn tool(program: &Path) -> Command {
    let home = tool_home();
    let mut cmd = Command::new(program);
    cmd.current_dir(repo())
        .env("HOME", home)
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .env("XDG_CACHE_HOME", home.join(".cache"))
        .env("XDG_DATA_HOME", home.join(".local/share"))
        .env("SKAFFOLD_UPDATE_CHECK", "false")
        .env("SKAFFOLD_INTERACTIVE", "false")
        .env("SKAFFOLD_COLLECT_METRICS", "false")
        // Renders never need a cluster; make sure none is used by accident.
        .env("KUBECONFIG", home.join("no-kubeconfig"))
        .env_remove("HELM_NAMESPACE");
    cmd
}

/// Runs `cmd`, returning its output (never panics on a non-zero exit).
pub fn run(mut cmd: Command) -> Output {
    cmd.output()
        .unwrap_or_else(|e| panic!("running {cmd:?}: {e}"))
}

/// A `helm template` of the chart.
#[derive(Debug, Clone)]
pub struct Render {
    pub release: String,
    pub namespace: String,
    values: Vec<PathBuf>,
    set: Vec<String>,
    set_json: Vec<String>,
    extra: Vec<String>,
}

impl Default for Render {
    fn default() -> Self {
        Render::new("cloud-controllers", "kube-system")
    }
}

impl Render {
    pub fn new(release: &str, namespace: &str) -> Render {
        Render {
            release: release.into(),
            namespace: namespace.into(),
            values: Vec::new(),
            set: Vec::new(),
            set_json: Vec::new(),
            extra: Vec::new(),
        }
    }

    /// `-f file` (relative paths are relative to the repository).
    pub fn values(mut self, file: impl AsRef<Path>) -> Render {
        self.values.push(repo().join(file));
        self
    }

    /// `--set key=value`.
    pub fn set(mut self, key: &str, value: impl std::fmt::Display) -> Render {
        self.set.push(format!("{key}={value}"));
        self
    }

    /// `--set-json key=json`.
    pub fn set_json(mut self, key: &str, json: &Value) -> Render {
        self.set_json.push(format!("{key}={json}"));
        self
    }

    /// Any other `helm template` argument.
    pub fn arg(mut self, arg: impl Into<String>) -> Render {
        self.extra.push(arg.into());
        self
    }

    pub fn command(&self) -> Command {
        let mut cmd = tool(helm());
        cmd.arg("template")
            .arg(&self.release)
            .arg(chart())
            .args(["--namespace", &self.namespace]);
        for v in &self.values {
            cmd.arg("--values").arg(v);
        }
        for s in &self.set {
            cmd.args(["--set", s]);
        }
        for s in &self.set_json {
            cmd.args(["--set-json", s]);
        }
        cmd.args(&self.extra);
        cmd
    }

    pub fn output(&self) -> Output {
        run(self.command())
    }

    /// The rendered objects; panics with helm's message when rendering fails.
    pub fn objects(&self) -> Vec<Value> {
        let out = self.output();
        assert!(
            out.status.success(),
            "helm template {self:?} failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        parse_yaml_stream(&String::from_utf8_lossy(&out.stdout))
    }

    /// helm's error; panics when rendering succeeds.
    pub fn error(&self) -> String {
        let out = self.output();
        assert!(
            !out.status.success(),
            "helm template {self:?} should have failed, rendered:\n{}",
            String::from_utf8_lossy(&out.stdout)
        );
        String::from_utf8_lossy(&out.stderr).into_owned()
    }
}

/// The documents of a YAML stream as JSON values (empty documents dropped).
pub fn parse_yaml_stream(text: &str) -> Vec<Value> {
    let docs: Vec<Value> =
        serde_saphyr::from_multiple(text).unwrap_or_else(|e| panic!("parsing YAML: {e}\n{text}"));
    docs.into_iter()
        .filter(|d| !d.is_null() && d.as_object().is_some_and(|o| !o.is_empty()))
        .collect()
}

pub fn kind(obj: &Value) -> &str {
    obj["kind"].as_str().unwrap_or_default()
}

pub fn name(obj: &Value) -> &str {
    obj["metadata"]["name"].as_str().unwrap_or_default()
}

pub fn namespace(obj: &Value) -> Option<&str> {
    obj["metadata"]["namespace"].as_str()
}

/// `app.kubernetes.io/component`.
pub fn component(obj: &Value) -> Option<&str> {
    obj["metadata"]["labels"]["app.kubernetes.io/component"].as_str()
}

/// `Kind/name` (and the namespace when there is one), for messages and object sets.
pub fn describe(obj: &Value) -> String {
    match namespace(obj) {
        Some(ns) => format!("{}/{ns}/{}", kind(obj), name(obj)),
        None => format!("{}/{}", kind(obj), name(obj)),
    }
}

/// The one object of `kind` named `name`.
pub fn find<'a>(objects: &'a [Value], kind_: &str, name_: &str) -> &'a Value {
    objects
        .iter()
        .find(|o| kind(o) == kind_ && name(o) == name_)
        .unwrap_or_else(|| {
            panic!(
                "no {kind_} {name_} in: {:?}",
                objects.iter().map(describe).collect::<Vec<_>>()
            )
        })
}

/// The objects of `kind`.
/// The ValidatingAdmissionPolicy and binding named `<…>-<suffix>` (`annotations`,
/// `source-ranges`) that `render` makes; none when it renders none.
pub fn admission_policy(render: &Render, suffix: &str) -> Vec<Value> {
    render
        .objects()
        .into_iter()
        .filter(|o| {
            kind(o).starts_with("ValidatingAdmissionPolicy")
                && name(o).ends_with(&format!("-{suffix}"))
        })
        .collect()
}

pub fn of_kind<'a>(objects: &'a [Value], kind_: &'a str) -> impl Iterator<Item = &'a Value> {
    objects.iter().filter(move |o| kind(o) == kind_)
}

/// A binary of this workspace as cargo built it (same profile as this test binary). The chart tests
/// run the controllers' real binaries, which only their own crates could name with
/// `env!("CARGO_BIN_EXE_…")`; `cargo xtask test` builds them before the tests, and so does a plain
/// `cargo test --workspace` (every controller crate has integration tests).
pub fn binary(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("current exe");
    // <target>/<profile>/deps/<test binary>
    let dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("test binary in <target>/<profile>/deps");
    let path = dir.join(name);
    assert!(
        path.is_file(),
        "{} is missing: build the binaries first (`cargo build -p node-controller -p \
         lifecycle-controller -p service-controller -p route-controller -p cloud-sim`; \
         `cargo xtask test` does it)",
        path.display()
    );
    path
}

/// A free TCP port on loopback (released again; a port race is possible but unlikely).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind(("127.0.0.1", 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// What the apiserver of `client` serves, for [`apply`] and dynamic objects.
pub async fn discovery(client: &kube::Client) -> kube::discovery::Discovery {
    kube::discovery::Discovery::new(client.clone())
        .run()
        .await
        .expect("discovery")
}

/// Server-side apply of a rendered object (`dry_run`: dryRun=All), strict field validation, the
/// resource found through discovery. The error names the object and the apiserver's reason.
pub async fn apply(
    client: &kube::Client,
    discovery: &kube::discovery::Discovery,
    obj: &Value,
    dry_run: bool,
) -> Result<(), String> {
    use kube::api::{
        Api, DynamicObject, GroupVersionKind, Patch, PatchParams, ValidationDirective,
    };
    use kube::discovery::Scope;
    let api_version = obj["apiVersion"].as_str().unwrap_or_default();
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let gvk = GroupVersionKind::gvk(group, version, kind(obj));
    let (ar, caps) = discovery
        .resolve_gvk(&gvk)
        .ok_or_else(|| format!("{}: the apiserver does not serve {gvk:?}", describe(obj)))?;
    let api: Api<DynamicObject> = match caps.scope {
        Scope::Namespaced => {
            let ns = namespace(obj).ok_or_else(|| format!("{}: no namespace", describe(obj)))?;
            Api::namespaced_with(client.clone(), ns, &ar)
        }
        Scope::Cluster => {
            if namespace(obj).is_some() {
                return Err(format!(
                    "{}: cluster-scoped but has a namespace",
                    describe(obj)
                ));
            }
            Api::all_with(client.clone(), &ar)
        }
    };
    let mut pp = PatchParams::apply("chart-tests")
        .force()
        .validation(ValidationDirective::Strict);
    if dry_run {
        pp = pp.dry_run();
    }
    api.patch(name(obj), &pp, &Patch::Apply(obj))
        .await
        .map(|_| ())
        .map_err(|e| format!("{}: {e}", describe(obj)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_keys() {
        assert_eq!(values_key("node-controller"), "nodeController");
        assert_eq!(values_key("lifecycle-controller"), "lifecycleController");
    }

    #[test]
    fn yaml_streams_drop_empty_documents() {
        let docs =
            parse_yaml_stream("---\n# only a comment\n---\nkind: A\nmetadata:\n  name: a\n---\n");
        assert_eq!(docs.len(), 1);
        assert_eq!(describe(&docs[0]), "A/a");
    }
}
