//! The route controller's decisions in milliseconds: one `sync::pass` against the in-memory
//! provider's network, with a mocked apiserver answering the condition writes and Events (they
//! are sent concurrently, so they are recorded and asserted per node rather than in one order).
//! No cloud-sim, no apiserver. Each test names the end-to-end test in `route_e2e.rs` it mirrors.
//! The pure route plan has its own unit tests in `src/plan.rs`.
//!
//! Which nodes the routes reach is the provider's word (`Routes::routability`): `memory://`
//! servers yes, `memory-dedicated://` ones no. A route's gateway is the node's InternalIP.

use std::collections::BTreeMap;
use std::sync::Arc;

use cloud_client::RouteSupport;
use controller_kit::metrics::Registries;
use controller_kit::slim_node::SlimNode;
use controller_kit::{Events, KitMetrics, Reporters};
use k8s_openapi::api::core::v1::{Node, NodeAddress, NodeCondition, NodeSpec, NodeStatus};
use kube::runtime::reflector::store::Writer;
use kube::runtime::{reflector, watcher};
use route_controller::cidr::ClusterCidrs;
use route_controller::metrics::RouteMetrics;
use route_controller::sync::{RoutePass, pass};
use serde_json::{Value, json};
use test_support::fakes::memory_cloud::{Fault, MEMORY_ROUTE_SUPPORT, MemoryCloud, Op, Server};
use test_support::fakes::mock_kube::{RequestLog, Sent, mock_client};

struct Setup {
    memory: Arc<MemoryCloud>,
    ctx: RoutePass,
    log: RequestLog,
    nodes: Writer<SlimNode>,
}

/// A pass context over the memory cloud's network, `--cluster-cidr=10.244.0.0/16`, and an
/// apiserver that accepts every write.
fn setup() -> Setup {
    setup_with("10.244.0.0/16")
}

/// [`setup`] with `--cluster-cidr=cluster`.
fn setup_with(cluster: &str) -> Setup {
    let memory = MemoryCloud::new();
    let (store, nodes) = reflector::store::<SlimNode>();
    let (client, api) = mock_client();
    let log = api.answer_all(|sent| {
        if sent.is_event() {
            (200, sent.body.clone())
        } else {
            let name = sent.path.split('/').nth(4).unwrap_or_default();
            (
                200,
                json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}),
            )
        }
    });
    let mut r = Registries::default();
    let routes = memory.cloud().routes.expect("the memory cloud has routes");
    let ctx = RoutePass::new(
        client.clone(),
        store,
        routes,
        ClusterCidrs::parse(cluster).unwrap(),
        Reporters {
            events: Events::new(client, "route_controller", None),
            kit: KitMetrics::register("route-controller", &mut r.ours),
        },
        RouteMetrics::register(&mut r.ours, &mut r.upstream),
    );
    Setup {
        memory,
        ctx,
        log,
        nodes,
    }
}

