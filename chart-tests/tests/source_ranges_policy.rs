//! The chart's source-range admission policy (templates/validating-admission-policy-source-ranges.yaml)
//! on a real kube-apiserver: a LoadBalancer Service whose `spec.loadBalancerSourceRanges` (or
//! upstream's annotation) restricts anything is admitted with the controller's Warning as an
//! admission warning (what `kubectl apply` prints) by default, and denied with
//! `serviceController.sourceRanges=refuse`, which also gives the service-controller
//! `--refuse-unenforced-source-ranges`. A range open to everyone, or a Service of another class,
//! passes without a word.

use std::time::{Duration, Instant};

use chart_tests::{Render, apply, find};
use serde_json::{Value, json};

const POLICY: &str = "cloud-controllers-service-controller-source-ranges";
/// How long the apiserver may take to compile a new policy or binding.
const ACTIVE_WITHIN: Duration = Duration::from_secs(30);

fn policy_objects(render: &Render) -> Vec<Value> {
    let objects = chart_tests::admission_policy(render, "source-ranges");
    assert!(objects.iter().all(|o| chart_tests::name(o) == POLICY));
    objects
}

fn service_args(render: &Render) -> Vec<String> {
    let objects = render.objects();
    let d = find(
        &objects,
        "Deployment",
        "cloud-controllers-service-controller",
    );
    d["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|a| a.as_str().map(str::to_owned))
        .collect()
}

#[test]
fn warn_by_default_deny_and_the_flag_with_refuse() {
    let default = Render::default();
    let objects = policy_objects(&default);
    assert_eq!(objects.len(), 2, "a policy and its binding: {objects:?}");
    assert_eq!(objects[1]["spec"]["validationActions"], json!(["Warn"]));
    assert!(
        !service_args(&default)
            .iter()
            .any(|a| a.contains("refuse-unenforced-source-ranges"))
    );
    let refuse = Render::default().set("serviceController.sourceRanges", "refuse");
    assert_eq!(
        policy_objects(&refuse)[1]["spec"]["validationActions"],
        json!(["Deny"])
    );
    assert!(
        service_args(&refuse)
            .iter()
            .any(|a| a == "--refuse-unenforced-source-ranges=true"),
        "{:?}",
        service_args(&refuse)
    );
    assert!(
        policy_objects(&Render::default().set("serviceController.validation.enabled", false))
            .is_empty()
    );
    let bad = Render::default()
        .set("serviceController.sourceRanges", "maybe")
        .error();
    assert!(bad.contains("sourceRanges"), "{bad}");
}

/// Creates `svc` with dryRun=All: the status and the apiserver's `Warning` headers.
async fn create(client: &kube::Client, svc: &Value) -> (u16, Vec<String>) {
    let req = http::Request::post("/api/v1/namespaces/default/services?dryRun=All")
        .header("content-type", "application/json")
        .body(kube::client::Body::from(serde_json::to_vec(svc).unwrap()))
        .unwrap();
    let resp = client.send(req).await.expect("the apiserver answers");
    let warnings = resp
        .headers()
        .get_all("warning")
        .iter()
        .filter_map(|w| w.to_str().ok().map(str::to_owned))
        .collect();
    (resp.status().as_u16(), warnings)
}

fn service(
    name: &str,
    ranges: Option<&[&str]>,
    annotation: Option<&str>,
    class: Option<&str>,
) -> Value {
    let mut s = json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name},
        "spec": {"type": "LoadBalancer", "ports": [{"port": 443, "protocol": "TCP"}]},
    });
    if let Some(r) = ranges {
        s["spec"]["loadBalancerSourceRanges"] = json!(r);
    }
    if let Some(a) = annotation {
        s["metadata"]["annotations"] =
            json!({"service.beta.kubernetes.io/load-balancer-source-ranges": a});
    }
    if let Some(c) = class {
        s["spec"]["loadBalancerClass"] = json!(c);
    }
    s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_apply_warns_or_is_denied() {
    let k = testenv::kube().await;
    let client = k.client().await;
    let discovery = chart_tests::discovery(&client).await;
    let office = service("office-only", Some(&["203.0.113.0/24"]), None, None);

    for o in policy_objects(&Render::default()) {
        apply(&client, &discovery, &o, false)
            .await
            .unwrap_or_else(|e| panic!("applying the policy: {e}"));
    }
    let started = Instant::now();
    let warnings = loop {
        let (status, warnings) = create(&client, &office).await;
        assert_eq!(status, 201, "warned, not denied");
        if !warnings.is_empty() {
            break warnings;
        }
        assert!(
            started.elapsed() < ACTIVE_WITHIN,
            "no warning within {ACTIVE_WITHIN:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    eprintln!("warning: {warnings:?}");
    assert!(
        warnings.iter().any(|w| w.contains(
            "spec.loadBalancerSourceRanges (203.0.113.0/24) is not enforced: Hetzner load balancers cannot filter by source address"
        ) && w.contains("serviceController.sourceRanges: refuse")),
        "{warnings:?}"
    );
    let (_, by_annotation) = create(
        &client,
        &service("legacy", None, Some("10.0.0.0/8, 192.0.2.0/24"), None),
    )
    .await;
    assert!(
        by_annotation.iter().any(|w| w.contains(
            "service.beta.kubernetes.io/load-balancer-source-ranges (10.0.0.0/8, 192.0.2.0/24) is not enforced"
        )),
        "{by_annotation:?}"
    );
    for quiet in [
        service("everyone", Some(&["0.0.0.0/0"]), None, None),
        service("plain", None, None, None),
        service(
            "other-class",
            Some(&["203.0.113.0/24"]),
            None,
            Some("example.com/other"),
        ),
    ] {
        let (status, warnings) = create(&client, &quiet).await;
        assert_eq!((status, warnings.len()), (201, 0), "{quiet}: {warnings:?}");
    }

    // refuse: the binding denies.
    for o in policy_objects(&Render::default().set("serviceController.sourceRanges", "refuse")) {
        apply(&client, &discovery, &o, false)
            .await
            .unwrap_or_else(|e| panic!("applying the policy: {e}"));
    }
    let started = Instant::now();
    loop {
        let (status, _) = create(&client, &office).await;
        if status == 422 {
            break;
        }
        assert!(
            started.elapsed() < ACTIVE_WITHIN,
            "not denied within {ACTIVE_WITHIN:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (status, _) = create(&client, &service("everyone-2", Some(&["::/0"]), None, None)).await;
    assert_eq!(status, 201);
}
