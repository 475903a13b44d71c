//! The built service-controller binary: configuration errors exit 2, a Service gets its load
//! balancer, SIGTERM exits 0 and releases the Lease.

mod support;

use support::Fixture;
use test_support::process::{Binary, assert_leads_then_releases_on_sigterm};

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
