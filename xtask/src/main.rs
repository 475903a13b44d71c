//! Developer entry points: `cargo xtask <command>` (alias in `.cargo/config.toml`).

mod bench;
mod build;
mod control_plane;
mod demo;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(about = "cloud-controllers developer tasks")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// The whole system on this machine: control plane, cloud-sim, the four controllers as
    /// processes, and a story showing each at work, ending with a summary.
    Demo(demo::DemoArgs),
    /// A persistent local kube-apiserver + etcd for people (tests start their own).
    #[command(subcommand)]
    ControlPlane(control_plane::Command),
    /// Build (or find cached) kube-apiserver and etcd, so the first test does not pay for it.
    Prepare,
    /// Run the whole test suite: prepares the control-plane binaries, then `cargo test --workspace`.
    Test {
        /// Extra arguments passed to `cargo test`.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Benchmarks (`nodes`: node initialization at 1000 nodes; `services`: LoadBalancer
    /// Services next to HCCM's figures; `routes`: pod-CIDR routes for 1000 nodes, then idle):
    /// time, cloud API calls, RSS. Figures only.
    Bench(bench::BenchArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Demo(args) => demo::run(&args).map(|_| ExitCode::SUCCESS),
        Command::ControlPlane(cmd) => control_plane::run(cmd),
        Command::Prepare => prepare().map(|_| ExitCode::SUCCESS),
        Command::Test { args } => test(&args),
        Command::Bench(args) => bench::run(args).map(|_| ExitCode::SUCCESS),
    };
    result.unwrap_or_else(|e| {
        eprintln!("error: {e:#}");
        ExitCode::FAILURE
    })
}

fn prepare() -> anyhow::Result<()> {
    let binaries = testenv::ensure_binaries()?;
    eprintln!(
        "kube-apiserver {}: {}\netcd {}: {}",
        testenv::KUBE_APISERVER_VERSION,
        binaries.kube_apiserver.display(),
        testenv::ETCD_VERSION,
        binaries.etcd.display()
    );
    Ok(())
}

fn test(args: &[String]) -> anyhow::Result<ExitCode> {
    prepare()?;
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = std::process::Command::new(cargo)
        .args(["test", "--workspace", "--all-targets"])
        .args(args)
        .status()?;
    if !status.success() {
        return Ok(ExitCode::FAILURE);
    }
    eprintln!("\n=== the demo, end to end (each step waits for what it shows)");
    demo::run(&demo::DemoArgs {
        keep: false,
        profile: "dev".into(),
    })?;
    eprintln!("\n=== cargo xtask bench --quick all (figures are printed, never asserted)");
    bench_report_is_well_formed()?;
    Ok(ExitCode::SUCCESS)
}

/// Runs every benchmark in its quick form and checks that its JSON report has an entry per
/// scenario and that the plot is a PNG; the figures themselves are not judged.
fn bench_report_is_well_formed() -> anyhow::Result<()> {
    let tmp = std::env::temp_dir().join(format!("cloud-controllers-bench-{}", std::process::id()));
    let (json, plot) = (tmp.with_extension("json"), tmp.with_extension("png"));
    bench::run(bench::BenchArgs {
        scenario: bench::Scenario::All,
        quick: true,
        nodes: None,
        services: None,
        routes: None,
        profile: "dev".into(),
        extra: Vec::new(),
        wrapper: None,
        json: Some(json.clone()),
        plot: Some(plot.clone()),
    })?;
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&json)?)?;
    let _ = std::fs::remove_file(&json);
    let png = std::fs::read(&plot)?;
    let _ = std::fs::remove_file(&plot);
    anyhow::ensure!(png.starts_with(b"\x89PNG"), "the bench plot is not a PNG");
    for scenario in bench::REPORTED {
        anyhow::ensure!(
            report
                .get(scenario)
                .is_some_and(serde_json::Value::is_object),
            "the bench report has no {scenario:?} entry: {report}"
        );
    }
    Ok(())
}
