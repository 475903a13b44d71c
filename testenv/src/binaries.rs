//! Finding or building the Go programs the tests run: kube-apiserver and etcd (the control plane),
//! helm and skaffold (the chart and dev-loop checks), the upstream CloudStack CCM (side by side),
//! cert-manager's controllers (issuing the Secrets the service-controller uploads).
//!
//! Nothing is downloaded prebuilt: each is compiled from source through the Go module proxy (see
//! `testenv/go/`) and cached by version under `$HOME/.cache/cloud-controllers/testenv/`, so only the
//! first run on a machine pays (≈ 5–7 minutes for the control plane, ≈ 2 for helm, ≈ 4–8 for
//! skaffold, ≈ 2–3 for the upstream CloudStack CCM, ≈ 3 for cert-manager).
//! `TESTENV_KUBE_APISERVER`, `TESTENV_ETCD`, `TESTENV_HELM`, `TESTENV_SKAFFOLD`,
//! `TESTENV_CLOUDSTACK_CCM` and `TESTENV_CERT_MANAGER` point at prebuilt binaries instead.

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::error::{Error, Result};

/// The kube-apiserver release the tests run against.
pub const KUBE_APISERVER_VERSION: &str = "v1.36.3";
/// The etcd release the tests run against.
pub const ETCD_VERSION: &str = "v3.6.14";
/// The helm release the chart is linted and rendered with.
pub const HELM_VERSION: &str = "v3.22.0";
/// The skaffold release `skaffold.yaml` is checked with (newest schema: skaffold/v4beta13).
pub const SKAFFOLD_VERSION: &str = "v2.16.1";
/// The upstream CloudStack CCM (apache/cloudstack-kubernetes-provider) the CloudStack provider is
/// compared with, side by side on the same simulator.
pub const CLOUDSTACK_CCM_VERSION: &str = "v1.2.0";
/// cert-manager (github.com/cert-manager/cert-manager) whose controllers issue the Secrets of the
/// cert-manager tests, and whose CRDs they install.
pub const CERT_MANAGER_VERSION: &str = "v1.21.2";
/// Oldest Go that can build [`KUBE_APISERVER_VERSION`] (its go directive).
pub const MIN_GO: &str = "1.26";

/// Paths of the two control-plane binaries.
#[derive(Debug, Clone)]
pub struct Binaries {
    pub kube_apiserver: PathBuf,
    pub etcd: PathBuf,
}

/// One binary we know how to build with `go build` from a throw-away module.
struct Component {
    name: &'static str,
    version: &'static str,
    env_var: &'static str,
    go_mod: &'static str,
    /// The module's one Go file (`main.go`, or a `tools.go` naming a dependency's main package).
    go_file: (&'static str, &'static str),
    /// What `go build` builds: `.` for our own main.go, else the dependency's main package.
    package: &'static str,
    tags: &'static str,
    ldflags: &'static str,
    /// A go.sum to start from (empty: none; `go mod tidy` writes the rest): pins the hashes of
    /// modules the checksum database cannot vouch for.
    go_sum: &'static str,
    /// Extra environment for this build's `go` commands only.
    env: &'static [(&'static str, &'static str)],
}

const KUBE_APISERVER: Component = Component {
    name: "kube-apiserver",
    version: KUBE_APISERVER_VERSION,
    env_var: "TESTENV_KUBE_APISERVER",
    go_mod: include_str!("../go/kube-apiserver.go.mod"),
    go_file: ("main.go", include_str!("../go/kube-apiserver.main.go")),
    package: ".",
    tags: "",
    // Without the version stamp the apiserver reports v0.0.0 and clients refuse some features.
    ldflags: "-s -w -X k8s.io/component-base/version.gitVersion=v1.36.3 \
              -X k8s.io/component-base/version.gitMajor=1 \
              -X k8s.io/component-base/version.gitMinor=36",
    go_sum: "",
    env: &[],
};

