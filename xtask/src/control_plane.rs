//! `cargo xtask control-plane up|down|env`: a kube-apiserver + etcd that outlives the command, so
//! people can point kubectl and the controllers at it.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::Subcommand;
use testenv::{ControlPlane, Lifetime, Options};

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Start it (or report the running one) and print the `export KUBECONFIG=…` line.
    Up,
    /// Stop it.
    Down,
    /// Print the `export KUBECONFIG=…` line of the running one.
    Env,
}

/// Kept under $HOME so it survives `cargo clean` and is shared by all checkouts.
fn dir() -> PathBuf {
    testenv::cache_dir().join("control-plane")
}

fn export_line(plane: &ControlPlane) -> String {
    format!("export KUBECONFIG={}", plane.kubeconfig().display())
}

pub fn run(cmd: Command) -> anyhow::Result<ExitCode> {
    let dir = dir();
    match cmd {
        Command::Up => {
            if let Some(plane) = ControlPlane::attach(&dir) {
                eprintln!("control plane already running at {}", plane.apiserver_url());
                println!("{}", export_line(&plane));
                return Ok(ExitCode::SUCCESS);
            }
            let runtime = tokio::runtime::Runtime::new()?;
            let options = Options {
                dir: Some(dir.clone()),
                lifetime: Lifetime::Detached,
            };
            let plane = runtime
                .block_on(ControlPlane::start_with(options))
                .context("starting the control plane")?;
            eprintln!(
                "kube-apiserver {} + etcd {} ready at {} in {:.1?} (files and logs in {})\n\
                 stop it with: cargo xtask control-plane down",
                testenv::KUBE_APISERVER_VERSION,
                testenv::ETCD_VERSION,
                plane.apiserver_url(),
                plane.startup_time(),
                dir.display()
            );
            println!("{}", export_line(&plane));
            plane.detach()?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Down => {
            match ControlPlane::attach(&dir) {
                Some(plane) => {
                    let url = plane.apiserver_url();
                    plane.stop();
                    eprintln!("stopped the control plane at {url}");
                }
                None => eprintln!("no control plane is running (nothing in {})", dir.display()),
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Env => match ControlPlane::attach(&dir) {
            Some(plane) => {
                println!("{}", export_line(&plane));
                Ok(ExitCode::SUCCESS)
            }
            None => {
                eprintln!(
                    "no control plane is running; start one with: cargo xtask control-plane up"
                );
                Ok(ExitCode::FAILURE)
            }
        },
    }
}
