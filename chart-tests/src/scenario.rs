//! One scenario for both ways of running what the chart renders ([`crate::pod::Runtime`]). The
//! chart is rendered for a cluster whose cloud is an in-process cloud-sim; its ServiceAccounts,
//! RBAC and Secret are applied to a real kube-apiserver (testenv); then each rendered Deployment's
//! container is started, with exactly the container's args and env (secretKeyRef read back from the
//! applied Secret), acting as the Deployment's ServiceAccount, so only the rendered RBAC applies.
//! Each controller must then do its job. A wrong flag (exit 2), env name, RBAC rule or Lease name
//! in the chart fails here; so does, in container mode, an image that holds the wrong binary or one
//! that cannot start on its base image.

use std::time::Duration;

use cloud_sim::{Sim, SimConfig};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Service};
use kube::Api;
use kube::api::PostParams;
use serde_json::{Value, json};

use crate::pod::http_get;
use crate::run::{
    Fleet, apply_rendered, create_namespace, create_node, eventually, lease_holder, ready,
    start_controllers, tainted, uninitialized_taint,
};
use crate::{CONTROLLERS, Render, free_port, values_key};

fn inner<'a>(v: &'a Value, key: &str) -> &'a Value {
    if v.get(key).is_some() { &v[key] } else { v }
}