const ETCD: Component = Component {
    name: "etcd",
    version: ETCD_VERSION,
    env_var: "TESTENV_ETCD",
    go_mod: include_str!("../go/etcd.go.mod"),
    go_file: ("main.go", include_str!("../go/etcd.main.go")),
    package: ".",
    tags: "",
    ldflags: "-s -w",
    go_sum: "",
    env: &[],
};

const HELM: Component = Component {
    name: "helm",
    version: HELM_VERSION,
    env_var: "TESTENV_HELM",
    go_mod: include_str!("../go/helm.go.mod"),
    go_file: ("tools.go", include_str!("../go/helm.tools.go")),
    package: "helm.sh/helm/v3/cmd/helm",
    tags: "",
    // As helm's Makefile does for a release: the version, and the Kubernetes version its default
    // capabilities report (from the client-go it is built with, v0.37).
    ldflags: "-s -w -X helm.sh/helm/v3/internal/version.version=v3.22.0 \
              -X helm.sh/helm/v3/internal/version.metadata= \
              -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 \
              -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=37 \
              -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 \
              -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=37",
    go_sum: "",
    env: &[],
};

const SKAFFOLD: Component = Component {
    name: "skaffold",
    version: SKAFFOLD_VERSION,
    env_var: "TESTENV_SKAFFOLD",
    go_mod: include_str!("../go/skaffold.go.mod"),
    go_file: ("tools.go", include_str!("../go/skaffold.tools.go")),
    package: "github.com/GoogleContainerTools/skaffold/v2/cmd/skaffold",
    // skaffold's Makefile tags for a static Linux build (cgo is off here).
    tags: "timetzdata osusergo netgo",
    ldflags: "-s -w \
              -X github.com/GoogleContainerTools/skaffold/v2/pkg/skaffold/version.version=v2.16.1",
    go_sum: "",
    env: &[],
};

const CLOUDSTACK_CCM: Component = Component {
    name: "cloudstack-ccm",
    version: CLOUDSTACK_CCM_VERSION,
    env_var: "TESTENV_CLOUDSTACK_CCM",
    go_mod: include_str!("../go/cloudstack-ccm.go.mod"),
    go_file: ("tools.go", include_str!("../go/cloudstack-ccm.tools.go")),
    package: "github.com/apache/cloudstack-kubernetes-provider/cmd/cloudstack-ccm",
    tags: "",
    // As its Makefile and Dockerfile build it (their -X flags name k8s.io/kubernetes, which it
    // does not link, so they change nothing).
    ldflags: "-s -w",
    go_sum: include_str!("../go/cloudstack-ccm.go.sum"),
    // The checksum database has no entry for the github.com/apache modules; go.sum pins them.
    env: &[("GONOSUMDB", "github.com/apache")],
};

/// cert-manager's own controllers behind a main of ours (`testenv/go/cert-manager.main.go`): its
/// `cmd/controller` is a module of its own that the proxy does not serve, the main module is.
const CERT_MANAGER: Component = Component {
    name: "cert-manager",
    // cert-manager's version (as in the go.mod) and a revision of our main.go: the cache key, so
    // bump the suffix when either changes.
    version: "v1.21.2-1",
    env_var: "TESTENV_CERT_MANAGER",
    go_mod: include_str!("../go/cert-manager.go.mod"),
    go_file: ("main.go", include_str!("../go/cert-manager.main.go")),
    package: ".",
    tags: "",
    ldflags: "-s -w -X github.com/cert-manager/cert-manager/pkg/util.AppVersion=v1.21.2",
    go_sum: "",
    env: &[],
};

const HROBOT_CHECK: Component = Component {
    name: "hrobot-check",
    // hrobot-go's version (as in the go.mod) and a revision of our main.go: the cache key, so bump
    // the suffix when either changes.
    version: "v0.2.5-1",
    env_var: "TESTENV_HROBOT_CHECK",
    go_mod: include_str!("../go/hrobot-check.go.mod"),
    go_file: ("main.go", include_str!("../go/hrobot-check.main.go")),
    package: ".",
    tags: "",
    ldflags: "-s -w",
    go_sum: "",
    env: &[],
};

