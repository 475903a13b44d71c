//! `cargo xtask bench routes`: pod-CIDR routes at scale.
//!
//! cloud-sim with actions taking 50 ms (`--action-ms`) and one network `10.0.0.0/8` (subnet `10.0.0.0/16`) that
//! may hold N routes (Hetzner allows 100); N servers attached to it; the route-controller binary
//! with `--cluster-cidr=10.128.0.0/9` and `--route-reconciliation-period=10s`. Then:
//! 1. N Nodes are created at once, each with `hcloud://<id>`, its own /24 of the cluster CIDR
//!    and InternalIP = its server's private IP: time until the network holds all N routes and
//!    every Node says `NetworkUnavailable=False/RouteCreated`, cloud calls (per endpoint, per
//!    route, `423 locked` answers) and the Node status writes;
//! 2. nothing happens for 60 s (30 s with `--quick`): the resync's calls, measured at 10 s and
//!    scaled to an hour at the default period (5 min) — the period is the only thing that
//!    differs, every pass costs the same.
//!
//! The end reports the controller's peak and final RSS.

use std::collections::HashMap;
use std::fmt::Display;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, NodeAddress, NodeCondition};
use kube::api::{Patch, PatchParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, ResourceExt};
use serde::Serialize;
use serde_json::json;
use testenv::KubeletNode;

use super::plot::Curve;
use super::{BenchArgs, Calls, Env, Manager, Memory, PROBE_QUERY, create_nodes, mib};

/// How long a route action runs unless `--action-ms` says otherwise.
const ACTION: Duration = Duration::from_millis(50);
const NETWORK: &str = "10.0.0.0/8";
const SUBNET: &str = "10.0.0.0/16";
/// Inside the network's RFC 1918 range (the sim refuses other destinations, like Hetzner) and
/// clear of the subnet: 32768 /24s.
pub(super) const CLUSTER_CIDR: &str = "10.128.0.0/9";
pub(super) const MAX_NODES: usize = 128 * 256;
/// The shortened safety resync of the idle phase, and the default it is scaled to.
const RESYNC: Duration = Duration::from_secs(10);
const DEFAULT_RESYNC: Duration = Duration::from_secs(300);
/// Pause after convergence, so trailing calls are counted in the burst.
const SETTLE: Duration = Duration::from_secs(3);
const CONDITION: &str = "NetworkUnavailable";
const ROUTE_CREATED: &str = "RouteCreated";

/// Upstream's route controller (k8s.io/cloud-provider) with HCCM's Routes; no measurement of
/// ours: a full pass every `--route-reconciliation-period` (10 s) = 360 passes an hour, each at
/// least one network read (HCCM also lists servers). HCCM's figure was measured earlier with
/// its 30 s period (docs/architecture.md, "Targets").
mod upstream {
    pub const IDLE_CALLS_PER_HOUR_AT_LEAST: u64 = 360;
    pub const HCCM_IDLE_CALLS_PER_HOUR: u64 = 600;
}

/// The targets (docs/architecture.md, "Targets").
mod target {
    pub const CALLS_PER_ROUTE: f64 = 2.05;
    /// × routes × action duration.
    pub const CONVERGENCE_FACTOR: f64 = 1.2;
    pub const IDLE_CALLS_PER_HOUR: f64 = 15.0;
    pub const PEAK_RSS_MIB: f64 = 25.0;
}

/// What `bench routes` measured.
#[derive(Debug, Serialize)]
pub struct Figures {
    pub routes: usize,
    /// The Nodes existed before the controller started (a restart), instead of joining it.
    pub existing_nodes: bool,
    pub action_ms: u128,
    pub cluster_cidr: &'static str,
    /// `ours` or `HCCM`.
    pub manager: &'static str,
    pub profile: String,
    pub burst: Burst,
    pub idle: Idle,
    /// At the end; `peak_rss_kib` is the peak over the whole run.
    pub memory: Memory,
    /// Routes in the network over time (for `--plot`).
    pub convergence: Curve,
}

