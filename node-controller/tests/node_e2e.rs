//! End-to-end tests of the node controller: real kube-apiserver (testenv), cloud-sim over HTTP, the
//! controller in-process through its library entry point.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use cloud_client::{Cloud, CloudError, InstanceMetadata, Instances, NodeRef};
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::{Patch, PatchParams};
use test_support::e2e::process::{Binary, assert_leads_then_releases_on_sigterm};
use test_support::e2e::run::{cloud_for, cloud_with, spawn, test_config};
use test_support::e2e::{
    NodeSpecT, T, create_node, event_with_reason, eventually, get_node, has_taint, unique,
};

fn label(n: &Node, k: &str) -> Option<String> {
    n.metadata.labels.as_ref().and_then(|l| l.get(k).cloned())
}

fn addresses(n: &Node) -> Vec<(String, String)> {
    n.status
        .as_ref()
        .and_then(|s| s.addresses.as_ref())
        .map(|a| {
            a.iter()
                .map(|a| (a.type_.clone(), a.address.clone()))
                .collect()
        })
        .unwrap_or_default()
}

/// The Node's addresses once its server's are written. kubelet registers a Node with its node IP
/// and hostname, and the initialization removes the taint before it writes the addresses, so an
/// initialized Node may not have them yet.
async fn server_addresses(client: &kube::Client, name: &str) -> Vec<(String, String)> {
    eventually(&format!("node {name}'s server addresses"), T, || async {
        let a = addresses(&get_node(client, name).await?);
        a.iter().any(|(t, _)| t == "ExternalIP").then_some(a)
    })
    .await
}

async fn start_node_controller(
    client: kube::Client,
    run: &str,
    cloud: Cloud,
) -> test_support::e2e::run::Running {
    let cfg = test_config(&node_controller::INFO, run);
    spawn(&node_controller::INFO, cfg, client, move |rt| {
        node_controller::start(rt, cloud, Default::default())
    })
    .await
}

async fn initialized(client: &kube::Client, name: &str) -> Node {
    eventually(&format!("node {name} initialized"), T, || async {
        get_node(client, name)
            .await
            .filter(|n| !has_taint(n, test_support::e2e::UNINITIALIZED))
    })
    .await
}

/// Creates a server and its tainted Node, waits for initialization, and checks that the `Synced`
/// event was reported by controller instance `instance` (i.e. that replica was the one reconciling).
async fn node_initialized_by(
    admin: &kube::Client,
    sim: &cloud_sim::Sim,
    run: &str,
    instance: &str,
) {
    let name = unique("node");
    test_support::e2e::sim::create_server(sim, &name).await;
    let spec = NodeSpecT {
        tainted: true,
        ..Default::default()
    };
    create_node(admin, run, &name, spec).await;
    initialized(admin, &name).await;
    let ev = eventually("Synced event", T, || {
        event_with_reason(admin, &name, "Synced")
    })
    .await;
    assert_eq!(ev.reporting_instance.as_deref(), Some(instance));
}

