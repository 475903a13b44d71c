use clap::Parser;

/// Serve a simulated Hetzner Cloud API.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8080")]
    listen: std::net::SocketAddr,
    /// File the simulated world is kept in across restarts.
    #[arg(long)]
    state: Option<std::path::PathBuf>,
}

fn main() -> anyhow::Result<()> {
    let _args = Args::parse();
    anyhow::bail!("cloud-sim: the simulator is not implemented yet")
}
