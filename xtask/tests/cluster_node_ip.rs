//! A kubelet whose `--node-ip` is an address the cloud does not know, on the real node: `cargo
//! xtask cluster up --with-chart --kubelet-node-ip 100.64.0.5` starts kubelet with that address
//! (added to `lo`; cloud-sim's server for the node has only the machine's address), as a node on
//! a WireGuard or Tailscale network runs on Hetzner. With the chart's default the node stays
//! tainted with a `NodeIPNotFound` Warning naming the way out; after `helm upgrade --set
//! nodeController.nodeIPOutsideCloud=accept` it is initialized, the kubelet's address first.
//! `cluster down` at the end, also when a check fails.
//!
//! Needs root, builds the images and changes the host's network while it runs:
//! `cargo test -p xtask --test cluster_node_ip -- --ignored --nocapture`; `cargo xtask test` runs
//! it (as root).

mod common;

use std::time::{Duration, Instant};

use common::{
    Down, RELEASE, event_message_containing, kubectl, kubectl_json, tool, wait_for_or_show_log,
    xtask,
};
use serde_json::Value;

/// In the shared address space of carrier-grade NAT, which Tailscale uses; no cloud-sim server
/// has it.
const MESH_IP: &str = "100.64.0.5";

fn tainted(node: &Value) -> bool {
    node["spec"]["taints"].as_array().is_some_and(|t| {
        t.iter()
            .any(|t| t["key"] == "node.cloudprovider.kubernetes.io/uninitialized")
    })
}

#[test]
#[ignore = "needs root, builds the images, changes the host's network: \
            cargo test -p xtask --test cluster_node_ip -- --ignored --nocapture"]
fn a_kubelet_node_ip_the_cloud_does_not_know() {
    let started = Instant::now();
    common::no_cluster_running();
    let status = xtask()
        .args([
            "cluster",
            "up",
            "--with-chart",
            "--kubelet-node-ip",
            MESH_IP,
        ])
        .status()
        .expect("xtask runs");
    let _down = Down;
    assert!(status.success(), "cluster up --with-chart failed");
    eprintln!(
        "cluster up --with-chart --kubelet-node-ip {MESH_IP}: {:.1?}",
        started.elapsed()
    );
    let state = testenv::cluster::status().expect("a running cluster");
    let node = state.node.clone();

    // Upstream's rule: the node IP is not the server's, the node stays tainted, and says why.
    let warning = event_message_containing(&node, "NodeIPNotFound", MESH_IP);
    assert!(
        warning.contains("nodeIPOutsideCloud")
            || warning.contains("--accept-node-ip-outside-cloud"),
        "{warning}"
    );
    assert!(
        warning.contains(&state.node_ip),
        "the Warning lists the server's addresses: {warning}"
    );
    assert!(tainted(&kubectl_json(&["get", "node", &node])));
    eprintln!("without the opt-in: tainted, NodeIPNotFound: {warning}");

    // The opt-in: the node is initialized, the kubelet's address its first InternalIP.
    let mut upgrade = tool("helm");
    upgrade
        .args([
            "upgrade",
            RELEASE,
            "charts/cloud-controllers",
            "-n",
            "kube-system",
        ])
        .args([
            "--reuse-values",
            "--set",
            "nodeController.nodeIPOutsideCloud=accept",
        ])
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."));
    let out = upgrade.output().expect("helm runs");
    assert!(
        out.status.success(),
        "helm upgrade: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let initialized = wait_for_or_show_log(
        "the node initialized with its node IP",
        Duration::from_secs(120),
        "node-controller",
        || {
            let n = kubectl_json(&["get", "node", &node]);
            (!tainted(&n)).then_some(n)
        },
    );
    let addresses = initialized["status"]["addresses"].clone();
    assert_eq!(
        addresses[0],
        serde_json::json!({"type": "InternalIP", "address": MESH_IP}),
        "{addresses}"
    );
    assert!(
        addresses
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["type"] == "ExternalIP" && a["address"] == state.node_ip.as_str()),
        "the server's address follows: {addresses}"
    );
    let said = event_message_containing(&node, "NodeIPOutsideCloud", MESH_IP);
    eprintln!("with nodeController.nodeIPOutsideCloud=accept: addresses {addresses}; {said}");
    eprintln!("{}", kubectl(&["get", "node", &node, "-o", "wide"]));
}
