//! The node controller's decisions in milliseconds: `reconcile` and the address-sync pass against
//! the in-memory provider, with the test as the apiserver (no cloud-sim, no apiserver). Each test
//! names the end-to-end test in `node_e2e.rs` it mirrors.

use std::collections::BTreeMap;
use std::sync::Arc;

use controller_kit::metrics::Registries;
use controller_kit::{Events, KitMetrics};
// What the controller's store holds (controller_kit::slim_node), under the names of a Node's.
use controller_kit::slim_node::{
    SlimNode as Node, SlimNodeSpec as NodeSpec, SlimNodeStatus as NodeStatus,
};
use k8s_openapi::api::core::v1::{NodeAddress, Taint};
use kube::runtime::{reflector, watcher};
use node_controller::address_sync;
use node_controller::controller::{NodeReconciler, reconcile};
use node_controller::metrics::NodeMetrics;
use serde_json::json;
use test_support::fakes::memory_cloud::{
    Call, Fault, INVALID_STATED_PUBLIC_IP, MemoryCloud, Op, STATED_PUBLIC_IP, Server,
};
use test_support::fakes::mock_kube::{ApiRequest, ApiServerVerifier, mock_client, patched};

const UNINITIALIZED: &str = "node.cloudprovider.kubernetes.io/uninitialized";
const NODE_IP: &str = "alpha.kubernetes.io/provided-node-ip";

/// The reconciler's context, with the memory cloud's `Instances` from its `Cloud` bundle.
fn ctx(client: kube::Client, cloud: &Arc<MemoryCloud>) -> Arc<NodeReconciler> {
    Arc::new(reconciler(client, cloud, &[]))
}

/// The reconciler, its Node cache holding `others`.
fn reconciler(client: kube::Client, cloud: &Arc<MemoryCloud>, others: &[Node]) -> NodeReconciler {
    let (store, mut writer) = reflector::store();
    for other in others {
        writer.apply_watcher_event(&watcher::Event::Apply(other.clone()));
    }
    let mut r = Registries::default();
    let instances = cloud
        .cloud()
        .instances
        .expect("the memory cloud has instances");
    NodeReconciler::new(
        client.clone(),
        instances,
        store,
        Events::new(client, "cloud-node-controller", None),
        KitMetrics::register("node-controller", &mut r.ours),
        NodeMetrics::register(&mut r.ours, &mut r.upstream),
    )
}

/// Answers the initializing PATCH of `node` as the apiserver would; returns the next request
/// (the status PATCH with the addresses, when they change).
async fn answer_init(api: &mut ApiServerVerifier, node: &Node) -> ApiRequest {
    let name = node.metadata.name.clone().unwrap_or_default();
    let patch = api.expect("PATCH", &format!("/api/v1/nodes/{name}")).await;
    let body = patch.body.clone();
    patch.ok(&patched(node, &body));
    api.next().await
}

/// A Node as kubelet registers it with `--cloud-provider=external`: the uninitialized taint, a
/// taint of the user's, its addresses, no providerID.
fn uninitialized(name: &str) -> Node {
    let mut n = initialized(name, &[("InternalIP", "10.0.0.10"), ("Hostname", name)]);
    n.spec.as_mut().unwrap().taints = Some(vec![
        Taint {
            key: UNINITIALIZED.into(),
            value: Some("true".into()),
            effect: "NoSchedule".into(),
            ..Default::default()
        },
        Taint {
            key: "dedicated".into(),
            value: Some("gpu".into()),
            effect: "NoSchedule".into(),
            ..Default::default()
        },
    ]);
    n
}

fn initialized(name: &str, addresses: &[(&str, &str)]) -> Node {
    let mut n = Node {
        spec: Some(NodeSpec::default()),
        status: Some(NodeStatus {
            addresses: Some(
                addresses
                    .iter()
                    .map(|(t, a)| NodeAddress {
                        type_: t.to_string(),
                        address: a.to_string(),
                    })
                    .collect(),
            ),
            ..Default::default()
        }),
        ..Default::default()
    };
    n.metadata.name = Some(name.into());
    n.metadata.resource_version = Some("7".into());
    n
}

