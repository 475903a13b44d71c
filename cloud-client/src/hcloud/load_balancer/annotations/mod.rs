//! Every `load-balancer.hetzner.cloud/*` Service annotation of HCCM v1.35, plus the ones we add in
//! its style (marked "Ours"), each declared once: its key, what it accepts ([`Kind`]), whether it
//! can be set per port, its env default, whose it is and what the reference says of it.
//!
//! Rendered from here by `cargo xtask docs`: docs/annotations.md's tables ([`reference`]) and the
//! admission policy's checks (`charts/cloud-controllers/files/annotations.json`). Checked against
//! here by tests: the parser refuses what each [`Kind`] refuses, in the order of this table
//! (spec/tests.rs), the policy refuses what the parser refuses (chart-tests' admission_policy),
//! and the bad-input catalogue has a row for each checked key.

mod certificates;
mod declaration;
mod forwarding;
mod health_check;
mod identity;
mod network;
pub mod reference;
mod reserved;

pub use certificates::*;
pub use declaration::{Annotation, Kind, Origin, Section};
pub use forwarding::*;
pub use health_check::*;
pub use identity::*;
pub use network::*;
pub use reserved::*;

/// Common prefix of all annotations.
pub const PREFIX: &str = declaration::PREFIX;

/// Every section, in the page's order. The order of this table is also the order in which the
/// parser and the admission policy list the problems they find.
pub const SECTIONS: &[Section] = &[
    identity::SECTION,
    forwarding::SECTION,
    certificates::SECTION,
    health_check::SECTION,
    network::SECTION,
    reserved::SECTION,
];

/// Every annotation, in the table's order.
pub fn all() -> impl Iterator<Item = &'static Annotation> {
    SECTIONS.iter().flat_map(|s| s.annotations)
}

/// The declaration of `key` (without a port suffix).
pub fn declared(key: &str) -> Option<&'static Annotation> {
    all().find(|a| a.key == key)
}

/// Where `key` (or the annotation it sets for one port) comes in the table; unknown keys last.
pub fn position(key: &str) -> usize {
    let base = split_port(key).map_or(key, |(base, _)| base);
    all().position(|a| a.key == base).unwrap_or(usize::MAX)
}

/// Whether `key` can be set for one port by suffixing it with `.<port>`.
pub fn is_per_port(key: &str) -> bool {
    declared(key).is_some_and(|a| a.per_port)
}

/// The keys that can be set per port, in the table's order.
pub fn per_port() -> impl Iterator<Item = &'static str> {
    all().filter(|a| a.per_port).map(|a| a.key)
}

/// The `HCLOUD_LOAD_BALANCERS_*` variable that sets the default of annotation `key`, if any.
pub fn env_var(key: &str) -> Option<&'static str> {
    declared(key)?.env
}

/// `key.port`, the port-scoped form of a per-port annotation.
pub fn for_port(key: &str, port: u16) -> String {
    format!("{key}.{port}")
}

/// A port-scoped key split into its annotation and port: `("…/protocol", 443)`. Any key of ours
/// that ends in `.<digits>` is meant as one, known or not.
pub fn split_port(key: &str) -> Option<(&str, &str)> {
    let (base, port) = key.strip_prefix(PREFIX).and(key.rsplit_once('.'))?;
    (!port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) && base.len() > PREFIX.len())
        .then_some((base, port))
}

/// Whether the Service says `shared: "true"` (for a delete, which reads no other annotation).
pub fn is_shared(svc: &crate::capabilities::ServiceRef) -> bool {
    svc.annotations
        .get(SHARED)
        .and_then(|v| crate::values::parse_bool(v.trim()))
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_key_is_declared_once_and_says_what_it_does() {
        let mut seen = std::collections::BTreeSet::new();
        for a in all() {
            assert!(a.key.starts_with(PREFIX), "{}", a.key);
            assert!(seen.insert(a.key), "{} is declared twice", a.key);
            let reserved = a.kind == Kind::Reserved;
            assert_eq!(reserved, a.does.is_empty(), "{}: what it does", a.key);
            assert!(!a.per_port || !reserved, "{}", a.key);
            // The page marks ours as such.
            assert_eq!(
                a.does.starts_with("Ours"),
                a.origin == Origin::Ours,
                "{}: origin and the reference's words differ",
                a.key
            );
            if let Some(env) = a.env {
                assert!(env.starts_with("HCLOUD_LOAD_BALANCERS_"), "{env}");
                assert!(a.default.contains(env), "{}: default names {env}", a.key);
            }
        }
        assert_eq!(
            position(USES_PROXYPROTOCOL),
            position("load-balancer.hetzner.cloud/uses-proxyprotocol.443")
        );
        assert!(is_per_port(PROTOCOL) && !is_per_port(NAME));
    }
}
