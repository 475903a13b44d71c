//! The CloudStack rows (issue 56): one world ([`world::CsWorld`]) and one fleet run with
//! `--cloud-provider=external-cloudstack` and upstream's cloud-config (route-controller with
//! `--configure-cloud-routes=false`: CloudStack has no routes), and a row per fault, one after
//! the other in that world. In each row, under the fault: a VM and its Node join, another VM is
//! destroyed and its kubelet stops (its Node must go), a third Node stops reporting with its VM
//! running (it must stay: 0 wrong deletions), and Services with a TCP and a UDP port and
//! source ranges are created; once converged they are deleted, and every rule, firewall rule
//! and address must go. At the end the CloudStack `api-key` and `secret-key` are looked for in
//! everything the fleet produced, as the API tokens are in the other worlds.

mod world;

use std::path::{Path, PathBuf};
use std::time::Duration;

use cloud_sim::{FaultKind, FaultRule};

use super::secrets::Scanner;
use super::{ChaosArgs, Row, log_dir};
use crate::fleet::{self, Fleet};
use world::CsWorld;

/// One CloudStack fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// CloudStack's error answers on every command: 530 (internal error) and 431 (invalid
    /// parameter; what a lookup by an unknown id answers too).
    Errors,
    /// Async jobs that fail (530), and (full run) that never end.
    Jobs,
    /// `api.throttling.*` per account: 429.
    Throttling,
    /// The management server unreachable (503 from the proxy in front of it) for a while.
    Unreachable,
    /// `kill -9` of a controller (the service-controller two times in three) at random moments
    /// while the Services are made and while they are deleted, restarted at once: a kill between
    /// an address's associate and its first rule must leak nothing.
    Crash,
}

/// Kills while the Services converge, and while they are deleted.
const KILLS: (usize, usize) = (6, 3);

#[derive(Debug, Clone)]
pub struct Fault {
    pub name: &'static str,
    pub description: String,
    pub kind: Kind,
}

/// The rows, each a fault of the issue.
pub fn faults(args: &ChaosArgs) -> Vec<Fault> {
    let down = unreachable_for(args).as_secs();
    let r = Rates::of(args);
    vec![
        Fault {
            name: "cs 431/530",
            description: format!(
                "{:.0} % of calls 530; 20 % of VM lookups 431",
                r.errors * 100.0
            ),
            kind: Kind::Errors,
        },
        Fault {
            name: "cs jobs",
            description: if args.quick {
                format!(
                    "async jobs fail (530): the first rule create and assign, then {:.0} %",
                    r.failed_jobs * 100.0
                )
            } else {
                format!(
                    "async jobs fail (530): the first rule create and assign, then {:.0} %; \
                     2 never end",
                    r.failed_jobs * 100.0
                )
            },
            kind: Kind::Jobs,
        },
        Fault {
            name: "cs 429",
            description: format!("throttling: {} calls per 5 s", r.throttle),
            kind: Kind::Throttling,
        },
        Fault {
            name: "cs crash",
            description: format!(
                "kill -9 ×{} while Services are made, ×{} while deleted (service-controller 2 \
                 in 3)",
                KILLS.0, KILLS.1
            ),
            kind: Kind::Crash,
        },
        Fault {
            name: "cs unreachable",
            description: format!("management server 503 for {down} s"),
            kind: Kind::Unreachable,
        },
    ]
}

fn unreachable_for(args: &ChaosArgs) -> Duration {
    Duration::from_secs(if args.quick { 6 } else { 60 })
}

/// How hard each fault hits: gentler in the quick run, which must stay short (the Services'
/// retries back off from 5 s, doubling).
#[derive(Debug, Clone, Copy)]
struct Rates {
    errors: f64,
    failed_jobs: f64,
    /// Calls per 5 s per account.
    throttle: u32,
}

impl Rates {
    fn of(args: &ChaosArgs) -> Rates {
        if args.quick {
            Rates {
                errors: 0.05,
                failed_jobs: 0.05,
                throttle: 40,
            }
        } else {
            // Not more: a Service's first ensure is all or nothing (the fresh address is
            // released with whatever was made on it), so its 7 jobs must all succeed in one
            // reconcile; at 30 % (8 % per attempt) two Services were not served after 7 minutes.
            Rates {
                errors: 0.1,
                failed_jobs: 0.1,
                throttle: 20,
            }
        }
    }
}

