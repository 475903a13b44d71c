//! End-to-end tests of the route controller: real kube-apiserver (testenv), cloud-sim over HTTP,
//! the controller in-process under its chart RBAC (impersonated ServiceAccount).

mod support;

use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams};
use serde_json::json;
use support::{Fixture, T};
use test_support::e2e::eventually;

fn pair(cidr: &str, gw: &str) -> (String, String) {
    (cidr.to_string(), gw.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn routes_follow_nodes_and_leave_foreign_routes_alone() {
    let mut fx = Fixture::world(None).await;
    // Before the controller starts: a hand-made route outside the cluster CIDR (kept) and a stale
    // one inside it (removed).
    let (_, other_ip) = fx.server("not-a-node", true).await;
    let client = fx.sim.client();
    client
        .add_route(fx.network, "10.250.0.0/24", &other_ip)
        .await
        .unwrap();
    client
        .add_route(fx.network, "10.244.200.0/24", &other_ip)
        .await
        .unwrap();
    fx.spawn(|_| {}).await;

    let (ca, cb) = (fx.pod_cidr(), fx.pod_cidr());
    let a = fx.node(std::slice::from_ref(&ca)).await;
    let b = fx.node(std::slice::from_ref(&cb)).await;
    fx.wait_routes(&[
        pair(&ca, &a.private_ip),
        pair(&cb, &b.private_ip),
        pair("10.250.0.0/24", &other_ip),
    ])
    .await;
    fx.wait_condition(&a.name, "False", "RouteCreated").await;
    fx.wait_condition(&b.name, "False", "RouteCreated").await;

    // The server's private IP changes (re-attached elsewhere) and node-controller updates the
    // InternalIP: the route is replaced, the other one is not touched.
    client
        .detach_from_network(a.server, fx.network)
        .await
        .unwrap();
    client
        .attach_to_network(a.server, fx.network, Some("10.0.3.33"))
        .await
        .unwrap();
    let mark = fx.mark();
    fx.set_internal_ip(&a.name, "10.0.3.33").await;
    fx.wait_routes(&[
        pair(&ca, "10.0.3.33"),
        pair(&cb, &b.private_ip),
        pair("10.250.0.0/24", &other_ip),
    ])
    .await;
    let after = fx.mark();
    let writes = |m: &str, e: &str| after.calls_to(m, e) - mark.calls_to(m, e);
    assert_eq!(writes("POST", "/networks/{id}/actions/delete_route"), 1);
    assert_eq!(writes("POST", "/networks/{id}/actions/add_route"), 1);

    // Node deleted: its route goes.
    Api::<Node>::all(fx.admin.clone())
        .delete(&b.name, &DeleteParams::default())
        .await
        .unwrap();
    fx.wait_routes(&[pair(&ca, "10.0.3.33"), pair("10.250.0.0/24", &other_ip)])
        .await;
}

/// A route another tool adds right after one of our writes is neither deleted nor replaced by our
/// next writes, and those still land, exactly one each (issue 31).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreign_route_added_between_two_of_our_writes_stays() {
    let fx = Fixture::start().await;
    let ca = fx.pod_cidr();
    let a = fx.node(std::slice::from_ref(&ca)).await;
    fx.wait_routes(&[pair(&ca, &a.private_ip)]).await;

    // Behind our back, between our first write and the next.
    let (_, other_ip) = fx.server("another-tool", true).await;
    fx.sim
        .client()
        .add_route(fx.network, "10.250.1.0/24", &other_ip)
        .await
        .unwrap();
    let foreign = pair("10.250.1.0/24", &other_ip);
    let mark = fx.mark();

    let cb = fx.pod_cidr();
    let b = fx.node(std::slice::from_ref(&cb)).await;
    fx.wait_routes(&[
        pair(&ca, &a.private_ip),
        pair(&cb, &b.private_ip),
        foreign.clone(),
    ])
    .await;
    Api::<Node>::all(fx.admin.clone())
        .delete(&a.name, &DeleteParams::default())
        .await
        .unwrap();
    fx.wait_routes(&[pair(&cb, &b.private_ip), foreign.clone()])
        .await;

    let after = fx.mark();
    let writes = |m: &str, e: &str| after.calls_to(m, e) - mark.calls_to(m, e);
    assert_eq!(writes("POST", "/networks/{id}/actions/add_route"), 1);
    assert_eq!(writes("POST", "/networks/{id}/actions/delete_route"), 1);
    // Our writes keep the routes we read current: neither change reads the network.
    assert_eq!(writes("GET", "/networks/{id}"), 0);
    fx.wait_condition(&b.name, "False", "RouteCreated").await;
}

/// Another tool takes a node's destination before we route it: our create, planned against the
/// routes we kept, is refused (422, it overlaps); that makes us read the network at once, and the
/// route is pointed at the node like any wrong gateway, with no Warning (issue 31).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_destination_taken_behind_our_back_is_read_again_and_replaced_without_a_warning() {
    let fx = Fixture::start().await;
    let ca = fx.pod_cidr();
    let a = fx.node(std::slice::from_ref(&ca)).await;
    fx.wait_routes(&[pair(&ca, &a.private_ip)]).await;

    let cb = fx.pod_cidr();
    let (_, other_ip) = fx.server("another-tool", true).await;
    fx.sim
        .client()
        .add_route(fx.network, &cb, &other_ip)
        .await
        .unwrap();
    let mark = fx.mark();
    let b = fx.node(std::slice::from_ref(&cb)).await;
    fx.wait_routes(&[pair(&ca, &a.private_ip), pair(&cb, &b.private_ip)])
        .await;
    fx.wait_condition(&b.name, "False", "RouteCreated").await;

    let after = fx.mark();
    let calls = |m: &str, e: &str| after.calls_to(m, e) - mark.calls_to(m, e);
    assert_eq!(
        calls("POST", "/networks/{id}/actions/add_route"),
        2,
        "refused, then made"
    );
    assert_eq!(calls("POST", "/networks/{id}/actions/delete_route"), 1);
    assert_eq!(
        calls("GET", "/networks/{id}"),
        1,
        "read once, after the refusal"
    );
    let warnings: Vec<_> = fx
        .world
        .events_of("Node", &b.name)
        .await
        .into_iter()
        .filter(|e| e.type_.as_deref() == Some("Warning"))
        .map(|e| e.reason)
        .collect();
    assert!(warnings.is_empty(), "{warnings:?}");
}

