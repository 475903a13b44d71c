//! Draining under load, against cloud-sim's data plane: 50 requests/s through the load balancer
//! of an `externalTrafficPolicy: Cluster` Service on three node stand-ins while the third is
//! excluded by label, loses its kube-proxy, and is scaled down by the autoscaler (tainted
//! `ToBeDeletedByClusterAutoscaler`, stops serving, its server deleted). Failed requests per
//! step, for:
//!
//! - ours, with `health-check-kube-proxy` (the load balancer asks kube-proxy's `:10256/healthz`);
//! - ours configuring the load balancer as HCCM does (TCP on the nodePort), the default;
//! - HCCM itself, when `HCCM_BINARY` names a build of hcloud-cloud-controller-manager (run with
//!   `--controllers=service` against the same kind of world). CI has none: its source is not
//!   served by the Go module proxy.
//!
//! Its own test binary, so its control plane holds only its Nodes and Services (HCCM watches the
//! whole cluster).

mod support;

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use cloud_sim::stand_in;
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};
use support::traffic::*;
use support::*;

/// Who manages the load balancer in a run.
#[derive(Debug, Clone)]
enum Manager {
    /// service-controller with `health-check-kube-proxy: "true"`.
    OursWithKubeProxyChecks,
    /// service-controller with no annotation: HCCM's TCP check on the nodePort.
    OursAsHccmConfigures,
    /// hcloud-cloud-controller-manager's binary.
    Hccm(PathBuf),
}

/// Requests sent and failed during each step of a drain.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct StepCount {
    sent: usize,
    failed: usize,
}

const STEPS: [&str; 4] = [
    "before (all three nodes in rotation)",
    "node labelled exclude-from-external-load-balancers",
    "kube-proxy stopping: /healthz 503, NodePort closed 3 s later",
    "autoscaler scale-down: tainted ToBeDeleted, stops 3 s later, server deleted 2 s after",
];

/// One drain run under load: 50 requests/s through the load balancer of an
/// `externalTrafficPolicy: Cluster` Service on three nodes while the third goes through
/// [`STEPS`]; each step but the last is undone (label removed, kube-proxy back) before the next,
/// so each is counted on its own. The steps follow the clock, not the manager: what the manager
/// does not do in time shows as failed requests, not as a test timeout. Returns the failed
/// requests per step.
async fn drain_run(manager: &Manager) -> Vec<StepCount> {
    let (fx, _hccm) = match manager {
        Manager::Hccm(binary) => {
            let fx = Fixture::without_controller(Some(data_plane())).await;
            let hccm = start_hccm(&fx, binary).await;
            (fx, Some(hccm))
        }
        _ => (fixture(Duration::from_secs(600)).await, None),
    };
    let nodes = fx.nodes(3).await;
    let ann: &[(&str, &str)] = match manager {
        Manager::OursWithKubeProxyChecks => &[("health-check-kube-proxy", "true")],
        _ => &[],
    };
    let svc = fx.service("drain", &[80], ann).await;
    let np = node_port(&svc, 80);
    let mut stand_ins = Vec::new();
    for n in &nodes {
        let mut s = stand_in(&fx, n).await;
        s.serve_node_port(np).await.expect("bind");
        s.serve_healthz(10256).await.expect("bind");
        stand_ins.push(s);
    }
    let lb = wait_health(&fx, &svc, (3, 0, 0)).await;
    let addr = listener(&fx, &lb, 80).await;

    let step = Arc::new(AtomicUsize::new(0));
    let counts = Arc::new(std::sync::Mutex::new(vec![
        StepCount::default();
        STEPS.len()
    ]));
    let load = tokio::spawn({
        let (step, counts) = (step.clone(), counts.clone());
        async move {
            let mut tick = tokio::time::interval(Duration::from_millis(20));
            loop {
                tick.tick().await;
                let (step, counts) = (step.clone(), counts.clone());
                tokio::spawn(async move {
                    let at = step.load(Ordering::SeqCst);
                    let ok = matches!(stand_in::get(addr, REQUEST_TIMEOUT).await, Ok((200, _)));
                    let mut c = counts.lock().unwrap();
                    c[at].sent += 1;
                    c[at].failed += usize::from(!ok);
                });
            }
        }
    });
    let hold = || tokio::time::sleep(Duration::from_secs(2));
    let gone = &nodes[2];
    let nodes_api: Api<Node> = Api::all(fx.admin.clone());
    let all = [nodes[0].server, nodes[1].server, nodes[2].server];
    let two = [nodes[0].server, nodes[1].server];

    hold().await;

    // The two ways a node is marked as going: the label, set (`true`) or taken back (`false`),
    // and cluster-autoscaler's taint.
    let exclude = |on: bool| {
        let label = "node.kubernetes.io/exclude-from-external-load-balancers";
        json!({"metadata": {"labels": {label: on.then_some("true")}}})
    };
    let to_be_deleted = json!({"spec": {"taints": [
        {"key": "ToBeDeletedByClusterAutoscaler", "value": "1", "effect": "NoSchedule"}
    ]}});

    step.store(1, Ordering::SeqCst);
    patch(&nodes_api, &gone.name, exclude(true)).await;
    targets_within(&fx, &svc, &two).await;
    hold().await;
    patch(&nodes_api, &gone.name, exclude(false)).await;
    fx.wait_targets(&svc, &all).await;
    wait_health(&fx, &svc, (3, 0, 0)).await;

    step.store(2, Ordering::SeqCst);
    stand_ins[2].set_healthy(false);
    // Ten health-check intervals at this speedup: what kube-proxy's termination gives the load
    // balancer to notice.
    tokio::time::sleep(Duration::from_secs(3)).await;
    stand_ins[2].stop();
    hold().await;
    stand_ins[2] = stand_in(&fx, gone).await;
    stand_ins[2].serve_node_port(np).await.expect("bind");
    stand_ins[2].serve_healthz(10256).await.expect("bind");
    wait_health(&fx, &svc, (3, 0, 0)).await;

    step.store(3, Ordering::SeqCst);
    // cluster-autoscaler taints the node, drains it, and deletes its server. kube-proxy's
    // /healthz turns 503 with the taint (KEP-3836); the node stops serving before the server
    // is gone (shutdown), and the cloud drops the target with the server.
    patch(&nodes_api, &gone.name, to_be_deleted).await;
    stand_ins[2].set_healthy(false);
    tokio::time::sleep(Duration::from_secs(3)).await;
    stand_ins[2].stop();
    hold().await;
    fx.sim
        .client()
        .delete_server(gone.server)
        .await
        .expect("delete the server");
    fx.wait_targets(&svc, &two).await;
    hold().await;

    load.abort();
    // Requests still in flight finish within their timeout.
    tokio::time::sleep(REQUEST_TIMEOUT).await;
    counts.lock().unwrap().clone()
}

