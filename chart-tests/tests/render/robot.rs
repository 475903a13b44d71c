//! HCCM's Robot (dedicated servers) settings: off by default, the Secret's keys, tuning variables,
//! the simulator's Robot webservice, and the credentials a created Secret holds.

use chart_tests::{Render, component, describe, find, of_kind};
use serde_json::{Value, json};

use crate::support::{container, deployed, deployment, env, schema_line};

/// The names of a Deployment's ROBOT_* variables.
fn robot_vars(deploy: &Value) -> Vec<String> {
    container(deploy)["env"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["name"].as_str())
        .filter(|n| n.starts_with("ROBOT_"))
        .map(str::to_owned)
        .collect()
}

/// The controllers HCCM's Robot settings reach: all but the route-controller.
const ROBOT_CONTROLLERS: [&str; 3] = [
    "node-controller",
    "lifecycle-controller",
    "service-controller",
];

const ROBOT_VALUES: &str = "charts/cloud-controllers/ci/robot-values.yaml";

#[test]
fn robot_is_off_by_default_and_then_passes_no_robot_variable() {
    for (what, render) in [
        ("defaults", Render::default()),
        (
            "all-on-values.yaml",
            Render::default().values("charts/cloud-controllers/ci/all-on-values.yaml"),
        ),
        (
            "simulator-values.yaml",
            Render::default().values("charts/cloud-controllers/ci/simulator-values.yaml"),
        ),
        // Robot's other keys do nothing while robot.enabled is false.
        (
            "robot-values.yaml with robot.enabled=false",
            Render::default()
                .values(ROBOT_VALUES)
                .set("robot.enabled", false),
        ),
    ] {
        let objects = render.objects();
        assert!(of_kind(&objects, "Deployment").count() >= 3, "{what}");
        for d in of_kind(&objects, "Deployment") {
            assert_eq!(
                robot_vars(d),
                Vec::<String>::new(),
                "{what}: {}",
                describe(d)
            );
            let text = container(d)["env"].to_string();
            assert!(!text.contains("robot"), "{what}: {}: {text}", describe(d));
        }
        // Nor Robot keys in the simulator's Secret.
        for s in of_kind(&objects, "Secret").filter(|s| component(s) == Some("simulator")) {
            assert!(
                s["stringData"].get("robot-user").is_none(),
                "{what}: {}",
                describe(s)
            );
        }
    }
}

#[test]
fn robot_enabled_reads_hccms_secret_keys_in_node_lifecycle_and_service_only() {
    let objects = Render::default()
        .set("robot.enabled", true)
        .set("routeController.enabled", true)
        .set("routeController.clusterCIDR", "10.244.0.0/16")
        .objects();
    assert_eq!(deployed(&objects).len(), 4);
    for c in ROBOT_CONTROLLERS {
        let d = deployment(&objects, c);
        assert_eq!(env(d, "ROBOT_ENABLED").unwrap()["value"], "true", "{c}");
        assert_eq!(
            env(d, "ROBOT_USER").unwrap()["valueFrom"],
            json!({"secretKeyRef": {"name": "hcloud", "key": "robot-user", "optional": true}}),
            "{c}"
        );
        assert_eq!(
            env(d, "ROBOT_PASSWORD").unwrap()["valueFrom"],
            json!({"secretKeyRef": {"name": "hcloud", "key": "robot-password", "optional": true}}),
            "{c}"
        );
        // Empty tuning values are not passed: the binaries' defaults (5m, true, Hetzner's URL).
        assert_eq!(
            robot_vars(d),
            ["ROBOT_ENABLED", "ROBOT_PASSWORD", "ROBOT_USER"],
            "{c}"
        );
    }
    let route = deployment(&objects, "route-controller");
    assert_eq!(robot_vars(route), Vec::<String>::new(), "route-controller");
    // No refusal of routes together with Robot (HCCM has one; we do not).
    assert!(env(route, "HCLOUD_NETWORK").is_some());

    // Other key names and Secret, as for the token.
    let objects = Render::default()
        .set("robot.enabled", true)
        .set("credentials.secretName", "cloud")
        .set("credentials.robotUserKey", "ru")
        .set("credentials.robotPasswordKey", "rp")
        .objects();
    for c in ROBOT_CONTROLLERS {
        let d = deployment(&objects, c);
        assert_eq!(
            env(d, "ROBOT_USER").unwrap()["valueFrom"]["secretKeyRef"],
            json!({"name": "cloud", "key": "ru", "optional": true}),
            "{c}"
        );
        assert_eq!(
            env(d, "ROBOT_PASSWORD").unwrap()["valueFrom"]["secretKeyRef"],
            json!({"name": "cloud", "key": "rp", "optional": true}),
            "{c}"
        );
    }
}

