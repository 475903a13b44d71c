//! The test control plane itself: a real apiserver with RBAC, isolation between concurrently running
//! test binaries, and no processes left behind.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, RoleRef, Subject};
use kube::api::{Api, DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};
use serde_json::json;

const UNINITIALIZED: &str = "node.cloudprovider.kubernetes.io/uninitialized";

fn tainted_node(name: &str) -> Node {
    serde_json::from_value(json!({
        "metadata": { "name": name },
        "spec": { "taints": [{ "key": UNINITIALIZED, "value": "true", "effect": "NoSchedule" }] }
    }))
    .unwrap()
}

#[tokio::test]
async fn apiserver_serves_nodes_and_enforces_rbac() {
    let k = testenv::kube().await;
    let admin = k.client().await;
    assert_eq!(
        admin.apiserver_version().await.unwrap().git_version,
        testenv::KUBE_APISERVER_VERSION
    );

    // A Node registered as a kubelet with --cloud-provider=external would register it.
    let nodes: Api<Node> = Api::all(admin.clone());
    nodes
        .create(&PostParams::default(), &tainted_node("rbac-probe"))
        .await
        .unwrap();
    let node = nodes.get("rbac-probe").await.unwrap();
    let taints = node.spec.unwrap().taints.unwrap();
    assert_eq!(taints[0].key, UNINITIALIZED);

    // Its status can be patched, as kubelet does for conditions.
    let status = json!({ "status": { "conditions": [{
        "type": "Ready", "status": "True", "reason": "KubeletReady", "message": "ready",
        "lastHeartbeatTime": "2026-01-01T00:00:00Z", "lastTransitionTime": "2026-01-01T00:00:00Z"
    }]}});
    nodes
        .patch_status(
            "rbac-probe",
            &PatchParams::default(),
            &Patch::Merge(&status),
        )
        .await
        .unwrap();
    let ready = nodes
        .get_status("rbac-probe")
        .await
        .unwrap()
        .status
        .unwrap()
        .conditions
        .unwrap();
    assert_eq!(
        (ready[0].type_.as_str(), ready[0].status.as_str()),
        ("Ready", "True")
    );

    // A ServiceAccount granted only get/list on nodes can read them but not delete them.
    let role = ClusterRole {
        metadata: ObjectMeta {
            name: Some("testenv-node-reader".into()),
            ..Default::default()
        },
        rules: Some(vec![PolicyRule {
            api_groups: Some(vec![String::new()]),
            resources: Some(vec!["nodes".into()]),
            verbs: vec!["get".into(), "list".into()],
            ..Default::default()
        }]),
        ..Default::default()
    };
    Api::<ClusterRole>::all(admin.clone())
        .create(&PostParams::default(), &role)
        .await
        .unwrap();
    let binding = ClusterRoleBinding {
        metadata: ObjectMeta {
            name: Some("testenv-node-reader".into()),
            ..Default::default()
        },
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".into(),
            kind: "ClusterRole".into(),
            name: "testenv-node-reader".into(),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".into(),
            name: "reader".into(),
            namespace: Some("default".into()),
            ..Default::default()
        }]),
    };
    Api::<ClusterRoleBinding>::all(admin.clone())
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();

    let as_reader: Api<Node> = Api::all(k.service_account_client("default", "reader").await);
    // RBAC grants propagate to the authorizer's cache asynchronously: poll with a deadline.
    let deadline = Instant::now() + Duration::from_secs(20);
    while as_reader.get("rbac-probe").await.is_err() {
        assert!(
            Instant::now() < deadline,
            "the granted `get` never became allowed"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    match as_reader
        .delete("rbac-probe", &DeleteParams::default())
        .await
    {
        Err(kube::Error::Api(status)) => assert_eq!(status.code, 403, "{status:?}"),
        other => panic!("deleting a node without the verb must be refused with 403, got {other:?}"),
    }
    assert!(nodes.get_opt("rbac-probe").await.unwrap().is_some());
}

/// What a child test binary reports on stdout about the control plane it started.
#[derive(Debug)]
struct ChildReport {
    apiserver_port: u16,
    etcd_port: u16,
    apiserver_pid: u32,
    etcd_pid: u32,
}

const REPORT_PREFIX: &str = "TESTENV-CHILD-REPORT";

/// Run only as a child process by the tests below: starts this binary's own control plane, creates a
/// Node with a fixed name (which would conflict if two binaries shared an etcd) and reports.
#[tokio::test]
#[ignore = "run as a separate process by the side-by-side and leftover-process tests"]
async fn child_starts_its_own_control_plane() {
    let k = testenv::kube().await;
    let nodes: Api<Node> = Api::all(k.client().await);
    nodes
        .create(&PostParams::default(), &tainted_node("same-name-in-both"))
        .await
        .unwrap();
    let (apiserver_pid, etcd_pid) = k.pids();
    let (apiserver_port, etcd_port) = k.ports();
    println!("{REPORT_PREFIX} {apiserver_port} {etcd_port} {apiserver_pid} {etcd_pid}");
    if std::env::var_os("TESTENV_CHILD_WAIT_FOR_KILL").is_some() {
        // Block until the parent kills this process (stdin is a pipe the parent never closes).
        let mut line = String::new();
        let _ = std::io::stdin().read_line(&mut line);
    }
}

fn spawn_child(wait_for_kill: bool) -> Child {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "--exact",
        "child_starts_its_own_control_plane",
        "--ignored",
        "--nocapture",
    ])
    .stdin(Stdio::piped())
    .stdout(Stdio::piped())
    .stderr(Stdio::inherit());
    if wait_for_kill {
        cmd.env("TESTENV_CHILD_WAIT_FOR_KILL", "1");
    }
    cmd.spawn().unwrap()
}

