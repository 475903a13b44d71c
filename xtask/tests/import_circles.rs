//! No import circles in the product crates (and testenv, the tests' real parts): within each crate, no file reaches itself through the
//! `crate::`, `super::` and `self::` paths of its code (tests modules left out). A path counts as
//! an edge to the file that defines the module it names; a path through a module's re-exports
//! (`crate::Secret`, `super::Problems`) counts as an edge to the `lib.rs`/`mod.rs` that
//! re-exports it, the strictest reading. So a shared piece must sit below the code that uses it,
//! and each `mod.rs`/`lib.rs` stays a table of contents.
//!
//! Std only: the sources are read as text, which is enough for the `use` trees this workspace
//! writes (rustfmt's).

mod sources;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The crates held to it.
const CRATES: &[&str] = &[
    "cloud-client",
    "cloud-sim",
    "controller-kit",
    "node-controller",
    "lifecycle-controller",
    "service-controller",
    "route-controller",
    "testenv",
];

type Module = Vec<String>;

/// Every `.rs` file under `src`, by module path (`hcloud/mod.rs` and `hcloud.rs` → `["hcloud"]`).
fn modules(src: &Path) -> BTreeMap<Module, PathBuf> {
    sources::rust_files(src)
        .into_iter()
        .map(|f| {
            let rel = f.strip_prefix(src).unwrap().with_extension("");
            let mut module: Module = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            if matches!(
                module.last().map(String::as_str),
                Some("mod" | "lib" | "main")
            ) {
                module.pop();
            }
            (module, f)
        })
        .collect()
}

/// The code without comments and without its `#[cfg(test)]` tail.
fn code(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    let text = text.split("#[cfg(test)]").next().unwrap_or_default();
    text.lines()
        .map(|l| l.split("//").next().unwrap_or_default())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The paths of one `use` tree: `a::{b, c::{d, e}}` → `a::b`, `a::c::d`, `a::c::e`.
fn expand(prefix: &str, tree: &str) -> Vec<String> {
    let tree = tree.trim();
    let Some(open) = tree.find('{') else {
        let path = tree.split(" as ").next().unwrap_or(tree).trim();
        return vec![format!("{prefix}{path}")];
    };
    let head = format!("{prefix}{}", &tree[..open]);
    let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
    let (mut parts, mut depth, mut start) = (Vec::new(), 0, 0);
    for (i, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&inner[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&inner[start..]);
    parts
        .into_iter()
        .filter(|p| !p.trim().is_empty())
        .flat_map(|p| expand(&head, p))
        .collect()
}

/// Every module path the code names: its `use` trees, and inline `crate::`/`super::`/`self::`
/// paths.
fn paths(code: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("use ") {
        // A `use` statement starts a line (after `pub`/`pub(crate)` at most), never a word in a
        // string ("an id not in use yet").
        let line_start = rest[..at].rfind('\n').map_or(0, |i| i + 1);
        let before = rest[line_start..at].trim();
        let boundary = (before.is_empty() || before.starts_with("pub"))
            && (at == 0 || !rest.as_bytes()[at - 1].is_ascii_alphanumeric());
        let after = &rest[at + 4..];
        let end = after.find(';').unwrap_or(after.len());
        if boundary {
            out.extend(expand("", &after[..end]));
        }
        rest = &after[end.min(after.len())..];
    }
    for root in ["crate::", "super::", "self::"] {
        let mut rest = code;
        while let Some(at) = rest.find(root) {
            let tail = &rest[at..];
            let end = tail
                .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                .unwrap_or(tail.len());
            out.push(tail[..end].to_string());
            rest = &tail[end..];
        }
    }
    out.into_iter()
        .map(|p| {
            p.split("::")
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty() && s != "*")
                .collect()
        })
        .collect()
}

/// File → files it imports, within one crate.
fn graph(src: &Path) -> BTreeMap<PathBuf, BTreeSet<PathBuf>> {
    let mods = modules(src);
    let mut edges = BTreeMap::new();
    for (me, file) in &mods {
        let mut targets = BTreeSet::new();
        for path in paths(&code(file)) {
            let Some(first) = path.first() else { continue };
            let mut full: Module = match first.as_str() {
                "crate" => path[1..].to_vec(),
                "super" | "self" => {
                    let mut base = me.clone();
                    let mut rest = &path[..];
                    while let Some(seg) = rest.first() {
                        match seg.as_str() {
                            "super" => {
                                base.pop();
                            }
                            "self" => {}
                            _ => break,
                        }
                        rest = &rest[1..];
                    }
                    // `me` names the file's own module, `a/mod.rs` and `a/b.rs` alike, so
                    // `super` is one step up from it in both.
                    base.extend_from_slice(rest);
                    base
                }
                // A child module named relative to this one (`pub use config::X`).
                child if mods.contains_key(&[me.clone(), vec![child.to_string()]].concat()) => {
                    [me.clone(), path.clone()].concat()
                }
                _ => continue,
            };
            while !full.is_empty() && !mods.contains_key(&full) {
                full.pop();
            }
            if let Some(target) = mods.get(&full)
                && target != file
            {
                targets.insert(target.clone());
            }
        }
        edges.insert(file.clone(), targets);
    }
    edges
}

/// The strongly connected components of more than one file (Tarjan).
fn circles(edges: &BTreeMap<PathBuf, BTreeSet<PathBuf>>) -> Vec<Vec<PathBuf>> {
    struct State<'a> {
        edges: &'a BTreeMap<PathBuf, BTreeSet<PathBuf>>,
        index: BTreeMap<&'a PathBuf, usize>,
        low: BTreeMap<&'a PathBuf, usize>,
        stack: Vec<&'a PathBuf>,
        on_stack: BTreeSet<&'a PathBuf>,
        found: Vec<Vec<PathBuf>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a PathBuf) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on_stack.insert(v);
        for w in &s.edges[v] {
            if !s.index.contains_key(w) {
                visit(s, w);
                let low = s.low[v].min(s.low[w]);
                s.low.insert(v, low);
            } else if s.on_stack.contains(w) {
                let low = s.low[v].min(s.index[w]);
                s.low.insert(v, low);
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                component.push(w.clone());
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                s.found.push(component);
            }
        }
    }
    let mut s = State {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for v in edges.keys() {
        if !s.index.contains_key(v) {
            visit(&mut s, v);
        }
    }
    s.found
}

