//! `cargo xtask bench cloudstack-services`: LoadBalancer Services on CloudStack, ours beside
//! upstream's CCM (apache/cloudstack-kubernetes-provider v1.2.0, `testenv::cloudstack_ccm()`).
//!
//! cloud-sim's CloudStack API with async jobs taking 500 ms (100 ms with `--quick`), 10 VMs and
//! their Ready Nodes (providerIDs set, names the VMs': upstream finds members by name), one
//! manager at a time against a fresh control plane (ours: the service-controller binary;
//! upstream: `--controllers=service`), the same cloud-config file. Then:
//! 1. N Services (20; 5 with `--quick`) with TCP ports 80 and 443 created at once: time until
//!    every one has an ingress IP (both set it once every rule and firewall rule is made);
//! 2. one VM + Node joins: time until every rule has it as a member;
//! 3. nothing happens for 120 s (10 s with `--quick`), the calls extrapolated to an hour;
//! 4. the manager restarts: the calls until it is quiet again (both ensure every Service at
//!    start; ours does the same every drift check, which a short idle window does not see, so
//!    ours' hourly figure adds 3600 s / [`DRIFT_PERIOD`] of them).
//!
//! Calls are cloud-sim's CloudStack counters, less the benchmark's own reads of phase 2 (it
//! counts them); memory is the manager's VmHWM at the end.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, NodeSpec, Service};
use kube::Api;
use kube::api::{ListParams, PostParams};
use serde::Serialize;

use super::cloudstack_nodes::{Manager, spawn};
use super::plot::Curve;
use super::services::{PORTS, add_ready_nodes, has_ingress, load_balancer_service};
use super::{BenchArgs, Env, Memory, mib};

const NODES: usize = 10;
const NAMESPACE: &str = "default";
const TIMEOUT: Duration = Duration::from_secs(600);
/// Pause after a phase converged, so its trailing calls (a last job poll) are counted in it.
const SETTLE: Duration = Duration::from_secs(3);
/// A restart is over once no call came for this long.
const QUIET: Duration = Duration::from_secs(5);
/// Our service-controller's default drift check period (`--load-balancer-drift-check-period`):
/// each check re-ensures every Service, as a restart does. Upstream has none.
const DRIFT_PERIOD: Duration = Duration::from_secs(600);

/// What `bench cloudstack-services` measured for one manager.
#[derive(Debug, Serialize)]
pub struct Figures {
    pub services: usize,
    pub nodes: usize,
    pub job_ms: u128,
    /// `ours` or `upstream`.
    pub manager: &'static str,
    /// Phase 1: `None` when not every Service had an ingress IP within the timeout.
    pub all_ingress_s: Option<f64>,
    pub with_ingress: usize,
    pub create: PhaseCalls,
    /// Phase 2: until every rule has the new VM.
    pub join_s: Option<f64>,
    pub join: PhaseCalls,
    pub idle_seconds: u64,
    pub idle: PhaseCalls,
    /// Phase 4: until quiet again after a restart (`None`: never within the timeout).
    pub restart_s: Option<f64>,
    pub restart: PhaseCalls,
    /// At the end; `peak_rss_kib` is the peak over the whole run.
    pub memory: Memory,
    pub convergence: Curve,
}

/// A phase's CloudStack calls, by command.
#[derive(Debug, Clone, Default, Serialize)]
pub struct PhaseCalls {
    pub total: u64,
    /// Every call but reads (`list*`) and job polls.
    pub writes: u64,
    pub by_command: BTreeMap<String, u64>,
}

impl PhaseCalls {
    /// The sim's counters since the last reset, less `probes` (the benchmark's own calls).
    fn of(sim: &cloud_sim::Sim, probes: &BTreeMap<String, u64>) -> PhaseCalls {
        let mut by_command = BTreeMap::new();
        for (k, n) in sim.request_counts() {
            let Some(cmd) = k.strip_prefix("CLOUDSTACK ") else {
                continue;
            };
            let n = n.saturating_sub(probes.get(cmd).copied().unwrap_or(0));
            if n > 0 {
                by_command.insert(cmd.to_owned(), n);
            }
        }
        let writes = by_command
            .iter()
            .filter(|(c, _)| !c.starts_with("list") && *c != "queryAsyncJobResult")
            .map(|(_, n)| n)
            .sum();
        PhaseCalls {
            total: by_command.values().sum(),
            writes,
            by_command,
        }
    }

    fn as_calls(&self) -> super::Calls {
        super::Calls {
            total: self.total,
            by_endpoint: self.by_command.clone(),
            ..Default::default()
        }
    }
}

