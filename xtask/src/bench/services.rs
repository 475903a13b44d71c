//! `cargo xtask bench services`: LoadBalancer Services, the scenario HCCM was measured with.
//!
//! cloud-sim with actions taking 500 ms, 10 servers and their Ready Nodes (providerIDs set; no
//! node-controller runs), the service-controller binary. Then:
//! 1. N Services of `type: LoadBalancer` with TCP ports 80 and 443 are created at once: time until
//!    all have an ingress IP, and until every load balancer has 10 targets and 2 services;
//! 2. one server + Node joins: time until every load balancer has 11 targets;
//! 3. nothing happens for 120 s (10 s with `--quick`);
//! 4. ours only, without `--zones`: a TLS Secret's certificate on every load balancer, renewed,
//!    then touched unchanged ([`certificate_rotation`](super::certificate_rotation)).
//!
//! With `--zones` the cluster spans two network zones: 5 more nodes in ash (us-east) from the
//! start, and the node of phase 2 joins in ash. The load balancers stay in fsn1 with the 10
//! eu-central nodes as targets; phase 2 ends when every Service's condition names the new node,
//! and counts the calls made to the load balancers (0 is the goal).
//!
//! Each phase reports its cloud calls; the end, the controller's peak and final RSS.

use std::fmt::Display;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{
    Node, NodeCondition, NodeSpec, NodeStatus, Service, ServicePort, ServiceSpec,
};
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use serde::Serialize;

use super::certificate_rotation::{self, Rotation};
use super::plot::Curve;
use super::{BenchArgs, Calls, Env, Manager, Memory, PROBE_QUERY, create_nodes, mib};

pub(super) const NODES: usize = 10;
/// `--zones`: nodes in ash besides the [`NODES`] in fsn1.
const OTHER_ZONE_NODES: usize = 5;
pub(super) const PORTS: [i32; 2] = [80, 443];
pub(super) const ACTION: Duration = Duration::from_millis(500);
pub(super) const NAMESPACE: &str = "default";
/// How long phase 1 and 2 may take before the benchmark reports them as never done.
pub(super) const TIMEOUT: Duration = Duration::from_secs(300);
/// Pause after a phase converged, so its trailing calls (a last action poll) are counted in it.
pub(super) const SETTLE: Duration = Duration::from_secs(3);

/// HCCM (hcloud-cloud-controller-manager built from source, defaults), measured earlier with this
/// scenario at 20 Services on the same cloud-sim with 500 ms actions and kube-apiserver
/// (docs/architecture.md, "Targets"; the peak RSS comes from the same runs).
mod hccm {
    pub const SERVICES: usize = 20;
    pub const CREATE_CALLS: u64 = 602;
    pub const ALL_INGRESS_S: u64 = 131;
    pub const JOIN_CALLS: u64 = 139;
    pub const JOIN_UPDATE_SERVICE: u64 = 40;
    pub const IDLE_CALLS: u64 = 0;
    pub const PEAK_RSS_MIB: u64 = 59;
}

/// What `bench services` measured.
#[derive(Debug, Serialize)]
pub struct Figures {
    pub services: usize,
    pub nodes: usize,
    /// Nodes in ash (us-east) besides `nodes` in fsn1 (`--zones`).
    pub other_zone_nodes: usize,
    pub action_ms: u128,
    /// `ours` or `HCCM`.
    pub manager: &'static str,
    pub profile: String,
    pub create: Create,
    pub node_join: Join,
    pub idle: Idle,
    /// Phase 4: `None` for HCCM and with `--zones`.
    pub certificates: Option<Rotation>,
    /// At the end; `peak_rss_kib` is the peak over the whole run.
    pub memory: Memory,
    /// Services with an ingress IP over time (for `--plot`).
    pub convergence: Curve,
}

/// Phase 1. Times are `None` when the state was never reached within the timeout.
#[derive(Debug, Serialize)]
pub struct Create {
    pub all_ingress_s: Option<f64>,
    pub with_ingress: usize,
    pub all_load_balancers_complete_s: Option<f64>,
    pub load_balancers: LbCount,
    pub calls: Calls,
    pub calls_per_service: f64,
}

