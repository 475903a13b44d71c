//! `cargo xtask cluster up --with-chart --networking` on this machine, then the checks of
//! docs/real-cluster.md against the real cluster: every controller pod on the node and Ready,
//! the node initialized by node-controller from its pod, a LoadBalancer Service's ingress, the
//! pod-CIDR route and `NetworkUnavailable=False`, a request through cloud-sim's load balancer
//! reaching a real pod with kube-proxy's health check following it (`externalTrafficPolicy:
//! Local`), each pod's working set from the kubelet, and
//! `helm uninstall` leaving no pod, RBAC, Lease or ValidatingAdmissionPolicy of the chart. Then
//! the failure modes a user meets, each with its message: a Node whose kubelet runs without
//! `--cloud-provider=external`, a Node with no server, the chart installed twice, the wrong token
//! in the Secret; and HCCM's values files installed as they are. `cluster down` at the end, also
//! when a check fails.
//!
//! Needs root, builds the images and changes the host's network while it runs:
//! `cargo test -p xtask --test cluster_chart -- --ignored --nocapture`; `cargo xtask test` runs
//! it (as root).

mod common;

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use common::{
    Down, RELEASE, condition, event_message, event_message_containing, is_ready, kubectl,
    kubectl_json, layout, output, release_pods, tool, wait_for, xtask,
};
use serde_json::Value;

const SERVICE: &str = r#"
apiVersion: v1
kind: Service
metadata:
  name: chart-check
  namespace: default
  annotations:
    load-balancer.hetzner.cloud/location: fsn1
spec:
  type: LoadBalancer
  selector: {app: chart-check}
  ports: [{port: 80, targetPort: 8080}]
"#;

#[test]
#[ignore = "needs root, builds the images, changes the host's network: \
            cargo test -p xtask --test cluster_chart -- --ignored --nocapture"]
