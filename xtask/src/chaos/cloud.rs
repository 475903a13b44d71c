//! Cloud faults: one world per fault, the fault active from before the controllers start until
//! the end, through convergence and through deleting every Service.

use std::path::{Path, PathBuf};
use std::time::Duration;

use cloud_sim::{FaultKind, FaultRule};

use super::cluster::ChaosCluster;
use super::secrets::Scanner;
use super::{ChaosArgs, Row, await_convergence, log_dir, start_fleet, tear_down};

/// One fault scenario.
#[derive(Debug, Clone)]
pub struct Fault {
    pub name: &'static str,
    pub description: String,
    pub rules: Vec<FaultRule>,
    /// `(limit per hour, remaining at the start)`.
    pub rate_limit: Option<(u32, u32)>,
    /// Share of Nodes whose kubelet stops (NotReady, server running): the lifecycle controller
    /// must keep them although lists miss their servers.
    pub not_ready: f64,
    /// Every controller must have been answered 429 at least once, or the row fails.
    pub reach_every_controller_with_429: bool,
    /// Another client of the project spending the budget at this many calls a second, from
    /// before the controllers start; once converged, a Node joins and a Service is created, and
    /// both must be served within [`URGENT_BOUND`].
    pub neighbour_per_second: Option<f64>,
}

/// How soon a joining Node and a new Service must be served while a neighbour spends twice what
/// the budget refills: about 10 calls, each won against the neighbour for a refilled token.
pub const URGENT_BOUND: Duration = Duration::from_secs(240);

fn rule(endpoint: Option<&str>, probability: f64, kind: FaultKind) -> FaultRule {
    FaultRule {
        endpoint: endpoint.map(str::to_owned),
        count: None,
        probability,
        every: None,
        kind,
    }
}

fn error(status: u16, code: &str) -> FaultKind {
    FaultKind::Error {
        status: Some(status),
        code: code.into(),
        message: None,
    }
}

/// The sim every chaos world starts with: actions take 200 ms, a rate limit nobody reaches,
/// routes for every node in one network, every request logged, Robot credentials that appear
/// nowhere else (the secret scan looks for them).
pub fn sim_config() -> cloud_sim::SimConfig {
    cloud_sim::SimConfig {
        action_duration: Duration::from_millis(200),
        rate_limit_per_hour: 1_000_000,
        request_log_capacity: 1_000_000,
        max_routes_per_network: 1_000,
        robot_user: "#ws+ChaosRobotUser7Q2".into(),
        robot_password: "ChaosRobotPassword-x9Kp2Lm4".into(),
        ..Default::default()
    }
}

/// The faults of the issue, each a scenario.
pub fn faults(args: &ChaosArgs) -> Vec<Fault> {
    let size = args.size();
    let none = Fault {
        name: "",
        description: String::new(),
        rules: Vec::new(),
        rate_limit: None,
        not_ready: 0.0,
        reach_every_controller_with_429: false,
        neighbour_per_second: None,
    };
    // About a minute's worth of the calls a world needs, then 429s.
    let per_hour = if args.quick { 7_200 } else { 36_000 };
    vec![
        Fault {
            name: "5xx",
            description: "20 % of calls: 500 server_error / 503 unavailable".into(),
            rules: vec![
                rule(None, 0.1, error(500, "server_error")),
                rule(None, 0.1, error(503, "unavailable")),
            ],
            ..none.clone()
        },
        Fault {
            name: "429",
            description: format!("rate limit {per_hour}/h, 20 left at the start"),
            rate_limit: Some((per_hour, 20)),
            ..none.clone()
        },
        Fault {
            name: "429 quoting the token",
            description: "40 % of calls: 429 as Hetzner words it, half the caller's token quoted"
                .into(),
            rules: vec![
                // Every Service's first create and every Node's first route exhaust the client's
                // 5 attempts, so the message reaches Warning Events and conditions, not only logs.
                FaultRule {
                    count: Some(5 * size.services as u32),
                    ..rule(
                        Some("POST /load_balancers"),
                        1.0,
                        error(429, "rate_limit_exceeded"),
                    )
                },
                FaultRule {
                    count: Some(5 * size.nodes as u32),
                    ..rule(
                        Some("POST /networks/{id}/actions/add_route"),
                        1.0,
                        error(429, "rate_limit_exceeded"),
                    )
                },
                rule(None, 0.4, error(429, "rate_limit_exceeded")),
            ],
            reach_every_controller_with_429: true,
            ..none.clone()
        },
        Fault {
            name: "latency",
            description: "2 s latency on 1 call in 4".into(),
            rules: vec![rule(None, 0.25, FaultKind::Latency { ms: 2_000 })],
            ..none.clone()
        },
        Fault {
            name: "slow actions",
            description: "LB actions and the first 5 route actions take 10 s".into(),
            rules: vec![
                rule(
                    Some("POST /load_balancers*"),
                    1.0,
                    FaultKind::ActionDuration { ms: 10_000 },
                ),
                FaultRule {
                    count: Some(5),
                    ..rule(
                        Some("POST /networks/{id}/actions/add_route"),
                        1.0,
                        FaultKind::ActionDuration { ms: 10_000 },
                    )
                },
            ],
            ..none.clone()
        },
        Fault {
            name: "locked/conflict",
            description: "writes: 10 % 423 locked, 5 % 409 conflict".into(),
            rules: vec![
                rule(Some("POST /*"), 0.1, error(423, "locked")),
                rule(Some("POST /*"), 0.05, error(409, "conflict")),
                rule(Some("PUT /*"), 0.1, error(423, "locked")),
                rule(Some("DELETE /*"), 0.1, error(423, "locked")),
            ],
            ..none.clone()
        },
        Fault {
            name: "lists omit servers",
            description: "GET /servers misses 30 %; 20 % of Nodes NotReady".into(),
            rules: vec![rule(
                Some("GET /servers"),
                1.0,
                FaultKind::OmitItems { share: 0.3 },
            )],
            not_ready: 0.2,
            ..none.clone()
        },
        Fault {
            name: "noisy neighbour",
            description: "budget 3600/h, 200 left; another client of the project spends 2 calls/s \
                          (twice the refill); once converged the budget is at 0, then a Node \
                          joins and a Service is created"
                .into(),
            rate_limit: Some((3600, 200)),
            neighbour_per_second: Some(2.0),
            ..none
        },
    ]
}

