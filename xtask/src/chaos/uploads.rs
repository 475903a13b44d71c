//! The audit of the certificate-rotation row ([`super::certificates`]), read from cloud-sim's
//! inventory: every upload of the world's Secrets seen, by Secret and certificate serial (a
//! second one of a serial is a duplicate), the deletions that were wrong (an upload of a Secret's
//! current certificate while its Services exist, or the certificate uploaded outside the
//! cluster), and what keeps the rotation from being done.

use std::collections::{BTreeMap, BTreeSet};

use cloud_sim::{CertificateItem, Inventory};

use super::cluster::NAMESPACE;

/// The labels of an upload (cloud-client's `secret_certificates`), and of a Service's own load
/// balancer.
const SECRET_NAME_LABEL: &str = "cloud-controllers.io/secret-name";
const SECRET_NAMESPACE_LABEL: &str = "cloud-controllers.io/secret-namespace";
const SERVICE_UID: &str = "hcloud-ccm/service-uid";
/// The https port of every Service of the row.
pub const PORT: u16 = 443;

/// An https Service and the Secret it names.
pub struct Https {
    pub name: String,
    pub secret: String,
}

/// What the harness knows and has seen.
pub struct Uploads {
    /// Per Secret, the serial of its current certificate.
    pub current: BTreeMap<String, String>,
    /// Every upload seen, by Secret and serial; what each holds; those there at the last look.
    seen: BTreeMap<(String, String), BTreeSet<u64>>,
    held: BTreeMap<u64, (String, String)>,
    present: BTreeSet<u64>,
    /// The certificate uploaded outside the cluster.
    pub foreign: u64,
    /// Uploads deleted that should not have been.
    pub wrong: BTreeSet<u64>,
    /// The Services exist (a deleted current upload is wrong).
    pub serving: bool,
}

impl Uploads {
    pub fn new(foreign: u64) -> Uploads {
        Uploads {
            current: BTreeMap::new(),
            seen: BTreeMap::new(),
            held: BTreeMap::new(),
            present: BTreeSet::from([foreign]),
            foreign,
            wrong: BTreeSet::new(),
            serving: true,
        }
    }

    /// Records every upload, and the deletions that were wrong.
    pub fn look(&mut self, inv: &Inventory) {
        let mut now = BTreeSet::new();
        for c in uploads(inv) {
            let key = (
                c.labels[SECRET_NAME_LABEL].clone(),
                c.serial.clone().unwrap_or_default(),
            );
            self.seen.entry(key.clone()).or_default().insert(c.id);
            self.held.insert(c.id, key);
            now.insert(c.id);
        }
        if inv.certificates.iter().any(|c| c.id == self.foreign) {
            now.insert(self.foreign);
        }
        for gone in self.present.difference(&now) {
            let current = self.held.get(gone).is_some_and(|(name, serial)| {
                self.serving && self.current.get(name) == Some(serial)
            });
            if *gone == self.foreign || current {
                self.wrong.insert(*gone);
            }
        }
        self.present = now;
    }

    /// Uploads seen beyond the first of a certificate.
    pub fn duplicates(&self) -> usize {
        self.seen.values().map(|ids| ids.len() - 1).sum()
    }

    /// Uploads of a Secret's current certificate that a port naming the Secret does not serve
    /// yet (`uids`: each Service's UID by name).
    pub fn pending(
        &self,
        inv: &Inventory,
        services: &[Https],
        uids: &BTreeMap<String, String>,
    ) -> BTreeSet<u64> {
        uploads(inv)
            .filter(|c| self.current.get(&c.labels[SECRET_NAME_LABEL]) == c.serial.as_ref())
            .filter(|c| {
                services
                    .iter()
                    .filter(|h| h.secret == c.labels[SECRET_NAME_LABEL])
                    .any(|h| served(inv, uids.get(&h.name)) != [c.id])
            })
            .map(|c| c.id)
            .collect()
    }

    /// What keeps the rotation from being done: empty when every Service's port serves exactly
    /// the one upload of its Secret's current certificate and no other upload is left.
    pub fn off(
        &self,
        inv: &Inventory,
        services: &[Https],
        uids: &BTreeMap<String, String>,
    ) -> Vec<String> {
        let mut off = Vec::new();
        if !inv.certificates.iter().any(|c| c.id == self.foreign) {
            off.push(format!(
                "certificate {} (made outside) deleted",
                self.foreign
            ));
        }
        let mut by_secret: BTreeMap<&str, Vec<&CertificateItem>> = BTreeMap::new();
        for c in uploads(inv) {
            let name = c.labels[SECRET_NAME_LABEL].as_str();
            by_secret.entry(name).or_default().push(c);
        }
        let wanted: BTreeSet<&str> = services.iter().map(|h| h.secret.as_str()).collect();
        for (name, list) in &by_secret {
            if !wanted.contains(name) {
                off.push(format!("{} uploads of {name}, unnamed", list.len()));
            }
        }
        for name in wanted {
            let list = by_secret.get(name).map(Vec::as_slice).unwrap_or(&[]);
            let [one] = list else {
                off.push(format!("{} uploads of {name}", list.len()));
                continue;
            };
            if self.current.get(name) != one.serial.as_ref() {
                off.push(format!("{name}'s upload is not its current certificate"));
            }
            for h in services.iter().filter(|h| h.secret == name) {
                let got = served(inv, uids.get(&h.name));
                if got != [one.id] {
                    off.push(format!("{} serves {got:?}, {name}'s is {}", h.name, one.id));
                }
            }
        }
        off
    }
}

