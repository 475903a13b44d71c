//! The chart rendered by helm, no cluster: lint, every values file, the schema's refusals, the
//! template's own refusals, and what the objects say (RBAC = the files, security, scheduling,
//! probes, HCCM's Secret and variables).

use std::collections::{BTreeMap, BTreeSet};

use chart_tests::{
    CONTROLLERS, Render, chart, ci_values, component, describe, find, helm, kind, name, of_kind,
    parse_yaml_stream, run, tool, values_key,
};
use serde_json::{Value, json};

fn rel(p: &std::path::Path) -> String {
    p.strip_prefix(chart_tests::repo())
        .unwrap_or(p)
        .display()
        .to_string()
}

#[test]
fn helm_lint_passes_for_the_defaults_and_every_ci_values_file() {
    let mut files = vec![None];
    files.extend(ci_values().into_iter().map(Some));
    for file in files {
        let mut cmd = tool(helm());
        cmd.args(["lint", "--strict", "--namespace", "kube-system"])
            .arg(chart());
        if let Some(f) = &file {
            cmd.arg("--values").arg(f);
        }
        let out = run(cmd);
        let text = String::from_utf8_lossy(&out.stdout);
        let what = file.as_deref().map(rel).unwrap_or("defaults".into());
        assert!(
            out.status.success(),
            "helm lint {what}:\n{text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            !text.contains("[ERROR]") && !text.contains("[WARNING]"),
            "{what}:\n{text}"
        );
        eprintln!(
            "helm lint --strict ({what}): {}",
            text.lines().last().unwrap_or("")
        );
    }
}

#[test]
fn helm_template_renders_the_defaults_and_every_ci_values_file() {
    let mut files = vec![None];
    files.extend(ci_values().into_iter().map(Some));
    for file in files {
        let render = match &file {
            Some(f) => Render::default().values(f),
            None => Render::default(),
        };
        let objects = render.objects();
        let mut kinds: BTreeMap<&str, usize> = BTreeMap::new();
        for o in &objects {
            *kinds.entry(kind(o)).or_default() += 1;
        }
        let what = file.as_deref().map(rel).unwrap_or("defaults".into());
        eprintln!(
            "helm template ({what}): {} objects {kinds:?}",
            objects.len()
        );
        assert!(!objects.is_empty());
        // Every object carries the release's labels and a name.
        for o in &objects {
            assert!(!name(o).is_empty(), "{o}");
            assert_eq!(
                o["metadata"]["labels"]["app.kubernetes.io/instance"],
                "cloud-controllers",
                "{}",
                describe(o)
            );
        }
    }
}

#[test]
fn the_default_install_has_three_controllers_each_with_its_own_objects() {
    let objects = Render::default().objects();
    let mut per_component: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for o in &objects {
        per_component
            .entry(component(o).unwrap_or("-").to_owned())
            .or_default()
            .insert(format!("{} {}", kind(o), name(o)));
    }
    for (c, objs) in &per_component {
        eprintln!("{c}:");
        for o in objs {
            eprintln!("  {o}");
        }
    }
    let expected = |c: &str| -> BTreeSet<String> {
        [
            format!("ClusterRole cloud-controllers:{c}"),
            format!("ClusterRoleBinding cloud-controllers:{c}"),
            format!("Deployment cloud-controllers-{c}"),
            format!("PodDisruptionBudget cloud-controllers-{c}"),
            format!("Role cloud-controllers:{c}:leader-election"),
            format!("RoleBinding cloud-controllers:{c}:leader-election"),
            format!("ServiceAccount cloud-controllers-{c}"),
        ]
        .into()
    };
    let want: BTreeMap<String, BTreeSet<String>> = [
        "node-controller",
        "lifecycle-controller",
        "service-controller",
    ]
    .iter()
    .map(|c| (c.to_string(), expected(c)))
    .collect();
    assert_eq!(per_component, want);
}

/// The `- at '/path': why` line of helm's schema error.
fn schema_line(err: &str) -> &str {
    err.lines()
        .find(|l| l.trim_start().starts_with("- at"))
        .unwrap_or(err)
        .trim()
}

#[test]
fn the_schema_rejects_misspelt_keys() {
    for (key, unknown) in [
        ("nodeControler.enabled=true", "nodeControler"),
        ("serviceController.replica=2", "replica"),
        ("hcloud.loadBalancers.locaton=fsn1", "locaton"),
        ("routeController.image.tags=x", "tags"),
        ("simulator.enable=true", "enable"),
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
            "got string, want integer",
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
    ];
    for (render, expect) in cases {
        let err = render.error();
        assert!(err.contains(expect), "{render:?}: {err}");
    }
}

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

#[test]
fn rbac_create_false_renders_no_roles() {
    let objects = Render::default().set("rbac.create", false).objects();
    for k in ["ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"] {
        assert_eq!(of_kind(&objects, k).count(), 0, "{k}");
    }
}

fn container(deploy: &Value) -> &Value {
    &deploy["spec"]["template"]["spec"]["containers"][0]
}

