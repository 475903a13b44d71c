//! A cluster across network zones: a load balancer reaches only the servers of its own network
//! zone, and Hetzner refuses a whole request that names another's. The nodes of other zones are
//! left out before any write, and the Service says which and what to do.

mod support;

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::DeleteParams;
use support::{Fixture, PREFIX, REGION_LABEL};
use test_support::e2e::{NodeSpecT, T, create_node, eventually, unique};

/// Waits until the Service's condition has `status` and `reason`; returns its message.
async fn wait_condition(fx: &Fixture, name: &str, status: &str, reason: &str) -> String {
    eventually(&format!("{name}: {status}/{reason}"), T, || async {
        let svc = fx.get(name).await?;
        let c = service_controller::condition::current(&svc)?;
        (c.status == status && c.reason == reason).then(|| c.message.clone())
    })
    .await
}

/// The Warning Events on the fixture's Service `name` with `reason`, as (count, note).
async fn warnings(fx: &Fixture, name: &str, reason: &str) -> Vec<(i32, String)> {
    fx.events_of("Service", name)
        .await
        .into_iter()
        .filter(|e| {
            let namespace = e.regarding.as_ref().and_then(|r| r.namespace.as_deref());
            namespace == Some(fx.ns.as_str()) && e.reason.as_deref() == Some(reason)
        })
        .map(|e| {
            let count = e.series.as_ref().map_or(1, |s| s.count);
            (count, e.note.unwrap_or_default())
        })
        .collect()
}

