//! Bad configuration of the service-controller binary: the shared cases of every
//! controller plus the load-balancer flags and `HCLOUD_LOAD_BALANCERS_*` defaults, each exiting 2
//! with the flag or variable, its value and what is accepted. A network that does not exist can
//! only be found out by asking the cloud, and so can a token it refuses: both exit 2 too, once asked.

mod support;

use test_support::catalogues::bad_config::{ConfigCase, LOAD_BALANCER_DEFAULT, assert_all};
use test_support::e2e::process::Binary;

const BIN: &str = env!("CARGO_BIN_EXE_service-controller");

const CASES: &[ConfigCase] = &[
    LOAD_BALANCER_DEFAULT,
    ConfigCase {
        name: "drift check period zero",
        args: &["--load-balancer-drift-check-period=0s"],
        env: &[],
        expect: &[
            "--load-balancer-drift-check-period=\"0s\"",
            "must be greater than zero",
        ],
    },
    ConfigCase {
        name: "node sync window",
        args: &["--node-sync-window=soon"],
        env: &[],
        expect: &["--node-sync-window=\"soon\"", "e.g. 15s, 5m, 500ms"],
    },
    ConfigCase {
        name: "load balancer class without prefix",
        args: &["--load-balancer-class=nope"],
        env: &[],
        expect: &[
            "--load-balancer-class=\"nope\"",
            "e.g. example.com/internal-vip",
        ],
    },
    ConfigCase {
        name: "service concurrency",
        args: &["--concurrent-service-syncs=many"],
        env: &[],
        expect: &[
            "--concurrent-service-syncs=\"many\"",
            "not a non-negative integer",
        ],
    },
    ConfigCase {
        name: "load balancers enabled bool",
        args: &[],
        env: &[("HCLOUD_LOAD_BALANCERS_ENABLED", "sometimes")],
        expect: &[
            "HCLOUD_LOAD_BALANCERS_ENABLED=\"sometimes\"",
            "a boolean (1, t, T",
        ],
    },
    ConfigCase {
        name: "algorithm default",
        args: &[],
        env: &[("HCLOUD_LOAD_BALANCERS_ALGORITHM_TYPE", "random")],
        expect: &[
            "HCLOUD_LOAD_BALANCERS_ALGORITHM_TYPE=\"random\"",
            "round_robin or least_connections",
        ],
    },
    ConfigCase {
        name: "location and network zone defaults",
        args: &[],
        env: &[
            ("HCLOUD_LOAD_BALANCERS_LOCATION", "fsn1"),
            ("HCLOUD_LOAD_BALANCERS_NETWORK_ZONE", "eu-central"),
        ],
        expect: &[
            "HCLOUD_LOAD_BALANCERS_LOCATION and HCLOUD_LOAD_BALANCERS_NETWORK_ZONE",
            "mutually exclusive",
        ],
    },
    ConfigCase {
        name: "health check interval default",
        args: &[],
        env: &[("HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_INTERVAL", "soon")],
        expect: &[
            "HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_INTERVAL=\"soon\"",
            "a duration: whole seconds",
        ],
    },
    ConfigCase {
        name: "health check retries default",
        args: &[],
        env: &[("HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_RETRIES", "-1")],
        expect: &[
            "HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_RETRIES=\"-1\"",
            "a non-negative integer",
        ],
    },
    ConfigCase {
        name: "private subnet default",
        args: &[],
        env: &[("HCLOUD_LOAD_BALANCERS_PRIVATE_SUBNET_IP_RANGE", "10.0.0.0")],
        expect: &[
            "HCLOUD_LOAD_BALANCERS_PRIVATE_SUBNET_IP_RANGE=\"10.0.0.0\"",
            "an IPv4 CIDR",
        ],
    },
];

#[test]
fn every_bad_configuration_exits_2_naming_flag_value_and_accepted_forms() {
    assert_all(BIN, CASES);
}

/// Starts the binary against `sim` with `token` and `network`; its exit code and all it printed.
async fn start_against(sim: &cloud_sim::Sim, token: &str, network: &str) -> (Option<i32>, String) {
    let k = testenv::kube().await;
    let (code, all) = Binary::new(BIN, &k)
        .args(&["--leader-elect=false"])
        .env("HCLOUD_TOKEN", token)
        .env("HCLOUD_ENDPOINT", sim.endpoint())
        .env("HCLOUD_NETWORK", network)
        .env("NO_COLOR", "1")
        .output()
        .await;
    assert!(!all.contains(token), "the token was printed");
    (code, all)
}

/// Whether the network exists is the cloud's to say: the binary fails at startup after asking it,
/// with the configuration exit code 2, naming `HCLOUD_NETWORK` and the value.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_network_fails_startup_naming_it() {
    let fx = support::Fixture::without_controller(None).await;
    let (code, all) = start_against(&fx.sim, &fx.sim.token(), "no-such-network").await;
    assert_eq!(code, Some(2), "{all}");
    assert!(
        all.contains("HCLOUD_NETWORK") && all.contains("no-such-network"),
        "{all}"
    );
}

/// A well-formed token the cloud refuses is a configuration error too (exit 2), found at the
/// first call, and the message says which setting to fix without printing it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_token_fails_startup_naming_it() {
    let sim = cloud_sim::Sim::start_with(cloud_sim::SimConfig {
        token: Some("a".repeat(64)),
        ..Default::default()
    })
    .await;
    let (code, all) = start_against(&sim, &"b".repeat(64), "k8s").await;
    assert_eq!(code, Some(2), "{all}");
    assert!(all.contains("HCLOUD_TOKEN was refused"), "{all}");
}

#[test]
fn every_hccm_flag_is_accepted_and_the_unread_ones_are_named_in_one_warning() {
    test_support::catalogues::hccm_flags::assert_every_flag_accepted(
        BIN,
        &["concurrent-service-syncs", "node-sync-period"],
    );
}

/// HCCM's metric families under HCCM's names on `HCLOUD_METRICS_ADDRESS`, HCCM's environment
/// accepted where it used to stop the binary, and `HCLOUD_METRICS_ENABLED=false` honoured.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_hccm_installation_switches_over() {
    test_support::e2e::hccm_switch::assert_switch_from_hccm(test_support::e2e::hccm_switch::Case {
        controller: "service-controller",
        bin: BIN,
        op: Some("hcloud/loadBalancers.EnsureLoadBalancer"),
        network: false,
        args: &[],
        services: true,
    })
    .await;
}
