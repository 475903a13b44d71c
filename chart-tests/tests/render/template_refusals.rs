//! What the templates themselves refuse to render: combinations that would not work.

use chart_tests::Render;
use serde_json::json;

#[test]
fn the_template_refuses_what_would_not_work() {
    let cases: Vec<(Render, &str)> = vec![
        (
            Render::default().set("routeController.enabled", true),
            "routeController.clusterCIDR is required when routeController.enabled is true",
        ),
        (
            Render::default().set("nodeController.args.leader-elect-resource-namespace", "x"),
            "nodeController.args.leader-elect-resource-namespace: this flag is managed by the chart",
        ),
        (
            Render::default().set("serviceController.args.admin-address", ":1"),
            "serviceController.args.admin-address: this flag is managed by the chart",
        ),
        (
            Render::default()
                .set("leaderElection.enabled", false)
                .set("lifecycleController.replicas", 2),
            "lifecycleController.replicas=2 needs leader election",
        ),
        (
            Render::default().set("credentials.create", true),
            "credentials.token is required when credentials.create is true",
        ),
        (
            Render::default()
                .set("networking.enabled", true)
                .set("networking.clusterCIDR", ""),
            "routeController.clusterCIDR is required when routeController.enabled is true",
        ),
        (
            Render::default()
                .set("networking.enabled", true)
                .set("serviceController.adminPort", 10271),
            "nodeController.adminPort and serviceController.adminPort are both 10271, and both pods use the host's network",
        ),
        (
            Render::default().set_json(
                "extraVolumeMounts",
                &json!([{"name": "token", "mountPath": "/etc/hcloud"}]),
            ),
            "nodeController: volume mount \"token\" (at /etc/hcloud) names no volume",
        ),
        (
            Render::default()
                .set_json("extraVolumes", &json!([{"name": "t", "emptyDir": {}}]))
                .set_json(
                    "serviceController.extraVolumes",
                    &json!([{"name": "t", "emptyDir": {}}]),
                ),
            "serviceController: volume \"t\" is defined twice",
        ),
        (
            Render::default()
                .set("monitoring.podMonitor.enabled", true)
                .set_json(
                    "monitoring.podMonitor.spec",
                    &json!({"selector": {"matchLabels": {"app": "x"}}}),
                )
                .arg("--api-versions")
                .arg("monitoring.coreos.com/v1/PodMonitor"),
            "monitoring.podMonitor.spec.selector: the chart sets each PodMonitor's selector",
        ),
    ];
    for (render, expect) in cases {
        let err = render.error();
        assert!(err.contains(expect), "{render:?}: {err}");
    }
}
