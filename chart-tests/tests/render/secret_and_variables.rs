//! HCCM's Secret and variables: where the token and network come from, and the `HCLOUD_*` values
//! each controller reads.

use chart_tests::{Render, describe, find, of_kind};
use serde_json::json;

use crate::support::{env, pod_spec, token_source};

#[test]
fn hccms_secret_and_variables_work_unchanged() {
    // Defaults: HCCM's Secret `hcloud`, key `token`, mounted as a file so that a new token needs
    // no restart; no network unless asked for.
    let objects = Render::default().objects();
    for d in of_kind(&objects, "Deployment") {
        assert_eq!(
            token_source(d),
            json!({"name": "hcloud", "key": "token"}),
            "{}",
            describe(d)
        );
        assert_eq!(
            env(d, "HCLOUD_TOKEN_FILE").unwrap()["value"],
            "/etc/cloud-controllers/credentials/token"
        );
        assert!(env(d, "HCLOUD_TOKEN").is_none(), "{}", describe(d));
        assert!(env(d, "HCLOUD_NETWORK").is_none(), "{}", describe(d));
    }
    // HCCM's form, the variable from the Secret, when asked for.
    let objects = Render::default()
        .set("credentials.tokenAsFile", false)
        .objects();
    for d in of_kind(&objects, "Deployment") {
        assert_eq!(
            env(d, "HCLOUD_TOKEN").unwrap()["valueFrom"],
            json!({"secretKeyRef": {"name": "hcloud", "key": "token"}}),
            "{}",
            describe(d)
        );
        assert!(env(d, "HCLOUD_TOKEN_FILE").is_none(), "{}", describe(d));
        assert!(pod_spec(d)["volumes"].is_null(), "{}", describe(d));
    }
    // HCCM's networking.enabled: HCLOUD_NETWORK from key `network` (optional) for every controller.
    let objects = Render::default()
        .values("charts/cloud-controllers/ci/existing-secret-values.yaml")
        .objects();
    assert_eq!(of_kind(&objects, "Deployment").count(), 4);
    assert_eq!(
        of_kind(&objects, "Secret").count(),
        0,
        "an existing Secret is not rendered"
    );
    for d in of_kind(&objects, "Deployment") {
        assert_eq!(
            env(d, "HCLOUD_NETWORK").unwrap()["valueFrom"],
            json!({"secretKeyRef": {"name": "hcloud", "key": "network", "optional": true}}),
            "{}",
            describe(d)
        );
    }
    // The route-controller always gets the network.
    let objects = Render::default()
        .values("charts/cloud-controllers/ci/route-only-values.yaml")
        .objects();
    let route = find(&objects, "Deployment", "cloud-controllers-route-controller");
    assert!(env(route, "HCLOUD_NETWORK").is_some());

    // HCLOUD_* values become HCCM's variables, each for the controller that reads it.
    let objects = Render::default()
        .values("charts/cloud-controllers/ci/all-on-values.yaml")
        .objects();
    let service = find(
        &objects,
        "Deployment",
        "cloud-controllers-service-controller",
    );
    for (var, value) in [
        ("HCLOUD_LOAD_BALANCERS_LOCATION", "fsn1"),
        ("HCLOUD_LOAD_BALANCERS_NETWORK_ZONE", "eu-central"),
        ("HCLOUD_LOAD_BALANCERS_TYPE", "lb11"),
        ("HCLOUD_LOAD_BALANCERS_ALGORITHM_TYPE", "round_robin"),
        ("HCLOUD_LOAD_BALANCERS_ENABLED", "true"),
        ("HCLOUD_LOAD_BALANCERS_USE_PRIVATE_IP", "false"),
        ("HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_RETRIES", "3"),
        ("HCLOUD_SERVER_CACHE_MAX_AGE", "10s"),
    ] {
        assert_eq!(
            env(service, var).map(|e| &e["value"]),
            Some(&json!(value)),
            "{var}"
        );
    }
    let node = find(&objects, "Deployment", "cloud-controllers-node-controller");
    assert_eq!(
        env(node, "HCLOUD_INSTANCES_ADDRESS_FAMILY").unwrap()["value"],
        "ipv4"
    );
    assert_eq!(
        env(node, "HCLOUD_INSTANCES_ZONE_LABEL_ENABLED").unwrap()["value"],
        "true"
    );
    assert!(env(node, "HCLOUD_LOAD_BALANCERS_LOCATION").is_none());
    let route = find(&objects, "Deployment", "cloud-controllers-route-controller");
    assert_eq!(
        env(route, "HCLOUD_NETWORK_ROUTES_ENABLED").unwrap()["value"],
        "true"
    );

    // A dedicated server's target family: unset by default (each Service's ipFamilies).
    let family = |render: Render| {
        let objects = render.objects();
        let service = find(
            &objects,
            "Deployment",
            "cloud-controllers-service-controller",
        );
        env(service, "HCLOUD_LOAD_BALANCERS_ROBOT_TARGET_ADDRESS_FAMILY")
            .map(|e| e["value"].clone())
    };
    assert_eq!(family(Render::default()), None);
    assert_eq!(
        family(Render::default().set("hcloud.loadBalancers.robotTargetAddressFamily", "dualstack")),
        Some(json!("dualstack"))
    );
}
