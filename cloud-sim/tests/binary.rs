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

#[tokio::test]
async fn data_plane_flags_turn_listeners_on() {
    let listen = format!("127.0.0.1:{}", free_port());
    let (_sim, _) = start(&[
        "--listen",
        &listen,
        "--action-duration-ms",
        "0",
        "--data-plane",
        "--health-check-speedup",
        "50",
        "--data-plane-listen",
        "127.0.0.2",
        "--proxy-protocol-version",
        "2",
    ]);
    let w = cloud_sim::SimClient::new(&format!("http://{listen}"), &"t".repeat(64));
    let config = w
        .raw(reqwest::Method::GET, "/_sim/config", None)
        .await
        .expect("GET /_sim/config answers")
        .body;
    assert_eq!(
        config["data_plane"],
        serde_json::json!({"listen_ip": "127.0.0.2", "health_check_speedup": 50.0, "proxy_protocol_version": 2})
    );
    let lb = w
        .create_load_balancer_with(serde_json::json!({
            "name": "lb", "load_balancer_type": "lb11", "location": "fsn1",
            "services": [{"protocol": "tcp", "listen_port": 80, "destination_port": 30080}],
        }))
        .await
        .expect("a load balancer");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let addr = loop {
        if let Some(addr) = w.listener(lb, 80).await.expect("listeners answer") {
            break addr;
        }
        assert!(std::time::Instant::now() < deadline, "no listener for :80");
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    };
    assert_eq!(addr.ip().to_string(), "127.0.0.2");
    assert!(tokio::net::TcpStream::connect(addr).await.is_ok());
}

#[test]
fn data_plane_settings_need_the_data_plane_flag() {
    let out = Command::new(env!("CARGO_BIN_EXE_cloud-sim"))
        .args(["--listen", "127.0.0.1:0", "--health-check-speedup", "50"])
        .output()
        .expect("cloud-sim runs");
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--data-plane"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