/// Services per row: 2 in the quick run.
fn services(args: &ChaosArgs) -> usize {
    if args.quick {
        args.size().services.min(2)
    } else {
        args.size().services
    }
}

/// A rule for `command` (every command: `None`).
fn rule(command: Option<&str>, probability: f64, kind: FaultKind) -> FaultRule {
    FaultRule {
        endpoint: Some(format!("CLOUDSTACK {}", command.unwrap_or("*"))),
        count: None,
        probability,
        every: None,
        kind,
    }
}

fn error(status: u16, cs_code: &str) -> FaultKind {
    FaultKind::Error {
        status: Some(status),
        code: cs_code.into(),
        message: None,
    }
}

/// Injects `kind`; the rules that must have fired by the row's end, and what each stands for.
fn apply(sim: &cloud_sim::Sim, kind: Kind, args: &ChaosArgs) -> Vec<(u64, &'static str)> {
    let r = Rates::of(args);
    let mut must_fire = Vec::new();
    match kind {
        Kind::Errors => {
            sim.faults().add(rule(None, r.errors, error(530, "4250")));
            // What a lookup by an id CloudStack never had answers: never a deletion.
            sim.faults()
                .add(rule(Some("listVirtualMachines"), 0.2, error(431, "4350")));
        }
        Kind::Jobs => {
            sim.faults().add(rule(
                None,
                r.failed_jobs,
                FaultKind::ActionError {
                    code: "530".into(),
                    message: None,
                },
            ));
            // At least these two fail, whatever the dice say: a rule's create on a fresh address
            // (the address must be released again) and a members' assign.
            must_fire.push((
                sim.cloudstack_fail_jobs(Some("createLoadBalancerRule"), 1, 530),
                "a failed createLoadBalancerRule job",
            ));
            must_fire.push((
                sim.cloudstack_fail_jobs(Some("assignToLoadBalancerRule"), 1, 530),
                "a failed assignToLoadBalancerRule job",
            ));
            // The client gives a job 5 minutes, as cloudstack-go does: the full run only.
            if !args.quick {
                sim.cloudstack_stall_jobs(Some("createLoadBalancerRule"), 1);
                sim.cloudstack_stall_jobs(Some("assignToLoadBalancerRule"), 1);
            }
        }
        Kind::Throttling => {
            sim.set_cloudstack_throttling(Some((r.throttle, Duration::from_secs(5))));
        }
        Kind::Unreachable => sim.set_cloudstack_unreachable(true),
        // Associates that take 1.5 s: the first kills land while an address is allocated and
        // has no rule yet, the moment a crash could leak it.
        Kind::Crash => {
            sim.faults().add(rule(
                Some("associateIpAddress"),
                1.0,
                FaultKind::ActionDuration { ms: 1_500 },
            ));
        }
    }
    must_fire
}

/// How often the service-controller's logs say an address was found again by its record.
fn found_by_record(fleet: &Fleet) -> usize {
    fleet
        .logs()
        .iter()
        .filter_map(|l| std::fs::read_to_string(l).ok())
        .map(|text| text.matches(FOUND_BY_RECORD).count())
        .sum()
}

/// In the service-controller's log lines for an address used or released by its record.
const FOUND_BY_RECORD: &str = "the address recorded";

/// What a crash storm did: the controllers killed, and the cloud calls and 429s their processes
/// had counted (gone with them).
#[derive(Debug, Default)]
struct Storm {
    killed: Vec<&'static str>,
    calls: (u64, u64),
}

/// `kill -9` and restart `n` times, 50 to 600 ms apart: the service-controller two times in
/// three (it makes the addresses and rules), another controller else.
async fn crash_storm(
    fleet: &mut Fleet,
    rng: &mut fastrand::Rng,
    n: usize,
    storm: &mut Storm,
) -> anyhow::Result<()> {
    for _ in 0..n {
        tokio::time::sleep(Duration::from_millis(rng.u64(50..600))).await;
        let service = fleet
            .replicas
            .iter()
            .position(|r| r.spec.name == "service-controller");
        let i = match service {
            Some(i) if rng.u8(..3) < 2 => i,
            _ => rng.usize(..fleet.replicas.len()),
        };
        let m = fleet.replicas[i].metrics().await;
        storm.calls.0 += fleet::cloud_calls(&m);
        storm.calls.1 += fleet::cloud_calls_with_status(&m, 429);
        storm.killed.push(fleet.replicas[i].spec.name);
        fleet.crash_and_restart(i).await?;
    }
    Ok(())
}

