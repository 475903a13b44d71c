//! Opt-out for hybrid clusters: nodes matching `--exclude-nodes-selector`, or (when
//! `--provider-id-prefixes` is set) nodes whose providerID has none of the prefixes, are never
//! evaluated, tainted or deleted.

use std::collections::BTreeMap;

use cloud_client::label_selector::LabelSelector;

/// Which nodes this controller may act on.
#[derive(Debug, Clone, Default)]
pub struct NodeFilter {
    /// Nodes matching this selector are excluded (`None`: no exclusion).
    pub exclude: Option<LabelSelector>,
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
        if self.exclude.as_ref().is_some_and(|s| s.matches(labels)) {
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

    fn selector(s: &str) -> LabelSelector {
        LabelSelector::parse("--exclude-nodes-selector", s).unwrap()
    }

    #[test]
    fn selector_forms() {
        let f = NodeFilter {
            exclude: Some(selector("a=b,c!=d,e,!f,g in (x, y),h notin (z)")),
            provider_id_prefixes: Vec::new(),
        };
        let excluded = |kv: &[(&str, &str)]| f.excluded(&labels(kv), None).is_some();
        assert!(excluded(&[("a", "b"), ("e", ""), ("g", "y")]));
        assert!(!excluded(&[("a", "b"), ("e", ""), ("g", "q")]));
        assert!(!excluded(&[("a", "b"), ("e", ""), ("g", "x"), ("f", "1")]));
        assert!(!excluded(&[("a", "b"), ("e", ""), ("g", "x"), ("h", "z")]));
        assert!(NodeFilter::default().excluded(&labels(&[]), None).is_none());
        assert!(LabelSelector::parse("f", "bad key=1").is_err());
        assert!(LabelSelector::parse("f", "g in x").is_err());
    }

    #[test]
    fn prefixes() {
        let f = NodeFilter {
            exclude: Some(selector("hybrid.example/on-prem=true")),
            provider_id_prefixes: vec!["memory://".into()],
        };
        assert!(f.excluded(&labels(&[]), Some("memory://1")).is_none());
        assert!(
            f.excluded(&labels(&[]), Some("memory-dedicated://1"))
                .is_some()
        );
        assert!(f.excluded(&labels(&[]), None).is_some());
        assert!(
            f.excluded(
                &labels(&[("hybrid.example/on-prem", "true")]),
                Some("memory://1")
            )
            .is_some()
        );
        let open = NodeFilter::default();
        assert!(open.excluded(&labels(&[]), None).is_none());
    }
}
