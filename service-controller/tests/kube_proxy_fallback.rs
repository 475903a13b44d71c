//! `health-check-kube-proxy` where kube-proxy's health server cannot be reached, against cloud-sim's
//! data plane: k3s nodes (it listens on 127.0.0.1 only), Cilium answering 503 everywhere while it
//! cannot reach the apiserver, and `externalTrafficPolicy: Local`, where 503 on every node is a
//! true answer. Each Node's `InternalIP` is its stand-in's address, where the controller's probe
//! (like the load balancer) reaches it.

mod support;

use std::time::Duration;

use cloud_sim::stand_in::{self, KubeProxyFlavour, NodeStandIn};
use k8s_openapi::api::core::v1::Service;
use serde_json::Value;
use service_controller::reasons;
use support::traffic::*;
use support::*;
use test_support::e2e::eventually;

/// The longest a switch can wait: the probe period, a fresh verdict, the ensure.
const SWITCH: Duration = Duration::from_secs(90);

/// `(protocol, port, path)` of the health check of the load balancer's service on port 80.
fn check(lb: &Value) -> (String, u64, Option<String>) {
    let hc = &lb["services"][0]["health_check"];
    (
        hc["protocol"].as_str().unwrap_or_default().to_owned(),
        hc["port"].as_u64().unwrap_or_default(),
        hc["http"]["path"].as_str().map(str::to_owned),
    )
}

async fn wait_check(fx: &Fixture, svc: &Service, want: (&str, u64, Option<&str>)) -> Value {
    let want = (want.0.to_owned(), want.1, want.2.map(str::to_owned));
    eventually(&format!("the health check {want:?}"), SWITCH, || async {
        let lb = fx.lbs_of(svc).await.into_iter().next()?;
        (check(&lb) == want).then_some(lb)
    })
    .await
}

/// `(status, reason, message)` of the Service's LoadBalancerReady condition.
async fn condition(fx: &Fixture, name: &str) -> Option<(String, String, String)> {
    let svc = fx.get(name).await?;
    svc.status?
        .conditions?
        .into_iter()
        .find(|c| c.type_ == service_controller::condition::TYPE)
        .map(|c| (c.status, c.reason, c.message))
}

async fn wait_reason(fx: &Fixture, name: &str, reason: &str) -> String {
    eventually(&format!("condition reason {reason}"), SWITCH, || async {
        let (status, r, message) = condition(fx, name).await?;
        (status == "True" && r == reason).then_some(message)
    })
    .await
}

/// `n` Nodes whose `InternalIP` is their stand-in's address, each stand-in's kube-proxy set up as
/// `flavour`.
async fn nodes(fx: &Fixture, n: usize, flavour: KubeProxyFlavour) -> Vec<NodeStandIn> {
    let mut out = Vec::new();
    for _ in 0..n {
        let (_, mut s) = reachable_node(fx).await;
        s.serve_kube_proxy(flavour).await.expect("bind");
        out.push(s);
    }
    out
}

/// Requests through the load balancer's port 80: how many of `n` failed.
async fn failed_requests(fx: &Fixture, lb: &Value, n: usize) -> usize {
    let addr = listener(fx, lb, 80).await;
    let batch = (0..n).map(|_| stand_in::get(addr, REQUEST_TIMEOUT));
    futures::future::join_all(batch)
        .await
        .into_iter()
        .filter(|r| !matches!(r, Ok((200, _))))
        .count()
}

const ON: [(&str, &str); 1] = [("health-check-kube-proxy", "true")];

