//! Crashes during certificate rotation (issue 58): TLS Secrets named by https Services
//! (`http-certificate-secret`, service-controller with `--certificate-secrets` under the chart's
//! opt-in Secrets role), renewed again and again as cert-manager renews them, while
//! service-controller is `kill -9`ed at random moments and restarted. The switch of the ports
//! (`update_service`) is slowed, so that kills land between an upload and its switch: the
//! restarted controller must find the upload again rather than make a second one, switch every
//! port, and delete the earlier uploads once nothing uses them.
//!
//! Converged: the world's own audit, and every Service's load balancer serving on its https port
//! exactly the one upload of its Secret's current certificate (by serial). Counted: uploads of one
//! certificate beyond the first (duplicates), uploads no port uses at convergence and any upload
//! left once the Services are deleted (leaks), an upload of a Secret's current certificate or one
//! made outside the cluster deleted (wrong deletions). Every private key is a secret the scan
//! looks for.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use k8s_openapi::api::core::v1::{Secret, Service, ServicePort};
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::json;

use super::cluster::{ChaosCluster, NAMESPACE, Size};
use super::secrets::Scanner;
use super::uploads::{self, Https, PORT, Uploads};
use super::{ChaosArgs, Row, cloud, log_dir, start_fleet_with, tear_down};
use crate::fleet::{self, Fleet};

const NAME: &str = "crash, certificate rotation";
/// The switch of a port to another certificate.
const SWITCH: &str = "POST /load_balancers/{id}/actions/update_service";
/// A certificate uploaded outside the cluster: no controller may delete it.
const FOREIGN: &str = "uploaded-outside-the-cluster";
const KILLS_DELETING: usize = 3;
/// service-controller's Lease, short so that a restarted process leads again within seconds.
const LEASE: [&str; 3] = [
    "--leader-elect-lease-duration=4s",
    "--leader-elect-renew-deadline=3s",
    "--leader-elect-retry-period=1s",
];

/// How big the world is and how hard it is shaken.
struct Plan {
    nodes: usize,
    secrets: usize,
    /// Each renews every Secret once.
    rounds: usize,
    kills_per_round: usize,
    switch_latency: Duration,
}

impl Plan {
    fn of(args: &ChaosArgs) -> Plan {
        let (nodes, secrets, rounds, kills_per_round, ms) = match args.quick {
            true => (3, 3, 3, 2, 1_500),
            false => (10, 6, 6, 3, 2_000),
        };
        Plan {
            nodes,
            secrets,
            rounds,
            kills_per_round,
            switch_latency: Duration::from_millis(ms),
        }
    }
}

