//! `cargo xtask bench services --shared`: N Services on one shared load balancer against the same
//! N Services on a load balancer each, in one run.
//!
//! Both halves: cloud-sim with 500 ms actions, 10 Ready Nodes, the service-controller binary,
//! `HCLOUD_LOAD_BALANCERS_TYPE=lb31` (30 services); N Services (default 20, 5 with `--quick`) with
//! one TCP port each (8001, 8002, …), created at once; the shared half gives each
//! `name: bench-shared` and `shared: "true"`. Phases: create (until every Service has an ingress
//! IP and the load balancers hold every port and 10 targets), one node joins (until 11 targets),
//! every Service deleted (until no load balancer is left). Each phase's cloud calls are counted.

use std::fmt::Display;
use std::path::Path;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use kube::Api;
use kube::api::{DeleteParams, ListParams, PostParams};
use serde::Serialize;

use super::services::{ACTION, NAMESPACE, NODES, add_nodes, has_ingress};
use super::{BenchArgs, Calls, Env, PROBE_QUERY};

const TIMEOUT: Duration = Duration::from_secs(300);
/// Pause after a phase converged, so its trailing calls (a last action poll) are counted in it.
const SETTLE: Duration = Duration::from_secs(3);
const LB_NAME: &str = "bench-shared";

/// One half's figures.
#[derive(Debug, Serialize)]
pub struct Half {
    pub load_balancers: usize,
    pub create_s: Option<f64>,
    pub create: Calls,
    pub node_join: Calls,
    pub delete: Calls,
}

#[derive(Debug, Serialize)]
pub struct Figures {
    pub services: usize,
    pub separate: Half,
    pub shared: Half,
}

pub async fn run(args: &BenchArgs, binary: &Path) -> anyhow::Result<Figures> {
    let n = args.services.unwrap_or(if args.quick { 5 } else { 20 });
    anyhow::ensure!(
        n <= 30,
        "--shared: at most 30 Services (an lb31 holds 30 services)"
    );
    let separate = half(args, binary, n, false).await?;
    let shared = half(args, binary, n, true).await?;
    let f = Figures {
        services: n,
        separate,
        shared,
    };
    print(&f);
    Ok(f)
}

async fn half(args: &BenchArgs, binary: &Path, n: usize, shared: bool) -> anyhow::Result<Half> {
    let env = Env::start(Some(ACTION)).await?;
    add_nodes(&env, &env.servers(NODES, "bench-node").await?, "fsn1").await?;
    let lb_env = [
        ("HCLOUD_LOAD_BALANCERS_LOCATION", "fsn1"),
        ("HCLOUD_LOAD_BALANCERS_TYPE", "lb31"),
    ];
    let mut ctl = env.controller(args, binary, &lb_env).await?;
    let services: Api<Service> = Api::namespaced(env.client.clone(), NAMESPACE);
    let want_lbs = if shared { 1 } else { n };

    // Create.
    let start = Instant::now();
    let new: Vec<Service> = (1..=n).map(|i| service(i, shared)).collect();
    let pp = PostParams::default();
    futures::future::try_join_all(new.iter().map(|s| services.create(&pp, s))).await?;
    let mut create_s = None;
    ctl.wait_until(TIMEOUT, async || {
        let list = services.list(&ListParams::default()).await?;
        let ingress = list.items.iter().filter(|s| has_ingress(s)).count();
        let (lbs, ports) = served(&env, NODES).await?;
        let done = ingress == n && lbs == want_lbs && ports == n;
        create_s = done.then(|| start.elapsed().as_secs_f64());
        Ok(done)
    })
    .await?;
    tokio::time::sleep(SETTLE).await;
    let create = Calls::of(&env.sim);

    // One node joins.
    env.sim.reset_counters();
    add_nodes(&env, &env.servers(1, "bench-join").await?, "fsn1").await?;
    ctl.wait_until(TIMEOUT, async || {
        Ok(served(&env, NODES + 1).await? == (want_lbs, n))
    })
    .await?;
    tokio::time::sleep(SETTLE).await;
    let node_join = Calls::of(&env.sim);

    // Every Service deleted.
    env.sim.reset_counters();
    services
        .delete_collection(&DeleteParams::default(), &ListParams::default())
        .await?;
    ctl.wait_until(TIMEOUT, async || Ok(lb_count(&env).await? == 0))
        .await?;
    tokio::time::sleep(SETTLE).await;
    let delete = Calls::of(&env.sim);
    ctl.stop().await;
    Ok(Half {
        load_balancers: want_lbs,
        create_s,
        create,
        node_join,
        delete,
    })
}

