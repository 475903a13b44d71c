//! Our own keys (labels, annotations, condition types on Kubernetes and cloud objects) have one
//! prefix, `cloud-controllers.io/` (`cloud_client::KEY_PREFIX`). The keys named before it was
//! chosen keep their names and are listed here; a new key with another prefix fails.

mod sources;

use std::path::Path;

const PRODUCT_CRATES: &[&str] = &[
    "cloud-client",
    "controller-kit",
    "node-controller",
    "lifecycle-controller",
    "service-controller",
    "route-controller",
];

/// Keys older than the prefix, still read (and, but for the adopt label, written).
const BEFORE_THE_PREFIX: &[&str] = &[
    "cloud-controllers/adopt",
    "cloud-controllers/shared-targets",
    "cloud-controllers.github.io/LoadBalancerReady",
    // Not a key: the User-Agent, `cloud-controllers/<version>`.
    "cloud-controllers/",
];
/// The shared load balancers' member labels, `shared.cloud-controllers/<uid>`, also older.
const MEMBER_LABELS: &str = "shared.cloud-controllers/";

/// The key a string literal starts with, if it is one of ours: `"cloud-controllers…/…`.
fn own_keys(text: &str) -> Vec<&str> {
    text.split('"')
        .skip(1)
        .filter(|lit| {
            lit.starts_with("cloud-controllers") || lit.starts_with("shared.cloud-controllers")
        })
        .map(|lit| {
            let end = lit
                .find(|c: char| !(c.is_ascii_alphanumeric() || "_./-".contains(c)))
                .unwrap_or(lit.len());
            &lit[..end]
        })
        .filter(|key| key.contains('/'))
        .collect()
}

#[test]
fn new_keys_of_ours_have_the_one_prefix() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut found = 0;
    let mut other = Vec::new();
    for krate in PRODUCT_CRATES {
        for path in sources::rust_files(&root.join(krate).join("src")) {
            let text = std::fs::read_to_string(&path).unwrap();
            for key in own_keys(&text) {
                found += 1;
                if !key.starts_with("cloud-controllers.io/")
                    && !key.starts_with(MEMBER_LABELS)
                    && !BEFORE_THE_PREFIX.contains(&key)
                {
                    other.push(format!("{}: {key}", path.display()));
                }
            }
        }
    }
    assert!(found >= 5, "found {found} keys of ours");
    assert!(
        other.is_empty(),
        "keys of ours without the prefix cloud-controllers.io/: {other:#?}"
    );
}

#[test]
fn the_scan_finds_a_key_with_another_prefix() {
    let text = r#"const A: &str = "cloud-controllers.io/node-ip"; let b = "cloud-controllers/new-key"; // "x""#;
    assert_eq!(
        own_keys(text),
        ["cloud-controllers.io/node-ip", "cloud-controllers/new-key"]
    );
}
