//! Routes: list, create, replace, delete, and a locked network.

use cloud_client::{AddressKind, CloudError, NodeAddress, NodeRef, Route, RouteRequest};

use crate::common::provider;
use crate::{calls, k8s_network, server_in_network, sim_fast};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn routes_list_create_replace_delete() {
    let sim = sim_fast().await;
    let w = sim.client();
    let net = k8s_network(&sim).await;
    let a = w.create_server("ra", "cx22", "fsn1").await.unwrap();
    let b = w.create_server("rb", "cx22", "fsn1").await.unwrap();
    w.attach_to_network(a, net, Some("10.0.1.10"))
        .await
        .unwrap();
    w.attach_to_network(b, net, Some("10.0.1.11"))
        .await
        .unwrap();
    w.add_route(net, "10.250.0.0/24", "10.0.1.99")
        .await
        .unwrap();
    let p = provider(&sim, |c| c.network.name_or_id = Some("k8s".into())).await;
    let routes = p.routes().unwrap();
    let req = |node: &str, cidr: &str, ip: &str| RouteRequest {
        name_hint: "x".into(),
        target_node: NodeRef::new(node),
        target_addresses: vec![NodeAddress::new(AddressKind::InternalIP, ip)],
        destination_cidr: cidr.into(),
    };
    let made = routes
        .create_route(&req("ra", "10.244.1.0/24", "10.0.1.10"))
        .await
        .unwrap();
    let list = routes.list_routes().await.unwrap();
    let blackhole = list
        .iter()
        .find(|r| r.destination_cidr == "10.250.0.0/24")
        .unwrap();
    assert!(blackhole.blackhole && blackhole.target_node.is_empty());
    let r = list
        .iter()
        .find(|r| r.destination_cidr == "10.244.1.0/24")
        .unwrap();
    assert_eq!(
        r,
        &Route {
            name: "10.0.1.10-10.244.1.0/24".into(),
            target_node: "ra".into(),
            destination_cidr: "10.244.1.0/24".into(),
            gateway: "10.0.1.10".into(),
            blackhole: false,
        }
    );
    assert_eq!(&made, r, "the create says what the network now holds");
    // A server made just after the server list the first create read is looked for afresh,
    // not reported missing.
    let c = w.create_server("rc", "cx22", "fsn1").await.unwrap();
    w.attach_to_network(c, net, Some("10.0.1.12"))
        .await
        .unwrap();
    let made = routes
        .create_route(&req("rc", "10.244.3.0/24", "10.0.1.12"))
        .await
        .unwrap();
    assert_eq!(made.gateway, "10.0.1.12");
    // Same route again: no write.
    sim.reset_counters();
    routes
        .create_route(&req("ra", "10.244.1.0/24", "10.0.1.10"))
        .await
        .unwrap();
    assert_eq!(sim.requests("POST", "/networks/{id}/actions/add_route"), 0);
    // Same destination, other node: delete then add.
    routes
        .create_route(&req("rb", "10.244.1.0/24", "10.0.1.11"))
        .await
        .unwrap();
    assert_eq!(
        sim.requests("POST", "/networks/{id}/actions/delete_route"),
        1
    );
    assert_eq!(sim.requests("POST", "/networks/{id}/actions/add_route"), 1);
    let net_json = w.get_network(net).await.unwrap();
    assert!(
        net_json["routes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["gateway"] == "10.0.1.11")
    );
    // Gateway must be one of the node's InternalIPs.
    let e = routes
        .create_route(&req("ra", "10.244.2.0/24", "10.0.1.77"))
        .await
        .unwrap_err();
    assert!(matches!(e, CloudError::InvalidInput { .. }), "{e}");
    // IPv6 is rejected before any call.
    sim.reset_counters();
    let e = routes
        .create_route(&req("ra", "fd00:10:244::/64", "10.0.1.10"))
        .await
        .unwrap_err();
    assert!(matches!(e, CloudError::Unsupported { .. }), "{e}");
    assert_eq!(calls(&sim), 0);
    // Delete, twice.
    let current = routes.list_routes().await.unwrap();
    let r = current
        .iter()
        .find(|r| r.destination_cidr == "10.244.1.0/24")
        .unwrap()
        .clone();
    routes.delete_route(&r).await.unwrap();
    routes
        .delete_route(&Route {
            gateway: String::new(),
            ..r.clone()
        })
        .await
        .unwrap();
    assert!(
        routes
            .list_routes()
            .await
            .unwrap()
            .iter()
            .all(|x| x.destination_cidr != "10.244.1.0/24")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn routes_locked_network_is_retried() {
    let sim = sim_fast().await;
    let (net, _) = server_in_network(&sim, "la").await;
    let p = provider(&sim, |c| c.network.name_or_id = Some(net.to_string())).await;
    sim.faults().fail_next(
        Some("POST /networks/{id}/actions/add_route"),
        2,
        423,
        "locked",
    );
    p.routes()
        .unwrap()
        .create_route(&RouteRequest {
            name_hint: "x".into(),
            target_node: NodeRef::new("la"),
            target_addresses: vec![],
            destination_cidr: "10.244.9.0/24".into(),
        })
        .await
        .unwrap();
    assert_eq!(sim.requests("POST", "/networks/{id}/actions/add_route"), 3);
    sim.faults().fail_next(
        Some("POST /networks/{id}/actions/add_route"),
        10,
        409,
        "conflict",
    );
    let e = p
        .routes()
        .unwrap()
        .create_route(&RouteRequest {
            name_hint: "x".into(),
            target_node: NodeRef::new("la"),
            target_addresses: vec![],
            destination_cidr: "10.244.10.0/24".into(),
        })
        .await
        .unwrap_err();
    assert!(e.is_retryable() && e.code() == Some("conflict"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_list_after_start_up_is_the_start_up_read_of_the_network() {
    let sim = sim_fast().await;
    let w = sim.client();
    let net = k8s_network(&sim).await;
    w.add_route(net, "10.244.7.0/24", "10.0.1.7").await.unwrap();
    sim.reset_counters();
    let p = provider(&sim, |c| c.network.name_or_id = Some(net.to_string())).await;
    assert_eq!(calls(&sim), 1, "the start-up check of HCLOUD_NETWORK");
    let routes = p.routes().unwrap();
    let first = routes.list_routes_unresolved().await.unwrap();
    assert_eq!(
        calls(&sim),
        1,
        "a restarted route-controller's first list reads nothing more"
    );
    assert_eq!(
        first
            .iter()
            .map(|r| r.destination_cidr.as_str())
            .collect::<Vec<_>>(),
        ["10.244.7.0/24"]
    );
    // Only the first: every later list reads the network (here: the route added since).
    w.add_route(net, "10.244.8.0/24", "10.0.1.8").await.unwrap();
    sim.reset_counters();
    let second = routes.list_routes_unresolved().await.unwrap();
    assert_eq!(calls(&sim), 1);
    assert_eq!(second.len(), 2, "{second:?}");
}
