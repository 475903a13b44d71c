//! Every relative link in the repository's Markdown points at something that exists.
//!
//! Walks the `*.md` files git knows (tracked, or new and not ignored; without git, every `*.md`
//! outside `target/` and `.git/`), takes each inline link and image `[text](path)` /
//! `[text](path#anchor)` outside code, and checks that the file or directory exists and, for an
//! anchor into Markdown (`#anchor` alone means the same file), that the page has a heading with
//! that GitHub slug. `http(s)://`, `mailto:` and other schemes are not followed. All broken links
//! are reported at once. Only std: it runs in `cargo test --workspace`, so in `cargo xtask test`.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Component, Path, PathBuf};
use std::process::Command;

#[test]
fn every_relative_markdown_link_resolves() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives in the workspace root")
        .to_path_buf();
    let files = markdown_files(&root);
    assert!(
        files.iter().any(|f| f == Path::new("README.md")),
        "README.md not among the Markdown files found under {}: {files:?}",
        root.display()
    );
    let report = check(&root, &files);
    assert!(
        report.broken.is_empty(),
        "{} broken link(s) of {} checked in {} Markdown files:\n{}",
        report.broken.len(),
        report.checked,
        files.len(),
        report.broken.join("\n")
    );
    // Visible with `--nocapture`; the count is the check that the walk found the links at all.
    assert!(
        report.checked > 50,
        "only {} links found: is the walk broken?",
        report.checked
    );
    println!(
        "{} relative links in {} Markdown files: all resolve",
        report.checked,
        files.len()
    );
}