/// Phase 1. Times from the first Node create; `None` = never within the timeout.
#[derive(Debug, Serialize)]
pub struct Burst {
    pub nodes_created_s: f64,
    pub first_route_s: Option<f64>,
    pub all_routes_s: Option<f64>,
    /// Routes in the network when the phase ended.
    pub routes_in_network: usize,
    pub all_nodes_route_created_s: Option<f64>,
    /// Nodes saying `NetworkUnavailable=False/RouteCreated` when the phase ended.
    pub nodes_route_created: usize,
    /// Writes of the `NetworkUnavailable` condition seen on the Node watch.
    pub condition_writes: u64,
    /// The target: `CONVERGENCE_FACTOR × routes × action duration`.
    pub target_s: f64,
    pub calls: Calls,
    pub calls_per_route: f64,
    pub locked_423: u64,
}

/// Phase 2.
#[derive(Debug, Serialize)]
pub struct Idle {
    pub seconds: u64,
    pub resync_s: u64,
    pub calls: Calls,
    /// `calls` scaled to an hour at `resync_s`.
    pub calls_per_hour_at_resync: f64,
    /// ... and at the default period (`default_resync_s`).
    pub default_resync_s: u64,
    pub calls_per_hour_at_default: f64,
}

/// A server in the network.
pub(super) struct Server {
    pub id: u64,
    pub name: String,
    pub ip: String,
}

impl Figures {
    /// This scenario's line in the summary table (the burst of new Nodes).
    pub fn row(&self) -> super::Row {
        super::Row::new(
            "routes",
            self.manager,
            format!("{} Nodes with podCIDRs", self.routes),
            self.burst.all_nodes_route_created_s,
            &self.burst.calls,
            self.memory.peak_rss_kib,
        )
    }
}

pub async fn run(
    args: &BenchArgs,
    manager: Manager<'_>,
    existing_nodes: bool,
) -> anyhow::Result<Figures> {
    let n = args.routes.unwrap_or(if args.quick { 100 } else { 1000 });
    anyhow::ensure!(
        (1..=MAX_NODES).contains(&n),
        "--routes must be 1..={MAX_NODES}"
    );
    let action = args.action_ms.map_or(ACTION, Duration::from_millis);
    let env = Env::start_with(cloud_sim::SimConfig {
        max_routes_per_network: n,
        ..Env::sim_config(Some(action))
    })
    .await?;
    let client = env.sim.client();
    let network = client
        .create_network("bench", NETWORK, SUBNET)
        .await
        .map_err(|e| anyhow::anyhow!("creating the network: {e}"))?;
    let servers = servers(&env, n, network).await?;
    let network_id = network.to_string();
    let cluster = format!("--cluster-cidr={CLUSTER_CIDR}");
    let resync = format!("--route-reconciliation-period={}s", RESYNC.as_secs());
    // HCCM's route controller runs only with both of these (ours ignores them).
    let hccm_flags = [
        "--allocate-node-cidrs=true",
        "--configure-cloud-routes=true",
    ];
    let flags = match manager {
        Manager::Ours(_) => vec![cluster.as_str(), resync.as_str()],
        Manager::Hccm(_) => [cluster.as_str(), resync.as_str()]
            .into_iter()
            .chain(hccm_flags)
            .collect(),
    };
    let network_env = [("HCLOUD_NETWORK", network_id.as_str())];
    let nodes: Vec<Node> = servers.iter().enumerate().map(node).collect();
    // After a restart or a failover the Nodes are there before the controller: its first pass
    // meets all of them at once. Otherwise they join the running controller.
    let mut nodes = Some(nodes);
    if existing_nodes {
        create_nodes(&env.client, nodes.take().unwrap_or_default()).await;
        ensure_addresses(&env, &servers).await?;
    }
    let watch = NodeWatch::start(&env.client, n);
    let start = Instant::now();
    let mut ctl = if existing_nodes {
        env.sim.reset_counters();
        env.spawn(args, manager, "node-route-controller", &flags, &network_env)?
    } else {
        env.launch(args, manager, "node-route-controller", &flags, &network_env)
            .await?
    };

    // 1. N Nodes at once (or the controller starting among them).
    if let Some(nodes) = nodes {
        create_nodes(&env.client, nodes).await;
    }
    let nodes_created = start.elapsed();
    ensure_addresses(&env, &servers).await?;
    let timeout = Duration::from_secs(120) + action * 6 * n as u32;
    let (mut first_route_s, mut all_routes_s, mut in_network) = (None, None, 0);
    let mut convergence = Curve::new(format!("routes: {n} in the network"), n);
    ctl.wait_until(timeout, async || {
        if all_routes_s.is_none() {
            in_network = routes_in(&env, network).await?;
            convergence.record(start.elapsed().as_secs_f64(), in_network);
            let now = Some(start.elapsed().as_secs_f64());
            if in_network > 0 && first_route_s.is_none() {
                first_route_s = now;
            }
            if in_network >= n {
                all_routes_s = now;
            }
        }
        Ok(all_routes_s.is_some() && watch.routed() >= n)
    })
    .await?;
    tokio::time::sleep(SETTLE).await;
    let calls = Calls::of(&env.sim);
    let log = env.sim.request_log();
    let (nodes_route_created, all_routed_at, condition_writes) = watch.figures();
    let burst = Burst {
        nodes_created_s: nodes_created.as_secs_f64(),
        first_route_s,
        all_routes_s,
        routes_in_network: routes_in(&env, network).await?,
        all_nodes_route_created_s: all_routed_at.map(|t| (t - start).as_secs_f64()),
        nodes_route_created,
        condition_writes,
        target_s: target::CONVERGENCE_FACTOR * n as f64 * action.as_secs_f64(),
        calls_per_route: calls.total as f64 / n as f64,
        locked_423: calls.status(423),
        calls,
    };

    // 2. Idle.
    env.sim.reset_counters();
    let idle = Duration::from_secs(if args.quick { 30 } else { 60 });
    tokio::time::sleep(idle).await;
    let calls = Calls::of(&env.sim);
    let per_hour = calls.total as f64 * 3600.0 / idle.as_secs_f64();
    let figures = Figures {
        routes: n,
        existing_nodes,
        action_ms: action.as_millis(),
        cluster_cidr: CLUSTER_CIDR,
        manager: manager.name(),
        profile: args.profile.clone(),
        burst,
        idle: Idle {
            seconds: idle.as_secs(),
            resync_s: RESYNC.as_secs(),
            calls_per_hour_at_resync: per_hour,
            default_resync_s: DEFAULT_RESYNC.as_secs(),
            calls_per_hour_at_default: per_hour * RESYNC.as_secs_f64()
                / DEFAULT_RESYNC.as_secs_f64(),
            calls,
        },
        memory: ctl.memory(),
        convergence,
    };
    ctl.stop().await;
    watch.stop();
    if misbehaved(&figures) {
        print_log_sample(&log);
    }
    Ok(figures)
}

