//! End-to-end tests of the lifecycle controller: real kube-apiserver (testenv), cloud-sim over HTTP,
//! the controller in-process through its library entry point.

use cloud_client::Cloud;
use cloud_client::label_selector::LabelSelector;
use lifecycle_controller::filter::NodeFilter;
use test_support::e2e::run::{cloud_for, spawn, test_config};
use test_support::e2e::{
    NodeSpecT, T, create_node, event_with_reason, eventually, get_node, has_taint, set_ready,
    unique,
};

const SHUTDOWN: &str = "node.cloudprovider.kubernetes.io/shutdown";

async fn start_lifecycle(
    client: kube::Client,
    run: &str,
    cloud: Cloud,
    filter: NodeFilter,
) -> test_support::e2e::run::Running {
    let cfg = test_config(&lifecycle_controller::INFO, run);
    spawn(&lifecycle_controller::INFO, cfg, client, move |rt| {
        lifecycle_controller::start(rt, cloud, settings(filter))
    })
    .await
}

/// `filter` with a 500 ms monitor period, so that the tests wait little.
fn settings(filter: NodeFilter) -> lifecycle_controller::Settings {
    lifecycle_controller::Settings {
        filter,
        monitor_period: std::time::Duration::from_millis(500),
    }
}

/// The value of the sample `series` (name + labels) in a metrics text, 0 when absent.
fn metric(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series).and_then(|v| v.trim().parse().ok()))
        .unwrap_or(0.0)
}

fn pid(id: u64) -> Option<String> {
    Some(format!("hcloud://{id}"))
}

async fn gone(client: &kube::Client, name: &str) {
    eventually(&format!("node {name} deleted"), T, || async {
        get_node(client, name).await.is_none().then_some(())
    })
    .await
}

#[tokio::test]
async fn not_ready_node_whose_server_is_deleted_is_deleted_and_ready_node_is_kept() {
    let k = testenv::kube().await;
    let client = k.client().await;
    let sim = cloud_sim::Sim::start().await;
    let run = unique("gone");
    let (a, b) = (unique("notready"), unique("ready"));
    let sa = test_support::e2e::sim::create_server(&sim, &a).await;
    let sb = test_support::e2e::sim::create_server(&sim, &b).await;
    create_node(
        &client,
        &run,
        &b,
        NodeSpecT {
            provider_id: pid(sb.id),
            ready: Some(true),
            ..Default::default()
        },
    )
    .await;
    create_node(
        &client,
        &run,
        &a,
        NodeSpecT {
            provider_id: pid(sa.id),
            ready: Some(false),
            ..Default::default()
        },
    )
    .await;
    test_support::e2e::sim::delete_server(&sim, sa.id).await;
    test_support::e2e::sim::delete_server(&sim, sb.id).await;
    let ctl = start_lifecycle(
        client.clone(),
        &run,
        cloud_for(&sim).await,
        NodeFilter::default(),
    )
    .await;

    gone(&client, &a).await;
    let ev = event_with_reason(&client, &a, "DeletingNode")
        .await
        .expect("DeletingNode event");
    assert_eq!(ev.type_.as_deref(), Some("Normal"));
    assert!(
        ev.note
            .unwrap_or_default()
            .contains("does not exist in the cloud provider")
    );
    // The pass that deleted `a` also saw `b`: Ready nodes are never deleted (and cost no cloud call).
    assert!(
        get_node(&client, &b).await.is_some(),
        "a Ready node must be kept"
    );
    ctl.stop().await.unwrap();
}