#[test]
fn robot_tuning_values_become_hccms_variables() {
    let objects = Render::default().values(ROBOT_VALUES).objects();
    for c in ROBOT_CONTROLLERS {
        let d = deployment(&objects, c);
        for (var, value) in [
            ("ROBOT_ENABLED", "true"),
            ("ROBOT_CACHE_TIMEOUT", "10m"),
            ("ROBOT_RATE_LIMIT_WAIT_TIME", "30s"),
            ("ROBOT_FORWARD_INTERNAL_IPS", "false"),
            ("ROBOT_ENDPOINT", "https://robot-ws.example.test"),
        ] {
            assert_eq!(
                env(d, var).map(|e| &e["value"]),
                Some(&json!(value)),
                "{c}: {var}"
            );
        }
    }
    assert_eq!(
        robot_vars(deployment(&objects, "route-controller")),
        Vec::<String>::new()
    );
    let objects = Render::default()
        .set("robot.enabled", true)
        .set("robot.forwardInternalIPs", true)
        .objects();
    assert_eq!(
        env(
            deployment(&objects, "node-controller"),
            "ROBOT_FORWARD_INTERNAL_IPS"
        )
        .unwrap()["value"],
        "true"
    );
    // The schema checks them like the HCLOUD_* values.
    for (key, json, expect) in [
        (
            "robot.cacheTimeout",
            json!("five minutes"),
            "does not match pattern",
        ),
        (
            "robot.rateLimitWaitTime",
            json!(30),
            "got number, want string",
        ),
        (
            "robot.forwardInternalIPs",
            json!("yes"),
            "got string, want null or boolean",
        ),
        (
            "robot.endpoint",
            json!("robot-ws.your-server.de"),
            "does not match pattern",
        ),
        ("robot.enabled", json!("true"), "got string, want boolean"),
        ("credentials.robotUserKey", json!(""), "minLength"),
        (
            "robot.enabeld",
            json!(true),
            "additional properties 'enabeld'",
        ),
    ] {
        let err = Render::default().set_json(key, &json).error();
        assert!(
            err.contains("values don't meet the specifications of the schema")
                && err.contains(expect),
            "--set-json {key}={json}: {err}"
        );
        eprintln!("--set-json {key}={json}: {}", schema_line(&err));
    }
}

