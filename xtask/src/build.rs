//! Building the controller binaries the demo and the benchmarks run as processes.

use std::io::BufRead as _;
use std::path::PathBuf;
use std::process::Stdio;

use anyhow::Context as _;

/// The workspace's binaries: the four controllers and cloud-sim.
pub const BINARIES: [&str; 5] = [
    "node-controller",
    "lifecycle-controller",
    "service-controller",
    "route-controller",
    "cloud-sim",
];

/// Builds `packages` (one binary each, named like the package) with cargo profile `profile` in
/// one cargo run and returns their paths, in order. `quiet` hides cargo's progress.
///
/// The paths are the ones cargo reports in its JSON messages, never a `target/` guessed from the
/// current directory: `cargo xtask` may run from any directory of the workspace (an integration
/// test runs in its package's directory), and the target directory may be anywhere
/// (`CARGO_TARGET_DIR`, `build.target-dir`, a symlink).
pub fn build_controllers(
    packages: &[&str],
    profile: &str,
    quiet: bool,
) -> anyhow::Result<Vec<PathBuf>> {
    eprintln!("building {} (profile {profile}) …", packages.join(", "));
    // With `dev`, the five are built together whatever is asked for: cargo resolves features per
    // set of packages, and one alone (cloud-sim for the real cluster, a controller for a
    // benchmark) compiled its dependencies once more, a minute cold, for a set nothing else
    // builds. Not with the optimised profiles, where each extra binary costs its own optimised
    // link (minutes with `release`'s fat LTO).
    let mut built_together: Vec<&str> = packages.to_vec();
    if profile == "dev" {
        built_together.extend(BINARIES.iter().filter(|b| !packages.contains(b)));
    }
    let mut cmd =
        std::process::Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cmd.args(["build", "--profile", profile, "--bins"])
        .arg("--message-format=json-render-diagnostics")
        .current_dir(testenv::workspace_root())
        .stdout(Stdio::piped());
    if quiet {
        cmd.arg("--quiet");
    }
    for p in &built_together {
        cmd.args(["-p", p]);
    }
    let mut child = cmd.spawn().context("running cargo build")?;
    let stdout = child.stdout.take().expect("piped stdout");
    let mut executables = Vec::new();
    for line in std::io::BufReader::new(stdout).lines() {
        executables.extend(executable(&line.context("reading cargo's messages")?));
    }
    let status = child.wait().context("running cargo build")?;
    anyhow::ensure!(status.success(), "building {} failed", packages.join(", "));
    packages
        .iter()
        .map(|p| {
            executables
                .iter()
                .find(|(name, _)| name == p)
                .map(|(_, path)| path.clone())
                .with_context(|| format!("cargo built no binary named {p}"))
        })
        .collect()
}

/// The binary's name and path from one line of cargo's JSON messages, if it announces one.
fn executable(line: &str) -> Option<(String, PathBuf)> {
    let message: serde_json::Value = serde_json::from_str(line).ok()?;
    if message["reason"] != "compiler-artifact" {
        return None;
    }
    let path = message["executable"].as_str()?;
    let name = message["target"]["name"].as_str()?;
    Some((name.to_owned(), PathBuf::from(path)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_executable_from_an_artifact_message() {
        let line = r#"{"reason":"compiler-artifact","target":{"name":"cloud-sim","kind":["bin"]},"executable":"/t/debug/cloud-sim"}"#;
        assert_eq!(
            executable(line),
            Some(("cloud-sim".into(), PathBuf::from("/t/debug/cloud-sim")))
        );
        let library = r#"{"reason":"compiler-artifact","target":{"name":"cloud_sim","kind":["lib"]},"executable":null}"#;
        assert_eq!(executable(library), None);
        assert_eq!(
            executable(r#"{"reason":"build-finished","success":true}"#),
            None
        );
        assert_eq!(executable("not json"), None);
    }
}
