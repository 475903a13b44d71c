//! The chart rendered by helm, no cluster: lint, every values file, the schema's refusals, the
//! template's own refusals, and what the objects say (RBAC = the files, security, scheduling,
//! probes, HCCM's Secret and variables, HCCM's chart options: networking, monitoring, extra
//! volumes, dnsConfig, strategy, tolerations), and an HCCM values file next to its translation.

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
    let mut want: BTreeMap<String, BTreeSet<String>> = [
        "node-controller",
        "lifecycle-controller",
        "service-controller",
    ]
    .iter()
    .map(|c| (c.to_string(), expected(c)))
    .collect();
    // The service-controller's admission policy for its annotations (admission_policy.rs).
    for kind in [
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    ] {
        want.get_mut("service-controller").unwrap().insert(format!(
            "{kind} cloud-controllers-service-controller-annotations"
        ));
    }
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
                    &json!({"podMetricsEndpoints": [{"port": "metrics"}]}),
                )
                .arg("--api-versions")
                .arg("monitoring.coreos.com/v1/PodMonitor"),
            "monitoring.podMonitor.spec.podMetricsEndpoints[0].port: metrics is HCCM's port name",
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

/// The Secret and key the controller's token comes from, whichever way it is passed: the
/// `HCLOUD_TOKEN` variable's `secretKeyRef`, or the Secret volume `HCLOUD_TOKEN_FILE` lies in.
fn token_source(deploy: &Value) -> Value {
    if let Some(e) = env(deploy, "HCLOUD_TOKEN") {
        return e["valueFrom"]["secretKeyRef"].clone();
    }
    let file =
        env(deploy, "HCLOUD_TOKEN_FILE").expect("HCLOUD_TOKEN or HCLOUD_TOKEN_FILE")["value"]
            .as_str()
            .unwrap()
            .to_owned();
    let (dir, name) = file.rsplit_once('/').unwrap();
    let mount = container(deploy)["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["mountPath"] == dir)
        .unwrap_or_else(|| panic!("nothing mounted at {dir}"));
    assert_eq!(mount["readOnly"], true);
    let volume = pod_spec(deploy)["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == mount["name"])
        .unwrap();
    let secret = &volume["secret"];
    let item = secret["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["path"] == name)
        .unwrap_or_else(|| panic!("no item {name} in {volume}"));
    json!({"name": secret["secretName"], "key": item["key"]})
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
            token_source(d),
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
            // A controller's own keys: the route-controller's CIDR, the service-controller's
            // admission policy.
            .filter(|p| p != "clusterCIDR" && p != "validation" && !p.starts_with("validation."))
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

fn pod_spec(deploy: &Value) -> &Value {
    &deploy["spec"]["template"]["spec"]
}

fn deployment<'a>(objects: &'a [Value], controller: &str) -> &'a Value {
    find(
        objects,
        "Deployment",
        &format!("cloud-controllers-{controller}"),
    )
}

/// The components that have a Deployment.
fn deployed(objects: &[Value]) -> BTreeSet<String> {
    of_kind(objects, "Deployment")
        .filter_map(|d| component(d).map(str::to_owned))
        .collect()
}

/// The rolling update a hostNetwork Deployment gets unless a strategy is given.
fn no_surge() -> Value {
    json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}})
}

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
fn extra_volumes_mount_a_token_file_in_every_controller() {
    let objects = Render::default()
        .values("charts/cloud-controllers/ci/pod-options-values.yaml")
        .objects();
    let token_volume = json!({
        "name": "hcloud-token",
        "secret": {"secretName": "hcloud", "items": [{"key": "token", "path": "token"}]}
    });
    let token_mount = json!({"name": "hcloud-token", "mountPath": "/etc/hcloud", "readOnly": true});
    for c in CONTROLLERS {
        let d = deployment(&objects, c);
        let volumes = pod_spec(d)["volumes"].as_array().unwrap();
        let mounts = container(d)["volumeMounts"].as_array().unwrap();
        assert_eq!(volumes[0], token_volume, "{c}: the top-level volume first");
        assert_eq!(mounts[0], token_mount, "{c}");
        assert_eq!(
            env(d, "HCLOUD_TOKEN_FILE").map(|e| &e["value"]),
            Some(&json!("/etc/hcloud/token")),
            "{c}"
        );
        assert!(
            env(d, "HCLOUD_TOKEN").is_none(),
            "{c}: the controllers refuse HCLOUD_TOKEN and HCLOUD_TOKEN_FILE together"
        );
        // The controller's own volume is appended, then the chart's token volume (unused here:
        // the controller's env points HCLOUD_TOKEN_FILE at the user's).
        let own = usize::from(c == "node-controller");
        if own == 1 {
            assert_eq!(
                volumes[1],
                json!({"name": "scratch", "emptyDir": {"sizeLimit": "16Mi"}})
            );
            assert_eq!(mounts[1], json!({"name": "scratch", "mountPath": "/tmp"}));
        }
        assert_eq!(volumes.len(), 2 + own, "{c}");
        assert_eq!(mounts.len(), 2 + own, "{c}");
        assert_eq!(volumes[1 + own]["name"], "cloud-credentials", "{c}");
    }
}