/// `n` running servers `bench-node-1 ..= bench-node-n` attached to `network` (one batch call,
/// no actions), with their private IPs.
pub(super) async fn servers(env: &Env, n: usize, network: u64) -> anyhow::Result<Vec<Server>> {
    let client = env.sim.client();
    let template = json!({"server_type": "cx22", "location": "fsn1", "networks": [network]});
    let ids = client
        .create_servers_with(n, "bench-node", template)
        .await
        .map_err(|e| anyhow::anyhow!("creating servers: {e}"))?;
    anyhow::ensure!(ids.len() == n, "asked for {n} servers, got {}", ids.len());
    let listed = client
        .list_all(&format!("servers?{PROBE_QUERY}"))
        .await
        .map_err(|e| anyhow::anyhow!("listing servers: {e}"))?;
    let ips: HashMap<u64, String> = listed
        .iter()
        .filter_map(|s| {
            let ip = s["private_net"]
                .as_array()?
                .iter()
                .find(|p| p["network"].as_u64() == Some(network))?["ip"]
                .as_str()?;
            Some((s["id"].as_u64()?, ip.to_string()))
        })
        .collect();
    ids.into_iter()
        .enumerate()
        .map(|(i, id)| {
            let ip = ips
                .get(&id)
                .cloned()
                .ok_or_else(|| anyhow::anyhow!("server {id} has no IP in network {network}"))?;
            Ok(Server {
                id,
                name: format!("bench-node-{}", i + 1),
                ip,
            })
        })
        .collect()
}

/// The `i`-th /24 of the cluster CIDR.
pub(super) fn pod_cidr(i: usize) -> String {
    format!("10.{}.{}.0/24", 128 + i / 256, i % 256)
}

