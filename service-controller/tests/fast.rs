//! The service controller's decisions in milliseconds: `reconcile` against the in-memory provider,
//! with the test as the apiserver (no cloud-sim, no apiserver). Each test names the end-to-end
//! test in `service_e2e.rs` it mirrors. What they pin down: which provider calls a reconcile
//! makes, in which order, and what it writes to the Service (finalizer, status, condition, Events).

use std::sync::Arc;
use std::time::Duration;

use cloud_client::LoadBalancers;
use controller_kit::metrics::Registries;
use controller_kit::{Events, KitMetrics, Reporters};
use k8s_openapi::api::core::v1::{
    LoadBalancerIngress, LoadBalancerStatus, Node, NodeSpec, Service, ServicePort, ServiceSpec,
    ServiceStatus, Taint,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::runtime::controller::Action;
use serde_json::{Value, json};
use service_controller::condition::TYPE as CONDITION;
use service_controller::controller::{ServiceReconciler, error_policy, reconcile};
use service_controller::metrics::ServiceMetrics;
use service_controller::nodes::NodeCache;
use service_controller::patches::FINALIZER;
use service_controller::service::{ClassFilter, service_ref};
use test_support::fakes::memory_cloud::{Call, Fault, MemoryCloud, Op, Server};
use test_support::fakes::mock_kube::{ApiServerVerifier, mock_client};

const STATUS: &str = "/api/v1/namespaces/ns/services/web/status";
const STRATEGIC: &str = "application/strategic-merge-patch+json";
const MERGE: &str = "application/merge-patch+json";

struct Setup {
    memory: Arc<MemoryCloud>,
    ctx: Arc<ServiceReconciler>,
    api: ApiServerVerifier,
    nodes: Arc<NodeCache>,
}

/// A reconciler with the memory cloud's load balancers, `servers` as servers and Nodes, and a
/// drift check every `drift`.
fn setup(servers: &[&str], drift: Duration) -> Setup {
    let memory = MemoryCloud::new();
    let nodes = Arc::new(NodeCache::default());
    for name in servers {
        let id = memory.add_server(Server::new(name));
        let node = node(name, Some(&memory.provider_id(id)));
        nodes.apply(&node);
    }
    let (client, api) = mock_client();
    let mut r = Registries::default();
    let lbs = memory
        .cloud()
        .load_balancers
        .expect("the memory cloud has load balancers");
    let ctx = ServiceReconciler::new(
        client.clone(),
        lbs,
        nodes.clone(),
        ClassFilter::default(),
        drift,
        Reporters {
            events: Events::new(client, "service-controller", None),
            kit: KitMetrics::register("service-controller", &mut r.ours),
        },
        ServiceMetrics::register(&mut r.ours, &mut r.upstream),
    );
    Setup {
        memory,
        ctx: Arc::new(ctx),
        api,
        nodes,
    }
}

fn node(name: &str, provider_id: Option<&str>) -> Node {
    let mut n = Node {
        spec: Some(NodeSpec {
            provider_id: provider_id.map(str::to_string),
            ..Default::default()
        }),
        ..Default::default()
    };
    n.metadata.name = Some(name.into());
    n
}

/// `type: LoadBalancer` Service `ns/web`, port 80 → nodePort 30080, generation 1.
fn service() -> Service {
    let mut s = Service {
        spec: Some(ServiceSpec {
            type_: Some("LoadBalancer".into()),
            ports: Some(vec![port(80, 30080)]),
            ..Default::default()
        }),
        ..Default::default()
    };
    s.metadata.name = Some("web".into());
    s.metadata.namespace = Some("ns".into());
    s.metadata.uid = Some("uid-web".into());
    s.metadata.generation = Some(1);
    s
}

fn port(port: i32, node_port: i32) -> ServicePort {
    ServicePort {
        name: Some(format!("p{port}")),
        port,
        node_port: Some(node_port),
        protocol: Some("TCP".into()),
        ..Default::default()
    }
}

/// The Service as the apiserver holds it once ensured: finalizer, ingress, condition `reason`.
fn ensured(mut s: Service, ip: &str, ready: bool, reason: &str) -> Service {
    s.metadata.finalizers = Some(vec![FINALIZER.into()]);
    s.status = Some(ServiceStatus {
        load_balancer: Some(LoadBalancerStatus {
            ingress: Some(vec![LoadBalancerIngress {
                ip: Some(ip.into()),
                ip_mode: Some("VIP".into()),
                ..Default::default()
            }]),
        }),
        conditions: Some(vec![Condition {
            type_: CONDITION.into(),
            status: if ready { "True" } else { "False" }.into(),
            reason: reason.into(),
            message: if ready {
                "The load balancer serves this Service"
            } else {
                "There are no available nodes for LoadBalancer"
            }
            .into(),
            observed_generation: s.metadata.generation,
            last_transition_time: Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH),
        }]),
    });
    s
}

