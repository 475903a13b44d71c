//! The built service-controller binary: configuration errors exit 2, a Service gets its load
//! balancer, SIGTERM exits 0 and releases the Lease, a cloud unreachable at start is waited for.

mod support;

use support::Fixture;
use test_support::e2e::process::{Binary, assert_leads_then_releases_on_sigterm};

const BIN: &str = env!("CARGO_BIN_EXE_service-controller");

#[test]
fn invalid_flags_exit_2_listing_every_problem() {
    let out = std::process::Command::new(BIN)
        .args([
            "--load-balancer-class=nope",
            "--load-balancer-drift-check-period=0s",
        ])
        .env("HCLOUD_TOKEN", "x".repeat(64))
        .output()
        .expect("run the binary");
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--load-balancer-class"), "{stderr}");
    assert!(
        stderr.contains("--load-balancer-drift-check-period"),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serves_a_service_and_releases_the_lease_on_sigterm() {
    let fx = Fixture::without_controller(None).await;
    let node = fx.nodes(1).await.remove(0);
    let k = testenv::kube().await;
    let mut child = Binary::new(BIN, &k)
        .leader_elect(&fx.ns)
        .nodes_of(&fx.run)
        .args(&["--watch-namespace", &fx.ns])
        .sim(&fx.sim)
        .env("HCLOUD_LOAD_BALANCERS_LOCATION", "fsn1")
        .spawn();

    fx.service("web", &[80], &[]).await;
    let svc = fx.wait_ingress("web").await;
    fx.wait_targets(&svc, &[node.server]).await;
    assert_leads_then_releases_on_sigterm(&mut child, &fx.admin, &fx.ns, "service-controller")
        .await;
}

/// A cloud API that cannot be reached at start-up (nothing listens yet, as while an in-cluster
/// cloud-sim rolls over) is retried, not a crash: the process says so, waits, and takes its
/// Lease once the cloud answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cloud_unreachable_at_start_is_waited_for() {
    use tokio::io::AsyncBufReadExt;

    let fx = Fixture::without_controller(None).await;
    // The cloud will appear with its network already there (made in a world saved to a file), so
    // its first answer is the one a running cloud gives.
    let dir = tempfile::tempdir().unwrap();
    let state_file = Some(dir.path().join("world.json"));
    let first = cloud_sim::Sim::start_with(cloud_sim::SimConfig {
        state_file: state_file.clone(),
        ..Default::default()
    })
    .await;
    first
        .client()
        .create_network("k8s", "10.0.0.0/8", "10.0.0.0/16")
        .await
        .unwrap();
    first.shutdown().await;
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let listen = free.local_addr().unwrap();
    drop(free);
    let k = testenv::kube().await;
    let mut cmd = Binary::new(BIN, &k)
        .leader_elect(&fx.ns)
        .nodes_of(&fx.run)
        .args(&["--watch-namespace", &fx.ns])
        .env("HCLOUD_TOKEN", fx.sim.token())
        .env("HCLOUD_ENDPOINT", format!("http://{listen}/v1"))
        .env("HCLOUD_NETWORK", "k8s")
        .env("NO_COLOR", "1")
        .command();
    let mut child = cmd
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("start the binary");
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let said = tokio::time::timeout(std::time::Duration::from_secs(30), async {
        let mut said = String::new();
        while let Some(line) = lines.next_line().await.unwrap() {
            if line.contains("the cloud cannot be reached yet; retrying") {
                return line;
            }
            said += &line;
        }
        panic!("the binary exited without waiting for the cloud:\n{said}");
    })
    .await
    .expect("the binary says it waits for the cloud");
    assert!(
        !said.contains(&fx.sim.token()),
        "the token was printed: {said}"
    );
    // Keep reading, so the binary never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });

    let _sim = cloud_sim::Sim::start_with(cloud_sim::SimConfig {
        listen,
        state_file,
        token: Some(fx.sim.token()),
        ..Default::default()
    })
    .await;
    let lease = "cloud-controller-manager-service-controller";
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while test_support::e2e::process::lease_holder(&fx.admin, &fx.ns, lease)
        .await
        .is_none()
    {
        assert!(
            child.try_wait().unwrap().is_none(),
            "the binary exited instead of waiting"
        );
        assert!(std::time::Instant::now() < deadline, "no Lease after 60 s");
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    assert_leads_then_releases_on_sigterm(&mut child, &fx.admin, &fx.ns, "service-controller")
        .await;
}
