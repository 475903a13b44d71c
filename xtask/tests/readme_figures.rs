//! Every figure in the README's comparison table is one that docs/benchmarks.md reports in its
//! summary table, so the entrance never quotes a figure that was measured over or never measured
//! (it once said 81.8 MiB where the latest measurement was 70.4). Only std: it runs in
//! `cargo test --workspace`, so in `cargo xtask test`.

use std::collections::BTreeSet;
use std::path::Path;

/// The lines of the first Markdown table after the line `heading`.
fn first_table_after(text: &str, heading: &str) -> Vec<String> {
    text.lines()
        .skip_while(|l| l.trim() != heading)
        .skip(1)
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .map(str::to_owned)
        .collect()
}

/// The numbers in `line` (`12.78`, `1000`, `66.3`), as written.
fn figures(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    for c in line.chars().chain(std::iter::once(' ')) {
        if c.is_ascii_digit() || (c == '.' && !cur.is_empty()) {
            cur.push(c);
        } else if !cur.is_empty() {
            out.push(cur.trim_end_matches('.').to_owned());
            cur.clear();
        }
    }
    out
}

#[test]
fn the_readme_quotes_only_figures_the_benchmarks_report() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives in the workspace root");
    let read = |p: &str| std::fs::read_to_string(root.join(p)).expect(p);
    let readme = first_table_after(
        &read("README.md"),
        "## Where we do better than upstream and HCCM",
    );
    let summary = first_table_after(&read("docs/benchmarks.md"), "# Benchmarks");
    assert!(readme.len() > 3, "no comparison table in the README");
    assert!(summary.len() > 10, "no summary table in docs/benchmarks.md");
    let reported: BTreeSet<String> = summary.iter().flat_map(|l| figures(l)).collect();
    let unreported: Vec<(String, String)> = readme
        .iter()
        .skip(2)
        .flat_map(|l| {
            figures(l)
                .into_iter()
                .filter(|f| !reported.contains(f))
                .map(|f| (f, l.clone()))
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(
        unreported.is_empty(),
        "figures in the README's table that docs/benchmarks.md's summary table does not report: \
         {unreported:#?}"
    );
}

#[test]
fn figures_are_read_as_written() {
    assert_eq!(
        figures("| 12.78 s, 40 calls, 23.5 MiB. |"),
        ["12.78", "40", "23.5"]
    );
}
