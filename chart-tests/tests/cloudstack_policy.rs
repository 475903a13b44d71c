//! The chart's CloudStack admission policy (templates/validating-admission-policy-cloudstack.yaml),
//! rendered with `cloud: cloudstack` and installed on a real kube-apiserver, held to the
//! controller: each Service below is read as the service-controller reads it (`service_ref`) and
//! parsed by the CloudStack parser (`LbSpec::parse`). The policy refuses exactly what the parser
//! refuses, with the parser's message, and admits what it accepts. On UPDATE only what the request
//! changes is checked, so a Service created before the policy keeps taking unrelated edits.

use std::time::{Duration, Instant};

use chart_tests::{Render, apply};
use cloud_client::cloudstack::load_balancer::spec::{LbSpec, PROXY_PROTOCOL, SOURCE_CIDRS};
use k8s_openapi::api::core::v1::Service;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

/// How long the apiserver may take to compile a new policy.
const ACTIVE_WITHIN: Duration = Duration::from_secs(30);
const RANGES_ANNOTATION: &str = "service.beta.kubernetes.io/load-balancer-source-ranges";

fn cloudstack() -> Render {
    Render::default().set("cloud", "cloudstack")
}

/// A LoadBalancer Service `name` with a TCP port 80 and a UDP port 53, changed by `shape`.
fn service(name: &str, shape: impl FnOnce(&mut Value)) -> Service {
    let mut s = json!({
        "metadata": {"name": name, "annotations": {}},
        "spec": {
            "type": "LoadBalancer",
            "selector": {"app": name},
            "ports": [
                {"name": "http", "port": 80, "protocol": "TCP"},
                {"name": "dns", "port": 53, "protocol": "UDP"},
            ],
        },
    });
    shape(&mut s);
    serde_json::from_value(s).expect("a Service")
}

fn annotated(name: &str, key: &str, value: &str) -> Service {
    service(name, |s| s["metadata"]["annotations"][key] = json!(value))
}

/// What the controller says of `svc` as the apiserver stores it: `Err(its message)` when its
/// parser refuses it. The apiserver gives each port a nodePort unless
/// `allocateLoadBalancerNodePorts` is false.
fn controller(svc: &Service) -> Result<(), String> {
    let mut stored = svc.clone();
    let spec = stored.spec.as_mut().expect("spec");
    if spec.allocate_load_balancer_node_ports != Some(false) {
        for (i, p) in spec.ports.iter_mut().flatten().enumerate() {
            p.node_port = Some(30000 + i as i32);
        }
    }
    let read = service_controller::service::service_ref(&stored);
    LbSpec::parse(&read).map(|_| ()).map_err(|e| e.to_string())
}

/// `Ok` when admitted, `Err(message)` when the policy refused; any other failure panics.
fn refusal(r: Result<(), kube::Error>, what: &str) -> Result<(), String> {
    match r {
        Ok(()) => Ok(()),
        Err(kube::Error::Api(e))
            if e.code == 422 && e.message.contains("ValidatingAdmissionPolicy") =>
        {
            Err(e.message)
        }
        Err(e) => panic!("{what}: {e}"),
    }
}

async fn create(api: &Api<Service>, svc: &Service, dry_run: bool) -> Result<(), String> {
    let pp = PostParams {
        dry_run,
        ..Default::default()
    };
    let what = svc.metadata.name.clone().unwrap_or_default();
    refusal(api.create(&pp, svc).await.map(|_| ()), &what)
}

async fn patch(api: &Api<Service>, name: &str, body: Value) -> Result<(), String> {
    let r = api
        .patch(name, &PatchParams::default(), &Patch::Merge(&body))
        .await;
    refusal(r.map(|_| ()), name)
}

