//! Monitoring: PodMonitors only when the cluster serves them, HCCM's `monitoring` and `metrics` keys.

use chart_tests::{Render, component, describe, find, of_kind};
use serde_json::json;

use crate::support::{container, deployment, env};

#[test]
fn a_pod_monitor_per_controller_only_when_the_cluster_serves_them() {
    let render = Render::default().values("charts/cloud-controllers/ci/all-on-values.yaml");
    assert_eq!(of_kind(&render.objects(), "PodMonitor").count(), 0);
    let objects = render
        .arg("--api-versions")
        .arg("monitoring.coreos.com/v1/PodMonitor")
        .objects();
    let monitors: Vec<_> = of_kind(&objects, "PodMonitor").collect();
    assert_eq!(monitors.len(), 4);
    for m in monitors {
        assert_eq!(m["spec"]["podMetricsEndpoints"][0]["port"], "admin");
        assert_eq!(m["spec"]["podMetricsEndpoints"][0]["path"], "/metrics");
        assert_eq!(m["metadata"]["labels"]["release"], "prometheus");
    }
}

#[test]
fn monitoring_disabled_turns_metrics_off_and_renders_no_pod_monitor() {
    let objects = Render::default()
        .values("charts/cloud-controllers/ci/monitoring-off-values.yaml")
        .arg("--api-versions")
        .arg("monitoring.coreos.com/v1/PodMonitor")
        .objects();
    assert_eq!(of_kind(&objects, "PodMonitor").count(), 0);
    for d in of_kind(&objects, "Deployment") {
        assert_eq!(
            env(d, "HCLOUD_METRICS_ENABLED").map(|e| &e["value"]),
            Some(&json!("false")),
            "{}",
            describe(d)
        );
        // The admin port stays: probes need it.
        assert_eq!(container(d)["ports"][0]["name"], "admin");
    }
    // Per controller the variable can still be dropped, like every variable the chart sets.
    let objects = Render::default()
        .set("monitoring.enabled", false)
        .set("serviceController.env.HCLOUD_METRICS_ENABLED", "null")
        .objects();
    assert!(
        env(
            deployment(&objects, "service-controller"),
            "HCLOUD_METRICS_ENABLED"
        )
        .is_none()
    );
    assert!(
        env(
            deployment(&objects, "node-controller"),
            "HCLOUD_METRICS_ENABLED"
        )
        .is_some()
    );
}

#[test]
fn hccms_pod_monitor_keys_shape_the_pod_monitors() {
    // HCCM's keys alone turn the PodMonitors on.
    let objects = Render::default()
        .values("charts/cloud-controllers/ci/pod-options-values.yaml")
        .set("metrics.podMonitor.interval", "30s")
        .set("metrics.podMonitor.labels.team", "platform")
        .arg("--api-versions")
        .arg("monitoring.coreos.com/v1/PodMonitor")
        .objects();
    let monitors: Vec<_> = of_kind(&objects, "PodMonitor").collect();
    assert_eq!(monitors.len(), 4);
    for m in monitors {
        let c = component(m).unwrap();
        assert_eq!(
            m["metadata"]["annotations"],
            json!({"example.com/owner": "platform"})
        );
        assert_eq!(m["metadata"]["labels"]["release"], "kube-prometheus-stack");
        assert_eq!(
            m["metadata"]["labels"]["team"], "platform",
            "both label maps"
        );
        assert_eq!(m["metadata"]["labels"]["app.kubernetes.io/component"], c);
        assert_eq!(m["spec"]["jobLabel"], "app.kubernetes.io/component");
        assert_eq!(
            m["spec"]["podMetricsEndpoints"],
            json!([{"port": "admin", "path": "/metrics", "interval": "15s", "honorLabels": true}]),
            "the endpoint's own interval wins over metrics.podMonitor.interval"
        );
        assert_eq!(
            m["spec"]["selector"]["matchLabels"],
            deployment(&objects, c)["spec"]["selector"]["matchLabels"]
        );
    }
    // metrics.podMonitor.interval fills endpoints that set none.
    let objects = Render::default()
        .set("monitoring.podMonitor.enabled", true)
        .set("metrics.podMonitor.interval", "30s")
        .arg("--api-versions")
        .arg("monitoring.coreos.com/v1/PodMonitor")
        .objects();
    let m = find(&objects, "PodMonitor", "cloud-controllers-node-controller");
    assert_eq!(
        m["spec"]["podMetricsEndpoints"],
        json!([{"port": "admin", "path": "/metrics", "interval": "30s"}])
    );
    assert!(m["metadata"]["annotations"].is_null());
}

#[test]
fn hccms_metrics_port_is_the_admin_port() {
    // HCCM's default spec scrapes its port `metrics` (8233); ours serve /metrics on `admin`.
    let objects = Render::default()
        .set("monitoring.podMonitor.enabled", true)
        .set_json(
            "monitoring.podMonitor.spec",
            &json!({"podMetricsEndpoints": [{"port": "metrics"}, {"port": "other", "path": "/x"}]}),
        )
        .arg("--api-versions")
        .arg("monitoring.coreos.com/v1/PodMonitor")
        .objects();
    let m = find(
        &objects,
        "PodMonitor",
        "cloud-controllers-service-controller",
    );
    assert_eq!(
        m["spec"]["podMetricsEndpoints"],
        json!([{"port": "admin", "path": "/metrics"}, {"port": "other", "path": "/x"}])
    );
}
