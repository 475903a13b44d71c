//! The `simulator` block: cloud-sim in the cluster and every controller pointed at it.

use chart_tests::{CONTROLLERS, Render, find};
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
    assert_eq!(
        env(sim, "CLOUD_SIM_TOKEN").unwrap()["valueFrom"]["secretKeyRef"],
        json!({"name": "cloud-controllers-simulator", "key": "token"})
    );
    for c in CONTROLLERS {
        let d = find(&objects, "Deployment", &format!("cloud-controllers-{c}"));
        assert_eq!(
            env(d, "HCLOUD_ENDPOINT").unwrap()["value"],
            format!("http://cloud-controllers-simulator.kube-system.svc:{port}/v1")
        );
        assert_eq!(
            token_source(d),
            json!({"name": "cloud-controllers-simulator", "key": "token"})
        );
    }
    // hostNetwork pods still resolve the simulator's Service name.
    let route = find(&objects, "Deployment", "cloud-controllers-route-controller");
    assert_eq!(
        route["spec"]["template"]["spec"]["dnsPolicy"],
        "ClusterFirstWithHostNet"
    );
    // Same token on every render of the same release (no random value that changes on upgrade).
    let again = Render::default()
        .values("charts/cloud-controllers/ci/simulator-values.yaml")
        .objects();
    assert_eq!(
        find(&again, "Secret", "cloud-controllers-simulator")["stringData"]["token"],
        token
    );
}