#[tokio::test]
async fn powered_off_server_gets_shutdown_taint_until_node_is_ready_again() {
    let k = testenv::kube().await;
    let client = k.client().await;
    let sim = cloud_sim::Sim::start().await;
    let run = unique("off");
    let name = unique("node");
    let s = test_support::e2e::sim::create_server(&sim, &name).await;
    test_support::e2e::sim::power(&sim, s.id, false).await;
    create_node(
        &client,
        &run,
        &name,
        NodeSpecT {
            provider_id: pid(s.id),
            ready: Some(false),
            ..Default::default()
        },
    )
    .await;
    let ctl = start_lifecycle(
        client.clone(),
        &run,
        cloud_for(&sim).await,
        NodeFilter::default(),
    )
    .await;

    let n = eventually("shutdown taint added", T, || async {
        get_node(&client, &name)
            .await
            .filter(|n| has_taint(n, SHUTDOWN))
    })
    .await;
    let t = n
        .spec
        .unwrap()
        .taints
        .unwrap()
        .into_iter()
        .find(|t| t.key == SHUTDOWN)
        .unwrap();
    assert_eq!(t.effect, "NoSchedule");

    test_support::e2e::sim::power(&sim, s.id, true).await;
    set_ready(&client, &name, true).await;
    eventually("shutdown taint removed", T, || async {
        get_node(&client, &name)
            .await
            .filter(|n| !has_taint(n, SHUTDOWN))
    })
    .await;
    ctl.stop().await.unwrap();
}