fn helm_install_into_a_real_cluster() {
    let started = Instant::now();
    common::no_cluster_running();
    let status = xtask()
        .args(["cluster", "up", "--with-chart", "--networking"])
        .status()
        .expect("xtask runs");
    let _down = Down;
    assert!(status.success(), "cluster up --with-chart failed");
    eprintln!(
        "cluster up --with-chart --networking: {:.1?}",
        started.elapsed()
    );
    let state = testenv::cluster::status().expect("a running cluster");
    let sim = state.cloud_sim.clone().expect("cloud-sim");

    // Every controller pod on this node, Ready, not restarted, from the pushed images.
    let pods = release_pods(RELEASE);
    assert_eq!(pods.len(), 4, "four controllers with networking.enabled");
    for pod in &pods {
        let name = pod["metadata"]["name"].as_str().unwrap_or_default();
        assert_eq!(pod["spec"]["nodeName"], state.node.as_str(), "{name}");
        assert_eq!(
            condition(pod, "Ready").map(|c| &c["status"]),
            Some(&Value::from("True")),
            "{name}"
        );
        let container = &pod["status"]["containerStatuses"][0];
        assert_eq!(
            container["restartCount"], 0,
            "{name} restarted; its last run: {:#}",
            container["lastState"]
        );
        let image = container["imageID"].as_str().unwrap_or_default();
        assert!(
            image.starts_with("localhost:5001/cloud-controllers/") && image.contains("@sha256:"),
            "{name} runs {image}"
        );
    }

    // node-controller, in its pod, initialized the node it runs on.
    let node = wait_for("the node initialized", Duration::from_secs(60), || {
        let node = kubectl_json(&["get", "node", &state.node]);
        let tainted = node["spec"]["taints"].as_array().is_some_and(|t| {
            t.iter()
                .any(|t| t["key"] == "node.cloudprovider.kubernetes.io/uninitialized")
        });
        (!tainted).then_some(node)
    });
    assert_eq!(
        node["spec"]["providerID"],
        format!("hcloud://{}", sim.server_id).as_str()
    );
    let addresses = &node["status"]["addresses"];
    assert!(
        addresses.as_array().is_some_and(|a| a
            .iter()
            .any(|a| a["type"] == "ExternalIP" && a["address"] == state.node_ip.as_str())),
        "the node's addresses: {addresses}"
    );
    let labels = &node["metadata"]["labels"];
    assert_eq!(
        labels["node.kubernetes.io/instance-type"], "cx22",
        "{labels}"
    );
    assert_eq!(labels["topology.kubernetes.io/region"], "fsn1", "{labels}");
    eprintln!(
        "node {}: providerID {}\n  addresses {addresses}\n  labels {labels}",
        state.node, node["spec"]["providerID"]
    );

    // route-controller: the podCIDR route, then NetworkUnavailable=False.
    let reason = wait_for("NetworkUnavailable=False", Duration::from_secs(60), || {
        let node = kubectl_json(&["get", "node", &state.node]);
        condition(&node, "NetworkUnavailable")
            .filter(|c| c["status"] == "False")
            .map(|c| c["reason"].clone())
    });
    eprintln!("NetworkUnavailable=False, reason {reason}");

    // service-controller: a LoadBalancer Service gets its ingress.
    let file = tempfile::NamedTempFile::new().expect("temp file");
    std::fs::write(file.path(), SERVICE).expect("write");
    kubectl(&["apply", "-f", &file.path().display().to_string()]);
    let ingress = wait_for("the Service's ingress", Duration::from_secs(60), || {
        let svc = kubectl_json(&["get", "service", "-n", "default", "chart-check"]);
        let ingress = svc["status"]["loadBalancer"]["ingress"].clone();
        ingress
            .as_array()
            .is_some_and(|i| !i.is_empty())
            .then_some(ingress)
    });
    eprintln!("ingress {ingress}");

    traffic_reaches_a_real_pod(&sim);

    // Each pod's working set, as the kubelet reports it (kubectl top's figure).
    let pki: PathBuf = layout().root().join("pki");
    let kubelet_get = |path: &str| {
        let mut curl = Command::new("curl");
        curl.args(["-sk", "--cert"])
            .arg(pki.join("apiserver-kubelet-client.crt"))
            .arg("--key")
            .arg(pki.join("apiserver-kubelet-client.key"))
            .arg(format!("https://{}:10250{path}", state.node_ip));
        output(curl)
    };
    let metrics = kubelet_get("/metrics/resource");
    let working_sets: Vec<&str> = metrics
        .lines()
        .filter(|l| {
            l.starts_with("container_memory_working_set_bytes") && l.contains("kube-system")
        })
        .collect();
    assert_eq!(working_sets.len(), 4, "{metrics}");
    eprintln!("{}", working_sets.join("\n"));
    // The same from the kubelet's summary, next to the resident set (RSS counts the binary's code
    // pages; the working set counts what the pod's cgroup was charged for).
    let summary: Value =
        serde_json::from_str(&kubelet_get("/stats/summary")).expect("kubelet summary is JSON");
    for pod in summary["pods"].as_array().into_iter().flatten() {
        if pod["podRef"]["namespace"] != "kube-system" {
            continue;
        }
        for c in pod["containers"].as_array().into_iter().flatten() {
            let mib = |field: &str| c["memory"][field].as_f64().unwrap_or(0.0) / 1048576.0;
            eprintln!(
                "{:<22} working set {:5.1} MiB, RSS {:5.1} MiB (kubelet summary)",
                c["name"].as_str().unwrap_or("?"),
                mib("workingSetBytes"),
                mib("rssBytes"),
            );
        }
    }

    // lifecycle-controller: a Node whose server is gone is deleted.
    create_node(
        "server-gone",
        serde_json::json!({"providerID": "hcloud://999"}),
    );
    wait_for(
        "the Node of a deleted server deleted",
        Duration::from_secs(60),
        || {
            let nodes = kubectl(&["get", "nodes", "-o", "name"]);
            (!nodes.contains("node/server-gone")).then_some(())
        },
    );
    eprintln!(
        "lifecycle-controller: {}",
        event_message("server-gone", "DeletingNode")
    );

    failure_modes_with_the_chart_installed();

    // helm uninstall (the Service first, as its finalizer needs service-controller).
    kubectl(&["delete", "-f", &file.path().display().to_string(), "--wait"]);
    let mut helm = tool("helm");
    helm.args(["uninstall", RELEASE, "-n", "kube-system", "--wait"]);
    output(helm);
    wait_for("the chart's pods gone", Duration::from_secs(60), || {
        release_pods(RELEASE).is_empty().then_some(())
    });
    let left = kubectl(&[
        "get",
        "clusterrole,clusterrolebinding,role,rolebinding,serviceaccount,deployment,pdb,\
         validatingadmissionpolicy,validatingadmissionpolicybinding",
        "-A",
        "-o",
        "name",
        "-l",
        &format!("app.kubernetes.io/instance={RELEASE}"),
    ]);
    assert!(left.trim().is_empty(), "left by helm uninstall:\n{left}");
    let leases = kubectl(&["get", "leases", "-n", "kube-system", "-o", "name"]);
    assert!(
        !leases.contains("cloud-controller-manager-"),
        "the chart's Leases outlived helm uninstall:\n{leases}"
    );

    wrong_token_is_reported(&sim.endpoint);
    hccm_values_files_install_as_they_are(&state.node, &sim.endpoint);
}

