//! The lifecycle controller's decisions in milliseconds: `Monitor::check` against the in-memory
//! provider, with the test as the apiserver (no cloud-sim, no apiserver). Each test names the
//! end-to-end test in `lifecycle_e2e.rs` it mirrors.

use std::sync::Arc;
use std::time::Duration;

use controller_kit::metrics::Registries;
use controller_kit::slim_node::SlimNode;
use controller_kit::{Events, KitMetrics};
use k8s_openapi::api::core::v1::{Node, NodeCondition, NodeSpec, NodeStatus, Taint};
use lifecycle_controller::filter::NodeFilter;
use lifecycle_controller::monitor::{Monitor, Outcome, TAINT_SHUTDOWN};
use serde_json::json;
use test_support::fakes::memory_cloud::{Call, Fault, MemoryCloud, Op, Server};
use test_support::fakes::mock_kube::{ApiServerVerifier, mock_client};

/// A monitor that asks the cloud at every check (its rechecks are due at once).
fn monitor(cloud: &Arc<MemoryCloud>, filter: NodeFilter) -> (Monitor, ApiServerVerifier) {
    monitor_every(cloud, filter, Duration::ZERO)
}

/// A monitor whose passes run every `period` (a NotReady Node with a server is due again after 2).
fn monitor_every(
    cloud: &Arc<MemoryCloud>,
    filter: NodeFilter,
    period: Duration,
) -> (Monitor, ApiServerVerifier) {
    let (client, api) = mock_client();
    let instances = cloud
        .cloud()
        .instances
        .expect("the memory cloud has instances");
    let monitor = Monitor::new(
        client.clone(),
        instances,
        Events::new(client, "cloud-node-lifecycle-controller", None),
        KitMetrics::register("lifecycle-controller", &mut Registries::default().ours),
        filter,
        4,
        period,
    );
    (monitor, api)
}

