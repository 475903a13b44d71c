//! What `cargo xtask test` does for the release before the real cluster's release test runs it:
//! the release's tools made in the tools thread ([`prepare`]), and the other platforms' build
//! started once the images are built ([`BuildAhead`]). Both only move work to where the machine
//! has room for it; the release itself builds and checks everything as before.

use std::process::Command;
use std::time::Instant;

use anyhow::Context as _;

use crate::images::{host_arch, repo};
use crate::release::{PLATFORMS, cross_builder, cross_builder_name, ensure_cyclonedx};

/// What a release needs besides the build itself, made ahead of it: cargo-cyclonedx, the base
/// images' stand-ins (with `debian:sid-slim`) and the cross builder of every other platform.
/// `cargo xtask test` runs this in its tools thread, where the downloads it waits on overlap the
/// test binaries, instead of at the start of the real cluster's release test.
pub(crate) fn prepare() -> anyhow::Result<()> {
    ensure_cyclonedx()?;
    let podman = testenv::ensure_podman()?;
    let repo = repo();
    crate::images::stand_ins_with(&podman, &repo, true)?;
    for (_, arch) in other_platforms() {
        cross_builder(&podman, &repo, arch, "--pull=never")?;
    }
    Ok(())
}

/// The release's platforms but this machine's, each with its architecture.
fn other_platforms() -> impl Iterator<Item = (&'static str, &'static str)> {
    PLATFORMS
        .into_iter()
        .map(|platform| (platform, platform.trim_start_matches("linux/")))
        .filter(|(_, arch)| *arch != host_arch())
}

/// The Dockerfile's build stage for every platform but this machine's, building in the background
/// at the lowest priority: the release's own build for that platform then finds the workspace
/// compiled in that platform's build cache (see the Dockerfile) instead of compiling it (7.5 min
/// for arm64 from nothing on 2 cores). `cargo xtask test` starts it once its images are built, so
/// that it takes the cores the chart run and the real cluster's first tests leave idle; if it
/// is still running when the release builds, that build waits for the cache it holds.
pub(crate) struct BuildAhead {
    children: Vec<(String, std::process::Child)>,
    started: Instant,
}

impl BuildAhead {
    /// Starts it (the cross builders must exist: [`prepare`]).
    pub(crate) fn start(profile: &str) -> anyhow::Result<Self> {
        let podman = testenv::ensure_podman()?;
        let repo = repo();
        let mut children = Vec::new();
        for (platform, arch) in other_platforms() {
            let log =
                std::env::temp_dir().join(format!("cloud-controllers-build-ahead-{arch}.log"));
            let out = std::fs::File::create(&log)?;
            let child = podman
                .command_when_idle()
                .args(["build", "--pull=never", "--network=host", "--layers"])
                .args(["--platform", platform, "--target", "build"])
                .args(["--build-arg", &format!("CARGO_PROFILE={profile}")])
                .args([
                    "--build-arg",
                    &format!("BUILDPLATFORM=linux/{}", host_arch()),
                ])
                .args([
                    "--build-arg",
                    &format!("BUILDER={}", cross_builder_name(arch)),
                ])
                .arg(&repo)
                .stdout(out.try_clone()?)
                .stderr(out)
                .spawn()
                .context("starting podman build")?;
            eprintln!(
                "release: the {platform} build started ahead, at the lowest priority (log: {})",
                log.display()
            );
            children.push((platform.to_owned(), child));
        }
        Ok(Self {
            children,
            started: Instant::now(),
        })
    }

    /// Waits for it and says how it went. A failure is only reported: the release's own build
    /// of that platform, which a test runs, shows the error where it matters.
    pub(crate) fn finish(mut self) {
        for (platform, mut child) in std::mem::take(&mut self.children) {
            match child.wait() {
                // When it ended is in its log: it is waited for only here, after the tests.
                Ok(status) => eprintln!(
                    "release: the {platform} build ahead: {status} (started {:.0} s ago)",
                    self.started.elapsed().as_secs_f64()
                ),
                Err(e) => eprintln!("release: the {platform} build ahead: {e}"),
            }
        }
    }
}

/// Not finished (a test failed before the release): stopped, as podman stops a build on SIGTERM,
/// so that nothing builds on after `cargo xtask test`.
impl Drop for BuildAhead {
    fn drop(&mut self) {
        for (platform, child) in &mut self.children {
            let _ = Command::new("kill")
                .args(["-TERM", &child.id().to_string()])
                .status();
            let _ = child.wait();
            eprintln!("release: the {platform} build ahead stopped");
        }
    }
}
