//! How a load balancer says which Services it belongs to, in its labels, so that a restart, a
//! second replica or a shadow controller rebuilds ownership from the cloud alone.
//!
//! - A load balancer of one Service carries HCCM's `hcloud-ccm/service-uid=<uid>`, so a load
//!   balancer HCCM made is found, and adopted, by the Service it was made for.
//! - A shared load balancer (annotation `shared`) carries one label per Service on it instead,
//!   `shared.cloud-controllers/<uid>=<its listen ports>`, plus the fingerprint of the node
//!   selection every one of them must share, `cloud-controllers/shared-targets=<hex>`.

use std::collections::{BTreeMap, BTreeSet};

/// Label on a load balancer naming the Service UID it belongs to (HCCM's ownership label).
pub const SERVICE_UID_LABEL: &str = "hcloud-ccm/service-uid";

/// Prefix of a shared load balancer's member labels: `shared.cloud-controllers/<uid>`.
pub const MEMBER_LABEL_PREFIX: &str = "shared.cloud-controllers/";

/// A shared load balancer's target selection (node selector and private IPs), as a fingerprint.
pub const SHARED_TARGETS_LABEL: &str = "cloud-controllers/shared-targets";

/// Label values hold at most 63 characters.
const MAX_LABEL_VALUE: usize = 63;

/// `hcloud-ccm/service-uid=<uid>`, the `label_selector` query that finds a Service's load balancer.
pub fn service_uid_selector(uid: &str) -> String {
    format!("{SERVICE_UID_LABEL}={uid}")
}

/// `shared.cloud-controllers/<uid>`.
pub fn member_label(uid: &str) -> String {
    format!("{MEMBER_LABEL_PREFIX}{uid}")
}

/// A member label's value: the listen ports, ascending, joined by `.` (`80.443`). `None` when they
/// do not fit in a label value (about ten ports).
pub fn ports_value(ports: &BTreeSet<u16>) -> Option<String> {
    let v = ports
        .iter()
        .map(u16::to_string)
        .collect::<Vec<_>>()
        .join(".");
    (v.len() <= MAX_LABEL_VALUE).then_some(v)
}

fn parse_ports(v: &str) -> BTreeSet<u16> {
    v.split('.').filter_map(|p| p.parse().ok()).collect()
}

/// Who a load balancer belongs to, read from its labels.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Owners {
    /// HCCM's single owner, if labelled so.
    pub single: Option<String>,
    /// Shared: each member Service UID and the listen ports it made.
    pub members: BTreeMap<String, BTreeSet<u16>>,
    /// Shared: the members' target-selection fingerprint.
    pub targets: Option<String>,
}

impl Owners {
    pub fn of(labels: &BTreeMap<String, String>) -> Self {
        Owners {
            single: labels.get(SERVICE_UID_LABEL).cloned(),
            members: labels
                .iter()
                .filter_map(|(k, v)| {
                    let uid = k.strip_prefix(MEMBER_LABEL_PREFIX)?;
                    Some((uid.to_string(), parse_ports(v)))
                })
                .collect(),
            targets: labels.get(SHARED_TARGETS_LABEL).cloned(),
        }
    }

    pub fn is_shared(&self) -> bool {
        !self.members.is_empty()
    }

    /// The member that claims `port`, if any.
    pub fn owner_of(&self, port: u16) -> Option<&str> {
        self.members
            .iter()
            .find(|(_, ports)| ports.contains(&port))
            .map(|(uid, _)| uid.as_str())
    }

    /// Members other than `uid`.
    pub fn others<'a>(&'a self, uid: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.members
            .keys()
            .map(String::as_str)
            .filter(move |m| *m != uid)
    }
}

/// 64-bit FNV-1a, as 16 hex digits: a fingerprint that stays the same across builds and
/// versions (std's hasher promises neither).
pub fn fingerprint(s: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in s.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_the_hccm_ownership_selector() {
        assert_eq!(
            service_uid_selector("1234-abcd"),
            "hcloud-ccm/service-uid=1234-abcd"
        );
    }

    #[test]
    fn members_and_their_ports_round_trip_through_labels() {
        let ports = BTreeSet::from([443, 80, 8080]);
        let v = ports_value(&ports).unwrap();
        assert_eq!(v, "80.443.8080");
        let labels = BTreeMap::from([
            (member_label("u-1"), v),
            (member_label("u-2"), "9000".to_string()),
            (SHARED_TARGETS_LABEL.to_string(), fingerprint("")),
            ("by-hand".to_string(), "x".to_string()),
        ]);
        let o = Owners::of(&labels);
        assert!(o.is_shared());
        assert_eq!(o.members["u-1"], ports);
        assert_eq!(o.owner_of(9000), Some("u-2"));
        assert_eq!(o.owner_of(22), None);
        assert_eq!(o.others("u-1").collect::<Vec<_>>(), ["u-2"]);
        assert_eq!(o.single, None);
    }

    #[test]
    fn too_many_ports_do_not_fit_a_label() {
        let ports: BTreeSet<u16> = (10_000..10_011).collect();
        assert_eq!(ports_value(&ports), None);
        let ten: BTreeSet<u16> = (10_000..10_010).collect();
        assert!(ports_value(&ten).is_some());
    }

    #[test]
    fn fingerprints_are_fnv1a() {
        assert_eq!(fingerprint(""), "cbf29ce484222325");
        assert_eq!(fingerprint("a"), "af63dc4c8601ec8c");
    }
}
