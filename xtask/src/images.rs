//! `cargo xtask images`: the five images (four controllers and cloud-sim) built from the Dockerfile,
//! unchanged, with podman, then measured: image size, binary size, time to start in a container.
//!
//! No container registry is reachable from our machines, so the two public base images the
//! Dockerfile names are replaced by local stand-ins built from Debian's packages
//! (`dev/podman/base-images.sh`) and the build runs with `--pull=never`. Anywhere a registry is
//! reachable the same Dockerfile builds against the real ones.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail, ensure};

/// The Dockerfile's final stages, one image each, in build order.
pub const IMAGES: [&str; 5] = [
    "node-controller",
    "lifecycle-controller",
    "service-controller",
    "route-controller",
    "cloud-sim",
];

/// The tag `cargo xtask test` builds and the chart's image-mode test runs.
pub const TEST_TAG: &str = "dev";

#[derive(Debug, Clone, clap::Args)]
pub struct ImagesArgs {
    /// Cargo profile of the binaries: dev-image (quick to rebuild, what CI builds) or release (the
    /// published images: thin LTO, one codegen unit).
    #[arg(long, default_value = "dev-image")]
    pub profile: String,
    /// Tag of the images (`localhost/<image>:<tag>`).
    #[arg(long, default_value = TEST_TAG)]
    pub tag: String,
    /// Then touch node-controller's source in a copy of the build context and build its image
    /// again, to show that dependencies come from the build cache.
    #[arg(long)]
    pub rebuild_check: bool,
    /// Then push each image to this registry as `<registry>/cloud-controllers/<image>:<tag>`
    /// (plain HTTP allowed, e.g. the cluster's `localhost:5001`), and print the pushed references
    /// with their digests.
    #[arg(long, value_name = "REGISTRY")]
    pub push: Option<String>,
}

/// What was built and measured.
#[derive(Debug)]
pub struct Built {
    pub image: String,
    pub size: u64,
    pub binary_size: u64,
    pub build: Duration,
    pub start: Duration,
    /// With `--push`: where it went.
    pub pushed: Option<Pushed>,
}

/// An image in a registry: `repository:tag@digest`.
#[derive(Debug, Clone)]
pub struct Pushed {
    pub repository: String,
    pub tag: String,
    pub digest: String,
}

pub fn run(args: &ImagesArgs) -> anyhow::Result<Vec<Built>> {
    let repo = repo();
    let podman = testenv::ensure_podman()?;
    stand_ins(&podman, &repo)?;
    let mut built = Vec::new();
    for image in IMAGES {
        let name = format!("localhost/{image}:{}", args.tag);
        let build = build(&podman, &repo, image, &name, &args.profile)?;
        let size = image_size(&podman, &name)?;
        let binary_size = binary_of(&podman, &name, image)?.size;
        let start = start_time(&podman, &name)?;
        eprintln!("built {name} in {:.1} s", build.as_secs_f64());
        let pushed = match &args.push {
            Some(registry) => Some(push(&podman, &name, registry, image, &args.tag)?),
            None => None,
        };
        built.push(Built {
            image: name,
            size,
            binary_size,
            build,
            start,
            pushed,
        });
    }
    print_table(&built, &args.profile);
    if args.push.is_some() {
        println!("\npushed:");
        for p in built.iter().filter_map(|b| b.pushed.as_ref()) {
            println!("  {}:{}@{}", p.repository, p.tag, p.digest);
        }
    }
    if args.rebuild_check {
        rebuild_check(&podman, &repo, &args.profile, built[0].build)?;
    }
    remove_leftovers(&podman);
    Ok(built)
}

/// Each build leaves its build stage behind, untagged (a gigabyte with the toolchain, most of it
/// shared), and working containers holding such images; compiled dependencies live on in the
/// build cache, not in those layers. Kept while another build runs in the same store (a CI run,
/// another worktree): its working containers and stages are not leftovers yet.
pub(crate) fn remove_leftovers(podman: &testenv::Podman) {
    let others = podman.builds_running();
    if !others.is_empty() {
        eprintln!(
            "build leftovers kept: another podman build runs in this store (pids {others:?}); \
             `cargo xtask images` after it removes them"
        );
        return;
    }
    if let Err(e) = podman.remove_build_leftovers() {
        eprintln!("build containers kept: {e}");
    }
    if let Err(e) = podman_output(podman, &["image", "prune", "--force"]) {
        eprintln!("untagged images kept: {e}");
    }
}

pub(crate) fn repo() -> PathBuf {
    testenv::workspace_root()
}

/// The local stand-ins for the Dockerfile's base images, built once and kept in the image store.
pub(crate) fn stand_ins(podman: &testenv::Podman, repo: &Path) -> anyhow::Result<()> {
    stand_ins_with(podman, repo, false)
}