#[tokio::test]
async fn on_k3s_nodes_the_load_balancer_checks_the_node_port_until_kube_proxy_answers() {
    let fx = fixture(Duration::from_secs(600)).await;
    let mut stand_ins = nodes(&fx, 3, KubeProxyFlavour::K3s).await;
    let svc = fx.service("k3s-on", &[80], &ON).await;
    let np = node_port(&svc, 80);
    for s in &mut stand_ins {
        s.serve_node_port(np).await.expect("bind");
    }

    // Never kube-proxy's check: every target would be out at once.
    let lb = wait_check(&fx, &svc, ("tcp", u64::from(np), None)).await;
    let lb_healthy = wait_health(&fx, &svc, (3, 0, 0)).await;
    assert_eq!(lb["id"], lb_healthy["id"]);
    let failed = failed_requests(&fx, &lb_healthy, 100).await;
    eprintln!(
        "k3s nodes: health check {:?}, {failed} of 100 requests failed",
        check(&lb)
    );
    assert_eq!(failed, 0);
    let warning = fx
        .wait_event("Service", "k3s-on", reasons::KUBE_PROXY_UNREACHABLE)
        .await;
    eprintln!("Warning: {warning}");
    assert!(
        warning.contains("did not answer on any of the 3 nodes"),
        "{warning}"
    );
    assert!(
        warning.contains("healthz-bind-address=0.0.0.0:10256"),
        "{warning}"
    );
    assert!(
        warning.contains("kubeProxyReplacementHealthzBindAddr"),
        "{warning}"
    );
    let message = wait_reason(&fx, "k3s-on", reasons::KUBE_PROXY_UNREACHABLE).await;
    assert!(message.contains("answered on no node"), "{message}");
    let metrics = fx.metrics().await;
    assert!(
        metrics.contains("cloud_controllers_service_controller_kube_proxy_fallbacks 1"),
        "{metrics}"
    );

    // The user sets healthz-bind-address: kube-proxy answers at the node's address.
    for s in &mut stand_ins {
        s.serve_kube_proxy(KubeProxyFlavour::KubeProxy)
            .await
            .expect("bind");
    }
    wait_check(&fx, &svc, ("http", 10256, Some("/healthz"))).await;
    fx.wait_event("Service", "k3s-on", reasons::KUBE_PROXY_RESTORED)
        .await;
    wait_reason(&fx, "k3s-on", reasons::ENSURED).await;
    let lb = wait_health(&fx, &svc, (3, 0, 0)).await;
    assert_eq!(failed_requests(&fx, &lb, 100).await, 0);
}

#[tokio::test]
async fn cilium_answering_503_everywhere_falls_back_within_the_probe_period() {
    let fx = fixture(Duration::from_secs(600)).await;
    // Cilium with its health server on, the apiserver reachable: as kube-proxy.
    let mut stand_ins = nodes(&fx, 3, KubeProxyFlavour::KubeProxy).await;
    let svc = fx.service("cilium", &[80], &ON).await;
    let np = node_port(&svc, 80);
    for s in &mut stand_ins {
        s.serve_node_port(np).await.expect("bind");
    }
    // kube-proxy answers: its check, as today.
    wait_check(&fx, &svc, ("http", 10256, Some("/healthz"))).await;
    let lb = wait_health(&fx, &svc, (3, 0, 0)).await;
    assert_eq!(failed_requests(&fx, &lb, 50).await, 0);
    assert!(
        fx.events_of("Service", "cilium")
            .await
            .iter()
            .all(|e| e.reason.as_deref() != Some(reasons::KUBE_PROXY_UNREACHABLE))
    );

    // The agents lose the apiserver: 503 on every node at once.
    for s in &stand_ins {
        s.set_healthy(false);
    }
    wait_health(&fx, &svc, (0, 3, 0)).await;
    let lb = wait_check(&fx, &svc, ("tcp", u64::from(np), None)).await;
    let warning = fx
        .wait_event("Service", "cilium", reasons::KUBE_PROXY_UNREACHABLE)
        .await;
    assert!(warning.contains("answered 503 on all 3 nodes"), "{warning}");
    wait_health(&fx, &svc, (3, 0, 0)).await;
    let failed = failed_requests(&fx, &lb, 100).await;
    eprintln!("after the fallback: {failed} of 100 requests failed");
    assert_eq!(failed, 0);
}

#[tokio::test]
async fn with_traffic_policy_local_503_everywhere_is_a_true_answer() {
    let fx = fixture(Duration::from_secs(1)).await;
    let mut stand_ins = nodes(&fx, 3, KubeProxyFlavour::KubeProxy).await;
    let svc = fx
        .service_with("local", &[80], &ON, |s| {
            s.external_traffic_policy = Some("Local".into());
        })
        .await;
    let (np, hc) = (node_port(&svc, 80), health_check_node_port(&svc));
    // No endpoint on any node: kube-proxy answers 503 on the healthCheckNodePort everywhere.
    for s in &mut stand_ins {
        s.serve_node_port(np).await.expect("bind");
        s.serve_healthz(hc).await.expect("bind");
        s.set_healthy(false);
    }
    let lb = wait_health(&fx, &svc, (0, 3, 0)).await;
    assert_eq!(
        check(&lb),
        ("http".into(), u64::from(hc), Some("/healthz".into()))
    );
    let (status, reason, _) = eventually("the condition", T, || async {
        condition(&fx, "local")
            .await
            .filter(|c| c.1 == reasons::NO_HEALTHY_TARGETS)
    })
    .await;
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "NoHealthyTargets")
    );
    // The controller's look came before the stand-ins listened: its second round found them
    // answering 503, which is an answer.
    assert!(
        fx.events_of("Service", "local")
            .await
            .iter()
            .all(|e| e.reason.as_deref() != Some(reasons::KUBE_PROXY_UNREACHABLE))
    );
    assert_eq!(check(&fx.lb_of(&svc).await).1, u64::from(hc));
}
