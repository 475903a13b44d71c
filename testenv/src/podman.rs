//! podman, for building the images and running them in tests, configured for this project's
//! machines: engine settings from `dev/podman/containers.conf` (passed as `CONTAINERS_CONF`, never
//! written to `/etc`), and image storage and build caches under the cache directory, so a second
//! run reuses layers and compiled dependencies.
//!
//! Where podman is missing, [`ensure_podman`] installs it from Debian's packages when it runs as
//! root, as CI does; otherwise it says what to install.

use std::fs::{self, File};
use std::path::PathBuf;
use std::process::Command;

use crate::binaries::home_cache;
use crate::error::{Error, Result};

/// Debian packages: the engine, its OCI runtime (see containers.conf) and mmdebstrap, which builds
/// the local stand-ins for public base images (`dev/podman/base-images.sh`).
const PACKAGES: [&str; 4] = ["podman", "buildah", "runc", "mmdebstrap"];

/// How to run podman with the project's settings.
#[derive(Debug, Clone)]
pub struct Podman {
    conf: PathBuf,
    root: PathBuf,
    runroot: PathBuf,
    tmp: PathBuf,
}

impl Podman {
    /// `podman` with the project's engine settings, image store and build-cache directory.
    pub fn command(&self) -> Command {
        self.with_root(Command::new("podman"))
    }

    /// [`Podman::command`] at the lowest CPU priority (`nice -n 19`; what it runs, a build's
    /// containers too, inherits it): for work that should only take the cores nothing else wants.
    pub fn command_when_idle(&self) -> Command {
        let mut nice = Command::new("nice");
        nice.args(["-n", "19", "podman"]);
        self.with_root(nice)
    }

    fn with_root(&self, mut cmd: Command) -> Command {
        self.configure(&mut cmd);
        cmd.arg("--root")
            .arg(&self.root)
            .arg("--runroot")
            .arg(&self.runroot);
        cmd
    }

    /// The same as a tokio command (for containers a test runs and waits on).
    pub fn tokio_command(&self) -> tokio::process::Command {
        tokio::process::Command::from(self.command())
    }

    /// The podman command line as one string, for scripts that take it (`PODMAN=…`).
    pub fn shell_words(&self) -> String {
        format!(
            "podman --root {} --runroot {}",
            self.root.display(),
            self.runroot.display()
        )
    }

    /// Sets the environment any podman process of ours needs: `CONTAINERS_CONF`, and `TMPDIR`,
    /// under which buildah keeps `RUN --mount=type=cache` directories.
    pub fn configure(&self, cmd: &mut Command) {
        cmd.env("CONTAINERS_CONF", &self.conf)
            .env("TMPDIR", &self.tmp);
    }

    /// The pids of `podman build` processes on this store (`--root`) other than this process's
    /// children: another `cargo xtask images` (a CI run, another worktree) building in the same
    /// store, whose working containers [`Podman::remove_build_leftovers`] must not remove.
    pub fn builds_running(&self) -> Vec<u32> {
        let root = self.root.display().to_string();
        let me = std::process::id();
        let Ok(entries) = std::fs::read_dir("/proc") else {
            return Vec::new();
        };
        entries
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
            .filter(|pid| {
                let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
                    return false;
                };
                let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
                let is_build = args.first().is_some_and(|a| a.ends_with(b"podman"))
                    && args.contains(&&b"build"[..])
                    && args
                        .windows(2)
                        .any(|w| w[0] == b"--root" && w[1] == root.as_bytes());
                let parent = std::fs::read_to_string(format!("/proc/{pid}/stat"))
                    .ok()
                    .and_then(|s| {
                        let rest = s.rsplit_once(')')?.1.to_owned();
                        rest.split_whitespace().nth(1)?.parse::<u32>().ok()
                    });
                is_build && parent != Some(me)
            })
            .collect()
    }

    /// Removes the working containers builds left behind; returns how many. Buildah keeps one for
    /// each stage it only reads from (`COPY --from` a cached stage, a base no step writes to), and
    /// builds through podman's Docker API keep one per step. Each holds its stage's image, a
    /// gigabyte with the toolchain, so every build would add some. Call it only when no build of
    /// ours is running: the store is this project's alone, but a running build owns its containers.
    pub fn remove_build_leftovers(&self) -> Result<usize> {
        let out = self
            .command()
            .args([
                "ps",
                "--all",
                "--external",
                "--format",
                "{{.ID}} {{.Names}}",
            ])
            .output()
            .map_err(Error::io("running podman ps"))?;
        let leftovers: Vec<String> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|line| line.split_once(' '))
            .filter(|(_, name)| is_build_container(name))
            .map(|(id, _)| id.to_owned())
            .collect();
        if !leftovers.is_empty() {
            self.command()
                .args(["rm", "--force"])
                .args(&leftovers)
                .output()
                .map_err(Error::io("running podman rm"))?;
        }
        Ok(leftovers.len())
    }
}

