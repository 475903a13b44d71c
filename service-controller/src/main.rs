use clap::Parser;

/// The service controller of cloud-controllers.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {}

fn main() -> anyhow::Result<()> {
    let _args = Args::parse();
    anyhow::bail!("service-controller is not implemented yet")
}
