//! `cargo xtask release --registry REGISTRY --version VERSION`: what users install, built and
//! pushed by one command, here and in the release workflow (`.github/workflows/release.yml`).
//!
//! - the five images (four controllers and cloud-sim) for `linux/amd64` and `linux/arm64`, from the
//!   [`Dockerfile`](../../Dockerfile) with podman, each pushed as one OCI index under
//!   `REGISTRY/<image>:VERSION`. arm64 is cross-compiled on the build machine (the Dockerfile's
//!   `cross-arm64` builder: Debian's rustc with the arm64 standard library), never emulated;
//! - the chart with `version` and `appVersion` = VERSION and its image defaults pointing at
//!   REGISTRY, pushed with `helm push` to `oci://REGISTRY/charts`;
//! - a CycloneDX SBOM per image and platform (cargo-cyclonedx, from crates.io, installed into the
//!   cache), the packaged chart, the image digests and a `SHA256SUMS` of them all, in
//!   `target/release-artifacts/VERSION/`.
//!
//! Everything is checked before anything is built or pushed: the version is SemVer, the platforms
//! are ones we build, a release version (no pre-release part) comes from a clean work tree, and the
//! registry accepts a push to every repository the release writes (a blob upload started and
//! cancelled). Images come from podman's layer cache when nothing changed, so a second run rebuilds
//! nothing (it says so per image).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail, ensure};

use crate::images::{IMAGES, host_arch, repo};

/// The platforms the Dockerfile builds.
pub const PLATFORMS: [&str; 2] = ["linux/amd64", "linux/arm64"];

/// cargo-cyclonedx, installed from crates.io into the cache on first use.
const CYCLONEDX_VERSION: &str = "0.5.9";

/// The chart's name, as `helm push` names its repository under `REGISTRY/charts`.
const CHART: &str = "cloud-controllers";

/// The registry the chart's image defaults name (values.yaml), replaced by REGISTRY.
const CHART_DEFAULT_REGISTRY: &str = "ghcr.io/cloud-controllers";

#[derive(Debug, Clone, clap::Args)]
pub struct ReleaseArgs {
    /// Where the images go (`REGISTRY/<image>:VERSION`) and the chart (`oci://REGISTRY/charts`),
    /// e.g. `ghcr.io/cloud-controllers` or `localhost:5001`. `localhost` and `127.0.0.1` are spoken
    /// to over plain HTTP.
    #[arg(long)]
    pub registry: String,
    /// SemVer: the images' tag, the chart's version and appVersion. A version without a
    /// pre-release part (`1.2.3`) is built only from a clean work tree.
    #[arg(long)]
    pub version: String,
    /// Platforms to build (comma-separated).
    #[arg(long, value_delimiter = ',', default_values_t = PLATFORMS.map(String::from))]
    pub platform: Vec<String>,
    /// Cargo profile of the binaries: release (what is published) or dev-image (quicker to build;
    /// what the tests release).
    #[arg(long, default_value = "release")]
    pub profile: String,
    /// Build, measure and write the SBOMs and checksums, but push nothing (no registry is asked).
    #[arg(long)]
    pub no_push: bool,
    /// Pull the Dockerfile's base images from their registries (podman build --pull=missing), as
    /// the release workflow does, instead of the local stand-ins built from Debian's packages
    /// (dev/podman/base-images.sh) for machines that reach no container registry.
    #[arg(long)]
    pub pull_base_images: bool,
}

/// One platform's image, built and measured.
#[derive(Debug, Clone)]
pub struct PlatformImage {
    pub image: String,
    pub platform: String,
    /// The local tag, `localhost/release/<image>:<version>-<arch>`.
    pub local: String,
    pub id: String,
    pub size: u64,
    pub binary_size: u64,
    /// Whether podman built a new image (false: every layer came from the cache).
    pub rebuilt: bool,
}

/// A registry reference split for the HTTP probe: `host[:port]` and the path below it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Registry {
    pub host: String,
    pub path: String,
}

impl Registry {
    pub fn parse(registry: &str) -> anyhow::Result<Self> {
        let r = registry.trim_end_matches('/');
        ensure!(
            !r.contains("://"),
            "--registry {registry:?}: give the registry without a scheme (e.g. ghcr.io/owner or \
             localhost:5001)"
        );
        let (host, path) = r.split_once('/').unwrap_or((r, ""));
        ensure!(
            !host.is_empty()
                && host
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':')),
            "--registry {registry:?}: {host:?} is not a registry host[:port]"
        );
        ensure!(
            path.chars().all(|c| c.is_ascii_lowercase()
                || c.is_ascii_digit()
                || matches!(c, '.' | '_' | '-' | '/')),
            "--registry {registry:?}: a repository path is lowercase letters, digits and . _ - /"
        );
        Ok(Self {
            host: host.to_owned(),
            path: path.to_owned(),
        })
    }

    /// Plain HTTP for registries on this machine (the cluster's, a test's).
    pub fn plain_http(&self) -> bool {
        let name = self.host.split(':').next().unwrap_or_default();
        matches!(name, "localhost" | "127.0.0.1")
    }

    pub fn reference(&self) -> String {
        if self.path.is_empty() {
            self.host.clone()
        } else {
            format!("{}/{}", self.host, self.path)
        }
    }

    /// The repository path (below the host) of `name`.
    fn repository(&self, name: &str) -> String {
        if self.path.is_empty() {
            name.to_owned()
        } else {
            format!("{}/{name}", self.path)
        }
    }
}