/// Phase 2.
#[derive(Debug, Serialize)]
pub struct Join {
    /// Until every load balancer has the new node (with `--zones`: until every Service says it
    /// is left out).
    pub all_targets_s: Option<f64>,
    /// Calls whose path names one of the load balancers.
    pub calls_to_load_balancers: u64,
    pub load_balancers: LbCount,
    pub calls: Calls,
    /// Every load balancer gains the new node.
    pub calls_per_changed_load_balancer: f64,
    pub update_service: u64,
}

/// Phase 3.
#[derive(Debug, Serialize)]
pub struct Idle {
    pub seconds: u64,
    pub calls: Calls,
}

/// The sim's load balancers, and how many have the targets and services asked for.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct LbCount {
    pub total: usize,
    pub complete: usize,
}

impl Figures {
    /// This scenario's line in the summary table (the creation burst).
    pub fn row(&self) -> super::Row {
        super::Row::new(
            "services",
            self.manager,
            format!("{} Services, {} nodes", self.services, self.nodes),
            self.create.all_ingress_s,
            &self.create.calls,
            self.memory.peak_rss_kib,
        )
    }
}

pub async fn run(args: &BenchArgs, manager: Manager<'_>) -> anyhow::Result<Figures> {
    let n = args.services.unwrap_or(if args.quick { 5 } else { 20 });
    let env = Env::start(Some(ACTION)).await?;
    add_nodes(&env, &env.servers(NODES, "bench-node").await?, "fsn1").await?;
    let other_zone_nodes = if args.zones { OTHER_ZONE_NODES } else { 0 };
    if args.zones {
        let ash = env.servers_in(other_zone_nodes, "bench-ash", "cpx11", "ash");
        add_nodes(&env, &ash.await?, "ash").await?;
    }
    let lb_env = [
        ("HCLOUD_LOAD_BALANCERS_LOCATION", "fsn1"),
        ("HCLOUD_LOAD_BALANCERS_TYPE", "lb11"),
    ];
    // Phase 4 needs our controller to read the labelled TLS Secrets.
    let rotation = matches!(manager, Manager::Ours(_)) && !args.zones;
    let flags: &[&str] = if rotation {
        &[certificate_rotation::FLAG]
    } else {
        &[]
    };
    let mut ctl = env
        .launch(args, manager, "service-lb-controller", flags, &lb_env)
        .await?;
    let services: Api<Service> = Api::namespaced(env.client.clone(), NAMESPACE);

    // 1. N Services at once.
    let start = Instant::now();
    let pp = PostParams::default();
    let new: Vec<Service> = (1..=n).map(load_balancer_service).collect();
    futures::future::try_join_all(new.iter().map(|s| services.create(&pp, s))).await?;
    let (mut ingress_s, mut with_ingress) = (None, 0);
    let (mut complete_s, mut lbs) = (None, LbCount::default());
    let mut convergence = Curve::new(format!("services: {n} with an ingress IP"), n);
    ctl.wait_until(TIMEOUT, async || {
        if ingress_s.is_none() {
            let list = services.list(&ListParams::default()).await?;
            with_ingress = list.items.iter().filter(|s| has_ingress(s)).count();
            convergence.record(start.elapsed().as_secs_f64(), with_ingress);
            ingress_s = (with_ingress == n).then(|| start.elapsed().as_secs_f64());
        }
        if complete_s.is_none() {
            lbs = load_balancers(&env, NODES).await?;
            complete_s = (lbs.complete == n).then(|| start.elapsed().as_secs_f64());
        }
        Ok(ingress_s.is_some() && complete_s.is_some())
    })
    .await?;
    tokio::time::sleep(SETTLE).await;
    let calls = Calls::of(&env.sim);
    let create = Create {
        all_ingress_s: ingress_s,
        with_ingress,
        all_load_balancers_complete_s: complete_s,
        load_balancers: lbs,
        calls_per_service: calls.total as f64 / n as f64,
        calls,
    };

    // 2. One node joins (with `--zones`: in ash, where no load balancer reaches it).
    env.sim.reset_counters();
    let start = Instant::now();
    let joining = if args.zones {
        let ash = env.servers_in(1, "bench-join", "cpx11", "ash").await?;
        add_nodes(&env, &ash, "ash").await?;
        Some(ash[0].1.clone())
    } else {
        add_nodes(&env, &env.servers(1, "bench-join").await?, "fsn1").await?;
        None
    };
    let mut lbs = LbCount::default();
    let done = ctl
        .wait_until(TIMEOUT, async || {
            if let Some(node) = &joining {
                let list = services.list(&ListParams::default()).await?;
                lbs = load_balancers(&env, NODES).await?;
                let mut ours = list.items.iter().filter(|s| is_load_balancer(s));
                return Ok(ours.all(|s| names_left_out(s, node)));
            }
            lbs = load_balancers(&env, NODES + 1).await?;
            Ok(lbs.complete == n)
        })
        .await?;
    let all_targets_s = done.then(|| start.elapsed().as_secs_f64());
    tokio::time::sleep(SETTLE).await;
    let calls = Calls::of(&env.sim);
    let node_join = Join {
        all_targets_s,
        calls_to_load_balancers: calls.by_load_balancer.values().sum(),
        load_balancers: lbs,
        calls_per_changed_load_balancer: calls.total as f64 / n as f64,
        update_service: calls.to("/actions/update_service"),
        calls,
    };

    // 3. Idle.
    env.sim.reset_counters();
    let idle = Duration::from_secs(if args.quick { 10 } else { 120 });
    tokio::time::sleep(idle).await;
    let idle = Idle {
        seconds: idle.as_secs(),
        calls: Calls::of(&env.sim),
    };

    // 4. A Secret's certificate, renewed, then unchanged.
    let certificates = match rotation {
        true => Some(certificate_rotation::run(&env, &mut ctl, n).await?),
        false => None,
    };
    let figures = Figures {
        services: n,
        nodes: NODES,
        other_zone_nodes,
        action_ms: ACTION.as_millis(),
        manager: manager.name(),
        profile: args.profile.clone(),
        create,
        node_join,
        idle,
        certificates,
        memory: ctl.memory(),
        convergence,
    };
    ctl.stop().await;
    Ok(figures)
}