const WEB: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: hello
        image: localhost:5001/cloud-controllers/hello:1
        env: [{name: LISTEN, value: ":8080"}]
        readinessProbe: {httpGet: {path: /, port: 8080}, periodSeconds: 1}
---
apiVersion: v1
kind: Service
metadata:
  name: web
  namespace: default
  annotations:
    load-balancer.hetzner.cloud/location: fsn1
    load-balancer.hetzner.cloud/health-check-kube-proxy: "true"
spec:
  type: LoadBalancer
  externalTrafficPolicy: Local
  selector: {app: web}
  ports: [{port: 80, targetPort: 8080}]
"#;

/// A Deployment of the hello image behind an `externalTrafficPolicy: Local` LoadBalancer
/// Service with kube-proxy health checks: cloud-sim's load balancer health-checks the real
/// kube-proxy's `healthCheckNodePort`, a request through it gets the pod's answer, and scaling
/// the Deployment to 0 and back turns the target unhealthy and healthy again.
fn traffic_reaches_a_real_pod(sim: &testenv::cluster::CloudSim) {
    let file = tempfile::NamedTempFile::new().expect("temp file");
    std::fs::write(file.path(), WEB).expect("write");
    let path = file.path().display().to_string();
    kubectl(&["apply", "-f", &path]);
    let svc = wait_for("web's ingress", Duration::from_secs(60), || {
        let svc = kubectl_json(&["get", "service", "-n", "default", "web"]);
        svc["status"]["loadBalancer"]["ingress"]
            .as_array()
            .is_some_and(|i| !i.is_empty())
            .then_some(svc)
    });
    let uid = svc["metadata"]["uid"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let health_port = svc["spec"]["healthCheckNodePort"].clone();
    let lb = || {
        let lbs = sim_get(sim, "/load_balancers");
        lbs["load_balancers"]
            .as_array()
            .and_then(|l| {
                l.iter()
                    .find(|lb| lb["labels"]["hcloud-ccm/service-uid"] == uid.as_str())
                    .cloned()
            })
            .unwrap_or_default()
    };
    let health = |want: &'static str| {
        wait_for(
            &format!("web's target {want}"),
            Duration::from_secs(90),
            || {
                let lb = lb();
                (lb["targets"][0]["health_status"][0]["status"] == want).then_some(lb)
            },
        )
    };
    let lb_now = health("healthy");
    let check = &lb_now["services"][0]["health_check"];
    eprintln!("web: load balancer {} health check {check}", lb_now["id"]);
    assert_eq!(
        check["port"], health_port,
        "kube-proxy's healthCheckNodePort"
    );
    assert_eq!(check["http"]["path"], "/healthz");

    let listeners = sim_get(
        sim,
        &format!("/_sim/load_balancers/{}/listeners", lb_now["id"]),
    );
    let listener = listeners["listeners"][0]["address"]
        .as_str()
        .expect("a listener")
        .to_string();
    let curl = || {
        let mut c = Command::new("curl");
        c.args(["-sS", "--max-time", "5", &format!("http://{listener}/")]);
        output(c)
    };
    let answer = curl();
    eprintln!("$ curl http://{listener}/   # web's load balancer, port 80\n{answer}");
    assert!(answer.starts_with("hello from web-"), "{answer}");

    let scale = |n: u32| {
        let replicas = format!("--replicas={n}");
        kubectl(&["scale", "deployment", "-n", "default", "web", &replicas]);
    };
    scale(0);
    health("unhealthy");
    scale(1);
    health("healthy");
    let answer = curl();
    eprintln!("after scaling to 0 and back to 1: {answer}");
    assert!(answer.starts_with("hello from web-"), "{answer}");
    kubectl(&["delete", "-f", &path, "--wait"]);
}