/// The Node of server `i` as its kubelet registered it, and as node-controller and the node-ipam
/// controller leave it: providerID, podCIDRs, addresses.
fn node((i, server): (usize, &Server)) -> Node {
    KubeletNode {
        node_ip: Some(server.ip.clone()),
        uninitialized: false,
        provider_id: Some(format!("hcloud://{}", server.id)),
        pod_cidr: Some(pod_cidr(i)),
        ..KubeletNode::new(&server.name)
    }
    .registration()
}

fn addresses(server: &Server) -> Vec<NodeAddress> {
    vec![
        NodeAddress {
            type_: "InternalIP".into(),
            address: server.ip.clone(),
        },
        NodeAddress {
            type_: "Hostname".into(),
            address: server.name.clone(),
        },
    ]
}

/// The apiserver keeps the status a Node is created with (kubelets register that way); should
/// a version drop it, the addresses are written through the status subresource instead.
async fn ensure_addresses(env: &Env, servers: &[Server]) -> anyhow::Result<()> {
    let api: Api<Node> = Api::all(env.client.clone());
    let Some(first) = servers.first() else {
        return Ok(());
    };
    let kept = api
        .get(&first.name)
        .await?
        .status
        .and_then(|s| s.addresses)
        .is_some_and(|a| !a.is_empty());
    if kept {
        return Ok(());
    }
    eprintln!("bench: the apiserver dropped the Nodes' status on create; patching the addresses");
    futures::stream::iter(servers)
        .for_each_concurrent(64, |s| {
            let api = api.clone();
            async move {
                let patch = Patch::Merge(json!({"status": {"addresses": addresses(s)}}));
                if let Err(e) = api
                    .patch_status(&s.name, &PatchParams::default(), &patch)
                    .await
                {
                    eprintln!("bench: patching node {}: {e}", s.name);
                }
            }
        })
        .await;
    Ok(())
}

/// Routes in the network now (read with [`PROBE_QUERY`], not counted as the controller's).
async fn routes_in(env: &Env, network: u64) -> anyhow::Result<usize> {
    let body = env
        .sim
        .client()
        .get(&format!("/networks/{network}?{PROBE_QUERY}"))
        .await
        .map_err(|e| anyhow::anyhow!("reading the network: {e}"))?;
    Ok(body["network"]["routes"].as_array().map_or(0, Vec::len))
}

/// A Node watch that follows each Node's `NetworkUnavailable` condition: how many say
/// `False/RouteCreated`, when all did, and how often the condition was written.
struct NodeWatch {
    state: Arc<Mutex<WatchState>>,
    task: tokio::task::JoinHandle<()>,
}

#[derive(Default)]
struct WatchState {
    /// Node → its condition as last seen.
    conditions: HashMap<String, Option<NodeCondition>>,
    routed: usize,
    writes: u64,
    all_routed_at: Option<Instant>,
    /// Nodes that will be created.
    expected: usize,
}

impl NodeWatch {
    /// Watches all Nodes; `expected` of them will be created.
    fn start(client: &kube::Client, expected: usize) -> NodeWatch {
        let state = Arc::new(Mutex::new(WatchState {
            expected,
            ..WatchState::default()
        }));
        let stream =
            watcher(Api::<Node>::all(client.clone()), watcher::Config::default()).default_backoff();
        let task = {
            let state = state.clone();
            tokio::spawn(async move {
                stream
                    .for_each(|ev| {
                        if let Ok(watcher::Event::Apply(n) | watcher::Event::InitApply(n)) = ev {
                            lock(&state).seen(&n);
                        }
                        futures::future::ready(())
                    })
                    .await;
            })
        };
        NodeWatch { state, task }
    }

    /// Nodes saying `False/RouteCreated`.
    fn routed(&self) -> usize {
        lock(&self.state).routed
    }

    /// (routed, when all were, condition writes).
    fn figures(&self) -> (usize, Option<Instant>, u64) {
        let s = lock(&self.state);
        (s.routed, s.all_routed_at, s.writes)
    }

    fn stop(self) {
        self.task.abort();
    }
}

fn lock(state: &Mutex<WatchState>) -> std::sync::MutexGuard<'_, WatchState> {
    state.lock().unwrap_or_else(|e| e.into_inner())
}