/// The four controllers of one release, started in `fleet` (as processes, or as the fleet's images
/// when it runs containers), each doing its job, then exiting 0 on SIGTERM and releasing its Lease.
pub async fn rendered_controllers_do_their_jobs(mut fleet: Fleet) {
    let k = testenv::kube().await;
    let admin = k.client().await;
    let sim = Sim::start_with(SimConfig {
        action_duration: Duration::from_millis(50),
        ..SimConfig::default()
    })
    .await;
    let client = sim.client();
    let network = client
        .create_network("k8s", "10.0.0.0/8", "10.0.0.0/16")
        .await
        .expect("create network");

    // The release: every controller on, HCCM-style credentials (Secret `hcloud`, keys token and
    // network) created by the chart, the cloud endpoint = the simulator. Admin ports are free ports:
    // the four "pods" share this host.
    let ns = "cloud-system";
    create_namespace(&admin, ns).await;
    let mut values = json!({
        "credentials": {"create": true, "secretName": "hcloud", "token": sim.token(), "network": "k8s"},
        // LB defaults the nodes cannot imply (their servers are lb11-sized in fsn1), so the load
        // balancer shows whether the env names reached the service-controller.
        "hcloud": {"endpoint": sim.endpoint(), "loadBalancers": {"location": "nbg1", "type": "lb21"}},
        "routeController": {"enabled": true, "clusterCIDR": "10.244.0.0/16"},
    });
    for c in CONTROLLERS {
        let block = values
            .as_object_mut()
            .unwrap()
            .entry(values_key(c))
            .or_insert(json!({}));
        block["adminPort"] = json!(free_port());
        if let Some(containers) = &fleet.containers {
            block["image"] = json!({"repository": format!("localhost/{c}"), "tag": containers.tag});
        }
    }
    let values_file = fleet.dir.path().join("values.json");
    std::fs::write(&values_file, values.to_string()).unwrap();
    let objects = Render::new("cloud-controllers", ns)
        .values(&values_file)
        .objects();
    apply_rendered(&admin, &objects).await;
    let started = start_controllers(&k, &admin, &objects, &mut fleet).await;
    assert_eq!(
        started.keys().map(String::as_str).collect::<Vec<_>>(),
        [
            "lifecycle-controller",
            "node-controller",
            "route-controller",
            "service-controller"
        ]
    );

    // Each holds its own Lease, the one the chart rendered (its labels stay), in the release
    // namespace, as its pod.
    for (c, (_, pod)) in &started {
        let lease = format!("cloud-controller-manager-{c}");
        let holder = eventually(&format!("{c} holds Lease {ns}/{lease}"), || async {
            lease_holder(&admin, ns, &lease).await
        })
        .await;
        assert!(
            holder.starts_with(pod.as_str()),
            "{c}: Lease held by {holder}, not {pod}"
        );
        let labels = Api::<Lease>::namespaced(admin.clone(), ns)
            .get(&lease)
            .await
            .expect("the Lease")
            .metadata
            .labels
            .unwrap_or_default();
        assert_eq!(
            labels
                .get("app.kubernetes.io/component")
                .map(String::as_str),
            Some(c.as_str()),
            "{c}: the Lease is the chart's: {labels:?}"
        );
        eprintln!("{c}: Lease {ns}/{lease} held by {holder}");
    }

    let nodes: Api<Node> = Api::all(admin.clone());

    // node-controller: a tainted Node is initialized from the server of the same name.
    let id = client
        .create_server("run-node-1", "cx22", "fsn1")
        .await
        .unwrap();
    create_node(
        &admin,
        "run-node-1",
        uninitialized_taint(),
        json!({"conditions": [ready(true)]}),
    )
    .await;
    let n = eventually("node-controller initializes run-node-1", || async {
        nodes
            .get_opt("run-node-1")
            .await
            .unwrap()
            .filter(|n| !tainted(n))
    })
    .await;
    assert_eq!(
        n.spec.as_ref().unwrap().provider_id.as_deref(),
        Some(format!("hcloud://{id}").as_str())
    );
    eprintln!(
        "node-controller: run-node-1 initialized as hcloud://{id}, uninitialized taint removed"
    );

    // lifecycle-controller: a NotReady Node whose server is gone is deleted.
    let gone = client
        .create_server("run-gone-1", "cx22", "fsn1")
        .await
        .unwrap();
    create_node(
        &admin,
        "run-gone-1",
        json!({"providerID": format!("hcloud://{gone}")}),
        json!({"conditions": [ready(false)]}),
    )
    .await;
    client.delete_server(gone).await.unwrap();
    eventually("lifecycle-controller deletes run-gone-1", || async {
        nodes
            .get_opt("run-gone-1")
            .await
            .unwrap()
            .is_none()
            .then_some(())
    })
    .await;
    eprintln!("lifecycle-controller: NotReady run-gone-1 deleted (its server {gone} is gone)");

    // service-controller: a LoadBalancer Service gets a load balancer and its ingress IP.
    let lb_node = client
        .create_server("run-lb-1", "cx22", "fsn1")
        .await
        .unwrap();
    create_node(
        &admin,
        "run-lb-1",
        json!({"providerID": format!("hcloud://{lb_node}")}),
        json!({"conditions": [ready(true)]}),
    )
    .await;
    create_namespace(&admin, "apps").await;
    let services: Api<Service> = Api::namespaced(admin.clone(), "apps");
    let svc: Service = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"type": "LoadBalancer", "selector": {"app": "web"},
                 "ports": [{"name": "http", "port": 80, "protocol": "TCP"}]}
    }))
    .unwrap();
    services.create(&PostParams::default(), &svc).await.unwrap();
    let ip = eventually(
        "service-controller gives apps/web an ingress IP",
        || async {
            services
                .get_opt("web")
                .await
                .unwrap()
                .and_then(|s| s.status?.load_balancer?.ingress?.first()?.ip.clone())
        },
    )
    .await;
    let lbs = client.list_load_balancers().await.unwrap();
    assert_eq!(lbs.len(), 1, "{lbs:?}");
    assert_eq!(
        lbs[0]["location"]["name"], "nbg1",
        "HCLOUD_LOAD_BALANCERS_LOCATION"
    );
    assert_eq!(
        lbs[0]["load_balancer_type"]["name"], "lb21",
        "HCLOUD_LOAD_BALANCERS_TYPE"
    );
    eprintln!(
        "service-controller: apps/web ingress {ip} (load balancer {}, {} in {})",
        lbs[0]["id"], lbs[0]["load_balancer_type"]["name"], lbs[0]["location"]["name"]
    );

    // route-controller: a route for the Node's podCIDR in the network, NetworkUnavailable=False.
    let rt = client
        .create_server("run-rt-1", "cx22", "fsn1")
        .await
        .unwrap();
    client.attach_to_network(rt, network, None).await.unwrap();
    let server = client.get_server(rt).await.unwrap();
    let private_ip = inner(&server, "server")["private_net"][0]["ip"]
        .as_str()
        .unwrap()
        .to_owned();
    create_node(
        &admin,
        "run-rt-1",
        json!({"providerID": format!("hcloud://{rt}"), "podCIDR": "10.244.7.0/24", "podCIDRs": ["10.244.7.0/24"]}),
        json!({"conditions": [ready(true)], "addresses": [{"type": "InternalIP", "address": private_ip}]}),
    )
    .await;
    eventually(
        "route-controller routes 10.244.7.0/24 in network k8s",
        || async {
            let net = client.get_network(network).await.unwrap();
            inner(&net, "network")["routes"]
                .as_array()
                .unwrap()
                .iter()
                .any(|r| r["destination"] == "10.244.7.0/24" && r["gateway"] == private_ip.as_str())
                .then_some(())
        },
    )
    .await;
    eventually(
        "route-controller sets NetworkUnavailable=False on run-rt-1",
        || async {
            let n = nodes.get_opt("run-rt-1").await.unwrap()?;
            n.status?
                .conditions?
                .into_iter()
                .find(|c| c.type_ == "NetworkUnavailable" && c.status == "False")
                .map(|_| ())
        },
    )
    .await;
    eprintln!(
        "route-controller: route 10.244.7.0/24 -> {private_ip} in network k8s, NetworkUnavailable=False"
    );

    // /metrics on the admin port, where the PodMonitor scrapes it.
    for (c, (t, _)) in &started {
        let text = http_get(t.port("admin"), "/metrics", &[])
            .await
            .unwrap_or_default();
        assert!(
            text.contains("cloud_controllers_"),
            "{c}: /metrics:\n{text}"
        );
    }

    // SIGTERM (what the kubelet sends) exits 0 and releases every Lease.
    fleet.terminate_all().await;
    for c in started.keys() {
        let lease = format!("cloud-controller-manager-{c}");
        assert_eq!(
            lease_holder(&admin, ns, &lease).await,
            None,
            "{c}: Lease released"
        );
    }
    eprintln!("all four exited 0 on SIGTERM and released their Leases");
}

