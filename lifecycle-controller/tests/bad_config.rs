//! Bad configuration of the lifecycle-controller binary: the shared cases of every
//! controller plus its own flags, each exiting 2 with the flag or variable, its value and what is
//! accepted.

use test_support::bad_config::{ConfigCase, assert_all};

const BIN: &str = env!("CARGO_BIN_EXE_lifecycle-controller");

const CASES: &[ConfigCase] = &[
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