/// The checker itself finds what it must, so a pass above means something.
#[test]
fn the_checker_reports_broken_files_and_anchors() {
    let dir = std::env::temp_dir().join(format!("doc-links-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(dir.join("docs")).unwrap();
    fs::write(
        dir.join("README.md"),
        "# Title\n\n## Set-up (two commands)\n\n[ok](docs/a.md#the-a-page) [ok](#set-up-two-commands)\n\
         [missing file](docs/nope.md) [missing anchor](docs/a.md#nope) [web](https://example.com/x.md)\n\
         ```\n[in a fence](nope.md)\n```\n`[in code](nope.md)` ![image](docs/pic.png)\n",
    )
    .unwrap();
    fs::write(
        dir.join("docs/a.md"),
        "# The `a` page!\n\n[up](../README.md#title) [self](#dup-1)\n\n## Dup\n\n## Dup\n",
    )
    .unwrap();
    let files = vec![PathBuf::from("README.md"), PathBuf::from("docs/a.md")];
    let report = check(&dir, &files);
    let _ = fs::remove_dir_all(&dir);
    assert_eq!(report.checked, 7, "{report:?}");
    assert_eq!(report.broken.len(), 3, "{report:?}");
    assert!(
        report.broken[0].contains("README.md:6: docs/nope.md: no such file"),
        "{report:?}"
    );
    assert!(
        report.broken[1].contains("README.md:6: docs/a.md#nope: no heading"),
        "{report:?}"
    );
    assert!(
        report.broken[2].contains("README.md:10: docs/pic.png: no such file"),
        "{report:?}"
    );
}

#[test]
fn slugs_are_githubs() {
    assert_eq!(
        slug("Set-up (two commands on a fresh machine)"),
        "set-up-two-commands-on-a-fresh-machine"
    );
    assert_eq!(
        slug("Control endpoints (`/_sim`, no auth)"),
        "control-endpoints-_sim-no-auth"
    );
    assert_eq!(
        slug("3. Before switching: run ours in shadow mode"),
        "3-before-switching-run-ours-in-shadow-mode"
    );
    assert_eq!(
        slug("Upstream behaviour — and more"),
        "upstream-behaviour--and-more"
    );
    assert_eq!(slug("[Link](x.md) and *emphasis*"), "link-and-emphasis");
}

#[derive(Debug, Default)]
struct Report {
    checked: usize,
    broken: Vec<String>,
}

fn check(root: &Path, files: &[PathBuf]) -> Report {
    let mut anchors: BTreeMap<PathBuf, BTreeSet<String>> = BTreeMap::new();
    let mut report = Report::default();
    for file in files {
        let text = fs::read_to_string(root.join(file)).unwrap_or_default();
        for (line_no, target) in links(&text) {
            if target.is_empty() || has_scheme(&target) {
                continue;
            }
            report.checked += 1;
            let (path, anchor) = match target.split_once('#') {
                Some((p, a)) => (p, Some(a)),
                None => (target.as_str(), None),
            };
            let resolved = if path.is_empty() {
                file.clone()
            } else if let Some(from_root) = path.strip_prefix('/') {
                normalize(Path::new(from_root))
            } else {
                normalize(&file.parent().unwrap_or(Path::new("")).join(path))
            };
            let at = format!("{}:{line_no}: {target}", file.display());
            if !root.join(&resolved).exists() {
                report
                    .broken
                    .push(format!("{at}: no such file {}", resolved.display()));
                continue;
            }
            let Some(anchor) = anchor else { continue };
            if resolved.extension().is_none_or(|e| e != "md") {
                continue;
            }
            let known = anchors.entry(resolved.clone()).or_insert_with(|| {
                headings(&fs::read_to_string(root.join(&resolved)).unwrap_or_default())
            });
            if !known.contains(&anchor.to_lowercase()) {
                report.broken.push(format!(
                    "{at}: no heading with slug {anchor:?} in {}",
                    resolved.display()
                ));
            }
        }
    }
    report
}

/// `*.md` files relative to `root`: git's view when git answers, else a walk.
fn markdown_files(root: &Path) -> Vec<PathBuf> {
    let git = Command::new("git")
        .args([
            "ls-files",
            "-z",
            "--cached",
            "--others",
            "--exclude-standard",
        ])
        .current_dir(root)
        .output();
    let mut files: Vec<PathBuf> = match git {
        Ok(out) if out.status.success() => out
            .stdout
            .split(|b| *b == 0)
            .filter_map(|p| std::str::from_utf8(p).ok())
            .filter(|p| p.ends_with(".md"))
            .map(PathBuf::from)
            .filter(|p| root.join(p).is_file())
            .collect(),
        _ => {
            let mut found = Vec::new();
            walk(root, Path::new(""), &mut found);
            found
        }
    };
    files.sort();
    files.dedup();
    files
}

fn walk(root: &Path, rel: &Path, found: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(root.join(rel)) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let rel = rel.join(&name);
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_dir() {
            if name != "target" && name != ".git" {
                walk(root, &rel, found);
            }
        } else if rel.extension().is_some_and(|e| e == "md") {
            found.push(rel);
        }
    }
}

fn has_scheme(target: &str) -> bool {
    match target.split_once(':') {
        Some((scheme, _)) => {
            !scheme.is_empty()
                && !scheme.contains(['/', '#', '.'])
                && scheme
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "+-".contains(c))
        }
        None => false,
    }
}

/// `a/./b/../c` → `a/c`, without touching the file system.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    out.push("..");
                }
            }
            other => out.push(other),
        }
    }
    out
}

/// Lines outside fenced code blocks, numbered from 1, with `in_fence` tracked.
fn prose_lines(text: &str) -> Vec<(usize, &str)> {
    let mut fence: Option<(char, usize)> = None;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        let marker = trimmed.chars().next().filter(|c| *c == '`' || *c == '~');
        let run = marker.map_or(0, |m| trimmed.chars().take_while(|c| *c == m).count());
        match fence {
            Some((m, n)) => {
                if marker == Some(m) && run >= n && trimmed[run..].trim().is_empty() {
                    fence = None;
                }
            }
            None if run >= 3 => fence = Some((marker.unwrap(), run)),
            None => out.push((i + 1, line)),
        }
    }
    out
}

/// Removes inline code spans (a run of N backticks up to the next run of exactly N).
fn without_code(line: &str) -> String {
    let chars: Vec<char> = line.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < chars.len() {
        if chars[i] != '`' {
            out.push(chars[i]);
            i += 1;
            continue;
        }
        let n = chars[i..].iter().take_while(|c| **c == '`').count();
        let mut j = i + n;
        let mut close = None;
        while j < chars.len() {
            if chars[j] == '`' {
                let m = chars[j..].iter().take_while(|c| **c == '`').count();
                if m == n {
                    close = Some(j + m);
                    break;
                }
                j += m;
            } else {
                j += 1;
            }
        }
        match close {
            Some(end) => {
                out.push(' ');
                i = end;
            }
            None => {
                out.extend(&chars[i..i + n]);
                i += n;
            }
        }
    }
    out
}

