//! `cloud-sim --listen 127.0.0.1:8080 [--state FILE] [--token TOKEN] [--rate-limit N] [--robot-user U]
//! [--data-plane [--health-check-speedup F] [--data-plane-listen IP]] ...`
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use cloud_sim::{DataPlaneConfig, Sim, SimClientError, SimConfig};

/// Serve a simulated Hetzner Cloud API (endpoint: http://<listen>/v1), Robot webservice
/// (http://<listen>/robot) and CloudStack API (http://<listen>/client/api).
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {
    /// Address to listen on.
    #[arg(long, env = "CLOUD_SIM_LISTEN", default_value = "127.0.0.1:8080")]
    listen: std::net::SocketAddr,
    /// File the simulated world is kept in across restarts.
    #[arg(long, env = "CLOUD_SIM_STATE")]
    state: Option<std::path::PathBuf>,
    /// Accept only this bearer token (default: any 64-character token).
    #[arg(long, env = "CLOUD_SIM_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// A token that may only GET (403 token_readonly otherwise).
    #[arg(long, env = "CLOUD_SIM_READONLY_TOKEN", hide_env_values = true)]
    readonly_token: Option<String>,
    /// Requests per hour (token bucket capacity; refills limit/3600 per second).
    #[arg(long, default_value_t = 3600)]
    rate_limit: u32,
    /// How long actions stay running, in milliseconds.
    #[arg(long, default_value_t = 500)]
    action_duration_ms: u64,
    /// Seed for probabilistic faults.
    #[arg(long, default_value_t = 0x5eed)]
    fault_seed: u64,
    /// Routes one network may hold (Hetzner: 100).
    #[arg(long, default_value_t = 100)]
    max_routes_per_network: usize,
    /// Robot webservice (http://<listen>/robot) basic-auth user.
    #[arg(long, env = "CLOUD_SIM_ROBOT_USER", default_value = cloud_sim::DEFAULT_ROBOT_USER)]
    robot_user: String,
    /// Robot webservice basic-auth password.
    #[arg(
        long,
        env = "CLOUD_SIM_ROBOT_PASSWORD",
        hide_env_values = true,
        hide_default_value = true,
        default_value = cloud_sim::DEFAULT_ROBOT_PASSWORD
    )]
    robot_password: String,
    /// Robot requests to the `server` resource (GET /server and GET /server/NUMBER) per sliding hour.
    #[arg(long, default_value_t = 200)]
    robot_server_limit: u32,
    /// Robot requests to the `reset` resource (GET /reset/NUMBER) per sliding hour.
    #[arg(long, default_value_t = 500)]
    robot_reset_limit: u32,
    /// CloudStack API (http://<listen>/client/api) key of the primary account, `admin`.
    #[arg(
        long,
        env = "CLOUD_SIM_CLOUDSTACK_API_KEY",
        hide_env_values = true,
        hide_default_value = true,
        default_value = cloud_sim::DEFAULT_CLOUDSTACK_API_KEY
    )]
    cloudstack_api_key: String,
    /// CloudStack API secret key of the primary account.
    #[arg(
        long,
        env = "CLOUD_SIM_CLOUDSTACK_SECRET_KEY",
        hide_env_values = true,
        hide_default_value = true,
        default_value = cloud_sim::DEFAULT_CLOUDSTACK_SECRET_KEY
    )]
    cloudstack_secret_key: String,
    /// Create a network with this name (10.0.0.0/8, one cloud subnet 10.0.0.0/16 in eu-central)
    /// unless the world already holds one: the network a route-controller is started with, so an
    /// in-cluster simulator needs no set-up by hand.
    #[arg(long, env = "CLOUD_SIM_NETWORK")]
    network: Option<String>,
    /// Load balancers carry TCP traffic and run real health checks: each service listens on
    /// an ephemeral port (GET /_sim/load_balancers/ID/listeners) and forwards to its targets.
    #[arg(long, env = "CLOUD_SIM_DATA_PLANE")]
    data_plane: bool,
    /// Health-check interval and timeout are divided by this (50: a 15 s interval takes 300 ms).
    #[arg(long, default_value_t = 1.0, requires = "data_plane")]
    health_check_speedup: f64,
    /// Address the load balancer listeners bind (each on an ephemeral port).
    #[arg(long, default_value = "127.0.0.1", requires = "data_plane")]
    data_plane_listen: std::net::IpAddr,
    /// PROXY protocol version sent to targets of services with proxyprotocol: 1 (text) or 2
    /// (binary). Hetzner does not document which one it sends.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u8).range(1..=2), requires = "data_plane")]
    proxy_protocol_version: u8,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    let args = Args::parse();
    if !(args.health_check_speedup.is_finite() && args.health_check_speedup > 0.0) {
        anyhow::bail!("--health-check-speedup must be a positive number");
    }
    let data_plane = args.data_plane.then_some(DataPlaneConfig {
        listen_ip: args.data_plane_listen,
        health_check_speedup: args.health_check_speedup,
        proxy_protocol_version: args.proxy_protocol_version,
    });
    let sim = Sim::try_start(SimConfig {
        listen: args.listen,
        token: args.token,
        readonly_token: args.readonly_token,
        rate_limit_per_hour: args.rate_limit,
        action_duration: Duration::from_millis(args.action_duration_ms),
        state_file: args.state,
        fault_seed: args.fault_seed,
        max_routes_per_network: args.max_routes_per_network,
        robot_user: args.robot_user,
        robot_password: args.robot_password,
        robot_server_requests_per_hour: args.robot_server_limit,
        robot_reset_requests_per_hour: args.robot_reset_limit,
        cloudstack_api_key: args.cloudstack_api_key,
        cloudstack_secret_key: args.cloudstack_secret_key,
        data_plane,
        ..SimConfig::default()
    })
    .await
    .context("starting cloud-sim")?;
    if let Some(name) = &args.network {
        ensure_network(&sim, name).await?;
    }
    println!(
        "cloud-sim: HCLOUD_ENDPOINT={} HCLOUD_TOKEN=<any 64 characters>",
        sim.endpoint()
    );
    println!(
        "cloud-sim: Robot webservice at {} (user {})",
        sim.robot_endpoint(),
        sim.robot_user()
    );
    // The keys are secrets: the caller passed them, or they are the documented defaults.
    println!(
        "cloud-sim: CloudStack API at {} (account admin)",
        sim.cloudstack_endpoint()
    );
    if args.data_plane {
        println!(
            "cloud-sim: data plane on: load balancer listeners at GET {}/_sim/load_balancers/ID/listeners",
            sim.base_url()
        );
    }
    shutdown_signal().await;
    sim.shutdown().await;
    Ok(())
}

async fn ensure_network(sim: &Sim, name: &str) -> anyhow::Result<()> {
    match sim
        .client()
        .create_network(name, "10.0.0.0/8", "10.0.0.0/16")
        .await
    {
        Ok(id) => println!("cloud-sim: created network {name} (id {id})"),
        // Kept in the state file from an earlier run.
        Err(SimClientError::Api(f)) if f.code == "uniqueness_error" => {
            println!("cloud-sim: network {name} exists")
        }
        Err(e) => return Err(e).with_context(|| format!("creating the network {name}")),
    }
    Ok(())
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! { () = ctrl_c => {}, () = term => {} }
}