#[test]
fn the_simulator_serves_the_robot_webservice_to_the_controllers() {
    let render = Render::default()
        .values("charts/cloud-controllers/ci/simulator-values.yaml")
        .set("robot.enabled", true)
        // The simulator wins over robot.endpoint, as over hcloud.endpoint.
        .set("robot.endpoint", "https://robot-ws.example.test");
    let objects = render.objects();
    // The simulator's Service through the variables the kubelet sets (render/simulator.rs).
    find(&objects, "Service", "cloud-controllers-simulator");
    let base = "http://$(CLOUD_CONTROLLERS_SIMULATOR_SERVICE_HOST):$(CLOUD_CONTROLLERS_SIMULATOR_SERVICE_PORT)";
    for c in ROBOT_CONTROLLERS {
        let d = deployment(&objects, c);
        assert_eq!(
            env(d, "ROBOT_ENDPOINT").unwrap()["value"],
            format!("{base}/robot"),
            "{c}"
        );
        assert_eq!(
            env(d, "HCLOUD_ENDPOINT").unwrap()["value"],
            format!("{base}/v1"),
            "{c}"
        );
        // The simulator's Secret, like HCLOUD_TOKEN.
        assert_eq!(
            env(d, "ROBOT_USER").unwrap()["valueFrom"]["secretKeyRef"],
            json!({"name": "cloud-controllers-simulator", "key": "robot-user", "optional": true}),
            "{c}"
        );
    }
    assert_eq!(
        robot_vars(deployment(&objects, "route-controller")),
        Vec::<String>::new()
    );
    // cloud-sim accepts exactly the credentials the controllers read.
    let secret = find(&objects, "Secret", "cloud-controllers-simulator");
    assert_eq!(secret["stringData"]["robot-user"], "cloudsim-robot");
    let password = secret["stringData"]["robot-password"].as_str().unwrap();
    assert_eq!(password.len(), 64, "{password}");
    let sim = find(&objects, "Deployment", "cloud-controllers-simulator");
    for (var, key) in [
        ("CLOUD_SIM_ROBOT_USER", "robot-user"),
        ("CLOUD_SIM_ROBOT_PASSWORD", "robot-password"),
    ] {
        assert_eq!(
            env(sim, var).unwrap()["valueFrom"]["secretKeyRef"],
            json!({"name": "cloud-controllers-simulator", "key": key}),
            "{var}"
        );
    }
    // Stable across renders (no random value that changes on upgrade).
    assert_eq!(
        find(&render.objects(), "Secret", "cloud-controllers-simulator")["stringData"]["robot-password"],
        password
    );
    // A flag that would make cloud-sim disagree with its Secret is refused.
    let err = render
        .clone()
        .set("simulator.args.robot-user", "someone")
        .error();
    assert!(
        err.contains("simulator.args.robot-user: managed by the chart with robot.enabled"),
        "{err}"
    );
}

#[test]
fn credentials_create_writes_the_robot_credentials_into_the_secret() {
    let objects = Render::default().values(ROBOT_VALUES).objects();
    let secret = find(&objects, "Secret", "hcloud");
    assert_eq!(
        secret["stringData"],
        json!({
            "token": "ci-token-0123456789012345678901234567890123456789012345678901234",
            "network": "k8s",
            "robot-user": "#ws+ci-robot",
            "robot-password": "ci-robot-password",
        })
    );
    // Under the configured keys; the controllers read those keys of that Secret.
    let objects = Render::default()
        .values(ROBOT_VALUES)
        .set("credentials.robotUserKey", "ru")
        .set("credentials.robotPasswordKey", "rp")
        .objects();
    let data = &find(&objects, "Secret", "hcloud")["stringData"];
    assert_eq!(
        (&data["ru"], &data["rp"]),
        (&json!("#ws+ci-robot"), &json!("ci-robot-password"))
    );
    assert!(data.get("robot-user").is_none(), "{data}");
    // Empty: not written (the keys are optional).
    let objects = Render::default()
        .values(ROBOT_VALUES)
        .set("credentials.robotUser", "")
        .set("credentials.robotPassword", "")
        .objects();
    let data = &find(&objects, "Secret", "hcloud")["stringData"];
    assert_eq!(
        data.as_object().unwrap().keys().collect::<Vec<_>>(),
        ["network", "token"],
        "{data}"
    );
    // One without the other would stop every controller at start: refused when rendering.
    for (set, missing) in [
        (
            "credentials.robotPassword",
            "credentials.robotPassword is empty",
        ),
        ("credentials.robotUser", "credentials.robotUser is empty"),
    ] {
        let err = Render::default().values(ROBOT_VALUES).set(set, "").error();
        assert!(err.contains(missing), "{set}=\"\": {err}");
    }
}