#[test]
fn dns_config_and_strategy_have_a_default_and_per_controller_overrides() {
    let objects = Render::default()
        .values("charts/cloud-controllers/ci/pod-options-values.yaml")
        .objects();
    let ndots = json!({"options": [{"name": "ndots", "value": "1"}]});
    let surge =
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}});
    for c in ["lifecycle-controller", "route-controller"] {
        let d = deployment(&objects, c);
        assert_eq!(
            pod_spec(d)["dnsConfig"],
            ndots,
            "{c}: the top-level dnsConfig"
        );
        assert_eq!(d["spec"]["strategy"], surge, "{c}: the top-level strategy");
    }
    let service = deployment(&objects, "service-controller");
    assert_eq!(pod_spec(service)["dnsPolicy"], "None");
    assert_eq!(
        pod_spec(service)["dnsConfig"],
        json!({"nameservers": ["185.12.64.1", "185.12.64.2"]}),
        "the controller's dnsConfig replaces the top-level one"
    );
    let node = deployment(&objects, "node-controller");
    assert_eq!(pod_spec(node)["hostNetwork"], true);
    assert_eq!(
        node["spec"]["strategy"],
        json!({"type": "Recreate"}),
        "a given strategy wins over hostNetwork's maxSurge 0"
    );

    // A top-level strategy also wins over hostNetwork's; without one hostNetwork keeps maxSurge 0.
    let objects = Render::default()
        .set("nodeController.hostNetwork", true)
        .set("strategy.type", "Recreate")
        .objects();
    assert_eq!(
        deployment(&objects, "node-controller")["spec"]["strategy"],
        json!({"type": "Recreate"})
    );
    let objects = Render::default()
        .set("nodeController.hostNetwork", true)
        .set("serviceController.strategy.type", "Recreate")
        .objects();
    assert_eq!(
        deployment(&objects, "node-controller")["spec"]["strategy"],
        no_surge()
    );
    assert!(deployment(&objects, "lifecycle-controller")["spec"]["strategy"].is_null());
}

