//! What the real-cluster tests share: `cargo xtask cluster` and the cluster's kubectl and helm,
//! and polling with a deadline.

#![allow(dead_code)] // each test binary uses its part

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

/// The release `cargo xtask cluster up --with-chart` and skaffold.yaml install.
pub const RELEASE: &str = "cloud-controllers";

pub fn xtask() -> Command {
    Command::new(env!("CARGO_BIN_EXE_xtask"))
}

/// `cluster down` when dropped.
pub struct Down;

impl Drop for Down {
    fn drop(&mut self) {
        let out = xtask().args(["cluster", "down"]).output();
        if let Ok(out) = out {
            eprintln!("{}", String::from_utf8_lossy(&out.stderr));
        }
    }
}

pub fn layout() -> testenv::cluster::Layout {
    testenv::cluster::Layout::default()
}

pub fn tool(name: &str) -> Command {
    let mut cmd = Command::new(layout().bin().join(name));
    cmd.env("KUBECONFIG", layout().kubeconfig());
    cmd
}

pub fn output(mut cmd: Command) -> String {
    let out = cmd.output().expect("runs");
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn kubectl(args: &[&str]) -> String {
    let mut cmd = tool("kubectl");
    cmd.args(args);
    output(cmd)
}

pub fn kubectl_json(args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.extend(["-o", "json"]);
    serde_json::from_str(&kubectl(&all)).expect("kubectl prints JSON")
}

/// Polls `probe` every second until it returns `Some`, or panics after `timeout`.
pub fn wait_for<T>(what: &str, timeout: Duration, mut probe: impl FnMut() -> Option<T>) -> T {
    let started = Instant::now();
    loop {
        if let Some(v) = probe() {
            eprintln!("{what}: after {:.1?}", started.elapsed());
            return v;
        }
        assert!(started.elapsed() < timeout, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// [`wait_for`], with the last lines of the log of `component`'s pods (namespace `kube-system`)
/// in the panic: what a timeout needs to be understood after the cluster is gone.
pub fn wait_for_or_show_log<T>(
    what: &str,
    timeout: Duration,
    component: &str,
    mut probe: impl FnMut() -> Option<T>,
) -> T {
    let started = Instant::now();
    loop {
        if let Some(v) = probe() {
            eprintln!("{what}: after {:.1?}", started.elapsed());
            return v;
        }
        if started.elapsed() >= timeout {
            let selector = format!("app.kubernetes.io/component={component}");
            let log = tool("kubectl")
                .args(["logs", "-n", "kube-system", "-l", &selector, "--tail=60"])
                .output()
                .map(|o| {
                    format!(
                        "{}{}",
                        String::from_utf8_lossy(&o.stdout),
                        String::from_utf8_lossy(&o.stderr)
                    )
                })
                .unwrap_or_else(|e| format!("kubectl logs: {e}"));
            panic!("timed out waiting for {what}; the log of {component}:\n{log}");
        }
        std::thread::sleep(Duration::from_secs(1));
    }
}

pub fn condition<'a>(object: &'a Value, kind: &str) -> Option<&'a Value> {
    object["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)
}

/// Panics when a cluster someone started by hand is running: `up` would fail on its ports, and
/// the test's `cluster down` must not stop it.
pub fn no_cluster_running() {
    if let Some(state) = testenv::cluster::status() {
        panic!(
            "a cluster started by `cargo xtask cluster up` is running (node {}): \
             `cargo xtask cluster down` first",
            state.node
        );
    }
}

/// The pods of a helm release in kube-system.
pub fn release_pods(release: &str) -> Vec<Value> {
    let pods = kubectl_json(&[
        "get",
        "pods",
        "-n",
        "kube-system",
        "-l",
        &format!("app.kubernetes.io/instance={release}"),
    ]);
    pods["items"].as_array().cloned().unwrap_or_default()
}

/// Whether a pod's Ready condition is True.
pub fn is_ready(pod: &Value) -> bool {
    condition(pod, "Ready").is_some_and(|c| c["status"] == "True")
}

/// The message of the first Event with `reason` about the object `name`, within a minute.
pub fn event_message(name: &str, reason: &str) -> String {
    event_message_containing(name, reason, "")
}

/// The message of the first `reason` Event on `name` whose message contains `needle`.
pub fn event_message_containing(name: &str, reason: &str, needle: &str) -> String {
    wait_for(
        &format!("{reason} on {name} saying {needle:?}"),
        Duration::from_secs(60),
        || {
            let events = kubectl_json(&[
                "get",
                "events",
                "-A",
                "--field-selector",
                &format!("involvedObject.name={name},reason={reason}"),
            ]);
            events["items"]
                .as_array()?
                .iter()
                .filter_map(|e| e["message"].as_str())
                .find(|m| m.contains(needle))
                .map(str::to_owned)
        },
    )
}