/// Creates a Ready Node with providerID `hcloud://<id>` for each server, in `location` as the
/// node-controller labels it.
pub(super) async fn add_nodes(
    env: &Env,
    servers: &[(u64, String)],
    location: &str,
) -> anyhow::Result<()> {
    let nodes = servers.iter().map(|(id, name)| {
        let mut node = Node::default();
        node.metadata.name = Some(name.clone());
        node.metadata.labels = Some(
            [(
                "topology.kubernetes.io/region".to_string(),
                location.to_string(),
            )]
            .into(),
        );
        node.spec = Some(NodeSpec {
            provider_id: Some(format!("hcloud://{id}")),
            ..Default::default()
        });
        node
    });
    add_ready_nodes(env, nodes.collect()).await
}

/// Creates `nodes` and reports each Ready, as a kubelet would.
pub(super) async fn add_ready_nodes(env: &Env, nodes: Vec<Node>) -> anyhow::Result<()> {
    let names: Vec<String> = nodes
        .iter()
        .filter_map(|n| n.metadata.name.clone())
        .collect();
    create_nodes(&env.client, nodes).await;
    let ready = NodeStatus {
        conditions: Some(vec![NodeCondition {
            type_: "Ready".into(),
            status: "True".into(),
            reason: Some("KubeletReady".into()),
            ..Default::default()
        }]),
        ..Default::default()
    };
    let patch = Patch::Merge(serde_json::json!({ "status": ready }));
    let api: Api<Node> = Api::all(env.client.clone());
    for name in &names {
        api.patch_status(name, &PatchParams::default(), &patch)
            .await?;
    }
    Ok(())
}

/// Service `bench-svc-<i>` of `type: LoadBalancer` with TCP ports 80 and 443.
pub(super) fn load_balancer_service(i: usize) -> Service {
    let mut s = Service::default();
    s.metadata.name = Some(format!("bench-svc-{i}"));
    s.spec = Some(ServiceSpec {
        type_: Some("LoadBalancer".into()),
        selector: Some([("app".to_string(), format!("bench-{i}"))].into()),
        ports: Some(
            PORTS
                .iter()
                .map(|&port| ServicePort {
                    name: Some(format!("p{port}")),
                    port,
                    protocol: Some("TCP".into()),
                    ..Default::default()
                })
                .collect(),
        ),
        ..Default::default()
    });
    s
}