#[test]
fn default_tolerations_are_hccms() {
    let objects = Render::default()
        .values("charts/cloud-controllers/ci/all-on-values.yaml")
        .set_json(
            "routeController.tolerations",
            &json!([{"key": "dedicated", "operator": "Equal", "value": "system", "effect": "NoSchedule"}]),
        )
        .objects();
    for c in CONTROLLERS {
        let d = deployment(&objects, c);
        let tolerations = pod_spec(d)["tolerations"].as_array().unwrap();
        for want in [
            // HCCM's built-in set.
            json!({"key": "node.cloudprovider.kubernetes.io/uninitialized", "value": "true", "effect": "NoSchedule"}),
            json!({"key": "CriticalAddonsOnly", "operator": "Exists"}),
            json!({"key": "node-role.kubernetes.io/master", "operator": "Exists", "effect": "NoSchedule"}),
            json!({"key": "node-role.kubernetes.io/control-plane", "operator": "Exists", "effect": "NoSchedule"}),
            // No tolerationSeconds: never evicted from a NotReady node (a fresh cluster's, before
            // its CNI runs), where DefaultTolerationSeconds would evict after 300 s.
            json!({"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"}),
            json!({"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoSchedule"}),
        ] {
            assert!(
                tolerations.contains(&want),
                "{c}: {want} in {tolerations:?}"
            );
        }
        // Not unreachable (HCCM neither): eviction from a dead node is what moves a single replica
        // elsewhere; tolerating it forever would strand it there.
        assert!(
            !tolerations
                .iter()
                .any(|t| t["key"] == "node.kubernetes.io/unreachable"),
            "{c}: {tolerations:?}"
        );
        let extra = tolerations.iter().any(|t| t["key"] == "dedicated");
        assert_eq!(extra, c == "route-controller", "{c}: its own are appended");
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

const HCCM_VALUES: &str = "chart-tests/fixtures/hccm-values.yaml";
const HCCM_TRANSLATED: &str = "chart-tests/fixtures/hccm-values-translated.yaml";

#[test]
fn an_hccm_values_file_is_refused_with_the_keys_to_translate() {
    let err = Render::default().values(HCCM_VALUES).error();
    assert!(
        err.contains("values don't meet the specifications of the schema"),
        "{err}"
    );
    let line = schema_line(&err);
    for key in [
        "replicaCount",
        "env",
        "args",
        "resources",
        "additionalTolerations",
        "nodeSelector",
        "podAnnotations",
    ] {
        assert!(line.contains(&format!("'{key}'")), "{key} in: {line}");
    }
    // The keys both charts share are not among them.
    for key in [
        "networking",
        "monitoring",
        "extraVolumes",
        "extraVolumeMounts",
    ] {
        assert!(!line.contains(&format!("'{key}'")), "{key} in: {line}");
    }
    eprintln!("{HCCM_VALUES}: {line}");
}

#[test]
fn the_translated_hccm_values_file_renders_what_hccm_would() {
    let mut cmd = tool(helm());
    cmd.args(["lint", "--strict", "--namespace", "kube-system"])
        .arg(chart())
        .arg("--values")
        .arg(chart_tests::repo().join(HCCM_TRANSLATED));
    let out = run(cmd);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && !text.contains("[ERROR]") && !text.contains("[WARNING]"),
        "helm lint {HCCM_TRANSLATED}:\n{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let hccm: Value = serde_saphyr::from_str(
        &std::fs::read_to_string(chart_tests::repo().join(HCCM_VALUES)).unwrap(),
    )
    .unwrap();
    let objects = Render::default()
        .values(HCCM_TRANSLATED)
        .arg("--api-versions")
        .arg("monitoring.coreos.com/v1/PodMonitor")
        .objects();
    // networking.enabled: all four, the route-controller included.
    assert_eq!(
        deployed(&objects),
        CONTROLLERS.iter().map(|c| c.to_string()).collect()
    );
    for c in CONTROLLERS {
        let d = deployment(&objects, c);
        let pod = pod_spec(d);
        // replicaCount (and leader election, which HCCM turns on for more than one).
        assert_eq!(d["spec"]["replicas"], hccm["replicaCount"], "{c}");
        assert!(args(d).contains(&"--leader-elect=true".to_owned()), "{c}");
        // env.HCLOUD_TOKEN's Secret and key, unchanged (mounted as a file by default).
        assert_eq!(
            token_source(d),
            hccm["env"]["HCLOUD_TOKEN"]["valueFrom"]["secretKeyRef"],
            "{c}"
        );
        // networking.enabled: the network from the Secret, the host's network.
        assert_eq!(
            env(d, "HCLOUD_NETWORK").unwrap()["valueFrom"]["secretKeyRef"],
            json!({"name": "hcloud", "key": "network", "optional": true}),
            "{c}"
        );
        assert_eq!(pod["hostNetwork"], true, "{c}");
        assert_eq!(
            pod["dnsPolicy"], "Default",
            "{c}: HCCM's default dnsPolicy too"
        );
        // resources, nodeSelector, podAnnotations, additionalTolerations.
        assert_eq!(container(d)["resources"], hccm["resources"], "{c}");
        assert_eq!(pod["nodeSelector"], hccm["nodeSelector"], "{c}");
        assert_eq!(
            d["spec"]["template"]["metadata"]["annotations"], hccm["podAnnotations"],
            "{c}"
        );
        let tolerations = pod["tolerations"].as_array().unwrap();
        for t in hccm["additionalTolerations"].as_array().unwrap() {
            assert!(tolerations.contains(t), "{c}: {t}");
        }
        // extraVolumes, extraVolumeMounts; then the chart's token volume.
        let volumes = pod["volumes"].as_array().unwrap();
        let mounts = container(d)["volumeMounts"].as_array().unwrap();
        let theirs = hccm["extraVolumes"].as_array().unwrap().len();
        assert_eq!(
            volumes[..theirs],
            hccm["extraVolumes"].as_array().unwrap()[..],
            "{c}"
        );
        assert_eq!(
            mounts[..theirs],
            hccm["extraVolumeMounts"].as_array().unwrap()[..],
            "{c}"
        );
        assert_eq!(volumes.len(), theirs + 1, "{c}");
        assert_eq!(volumes[theirs]["name"], "cloud-credentials", "{c}");
        // monitoring.enabled: /metrics stays on.
        assert!(env(d, "HCLOUD_METRICS_ENABLED").is_none(), "{c}");
    }
    // env HCLOUD_* values reach the controller that reads them, with HCCM's values.
    let service = deployment(&objects, "service-controller");
    let node = deployment(&objects, "node-controller");
    for (d, var) in [
        (service, "HCLOUD_LOAD_BALANCERS_LOCATION"),
        (service, "HCLOUD_LOAD_BALANCERS_USE_PRIVATE_IP"),
        (node, "HCLOUD_INSTANCES_ADDRESS_FAMILY"),
    ] {
        assert_eq!(
            env(d, var).map(|e| &e["value"]),
            Some(&hccm["env"][var]["value"]),
            "{var}"
        );
    }
    // networking.clusterCIDR and the route-controller's part of args.
    let route = deployment(&objects, "route-controller");
    let a = args(route);
    assert!(
        a.contains(&format!(
            "--cluster-cidr={}",
            hccm["networking"]["clusterCIDR"].as_str().unwrap()
        )),
        "{a:?}"
    );
    assert!(
        a.contains(&"--route-reconciliation-period=30s".to_owned()),
        "{a:?}"
    );
    // monitoring.podMonitor: one PodMonitor per controller with HCCM's labels.
    let monitors: Vec<_> = of_kind(&objects, "PodMonitor").collect();
    assert_eq!(monitors.len(), 4);
    for m in monitors {
        assert_eq!(m["metadata"]["labels"]["release"], "kube-prometheus-stack");
    }
}

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
    let port = find(&objects, "Service", "cloud-controllers-simulator")["spec"]["ports"][0]["port"]
        .as_u64()
        .unwrap();
    for c in ROBOT_CONTROLLERS {
        let d = deployment(&objects, c);
        assert_eq!(
            env(d, "ROBOT_ENDPOINT").unwrap()["value"],
            format!("http://cloud-controllers-simulator.kube-system.svc:{port}/robot"),
            "{c}"
        );
        assert_eq!(
            env(d, "HCLOUD_ENDPOINT").unwrap()["value"],
            format!("http://cloud-controllers-simulator.kube-system.svc:{port}/v1"),
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