#[tokio::test]
async fn initializes_node_with_labels_addresses_provider_id_and_removes_taint() {
    let k = testenv::kube().await;
    let client = k.client().await;
    let sim = cloud_sim::Sim::start().await;
    let run = unique("init");
    let name = unique("node");
    let server = test_support::e2e::sim::create_server(&sim, &name).await;
    let ctl = start_node_controller(client.clone(), &run, cloud_for(&sim).await).await;

    create_node(
        &client,
        &run,
        &name,
        NodeSpecT {
            tainted: true,
            node_ip: Some(server.ipv4.clone()),
            ..Default::default()
        },
    )
    .await;
    let n = initialized(&client, &name).await;

    assert_eq!(
        n.spec.as_ref().unwrap().provider_id.as_deref(),
        Some(format!("hcloud://{}", server.id).as_str())
    );
    for k in [
        "node.kubernetes.io/instance-type",
        "beta.kubernetes.io/instance-type",
    ] {
        assert_eq!(
            label(&n, k).as_deref(),
            Some(server.server_type.as_str()),
            "{k}"
        );
    }
    for k in [
        "topology.kubernetes.io/region",
        "failure-domain.beta.kubernetes.io/region",
    ] {
        assert_eq!(
            label(&n, k).as_deref(),
            Some(server.location.as_str()),
            "{k}"
        );
    }
    assert!(label(&n, "topology.kubernetes.io/zone").is_some());
    assert_eq!(
        label(&n, "failure-domain.beta.kubernetes.io/zone"),
        label(&n, "topology.kubernetes.io/zone")
    );
    assert_eq!(
        label(&n, "instance.hetzner.cloud/provided-by").as_deref(),
        Some("cloud")
    );

    let addrs = server_addresses(&client, &name).await;
    assert_eq!(
        addrs[0],
        ("ExternalIP".to_string(), server.ipv4.clone()),
        "node IP first: {addrs:?}"
    );
    assert!(
        addrs.contains(&("Hostname".to_string(), name.clone())),
        "{addrs:?}"
    );

    let ev = eventually("Synced event", T, || {
        event_with_reason(&client, &name, "Synced")
    })
    .await;
    assert_eq!(ev.type_.as_deref(), Some("Normal"));
    assert_eq!(
        ev.reporting_controller.as_deref(),
        Some("cloud-node-controller")
    );

    let metrics = ctl.metrics().await;
    assert!(
        metrics.contains("\nnode_controller_cloud_provider_taint_removal_delay_seconds_count 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("cloud_controllers_cloud_api_requests_total{"),
        "{metrics}"
    );
    ctl.stop().await.unwrap();
}

#[tokio::test]
async fn existing_provider_id_is_used_and_never_overwritten() {
    let k = testenv::kube().await;
    let client = k.client().await;
    let sim = cloud_sim::Sim::start().await;
    let run = unique("pid");
    let server = test_support::e2e::sim::create_server(&sim, &unique("srv")).await;
    let name = unique("node-other-name");
    let ctl = start_node_controller(client.clone(), &run, cloud_for(&sim).await).await;

    let pid = format!("hcloud://{}", server.id);
    create_node(
        &client,
        &run,
        &name,
        NodeSpecT {
            tainted: true,
            provider_id: Some(pid.clone()),
            ..Default::default()
        },
    )
    .await;
    let n = initialized(&client, &name).await;
    assert_eq!(
        n.spec.as_ref().unwrap().provider_id.as_deref(),
        Some(pid.as_str())
    );
    assert_eq!(
        label(&n, "node.kubernetes.io/instance-type").as_deref(),
        Some(server.server_type.as_str())
    );
    ctl.stop().await.unwrap();
}

#[tokio::test]
async fn node_ip_mismatch_keeps_taint_and_warns_with_cloud_addresses() {
    let k = testenv::kube().await;
    let client = k.client().await;
    let sim = cloud_sim::Sim::start().await;
    let run = unique("nodeip");
    let name = unique("node");
    let server = test_support::e2e::sim::create_server(&sim, &name).await;
    let ctl = start_node_controller(client.clone(), &run, cloud_for(&sim).await).await;

    create_node(
        &client,
        &run,
        &name,
        NodeSpecT {
            tainted: true,
            node_ip: Some("10.99.99.99".into()),
            ..Default::default()
        },
    )
    .await;
    let ev = eventually("NodeIPNotFound warning", T, || {
        event_with_reason(&client, &name, "NodeIPNotFound")
    })
    .await;
    assert_eq!(ev.type_.as_deref(), Some("Warning"));
    let note = ev.note.unwrap_or_default();
    assert!(
        note.contains("10.99.99.99") && note.contains(&server.ipv4),
        "{note}"
    );
    let n = get_node(&client, &name).await.unwrap();
    assert!(
        has_taint(&n, test_support::e2e::UNINITIALIZED),
        "taint must stay"
    );
    assert!(
        n.spec.as_ref().unwrap().provider_id.is_none(),
        "nothing written half-way"
    );

    // An invalid annotation is bad input: a Warning, the controller keeps running.
    let bad = unique("node-bad");
    test_support::e2e::sim::create_server(&sim, &bad).await;
    create_node(
        &client,
        &run,
        &bad,
        NodeSpecT {
            tainted: true,
            node_ip: Some("not-an-ip".into()),
            ..Default::default()
        },
    )
    .await;
    eventually("InvalidNodeIP warning", T, || {
        event_with_reason(&client, &bad, "InvalidNodeIP")
    })
    .await;
    assert!(ctl.metrics().await.contains(r#"reason="InvalidNodeIP""#));
    ctl.stop().await.unwrap();
}

#[tokio::test]
async fn server_not_found_keeps_taint_and_warns_listing_what_was_tried() {
    let k = testenv::kube().await;
    let client = k.client().await;
    let sim = cloud_sim::Sim::start().await;
    let run = unique("notfound");
    let name = unique("ghost");
    let ctl = start_node_controller(client.clone(), &run, cloud_for(&sim).await).await;
    create_node(
        &client,
        &run,
        &name,
        NodeSpecT {
            tainted: true,
            ..Default::default()
        },
    )
    .await;
    let ev = eventually("ServerNotFound warning", T, || {
        event_with_reason(&client, &name, "ServerNotFound")
    })
    .await;
    assert_eq!(ev.type_.as_deref(), Some("Warning"));
    assert!(
        ev.note.unwrap_or_default().contains(&name),
        "the message names what was tried"
    );
    assert!(has_taint(
        &get_node(&client, &name).await.unwrap(),
        test_support::e2e::UNINITIALIZED
    ));
    eventually("backlog gauge shows the stuck node", T, || async {
        ctl.metrics()
            .await
            .contains("cloud_controllers_node_controller_uninitialized_nodes 1")
            .then_some(())
    })
    .await;
    ctl.stop().await.unwrap();
}

/// Bad input on the Node itself: a malformed providerID and one for servers this cloud cannot serve
/// (Hetzner dedicated servers). Each gets a Warning naming the problem and a bad-input metric; the
/// taint stays and the controller keeps initializing other nodes.
#[tokio::test]
async fn bad_provider_ids_warn_and_keep_the_taint() {
    let k = testenv::kube().await;
    let client = k.client().await;
    let sim = cloud_sim::Sim::start().await;
    let run = unique("badpid");
    let ctl = start_node_controller(client.clone(), &run, cloud_for(&sim).await).await;
    for (provider_id, expected_in_note) in [
        ("hcloud://not-a-number", "not-a-number"),
        ("hrobot://5", "hrobot://5"),
    ] {
        let name = unique("badpid");
        let spec = NodeSpecT {
            tainted: true,
            provider_id: Some(provider_id.into()),
            ..Default::default()
        };
        create_node(&client, &run, &name, spec).await;
        let ev = eventually("UnknownProviderIDPrefix warning", T, || {
            event_with_reason(&client, &name, "UnknownProviderIDPrefix")
        })
        .await;
        assert_eq!(ev.type_.as_deref(), Some("Warning"));
        let note = ev.note.unwrap_or_default();
        assert!(note.contains(expected_in_note), "{provider_id}: {note}");
        let node = get_node(&client, &name).await.unwrap();
        assert!(
            has_taint(&node, test_support::e2e::UNINITIALIZED),
            "{provider_id}"
        );
        assert_eq!(
            node.spec.and_then(|s| s.provider_id).as_deref(),
            Some(provider_id)
        );
    }
    eventually("bad-input metric counts both nodes", T, || async {
        let m = ctl.metrics().await;
        m.lines()
            .any(|l| {
                l.contains("bad_input_warnings_total")
                    && l.contains("UnknownProviderIDPrefix")
                    && l.ends_with(" 2")
            })
            .then_some(())
    })
    .await;

    // The controller is still working: a good node next to the bad ones initializes.
    let good = unique("node");
    test_support::e2e::sim::create_server(&sim, &good).await;
    let spec = NodeSpecT {
        tainted: true,
        ..Default::default()
    };
    create_node(&client, &run, &good, spec).await;
    initialized(&client, &good).await;
    ctl.stop().await.unwrap();
}

/// Cloud instances that add labels in reserved domains (the Hetzner provider itself never does).
struct ExtraLabels(Arc<dyn Instances>);

#[async_trait]
impl Instances for ExtraLabels {
    async fn instance_exists(&self, node: &NodeRef) -> Result<bool, CloudError> {
        self.0.instance_exists(node).await
    }
    async fn instance_shutdown(&self, node: &NodeRef) -> Result<bool, CloudError> {
        self.0.instance_shutdown(node).await
    }
    async fn instance_metadata(&self, node: &NodeRef) -> Result<InstanceMetadata, CloudError> {
        let mut m = self.0.instance_metadata(node).await?;
        let extra: BTreeMap<String, String> = [
            ("node.kubernetes.io/sneaky", "x"),
            ("k8s.io/sneaky", "x"),
            ("example.com/allowed", "yes"),
            ("example.com/user-owned", "cloud"),
        ]
        .into_iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
        m.additional_labels.extend(extra);
        Ok(m)
    }
}

#[tokio::test]
async fn reserved_domain_labels_are_dropped_and_user_labels_kept() {
    let k = testenv::kube().await;
    let client = k.client().await;
    let sim = cloud_sim::Sim::start().await;
    let run = unique("labels");
    let name = unique("node");
    test_support::e2e::sim::create_server(&sim, &name).await;
    let mut cloud = cloud_for(&sim).await;
    cloud.instances = Some(Arc::new(ExtraLabels(cloud.instances.clone().unwrap())));
    let ctl = start_node_controller(client.clone(), &run, cloud).await;
    let labels = [("example.com/user-owned".to_string(), "user".to_string())].into();
    create_node(
        &client,
        &run,
        &name,
        NodeSpecT {
            tainted: true,
            labels,
            ..Default::default()
        },
    )
    .await;
    let n = initialized(&client, &name).await;
    assert_eq!(label(&n, "example.com/allowed").as_deref(), Some("yes"));
    assert_eq!(
        label(&n, "example.com/user-owned").as_deref(),
        Some("user"),
        "never overwrites user labels"
    );
    assert!(label(&n, "node.kubernetes.io/sneaky").is_none());
    assert!(label(&n, "k8s.io/sneaky").is_none());
    ctl.stop().await.unwrap();
}

#[tokio::test]
async fn stable_labels_follow_beta_labels_on_initialized_nodes() {
    let k = testenv::kube().await;
    let client = k.client().await;
    let sim = cloud_sim::Sim::start().await;
    let run = unique("beta");
    let name = unique("node");
    let ctl = start_node_controller(client.clone(), &run, cloud_for(&sim).await).await;
    let labels: BTreeMap<String, String> = [
        ("failure-domain.beta.kubernetes.io/zone", "fsn1-dc14"),
        ("topology.kubernetes.io/zone", "edited-by-user"),
        ("beta.kubernetes.io/instance-type", "cx22"),
    ]
    .into_iter()
    .map(|(a, b)| (a.to_string(), b.to_string()))
    .collect();
    create_node(
        &client,
        &run,
        &name,
        NodeSpecT {
            tainted: false,
            labels,
            ..Default::default()
        },
    )
    .await;
    let n = eventually("stable labels reconciled", T, || async {
        get_node(&client, &name).await.filter(|n| {
            label(n, "topology.kubernetes.io/zone").as_deref() == Some("fsn1-dc14")
                && label(n, "node.kubernetes.io/instance-type").as_deref() == Some("cx22")
        })
    })
    .await;
    assert!(
        label(&n, "topology.kubernetes.io/region").is_none(),
        "no beta region, no stable region"
    );
    ctl.stop().await.unwrap();
}

#[tokio::test]
async fn periodic_address_sync_repairs_changed_addresses() {
    let k = testenv::kube().await;
    let client = k.client().await;
    let sim = cloud_sim::Sim::start().await;
    let run = unique("addr");
    let name = unique("node");
    let server = test_support::e2e::sim::create_server(&sim, &name).await;
    let cfg = test_config(&node_controller::INFO, &run);
    let settings = node_controller::Settings {
        address_sync_period: Duration::from_millis(500),
        ..Default::default()
    };
    let cloud = cloud_for(&sim).await;
    let ctl = spawn(&node_controller::INFO, cfg, client.clone(), move |rt| {
        node_controller::start(rt, cloud, settings)
    })
    .await;

    create_node(
        &client,
        &run,
        &name,
        NodeSpecT {
            tainted: false,
            provider_id: Some(format!("hcloud://{}", server.id)),
            ..Default::default()
        },
    )
    .await;
    // Untainted node with stale addresses: the periodic sync replaces the whole list.
    Api::<Node>::all(client.clone())
        .patch_status(
            &name,
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"status": {"addresses": [{"type": "ExternalIP", "address": "192.0.2.1"}, {"type": "InternalIP", "address": "10.1.1.1"}]}})),
        )
        .await
        .unwrap();
    let addrs = eventually("addresses synced from the cloud", T, || async {
        let a = addresses(&get_node(&client, &name).await?);
        a.contains(&("ExternalIP".to_string(), server.ipv4.clone()))
            .then_some(a)
    })
    .await;
    assert!(
        !addrs
            .iter()
            .any(|(_, a)| a == "192.0.2.1" || a == "10.1.1.1"),
        "replace semantics: {addrs:?}"
    );
    ctl.stop().await.unwrap();
}

fn is_leader(metrics: &str) -> bool {
    metrics.contains(r#"cloud_controllers_leader{controller="node-controller"} 1"#)
}

/// A shadow (`--dry-run`) next to the acting controller, both with only the chart's RBAC: each holds
/// its own Lease (the shadow's named `…-dry-run`, as its configuration names it), so both lead at
/// once; the acting one initializes the Node, the shadow only plans.
#[tokio::test]
async fn a_shadow_leads_its_own_lease_beside_the_acting_controller() {
    let k = testenv::kube().await;
    let admin = k.client().await;
    let sim = cloud_sim::Sim::start().await;
    let run = unique("shadow-le");
    let ns = unique("nc-shadow");
    let sa = test_support::e2e::chart_service_account(&k, &admin, "node-controller", &ns).await;

    let mut shadow_cfg = test_config(&node_controller::INFO, &run);
    let mut lease = test_support::e2e::run::lease(&node_controller::INFO, &ns, "shadow");
    lease.lease_name.push_str("-dry-run");
    shadow_cfg.leader_election = Some(lease);
    test_support::e2e::run::shadow(&mut shadow_cfg);
    let shadow_cloud =
        test_support::e2e::run::cloud_of(test_support::e2e::run::sim_config(&sim), &shadow_cfg)
            .await;
    let shadow = spawn(&node_controller::INFO, shadow_cfg, sa.clone(), move |rt| {
        node_controller::start(rt, shadow_cloud, Default::default())
    })
    .await;
    let mut acting_cfg = test_config(&node_controller::INFO, &run);
    acting_cfg.leader_election = Some(test_support::e2e::run::lease(
        &node_controller::INFO,
        &ns,
        "acting",
    ));
    let acting_cloud = cloud_for(&sim).await;
    let acting = spawn(&node_controller::INFO, acting_cfg, sa, move |rt| {
        node_controller::start(rt, acting_cloud, Default::default())
    })
    .await;

    eventually("both lead", T, || async {
        (is_leader(&shadow.metrics().await) && is_leader(&acting.metrics().await)).then_some(())
    })
    .await;
    node_initialized_by(&admin, &sim, &run, "acting").await;
    let planned = test_support::e2e::run::planned_writes(shadow.admin).await;
    assert!(
        planned.iter().all(|e| e["api"] == "kubernetes"),
        "node-controller makes no cloud write: {planned:#?}"
    );
    shadow.stop().await.unwrap();
    acting.stop().await.unwrap();
}

/// Two instances with only the chart's RBAC (impersonated ServiceAccount): one leads and reconciles,
/// the standby stays ready and idle; cancelling the leader releases the Lease and the standby takes over.
#[tokio::test]
async fn leader_election_with_chart_rbac_one_active_then_failover() {
    let k = testenv::kube().await;
    let admin = k.client().await;
    let sim = cloud_sim::Sim::start().await;
    let run = unique("le");
    let ns = unique("nc-rbac");
    let sa = test_support::e2e::chart_service_account(&k, &admin, "node-controller", &ns).await;

    let start = |id: &'static str| {
        let sa = sa.clone();
        let run = run.clone();
        let ns = ns.clone();
        let sim = &sim;
        async move {
            let mut cfg = test_config(&node_controller::INFO, &run);
            cfg.leader_election = Some(test_support::e2e::run::lease(
                &node_controller::INFO,
                &ns,
                id,
            ));
            let cloud = cloud_for(sim).await;
            spawn(&node_controller::INFO, cfg, sa, move |rt| {
                node_controller::start(rt, cloud, Default::default())
            })
            .await
        }
    };
    let a = start("instance-a").await;
    let b = start("instance-b").await;

    let a_leads = eventually("exactly one leader", T, || async {
        let (ma, mb) = (a.metrics().await, b.metrics().await);
        (is_leader(&ma) != is_leader(&mb)).then(|| is_leader(&ma))
    })
    .await;
    let (leader, standby, leader_id, standby_id) = if a_leads {
        (a, b, "instance-a", "instance-b")
    } else {
        (b, a, "instance-b", "instance-a")
    };
    assert!(
        test_support::e2e::run::http_get(standby.admin, "/readyz")
            .await
            .lines()
            .next()
            .unwrap_or_default()
            .contains(" 200 "),
        "a standby is ready"
    );

    node_initialized_by(&admin, &sim, &run, leader_id).await;
    let sm = standby.metrics().await;
    assert!(!is_leader(&sm));
    assert!(
        !sm.contains(r#"result="ok"}"#),
        "the standby reconciles nothing: {sm}"
    );

    // Graceful stop releases the Lease; the standby takes over well before the lease would expire.
    leader.stop().await.unwrap();
    eventually("standby became leader", T, || async {
        is_leader(&standby.metrics().await).then_some(())
    })
    .await;
    node_initialized_by(&admin, &sim, &run, standby_id).await;
    standby.stop().await.unwrap();
}

/// Another holder taking the Lease stops the leader at once with `LeaseLost` (the binary exits 1).
#[tokio::test]
async fn losing_the_lease_stops_the_controller_with_an_error() {
    use k8s_openapi::api::coordination::v1::Lease;
    let k = testenv::kube().await;
    let admin = k.client().await;
    let sim = cloud_sim::Sim::start().await;
    let run = unique("lost");
    let ns = unique("lease-lost");
    test_support::e2e::ensure_namespace(&admin, &ns).await;
    let mut cfg = test_config(&node_controller::INFO, &run);
    let le = test_support::e2e::run::lease(&node_controller::INFO, &ns, "victim");
    let lease_name = le.lease_name.clone();
    cfg.leader_election = Some(le);
    let cloud = cloud_for(&sim).await;
    let ctl = spawn(&node_controller::INFO, cfg, admin.clone(), move |rt| {
        node_controller::start(rt, cloud, Default::default())
    })
    .await;
    eventually("leader", T, || async {
        is_leader(&ctl.metrics().await).then_some(())
    })
    .await;

    let now = k8s_openapi::jiff::Timestamp::now();
    Api::<Lease>::namespaced(admin.clone(), &ns)
        .patch(
            &lease_name,
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"spec": {
                "holderIdentity": "intruder",
                "renewTime": k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(now),
                "leaseDurationSeconds": 60,
            }})),
        )
        .await
        .unwrap();
    let result = tokio::time::timeout(T, ctl.task)
        .await
        .expect("the controller stops after losing the Lease")
        .unwrap();
    assert!(
        matches!(result, Err(controller_kit::RunError::LeaseLost(_))),
        "{result:?}"
    );
}

