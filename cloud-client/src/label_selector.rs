//! The Kubernetes label-selector grammar (the `node-selector` annotation; the lifecycle
//! controller's `--exclude-nodes-selector`), which the Hetzner API's `label_selector` shares.
//! cloud-sim parses `label_selector` queries with a parser of its own on purpose: a bug
//! shared by client and simulator would pass every contract test.

use std::collections::BTreeMap;

use crate::error::CloudError;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Req {
    Eq(String, String),
    NotEq(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
    Gt(String, i64),
    Lt(String, i64),
}

/// A parsed selector; all requirements must hold (comma = AND). The empty selector matches everything.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LabelSelector {
    reqs: Vec<Req>,
}

impl LabelSelector {
    /// Parses the Kubernetes selector grammar; `field` names the source in errors.
    pub fn parse(field: &str, s: &str) -> Result<Self, CloudError> {
        let bad = |why: &str| {
            CloudError::invalid_input(
                field,
                s,
                format!(
                    "a label selector (k=v, k==v, k!=v, k, !k, k in (a,b), k notin (a,b), k>n, k<n; comma = and): {why}"
                ),
            )
        };
        let mut reqs = Vec::new();
        for part in split_top_level(s).map_err(&bad)? {
            let p = part.trim();
            if p.is_empty() {
                if s.trim().is_empty() {
                    continue;
                }
                return Err(bad("empty requirement"));
            }
            let req = if let Some(k) = p.strip_prefix('!') {
                Req::NotExists(key(k.trim()).map_err(&bad)?)
            } else if let Some((k, v)) = p.split_once("!=") {
                Req::NotEq(key(k.trim()).map_err(&bad)?, value(v.trim()).map_err(&bad)?)
            } else if let Some((k, v)) = p.split_once("==").or_else(|| p.split_once('=')) {
                Req::Eq(key(k.trim()).map_err(&bad)?, value(v.trim()).map_err(&bad)?)
            } else if let Some((k, v)) = p.split_once('>') {
                Req::Gt(
                    key(k.trim()).map_err(&bad)?,
                    v.trim().parse().map_err(|_| bad("k>n needs an integer"))?,
                )
            } else if let Some((k, v)) = p.split_once('<') {
                Req::Lt(
                    key(k.trim()).map_err(&bad)?,
                    v.trim().parse().map_err(|_| bad("k<n needs an integer"))?,
                )
            } else if let Some((k, set)) = split_set_op(p, " notin ") {
                Req::NotIn(key(k).map_err(&bad)?, set_values(set).map_err(&bad)?)
            } else if let Some((k, set)) = split_set_op(p, " in ") {
                Req::In(key(k).map_err(&bad)?, set_values(set).map_err(&bad)?)
            } else {
                Req::Exists(key(p).map_err(&bad)?)
            };
            reqs.push(req);
        }
        Ok(Self { reqs })
    }

    /// Whether `labels` meet every requirement.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.reqs.iter().all(|r| match r {
            Req::Eq(k, v) => labels.get(k) == Some(v),
            Req::NotEq(k, v) => labels.get(k) != Some(v),
            Req::In(k, vs) => labels.get(k).is_some_and(|x| vs.contains(x)),
            Req::NotIn(k, vs) => labels.get(k).is_none_or(|x| !vs.contains(x)),
            Req::Exists(k) => labels.contains_key(k),
            Req::NotExists(k) => !labels.contains_key(k),
            Req::Gt(k, n) => labels
                .get(k)
                .and_then(|x| x.parse::<i64>().ok())
                .is_some_and(|x| x > *n),
            Req::Lt(k, n) => labels
                .get(k)
                .and_then(|x| x.parse::<i64>().ok())
                .is_some_and(|x| x < *n),
        })
    }

    /// True when there is no requirement (it matches everything).
    pub fn is_empty(&self) -> bool {
        self.reqs.is_empty()
    }
}

fn split_top_level(s: &str) -> Result<Vec<&str>, &'static str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0i32, 0usize);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth < 0 {
                    return Err("unbalanced parentheses");
                }
            }
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err("unbalanced parentheses");
    }
    out.push(&s[start..]);
    Ok(out)
}

fn split_set_op<'a>(p: &'a str, op: &str) -> Option<(&'a str, &'a str)> {
    let i = p.find(op)?;
    Some((p[..i].trim(), p[i + op.len()..].trim()))
}

fn set_values(s: &str) -> Result<Vec<String>, &'static str> {
    let inner = s
        .strip_prefix('(')
        .and_then(|x| x.strip_suffix(')'))
        .ok_or("set must be in parentheses")?;
    inner.split(',').map(|v| value(v.trim())).collect()
}

fn key(k: &str) -> Result<String, &'static str> {
    let (prefix, name) = match k.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, k),
    };
    if let Some(p) = prefix
        && (p.is_empty()
            || p.len() > 253
            || !p
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.'))
    {
        return Err("invalid key prefix");
    }
    if name.is_empty() || name.len() > 63 || !valid_label_chars(name) {
        return Err("invalid key");
    }
    Ok(k.to_string())
}

fn value(v: &str) -> Result<String, &'static str> {
    if v.len() > 63 || !(v.is_empty() || valid_label_chars(v)) {
        return Err("invalid value");
    }
    Ok(v.to_string())
}

fn valid_label_chars(s: &str) -> bool {
    let b = s.as_bytes();
    b.first().is_some_and(u8::is_ascii_alphanumeric)
        && b.last().is_some_and(u8::is_ascii_alphanumeric)
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn parses_and_matches_every_operator() {
        let l = labels(&[
            ("role", "worker"),
            ("zone", "fsn1"),
            ("gen", "3"),
            ("node.kubernetes.io/pool", "a"),
        ]);
        for (sel, want) in [
            ("", true),
            ("role=worker", true),
            ("role==worker", true),
            ("role!=worker", false),
            ("role", true),
            ("!role", false),
            ("!missing", true),
            ("zone in (fsn1, nbg1)", true),
            ("zone notin (fsn1)", false),
            ("missing notin (x)", true),
            ("gen>2", true),
            ("gen<2", false),
            ("role=worker,zone=nbg1", false),
            ("node.kubernetes.io/pool=a, role in (worker)", true),
        ] {
            let s = LabelSelector::parse("node-selector", sel).unwrap();
            assert_eq!(s.matches(&l), want, "{sel}");
        }
    }

    #[test]
    fn rejects_malformed_selectors() {
        for bad in [
            "role=",
            "=x",
            "zone in fsn1",
            "zone in (a",
            "a,,b",
            "bad key=x",
            "k=v v",
            "gen>x",
        ] {
            // `role=` is valid (empty value) in Kubernetes; everything else must fail.
            let r = LabelSelector::parse("node-selector", bad);
            if bad == "role=" {
                assert!(r.is_ok());
            } else {
                let e = r.unwrap_err();
                assert!(e.to_string().contains("node-selector"), "{e}");
            }
        }
    }
}