pub async fn run(
    args: &ChaosArgs,
    binaries: &[PathBuf],
    logs: &Path,
    scan: &mut Scanner,
) -> anyhow::Result<Row> {
    let plan = Plan::of(args);
    let size = Size {
        nodes: plan.nodes,
        services: 0,
    };
    let world = ChaosCluster::build(size, cloud::sim_config()).await?;
    let foreign = upload_foreign(&world.sim).await?;
    let mut t = Tracker::new(foreign);
    for s in 0..plan.secrets {
        t.renew(&world, s).await?;
    }
    let services = create_services(&world, plan.secrets).await?;
    world.sim.reset_counters();
    let rbac = testenv::workspace_root()
        .join("charts/cloud-controllers/files/rbac/service-controller-certificate-secrets.yaml");
    testenv::bind_chart_rbac(&world.admin, &rbac, fleet::NAMESPACE, "service-controller")
        .await
        .context("binding service-controller's certificate-Secrets role")?;
    let flags: Vec<(&str, String)> = std::iter::once("--certificate-secrets")
        .chain(LEASE)
        .map(|f| ("service-controller", f.to_string()))
        .collect();
    let dir = log_dir(logs, "crash-certificates");
    let mut fleet = start_fleet_with(&world, binaries, 1, "debug", &dir, &flags).await?;
    let sc = fleet
        .replicas
        .iter()
        .position(|r| r.spec.name == "service-controller")
        .context("no service-controller in the fleet")?;
    if let Err(off) = t
        .wait(&world, &services, args.converge_timeout(), |_| true)
        .await?
    {
        anyhow::bail!(
            "chaos {NAME}: the Secrets' certificates were never served before the crashes: {off}\n{}",
            fleet.log_tails(10)
        );
    }

    let latency = world
        .sim
        .faults()
        .latency(Some(SWITCH), plan.switch_latency);
    // Seeded, so a failing run can be repeated; printed so it can be.
    let seed = std::process::id() as u64;
    let mut rng = fastrand::Rng::with_seed(seed);
    let pause = |rng: &mut fastrand::Rng| Duration::from_millis(rng.u64(200..1_500));
    let started = Instant::now();
    for _ in 0..plan.rounds {
        for s in 0..plan.secrets {
            t.renew(&world, s).await?;
        }
        // One kill aimed between an upload and its switch: once an upload of a renewed
        // certificate shows and some port does not serve it yet, a random moment within the
        // slowed switch; the others at random.
        let deadline = Instant::now() + Duration::from_secs(20);
        while t.pending(&world, &services).await?.is_empty() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let window = plan.switch_latency.as_millis() as u64;
        t.sleep(&world, Duration::from_millis(rng.u64(0..window)))
            .await;
        t.kill(&world, &services, &mut fleet, sc).await?;
        for _ in 1..plan.kills_per_round {
            t.sleep(&world, pause(&mut rng)).await;
            t.kill(&world, &services, &mut fleet, sc).await?;
        }
    }
    let last_kill = started.elapsed();
    let converged = t
        .wait(&world, &services, args.converge_timeout(), |_| true)
        .await?;
    let converged_s = match &converged {
        Ok(()) => Some(started.elapsed().as_secs_f64()),
        Err(off) => {
            eprintln!(
                "chaos {NAME}: not converged: {off}\n{}",
                fleet.log_tails(10)
            );
            None
        }
    };
    let unused = uploads::unused(&world.sim.inventory());
    let audit = world.audit().await?;

    t.uploads.serving = false;
    world.delete_services().await?;
    for _ in 0..KILLS_DELETING {
        t.sleep(&world, pause(&mut rng)).await;
        t.kill(&world, &services, &mut fleet, sc).await?;
    }
    let cleaned = t
        .wait(&world, &[], args.converge_timeout(), |a| a.services == 0)
        .await?;
    let after = world.audit().await?;
    let left = uploads::uploads(&world.sim.inventory()).count();
    world.sim.faults().remove(latency);
    let made = world
        .sim
        .request_log()
        .iter()
        .filter(|r| r.method == "POST" && r.endpoint == "/certificates" && r.status == 201)
        .count();
    for (key, cert) in &t.keys {
        scan.watch_private_key(key, cert);
    }
    let end = tear_down(world, fleet, scan).await?;
    // A second upload of one certificate, whether seen or made and deleted between looks.
    let duplicates = t.uploads.duplicates().max(made.saturating_sub(t.versions));
    Ok(Row {
        scenario: NAME.into(),
        faults: format!(
            "{SWITCH} +{} ms, kill -9 service-controller ×{} (seed {seed})",
            plan.switch_latency.as_millis(),
            t.kills
        ),
        size: format!(
            "{} nodes, {} https Services, {} TLS Secrets",
            plan.nodes,
            services.len(),
            plan.secrets
        ),
        converged_s,
        calls: end.calls,
        rate_limited: end.rate_limited,
        duplicates: duplicates + audit.duplicates,
        leaks: unused + left + after.leaks,
        wrong_deletions: t.uploads.wrong.len() + after.wrong_deletions,
        crashes: end.exited.len(),
        // No kill between an upload and its switch: the row proves nothing about them.
        unreached: if t.between == 0 {
            vec!["service-controller".into()]
        } else {
            Vec::new()
        },
        not_ours_writes: end.not_ours_writes,
        notes: format!(
            "{} renewals of {} Secrets; {} kills, the last while converging at {:.1} s, {} \
             between an upload and its switch ({} uploads found again after a crash); {made} \
             uploads for {} certificates; {} uploads unused at convergence, {left} left after \
             the Services; {}{}",
            plan.rounds * plan.secrets,
            plan.secrets,
            t.kills,
            last_kill.as_secs_f64(),
            t.between,
            t.found_again.len(),
            t.versions,
            unused,
            if cleaned.is_ok() {
                "every load balancer and upload deleted"
            } else {
                "load balancers or uploads left"
            },
            end.exits_note()
        ),
    })
}

fn secret_name(s: usize) -> String {
    format!("tls-{s}")
}

/// Two Services per Secret: `svc-<2s>` https on its one port, `svc-<2s+1>` with port 80 plain
/// and only port 443 https (the per-port keys).
async fn create_services(world: &ChaosCluster, secrets: usize) -> anyhow::Result<Vec<Https>> {
    let mut made = Vec::new();
    for i in 0..secrets * 2 {
        let secret = secret_name(i / 2);
        let mut svc = world.service(i);
        let per_port = i % 2 == 1;
        let suffix = if per_port {
            format!(".{PORT}")
        } else {
            String::new()
        };
        let ann = svc.metadata.annotations.get_or_insert_default();
        for (k, v) in [("protocol", "https"), ("http-certificate-secret", &secret)] {
            ann.insert(format!("load-balancer.hetzner.cloud/{k}{suffix}"), v.into());
        }
        let https = ServicePort {
            name: Some("https".into()),
            port: PORT.into(),
            protocol: Some("TCP".into()),
            ..Default::default()
        };
        if let Some(ports) = svc.spec.as_mut().and_then(|s| s.ports.as_mut()) {
            if per_port {
                ports.push(https);
            } else {
                *ports = vec![https];
            }
        }
        world
            .services()
            .create(&PostParams::default(), &svc)
            .await
            .with_context(|| format!("creating Service {}", svc.name_any()))?;
        made.push(Https {
            name: svc.name_any(),
            secret,
        });
    }
    Ok(made)
}