#[tokio::test]
async fn cloud_errors_never_delete_a_node() {
    let k = testenv::kube().await;
    let client = k.client().await;
    let sim = cloud_sim::Sim::start().await;
    let run = unique("faults");
    let name = unique("node");
    let s = test_support::e2e::sim::create_server(&sim, &name).await;
    let cloud = cloud_for(&sim).await;
    test_support::e2e::sim::delete_server(&sim, s.id).await;
    let fault = sim.faults().error_rate(None, 1.0, 503, "unavailable");
    create_node(
        &client,
        &run,
        &name,
        NodeSpecT {
            provider_id: pid(s.id),
            ready: Some(false),
            ..Default::default()
        },
    )
    .await;
    let ctl = start_lifecycle(client.clone(), &run, cloud, NodeFilter::default()).await;

    // Several passes hit the failing cloud …
    eventually("lifecycle checks failing against the cloud", T, || async {
        let m = ctl.metrics().await;
        (metric(&m, r#"cloud_controllers_reconciles_total{controller="lifecycle-controller",result="error"}"#) >= 3.0)
            .then_some(())
    })
    .await;
    // … and the node is still there.
    assert!(
        get_node(&client, &name).await.is_some(),
        "a cloud error must never delete a node"
    );
    assert!(
        event_with_reason(&client, &name, "DeletingNode")
            .await
            .is_none()
    );

    // Once the cloud answers again, the positively gone server leads to deletion.
    sim.faults().remove(fault);
    gone(&client, &name).await;
    ctl.stop().await.unwrap();
}

/// Server lists that lag (here: every list misses every server) never delete a Node: a server
/// known by providerID is asked for itself, and a Node without one is kept with a Warning saying
/// why. Only the server's own 404 deletes.
#[tokio::test]
async fn lagging_server_lists_never_delete_a_node() {
    let k = testenv::kube().await;
    let client = k.client().await;
    let sim = cloud_sim::Sim::start().await;
    let run = unique("lag");
    let (known, nameless, deleted) = (unique("known"), unique("nameless"), unique("deleted"));
    let s_known = test_support::e2e::sim::create_server(&sim, &known).await;
    let s_deleted = test_support::e2e::sim::create_server(&sim, &deleted).await;
    test_support::e2e::sim::delete_server(&sim, s_deleted.id).await;
    sim.faults().omit_items(Some("GET /servers"), 1.0);
    for (name, provider_id) in [
        (&known, pid(s_known.id)),
        (&nameless, None),
        (&deleted, pid(s_deleted.id)),
    ] {
        let spec = NodeSpecT {
            provider_id,
            ready: Some(false),
            ..Default::default()
        };
        create_node(&client, &run, name, spec).await;
    }
    let ctl = start_lifecycle(
        client.clone(),
        &run,
        cloud_for(&sim).await,
        NodeFilter::default(),
    )
    .await;

    gone(&client, &deleted).await;
    let warning = eventually("a Warning on the Node without providerID", T, || async {
        event_with_reason(&client, &nameless, "ServerNotFound").await
    })
    .await;
    let note = warning.note.unwrap_or_default();
    assert!(
        note.contains("not deleted") && note.contains(&nameless),
        "{note}"
    );
    // Several more passes saw both again: still there.
    let passes = metric(
        &ctl.metrics().await,
        r#"cloud_controllers_reconciles_total{controller="lifecycle-controller",result="ok"}"#,
    );
    eventually("more lifecycle passes", T, || async {
        let m = ctl.metrics().await;
        (metric(
            &m,
            r#"cloud_controllers_reconciles_total{controller="lifecycle-controller",result="ok"}"#,
        ) >= passes + 3.0)
            .then_some(())
    })
    .await;
    assert!(get_node(&client, &known).await.is_some(), "its server runs");
    assert!(
        get_node(&client, &nameless).await.is_some(),
        "a name proves nothing"
    );
    ctl.stop().await.unwrap();
}

#[tokio::test]
async fn excluded_hybrid_nodes_are_never_deleted() {
    let k = testenv::kube().await;
    let client = k.client().await;
    let sim = cloud_sim::Sim::start().await;
    let run = unique("hybrid");
    let (onprem, foreign, cloud_node) = (unique("onprem"), unique("foreign"), unique("cloud"));
    let labels = [("hybrid.example/on-prem".to_string(), "true".to_string())].into();
    create_node(
        &client,
        &run,
        &onprem,
        NodeSpecT {
            labels,
            ready: Some(false),
            ..Default::default()
        },
    )
    .await;
    create_node(
        &client,
        &run,
        &foreign,
        NodeSpecT {
            provider_id: Some("metal://rack1/7".into()),
            ready: Some(false),
            ..Default::default()
        },
    )
    .await;
    let s = test_support::e2e::sim::create_server(&sim, &cloud_node).await;
    create_node(
        &client,
        &run,
        &cloud_node,
        NodeSpecT {
            provider_id: pid(s.id),
            ready: Some(false),
            ..Default::default()
        },
    )
    .await;
    test_support::e2e::sim::delete_server(&sim, s.id).await;
    let filter = NodeFilter {
        exclude: Some(
            LabelSelector::parse("--exclude-nodes-selector", "hybrid.example/on-prem=true")
                .unwrap(),
        ),
        provider_id_prefixes: vec!["hcloud://".into(), "hrobot://".into()],
    };
    let ctl = start_lifecycle(client.clone(), &run, cloud_for(&sim).await, filter).await;
    gone(&client, &cloud_node).await;
    assert!(
        get_node(&client, &onprem).await.is_some(),
        "excluded by selector"
    );
    assert!(
        get_node(&client, &foreign).await.is_some(),
        "excluded by providerID prefix"
    );
    ctl.stop().await.unwrap();
}

#[tokio::test]
async fn runs_with_only_the_chart_rbac_and_leader_election() {
    let k = testenv::kube().await;
    let admin = k.client().await;
    let sim = cloud_sim::Sim::start().await;
    let run = unique("rbac");
    let ns = unique("lc-rbac");
    let sa_client =
        test_support::e2e::chart_service_account(&k, &admin, "lifecycle-controller", &ns).await;

    let (gone_node, off_node) = (unique("gone"), unique("off"));
    let s1 = test_support::e2e::sim::create_server(&sim, &gone_node).await;
    let s2 = test_support::e2e::sim::create_server(&sim, &off_node).await;
    create_node(
        &admin,
        &run,
        &gone_node,
        NodeSpecT {
            provider_id: pid(s1.id),
            ready: Some(false),
            ..Default::default()
        },
    )
    .await;
    create_node(
        &admin,
        &run,
        &off_node,
        NodeSpecT {
            provider_id: pid(s2.id),
            ready: Some(false),
            ..Default::default()
        },
    )
    .await;
    test_support::e2e::sim::delete_server(&sim, s1.id).await;
    test_support::e2e::sim::power(&sim, s2.id, false).await;

    let mut cfg = test_config(&lifecycle_controller::INFO, &run);
    cfg.leader_election = Some(test_support::e2e::run::lease(
        &lifecycle_controller::INFO,
        &ns,
        "a",
    ));
    let cloud = cloud_for(&sim).await;
    let ctl = spawn(&lifecycle_controller::INFO, cfg, sa_client, move |rt| {
        lifecycle_controller::start(rt, cloud, settings(NodeFilter::default()))
    })
    .await;
    gone(&admin, &gone_node).await;
    eventually("shutdown taint added", T, || async {
        get_node(&admin, &off_node)
            .await
            .filter(|n| has_taint(n, SHUTDOWN))
    })
    .await;
    eventually("DeletingNode event", T, || {
        event_with_reason(&admin, &gone_node, "DeletingNode")
    })
    .await;
    ctl.stop().await.unwrap();
}

/// Bad input on the Node: a malformed providerID and one for servers this cloud cannot serve. Such a
/// NotReady node is never deleted, but it gets a Warning saying why and counts as bad input. A node
/// whose server is really gone, in the same pass, proves the passes ran over all of them.
#[tokio::test]
async fn unusable_provider_ids_warn_and_are_never_deleted() {
    let k = testenv::kube().await;
    let client = k.client().await;
    let sim = cloud_sim::Sim::start().await;
    let run = unique("badpid");
    let cloud = cloud_for(&sim).await;
    let mut bad = Vec::new();
    for provider_id in ["hcloud://not-a-number", "hrobot://5"] {
        let name = unique("badpid");
        let spec = NodeSpecT {
            provider_id: Some(provider_id.into()),
            ready: Some(false),
            ..Default::default()
        };
        create_node(&client, &run, &name, spec).await;
        bad.push((name, provider_id));
    }
    let control = unique("node");
    let s = test_support::e2e::sim::create_server(&sim, &control).await;
    test_support::e2e::sim::delete_server(&sim, s.id).await;
    let spec = NodeSpecT {
        provider_id: pid(s.id),
        ready: Some(false),
        ..Default::default()
    };
    create_node(&client, &run, &control, spec).await;
    let ctl = start_lifecycle(client.clone(), &run, cloud, NodeFilter::default()).await;

    gone(&client, &control).await;
    for (name, provider_id) in &bad {
        let ev = eventually("UnknownProviderIDPrefix warning", T, || {
            event_with_reason(&client, name, "UnknownProviderIDPrefix")
        })
        .await;
        assert_eq!(ev.type_.as_deref(), Some("Warning"));
        let note = ev.note.unwrap_or_default();
        assert!(
            note.contains(provider_id.split("://").nth(1).unwrap()),
            "{note}"
        );
        assert!(
            get_node(&client, name).await.is_some(),
            "{provider_id} must never be deleted"
        );
        assert!(
            event_with_reason(&client, name, "DeletingNode")
                .await
                .is_none()
        );
    }
    let series = r#"cloud_controllers_bad_input_warnings_total{controller="lifecycle-controller",reason="UnknownProviderIDPrefix"}"#;
    eventually("bad-input metric counts both nodes", T, || async {
        (metric(&ctl.metrics().await, series) >= 2.0).then_some(())
    })
    .await;
    ctl.stop().await.unwrap();
}

/// The chart's role lets the lifecycle-controller patch and delete Nodes, and nothing else it does
/// not need: writing a Service, a Node's status (the node and route controllers own it) and reading
/// Secrets are refused with 403.
#[tokio::test]
async fn chart_rbac_refuses_services_node_status_and_secrets() {
    use k8s_openapi::api::core::v1::{Node, Secret, Service, ServicePort, ServiceSpec};
    use kube::Api;
    use kube::api::{ListParams, Patch, PatchParams, PostParams};
    use test_support::e2e::forbidden;
    let k = testenv::kube().await;
    let admin = k.client().await;
    let run = unique("rbac-deny");
    let ns = unique("lc-deny");
    let sa =
        test_support::e2e::chart_service_account(&k, &admin, "lifecycle-controller", &ns).await;
    let name = unique("node");
    create_node(&admin, &run, &name, NodeSpecT::default()).await;
    let mut svc = Service::default();
    svc.metadata.name = Some("web".into());
    svc.spec = Some(ServiceSpec {
        ports: Some(vec![ServicePort {
            port: 80,
            ..Default::default()
        }]),
        ..Default::default()
    });
    Api::<Service>::namespaced(admin.clone(), &ns)
        .create(&PostParams::default(), &svc)
        .await
        .expect("create service");
    let nodes: Api<Node> = Api::all(sa.clone());
    let labels = Patch::Merge(serde_json::json!({"metadata": {"labels": {"x": "y"}}}));

    // What it needs is allowed, so the refusals below are the role's, not a broken identity.
    nodes
        .patch(&name, &PatchParams::default(), &labels)
        .await
        .expect("the chart role may patch Nodes");

    let refused = Api::<Service>::namespaced(sa.clone(), &ns)
        .patch("web", &PatchParams::default(), &labels)
        .await;
    assert!(forbidden(&refused), "patching a Service: {refused:?}");
    let refused = nodes
        .patch_status(
            &name,
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"status": {"addresses": [{"type": "InternalIP", "address": "10.9.9.9"}]}})),
        )
        .await;
    assert!(forbidden(&refused), "patching nodes/status: {refused:?}");
    let refused = Api::<Secret>::namespaced(sa, &ns)
        .list(&ListParams::default())
        .await;
    assert!(forbidden(&refused), "listing Secrets: {refused:?}");
}

