//! End-to-end tests of the service controller: real kube-apiserver (testenv), cloud-sim over HTTP,
//! the controller in-process under its chart RBAC (impersonated ServiceAccount).

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use kube::ResourceExt;
use serde_json::json;
use service_controller::Settings;
use service_controller::service::ClassFilter;
use support::{
    Fixture, Options, T, annotation_patch, has_finalizer, ingress_ips, lb_ports, node_ports,
    target_ids,
};
use test_support::e2e::eventually;

fn writes_named(writes: &[(String, String)], action: &str) -> usize {
    writes.iter().filter(|(_, e)| e.ends_with(action)).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_update_delete_under_chart_rbac() {
    let fx = Fixture::start().await;
    let nodes = fx.nodes(3).await;
    let servers: Vec<u64> = nodes.iter().map(|n| n.server).collect();

    // Create: one LB with a service per port, every node a target, ingress, finalizer.
    let mark = fx.mark();
    let created = fx.service("web", &[80, 443], &[]).await;
    let svc = fx.wait_ingress("web").await;
    assert!(has_finalizer(&svc));
    let lb = fx.lb_of(&svc).await;
    assert_eq!(lb_ports(&lb), node_ports(&created));
    assert_eq!(target_ids(&lb), {
        let mut s = servers.clone();
        s.sort_unstable();
        s
    });
    assert_eq!(
        ingress_ips(&svc)[0],
        lb["public_net"]["ipv4"]["ip"].as_str().unwrap()
    );
    let writes = fx.writes_since(&mark);
    assert_eq!(
        writes,
        [("POST".to_string(), "/load_balancers".to_string())],
        "services and targets inline"
    );
    fx.wait_event("Service", "web", "EnsuredLoadBalancer").await;

    // Update a port and an annotation: only those actions.
    let mark = fx.mark();
    let np80 = node_ports(&created)[0].1;
    fx.patch(
        "web",
        json!({
            "metadata": {"annotations": {"load-balancer.hetzner.cloud/algorithm-type": "least_connections"}},
            "spec": {"ports": [
                {"name": "p80", "port": 80, "nodePort": np80, "protocol": "TCP"},
                {"name": "p8080", "port": 8080, "protocol": "TCP"}
            ]}
        }),
    )
    .await;
    let updated = fx.get("web").await.unwrap();
    assert_eq!(node_ports(&updated)[0], (80, np80));
    let lb = eventually("port 8080 served", T, || async {
        let lb = fx.lb_of(&svc).await;
        (lb_ports(&lb) == node_ports(&updated)).then_some(lb)
    })
    .await;
    assert_eq!(lb["algorithm"]["type"], "least_connections");
    let writes = fx.writes_since(&mark);
    assert_eq!(writes.len(), 3, "{writes:?}");
    assert_eq!(writes_named(&writes, "delete_service"), 1);
    assert_eq!(writes_named(&writes, "add_service"), 1);
    assert_eq!(writes_named(&writes, "change_algorithm"), 1);

    // Delete: LB gone, finalizer removed, Service gone.
    fx.delete("web").await;
    eventually("service gone", T, || async {
        fx.get("web").await.is_none().then_some(())
    })
    .await;
    assert!(fx.lbs_of(&svc).await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unchanged_reconciles_write_nothing_and_ready_flips_cost_no_call() {
    let fx = Fixture::start().await;
    let nodes = fx.nodes(2).await;
    fx.service("web", &[80], &[]).await;
    let svc = fx.wait_ingress("web").await;
    fx.wait_targets(&svc, &[nodes[0].server, nodes[1].server])
        .await;

    let mark = fx.mark();
    // An unrelated label on the Service, a Ready flip and a heartbeat-like status write on a node.
    fx.patch("web", json!({"metadata": {"labels": {"team": "a"}}}))
        .await;
    test_support::e2e::set_ready(&fx.admin, &nodes[0].name, false).await;
    test_support::e2e::set_ready(&fx.admin, &nodes[0].name, true).await;
    // A node change that does matter, as the barrier: once it is applied, the ones before it were
    // seen and ignored.
    let third = fx.node(BTreeMap::new()).await;
    fx.wait_targets(&svc, &[nodes[0].server, nodes[1].server, third.server])
        .await;
    let calls = fx.calls_since(&mark);
    assert_eq!(
        calls.iter().filter(|(m, _)| m != "GET").count(),
        1,
        "only the add_target of the new node: {calls:?}"
    );
    assert!(
        calls.len() <= 2,
        "a node join costs at most add_target + one action poll: {calls:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_join_touches_only_load_balancers_whose_targets_change() {
    let fx = Fixture::start().await;
    let edge = BTreeMap::from([("role".to_string(), "edge".to_string())]);
    let a = fx.node(edge.clone()).await;
    let b = fx.node(BTreeMap::new()).await;
    fx.service("all", &[80], &[]).await;
    fx.service("edge", &[80], &[("node-selector", "role=edge")])
        .await;
    let all = fx.wait_ingress("all").await;
    let edge_svc = fx.wait_ingress("edge").await;
    fx.wait_targets(&all, &[a.server, b.server]).await;
    fx.wait_targets(&edge_svc, &[a.server]).await;
    let mark = fx.mark();
    let c = fx.node(BTreeMap::new()).await;
    fx.wait_targets(&all, &[a.server, b.server, c.server]).await;
    // The edge LB's targets did not change, so it cost nothing: one add_target and its action
    // poll are all the calls this join made.
    let calls = fx.calls_since(&mark);
    assert_eq!(fx.writes_since(&mark).len(), 1, "{calls:?}");
    assert!(calls.len() <= 2, "{calls:?}");
    assert_eq!(
        fx.lb_of(&edge_svc).await["targets"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exclusion_label_autoscaler_taint_and_no_eligible_node() {
    let fx = Fixture::start().await;
    let nodes = fx.nodes(2).await;
    fx.service("web", &[80], &[]).await;
    let svc = fx.wait_ingress("web").await;
    fx.wait_targets(&svc, &[nodes[0].server, nodes[1].server])
        .await;

    let label = |v: Option<&str>| json!({"metadata": {"labels": {"node.kubernetes.io/exclude-from-external-load-balancers": v}}});
    let nodes_api: kube::Api<k8s_openapi::api::core::v1::Node> = kube::Api::all(fx.admin.clone());
    let patch = |name: String, p: serde_json::Value| {
        let api = nodes_api.clone();
        async move {
            api.patch(&name, &Default::default(), &kube::api::Patch::Merge(p))
                .await
                .expect("patch node");
        }
    };
    // "false" keeps the node (upstream's bool parsing), an empty value excludes it.
    patch(nodes[0].name.clone(), label(Some("false"))).await;
    patch(nodes[1].name.clone(), label(Some(""))).await;
    fx.wait_targets(&svc, &[nodes[0].server]).await;
    patch(nodes[1].name.clone(), label(None)).await;
    fx.wait_targets(&svc, &[nodes[0].server, nodes[1].server])
        .await;

    // The autoscaler's taint removes a target; with no node left the LB is kept without targets.
    let taint = json!({"spec": {"taints": [{"key": "ToBeDeletedByClusterAutoscaler", "effect": "NoSchedule"}]}});
    patch(nodes[0].name.clone(), taint).await;
    fx.wait_targets(&svc, &[nodes[1].server]).await;
    patch(nodes[1].name.clone(), label(Some("true"))).await;
    fx.wait_targets(&svc, &[]).await;
    fx.wait_event("Service", "web", "UnAvailableLoadBalancer")
        .await;
    assert_eq!(fx.lbs_of(&svc).await.len(), 1, "the LB is kept");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn type_change_cleans_up_and_other_classes_are_ignored() {
    let fx = Fixture::start_with(Options {
        settings: Settings {
            classes: ClassFilter {
                own_class: Some("cloud-controllers.io/hcloud".into()),
            },
            ..Default::default()
        },
        ..Default::default()
    })
    .await;
    fx.nodes(1).await;
    fx.service("web", &[80], &[]).await;
    let svc = fx.wait_ingress("web").await;
    assert_eq!(fx.lbs_of(&svc).await.len(), 1);

    // Another implementation's class: no finalizer, no call, no event.
    let mark = fx.mark();
    fx.service_with("metallb", &[80], &[], |s| {
        s.load_balancer_class = Some("metallb.io/metallb".into())
    })
    .await;
    // Our own opt-in class is served (and doubles as the barrier for the one above).
    fx.service_with("own", &[80], &[], |s| {
        s.load_balancer_class = Some("cloud-controllers.io/hcloud".into())
    })
    .await;
    let own = fx.wait_ingress("own").await;
    assert_eq!(fx.lbs_of(&own).await.len(), 1);
    let metallb = fx.get("metallb").await.unwrap();
    assert!(!has_finalizer(&metallb) && ingress_ips(&metallb).is_empty());
    assert!(fx.lbs_of(&metallb).await.is_empty());
    assert!(fx.events_of("Service", "metallb").await.is_empty());
    assert_eq!(
        fx.writes_since(&mark).len(),
        1,
        "only the own-class LB was created"
    );

    // Type change away from LoadBalancer: LB deleted, status cleared, finalizer removed.
    fx.patch("web", json!({"spec": {"type": "NodePort"}})).await;
    let svc = eventually("cleaned up after type change", T, || async {
        fx.get("web")
            .await
            .filter(|s| !has_finalizer(s) && ingress_ips(s).is_empty())
    })
    .await;
    assert!(fx.lbs_of(&svc).await.is_empty());
    fx.wait_event("Service", "web", "DeletedLoadBalancer").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_warns_writes_nothing_and_other_services_proceed() {
    let fx = Fixture::start().await;
    fx.nodes(1).await;
    let mark = fx.mark();
    type Case<'a> = (&'a str, &'a [(&'a str, &'a str)], &'a str);
    let bad: &[Case] = &[
        ("bad-bool", &[("use-private-ip", "maybe")], "use-private-ip"),
        (
            "bad-algorithm",
            &[("algorithm-type", "random")],
            "algorithm-type",
        ),
        (
            "bad-interval",
            &[("health-check-interval", "soon")],
            "health-check-interval",
        ),
        (
            "bad-selector",
            &[("node-selector", "role in (a")],
            "node-selector",
        ),
        (
            "https-no-cert",
            &[("protocol", "https")],
            "http-certificates",
        ),
    ];
    for (name, ann, _) in bad {
        fx.service(name, &[80], ann).await;
    }
    fx.service_with("udp-only", &[], &[], |s| {
        s.ports = Some(vec![k8s_openapi::api::core::v1::ServicePort {
            name: Some("dns".into()),
            port: 53,
            protocol: Some("UDP".into()),
            ..Default::default()
        }])
    })
    .await;
    // lb11 serves at most 5 ports.
    fx.service("six-ports", &[80, 81, 82, 83, 84, 85], &[])
        .await;
    // A good Service next to them converges.
    fx.service("good", &[80], &[]).await;
    let good = fx.wait_ingress("good").await;
    assert_eq!(fx.lbs_of(&good).await.len(), 1);

    for (name, _, annotation) in bad {
        let note = fx
            .wait_event("Service", name, "SyncLoadBalancerFailed")
            .await;
        assert!(note.contains(annotation), "{name}: {note}");
    }
    let note = fx
        .wait_event("Service", "udp-only", "SyncLoadBalancerFailed")
        .await;
    assert!(note.contains("53") || note.contains("UDP"), "{note}");
    let note = fx
        .wait_event("Service", "six-ports", "SyncLoadBalancerFailed")
        .await;
    assert!(note.contains("6 ports") && note.contains("lb11"), "{note}");
    let writes = fx.writes_since(&mark);
    assert_eq!(
        writes.len(),
        1,
        "only the good Service's create: {writes:?}"
    );
    let metrics = fx.metrics().await;
    assert!(
        metrics.contains("bad_input_warnings_total{controller=\"service-controller\",reason=\"InvalidLoadBalancerInput\"}"),
        "{metrics}"
    );

    // Fixing the annotation converges the Service.
    fx.patch(
        "bad-bool",
        annotation_patch("use-private-ip", Some("false")),
    )
    .await;
    fx.wait_ingress("bad-bool").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terminating_service_without_our_finalizer_gets_none() {
    let fx = Fixture::start().await;
    fx.nodes(1).await;
    // Kept alive by someone else's finalizer, deleted before the controller ever saw it as ours.
    let mut s = k8s_openapi::api::core::v1::Service::default();
    s.metadata.name = Some("held".into());
    s.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    s.spec = Some(k8s_openapi::api::core::v1::ServiceSpec {
        type_: Some("ClusterIP".into()),
        ports: Some(vec![k8s_openapi::api::core::v1::ServicePort {
            port: 80,
            ..Default::default()
        }]),
        ..Default::default()
    });
    fx.services().create(&Default::default(), &s).await.unwrap();
    fx.delete("held").await;
    fx.patch("held", json!({"spec": {"type": "LoadBalancer"}}))
        .await;
    // Barrier: a normal Service converges after it.
    fx.service("web", &[80], &[]).await;
    fx.wait_ingress("web").await;
    let held = fx.get("held").await.unwrap();
    assert!(!has_finalizer(&held), "{:?}", held.finalizers());
    assert!(fx.lbs_of(&held).await.is_empty());
    fx.patch("held", json!({"metadata": {"finalizers": null}}))
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drift_check_repairs_changes_made_behind_our_back() {
    let fx = Fixture::start_with(Options {
        settings: Settings {
            drift_period: Duration::from_secs(2),
            ..Default::default()
        },
        ..Default::default()
    })
    .await;
    let nodes = fx.nodes(2).await;
    let created = fx.service("web", &[80], &[]).await;
    let svc = fx.wait_ingress("web").await;
    let lb = fx
        .wait_targets(&svc, &[nodes[0].server, nodes[1].server])
        .await;
    let id = lb["id"].as_u64().unwrap();

    // Someone removes a target and deletes the port by hand.
    let client = fx.sim.client();
    client
        .load_balancer_action(
            id,
            "remove_target",
            json!({"type": "server", "server": {"id": nodes[1].server}}),
        )
        .await
        .unwrap();
    client
        .load_balancer_action(id, "delete_service", json!({"listen_port": 80}))
        .await
        .unwrap();
    let lb = eventually("drift repaired", T, || async {
        let lb = fx.lb_of(&svc).await;
        (target_ids(&lb).len() == 2 && lb_ports(&lb) == node_ports(&created)).then_some(lb)
    })
    .await;
    assert_eq!(
        lb["id"].as_u64(),
        Some(id),
        "repaired in place, not re-created"
    );

    // The whole LB deleted by hand: re-created.
    eventually(
        "deleted by hand (retried while an action locks it)",
        T,
        || async { client.delete_load_balancer(id).await.ok() },
    )
    .await;
    let lb = eventually("load balancer re-created", T, || async {
        fx.lbs_of(&svc).await.into_iter().next()
    })
    .await;
    assert_ne!(lb["id"].as_u64(), Some(id));
    let new_ip = lb["public_net"]["ipv4"]["ip"].as_str().unwrap().to_string();
    eventually("status follows the new LB", T, || async {
        let svc = fx.get("web").await?;
        (ingress_ips(&svc).first() == Some(&new_ip)).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cloud_error_storms_converge_without_duplicates() {
    let fx = Fixture::start_with(Options {
        cloud: Some(Box::new(|c| {
            c.client.retry.max_attempts = 2;
        })),
        ..Default::default()
    })
    .await;
    let nodes = fx.nodes(3).await;
    let faults = fx.sim.faults();
    // Every third call fails with 503 and LB creates fail twice with 429 first.
    let every = faults.fail_every(None, 3, 503, "unavailable");
    faults.fail_next(Some("POST /load_balancers"), 2, 429, "rate_limit_exceeded");
    for i in 0..5 {
        fx.service(&format!("web-{i}"), &[80, 443], &[]).await;
    }
    // Converged on the Kubernetes side while the faults last ...
    let mut svcs = Vec::new();
    for i in 0..5 {
        svcs.push(fx.wait_ingress(&format!("web-{i}")).await);
    }
    let stats = fx.mark();
    assert!(stats.retries > 0, "the storm was felt: {stats:?}");
    // ... and on the cloud side (read once the test's own reads no longer hit the faults).
    faults.remove(every);
    let servers: Vec<u64> = nodes.iter().map(|n| n.server).collect();
    for svc in &svcs {
        let lb = fx.wait_targets(svc, &servers).await;
        assert_eq!(lb_ports(&lb), node_ports(svc));
    }
    assert_eq!(
        fx.sim.client().list_load_balancers().await.unwrap().len(),
        5,
        "one load balancer per Service, no duplicates"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migration_from_hccm_adopts_its_load_balancer_with_zero_writes() {
    let mut fx = Fixture::start().await;
    fx.stop().await;
    let nodes = fx.nodes(2).await;
    // The Service as HCCM left it: finalizer, ingress, and an LB shaped as HCCM creates it.
    let lb = fx.hccm_service("web", &[80], &nodes).await;
    let mark = fx.mark();
    let sa = fx.service_account().await;
    fx.restart(sa).await;
    fx.wait_event("Service", "web", "EnsuredLoadBalancer").await;
    assert_eq!(
        fx.writes_since(&mark),
        Vec::<(String, String)>::new(),
        "adopted with zero writes"
    );
    let svc = fx.get("web").await.unwrap();
    assert_eq!(ingress_ips(&svc), [lb.ipv4, lb.ipv6]);
    assert_eq!(fx.lbs_of(&svc).await.len(), 1);
}

/// The chart's role is enough to provision a load balancer, and refuses what the service-controller
/// does not need: writing a Service other than through its status, deleting a Node, patching a
/// Node's status, reading Secrets (403 each).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chart_rbac_is_enough_and_refuses_what_is_not_needed() {
    use k8s_openapi::api::core::v1::{Node, Secret, Service};
    use kube::Api;
    use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
    use test_support::e2e::forbidden;
    let fx = Fixture::start().await;
    let node = fx.nodes(1).await.remove(0);
    fx.service("web", &[80], &[]).await;
    fx.wait_ingress("web").await;

    let sa = fx.service_account().await;
    let labels = Patch::Merge(json!({"metadata": {"labels": {"x": "y"}}}));
    let refused = Api::<Service>::namespaced(sa.clone(), &fx.ns)
        .patch("web", &PatchParams::default(), &labels)
        .await;
    assert!(forbidden(&refused), "patching a Service: {refused:?}");
    let nodes: Api<Node> = Api::all(sa.clone());
    let refused = nodes.delete(&node.name, &DeleteParams::default()).await;
    assert!(forbidden(&refused), "deleting a Node: {refused:?}");
    let refused = nodes
        .patch_status(
            &node.name,
            &PatchParams::default(),
            &Patch::Merge(
                json!({"status": {"addresses": [{"type": "InternalIP", "address": "10.9.9.9"}]}}),
            ),
        )
        .await;
    assert!(forbidden(&refused), "patching nodes/status: {refused:?}");
    let refused = Api::<Secret>::namespaced(sa, &fx.ns)
        .list(&ListParams::default())
        .await;
    assert!(forbidden(&refused), "listing Secrets: {refused:?}");
}

/// A dedicated server in cloud-sim's Robot and its Ready Node (`hrobot://`), and the server as
/// Robot lists it.
async fn robot_node(fx: &Fixture) -> (String, serde_json::Value) {
    let bm = test_support::e2e::unique("bm");
    let number = fx
        .sim
        .client()
        .create_robot_server(&bm, "AX41-NVMe", "FSN1-DC14")
        .await
        .unwrap();
    let server = fx
        .sim
        .robot_servers()
        .iter()
        .map(|s| s.get("server").unwrap_or(s))
        .find(|s| s["server_number"] == number)
        .unwrap()
        .clone();
    test_support::e2e::create_node(
        &fx.admin,
        &fx.run,
        &bm,
        test_support::e2e::NodeSpecT {
            provider_id: Some(format!("hrobot://{number}")),
            ready: Some(true),
            ..Default::default()
        },
    )
    .await;
    (bm, server)
}

/// A load balancer's IP targets, sorted.
fn ip_targets(lb: &serde_json::Value) -> Vec<String> {
    let mut ips: Vec<String> = lb["targets"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["type"] == "ip")
        .map(|t| t["ip"]["ip"].as_str().unwrap().to_string())
        .collect();
    ips.sort();
    ips
}

/// A mixed cluster: a LoadBalancer Service's targets are the Cloud node (a server target) and the
/// dedicated server (an IP target, its public IPv4 from the Robot API), as HCCM makes them; when
/// the dedicated server's Node goes, so does its IP target.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mixed_cluster_targets_cloud_and_robot_nodes() {
    let mut fx = Fixture::without_controller(None).await;
    let robot = test_support::e2e::run::sim_config_with_robot(&fx.sim).robot;
    fx.start_controller(Box::new(move |cfg| cfg.robot = robot))
        .await;

    let cloud = fx.nodes(1).await.remove(0);
    let (bm, server) = robot_node(&fx).await;
    let robot_ip = server["server_ip"].as_str().unwrap().to_string();

    fx.service("web", &[80], &[]).await;
    let svc = fx.wait_ingress("web").await;
    let lb = fx.wait_targets(&svc, &[cloud.server]).await;
    assert_eq!(ip_targets(&lb), vec![robot_ip.clone()], "{lb}");

    kube::Api::<k8s_openapi::api::core::v1::Node>::all(fx.admin.clone())
        .delete(&bm, &Default::default())
        .await
        .unwrap();
    test_support::e2e::eventually("the Robot IP target removed", T, || async {
        let lb = fx.lb_of(&svc).await;
        ip_targets(&lb).is_empty().then_some(())
    })
    .await;
    assert_eq!(target_ids(&fx.lb_of(&svc).await), [cloud.server]);
}

/// A dedicated server's targets follow the Service's `ipFamilies` (IPv4 here, as in every
/// single-stack cluster): its IPv6 is never added where kube-proxy does not serve it. The
/// annotation `robot-target-address-family` chooses otherwise, and targets of the other family go.
#[tokio::test]
async fn robot_targets_follow_the_services_address_family() {
    let mut fx = Fixture::without_controller(None).await;
    let robot = test_support::e2e::run::sim_config_with_robot(&fx.sim).robot;
    fx.start_controller(Box::new(move |cfg| cfg.robot = robot))
        .await;
    fx.nodes(1).await;
    let (_, server) = robot_node(&fx).await;
    let v4 = server["server_ip"].as_str().unwrap().to_owned();
    let v6 = format!("{}1", server["server_ipv6_net"].as_str().unwrap());
    fx.service("web", &[80], &[]).await;
    let svc = fx.wait_ingress("web").await;
    let want_ips = |want: Vec<String>| {
        let fx = &fx;
        let svc = &svc;
        async move {
            test_support::e2e::eventually(&format!("IP targets {want:?}"), T, || async {
                let lb = fx.lb_of(svc).await;
                (ip_targets(&lb) == want).then_some(())
            })
            .await
        }
    };
    want_ips(vec![v4.clone()]).await;
    fx.patch(
        "web",
        annotation_patch("robot-target-address-family", Some("dualstack")),
    )
    .await;
    let mut both = vec![v4.clone(), v6.clone()];
    both.sort();
    want_ips(both).await;
    fx.patch(
        "web",
        annotation_patch("robot-target-address-family", Some("ipv6")),
    )
    .await;
    want_ips(vec![v6]).await;
}

/// A stop that arrives before the first Node list is complete (the controller may not list
/// Nodes, so the list never completes) is a clean exit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_before_the_first_node_list_is_a_clean_exit() {
    let fx = Fixture::without_controller(None).await;
    for _ in 0..3 {
        let stopped = fx
            .stop_before_the_first_node_list(
                &service_controller::INFO,
                test_support::e2e::run::sim_config(&fx.sim),
                |rt, cloud| service_controller::start(rt, cloud, Default::default()),
            )
            .await;
        assert!(stopped.is_ok(), "{stopped:?}");
    }
}