fn call(op: Op, subject: &str) -> Call {
    Call {
        op,
        subject: subject.into(),
    }
}

/// Answers the condition write and returns `(status, reason)` of the condition it wrote.
async fn expect_condition(api: &mut ApiServerVerifier, svc: &Service) -> (String, String) {
    let patch = api.expect("PATCH", STATUS).await;
    assert_eq!(patch.content_type, STRATEGIC);
    let c = &patch.body["status"]["conditions"][0];
    assert_eq!(c["type"], CONDITION);
    assert_eq!(c["observedGeneration"], json!(svc.metadata.generation));
    let got = (str(&c["status"]), str(&c["reason"]));
    patch.ok(svc);
    got
}

fn str(v: &Value) -> String {
    v.as_str().unwrap_or_default().to_string()
}

fn pair(a: &str, b: &str) -> (String, String) {
    (a.to_string(), b.to_string())
}

/// Mirrors `create_update_delete_under_chart_rbac`, `unchanged_reconciles_write_nothing_and_ready_flips_cost_no_call`
/// and `node_join_touches_only_load_balancers_whose_targets_change`: one Service through create,
/// an unchanged resync, a node join, a spec change and deletion.
#[tokio::test]
async fn ensure_update_and_delete_in_order() {
    let Setup {
        memory,
        ctx,
        mut api,
        nodes,
    } = setup(&["a", "b"], Duration::from_secs(600));

    // Create: finalizer first, then the load balancer, then status and condition.
    let svc = service();
    let result = api
        .run(reconcile(Arc::new(svc.clone()), ctx.clone()), async |api| {
            api.expect_event("Normal", "EnsuringLoadBalancer").await;
            let finalizer = api.expect("PATCH", STATUS).await;
            assert_eq!(finalizer.content_type, STRATEGIC);
            assert_eq!(finalizer.body, json!({"metadata": {"finalizers": [FINALIZER]}}));
            finalizer.ok(&svc);
            let ingress = api.expect("PATCH", STATUS).await;
            assert_eq!(ingress.content_type, MERGE);
            assert_eq!(
                ingress.body,
                json!({"status": {"loadBalancer": {"ingress": [{"ip": "198.51.100.1", "ipMode": "VIP"}]}}})
            );
            ingress.ok(&svc);
            api.expect_event("Normal", "EnsuredLoadBalancer").await;
            let condition = expect_condition(api, &svc).await;
            assert_eq!(condition, pair("True", "EnsuredLoadBalancer"));
        })
        .await;
    assert!(
        matches!(result, Ok(a) if a != Action::await_change()),
        "drift check scheduled"
    );
    assert_eq!(
        memory.calls(),
        [call(Op::EnsureLoadBalancer, "ns/web [a, b]")]
    );
    let lb = memory.load_balancer("uid-web").unwrap();
    assert_eq!(
        (lb.ports, lb.targets),
        (vec![(80, 30080)], vec!["a".into(), "b".into()])
    );

    // Unchanged (the apiserver's copy now has finalizer, ingress and condition): no call, no write.
    let svc = ensured(svc, "198.51.100.1", true, "EnsuredLoadBalancer");
    memory.clear_calls();
    let result = api
        .run(reconcile(Arc::new(svc.clone()), ctx.clone()), async |_| {})
        .await;
    assert!(result.is_ok());
    assert!(memory.calls().is_empty());

    // A node joins: only the targets, from the remembered load balancer.
    let id = memory.add_server(Server::new("c"));
    nodes.apply(&(node("c", Some(&memory.provider_id(id)))));
    let result = api
        .run(reconcile(Arc::new(svc.clone()), ctx.clone()), async |api| {
            api.expect_event("Normal", "UpdatedLoadBalancer").await;
        })
        .await;
    assert!(result.is_ok());
    assert_eq!(
        memory.calls(),
        [call(Op::UpdateTargets, "ns/web [a, b, c]")]
    );

    // A new port and an annotation (generation 2): a full ensure; finalizer and ingress stay.
    memory.clear_calls();
    let mut svc = svc;
    svc.metadata.generation = Some(2);
    svc.metadata.annotations = Some([("memory.example/size".into(), "large".into())].into());
    svc.spec.as_mut().unwrap().ports = Some(vec![port(80, 30080), port(8080, 30081)]);
    let result = api
        .run(reconcile(Arc::new(svc.clone()), ctx.clone()), async |api| {
            api.expect_event("Normal", "EnsuringLoadBalancer").await;
            api.expect_event("Normal", "EnsuredLoadBalancer").await;
            let condition = expect_condition(api, &svc).await;
            assert_eq!(condition, pair("True", "EnsuredLoadBalancer"));
        })
        .await;
    assert!(result.is_ok());
    assert_eq!(
        memory.calls(),
        [call(Op::EnsureLoadBalancer, "ns/web [a, b, c]")]
    );
    assert_eq!(
        memory.load_balancer("uid-web").unwrap().ports,
        [(80, 30080), (8080, 30081)]
    );

    // Deleted: the load balancer, then the finalizer, then the status and the condition.
    memory.clear_calls();
    let mut svc = ensured(svc, "198.51.100.1", true, "EnsuredLoadBalancer");
    svc.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::now()));
    let result = api
        .run(reconcile(Arc::new(svc.clone()), ctx.clone()), async |api| {
            api.expect_event("Normal", "DeletingLoadBalancer").await;
            let finalizer = api.expect("PATCH", STATUS).await;
            assert_eq!(finalizer.content_type, STRATEGIC);
            assert_eq!(
                finalizer.body,
                json!({"metadata": {"$deleteFromPrimitiveList/finalizers": [FINALIZER]}})
            );
            finalizer.ok(&svc);
            api.expect_event("Normal", "DeletedLoadBalancer").await;
            let ingress = api.expect("PATCH", STATUS).await;
            assert_eq!(
                ingress.body,
                json!({"status": {"loadBalancer": {"ingress": null}}})
            );
            ingress.ok(&svc);
            let condition = api.expect("PATCH", STATUS).await;
            assert_eq!(
                condition.body,
                json!({"status": {"conditions": [{"type": CONDITION, "$patch": "delete"}]}})
            );
            condition.ok(&svc);
        })
        .await;
    assert_eq!(result.unwrap(), Action::await_change());
    assert_eq!(memory.calls(), [call(Op::DeleteLoadBalancer, "ns/web")]);
    assert!(memory.load_balancers().is_empty());
}