/// Dedicated servers follow the same rules: a powered-off one (its reset state says `shut off`)
/// gets the shutdown taint, and one that is gone (its own 404) has its NotReady Node deleted.
#[tokio::test]
async fn robot_nodes_are_tainted_when_shut_off_and_deleted_when_gone() {
    let k = testenv::kube().await;
    let client = k.client().await;
    let sim = cloud_sim::Sim::start().await;
    let run = unique("robot");
    let (off, gone_name) = (unique("bm-off"), unique("bm-gone"));
    let w = sim.client();
    let off_number = w
        .create_robot_server(&off, "AX41-NVMe", "FSN1-DC14")
        .await
        .unwrap();
    let gone_number = w
        .create_robot_server(&gone_name, "AX41-NVMe", "FSN1-DC14")
        .await
        .unwrap();
    for (name, number) in [(&off, off_number), (&gone_name, gone_number)] {
        create_node(
            &client,
            &run,
            name,
            NodeSpecT {
                provider_id: Some(format!("hrobot://{number}")),
                ready: Some(false),
                ..Default::default()
            },
        )
        .await;
    }
    let cloud =
        test_support::e2e::run::cloud_with(test_support::e2e::run::sim_config_with_robot(&sim))
            .await;
    let ctl = start_lifecycle(client.clone(), &run, cloud, NodeFilter::default()).await;

    w.robot_power_off(off_number).await.unwrap();
    eventually(
        "the shutdown taint on the powered-off Robot node",
        T,
        || async {
            get_node(&client, &off)
                .await
                .filter(|n| has_taint(n, SHUTDOWN))
        },
    )
    .await;
    assert!(get_node(&client, &gone_name).await.is_some());
    w.delete_robot_server(gone_number).await.unwrap();
    gone(&client, &gone_name).await;
    assert!(
        get_node(&client, &off).await.is_some(),
        "a shut-off server's Node stays"
    );
    ctl.stop().await.unwrap();
}

