//! The built service-controller binary: configuration errors exit 2, a Service gets its load
//! balancer, SIGTERM exits 0 and releases the Lease.

#[path = "../../node-controller/tests/support/mod.rs"]
mod support;

mod lb;

use lb::Fixture;

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
    let mut child = tokio::process::Command::new(BIN)
        .args([
            "--kubeconfig",
            &k.kubeconfig().display().to_string(),
            "--admin-address=127.0.0.1:0",
            "--leader-elect-resource-namespace",
            &fx.ns,
            "--leader-elect-lease-duration=4s",
            "--leader-elect-renew-deadline=3s",
            "--leader-elect-retry-period=500ms",
            "--leader-elect-identity=bin-test",
            "--node-label-selector",
            &format!("{}={}", support::TEST_LABEL, fx.run),
            "--watch-namespace",
            &fx.ns,
        ])
        .env("HCLOUD_TOKEN", fx.sim.token())
        .env("HCLOUD_ENDPOINT", fx.sim.endpoint())
        .env("HCLOUD_LOAD_BALANCERS_LOCATION", "fsn1")
        .kill_on_drop(true)
        .spawn()
        .expect("start the service-controller binary");

    fx.service("web", &[80], &[]).await;
    let svc = fx.wait_ingress("web").await;
    fx.wait_targets(&svc, &[node.server]).await;
    let lease_name = "cloud-controller-manager-service-controller";
    let h = support::run::lease_holder(&fx.admin, &fx.ns, lease_name)
        .await
        .expect("the binary holds the Lease");
    assert!(h.starts_with("bin-test"), "{h}");

    let status = support::run::sigterm(&mut child).await;
    assert!(status.success(), "graceful shutdown exits 0: {status}");
    assert_eq!(
        support::run::lease_holder(&fx.admin, &fx.ns, lease_name).await,
        None,
        "Lease released on shutdown"
    );
}
