//! The `cloud-sim` binary itself: flags that act at start-up.

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};

/// Stops the child with SIGTERM when dropped (it saves its world then), also when an assertion
/// fails.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let pid = self.0.id().to_string();
        let termed = Command::new("kill").args(["-TERM", &pid]).status();
        if !termed.is_ok_and(|s| s.success()) {
            let _ = self.0.kill();
        }
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// Starts cloud-sim and returns it with the lines it printed up to its endpoint line.
fn start(args: &[&str]) -> (Running, Vec<String>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_cloud-sim"))
        .args(args)
        .stdout(Stdio::piped())
        .spawn()
        .expect("cloud-sim starts");
    let stdout = child.stdout.take().expect("piped stdout");
    let running = Running(child);
    let mut lines = Vec::new();
    let mut reader = BufReader::new(stdout).lines();
    for line in reader.by_ref() {
        let line = line.expect("utf-8 output");
        let done = line.contains("HCLOUD_ENDPOINT=");
        lines.push(line);
        if done {
            // Keep reading what it prints afterwards, so it never writes into a closed pipe.
            std::thread::spawn(move || reader.for_each(drop));
            return (running, lines);
        }
    }
    panic!("cloud-sim exited before serving: {lines:?}");
}

#[tokio::test]
async fn network_flag_creates_the_network_once_across_restarts() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let state = dir.path().join("world.json");
    let token = "t".repeat(64);
    let listen = format!("127.0.0.1:{}", free_port());
    let args = [
        "--listen",
        &listen,
        "--state",
        state.to_str().unwrap(),
        "--token",
        &token,
        "--network",
        "k8s",
    ];
    let networks = async || -> Vec<serde_json::Value> {
        let body: serde_json::Value = reqwest::Client::new()
            .get(format!("http://{listen}/v1/networks?name=k8s"))
            .bearer_auth(&token)
            .send()
            .await
            .and_then(|r| r.error_for_status())
            .expect("GET /networks answers")
            .json()
            .await
            .expect("a JSON body");
        body["networks"].as_array().cloned().unwrap_or_default()
    };

    let (first, lines) = start(&args);
    assert!(
        lines.iter().any(|l| l.contains("created network k8s")),
        "{lines:?}"
    );
    let created = networks().await;
    assert_eq!(created.len(), 1, "{created:?}");
    assert_eq!(created[0]["ip_range"], "10.0.0.0/8");
    drop(first);

    let (_second, lines) = start(&args);
    assert!(
        lines.iter().any(|l| l.contains("network k8s exists")),
        "{lines:?}"
    );
    assert_eq!(
        networks().await,
        created,
        "the kept network, not a second one"
    );
}
