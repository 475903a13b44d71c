use clap::Parser;

/// The node controller of cloud-controllers.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {}

fn main() -> anyhow::Result<()> {
    let _args = Args::parse();
    anyhow::bail!("node-controller is not implemented yet")
}
