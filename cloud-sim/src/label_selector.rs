//! Labels and the grammar of the API's `label_selector` filter:
//! `k=v`, `k==v`, `k!=v`, `k`, `!k`, `k in (a,b)`, `k notin (a,b)`, comma = AND.

use std::collections::BTreeMap;

pub type Labels = BTreeMap<String, String>;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Requirement {
    Eq(String, String),
    NotEq(String, String),
    Exists(String),
    NotExists(String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
}

/// A parsed selector; an empty selector matches everything.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selector(Vec<Requirement>);

impl Selector {
    pub fn parse(input: &str) -> Result<Selector, String> {
        let mut reqs = Vec::new();
        if input.trim().is_empty() {
            return Ok(Selector(reqs));
        }
        for term in split_terms(input)? {
            let term = term.trim();
            if term.is_empty() {
                return Err(format!("empty term in selector '{input}'"));
            }
            reqs.push(parse_term(term)?);
        }
        Ok(Selector(reqs))
    }

    pub fn matches(&self, labels: &Labels) -> bool {
        self.0.iter().all(|r| match r {
            Requirement::Eq(k, v) => labels.get(k) == Some(v),
            // Like Kubernetes: a missing key satisfies `!=` and `notin`.
            Requirement::NotEq(k, v) => labels.get(k) != Some(v),
            Requirement::Exists(k) => labels.contains_key(k),
            Requirement::NotExists(k) => !labels.contains_key(k),
            Requirement::In(k, vs) => labels.get(k).is_some_and(|v| vs.contains(v)),
            Requirement::NotIn(k, vs) => labels.get(k).is_none_or(|v| !vs.contains(v)),
        })
    }
}

/// Splits on commas that are not inside `( … )`.
fn split_terms(input: &str) -> Result<Vec<&str>, String> {
    let mut terms = Vec::new();
    let (mut depth, mut start) = (0i32, 0usize);
    for (i, c) in input.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                terms.push(&input[start..i]);
                start = i + 1;
            }
            _ => {}
        }
        if !(0..=1).contains(&depth) {
            return Err(format!("unbalanced parentheses in '{input}'"));
        }
    }
    if depth != 0 {
        return Err(format!("unbalanced parentheses in '{input}'"));
    }
    terms.push(&input[start..]);
    Ok(terms)
}

fn parse_term(term: &str) -> Result<Requirement, String> {
    if let Some(key) = term.strip_prefix('!') {
        return Ok(Requirement::NotExists(checked_key(key.trim())?));
    }
    if let Some(open) = term.find('(') {
        let inner = term[open + 1..]
            .strip_suffix(')')
            .ok_or_else(|| format!("missing ')' in '{term}'"))?;
        let mut head = term[..open].split_whitespace();
        let (key, op) = match (head.next(), head.next(), head.next()) {
            (Some(k), Some(op), None) => (checked_key(k)?, op),
            _ => {
                return Err(format!(
                    "expected 'key in (…)' or 'key notin (…)' in '{term}'"
                ));
            }
        };
        let values = inner
            .split(',')
            .map(|v| checked_value(v.trim()))
            .collect::<Result<Vec<_>, _>>()?;
        return match op {
            "in" => Ok(Requirement::In(key, values)),
            "notin" => Ok(Requirement::NotIn(key, values)),
            _ => Err(format!("unknown operator '{op}' in '{term}'")),
        };
    }
    for (op, ctor) in [
        (
            "!=",
            Requirement::NotEq as fn(String, String) -> Requirement,
        ),
        ("==", Requirement::Eq),
        ("=", Requirement::Eq),
    ] {
        if let Some((k, v)) = term.split_once(op) {
            return Ok(ctor(checked_key(k.trim())?, checked_value(v.trim())?));
        }
    }
    Ok(Requirement::Exists(checked_key(term)?))
}

fn checked_key(key: &str) -> Result<String, String> {
    validate_key(key).map(|()| key.to_owned())
}

fn checked_value(value: &str) -> Result<String, String> {
    validate_value(value).map(|()| value.to_owned())
}

fn valid_name_part(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || b"-_.".contains(c))
}

/// A label key: optional DNS-subdomain prefix and `/`, then a name of at most 63 characters.
pub fn validate_key(key: &str) -> Result<(), String> {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    if let Some(p) = prefix {
        let ok = !p.is_empty()
            && p.len() <= 253
            && p.split('.').all(|part| {
                let b = part.as_bytes();
                !b.is_empty()
                    && b[0].is_ascii_alphanumeric()
                    && b[b.len() - 1].is_ascii_alphanumeric()
                    && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'-')
            });
        if !ok {
            return Err(format!("invalid label key prefix in '{key}'"));
        }
    }
    if !valid_name_part(name) {
        return Err(format!("invalid label key '{key}'"));
    }
    Ok(())
}

pub fn validate_value(value: &str) -> Result<(), String> {
    if value.is_empty() || valid_name_part(value) {
        Ok(())
    } else {
        Err(format!("invalid label value '{value}'"))
    }
}

/// Labels a user may set: valid keys and values, nothing under the reserved `hetzner.cloud/` prefix.
pub fn validate_labels(labels: &Labels) -> Result<(), String> {
    for (k, v) in labels {
        validate_key(k)?;
        validate_value(v)?;
        if k.starts_with("hetzner.cloud/") {
            return Err(format!(
                "label key '{k}' uses the reserved prefix hetzner.cloud/"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn full_grammar() {
        let l = labels(&[
            ("env", "prod"),
            ("tier", "web"),
            ("hcloud-ccm/service-uid", "abc"),
        ]);
        let yes = [
            "env=prod",
            "env==prod",
            "env!=dev",
            "missing!=x",
            "env",
            "!missing",
            "tier in (web, db)",
            "tier notin (db,cache)",
            "missing notin (a)",
            "env=prod,tier=web",
            "hcloud-ccm/service-uid=abc",
            "",
        ];
        for s in yes {
            assert!(
                Selector::parse(s)
                    .unwrap_or_else(|e| panic!("{s}: {e}"))
                    .matches(&l),
                "{s}"
            );
        }
        let no = [
            "env=dev",
            "env!=prod",
            "missing",
            "!env",
            "tier in (db)",
            "tier notin (web)",
            "env=prod,tier=db",
        ];
        for s in no {
            assert!(!Selector::parse(s).unwrap().matches(&l), "{s}");
        }
    }

    #[test]
    fn rejects_garbage() {
        for s in [
            "env in (a",
            "a b c",
            "=x",
            "env=pr od",
            "k in (a))",
            ",",
            "env==",
            "env in [a]",
        ] {
            let parsed = Selector::parse(s);
            // `env==` selects an empty value, which is legal; everything else must fail.
            if s == "env==" {
                assert!(parsed.is_ok());
            } else {
                assert!(parsed.is_err(), "{s} parsed as {parsed:?}");
            }
        }
    }

    #[test]
    fn label_rules() {
        assert!(validate_labels(&labels(&[("example.com/a-b", "x.y")])).is_ok());
        assert!(validate_labels(&labels(&[("hetzner.cloud/x", "y")])).is_err());
        assert!(validate_labels(&labels(&[("-bad", "y")])).is_err());
        assert!(validate_labels(&labels(&[("ok", &"v".repeat(64))])).is_err());
    }
}
