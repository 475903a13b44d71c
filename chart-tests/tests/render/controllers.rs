//! What each controller's Deployment says: security, scheduling, probes on the admin port, and the
//! per-controller args, env, images and HA settings.

use chart_tests::{CONTROLLERS, Render, find};
use serde_json::json;

use crate::support::{args, container, env};

#[test]
fn controllers_are_secure_schedulable_and_probed_on_their_admin_port() {
    let objects = Render::default()
        .values("charts/cloud-controllers/ci/all-on-values.yaml")
        .objects();
    let ports = [10271, 10272, 10273, 10274];
    for (c, port) in CONTROLLERS.into_iter().zip(ports) {
        let d = find(&objects, "Deployment", &format!("cloud-controllers-{c}"));
        let pod = &d["spec"]["template"]["spec"];
        let ctr = container(d);
        assert_eq!(ctr["name"], c);
        assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
        assert_eq!(
            pod["securityContext"]["seccompProfile"]["type"],
            "RuntimeDefault"
        );
        assert_eq!(ctr["securityContext"]["readOnlyRootFilesystem"], true);
        assert_eq!(ctr["securityContext"]["allowPrivilegeEscalation"], false);
        assert_eq!(
            ctr["securityContext"]["capabilities"]["drop"],
            json!(["ALL"])
        );
        assert_eq!(
            pod["hostNetwork"], false,
            "{c}: hostNetwork is off by default"
        );
        // A controller stopped by a configuration problem (exit 2) shows why in `kubectl describe`.
        assert_eq!(
            ctr["terminationMessagePolicy"], "FallbackToLogsOnError",
            "{c}"
        );
        assert_eq!(pod["priorityClassName"], "system-cluster-critical");
        let tolerations = pod["tolerations"].to_string();
        for key in [
            "node.cloudprovider.kubernetes.io/uninitialized",
            "node-role.kubernetes.io/control-plane",
        ] {
            assert!(tolerations.contains(key), "{c}: tolerates {key}");
        }
        assert_eq!(
            ctr["ports"],
            json!([{"name": "admin", "containerPort": port, "protocol": "TCP"}])
        );
        assert_eq!(
            ctr["livenessProbe"]["httpGet"],
            json!({"path": "/healthz", "port": "admin"})
        );
        assert_eq!(
            ctr["readinessProbe"]["httpGet"],
            json!({"path": "/readyz", "port": "admin"})
        );
        let a = args(d);
        assert!(
            a.contains(&format!("--admin-address=0.0.0.0:{port}")),
            "{c}: {a:?}"
        );
        assert!(a.contains(&"--leader-elect=true".to_owned()), "{c}: {a:?}");
        assert_eq!(
            env(d, "POD_NAME").unwrap()["valueFrom"]["fieldRef"]["fieldPath"],
            "metadata.name",
            "{c}: the Lease identity is the pod name"
        );
        assert_eq!(
            ctr["image"],
            format!("ghcr.io/cloud-controllers/{c}:0.1.0"),
            "{c}: own image, tag = appVersion"
        );
    }
    let route = find(&objects, "Deployment", "cloud-controllers-route-controller");
    assert!(args(route).contains(&"--cluster-cidr=10.244.0.0/16".to_owned()));
}

#[test]
fn args_env_and_images_can_be_changed_per_controller() {
    let objects = Render::default()
        .set("nodeController.args.concurrent-node-syncs", 3)
        .set("nodeController.args.log-format", "null")
        .set("nodeController.env.RUST_LOG", "debug")
        .set("nodeController.env.POD_NAME", "null")
        .set_json(
            "nodeController.extraEnv",
            &json!([{"name": "X", "value": "y"}]),
        )
        .set("nodeController.image.tag", "v9")
        .set(
            "nodeController.image.digest",
            format!("sha256:{}", "a".repeat(64)),
        )
        .set("serviceController.image.repository", "registry.local/svc")
        .objects();
    let node = find(&objects, "Deployment", "cloud-controllers-node-controller");
    let a = args(node);
    assert!(a.contains(&"--concurrent-node-syncs=3".to_owned()), "{a:?}");
    assert!(
        !a.iter().any(|x| x.starts_with("--log-format")),
        "null drops a flag: {a:?}"
    );
    assert_eq!(env(node, "RUST_LOG").unwrap()["value"], "debug");
    assert!(env(node, "POD_NAME").is_none(), "null drops a variable");
    assert_eq!(env(node, "X").unwrap()["value"], "y");
    assert_eq!(
        container(node)["image"],
        format!(
            "ghcr.io/cloud-controllers/node-controller:v9@sha256:{}",
            "a".repeat(64)
        )
    );
    let svc = find(
        &objects,
        "Deployment",
        "cloud-controllers-service-controller",
    );
    assert_eq!(container(svc)["image"], "registry.local/svc:0.1.0");
}

#[test]
fn ha_values_elect_a_leader_spread_and_keep_one() {
    let objects = Render::default()
        .values("charts/cloud-controllers/ci/ha-values.yaml")
        .objects();
    for c in CONTROLLERS {
        let d = find(&objects, "Deployment", &format!("cloud-controllers-{c}"));
        assert_eq!(d["spec"]["replicas"], 2);
        assert!(args(d).contains(&"--leader-elect=true".to_owned()));
        let anti = &d["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"];
        assert_eq!(
            anti["preferredDuringSchedulingIgnoredDuringExecution"][0]["podAffinityTerm"]["labelSelector"]
                ["matchLabels"]["app.kubernetes.io/component"],
            c
        );
        let pdb = find(
            &objects,
            "PodDisruptionBudget",
            &format!("cloud-controllers-{c}"),
        );
        assert_eq!(
            pdb["spec"]["selector"]["matchLabels"],
            d["spec"]["selector"]["matchLabels"]
        );
    }
    let node = find(&objects, "Deployment", "cloud-controllers-node-controller");
    assert_eq!(node["spec"]["template"]["spec"]["hostNetwork"], true);
    assert_eq!(node["spec"]["template"]["spec"]["dnsPolicy"], "Default");
    assert_eq!(
        node["spec"]["strategy"]["rollingUpdate"]["maxSurge"], 0,
        "host port: no surge"
    );
    let svc = find(
        &objects,
        "PodDisruptionBudget",
        "cloud-controllers-service-controller",
    );
    assert_eq!(svc["spec"]["minAvailable"], 1);
}

#[test]
fn node_ips_outside_the_cloud_are_refused_unless_the_values_accept_them() {
    let node_args = |render: Render| {
        let objects = render.objects();
        args(find(
            &objects,
            "Deployment",
            "cloud-controllers-node-controller",
        ))
    };
    assert!(
        !node_args(Render::default())
            .iter()
            .any(|a| a.contains("accept-node-ip-outside-cloud")),
        "upstream's rule by default"
    );
    let accepting = node_args(Render::default().set("nodeController.nodeIPOutsideCloud", "accept"));
    assert!(
        accepting
            .iter()
            .any(|a| a == "--accept-node-ip-outside-cloud=true"),
        "{accepting:?}"
    );
    let bad = Render::default()
        .set("nodeController.nodeIPOutsideCloud", "sometimes")
        .error();
    assert!(bad.contains("nodeIPOutsideCloud"), "{bad}");
}