fn service(i: usize, shared: bool) -> Service {
    let mut s = Service::default();
    s.metadata.name = Some(format!("bench-svc-{i}"));
    if shared {
        s.metadata.annotations = Some(
            [
                ("load-balancer.hetzner.cloud/name", LB_NAME),
                ("load-balancer.hetzner.cloud/shared", "true"),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        );
    }
    s.spec = Some(ServiceSpec {
        type_: Some("LoadBalancer".into()),
        selector: Some([("app".to_string(), format!("bench-{i}"))].into()),
        ports: Some(vec![ServicePort {
            name: Some("p".into()),
            port: 8000 + i as i32,
            protocol: Some("TCP".into()),
            ..Default::default()
        }]),
        ..Default::default()
    });
    s
}

/// Load balancers that have `targets` targets, and the services (ports) on them. Read with
/// [`PROBE_QUERY`], so these reads are not counted as the controller's.
async fn served(env: &Env, targets: usize) -> anyhow::Result<(usize, usize)> {
    let lbs = list(env).await?;
    let len = |lb: &serde_json::Value, field: &str| lb[field].as_array().map_or(0, Vec::len);
    let complete: Vec<_> = lbs
        .iter()
        .filter(|lb| len(lb, "targets") == targets)
        .collect();
    Ok((
        complete.len(),
        complete.iter().map(|lb| len(lb, "services")).sum(),
    ))
}

async fn lb_count(env: &Env) -> anyhow::Result<usize> {
    Ok(list(env).await?.len())
}

async fn list(env: &Env) -> anyhow::Result<Vec<serde_json::Value>> {
    env.sim
        .client()
        .list_all(&format!("load_balancers?{PROBE_QUERY}"))
        .await
        .map_err(|e| anyhow::anyhow!("listing load balancers: {e}"))
}

fn print(f: &Figures) {
    let (n, a, b) = (f.services, &f.separate, &f.shared);
    println!(
        "service-controller bench, shared load balancers ({n} Services x 1 port, {NODES} nodes, \
         actions {} ms, lb31)",
        ACTION.as_millis()
    );
    let per = |c: &Calls| format!("{:.2}", c.total as f64 / n as f64);
    let secs = |s: Option<f64>| s.map_or("never".to_string(), |s| format!("{s:.2} s"));
    #[rustfmt::skip]
    let rows = [
        row("",                                 "separate",                        "shared"),
        row("load balancers",                   a.load_balancers,                  b.load_balancers),
        row("create: all served after",         secs(a.create_s),                  secs(b.create_s)),
        row("create: cloud calls",              a.create.total,                    b.create.total),
        row("create: calls per Service",        per(&a.create),                    per(&b.create)),
        row("1 node joins: cloud calls",        a.node_join.total,                 b.node_join.total),
        row("delete all: cloud calls",          a.delete.total,                    b.delete.total),
    ];
    for line in rows {
        println!("{}", line.trim_end());
    }
    for (half, h) in [("separate", a), ("shared", b)] {
        for (phase, calls) in [
            ("create", &h.create),
            ("node join", &h.node_join),
            ("delete", &h.delete),
        ] {
            println!("  {half}, {phase}: {}", calls.total);
            calls.print_endpoints("    ");
        }
    }
}

fn row(figure: impl Display, a: impl Display, b: impl Display) -> String {
    format!("  {figure:<34}{a:<14}{b}")
}
