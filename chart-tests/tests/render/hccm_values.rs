//! HCCM's values files installed as they are: HCCM's own chart/values.yaml and a user's file
//! (chart-tests/fixtures/), each HCCM key meaning what it means in HCCM's chart or refused with the
//! reason; a controller's own value over HCCM's top-level one; the user's file next to its
//! translation into our keys.

use std::collections::{BTreeMap, BTreeSet};

use chart_tests::{CONTROLLERS, Render, binary, chart, describe, find, helm, of_kind, run, tool};
use serde_json::{Value, json};

use crate::support::{args, container, deployed, deployment, env, pod_spec, token_source};

const HCCM_CHART_VALUES: &str = "chart-tests/fixtures/hccm-chart-values.yaml";
const HCCM_VALUES: &str = "chart-tests/fixtures/hccm-values.yaml";
const HCCM_TRANSLATED: &str = "chart-tests/fixtures/hccm-values-translated.yaml";

fn fixture(path: &str) -> Value {
    serde_saphyr::from_str(&std::fs::read_to_string(chart_tests::repo().join(path)).unwrap())
        .unwrap()
}

/// `helm lint --strict` with `values`, which must pass without an error or a warning.
fn lint(values: &str) {
    let mut cmd = tool(helm());
    cmd.args(["lint", "--strict", "--namespace", "kube-system"])
        .arg(chart())
        .arg("--values")
        .arg(chart_tests::repo().join(values));
    let out = run(cmd);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && !text.contains("[ERROR]") && !text.contains("[WARNING]"),
        "helm lint {values}:\n{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// An HCCM `args` map as HCCM's chart renders it: `--flag=value`, `--flag` for "", nothing for null.
fn hccm_args(map: &Value) -> Vec<String> {
    map.as_object()
        .unwrap()
        .iter()
        .filter(|(_, v)| !v.is_null())
        .map(|(k, v)| match v.as_str() {
            Some("") => format!("--{k}"),
            Some(s) => format!("--{k}={s}"),
            None => format!("--{k}={v}"),
        })
        .collect()
}

/// The tolerations HCCM's chart gives its pod before `additionalTolerations`; ours are a superset.
fn hccms_own_tolerations() -> Vec<Value> {
    vec![
        json!({"key": "node.cloudprovider.kubernetes.io/uninitialized", "value": "true", "effect": "NoSchedule"}),
        json!({"key": "CriticalAddonsOnly", "operator": "Exists"}),
        json!({"key": "node-role.kubernetes.io/master", "operator": "Exists", "effect": "NoSchedule"}),
        json!({"key": "node-role.kubernetes.io/control-plane", "operator": "Exists", "effect": "NoSchedule"}),
    ]
}

/// HCCM's `node.kubernetes.io/not-ready` NoExecute toleration (no operator: Equal, empty value) is
/// covered by ours, `operator: Exists` for the same key and effect.
fn tolerates_not_ready(tolerations: &[Value]) -> bool {
    tolerations.iter().any(|t| {
        t["key"] == "node.kubernetes.io/not-ready"
            && t["operator"] == "Exists"
            && t["effect"] == "NoExecute"
            && t["tolerationSeconds"].is_null()
    })
}

#[test]
fn hccms_own_values_file_installs_as_it_is() {
    lint(HCCM_CHART_VALUES);
    let hccm = fixture(HCCM_CHART_VALUES);
    let objects = Render::default().values(HCCM_CHART_VALUES).objects();
    // networking.enabled is false in HCCM's defaults: no routes.
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
    for d in of_kind(&objects, "Deployment") {
        let c = describe(d);
        let pod = pod_spec(d);
        assert_eq!(d["spec"]["replicas"], hccm["replicaCount"], "{c}");
        // HCCM's requests; helm merges them over the chart's default, which adds its memory limit.
        assert_eq!(
            container(d)["resources"],
            json!({"requests": hccm["resources"]["requests"], "limits": {"memory": "256Mi"}}),
            "{c}"
        );
        // env.HCLOUD_TOKEN: the token's Secret and key (mounted as a file).
        assert_eq!(
            token_source(d),
            hccm["env"]["HCLOUD_TOKEN"]["valueFrom"]["secretKeyRef"],
            "{c}"
        );
        assert!(env(d, "HCLOUD_TOKEN").is_none(), "{c}");
        // env.ROBOT_USER/ROBOT_PASSWORD as HCCM passes them (read only with ROBOT_ENABLED).
        for var in ["ROBOT_USER", "ROBOT_PASSWORD"] {
            assert_eq!(
                env(d, var).unwrap()["valueFrom"],
                hccm["env"][var]["valueFrom"],
                "{c} {var}"
            );
        }
        assert!(env(d, "ROBOT_ENABLED").is_none(), "{c}");
        assert!(env(d, "HCLOUD_NETWORK").is_none(), "{c}");
        // args: every flag as HCCM renders it, except the route-controller's own.
        let a = args(d);
        for flag in hccm_args(&hccm["args"]) {
            assert_eq!(
                a.contains(&flag),
                !flag.starts_with("--route-reconciliation-period"),
                "{c}: {flag} in {a:?}"
            );
        }
        let tolerations = pod["tolerations"].as_array().unwrap();
        for t in hccms_own_tolerations() {
            assert!(tolerations.contains(&t), "{c}: {t}");
        }
        assert!(tolerates_not_ready(tolerations), "{c}");
        assert_eq!(pod["priorityClassName"], "system-cluster-critical", "{c}");
        assert_eq!(pod["dnsPolicy"], "Default", "{c}");
        assert_eq!(pod["hostNetwork"], false, "{c}");
        assert!(pod["nodeSelector"].is_null(), "{c}");
        assert!(
            d["spec"]["template"]["metadata"]["annotations"].is_null(),
            "{c}"
        );
        assert_eq!(
            d["spec"]["selector"]["matchLabels"]["app.kubernetes.io/instance"], "cloud-controllers",
            "{c}: HCCM's selectorLabels are its default, ours stay"
        );
    }
}

#[test]
fn the_keys_later_hccm_charts_added_mean_the_same() {
    // HCCM 1.35's defaults and options beyond the fixture (chart 1.19), with values of our own.
    let objects = Render::default()
        .values(HCCM_CHART_VALUES)
        .set("kind", "Deployment")
        .set_json(
            "image",
            &json!({"repository": "docker.io/hetznercloud/hcloud-cloud-controller-manager",
                    "tag": "v{{ $.Chart.Version }}", "pullSecrets": [{"name": "regcred"}]}),
        )
        .set_json(
            "args.feature-gates",
            &json!("CloudControllerManagerWatchBasedRoutesReconciliation=true"),
        )
        .set_json("strategy", &json!({"type": "Recreate"}))
        .set_json(
            "affinity",
            &json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                {"nodeSelectorTerms": [{"matchExpressions": [{"key": "pool", "operator": "In", "values": ["system"]}]}]}}}),
        )
        .set("priorityClassName", "")
        .set("rbac.create", true)
        .set_json("serviceAccount.annotations", &json!({"example.com/sa": "hccm"}))
        .set_json("podLabels", &json!({"example.com/team": "platform"}))
        .set("dnsPolicy", "None")
        .set_json("dnsConfig", &json!({"nameservers": ["185.12.64.1"]}))
        .set_json(
            "securityContext",
            &json!({"readOnlyRootFilesystem": true, "allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}}),
        )
        .set_json("extraVolumes", &json!([{"name": "scratch", "emptyDir": {}}]))
        .set_json(
            "extraVolumeMounts",
            &json!([{"name": "scratch", "mountPath": "/tmp"}]),
        )
        .objects();
    for d in of_kind(&objects, "Deployment") {
        let c = describe(d);
        let pod = pod_spec(d);
        assert_eq!(pod["imagePullSecrets"], json!([{"name": "regcred"}]), "{c}");
        assert!(
            !container(d)["image"]
                .as_str()
                .unwrap()
                .contains("hcloud-cloud-controller-manager"),
            "{c}: HCCM's image is not run"
        );
        assert!(
            args(d).contains(
                &"--feature-gates=CloudControllerManagerWatchBasedRoutesReconciliation=true"
                    .to_owned()
            ),
            "{c}"
        );
        assert_eq!(d["spec"]["strategy"], json!({"type": "Recreate"}), "{c}");
        assert_eq!(
            pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
                [0]["matchExpressions"][0]["key"],
            "pool",
            "{c}"
        );
        assert!(pod["priorityClassName"].is_null(), "{c}: \"\" sets none");
        assert_eq!(
            d["spec"]["template"]["metadata"]["labels"]["example.com/team"], "platform",
            "{c}"
        );
        assert_eq!(pod["dnsPolicy"], "None", "{c}");
        assert_eq!(
            pod["dnsConfig"],
            json!({"nameservers": ["185.12.64.1"]}),
            "{c}"
        );
        assert_eq!(
            container(d)["volumeMounts"][0],
            json!({"name": "scratch", "mountPath": "/tmp"}),
            "{c}"
        );
    }
    for sa in of_kind(&objects, "ServiceAccount") {
        assert_eq!(
            sa["metadata"]["annotations"]["example.com/sa"],
            "hccm",
            "{}",
            describe(sa)
        );
    }
    assert!(of_kind(&objects, "ClusterRole").count() >= 3);
}

#[test]
fn an_hccm_values_file_installs_as_it_is_and_renders_its_translation() {
    lint(HCCM_VALUES);
    let hccm = fixture(HCCM_VALUES);
    let pm = ["--api-versions", "monitoring.coreos.com/v1/PodMonitor"];
    let objects = Render::default()
        .values(HCCM_VALUES)
        .arg(pm[0])
        .arg(pm[1])
        .objects();
    assert_eq!(
        deployed(&objects),
        CONTROLLERS.iter().map(|c| c.to_string()).collect()
    );
    let hccm_flags = hccm_args(&hccm["args"]);
    for c in CONTROLLERS {
        let d = deployment(&objects, c);
        let pod = pod_spec(d);
        assert_eq!(d["spec"]["replicas"], hccm["replicaCount"], "{c}");
        assert_eq!(container(d)["resources"], hccm["resources"], "{c}");
        assert_eq!(pod["nodeSelector"], hccm["nodeSelector"], "{c}");
        assert_eq!(
            d["spec"]["template"]["metadata"]["annotations"], hccm["podAnnotations"],
            "{c}"
        );
        let tolerations = pod["tolerations"].as_array().unwrap();
        for t in hccms_own_tolerations()
            .iter()
            .chain(hccm["additionalTolerations"].as_array().unwrap())
        {
            assert!(tolerations.contains(t), "{c}: {t}");
        }
        assert!(tolerates_not_ready(tolerations), "{c}");
        assert_eq!(
            token_source(d),
            hccm["env"]["HCLOUD_TOKEN"]["valueFrom"]["secretKeyRef"],
            "{c}"
        );
        // Each HCCM flag where it is read: route-reconciliation-period by the route-controller,
        // the others (no effect anywhere) by all four.
        let a = args(d);
        for flag in &hccm_flags {
            let route_only = flag.starts_with("--route-reconciliation-period");
            assert_eq!(
                a.contains(flag),
                !route_only || c == "route-controller",
                "{c}: {flag} in {a:?}"
            );
        }
    }
    // Each env entry reaches the controller that reads it, with HCCM's value.
    for (c, var) in [
        ("service-controller", "HCLOUD_LOAD_BALANCERS_LOCATION"),
        ("service-controller", "HCLOUD_LOAD_BALANCERS_USE_PRIVATE_IP"),
        ("node-controller", "HCLOUD_INSTANCES_ADDRESS_FAMILY"),
    ] {
        for other in CONTROLLERS {
            let e = env(deployment(&objects, other), var);
            if other == c {
                assert_eq!(e.map(|e| &e["value"]), Some(&hccm["env"][var]["value"]));
            } else {
                assert!(e.is_none(), "{other}: {var}");
            }
        }
    }

    // Object for object what its translation renders, but for the flags that have no effect (the
    // translation leaves them out).
    let translated = Render::default()
        .values(HCCM_TRANSLATED)
        .arg(pm[0])
        .arg(pm[1])
        .objects();
    assert_eq!(objects.len(), translated.len());
    let no_effect: BTreeSet<String> = hccm_flags
        .iter()
        .filter(|f| !f.starts_with("--route-reconciliation-period"))
        .cloned()
        .collect();
    for theirs in &translated {
        let mut ours = find(
            &objects,
            chart_tests::kind(theirs),
            chart_tests::name(theirs),
        )
        .clone();
        if chart_tests::kind(theirs) == "Deployment" {
            let a = &mut ours["spec"]["template"]["spec"]["containers"][0]["args"];
            let kept: Vec<Value> = a
                .as_array()
                .unwrap()
                .iter()
                .filter(|f| !no_effect.contains(f.as_str().unwrap()))
                .cloned()
                .collect();
            *a = Value::Array(kept);
        }
        assert_eq!(&ours, theirs, "{}", describe(theirs));
    }
}

#[test]
fn a_controllers_own_value_wins_over_hccms() {
    let objects = Render::default()
        .set("replicaCount", 2)
        .set_json("resources", &json!({"requests": {"cpu": "50m"}}))
        .set_json("nodeSelector", &json!({"pool": "system"}))
        .set("priorityClassName", "hccm-priority")
        .set_json("podAnnotations", &json!({"a": "top", "b": "top"}))
        .set_json("podLabels", &json!({"l": "top"}))
        .set("dnsPolicy", "ClusterFirst")
        .set_json("env.HCLOUD_DEBUG", &json!({"value": "true"}))
        .set_json("args.v", &json!("2"))
        .set_json(
            "serviceAccount.annotations",
            &json!({"s": "top", "t": "top"}),
        )
        .set_json("affinity", &json!({"podAffinity": {}}))
        // The service-controller sets its own.
        .set("serviceController.replicas", 1)
        .set_json(
            "serviceController.resources",
            &json!({"requests": {"cpu": "5m"}}),
        )
        .set_json("serviceController.nodeSelector", &json!({}))
        .set("serviceController.priorityClassName", "")
        .set_json("serviceController.podAnnotations", &json!({"b": "own"}))
        .set_json("serviceController.podLabels", &json!({"l": "own"}))
        .set("serviceController.dnsPolicy", "Default")
        .set("serviceController.env.HCLOUD_DEBUG", "false")
        .set_json("serviceController.args.v", &json!("4"))
        .set_json(
            "serviceController.serviceAccount.annotations",
            &json!({"t": "own"}),
        )
        .set_json("serviceController.affinity", &json!({}))
        // An explicit 0 is a value too.
        .set("lifecycleController.replicas", 0)
        .objects();
    let node = deployment(&objects, "node-controller");
    let service = deployment(&objects, "service-controller");
    let lifecycle = deployment(&objects, "lifecycle-controller");
    assert_eq!(node["spec"]["replicas"], 2);
    assert_eq!(service["spec"]["replicas"], 1);
    assert_eq!(lifecycle["spec"]["replicas"], 0);
    assert_eq!(container(node)["resources"]["requests"]["cpu"], "50m");
    assert_eq!(container(service)["resources"]["requests"]["cpu"], "5m");
    assert_eq!(pod_spec(node)["nodeSelector"], json!({"pool": "system"}));
    assert!(pod_spec(service)["nodeSelector"].is_null());
    assert_eq!(pod_spec(node)["priorityClassName"], "hccm-priority");
    assert!(pod_spec(service)["priorityClassName"].is_null());
    assert_eq!(
        node["spec"]["template"]["metadata"]["annotations"],
        json!({"a": "top", "b": "top"})
    );
    assert_eq!(
        service["spec"]["template"]["metadata"]["annotations"],
        json!({"a": "top", "b": "own"})
    );
    assert_eq!(node["spec"]["template"]["metadata"]["labels"]["l"], "top");
    assert_eq!(
        service["spec"]["template"]["metadata"]["labels"]["l"],
        "own"
    );
    assert_eq!(pod_spec(node)["dnsPolicy"], "ClusterFirst");
    assert_eq!(pod_spec(service)["dnsPolicy"], "Default");
    assert_eq!(env(node, "HCLOUD_DEBUG").unwrap()["value"], "true");
    assert_eq!(env(service, "HCLOUD_DEBUG").unwrap()["value"], "false");
    assert!(args(node).contains(&"--v=2".to_owned()));
    let sa = args(service);
    assert!(
        sa.contains(&"--v=4".to_owned()) && !sa.contains(&"--v=2".to_owned()),
        "{sa:?}"
    );
    assert_eq!(pod_spec(node)["affinity"], json!({"podAffinity": {}}));
    // An empty affinity of its own: the chart's spreading (replicas 1: none).
    assert!(pod_spec(service)["affinity"].is_null());
    let accounts: BTreeMap<&str, &Value> = of_kind(&objects, "ServiceAccount")
        .map(|s| {
            (
                chart_tests::component(s).unwrap(),
                &s["metadata"]["annotations"],
            )
        })
        .collect();
    assert_eq!(
        accounts["node-controller"],
        &json!({"s": "top", "t": "top"})
    );
    assert_eq!(
        accounts["service-controller"],
        &json!({"s": "top", "t": "own"})
    );
}

#[test]
fn hccms_env_reaches_the_controllers_that_read_it() {
    let objects = Render::default()
        .set("routeController.enabled", true)
        .set("routeController.clusterCIDR", "10.244.0.0/16")
        .set_json(
            "env",
            &json!({
                "HCLOUD_LOAD_BALANCERS_TYPE": {"value": "lb21"},
                "HCLOUD_INSTANCES_ZONE_LABEL_ENABLED": {"value": "false"},
                "HCLOUD_NETWORK_ROUTES_ENABLED": {"value": "true"},
                "ROBOT_CACHE_TIMEOUT": {"value": "10m"},
                "HCLOUD_DEBUG": {"value": true},
                "HCLOUD_SERVER_CACHE_MAX_AGE": {"value": "{{ .Release.Name | len }}s"},
                "NODE_NAME": {"valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
            }),
        )
        .objects();
    let readers: [(&str, &[&str]); 6] = [
        ("HCLOUD_LOAD_BALANCERS_TYPE", &["service-controller"]),
        ("HCLOUD_INSTANCES_ZONE_LABEL_ENABLED", &["node-controller"]),
        ("HCLOUD_NETWORK_ROUTES_ENABLED", &["route-controller"]),
        (
            "ROBOT_CACHE_TIMEOUT",
            &[
                "node-controller",
                "lifecycle-controller",
                "service-controller",
            ],
        ),
        ("HCLOUD_DEBUG", &CONTROLLERS),
        ("NODE_NAME", &CONTROLLERS),
    ];
    for (var, to) in readers {
        for c in CONTROLLERS {
            assert_eq!(
                env(deployment(&objects, c), var).is_some(),
                to.contains(&c),
                "{var} in {c}"
            );
        }
    }
    let node = deployment(&objects, "node-controller");
    assert_eq!(
        env(node, "HCLOUD_DEBUG").unwrap()["value"],
        "true",
        "a string"
    );
    assert_eq!(
        env(node, "NODE_NAME").unwrap()["valueFrom"],
        json!({"fieldRef": {"fieldPath": "spec.nodeName"}})
    );
    // Templates are rendered, as HCCM's chart does ("cloud-controllers" has 17 characters).
    assert_eq!(
        env(node, "HCLOUD_SERVER_CACHE_MAX_AGE").unwrap()["value"],
        "17s"
    );
}

#[test]
fn hccms_token_and_network_entries_name_where_the_controllers_read_them() {
    let other_secret =
        json!({"valueFrom": {"secretKeyRef": {"name": "hetzner", "key": "api-token"}}});
    // A Secret key of its own: mounted as a file, as credentials.secretName/tokenKey would be ...
    let objects = Render::default()
        .set_json("env.HCLOUD_TOKEN", &other_secret)
        .objects();
    for d in of_kind(&objects, "Deployment") {
        assert_eq!(
            token_source(d),
            json!({"name": "hetzner", "key": "api-token"}),
            "{}",
            describe(d)
        );
        assert!(env(d, "HCLOUD_TOKEN").is_none());
    }
    // ... or passed as the variable with tokenAsFile=false.
    let objects = Render::default()
        .set_json("env.HCLOUD_TOKEN", &other_secret)
        .set("credentials.tokenAsFile", false)
        .objects();
    let d = deployment(&objects, "node-controller");
    assert_eq!(
        env(d, "HCLOUD_TOKEN").unwrap(),
        &json!({"name": "HCLOUD_TOKEN", "valueFrom": other_secret["valueFrom"]})
    );
    assert!(pod_spec(d)["volumes"].is_null());
    // A plain value is passed as it is, as HCCM does (no Secret, no file).
    let objects = Render::default()
        .set_json("env.HCLOUD_TOKEN", &json!({"value": "t0ken"}))
        .objects();
    let d = deployment(&objects, "service-controller");
    assert_eq!(env(d, "HCLOUD_TOKEN").unwrap()["value"], "t0ken");
    assert!(env(d, "HCLOUD_TOKEN_FILE").is_none());
    assert!(pod_spec(d)["volumes"].is_null());
    // HCLOUD_TOKEN: null with HCLOUD_TOKEN_FILE: HCCM's way to read the token from a file.
    let objects = Render::default()
        .set_json(
            "env",
            &json!({"HCLOUD_TOKEN": null, "HCLOUD_TOKEN_FILE": {"value": "/etc/hetzner/token"}}),
        )
        .objects();
    for d in of_kind(&objects, "Deployment") {
        assert!(env(d, "HCLOUD_TOKEN").is_none());
        assert_eq!(
            env(d, "HCLOUD_TOKEN_FILE").unwrap()["value"],
            "/etc/hetzner/token"
        );
        assert!(pod_spec(d)["volumes"].is_null(), "{}", describe(d));
    }
    // networking.network naming another Secret: HCLOUD_NETWORK from it.
    let objects = Render::default()
        .set("networking.enabled", true)
        .set_json(
            "networking.network",
            &json!({"valueFrom": {"secretKeyRef": {"name": "hetzner", "key": "net"}}}),
        )
        .objects();
    for c in CONTROLLERS {
        assert_eq!(
            env(deployment(&objects, c), "HCLOUD_NETWORK").unwrap()["valueFrom"],
            json!({"secretKeyRef": {"name": "hetzner", "key": "net"}}),
            "{c}"
        );
    }
    // With the simulator, HCCM's credential entries give way to the simulator's Secret.
    let objects = Render::default()
        .values(HCCM_CHART_VALUES)
        .set("simulator.enabled", true)
        .set("robot.enabled", true)
        .objects();
    let d = deployment(&objects, "node-controller");
    assert_eq!(
        token_source(d),
        json!({"name": "cloud-controllers-simulator", "key": "token"})
    );
    assert_eq!(
        env(d, "ROBOT_USER").unwrap()["valueFrom"]["secretKeyRef"]["name"],
        "cloud-controllers-simulator"
    );
}

#[test]
fn hccm_keys_that_cannot_mean_the_same_are_refused_with_the_reason() {
    let other_token =
        json!({"valueFrom": {"secretKeyRef": {"name": "hetzner", "key": "api-token"}}});
    let cases: Vec<(Render, &str)> = vec![
        (
            Render::default().set("kind", "DaemonSet"),
            "kind: DaemonSet: this chart runs each controller as a Deployment of its own",
        ),
        (
            Render::default().set("image.repository", "registry.example.com/hccm"),
            "image.repository: registry.example.com/hccm: HCCM's image.repository names its one image",
        ),
        (
            Render::default().set("image.tag", "v1.20.0"),
            "image.tag: v1.20.0 pins HCCM's image, which this chart does not run",
        ),
        (
            Render::default().set("selectorLabels.app", "hccm"),
            "selectorLabels: the chart's selector labels are fixed",
        ),
        (
            Render::default().set_json(
                "env.HCLOUD_TOKEN_FILE",
                &json!({"value": "/etc/hetzner/token"}),
            ),
            "env.HCLOUD_TOKEN_FILE is set, but the token is still passed from a Secret",
        ),
        (
            Render::default()
                .set("networking.enabled", true)
                .set_json("env.HCLOUD_NETWORK", &json!({"value": "my-network"})),
            "env.HCLOUD_NETWORK and networking.enabled both set the network",
        ),
        (
            Render::default()
                .set_json("env.HCLOUD_TOKEN", &other_token)
                .set("credentials.create", true)
                .set("credentials.token", "x"),
            "env.HCLOUD_TOKEN reads Secret hetzner key api-token, but credentials.create makes the chart write the token to Secret hcloud key token",
        ),
        (
            Render::default()
                .set_json("env.HCLOUD_TOKEN", &other_token)
                .set("credentials.secretName", "mine"),
            "env.HCLOUD_TOKEN reads Secret hetzner key api-token, but credentials.secretName/tokenKey say Secret mine key token",
        ),
        (
            Render::default().set_json("args.configure-cloud-routes", &json!(false)),
            "args.configure-cloud-routes: false: HCCM's chart renders false and 0 as the bare flag --configure-cloud-routes",
        ),
        (
            Render::default().set_json("args.leader-elect", &json!("false")),
            "args.leader-elect: this flag is managed by the chart",
        ),
        (
            Render::default().set_json("args.cluster-cidr", &json!("10.244.0.0/16")),
            "args.cluster-cidr: this flag is managed by the chart",
        ),
    ];
    for (render, expect) in cases {
        let err = render.error();
        assert!(err.contains(expect), "{render:?}: {err}");
        eprintln!("{}", err.lines().next().unwrap_or_default());
    }
    // The schema: an entry of HCCM's env is {value} or {valueFrom}.
    let err = Render::default()
        .set_json("env.HCLOUD_DEBUG", &json!("true"))
        .error();
    assert!(
        err.contains("at '/env/HCLOUD_DEBUG': got string, want null or object"),
        "{err}"
    );
}

/// The flags a binary defines itself: those its `--help` lists before the upstream flags it only
/// accepts.
fn own_flags(controller: &str) -> BTreeSet<String> {
    let out = run({
        let mut cmd = std::process::Command::new(binary(controller));
        cmd.arg("--help");
        cmd
    });
    assert!(out.status.success(), "{controller} --help");
    let help = String::from_utf8_lossy(&out.stdout);
    let own = help
        .split("Upstream flags accepted without effect in this controller")
        .next()
        .unwrap();
    own.lines()
        .filter_map(|l| {
            let l = l.trim_start();
            let l = l.strip_prefix("-v, ").unwrap_or(l);
            l.strip_prefix("--")
                .map(|f| f.split([' ', '[', '=']).next().unwrap().to_owned())
        })
        .collect()
}

#[test]
fn hccms_args_go_to_the_controllers_whose_binary_defines_them() {
    let own: BTreeMap<&str, BTreeSet<String>> =
        CONTROLLERS.iter().map(|c| (*c, own_flags(c))).collect();
    let common: BTreeSet<String> = own
        .values()
        .skip(1)
        .fold(own["node-controller"].clone(), |acc, s| {
            acc.intersection(s).cloned().collect()
        });
    assert!(common.contains("leader-elect") && common.contains("cloud-provider"));
    // A flag one controller defines for itself (cluster-cidr is the chart's own: refused).
    let specific: BTreeSet<String> = own
        .values()
        .flatten()
        .filter(|f| !common.contains(*f) && *f != "cluster-cidr")
        .cloned()
        .collect();
    assert!(
        specific.contains("route-reconciliation-period"),
        "{specific:?}"
    );
    // concurrent-node-syncs: every binary defines it, node- and lifecycle-controller read it
    // (controller-kit's config/upstream.rs); v and cloud-provider every binary reads; feature-gates
    // none (each names it in its startup Warning).
    let mut flags: Vec<&str> = specific.iter().map(String::as_str).collect();
    flags.extend([
        "concurrent-node-syncs",
        "v",
        "cloud-provider",
        "feature-gates",
    ]);
    let mut render = Render::default()
        .set("routeController.enabled", true)
        .set("routeController.clusterCIDR", "10.244.0.0/16");
    for f in &flags {
        render = render.set_json(&format!("args.{f}"), &json!("x"));
    }
    let objects = render.objects();
    for f in flags {
        let expected: BTreeSet<&str> = match f {
            "concurrent-node-syncs" => ["node-controller", "lifecycle-controller"].into(),
            "v" | "cloud-provider" | "feature-gates" => CONTROLLERS.into(),
            _ => CONTROLLERS
                .iter()
                .copied()
                .filter(|c| own[c].contains(f))
                .collect(),
        };
        let got: BTreeSet<&str> = CONTROLLERS
            .iter()
            .copied()
            .filter(|c| args(deployment(&objects, c)).contains(&format!("--{f}=x")))
            .collect();
        assert_eq!(got, expected, "--{f}");
    }
    // And the chart's list names no flag that is not a controller's own.
    let helpers = std::fs::read_to_string(chart().join("templates/_helpers.tpl")).unwrap();
    let table = helpers
        .split("$readers := dict")
        .nth(1)
        .and_then(|t| t.split("}}").next())
        .expect("cc.flagReaders' table");
    for line in table.lines().filter(|l| l.trim_start().starts_with('"')) {
        let flag = line.trim().split('"').nth(1).unwrap();
        assert!(
            specific.contains(flag) || flag == "concurrent-node-syncs",
            "cc.flagReaders names {flag}, which no binary defines for itself"
        );
    }
}

#[test]
fn the_translated_hccm_values_file_renders_what_hccm_would() {
    lint(HCCM_TRANSLATED);
    let hccm = fixture(HCCM_VALUES);
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
