//! HCCM's pod options: extra volumes, dnsConfig, strategy and tolerations.

use chart_tests::{CONTROLLERS, Render};
use serde_json::json;

use crate::support::{container, deployment, env, no_surge, pod_spec};

#[test]
fn extra_volumes_mount_a_token_file_in_every_controller() {
    let objects = Render::default()
        .values("charts/cloud-controllers/ci/pod-options-values.yaml")
        .objects();
    let token_volume = json!({
        "name": "hcloud-token",
        "secret": {"secretName": "hcloud", "items": [{"key": "token", "path": "token"}]}
    });
    let token_mount = json!({"name": "hcloud-token", "mountPath": "/etc/hcloud", "readOnly": true});
    for c in CONTROLLERS {
        let d = deployment(&objects, c);
        let volumes = pod_spec(d)["volumes"].as_array().unwrap();
        let mounts = container(d)["volumeMounts"].as_array().unwrap();
        assert_eq!(volumes[0], token_volume, "{c}: the top-level volume first");
        assert_eq!(mounts[0], token_mount, "{c}");
        assert_eq!(
            env(d, "HCLOUD_TOKEN_FILE").map(|e| &e["value"]),
            Some(&json!("/etc/hcloud/token")),
            "{c}"
        );
        assert!(
            env(d, "HCLOUD_TOKEN").is_none(),
            "{c}: the controllers refuse HCLOUD_TOKEN and HCLOUD_TOKEN_FILE together"
        );
        // The controller's own volume is appended, then the chart's token volume (unused here:
        // the controller's env points HCLOUD_TOKEN_FILE at the user's).
        let own = usize::from(c == "node-controller");
        if own == 1 {
            assert_eq!(
                volumes[1],
                json!({"name": "scratch", "emptyDir": {"sizeLimit": "16Mi"}})
            );
            assert_eq!(mounts[1], json!({"name": "scratch", "mountPath": "/tmp"}));
        }
        assert_eq!(volumes.len(), 2 + own, "{c}");
        assert_eq!(mounts.len(), 2 + own, "{c}");
        assert_eq!(volumes[1 + own]["name"], "cloud-credentials", "{c}");
    }
}

#[test]
fn dns_config_and_strategy_have_a_default_and_per_controller_overrides() {
    let objects = Render::default()
        .values("charts/cloud-controllers/ci/pod-options-values.yaml")
        .objects();
    let ndots = json!({"options": [{"name": "ndots", "value": "1"}]});
    let surge =
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}});
    for c in ["lifecycle-controller", "route-controller"] {
        let d = deployment(&objects, c);
        assert_eq!(
            pod_spec(d)["dnsConfig"],
            ndots,
            "{c}: the top-level dnsConfig"
        );
        assert_eq!(d["spec"]["strategy"], surge, "{c}: the top-level strategy");
    }
    let service = deployment(&objects, "service-controller");
    assert_eq!(pod_spec(service)["dnsPolicy"], "None");
    assert_eq!(
        pod_spec(service)["dnsConfig"],
        json!({"nameservers": ["185.12.64.1", "185.12.64.2"]}),
        "the controller's dnsConfig replaces the top-level one"
    );
    let node = deployment(&objects, "node-controller");
    assert_eq!(pod_spec(node)["hostNetwork"], true);
    assert_eq!(
        node["spec"]["strategy"],
        json!({"type": "Recreate"}),
        "a given strategy wins over hostNetwork's maxSurge 0"
    );

    // A top-level strategy also wins over hostNetwork's; without one hostNetwork keeps maxSurge 0.
    let objects = Render::default()
        .set("nodeController.hostNetwork", true)
        .set("strategy.type", "Recreate")
        .objects();
    assert_eq!(
        deployment(&objects, "node-controller")["spec"]["strategy"],
        json!({"type": "Recreate"})
    );
    let objects = Render::default()
        .set("nodeController.hostNetwork", true)
        .set("serviceController.strategy.type", "Recreate")
        .objects();
    assert_eq!(
        deployment(&objects, "node-controller")["spec"]["strategy"],
        no_surge()
    );
    assert!(deployment(&objects, "lifecycle-controller")["spec"]["strategy"].is_null());
}

#[test]
fn default_tolerations_are_hccms() {
    let objects = Render::default()
        .values("charts/cloud-controllers/ci/all-on-values.yaml")
        .set_json(
            "routeController.tolerations",
            &json!([{"key": "dedicated", "operator": "Equal", "value": "system", "effect": "NoSchedule"}]),
        )
        .objects();
    for c in CONTROLLERS {
        let d = deployment(&objects, c);
        let tolerations = pod_spec(d)["tolerations"].as_array().unwrap();
        for want in [
            // HCCM's built-in set.
            json!({"key": "node.cloudprovider.kubernetes.io/uninitialized", "value": "true", "effect": "NoSchedule"}),
            json!({"key": "CriticalAddonsOnly", "operator": "Exists"}),
            json!({"key": "node-role.kubernetes.io/master", "operator": "Exists", "effect": "NoSchedule"}),
            json!({"key": "node-role.kubernetes.io/control-plane", "operator": "Exists", "effect": "NoSchedule"}),
            // No tolerationSeconds: never evicted from a NotReady node (a fresh cluster's, before
            // its CNI runs), where DefaultTolerationSeconds would evict after 300 s.
            json!({"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"}),
            json!({"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoSchedule"}),
        ] {
            assert!(
                tolerations.contains(&want),
                "{c}: {want} in {tolerations:?}"
            );
        }
        // Not unreachable (HCCM neither): eviction from a dead node is what moves a single replica
        // elsewhere; tolerating it forever would strand it there.
        assert!(
            !tolerations
                .iter()
                .any(|t| t["key"] == "node.kubernetes.io/unreachable"),
            "{c}: {tolerations:?}"
        );
        let extra = tolerations.iter().any(|t| t["key"] == "dedicated");
        assert_eq!(extra, c == "route-controller", "{c}: its own are appended");
        // On the host's network a pod needs no pod network, so it tolerates a node whose network
        // is not available yet (the route-controller is what makes it available); on the pod
        // network it waits for it.
        let network_unavailable = json!({"key": "node.kubernetes.io/network-unavailable",
                                         "operator": "Exists", "effect": "NoSchedule"});
        assert_eq!(
            tolerations.contains(&network_unavailable),
            pod_spec(d)["hostNetwork"] == true,
            "{c}: {tolerations:?}"
        );
    }
}