/// Targets of inline links and images: `](target)` or `](target "title")`, `<target>` allowed.
fn links(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (line_no, line) in prose_lines(text) {
        let line = without_code(line);
        let mut rest = line.as_str();
        while let Some(at) = rest.find("](") {
            rest = &rest[at + 2..];
            let mut depth = 0;
            let end = rest
                .char_indices()
                .find(|&(_, c)| match c {
                    '(' => {
                        depth += 1;
                        false
                    }
                    ')' if depth == 0 => true,
                    ')' => {
                        depth -= 1;
                        false
                    }
                    _ => false,
                })
                .map_or(rest.len(), |(i, _)| i);
            let inner = rest[..end].trim();
            let target = match inner.strip_prefix('<') {
                Some(t) => t.split('>').next().unwrap_or(""),
                None => inner.split_whitespace().next().unwrap_or(""),
            };
            out.push((line_no, target.to_string()));
            rest = &rest[end..];
        }
    }
    out
}

/// Anchors a page offers: its headings' slugs (repeats get `-1`, `-2`, … as on GitHub) and
/// explicit `<a id="…">` / `<a name="…">`.
fn headings(text: &str) -> BTreeSet<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut out = BTreeSet::new();
    let lines = prose_lines(text);
    for (k, &(line_no, line)) in lines.iter().enumerate() {
        let trimmed = line.trim();
        let title = if let Some(h) = atx(trimmed) {
            Some(h)
        } else {
            // Setext: a text line directly followed by === or ---.
            lines
                .get(k + 1)
                .filter(|(n, _)| *n == line_no + 1)
                .and_then(|(_, next)| {
                    let next = next.trim();
                    let underline = !next.is_empty()
                        && (next.chars().all(|c| c == '=') || next.chars().all(|c| c == '-'));
                    let text_line =
                        !trimmed.is_empty() && !trimmed.starts_with(['|', '-', '*', '>', '#']);
                    (underline && text_line).then_some(trimmed)
                })
        };
        if let Some(title) = title {
            let base = slug(title);
            let n = seen.entry(base.clone()).or_insert(0);
            out.insert(if *n == 0 {
                base.clone()
            } else {
                format!("{base}-{n}")
            });
            *n += 1;
        }
        for key in ["id=\"", "name=\""] {
            let mut rest = line;
            while let Some(at) = rest.find(key) {
                rest = &rest[at + key.len()..];
                if let Some(end) = rest.find('"') {
                    out.insert(rest[..end].to_lowercase());
                }
            }
        }
    }
    out
}

fn atx(line: &str) -> Option<&str> {
    let hashes = line.chars().take_while(|c| *c == '#').count();
    if !(1..=6).contains(&hashes) {
        return None;
    }
    let rest = &line[hashes..];
    if !rest.is_empty() && !rest.starts_with([' ', '\t']) {
        return None;
    }
    let rest = rest.trim();
    let rest = rest.trim_end_matches('#');
    Some(rest.trim_end())
}

/// GitHub's heading slug: link text instead of links, lowercase, only letters, digits, `-` and
/// `_` kept, each space a `-`.
fn slug(title: &str) -> String {
    let mut text = String::new();
    let mut rest = title;
    // [text](url) → text
    while let Some(open) = rest.find('[') {
        let after = &rest[open + 1..];
        match after
            .find("](")
            .and_then(|mid| after[mid..].find(')').map(|close| (mid, mid + close)))
        {
            Some((mid, close)) => {
                text.push_str(&rest[..open]);
                text.push_str(&after[..mid]);
                rest = &after[close + 1..];
            }
            None => {
                text.push_str(&rest[..=open]);
                rest = after;
            }
        }
    }
    text.push_str(rest);
    text.to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}