/// The built binary: initializes a node, and on SIGTERM exits 0 and releases its Lease.
#[tokio::test]
async fn binary_initializes_and_releases_the_lease_on_sigterm() {
    let k = testenv::kube().await;
    let admin = k.client().await;
    let sim = cloud_sim::Sim::start().await;
    let run = unique("bin");
    let ns = unique("bin-lease");
    test_support::e2e::ensure_namespace(&admin, &ns).await;
    let name = unique("node");
    test_support::e2e::sim::create_server(&sim, &name).await;

    let mut child = Binary::new(env!("CARGO_BIN_EXE_node-controller"), &k)
        .leader_elect(&ns)
        .nodes_of(&run)
        .sim(&sim)
        .spawn();

    create_node(
        &admin,
        &run,
        &name,
        NodeSpecT {
            tainted: true,
            ..Default::default()
        },
    )
    .await;
    initialized(&admin, &name).await;
    assert_leads_then_releases_on_sigterm(&mut child, &admin, &ns, "node-controller").await;
}

/// The chart's role lets the node-controller patch Nodes, but it never deletes one (that is the
/// lifecycle-controller's job) and never reads Secrets: the apiserver refuses both with 403.
#[tokio::test]
async fn chart_rbac_refuses_deleting_nodes_and_reading_secrets() {
    use k8s_openapi::api::core::v1::Secret;
    use kube::api::{DeleteParams, ListParams};
    use test_support::e2e::forbidden;
    let k = testenv::kube().await;
    let admin = k.client().await;
    let run = unique("rbac-deny");
    let ns = unique("nc-deny");
    let sa = test_support::e2e::chart_service_account(&k, &admin, "node-controller", &ns).await;
    let name = unique("node");
    create_node(&admin, &run, &name, NodeSpecT::default()).await;
    let nodes: Api<Node> = Api::all(sa.clone());

    // What it needs is allowed, so the refusals below are the role's, not a broken identity.
    nodes
        .patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"metadata": {"labels": {"x": "y"}}})),
        )
        .await
        .expect("the chart role may patch Nodes");

    let refused = nodes.delete(&name, &DeleteParams::default()).await;
    assert!(forbidden(&refused), "deleting a Node: {refused:?}");
    assert!(get_node(&admin, &name).await.is_some(), "still there");
    let refused = Api::<Secret>::namespaced(sa, &ns)
        .list(&ListParams::default())
        .await;
    assert!(forbidden(&refused), "listing Secrets: {refused:?}");
}