/// A GET of cloud-sim's API (`/load_balancers`, with the cluster's token) or of its control
/// endpoints (`/_sim/...`), as JSON.
fn sim_get(sim: &testenv::cluster::CloudSim, path: &str) -> Value {
    let base = sim.endpoint.trim_end_matches("/v1");
    let url = match path.strip_prefix("/_sim") {
        Some(_) => format!("{base}{path}"),
        None => format!("{}{path}", sim.endpoint),
    };
    let mut c = Command::new("curl");
    c.args(["-sS", "--max-time", "10", "-H"])
        .arg(format!("Authorization: Bearer {}", sim.token))
        .arg(url);
    serde_json::from_str(&output(c)).expect("cloud-sim answers JSON")
}

/// The node's address in cloud-sim's network `cluster` (`cargo xtask cluster up --with-chart
/// --networking` attaches its server as 10.0.0.2) on this machine's loopback, removed when dropped.
struct PrivateIp;

impl PrivateIp {
    const ADDRESS: &str = "10.0.0.2/32";

    fn add() -> PrivateIp {
        let status = Command::new("ip")
            .args(["addr", "add", Self::ADDRESS, "dev", "lo"])
            .status()
            .expect("ip runs");
        assert!(status.success(), "ip addr add {} dev lo", Self::ADDRESS);
        PrivateIp
    }
}

impl Drop for PrivateIp {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["addr", "del", Self::ADDRESS, "dev", "lo"])
            .status();
    }
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn helm(args: &[&str]) -> std::process::Output {
    let mut helm = tool("helm");
    helm.args(args).current_dir(repo());
    helm.output().expect("helm runs")
}

/// A Node as a kubelet registers it: with the uninitialized taint when it runs with
/// `--cloud-provider=external`, without it otherwise; no providerID either way.
fn register_node(name: &str, external: bool) {
    let taints = if external {
        serde_json::json!([{"key": "node.cloudprovider.kubernetes.io/uninitialized",
                            "value": "true", "effect": "NoSchedule"}])
    } else {
        serde_json::json!([])
    };
    create_node(name, serde_json::json!({"taints": taints}));
}

fn create_node(name: &str, spec: Value) {
    let manifest = serde_json::json!({
        "apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "spec": spec,
    })
    .to_string();
    let file = tempfile::NamedTempFile::new().expect("temp file");
    std::fs::write(file.path(), manifest).expect("write");
    kubectl(&["create", "-f", &file.path().display().to_string()]);
}

