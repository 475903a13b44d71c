//! docs/architecture.md's "How to add a provider" lists every file a provider touches, and this
//! builds that list from the code: the product files (the six product crates' `src/`, the chart,
//! the Dockerfile, skaffold.yaml) that name the Hetzner provider (`hcloud`, `Hetzner`) outside its
//! own modules and outside tests and comments. A file that starts naming it, or a listed file that
//! stops, fails here. Only std: it runs in `cargo test --workspace`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Where product code and packaging live (tests, tools and the simulator are not the product).
const PRODUCT: &[&str] = &[
    "cloud-client/src",
    "controller-kit/src",
    "node-controller/src",
    "lifecycle-controller/src",
    "service-controller/src",
    "route-controller/src",
    "charts/cloud-controllers",
    "Dockerfile",
    "skaffold.yaml",
];

/// The Hetzner provider's own modules: what the page calls `cloud-client/src/acme/`.
const PROVIDER_OWN: &[&str] = &["cloud-client/src/hcloud/", "cloud-client/src/robot/"];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn files(path: &Path, out: &mut Vec<PathBuf>) {
    if path.is_dir() {
        for entry in std::fs::read_dir(path).unwrap() {
            files(&entry.unwrap().path(), out);
        }
    } else {
        out.push(path.to_owned());
    }
}

/// The part of a file that is product code: for Rust, without comments, `tests.rs` files and the
/// `#[cfg(test)]` module every file ends with.
fn product_text(path: &Path, text: &str) -> String {
    if path.extension().is_none_or(|e| e != "rs") {
        return text.to_owned();
    }
    if path.file_name().is_some_and(|n| n == "tests.rs") {
        return String::new();
    }
    text.lines()
        .take_while(|l| l.trim() != "#[cfg(test)]")
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The files outside the provider's own modules that name it, relative to the root.
fn touched() -> BTreeSet<String> {
    let root = root();
    let mut all = Vec::new();
    for p in PRODUCT {
        files(&root.join(p), &mut all);
    }
    all.into_iter()
        .filter_map(|path| {
            let rel = path
                .strip_prefix(&root)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            if PROVIDER_OWN.iter().any(|own| rel.starts_with(own)) {
                return None;
            }
            let text = std::fs::read_to_string(&path).ok()?.to_lowercase();
            let code = product_text(&path, &text);
            (code.contains("hcloud") || code.contains("hetzner")).then_some(rel)
        })
        .collect()
}

/// The paths the page's numbered list names in bold: `N. **`path`**`.
fn listed() -> Vec<String> {
    let page = std::fs::read_to_string(root().join("docs/architecture.md")).unwrap();
    page.lines()
        .skip_while(|l| l.trim() != "## How to add a provider")
        .skip(1)
        .take_while(|l| !l.starts_with("## "))
        .filter_map(|l| {
            let (number, rest) = l.split_once(". **`")?;
            number.trim().parse::<u32>().ok()?;
            Some(rest.split_once("`**")?.0.to_owned())
        })
        .collect()
}

#[test]
fn the_page_lists_every_file_a_provider_touches() {
    let touched = touched();
    let listed = listed();
    assert!(
        listed.iter().any(|l| l.contains("/acme/")),
        "the page's list lost the provider's own module: {listed:?}"
    );
    let covers = |l: &String, file: &String| {
        if l.ends_with('/') {
            file.starts_with(l.as_str())
        } else {
            file == l
        }
    };
    let unlisted: Vec<&String> = touched
        .iter()
        .filter(|f| !listed.iter().any(|l| covers(l, f)))
        .collect();
    assert!(
        unlisted.is_empty(),
        "these files name the Hetzner provider but docs/architecture.md's \"How to add a \
         provider\" does not list them: {unlisted:?} (list them, or move the Hetzner fact below \
         the seam)"
    );
    let stale: Vec<&String> = listed
        .iter()
        .filter(|l| !l.contains("/acme/") && !touched.iter().any(|f| covers(l, f)))
        .collect();
    assert!(
        stale.is_empty(),
        "docs/architecture.md lists {stale:?} for a provider, but nothing there names Hetzner: \
         {touched:?}"
    );
}