/// Waits for the child's report line, then keeps draining its stdout in the background (a closed
/// pipe would make the child's test harness fail on its next line).
fn read_report(child: &mut Child) -> ChildReport {
    let stdout = BufReader::new(child.stdout.take().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in stdout.lines().map_while(Result::ok) {
            if let Some(rest) = line.strip_prefix(REPORT_PREFIX) {
                let f: Vec<u64> = rest
                    .split_whitespace()
                    .map(|n| n.parse().unwrap())
                    .collect();
                let _ = tx.send(ChildReport {
                    apiserver_port: f[0] as u16,
                    etcd_port: f[1] as u16,
                    apiserver_pid: f[2] as u32,
                    etcd_pid: f[3] as u32,
                });
            }
        }
    });
    rx.recv_timeout(Duration::from_secs(180))
        .unwrap_or_else(|e| {
            panic!(
                "the child test binary did not report ({e}): {:?}",
                child.try_wait()
            )
        })
}

fn wait_with_deadline(child: &mut Child, limit: Duration) -> std::process::ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        assert!(
            Instant::now() < deadline,
            "child test binary did not finish in {limit:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn assert_gone(pids: &[u32]) {
    let deadline = Instant::now() + Duration::from_secs(20);
    let alive = || {
        pids.iter()
            .copied()
            .filter(|p| testenv::pid_alive(*p))
            .collect::<Vec<_>>()
    };
    while !alive().is_empty() {
        assert!(
            Instant::now() < deadline,
            "control-plane processes left behind: {:?}",
            alive()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn two_test_binaries_run_side_by_side_and_leave_nothing_behind() {
    let mut a = spawn_child(false);
    let mut b = spawn_child(false);
    let (ra, rb) = (read_report(&mut a), read_report(&mut b));
    assert!(wait_with_deadline(&mut a, Duration::from_secs(120)).success());
    assert!(wait_with_deadline(&mut b, Duration::from_secs(120)).success());

    // Both created the same Node name, so they must have had separate etcds; and no port is shared.
    let ports_a = BTreeMap::from([(ra.apiserver_port, "a-apiserver"), (ra.etcd_port, "a-etcd")]);
    for port in [rb.apiserver_port, rb.etcd_port] {
        assert!(
            !ports_a.contains_key(&port),
            "port {port} used by both: {ra:?} {rb:?}"
        );
    }
    assert_ne!(ra.apiserver_pid, rb.apiserver_pid);

    // Both binaries ended normally: their apiservers and etcds ended with them.
    assert_gone(&[ra.apiserver_pid, ra.etcd_pid, rb.apiserver_pid, rb.etcd_pid]);
}

#[test]
fn a_killed_test_binary_leaves_no_control_plane_behind() {
    let mut child = spawn_child(true);
    let report = read_report(&mut child);
    assert!(testenv::pid_alive(report.apiserver_pid) && testenv::pid_alive(report.etcd_pid));
    child.kill().unwrap(); // SIGKILL: no exit hooks run, only the kernel's parent-death signal.
    child.wait().unwrap();
    assert_gone(&[report.apiserver_pid, report.etcd_pid]);
}

/// The chaos suite stops and starts kube-apiserver under running controllers: a restart must come
/// back on the same port and etcd, with every object still there, and a client made before it
/// must work after it.
#[tokio::test]
async fn apiserver_restarts_on_the_same_etcd_keeping_its_objects() {
    let mut plane = testenv::ControlPlane::start().await.unwrap();
    let client = plane.client().await.unwrap();
    let nodes: Api<Node> = Api::all(client.clone());
    nodes
        .create(&PostParams::default(), &tainted_node("survives-restart"))
        .await
        .unwrap();
    let (pid, _) = plane.pids();
    plane.stop_apiserver();
    assert!(
        nodes.get("survives-restart").await.is_err(),
        "the apiserver answered while stopped"
    );
    plane.start_apiserver().await.unwrap();
    assert_ne!(plane.pids().0, pid, "a new apiserver process");
    let node = nodes.get("survives-restart").await.unwrap();
    assert_eq!(node.metadata.name.as_deref(), Some("survives-restart"));
    assert!(
        plane.start_apiserver().await.is_err(),
        "starting a running apiserver is refused"
    );
    plane.stop();
}
