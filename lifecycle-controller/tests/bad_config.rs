//! Bad configuration of the lifecycle-controller binary: the shared cases of every
//! controller plus its own flags, each exiting 2 with the flag or variable, its value and what is
//! accepted.

use test_support::catalogues::bad_config::{ConfigCase, NODE_SYNCS, assert_all};

const BIN: &str = env!("CARGO_BIN_EXE_lifecycle-controller");

const CASES: &[ConfigCase] = &[
    NODE_SYNCS,
    ConfigCase {
        name: "exclude selector",
        args: &["--exclude-nodes-selector=role in (edge"],
        env: &[],
        expect: &[
            "--exclude-nodes-selector",
            "role in (edge",
            "unbalanced parentheses",
        ],
    },
    ConfigCase {
        name: "provider id prefix",
        args: &["--provider-id-prefixes=hcloud"],
        env: &[],
        expect: &["--provider-id-prefixes", "\"hcloud\"", "e.g. hcloud://"],
    },
    ConfigCase {
        name: "monitor period zero",
        args: &["--node-monitor-period=0s"],
        env: &[],
        expect: &["--node-monitor-period=\"0s\"", "must be greater than zero"],
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
        &["concurrent-node-syncs", "node-monitor-period"],
    );
}

/// HCCM's metric families under HCCM's names on `HCLOUD_METRICS_ADDRESS`, HCCM's environment
/// accepted where it used to stop the binary, and `HCLOUD_METRICS_ENABLED=false` honoured.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_hccm_installation_switches_over() {
    test_support::e2e::hccm_switch::assert_switch_from_hccm(test_support::e2e::hccm_switch::Case {
        controller: "lifecycle-controller",
        bin: BIN,
        op: Some("hcloud/instancesv2.InstanceExists"),
        network: false,
        args: &[],
        services: false,
    })
    .await;
}