/// Mirrors `exclusion_label_autoscaler_taint_and_no_eligible_node`: excluded, about-to-be-deleted
/// and providerID-less nodes are no targets; with none left the load balancer is kept, empty,
/// and the Service says so.
#[tokio::test]
async fn ineligible_nodes_are_no_targets_and_none_left_says_unavailable() {
    let Setup {
        memory,
        ctx,
        mut api,
        nodes,
    } = setup(&[], Duration::from_secs(600));
    let exclude = "node.kubernetes.io/exclude-from-external-load-balancers";
    let add = |name: &str, f: &dyn Fn(&mut Node)| {
        let id = memory.add_server(Server::new(name));
        let mut n = node(name, Some(&memory.provider_id(id)));
        f(&mut n);
        nodes.apply(&(n));
    };
    add("kept", &|n| {
        n.metadata.labels = Some([(exclude.into(), "false".into())].into())
    });
    add("excluded", &|n| {
        n.metadata.labels = Some([(exclude.into(), "".into())].into())
    });
    add("autoscaled", &|n| {
        n.spec.as_mut().unwrap().taints = Some(vec![Taint {
            key: "ToBeDeletedByClusterAutoscaler".into(),
            effect: "NoSchedule".into(),
            ..Default::default()
        }])
    });
    add("uninitialized", &|n| {
        n.spec.as_mut().unwrap().provider_id = None
    });

    let svc = ensured(service(), "198.51.100.1", true, "EnsuredLoadBalancer");
    let result = api
        .run(reconcile(Arc::new(svc.clone()), ctx.clone()), async |api| {
            api.expect_event("Normal", "EnsuringLoadBalancer").await;
            api.expect_event("Normal", "EnsuredLoadBalancer").await;
        })
        .await;
    assert!(result.is_ok());
    assert_eq!(
        memory.calls(),
        [call(Op::EnsureLoadBalancer, "ns/web [kept]")]
    );

    // The last eligible node is excluded too.
    nodes.delete(&node("kept", None));
    memory.clear_calls();
    let result = api
        .run(reconcile(Arc::new(svc.clone()), ctx.clone()), async |api| {
            api.expect_event("Warning", "UnAvailableLoadBalancer").await;
            let condition = expect_condition(api, &svc).await;
            assert_eq!(condition, pair("False", "UnAvailableLoadBalancer"));
        })
        .await;
    assert!(result.is_ok());
    assert_eq!(memory.calls(), [call(Op::UpdateTargets, "ns/web []")]);
    let lb = memory.load_balancer("uid-web").expect("the LB is kept");
    assert!(lb.targets.is_empty());
}