/// The Kubernetes node components `cargo xtask cluster` runs, from the same `k8s.io/kubernetes`
/// release and go.mod as [`KUBE_APISERVER`] (the module line is renamed when it is written).
const fn kube_component(
    name: &'static str,
    env_var: &'static str,
    main_go: &'static str,
) -> Component {
    Component {
        name,
        version: KUBE_APISERVER_VERSION,
        env_var,
        go_mod: include_str!("../go/kube-apiserver.go.mod"),
        go_file: ("main.go", main_go),
        package: ".",
        tags: "",
        ldflags: KUBE_APISERVER.ldflags,
        go_sum: "",
        env: &[],
    }
}

const KUBELET: Component = kube_component(
    "kubelet",
    "TESTENV_KUBELET",
    include_str!("../go/kubelet.main.go"),
);
const KUBE_PROXY: Component = kube_component(
    "kube-proxy",
    "TESTENV_KUBE_PROXY",
    include_str!("../go/kube-proxy.main.go"),
);
const KUBE_SCHEDULER: Component = kube_component(
    "kube-scheduler",
    "TESTENV_KUBE_SCHEDULER",
    include_str!("../go/kube-scheduler.main.go"),
);
const KUBE_CONTROLLER_MANAGER: Component = kube_component(
    "kube-controller-manager",
    "TESTENV_KUBE_CONTROLLER_MANAGER",
    include_str!("../go/kube-controller-manager.main.go"),
);
const KUBECTL: Component = kube_component(
    "kubectl",
    "TESTENV_KUBECTL",
    include_str!("../go/kubectl.main.go"),
);

/// The cluster's two images' programs (no dependencies; the version is a revision of the source:
/// bump it when the Go file changes).
const PAUSE: Component = Component {
    name: "pause",
    version: "1",
    env_var: "TESTENV_PAUSE",
    go_mod: include_str!("../go/pause.go.mod"),
    go_file: ("main.go", include_str!("../go/pause.main.go")),
    package: ".",
    tags: "",
    ldflags: "-s -w",
    go_sum: "",
    env: &[],
};
const HELLO: Component = Component {
    name: "hello",
    version: "2",
    env_var: "TESTENV_HELLO",
    go_mod: include_str!("../go/hello.go.mod"),
    go_file: ("main.go", include_str!("../go/hello.main.go")),
    package: ".",
    tags: "",
    ldflags: "-s -w",
    go_sum: "",
    env: &[],
};

/// Programs whose own go.mod has no `replace` directives, so `go install pkg@version` builds them
/// as their release does; all binaries land in `<cache>/<name>-<version>/bin/`.
struct GoInstall {
    name: &'static str,
    version: &'static str,
    packages: &'static [&'static str],
    /// The binaries `packages` produce (checked to decide whether the cache is complete).
    binaries: &'static [&'static str],
    tags: &'static str,
    ldflags: &'static str,
}

/// The container runtime of `cargo xtask cluster` (runc comes from Debian's packages).
pub const CONTAINERD_VERSION: &str = "v2.4.2";
/// The CNI plugins the cluster's pod network uses.
pub const CNI_PLUGINS_VERSION: &str = "v1.10.0";
/// go-containerregistry: `crane registry serve` is the cluster's image registry, `crane` pushes.
pub const CRANE_VERSION: &str = "v0.22.1";

const CONTAINERD: GoInstall = GoInstall {
    name: "containerd",
    version: CONTAINERD_VERSION,
    packages: &[
        "github.com/containerd/containerd/v2/cmd/containerd@v2.4.2",
        "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2@v2.4.2",
        "github.com/containerd/containerd/v2/cmd/ctr@v2.4.2",
    ],
    binaries: &["containerd", "containerd-shim-runc-v2", "ctr"],
    // containerd's Makefile tags for a static build without cgo; no btrfs headers here.
    tags: "urfave_cli_no_docs osusergo netgo static_build no_btrfs",
    ldflags: "-s -w -X github.com/containerd/containerd/v2/version.Version=v2.4.2",
};