/// Builds a world, injects `fault`, starts the controllers, waits for convergence, deletes
/// every Service and waits for their load balancers to go — all under the fault.
pub async fn run(
    args: &ChaosArgs,
    binaries: &[PathBuf],
    fault: &Fault,
    logs: &Path,
    scan: &mut Scanner,
) -> anyhow::Result<Row> {
    let size = args.size();
    let mut world = ChaosCluster::build(size, sim_config()).await?;
    let names: Vec<String> = world.servers.keys().cloned().collect();
    let stopped = (names.len() as f64 * fault.not_ready).round() as usize;
    world.set_ready(&names[..stopped], false).await?;
    for r in &fault.rules {
        world.sim.faults().add(r.clone());
    }
    if let Some((limit, remaining)) = fault.rate_limit {
        world.sim.set_rate_limit(limit, remaining);
    }
    let neighbour = fault
        .neighbour_per_second
        .map(|per_second| Neighbour::start(&world.sim, per_second));
    let dir = log_dir(logs, fault.name);
    let fleet = start_fleet(&world, binaries, 1, "debug", &dir).await?;

    let converged_s = await_convergence(&world, &fleet, args, fault.name)
        .await?
        .map(|t| t.as_secs_f64());
    if fault.reach_every_controller_with_429 {
        reach_every_controller(&mut world, &fleet, &names[stopped..]).await?;
    }
    let mut unreached = Vec::new();
    let urgent_note = match &neighbour {
        Some(neighbour) => {
            let served = urgent_work_served(&mut world, neighbour, size.services).await?;
            if served.is_none_or(|t| t > URGENT_BOUND) {
                unreached.push(format!(
                    "a joining Node and a new Service within {} s",
                    URGENT_BOUND.as_secs()
                ));
            }
            format!(
                "; with the neighbour spending ({} of its calls refused), a joining Node and a new \
                 Service served in {}",
                neighbour.refused(),
                served.map_or("never".into(), |t| format!("{:.1} s", t.as_secs_f64()))
            )
        }
        None => String::new(),
    };
    let at_convergence = world.audit().await?;
    world.delete_services().await?;
    let cleaned = world
        .wait_for(args.converge_timeout(), |a| a.services == 0 && a.leaks == 0)
        .await?;
    let after = world.audit().await?;
    if let Err(last) = &cleaned {
        eprintln!("chaos {}: not cleaned up: {}", fault.name, last.summary());
    }
    let answered_429 = answered_429(&fleet).await;
    drop(neighbour);
    let end = tear_down(world, fleet, scan).await?;
    if fault.reach_every_controller_with_429 {
        unreached.extend(
            answered_429
                .iter()
                .filter(|(_, n)| *n == 0)
                .map(|(who, _)| who.clone()),
        );
    }
    Ok(Row {
        scenario: format!("cloud: {}", fault.name),
        faults: fault.description.clone(),
        size: size.to_string(),
        converged_s,
        calls: end.calls,
        rate_limited: end.rate_limited,
        duplicates: at_convergence.duplicates,
        leaks: after.leaks,
        wrong_deletions: after.wrong_deletions,
        crashes: end.exited.len(),
        not_ours_writes: end.not_ours_writes,
        unreached,
        notes: format!(
            "Services deleted: {}{}{}{urgent_note}",
            if cleaned.is_ok() {
                "every load balancer gone"
            } else {
                "load balancers left"
            },
            if fault.reach_every_controller_with_429 {
                let each: Vec<String> = answered_429
                    .iter()
                    .map(|(who, n)| format!("{who} {n}"))
                    .collect();
                format!("; 429s answered: {}", each.join(", "))
            } else {
                String::new()
            },
            end.exits_note()
        ),
    })
}

