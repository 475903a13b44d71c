//! `spec.loadBalancerSourceRanges` on Hetzner load balancers, which cannot filter by source:
//! served with a `LoadBalancerSourceRangesIgnored` Warning and a `LoadBalancerReady` message that
//! says the ranges are not enforced; with `--refuse-unenforced-source-ranges`, refused before any
//! write. Ranges that let everyone in (`0.0.0.0/0`) say nothing.

mod support;

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use service_controller::Settings;
use service_controller::source_ranges::{ANNOTATION, IGNORED};
use support::{Fixture, Options};
use test_support::e2e::{T, eventually};

async fn wait_condition(fx: &Fixture, name: &str, status: &str, reason: &str) -> Condition {
    eventually(&format!("{name}: {status}/{reason}"), T, || async {
        let svc: Service = fx.get(name).await?;
        let c = service_controller::condition::current(&svc)?.clone();
        (c.status == status && c.reason == reason).then_some(c)
    })
    .await
}

fn ranges(r: &[&str]) -> impl FnOnce(&mut k8s_openapi::api::core::v1::ServiceSpec) {
    let r: Vec<String> = r.iter().map(|s| s.to_string()).collect();
    move |spec| spec.load_balancer_source_ranges = Some(r)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn source_ranges_are_served_with_a_warning_that_says_they_are_not_enforced() {
    let fx = Fixture::start().await;
    fx.nodes(1).await;
    fx.service_with("office-only", &[443], &[], ranges(&["203.0.113.0/24"]))
        .await;
    fx.wait_ingress("office-only").await;
    let note = fx.wait_event("Service", "office-only", IGNORED).await;
    assert!(
        note.contains("spec.loadBalancerSourceRanges (203.0.113.0/24) is not enforced")
            && note.contains("cannot filter by source address")
            && note.contains("uses-proxyprotocol"),
        "{note}"
    );
    let c = wait_condition(&fx, "office-only", "True", "EnsuredLoadBalancer").await;
    assert!(
        c.message.contains("203.0.113.0/24) is not enforced"),
        "{}",
        c.message
    );
    assert!(
        fx.metrics()
            .await
            .contains(&format!("reason=\"{IGNORED}\"")),
        "counted"
    );

    // Upstream's annotation says the same; a range open to everyone says nothing.
    let mut ann = std::collections::BTreeMap::new();
    ann.insert(ANNOTATION.to_string(), "10.0.0.0/8".to_string());
    fx.service_with("by-annotation", &[80], &[], |_| {}).await;
    fx.services()
        .patch(
            "by-annotation",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(serde_json::json!({"metadata": {"annotations": ann}})),
        )
        .await
        .unwrap();
    let note = fx.wait_event("Service", "by-annotation", IGNORED).await;
    assert!(
        note.starts_with(&format!("{ANNOTATION} (10.0.0.0/8) is not enforced")),
        "{note}"
    );
    fx.service_with("everyone", &[8080], &[], ranges(&["0.0.0.0/0"]))
        .await;
    let c = wait_condition(&fx, "everyone", "True", "EnsuredLoadBalancer").await;
    assert!(!c.message.contains("not enforced"), "{}", c.message);
    assert!(!fx.has_event("Service", "everyone", IGNORED).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_switch_on_such_a_service_is_refused_before_any_write() {
    let fx = Fixture::start_with(Options {
        settings: Settings {
            refuse_unenforced_source_ranges: true,
            ..Settings::default()
        },
        ..Options::default()
    })
    .await;
    fx.nodes(1).await;
    let mark = fx.mark();
    fx.service_with("office-only", &[443], &[], ranges(&["203.0.113.0/24"]))
        .await;
    let c = wait_condition(&fx, "office-only", "False", "InvalidLoadBalancerInput").await;
    assert!(
        c.message.contains(
            "invalid value \"203.0.113.0/24\" for spec.loadBalancerSourceRanges: expected no \
             source ranges"
        ),
        "{}",
        c.message
    );
    assert_eq!(fx.writes_since(&mark), [], "refused before any write");
    assert!(fx.sim.inventory().load_balancers.is_empty());

    // Without the ranges it is served.
    fx.services()
        .patch(
            "office-only",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(
                serde_json::json!({"spec": {"loadBalancerSourceRanges": null}}),
            ),
        )
        .await
        .unwrap();
    fx.wait_ingress("office-only").await;
}
