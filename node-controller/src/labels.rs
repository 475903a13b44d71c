//! Labels written at initialization and beta→stable reconciliation on initialized nodes.

use std::collections::BTreeMap;

use cloud_client::InstanceMetadata;

use crate::keys::*;

/// True when `key`'s prefix is in a Kubernetes-reserved domain: it contains `kubernetes.io/` or
/// `k8s.io/` at the start or right after a dot.
pub fn is_reserved(key: &str) -> bool {
    ["kubernetes.io/", "k8s.io/"].iter().any(|needle| {
        key.match_indices(needle)
            .any(|(i, _)| i == 0 || key.as_bytes()[i - 1] == b'.')
    })
}

/// Labels to set at initialization, and the additional labels dropped because they are reserved.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct InitLabels {
    /// Labels to add or overwrite.
    pub set: BTreeMap<String, String>,
    /// Additional labels discarded (reserved domain).
    pub dropped: Vec<String>,
    /// Additional labels kept at the node's differing value (`key`, node value, cloud value).
    pub conflicts: Vec<(String, String, String)>,
}

/// Computes the init labels against the node's current labels.
pub fn init_labels(meta: &InstanceMetadata, existing: &BTreeMap<String, String>) -> InitLabels {
    let mut out = InitLabels::default();
    let mut put = |k: &str, v: &str| {
        if existing.get(k).map(String::as_str) != Some(v) {
            out.set.insert(k.to_string(), v.to_string());
        }
    };
    if !meta.instance_type.is_empty() {
        put(LABEL_INSTANCE_TYPE, &meta.instance_type);
        put(LABEL_INSTANCE_TYPE_BETA, &meta.instance_type);
    }
    if let Some(z) = meta.zone.as_deref().filter(|z| !z.is_empty()) {
        put(LABEL_ZONE, z);
        put(LABEL_ZONE_BETA, z);
    }
    if let Some(r) = meta.region.as_deref().filter(|r| !r.is_empty()) {
        put(LABEL_REGION, r);
        put(LABEL_REGION_BETA, r);
    }
    for (k, v) in &meta.additional_labels {
        if is_reserved(k) {
            out.dropped.push(k.clone());
            continue;
        }
        match existing.get(k) {
            Some(current) if current != v => {
                out.conflicts.push((k.clone(), current.clone(), v.clone()))
            }
            Some(_) => {}
            None => {
                out.set.insert(k.clone(), v.clone());
            }
        }
    }
    out
}

/// For each (beta, stable) pair with the beta key present, the stable key must equal it.
pub fn stable_from_beta(existing: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    BETA_TO_STABLE
        .iter()
        .filter_map(|(beta, stable)| {
            let b = existing.get(*beta)?;
            (existing.get(*stable) != Some(b)).then(|| (stable.to_string(), b.clone()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserved_domains() {
        for k in [
            "kubernetes.io/x",
            "node.kubernetes.io/x",
            "k8s.io/x",
            "foo.k8s.io/x",
        ] {
            assert!(is_reserved(k), "{k}");
        }
        for k in [
            "instance.hetzner.cloud/provided-by",
            "mykubernetes.io/x",
            "example.com/k8s.io",
        ] {
            assert!(!is_reserved(k), "{k}");
        }
    }

    #[test]
    fn init_labels_both_keys_and_additional_rules() {
        let meta = InstanceMetadata {
            provider_id: "memory://1".into(),
            instance_type: "cx22".into(),
            zone: Some("fsn1-dc14".into()),
            region: Some("fsn1".into()),
            addresses: vec![],
            stated_by_node: vec![],
            warnings: vec![],
            additional_labels: [
                ("instance.hetzner.cloud/provided-by", "cloud"),
                ("node.kubernetes.io/evil", "x"),
                ("keep.example/me", "cloud"),
            ]
            .into_iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect(),
        };
        let existing: BTreeMap<String, String> =
            [("keep.example/me".to_string(), "user".to_string())].into();
        let l = init_labels(&meta, &existing);
        assert_eq!(l.set.get(LABEL_INSTANCE_TYPE_BETA).unwrap(), "cx22");
        assert_eq!(l.set.get(LABEL_ZONE).unwrap(), "fsn1-dc14");
        assert_eq!(l.set.get(LABEL_REGION_BETA).unwrap(), "fsn1");
        assert_eq!(
            l.set.get("instance.hetzner.cloud/provided-by").unwrap(),
            "cloud"
        );
        assert!(!l.set.contains_key("node.kubernetes.io/evil"));
        assert!(!l.set.contains_key("keep.example/me"));
        assert_eq!(l.dropped, vec!["node.kubernetes.io/evil".to_string()]);
        assert_eq!(l.conflicts.len(), 1);
    }

    #[test]
    fn beta_is_source_of_truth() {
        let existing: BTreeMap<String, String> = [
            (LABEL_ZONE_BETA, "a"),
            (LABEL_ZONE, "b"),
            (LABEL_REGION_BETA, "r"),
            (LABEL_INSTANCE_TYPE, "t"),
        ]
        .into_iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
        let want = stable_from_beta(&existing);
        assert_eq!(want.get(LABEL_ZONE).unwrap(), "a");
        assert_eq!(want.get(LABEL_REGION).unwrap(), "r");
        assert_eq!(want.len(), 2);
    }
}