/// Keeps the world moving until every controller has been answered 429 at least once (or 3
/// minutes passed): once converged, the node- and lifecycle-controller ask the cloud nothing, so
/// a Node joins for the one and a Node stops reporting for the other (`ready`: Nodes that may).
async fn reach_every_controller(
    world: &mut ChaosCluster,
    fleet: &crate::fleet::Fleet,
    ready: &[String],
) -> anyhow::Result<()> {
    let deadline = std::time::Instant::now() + Duration::from_secs(180);
    let mut not_ready = Vec::new();
    while std::time::Instant::now() < deadline {
        let unreached: Vec<String> = answered_429(fleet)
            .await
            .into_iter()
            .filter(|(_, n)| *n == 0)
            .map(|(who, _)| who)
            .collect();
        if unreached.is_empty() {
            break;
        }
        if unreached.iter().any(|w| w.starts_with("node-controller")) {
            world.add_nodes(1).await?;
        }
        if unreached
            .iter()
            .any(|w| w.starts_with("lifecycle-controller"))
            && not_ready.is_empty()
            && let Some(node) = ready.first()
        {
            not_ready.push(node.clone());
            world.set_ready(&not_ready, false).await?;
        }
        tokio::time::sleep(Duration::from_secs(5)).await;
    }
    world.set_ready(&not_ready, true).await
}

/// How many of its cloud calls each controller had answered with 429, from its `/metrics`.
async fn answered_429(fleet: &crate::fleet::Fleet) -> Vec<(String, u64)> {
    let mut answered = Vec::new();
    for r in &fleet.replicas {
        let n = crate::fleet::cloud_calls_with_status(&r.metrics().await, 429);
        answered.push((r.identity.clone(), n));
    }
    answered
}

/// Another client of the same project (an autoscaler, a CSI driver, a DNS tool): it lists the
/// servers `per_second` times a second, spending the shared budget, until dropped.
struct Neighbour {
    paused: std::sync::Arc<std::sync::atomic::AtomicBool>,
    refused: std::sync::Arc<std::sync::atomic::AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl Neighbour {
    fn start(sim: &cloud_sim::Sim, per_second: f64) -> Neighbour {
        use std::sync::atomic::Ordering;
        let paused = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let refused = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let client = sim.client();
        let (p, r) = (paused.clone(), refused.clone());
        // Requests at random times, `per_second` on average (a Poisson process), as a real
        // client's arrive. One ticking at an exact period would phase-lock to the bucket's refill
        // here (no network jitter in between): each refilled token would become available the
        // same few milliseconds before its tick, for ever, and no one else could ever get one.
        let task = tokio::spawn(async move {
            loop {
                let gap = -(1.0 - fastrand::f64()).ln() / per_second;
                tokio::time::sleep(Duration::from_secs_f64(gap)).await;
                if !p.load(Ordering::Relaxed) && client.list_servers().await.is_err() {
                    r.fetch_add(1, Ordering::Relaxed);
                }
            }
        });
        Neighbour {
            paused,
            refused,
            task,
        }
    }

    fn pause(&self, paused: bool) {
        self.paused
            .store(paused, std::sync::atomic::Ordering::Relaxed);
    }

    fn refused(&self) -> u64 {
        self.refused.load(std::sync::atomic::Ordering::Relaxed)
    }
}

impl Drop for Neighbour {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// With the budget spent (0 left) and the neighbour spending what refills: a server and its Node
/// join, and a Service is created; how long until both are served (`None`: not within the
/// bound). The world's own two calls to create the server are paid for apart (the neighbour
/// paused, tokens given and taken back), so that only the controllers compete with the neighbour.
async fn urgent_work_served(
    world: &mut ChaosCluster,
    neighbour: &Neighbour,
    next_service: usize,
) -> anyhow::Result<Option<Duration>> {
    neighbour.pause(true);
    world.sim.set_rate_limit_remaining(20);
    let server = world.add_servers(1).await;
    world.sim.set_rate_limit_remaining(0);
    neighbour.pause(false);
    let started = std::time::Instant::now();
    world.register_nodes(server?).await?;
    world.create_service(next_service).await?;
    let served = world.wait_for(URGENT_BOUND, |a| a.converged()).await?;
    Ok(served.ok().map(|_| started.elapsed()))
}