/// A dedicated server's Node (no providerID, named like the server, kubelet's `--node-ip` a
/// private vSwitch address) is initialized as HCCM does it: `hrobot://` providerID, the product
/// as instance type, the data center as zone and its location as region, `provided-by=robot`,
/// and the Node's own InternalIP kept (`ROBOT_FORWARD_INTERNAL_IPS`).
#[tokio::test]
async fn robot_node_is_initialized_as_hccm_does() {
    let k = testenv::kube().await;
    let client = k.client().await;
    let sim = cloud_sim::Sim::start().await;
    let run = unique("robot");
    let name = unique("bm");
    let number = sim
        .client()
        .create_robot_server(&name, "AX41-NVMe", "FSN1-DC14")
        .await
        .unwrap();
    let cloud =
        test_support::e2e::run::cloud_with(test_support::e2e::run::sim_config_with_robot(&sim))
            .await;
    let ctl = start_node_controller(client.clone(), &run, cloud).await;
    create_node(
        &client,
        &run,
        &name,
        NodeSpecT {
            tainted: true,
            node_ip: Some("10.1.0.7".into()),
            ..Default::default()
        },
    )
    .await;
    let n = initialized(&client, &name).await;
    assert_eq!(
        n.spec.as_ref().unwrap().provider_id.as_deref(),
        Some(format!("hrobot://{number}").as_str())
    );
    for (key, value) in [
        ("node.kubernetes.io/instance-type", "AX41-NVMe"),
        ("topology.kubernetes.io/zone", "fsn1-dc14"),
        ("topology.kubernetes.io/region", "fsn1"),
        ("instance.hetzner.cloud/provided-by", "robot"),
    ] {
        assert_eq!(label(&n, key).as_deref(), Some(value), "{key}");
    }
    let addresses = server_addresses(&client, &name).await;
    assert!(
        addresses.contains(&("InternalIP".into(), "10.1.0.7".into()))
            && addresses.contains(&("Hostname".into(), name.clone()))
            && addresses.iter().any(|(t, _)| t == "ExternalIP"),
        "{addresses:?}"
    );
    let metrics = ctl.metrics().await;
    assert!(
        metrics.contains(r#"cloud_controllers_robot_api_requests_total{endpoint="/server",method="GET",status="200"} 1"#),
        "one Robot server list, counted apart: {metrics}"
    );
    ctl.stop().await.unwrap();
}

const EXTERNAL_IPV6: &str = "instance.hetzner.cloud/external-ipv6";

/// A tainted Node for `name` that states `external_ipv6`.
async fn node_stating(client: &kube::Client, run: &str, name: &str, external_ipv6: &str) {
    let spec = NodeSpecT {
        tainted: true,
        annotations: BTreeMap::from([(EXTERNAL_IPV6.to_owned(), external_ipv6.to_owned())]),
        ..Default::default()
    };
    create_node(client, run, name, spec).await;
}

/// `cfg` with `HCLOUD_INSTANCES_ADDRESS_FAMILY=dualstack`.
fn dual_stack(mut cfg: cloud_client::hcloud::HcloudConfig) -> cloud_client::hcloud::HcloudConfig {
    cfg.instances.address_family = cloud_client::hcloud::AddressFamily::DualStack;
    cfg
}

fn ipv6_external(n: &Node) -> Vec<String> {
    addresses(n)
        .into_iter()
        .filter(|(t, a)| t == "ExternalIP" && a.contains(':'))
        .map(|(_, a)| a)
        .collect()
}

/// HCCM v1.37's `instance.hetzner.cloud/external-ipv6`, dual-stack: the stated address replaces
/// the derived `<prefix>::1`; a bad value, or another Node's address, writes nothing and says so.
#[tokio::test]
async fn external_ipv6_states_the_nodes_address_and_a_bad_one_changes_nothing() {
    let k = testenv::kube().await;
    let client = k.client().await;
    let sim = cloud_sim::Sim::start().await;
    let run = unique("v6");
    let cfg = dual_stack(test_support::e2e::run::sim_config(&sim));
    let ctl = start_node_controller(client.clone(), &run, cloud_with(cfg).await).await;

    // Stated: the Node's IPv6 ExternalIP is the one it states, not the server's ::1.
    let a = unique("node");
    test_support::e2e::sim::create_server(&sim, &a).await;
    node_stating(&client, &run, &a, "2001:db8:ffff::abcd").await;
    let n = initialized(&client, &a).await;
    let stated = eventually("the stated IPv6 written", T, || async {
        let v6 = ipv6_external(&get_node(&client, &a).await?);
        (!v6.is_empty()).then_some(v6)
    })
    .await;
    assert_eq!(stated, ["2001:db8:ffff::abcd"], "{:?}", addresses(&n));

    // Changed to a subnet: a Warning naming the annotation; the addresses stay.
    let api: Api<Node> = Api::all(client.clone());
    let before = addresses(&get_node(&client, &a).await.unwrap());
    api.patch(
        &a,
        &PatchParams::default(),
        &Patch::Merge(
            serde_json::json!({"metadata": {"annotations": {EXTERNAL_IPV6: "2001:db8::/64"}}}),
        ),
    )
    .await
    .unwrap();
    let warning = eventually("InvalidExternalIPv6", T, || {
        event_with_reason(&client, &a, "InvalidExternalIPv6")
    })
    .await;
    let note = warning.note.unwrap_or_default();
    assert!(
        note.contains(EXTERNAL_IPV6) && note.contains("a subnet"),
        "{note}"
    );
    assert_eq!(addresses(&get_node(&client, &a).await.unwrap()), before);

    // Another Node states A's address: it stays tainted, told whose address it is.
    let b = unique("node");
    test_support::e2e::sim::create_server(&sim, &b).await;
    node_stating(&client, &run, &b, "2001:db8:ffff::abcd").await;
    let warning = eventually("NodeAddressConflict", T, || {
        event_with_reason(&client, &b, "NodeAddressConflict")
    })
    .await;
    let note = warning.note.unwrap_or_default();
    assert!(
        note.contains(&a) && note.contains("2001:db8:ffff::abcd"),
        "{note}"
    );
    assert!(has_taint(
        &get_node(&client, &b).await.unwrap(),
        test_support::e2e::UNINITIALIZED
    ));
    ctl.stop().await.unwrap();
}

/// With HCCM's default family (ipv4) the annotation is ignored, with a Warning, and the Node is
/// initialized without an IPv6 address, as in HCCM v1.37.
#[tokio::test]
async fn external_ipv6_is_ignored_with_a_warning_when_nodes_get_no_ipv6() {
    let k = testenv::kube().await;
    let client = k.client().await;
    let sim = cloud_sim::Sim::start().await;
    let run = unique("v4");
    let ctl = start_node_controller(client.clone(), &run, cloud_for(&sim).await).await;
    let name = unique("node");
    test_support::e2e::sim::create_server(&sim, &name).await;
    node_stating(&client, &run, &name, "2001:db8:ffff::abcd").await;
    initialized(&client, &name).await;
    let warning = eventually("IgnoredExternalIPv6", T, || {
        event_with_reason(&client, &name, "IgnoredExternalIPv6")
    })
    .await;
    assert!(
        warning
            .note
            .unwrap_or_default()
            .contains("HCLOUD_INSTANCES_ADDRESS_FAMILY")
    );
    let addresses = server_addresses(&client, &name).await;
    assert!(
        addresses.iter().all(|(_, a)| !a.contains(':')),
        "{addresses:?}"
    );
    ctl.stop().await.unwrap();
}

/// A dedicated server Robot reports no IPv6 subnet for gets no IPv6 ExternalIP (HCCM before
/// v1.37 wrote the address `1`), and one that states its address gets that one.
#[tokio::test]
async fn a_robot_server_without_an_ipv6_subnet_gets_no_bogus_address_and_a_stated_one_counts() {
    let k = testenv::kube().await;
    let client = k.client().await;
    let sim = cloud_sim::Sim::start().await;
    let run = unique("robot6");
    let cfg = dual_stack(test_support::e2e::run::sim_config_with_robot(&sim));
    let ctl = start_node_controller(client.clone(), &run, cloud_with(cfg).await).await;
    let (plain, stating) = (unique("bm"), unique("bm"));
    for name in [&plain, &stating] {
        sim.client()
            .create_robot_server_with(serde_json::json!({"server_name": name, "ipv6": false}))
            .await
            .unwrap();
    }
    let spec = NodeSpecT {
        tainted: true,
        ..Default::default()
    };
    create_node(&client, &run, &plain, spec).await;
    node_stating(&client, &run, &stating, "2a01:4f8:10:20::2").await;
    initialized(&client, &plain).await;
    let addresses = server_addresses(&client, &plain).await;
    assert!(
        addresses.iter().all(|(_, a)| a != "1" && !a.contains(':')),
        "{addresses:?}"
    );
    initialized(&client, &stating).await;
    let stated = eventually("the stated IPv6 written", T, || async {
        let v6 = ipv6_external(&get_node(&client, &stating).await?);
        (!v6.is_empty()).then_some(v6)
    })
    .await;
    assert_eq!(stated, ["2a01:4f8:10:20::2"]);
    ctl.stop().await.unwrap();
}

/// kubelet `--node-ip` on a network the cloud does not know (WireGuard, Tailscale, a Robot
/// vSwitch; HCCM #4): upstream's rule keeps such a Node tainted, and the Warning names the way
/// out; the Node's label `cloud-controllers.io/node-ip-outside-cloud=accept` (or the flag, for
/// every Node) lets the IP stand as the first InternalIP, and the address sync keeps it there.
#[tokio::test]
async fn a_node_ip_outside_the_cloud_stands_when_accepted_and_the_node_stays_tainted_without() {
    let k = testenv::kube().await;
    let client = k.client().await;
    let sim = cloud_sim::Sim::start().await;
    let run = unique("wg");
    let settings = node_controller::Settings {
        address_sync_period: Duration::from_millis(500),
        ..Default::default()
    };
    let cloud = cloud_for(&sim).await;
    let ctl = spawn(
        &node_controller::INFO,
        test_config(&node_controller::INFO, &run),
        client.clone(),
        move |rt| node_controller::start(rt, cloud, settings),
    )
    .await;
    let (refused, accepted) = (unique("node"), unique("node"));
    for name in [&refused, &accepted] {
        test_support::e2e::sim::create_server(&sim, name).await;
    }
    let wireguard = |ip: &str, opt_in: bool| NodeSpecT {
        tainted: true,
        node_ip: Some(ip.to_owned()),
        labels: opt_in
            .then(|| {
                (
                    "cloud-controllers.io/node-ip-outside-cloud".to_owned(),
                    "accept".to_owned(),
                )
            })
            .into_iter()
            .collect(),
        ..NodeSpecT::default()
    };
    create_node(&client, &run, &refused, wireguard("100.64.0.5", false)).await;
    create_node(&client, &run, &accepted, wireguard("100.64.0.6", true)).await;

    let warning = eventually("NodeIPNotFound", T, || {
        event_with_reason(&client, &refused, "NodeIPNotFound")
    })
    .await;
    assert!(
        warning
            .note
            .unwrap_or_default()
            .contains("cloud-controllers.io/node-ip-outside-cloud=accept")
    );
    initialized(&client, &accepted).await;
    // kubelet registered the Node with its node IP first already; the server's addresses come in
    // the initialization's second write (the taint goes in the first), so wait for both.
    let node_ip_first = |a: &[(String, String)]| {
        a.first() == Some(&("InternalIP".to_owned(), "100.64.0.6".to_owned()))
    };
    eventually(
        "the node IP first, the server's addresses after it",
        T,
        || async {
            let a = addresses(&get_node(&client, &accepted).await?);
            (node_ip_first(&a) && a.iter().any(|(t, _)| t == "ExternalIP")).then_some(())
        },
    )
    .await;
    let said = eventually("NodeIPOutsideCloud", T, || {
        event_with_reason(&client, &accepted, "NodeIPOutsideCloud")
    })
    .await;
    assert_eq!(said.type_.as_deref(), Some("Normal"));

    // The address sync keeps it: take it away, and the next pass puts it back first.
    Api::<Node>::all(client.clone())
        .patch_status(
            &accepted,
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"status": {"addresses": [{"type": "Hostname", "address": accepted}]}})),
        )
        .await
        .unwrap();
    eventually("the node IP first again", T, || async {
        let a = addresses(&get_node(&client, &accepted).await?);
        node_ip_first(&a).then_some(())
    })
    .await;
    assert!(has_taint(
        &get_node(&client, &refused).await.unwrap(),
        test_support::e2e::UNINITIALIZED
    ));
    ctl.stop().await.unwrap();
}