/// A new process lists the Nodes in pages, and its cache is empty until the last one is in: a
/// pass planned on it would delete the route of every Node not listed yet. At 1200 Nodes a
/// restart did, until passes waited for the list (issue 31's `bench system`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_deletes_no_route_while_the_nodes_are_still_being_listed() {
    let mut fx = Fixture::start().await;
    let mut want = Vec::new();
    // Two pages of the Node list (50 a page), each Node as big as a kubelet makes it; 97 routes
    // in all, under the network's limit of 100.
    for _ in 0..4 {
        let cidrs: Vec<String> = (0..24).map(|_| fx.pod_cidr()).collect();
        let made =
            futures::future::join_all(cidrs.iter().map(|c| fx.node(std::slice::from_ref(c)))).await;
        want.extend(cidrs.iter().zip(&made).map(|(c, n)| pair(c, &n.private_ip)));
    }
    fx.wait_routes(&want).await;

    // The first Node event of the list starts a pass at once.
    fx.restart(Duration::ZERO).await;
    // Passes are serial: once a Node made after the restart has its route, the first pass after
    // the restart is over.
    let late = fx.pod_cidr();
    let n = fx.node(std::slice::from_ref(&late)).await;
    want.push(pair(&late, &n.private_ip));
    fx.wait_routes(&want).await;
    let calls = fx.mark();
    assert_eq!(
        calls.calls_to("POST", "/networks/{id}/actions/delete_route"),
        0
    );
    assert_eq!(
        calls.calls_to("POST", "/networks/{id}/actions/add_route"),
        1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ipv6_pod_cidr_warns_and_the_ipv4_half_is_routed() {
    let fx = Fixture::start().await;
    let v4 = fx.pod_cidr();
    let node = fx
        .node(&[v4.clone(), "fd00:10:244:1::/64".to_string()])
        .await;
    fx.wait_routes(&[pair(&v4, &node.private_ip)]).await;
    let note = fx.wait_event(&node.name, "IPv6PodCIDRUnsupported").await;
    assert!(note.contains("fd00:10:244:1::/64"), "{note}");
    fx.wait_condition(&node.name, "False", "RouteCreated").await;
    let stats = fx.mark();
    assert_eq!(
        stats.calls_to("POST", "/networks/{id}/actions/add_route"),
        1,
        "no call for the IPv6 CIDR"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_nodes_at_once_get_their_routes_without_a_single_423() {
    let fx = Fixture::start().await;
    let mut servers = Vec::new();
    for i in 0..20 {
        let name = test_support::e2e::unique(&format!("n{i}"));
        let (id, ip) = fx.server(&name, true).await;
        servers.push((name, id, ip, fx.pod_cidr()));
    }
    let before_423 = fx.responses_with(423);
    futures::future::join_all(
        servers
            .iter()
            .map(|(name, id, ip, cidr)| fx.create_node(name, *id, ip, std::slice::from_ref(cidr))),
    )
    .await;
    let want: Vec<(String, String)> = servers
        .iter()
        .map(|(_, _, ip, cidr)| pair(cidr, ip))
        .collect();
    fx.wait_routes(&want).await;
    for (name, ..) in &servers {
        fx.wait_condition(name, "False", "RouteCreated").await;
    }
    assert_eq!(
        fx.responses_with(423) - before_423,
        0,
        "writes are serialised"
    );
    let stats = fx.mark();
    assert_eq!(
        stats.calls_to("POST", "/networks/{id}/actions/add_route"),
        20
    );
    println!(
        "FIGURE 20 routes: {} cloud calls ({:.2} per route)",
        stats.total_calls(),
        stats.total_calls() as f64 / 20.0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locked_conflict_and_server_errors_converge_without_duplicates() {
    let fx = Fixture::start().await;
    let faults = fx.sim.faults();
    let add = Some("POST /networks/{id}/actions/add_route");
    faults.fail_next(add, 2, 423, "locked");
    faults.fail_next(add, 1, 409, "conflict");
    faults.fail_next(add, 2, 503, "unavailable");
    let mut want = Vec::new();
    for _ in 0..4 {
        let cidr = fx.pod_cidr();
        let n = fx.node(std::slice::from_ref(&cidr)).await;
        want.push(pair(&cidr, &n.private_ip));
    }
    fx.wait_routes(&want).await;
    let met = (
        fx.responses_with(423),
        fx.responses_with(409),
        fx.responses_with(503),
    );
    assert_eq!(
        met,
        (2, 1, 2),
        "every injected fault was answered and survived"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unroutable_nodes_get_a_warning_and_network_unavailable() {
    let fx = Fixture::start().await;
    // The server is not in the network.
    let name = test_support::e2e::unique("detached");
    let (id, _) = fx.server(&name, false).await;
    fx.create_node(&name, id, "", &[fx.pod_cidr()]).await;
    // The podCIDR is outside --cluster-cidr.
    let outside = fx.node(&["10.99.0.0/24".to_string()]).await;

    let note = fx.wait_event(&name, "ServerNotInNetwork").await;
    assert!(note.contains("not attached"), "{note}");
    fx.wait_condition(&name, "True", "NoRouteCreated").await;
    let note = fx
        .wait_event(&outside.name, "ClusterCIDRMisconfigured")
        .await;
    assert!(
        note.contains("10.99.0.0/24") && note.contains("10.244.0.0/16"),
        "{note}"
    );
    fx.wait_condition(&outside.name, "True", "NoRouteCreated")
        .await;
    assert_eq!(fx.routes().await, Vec::<(String, String)>::new());
    let metrics = fx.ctl.as_ref().unwrap().metrics().await;
    assert!(
        metrics.contains("reason=\"ClusterCIDRMisconfigured\"")
            && metrics.contains("reason=\"ServerNotInNetwork\""),
        "{metrics}"
    );
}

/// A node whose server is in a network zone where the network has no subnet cannot join the
/// network: NetworkUnavailable=True saying which zone and the command that adds a subnet, one
/// Warning, and no write for it while that holds, however many passes and resyncs come. Once the
/// subnet is added and the server attached, the next resync routes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_in_a_zone_without_a_subnet_says_so_and_is_routed_once_there_is_one() {
    let fx = Fixture::start_resyncing(Duration::from_secs(1)).await;
    let name = test_support::e2e::unique("ash");
    let server = fx
        .sim
        .client()
        .create_server(&name, "cpx11", "ash")
        .await
        .expect("create server");
    let cidr = fx.pod_cidr();
    fx.create_node(&name, server, "", std::slice::from_ref(&cidr))
        .await;

    let note = fx.wait_event(&name, "NetworkZoneWithoutSubnet").await;
    for part in [
        "network zone us-east",
        "hcloud network add-subnet k8s --network-zone us-east",
    ] {
        assert!(note.contains(part), "{part}: {note}");
    }
    fx.wait_condition(&name, "True", "NodeNotRoutable").await;

    // Further passes (another node's route) write nothing for it and warn no more.
    let mark = fx.mark();
    let other = fx.node(&[fx.pod_cidr()]).await;
    fx.wait_condition(&other.name, "False", "RouteCreated")
        .await;
    let adds = fx
        .mark()
        .calls_to("POST", "/networks/{id}/actions/add_route")
        - mark.calls_to("POST", "/networks/{id}/actions/add_route");
    assert_eq!(adds, 1, "the other node's route alone");
    let warnings = fx
        .world
        .events_of("Node", &name)
        .await
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("NetworkZoneWithoutSubnet"))
        .map(|e| e.series.map_or(1, |s| s.count))
        .collect::<Vec<_>>();
    assert_eq!(warnings, [1], "one Warning, never repeated");

    // The operator adds the subnet and attaches the server: routed.
    let client = fx.sim.client();
    client
        .add_subnet(fx.network, "10.1.0.0/16", "us-east")
        .await
        .expect("add subnet");
    client
        .attach_to_network(server, fx.network, None)
        .await
        .expect("attach server");
    let ip = fx.private_ip(server).await;
    fx.set_internal_ip(&name, &ip).await;
    fx.wait_routes(&[
        pair(&cidr, &ip),
        pair(&other_cidr(&fx, &other.name).await, &other.private_ip),
    ])
    .await;
    fx.wait_condition(&name, "False", "RouteCreated").await;
}

async fn other_cidr(fx: &Fixture, node: &str) -> String {
    Api::<Node>::all(fx.admin.clone())
        .get(node)
        .await
        .unwrap()
        .spec
        .unwrap()
        .pod_cidr
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn route_limit_reached_is_a_warning_on_the_node() {
    let fx = Fixture::start().await;
    let (_, gw) = fx.server("filler", true).await;
    let client = fx.sim.client();
    // Fill the network's 100 routes with hand-made ones outside the cluster CIDR.
    for i in 0..100 {
        client
            .add_route(fx.network, &format!("172.16.{i}.0/24"), &gw)
            .await
            .unwrap();
    }
    let node = fx.node(&[fx.pod_cidr()]).await;
    let note = fx.wait_event(&node.name, "RouteLimitReached").await;
    assert!(note.contains(&node.name), "{note}");
    fx.wait_condition(&node.name, "True", "NoRouteCreated")
        .await;
    assert_eq!(fx.routes().await.len(), 100, "hand-made routes untouched");
    let metrics = fx.ctl.as_ref().unwrap().metrics().await;
    assert!(
        metrics.contains("\ncloud_controllers_route_controller_network_full 1"),
        "{metrics}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chart_rbac_is_enough_and_refuses_what_is_not_needed() {
    let fx = Fixture::start().await;
    let cidr = fx.pod_cidr();
    let node = fx.node(std::slice::from_ref(&cidr)).await;
    fx.wait_condition(&node.name, "False", "RouteCreated").await;
    let sa = testenv::kube()
        .await
        .service_account_client(&fx.run, "route-controller")
        .await;
    let nodes: Api<Node> = Api::all(sa);
    let refused = nodes
        .patch(
            &node.name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"x": "y"}}})),
        )
        .await;
    assert!(
        test_support::e2e::forbidden(&refused),
        "patching a Node itself is refused: {refused:?}"
    );
    let refused = nodes.delete(&node.name, &DeleteParams::default()).await;
    assert!(test_support::e2e::forbidden(&refused), "{refused:?}");
    eventually("route exists", T, || async {
        (!fx.routes().await.is_empty()).then_some(())
    })
    .await;
}

/// A mixed cluster: the Cloud node gets its route, the dedicated (Robot) server's Node a Warning
/// saying why it has none, and the controller keeps going (HCCM refuses to start with routes and
/// Robot together).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn robot_nodes_get_a_warning_and_cloud_nodes_their_routes() {
    let fx = Fixture::start().await;
    let robot_name = test_support::e2e::unique("bm");
    let cidr = fx.pod_cidr();
    let mut robot = testenv::KubeletNode {
        labels: vec![(test_support::e2e::TEST_LABEL.to_string(), fx.run.clone())],
        uninitialized: false,
        provider_id: Some("hrobot://1000001".into()),
        ..testenv::KubeletNode::new(&robot_name)
    }
    .registration();
    if let Some(spec) = robot.spec.as_mut() {
        spec.pod_cidr = Some(cidr.clone());
        spec.pod_cidrs = Some(vec![cidr.clone()]);
    }
    Api::<Node>::all(fx.admin.clone())
        .create(&Default::default(), &robot)
        .await
        .unwrap();
    let cloud = fx.node(&[fx.pod_cidr()]).await;

    let note = fx.wait_event(&robot_name, "RobotServerNotRoutable").await;
    assert!(
        note.contains("hrobot://1000001") && note.contains(&cidr),
        "{note}"
    );
    let cloud_cidr = Api::<Node>::all(fx.admin.clone())
        .get(&cloud.name)
        .await
        .unwrap()
        .spec
        .unwrap()
        .pod_cidr
        .unwrap();
    fx.wait_routes(&[pair(&cloud_cidr, &cloud.private_ip)])
        .await;
}

/// Shadow mode (`--dry-run`): a Node's missing route is planned, with its reason, not created,
/// and nothing is written: no route, no `NetworkUnavailable` on the Node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shadow_plans_the_missing_route_and_creates_nothing() {
    let mut fx = Fixture::world(None).await;
    let cidr = fx.pod_cidr();
    let node = fx.node(std::slice::from_ref(&cidr)).await;
    let nodes: Api<Node> = Api::all(fx.admin.clone());
    let before = nodes
        .get(&node.name)
        .await
        .unwrap()
        .metadata
        .resource_version;
    let mark = fx.sim.request_log().last().map_or(0, |e| e.seq);

    fx.spawn_shadow().await;
    let admin = fx.ctl.as_ref().unwrap().admin;
    let planned = eventually("the route planned", T, || async {
        let p = test_support::e2e::run::planned_writes(admin).await;
        p.iter().any(|e| e["api"] == "cloud").then_some(p)
    })
    .await;
    let route = planned.iter().find(|e| e["api"] == "cloud").unwrap();
    assert_eq!(route["operation"], "POST /networks/{id}/actions/add_route");
    assert_eq!(
        route["object"],
        format!("/networks/{}/actions/add_route", fx.network)
    );
    assert!(
        route["reason"].as_str().unwrap().contains(&cidr)
            && route["body"].as_str().unwrap().contains(&node.private_ip),
        "{route}"
    );
    // The condition it would write next to it is planned too, as a Kubernetes write.
    assert!(
        planned
            .iter()
            .any(|e| e["operation"] == "PATCH nodes/status"
                && e["object"] == format!("nodes {}", node.name)),
        "{planned:#?}"
    );
    assert!(fx.routes().await.is_empty(), "no route created");
    let writes: Vec<_> = fx
        .sim
        .request_log()
        .into_iter()
        .filter(|e| e.seq > mark && e.method != "GET")
        .collect();
    assert!(writes.is_empty(), "{writes:?}");
    assert_eq!(
        nodes
            .get(&node.name)
            .await
            .unwrap()
            .metadata
            .resource_version,
        before,
        "the Node is not written"
    );
}

/// A stop that arrives before the first Node list is complete (the controller may not list
/// Nodes, so the list never completes) is a clean exit, not "channel closed".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_before_the_first_node_list_is_a_clean_exit() {
    let fx = Fixture::world(None).await;
    for _ in 0..3 {
        let settings = route_controller::Settings {
            cluster: Some(
                route_controller::cidr::ClusterCidrs::parse(support::CLUSTER_CIDR).unwrap(),
            ),
            resync: Duration::from_secs(300),
            window: Duration::from_millis(100),
        };
        let mut cfg = test_support::e2e::run::sim_config(&fx.sim);
        cfg.network.name_or_id = Some(fx.network.to_string());
        let stopped = fx
            .stop_before_the_first_node_list(&route_controller::INFO, cfg, move |rt, cloud| {
                route_controller::start(rt, cloud, settings)
            })
            .await;
        assert!(stopped.is_ok(), "{stopped:?}");
    }
}