/// Mirrors `type_change_cleans_up_and_other_classes_are_ignored`.
#[tokio::test]
async fn another_class_is_ignored_and_a_type_change_cleans_up() {
    let Setup {
        memory,
        ctx,
        mut api,
        ..
    } = setup(&["a"], Duration::from_secs(600));
    let mut metallb = service();
    metallb.spec.as_mut().unwrap().load_balancer_class = Some("metallb.io/metallb".into());
    let result = api
        .run(reconcile(Arc::new(metallb), ctx.clone()), async |_| {})
        .await;
    assert!(result.is_ok());
    assert!(memory.calls().is_empty(), "no call, no finalizer, no event");

    // Ours, with a load balancer, now a NodePort (and no condition yet).
    let mut svc = ensured(service(), "198.51.100.1", true, "EnsuredLoadBalancer");
    svc.status.as_mut().unwrap().conditions = None;
    svc.spec.as_mut().unwrap().type_ = Some("NodePort".into());
    memory.ensure(&service_ref(&svc), &[]).await.unwrap();
    memory.clear_calls();
    let result = api
        .run(reconcile(Arc::new(svc.clone()), ctx.clone()), async |api| {
            api.expect_event("Normal", "DeletingLoadBalancer").await;
            let finalizer = api.expect("PATCH", STATUS).await;
            assert!(finalizer.body["metadata"]["$deleteFromPrimitiveList/finalizers"].is_array());
            finalizer.ok(&svc);
            api.expect_event("Normal", "DeletedLoadBalancer").await;
            let ingress = api.expect("PATCH", STATUS).await;
            assert_eq!(
                ingress.body["status"]["loadBalancer"]["ingress"],
                Value::Null
            );
            ingress.ok(&svc);
        })
        .await;
    assert!(result.is_ok());
    assert_eq!(memory.writes(), [call(Op::DeleteLoadBalancer, "ns/web")]);
    assert!(memory.load_balancers().is_empty());
}

