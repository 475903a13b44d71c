//! The Service condition `cloud-controllers.github.io/LoadBalancerReady`: why a Service waits,
//! readable from the Service itself, written only when it changes.

mod support;

use std::time::Duration;

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use service_controller::Settings;
use support::{Fixture, Options, PREFIX};
use test_support::e2e::{T, eventually};

fn condition(svc: &Service) -> Option<Condition> {
    service_controller::condition::current(svc).cloned()
}

/// Waits until the Service's condition has `status` and `reason`; returns the Service.
async fn wait_condition(fx: &Fixture, name: &str, status: &str, reason: &str) -> Service {
    eventually(&format!("{name}: {status}/{reason}"), T, || async {
        let svc = fx.get(name).await?;
        let c = condition(&svc)?;
        (c.status == status && c.reason == reason).then_some(svc)
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_outage_and_recovery_show_in_the_condition() {
    let fx = Fixture::start_with(Options {
        cloud: Some(Box::new(|c| c.client.retry.max_attempts = 1)),
        ..Options::default()
    })
    .await;
    fx.nodes(1).await;

    // A bad annotation: False, the reason, and a message naming the annotation and its value.
    fx.service("web", &[80], &[("uses-proxyprotocol", "yes")])
        .await;
    let svc = wait_condition(&fx, "web", "False", "InvalidLoadBalancerInput").await;
    let c = condition(&svc).unwrap();
    assert!(
        c.message.contains("uses-proxyprotocol") && c.message.contains("\"yes\""),
        "{}",
        c.message
    );
    assert_eq!(c.observed_generation, svc.metadata.generation);
    assert!(
        fx.sim.inventory().load_balancers.is_empty(),
        "nothing created"
    );

    // Fixed: True once the load balancer serves it.
    fx.patch(
        "web",
        serde_json::json!({"metadata": {"annotations": {format!("{PREFIX}uses-proxyprotocol"): "true"}}}),
    )
    .await;
    let svc = wait_condition(&fx, "web", "True", "EnsuredLoadBalancer").await;
    let ready = condition(&svc).unwrap();
    assert_eq!(ready.observed_generation, svc.metadata.generation);
    assert!(!support::ingress_ips(&svc).is_empty());

    // A cloud outage during a change: False with the cloud's error, then True again.
    let outage = fx.sim.faults().error_rate(None, 1.0, 503, "unavailable");
    fx.patch(
        "web",
        serde_json::json!({"metadata": {"annotations": {format!("{PREFIX}algorithm-type"): "least_connections"}}}),
    )
    .await;
    let svc = wait_condition(&fx, "web", "False", "SyncLoadBalancerFailed").await;
    let failed = condition(&svc).unwrap();
    assert!(failed.message.contains("503"), "{}", failed.message);
    assert!(
        !support::ingress_ips(&svc).is_empty(),
        "the ingress stays through the outage"
    );
    fx.sim.faults().remove(outage);
    let svc = wait_condition(&fx, "web", "True", "EnsuredLoadBalancer").await;
    let back = condition(&svc).unwrap();
    assert!(
        back.last_transition_time.0 > failed.last_transition_time.0,
        "the transition is dated"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unchanged_resync_patches_nothing_and_a_condition_costs_no_cloud_call() {
    let fx = Fixture::start_with(Options {
        settings: Settings {
            drift_period: Duration::from_millis(500),
            ..Settings::default()
        },
        ..Options::default()
    })
    .await;
    let nodes = fx.nodes(1).await;
    fx.service("web", &[80], &[]).await;
    wait_condition(&fx, "web", "True", "EnsuredLoadBalancer").await;
    // Created, the target is not checked yet; the first drift check reads it healthy.
    let svc = eventually("the target checked", T, || async {
        let svc = fx.get("web").await?;
        condition(&svc)?
            .message
            .ends_with("1 of 1 targets healthy")
            .then_some(svc)
    })
    .await;
    let version = svc.metadata.resource_version.clone();

    // Drift checks (each a full reconcile on a read of the load balancer, alone or in the list
    // the drift checks share) come and go...
    let mark = fx.mark();
    eventually("three drift checks", T, || async {
        let reads = fx
            .calls_since(&mark)
            .iter()
            .filter(|(m, e)| m == "GET" && (e == "/load_balancers/{id}" || e == "/load_balancers"))
            .count();
        (reads >= 3).then_some(())
    })
    .await;
    // ... and the Service is not written.
    let now = fx.get("web").await.unwrap();
    assert_eq!(now.metadata.resource_version, version, "0 status patches");
    assert!(fx.writes_since(&mark).is_empty());

    // No eligible node left: False/UnAvailableLoadBalancer.
    let exclude = serde_json::json!({"metadata": {"labels": {
        "node.kubernetes.io/exclude-from-external-load-balancers": "true"
    }}});
    kube::Api::<k8s_openapi::api::core::v1::Node>::all(fx.admin.clone())
        .patch(
            &nodes[0].name,
            &Default::default(),
            &kube::api::Patch::Merge(exclude),
        )
        .await
        .expect("label the node");
    wait_condition(&fx, "web", "False", "UnAvailableLoadBalancer").await;
}

/// More eligible nodes than the load balancer's type holds: the Service stays served, and its
/// condition says how many nodes get no traffic and what to do; a larger type clears it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_the_load_balancer_cannot_hold_show_in_the_condition() {
    let fx = Fixture::start_with(Options::default()).await;
    fx.nodes(26).await;
    fx.service("web", &[80], &[("type", "lb11")]).await;
    let svc = wait_condition(&fx, "web", "True", "TargetsLeftOut").await;
    let c = condition(&svc).unwrap();
    assert!(
        c.message.contains("1 of 26 nodes are not targets")
            && c.message.contains("lb11 holds 25 targets")
            && c.message.contains(&format!("{PREFIX}node-selector")),
        "{}",
        c.message
    );
    let lb = fx.lb_of(&svc).await;
    assert_eq!(lb["targets"].as_array().unwrap().len(), 25, "{lb}");

    fx.patch(
        "web",
        serde_json::json!({"metadata": {"annotations": {format!("{PREFIX}type"): "lb21"}}}),
    )
    .await;
    let svc = wait_condition(&fx, "web", "True", "EnsuredLoadBalancer").await;
    let lb = fx.lb_of(&svc).await;
    assert_eq!(lb["targets"].as_array().unwrap().len(), 26, "{lb}");
}
