//! RBAC: the roles are exactly the chart's files, bound to each controller's ServiceAccount; a
//! shadow (dry-run) controller's Lease; `rbac.create=false`; the Leases the chart owns.

use std::collections::BTreeMap;

use chart_tests::{CONTROLLERS, Render, chart, find, kind, name, of_kind, parse_yaml_stream};
use serde_json::{Value, json};

use crate::support::args;

/// The chart's RBAC file of `controller` as (kind → rules).
fn rbac_file(controller: &str) -> BTreeMap<String, (String, Value)> {
    let text = std::fs::read_to_string(chart().join(format!("files/rbac/{controller}.yaml")))
        .expect("read RBAC file");
    parse_yaml_stream(&text)
        .into_iter()
        .map(|d| {
            (
                kind(&d).to_owned(),
                (name(&d).to_owned(), d["rules"].clone()),
            )
        })
        .collect()
}

#[test]
fn rbac_is_exactly_the_files_rules_bound_to_each_service_account() {
    for (release, ns) in [("cloud-controllers", "kube-system"), ("other", "ccm")] {
        let objects = Render::new(release, ns)
            .values("charts/cloud-controllers/ci/all-on-values.yaml")
            .objects();
        let fullname = if release == "cloud-controllers" {
            "cloud-controllers".to_owned()
        } else {
            format!("{release}-cloud-controllers")
        };
        for c in CONTROLLERS {
            let file = rbac_file(c);
            assert_eq!(file.len(), 2, "{c}: a ClusterRole and a Role");
            for (k, (file_name, rules)) in &file {
                let rendered_name =
                    file_name.replacen("cloud-controllers:", &format!("{fullname}:"), 1);
                let role = find(&objects, k, &rendered_name);
                assert_eq!(
                    &role["rules"], rules,
                    "{k} {rendered_name}: rules differ from the file"
                );
                let binding_kind = if k == "ClusterRole" {
                    "ClusterRoleBinding"
                } else {
                    "RoleBinding"
                };
                let binding = find(&objects, binding_kind, &rendered_name);
                assert_eq!(
                    binding["roleRef"],
                    json!({"apiGroup": "rbac.authorization.k8s.io", "kind": k, "name": rendered_name})
                );
                assert_eq!(
                    binding["subjects"],
                    json!([{"kind": "ServiceAccount", "name": format!("{fullname}-{c}"), "namespace": ns}])
                );
                if k == "Role" {
                    assert_eq!(
                        role["metadata"]["namespace"], ns,
                        "the Role lives with the Lease"
                    );
                    assert_eq!(binding["metadata"]["namespace"], ns);
                }
            }
            let deploy = find(&objects, "Deployment", &format!("{fullname}-{c}"));
            let spec = &deploy["spec"]["template"]["spec"];
            assert_eq!(spec["serviceAccountName"], format!("{fullname}-{c}"));
            find(&objects, "ServiceAccount", &format!("{fullname}-{c}"));
            // The Role names the Lease the binary takes by default, in the namespace it is told.
            let args = spec["containers"][0]["args"].as_array().unwrap();
            assert!(args.contains(&json!(format!("--leader-elect-resource-namespace={ns}"))));
            assert!(!args.iter().any(|a| {
                a.as_str()
                    .unwrap()
                    .starts_with("--leader-elect-resource-name=")
            }));
            let lease = format!("cloud-controller-manager-{c}");
            let role = find(&objects, "Role", &format!("{fullname}:{c}:leader-election"));
            assert!(
                role["rules"].to_string().contains(&lease),
                "{c}: {lease} in {}",
                role["rules"]
            );
        }
    }
}

/// `<controller>.dryRun` runs that controller as a shadow: `--dry-run`, and its RBAC allows the
/// Lease a shadow takes (named apart from the acting controller's).
#[test]
fn dry_run_renders_the_flag_and_the_shadow_may_hold_its_own_lease() {
    let objects = Render::default()
        .set("serviceController.dryRun", true)
        .objects();
    for c in [
        "node-controller",
        "lifecycle-controller",
        "service-controller",
    ] {
        let d = find(&objects, "Deployment", &format!("cloud-controllers-{c}"));
        assert_eq!(
            args(d).contains(&"--dry-run=true".to_owned()),
            c == "service-controller",
            "{c}"
        );
        let role = find(
            &objects,
            "Role",
            &format!("cloud-controllers:{c}:leader-election"),
        );
        let names: Vec<&str> = role["rules"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|r| r["resourceNames"].as_array().into_iter().flatten())
            .filter_map(|n| n.as_str())
            .collect();
        assert!(
            names.contains(&format!("cloud-controller-manager-{c}-dry-run").as_str()),
            "{c}: {names:?}"
        );
    }
}

#[test]
fn rbac_create_false_renders_no_roles() {
    let objects = Render::default().set("rbac.create", false).objects();
    for k in ["ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"] {
        assert_eq!(of_kind(&objects, k).count(), 0, "{k}");
    }
}

/// The chart owns each controller's Lease: exactly the name the controller takes (a shadow's named
/// apart), in the namespace its args give, in its Role, labelled like the chart's other objects,
/// and without a spec (the controller writes it; an upgrade must not touch who holds it).
#[test]
fn each_controller_has_the_lease_it_takes_and_nothing_of_its_spec() {
    let objects = Render::new("cc", "cloud-system")
        .set("routeController.enabled", true)
        .set("routeController.clusterCIDR", "10.244.0.0/16")
        .set("lifecycleController.dryRun", true)
        .objects();
    let leases: Vec<&Value> = of_kind(&objects, "Lease").collect();
    assert_eq!(leases.len(), 4);
    for c in CONTROLLERS {
        let lease_name = if c == "lifecycle-controller" {
            format!("cloud-controller-manager-{c}-dry-run")
        } else {
            format!("cloud-controller-manager-{c}")
        };
        let lease = find(&objects, "Lease", &lease_name);
        assert_eq!(lease["apiVersion"], "coordination.k8s.io/v1");
        assert!(lease.get("spec").is_none(), "{c}: {lease}");
        let d = find(&objects, "Deployment", &format!("cc-cloud-controllers-{c}"));
        assert_eq!(lease["metadata"]["labels"], d["metadata"]["labels"], "{c}");
        assert!(
            args(d).contains(&format!(
                "--leader-elect-resource-namespace={}",
                lease["metadata"]["namespace"].as_str().unwrap()
            )),
            "{c}"
        );
        let role = find(
            &objects,
            "Role",
            &format!("cc-cloud-controllers:{c}:leader-election"),
        );
        assert_eq!(
            role["metadata"]["namespace"],
            lease["metadata"]["namespace"]
        );
        let allowed = role["rules"].as_array().unwrap().iter().any(|r| {
            r["resourceNames"]
                .as_array()
                .is_some_and(|n| n.contains(&json!(lease_name)))
                && ["get", "patch"]
                    .iter()
                    .all(|v| r["verbs"].as_array().unwrap().contains(&json!(v)))
        });
        assert!(allowed, "{c}: {role}");
    }
    // No leader election, no Lease.
    let objects = Render::default()
        .set("leaderElection.enabled", false)
        .objects();
    assert_eq!(of_kind(&objects, "Lease").count(), 0);
}
