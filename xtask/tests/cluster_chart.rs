//! `cargo xtask cluster up --with-chart --networking` on this machine, then the checks of
//! docs/real-cluster.md against the real cluster: every controller pod on the node and Ready,
//! the node initialized by node-controller from its pod, a LoadBalancer Service's ingress, the
//! pod-CIDR route and `NetworkUnavailable=False`, each pod's working set from the kubelet, and
//! `helm uninstall` leaving no pod, RBAC or ValidatingAdmissionPolicy of the chart. `cluster down`
//! at the end, also when a check fails.
//!
//! Needs root, builds the images and changes the host's network while it runs:
//! `cargo test -p xtask --test cluster_chart -- --ignored --nocapture`. Not part of
//! `cargo xtask test`.

mod common;

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use common::{
    Down, RELEASE, condition, kubectl, kubectl_json, layout, output, tool, wait_for, xtask,
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
    let pods = kubectl_json(&[
        "get",
        "pods",
        "-n",
        "kube-system",
        "-l",
        &format!("app.kubernetes.io/instance={RELEASE}"),
    ]);
    let pods = pods["items"].as_array().expect("items").clone();
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
        assert_eq!(container["restartCount"], 0, "{name}");
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

    // Each pod's working set, as the kubelet reports it (kubectl top's figure).
    let pki: PathBuf = layout().root().join("pki");
    let mut curl = Command::new("curl");
    curl.args(["-sk", "--cert"])
        .arg(pki.join("apiserver-kubelet-client.crt"))
        .arg("--key")
        .arg(pki.join("apiserver-kubelet-client.key"))
        .arg(format!("https://{}:10250/metrics/resource", state.node_ip));
    let metrics = output(curl);
    let working_sets: Vec<&str> = metrics
        .lines()
        .filter(|l| {
            l.starts_with("container_memory_working_set_bytes") && l.contains("kube-system")
        })
        .collect();
    assert_eq!(working_sets.len(), 4, "{metrics}");
    eprintln!("{}", working_sets.join("\n"));

    // helm uninstall (the Service first, as its finalizer needs service-controller).
    kubectl(&["delete", "-f", &file.path().display().to_string(), "--wait"]);
    let mut helm = tool("helm");
    helm.args(["uninstall", RELEASE, "-n", "kube-system", "--wait"]);
    output(helm);
    wait_for("the chart's pods gone", Duration::from_secs(60), || {
        let pods = kubectl_json(&[
            "get",
            "pods",
            "-n",
            "kube-system",
            "-l",
            &format!("app.kubernetes.io/instance={RELEASE}"),
        ]);
        pods["items"]
            .as_array()
            .is_some_and(Vec::is_empty)
            .then_some(())
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
    // Known gap (docs/real-cluster.md): the controllers' Leases stay; shown, not asserted.
    eprintln!(
        "Leases after helm uninstall:\n{}",
        kubectl(&["get", "leases", "-n", "kube-system"])
    );
}
