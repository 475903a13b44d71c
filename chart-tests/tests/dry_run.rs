//! Every object the chart renders (defaults, every ci/*.yaml and the HCCM values files of
//! chart-tests/fixtures/) sent to a real kube-apiserver as a server-side apply with dryRun=All and
//! strict field validation: schema, defaulting, admission and RBAC-escalation checks run, nothing
//! is stored.

use std::collections::BTreeMap;

use chart_tests::{Render, apply, ci_values, kind};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, GroupVersionKind, PostParams};
use kube::discovery::Discovery;
use serde_json::json;

/// prometheus-operator's PodMonitor, reduced to its name and scope (the real CRD carries the whole
/// schema; here the apiserver checks group, version, kind and scope only).
async fn install_podmonitor_crd(client: &kube::Client) {
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "podmonitors.monitoring.coreos.com"},
        "spec": {
            "group": "monitoring.coreos.com",
            "scope": "Namespaced",
            "names": {"kind": "PodMonitor", "listKind": "PodMonitorList", "plural": "podmonitors", "singular": "podmonitor"},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}
            }]
        }
    }))
    .unwrap();
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    match api.create(&PostParams::default(), &crd).await {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 409 => {}
        Err(e) => panic!("create the PodMonitor CRD: {e}"),
    }
    // Wait until the apiserver serves it.
    for _ in 0..100 {
        let discovery = chart_tests::discovery(client).await;
        if discovery
            .resolve_gvk(&GroupVersionKind::gvk(
                "monitoring.coreos.com",
                "v1",
                "PodMonitor",
            ))
            .is_some()
        {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("PodMonitor never served");
}

/// The test apiserver with the PodMonitor kind installed, and its discovery.
async fn apiserver_with_pod_monitors() -> (kube::Client, Discovery) {
    let k = testenv::kube().await;
    let client = k.client().await;
    install_podmonitor_crd(&client).await;
    let discovery = chart_tests::discovery(&client).await;
    (client, discovery)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_rendered_object_passes_a_server_side_dry_run() {
    let (client, discovery) = apiserver_with_pod_monitors().await;

    let mut renders: Vec<(String, Render)> = vec![("defaults".into(), Render::default())];
    for file in ci_values() {
        let label = file.file_name().unwrap().to_string_lossy().into_owned();
        renders.push((
            label,
            Render::default()
                .values(&file)
                // Render the PodMonitors too: the CRD above serves them.
                .arg("--api-versions")
                .arg("monitoring.coreos.com/v1/PodMonitor"),
        ));
    }
    // Another release in another namespace (names, namespaces, the Lease's Role move with it).
    renders.push((
        "all-on-values.yaml as release ccm in namespace cloud".into(),
        Render::new("ccm", "cloud").values("charts/cloud-controllers/ci/all-on-values.yaml"),
    ));
    let ns_api: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    let _ = ns_api
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "cloud"}})).unwrap(),
        )
        .await;

    let mut failures = Vec::new();
    let mut total = 0;
    for (label, render) in renders {
        let objects = render.objects();
        let mut kinds: BTreeMap<String, usize> = BTreeMap::new();
        for obj in &objects {
            match apply(&client, &discovery, obj, true).await {
                Ok(()) => *kinds.entry(kind(obj).to_owned()).or_default() += 1,
                Err(e) => failures.push(format!("{label}: {e}")),
            }
        }
        let accepted: usize = kinds.values().sum();
        total += accepted;
        eprintln!(
            "dry-run {label}: {accepted}/{} accepted {kinds:?}",
            objects.len()
        );
    }
    eprintln!("dry-run total: {total} objects accepted");
    assert!(failures.is_empty(), "rejected:\n{}", failures.join("\n"));
}

