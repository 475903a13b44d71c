//! Bad configuration of the node-controller binary: the shared cases of every
//! controller plus its own flags, each exiting 2 with the flag or variable, its value and what is
//! accepted.

use test_support::bad_config::{ConfigCase, assert_all};

const BIN: &str = env!("CARGO_BIN_EXE_node-controller");

const CASES: &[ConfigCase] = &[
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
