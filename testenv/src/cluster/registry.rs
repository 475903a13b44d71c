//! The local registry containerd pulls from, and the images `up` pushes to it.

use std::time::{Duration, Instant};

use super::layout::{HELLO_IMAGE, Layout, PAUSE_IMAGE, REGISTRY_PORT};
use super::procs::{Procs, READY_TIMEOUT, cluster_error};
use crate::binaries::ClusterBinaries;
use crate::control_plane::port_open;
use crate::error::{Error, Result};

pub(super) fn start_registry(procs: &mut Procs, nb: &ClusterBinaries) -> Result<()> {
    let disk = procs.layout.root().join("registry");
    std::fs::create_dir_all(&disk).map_err(Error::io(format!("creating {}", disk.display())))?;
    procs.spawn(
        "registry",
        &nb.crane,
        &[
            "registry".to_owned(),
            "serve".to_owned(),
            format!("--address=127.0.0.1:{REGISTRY_PORT}"),
            format!("--disk={}", disk.display()),
        ],
        &[],
    )?;
    let deadline = Instant::now() + READY_TIMEOUT;
    while !port_open(REGISTRY_PORT) {
        procs.check()?;
        if Instant::now() > deadline {
            return Err(cluster_error("starting the registry", "it does not listen"));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(())
}

/// Packs each static binary as the only file of a one-layer image and pushes it.
pub(super) fn push_images(l: &Layout, nb: &ClusterBinaries) -> Result<()> {
    let platform = format!(
        "linux/{}",
        match std::env::consts::ARCH {
            "x86_64" => "amd64",
            "aarch64" => "arm64",
            other => other,
        }
    );
    for (binary, name, image, env) in [
        (&nb.pause, "pause", PAUSE_IMAGE, None),
        (&nb.hello, "hello", HELLO_IMAGE, Some("LISTEN=:8080")),
    ] {
        let dir = l.root().join("images").join(name);
        std::fs::create_dir_all(&dir).map_err(Error::io(format!("creating {}", dir.display())))?;
        std::fs::copy(binary, dir.join(name))
            .map_err(Error::io(format!("copying {}", binary.display())))?;
        let layer = l.root().join("images").join(format!("{name}.tar"));
        let layer_arg = layer.display().to_string();
        let dir_arg = dir.display().to_string();
        run_tool("tar", &["-C", &dir_arg, "-cf", &layer_arg, name])?;
        let crane = nb.crane.display().to_string();
        run_tool(
            &crane,
            &["append", "--insecure", "-f", &layer_arg, "-t", image],
        )?;
        let entrypoint = format!("--entrypoint=/{name}");
        let platform_arg = format!("--set-platform={platform}");
        let mut args = vec![
            "mutate",
            "--insecure",
            image,
            &entrypoint,
            &platform_arg,
            "-t",
            image,
        ];
        if let Some(env) = env {
            args.extend(["--env", env]);
        }
        run_tool(&crane, &args)?;
    }
    Ok(())
}

pub(super) fn run_tool(program: &str, args: &[&str]) -> Result<String> {
    let out = std::process::Command::new(program)
        .args(args)
        .output()
        .map_err(Error::io(format!("running {program}")))?;
    if !out.status.success() {
        return Err(cluster_error(
            &format!("{program} {}", args.join(" ")),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}