/// `helm install --dry-run=server` against the same apiserver: helm validates the manifests with the
/// cluster's OpenAPI and renders NOTES.txt, which `helm template` never shows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn helm_install_dry_run_renders_notes_that_name_what_was_enabled() {
    let k = testenv::kube().await;
    let install = |values: Option<&str>| {
        let mut cmd = chart_tests::tool(chart_tests::helm());
        cmd.args(["install", "cloud-controllers"])
            .arg(chart_tests::chart())
            .args([
                "--namespace",
                "kube-system",
                "--dry-run=server",
                "--kubeconfig",
            ])
            .arg(k.kubeconfig());
        if let Some(v) = values {
            cmd.arg("--values").arg(chart_tests::repo().join(v));
        }
        let out = chart_tests::run(cmd);
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "helm install --dry-run=server {values:?}:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        stdout
            .split_once("NOTES:\n")
            .map(|(_, n)| n.to_owned())
            .expect("NOTES")
    };
    let notes = install(None);
    eprintln!("NOTES (defaults):\n{notes}");
    for c in [
        "node-controller",
        "lifecycle-controller",
        "service-controller",
    ] {
        assert!(
            notes.contains(&format!("  - {c}: Deployment cloud-controllers-{c}")),
            "{notes}"
        );
        assert!(
            notes.contains(&format!("Lease kube-system/cloud-controller-manager-{c}")),
            "{notes}"
        );
    }
    assert!(!notes.contains("route-controller:"), "{notes}");
    assert!(
        notes.contains("create secret generic hcloud --from-literal=token="),
        "{notes}"
    );
    assert!(!notes.contains("ROBOT_"), "{notes}");
    assert!(
        notes.contains(
            "ValidatingAdmissionPolicy cloud-controllers-service-controller-annotations refuses"
        ),
        "{notes}"
    );

    // robot.enabled: where the Robot credentials are read from.
    let notes = install(Some("charts/cloud-controllers/ci/robot-values.yaml"));
    assert!(
        notes.contains(
            "robot.enabled: node-, lifecycle- and service-controller also read ROBOT_USER and ROBOT_PASSWORD from keys\nrobot-user and robot-password of that Secret"
        ),
        "{notes}"
    );

    let notes = install(Some("charts/cloud-controllers/ci/all-on-values.yaml"));
    assert!(notes.contains("  - route-controller: Deployment cloud-controllers-route-controller"));
    // (Whether the PodMonitor warning shows depends on the CRD the other test installs.)

    let notes = install(Some("charts/cloud-controllers/ci/simulator-values.yaml"));
    assert!(
        notes.contains("http://cloud-controllers-simulator.kube-system.svc:8080/v1"),
        "{notes}"
    );
    assert!(!notes.contains("create secret generic hcloud"), "{notes}");

    // HCCM's networking switch: the route-controller and hostNetwork, named as such.
    let notes = install(Some("charts/cloud-controllers/ci/networking-values.yaml"));
    for c in chart_tests::CONTROLLERS {
        assert!(
            notes.contains(&format!(
                "  - {c}: Deployment cloud-controllers-{c}, 1 replica(s)"
            )),
            "{notes}"
        );
    }
    assert!(
        notes.contains("admin port 10274, hostNetwork, Lease kube-system/cloud-controller-manager-route-controller"),
        "{notes}"
    );
    assert!(
        notes.contains("(and HCLOUD_NETWORK from key network)"),
        "{notes}"
    );
    assert!(
        !notes.contains("node-controller runs on the pod network"),
        "{notes}"
    );

    let notes = install(Some(
        "charts/cloud-controllers/ci/monitoring-off-values.yaml",
    ));
    assert!(notes.contains("HCLOUD_METRICS_ENABLED=false"), "{notes}");
    assert!(!notes.contains("/metrics | grep"), "{notes}");
}

/// HCCM's values files as they are (its chart's own and a user's) and the hand translation of the
/// user's (chart-tests/fixtures/; render/hccm_values.rs checks what they render) sent to the
/// apiserver like every ci/*.yaml.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hccm_values_files_pass_a_server_side_dry_run() {
    let (client, discovery) = apiserver_with_pod_monitors().await;
    for (file, deployments, monitors) in [
        ("hccm-values.yaml", 4, 4),
        ("hccm-values-translated.yaml", 4, 4),
        ("hccm-chart-values.yaml", 3, 0),
    ] {
        let objects = Render::default()
            .values(format!("chart-tests/fixtures/{file}"))
            .arg("--api-versions")
            .arg("monitoring.coreos.com/v1/PodMonitor")
            .objects();
        let mut kinds: BTreeMap<String, usize> = BTreeMap::new();
        let mut failures = Vec::new();
        for obj in &objects {
            match apply(&client, &discovery, obj, true).await {
                Ok(()) => *kinds.entry(kind(obj).to_owned()).or_default() += 1,
                Err(e) => failures.push(e),
            }
        }
        eprintln!(
            "dry-run {file}: {}/{} accepted {kinds:?}",
            kinds.values().sum::<usize>(),
            objects.len()
        );
        assert!(
            failures.is_empty(),
            "{file} rejected:\n{}",
            failures.join("\n")
        );
        assert_eq!(
            kinds.get("Deployment"),
            Some(&deployments),
            "{file}: {kinds:?}"
        );
        assert_eq!(
            kinds.get("PodMonitor").copied().unwrap_or(0),
            monitors,
            "{file}: {kinds:?}"
        );
    }
}