/// Shadow mode (`--dry-run`): a NotReady Node whose server is gone is planned for deletion, with
/// the reason, and stays; a powered-off server's taint is planned, not written.
#[tokio::test]
async fn shadow_plans_the_deletion_and_the_taint_and_writes_nothing() {
    let k = testenv::kube().await;
    let client = k.client().await;
    let sim = cloud_sim::Sim::start().await;
    let run = unique("shadow");
    let (a, b) = (unique("gone"), unique("off"));
    let sa = test_support::e2e::sim::create_server(&sim, &a).await;
    let sb = test_support::e2e::sim::create_server(&sim, &b).await;
    for (name, id) in [(&a, sa.id), (&b, sb.id)] {
        create_node(
            &client,
            &run,
            name,
            NodeSpecT {
                provider_id: pid(id),
                ready: Some(false),
                ..Default::default()
            },
        )
        .await;
    }
    test_support::e2e::sim::delete_server(&sim, sa.id).await;
    test_support::e2e::sim::power(&sim, sb.id, false).await;
    let versions = || async {
        let mut v = Vec::new();
        for name in [&a, &b] {
            let node = get_node(&client, name).await.expect("the node is kept");
            v.push(kube::ResourceExt::resource_version(&node).unwrap_or_default());
        }
        v
    };
    let before = versions().await;

    let mut config = test_config(&lifecycle_controller::INFO, &run);
    test_support::e2e::run::shadow(&mut config);
    let cloud =
        test_support::e2e::run::cloud_of(test_support::e2e::run::sim_config(&sim), &config).await;
    let ctl = spawn(
        &lifecycle_controller::INFO,
        config,
        client.clone(),
        move |rt| lifecycle_controller::start(rt, cloud, settings(NodeFilter::default())),
    )
    .await;

    let planned = eventually("the deletion and the taint planned", T, || async {
        let p = test_support::e2e::run::planned_writes(ctl.admin).await;
        (p.len() >= 2).then_some(p)
    })
    .await;
    let delete = planned
        .iter()
        .find(|e| e["operation"] == "DELETE nodes")
        .unwrap_or_else(|| panic!("{planned:#?}"));
    assert_eq!(delete["api"], "kubernetes");
    assert_eq!(delete["object"], format!("nodes {a}"));
    assert!(
        delete["reason"]
            .as_str()
            .unwrap()
            .contains("does not exist in the cloud"),
        "{delete}"
    );
    let taint = planned
        .iter()
        .find(|e| e["operation"] == "PATCH nodes")
        .unwrap_or_else(|| panic!("{planned:#?}"));
    assert_eq!(taint["object"], format!("nodes {b}"));
    // Several passes later: still planned once each, and both Nodes untouched.
    let passes = ctl.metrics().await;
    eventually("two more passes", T, || async {
        let now = ctl.metrics().await;
        (metric(
            &now,
            "cloud_controllers_reconciles_total{controller=\"lifecycle-controller\",result=\"ok\"}",
        ) >= metric(
            &passes,
            "cloud_controllers_reconciles_total{controller=\"lifecycle-controller\",result=\"ok\"}",
        ) + 2.0)
            .then_some(())
    })
    .await;
    let again = test_support::e2e::run::planned_writes(ctl.admin).await;
    assert_eq!(again.len(), planned.len(), "{again:#?}");
    assert!(again.iter().all(|e| e["count"].as_u64().unwrap() >= 1));
    assert_eq!(versions().await, before, "neither Node written");
    assert!(
        event_with_reason(&client, &a, "DeletingNode")
            .await
            .is_none(),
        "Events are sent dry: none stored"
    );
    ctl.stop().await.unwrap();
}