fn clear(sim: &cloud_sim::Sim) {
    sim.faults().clear();
    sim.set_cloudstack_throttling(None);
    sim.set_cloudstack_unreachable(false);
}

/// Every replica's cloud calls so far, and those answered 429.
async fn calls(fleet: &Fleet) -> (u64, u64) {
    let mut out = (0, 0);
    for r in &fleet.replicas {
        let m = r.metrics().await;
        out.0 += fleet::cloud_calls(&m);
        out.1 += fleet::cloud_calls_with_status(&m, 429);
    }
    out
}

/// Runs the rows `wanted` lets through, in one world; their rows.
pub async fn run(
    args: &ChaosArgs,
    binaries: &[PathBuf],
    wanted: impl Fn(&str) -> bool,
    logs: &Path,
    scan: &mut Scanner,
) -> anyhow::Result<Vec<Row>> {
    let faults: Vec<Fault> = faults(args)
        .into_iter()
        .filter(|f| wanted(f.name))
        .collect();
    if faults.is_empty() {
        return Ok(Vec::new());
    }
    let size = args.size();
    let mut world = CsWorld::build(size.nodes, super::cloud::sim_config()).await?;
    let dir = log_dir(logs, "cloudstack");
    std::fs::create_dir_all(&dir)?;
    let cloud_config = dir.join("cloud-config");
    std::fs::write(
        &cloud_config,
        format!(
            "[Global]\napi-url = {}\napi-key = {}\nsecret-key = {}\n",
            world.sim.cloudstack_endpoint(),
            world.sim.cloudstack_api_key(),
            world.sim.cloudstack_secret_key()
        ),
    )?;
    let extra = [
        "--cloud-provider=external-cloudstack".to_string(),
        format!("--cloud-config={}", cloud_config.display()),
    ];
    let mut fleet = Fleet::start(
        &world.plane,
        &world.admin,
        &world.sim,
        binaries,
        fleet::Options {
            replicas: 1,
            stable_identities: true,
            rust_log: "debug",
            cluster_cidr: crate::demo::machines::CLUSTER_CIDR,
            extra_args: &extra,
            controller_args: &[("route-controller", "--configure-cloud-routes=false".into())],
            extra_env: &[],
            wrapper: None,
            dir: &dir,
        },
    )
    .await?;
    // The world's Nodes initialized before the first fault.
    let ready = world
        .wait_for(args.converge_timeout(), |a| a.converged())
        .await?;
    if let Err(last) = ready {
        anyhow::bail!(
            "chaos cloudstack: the world never came up: {}\n{}",
            last.summary(),
            fleet.log_tails(10)
        );
    }
    let mut rows = Vec::new();
    for (i, fault) in faults.iter().enumerate() {
        let row = run_one(args, &mut world, &mut fleet, fault, i).await?;
        super::print_row(&row);
        rows.push(row);
    }
    // The secrets the controllers were given: upstream's two keys, besides the fleet's token.
    scan.watch(&world.sim.cloudstack_api_key());
    scan.watch(&world.sim.cloudstack_secret_key());
    for token in fleet.tokens() {
        scan.watch(token);
    }
    for r in &fleet.replicas {
        scan.text(&format!("{} /metrics", r.identity), &r.metrics().await);
        scan.text(&format!("{} /plan", r.identity), &r.plan().await);
    }
    scan.events(&world.admin).await?;
    scan.objects(&world.admin).await?;
    for log in fleet.logs() {
        scan.file(&log);
    }
    drop(fleet);
    world.plane.stop();
    Ok(rows)
}

