//! The migration guide (docs/migrating-from-hccm.md), run: a load balancer made the way HCCM makes
//! it, for a Service of a cluster with HCCM's private network, is taken over by the four
//! controllers started exactly as HCCM's values translated into ours
//! (`fixtures/hccm-values-translated.yaml`) render them, with no cloud write at all.

use std::time::Duration;

use chart_tests::run::{
    Fleet, apply_rendered, create_namespace, create_node, eventually, ready, start_controllers,
};
use chart_tests::{CONTROLLERS, Render, free_port, repo, values_key};
use cloud_sim::{Sim, SimConfig};
use k8s_openapi::api::core::v1::Service;
use kube::Api;
use kube::api::PostParams;
use serde_json::json;

const UID_LABEL: &str = "hcloud-ccm/service-uid";

/// HCCM's `DefaultLoadBalancerName`: `a` + the UID without dashes, 32 characters.
fn hccm_name(uid: &str) -> String {
    let mut n: String = std::iter::once('a')
        .chain(uid.chars().filter(|c| *c != '-'))
        .collect();
    n.truncate(32);
    n
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_translated_install_takes_over_hccms_load_balancer_without_a_write() {
    let k = testenv::kube().await;
    let admin = k.client().await;
    let sim = Sim::start_with(SimConfig {
        action_duration: Duration::from_millis(20),
        ..SimConfig::default()
    })
    .await;
    let client = sim.client();

    // What HCCM left behind: a network, a server in it, its Node, a LoadBalancer Service.
    let network = client
        .create_network("k8s", "10.0.0.0/8", "10.0.0.0/16")
        .await
        .unwrap();
    let server = client
        .create_server("mig-node-1", "cx22", "fsn1")
        .await
        .unwrap();
    client
        .attach_to_network(server, network, Some("10.0.0.2"))
        .await
        .unwrap();
    create_node(
        &admin,
        "mig-node-1",
        json!({"providerID": format!("hcloud://{server}")}),
        json!({
            "conditions": [ready(true)],
            "addresses": [{"type": "Hostname", "address": "mig-node-1"}, {"type": "InternalIP", "address": "10.0.0.2"}],
        }),
    )
    .await;
    let services: Api<Service> = Api::namespaced(admin.clone(), "default");
    let svc: Service = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"type": "LoadBalancer", "ports": [{"port": 80, "protocol": "TCP"}]}
    }))
    .unwrap();
    let svc = services.create(&PostParams::default(), &svc).await.unwrap();
    let uid = svc.metadata.uid.clone().unwrap();
    let node_port = svc.spec.as_ref().unwrap().ports.as_ref().unwrap()[0]
        .node_port
        .unwrap();

    // HCCM's calls for it, with the settings of fixtures/hccm-values.yaml (HCLOUD_NETWORK,
    // HCLOUD_LOAD_BALANCERS_LOCATION=fsn1, HCLOUD_LOAD_BALANCERS_USE_PRIVATE_IP=true): create,
    // attach to the network, one service per port (TCP health check on the NodePort), the
    // server as a private-IP target.
    let lb = client
        .create_load_balancer_with(json!({
            "name": hccm_name(&uid),
            "load_balancer_type": "lb11",
            "labels": {UID_LABEL: uid},
            "location": "fsn1",
        }))
        .await
        .unwrap();
    for (action, body) in [
        ("attach_to_network", json!({"network": network})),
        (
            "add_service",
            json!({
                "protocol": "tcp", "listen_port": 80, "destination_port": node_port,
                "health_check": {"protocol": "tcp", "port": node_port},
            }),
        ),
        (
            "add_target",
            json!({"type": "server", "server": {"id": server}, "use_private_ip": true}),
        ),
    ] {
        client.load_balancer_action(lb, action, body).await.unwrap();
    }
    let public_ip = client.get_load_balancer(lb).await.unwrap()["public_net"]["ipv4"]["ip"]
        .as_str()
        .unwrap()
        .to_string();

    // Our install: the translated values, plus what a test cluster differs in: the cloud is the
    // simulator, the Secret is made by the chart, and the four "pods" share this host's ports.
    // Their Secret volumes (HCCM's extra one, and the chart's token file) are projected into
    // local directories.
    let ns = "kube-system";
    create_namespace(&admin, ns).await;
    let mut fleet = Fleet::new("chart-migration-");
    let mut local = json!({
        "credentials": {"create": true, "secretName": "hcloud", "token": sim.token(), "network": "k8s"},
        "hcloud": {"endpoint": sim.endpoint()},
    });
    for c in CONTROLLERS {
        local[values_key(c)] = json!({"adminPort": free_port()});
    }
    let local_file = fleet.dir.path().join("local.json");
    std::fs::write(&local_file, local.to_string()).unwrap();
    let objects = Render::new("cloud-controllers", ns)
        .values(repo().join("chart-tests/fixtures/hccm-values-translated.yaml"))
        .values(&local_file)
        .objects();
    apply_rendered(&admin, &objects).await;
    sim.reset_counters();
    let started = start_controllers(&k, &admin, &objects, &mut fleet).await;
    assert_eq!(started.len(), 4, "{:?}", started.keys());

    let ingress = eventually(
        "the Service's status shows HCCM's load balancer",
        || async {
            let status = services.get("web").await.ok()?.status?.load_balancer?;
            status.ingress?.into_iter().find_map(|i| i.ip)
        },
    )
    .await;
    assert_eq!(ingress, public_ip);
    let writes: Vec<String> = sim
        .request_log()
        .into_iter()
        .filter(|e| e.method != "GET")
        .map(|e| format!("{} {}", e.method, e.endpoint))
        .collect();
    assert_eq!(
        writes,
        Vec::<String>::new(),
        "the switch wrote to the cloud"
    );
    // Going back to HCCM needs nothing undone: the load balancer is still HCCM's by name and label,
    // the Service carries upstream's cleanup finalizer (HCCM's too).
    let lbs = client.list_load_balancers().await.unwrap();
    assert_eq!(lbs.len(), 1);
    assert_eq!(lbs[0]["name"], hccm_name(&uid));
    assert_eq!(lbs[0]["labels"][UID_LABEL], uid);
    let finalizers = services.get("web").await.unwrap().metadata.finalizers;
    assert_eq!(
        finalizers,
        Some(vec![
            "service.kubernetes.io/load-balancer-cleanup".to_string()
        ])
    );
    eprintln!(
        "migration: HCCM's load balancer {lb} adopted by the translated install; cloud calls: {} reads, 0 writes",
        sim.request_log().len()
    );
}
