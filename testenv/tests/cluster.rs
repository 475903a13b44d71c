//! The real one-node cluster (`cargo xtask cluster`): up, a pod on the pod network, `kubectl
//! logs/exec`, down leaving the host as it was, a second up, and an up after a `kill -9` of
//! everything. Ignored by default (root, a few minutes, changes the host while it runs):
//!
//! ```sh
//! cargo test -p testenv --test cluster -- --ignored --nocapture
//! ```

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::path::Path;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, PostParams};
use testenv::cluster::{self, Cluster, Layout, UpOptions, host};

fn is_root() -> bool {
    use std::os::unix::fs::MetadataExt as _;
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

/// A state directory of its own, so the test never touches a cluster someone started by hand
/// (the ports are fixed, though: a running `cargo xtask cluster` makes `up` fail).
fn layout() -> Layout {
    Layout::new(cluster::state_dir().with_file_name("cluster-test"))
}

fn diff(before: &str, after: &str) -> String {
    let b: Vec<&str> = before.lines().collect();
    let a: Vec<&str> = after.lines().collect();
    let mut out = String::new();
    for l in &b {
        if !a.contains(l) {
            out.push_str(&format!("- {l}\n"));
        }
    }
    for l in &a {
        if !b.contains(l) {
            out.push_str(&format!("+ {l}\n"));
        }
    }
    out
}

fn kubectl(c: &Cluster, args: &[&str]) -> String {
    let out = std::process::Command::new(&c.binaries.kubectl)
        .args(args)
        .env("KUBECONFIG", c.kubeconfig())
        .output()
        .expect("running kubectl");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "kubectl {args:?} failed: {text}");
    text
}

fn http_get(ip: &str, port: u16) -> Option<String> {
    let mut s = TcpStream::connect_timeout(
        &format!("{ip}:{port}").parse().ok()?,
        Duration::from_secs(2),
    )
    .ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(s, "GET / HTTP/1.0\r\nHost: {ip}\r\n\r\n").ok()?;
    let mut body = String::new();
    s.read_to_string(&mut body).ok()?;
    Some(body)
}

/// Creates pod `default/hello` and returns its IP once it runs.
fn http_get_with(addr: &str, path: &str, token: &str) -> Option<String> {
    let mut s = TcpStream::connect_timeout(&addr.parse().ok()?, Duration::from_secs(2)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.0\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\n\r\n"
    )
    .ok()?;
    let mut body = String::new();
    s.read_to_string(&mut body).ok()?;
    Some(body)
}