/// SemVer 2.0.0 (semver.org's grammar): MAJOR.MINOR.PATCH, numbers without leading zeros, an
/// optional `-pre.release` and `+build`. Returns whether it has a pre-release part.
pub fn check_semver(version: &str) -> anyhow::Result<bool> {
    let why = |what: &str| {
        anyhow::anyhow!(
            "--version {version:?} is not SemVer (MAJOR.MINOR.PATCH[-PRERELEASE][+BUILD], e.g. \
             1.2.3 or 1.2.3-rc.1; no leading `v`): {what}"
        )
    };
    let (rest, build) = match version.split_once('+') {
        Some((r, b)) => (r, Some(b)),
        None => (version, None),
    };
    let (core, pre) = match rest.split_once('-') {
        Some((c, p)) => (c, Some(p)),
        None => (rest, None),
    };
    let numbers: Vec<&str> = core.split('.').collect();
    if numbers.len() != 3 {
        return Err(why("three numbers separated by dots"));
    }
    for n in &numbers {
        if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
            return Err(why(&format!("{n:?} is not a number")));
        }
        if n.len() > 1 && n.starts_with('0') {
            return Err(why(&format!("{n:?} has a leading zero")));
        }
    }
    let identifiers = |part: &str, what: &str, numeric_rule: bool| -> anyhow::Result<()> {
        for id in part.split('.') {
            if id.is_empty() || !id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') {
                return Err(why(&format!("{what} identifier {id:?}")));
            }
            if numeric_rule
                && id.len() > 1
                && id.starts_with('0')
                && id.bytes().all(|b| b.is_ascii_digit())
            {
                return Err(why(&format!("{what} identifier {id:?} has a leading zero")));
            }
        }
        Ok(())
    };
    if let Some(pre) = pre {
        identifiers(pre, "pre-release", true)?;
    }
    if let Some(build) = build {
        identifiers(build, "build", false)?;
    }
    Ok(pre.is_some())
}

/// `linux/<arch>` → `<arch>`, for the platforms we build.
pub fn arch_of(platform: &str) -> anyhow::Result<&'static str> {
    match platform {
        "linux/amd64" => Ok("amd64"),
        "linux/arm64" | "linux/arm64/v8" => Ok("arm64"),
        other => bail!(
            "unknown platform {other:?}: the images are built for {} (arm64 cross-compiled)",
            PLATFORMS.join(" and ")
        ),
    }
}

/// The Rust target triple of an architecture.
fn triple(arch: &str) -> &'static str {
    match arch {
        "arm64" => "aarch64-unknown-linux-gnu",
        _ => "x86_64-unknown-linux-gnu",
    }
}

/// Files `git status` reports as changed or untracked in `repo` (empty: clean).
pub fn dirty_files(repo: &Path) -> anyhow::Result<Vec<String>> {
    let out = Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(["status", "--porcelain", "--untracked-files=normal"])
        .output()
        .context("running git status")?;
    ensure!(
        out.status.success(),
        "git status in {}: {}",
        repo.display(),
        String::from_utf8_lossy(&out.stderr).trim()
    );
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.get(3..).unwrap_or(l).to_owned())
        .collect())
}

/// The checks that need nothing built: SemVer, platforms, the work tree. Returns the architectures.
pub fn check_input(args: &ReleaseArgs, repo: &Path) -> anyhow::Result<Vec<&'static str>> {
    let prerelease = check_semver(&args.version)?;
    Registry::parse(&args.registry)?;
    ensure!(
        matches!(args.profile.as_str(), "release" | "dev-image"),
        "--profile {:?}: release or dev-image",
        args.profile
    );
    let mut arches = Vec::new();
    for p in &args.platform {
        let arch = arch_of(p.trim())?;
        if !arches.contains(&arch) {
            arches.push(arch);
        }
    }
    ensure!(!arches.is_empty(), "--platform: none given");
    for arch in &arches {
        ensure!(
            *arch == host_arch() || (host_arch() == "amd64" && *arch == "arm64"),
            "linux/{arch} cannot be built on this {} machine: the Dockerfile cross-compiles \
             linux/arm64 on linux/amd64 only",
            host_arch()
        );
    }
    if !prerelease {
        let dirty = dirty_files(repo)?;
        if !dirty.is_empty() {
            let shown: Vec<&str> = dirty.iter().take(10).map(String::as_str).collect();
            bail!(
                "{} is a release version and the work tree is not clean ({} changed or untracked \
                 file(s): {}{}): commit or remove them, or release a pre-release version \
                 ({}-rc.1)",
                args.version,
                dirty.len(),
                shown.join(", "),
                if dirty.len() > shown.len() {
                    ", …"
                } else {
                    ""
                },
                args.version
            );
        }
    }
    Ok(arches)
}

