//! `cargo xtask bench data-path`: what one cloud-sim load balancer adds to a request, so the drain
//! tests' failures are the controllers' doing and not the simulator's.
//!
//! No controller and no control plane: a cloud-sim with its data plane on, one load balancer
//! (TCP 80 → 30080, round robin) over three servers whose stand-ins answer on 30080. The same
//! requests (a new connection, `GET /`, the whole answer) go once straight to a stand-in and once
//! through the load balancer: first one at a time (latency), then `CONCURRENCY` at a time for a
//! few seconds (requests per second). Prints the figures; asserts nothing.

use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use cloud_client::hcloud::load_balancer::target_health_json;
use cloud_sim::stand_in::{self, NodeStandIn};
use cloud_sim::{DataPlaneConfig, Sim, SimConfig};
use serde::Serialize;
use serde_json::json;

use super::BenchArgs;

const NODE_PORT: u16 = 30080;
const SERVERS: usize = 3;
const CONCURRENCY: usize = 32;
const TIMEOUT: Duration = Duration::from_secs(5);

/// What `bench data-path` measured.
#[derive(Debug, Serialize)]
pub struct Figures {
    pub direct: Path,
    pub load_balancer: Path,
    /// Median latency the load balancer adds, in microseconds.
    pub added_p50_us: f64,
    pub added_p99_us: f64,
}

/// One way to the stand-ins.
#[derive(Debug, Serialize)]
pub struct Path {
    pub p50_us: f64,
    pub p99_us: f64,
    pub requests_per_s: f64,
    pub failed: usize,
}

pub async fn run(args: &BenchArgs) -> anyhow::Result<Figures> {
    let sequential = if args.quick { 300 } else { 2000 };
    let load_for = Duration::from_secs(if args.quick { 2 } else { 5 });
    let sim = Sim::start_with(SimConfig {
        action_duration: Duration::from_millis(10),
        data_plane: Some(DataPlaneConfig {
            health_check_speedup: 50.0,
            ..Default::default()
        }),
        ..SimConfig::default()
    })
    .await;
    let client = sim.client();
    let mut servers = Vec::new();
    let mut stand_ins = Vec::new();
    for i in 0..SERVERS {
        let id = client
            .create_server(&format!("bench-{i}"), "cx22", "fsn1")
            .await
            .map_err(|e| anyhow::anyhow!("creating a server: {e}"))?;
        let v = client
            .get_server(id)
            .await
            .map_err(|e| anyhow::anyhow!("reading server {id}: {e}"))?;
        let ip: IpAddr = v.get("server").unwrap_or(&v)["public_net"]["ipv4"]["ip"]
            .as_str()
            .context("the server has no IPv4")?
            .parse()?;
        let mut s = NodeStandIn::new(format!("bench-{i}"), sim.local_address(ip));
        s.serve_node_port(NODE_PORT).await?;
        stand_ins.push(s);
        servers.push(id);
    }
    let lb = client
        .create_load_balancer_with(json!({
            "name": "bench", "load_balancer_type": "lb11", "location": "fsn1",
            "services": [{"protocol": "tcp", "listen_port": 80, "destination_port": NODE_PORT,
                          "proxyprotocol": false}],
            "targets": servers.iter().map(|id| json!({"type": "server", "server": {"id": id}})).collect::<Vec<_>>(),
        }))
        .await
        .map_err(|e| anyhow::anyhow!("creating the load balancer: {e}"))?;
    let through = wait_for(|| async { sim.listener(lb, 80) }).await?;
    // Every target passes its first check before anything is measured.
    wait_for(|| async {
        let lb = client.get_load_balancer(lb).await.ok()?;
        let healthy = target_health_json(&lb).ok()?.healthy;
        (healthy as usize == SERVERS).then_some(())
    })
    .await?;
    let direct_addr = SocketAddr::new(stand_ins[0].ip(), NODE_PORT);

    let direct = measure(direct_addr, sequential, load_for).await;
    let load_balancer = measure(through, sequential, load_for).await;
    let f = Figures {
        added_p50_us: load_balancer.p50_us - direct.p50_us,
        added_p99_us: load_balancer.p99_us - direct.p99_us,
        direct,
        load_balancer,
    };
    println!(
        "\nbench data-path: one cloud-sim load balancer (TCP, round robin, {SERVERS} targets) against a direct connection"
    );
    println!(
        "  {:<28}{:>12}{:>12}{:>16}{:>9}",
        "", "p50", "p99", "requests/s", "failed"
    );
    for (name, p) in [
        ("direct", &f.direct),
        ("through the load balancer", &f.load_balancer),
    ] {
        println!(
            "  {name:<28}{:>9.0} µs{:>9.0} µs{:>16.0}{:>9}",
            p.p50_us, p.p99_us, p.requests_per_s, p.failed
        );
    }
    println!(
        "  added by the load balancer: {:.0} µs p50, {:.0} µs p99 ({sequential} sequential requests; requests/s with {CONCURRENCY} at a time for {} s)",
        f.added_p50_us,
        f.added_p99_us,
        load_for.as_secs()
    );
    sim.shutdown().await;
    Ok(f)
}

async fn wait_for<T, Fut: Future<Output = Option<T>>>(
    mut f: impl FnMut() -> Fut,
) -> anyhow::Result<T> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(v) = f().await {
            return Ok(v);
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "the load balancer never got ready"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Latency of `sequential` requests one after another, then requests per second with
/// [`CONCURRENCY`] in flight for `load_for`.
async fn measure(addr: SocketAddr, sequential: usize, load_for: Duration) -> Path {
    let mut latencies = Vec::with_capacity(sequential);
    let mut failed = 0;
    for _ in 0..sequential {
        let started = Instant::now();
        match stand_in::get(addr, TIMEOUT).await {
            Ok((200, _)) => latencies.push(started.elapsed()),
            _ => failed += 1,
        }
    }
    latencies.sort_unstable();
    let at = |q: f64| {
        latencies
            .get(((latencies.len() as f64 * q) as usize).min(latencies.len().saturating_sub(1)))
            .map_or(0.0, |d| d.as_secs_f64() * 1e6)
    };
    let until = Instant::now() + load_for;
    let workers = (0..CONCURRENCY).map(|_| {
        tokio::spawn(async move {
            let (mut ok, mut bad) = (0usize, 0usize);
            while Instant::now() < until {
                match stand_in::get(addr, TIMEOUT).await {
                    Ok((200, _)) => ok += 1,
                    _ => bad += 1,
                }
            }
            (ok, bad)
        })
    });
    let started = Instant::now();
    let mut done = 0;
    for w in futures::future::join_all(workers).await {
        let (ok, bad) = w.unwrap_or_default();
        done += ok;
        failed += bad;
    }
    Path {
        p50_us: at(0.5),
        p99_us: at(0.99),
        requests_per_s: done as f64 / started.elapsed().as_secs_f64(),
        failed,
    }
}