/// Whether the Service is `type: LoadBalancer` (not the apiserver's own `kubernetes`).
fn is_load_balancer(s: &Service) -> bool {
    s.spec.as_ref().and_then(|s| s.type_.as_deref()) == Some("LoadBalancer")
}

/// Whether the Service's `LoadBalancerReady` condition names `node` (as left out of its zone).
fn names_left_out(s: &Service, node: &str) -> bool {
    s.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.message.contains(node)))
}

pub(super) fn has_ingress(s: &Service) -> bool {
    s.status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref()?.ingress.as_ref())
        .is_some_and(|i| i.iter().any(|i| i.ip.is_some()))
}

/// The sim's load balancers; complete = `targets` targets and one service per port. Read with
/// [`PROBE_QUERY`], so these reads are not counted as the controller's.
async fn load_balancers(env: &Env, targets: usize) -> anyhow::Result<LbCount> {
    let lbs = env
        .sim
        .client()
        .list_all(&format!("load_balancers?{PROBE_QUERY}"))
        .await
        .map_err(|e| anyhow::anyhow!("listing load balancers: {e}"))?;
    let len = |lb: &serde_json::Value, field: &str| lb[field].as_array().map_or(0, Vec::len);
    Ok(LbCount {
        total: lbs.len(),
        complete: lbs
            .iter()
            .filter(|lb| len(lb, "targets") == targets && len(lb, "services") == PORTS.len())
            .count(),
    })
}

