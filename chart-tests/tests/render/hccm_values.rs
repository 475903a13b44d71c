//! An HCCM values file next to its translation (chart-tests/fixtures/).

use chart_tests::{CONTROLLERS, Render, chart, helm, of_kind, run, tool};
use serde_json::{Value, json};

use crate::support::{
    args, container, deployed, deployment, env, pod_spec, schema_line, token_source,
};

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