pub async fn run(args: &BenchArgs, manager: Manager<'_>) -> anyhow::Result<Figures> {
    let n = args.services.unwrap_or(if args.quick { 5 } else { 20 });
    let job = Duration::from_millis(if args.quick { 100 } else { 500 });
    let env = Env::start(Some(job)).await?;
    let cs = env.sim.cloudstack_client();
    let ids = cs
        .create_vms(NODES, "cs-node", &cloud_sim::CsVmSpec::default())
        .await
        .map_err(|e| anyhow::anyhow!("creating VMs: {e}"))?;
    let vms: Vec<(String, String)> = ids
        .iter()
        .enumerate()
        .map(|(i, id)| (id.clone(), format!("cs-node-{}", i + 1)))
        .collect();
    add_nodes(&env, &vms).await?;
    let dir = std::env::temp_dir().join(format!("bench-cs-services-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let cloud_config = dir.join("cloud-config");
    std::fs::write(
        &cloud_config,
        format!(
            "[Global]\napi-url = {}\napi-key = {}\nsecret-key = {}\n",
            env.sim.cloudstack_endpoint(),
            env.sim.cloudstack_api_key(),
            env.sim.cloudstack_secret_key()
        ),
    )?;
    let mut ctl = spawn(args, &env, manager, (&cloud_config, "service"), &dir)?;
    let start_call = match manager {
        Manager::Ours(_) => "listZones",
        Manager::Upstream(_) => "listManagementServersMetrics",
    };
    let up = ctl
        .wait_until(Duration::from_secs(60), async || {
            Ok(env.sim.cloudstack_calls(start_call) > 0)
        })
        .await?;
    anyhow::ensure!(up, "{}: no {start_call} within 60 s", manager.name());
    // Its Node and Service lists done: the start-up is not part of any phase.
    tokio::time::sleep(Duration::from_secs(2)).await;
    env.sim.reset_counters();
    let none = BTreeMap::new();

    // 1. N Services at once.
    let services: Api<Service> = Api::namespaced(env.client.clone(), NAMESPACE);
    let start = Instant::now();
    let pp = PostParams::default();
    let new: Vec<Service> = (1..=n).map(load_balancer_service).collect();
    futures::future::try_join_all(new.iter().map(|s| services.create(&pp, s))).await?;
    let mut with_ingress = 0;
    let mut convergence = Curve::new(
        format!(
            "cloudstack-services: {n} with an ingress IP ({})",
            manager.name()
        ),
        n,
    );
    let done = ctl
        .wait_until(TIMEOUT, async || {
            let list = services.list(&ListParams::default()).await?;
            with_ingress = list.items.iter().filter(|s| has_ingress(s)).count();
            convergence.record(start.elapsed().as_secs_f64(), with_ingress);
            Ok(with_ingress == n)
        })
        .await?;
    let all_ingress_s = done.then(|| start.elapsed().as_secs_f64());
    tokio::time::sleep(SETTLE).await;
    let create = PhaseCalls::of(&env.sim, &none);

    // 2. One VM + Node joins.
    env.sim.reset_counters();
    let joining = cs
        .create_vm(&cloud_sim::CsVmSpec::named("cs-join"))
        .await
        .map_err(|e| anyhow::anyhow!("creating the joining VM: {e}"))?;
    let start = Instant::now();
    add_nodes(&env, &[(joining.clone(), "cs-join".into())]).await?;
    let mut probe = Probe::new(&env.sim);
    let rules = n * PORTS.len();
    let done = ctl
        .wait_until(TIMEOUT, async || {
            Ok(probe.rules_with(&joining).await? == rules)
        })
        .await?;
    let join_s = done.then(|| start.elapsed().as_secs_f64());
    tokio::time::sleep(SETTLE).await;
    let join = PhaseCalls::of(&env.sim, &probe.calls);

    // 3. Idle.
    env.sim.reset_counters();
    let idle_for = Duration::from_secs(if args.quick { 10 } else { 120 });
    tokio::time::sleep(idle_for).await;
    let idle = PhaseCalls::of(&env.sim, &none);
    let memory = ctl.memory();

    // 4. A restart.
    ctl.stop().await;
    env.sim.reset_counters();
    let start = Instant::now();
    let mut ctl = spawn(args, &env, manager, (&cloud_config, "service"), &dir)?;
    let mut last = (0, Instant::now());
    let quiet = ctl
        .wait_until(TIMEOUT, async || {
            let now = env.sim.cloudstack_total_calls();
            if now != last.0 {
                last = (now, Instant::now());
            }
            Ok(now > 1 && last.1.elapsed() > QUIET)
        })
        .await?;
    let restart_s = quiet.then(|| (last.1 - start).as_secs_f64());
    let restart = PhaseCalls::of(&env.sim, &none);
    let figures = Figures {
        services: n,
        nodes: NODES,
        job_ms: job.as_millis(),
        manager: manager.name(),
        all_ingress_s,
        with_ingress,
        create,
        join_s,
        join,
        idle_seconds: idle_for.as_secs(),
        idle,
        restart_s,
        restart,
        memory,
        convergence,
    };
    ctl.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(figures)
}

/// The benchmark's own reads of the rules, counted so they can be left out of the manager's.
struct Probe {
    cs: cloud_sim::CloudStackClient,
    calls: BTreeMap<String, u64>,
}

impl Probe {
    fn new(sim: &cloud_sim::Sim) -> Probe {
        Probe {
            cs: sim.cloudstack_client().unfaulted(),
            calls: BTreeMap::new(),
        }
    }

    async fn list(
        &mut self,
        command: &str,
        params: &[(&str, &str)],
    ) -> anyhow::Result<Vec<serde_json::Value>> {
        *self.calls.entry(command.to_owned()).or_default() += 1;
        let v = self
            .cs
            .call(command, params)
            .await
            .map_err(|e| anyhow::anyhow!("{command}: {e}"))?;
        let key = command.trim_start_matches("list").to_lowercase();
        // `listLoadBalancerRules` → `loadbalancerrule`, `…RuleInstances` → `…ruleinstance`.
        let key = key.trim_end_matches('s');
        Ok(v[key].as_array().cloned().unwrap_or_default())
    }

    /// How many load-balancer rules have `vm` as a member.
    async fn rules_with(&mut self, vm: &str) -> anyhow::Result<usize> {
        let rules = self
            .list("listLoadBalancerRules", &[("listall", "true")])
            .await?;
        let mut with = 0;
        for r in rules {
            let id = r["id"].as_str().unwrap_or_default().to_owned();
            let members = self
                .list("listLoadBalancerRuleInstances", &[("id", &id)])
                .await?;
            with += usize::from(members.iter().any(|m| m["id"] == vm));
        }
        Ok(with)
    }
}

/// A Ready Node with providerID `external-cloudstack://<id>` for each `(VM id, name)`.
async fn add_nodes(env: &Env, vms: &[(String, String)]) -> anyhow::Result<()> {
    let nodes = vms.iter().map(|(id, name)| {
        let mut node = Node::default();
        node.metadata.name = Some(name.clone());
        node.spec = Some(NodeSpec {
            provider_id: Some(format!("external-cloudstack://{id}")),
            ..Default::default()
        });
        node
    });
    add_ready_nodes(env, nodes.collect()).await
}

impl Figures {
    /// This scenario's line in the summary table (the creation burst).
    pub fn row(&self) -> super::Row {
        super::Row::new(
            "cloudstack-services",
            self.manager,
            format!("{} Services, {} nodes", self.services, self.nodes),
            self.all_ingress_s,
            &self.create.as_calls(),
            self.memory.peak_rss_kib,
        )
    }

    /// The idle window's calls at that rate for an hour.
    pub fn idle_per_hour(&self) -> f64 {
        self.idle.total as f64 * 3600.0 / self.idle_seconds.max(1) as f64
    }

    /// [`Figures::idle_per_hour`] with ours' drift checks, each costing a restart's calls.
    pub fn idle_per_hour_with_drift(&self) -> f64 {
        let checks = match self.manager {
            "ours" => 3600.0 / DRIFT_PERIOD.as_secs_f64(),
            _ => 0.0,
        };
        self.idle_per_hour() + checks * self.restart.total as f64
    }
}

/// Prints ours beside upstream's, with ours divided by upstream's (< 1: ours is ahead).
pub fn print(ours: &Figures, upstream: &Figures) {
    println!(
        "CloudStack load balancers ({} Services × {} ports, {} nodes, jobs {} ms): ours beside upstream's CCM v1.2.0",
        ours.services,
        PORTS.len(),
        ours.nodes,
        ours.job_ms
    );
    let secs = |s: Option<f64>| s.map_or("never".to_string(), |s| format!("{s:.2} s"));
    let ratio = |o: Option<f64>, u: Option<f64>| match (o, u) {
        (Some(o), Some(u)) if u > 0.0 => format!("{:.2}", o / u),
        (Some(o), Some(u)) if o == u => "=".to_string(),
        _ => "-".to_string(),
    };
    let num = |n: u64| Some(n as f64);
    let per_service = |f: &Figures| f.create.total as f64 / f.services as f64;
    let peak = |f: &Figures| f.memory.peak_rss_kib as f64;
    let rows = [
        row("", "ours", "upstream", "ours / upstream"),
        row(
            "all with an ingress IP",
            secs(ours.all_ingress_s),
            secs(upstream.all_ingress_s),
            ratio(ours.all_ingress_s, upstream.all_ingress_s),
        ),
        row(
            "calls, creation",
            ours.create.total,
            upstream.create.total,
            ratio(num(ours.create.total), num(upstream.create.total)),
        ),
        row(
            "  per Service",
            format!("{:.1}", per_service(ours)),
            format!("{:.1}", per_service(upstream)),
            ratio(Some(per_service(ours)), Some(per_service(upstream))),
        ),
        row(
            "  of them writes",
            ours.create.writes,
            upstream.create.writes,
            ratio(num(ours.create.writes), num(upstream.create.writes)),
        ),
        row(
            "a node joins: all rules",
            secs(ours.join_s),
            secs(upstream.join_s),
            ratio(ours.join_s, upstream.join_s),
        ),
        row(
            "  calls",
            ours.join.total,
            upstream.join.total,
            ratio(num(ours.join.total), num(upstream.join.total)),
        ),
        row(
            "  of them writes",
            ours.join.writes,
            upstream.join.writes,
            ratio(num(ours.join.writes), num(upstream.join.writes)),
        ),
        row(
            format!("idle {} s: calls", ours.idle_seconds),
            ours.idle.total,
            upstream.idle.total,
            ratio(num(ours.idle.total), num(upstream.idle.total)),
        ),
        row(
            "  per hour at that rate",
            format!("{:.0}", ours.idle_per_hour()),
            format!("{:.0}", upstream.idle_per_hour()),
            ratio(Some(ours.idle_per_hour()), Some(upstream.idle_per_hour())),
        ),
        row(
            "  with drift checks",
            format!("{:.0}", ours.idle_per_hour_with_drift()),
            format!("{:.0}", upstream.idle_per_hour_with_drift()),
            ratio(
                Some(ours.idle_per_hour_with_drift()),
                Some(upstream.idle_per_hour_with_drift()),
            ),
        ),
        row(
            "restart: quiet after",
            secs(ours.restart_s),
            secs(upstream.restart_s),
            ratio(ours.restart_s, upstream.restart_s),
        ),
        row(
            "  calls",
            ours.restart.total,
            upstream.restart.total,
            ratio(num(ours.restart.total), num(upstream.restart.total)),
        ),
        row(
            "  of them writes",
            ours.restart.writes,
            upstream.restart.writes,
            ratio(num(ours.restart.writes), num(upstream.restart.writes)),
        ),
        row(
            "peak RSS (VmHWM)",
            format!("{:.1} MiB", mib(ours.memory.peak_rss_kib)),
            format!("{:.1} MiB", mib(upstream.memory.peak_rss_kib)),
            ratio(Some(peak(ours)), Some(peak(upstream))),
        ),
    ];
    for line in rows {
        println!("{}", line.trim_end());
    }
    for f in [ours, upstream] {
        for (phase, calls) in [
            ("creation", &f.create),
            ("node join", &f.join),
            ("idle", &f.idle),
            ("restart", &f.restart),
        ] {
            let by: Vec<String> = calls
                .by_command
                .iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect();
            println!("  {} {phase}: {}", f.manager, by.join(", "));
        }
    }
}

fn row(
    figure: impl std::fmt::Display,
    ours: impl std::fmt::Display,
    upstream: impl std::fmt::Display,
    ratio: impl std::fmt::Display,
) -> String {
    format!("  {figure:<26}{ours:<16}{upstream:<16}{ratio}")
}

/// Ours, then upstream's, each on a world of its own; printed side by side and added to the
/// JSON figures, the plot's curves and the summary table.
pub fn run_both(
    rt: &tokio::runtime::Runtime,
    args: &BenchArgs,
    figures: &mut BTreeMap<&'static str, serde_json::Value>,
    curves: &mut Vec<Curve>,
    rows: &mut Vec<super::Row>,
) -> anyhow::Result<()> {
    let binary = super::controller_binary("service-controller", args)?;
    let upstream = testenv::cloudstack_ccm()?;
    let ours = rt.block_on(run(args, Manager::Ours(&binary)))?;
    let theirs = rt.block_on(run(args, Manager::Upstream(&upstream)))?;
    print(&ours, &theirs);
    curves.extend([ours.convergence.clone(), theirs.convergence.clone()]);
    rows.extend([ours.row(), theirs.row()]);
    figures.insert("cloudstack_services", serde_json::to_value(ours)?);
    figures.insert(
        "cloudstack_services_upstream",
        serde_json::to_value(theirs)?,
    );
    Ok(())
}
