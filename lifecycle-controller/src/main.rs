use clap::Parser;

/// The lifecycle controller of cloud-controllers.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {}

fn main() -> anyhow::Result<()> {
    let _args = Args::parse();
    anyhow::bail!("lifecycle-controller is not implemented yet")
}