/// A certificate someone uploaded by hand: no labels of ours.
async fn upload_foreign(sim: &cloud_sim::Sim) -> anyhow::Result<u64> {
    let (cert, key) = cloud_sim::test_certs::self_signed(&["outside.example.com"]);
    sim.client()
        .create_certificate(FOREIGN, &cert, &key)
        .await
        .map_err(|e| anyhow::anyhow!("uploading {FOREIGN}: {e}"))
}

/// What the harness knows and has seen: the uploads, the keys, the kills.
struct Tracker {
    uploads: Uploads,
    /// Every `(key, certificate)` put in a Secret.
    keys: Vec<(String, String)>,
    /// Certificates put in Secrets.
    versions: usize,
    /// Kills of service-controller; those while an upload of a current certificate existed that
    /// some port did not serve yet; those uploads (each one the restarted controller had to find
    /// again).
    kills: usize,
    between: usize,
    found_again: BTreeSet<u64>,
}

impl Tracker {
    fn new(foreign: u64) -> Tracker {
        Tracker {
            uploads: Uploads::new(foreign),
            keys: Vec::new(),
            versions: 0,
            kills: 0,
            between: 0,
            found_again: BTreeSet::new(),
        }
    }

    /// `kill -9` of replica `i` (service-controller), restarted at once.
    async fn kill(
        &mut self,
        world: &ChaosCluster,
        services: &[Https],
        fleet: &mut Fleet,
        i: usize,
    ) -> anyhow::Result<()> {
        let pending = match self.uploads.serving {
            true => self.pending(world, services).await?,
            false => BTreeSet::new(),
        };
        fleet.crash_and_restart(i).await?;
        self.kills += 1;
        self.between += usize::from(!pending.is_empty());
        self.found_again.extend(pending);
        Ok(())
    }

    /// Secret `s` gets a new self-signed certificate (made if need be), as cert-manager renews it.
    async fn renew(&mut self, world: &ChaosCluster, s: usize) -> anyhow::Result<()> {
        let name = secret_name(s);
        let (cert, key) = cloud_sim::test_certs::self_signed(&[&format!("{name}.example.com")]);
        let serial = cloud_sim::test_certs::serial(&cert).context("a new certificate's serial")?;
        self.uploads.current.insert(name.clone(), serial);
        self.versions += 1;
        let secret = json!({
            "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
            "metadata": {"name": name,
                         "labels": {cloud_client::CERTIFICATE_SECRET_LABEL: "true"}},
            "stringData": {"tls.crt": cert, "tls.key": key},
        });
        self.keys.push((key, cert));
        Api::<Secret>::namespaced(world.admin.clone(), NAMESPACE)
            .patch(
                &name,
                &PatchParams::apply("chaos").force(),
                &Patch::Apply(&secret),
            )
            .await
            .with_context(|| format!("renewing Secret {name}"))?;
        Ok(())
    }

    /// Sleeps `d`, looking at the cloud every 100 ms.
    async fn sleep(&mut self, world: &ChaosCluster, d: Duration) {
        let until = Instant::now() + d;
        while Instant::now() < until {
            self.uploads.look(&world.sim.inventory());
            tokio::time::sleep(Duration::from_millis(100).min(until - Instant::now())).await;
        }
    }

    /// Uploads of a Secret's current certificate that a port naming the Secret does not serve
    /// yet.
    async fn pending(
        &mut self,
        world: &ChaosCluster,
        services: &[Https],
    ) -> anyhow::Result<BTreeSet<u64>> {
        let inv = world.sim.inventory();
        self.uploads.look(&inv);
        Ok(self.uploads.pending(&inv, services, &uids(world).await?))
    }

    /// Polls until the world's audit says `done` and converged (unless the Services are gone)
    /// and [`Uploads::off`] finds nothing; the last of what is off otherwise.
    async fn wait(
        &mut self,
        world: &ChaosCluster,
        services: &[Https],
        timeout: Duration,
        done: impl Fn(&super::cluster::Audit) -> bool,
    ) -> anyhow::Result<Result<(), String>> {
        let started = Instant::now();
        loop {
            let inv = world.sim.inventory();
            self.uploads.look(&inv);
            let last = match (world.audit().await, uids(world).await) {
                (Ok(a), Ok(uids)) => {
                    let mut off = self.uploads.off(&inv, services, &uids);
                    if !done(&a) || (!services.is_empty() && !a.converged()) || a.leaks > 0 {
                        off.push(a.summary());
                    }
                    if off.is_empty() {
                        return Ok(Ok(()));
                    }
                    off.join("; ")
                }
                (Err(e), _) | (_, Err(e)) => e.to_string(),
            };
            if started.elapsed() > timeout {
                return Ok(Err(last));
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
}

/// The UID of each Service, by name.
async fn uids(world: &ChaosCluster) -> anyhow::Result<BTreeMap<String, String>> {
    let list: Vec<Service> = world.services().list(&ListParams::default()).await?.items;
    Ok(list
        .iter()
        .map(|s| (s.name_any(), s.metadata.uid.clone().unwrap_or_default()))
        .collect())
}
