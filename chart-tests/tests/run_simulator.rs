//! Run what the chart's simulator block renders (dev/values.yaml, as `skaffold dev` deploys it):
//! cloud-sim from its rendered Deployment (emptyDir = a temp dir) accepts the token of the rendered
//! Secret and refuses any other; the node-controller of the same render, whose HCLOUD_ENDPOINT names
//! the rendered Service through the variables the kubelet derives from it (expanded here as the
//! kubelet would; the cluster IP then forwarded to the pod's target port as kube-proxy would),
//! initializes a Node from a server in that simulator.

use chart_tests::pod::PodTemplate;
use chart_tests::pod::http_get;
use chart_tests::run::{
    Fleet, T, apply_rendered, create_namespace, create_node, eventually, ready, start, tainted,
    uninitialized_taint,
};
use chart_tests::{Render, find, free_port, name};
use k8s_openapi::api::core::v1::{Node, Service};
use kube::Api;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_rendered_simulator_serves_the_rendered_controllers() {
    let k = testenv::kube().await;
    let admin = k.client().await;
    let ns = "cloud-sim-system";
    create_namespace(&admin, ns).await;
    let objects = Render::new("dev", ns)
        .values("dev/values.yaml")
        .set("simulator.port", free_port())
        .set("nodeController.adminPort", free_port())
        .set("lifecycleController.enabled", false)
        .set("serviceController.enabled", false)
        .set("routeController.enabled", false)
        .objects();
    apply_rendered(&admin, &objects).await;
    let mut fleet = Fleet::new("chart-sim-");

    let sim = start(
        &k,
        &admin,
        find(&objects, "Deployment", "dev-cloud-controllers-simulator"),
        "dev-cloud-controllers-simulator-6b8f9-q9z2l",
        Vec::new(),
        &mut fleet,
    )
    .await;
    fleet.procs[0]
        .wait_ready(T)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let token = find(&objects, "Secret", "dev-cloud-controllers-simulator")["stringData"]["token"]
        .as_str()
        .unwrap()
        .to_owned();
    let port = sim.port("http");
    let ok = http_get(
        port,
        "/v1/servers",
        &[("Authorization", &format!("Bearer {token}"))],
    )
    .await
    .unwrap();
    assert!(
        ok.starts_with("HTTP/1.1 200") || ok.starts_with("HTTP/1.0 200"),
        "{ok}"
    );
    let other = format!("Bearer {}", "x".repeat(64));
    let refused = http_get(port, "/v1/servers", &[("Authorization", &other)])
        .await
        .unwrap();
    assert!(
        refused.contains(" 401 "),
        "another token is refused: {refused}"
    );
    eprintln!(
        "cloud-sim from its rendered Deployment: ready on :{port}; the Secret's token accepted, another refused"
    );

    // The node-controller of the same render, pointed at the Service through the variables the
    // kubelet derives from it (no cluster DNS): the applied Service's cluster IP and port, which
    // kube-proxy would forward to the pod's target port.
    let service = find(&objects, "Service", "dev-cloud-controllers-simulator");
    assert_eq!(service["spec"]["ports"][0]["targetPort"], "http");
    let live = Api::<Service>::namespaced(admin.clone(), ns)
        .get(name(service))
        .await
        .expect("the applied Service");
    let spec = live.spec.unwrap();
    let cluster_ip = spec.cluster_ip.expect("a cluster IP");
    let svc_host = format!("{cluster_ip}:{}", spec.ports.unwrap()[0].port);
    let node_deploy = find(
        &objects,
        "Deployment",
        "dev-cloud-controllers-node-controller",
    );
    let template = PodTemplate::of(node_deploy);
    assert_eq!(
        template.env_entry("HCLOUD_ENDPOINT").unwrap()["value"],
        "http://$(DEV_CLOUD_CONTROLLERS_SIMULATOR_SERVICE_HOST):$(DEV_CLOUD_CONTROLLERS_SIMULATOR_SERVICE_PORT)/v1"
    );
    let resolved = template.resolve_env(&admin, "p").await.unwrap();
    assert!(
        resolved.contains(&(
            "HCLOUD_ENDPOINT".to_owned(),
            format!("http://{svc_host}/v1")
        )),
        "{resolved:?}"
    );
    start(
        &k,
        &admin,
        node_deploy,
        "dev-cloud-controllers-node-controller-7c4d8-m2p8s",
        vec![(
            "HCLOUD_ENDPOINT".into(),
            svc_host.clone(),
            format!("127.0.0.1:{port}"),
        )],
        &mut fleet,
    )
    .await;
    fleet.procs[1]
        .wait_ready(T)
        .await
        .unwrap_or_else(|e| panic!("{e}"));

    let world = cloud_sim::SimClient::new(&format!("http://127.0.0.1:{port}"), &token);
    let id = world
        .create_server("sim-node-1", "cx22", "fsn1")
        .await
        .unwrap();
    create_node(
        &admin,
        "sim-node-1",
        uninitialized_taint(),
        json!({"conditions": [ready(true)]}),
    )
    .await;
    let nodes: Api<Node> = Api::all(admin.clone());
    let n = eventually(
        "node-controller initializes sim-node-1 from the rendered simulator",
        || async {
            nodes
                .get_opt("sim-node-1")
                .await
                .unwrap()
                .filter(|n| !tainted(n))
        },
    )
    .await;
    assert_eq!(
        n.spec.unwrap().provider_id.as_deref(),
        Some(format!("hcloud://{id}").as_str())
    );
    eprintln!("node-controller -> rendered simulator: sim-node-1 initialized as hcloud://{id}");
    fleet.terminate_all().await;
}