/// Buildah names its containers `<image>-working-container`, then `…-working-container-<n>` once
/// that name is taken.
fn is_build_container(name: &str) -> bool {
    match name.rsplit_once("-working-container") {
        Some((_, "")) => true,
        Some((_, rest)) => rest
            .strip_prefix('-')
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())),
        None => false,
    }
}

/// podman, installed from Debian's packages first when it is missing and we are root.
pub fn ensure_podman() -> Result<Podman> {
    let missing: Vec<&str> = PACKAGES.into_iter().filter(|p| !on_path(p)).collect();
    if !missing.is_empty() {
        install(&missing)?;
    }
    // Beside testenv's cache, not in it: TESTENV_CACHE_DIR (a throw-away cache for one run) should
    // not throw away gigabytes of image layers and compiled dependencies.
    let store = home_cache().join("containers");
    let podman = Podman {
        conf: crate::workspace::workspace_root().join("dev/podman/containers.conf"),
        root: store.join("storage"),
        runroot: std::env::temp_dir().join(format!("cloud-controllers-containers-{}", uid())),
        tmp: store.join("tmp"),
    };
    for dir in [&podman.root, &podman.tmp] {
        fs::create_dir_all(dir).map_err(Error::io(format!("creating {}", dir.display())))?;
    }
    Ok(podman)
}

fn install(packages: &[&str]) -> Result<()> {
    let missing = || Error::ToolMissing {
        tool: "podman".into(),
        how: format!(
            "install the Debian packages {} (apt-get install {}), or run as root so the tests \
             install them",
            packages.join(", "),
            PACKAGES.join(" ")
        ),
    };
    if uid() != 0 || !on_path("apt-get") {
        return Err(missing());
    }
    let lock_path = std::env::temp_dir().join("cloud-controllers-apt.lock");
    let lock =
        File::create(&lock_path).map_err(Error::io(format!("creating {}", lock_path.display())))?;
    lock.lock()
        .map_err(Error::io(format!("locking {}", lock_path.display())))?;
    eprintln!(
        "testenv: installing {} from Debian's packages",
        PACKAGES.join(", ")
    );
    let started = std::time::Instant::now();
    for args in [
        &["update", "-qq"][..],
        &[
            &["install", "-y", "-qq", "--no-install-recommends"][..],
            &PACKAGES[..],
        ]
        .concat(),
    ] {
        let out = Command::new("apt-get")
            .args(args)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .output()
            .map_err(Error::io("running apt-get"))?;
        if !out.status.success() {
            return Err(Error::ToolMissing {
                tool: "podman".into(),
                how: format!(
                    "apt-get {} failed:\n{}",
                    args.join(" "),
                    crate::binaries::tail(&String::from_utf8_lossy(&out.stderr), 20)
                ),
            });
        }
    }
    eprintln!("testenv: installed podman in {:.0?}", started.elapsed());
    Ok(())
}

fn on_path(program: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|path| {
        std::env::split_paths(&path).any(|dir| crate::binaries::is_executable(&dir.join(program)))
    })
}

/// This process's user id: `/proc/self` is owned by it.
fn uid() -> u32 {
    use std::os::unix::fs::MetadataExt as _;
    fs::metadata("/proc/self")
        .map(|m| m.uid())
        .unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::is_build_container;

    #[test]
    fn build_containers_are_told_by_buildahs_names() {
        for name in [
            "static-debian12-working-container",
            "3944a1aeff13-working-container-1",
            "rust-working-container-12",
        ] {
            assert!(is_build_container(name), "{name}");
        }
        for name in [
            "chart-images-node-controller",
            "working-container-x",
            "a-working-container-",
            "a-working-container-1b",
        ] {
            assert!(!is_build_container(name), "{name}");
        }
    }
}
