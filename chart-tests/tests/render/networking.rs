//! HCCM's `networking.enabled` switch, explicit values over it, our defaults without it, and the
//! admin ports of controllers on the host network.

use std::collections::BTreeSet;

use chart_tests::{CONTROLLERS, Render, component, describe, find, of_kind};
use serde_json::json;

use crate::support::{args, container, deployed, deployment, env, no_surge, pod_spec};

#[test]
fn networking_enabled_is_hccms_one_switch() {
    let objects = Render::default()
        .values("charts/cloud-controllers/ci/networking-values.yaml")
        .objects();
    assert_eq!(
        deployed(&objects),
        CONTROLLERS.iter().map(|c| c.to_string()).collect(),
        "the route-controller comes with networking.enabled"
    );
    for c in CONTROLLERS {
        let d = deployment(&objects, c);
        // HCLOUD_NETWORK as hcloud.network.enabled gives it.
        assert_eq!(
            env(d, "HCLOUD_NETWORK").map(|e| &e["valueFrom"]),
            Some(&json!({"secretKeyRef": {"name": "hcloud", "key": "network", "optional": true}})),
            "{c}"
        );
        // Every pod on the host network, with what the chart does for hostNetwork.
        assert_eq!(pod_spec(d)["hostNetwork"], true, "{c}");
        assert_eq!(pod_spec(d)["dnsPolicy"], "Default", "{c}");
        assert_eq!(d["spec"]["strategy"], no_surge(), "{c}");
    }
    let route = deployment(&objects, "route-controller");
    let a = args(route);
    assert!(
        a.contains(&"--cluster-cidr=10.42.0.0/16".to_owned()),
        "{a:?}"
    );
    // Its RBAC and ServiceAccount come with it.
    find(
        &objects,
        "ClusterRole",
        "cloud-controllers:route-controller",
    );
    find(
        &objects,
        "ServiceAccount",
        "cloud-controllers-route-controller",
    );
    // HCCM's default cluster CIDR when only the switch is set.
    let objects = Render::default().set("networking.enabled", true).objects();
    let a = args(deployment(&objects, "route-controller"));
    assert!(
        a.contains(&"--cluster-cidr=10.244.0.0/16".to_owned()),
        "{a:?}"
    );
}

#[test]
fn explicit_values_win_over_networking_enabled() {
    let objects = Render::default()
        .set("networking.enabled", true)
        .set("networking.clusterCIDR", "10.42.0.0/16")
        .set("routeController.clusterCIDR", "10.96.0.0/12")
        .set("nodeController.hostNetwork", false)
        .set("hcloud.network.enabled", false)
        .set("lifecycleController.dnsPolicy", "ClusterFirstWithHostNet")
        .objects();
    let route = deployment(&objects, "route-controller");
    assert!(
        args(route).contains(&"--cluster-cidr=10.96.0.0/12".to_owned()),
        "routeController.clusterCIDR wins: {:?}",
        args(route)
    );
    assert!(
        env(route, "HCLOUD_NETWORK").is_some(),
        "the route-controller always gets the network"
    );
    let node = deployment(&objects, "node-controller");
    assert_eq!(pod_spec(node)["hostNetwork"], false);
    assert_eq!(pod_spec(node)["dnsPolicy"], "Default");
    assert!(node["spec"]["strategy"].is_null());
    assert!(
        env(node, "HCLOUD_NETWORK").is_none(),
        "hcloud.network.enabled=false wins"
    );
    let lifecycle = deployment(&objects, "lifecycle-controller");
    assert_eq!(pod_spec(lifecycle)["hostNetwork"], true);
    assert_eq!(pod_spec(lifecycle)["dnsPolicy"], "ClusterFirstWithHostNet");

    // routeController.enabled=false: no route-controller object at all.
    let objects = Render::default()
        .set("networking.enabled", true)
        .set("routeController.enabled", false)
        .objects();
    assert!(
        objects
            .iter()
            .all(|o| component(o) != Some("route-controller")),
        "{:?}",
        objects.iter().map(describe).collect::<Vec<_>>()
    );
    assert_eq!(deployed(&objects).len(), 3);
    // ... while the rest of the switch still applies.
    let service = deployment(&objects, "service-controller");
    assert_eq!(pod_spec(service)["hostNetwork"], true);
    assert!(env(service, "HCLOUD_NETWORK").is_some());
}