/// Prints our figures beside HCCM's: measured in this run (`--hccm`), else recorded earlier.
pub fn print(f: &Figures, hccm: Option<&Figures>) {
    let (n, c, j) = (f.services, &f.create, &f.node_join);
    let secs = |s: Option<f64>, done: usize, of: &str| match s {
        Some(s) => format!("{s:.2} s"),
        None => format!("never ({done}/{n} {of} after {} s)", TIMEOUT.as_secs()),
    };
    let ratio = |calls: u64, of: usize| format!("{:.2}", calls as f64 / of as f64);
    let (ports, nodes) = (PORTS.len(), f.nodes);
    let zones = match f.other_zone_nodes {
        0 => String::new(),
        other => format!(" in fsn1 + {other} in ash"),
    };
    println!(
        "service-controller bench ({n} Services x {ports} ports, {nodes} nodes{zones}, actions {} ms, profile {})",
        f.action_ms, f.profile
    );
    let ingress = secs(c.all_ingress_s, c.with_ingress, "with ingress");
    let complete = secs(
        c.all_load_balancers_complete_s,
        c.load_balancers.complete,
        "complete",
    );
    let joined = secs(j.all_targets_s, j.load_balancers.complete, "complete");
    let peak = format!("{:.1} MiB", mib(f.memory.peak_rss_kib));
    let end = format!("{:.1} MiB", mib(f.memory.rss_kib));
    // HCCM's column: this run's figures, or the ones recorded with 20 Services.
    let h = match hccm {
        Some(h) => Theirs {
            heading: format!("HCCM, this run ({} Svc)", h.services),
            ingress: secs(
                h.create.all_ingress_s,
                h.create.with_ingress,
                "with ingress",
            ),
            create_calls: h.create.calls.total,
            per_service: ratio(h.create.calls.total, h.services),
            join_calls: h.node_join.calls.total,
            per_changed_lb: ratio(h.node_join.calls.total, h.services),
            update_service: h.node_join.update_service,
            idle_calls: h.idle.calls.total,
            peak: format!("{:.1} MiB", mib(h.memory.peak_rss_kib)),
        },
        None => Theirs {
            heading: format!("HCCM, recorded ({} Svc)", hccm::SERVICES),
            ingress: format!("{} s", hccm::ALL_INGRESS_S),
            create_calls: hccm::CREATE_CALLS,
            per_service: ratio(hccm::CREATE_CALLS, hccm::SERVICES),
            join_calls: hccm::JOIN_CALLS,
            per_changed_lb: ratio(hccm::JOIN_CALLS, hccm::SERVICES),
            update_service: hccm::JOIN_UPDATE_SERVICE,
            idle_calls: hccm::IDLE_CALLS,
            peak: format!("{} MiB", hccm::PEAK_RSS_MIB),
        },
    };
    let (join_heading, joined_row, join_target) = match f.other_zone_nodes {
        0 => (
            format!("1 node joins ({n} LBs change)"),
            format!("  all LBs {} targets after", nodes + 1),
            "",
        ),
        _ => (
            "1 node joins in ash (no LB changes)".to_string(),
            "  every Service names it after".to_string(),
            "0",
        ),
    };
    // figure, ours, HCCM's, target; a row with only a figure is a heading.
    #[rustfmt::skip]
    let rows = [
        row("",                                  "ours",                     &h.heading,                   "target"),
        row(format!("create {n} Services"),      "",                         "",                           ""),
        row("  all ingress after",               ingress,                    &h.ingress,                   "<= 10 s"),
        row(format!("  all LBs {nodes} targets + {ports} services after"),
                                                 complete,                   "-",                          ""),
        row("  load balancers",                  c.load_balancers.total,     "",                           ""),
        row("  cloud calls",                     c.calls.total,              h.create_calls,               ""),
        row("  calls per Service",               ratio(c.calls.total, n),    &h.per_service,               "<= 1.5"),
        row(join_heading,                        "",                         "",                           ""),
        row(joined_row,                          joined,                     "-",                          ""),
        row("  cloud calls",                     j.calls.total,              h.join_calls,                 ""),
        row("  calls to the load balancers",     j.calls_to_load_balancers,  "",                           join_target),
        row("  calls per changed LB",            ratio(j.calls.total, n),    &h.per_changed_lb,            "<= 2"),
        row("  update_service calls",            j.update_service,           h.update_service,             "0"),
        row(format!("idle {} s: cloud calls", f.idle.seconds),
                                                 f.idle.calls.total,         h.idle_calls,                 "0"),
        row("peak RSS (VmHWM)",                  peak,                       &h.peak,                      "<= 25 MiB"),
        row("RSS at the end",                    end,                        "",                           ""),
    ];
    for line in rows {
        println!("{}", line.trim_end());
    }
    if let Some(r) = &f.certificates {
        let renewed = secs(r.renewed_s, 0, "renewed");
        #[rustfmt::skip]
        let rows = [
            row(format!("a TLS Secret on port 443 of {} LBs", r.load_balancers), "", "", ""),
            row("  renewed: every LB serves it after",  renewed,                          "-", ""),
            row("  cloud calls",                       r.renewal.total,                   "-", ""),
            row("  writes per LB",                     format!("{:.2}", r.writes_per_load_balancer), "-", "<= 4"),
            row("  unchanged, touched: cloud calls",   r.unchanged.total,                 "-", "0"),
        ];
        for line in rows {
            println!("{}", line.trim_end());
        }
    }
    for (who, f) in std::iter::once(f).chain(hccm).map(|f| (f.manager, f)) {
        println!("  cloud calls by endpoint ({who})");
        for (phase, calls) in [
            ("create", &f.create.calls),
            ("node join", &f.node_join.calls),
            ("idle", &f.idle.calls),
        ]
        .into_iter()
        .chain(f.certificates.iter().flat_map(|r| {
            [
                ("certificate renewal", &r.renewal),
                ("unchanged Secret", &r.unchanged),
            ]
        })) {
            println!("    {phase}: {}", calls.total);
            calls.print_endpoints("      ");
        }
    }
}

/// HCCM's column of [`print`].
struct Theirs {
    heading: String,
    ingress: String,
    create_calls: u64,
    per_service: String,
    join_calls: u64,
    per_changed_lb: String,
    update_service: u64,
    idle_calls: u64,
    peak: String,
}

/// One line of the table: figure, ours, HCCM's, target.
fn row(figure: impl Display, ours: impl Display, hccm: impl Display, target: &str) -> String {
    format!("  {figure:<42}{ours:<14}{hccm:<26}{target}")
}