/// Renders a release `release` with only the lifecycle-controller on, from image
/// `localhost/lifecycle-controller:<tag>`, starts it in a container and waits (20 s each) for its
/// readiness and for its Lease; then SIGTERM must end it with exit 0. The error says which step
/// failed, with the container's output.
pub async fn lifecycle_controller_image_runs(release: &str, tag: &str) -> Result<(), String> {
    const STEP: Duration = Duration::from_secs(20);
    let k = testenv::kube().await;
    let admin = k.client().await;
    let sim = Sim::start().await;
    let ns = release;
    create_namespace(&admin, ns).await;
    let values = json!({
        "credentials": {"create": true, "secretName": "hcloud", "token": sim.token()},
        "hcloud": {"endpoint": sim.endpoint()},
        "nodeController": {"enabled": false},
        "serviceController": {"enabled": false},
        "lifecycleController": {
            "adminPort": free_port(),
            "image": {"repository": "localhost/lifecycle-controller", "tag": tag},
        },
    });
    let mut fleet = Fleet::in_containers(&format!("{release}-"), tag);
    let values_file = fleet.dir.path().join("values.json");
    std::fs::write(&values_file, values.to_string()).unwrap();
    let objects = Render::new(release, ns).values(&values_file).objects();
    apply_rendered(&admin, &objects).await;
    let deploy = crate::of_kind(&objects, "Deployment")
        .next()
        .expect("the lifecycle-controller Deployment");
    let pod = format!("{}-7d9f8b-q4x2m", crate::name(deploy));
    crate::run::start(&k, &admin, deploy, &pod, Vec::new(), &mut fleet).await;
    let process = fleet.procs.last_mut().expect("started");
    process.wait_ready(STEP).await?;
    let lease = "cloud-controller-manager-lifecycle-controller";
    let deadline = tokio::time::Instant::now() + STEP;
    loop {
        match lease_holder(&admin, ns, lease).await {
            Some(holder) if holder.starts_with(&pod) => break,
            _ if tokio::time::Instant::now() > deadline => {
                return Err(format!(
                    "{pod} did not hold Lease {ns}/{lease} within {STEP:?}:\n{}",
                    process.log_tail(20)
                ));
            }
            _ => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
    let status = process.terminate().await;
    if !status.success() {
        return Err(format!("{pod} exited with {status} on SIGTERM"));
    }
    Ok(())
}