/// [`stand_ins`], and with `cross` the base of the Dockerfile's arm64 cross builder too
/// (`debian:sid-slim`).
pub(crate) fn stand_ins_with(
    podman: &testenv::Podman,
    repo: &Path,
    cross: bool,
) -> anyhow::Result<()> {
    let rust_version = dockerfile_arg(repo, "RUST_VERSION")?;
    let started = Instant::now();
    let mut cmd = Command::new("bash");
    cmd.arg(repo.join("dev/podman/base-images.sh"))
        .arg(&rust_version)
        .env("PODMAN", podman.shell_words())
        .env("WITH_SID", if cross { "1" } else { "0" });
    podman.configure(&mut cmd);
    let status = cmd.status().context("running dev/podman/base-images.sh")?;
    ensure!(status.success(), "building the base-image stand-ins failed");
    eprintln!(
        "base images ready in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// `ARG name=value` from the Dockerfile.
fn dockerfile_arg(repo: &Path, name: &str) -> anyhow::Result<String> {
    let dockerfile = std::fs::read_to_string(repo.join("Dockerfile"))?;
    dockerfile
        .lines()
        .find_map(|l| l.strip_prefix(&format!("ARG {name}=")))
        .map(str::to_owned)
        .with_context(|| format!("the Dockerfile has no `ARG {name}=…`"))
}

/// `podman build --target image` of `context`, its output in a log file shown on failure.
pub(crate) fn build(
    podman: &testenv::Podman,
    context: &Path,
    target: &str,
    name: &str,
    profile: &str,
) -> anyhow::Result<Duration> {
    let mut cmd = podman.command();
    cmd.args(["build", "--pull=never", "--network=host", "--layers"])
        // This machine's platform, named: it sets TARGETARCH, which picks the build's target dir
        // (the Dockerfile), the one the release's build for this platform uses too.
        .args(["--platform", &format!("linux/{}", host_arch())])
        .args(["--target", target, "--tag", name])
        .args(["--build-arg", &format!("CARGO_PROFILE={profile}")])
        .arg(context);
    run_build(cmd, target)
}

/// This machine's architecture, in OCI's words (as container platforms name it).
pub(crate) fn host_arch() -> &'static str {
    match std::env::consts::ARCH {
        "aarch64" => "arm64",
        _ => "amd64",
    }
}

/// Runs a `podman build` command, its output in a log file whose tail is shown on failure.
pub(crate) fn run_build(mut cmd: Command, what: &str) -> anyhow::Result<Duration> {
    let log = std::env::temp_dir().join(format!("cloud-controllers-image-{what}.log"));
    let file = std::fs::File::create(&log)?;
    let started = Instant::now();
    let status = cmd
        .stdout(file.try_clone()?)
        .stderr(file)
        .status()
        .context("running podman build")?;
    let took = started.elapsed();
    if !status.success() {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let tail: Vec<&str> = text.lines().rev().take(40).collect();
        bail!(
            "podman build of {what} failed ({status}); {}:\n{}",
            log.display(),
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        );
    }
    Ok(took)
}

/// `podman push` to `<registry>/cloud-controllers/<image>:<tag>`; TLS is not required (a local
/// registry speaks plain HTTP).
fn push(
    podman: &testenv::Podman,
    name: &str,
    registry: &str,
    image: &str,
    tag: &str,
) -> anyhow::Result<Pushed> {
    let repository = format!("{registry}/cloud-controllers/{image}");
    let digest_file = tempfile::NamedTempFile::new()?;
    let started = Instant::now();
    podman_output(
        podman,
        &[
            "push",
            "--quiet",
            "--tls-verify=false",
            "--digestfile",
            &digest_file.path().display().to_string(),
            name,
            &format!("{repository}:{tag}"),
        ],
    )?;
    let digest = std::fs::read_to_string(digest_file.path())?
        .trim()
        .to_owned();
    ensure!(
        digest.starts_with("sha256:"),
        "podman push of {name} wrote no digest ({digest:?})"
    );
    eprintln!(
        "pushed {repository}:{tag}@{digest} in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    Ok(Pushed {
        repository,
        tag: tag.to_owned(),
        digest,
    })
}

pub(crate) fn podman_output(podman: &testenv::Podman, args: &[&str]) -> anyhow::Result<String> {
    let out = podman.command().args(args).output()?;
    ensure!(
        out.status.success(),
        "podman {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr).trim()
    );
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// Uncompressed size, as `podman images` shows it.
pub(crate) fn image_size(podman: &testenv::Podman, name: &str) -> anyhow::Result<u64> {
    Ok(podman_output(podman, &["image", "inspect", "--format", "{{.Size}}", name])?.parse()?)
}

/// `/usr/local/bin/<binary>` in an image, copied out of a container never started.
pub(crate) struct Binary {
    pub size: u64,
    /// The architecture its ELF header names (`amd64`, `arm64`; `None`: another, or not ELF).
    pub arch: Option<&'static str>,
}

pub(crate) fn binary_of(
    podman: &testenv::Podman,
    name: &str,
    binary: &str,
) -> anyhow::Result<Binary> {
    let id = podman_output(podman, &["create", name])?;
    let out =
        std::env::temp_dir().join(format!("cloud-controllers-{binary}-{}", std::process::id()));
    let copied = podman_output(
        podman,
        &[
            "cp",
            &format!("{id}:/usr/local/bin/{binary}"),
            &out.display().to_string(),
        ],
    );
    podman_output(podman, &["rm", &id])?;
    copied?;
    let size = std::fs::metadata(&out)?.len();
    let mut header = [0u8; 20];
    let arch = std::io::Read::read_exact(&mut std::fs::File::open(&out)?, &mut header)
        .ok()
        .and_then(|()| elf_arch(&header));
    std::fs::remove_file(&out)?;
    Ok(Binary { size, arch })
}

/// The architecture of a little-endian ELF file from its header's `e_machine`.
fn elf_arch(header: &[u8; 20]) -> Option<&'static str> {
    if &header[..4] != b"\x7fELF" {
        return None;
    }
    match u16::from_le_bytes([header[18], header[19]]) {
        0x3e => Some("amd64"),
        0xb7 => Some("arm64"),
        _ => None,
    }
}

