//! Actions: polling, shared waits, failures.

use std::time::Duration;

use cloud_client::{CloudError, NodeRef, RouteRequest, ServiceRef};

use crate::common::provider;
use crate::{lb_nodes, server_in_network, sim_fast, svc};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_two_second_action_takes_few_polls() {
    let sim = sim_fast().await;
    let (net, _) = server_in_network(&sim, "node-r").await;
    let p = provider(&sim, |c| c.network.name_or_id = Some(net.to_string())).await;
    let routes = p.routes().unwrap();
    sim.set_action_duration(Duration::from_secs(2));
    sim.reset_counters();
    routes
        .create_route(&RouteRequest {
            name_hint: "uid".into(),
            target_node: NodeRef::new("node-r"),
            target_addresses: vec![],
            destination_cidr: "10.244.1.0/24".into(),
        })
        .await
        .unwrap();
    let polls = sim.requests("GET", "/actions");
    println!("FIGURE actions: a 2 s action was polled {polls} times");
    assert!(polls <= 6, "{polls}");
    assert!(polls >= 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_waits_share_poll_calls() {
    let sim = sim_fast().await;
    let w = sim.client();
    let nodes: Vec<u64> = w.create_servers(3, "t", "cx22", "fsn1").await.unwrap();
    let p = provider(&sim, |_| {}).await;
    let lbs = p.load_balancers().unwrap();
    // Five Services, all created at once; the create actions last 1 s.
    sim.set_action_duration(Duration::from_secs(1));
    let services: Vec<ServiceRef> = (0..5)
        .map(|i| svc(&format!("batch-{i}"), &[("location", "fsn1")]))
        .collect();
    let targets = lb_nodes(&nodes);
    let ensures = services.iter().map(|s| lbs.ensure(s, &targets));
    let results = futures::future::join_all(ensures).await;
    assert!(results.iter().all(Result::is_ok), "{results:?}");
    let polls = sim.requests("GET", "/actions");
    println!(
        "FIGURE actions: 5 concurrent 1 s LB creates used {polls} GET /actions calls in total"
    );
    // Five separate waiters would need at least 4 polls each (0.1, 0.3, 0.7, 1.5 s).
    assert!(polls <= 10, "{polls}");
    let batched = sim
        .request_log()
        .iter()
        .any(|e| e.endpoint == "/actions" && e.uri.matches("id=").count() >= 2);
    assert!(batched, "expected at least one poll carrying several ids");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_action_is_a_typed_error() {
    let sim = sim_fast().await;
    let w = sim.client();
    let nodes = w.create_servers(1, "f", "cx22", "fsn1").await.unwrap();
    let p = provider(&sim, |_| {}).await;
    sim.faults()
        .fail_actions(Some("POST /load_balancers"), 1, "service_error");
    let e = p
        .load_balancers()
        .unwrap()
        .ensure(&svc("fail-1", &[("location", "fsn1")]), &lb_nodes(&nodes))
        .await
        .unwrap_err();
    assert!(matches!(e, CloudError::ActionFailed { .. }), "{e:?}");
    assert_eq!(e.code(), Some("service_error"));
}