/// Failure modes that need the chart running: Nodes the node-controller cannot initialize, and a
/// second release.
fn failure_modes_with_the_chart_installed() {
    register_node("kubelet-not-external", false);
    let message = event_message("kubelet-not-external", "NotInitializedByCloudProvider");
    assert!(message.contains("--cloud-provider=external"), "{message}");
    eprintln!(
        "a kubelet without --cloud-provider=external: Warning NotInitializedByCloudProvider: {message}"
    );

    register_node("no-such-server", true);
    let message = event_message("no-such-server", "ServerNotFound");
    assert!(message.contains("no cloud server matches"), "{message}");
    eprintln!("a node with no server: Warning ServerNotFound: {message}");
    kubectl(&[
        "delete",
        "node",
        "kubelet-not-external",
        "no-such-server",
        "--ignore-not-found",
    ]);

    for namespace in ["kube-system", "default"] {
        let out = helm(&[
            "install",
            "second",
            "charts/cloud-controllers",
            "-n",
            namespace,
        ]);
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success(),
            "a second release was installed in {namespace}"
        );
        assert!(
            said.contains(&format!("release {RELEASE} in namespace kube-system")),
            "{said}"
        );
        eprintln!(
            "the chart installed twice (helm install second -n {namespace}): {}",
            said.trim()
        );
    }
}