const CNI_PLUGINS: GoInstall = GoInstall {
    name: "cni-plugins",
    version: CNI_PLUGINS_VERSION,
    packages: &[
        "github.com/containernetworking/plugins/plugins/main/bridge@v1.10.0",
        "github.com/containernetworking/plugins/plugins/main/loopback@v1.10.0",
        "github.com/containernetworking/plugins/plugins/ipam/host-local@v1.10.0",
        "github.com/containernetworking/plugins/plugins/meta/portmap@v1.10.0",
    ],
    binaries: &["bridge", "loopback", "host-local", "portmap"],
    tags: "",
    ldflags: "-s -w",
};

const CRANE: GoInstall = GoInstall {
    name: "crane",
    version: CRANE_VERSION,
    packages: &["github.com/google/go-containerregistry/cmd/crane@v0.22.1"],
    binaries: &["crane"],
    tags: "",
    ldflags: "-s -w",
};

/// Everything `cargo xtask cluster` runs besides etcd and kube-apiserver ([`ensure`]).
#[derive(Debug, Clone)]
pub struct ClusterBinaries {
    pub kubelet: PathBuf,
    pub kube_proxy: PathBuf,
    pub kube_scheduler: PathBuf,
    pub kube_controller_manager: PathBuf,
    pub kubectl: PathBuf,
    /// `containerd`, `containerd-shim-runc-v2` and `ctr`.
    pub containerd_bin: PathBuf,
    /// `bridge`, `loopback`, `host-local` and `portmap`.
    pub cni_bin: PathBuf,
    pub crane: PathBuf,
    pub pause: PathBuf,
    pub hello: PathBuf,
}

/// Returns the cluster's binaries, building whichever is missing from the cache (one at a time,
/// at low priority: each prints what it cost). Blocking.
pub fn ensure_cluster() -> Result<ClusterBinaries> {
    Ok(ClusterBinaries {
        kubelet: ensure_one(&KUBELET)?,
        kube_proxy: ensure_one(&KUBE_PROXY)?,
        kube_scheduler: ensure_one(&KUBE_SCHEDULER)?,
        kube_controller_manager: ensure_one(&KUBE_CONTROLLER_MANAGER)?,
        kubectl: ensure_one(&KUBECTL)?,
        containerd_bin: ensure_installed(&CONTAINERD)?,
        cni_bin: ensure_installed(&CNI_PLUGINS)?,
        crane: ensure_installed(&CRANE)?.join("crane"),
        pause: ensure_one(&PAUSE)?,
        hello: ensure_one(&HELLO)?,
    })
}

/// Whether every Go-built program the tests use (with `cluster`, the cluster's too) is in the
/// cache already: a run that builds none of them is a warm one.
pub fn all_cached(cluster: bool) -> bool {
    let built = |c: &Component| is_executable(&cached_binary(c).1);
    let tools = [
        &ETCD,
        &KUBE_APISERVER,
        &HELM,
        &SKAFFOLD,
        &CLOUDSTACK_CCM,
        &CERT_MANAGER,
    ];
    let node = [
        &KUBELET,
        &KUBE_PROXY,
        &KUBE_SCHEDULER,
        &KUBE_CONTROLLER_MANAGER,
        &KUBECTL,
        &PAUSE,
        &HELLO,
    ];
    tools.into_iter().all(built) && (!cluster || node.into_iter().all(built))
}

/// Returns both binaries, building whichever is missing from the cache. Blocking; safe to call from
/// several processes at once (a file lock makes the second wait for the first build).
pub fn ensure() -> Result<Binaries> {
    Ok(Binaries {
        etcd: ensure_one(&ETCD)?,
        kube_apiserver: ensure_one(&KUBE_APISERVER)?,
    })
}