pub fn run(args: &ReleaseArgs) -> anyhow::Result<()> {
    let repo = repo();
    let arches = check_input(args, &repo)?;
    let registry = Registry::parse(&args.registry)?;
    if !args.no_push {
        let mut repositories: Vec<String> = IMAGES.iter().map(|i| registry.repository(i)).collect();
        repositories.push(registry.repository(&format!("charts/{CHART}")));
        for repository in &repositories {
            probe_push(&registry, repository)?;
        }
        eprintln!(
            "release: {} accepts pushes to {} repositories",
            registry.reference(),
            repositories.len()
        );
    }
    let helm = testenv::ensure_helm()?;
    let cyclonedx = ensure_cyclonedx()?;
    let podman = testenv::ensure_podman()?;
    let pull = if args.pull_base_images {
        "--pull=missing"
    } else {
        crate::images::stand_ins_with(&podman, &repo, arches.iter().any(|a| *a != host_arch()))?;
        "--pull=never"
    };
    let out = repo.join("target/release-artifacts").join(&args.version);
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    let revision = git_revision(&repo);

    // Every image of the release from one snapshot of the build context: a work tree edited while
    // the release builds (ten builds) must not give images of different sources.
    let snapshot = tempfile::Builder::new()
        .prefix("cloud-controllers-release-")
        .tempdir()?;
    let status = Command::new("cp")
        .arg("-a")
        .args(crate::images::build_context(&repo)?)
        .arg(snapshot.path())
        .status()
        .context("copying the build context")?;
    ensure!(status.success(), "copying the build context");
    let context = snapshot.path();

    let mut images = Vec::new();
    let mut build_time = BTreeMap::new();
    for arch in &arches {
        let started = Instant::now();
        let builder = if *arch == host_arch() {
            None
        } else {
            Some(cross_builder(&podman, context, arch, pull)?)
        };
        for image in IMAGES {
            let local = format!("localhost/release/{image}:{}-{arch}", args.version);
            let before = image_id(&podman, &local);
            let mut cmd = podman.command();
            cmd.args(["build", pull, "--network=host", "--layers"])
                .args(["--platform", &format!("linux/{arch}")])
                .args(["--target", image, "--tag", &local])
                .args(["--build-arg", &format!("CARGO_PROFILE={}", args.profile)])
                .args(["--build-arg", &format!("VERSION={}", args.version)])
                .args(["--build-arg", &format!("REVISION={revision}")])
                .args([
                    "--build-arg",
                    &format!("BUILDPLATFORM=linux/{}", host_arch()),
                ]);
            if let Some(builder) = &builder {
                cmd.args(["--build-arg", &format!("BUILDER={builder}")]);
            }
            cmd.arg(context);
            crate::images::run_build(cmd, &format!("{image}-{arch}"))?;
            let id = image_id(&podman, &local).context("the image just built")?;
            let size = crate::images::image_size(&podman, &local)?;
            let binary = crate::images::binary_of(&podman, &local, image)?;
            let platform = crate::images::image_platform(&podman, &local)?;
            // What a node pulls by platform must run there: a cache that mixed platforms up
            // (see the Dockerfile's runtime stage) is caught here, before anything is pushed.
            ensure!(
                platform == format!("linux/{arch}") && binary.arch == Some(*arch),
                "{local}: built for linux/{arch}, but its config claims {platform} and its binary \
                 is {}; remove it (podman rmi {local}) and the cached layers it came from \
                 (podman image prune), then run again",
                binary.arch.unwrap_or("not an amd64 or arm64 ELF file")
            );
            let binary_size = binary.size;
            let rebuilt = before.as_deref() != Some(id.as_str());
            eprintln!(
                "release: {local} {} ({:.1} MB, binary {:.1} MB)",
                if rebuilt {
                    "built"
                } else {
                    "unchanged (every layer from the cache)"
                },
                mb(size),
                mb(binary_size)
            );
            images.push(PlatformImage {
                image: image.to_owned(),
                platform: format!("linux/{arch}"),
                local,
                id,
                size,
                binary_size,
                rebuilt,
            });
        }
        build_time.insert(format!("linux/{arch}"), started.elapsed());
    }

    // SBOMs, per image and platform: the crates compiled into the binary for that target.
    let sbom_started = Instant::now();
    let sboms = write_sboms(&cyclonedx, &repo, &out, &arches)?;
    eprintln!(
        "release: {} SBOMs (CycloneDX, cargo-cyclonedx {CYCLONEDX_VERSION}) in {:.1} s",
        sboms.len(),
        sbom_started.elapsed().as_secs_f64()
    );

    let chart = package_chart(&helm, &repo, &out, &registry, &args.version)?;

    let mut digests = BTreeMap::new();
    if !args.no_push {
        for image in IMAGES {
            let list = format!("localhost/release/{image}:{}", args.version);
            let target = format!("{}/{image}:{}", registry.reference(), args.version);
            let platform_images: Vec<&PlatformImage> =
                images.iter().filter(|p| p.image == image).collect();
            let digest = push_index(&podman, &registry, &list, &target, &platform_images)?;
            digests.insert(target, digest);
        }
        let (reference, digest) = push_chart(&helm, &registry, &chart, &args.version)?;
        digests.insert(reference, digest);
    }
    write_checksums(&out, &digests, &images)?;

    print_summary(
        &images,
        &build_time,
        &digests,
        &out,
        &registry,
        &args.version,
    );
    // Working containers only: the untagged build stages stay, so that a second run finds every
    // layer in the cache (`cargo xtask images` prunes them; then the build stage's cargo run is
    // repeated, finds everything fresh, and `cp -p` gives the final layers the same digests).
    if podman.builds_running().is_empty() {
        let _ = podman.remove_build_leftovers();
    }
    Ok(())
}

