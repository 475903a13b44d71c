//! docs/annotations.md's tables and the admission policy's checks are the ones the code renders
//! from its annotation declarations: a key added, renamed or re-described in code without
//! `cargo xtask docs` fails here.

use cloud_client::hcloud::load_balancer::annotations::reference::{policy_checks, render_into};

#[test]
fn the_admission_policys_checks_are_what_the_code_renders() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../charts/cloud-controllers/files/annotations.json");
    let file = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        file == policy_checks(),
        "{} differs from the annotation declarations: run `cargo xtask docs` to write it",
        path.display()
    );
}

#[test]
fn the_annotation_page_is_what_the_code_renders() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/annotations.md");
    let page = std::fs::read_to_string(&path).expect("docs/annotations.md");
    let rendered = render_into(&page).unwrap_or_else(|e| panic!("docs/annotations.md: {e}"));
    if rendered != page {
        let first = page
            .lines()
            .zip(rendered.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(page.lines().count().min(rendered.lines().count()));
        panic!(
            "docs/annotations.md differs from the annotation reference in code from line {}:\n  \
             page: {:?}\n  code: {:?}\nrun `cargo xtask docs` to write it",
            first + 1,
            page.lines().nth(first).unwrap_or(""),
            rendered.lines().nth(first).unwrap_or("")
        );
    }
}
