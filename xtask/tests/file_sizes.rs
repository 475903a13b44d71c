//! Files a newcomer can read: every product file (what runs in a user's cluster: the four
//! controllers, cloud-client and controller-kit) stays under 600 lines of code before its tests,
//! and the load-balancer coordinator's hub, which only orders the stages, under 300. A file that
//! grows past its limit is split by concern, not given a higher limit.

mod sources;

use std::path::{Path, PathBuf};

const PRODUCT_CRATES: &[&str] = &[
    "cloud-client",
    "controller-kit",
    "node-controller",
    "lifecycle-controller",
    "service-controller",
    "route-controller",
];

const FILE_LIMIT: usize = 600;

/// The hub, and its own limit.
const HUB: (&str, usize) = ("cloud-client/src/hcloud/load_balancer/mod.rs", 300);

/// Lines before the file's test module (all of them in a file of tests only: `tests.rs`).
fn product_lines(text: &str) -> usize {
    text.lines()
        .take_while(|l| !l.starts_with("#[cfg(test)]"))
        .count()
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

#[test]
fn product_files_stay_small() {
    let mut over = Vec::new();
    let files: Vec<_> = PRODUCT_CRATES
        .iter()
        .flat_map(|krate| sources::rust_files(&workspace().join(krate).join("src")))
        .collect();
    assert!(files.len() > 50, "found {} files", files.len());
    for path in files {
        if path.file_name().is_some_and(|n| n == "tests.rs") {
            continue;
        }
        let lines = product_lines(&std::fs::read_to_string(&path).unwrap());
        if lines > FILE_LIMIT {
            over.push(format!("{} ({lines})", path.display()));
        }
    }
    assert!(
        over.is_empty(),
        "over {FILE_LIMIT} lines before their tests, split by concern: {over:?}"
    );
}

#[test]
fn the_load_balancer_hub_only_orders_the_stages() {
    let (hub, limit) = HUB;
    let lines = product_lines(&std::fs::read_to_string(workspace().join(hub)).unwrap());
    assert!(
        lines <= limit,
        "{hub} has {lines} lines; a stage's logic goes in its own file"
    );
}

#[test]
fn product_lines_stop_at_the_test_module() {
    assert_eq!(product_lines("a\nb\n#[cfg(test)]\nmod tests {}\n"), 2);
    assert_eq!(product_lines("a\n"), 1);
}