fn env<'a>(deploy: &'a Value, var: &str) -> Option<&'a Value> {
    container(deploy)["env"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == var)
}

fn args(deploy: &Value) -> Vec<String> {
    container(deploy)["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn controllers_are_secure_schedulable_and_probed_on_their_admin_port() {
    let objects = Render::default()
        .values("charts/cloud-controllers/ci/all-on-values.yaml")
        .objects();
    let ports = [10271, 10272, 10273, 10274];
    for (c, port) in CONTROLLERS.into_iter().zip(ports) {
        let d = find(&objects, "Deployment", &format!("cloud-controllers-{c}"));
        let pod = &d["spec"]["template"]["spec"];
        let ctr = container(d);
        assert_eq!(ctr["name"], c);
        assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
        assert_eq!(
            pod["securityContext"]["seccompProfile"]["type"],
            "RuntimeDefault"
        );
        assert_eq!(ctr["securityContext"]["readOnlyRootFilesystem"], true);
        assert_eq!(ctr["securityContext"]["allowPrivilegeEscalation"], false);
        assert_eq!(
            ctr["securityContext"]["capabilities"]["drop"],
            json!(["ALL"])
        );
        assert_eq!(
            pod["hostNetwork"], false,
            "{c}: hostNetwork is off by default"
        );
        assert_eq!(pod["priorityClassName"], "system-cluster-critical");
        let tolerations = pod["tolerations"].to_string();
        for key in [
            "node.cloudprovider.kubernetes.io/uninitialized",
            "node-role.kubernetes.io/control-plane",
        ] {
            assert!(tolerations.contains(key), "{c}: tolerates {key}");
        }
        assert_eq!(
            ctr["ports"],
            json!([{"name": "admin", "containerPort": port, "protocol": "TCP"}])
        );
        assert_eq!(
            ctr["livenessProbe"]["httpGet"],
            json!({"path": "/healthz", "port": "admin"})
        );
        assert_eq!(
            ctr["readinessProbe"]["httpGet"],
            json!({"path": "/readyz", "port": "admin"})
        );
        let a = args(d);
        assert!(
            a.contains(&format!("--admin-address=0.0.0.0:{port}")),
            "{c}: {a:?}"
        );
        assert!(a.contains(&"--leader-elect=true".to_owned()), "{c}: {a:?}");
        assert_eq!(
            env(d, "POD_NAME").unwrap()["valueFrom"]["fieldRef"]["fieldPath"],
            "metadata.name",
            "{c}: the Lease identity is the pod name"
        );
        assert_eq!(
            ctr["image"],
            format!("ghcr.io/cloud-controllers/{c}:0.1.0"),
            "{c}: own image, tag = appVersion"
        );
    }
    let route = find(&objects, "Deployment", "cloud-controllers-route-controller");
    assert!(args(route).contains(&"--cluster-cidr=10.244.0.0/16".to_owned()));
}

#[test]
fn hccms_secret_and_variables_work_unchanged() {
    // Defaults: HCCM's Secret `hcloud`, key `token`; no network unless asked for.
    let objects = Render::default().objects();
    for d in of_kind(&objects, "Deployment") {
        assert_eq!(
            env(d, "HCLOUD_TOKEN").unwrap()["valueFrom"],
            json!({"secretKeyRef": {"name": "hcloud", "key": "token"}}),
            "{}",
            describe(d)
        );
        assert!(env(d, "HCLOUD_NETWORK").is_none(), "{}", describe(d));
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
}

#[test]
fn args_env_and_images_can_be_changed_per_controller() {
    let objects = Render::default()
        .set("nodeController.args.concurrent-node-syncs", 3)
        .set("nodeController.args.log-format", "null")
        .set("nodeController.env.RUST_LOG", "debug")
        .set("nodeController.env.POD_NAME", "null")
        .set_json(
            "nodeController.extraEnv",
            &json!([{"name": "X", "value": "y"}]),
        )
        .set("nodeController.image.tag", "v9")
        .set(
            "nodeController.image.digest",
            format!("sha256:{}", "a".repeat(64)),
        )
        .set("serviceController.image.repository", "registry.local/svc")
        .objects();
    let node = find(&objects, "Deployment", "cloud-controllers-node-controller");
    let a = args(node);
    assert!(a.contains(&"--concurrent-node-syncs=3".to_owned()), "{a:?}");
    assert!(
        !a.iter().any(|x| x.starts_with("--log-format")),
        "null drops a flag: {a:?}"
    );
    assert_eq!(env(node, "RUST_LOG").unwrap()["value"], "debug");
    assert!(env(node, "POD_NAME").is_none(), "null drops a variable");
    assert_eq!(env(node, "X").unwrap()["value"], "y");
    assert_eq!(
        container(node)["image"],
        format!(
            "ghcr.io/cloud-controllers/node-controller:v9@sha256:{}",
            "a".repeat(64)
        )
    );
    let svc = find(
        &objects,
        "Deployment",
        "cloud-controllers-service-controller",
    );
    assert_eq!(container(svc)["image"], "registry.local/svc:0.1.0");
}

#[test]
fn ha_values_elect_a_leader_spread_and_keep_one() {
    let objects = Render::default()
        .values("charts/cloud-controllers/ci/ha-values.yaml")
        .objects();
    for c in CONTROLLERS {
        let d = find(&objects, "Deployment", &format!("cloud-controllers-{c}"));
        assert_eq!(d["spec"]["replicas"], 2);
        assert!(args(d).contains(&"--leader-elect=true".to_owned()));
        let anti = &d["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"];
        assert_eq!(
            anti["preferredDuringSchedulingIgnoredDuringExecution"][0]["podAffinityTerm"]["labelSelector"]
                ["matchLabels"]["app.kubernetes.io/component"],
            c
        );
        let pdb = find(
            &objects,
            "PodDisruptionBudget",
            &format!("cloud-controllers-{c}"),
        );
        assert_eq!(
            pdb["spec"]["selector"]["matchLabels"],
            d["spec"]["selector"]["matchLabels"]
        );
    }
    let node = find(&objects, "Deployment", "cloud-controllers-node-controller");
    assert_eq!(node["spec"]["template"]["spec"]["hostNetwork"], true);
    assert_eq!(node["spec"]["template"]["spec"]["dnsPolicy"], "Default");
    assert_eq!(
        node["spec"]["strategy"]["rollingUpdate"]["maxSurge"], 0,
        "host port: no surge"
    );
    let svc = find(
        &objects,
        "PodDisruptionBudget",
        "cloud-controllers-service-controller",
    );
    assert_eq!(svc["spec"]["minAvailable"], 1);
}

#[test]
fn the_simulator_block_points_every_controller_at_cloud_sim() {
    let objects = Render::default()
        .values("charts/cloud-controllers/ci/simulator-values.yaml")
        .objects();
    let svc = find(&objects, "Service", "cloud-controllers-simulator");
    let sim = find(&objects, "Deployment", "cloud-controllers-simulator");
    let secret = find(&objects, "Secret", "cloud-controllers-simulator");
    let port = svc["spec"]["ports"][0]["port"].as_u64().unwrap();
    assert_eq!(svc["spec"]["ports"][0]["targetPort"], "http");
    assert_eq!(container(sim)["ports"][0]["name"], "http");
    assert_eq!(
        svc["spec"]["selector"],
        sim["spec"]["selector"]["matchLabels"]
    );
    let token = secret["stringData"]["token"].as_str().unwrap();
    assert_eq!(token.len(), 64, "cloud-sim wants a 64-character token");
    assert_eq!(secret["stringData"]["network"], "k8s");
    assert_eq!(
        env(sim, "CLOUD_SIM_TOKEN").unwrap()["valueFrom"]["secretKeyRef"],
        json!({"name": "cloud-controllers-simulator", "key": "token"})
    );
    for c in CONTROLLERS {
        let d = find(&objects, "Deployment", &format!("cloud-controllers-{c}"));
        assert_eq!(
            env(d, "HCLOUD_ENDPOINT").unwrap()["value"],
            format!("http://cloud-controllers-simulator.kube-system.svc:{port}/v1")
        );
        assert_eq!(
            env(d, "HCLOUD_TOKEN").unwrap()["valueFrom"]["secretKeyRef"],
            json!({"name": "cloud-controllers-simulator", "key": "token"})
        );
    }
    // hostNetwork pods still resolve the simulator's Service name.
    let route = find(&objects, "Deployment", "cloud-controllers-route-controller");
    assert_eq!(
        route["spec"]["template"]["spec"]["dnsPolicy"],
        "ClusterFirstWithHostNet"
    );
    // Same token on every render of the same release (no random value that changes on upgrade).
    let again = Render::default()
        .values("charts/cloud-controllers/ci/simulator-values.yaml")
        .objects();
    assert_eq!(
        find(&again, "Secret", "cloud-controllers-simulator")["stringData"]["token"],
        token
    );
}

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
            .filter(|p| p != "clusterCIDR")
            .collect()
    };
    for c in CONTROLLERS {
        assert_eq!(shape(c), shape("node-controller"), "{c}");
    }
}

#[test]
fn chart_version_and_app_version_are_the_workspace_version() {
    let chart_yaml: Value =
        serde_saphyr::from_str(&std::fs::read_to_string(chart().join("Chart.yaml")).unwrap())
            .unwrap();
    let cargo = std::fs::read_to_string(chart_tests::repo().join("Cargo.toml")).unwrap();
    let workspace_version = cargo
        .split("[workspace.package]")
        .nth(1)
        .and_then(|s| s.lines().find(|l| l.starts_with("version = ")))
        .and_then(|l| l.split('"').nth(1))
        .expect("workspace version");
    assert_eq!(chart_yaml["apiVersion"], "v2");
    assert_eq!(chart_yaml["version"], workspace_version);
    assert_eq!(chart_yaml["appVersion"], workspace_version);
}