/// The platform an image's config claims, `os/architecture`.
pub(crate) fn image_platform(podman: &testenv::Podman, name: &str) -> anyhow::Result<String> {
    podman_output(
        podman,
        &[
            "image",
            "inspect",
            "--format",
            "{{.Os}}/{{.Architecture}}",
            name,
        ],
    )
}

/// `podman run … --version` as the chart runs it (read-only root, uid 65532, no capabilities):
/// container set-up, the binary's start and its exit.
fn start_time(podman: &testenv::Podman, name: &str) -> anyhow::Result<Duration> {
    let started = Instant::now();
    let version = podman_output(
        podman,
        &[
            "run",
            "--rm",
            "--network=none",
            "--read-only",
            "--read-only-tmpfs=false",
            "--user=65532:65532",
            "--cap-drop=all",
            "--security-opt=no-new-privileges",
            name,
            "--version",
        ],
    )?;
    let took = started.elapsed();
    ensure!(!version.is_empty(), "{name} --version printed nothing");
    Ok(took)
}

/// Megabytes of 10⁶ bytes, as `podman images` and registries show sizes.
fn mb(bytes: u64) -> f64 {
    bytes as f64 / 1e6
}

fn print_table(built: &[Built], profile: &str) {
    println!("\nimages (profile {profile}; HCCM's published image is about 30 MB):");
    println!(
        "{:<38} {:>10} {:>10} {:>9} {:>14}",
        "image", "size", "binary", "build", "run --version"
    );
    for b in built {
        println!(
            "{:<38} {:>7.1} MB {:>7.1} MB {:>7.1} s {:>12.2} s",
            b.image,
            mb(b.size),
            mb(b.binary_size),
            b.build.as_secs_f64(),
            b.start.as_secs_f64()
        );
    }
    println!("(the first build includes the workspace's; the others reuse its layer)");
}

/// Builds node-controller's image again from a copy of the context whose `main.rs` changed: the
/// build cache must keep every dependency compiled, so this costs one crate and a link.
fn rebuild_check(
    podman: &testenv::Podman,
    repo: &Path,
    profile: &str,
    first: Duration,
) -> anyhow::Result<()> {
    let copy = tempfile::Builder::new()
        .prefix("cloud-controllers-context-")
        .tempdir()?;
    let status = Command::new("cp")
        .arg("-a")
        .args(build_context(repo)?)
        .arg(copy.path())
        .status()?;
    ensure!(status.success(), "copying the build context");
    let main = copy.path().join("node-controller/src/main.rs");
    let mut source = std::fs::read_to_string(&main)?;
    source.push_str("\n// touched by `cargo xtask images --rebuild-check`\n");
    std::fs::write(&main, source)?;
    let name = "localhost/node-controller:rebuild-check";
    let took = build(podman, copy.path(), "node-controller", name, profile)?;
    podman_output(podman, &["rmi", name])?;
    println!(
        "node-controller rebuilt after touching its main.rs in {:.1} s (this run's first build: {:.1} s)",
        took.as_secs_f64(),
        first.as_secs_f64()
    );
    Ok(())
}

/// What the Dockerfile reads: the files `.dockerignore` lets through (top-level entries).
pub(crate) fn build_context(repo: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let ignore = std::fs::read_to_string(repo.join(".dockerignore"))?;
    let mut paths: Vec<PathBuf> = ignore
        .lines()
        .filter_map(|l| l.strip_prefix('!'))
        .map(|p| repo.join(p.trim_end_matches('/')))
        .collect();
    paths.extend(["Dockerfile", ".dockerignore"].map(|p| repo.join(p)));
    Ok(paths)
}

#[cfg(test)]
mod tests {
    use super::elf_arch;

    #[test]
    fn elf_headers_name_their_architecture() {
        let mut header = [0u8; 20];
        header[..4].copy_from_slice(b"\x7fELF");
        header[18] = 0x3e;
        assert_eq!(elf_arch(&header), Some("amd64"));
        header[18] = 0xb7;
        assert_eq!(elf_arch(&header), Some("arm64"));
        header[18] = 0x28; // 32-bit ARM
        assert_eq!(elf_arch(&header), None);
        header[0] = b'#';
        assert_eq!(elf_arch(&header), None);
    }
}