async fn run_one(
    args: &ChaosArgs,
    world: &mut CsWorld,
    fleet: &mut Fleet,
    fault: &Fault,
    i: usize,
) -> anyhow::Result<Row> {
    let exits_before = fleet.unexpected_exits().len();
    let (calls_before, throttled_before) = calls(fleet).await;
    let must_fire = apply(&world.sim, fault.kind, args);
    let back = (fault.kind == Kind::Unreachable).then(|| {
        // Through world building, which the outage does not reach.
        let cs = world.sim.cloudstack_client();
        let down = unreachable_for(args);
        tokio::spawn(async move {
            tokio::time::sleep(down).await;
            cs.set_config(serde_json::json!({"unreachable": false}))
                .await
        })
    });
    let started = std::time::Instant::now();
    // A VM joins, one is destroyed, one Node stops reporting with its VM running.
    let standing: Vec<String> = world.vms.keys().cloned().collect();
    anyhow::ensure!(standing.len() > 2 * i + 1, "too few Nodes for row {i}");
    let (destroyed, silent) = (standing[2 * i].clone(), standing[2 * i + 1].clone());
    world.add_nodes(1).await?;
    world.destroy_vm(&destroyed).await?;
    world.set_ready(&silent, false).await?;
    let services = services(args);
    for s in 0..services {
        world.create_service(&format!("r{i}-svc-{s}")).await?;
    }
    // Seeded, so a failing run can be repeated; printed in the row so it can be.
    let seed = u64::from(std::process::id()) + i as u64;
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut storm = Storm::default();
    let found_before = found_by_record(fleet);
    if fault.kind == Kind::Crash {
        crash_storm(fleet, &mut rng, KILLS.0, &mut storm).await?;
    }
    let converged = world
        .wait_for(args.converge_timeout(), |a| a.converged())
        .await?;
    let converged_s = match &converged {
        Ok(_) => Some(started.elapsed().as_secs_f64()),
        Err(last) => {
            eprintln!(
                "chaos {}: not converged: {}\n{}",
                fault.name,
                last.summary(),
                fleet.log_tails(10)
            );
            None
        }
    };
    let at_convergence = world.audit().await.unwrap_or_default();
    world.delete_services().await?;
    if fault.kind == Kind::Crash {
        crash_storm(fleet, &mut rng, KILLS.1, &mut storm).await?;
    }
    let cleaned = world
        .wait_for(args.converge_timeout(), |a| a.cleaned())
        .await?;
    if let Err(last) = &cleaned {
        eprintln!("chaos {}: not cleaned up: {}", fault.name, last.summary());
    }
    if let Some(back) = back {
        back.await?
            .map_err(|e| anyhow::anyhow!("ending the outage: {e}"))?;
    }
    // A count rule is gone once used up.
    let left = world.sim.faults().list();
    let unreached: Vec<String> = must_fire
        .iter()
        .filter(|(id, _)| left.iter().any(|(l, _)| l == id))
        .map(|(_, what)| what.to_string())
        .collect();
    clear(&world.sim);
    let after = world.audit().await?;
    world.set_ready(&silent, true).await?;
    let (calls_after, throttled_after) = calls(fleet).await;
    let exited = fleet.unexpected_exits();
    let exited = &exited[exits_before..];
    Ok(Row {
        scenario: format!("cloudstack: {}", fault.name.trim_start_matches("cs ")),
        faults: if storm.killed.is_empty() {
            fault.description.clone()
        } else {
            let times = |name: &str| storm.killed.iter().filter(|k| **k == name).count();
            let per_controller: Vec<String> = crate::fleet::ALL
                .iter()
                .filter(|c| times(c.name) > 0)
                .map(|c| format!("{} ×{}", c.name, times(c.name)))
                .collect();
            format!(
                "{}; associates take 1.5 s (seed {seed}: {}; {} address(es) found again by \
                 their record)",
                fault.description,
                per_controller.join(", "),
                found_by_record(fleet) - found_before
            )
        },
        size: format!("{} VMs, {} Services × TCP+UDP", world.vms.len(), services),
        converged_s,
        calls: (calls_after + storm.calls.0).saturating_sub(calls_before),
        rate_limited: (throttled_after + storm.calls.1).saturating_sub(throttled_before),
        duplicates: at_convergence.duplicates,
        leaks: after.leaks,
        wrong_deletions: after.wrong_deletions.max(at_convergence.wrong_deletions),
        crashes: exited.len(),
        unreached,
        not_ours_writes: 0,
        notes: format!(
            "a VM joined, one destroyed (its Node deleted), a NotReady Node kept; Services \
             deleted: {}{}",
            if cleaned.is_ok() {
                "every rule, firewall rule and address gone"
            } else {
                "rules or addresses left"
            },
            if exited.is_empty() {
                String::new()
            } else {
                format!("; exited: {}", exited.join(", "))
            }
        ),
    })
}
