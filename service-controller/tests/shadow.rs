//! Shadow mode (`--dry-run`) next to load balancers HCCM built: the plan stays empty while
//! nothing needs doing, one annotation changed plans exactly its one update, and nothing is ever
//! written, by the cloud's request log and by the Services' resourceVersions.

mod support;

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Service;
use kube::ResourceExt;
use serde_json::json;
use support::{Fixture, PREFIX};
use test_support::e2e::run::planned_writes;
use test_support::e2e::{T, eventually};

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
        lbs.push(fx.hccm_service(name, ports, &nodes).await.id);
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
        planned_writes(admin).await,
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
        let p = planned_writes(admin).await;
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