#[test]
fn networking_disabled_keeps_our_defaults() {
    let defaults = Render::default().objects();
    assert_eq!(
        deployed(&defaults),
        [
            "lifecycle-controller",
            "node-controller",
            "service-controller"
        ]
        .map(String::from)
        .into()
    );
    for d in of_kind(&defaults, "Deployment") {
        let what = describe(d);
        let pod = pod_spec(d);
        assert_eq!(pod["hostNetwork"], false, "{what}");
        // The node's resolver, as HCCM: cluster DNS needs initialized nodes first.
        assert_eq!(pod["dnsPolicy"], "Default", "{what}");
        assert!(pod["dnsConfig"].is_null(), "{what}");
        // The token's file, and nothing else.
        assert_eq!(
            pod["volumes"],
            json!([{"name": "cloud-credentials", "secret": {"secretName": "hcloud",
                "items": [{"key": "token", "path": "token"}]}}]),
            "{what}"
        );
        assert_eq!(
            container(d)["volumeMounts"],
            json!([{"name": "cloud-credentials", "readOnly": true,
                "mountPath": "/etc/cloud-controllers/credentials"}]),
            "{what}"
        );
        assert!(d["spec"]["strategy"].is_null(), "{what}");
        assert!(env(d, "HCLOUD_NETWORK").is_none(), "{what}");
        assert!(env(d, "HCLOUD_METRICS_ENABLED").is_none(), "{what}");
    }
    // HCCM's keys at their defaults, or the cluster CIDR alone, change nothing.
    let explicit = Render::default()
        .set("networking.enabled", false)
        .set("networking.clusterCIDR", "10.42.0.0/16")
        .set("monitoring.enabled", true)
        .objects();
    assert_eq!(explicit, defaults);
    // Our own switches still work without HCCM's.
    let objects = Render::default()
        .set("routeController.enabled", true)
        .set("routeController.clusterCIDR", "10.244.0.0/16")
        .set("routeController.hostNetwork", true)
        .objects();
    let route = deployment(&objects, "route-controller");
    assert_eq!(pod_spec(route)["hostNetwork"], true);
    assert_eq!(
        pod_spec(deployment(&objects, "node-controller"))["hostNetwork"],
        false
    );
    assert!(env(deployment(&objects, "node-controller"), "HCLOUD_NETWORK").is_none());
}

#[test]
fn host_network_controllers_keep_distinct_admin_ports() {
    // With every pod on the host network (networking.enabled), each controller binds its own port
    // on the node: 10271-10274, probed and scraped there.
    let objects = Render::default()
        .values("charts/cloud-controllers/ci/networking-values.yaml")
        .objects();
    let mut ports = BTreeSet::new();
    for c in CONTROLLERS {
        let d = deployment(&objects, c);
        assert_eq!(pod_spec(d)["hostNetwork"], true);
        let port = container(d)["ports"][0]["containerPort"].as_u64().unwrap();
        assert!(
            args(d).contains(&format!("--admin-address=0.0.0.0:{port}")),
            "{c}"
        );
        ports.insert(port);
    }
    assert_eq!(ports, [10271, 10272, 10273, 10274].into());
    // The same port twice is fine on the pod network ...
    Render::default()
        .set("serviceController.adminPort", 10271)
        .objects();
    // ... and refused when both pods share the node's network.
    let err = Render::default()
        .set("nodeController.hostNetwork", true)
        .set("serviceController.hostNetwork", true)
        .set("serviceController.adminPort", 10271)
        .error();
    assert!(
        err.contains("nodeController.adminPort and serviceController.adminPort are both 10271"),
        "{err}"
    );
}
