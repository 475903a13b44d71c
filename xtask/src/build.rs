//! Building the controller binaries the demo and the benchmarks run as processes.

use std::path::{Path, PathBuf};

use anyhow::Context as _;

/// Builds `packages` (one binary each, named like the package) with cargo profile `profile` in
/// one cargo run and returns their paths, in order. `quiet` hides cargo's progress.
pub fn build_controllers(
    packages: &[&str],
    profile: &str,
    quiet: bool,
) -> anyhow::Result<Vec<PathBuf>> {
    eprintln!("building {} (profile {profile}) …", packages.join(", "));
    let mut cmd =
        std::process::Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cmd.args(["build", "--profile", profile]);
    if quiet {
        cmd.arg("--quiet");
    }
    for p in packages {
        cmd.args(["-p", p]);
    }
    let status = cmd.status().context("running cargo build")?;
    anyhow::ensure!(status.success(), "building {} failed", packages.join(", "));
    let dir = if profile == "dev" { "debug" } else { profile };
    let target = std::env::var("CARGO_TARGET_DIR").unwrap_or_else(|_| "target".into());
    Ok(packages
        .iter()
        .map(|p| Path::new(&target).join(dir).join(p))
        .collect())
}
