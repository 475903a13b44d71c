use clap::Parser;

/// The route controller of cloud-controllers.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {}

fn main() -> anyhow::Result<()> {
    let _args = Args::parse();
    anyhow::bail!("route-controller is not implemented yet")
}
