//! Load balancers and Services that are not yours, end to end against a real kube-apiserver and
//! cloud-sim, the controller under its chart RBAC watching every namespace:
//!
//! a Service in another namespace that names team `prod`'s shared load balancer is refused before
//! any write, and learns nothing of prod's Services or ports; it joins once the administrator
//! groups the two namespaces. (A load balancer made outside Kubernetes: `shared.rs`.)
//!
//! One test in this binary: its controller watches every namespace of the binary's own control
//! plane, which no other test shares.

mod support;

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{Namespace, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::Api;
use kube::api::PostParams;
use support::*;
use test_support::e2e::{eventually, unique};

async fn namespace(fx: &Fixture, prefix: &str) -> String {
    let name = unique(prefix);
    let mut ns = Namespace::default();
    ns.metadata.name = Some(name.clone());
    Api::<Namespace>::all(fx.admin.clone())
        .create(&PostParams::default(), &ns)
        .await
        .expect("create namespace");
    name
}

async fn get_in(fx: &Fixture, namespace: &str, name: &str) -> Option<Service> {
    Api::<Service>::namespaced(fx.admin.clone(), namespace)
        .get_opt(name)
        .await
        .expect("get service")
}

async fn wait_condition_in(fx: &Fixture, namespace: &str, name: &str, reason: &str) -> Condition {
    eventually(&format!("{namespace}/{name}: {reason}"), T, || async {
        let svc = get_in(fx, namespace, name).await?;
        let c = service_controller::condition::current(&svc)?.clone();
        (c.reason == reason).then_some(c)
    })
    .await
}

fn shared(lb: &str) -> [(&'static str, &str); 2] {
    [("name", lb), ("shared", "true")]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_namespace_never_joins_a_shared_load_balancer_unless_the_administrator_allows() {
    let mut fx = Fixture::start_with(Options {
        all_namespaces: true,
        ..Options::default()
    })
    .await;
    fx.nodes(2).await;

    // Team prod's Service on its shared load balancer.
    let prod_lb = unique("prod-lb");
    fx.service("front", &[443], &shared(&prod_lb)).await;
    fx.wait_ingress("front").await;
    let prod = fx.sim.client().list_load_balancers().await.unwrap();
    let prod = prod
        .iter()
        .find(|lb| lb["name"] == prod_lb.as_str())
        .unwrap();
    let prod_id = prod["id"].as_u64().unwrap();

    // Another namespace names it: refused before any write, told nothing of prod.
    let intruder = namespace(&fx, "intruder").await;
    let mark = fx.mark();
    fx.service_in(&intruder, "evil", &[8443], &shared(&prod_lb), |_| {})
        .await;
    let refused = wait_condition_in(&fx, &intruder, "evil", "LoadBalancerConflict").await;
    let note = fx
        .wait_event("Service", "evil", "SyncLoadBalancerFailed")
        .await;
    for text in [&refused.message, &note] {
        eprintln!("evil: {text}");
        assert!(
            text.contains(&format!(
                "is used by a Service outside namespace {intruder}"
            )),
            "{text}"
        );
        // The name the intruder gave is its own to see (a random suffix may hold "443").
        let told = text.replace(prod_lb.as_str(), "<its name>");
        for secret in [fx.ns.as_str(), "front", "443"] {
            assert!(
                !told.contains(secret),
                "{secret:?} leaked to {intruder}: {text}"
            );
        }
    }
    assert_eq!(fx.writes_since(&mark), [], "a refusal writes nothing");
    let lb = fx.sim.client().get_load_balancer(prod_id).await.unwrap();
    assert_eq!(listen_ports(&lb), BTreeSet::from([443]));
    let evil = get_in(&fx, &intruder, "evil").await.unwrap();
    assert!(
        ingress_ips(&evil).is_empty(),
        "no ingress: {:?}",
        evil.status
    );

    // The administrator lets prod and the intruder's namespace share: evil joins.
    fx.stop().await;
    let groups = format!("{},{intruder}", fx.ns);
    fx.start_controller(Box::new(move |c| {
        c.load_balancers.defaults.tenancy.share_across_namespaces =
            cloud_client::hcloud::config::ShareAcrossNamespaces::parse(&groups).unwrap();
    }))
    .await;
    eventually(
        "evil joins prod-lb once the namespaces may share",
        T,
        || async {
            let s = get_in(&fx, &intruder, "evil").await?;
            (!ingress_ips(&s).is_empty()).then_some(())
        },
    )
    .await;
    let lb = fx.sim.client().get_load_balancer(prod_id).await.unwrap();
    assert_eq!(listen_ports(&lb), BTreeSet::from([443, 8443]));
}
