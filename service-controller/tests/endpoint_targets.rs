//! `target-nodes-with-endpoints`: with `externalTrafficPolicy: Local`, the load balancer targets
//! only the nodes that run a serving endpoint of the Service, read from its EndpointSlices (the
//! test writes them as the EndpointSlice controller would: testenv runs no controller-manager).
//!
//! - The targets are exactly those nodes, and follow the endpoints as they move; the cloud calls
//!   per move are printed.
//! - EndpointSlices that flap for 3 s change the targets at most once per `--endpoint-sync-window`.
//! - A rolling update of the Service's pods under 50 requests/s through cloud-sim's data plane
//!   fails no request.
//! - On an `externalTrafficPolicy: Cluster` Service the annotation is ignored with a Warning.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use cloud_sim::stand_in::{self, NodeStandIn};
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions, EndpointSlice};
use kube::Api;
use kube::api::{ObjectMeta, Patch, PatchParams};
use service_controller::Settings;
use support::traffic::*;
use support::*;

const WINDOW: Duration = Duration::from_secs(2);
const OPT_IN: (&str, &str) = ("target-nodes-with-endpoints", "true");

/// Where a pod of the Service runs, and whether it is ready or terminating (still serving).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pod {
    Ready,
    Terminating,
}

/// Writes the Service's one EndpointSlice: an endpoint per `(node, pod)`.
async fn set_endpoints(fx: &Fixture, svc: &str, pods: &[(&TestNode, Pod)]) {
    let slices: Api<EndpointSlice> = Api::namespaced(fx.admin.clone(), &fx.ns);
    let slice = EndpointSlice {
        metadata: ObjectMeta {
            name: Some(format!("{svc}-slice")),
            labels: Some([("kubernetes.io/service-name".to_owned(), svc.to_owned())].into()),
            ..Default::default()
        },
        address_type: "IPv4".into(),
        endpoints: pods
            .iter()
            .enumerate()
            .map(|(i, (node, pod))| Endpoint {
                addresses: vec![format!("10.244.0.{}", i + 10)],
                node_name: Some(node.name.clone()),
                conditions: Some(EndpointConditions {
                    ready: Some(*pod == Pod::Ready),
                    serving: Some(true),
                    terminating: Some(*pod == Pod::Terminating),
                }),
                ..Default::default()
            })
            .collect(),
        ports: None,
    };
    let params = PatchParams::apply("endpoint-targets-test").force();
    slices
        .patch(&format!("{svc}-slice"), &params, &Patch::Apply(&slice))
        .await
        .expect("apply the EndpointSlice");
}

async fn local_service(fx: &Fixture, name: &str, ann: &[(&str, &str)]) -> Service {
    fx.service_with(name, &[80], ann, |s| {
        s.external_traffic_policy = Some("Local".into());
    })
    .await
}

fn servers(nodes: &[&TestNode]) -> Vec<u64> {
    nodes.iter().map(|n| n.server).collect()
}