/// Mirrors `bad_input_warns_writes_nothing_and_other_services_proceed`: input the provider refuses
/// is a Warning naming it and a False condition, creates nothing, and waits for the Service to
/// change.
#[tokio::test]
async fn refused_input_warns_creates_nothing_and_waits_for_a_change() {
    let Setup {
        memory,
        ctx,
        mut api,
        ..
    } = setup(&["a"], Duration::from_secs(600));
    memory.fail(
        Op::EnsureLoadBalancer,
        Fault::InvalidInput("memory.example/size"),
    );
    let svc = service();
    let result = api
        .run(reconcile(Arc::new(svc.clone()), ctx.clone()), async |api| {
            api.expect_event("Normal", "EnsuringLoadBalancer").await;
            api.expect("PATCH", STATUS).await.ok(&svc);
            let warning = api.expect_event("Warning", "SyncLoadBalancerFailed").await;
            let note = warning["note"].as_str().unwrap();
            assert!(note.contains("memory.example/size"), "{note}");
            let condition = expect_condition(api, &svc).await;
            assert_eq!(condition, pair("False", "InvalidLoadBalancerInput"));
        })
        .await;
    let err = result.unwrap_err();
    assert!(err.is_bad_input(), "{err}");
    assert_eq!(
        error_policy(Arc::new(svc), &err, ctx),
        Action::await_change()
    );
    assert!(memory.load_balancers().is_empty());
}

/// A write the cloud refuses as unprocessable (`422`, e.g. a target of another network zone) is
/// not sent again before a drift-check period: it would be refused the same way. A retryable error
/// keeps the usual backoff (5 s first).
#[tokio::test]
async fn a_422_is_tried_again_once_per_drift_check_period_at_most() {
    let drift = Duration::from_secs(600);
    let Setup {
        memory,
        ctx,
        mut api,
        ..
    } = setup(&["a"], drift);
    let svc = service();
    for (fault, want) in [
        (Fault::Code(422, "unsupported_error"), drift),
        (Fault::Retryable, Duration::from_secs(10)),
    ] {
        memory.fail(Op::EnsureLoadBalancer, fault);
        let result = api
            .run(reconcile(Arc::new(svc.clone()), ctx.clone()), async |api| {
                api.expect_event("Normal", "EnsuringLoadBalancer").await;
                api.expect("PATCH", STATUS).await.ok(&svc);
                api.expect_event("Warning", "SyncLoadBalancerFailed").await;
                expect_condition(api, &svc).await;
            })
            .await;
        let err = result.unwrap_err();
        assert!(!err.is_bad_input(), "{err}");
        assert_eq!(
            error_policy(Arc::new(svc.clone()), &err, ctx.clone()),
            Action::requeue(want),
            "{err}"
        );
    }
    assert!(memory.load_balancers().is_empty());
}

/// Mirrors `terminating_service_without_our_finalizer_gets_none`.
#[tokio::test]
async fn a_terminating_service_without_our_finalizer_gets_none() {
    let Setup {
        memory,
        ctx,
        mut api,
        ..
    } = setup(&["a"], Duration::from_secs(600));
    let mut held = service();
    held.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    held.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::now()));
    let result = api.run(reconcile(Arc::new(held), ctx), async |_| {}).await;
    assert_eq!(result.unwrap(), Action::await_change());
    assert!(memory.calls().is_empty());
}

/// Mirrors `cloud_error_storms_converge_without_duplicates`: a failing cloud is a Warning and a
/// False condition; the next reconcile creates exactly one load balancer.
#[tokio::test]
async fn a_failing_cloud_is_retried_without_duplicates() {
    let Setup {
        memory,
        ctx,
        mut api,
        ..
    } = setup(&["a"], Duration::from_secs(600));
    memory.fail(Op::EnsureLoadBalancer, Fault::Retryable);
    let svc = service();
    let result = api
        .run(reconcile(Arc::new(svc.clone()), ctx.clone()), async |api| {
            api.expect_event("Normal", "EnsuringLoadBalancer").await;
            api.expect("PATCH", STATUS).await.ok(&svc);
            api.expect_event("Warning", "SyncLoadBalancerFailed").await;
            let condition = expect_condition(api, &svc).await;
            assert_eq!(condition, pair("False", "SyncLoadBalancerFailed"));
        })
        .await;
    let err = result.unwrap_err();
    assert!(!err.is_bad_input());
    assert_ne!(
        error_policy(Arc::new(svc.clone()), &err, ctx.clone()),
        Action::await_change()
    );

    memory.heal();
    let mut svc = svc;
    svc.metadata.finalizers = Some(vec![FINALIZER.into()]);
    let result = api
        .run(reconcile(Arc::new(svc.clone()), ctx.clone()), async |api| {
            api.expect_event("Normal", "EnsuringLoadBalancer").await;
            api.expect("PATCH", STATUS).await.ok(&svc);
            api.expect_event("Normal", "EnsuredLoadBalancer").await;
            let condition = expect_condition(api, &svc).await;
            assert_eq!(condition, pair("True", "EnsuredLoadBalancer"));
        })
        .await;
    assert!(result.is_ok());
    assert_eq!(memory.load_balancers().len(), 1);
}