/// The uploads of the world's Secrets.
pub fn uploads(inv: &Inventory) -> impl Iterator<Item = &CertificateItem> {
    inv.certificates.iter().filter(|c| {
        c.labels.get(SECRET_NAMESPACE_LABEL).map(String::as_str) == Some(NAMESPACE)
            && c.labels.contains_key(SECRET_NAME_LABEL)
    })
}

/// Uploads of the world's Secrets that no load balancer's port serves.
pub fn unused(inv: &Inventory) -> usize {
    let served: BTreeSet<u64> = inv
        .load_balancers
        .iter()
        .flat_map(|lb| lb.certificates.values().flatten().copied())
        .collect();
    uploads(inv).filter(|c| !served.contains(&c.id)).count()
}

/// The certificates the load balancer of the Service with `uid` serves on [`PORT`].
fn served(inv: &Inventory, uid: Option<&String>) -> Vec<u64> {
    let Some(uid) = uid else { return Vec::new() };
    inv.load_balancers
        .iter()
        .filter(|lb| lb.labels.get(SERVICE_UID) == Some(uid))
        .flat_map(|lb| lb.certificates.get(&PORT).cloned().unwrap_or_default())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use cloud_sim::LoadBalancerItem;

    fn upload(id: u64, secret: &str, serial: &str) -> CertificateItem {
        let labels = [
            (SECRET_NAME_LABEL, secret),
            (SECRET_NAMESPACE_LABEL, NAMESPACE),
        ];
        CertificateItem {
            id,
            name: format!("upload-{id}"),
            labels: labels.map(|(k, v)| (k.into(), v.into())).into(),
            kind: "uploaded".into(),
            serial: Some(serial.into()),
        }
    }

    fn lb(uid: &str, serving: u64) -> LoadBalancerItem {
        LoadBalancerItem {
            id: serving + 100,
            name: uid.into(),
            labels: [(SERVICE_UID.to_string(), uid.to_string())].into(),
            target_servers: Vec::new(),
            target_ips: Vec::new(),
            ports: vec![PORT],
            certificates: [(PORT, vec![serving])].into(),
        }
    }

    #[test]
    fn a_rotation_is_done_once_each_port_serves_the_one_current_upload() {
        let services = [Https {
            name: "web".into(),
            secret: "tls-0".into(),
        }];
        let uids: BTreeMap<String, String> = [("web".to_string(), "u1".to_string())].into();
        let mut u = Uploads::new(9);
        u.current.insert("tls-0".into(), "a".into());
        let foreign = CertificateItem {
            labels: BTreeMap::new(),
            ..upload(9, "", "f")
        };
        let mut inv = Inventory {
            certificates: vec![foreign.clone(), upload(1, "tls-0", "a")],
            load_balancers: vec![lb("u1", 1)],
            ..Inventory::default()
        };
        u.look(&inv);
        assert!(u.off(&inv, &services, &uids).is_empty());

        // Renewed: the new upload is pending until the port serves it, the old one is a leak.
        u.current.insert("tls-0".into(), "b".into());
        inv.certificates.push(upload(2, "tls-0", "b"));
        u.look(&inv);
        assert_eq!(u.pending(&inv, &services, &uids), BTreeSet::from([2]));
        assert_eq!(u.off(&inv, &services, &uids).len(), 1);
        inv.load_balancers = vec![lb("u1", 2)];
        assert_eq!(unused(&inv), 1);
        inv.certificates.retain(|c| c.id != 1);
        u.look(&inv);
        assert!(u.off(&inv, &services, &uids).is_empty());
        assert!(u.pending(&inv, &services, &uids).is_empty());
        assert_eq!((u.duplicates(), u.wrong.len()), (0, 0));

        // The current upload deleted and made again: a wrong deletion and a duplicate; the one
        // made outside deleted: wrong too.
        inv.certificates = vec![upload(3, "tls-0", "b")];
        u.look(&inv);
        assert_eq!(u.wrong, BTreeSet::from([2, 9]));
        assert_eq!(u.duplicates(), 1);
        assert!(!u.off(&inv, &services, &uids).is_empty());
    }
}