#[test]
fn rendered_only_for_cloudstack_and_with_validation() {
    let policy = |r: &Render| chart_tests::admission_policy(r, "cloudstack");
    let objects = policy(&cloudstack());
    assert_eq!(objects.len(), 2, "a policy and its binding: {objects:?}");
    assert_eq!(objects[1]["spec"]["validationActions"], json!(["Deny"]));
    assert!(policy(&Render::default()).is_empty(), "Hetzner has its own");
    let off = cloudstack().set("serviceController.validation.enabled", false);
    assert!(policy(&off).is_empty());
    // Hetzner's policies are not rendered for CloudStack.
    for suffix in ["annotations", "source-ranges"] {
        assert!(chart_tests::admission_policy(&cloudstack(), suffix).is_empty());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_policy_refuses_what_the_cloudstack_parser_refuses_with_its_message() {
    let k = testenv::kube().await;
    let client = k.client().await;
    let discovery = chart_tests::discovery(&client).await;
    let api: Api<Service> = Api::namespaced(client.clone(), "default");

    // Before the policy: a Service it would refuse, as a cluster has one when the chart is
    // upgraded to a version with the policy.
    let legacy = annotated("legacy", SOURCE_CIDRS, "10.0.0.0/8,nope");
    create(&api, &legacy, false)
        .await
        .expect("no policy yet: admitted");

    let objects = chart_tests::admission_policy(&cloudstack(), "cloudstack");
    for o in &objects {
        apply(&client, &discovery, o, false)
            .await
            .unwrap_or_else(|e| panic!("applying the policy: {e}"));
    }
    let probe = service("probe", |s| {
        s["spec"]["ports"][1]["protocol"] = json!("SCTP")
    });
    let start = Instant::now();
    while create(&api, &probe, true).await.is_ok() {
        assert!(start.elapsed() < ACTIVE_WITHIN, "the policy never refused");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let cases = [
        // Refused by the parser.
        probe.clone(),
        service("no-nodeports", |s| {
            s["spec"]["allocateLoadBalancerNodePorts"] = json!(false)
        }),
        annotated("cidr-word", SOURCE_CIDRS, "10.0.0.0/8, nope"),
        annotated("cidr-prefix", SOURCE_CIDRS, "10.0.0.0/33"),
        annotated("cidr-zeros", SOURCE_CIDRS, "010.0.0.0/8"),
        annotated("cidr-v6", SOURCE_CIDRS, "2001:db8::/32"),
        service("ranges-v6", |s| {
            s["spec"]["loadBalancerSourceRanges"] = json!(["10.0.0.0/8", "2001:db8::/32"])
        }),
        annotated("ranges-annotation-v6", RANGES_ANNOTATION, "::/0"),
        service("ip-v6", |s| {
            s["spec"]["loadBalancerIP"] = json!("2001:db8::1")
        }),
        service("first-problem-first", |s| {
            s["metadata"]["annotations"][SOURCE_CIDRS] = json!("nope");
            s["spec"]["loadBalancerIP"] = json!("2001:db8::1");
        }),
        // Accepted by the parser.
        service("plain", |_| {}),
        annotated("proxy", PROXY_PROTOCOL, "true"),
        annotated("proxy-anything-else-is-off", PROXY_PROTOCOL, "yes"),
        annotated("cidrs", SOURCE_CIDRS, " 192.168.0.0/16, 10.0.0.0/8,"),
        annotated("cidr-u8-prefix", SOURCE_CIDRS, "10.0.0.0/+08"),
        annotated("cidrs-empty", SOURCE_CIDRS, ""),
        service("ranges", |s| {
            s["spec"]["loadBalancerSourceRanges"] = json!(["198.51.100.0/24"])
        }),
        annotated(
            "ranges-annotation",
            RANGES_ANNOTATION,
            "198.51.100.0/24, 0.0.0.0/0",
        ),
        service("ip", |s| s["spec"]["loadBalancerIP"] = json!("203.0.113.7")),
        service("another-class-is-not-ours", |s| {
            s["spec"]["loadBalancerClass"] = json!("example.com/other");
            s["spec"]["ports"][1]["protocol"] = json!("SCTP");
        }),
    ];
    let mut refused = 0;
    for svc in &cases {
        let name = svc.metadata.name.clone().unwrap_or_default();
        let admitted = create(&api, svc, true).await;
        let ours = svc
            .spec
            .as_ref()
            .is_some_and(|s| s.load_balancer_class.is_none());
        match (admitted, controller(svc)) {
            (Ok(()), Ok(())) => {}
            (Ok(()), Err(_)) if !ours => {}
            (Err(policy), Err(parser)) => {
                refused += 1;
                assert!(
                    policy.contains(&parser),
                    "{name}: the policy says\n  {policy}\nthe controller says\n  {parser}"
                );
            }
            (admitted, parsed) => {
                panic!("{name}: the policy says {admitted:?}, the controller {parsed:?}")
            }
        }
    }
    assert_eq!(refused, 10, "every refused case was refused");

    // UPDATE: an edit that leaves what the policy reads alone passes on the older Service; one
    // that sets a bad value again does not.
    let label = json!({"metadata": {"labels": {"team": "web"}}});
    assert_eq!(patch(&api, "legacy", label).await, Ok(()));
    let again = json!({"metadata": {"annotations": {SOURCE_CIDRS: "10.0.0.0/8,still-nope"}}});
    let e = patch(&api, "legacy", again).await.unwrap_err();
    assert!(e.contains("\"still-nope\""), "{e}");
}
