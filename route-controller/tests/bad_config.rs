//! Bad configuration of the route-controller binary: the shared cases of every
//! controller plus what routes need, each exiting 2 with the flag or variable, its value and what
//! is accepted.

use test_support::catalogues::bad_config::{ConfigCase, assert_all};

const BIN: &str = env!("CARGO_BIN_EXE_route-controller");

/// Routes need both; the shared cases run with them set so only the case's own problem shows.
const CASES: &[ConfigCase] = &[
    ConfigCase {
        name: "no cluster cidr",
        args: &[],
        env: &[("HCLOUD_NETWORK", "net")],
        expect: &["--cluster-cidr is required", "e.g. 10.244.0.0/16"],
    },
    ConfigCase {
        name: "no network",
        args: &["--cluster-cidr=10.244.0.0/16"],
        env: &[],
        expect: &["HCLOUD_NETWORK is required", "name or ID of the network"],
    },
    ConfigCase {
        name: "cluster cidr without mask",
        args: &["--cluster-cidr=10.244.0.0"],
        env: &[("HCLOUD_NETWORK", "net")],
        expect: &[
            "--cluster-cidr=\"10.244.0.0\"",
            "expected comma-separated CIDRs, e.g. 10.244.0.0/16",
        ],
    },
    ConfigCase {
        name: "cluster cidr not an address",
        args: &["--cluster-cidr=pods/16"],
        env: &[("HCLOUD_NETWORK", "net")],
        expect: &[
            "--cluster-cidr=\"pods/16\"",
            "expected comma-separated CIDRs, e.g. 10.244.0.0/16",
        ],
    },
    ConfigCase {
        name: "reconciliation period",
        args: &[
            "--cluster-cidr=10.244.0.0/16",
            "--route-reconciliation-period=0s",
        ],
        env: &[("HCLOUD_NETWORK", "net")],
        expect: &[
            "--route-reconciliation-period=\"0s\"",
            "must be greater than zero",
        ],
    },
    ConfigCase {
        name: "configure cloud routes",
        args: &["--configure-cloud-routes=maybe"],
        env: &[("HCLOUD_NETWORK", "net")],
        expect: &["--configure-cloud-routes", "'maybe'"],
    },
];

#[test]
fn every_bad_configuration_exits_2_naming_flag_value_and_accepted_forms() {
    assert_all(BIN, CASES);
}

/// CloudStack offers no routes: with a valid cloud-config, the process stops before anything
/// runs, with one line that says so and what to do.
#[test]
fn with_cloudstack_it_stops_at_once_with_one_line() {
    let dir = std::env::temp_dir().join(test_support::e2e::unique("cs-routes"));
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("cloud-config");
    std::fs::write(
        &config,
        "[Global]\napi-url = http://127.0.0.1:9/client/api\napi-key = k\nsecret-key = s\n",
    )
    .unwrap();
    let out = std::process::Command::new(BIN)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .args([
            "--cloud-provider=external-cloudstack",
            &format!("--cloud-config={}", config.display()),
            "--cluster-cidr=10.244.0.0/16",
            "--kubeconfig=/nonexistent",
        ])
        .output()
        .unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    let problems: Vec<&str> = stderr.lines().filter(|l| l.starts_with("  - ")).collect();
    assert_eq!(problems.len(), 1, "{stderr}");
    assert!(
        problems[0].contains("external-cloudstack: CloudStack offers no routes")
            && problems[0].ends_with("(or pass --configure-cloud-routes=false)"),
        "{stderr}"
    );
}

#[test]
fn every_hccm_flag_is_accepted_and_the_unread_ones_are_named_in_one_warning() {
    test_support::catalogues::hccm_flags::assert_every_flag_accepted(
        BIN,
        &[
            "cluster-cidr",
            "configure-cloud-routes",
            "route-reconciliation-period",
        ],
    );
}

/// HCCM's metric families under HCCM's names on `HCLOUD_METRICS_ADDRESS`, HCCM's environment
/// accepted where it used to stop the binary, and `HCLOUD_METRICS_ENABLED=false` honoured.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_hccm_installation_switches_over() {
    test_support::e2e::hccm_switch::assert_switch_from_hccm(test_support::e2e::hccm_switch::Case {
        controller: "route-controller",
        bin: BIN,
        op: Some("hcloud/ListRoutes"),
        network: true,
        args: &["--cluster-cidr=10.244.0.0/16"],
        services: false,
    })
    .await;
}