/// Waits a while for the load balancer to target `servers`; a manager that does not get there
/// in time is not a test failure here, its failed requests show it.
async fn targets_within(fx: &Fixture, svc: &k8s_openapi::api::core::v1::Service, servers: &[u64]) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while tokio::time::Instant::now() < deadline {
        if let Some(lb) = fx.lbs_of(svc).await.first()
            && target_ids(lb) == servers
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn patch(nodes: &Api<Node>, name: &str, p: Value) {
    nodes
        .patch(name, &PatchParams::default(), &Patch::Merge(&p))
        .await
        .expect("patch node");
}

/// HCCM's service controller alone, as its chart runs it (defaults, no network), against the
/// fixture's cloud-sim and control plane; killed when dropped.
struct Hccm(Child);

impl Drop for Hccm {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

async fn start_hccm(fx: &Fixture, binary: &PathBuf) -> Hccm {
    let kube = testenv::kube().await;
    let log = std::fs::File::create(std::env::temp_dir().join("drain-hccm.log")).expect("log file");
    let child = Command::new(binary)
        .args([
            "--cloud-provider=hcloud",
            "--controllers=service",
            "--leader-elect=false",
            "--secure-port=0",
            "--allocate-node-cidrs=false",
            "--configure-cloud-routes=false",
            "--allow-untagged-cloud=true",
            // Its metrics on a free port (its default, :8233, may be taken).
            "--bind-address=127.0.0.1",
        ])
        .env("HCLOUD_METRICS_ENABLED", "false")
        .arg(format!("--kubeconfig={}", kube.kubeconfig().display()))
        .env("HCLOUD_TOKEN", fx.sim.token())
        .env("HCLOUD_ENDPOINT", fx.sim.endpoint().trim_end_matches('/'))
        .env("HCLOUD_LOAD_BALANCERS_LOCATION", "fsn1")
        .env("HCLOUD_LOAD_BALANCERS_TYPE", "lb11")
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("HCCM starts");
    Hccm(child)
}

#[tokio::test]
async fn draining_a_node_under_load_loses_no_request_with_kube_proxy_checks() {
    let hccm = std::env::var_os("HCCM_BINARY").map(PathBuf::from);
    // HCCM first: it watches every Service and Node, and is gone before ours start.
    let real = match &hccm {
        Some(binary) => Some(drain_run(&Manager::Hccm(binary.clone())).await),
        None => None,
    };
    let ours = drain_run(&Manager::OursWithKubeProxyChecks).await;
    let as_hccm = drain_run(&Manager::OursAsHccmConfigures).await;
    eprintln!(
        "{:<86} {:>8} {:>20} {:>8}",
        "step (50 requests/s), failed/sent", "ours", "ours, HCCM's check", "HCCM"
    );
    for (i, name) in STEPS.iter().enumerate() {
        let cell = |c: &StepCount| format!("{}/{}", c.failed, c.sent);
        eprintln!(
            "{name:<86} {:>8} {:>20} {:>8}",
            cell(&ours[i]),
            cell(&as_hccm[i]),
            real.as_ref().map_or("not run".into(), |r| cell(&r[i]))
        );
    }
    for (i, c) in ours.iter().enumerate() {
        assert!(c.sent > 0, "step {i} sent nothing");
        assert_eq!(c.failed, 0, "ours, step {:?}: {c:?}", STEPS[i]);
    }
    // With HCCM's TCP check on the nodePort the load balancer keeps sending to the node whose
    // kube-proxy stopped until its NodePort refuses and the check has failed retries + 1 times.
    assert!(
        as_hccm[2].failed > 0,
        "HCCM's check lost nothing: {as_hccm:?}"
    );
}