/// `--api-budget-floor`: with the project's budget below it, the address sync waits (counted in
/// `deferred_work_total{kind="address_sync"}`) while a new Node is still initialized; once an
/// answer shows the budget refilled, the sync runs again and repairs what it had left.
#[tokio::test]
async fn with_the_api_budget_low_the_address_sync_waits_and_new_nodes_do_not() {
    let k = testenv::kube().await;
    let client = k.client().await;
    let sim = cloud_sim::Sim::start().await;
    // 100 of 3600 left: under 3 %, below the floor of 20 %.
    sim.set_rate_limit(3600, 100);
    let run = unique("budget");
    let mut cfg = test_config(&node_controller::INFO, &run);
    cfg.api_budget_floor = 20;
    let settings = node_controller::Settings {
        address_sync_period: Duration::from_millis(200),
        ..Default::default()
    };
    let cloud = cloud_for(&sim).await;
    let ctl = spawn(&node_controller::INFO, cfg, client.clone(), move |rt| {
        node_controller::start(rt, cloud, settings)
    })
    .await;

    // Urgent: a new Node is initialized whatever the budget (and its calls show the budget).
    let new = unique("new");
    test_support::e2e::sim::create_server(&sim, &new).await;
    let tainted = NodeSpecT {
        tainted: true,
        ..Default::default()
    };
    create_node(&client, &run, &new, tainted.clone()).await;
    initialized(&client, &new).await;

    // Deferrable: an initialized Node's stale addresses wait.
    let stale = unique("stale");
    let server = test_support::e2e::sim::create_server(&sim, &stale).await;
    let spec = NodeSpecT {
        tainted: false,
        provider_id: Some(format!("hcloud://{}", server.id)),
        ..Default::default()
    };
    create_node(&client, &run, &stale, spec).await;
    let deferred = r#"cloud_controllers_deferred_work_total{kind="address_sync"}"#;
    let seen = eventually("address syncs deferred", T, || async {
        let m = ctl.metrics().await;
        let n = metric_value(&m, deferred);
        (n >= 3.0).then_some(m)
    })
    .await;
    assert_eq!(metric_value(&seen, "cloud_controllers_api_budget_low"), 1.0);
    let addrs = addresses(&get_node(&client, &stale).await.expect("the stale node"));
    assert!(
        !addrs.iter().any(|(_, a)| *a == server.ipv4),
        "the deferred sync wrote nothing: {addrs:?}"
    );

    // The budget refills; the next answer (another new Node's) says so, and the sync resumes.
    sim.set_rate_limit(3600, 3600);
    let later = unique("later");
    test_support::e2e::sim::create_server(&sim, &later).await;
    create_node(&client, &run, &later, tainted).await;
    initialized(&client, &later).await;
    eventually("the resumed sync repaired the stale node", T, || async {
        let a = addresses(&get_node(&client, &stale).await?);
        a.contains(&("ExternalIP".to_string(), server.ipv4.clone()))
            .then_some(())
    })
    .await;
    assert_eq!(
        metric_value(&ctl.metrics().await, "cloud_controllers_api_budget_low"),
        0.0
    );
    ctl.stop().await.unwrap();
}

/// The value of the series `series` in a /metrics text, 0 when absent.
fn metric_value(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|l| {
            l.strip_prefix(series)
                .filter(|rest| rest.starts_with(' '))
                .and_then(|v| v.trim().parse().ok())
        })
        .unwrap_or(0.0)
}