/// A Node with these podCIDRs and InternalIP; `routed`: its NetworkUnavailable condition says
/// RouteCreated (as after an earlier pass).
fn node(name: &str, cidrs: &[&str], internal_ip: Option<&str>, routed: bool) -> SlimNode {
    let mut n = Node {
        spec: Some(NodeSpec {
            provider_id: Some(format!("memory://{name}-id")),
            pod_cidrs: Some(cidrs.iter().map(|c| c.to_string()).collect()),
            ..Default::default()
        }),
        status: Some(NodeStatus {
            addresses: internal_ip.map(|ip| {
                vec![NodeAddress {
                    type_: "InternalIP".into(),
                    address: ip.into(),
                }]
            }),
            conditions: routed.then(|| {
                vec![NodeCondition {
                    type_: "NetworkUnavailable".into(),
                    status: "False".into(),
                    reason: Some("RouteCreated".into()),
                    ..Default::default()
                }]
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    n.metadata.name = Some(name.into());
    n.metadata.uid = Some(format!("uid-{name}"));
    n.into()
}

fn apply(nodes: &mut Writer<SlimNode>, n: SlimNode) {
    nodes.apply_watcher_event(&watcher::Event::Apply(n));
}

/// Per node, the NetworkUnavailable statuses written, in order (`True`: no route yet).
fn conditions(sent: &[Sent]) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for s in sent.iter().filter(|s| !s.is_event()) {
        assert_eq!(s.method, "PATCH", "{}", s.line());
        let node = s.path.split('/').nth(4).unwrap().to_string();
        assert_eq!(s.path, format!("/api/v1/nodes/{node}/status"));
        let c = &s.body["status"]["conditions"][0];
        assert_eq!(c["type"], "NetworkUnavailable");
        let (status, reason) = (c["status"].as_str().unwrap(), &c["reason"]);
        let want = if status == "True" {
            "NoRouteCreated"
        } else {
            "RouteCreated"
        };
        assert_eq!(reason, want);
        out.entry(node).or_default().push(status.to_string());
    }
    out
}

/// The Events posted, as `(node, reason, note)`.
fn events(sent: &[Sent]) -> Vec<(String, String, String)> {
    let s = |v: &Value| v.as_str().unwrap_or_default().to_string();
    sent.iter()
        .filter(|r| r.is_event())
        .map(|r| {
            let b = &r.body;
            (s(&b["regarding"]["name"]), s(&b["reason"]), s(&b["note"]))
        })
        .collect()
}

fn write_subjects(memory: &MemoryCloud) -> Vec<(Op, String)> {
    let mut out: Vec<(Op, String)> = memory
        .writes()
        .into_iter()
        .map(|c| (c.op, c.subject))
        .collect();
    // Deletes come first (they free room under the route limit); creates in cache order.
    out.sort_by_key(|(op, s)| (*op != Op::DeleteRoute, s.clone()));
    out
}

fn routes(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(d, g)| (d.to_string(), g.to_string()))
        .collect()
}

fn statuses(list: &[(&str, &[&str])]) -> BTreeMap<String, Vec<String>> {
    list.iter()
        .map(|(n, s)| (n.to_string(), s.iter().map(|s| s.to_string()).collect()))
        .collect()
}

/// Mirrors `routes_follow_nodes_and_leave_foreign_routes_alone`.
#[tokio::test]
async fn routes_follow_the_nodes_and_foreign_routes_stay() {
    let Setup {
        memory,
        ctx,
        log,
        mut nodes,
    } = setup();
    memory.add_server(Server::new("not-a-node").private_ip("10.0.0.9"));
    memory.add_route("10.250.0.0/24", "10.0.0.9"); // outside --cluster-cidr: not ours
    memory.add_route("10.244.200.0/24", "10.0.0.9"); // ours, and no node wants it
    apply(
        &mut nodes,
        node("a", &["10.244.1.0/24"], Some("10.0.0.2"), false),
    );
    apply(
        &mut nodes,
        node("b", &["10.244.2.0/24"], Some("10.0.0.3"), false),
    );

    pass(&ctx).await.unwrap();
    assert_eq!(
        memory.routes(),
        routes(&[
            ("10.244.1.0/24", "10.0.0.2"),
            ("10.244.2.0/24", "10.0.0.3"),
            ("10.250.0.0/24", "10.0.0.9"),
        ])
    );
    let writes = write_subjects(&memory);
    assert_eq!(
        writes,
        [
            (Op::DeleteRoute, "10.244.200.0/24 via 10.0.0.9".into()),
            (Op::CreateRoute, "10.244.1.0/24 via 10.0.0.2".into()),
            (Op::CreateRoute, "10.244.2.0/24 via 10.0.0.3".into()),
        ]
    );
    // NoRouteCreated as soon as a node has a podCIDR, RouteCreated once its route exists.
    let sent = log.take();
    assert_eq!(
        conditions(&sent),
        statuses(&[("a", &["True", "False"]), ("b", &["True", "False"])])
    );
    assert!(events(&sent).is_empty());

    // Nothing changed: no call at all (the routes kept from the last pass stand), no write, no
    // condition.
    apply(
        &mut nodes,
        node("a", &["10.244.1.0/24"], Some("10.0.0.2"), true),
    );
    apply(
        &mut nodes,
        node("b", &["10.244.2.0/24"], Some("10.0.0.3"), true),
    );
    memory.clear_calls();
    pass(&ctx).await.unwrap();
    assert!(memory.calls().is_empty(), "{:?}", memory.calls());
    assert!(log.take().is_empty());

    // a's private IP changes: its route is replaced by one create, b's is untouched.
    apply(
        &mut nodes,
        node("a", &["10.244.1.0/24"], Some("10.0.3.33"), true),
    );
    memory.clear_calls();
    pass(&ctx).await.unwrap();
    assert_eq!(
        write_subjects(&memory),
        [(Op::CreateRoute, "10.244.1.0/24 via 10.0.3.33".into())]
    );
    assert_eq!(
        conditions(&log.take()),
        statuses(&[("a", &["True", "False"])])
    );

    // b is deleted: its route goes.
    nodes.apply_watcher_event(&watcher::Event::Delete(node("b", &[], None, true)));
    memory.clear_calls();
    pass(&ctx).await.unwrap();
    assert_eq!(
        write_subjects(&memory),
        [(Op::DeleteRoute, "10.244.2.0/24 via 10.0.0.3".into())]
    );
    assert_eq!(
        memory.routes(),
        routes(&[
            ("10.244.1.0/24", "10.0.3.33"),
            ("10.250.0.0/24", "10.0.0.9")
        ])
    );
}

/// Passes after the first trust the routes it left, with our writes applied, and read the
/// network only when told to (the safety resync): a route removed behind our back comes back
/// then. Mirrors `a_foreign_route_added_between_two_of_our_writes_stays`.
#[tokio::test]
async fn later_passes_read_the_network_only_at_the_resync() {
    let Setup {
        memory,
        ctx,
        mut nodes,
        ..
    } = setup();
    apply(
        &mut nodes,
        node("a", &["10.244.1.0/24"], Some("10.0.0.2"), false),
    );
    pass(&ctx).await.unwrap();
    assert_eq!(reads(&memory), 1);

    // Another tool adds a route; ours for b goes in without reading the network.
    memory.add_route("10.250.1.0/24", "10.0.0.9");
    apply(
        &mut nodes,
        node("b", &["10.244.2.0/24"], Some("10.0.0.3"), false),
    );
    memory.clear_calls();
    pass(&ctx).await.unwrap();
    assert_eq!(reads(&memory), 0, "{:?}", memory.calls());
    assert_eq!(
        write_subjects(&memory),
        [(Op::CreateRoute, "10.244.2.0/24 via 10.0.0.3".into())]
    );

    // a's route is deleted behind our back: the pass after the next Node change does not know;
    // the resync does, and puts it back (the foreign route stays).
    ctx.routes
        .delete_route(&cloud_client::Route {
            name: String::new(),
            target_node: String::new(),
            destination_cidr: "10.244.1.0/24".into(),
            gateway: "10.0.0.2".into(),
            blackhole: false,
        })
        .await
        .unwrap();
    memory.clear_calls();
    pass(&ctx).await.unwrap();
    assert!(memory.calls().is_empty(), "{:?}", memory.calls());
    ctx.forget_routes();
    pass(&ctx).await.unwrap();
    assert_eq!(reads(&memory), 1);
    assert_eq!(
        memory.routes(),
        routes(&[
            ("10.244.1.0/24", "10.0.0.2"),
            ("10.244.2.0/24", "10.0.0.3"),
            ("10.250.1.0/24", "10.0.0.9"),
        ])
    );
}

/// A create that fails against the kept routes may have failed only because they are out of
/// date: no Warning, no backoff; the pass asks to run again at once, and that one reads the
/// network first. Mirrors `a_destination_taken_behind_our_back_is_read_again_and_replaced_without_a_warning`.
#[tokio::test]
async fn a_create_failing_against_kept_routes_is_retried_at_once_on_a_fresh_read() {
    let Setup {
        memory,
        ctx,
        log,
        mut nodes,
    } = setup();
    apply(
        &mut nodes,
        node("a", &["10.244.1.0/24"], Some("10.0.0.2"), false),
    );
    pass(&ctx).await.unwrap();
    log.take();

    memory.fail(Op::CreateRoute, Fault::Retryable);
    apply(
        &mut nodes,
        node("b", &["10.244.2.0/24"], Some("10.0.0.3"), false),
    );
    let before = tokio::time::Instant::now();
    let retry = pass(&ctx).await.unwrap().expect("a retry");
    assert!(retry <= tokio::time::Instant::now() && retry >= before);
    assert!(events(&log.take()).is_empty(), "no Warning yet");

    memory.heal();
    memory.clear_calls();
    pass(&ctx).await.unwrap();
    assert_eq!(reads(&memory), 1, "{:?}", memory.calls());
    assert_eq!(
        write_subjects(&memory),
        [(Op::CreateRoute, "10.244.2.0/24 via 10.0.0.3".into())]
    );
    assert!(events(&log.take()).is_empty());
}

fn reads(memory: &MemoryCloud) -> usize {
    memory
        .calls()
        .iter()
        .filter(|c| c.op == Op::ListRoutes)
        .count()
}

/// Mirrors `ipv6_pod_cidr_warns_and_the_ipv4_half_is_routed`.
#[tokio::test]
async fn an_ipv6_pod_cidr_warns_and_the_ipv4_half_is_routed() {
    let Setup {
        memory,
        ctx,
        log,
        mut nodes,
    } = setup();
    // As Hetzner's network: IPv4 only, one write at a time.
    memory.set_route_support(RouteSupport {
        ipv6_unsupported: Some("the memory network is IPv4-only"),
        writes_at_once: 1,
    });
    let cidrs = ["10.244.1.0/24", "fd00:10:244:1::/64"];
    apply(&mut nodes, node("d", &cidrs, Some("10.0.0.2"), false));
    pass(&ctx).await.unwrap();
    assert_eq!(
        write_subjects(&memory),
        [(Op::CreateRoute, "10.244.1.0/24 via 10.0.0.2".into())],
        "no call for the IPv6 CIDR"
    );
    let sent = log.take();
    let events = events(&sent);
    assert_eq!(events.len(), 1, "{events:?}");
    let (node, reason, note) = &events[0];
    assert_eq!(
        (node.as_str(), reason.as_str()),
        ("d", "IPv6PodCIDRUnsupported")
    );
    assert!(note.contains("fd00:10:244:1::/64"), "{note}");
    assert!(note.contains("the memory network is IPv4-only"), "{note}");
    assert_eq!(conditions(&sent), statuses(&[("d", &["True", "False"])]));
}

/// The controller follows what the provider's routes can do (`Routes::support`), not Hetzner's
/// limits: the memory network routes IPv6 and takes four writes at once; told it takes one, it
/// gets one at a time.
#[tokio::test]
async fn the_controller_routes_what_the_provider_supports_as_many_at_once_as_it_allows() {
    for at_once in [4, 1] {
        let Setup {
            memory,
            ctx,
            log,
            mut nodes,
        } = setup_with("10.244.0.0/16,fd00:10:244::/56");
        memory.set_route_support(RouteSupport {
            writes_at_once: at_once,
            ..MEMORY_ROUTE_SUPPORT
        });
        for i in 1..=8 {
            let cidrs = [format!("10.244.{i}.0/24"), format!("fd00:10:244:{i}::/64")];
            let cidrs: Vec<&str> = cidrs.iter().map(String::as_str).collect();
            let ip = format!("10.0.0.{i}");
            apply(&mut nodes, node(&format!("n{i}"), &cidrs, Some(&ip), false));
        }
        pass(&ctx).await.unwrap();
        let made = write_subjects(&memory);
        assert_eq!(made.len(), 16, "{made:?}");
        assert!(
            made.iter()
                .any(|(_, s)| s == "fd00:10:244:3::/64 via 10.0.0.3"),
            "{made:?}"
        );
        assert_eq!(memory.most_route_writes_at_once(), at_once, "{at_once}");
        assert!(events(&log.take()).is_empty(), "no Warning: IPv6 is routed");
    }
}

/// Mirrors `unroutable_nodes_get_a_warning_and_network_unavailable`.
#[tokio::test]
async fn unroutable_nodes_warn_and_stay_network_unavailable() {
    let Setup {
        memory,
        ctx,
        log,
        mut nodes,
    } = setup();
    // Its server is not in the network: no private IP, and the node reports no InternalIP.
    memory.add_server(Server::new("detached").public_ip("203.0.113.5"));
    apply(
        &mut nodes,
        node("detached", &["10.244.1.0/24"], None, false),
    );
    // Its podCIDR is outside --cluster-cidr.
    apply(
        &mut nodes,
        node("outside", &["10.99.0.0/24"], Some("10.0.0.3"), false),
    );

    pass(&ctx).await.unwrap();
    assert!(memory.routes().is_empty());
    let creates: Vec<String> = memory.writes().into_iter().map(|c| c.subject).collect();
    assert_eq!(
        creates,
        ["10.244.1.0/24 via its server's private IP"],
        "none for outside"
    );
    let sent = log.take();
    let by_reason: BTreeMap<String, (String, String)> = events(&sent)
        .into_iter()
        .map(|(node, reason, note)| (reason, (node, note)))
        .collect();
    let (node, note) = &by_reason["ServerNotInNetwork"];
    assert_eq!(node, "detached");
    assert!(note.contains("not attached"), "{note}");
    let (node, note) = &by_reason["ClusterCIDRMisconfigured"];
    assert_eq!(node, "outside");
    assert!(
        note.contains("10.99.0.0/24") && note.contains("10.244.0.0/16"),
        "{note}"
    );
    assert_eq!(by_reason.len(), 2);
    assert_eq!(
        conditions(&sent),
        statuses(&[("detached", &["True"]), ("outside", &["True"])])
    );
}

/// Mirrors `route_limit_reached_is_a_warning_on_the_node`.
#[tokio::test]
async fn the_route_limit_is_a_warning_on_the_node() {
    let Setup {
        memory,
        ctx,
        log,
        mut nodes,
    } = setup();
    memory.fail(Op::CreateRoute, Fault::Code(403, "resource_limit_exceeded"));
    apply(
        &mut nodes,
        node("n", &["10.244.1.0/24"], Some("10.0.0.2"), false),
    );
    pass(&ctx).await.unwrap();
    let sent = log.take();
    let events = events(&sent);
    assert_eq!(events.len(), 1, "{events:?}");
    let (node, reason, note) = &events[0];
    assert_eq!((node.as_str(), reason.as_str()), ("n", "RouteLimitReached"));
    assert!(note.contains("for node n"), "{note}");
    assert_eq!(conditions(&sent), statuses(&[("n", &["True"])]));
}

/// A full network refuses every create the same way: a pass tries one batch (as many writes as
/// the provider takes at once; Hetzner's one), not one per node, and the nodes it did not try are
/// neither warned nor backed off.
#[tokio::test]
async fn a_full_network_costs_one_create_per_pass_not_one_per_node() {
    let Setup {
        memory,
        ctx,
        log,
        mut nodes,
    } = setup();
    memory.set_route_support(RouteSupport {
        writes_at_once: 1,
        ..MEMORY_ROUTE_SUPPORT
    });
    memory.fail(Op::CreateRoute, Fault::Code(403, "resource_limit_exceeded"));
    for (i, name) in ["a", "b", "c"].into_iter().enumerate() {
        apply(
            &mut nodes,
            node(
                name,
                &[&format!("10.244.{}.0/24", i + 1)],
                Some(&format!("10.0.0.{}", i + 2)),
                false,
            ),
        );
    }
    pass(&ctx).await.unwrap();
    let creates = |memory: &MemoryCloud| {
        memory
            .calls()
            .iter()
            .filter(|c| c.op == Op::CreateRoute)
            .count()
    };
    assert_eq!(creates(&memory), 1, "{:?}", memory.calls());
    let events = events(&log.take());
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0].1, "RouteLimitReached");
    // The next pass tries the next node, once.
    pass(&ctx).await.unwrap();
    assert_eq!(creates(&memory), 2, "{:?}", memory.calls());
}

/// Mirrors `robot_nodes_get_a_warning_and_cloud_nodes_their_routes`.
#[tokio::test]
async fn a_dedicated_server_gets_a_warning_and_cloud_nodes_their_routes() {
    let Setup {
        memory,
        ctx,
        log,
        mut nodes,
    } = setup();
    let mut robot = node("bm", &["10.244.7.0/24"], Some("10.1.0.7"), false);
    robot.spec.as_mut().unwrap().provider_id = Some("memory-dedicated://1000001".into());
    apply(&mut nodes, robot);
    apply(
        &mut nodes,
        node("a", &["10.244.1.0/24"], Some("10.0.0.2"), false),
    );
    pass(&ctx).await.unwrap();
    assert_eq!(memory.routes(), routes(&[("10.244.1.0/24", "10.0.0.2")]));
    let sent = log.take();
    let events = events(&sent);
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(
        (events[0].0.as_str(), events[0].1.as_str()),
        ("bm", "DedicatedServerNotRoutable")
    );
    assert_eq!(conditions(&sent), statuses(&[("a", &["True", "False"])]));
}

/// A failed create (here 503) is a Warning, and the node waits out its backoff: the next pass
/// makes no call for it even though the cloud is back. Part of
/// `locked_conflict_and_server_errors_converge_without_duplicates`, without the waiting.
#[tokio::test]
async fn a_failed_create_warns_once_and_backs_off() {
    let Setup {
        memory,
        ctx,
        log,
        mut nodes,
    } = setup();
    memory.fail(Op::CreateRoute, Fault::Retryable);
    apply(
        &mut nodes,
        node("n", &["10.244.1.0/24"], Some("10.0.0.2"), false),
    );
    let retry = pass(&ctx).await.unwrap();
    assert!(retry.is_some(), "the pass says when to retry");
    let sent = log.take();
    let reasons: Vec<String> = events(&sent).into_iter().map(|e| e.1).collect();
    assert_eq!(reasons, ["FailedToCreateRoute"]);

    memory.heal();
    memory.clear_calls();
    apply(
        &mut nodes,
        node("n", &["10.244.1.0/24"], Some("10.0.0.2"), false),
    );
    pass(&ctx).await.unwrap();
    assert!(events(&log.take()).is_empty(), "no second Warning");
    assert!(memory.writes().is_empty(), "{:?}", memory.calls());
    assert!(memory.routes().is_empty());
}

/// The network is gone (HCLOUD_NETWORK names none): every node with a podCIDR is told, and the
/// pass fails without writing. No e2e twin.
#[tokio::test]
async fn a_missing_network_is_a_warning_on_every_node_with_a_pod_cidr() {
    let Setup {
        memory,
        ctx,
        log,
        mut nodes,
    } = setup();
    memory.fail(Op::ListRoutes, Fault::NotFound);
    apply(
        &mut nodes,
        node("a", &["10.244.1.0/24"], Some("10.0.0.2"), false),
    );
    apply(&mut nodes, node("bare", &[], None, false));
    assert!(pass(&ctx).await.unwrap_err().is_not_found());
    let sent = log.take();
    let events = events(&sent);
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(
        (events[0].0.as_str(), events[0].1.as_str()),
        ("a", "NetworkNotFound")
    );
    assert!(conditions(&sent).is_empty());
    assert!(memory.writes().is_empty());
}