/// Paths of the chart tools.
#[derive(Debug, Clone)]
pub struct Tools {
    pub helm: PathBuf,
    pub skaffold: PathBuf,
}

/// Returns helm and skaffold, building whichever is missing from the cache (like [`ensure`]).
pub fn ensure_tools() -> Result<Tools> {
    Ok(Tools {
        helm: ensure_helm()?,
        skaffold: ensure_skaffold()?,
    })
}

/// Returns helm, building it when it is not cached.
pub fn ensure_helm() -> Result<PathBuf> {
    ensure_one(&HELM)
}

/// Returns skaffold, building it when it is not cached.
pub fn ensure_skaffold() -> Result<PathBuf> {
    ensure_one(&SKAFFOLD)
}

/// Returns the upstream CloudStack CCM (`cloudstack-ccm` of apache/cloudstack-kubernetes-provider
/// [`CLOUDSTACK_CCM_VERSION`]), building it when it is not cached (≈ 2–3 minutes, ≈ 80 MB), for the
/// side-by-side tests. `cargo xtask test` builds it beside helm and skaffold.
pub fn cloudstack_ccm() -> Result<PathBuf> {
    ensure_one(&CLOUDSTACK_CCM)
}

/// Returns cert-manager's controllers ([`CERT_MANAGER_VERSION`], behind our
/// `testenv/go/cert-manager.main.go`: `--kubeconfig`, `--master`, `--namespace`, `--controllers`;
/// no leader election), building it when it is not cached. `cargo xtask test` builds it beside
/// helm and skaffold.
pub fn cert_manager() -> Result<PathBuf> {
    ensure_one(&CERT_MANAGER)
}

/// Returns `hrobot-check` (hrobot-go, HCCM's Robot client, behind a small CLI: see
/// `testenv/go/hrobot-check.main.go`), building it when it is not cached (seconds).
pub fn ensure_hrobot_check() -> Result<PathBuf> {
    ensure_one(&HROBOT_CHECK)
}

/// Where built binaries and their build modules are cached.
pub fn cache_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("TESTENV_CACHE_DIR") {
        return PathBuf::from(dir);
    }
    home_cache().join("testenv")
}

/// `$HOME/.cache/cloud-controllers`: everything the project caches on a machine.
pub(crate) fn home_cache() -> PathBuf {
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    home.join(".cache/cloud-controllers")
}

/// Where `c` is cached: its directory and its binary there.
fn cached_binary(c: &Component) -> (PathBuf, PathBuf) {
    let dir = cache_dir().join(format!("{}-{}", c.name, c.version));
    let binary = dir.join(c.name);
    (dir, binary)
}

fn ensure_one(c: &Component) -> Result<PathBuf> {
    if let Some(path) = std::env::var_os(c.env_var) {
        let path = PathBuf::from(path);
        return if is_executable(&path) {
            Ok(path)
        } else {
            Err(Error::BadOverride {
                env_var: c.env_var,
                path,
            })
        };
    }
    let (dir, binary) = cached_binary(c);
    if is_executable(&binary) {
        return Ok(binary);
    }
    fs::create_dir_all(&dir).map_err(Error::io(format!("creating {}", dir.display())))?;
    let lock_path = dir.join(".build.lock");
    let lock =
        File::create(&lock_path).map_err(Error::io(format!("creating {}", lock_path.display())))?;
    lock.lock()
        .map_err(Error::io(format!("locking {}", lock_path.display())))?;
    // Another process may have finished the build while we waited for the lock.
    if !is_executable(&binary) {
        build(c, &dir, &binary)?;
    }
    Ok(binary)
}

