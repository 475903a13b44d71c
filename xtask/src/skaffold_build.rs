//! `cargo xtask skaffold-build <image>`: skaffold's custom builder for one artifact.
//!
//! skaffold runs it in the repository with `$IMAGE` (the full reference it wants, e.g.
//! `localhost:5001/cloud-controllers/node-controller:<input digest>`) and `$PUSH_IMAGE` (`true`
//! when the cluster pulls from a registry). Going through a command of ours instead of skaffold's
//! docker builder buys two things: each artifact lists only the crates its binary is built from
//! (skaffold.yaml's `dependencies`), so an edit rebuilds and redeploys only the images it can
//! change; and podman builds with the local base-image stand-ins and the shared layer and cargo
//! caches, exactly as `cargo xtask images` does, with no Docker engine or socket.
//!
//! `CLOUD_CONTROLLERS_BUILDER=docker` builds with `docker build` instead, for Docker users whose
//! cluster (kind, k3d) loads images from the Docker daemon.

use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, bail, ensure};

use crate::images;

#[derive(Debug, Clone, clap::Args)]
pub struct SkaffoldBuildArgs {
    /// The Dockerfile target to build: node-controller, lifecycle-controller, service-controller,
    /// route-controller or cloud-sim.
    pub image: String,
    /// Cargo profile of the binary.
    #[arg(long, default_value = "dev-image")]
    pub profile: String,
}

pub fn run(args: &SkaffoldBuildArgs) -> anyhow::Result<()> {
    ensure!(
        images::IMAGES.contains(&args.image.as_str()),
        "unknown image {:?}: one of {}",
        args.image,
        images::IMAGES.join(", ")
    );
    let reference = std::env::var("IMAGE")
        .context("$IMAGE is not set: this command is skaffold's custom builder (skaffold.yaml)")?;
    let push = std::env::var("PUSH_IMAGE").is_ok_and(|v| v == "true");
    let started = Instant::now();
    match std::env::var("CLOUD_CONTROLLERS_BUILDER").as_deref() {
        Ok("docker") => with_docker(args, &reference, push)?,
        Ok("podman") | Err(_) => with_podman(args, &reference, push)?,
        Ok(other) => bail!("CLOUD_CONTROLLERS_BUILDER={other:?}: podman (default) or docker"),
    }
    eprintln!(
        "skaffold-build: {reference} in {:.1} s{}",
        started.elapsed().as_secs_f64(),
        if push { ", pushed" } else { "" }
    );
    Ok(())
}

/// The checkout to build: skaffold's `$BUILD_CONTEXT` (the artifact's context, this repository's
/// root), so an xtask built elsewhere builds the checkout skaffold watches.
fn context() -> PathBuf {
    std::env::var_os("BUILD_CONTEXT")
        .filter(|c| !c.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(images::repo)
}

fn with_podman(args: &SkaffoldBuildArgs, reference: &str, push: bool) -> anyhow::Result<()> {
    let repo = context();
    let podman = testenv::ensure_podman()?;
    images::stand_ins(&podman, &repo)?;
    images::build(&podman, &repo, &args.image, reference, &args.profile)?;
    if push {
        let mut cmd = podman.command();
        cmd.arg("push").arg("--quiet");
        if is_local_registry(reference) {
            cmd.arg("--tls-verify=false");
        }
        run_checked(cmd.arg(reference))?;
    }
    images::remove_leftovers(&podman);
    Ok(())
}

fn with_docker(args: &SkaffoldBuildArgs, reference: &str, push: bool) -> anyhow::Result<()> {
    let mut build = Command::new("docker");
    build
        .args(["build", "--target", &args.image, "--tag", reference])
        .args(["--build-arg", &format!("CARGO_PROFILE={}", args.profile)])
        .arg(context());
    run_checked(&mut build)?;
    if push {
        run_checked(Command::new("docker").args(["push", reference]))?;
    }
    Ok(())
}

/// A registry on this machine speaks plain HTTP (the cluster's `localhost:5001`).
fn is_local_registry(reference: &str) -> bool {
    let host = reference.split('/').next().unwrap_or_default();
    let host = host.split(':').next().unwrap_or_default();
    matches!(host, "localhost" | "127.0.0.1")
}

fn run_checked(cmd: &mut Command) -> anyhow::Result<()> {
    let status = cmd.status().with_context(|| format!("running {cmd:?}"))?;
    ensure!(status.success(), "{cmd:?} failed ({status})");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::is_local_registry;

    #[test]
    fn only_this_machines_registry_goes_without_tls() {
        assert!(is_local_registry("localhost:5001/cloud-controllers/x:1"));
        assert!(is_local_registry("127.0.0.1:5001/x:1"));
        assert!(!is_local_registry("ghcr.io/cloud-controllers/x:1"));
        assert!(!is_local_registry("localhost.example.com/x:1"));
    }
}