/// A token the cloud refuses, the two ways the chart passes it. As a file (the default, so it can
/// be rotated) the controller keeps running, not Ready, and says why in its log; as HCCM's
/// `HCLOUD_TOKEN` variable with a network to look up, it stops at start-up with exit code 2, and
/// `kubectl describe pod` shows why (the chart's `FallbackToLogsOnError`).
fn wrong_token_is_reported(endpoint: &str) {
    let wrong = "0".repeat(64);
    kubectl(&[
        "create",
        "secret",
        "generic",
        "hcloud-wrong",
        "-n",
        "kube-system",
        &format!("--from-literal=token={wrong}"),
        "--from-literal=network=cluster",
    ]);
    let install = |release: &str, extra: &[&str]| {
        let mut args = vec![
            "install",
            release,
            "charts/cloud-controllers",
            "-n",
            "kube-system",
            "-f",
            "dev/cluster/values.yaml",
            "--set",
            "credentials.secretName=hcloud-wrong",
            "--set",
            "lifecycleController.enabled=false",
            "--set",
            "serviceController.enabled=false",
        ];
        let endpoint = format!("hcloud.endpoint={endpoint}");
        args.extend(["--set", &endpoint]);
        args.extend(extra);
        let out = helm(&args);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let pod_of = |release: &str| release_pods(release).into_iter().next();
    let uninstall = |release: &str| {
        let out = helm(&["uninstall", release, "-n", "kube-system", "--wait"]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };

    // The token as a file: running, not Ready, the reason in the log at its first call (a new
    // Node to initialize makes one).
    register_node("wrong-token-probe", true);
    install("wrong-token-file", &[]);
    let (name, said) = wait_for(
        "the refused token in the log",
        Duration::from_secs(120),
        || {
            let pod = pod_of("wrong-token-file")?;
            let name = pod["metadata"]["name"].as_str()?.to_owned();
            let mut logs = tool("kubectl");
            logs.args(["logs", "-n", "kube-system", &name]);
            let out = String::from_utf8_lossy(&logs.output().ok()?.stdout).into_owned();
            let line = out
                .lines()
                .find(|l| l.contains("refuses the current token"))?
                .to_owned();
            Some((name, line))
        },
    );
    // The kubelet's readiness probe gets 503 from /readyz (it says so in an Event; the pod's Ready
    // condition follows after the probe's failure threshold). A probe sent before the admin
    // server listened says "connection refused" in an Event of its own.
    let unhealthy = event_message_containing(&name, "Unhealthy", "503");
    assert!(unhealthy.contains("Readiness probe failed"), "{unhealthy}");
    assert!(unhealthy.contains("503"), "{unhealthy}");
    assert!(!said.contains(&wrong), "the token in the log: {said}");
    eprintln!(
        "the wrong token (as a file): pod Running, Warning Unhealthy: {unhealthy}; log:\n{said}"
    );
    uninstall("wrong-token-file");
    kubectl(&["delete", "node", "wrong-token-probe"]);

    // HCCM's way, the variable: stops at start-up.
    install(
        "wrong-token-env",
        &[
            "--set",
            "credentials.tokenAsFile=false",
            "--set",
            "hcloud.network.enabled=true",
        ],
    );
    let (code, message) = wait_for(
        "the refused token at start-up",
        Duration::from_secs(120),
        || {
            let pod = pod_of("wrong-token-env")?;
            let terminated =
                pod["status"]["containerStatuses"][0]["lastState"]["terminated"].clone();
            let message = terminated["message"].as_str()?.to_owned();
            Some((terminated["exitCode"].clone(), message))
        },
    );
    assert_eq!(code, 2, "{message}");
    assert!(message.contains("HCLOUD_TOKEN was refused"), "{message}");
    assert!(
        !message.contains(&wrong),
        "the token in the message: {message}"
    );
    eprintln!(
        "the wrong token (HCLOUD_TOKEN): exit code {code}, termination message:\n{}",
        message.trim()
    );
    uninstall("wrong-token-env");
    kubectl(&["delete", "secret", "hcloud-wrong", "-n", "kube-system"]);
}

/// HCCM's own chart/values.yaml and a values file written for HCCM's chart, installed unchanged
/// (next to the file naming this cluster's images): every pod of the release Ready.
fn hccm_values_files_install_as_they_are(node: &str, endpoint: &str) {
    // The worked example turns HCCM's networking on, so node-controller reports the server's
    // private IP as the Node's InternalIP, where kubelet then probes the hostNetwork pods. On
    // Hetzner the server has that address; here it is put on the loopback meanwhile.
    let _private_ip = PrivateIp::add();
    // The worked example pins the controllers to control-plane nodes, as HCCM users do.
    kubectl(&[
        "label",
        "node",
        node,
        "node-role.kubernetes.io/control-plane=",
        "--overwrite",
    ]);
    for file in [
        "chart-tests/fixtures/hccm-chart-values.yaml",
        "chart-tests/fixtures/hccm-values.yaml",
    ] {
        let started = Instant::now();
        let out = helm(&[
            "install",
            "hccm",
            "charts/cloud-controllers",
            "-n",
            "kube-system",
            "-f",
            file,
            "-f",
            "dev/cluster/values.yaml",
            "--set",
            &format!("hcloud.endpoint={endpoint}"),
        ]);
        assert!(
            out.status.success(),
            "{file}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        // One Ready pod per controller. The worked example asks for two replicas with the host
        // network: on this one node the second replica of each finds its host port taken and
        // stays Pending, which is what the scheduler says.
        let pods = wait_for(
            &format!("{file}: a Ready pod per controller"),
            Duration::from_secs(120),
            || {
                // The previous file's release had the same name: its pods may still be
                // terminating after `helm uninstall --wait` (their Deployments are gone).
                let items: Vec<Value> = release_pods("hccm")
                    .into_iter()
                    .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
                    .collect();
                let mut ready = std::collections::BTreeMap::<String, usize>::new();
                for p in &items {
                    let component = p["metadata"]["labels"]["app.kubernetes.io/component"]
                        .as_str()?
                        .to_owned();
                    let n = ready.entry(component).or_default();
                    if is_ready(p) {
                        *n += 1;
                    }
                }
                (!ready.is_empty() && ready.values().all(|n| *n >= 1)).then_some(items)
            },
        );
        for p in &pods {
            if is_ready(p) {
                continue;
            }
            let scheduled = condition(p, "PodScheduled").cloned().unwrap_or_default();
            assert_eq!(scheduled["reason"], "Unschedulable", "{p}");
            assert!(
                scheduled["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("free ports")),
                "{scheduled}"
            );
        }
        let names: Vec<String> = pods
            .iter()
            .map(|p| {
                let ready = is_ready(p);
                format!(
                    "{} {}",
                    p["metadata"]["name"].as_str().unwrap_or_default(),
                    if ready {
                        "Ready"
                    } else {
                        "Pending (host port taken)"
                    }
                )
            })
            .collect();
        eprintln!(
            "{file}, unchanged: after {:.1?}: {names:#?}",
            started.elapsed()
        );
        let out = helm(&["uninstall", "hccm", "-n", "kube-system", "--wait"]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    kubectl(&[
        "label",
        "node",
        node,
        "node-role.kubernetes.io/control-plane-",
    ]);
}
