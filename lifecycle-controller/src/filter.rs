//! Opt-out for hybrid clusters: nodes matching `--exclude-nodes-selector`, or (when
//! `--provider-id-prefixes` is set) nodes whose providerID has none of the prefixes, are never
//! evaluated, tainted or deleted.

use std::collections::BTreeMap;

/// One requirement of a label selector.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Req {
    Eq(String, String),
    NotEq(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
}

/// A Kubernetes label selector in string form (`a=b,c!=d,e,!f,g in (x,y),h notin (z)`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector(Vec<Req>);

impl LabelSelector {
    /// Parses the string form; an empty string selects nothing here (no exclusion).
    pub fn parse(s: &str) -> Result<Self, String> {
        let mut reqs = Vec::new();
        for term in split_top_level(s) {
            let t = term.trim();
            if t.is_empty() {
                continue;
            }
            reqs.push(parse_term(t).map_err(|e| format!("{t:?}: {e}"))?);
        }
        Ok(Self(reqs))
    }

    /// True when the selector has no requirement.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// True when every requirement holds for `labels` (an empty selector matches nothing).
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        !self.0.is_empty()
            && self.0.iter().all(|r| match r {
                Req::Eq(k, v) => labels.get(k) == Some(v),
                Req::NotEq(k, v) => labels.get(k) != Some(v),
                Req::In(k, vs) => labels.get(k).is_some_and(|v| vs.contains(v)),
                Req::NotIn(k, vs) => labels.get(k).is_none_or(|v| !vs.contains(v)),
                Req::Exists(k) => labels.contains_key(k),
                Req::NotExists(k) => !labels.contains_key(k),
            })
    }
}

fn split_top_level(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

fn valid_key(k: &str) -> bool {
    !k.is_empty()
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'))
}

fn parse_set(rest: &str) -> Result<Vec<String>, String> {
    let inner = rest
        .trim()
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .ok_or("expected a parenthesised value list")?;
    Ok(inner
        .split(',')
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
        .collect())
}

fn parse_term(t: &str) -> Result<Req, String> {
    if let Some(k) = t.strip_prefix('!') {
        let k = k.trim();
        return valid_key(k)
            .then(|| Req::NotExists(k.into()))
            .ok_or("invalid key".into());
    }
    if let Some((k, v)) = t.split_once("!=") {
        return Ok(Req::NotEq(key(k)?, v.trim().into()));
    }
    if let Some((k, v)) = t.split_once("==") {
        return Ok(Req::Eq(key(k)?, v.trim().into()));
    }
    if let Some((k, v)) = t.split_once('=') {
        return Ok(Req::Eq(key(k)?, v.trim().into()));
    }
    if let Some((k, rest)) = t.split_once(" notin ") {
        return Ok(Req::NotIn(key(k)?, parse_set(rest)?));
    }
    if let Some((k, rest)) = t.split_once(" in ") {
        return Ok(Req::In(key(k)?, parse_set(rest)?));
    }
    Ok(Req::Exists(key(t)?))
}

fn key(k: &str) -> Result<String, String> {
    let k = k.trim();
    if valid_key(k) {
        Ok(k.to_string())
    } else {
        Err(format!("invalid label key {k:?}"))
    }
}

/// Which nodes this controller may act on.
#[derive(Debug, Clone, Default)]
pub struct NodeFilter {
    /// Nodes matching this selector are excluded.
    pub exclude: LabelSelector,
    /// When non-empty, only nodes whose providerID starts with one of these are managed.
    pub provider_id_prefixes: Vec<String>,
}

impl NodeFilter {
    /// Why a node is excluded, or `None` when it is managed.
    pub fn excluded(
        &self,
        labels: &BTreeMap<String, String>,
        provider_id: Option<&str>,
    ) -> Option<&'static str> {
        if self.exclude.matches(labels) {
            return Some("matches --exclude-nodes-selector");
        }
        if !self.provider_id_prefixes.is_empty() {
            match provider_id {
                None => return Some("has no providerID and --provider-id-prefixes is set"),
                Some(p)
                    if !self
                        .provider_id_prefixes
                        .iter()
                        .any(|pre| p.starts_with(pre.as_str())) =>
                {
                    return Some("providerID matches none of --provider-id-prefixes");
                }
                _ => {}
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(kv: &[(&str, &str)]) -> BTreeMap<String, String> {
        kv.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    #[test]
    fn selector_forms() {
        let s = LabelSelector::parse("a=b,c!=d,e,!f,g in (x, y),h notin (z)").unwrap();
        assert!(s.matches(&labels(&[("a", "b"), ("e", ""), ("g", "y")])));
        assert!(!s.matches(&labels(&[("a", "b"), ("e", ""), ("g", "q")])));
        assert!(!s.matches(&labels(&[("a", "b"), ("e", ""), ("g", "x"), ("f", "1")])));
        assert!(!s.matches(&labels(&[("a", "b"), ("e", ""), ("g", "x"), ("h", "z")])));
        assert!(!LabelSelector::parse("").unwrap().matches(&labels(&[])));
        assert!(LabelSelector::parse("bad key=1").is_err());
        assert!(LabelSelector::parse("g in x").is_err());
    }

    #[test]
    fn prefixes() {
        let f = NodeFilter {
            exclude: LabelSelector::parse("hybrid.example/on-prem=true").unwrap(),
            provider_id_prefixes: vec!["hcloud://".into()],
        };
        assert!(f.excluded(&labels(&[]), Some("hcloud://1")).is_none());
        assert!(f.excluded(&labels(&[]), Some("hrobot://1")).is_some());
        assert!(f.excluded(&labels(&[]), None).is_some());
        assert!(
            f.excluded(
                &labels(&[("hybrid.example/on-prem", "true")]),
                Some("hcloud://1")
            )
            .is_some()
        );
        let open = NodeFilter::default();
        assert!(open.excluded(&labels(&[]), None).is_none());
    }
}