impl WatchState {
    fn seen(&mut self, node: &Node) {
        let condition = node
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| c.iter().find(|c| c.type_ == CONDITION))
            .cloned();
        let routed = |c: &Option<NodeCondition>| {
            c.as_ref()
                .is_some_and(|c| c.status == "False" && c.reason.as_deref() == Some(ROUTE_CREATED))
        };
        let now = routed(&condition);
        let before = match self.conditions.get(&node.name_any()) {
            None => false,
            Some(before) => {
                if *before != condition {
                    self.writes += 1;
                }
                routed(before)
            }
        };
        match (before, now) {
            (false, true) => self.routed += 1,
            (true, false) => self.routed -= 1,
            _ => {}
        }
        self.conditions.insert(node.name_any(), condition);
        if self.routed >= self.expected && self.all_routed_at.is_none() {
            self.all_routed_at = Some(Instant::now());
        }
    }
}

fn misbehaved(f: &Figures) -> bool {
    let b = &f.burst;
    b.all_routes_s.is_none()
        || b.all_nodes_route_created_s.is_none()
        || b.locked_423 > 0
        || b.calls_per_route > target::CALLS_PER_ROUTE
}

/// The first and last calls of the burst, the reads between its writes (a network read or the
/// first page of a server list) and the answers that were not 2xx, from the sim's request log,
/// to see what went wrong.
fn print_log_sample(log: &[cloud_sim::RequestLogEntry]) {
    let log: Vec<_> = log
        .iter()
        .filter(|r| !r.uri.contains(PROBE_QUERY))
        .collect();
    let line = |r: &cloud_sim::RequestLogEntry| {
        println!(
            "    #{:<6} {} {:<7} {} {} ({} ms)",
            r.seq, r.at, r.method, r.uri, r.status, r.duration_ms
        )
    };
    println!(
        "  request log sample (burst: first 12, last 6, reads that start a list, the first 20 non-2xx)"
    );
    for r in log.iter().take(12) {
        line(r);
    }
    println!("    …");
    for r in log.iter().skip(log.len().saturating_sub(6)) {
        line(r);
    }
    let reads: Vec<_> = log
        .iter()
        .filter(|r| r.endpoint == "/networks/{id}" || r.uri.contains("page=1&"))
        .collect();
    println!("    network reads and server lists: {}", reads.len());
    for r in reads.iter().take(30) {
        line(r);
    }
    let errors: Vec<_> = log.iter().filter(|r| r.status >= 300).collect();
    println!("    non-2xx: {}", errors.len());
    for r in errors.iter().take(20) {
        line(r);
    }
}

