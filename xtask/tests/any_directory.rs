//! `cargo xtask` works from any directory of the workspace, whatever the target directory is: the
//! binaries it builds are found where cargo put them, not under a `target/` relative to the current
//! directory (issue 39: the README's `cargo xtask test` failed in `cluster_chart`, whose xtask runs
//! in `xtask/`, while CI's absolute `CARGO_TARGET_DIR` hid it).

use std::path::Path;
use std::process::Command;

#[test]
fn a_command_that_builds_a_controller_runs_from_another_directory() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let report = tempfile::NamedTempFile::new().unwrap();
    let mut xtask = Command::new(env!("CARGO_BIN_EXE_xtask"));
    xtask
        .args([
            "bench",
            "nodes",
            "--quick",
            "--nodes",
            "3",
            "--profile",
            "dev",
            "--json",
        ])
        .arg(report.path())
        .current_dir(root.join("docs"));
    // Not through CARGO_TARGET_DIR, which the old path guess read: a target directory given that
    // way is passed on as cargo's equivalent setting, so the command still reuses the build.
    if let Some(dir) = std::env::var_os("CARGO_TARGET_DIR") {
        xtask
            .env_remove("CARGO_TARGET_DIR")
            .env("CARGO_BUILD_TARGET_DIR", dir);
    }
    let out = xtask.output().expect("xtask runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "`cargo xtask bench nodes --quick` from docs/ failed:\n{stderr}"
    );
    let figures: serde_json::Value =
        serde_json::from_slice(&std::fs::read(report.path()).unwrap()).unwrap();
    assert!(
        figures["nodes"]["all_initialized_s"].is_number(),
        "node-controller initialized no Node: {figures}\n{stderr}"
    );
}
