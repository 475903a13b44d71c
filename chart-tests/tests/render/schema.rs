//! values.schema.json: what it refuses (misspelt keys, wrong types and values), and that it declares
//! exactly the keys values.yaml has.

use std::collections::BTreeSet;

use chart_tests::{CONTROLLERS, Render, chart, values_key};
use serde_json::{Value, json};

use crate::support::schema_line;

#[test]
fn the_schema_rejects_misspelt_keys() {
    for (key, unknown) in [
        ("nodeControler.enabled=true", "nodeControler"),
        ("serviceController.replica=2", "replica"),
        ("hcloud.loadBalancers.locaton=fsn1", "locaton"),
        ("routeController.image.tags=x", "tags"),
        ("simulator.enable=true", "enable"),
        ("networking.enable=true", "enable"),
        ("monitoring.podMonitor.anotations.x=y", "anotations"),
        ("dnsConfig.nameserver[0]=1.1.1.1", "nameserver"),
        ("strategy.rollingupdate.maxSurge=1", "rollingupdate"),
        ("lifecycleController.extraVolume[0].name=x", "extraVolume"),
    ] {
        let err = Render::default().arg("--set").arg(key).error();
        assert!(
            err.contains("values don't meet the specifications of the schema")
                && err.contains(&format!("additional properties '{unknown}' not allowed")),
            "--set {key}: {err}"
        );
        eprintln!("--set {key}: {}", schema_line(&err));
    }
}

#[test]
fn the_schema_rejects_wrong_types_and_values() {
    for (key, json, expect) in [
        (
            "nodeController.replicas",
            json!("two"),
            "got string, want null or integer",
        ),
        (
            "nodeController.enabled",
            json!("yes"),
            "got string, want boolean",
        ),
        ("serviceController.adminPort", json!(70000), "maximum"),
        (
            "lifecycleController.image.pullPolicy",
            json!("Sometimes"),
            "must be one of",
        ),
        (
            "hcloud.loadBalancers.usePrivateIP",
            json!("maybe"),
            "want null or boolean",
        ),
        (
            "hcloud.serverCacheMaxAge",
            json!("ten seconds"),
            "does not match pattern",
        ),
        ("logFormat", json!("xml"), "must be one of"),
        (
            "routeController.args",
            json!(["--cluster-cidr=10.0.0.0/8"]),
            "got array, want object",
        ),
        (
            "nodeController.hostNetwork",
            json!("yes"),
            "got string, want null or boolean",
        ),
        (
            "networking.clusterCIDR",
            json!("10.244.0.0"),
            "does not match pattern",
        ),
        (
            "extraVolumes",
            json!({"name": "x"}),
            "got object, want array",
        ),
        (
            "extraVolumeMounts",
            json!([{"name": "x"}]),
            "missing property 'mountPath'",
        ),
        (
            "serviceController.strategy",
            json!({"type": "BlueGreen"}),
            "must be one of",
        ),
        (
            "dnsConfig",
            json!({"options": [{"name": "ndots", "value": 1}]}),
            "got number, want string",
        ),
        (
            "monitoring.podMonitor.spec",
            json!([]),
            "got array, want object",
        ),
    ] {
        let err = Render::default().set_json(key, &json).error();
        assert!(
            err.contains("values don't meet the specifications of the schema")
                && err.contains(expect),
            "{key}={json}: {err}"
        );
        eprintln!("{key}={json}: {}", schema_line(&err));
    }
}

/// Every key path of a values document.
fn key_paths(v: &Value, prefix: &str, out: &mut BTreeSet<String>) {
    if let Some(map) = v.as_object() {
        for (k, child) in map {
            let path = if prefix.is_empty() {
                k.clone()
            } else {
                format!("{prefix}.{k}")
            };
            out.insert(path.clone());
            key_paths(child, &path, out);
        }
    }
}

/// Every property path the schema declares (objects with fixed properties only).
fn schema_paths(s: &Value, prefix: &str, out: &mut BTreeSet<String>) {
    if let Some(props) = s["properties"].as_object() {
        for (k, child) in props {
            let path = if prefix.is_empty() {
                k.clone()
            } else {
                format!("{prefix}.{k}")
            };
            out.insert(path.clone());
            schema_paths(child, &path, out);
        }
    }
}

#[test]
fn values_yaml_and_the_schema_declare_the_same_keys() {
    let values: Value =
        serde_saphyr::from_str(&std::fs::read_to_string(chart().join("values.yaml")).unwrap())
            .unwrap();
    let schema: Value =
        serde_json::from_str(&std::fs::read_to_string(chart().join("values.schema.json")).unwrap())
            .unwrap();
    let mut in_values = BTreeSet::new();
    key_paths(&values, "", &mut in_values);
    let mut in_schema = BTreeSet::new();
    schema_paths(&schema, "", &mut in_schema);
    // Free-form maps are declared as maps, not as their current keys.
    let free_form = [
        "resources",
        "podSecurityContext",
        "securityContext",
        "tolerations",
        "simulator.tolerations",
    ];
    in_values.retain(|p| {
        !free_form.iter().any(|f| {
            p.split_once('.')
                .is_some_and(|(_, rest)| rest.starts_with(&format!("{f}.")))
                || p.starts_with(&format!("{f}."))
        })
    });
    in_schema.remove("global");
    assert_eq!(
        in_values
            .symmetric_difference(&in_schema)
            .collect::<Vec<_>>(),
        Vec::<&String>::new(),
        "values.yaml and values.schema.json differ"
    );
    // Every controller block has the same shape.
    let shape = |c: &str| -> BTreeSet<String> {
        let key = values_key(c);
        in_values
            .iter()
            .filter_map(|p| p.strip_prefix(&format!("{key}.")).map(str::to_owned))
            // A controller's own keys: the route-controller's CIDR, the service-controller's
            // admission policy, source ranges and certificate Secrets, the node-controller's
            // node IPs.
            .filter(|p| {
                p != "clusterCIDR"
                    && p != "nodeIPOutsideCloud"
                    && p != "validation"
                    && !p.starts_with("validation.")
                    && p != "sourceRanges"
                    && p != "certificateSecrets"
                    && !p.starts_with("certificateSecrets.")
            })
            .collect()
    };
    for c in CONTROLLERS {
        assert_eq!(shape(c), shape("node-controller"), "{c}");
    }
}