async fn start_hello(c: &Cluster) -> String {
    let admin = c.client().await.unwrap();
    // The scheduler places it: it tolerates the taint the cloud controller would remove.
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "hello", "namespace": "default"},
        "spec": {
            "containers": [{"name": "hello", "image": cluster::HELLO_IMAGE,
                            "ports": [{"containerPort": 8080}]}],
            "tolerations": [{"key": "node.cloudprovider.kubernetes.io/uninitialized",
                             "operator": "Exists", "effect": "NoSchedule"}],
            "terminationGracePeriodSeconds": 1
        }
    }))
    .unwrap();
    let pods: Api<Pod> = Api::namespaced(admin, "default");
    pods.create(&PostParams::default(), &pod).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let p = pods.get("hello").await.unwrap();
        let status = p.status.unwrap_or_default();
        if status.phase.as_deref() == Some("Running")
            && let Some(ip) = status.pod_ip
        {
            return ip;
        }
        assert!(
            Instant::now() < deadline,
            "the pod is not Running: {status:?}\n{}",
            kubectl(c, &["describe", "pod", "hello"])
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

async fn node_and_pod_checks(c: &Cluster) {
    let admin = c.client().await.unwrap();
    let node = Api::<Node>::all(admin.clone()).get(&c.node).await.unwrap();
    let spec = node.spec.clone().unwrap_or_default();
    let taints = spec.taints.unwrap_or_default();
    assert!(
        taints.iter().any(
            |t| t.key == "node.cloudprovider.kubernetes.io/uninitialized"
                && t.effect == "NoSchedule"
        ),
        "the node registered without the uninitialized taint: {taints:?}"
    );
    assert_eq!(spec.pod_cidr.as_deref(), Some(c.pod_cidr.as_str()));
    eprintln!("{}", kubectl(c, &["get", "nodes", "-o", "wide"]));

    let ip = start_hello(c).await;
    assert!(
        ip.starts_with(c.pod_cidr.trim_end_matches("0/24")),
        "{ip} is not in the node's podCIDR {}",
        c.pod_cidr
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    let answer = loop {
        if let Some(a) = http_get(&ip, 8080) {
            break a;
        }
        assert!(Instant::now() < deadline, "no answer from {ip}:8080");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(answer.contains("hello from hello"), "{answer}");
    let logs = kubectl(c, &["logs", "hello"]);
    assert!(logs.contains("listening on :8080"), "{logs}");
    let exec = kubectl(c, &["exec", "hello", "--", "/hello", "-once"]);
    assert!(exec.contains("hello from hello"), "{exec}");
    // From the pod network through kube-proxy's rules to the apiserver on the node's address.
    let service = kubectl(
        c,
        &[
            "exec",
            "hello",
            "--",
            "/hello",
            "-get",
            "https://10.96.0.1/readyz",
        ],
    );
    assert!(service.contains("200 OK"), "{service}");
    eprintln!("pod hello at {ip}: {}", answer.lines().last().unwrap_or(""));
}

fn kill_everything(l: &Layout) {
    let state: cluster::State =
        serde_json::from_slice(&std::fs::read(l.root().join("state.json")).unwrap()).unwrap();
    for p in &state.processes {
        host::signal(p.pid, libc::SIGKILL);
    }
    for (pid, _) in host::stray_processes(&testenv::cache_dir(), l.root()) {
        host::signal(pid, libc::SIGKILL);
    }
    std::thread::sleep(Duration::from_millis(500));
}

#[test]
#[ignore = "starts a real node on this machine (root, minutes); run with --ignored"]
fn up_down_leaves_the_host_as_it_was_and_up_works_again() {
    if !is_root() {
        eprintln!("skipped: a real node needs root");
        return;
    }
    let l = layout();
    cluster::ensure_packages().unwrap(); // iptables-save, for the first snapshot
    cluster::down_in(&l).unwrap(); // a crashed earlier run
    let before = host::snapshot();
    let runtime = tokio::runtime::Runtime::new().unwrap();

    // TESTENV_CLOUD_SIM: a cloud-sim binary (target/debug/cloud-sim) to start with the cluster.
    let options = UpOptions {
        quiet: false,
        cloud_sim: std::env::var_os("TESTENV_CLOUD_SIM").map(Into::into),
        kubelet_node_ip: None,
    };
    let c = runtime.block_on(cluster::up_in(&l, &options)).unwrap();
    runtime.block_on(node_and_pod_checks(&c));
    if let Some(sim) = &c.cloud_sim {
        let server = http_get_with(
            &format!("{}:{}", c.node_ip, cluster::CLOUD_SIM_PORT),
            &format!("/v1/servers/{}", sim.server_id),
            &sim.token,
        )
        .expect("cloud-sim answers");
        let expected = format!("\"ip\":\"{}\"", c.node_ip);
        assert!(
            server.contains(&format!("\"name\":\"{}\"", c.node)) && server.contains(&expected),
            "the node's server in cloud-sim: {server}"
        );
    }
    eprintln!("{}", cluster::down_in(&l).unwrap().join("\n"));
    let after = host::snapshot();
    assert!(
        before == after,
        "the host differs after down:\n{}",
        diff(&before, &after)
    );

    // Up again after down, a pod, then a kill -9 of every process (the pod's go on), then up again.
    let c = runtime.block_on(cluster::up_in(&l, &options)).unwrap();
    runtime.block_on(start_hello(&c));
    kill_everything(&l);
    let c = runtime.block_on(cluster::up_in(&l, &options)).unwrap();
    assert!(
        c.steps.iter().any(|s| s.name.contains("leftovers")),
        "up did not clean up after the kill: {:?}",
        c.steps
    );
    eprintln!("{}", cluster::down_in(&l).unwrap().join("\n"));
    let after = host::snapshot();
    assert!(
        before == after,
        "the host differs after kill -9, up and down:\n{}",
        diff(&before, &after)
    );
    assert!(!Path::new(&l.root().join("state.json")).exists());
}

/// The failure a user with a KubeletConfiguration of their own meets on these cgroup v1 hosts:
/// kubelet without `failCgroupV1: false` refuses to start, and `cluster up` names the cause and
/// the fix instead of only a log tail. Runs the real kubelet, which stops at its configuration
/// check, before it touches the host.
#[test]
#[ignore = "builds kubelet: cargo test -p testenv --test cluster -- --ignored --nocapture"]
fn kubelet_refusing_cgroup_v1_is_explained() {
    if Path::new("/sys/fs/cgroup/cgroup.controllers").exists() {
        eprintln!("cgroup v2 host: kubelet does not refuse it, nothing to show");
        return;
    }
    let kubelet = testenv::ensure_cluster_binaries()
        .expect("kubelet builds")
        .kubelet;
    let dir = tempfile::tempdir().expect("a temp dir");
    let config = dir.path().join("kubelet.yaml");
    std::fs::write(
        &config,
        "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n\
         cgroupDriver: cgroupfs\n",
    )
    .expect("write");
    let mut child = std::process::Command::new(&kubelet)
        .arg("--config")
        .arg(&config)
        .arg("--root-dir")
        .arg(dir.path().join("root"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("kubelet runs");
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().expect("wait").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("kubelet did not stop at its configuration check within 60 s");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = child.wait_with_output().expect("output");
    let printed = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{printed}");
    assert!(
        printed.contains(cluster::KUBELET_CGROUP_V1_REFUSAL),
        "{printed}"
    );
    assert_eq!(
        cluster::known_cause("kubelet", &printed),
        Some(cluster::CGROUP_V1_CAUSE)
    );
    eprintln!(
        "kubelet: {}\ncluster up: {}",
        printed.trim(),
        cluster::CGROUP_V1_CAUSE
    );
}