/// Writes among the calls: here only target adds and removes.
fn target_writes(calls: &[(String, String)]) -> usize {
    calls.iter().filter(|(m, _)| m != "GET").count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_targets_are_the_nodes_running_endpoints_and_flaps_change_them_once_per_window() {
    let fx = Fixture::start_with(Options {
        settings: Settings {
            endpoint_sync_window: WINDOW,
            ..Settings::default()
        },
        ..Options::default()
    })
    .await;
    let n = fx.nodes(5).await;
    let svc = local_service(&fx, "web", &[OPT_IN]).await;
    set_endpoints(&fx, "web", &[(&n[0], Pod::Ready), (&n[1], Pod::Ready)]).await;
    let lb = fx.wait_targets(&svc, &servers(&[&n[0], &n[1]])).await;
    eprintln!("5 nodes, endpoints on 2: targets {:?}", target_ids(&lb));

    // One move: the pod on n1 goes to n2 (a new one ready, then the old one gone).
    let mark = fx.mark();
    set_endpoints(&fx, "web", &[(&n[0], Pod::Ready), (&n[2], Pod::Ready)]).await;
    fx.wait_targets(&svc, &servers(&[&n[0], &n[2]])).await;
    let calls = fx.calls_since(&mark);
    eprintln!("one endpoint move: {} calls: {calls:?}", calls.len());
    assert_eq!(target_writes(&calls), 2, "one add, one remove: {calls:?}");

    // Flapping for 3 s: 30 writes, the pod on n3 appearing and disappearing, then settled on
    // n0 and n3.
    let mark = fx.mark();
    let changes_before = published_changes(&fx).await;
    let started = tokio::time::Instant::now();
    for i in 0..30 {
        let third = if i % 2 == 0 { &n[3] } else { &n[4] };
        set_endpoints(&fx, "web", &[(&n[0], Pod::Ready), (third, Pod::Ready)]).await;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    set_endpoints(&fx, "web", &[(&n[0], Pod::Ready), (&n[3], Pod::Ready)]).await;
    let flapped = started.elapsed();
    fx.wait_targets(&svc, &servers(&[&n[0], &n[3]])).await;
    let changes = published_changes(&fx).await - changes_before;
    let calls = fx.calls_since(&mark);
    let windows = flapped.as_secs_f64() / WINDOW.as_secs_f64();
    eprintln!(
        "31 EndpointSlice writes over {flapped:.1?} ({windows:.1} windows): {changes} target-set \
         changes, {} target writes, {} calls",
        target_writes(&calls),
        calls.len()
    );
    // At most one per window begun during the flapping, plus the one that settles it.
    assert!(
        changes as f64 <= windows.ceil() + 1.0,
        "{changes} changes in {windows:.1} windows"
    );
    assert!(target_writes(&calls) <= 2 * changes as usize, "{calls:?}");

    // Every pod gone: no target, and the Warning says why.
    set_endpoints(&fx, "web", &[]).await;
    fx.wait_targets(&svc, &[]).await;
    let note = fx
        .wait_event("Service", "web", "UnAvailableLoadBalancer")
        .await;
    assert!(
        note.starts_with("No node runs a serving endpoint"),
        "{note}"
    );

    // With `Cluster` the annotation means nothing: a Warning, and every node is a target.
    let cluster = fx.service("everywhere", &[80], &[OPT_IN]).await;
    let note = fx
        .wait_event("Service", "everywhere", "EndpointTargetsIgnored")
        .await;
    eprintln!("EndpointTargetsIgnored: {note}");
    assert!(note.contains("externalTrafficPolicy is Cluster"), "{note}");
    fx.wait_targets(&cluster, &servers(&n.iter().collect::<Vec<_>>()))
        .await;
}

/// `service_controller_endpoint_node_set_changes` as the controller's metrics say.
async fn published_changes(fx: &Fixture) -> u64 {
    let metrics = fx.metrics().await;
    metrics
        .lines()
        .find_map(|l| {
            l.strip_prefix("cloud_controllers_service_controller_endpoint_node_set_changes_total ")
        })
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// One node of the rolling update: kube-proxy's health answer (200 while a ready endpoint runs
/// there) and, while a pod runs there, the NodePort that reaches it (with `Local`, kube-proxy
/// sends a node's NodePort traffic only to its own endpoints).
struct NodeOf {
    node: TestNode,
    kube_proxy: NodeStandIn,
    pod: Option<NodeStandIn>,
}

impl NodeOf {
    async fn start_pod(&mut self, fx: &Fixture, node_port: u16) {
        let mut pod = stand_in(fx, &self.node).await;
        pod.serve_node_port(node_port).await.expect("bind");
        self.pod = Some(pod);
        self.kube_proxy.set_healthy(true);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolling_update_through_endpoint_targets_fails_no_request() {
    let fx = Fixture::start_with(Options {
        sim: Some(data_plane()),
        settings: Settings {
            endpoint_sync_window: WINDOW,
            ..Settings::default()
        },
        ..Options::default()
    })
    .await;
    let svc = local_service(
        &fx,
        "rolling",
        &[OPT_IN, ("health-check-kube-proxy", "true")],
    )
    .await;
    let (np, hc) = (node_port(&svc, 80), health_check_node_port(&svc));
    let mut nodes = Vec::new();
    for node in fx.nodes(4).await {
        let mut kube_proxy = stand_in(&fx, &node).await;
        kube_proxy.serve_healthz(hc).await.expect("bind");
        kube_proxy.set_healthy(false);
        nodes.push(NodeOf {
            node,
            kube_proxy,
            pod: None,
        });
    }
    // Two replicas, on the first two nodes.
    for node in &mut nodes[..2] {
        node.start_pod(&fx, np).await;
    }
    set_endpoints(
        &fx,
        "rolling",
        &[(&nodes[0].node, Pod::Ready), (&nodes[1].node, Pod::Ready)],
    )
    .await;
    fx.wait_targets(&svc, &[nodes[0].node.server, nodes[1].node.server])
        .await;
    let lb = wait_health(&fx, &svc, (2, 0, 0)).await;
    let addr = listener(&fx, &lb, 80).await;

    let sent = Arc::new(AtomicUsize::new(0));
    let failed = Arc::new(AtomicUsize::new(0));
    let load = tokio::spawn({
        let (sent, failed) = (sent.clone(), failed.clone());
        async move {
            let mut tick = tokio::time::interval(Duration::from_millis(20));
            loop {
                tick.tick().await;
                let (sent, failed) = (sent.clone(), failed.clone());
                tokio::spawn(async move {
                    let ok = matches!(stand_in::get(addr, REQUEST_TIMEOUT).await, Ok((200, _)));
                    sent.fetch_add(1, Ordering::SeqCst);
                    failed.fetch_add(usize::from(!ok), Ordering::SeqCst);
                });
            }
        }
    });
    let mark = fx.mark();

    // A Deployment's rolling update, maxSurge 1, maxUnavailable 0, following the clock (what the
    // controller does not do in time shows as failed requests): a new pod starts and is ready;
    // the old one is told to stop (not ready, still serving: kube-proxy's health check on its
    // node answers 503 at once) and exits 3 s later (its grace period).
    let grace = Duration::from_secs(3);
    let mut running = vec![0usize, 1];
    for (old, new) in [(0usize, 2usize), (1, 3)] {
        nodes[new].start_pod(&fx, np).await;
        let mut states: Vec<(usize, Pod)> = running.iter().map(|i| (*i, Pod::Ready)).collect();
        states.push((new, Pod::Ready));
        write_pods(&fx, &nodes, &states).await;

        for s in states.iter_mut().filter(|s| s.0 == old) {
            s.1 = Pod::Terminating;
        }
        nodes[old].kube_proxy.set_healthy(false);
        write_pods(&fx, &nodes, &states).await;
        tokio::time::sleep(grace).await;

        nodes[old].pod = None;
        states.retain(|s| s.0 != old);
        write_pods(&fx, &nodes, &states).await;
        running.retain(|i| *i != old);
        running.push(new);
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    fx.wait_targets(&svc, &[nodes[2].node.server, nodes[3].node.server])
        .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    load.abort();
    // Requests in flight finish within their timeout.
    tokio::time::sleep(REQUEST_TIMEOUT).await;
    let calls = fx.calls_since(&mark);
    let (sent, failed) = (sent.load(Ordering::SeqCst), failed.load(Ordering::SeqCst));
    eprintln!(
        "rolling update of 2 pods onto 2 other nodes: {sent} requests, {failed} failed; {} target \
         writes, {} calls: {calls:?}",
        target_writes(&calls),
        calls.len()
    );
    assert!(sent > 300, "the load ran: {sent}");
    assert_eq!(failed, 0, "failed requests during the rolling update");
    assert_eq!(target_writes(&calls), 4, "2 adds and 2 removes: {calls:?}");
}

/// The EndpointSlice of the rolling update's pods: `(node index, state)`.
async fn write_pods(fx: &Fixture, nodes: &[NodeOf], states: &[(usize, Pod)]) {
    let pods: Vec<(&TestNode, Pod)> = states.iter().map(|(i, p)| (&nodes[*i].node, *p)).collect();
    set_endpoints(fx, "rolling", &pods).await;
}