#[test]
fn the_product_crates_have_no_import_circle() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let mut report = Vec::new();
    for name in CRATES {
        let src = root.join(name).join("src");
        let files = modules(&src).len();
        for circle in circles(&graph(&src)) {
            let names: Vec<String> = circle
                .iter()
                .map(|f| f.strip_prefix(&src).unwrap().display().to_string())
                .collect();
            report.push(format!("{name}: {}", names.join(" → ")));
        }
        assert!(
            files > 3,
            "{name}: only {files} files read from {}",
            src.display()
        );
    }
    assert!(report.is_empty(), "import circles:\n{}", report.join("\n"));
}

#[test]
fn the_checker_finds_a_circle_through_a_facade() {
    let dir = std::env::temp_dir().join(format!("import-circles-{}", std::process::id()));
    let src = dir.join("src");
    std::fs::create_dir_all(src.join("a")).unwrap();
    std::fs::write(src.join("lib.rs"), "mod a;\nmod b;\npub use b::Thing;\n").unwrap();
    std::fs::write(src.join("a/mod.rs"), "pub mod inner;\n").unwrap();
    // a::inner reaches b through the crate root's re-export, and b reaches a::inner back.
    std::fs::write(src.join("a/inner.rs"), "use crate::Thing;\n").unwrap();
    std::fs::write(
        src.join("b.rs"),
        "use crate::a::inner;\npub struct Thing;\n#[cfg(test)]\nmod tests { use super::*; }\n",
    )
    .unwrap();
    let found = circles(&graph(&src));
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(found.len(), 1, "{found:?}");
    let names: Vec<String> = found[0]
        .iter()
        .map(|f| f.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["inner.rs", "b.rs", "lib.rs"]);
}