fn with_provider_id(mut n: Node, pid: &str) -> Node {
    n.spec.as_mut().unwrap().provider_id = Some(pid.into());
    n
}

fn annotated(mut n: Node, key: &str, value: &str) -> Node {
    n.metadata
        .annotations
        .get_or_insert_with(BTreeMap::new)
        .insert(key.into(), value.into());
    n
}

fn call(op: Op, subject: &str) -> Call {
    Call {
        op,
        subject: subject.into(),
    }
}

/// The six topology and instance-type labels of a server in `zone-a`/`region-1` of type `m1.small`.
fn topology_labels() -> serde_json::Map<String, serde_json::Value> {
    let v = json!({
        "node.kubernetes.io/instance-type": "m1.small",
        "beta.kubernetes.io/instance-type": "m1.small",
        "topology.kubernetes.io/zone": "zone-a",
        "failure-domain.beta.kubernetes.io/zone": "zone-a",
        "topology.kubernetes.io/region": "region-1",
        "failure-domain.beta.kubernetes.io/region": "region-1",
    });
    v.as_object().unwrap().clone()
}

/// Mirrors `initializes_node_with_labels_addresses_provider_id_and_removes_taint`.
#[tokio::test]
async fn init_removes_the_taint_and_writes_provider_id_labels_and_addresses() {
    let memory = MemoryCloud::new();
    memory.add_server(
        Server::new("node-a")
            .public_ip("203.0.113.10")
            .private_ip("10.0.0.10")
            .label("memory.example/pool", "general"),
    );
    let (client, mut api) = mock_client();
    let node = annotated(uninitialized("node-a"), NODE_IP, "203.0.113.10");
    let result = api
        .run(reconcile(Arc::new(node.clone()), ctx(client, &memory)), async |api| {
            // One optimistic-locked patch: labels, providerID, the other taints.
            let patch = api.expect("PATCH", "/api/v1/nodes/node-a").await;
            assert_eq!(patch.content_type, "application/merge-patch+json");
            let mut labels = topology_labels();
            labels.insert("memory.example/pool".into(), "general".into());
            assert_eq!(
                patch.body,
                json!({
                    "metadata": {"resourceVersion": "7", "labels": labels},
                    "spec": {
                        "providerID": "memory://1",
                        "taints": [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}],
                    },
                })
            );
            let body = patch.body.clone();
            patch.ok(&patched(&node, &body));
            // The addresses right away, the node IP first.
            let status = api.expect("PATCH", "/api/v1/nodes/node-a/status").await;
            assert_eq!(
                status.body,
                json!({"status": {"addresses": [
                    {"type": "ExternalIP", "address": "203.0.113.10"},
                    {"type": "Hostname", "address": "node-a"},
                    {"type": "InternalIP", "address": "10.0.0.10"},
                ]}})
            );
            status.ok(&node);
            let synced = api.expect_event("Normal", "Synced").await;
            assert_eq!(synced["regarding"]["name"], "node-a");
            assert_eq!(synced["reportingController"], "cloud-node-controller");
        })
        .await;
    assert!(result.is_ok(), "{result:?}");
    assert_eq!(memory.calls(), [call(Op::InstanceMetadata, "node-a")]);
}

