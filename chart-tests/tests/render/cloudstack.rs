//! `cloud: cloudstack`: every controller with upstream's Secret (`cloudstack-secret`, key
//! `cloud-config`) mounted at /config and `--cloud-provider=external-cloudstack
//! --cloud-config=/config/cloud-config`, as upstream's deployment.yaml; the RBAC, Leases and
//! Deployments otherwise as for Hetzner; the Hetzner-only parts off.

use chart_tests::{Render, describe, kind, of_kind};
use serde_json::{Value, json};

use crate::support::{args, container, deployed, deployment, pod_spec, schema_line};

fn cloudstack() -> Render {
    Render::default().set("cloud", "cloudstack")
}

fn env_names(deploy: &Value) -> Vec<String> {
    container(deploy)["env"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["name"].as_str().map(str::to_owned))
        .collect()
}

#[test]
fn cloudstack_mounts_upstreams_secret_and_passes_upstreams_flags_to_every_controller() {
    let objects = cloudstack().objects();
    assert_eq!(
        deployed(&objects),
        [
            "lifecycle-controller",
            "node-controller",
            "service-controller"
        ]
        .map(String::from)
        .into()
    );
    for controller in [
        "node-controller",
        "lifecycle-controller",
        "service-controller",
    ] {
        let d = deployment(&objects, controller);
        let a = args(d);
        assert!(
            a.contains(&"--cloud-provider=external-cloudstack".to_string())
                && a.contains(&"--cloud-config=/config/cloud-config".to_string()),
            "{}: {a:?}",
            describe(d)
        );
        assert_eq!(
            pod_spec(d)["volumes"],
            json!([{"name": "cloud-config", "secret": {"secretName": "cloudstack-secret",
                "items": [{"key": "cloud-config", "path": "cloud-config"}]}}]),
            "{}",
            describe(d)
        );
        assert_eq!(
            container(d)["volumeMounts"],
            json!([{"name": "cloud-config", "mountPath": "/config", "readOnly": true}]),
            "{}",
            describe(d)
        );
        // No Hetzner credential or setting: only the Lease identity.
        assert_eq!(env_names(d), ["POD_NAME"], "{}", describe(d));
    }
}

#[test]
fn cloudstack_keeps_the_rbac_leases_and_deployments_of_hetzner_and_renders_no_hetzner_part() {
    let hcloud = Render::default().objects();
    let cs = cloudstack().objects();
    // The same objects but the admission policies (Hetzner's annotations) and their bindings.
    let names = |objects: &[Value]| -> Vec<String> {
        objects
            .iter()
            .filter(|o| !kind(o).starts_with("ValidatingAdmissionPolicy"))
            .map(describe)
            .collect()
    };
    assert_eq!(names(&cs), names(&hcloud));
    // Hetzner's policies not, CloudStack's own (tests/cloudstack_policy.rs) and its binding.
    let policies: Vec<String> = cs
        .iter()
        .filter(|o| kind(o).starts_with("ValidatingAdmissionPolicy"))
        .map(describe)
        .collect();
    assert_eq!(policies.len(), 2, "{policies:?}");
    assert!(
        policies.iter().all(|p| p.contains("-cloudstack")),
        "{policies:?}"
    );
    for k in ["ClusterRole", "Role", "Lease"] {
        let rules = |objects: &[Value]| -> Vec<Value> {
            of_kind(objects, k)
                .map(|o| json!([o["metadata"]["name"], o["rules"]]))
                .collect()
        };
        assert_eq!(rules(&cs), rules(&hcloud), "{k}");
    }
    // A created hcloud Secret and HCLOUD_NETWORK do not appear either.
    let text = serde_json::to_string(&cs).unwrap();
    assert!(
        !text.contains("HCLOUD_") && !text.contains("ROBOT_"),
        "{text}"
    );
}

#[test]
fn cloudstack_takes_another_secret_name_and_key() {
    let objects = cloudstack()
        .set("cloudstack.secretName", "cs-config")
        .set("cloudstack.key", "ini")
        .objects();
    let d = deployment(&objects, "node-controller");
    assert_eq!(
        pod_spec(d)["volumes"][0]["secret"],
        json!({"secretName": "cs-config", "items": [{"key": "ini", "path": "cloud-config"}]})
    );
}

#[test]
fn cloudstack_refuses_what_only_hetzner_has() {
    for (key, needle) in [
        ("routeController.enabled", "CloudStack offers no routes"),
        ("simulator.enabled", "serves the Hetzner API only"),
        ("credentials.create", "credentials are Hetzner's"),
    ] {
        let err = cloudstack().set(key, true).error();
        assert!(err.contains(needle), "{key}: {err}");
    }
    // networking.enabled (HCCM's switch, routes on by default) leaves the route-controller out.
    let objects = cloudstack().set("networking.enabled", true).objects();
    assert!(!deployed(&objects).contains("route-controller"));
    let err = Render::default().set("cloud", "aws").error();
    assert!(schema_line(&err).contains("cloud"), "{err}");
}