/// Prints our figures beside upstream's and HCCM's (measured in this run with `--hccm`).
pub fn print(f: &Figures, hccm: Option<&Figures>) {
    let (n, b, i) = (f.routes, &f.burst, &f.idle);
    println!(
        "route-controller bench ({n} Nodes and routes, actions {} ms, cluster CIDR {}, profile {}{})",
        f.action_ms,
        f.cluster_cidr,
        f.profile,
        if f.existing_nodes {
            "; the Nodes existed before the controller started, as after a restart, and its \
             start-up calls are counted"
        } else {
            ""
        }
    );
    let secs = |s: Option<f64>, done: usize, of: &str| match s {
        Some(s) => format!("{s:.2} s"),
        None => format!("never ({done}/{n} {of})"),
    };
    let per_route = |b: &Burst| match (b.first_route_s, b.all_routes_s) {
        (Some(first), Some(all)) if n > 1 => {
            format!("{:.0} ms", (all - first) * 1000.0 / (n - 1) as f64)
        }
        _ => "-".into(),
    };
    // HCCM's column: a figure of this run's HCCM, or blank.
    let h = |figure: &dyn Fn(&Figures) -> String| hccm.map_or(String::new(), figure);
    let (idle_s, resync_s, default_s) = (i.seconds, i.resync_s, i.default_resync_s);
    // figure, ours, upstream's, HCCM's, target; a row with only a figure is a heading.
    let h_idle = match hccm {
        // HCCM's own default period is the 10 s it ran with.
        Some(h) => format!("{:.0}", h.idle.calls_per_hour_at_resync),
        None => format!("~{}", upstream::HCCM_IDLE_CALLS_PER_HOUR),
    };
    #[rustfmt::skip]
    let rows = [
        row("",                                       "ours",                        "upstream",     "HCCM",         "target"),
        row(if f.existing_nodes { format!("controller started among {n} Nodes, in") } else { format!("{n} Nodes created at once, in") }, format!("{:.2} s", b.nodes_created_s), "", "",       ""),
        row("  first route after",                    secs(b.first_route_s, 0, "routes"), "",
                                                                                                     h(&|h| secs(h.burst.first_route_s, 0, "routes")), ""),
        row(format!("  all {n} routes in the network after"),
                                                      secs(b.all_routes_s, b.routes_in_network, "routes"),
                                                                                     "",             h(&|h| secs(h.burst.all_routes_s, h.burst.routes_in_network, "routes")),
                                                                                                                     format!("<= {:.1} s", b.target_s)),
        row("  time per route (first to last)",       per_route(b),                  "",             h(&|h| per_route(&h.burst)), format!("{} ms action", f.action_ms)),
        row("  all Nodes NetworkUnavailable=False after",
                                                      secs(b.all_nodes_route_created_s, b.nodes_route_created, "Nodes"),
                                                                                     "",             h(&|h| secs(h.burst.all_nodes_route_created_s, h.burst.nodes_route_created, "Nodes")), ""),
        row("  NetworkUnavailable writes",            b.condition_writes,            "",             h(&|h| h.burst.condition_writes.to_string()), ""),
        row("  cloud calls",                          b.calls.total,                 "",             h(&|h| h.burst.calls.total.to_string()), ""),
        row("  calls per route",                      format!("{:.2}", b.calls_per_route), "",       h(&|h| format!("{:.2}", h.burst.calls_per_route)), format!("<= {}", target::CALLS_PER_ROUTE)),
        row("  423 locked answers",                   b.locked_423,                  "",             h(&|h| h.burst.locked_423.to_string()), "0"),
        row(format!("idle {idle_s} s at --route-reconciliation-period={resync_s}s"),
                                                      "",                            "",             "",             ""),
        row("  cloud calls",                          i.calls.total,                 "",             h(&|h| h.idle.calls.total.to_string()), ""),
        row(format!("  per hour at a {resync_s} s period"),
                                                      format!("{:.0}", i.calls_per_hour_at_resync),
                                                                                     format!(">= {}", upstream::IDLE_CALLS_PER_HOUR_AT_LEAST),
                                                                                                     h(&|h| format!("{:.0}", h.idle.calls_per_hour_at_resync)), ""),
        row(format!("  per hour at our default {} min", default_s / 60),
                                                      format!("{:.0}", i.calls_per_hour_at_default),
                                                                                     format!(">= {}", upstream::IDLE_CALLS_PER_HOUR_AT_LEAST),
                                                                                                     h_idle,
                                                                                                                     format!("<= {}", target::IDLE_CALLS_PER_HOUR)),
        row("peak RSS (VmHWM)",                       format!("{:.1} MiB", mib(f.memory.peak_rss_kib)),
                                                                                     "",             h(&|h| format!("{:.1} MiB", mib(h.memory.peak_rss_kib))),
                                                                                                                     format!("<= {} MiB", target::PEAK_RSS_MIB)),
        row("RSS at the end",                         format!("{:.1} MiB", mib(f.memory.rss_kib)),
                                                                                     "",             h(&|h| format!("{:.1} MiB", mib(h.memory.rss_kib))), ""),
    ];
    for line in rows {
        println!("{}", line.trim_end());
    }
    println!(
        "  upstream: a full pass every 10 s, each >= 1 network read (HCCM: + a server list); HCCM: {}",
        if hccm.is_some() {
            "this run (its default period is 10 s)"
        } else {
            "measured earlier, 30 s period"
        }
    );
    for f in std::iter::once(f).chain(hccm) {
        println!("  cloud calls by endpoint ({})", f.manager);
        print_endpoints(f);
    }
}

fn print_endpoints(f: &Figures) {
    for (phase, calls) in [("burst", &f.burst.calls), ("idle", &f.idle.calls)] {
        let statuses: Vec<String> = calls
            .by_status
            .iter()
            .map(|(s, c)| format!("{s}: {c}"))
            .collect();
        println!("    {phase}: {} ({})", calls.total, statuses.join(", "));
        calls.print_endpoints("      ");
    }
}

/// One line of the table: figure, ours, upstream's, HCCM's, target.
fn row(
    figure: impl Display,
    ours: impl Display,
    upstream: impl Display,
    hccm: impl Display,
    target: impl Display,
) -> String {
    format!("  {figure:<44}{ours:<14}{upstream:<11}{hccm:<23}{target}")
}
