//! Bad configuration of the node-controller binary: the shared cases of every
//! controller plus its own flags, each exiting 2 with the flag or variable, its value and what is
//! accepted.

use test_support::catalogues::bad_config::{ConfigCase, NODE_SYNCS, assert_all};

const BIN: &str = env!("CARGO_BIN_EXE_node-controller");

const CASES: &[ConfigCase] = &[
    NODE_SYNCS,
    ConfigCase {
        name: "status update frequency",
        args: &["--node-status-update-frequency=often"],
        env: &[],
        expect: &[
            "--node-status-update-frequency=\"often\"",
            "e.g. 15s, 5m, 500ms",
        ],
    },
    ConfigCase {
        name: "status update frequency zero",
        args: &["--node-status-update-frequency=0s"],
        env: &[],
        expect: &[
            "--node-status-update-frequency=\"0s\"",
            "must be greater than zero",
        ],
    },
    ConfigCase {
        name: "status update concurrency",
        args: &["--concurrent-node-status-updates=2000"],
        env: &[],
        expect: &[
            "--concurrent-node-status-updates=2000",
            "between 0 and 1024",
        ],
    },
];

#[test]
fn every_bad_configuration_exits_2_naming_flag_value_and_accepted_forms() {
    assert_all(BIN, CASES);
}

#[test]
fn every_hccm_flag_is_accepted_and_the_unread_ones_are_named_in_one_warning() {
    test_support::catalogues::hccm_flags::assert_every_flag_accepted(
        BIN,
        &[
            "concurrent-node-syncs",
            "node-status-update-frequency",
            "concurrent-node-status-updates",
        ],
    );
}

/// HCCM's metric families under HCCM's names on `HCLOUD_METRICS_ADDRESS`, HCCM's environment
/// accepted where it used to stop the binary, and `HCLOUD_METRICS_ENABLED=false` honoured.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_hccm_installation_switches_over() {
    test_support::e2e::hccm_switch::assert_switch_from_hccm(test_support::e2e::hccm_switch::Case {
        controller: "node-controller",
        bin: BIN,
        op: Some("hcloud/instancesv2.InstanceMetadata"),
        network: false,
        args: &[],
        services: false,
    })
    .await;
}