/// The `bin/` directory of a [`GoInstall`], installing it first when any binary is missing.
fn ensure_installed(g: &GoInstall) -> Result<PathBuf> {
    let dir = cache_dir().join(format!("{}-{}", g.name, g.version));
    let bin = dir.join("bin");
    let complete = |bin: &Path| g.binaries.iter().all(|b| is_executable(&bin.join(b)));
    if complete(&bin) {
        return Ok(bin);
    }
    fs::create_dir_all(&dir).map_err(Error::io(format!("creating {}", dir.display())))?;
    let lock_path = dir.join(".build.lock");
    let lock =
        File::create(&lock_path).map_err(Error::io(format!("creating {}", lock_path.display())))?;
    lock.lock()
        .map_err(Error::io(format!("locking {}", lock_path.display())))?;
    if complete(&bin) {
        return Ok(bin);
    }
    let c = Component {
        name: g.name,
        version: g.version,
        env_var: "",
        go_mod: "",
        go_file: ("", ""),
        package: "",
        tags: g.tags,
        ldflags: g.ldflags,
        go_sum: "",
        env: &[],
    };
    check_go("go", &c)?;
    eprintln!(
        "testenv: building {} {} (go install) into {}",
        g.name,
        g.version,
        bin.display()
    );
    let started = std::time::Instant::now();
    let partial = dir.join("bin.partial");
    let _ = fs::remove_dir_all(&partial);
    let mut args = vec![
        "install",
        "-trimpath",
        "-tags",
        g.tags,
        "-ldflags",
        g.ldflags,
    ];
    args.extend(g.packages);
    go_in(
        &c,
        &dir,
        "go install",
        &args,
        &[("GOBIN", partial.as_os_str())],
    )?;
    let _ = fs::remove_dir_all(&bin);
    fs::rename(&partial, &bin)
        .map_err(Error::io(format!("moving {} into place", bin.display())))?;
    eprintln!("testenv: built {} in {:.0?}", g.name, started.elapsed());
    Ok(bin)
}

fn build(c: &Component, dir: &Path, binary: &Path) -> Result<()> {
    check_go("go", c)?;
    let src = dir.join("src");
    fs::create_dir_all(&src).map_err(Error::io(format!("creating {}", src.display())))?;
    // The Kubernetes components share kube-apiserver's go.mod; each module is named after its
    // binary.
    let go_mod = c.go_mod.replacen(
        "module testenv.local/kube-apiserver",
        &format!("module testenv.local/{}", c.name),
        1,
    );
    write_if_changed(&src.join("go.mod"), &go_mod)?;
    write_if_changed(&src.join(c.go_file.0), c.go_file.1)?;
    if !c.go_sum.is_empty() {
        // Always from the pinned lines: tidy verifies what it downloads against them.
        fs::write(src.join("go.sum"), c.go_sum).map_err(Error::io(format!(
            "writing {}",
            src.join("go.sum").display()
        )))?;
    }
    eprintln!(
        "testenv: building {} {} through the Go module proxy into {} \
         (the first time takes minutes; cached afterwards)",
        c.name,
        c.version,
        dir.display()
    );
    let started = std::time::Instant::now();
    go(c, &src, "go mod tidy", &["mod", "tidy"])?;
    let tmp = binary.with_extension("partial");
    let tmp_arg = tmp.to_string_lossy().into_owned();
    go(
        c,
        &src,
        "go build",
        &[
            "build",
            "-trimpath",
            "-tags",
            c.tags,
            "-ldflags",
            c.ldflags,
            "-o",
            &tmp_arg,
            c.package,
        ],
    )?;
    // Rename last, so a half-written binary is never mistaken for a cached one.
    fs::rename(&tmp, binary)
        .map_err(Error::io(format!("moving {} into place", binary.display())))?;
    eprintln!("testenv: built {} in {:.0?}", c.name, started.elapsed());
    Ok(())
}

