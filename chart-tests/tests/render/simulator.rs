//! The `simulator` block: cloud-sim in the cluster and every controller pointed at it.

use chart_tests::{CONTROLLERS, Render, find, name};
use serde_json::json;

use crate::support::{container, env, token_source};

#[test]
fn the_simulator_block_points_every_controller_at_cloud_sim() {
    let objects = Render::default()
        .values("charts/cloud-controllers/ci/simulator-values.yaml")
        .objects();
    let svc = find(&objects, "Service", "cloud-controllers-simulator");
    let sim = find(&objects, "Deployment", "cloud-controllers-simulator");
    let secret = find(&objects, "Secret", "cloud-controllers-simulator");
    let port = svc["spec"]["ports"][0]["port"].as_u64().unwrap();
    assert_eq!(svc["spec"]["ports"][0]["targetPort"], "http");
    assert_eq!(container(sim)["ports"][0]["name"], "http");
    assert_eq!(
        svc["spec"]["selector"],
        sim["spec"]["selector"]["matchLabels"]
    );
    let token = secret["stringData"]["token"].as_str().unwrap();
    assert_eq!(token.len(), 64, "cloud-sim wants a 64-character token");
    assert_eq!(secret["stringData"]["network"], "k8s");
    // ... and cloud-sim creates that network at start-up, so route-controller finds it.
    let args = container(sim)["args"].as_array().unwrap();
    assert!(
        args.contains(&json!("--network=k8s")),
        "the simulator's args: {args:?}"
    );
    assert_eq!(
        env(sim, "CLOUD_SIM_TOKEN").unwrap()["valueFrom"]["secretKeyRef"],
        json!({"name": "cloud-controllers-simulator", "key": "token"})
    );
    // The Service's variables, which the kubelet sets in every pod of its namespace and expands in
    // $(NAME): the name upper-cased, - as _. No cluster DNS needed.
    let var = name(svc).to_uppercase().replace('-', "_");
    assert_eq!(var, "CLOUD_CONTROLLERS_SIMULATOR");
    assert!(port > 0);
    for c in CONTROLLERS {
        let d = find(&objects, "Deployment", &format!("cloud-controllers-{c}"));
        assert_eq!(
            env(d, "HCLOUD_ENDPOINT").unwrap()["value"],
            format!("http://$({var}_SERVICE_HOST):$({var}_SERVICE_PORT)/v1")
        );
        assert_eq!(
            token_source(d),
            json!({"name": "cloud-controllers-simulator", "key": "token"})
        );
        let pod = &d["spec"]["template"]["spec"];
        // hostNetwork (the route-controller here) or not: the node's resolver, as without the
        // simulator; and the Service variables are on.
        assert_eq!(pod["dnsPolicy"], "Default", "{c}");
        assert_eq!(pod["enableServiceLinks"], true, "{c}");
    }
    assert_eq!(
        find(&objects, "Deployment", "cloud-controllers-route-controller")["spec"]["template"]["spec"]
            ["hostNetwork"],
        true
    );
    // The simulator runs before any node is initialized, whatever its tolerations say.
    assert_eq!(
        container(sim)["terminationMessagePolicy"],
        "FallbackToLogsOnError"
    );
    for tolerations in [json!(null), json!([])] {
        let objects = Render::default()
            .values("charts/cloud-controllers/ci/simulator-values.yaml")
            .set_json("simulator.tolerations", &tolerations)
            .objects();
        let sim = find(&objects, "Deployment", "cloud-controllers-simulator");
        assert!(
            sim["spec"]["template"]["spec"]["tolerations"]
                .as_array()
                .unwrap()
                .contains(
                    &json!({"key": "node.cloudprovider.kubernetes.io/uninitialized",
                                  "value": "true", "effect": "NoSchedule"})
                ),
            "simulator.tolerations={tolerations}: {sim}"
        );
    }
    // Same token on every render of the same release (no random value that changes on upgrade).
    let again = Render::default()
        .values("charts/cloud-controllers/ci/simulator-values.yaml")
        .objects();
    assert_eq!(
        find(&again, "Secret", "cloud-controllers-simulator")["stringData"]["token"],
        token
    );
}