/// A Node with Ready `ready` (`True`/`False`) and this providerID (`""`: none).
fn node(name: &str, ready: &str, provider_id: &str) -> SlimNode {
    let mut n = Node {
        spec: Some(NodeSpec {
            provider_id: (!provider_id.is_empty()).then(|| provider_id.to_string()),
            ..Default::default()
        }),
        status: Some(NodeStatus {
            conditions: Some(vec![NodeCondition {
                type_: "Ready".into(),
                status: ready.into(),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        ..Default::default()
    };
    n.metadata.name = Some(name.into());
    n.metadata.uid = Some(format!("uid-{name}"));
    n.metadata.resource_version = Some("7".into());
    n.into()
}

fn tainted(mut n: SlimNode, key: &str) -> SlimNode {
    n.spec
        .as_mut()
        .unwrap()
        .taints
        .get_or_insert_with(Vec::new)
        .push(Taint {
            key: key.into(),
            effect: "NoSchedule".into(),
            ..Default::default()
        });
    n
}

fn ops(cloud: &MemoryCloud) -> Vec<Op> {
    cloud.calls().into_iter().map(|c| c.op).collect()
}

/// A check of `node` that deletes it: the `DeletingNode` Event, then the DELETE, answered.
async fn check_deleting(
    monitor: &Monitor,
    api: &mut ApiServerVerifier,
    node: &SlimNode,
) -> Outcome {
    let name = node.metadata.name.clone().unwrap();
    api.run(monitor.check(node), async |api| {
        api.expect_event("Normal", "DeletingNode").await;
        api.expect("DELETE", &format!("/api/v1/nodes/{name}"))
            .await
            .ok(node);
    })
    .await
}

/// A server that existed and is gone: its providerID.
fn gone_server(cloud: &MemoryCloud, name: &str) -> String {
    let id = cloud.add_server(Server::new(name));
    cloud.delete_server(id);
    cloud.provider_id(id)
}

/// Mirrors `not_ready_node_whose_server_is_deleted_is_deleted_and_ready_node_is_kept`.
#[tokio::test]
async fn a_not_ready_node_whose_server_is_gone_is_deleted_and_a_ready_one_kept() {
    let memory = MemoryCloud::new();
    let (a, b) = (gone_server(&memory, "a"), gone_server(&memory, "b"));
    let (monitor, mut api) = monitor(&memory, NodeFilter::default());

    // Ready: kept, and no cloud call.
    let ready = node("b", "True", &b);
    let outcome = api.run(monitor.check(&ready), async |_| {}).await;
    assert_eq!(outcome, Outcome::Ready);
    assert!(memory.calls().is_empty());

    let not_ready = node("a", "False", &a);
    let outcome = api
        .run(monitor.check(&not_ready), async |api| {
            let ev = api.expect_event("Normal", "DeletingNode").await;
            let note = ev["note"].as_str().unwrap();
            assert!(
                note.contains("does not exist in the cloud provider"),
                "{note}"
            );
            // Only the Node that was evaluated: uid and resourceVersion as preconditions.
            let delete = api.expect("DELETE", "/api/v1/nodes/a").await;
            assert_eq!(
                delete.body["preconditions"],
                json!({"uid": "uid-a", "resourceVersion": "7"})
            );
            delete.ok(&not_ready);
        })
        .await;
    assert_eq!(outcome, Outcome::Deleted);
    assert_eq!(
        memory.calls(),
        [Call {
            op: Op::InstanceExists,
            subject: "a".into()
        }]
    );
}

/// Mirrors `powered_off_server_gets_shutdown_taint_until_node_is_ready_again`.
#[tokio::test]
async fn a_shut_off_server_taints_its_node_until_the_node_is_ready_again() {
    let memory = MemoryCloud::new();
    let id = memory.add_server(Server::new("n").shut_off());
    let pid = memory.provider_id(id);
    let (monitor, mut api) = monitor(&memory, NodeFilter::default());

    let user_taint = "example.com/keep";
    let off = tainted(node("n", "False", &pid), user_taint);
    let outcome = api
        .run(monitor.check(&off), async |api| {
            let patch = api.expect("PATCH", "/api/v1/nodes/n").await;
            assert_eq!(
                patch.body,
                json!({
                    "metadata": {"resourceVersion": "7"},
                    "spec": {"taints": [
                        {"key": user_taint, "effect": "NoSchedule"},
                        {"key": TAINT_SHUTDOWN, "effect": "NoSchedule"},
                    ]},
                })
            );
            patch.ok(&off);
        })
        .await;
    assert_eq!(outcome, Outcome::Shutdown);
    assert_eq!(ops(&memory), [Op::InstanceExists, Op::InstanceShutdown]);

    // Already tainted: nothing to write.
    let off_tainted = tainted(off.clone(), TAINT_SHUTDOWN);
    let outcome = api.run(monitor.check(&off_tainted), async |_| {}).await;
    assert_eq!(outcome, Outcome::Shutdown);

    // Ready again (the server was started): the taint goes, the user's stays, no cloud call.
    memory.clear_calls();
    let mut back = off_tainted.clone();
    back.status.as_mut().unwrap().conditions.as_mut().unwrap()[0].status = "True".into();
    let outcome = api
        .run(monitor.check(&back), async |api| {
            let patch = api.expect("PATCH", "/api/v1/nodes/n").await;
            assert_eq!(
                patch.body["spec"],
                json!({"taints": [{"key": user_taint, "effect": "NoSchedule"}]})
            );
            patch.ok(&back);
        })
        .await;
    assert_eq!(outcome, Outcome::Ready);
    assert!(memory.calls().is_empty());
}

/// The quiet case of both e2e tests above: NotReady, server present and running.
#[tokio::test]
async fn a_running_server_leaves_its_not_ready_node_alone() {
    let memory = MemoryCloud::new();
    let pid = memory.provider_id(memory.add_server(Server::new("n")));
    let (monitor, mut api) = monitor(&memory, NodeFilter::default());
    let outcome = api
        .run(monitor.check(&node("n", "False", &pid)), async |_| {})
        .await;
    assert_eq!(outcome, Outcome::Running);
    assert_eq!(ops(&memory), [Op::InstanceExists, Op::InstanceShutdown]);
}

/// A NotReady Node whose server was there is asked about again only when due (2 periods, then
/// doubling); once Ready it is forgotten, and its next NotReady check is at once.
#[tokio::test]
async fn a_not_ready_node_with_its_server_is_not_asked_about_again_until_due() {
    let memory = MemoryCloud::new();
    let pid = memory.provider_id(memory.add_server(Server::new("n")));
    let (monitor, mut api) = monitor_every(&memory, NodeFilter::default(), Duration::from_secs(60));
    let down = node("n", "False", &pid);
    let outcome = api.run(monitor.check(&down), async |_| {}).await;
    assert_eq!(outcome, Outcome::Running);
    memory.clear_calls();
    for _ in 0..3 {
        let outcome = api.run(monitor.check(&down), async |_| {}).await;
        assert_eq!(outcome, Outcome::NotDue);
    }
    assert!(memory.calls().is_empty(), "{:?}", ops(&memory));

    // Ready (a reboot ended), then NotReady again: checked at once.
    let up = node("n", "True", &pid);
    assert_eq!(
        api.run(monitor.check(&up), async |_| {}).await,
        Outcome::Ready
    );
    let outcome = api.run(monitor.check(&down), async |_| {}).await;
    assert_eq!(outcome, Outcome::Running);
    assert_eq!(ops(&memory), [Op::InstanceExists, Op::InstanceShutdown]);
}

/// A recheck comes due: the server deleted meanwhile is found, and the Node deleted.
#[tokio::test]
async fn a_due_recheck_finds_a_server_deleted_since() {
    let memory = MemoryCloud::new();
    let id = memory.add_server(Server::new("n"));
    let pid = memory.provider_id(id);
    let period = Duration::from_millis(20);
    let (monitor, mut api) = monitor_every(&memory, NodeFilter::default(), period);
    let down = node("n", "False", &pid);
    let outcome = api.run(monitor.check(&down), async |_| {}).await;
    assert_eq!(outcome, Outcome::Running);
    memory.delete_server(id);
    let outcome = api.run(monitor.check(&down), async |_| {}).await;
    assert_eq!(outcome, Outcome::NotDue);
    // Due 2 periods after the check: waiting out a delay, not another party.
    tokio::time::sleep(3 * period).await;
    assert_eq!(
        check_deleting(&monitor, &mut api, &down).await,
        Outcome::Deleted
    );
}

/// Mirrors `cloud_errors_never_delete_a_node`.
#[tokio::test]
async fn cloud_errors_never_delete_and_the_next_answer_does() {
    let memory = MemoryCloud::new();
    let pid = gone_server(&memory, "n");
    memory.fail(Op::InstanceExists, Fault::Retryable);
    let (monitor, mut api) = monitor(&memory, NodeFilter::default());
    let n = node("n", "False", &pid);
    let outcome = api.run(monitor.check(&n), async |_| {}).await;
    assert_eq!(outcome, Outcome::Error, "not deleted, nothing written");

    // The cloud answers again: the first failure is retried at once, and the gone server deletes.
    memory.heal();
    assert_eq!(
        check_deleting(&monitor, &mut api, &n).await,
        Outcome::Deleted
    );
}

/// Mirrors `lagging_server_lists_never_delete_a_node`: without a providerID only a name can be
/// looked up, and a name no server has proves nothing.
#[tokio::test]
async fn a_node_without_provider_id_is_never_deleted_and_says_why() {
    let memory = MemoryCloud::new();
    let (monitor, mut api) = monitor(&memory, NodeFilter::default());
    let outcome = api
        .run(monitor.check(&node("nameless", "False", "")), async |api| {
            let ev = api.expect_event("Warning", "ServerNotFound").await;
            let note = ev["note"].as_str().unwrap();
            assert!(
                note.contains("not deleted") && note.contains("nameless"),
                "{note}"
            );
        })
        .await;
    assert_eq!(outcome, Outcome::Error);
}

/// Mirrors `unusable_provider_ids_warn_and_are_never_deleted`.
#[tokio::test]
async fn unusable_provider_ids_warn_and_are_never_deleted() {
    for pid in ["hcloud://1", "memory://not-a-number"] {
        let memory = MemoryCloud::new();
        let (monitor, mut api) = monitor(&memory, NodeFilter::default());
        let outcome = api
            .run(monitor.check(&node("bad", "False", pid)), async |api| {
                let ev = api.expect_event("Warning", "UnknownProviderIDPrefix").await;
                let note = ev["note"].as_str().unwrap();
                assert!(note.contains(pid.split("://").nth(1).unwrap()), "{note}");
            })
            .await;
        assert_eq!(outcome, Outcome::Error, "{pid}");
    }
}

/// Mirrors `excluded_hybrid_nodes_are_never_deleted` (its providerID-prefix half).
#[tokio::test]
async fn nodes_outside_the_provider_id_prefixes_are_never_looked_at() {
    let memory = MemoryCloud::new();
    let filter = NodeFilter {
        exclude: None,
        provider_id_prefixes: vec!["memory://".into()],
    };
    let (monitor, mut api) = monitor(&memory, filter);
    for n in [
        node("foreign", "False", "other://1"),
        node("bare", "False", ""),
    ] {
        let outcome = api.run(monitor.check(&n), async |_| {}).await;
        assert_eq!(outcome, Outcome::Excluded);
    }
    assert!(memory.calls().is_empty());
}

/// A Node that changed since it was cached (409 on the preconditioned delete) is re-evaluated on
/// the next pass, without a failure event; any other refusal is a `DeletingNodeFailed` Warning.
#[tokio::test]
async fn a_refused_delete_is_retried_and_only_a_real_failure_warns() {
    let memory = MemoryCloud::new();
    let pid = gone_server(&memory, "n");
    let (monitor, mut api) = monitor(&memory, NodeFilter::default());
    let n = node("n", "False", &pid);
    let outcome = api
        .run(monitor.check(&n), async |api| {
            api.expect_event("Normal", "DeletingNode").await;
            api.expect("DELETE", "/api/v1/nodes/n")
                .await
                .fail(409, "Conflict");
        })
        .await;
    assert_eq!(outcome, Outcome::Error);
    let outcome = api
        .run(monitor.check(&n), async |api| {
            api.expect_event("Normal", "DeletingNode").await;
            api.expect("DELETE", "/api/v1/nodes/n")
                .await
                .fail(500, "InternalError");
            api.expect_event("Warning", "DeletingNodeFailed").await;
        })
        .await;
    assert_eq!(outcome, Outcome::Error);
}