fn mb(bytes: u64) -> f64 {
    bytes as f64 / 1e6
}

fn git_revision(repo: &Path) -> String {
    Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(["rev-parse", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_else(|| "unknown".into())
}

fn image_id(podman: &testenv::Podman, name: &str) -> Option<String> {
    let out = podman
        .command()
        .args(["image", "inspect", "--format", "{{.Id}}", name])
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// The Dockerfile's `cross-<arch>` stage as an image (podman takes BUILDER as an image name, not a
/// stage), from the layer cache when it is unchanged.
pub(crate) fn cross_builder(
    podman: &testenv::Podman,
    repo: &Path,
    arch: &str,
    pull: &str,
) -> anyhow::Result<String> {
    let name = cross_builder_name(arch);
    let started = Instant::now();
    let mut cmd = podman.command();
    cmd.args(["build", pull, "--network=host", "--layers"])
        .args(["--target", &format!("cross-{arch}"), "--tag", &name])
        .arg(repo);
    crate::images::run_build(cmd, &format!("cross-{arch}"))?;
    eprintln!(
        "release: cross builder {name} ready in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    Ok(name)
}

pub(crate) fn cross_builder_name(arch: &str) -> String {
    format!("localhost/cloud-controllers-cross-{arch}:latest")
}

/// `curl`'s answer to a request: the status, the (last) head, and the body's start.
fn curl_head(args: &[&str], stdin_header: Option<&str>) -> anyhow::Result<(u16, String, String)> {
    let head_file = tempfile::NamedTempFile::new()?;
    let mut cmd = Command::new("curl");
    cmd.args(["-sS", "--max-time", "20", "-D"])
        .arg(head_file.path())
        .args(args);
    if stdin_header.is_some() {
        // The Authorization header comes on stdin, never on the command line (`ps` shows that).
        cmd.args(["-H", "@-"]);
        cmd.stdin(std::process::Stdio::piped());
    }
    cmd.stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().context("running curl")?;
    if let Some(h) = stdin_header {
        use std::io::Write as _;
        child
            .stdin
            .take()
            .context("curl's stdin")?
            .write_all(format!("{h}\n").as_bytes())?;
    }
    let out = child.wait_with_output()?;
    ensure!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr).trim()
    );
    let head = std::fs::read_to_string(head_file.path())?;
    // With a redirect or `100 Continue` there are several heads: the last one counts.
    let last = head
        .split("\r\n\r\n")
        .filter(|h| h.starts_with("HTTP/"))
        .last()
        .unwrap_or_default()
        .to_owned();
    let status = last
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .with_context(|| format!("no HTTP status in {last:?}"))?;
    let body: String = String::from_utf8_lossy(&out.stdout)
        .trim()
        .chars()
        .take(300)
        .collect();
    Ok((status, last, body))
}

fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.trim().eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

/// Starts a blob upload to `repository` and cancels it: the registry's own answer to whether it
/// takes a push there, asked before anything is pushed. A registry that asks for a token is asked
/// with the credentials `podman login` stored (never printed).
fn probe_push(registry: &Registry, repository: &str) -> anyhow::Result<()> {
    let scheme = if registry.plain_http() {
        "http"
    } else {
        "https"
    };
    let url = format!(
        "{scheme}://{}/v2/{repository}/blobs/uploads/",
        registry.host
    );
    let refused = |why: String| {
        anyhow::anyhow!(
            "the registry {} refuses a push to {repository} ({why}); nothing was built or pushed",
            registry.host
        )
    };
    let (mut status, mut head, mut body) =
        curl_head(&["-X", "POST", "-H", "Content-Length: 0", &url], None)
            .map_err(|e| refused(format!("{e:#}")))?;
    if status == 401 {
        let challenge = header(&head, "www-authenticate")
            .unwrap_or_default()
            .to_owned();
        let token = bearer_token(registry, repository, &challenge)
            .map_err(|e| refused(format!("HTTP 401, and no token: {e:#}")))?;
        (status, head, body) = curl_head(
            &["-X", "POST", "-H", "Content-Length: 0", &url],
            Some(&format!("Authorization: Bearer {token}")),
        )
        .map_err(|e| refused(format!("{e:#}")))?;
    }
    if status != 202 {
        return Err(refused(format!(
            "HTTP {status} to POST /v2/{repository}/blobs/uploads/: {body}"
        )));
    }
    if let Some(location) = header(&head, "location") {
        let location = if location.starts_with('/') {
            format!("{scheme}://{}{location}", registry.host)
        } else {
            location.to_owned()
        };
        let _ = curl_head(&["-X", "DELETE", &location], None);
    }
    Ok(())
}

/// A push token from the registry's token service (`WWW-Authenticate: Bearer realm=…`), with the
/// credentials of `podman login` (`$REGISTRY_AUTH_FILE`, `$XDG_RUNTIME_DIR/containers/auth.json`,
/// `~/.docker/config.json`), or the GITHUB_TOKEN-style `REGISTRY_PASSWORD`/`REGISTRY_USER`.
fn bearer_token(registry: &Registry, repository: &str, challenge: &str) -> anyhow::Result<String> {
    let params: BTreeMap<String, String> = challenge
        .trim_start_matches("Bearer")
        .split(',')
        .filter_map(|kv| {
            let (k, v) = kv.trim().split_once('=')?;
            Some((k.to_owned(), v.trim_matches('"').to_owned()))
        })
        .collect();
    let realm = params
        .get("realm")
        .with_context(|| format!("the challenge {challenge:?} names no realm"))?;
    let mut url = format!("{realm}?scope=repository:{repository}:push,pull");
    if let Some(service) = params.get("service") {
        url.push_str(&format!("&service={service}"));
    }
    let basic = registry_credentials(&registry.host)
        .with_context(|| format!("no credentials for {}: `podman login` first", registry.host))?;
    let out = {
        let mut cmd = Command::new("curl");
        cmd.args(["-sS", "--fail", "--max-time", "20", "-H", "@-", &url])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        let mut child = cmd.spawn().context("running curl")?;
        {
            use std::io::Write as _;
            child
                .stdin
                .take()
                .context("curl's stdin")?
                .write_all(format!("Authorization: Basic {basic}\n").as_bytes())?;
        }
        child.wait_with_output()?
    };
    ensure!(
        out.status.success(),
        "the token service refused: {}",
        String::from_utf8_lossy(&out.stderr).trim()
    );
    let body: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    body["token"]
        .as_str()
        .or_else(|| body["access_token"].as_str())
        .map(str::to_owned)
        .context("the token service answered without a token")
}

/// Base64 `user:password` for `host` from the container auth files.
fn registry_credentials(host: &str) -> Option<String> {
    let mut files: Vec<PathBuf> = Vec::new();
    if let Some(f) = std::env::var_os("REGISTRY_AUTH_FILE") {
        files.push(f.into());
    }
    if let Some(d) = std::env::var_os("XDG_RUNTIME_DIR") {
        files.push(PathBuf::from(d).join("containers/auth.json"));
    }
    files.push(PathBuf::from(format!(
        "/run/containers/{}/auth.json",
        uid()
    )));
    if let Some(h) = std::env::var_os("HOME") {
        files.push(PathBuf::from(h).join(".docker/config.json"));
    }
    files.into_iter().find_map(|f| {
        let v: serde_json::Value = serde_json::from_slice(&std::fs::read(f).ok()?).ok()?;
        v["auths"][host]["auth"].as_str().map(str::to_owned)
    })
}

fn uid() -> u32 {
    use std::os::unix::fs::MetadataExt as _;
    std::fs::metadata("/proc/self")
        .map(|m| m.uid())
        .unwrap_or(0)
}

/// Pushes the per-platform images as one OCI index: a local manifest list made anew from them,
/// then `podman manifest push --all`. Returns the index's digest.
fn push_index(
    podman: &testenv::Podman,
    registry: &Registry,
    list: &str,
    target: &str,
    platform_images: &[&PlatformImage],
) -> anyhow::Result<String> {
    // A list of the same name from an earlier run: replaced, its images kept.
    let _ = podman.command().args(["manifest", "rm", list]).output();
    crate::images::podman_output(podman, &["manifest", "create", list])?;
    for p in platform_images {
        let arch = arch_of(&p.platform)?;
        crate::images::podman_output(
            podman,
            &[
                "manifest",
                "add",
                "--os",
                "linux",
                "--arch",
                arch,
                list,
                &format!("containers-storage:{}", p.local),
            ],
        )?;
    }
    let digest_file = tempfile::NamedTempFile::new()?;
    let started = Instant::now();
    let tls = format!("--tls-verify={}", !registry.plain_http());
    crate::images::podman_output(
        podman,
        &[
            "manifest",
            "push",
            "--all",
            "--quiet",
            "--format",
            "oci",
            &tls,
            "--digestfile",
            &digest_file.path().display().to_string(),
            list,
            &format!("docker://{target}"),
        ],
    )?;
    let digest = std::fs::read_to_string(digest_file.path())?
        .trim()
        .to_owned();
    ensure!(
        digest.starts_with("sha256:"),
        "podman manifest push of {list} wrote no digest ({digest:?})"
    );
    eprintln!(
        "release: pushed {target}@{digest} ({} platforms) in {:.1} s",
        platform_images.len(),
        started.elapsed().as_secs_f64()
    );
    Ok(digest)
}

/// The chart with version and appVersion = VERSION and image defaults at REGISTRY, packaged into
/// `out`. Returns the .tgz.
fn package_chart(
    helm: &Path,
    repo: &Path,
    out: &Path,
    registry: &Registry,
    version: &str,
) -> anyhow::Result<PathBuf> {
    let work = tempfile::Builder::new()
        .prefix("cloud-controllers-chart-")
        .tempdir()?;
    let chart = work.path().join(CHART);
    let status = Command::new("cp")
        .arg("-a")
        .arg(repo.join("charts").join(CHART))
        .arg(&chart)
        .status()?;
    ensure!(status.success(), "copying the chart");
    let values_path = chart.join("values.yaml");
    let values = std::fs::read_to_string(&values_path)?;
    let defaults = format!("repository: {CHART_DEFAULT_REGISTRY}/");
    ensure!(
        values.matches(&defaults).count() == IMAGES.len(),
        "values.yaml names {} images under {CHART_DEFAULT_REGISTRY}/, not {}: the release \
         rewrites exactly those",
        values.matches(&defaults).count(),
        IMAGES.len()
    );
    std::fs::write(
        &values_path,
        values.replace(&defaults, &format!("repository: {}/", registry.reference())),
    )?;
    let manifest_path = chart.join("Chart.yaml");
    let manifest = std::fs::read_to_string(&manifest_path)?;
    let mut set = 0;
    let rewritten: Vec<String> = manifest
        .lines()
        .map(|l| {
            if l.starts_with("version:") {
                set += 1;
                format!("version: {version}")
            } else if l.starts_with("appVersion:") {
                set += 1;
                format!("appVersion: \"{version}\"")
            } else {
                l.to_owned()
            }
        })
        .collect();
    ensure!(set == 2, "Chart.yaml has no version or appVersion line");
    std::fs::write(&manifest_path, rewritten.join("\n") + "\n")?;
    let o = Command::new(helm)
        .arg("package")
        .arg(&chart)
        .arg("--destination")
        .arg(out)
        .output()
        .context("running helm package")?;
    ensure!(
        o.status.success(),
        "helm package: {}",
        String::from_utf8_lossy(&o.stderr).trim()
    );
    let tgz = out.join(format!("{CHART}-{version}.tgz"));
    ensure!(tgz.exists(), "helm package wrote no {}", tgz.display());
    eprintln!(
        "release: chart {} (version and appVersion {version}, images at {})",
        tgz.display(),
        registry.reference()
    );
    Ok(tgz)
}

/// `helm push`; returns the chart's reference and digest.
fn push_chart(
    helm: &Path,
    registry: &Registry,
    tgz: &Path,
    version: &str,
) -> anyhow::Result<(String, String)> {
    let dest = format!("oci://{}/charts", registry.reference());
    let mut cmd = Command::new(helm);
    cmd.arg("push").arg(tgz).arg(&dest);
    if registry.plain_http() {
        cmd.arg("--plain-http");
    }
    let o = cmd.output().context("running helm push")?;
    ensure!(
        o.status.success(),
        "helm push to {dest}: {}",
        String::from_utf8_lossy(&o.stderr).trim()
    );
    // helm prints `Pushed: <ref>` and `Digest: sha256:…` (on stderr or stdout by version).
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    let digest = said
        .lines()
        .find_map(|l| l.strip_prefix("Digest:"))
        .map(|d| d.trim().to_owned())
        .with_context(|| format!("helm push printed no digest: {said}"))?;
    let reference = format!("{}/charts/{CHART}:{version}", registry.reference());
    eprintln!("release: pushed the chart {reference}@{digest}");
    Ok((reference, digest))
}

/// cargo-cyclonedx from crates.io, installed into the cache once (`cargo install --locked`).
pub(crate) fn ensure_cyclonedx() -> anyhow::Result<PathBuf> {
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    let root = home.join(format!(
        ".cache/cloud-controllers/tools/cargo-cyclonedx-{CYCLONEDX_VERSION}"
    ));
    let binary = root.join("bin/cargo-cyclonedx");
    if binary.exists() {
        return Ok(binary);
    }
    eprintln!(
        "release: installing cargo-cyclonedx {CYCLONEDX_VERSION} from crates.io into {}",
        root.display()
    );
    let started = Instant::now();
    let status = crate::cargo()
        // Unoptimised: it reads Cargo.lock and writes JSON (10 SBOMs in ~2 s either way), and the
        // debug build takes about half the CPU of the release one on a cold run.
        .args([
            "install",
            "--locked",
            "--quiet",
            "--debug",
            "cargo-cyclonedx",
        ])
        .args(["--version", CYCLONEDX_VERSION, "--root"])
        .arg(&root)
        // Its own target dir: the workspace's is locked by the cargo that runs xtask.
        .env("CARGO_TARGET_DIR", root.join("build"))
        .status()
        .context("running cargo install")?;
    ensure!(status.success(), "cargo install cargo-cyclonedx failed");
    let _ = std::fs::remove_dir_all(root.join("build"));
    eprintln!(
        "release: cargo-cyclonedx installed in {:.0} s",
        started.elapsed().as_secs_f64()
    );
    Ok(binary)
}

/// A CycloneDX SBOM per image and platform, `<image>-<arch>.cdx.json`: the crates compiled into
/// that binary for that target (cargo-cyclonedx, from Cargo.lock; run on a copy of the build
/// context, as it writes next to each manifest).
fn write_sboms(
    cyclonedx: &Path,
    repo: &Path,
    out: &Path,
    arches: &[&str],
) -> anyhow::Result<Vec<PathBuf>> {
    let copy = tempfile::Builder::new()
        .prefix("cloud-controllers-sbom-")
        .tempdir()?;
    let status = Command::new("cp")
        .arg("-a")
        .args(crate::images::build_context(repo)?)
        .arg(copy.path())
        .status()?;
    ensure!(status.success(), "copying the build context");
    let mut written = Vec::new();
    for arch in arches {
        let o = Command::new(cyclonedx)
            .args(["cyclonedx", "--format", "json", "--spec-version", "1.5"])
            // One SBOM per binary, for the target's dependencies; build scripts and proc-macros
            // run at build time and are not in the binary.
            .args([
                "--describe",
                "binaries",
                "--no-build-deps",
                "--target-in-filename",
            ])
            .args(["--target", triple(arch)])
            .arg("--manifest-path")
            .arg(copy.path().join("Cargo.toml"))
            .env(
                "CARGO",
                std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()),
            )
            .output()
            .context("running cargo-cyclonedx")?;
        ensure!(
            o.status.success(),
            "cargo cyclonedx --target {}: {}",
            triple(arch),
            String::from_utf8_lossy(&o.stderr).trim()
        );
        for image in IMAGES {
            let found = copy
                .path()
                .join(image)
                .join(format!("{image}_bin_{}.cdx.json", triple(arch)));
            let dest = out.join(format!("{image}-{arch}.cdx.json"));
            std::fs::copy(&found, &dest)
                .with_context(|| format!("cargo-cyclonedx wrote no {}", found.display()))?;
            written.push(dest);
        }
    }
    Ok(written)
}

/// `SHA256SUMS` of every file in `out` (chart, SBOMs), and `images.txt`: each pushed index (and the
/// chart) as `reference@digest`, then each platform image's local ID and size.
fn write_checksums(
    out: &Path,
    digests: &BTreeMap<String, String>,
    images: &[PlatformImage],
) -> anyhow::Result<()> {
    let mut listing = String::new();
    for (target, digest) in digests {
        listing.push_str(&format!("{target}@{digest}\n"));
    }
    for p in images {
        listing.push_str(&format!(
            "{} {} {} {} bytes\n",
            p.image, p.platform, p.id, p.size
        ));
    }
    std::fs::write(out.join("images.txt"), listing)?;
    let mut files: Vec<String> = std::fs::read_dir(out)?
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| n != "SHA256SUMS")
        .collect();
    files.sort();
    let o = Command::new("sha256sum")
        .args(&files)
        .current_dir(out)
        .output()
        .context("running sha256sum")?;
    ensure!(o.status.success(), "sha256sum failed");
    std::fs::write(out.join("SHA256SUMS"), &o.stdout)?;
    Ok(())
}