/// Mirrors `existing_provider_id_is_used_and_never_overwritten`.
#[tokio::test]
async fn an_existing_provider_id_is_looked_up_and_never_overwritten() {
    let memory = MemoryCloud::new();
    let id = memory.add_server(Server::new("server-1").private_ip("10.0.0.10"));
    let (client, mut api) = mock_client();
    let node = with_provider_id(uninitialized("other-name"), &memory.provider_id(id));
    let result = api
        .run(
            reconcile(Arc::new(node.clone()), ctx(client, &memory)),
            async |api| {
                let patch = api.expect("PATCH", "/api/v1/nodes/other-name").await;
                assert!(
                    patch.body["spec"].get("providerID").is_none(),
                    "{}",
                    patch.body
                );
                assert_eq!(
                    patch.body["metadata"]["labels"]["node.kubernetes.io/instance-type"],
                    "m1.small"
                );
                let body = patch.body.clone();
                patch.ok(&patched(&node, &body));
                // The cloud's Hostname replaces kubelet's; the InternalIP is unchanged.
                let status = api.expect("PATCH", "/api/v1/nodes/other-name/status").await;
                assert_eq!(
                    status.body["status"]["addresses"][0],
                    json!({"type": "Hostname", "address": "server-1"})
                );
                status.ok(&node);
                api.expect_event("Normal", "Synced").await;
            },
        )
        .await;
    assert!(result.is_ok(), "{result:?}");
}

