//! Shadow mode (`--dry-run`) next to load balancers HCCM built: the plan stays empty while
//! nothing needs doing, one annotation changed plans exactly its one update, and nothing is ever
//! written, by the cloud's request log and by the Services' resourceVersions.

mod support;

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Service;
use kube::ResourceExt;
use serde_json::json;
use support::{Fixture, PREFIX, TestNode, node_ports};
use test_support::run::plan;
use test_support::{T, eventually};

/// A Service as HCCM left it: its load balancer built as HCCM builds it (name `a` + UID, the
/// ownership label, a TCP service per port with HCCM's health check, every node a target), the
/// cleanup finalizer and the ingress.
async fn hccm_service(fx: &Fixture, name: &str, ports: &[i32], nodes: &[TestNode]) -> u64 {
    let svc = fx.service(name, ports, &[]).await;
    let uid = svc.uid().unwrap();
    let lb_name = format!("a{}", uid.replace('-', ""))[..32].to_string();
    let world = fx.sim.world();
    let id = world
        .create_load_balancer_with(json!({
            "name": lb_name, "load_balancer_type": "lb11", "location": "fsn1",
            "labels": {"hcloud-ccm/service-uid": uid},
        }))
        .await
        .unwrap();
    for (port, node_port) in node_ports(&svc) {
        world
            .load_balancer_action(
                id,
                "add_service",
                json!({
                    "protocol": "tcp", "listen_port": port, "destination_port": node_port,
                    "proxyprotocol": false,
                    "health_check": {"protocol": "tcp", "port": node_port, "interval": 15,
                        "timeout": 10, "retries": 3}
                }),
            )
            .await
            .unwrap();
    }
    for n in nodes {
        world
            .load_balancer_action(
                id,
                "add_target",
                json!({"type": "server", "server": {"id": n.server}, "use_private_ip": false}),
            )
            .await
            .unwrap();
    }
    let lb = world.get_load_balancer(id).await.unwrap();
    let ip = lb["public_net"]["ipv4"]["ip"].as_str().unwrap().to_string();
    let ipv6 = lb["public_net"]["ipv6"]["ip"].as_str().unwrap().to_string();
    fx.services()
        .patch_status(
            name,
            &Default::default(),
            &kube::api::Patch::Merge(json!({
                "metadata": {"finalizers": [service_controller::service::FINALIZER]},
                "status": {"loadBalancer": {"ingress": [
                    {"ip": ip, "ipMode": "VIP"}, {"ip": ipv6, "ipMode": "VIP"}
                ]}}
            })),
        )
        .await
        .unwrap();
    id as u64
}

/// name → resourceVersion of every Service of the test.
async fn versions(fx: &Fixture) -> BTreeMap<String, String> {
    fx.services()
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .iter()
        .map(|s: &Service| (s.name_any(), s.resource_version().unwrap_or_default()))
        .collect()
}

/// Cloud requests other than reads after request-log position `after`.
fn cloud_writes(fx: &Fixture, after: u64) -> Vec<String> {
    fx.sim
        .request_log()
        .into_iter()
        .filter(|e| e.seq > after && e.method != "GET")
        .map(|e| format!("{} {}", e.method, e.uri))
        .collect()
}

fn reconciled(metrics: &str) -> f64 {
    metrics
        .lines()
        .filter(|l| l.starts_with("cloud_controllers_reconciles_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shadow_beside_hccm_plans_nothing_then_exactly_the_one_update_and_writes_nothing() {
    let mut fx = Fixture::without_controller(None).await;
    let nodes = fx.nodes(2).await;
    let mut lbs = Vec::new();
    for (name, ports) in [
        ("web", &[80, 443][..]),
        ("api", &[8080][..]),
        ("mail", &[25][..]),
    ] {
        lbs.push(hccm_service(&fx, name, ports, &nodes).await);
    }
    let before = versions(&fx).await;
    let mark = fx.sim.request_log().last().map_or(0, |e| e.seq);

    fx.start_shadow().await;
    let admin = fx.ctl.as_ref().unwrap().admin;
    eventually("every Service reconciled", T, || async {
        (reconciled(&fx.metrics().await) >= 3.0).then_some(())
    })
    .await;
    assert_eq!(
        plan(admin).await,
        Vec::<serde_json::Value>::new(),
        "nothing to do"
    );
    assert_eq!(cloud_writes(&fx, mark), Vec::<String>::new());
    assert_eq!(versions(&fx).await, before, "no Service written");

    // One annotation changed: exactly its update is planned, and still nothing is written.
    fx.patch(
        "api",
        json!({"metadata": {"annotations": {format!("{PREFIX}algorithm-type"): "least_connections"}}}),
    )
    .await;
    let after_patch = versions(&fx).await;
    let planned = eventually("the update planned", T, || async {
        let p = plan(admin).await;
        (!p.is_empty()).then_some(p)
    })
    .await;
    assert_eq!(planned.len(), 1, "{planned:#?}");
    let entry = &planned[0];
    let api_lb = lbs[1];
    assert_eq!(entry["api"], "cloud");
    assert_eq!(
        entry["operation"],
        "POST /load_balancers/{id}/actions/change_algorithm"
    );
    assert_eq!(
        entry["object"],
        format!("/load_balancers/{api_lb}/actions/change_algorithm")
    );
    assert!(
        entry["reason"]
            .as_str()
            .unwrap()
            .contains(&format!("{}/api", fx.ns)),
        "{entry}"
    );
    assert!(
        entry["body"]
            .as_str()
            .unwrap()
            .contains("least_connections")
    );
    assert!(entry["first_seen"].is_string());
    assert_eq!(cloud_writes(&fx, mark), Vec::<String>::new());
    assert_eq!(versions(&fx).await, after_patch, "no Service written");
    let metrics = fx.metrics().await;
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("cloud_controllers_planned_writes_total{")
                && l.contains("change_algorithm")
                && l.ends_with(" 1")),
        "{metrics}"
    );
}