fn print_summary(
    images: &[PlatformImage],
    build_time: &BTreeMap<String, Duration>,
    digests: &BTreeMap<String, String>,
    out: &Path,
    registry: &Registry,
    version: &str,
) {
    println!("\nrelease {version} to {}:", registry.reference());
    println!(
        "{:<22} {:<12} {:>10} {:>10} {:>10}",
        "image", "platform", "size", "binary", "rebuilt"
    );
    for p in images {
        println!(
            "{:<22} {:<12} {:>7.1} MB {:>7.1} MB {:>10}",
            p.image,
            p.platform,
            mb(p.size),
            mb(p.binary_size),
            if p.rebuilt { "yes" } else { "no" }
        );
    }
    for (platform, took) in build_time {
        println!("build time {platform}: {:.1} s", took.as_secs_f64());
    }
    for (target, digest) in digests {
        println!("{target}@{digest}");
    }
    println!(
        "chart: oci://{}/charts/{CHART} --version {version}",
        registry.reference()
    );
    println!("SBOMs, chart and SHA256SUMS: {}", out.display());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn semver_is_checked_as_semver_org_writes_it() {
        for ok in [
            "0.0.0-test",
            "1.2.3",
            "1.2.3-rc.1",
            "10.20.30+build.5",
            "1.0.0-alpha-1",
        ] {
            assert!(check_semver(ok).is_ok(), "{ok}");
        }
        assert!(!check_semver("1.2.3").unwrap());
        assert!(check_semver("1.2.3-rc.1").unwrap());
        for bad in [
            "v1.2.3", "1.2", "1.2.3.4", "01.2.3", "1.2.3-", "1.2.3-01", "1.2.3+", "latest", "1.2.x",
        ] {
            let e = check_semver(bad).unwrap_err().to_string();
            assert!(e.contains("is not SemVer"), "{bad}: {e}");
        }
    }

    #[test]
    fn platforms_other_than_amd64_and_arm64_are_refused() {
        assert_eq!(arch_of("linux/arm64").unwrap(), "arm64");
        let e = arch_of("linux/arm/v6").unwrap_err().to_string();
        assert!(e.contains("unknown platform \"linux/arm/v6\""), "{e}");
        assert!(e.contains("linux/amd64 and linux/arm64"), "{e}");
    }

    #[test]
    fn registries_split_into_host_and_path() {
        let r = Registry::parse("ghcr.io/cloud-controllers").unwrap();
        assert_eq!(r.host, "ghcr.io");
        assert_eq!(
            r.repository("node-controller"),
            "cloud-controllers/node-controller"
        );
        assert!(!r.plain_http());
        let l = Registry::parse("localhost:5001").unwrap();
        assert!(l.plain_http());
        assert_eq!(
            l.repository("charts/cloud-controllers"),
            "charts/cloud-controllers"
        );
        assert!(Registry::parse("https://ghcr.io/x").is_err());
        assert!(Registry::parse("ghcr.io/Upper").is_err());
    }

    #[test]
    fn a_dirty_work_tree_is_seen() {
        let dir = tempfile::tempdir().unwrap();
        let git = |args: &[&str]| {
            let o = Command::new("git")
                .arg("-C")
                .arg(dir.path())
                .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
                .args(args)
                .output()
                .unwrap();
            assert!(
                o.status.success(),
                "{args:?}: {}",
                String::from_utf8_lossy(&o.stderr)
            );
        };
        git(&["init", "-q"]);
        std::fs::write(dir.path().join("a"), "1").unwrap();
        git(&["add", "a"]);
        git(&["commit", "-q", "-m", "a"]);
        assert!(dirty_files(dir.path()).unwrap().is_empty());
        std::fs::write(dir.path().join("a"), "2").unwrap();
        std::fs::write(dir.path().join("b"), "new").unwrap();
        assert_eq!(dirty_files(dir.path()).unwrap(), ["a", "b"]);
        let args = ReleaseArgs {
            registry: "localhost:5001".into(),
            version: "1.0.0".into(),
            platform: PLATFORMS.map(String::from).to_vec(),
            profile: "release".into(),
            no_push: true,
            pull_base_images: false,
        };
        let e = check_input(&args, dir.path()).unwrap_err().to_string();
        assert!(
            e.contains("1.0.0 is a release version and the work tree is not clean"),
            "{e}"
        );
        assert!(e.contains("a, b"), "{e}");
        // A pre-release is built from whatever is there.
        let pre = ReleaseArgs {
            version: "1.0.0-rc.1".into(),
            ..args
        };
        assert_eq!(check_input(&pre, dir.path()).unwrap(), ["amd64", "arm64"]);
    }
}
