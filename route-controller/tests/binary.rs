//! The built route-controller binary refuses to start without what routes need.

const BIN: &str = env!("CARGO_BIN_EXE_route-controller");

fn run(args: &[&str], network: Option<&str>) -> (Option<i32>, String) {
    let mut cmd = std::process::Command::new(BIN);
    cmd.args(args)
        .env("HCLOUD_TOKEN", "x".repeat(64))
        .env_remove("HCLOUD_NETWORK");
    if let Some(n) = network {
        cmd.env("HCLOUD_NETWORK", n);
    }
    let out = cmd.output().expect("run the binary");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn missing_cluster_cidr_and_network_exit_2_naming_both() {
    let (code, stderr) = run(&[], None);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("--cluster-cidr is required"), "{stderr}");
    assert!(stderr.contains("HCLOUD_NETWORK is required"), "{stderr}");
}

#[test]
fn malformed_cluster_cidr_exits_2() {
    let (code, stderr) = run(&["--cluster-cidr=10.244.0.0/16,10.245.0.0/16"], Some("k8s"));
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("dual-stack pair"), "{stderr}");
}

#[test]
fn routes_disabled_needs_neither() {
    // Starts (and fails later only for want of a cluster); the configuration itself is accepted.
    let (code, stderr) = run(
        &[
            "--configure-cloud-routes=false",
            "--kubeconfig=/nonexistent",
        ],
        None,
    );
    assert_ne!(code, Some(2), "{stderr}");
}