/// Mirrors `server_not_found_keeps_taint_and_warns_listing_what_was_tried`.
#[tokio::test]
async fn no_server_keeps_the_taint_and_warns_naming_what_was_tried() {
    let memory = MemoryCloud::new();
    let (client, mut api) = mock_client();
    let result = api
        .run(
            reconcile(Arc::new(uninitialized("ghost")), ctx(client, &memory)),
            async |api| {
                let warning = api.expect_event("Warning", "ServerNotFound").await;
                let note = warning["note"].as_str().unwrap();
                assert!(note.contains(r#"server name "ghost""#), "{note}");
            },
        )
        .await;
    assert!(result.is_err(), "requeued with backoff");
}

/// Mirrors `bad_provider_ids_warn_and_keep_the_taint`.
#[tokio::test]
async fn unusable_provider_ids_warn_and_keep_the_taint() {
    for (pid, says) in [
        ("hcloud://1", "not a memory:// server"),
        ("memory://one", "memory://one"),
    ] {
        let memory = MemoryCloud::new();
        memory.add_server(Server::new("node-a"));
        let (client, mut api) = mock_client();
        let node = with_provider_id(uninitialized("node-a"), pid);
        let result = api
            .run(
                reconcile(Arc::new(node), ctx(client, &memory)),
                async |api| {
                    let warning = api.expect_event("Warning", "UnknownProviderIDPrefix").await;
                    let note = warning["note"].as_str().unwrap();
                    assert!(note.contains(says), "{pid}: {note}");
                },
            )
            .await;
        assert!(result.is_err(), "{pid}");
    }
}

/// A cloud that fails (here 503) is a Warning saying it will retry, and no write. No e2e twin:
/// the chaos suite covers it against cloud-sim's faults.
#[tokio::test]
async fn a_failing_cloud_keeps_the_taint_and_says_it_retries() {
    let memory = MemoryCloud::new();
    memory.add_server(Server::new("node-a"));
    memory.fail(Op::InstanceMetadata, Fault::Retryable);
    let (client, mut api) = mock_client();
    let result = api
        .run(
            reconcile(Arc::new(uninitialized("node-a")), ctx(client, &memory)),
            async |api| {
                let warning = api.expect_event("Warning", "InstanceLookupFailed").await;
                assert!(warning["note"].as_str().unwrap().contains("will retry"));
            },
        )
        .await;
    assert!(result.is_err());
}

/// Mirrors `node_ip_mismatch_keeps_taint_and_warns_with_cloud_addresses`.
#[tokio::test]
async fn a_node_ip_the_server_lacks_keeps_the_taint_and_lists_the_cloud_addresses() {
    let memory = MemoryCloud::new();
    memory.add_server(Server::new("node-a").public_ip("203.0.113.10"));
    let (client, mut api) = mock_client();
    let node = annotated(uninitialized("node-a"), NODE_IP, "10.9.9.9");
    let result = api
        .run(
            reconcile(Arc::new(node), ctx(client, &memory)),
            async |api| {
                let warning = api.expect_event("Warning", "NodeIPNotFound").await;
                let note = warning["note"].as_str().unwrap();
                assert!(
                    note.contains("10.9.9.9") && note.contains("ExternalIP=203.0.113.10"),
                    "{note}"
                );
            },
        )
        .await;
    assert!(result.is_err());
}

/// Mirrors `reserved_domain_labels_are_dropped_and_user_labels_kept`.
#[tokio::test]
async fn reserved_domain_labels_are_dropped_and_the_users_values_kept() {
    let memory = MemoryCloud::new();
    memory.add_server(
        Server::new("node-a")
            .label("node.kubernetes.io/sneaky", "x")
            .label("k8s.io/sneaky", "x")
            .label("example.com/allowed", "yes")
            .label("example.com/user-owned", "cloud"),
    );
    let (client, mut api) = mock_client();
    let mut node = uninitialized("node-a");
    node.metadata.labels = Some([("example.com/user-owned".into(), "user".into())].into());
    let result = api
        .run(
            reconcile(Arc::new(node.clone()), ctx(client, &memory)),
            async |api| {
                let patch = api.expect("PATCH", "/api/v1/nodes/node-a").await;
                let mut labels = topology_labels();
                labels.insert("example.com/allowed".into(), "yes".into());
                assert_eq!(patch.body["metadata"]["labels"], json!(labels));
                let body = patch.body.clone();
                patch.ok(&patched(&node, &body));
                api.expect("PATCH", "/api/v1/nodes/node-a/status")
                    .await
                    .ok(&node);
                api.expect_event("Normal", "Synced").await;
            },
        )
        .await;
    assert!(result.is_ok(), "{result:?}");
}

/// Mirrors `stable_labels_follow_beta_labels_on_initialized_nodes`.
#[tokio::test]
async fn stable_labels_follow_the_beta_ones_without_asking_the_cloud() {
    let memory = MemoryCloud::new();
    let (client, mut api) = mock_client();
    let mut node = with_provider_id(initialized("node-a", &[]), "memory://1");
    node.metadata.labels = Some(
        [
            ("failure-domain.beta.kubernetes.io/zone", "zone-b"),
            ("topology.kubernetes.io/zone", "edited-by-user"),
            ("beta.kubernetes.io/instance-type", "m1.large"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect(),
    );
    let result = api
        .run(
            reconcile(Arc::new(node.clone()), ctx(client, &memory)),
            async |api| {
                let patch = api.expect("PATCH", "/api/v1/nodes/node-a").await;
                assert_eq!(
                    patch.body,
                    json!({"metadata": {"labels": {
                        "topology.kubernetes.io/zone": "zone-b",
                        "node.kubernetes.io/instance-type": "m1.large",
                    }}}),
                    "no beta region, no stable region"
                );
                patch.ok(&node);
            },
        )
        .await;
    assert!(result.is_ok(), "{result:?}");
    assert!(memory.calls().is_empty());
}

/// Mirrors `a_node_registered_without_external_cloud_provider_warns_once_and_is_left_alone`
/// (bad_input.rs): a node kubelet registered without `--cloud-provider=external` (no taint, no
/// providerID) gets one Warning and no write, however often it is reconciled; a node with a
/// providerID and no taint gets nothing. Forgotten once deleted from the cache.
#[tokio::test]
async fn a_node_without_taint_or_provider_id_is_warned_about_once_and_left_alone() {
    let memory = MemoryCloud::new();
    memory.add_server(Server::new("bare"));
    let (client, mut api) = mock_client();
    let ctx = ctx(client, &memory);
    let bare = Arc::new(initialized("bare", &[("InternalIP", "10.0.0.10")]));
    let result = api
        .run(reconcile(bare.clone(), ctx.clone()), async |api| {
            let warning = api
                .expect_event("Warning", "NotInitializedByCloudProvider")
                .await;
            assert_eq!(warning["regarding"]["name"], "bare");
            assert_eq!(
                warning["note"],
                node_controller::controller::NEVER_INITIALIZED_NOTE
            );
        })
        .await;
    assert!(result.is_ok(), "{result:?}");
    // Reconciled again (a label edit, a relist): no request at all.
    let again = api
        .run(reconcile(bare.clone(), ctx.clone()), async |_| {})
        .await;
    assert!(again.is_ok(), "{again:?}");
    // Initialized earlier (providerID, no taint): nothing either.
    let done = with_provider_id(initialized("done", &[]), "memory://1");
    let done = api
        .run(reconcile(Arc::new(done), ctx.clone()), async |_| {})
        .await;
    assert!(done.is_ok(), "{done:?}");
    assert!(memory.calls().is_empty(), "no cloud lookup for either");

    // Deleted from the cache: forgotten, so the set does not grow with deleted nodes (the same
    // node seen again would be a new warning).
    let (store, _writer) = reflector::store::<Node>();
    ctx.forget_deleted(&store);
    api.run(reconcile(bare, ctx), async |api| {
        api.expect_event("Warning", "NotInitializedByCloudProvider")
            .await;
    })
    .await
    .expect("reconciled");
}

/// Mirrors `periodic_address_sync_repairs_changed_addresses`: one pass over the cache replaces
/// stale addresses, leaves current ones and uninitialized nodes alone, and skips a node whose
/// lookup fails.
#[tokio::test]
async fn the_address_sync_replaces_stale_addresses_only() {
    let memory = MemoryCloud::new();
    let stale = memory.add_server(Server::new("stale").public_ip("203.0.113.1"));
    let current = memory.add_server(Server::new("current").public_ip("203.0.113.2"));
    let (store, mut writer) = reflector::store::<Node>();
    let nodes = [
        with_provider_id(
            initialized(
                "stale",
                &[("ExternalIP", "192.0.2.1"), ("InternalIP", "10.1.1.1")],
            ),
            &memory.provider_id(stale),
        ),
        with_provider_id(
            initialized(
                "current",
                &[("Hostname", "current"), ("ExternalIP", "203.0.113.2")],
            ),
            &memory.provider_id(current),
        ),
        with_provider_id(initialized("gone", &[]), "memory://99"),
        uninitialized("new"),
    ];
    for n in nodes {
        writer.apply_watcher_event(&watcher::Event::Apply(n));
    }
    let (client, mut api) = mock_client();
    let ctx = ctx(client, &memory);
    api.run(address_sync::pass(&ctx, &store, 2), async |api| {
        let patch = api.expect("PATCH", "/api/v1/nodes/stale/status").await;
        assert_eq!(
            patch.body,
            json!({"status": {"addresses": [
                {"type": "Hostname", "address": "stale"},
                {"type": "ExternalIP", "address": "203.0.113.1"},
            ]}}),
            "replace semantics"
        );
        patch.ok(&initialized("stale", &[]));
    })
    .await;
    let mut asked: Vec<String> = memory.calls().into_iter().map(|c| c.subject).collect();
    asked.sort();
    assert_eq!(
        asked,
        ["current", "gone", "stale"],
        "never the uninitialized one"
    );
}

/// The in-memory twin of `node_e2e`'s `external_ipv6_*` tests: a provider that reads a Node's own
/// annotation (the memory cloud's stated public IP, as Hetzner's `external-ipv6`).
fn ctx_among(
    client: kube::Client,
    cloud: &Arc<MemoryCloud>,
    others: &[Node],
) -> Arc<NodeReconciler> {
    Arc::new(reconciler(client, cloud, others))
}

#[tokio::test]
async fn an_address_the_node_states_replaces_the_clouds_and_a_bad_one_writes_nothing() {
    let memory = MemoryCloud::new();
    memory.add_server(Server::new("node-a").public_ip("203.0.113.10"));
    // Valid: initialized with the stated address where the cloud's would be.
    let (client, mut api) = mock_client();
    let node = annotated(uninitialized("node-a"), STATED_PUBLIC_IP, "198.51.100.7");
    let result = api
        .run(
            reconcile(Arc::new(node.clone()), ctx_among(client, &memory, &[])),
            async |api| {
                let status = answer_init(api, &node).await;
                assert_eq!(status.line(), "PATCH /api/v1/nodes/node-a/status");
                assert_eq!(
                    status.body["status"]["addresses"],
                    json!([
                        {"type": "Hostname", "address": "node-a"},
                        {"type": "ExternalIP", "address": "198.51.100.7"},
                    ])
                );
                status.ok(&node);
                api.expect_event("Normal", "Synced").await;
            },
        )
        .await;
    assert!(result.is_ok(), "{result:?}");

    // Invalid: a Warning naming the annotation, and the Node is not touched.
    let (client, mut api) = mock_client();
    let node = annotated(uninitialized("node-a"), STATED_PUBLIC_IP, "2001:db8::/64");
    let result = api
        .run(
            reconcile(Arc::new(node), ctx_among(client, &memory, &[])),
            async |api| {
                let warning = api.expect_event("Warning", INVALID_STATED_PUBLIC_IP).await;
                let note = warning["note"].as_str().unwrap();
                assert!(
                    note.contains(STATED_PUBLIC_IP) && note.contains("stays uninitialized"),
                    "{note}"
                );
            },
        )
        .await;
    assert!(result.is_err(), "the taint stays: {result:?}");

    // Another Node's address: a Warning naming it, nothing written.
    let other = initialized("node-b", &[("ExternalIP", "198.51.100.7")]);
    let (client, mut api) = mock_client();
    let node = annotated(uninitialized("node-a"), STATED_PUBLIC_IP, "198.51.100.7");
    let result = api
        .run(
            reconcile(Arc::new(node), ctx_among(client, &memory, &[other])),
            async |api| {
                let warning = api.expect_event("Warning", "NodeAddressConflict").await;
                let note = warning["note"].as_str().unwrap();
                assert!(
                    note.contains("198.51.100.7") && note.contains("node-b"),
                    "{note}"
                );
            },
        )
        .await;
    assert!(result.is_err(), "the taint stays: {result:?}");
}

#[tokio::test]
async fn an_initialized_node_that_states_an_address_gets_it_at_once_and_a_bad_one_keeps_its_addresses()
 {
    let memory = MemoryCloud::new();
    let id = memory.add_server(Server::new("node-a").public_ip("203.0.113.10"));
    let node = |value: &str| {
        annotated(
            with_provider_id(
                initialized(
                    "node-a",
                    &[("Hostname", "node-a"), ("ExternalIP", "203.0.113.10")],
                ),
                &memory.provider_id(id),
            ),
            STATED_PUBLIC_IP,
            value,
        )
    };
    let (client, mut api) = mock_client();
    let result = api
        .run(
            reconcile(
                Arc::new(node("198.51.100.7")),
                ctx_among(client, &memory, &[]),
            ),
            async |api| {
                let status = api.expect("PATCH", "/api/v1/nodes/node-a/status").await;
                assert_eq!(
                    status.body["status"]["addresses"][1],
                    json!({"type": "ExternalIP", "address": "198.51.100.7"})
                );
                status.ok(&node("198.51.100.7"));
            },
        )
        .await;
    assert!(result.is_ok(), "{result:?}");

    let (client, mut api) = mock_client();
    let result = api
        .run(
            reconcile(Arc::new(node("nonsense")), ctx_among(client, &memory, &[])),
            async |api| {
                let warning = api.expect_event("Warning", INVALID_STATED_PUBLIC_IP).await;
                assert_eq!(warning["action"], "UpdateNodeAddresses");
            },
        )
        .await;
    assert!(
        result.is_ok(),
        "nothing to retry until the annotation changes: {result:?}"
    );
}

/// The reconciler with `--accept-node-ip-outside-cloud`.
fn ctx_accepting(client: kube::Client, cloud: &Arc<MemoryCloud>) -> Arc<NodeReconciler> {
    Arc::new(reconciler(client, cloud, &[]).accepting_node_ips_outside_cloud(true))
}

/// Mirrors `a_node_ip_outside_the_cloud_stands_when_accepted_and_the_node_stays_tainted_without`.
#[tokio::test]
async fn an_accepted_node_ip_outside_the_cloud_is_the_first_internal_ip() {
    let memory = MemoryCloud::new();
    memory.add_server(
        Server::new("node-a")
            .public_ip("203.0.113.10")
            .private_ip("10.0.0.10"),
    );
    let (client, mut api) = mock_client();
    let node = annotated(uninitialized("node-a"), NODE_IP, "100.64.0.5");
    let result = api
        .run(
            reconcile(Arc::new(node.clone()), ctx_accepting(client, &memory)),
            async |api| {
                let status = answer_init(api, &node).await;
                assert_eq!(status.line(), "PATCH /api/v1/nodes/node-a/status");
                assert_eq!(
                    status.body["status"]["addresses"],
                    json!([
                        {"type": "InternalIP", "address": "100.64.0.5"},
                        {"type": "Hostname", "address": "node-a"},
                        {"type": "ExternalIP", "address": "203.0.113.10"},
                        {"type": "InternalIP", "address": "10.0.0.10"},
                    ])
                );
                status.ok(&node);
                api.expect_event("Normal", "Synced").await;
                let said = api.expect_event("Normal", "NodeIPOutsideCloud").await;
                let note = said["note"].as_str().unwrap();
                assert!(
                    note.contains("100.64.0.5") && note.contains("--accept-node-ip-outside-cloud"),
                    "{note}"
                );
            },
        )
        .await;
    assert!(result.is_ok(), "{result:?}");

    // Without the opt-in: upstream's rule, and the Warning names the way out.
    let (client, mut api) = mock_client();
    let result = api
        .run(
            reconcile(Arc::new(node.clone()), ctx(client, &memory)),
            async |api| {
                let warning = api.expect_event("Warning", "NodeIPNotFound").await;
                let note = warning["note"].as_str().unwrap();
                assert!(note.contains("--accept-node-ip-outside-cloud"), "{note}");
            },
        )
        .await;
    assert!(result.is_err());
}

#[tokio::test]
async fn the_opt_in_label_on_a_node_whose_ip_is_the_servers_own_says_it_is_unneeded() {
    let memory = MemoryCloud::new();
    memory.add_server(Server::new("node-a").private_ip("10.0.0.10"));
    let (client, mut api) = mock_client();
    let mut node = annotated(uninitialized("node-a"), NODE_IP, "10.0.0.10");
    node.metadata.labels = Some(BTreeMap::from([(
        "cloud-controllers.io/node-ip-outside-cloud".to_owned(),
        "accept".to_owned(),
    )]));
    let result = api
        .run(
            reconcile(Arc::new(node.clone()), ctx(client, &memory)),
            async |api| {
                api.expect_event("Warning", "NodeIPOutsideCloudUnneeded")
                    .await;
                let patch = api.expect("PATCH", "/api/v1/nodes/node-a").await;
                let body = patch.body.clone();
                patch.ok(&patched(&node, &body));
                // kubelet's addresses are already the server's: no status write.
                api.expect_event("Normal", "Synced").await;
            },
        )
        .await;
    assert!(result.is_ok(), "initialized all the same: {result:?}");
}