/// The load balancer's writes and reads of `lb` since `mark`.
fn calls_to_lb(fx: &Fixture, mark: &cloud_client::StatsSnapshot) -> Vec<(String, String)> {
    fx.calls_since(mark)
        .into_iter()
        .filter(|(_, endpoint)| endpoint.starts_with("/load_balancers"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_of_another_zone_are_left_out_before_any_write_and_named() {
    let fx = Fixture::start().await;
    let fsn = fx.node_in("fsn1", BTreeMap::new()).await;
    let nbg = fx.node_in("nbg1", BTreeMap::new()).await;
    let ash = fx.node_in("ash", BTreeMap::new()).await;

    // The create carries the eu-central nodes only: one write, nothing refused.
    let mark = fx.mark();
    let svc = fx.service("web", &[80], &[]).await;
    let message = wait_condition(&fx, "web", "True", "NodesOutsideLoadBalancerZone").await;
    fx.wait_targets(&svc, &[fsn.server, nbg.server]).await;
    let writes = fx.writes_since(&mark);
    assert_eq!(
        writes,
        [("POST".to_string(), "/load_balancers".to_string())],
        "one create, no refused write"
    );
    for part in [
        "1 of 3 nodes",
        "network zone eu-central",
        &format!("in us-east: {} (ash)", ash.name),
        &format!("{PREFIX}location"),
        &format!("{PREFIX}network-zone"),
        &format!("{PREFIX}node-selector"),
    ] {
        assert!(message.contains(part), "{part}: {message}");
    }
    let said = warnings(&fx, "web", "NodesOutsideLoadBalancerZone").await;
    assert_eq!(said.len(), 1, "one Warning: {said:?}");
    assert!(said[0].1.contains(&ash.name), "{said:?}");

    // A node joining in the other zone costs the load balancer nothing; the Service names it.
    let mark = fx.mark();
    let ash2 = fx.node_in("ash", BTreeMap::new()).await;
    eventually("the second ash node named", T, || async {
        let svc = fx.get("web").await?;
        let c = service_controller::condition::current(&svc)?;
        c.message.contains(&ash2.name).then_some(())
    })
    .await;
    assert_eq!(calls_to_lb(&fx, &mark), [], "0 calls to the load balancer");

    // A node without the region label is placed by its server's location.
    let unlabelled = fx.node_without_region("ash").await;
    eventually("the unlabelled ash node named", T, || async {
        let svc = fx.get("web").await?;
        let c = service_controller::condition::current(&svc)?;
        (c.message.contains(&unlabelled.name) && c.message.contains("3 of 5 nodes")).then_some(())
    })
    .await;

    // A node joining in the zone becomes a target.
    let nbg2 = fx.node_in("nbg1", BTreeMap::new()).await;
    fx.wait_targets(&svc, &[fsn.server, nbg.server, nbg2.server])
        .await;
    let svc = fx.get("web").await.unwrap();
    assert_eq!(
        support::target_servers(&fx.lb_of(&svc).await),
        [fsn.server, nbg.server, nbg2.server].into(),
        "never an ash server"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_load_balancer_with_every_node_elsewhere_is_made_and_says_so() {
    let fx = Fixture::start().await;
    let ash = fx.node_in("ash", BTreeMap::new()).await;
    let mark = fx.mark();
    let svc = fx.service("web", &[80], &[]).await;
    let message = wait_condition(&fx, "web", "False", "NoNodeInLoadBalancerZone").await;
    assert!(
        message.contains("none of the 1 nodes") && message.contains(&ash.name),
        "{message}"
    );
    let svc = fx.wait_ingress(&svc.metadata.name.clone().unwrap()).await;
    assert!(support::target_ids(&fx.lb_of(&svc).await).is_empty());
    assert_eq!(fx.writes_since(&mark).len(), 1, "the create alone");

    // The first node in the zone: served.
    let fsn = fx.node_in("fsn1", BTreeMap::new()).await;
    fx.wait_targets(&svc, &[fsn.server]).await;
    wait_condition(&fx, "web", "True", "NodesOutsideLoadBalancerZone").await;
}

/// Two Services on one shared load balancer in nbg1: its targets are the eu-central nodes, each
/// Service names the ash node, and the second Service's port is added with no refused write.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shared_load_balancer_targets_its_zone_only() {
    let fx = Fixture::start().await;
    let fsn = fx.node_in("fsn1", BTreeMap::new()).await;
    let ash = fx.node_in("ash", BTreeMap::new()).await;
    let lb_name = unique("shared");
    let ann = [
        ("name", lb_name.as_str()),
        ("shared", "true"),
        ("location", "nbg1"),
    ];
    let mark = fx.mark();
    fx.service("one", &[80], &ann).await;
    wait_condition(&fx, "one", "True", "NodesOutsideLoadBalancerZone").await;
    fx.service("two", &[81], &ann).await;
    for name in ["one", "two"] {
        let message = wait_condition(&fx, name, "True", "NodesOutsideLoadBalancerZone").await;
        assert!(
            message.contains(&format!("{} (ash)", ash.name)),
            "{message}"
        );
    }
    let lbs = fx.sim.client().list_load_balancers().await.unwrap();
    let lb = lbs
        .iter()
        .find(|lb| lb["name"] == lb_name.as_str())
        .unwrap();
    assert_eq!(support::target_ids(lb), [fsn.server]);
    assert_eq!(support::listen_ports(lb), [80, 81].into());
    let add_targets = fx
        .calls_since(&mark)
        .into_iter()
        .filter(|(_, e)| e.ends_with("/add_target"))
        .count();
    assert_eq!(
        add_targets, 0,
        "the target came with the create, never the ash node"
    );
}

/// A server rebuilt in another location under the same name: its new Node leaves the load
/// balancer's targets and is named as outside its zone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_rebuilt_in_another_zone_leaves_the_targets() {
    let fx = Fixture::start().await;
    let stays = fx.node_in("fsn1", BTreeMap::new()).await;
    let moves = fx.node_in("nbg1", BTreeMap::new()).await;
    let svc = fx.service("web", &[80], &[]).await;
    fx.wait_targets(&svc, &[stays.server, moves.server]).await;
    wait_condition(&fx, "web", "True", "EnsuredLoadBalancer").await;

    // The server is deleted, its Node with it, and a server of the same name comes up in ash.
    Api::<Node>::all(fx.admin.clone())
        .delete(&moves.name, &DeleteParams::default())
        .await
        .expect("delete the node");
    fx.sim
        .client()
        .delete_server(moves.server)
        .await
        .expect("delete the server");
    let rebuilt = fx.server_in(&moves.name, "ash").await;
    create_node(
        &fx.admin,
        &fx.run,
        &moves.name,
        NodeSpecT {
            provider_id: Some(format!("hcloud://{}", rebuilt.id)),
            labels: [(REGION_LABEL.to_string(), "ash".to_string())].into(),
            ready: Some(true),
            ..Default::default()
        },
    )
    .await;
    fx.wait_targets(&svc, &[stays.server]).await;
    let message = wait_condition(&fx, "web", "True", "NodesOutsideLoadBalancerZone").await;
    assert!(
        message.contains(&format!("{} (ash)", moves.name)),
        "{message}"
    );
}

/// The Service's load balancers, home first, then by zone: (network zone, target servers,
/// public IPv4).
async fn lbs_by_zone(fx: &Fixture, uid: &str) -> Vec<(String, Vec<u64>, String)> {
    let mut lbs: Vec<_> = fx
        .sim
        .client()
        .list_load_balancers()
        .await
        .expect("list load balancers")
        .into_iter()
        .filter(|lb| {
            lb["labels"][support::LB_UID_LABEL]
                .as_str()
                .is_some_and(|owner| owner.starts_with(uid))
        })
        .map(|lb| {
            let home = lb["labels"][support::LB_UID_LABEL] == uid;
            let zone = lb["location"]["network_zone"].as_str().unwrap_or_default();
            let ip = lb["public_net"]["ipv4"]["ip"].as_str().unwrap_or_default();
            (
                !home,
                zone.to_owned(),
                support::target_ids(&lb),
                ip.to_owned(),
            )
        })
        .collect();
    lbs.sort();
    lbs.into_iter().map(|(_, z, t, ip)| (z, t, ip)).collect()
}

/// `one-per-network-zone`: the home load balancer (fsn1) targets the eu-central nodes and one in
/// us-east the ash node; the status lists both, home first. When us-east loses its last node, its
/// address leaves the status while its load balancer stays; the next reconcile deletes it. A
/// deleted Service takes every zone's load balancer with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_load_balancer_per_zone_when_asked() {
    let mut fx = Fixture::start().await;
    let fsn = fx.node_in("fsn1", BTreeMap::new()).await;
    let nbg = fx.node_in("nbg1", BTreeMap::new()).await;
    let ash = fx.node_in("ash", BTreeMap::new()).await;
    let svc = fx
        .service("web", &[80], &[("one-per-network-zone", "true")])
        .await;
    let uid = svc.metadata.uid.clone().unwrap();
    let mut eu = vec![fsn.server, nbg.server];
    eu.sort_unstable();
    let lbs = eventually(
        "a load balancer per zone, each with its nodes",
        T,
        || async {
            let lbs = lbs_by_zone(&fx, &uid).await;
            let zones: Vec<(&str, &[u64])> =
                lbs.iter().map(|(z, t, _)| (z.as_str(), &t[..])).collect();
            (zones == [("eu-central", &eu[..]), ("us-east", &[ash.server][..])]).then_some(lbs)
        },
    )
    .await;
    let (home_ip, ash_ip) = (lbs[0].2.clone(), lbs[1].2.clone());
    eventually("both addresses in the status, home first", T, || async {
        let ips = support::ingress_ips(&fx.get("web").await?);
        let v4: Vec<&String> = ips.iter().filter(|ip| !ip.contains(':')).collect();
        (v4 == [&home_ip, &ash_ip]).then_some(())
    })
    .await;
    wait_condition(&fx, "web", "True", "EnsuredLoadBalancer").await;
    assert!(
        warnings(&fx, "web", "NodesOutsideLoadBalancerZone")
            .await
            .is_empty(),
        "no node is left out"
    );

    // us-east loses its node: the address leaves the status first, the load balancer stays.
    Api::<Node>::all(fx.admin.clone())
        .delete(&ash.name, &DeleteParams::default())
        .await
        .expect("delete the ash node");
    eventually("the us-east address out of the status", T, || async {
        let ips = support::ingress_ips(&fx.get("web").await?);
        (!ips.is_empty() && !ips.contains(&ash_ip)).then_some(())
    })
    .await;
    let zones: Vec<String> = lbs_by_zone(&fx, &uid)
        .await
        .into_iter()
        .map(|l| l.0)
        .collect();
    assert_eq!(
        zones,
        ["eu-central", "us-east"],
        "us-east's load balancer stays until unpublished"
    );

    // The next reconcile (here a node joining) deletes it.
    let nbg2 = fx.node_in("nbg1", BTreeMap::new()).await;
    eu.push(nbg2.server);
    eu.sort_unstable();
    eventually("us-east's load balancer deleted", T, || async {
        let lbs = lbs_by_zone(&fx, &uid).await;
        (lbs.len() == 1 && lbs[0].1 == eu).then_some(())
    })
    .await;

    // A node in us-east again: its load balancer comes back. A controller started afresh knows
    // it (one list of the project's load balancers), and the Service's delete takes both.
    let ash2 = fx.node_in("ash", BTreeMap::new()).await;
    eventually("us-east served again", T, || async {
        let lbs = lbs_by_zone(&fx, &uid).await;
        (lbs.len() == 2 && lbs[1].1 == [ash2.server]).then_some(())
    })
    .await;
    let sa = fx.service_account().await;
    fx.restart(sa).await;
    fx.delete("web").await;
    eventually("every load balancer of the Service deleted", T, || async {
        lbs_by_zone(&fx, &uid).await.is_empty().then_some(())
    })
    .await;
}