/// Mirrors `drift_check_repairs_changes_made_behind_our_back`: with the drift period over, a
/// reconcile re-ensures quietly, and announces only what it repaired.
#[tokio::test]
async fn the_drift_check_repairs_quietly_and_announces_only_repairs() {
    let Setup {
        memory,
        ctx,
        mut api,
        ..
    } = setup(&["a", "b"], Duration::ZERO);
    let svc = service();
    api.run(reconcile(Arc::new(svc.clone()), ctx.clone()), async |api| {
        api.expect_event("Normal", "EnsuringLoadBalancer").await;
        api.expect("PATCH", STATUS).await.ok(&svc);
        api.expect("PATCH", STATUS).await.ok(&svc);
        api.expect_event("Normal", "EnsuredLoadBalancer").await;
        expect_condition(api, &svc).await;
    })
    .await
    .unwrap();
    let svc = ensured(svc, "198.51.100.1", true, "EnsuredLoadBalancer");

    // Nothing changed: the drift check reads and writes nothing to the Service.
    memory.clear_calls();
    let result = api
        .run(reconcile(Arc::new(svc.clone()), ctx.clone()), async |_| {})
        .await;
    assert!(result.is_ok());
    assert_eq!(
        memory.calls(),
        [call(Op::EnsureLoadBalancer, "ns/web [a, b]")]
    );

    // Someone removed both targets behind our back: repaired and announced.
    memory
        .update_targets(&service_ref(&svc), &[])
        .await
        .unwrap();
    memory.clear_calls();
    let result = api
        .run(reconcile(Arc::new(svc.clone()), ctx.clone()), async |api| {
            let ev = api.expect_event("Normal", "EnsuredLoadBalancer").await;
            // The controller's note says "repaired 2 change(s)", but kube's recorder keys events
            // without their note: within its 6-minute cache it sends a series update of the
            // create's "Ensured load balancer" instead. With the default 10-minute drift period
            // the cache has expired by the time a drift check runs.
            assert_eq!(ev["series"]["count"], 2, "{ev}");
            assert_eq!(ev["note"], "Ensured load balancer");
        })
        .await;
    assert!(result.is_ok());
    assert_eq!(
        memory.calls(),
        [call(Op::EnsureLoadBalancer, "ns/web [a, b]")]
    );
    assert_eq!(memory.load_balancer("uid-web").unwrap().targets, ["a", "b"]);
}

/// The provider's warnings go on the Node they name (the Service's otherwise): here a node whose
/// providerID the memory cloud does not know. No e2e twin (cloud-sim has no such node).
#[tokio::test]
async fn a_provider_warning_about_a_node_goes_on_that_node() {
    let Setup {
        memory,
        ctx,
        mut api,
        nodes,
    } = setup(&["a"], Duration::from_secs(600));
    nodes.apply(&(node("stranger", Some("memory://99"))));
    let svc = ensured(service(), "198.51.100.1", true, "EnsuredLoadBalancer");
    let result = api
        .run(reconcile(Arc::new(svc), ctx), async |api| {
            api.expect_event("Normal", "EnsuringLoadBalancer").await;
            let warning = api.expect_event("Warning", "TargetNotFound").await;
            assert_eq!(warning["regarding"]["kind"], "Node");
            assert_eq!(warning["regarding"]["name"], "stranger");
            assert!(warning["note"].as_str().unwrap().contains("Service ns/web"));
            api.expect_event("Normal", "EnsuredLoadBalancer").await;
        })
        .await;
    assert!(result.is_ok());
    assert_eq!(memory.load_balancer("uid-web").unwrap().targets, ["a"]);
}