fn go(c: &Component, dir: &Path, step: &'static str, args: &[&str]) -> Result<()> {
    let env: Vec<(&str, &std::ffi::OsStr)> = c
        .env
        .iter()
        .map(|&(k, v)| (k, std::ffi::OsStr::new(v)))
        .collect();
    go_in(c, dir, step, args, &env)
}

fn go_in(
    c: &Component,
    dir: &Path,
    step: &'static str,
    args: &[&str],
    env: &[(&str, &std::ffi::OsStr)],
) -> Result<()> {
    // At low priority: these builds take minutes and share the machine with everything else.
    // Not the control plane's two: every test binary waits for them, and with the Rust test build
    // beside them at a higher priority, that build took the cores first and then waited.
    let niceness = if matches!(c.name, "etcd" | "kube-apiserver") {
        "0"
    } else {
        "10"
    };
    let output = Command::new("nice")
        .args(["-n", niceness, "go"])
        .args(args)
        .envs(env.iter().copied())
        .current_dir(dir)
        // `local`: never let Go fetch another toolchain; nojsonv2: with Go 1.27's jsonv2 default
        // the apiserver serves a broken /openapi/v2 and `kubectl apply` fails.
        .env("GOTOOLCHAIN", "local")
        .env("CGO_ENABLED", "0")
        .env("GOEXPERIMENT", "nojsonv2")
        .output()
        .map_err(Error::io(format!("running go {}", args.join(" "))))?;
    if output.status.success() {
        return Ok(());
    }
    let mut text = String::from_utf8_lossy(&output.stderr).into_owned();
    text.push_str(&String::from_utf8_lossy(&output.stdout));
    Err(Error::GoBuild {
        component: c.name,
        version: c.version,
        step,
        goproxy: std::env::var("GOPROXY").unwrap_or_else(|_| "default".into()),
        output: tail(&text, 30),
    })
}

/// Fails with install instructions when `go` is absent or older than [`MIN_GO`].
fn check_go(go: &str, c: &Component) -> Result<()> {
    let missing = |found: String| Error::GoMissing {
        component: c.name,
        min: MIN_GO,
        found,
        env_var: c.env_var,
    };
    let output = Command::new(go)
        .args(["env", "GOVERSION"])
        .env("GOTOOLCHAIN", "local")
        .output()
        .map_err(|e| missing(format!("`go` could not be run ({e})")))?;
    let version = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    match parse_go_version(&version) {
        Some(v) if v >= parse_go_version(&format!("go{MIN_GO}")).unwrap_or_default() => Ok(()),
        // A development build reports no number; let it try.
        None if version.starts_with("devel") => Ok(()),
        _ => Err(missing(format!("`go env GOVERSION` says {version:?}"))),
    }
}

fn parse_go_version(v: &str) -> Option<(u32, u32)> {
    let mut parts = v.strip_prefix("go")?.split(['.', 'r', 'b']);
    Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
}

fn write_if_changed(path: &Path, content: &str) -> Result<()> {
    if fs::read_to_string(path).ok().as_deref() != Some(content) {
        fs::write(path, content).map_err(Error::io(format!("writing {}", path.display())))?;
    }
    Ok(())
}

pub(crate) fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The last `lines` lines of `text`.
pub(crate) fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_versions_parse() {
        assert_eq!(parse_go_version("go1.26.8"), Some((1, 26)));
        assert_eq!(parse_go_version("go1.27rc1"), Some((1, 27)));
        assert_eq!(parse_go_version("go1.26"), Some((1, 26)));
        assert_eq!(parse_go_version("devel go1.28-abc"), None);
        assert!(parse_go_version("go1.9.2") < parse_go_version("go1.26.0"));
    }

    #[test]
    fn a_missing_go_names_what_to_install() {
        let err = check_go("/nonexistent/bin/go", &KUBE_APISERVER).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("Go toolchain (>= 1.26)"), "{msg}");
        assert!(msg.contains("Install Go 1.26 or newer"), "{msg}");
        assert!(msg.contains("TESTENV_KUBE_APISERVER"), "{msg}");
    }
}
