//! Who may put a Service's rules on an address that `spec.loadBalancerIP` names and the project
//! already holds. Checked before any write.
//!
//! - The address carries another Service's load balancer (rules named `a<uid>-…`, upstream's or
//!   ours) of **another namespace**, or of a Service this cluster's cache does not know: refused,
//!   naming nothing of it. A namespace must not learn of, or attach to, another's address by
//!   guessing it: the same rule as Hetzner's `load-balancer.hetzner.cloud/name`.
//! - Another Service of the **same namespace** may share the address on other ports; on the same
//!   port and transport it is refused, naming that Service.
//! - Rules nobody's Service made (Terraform's, CKS's API rule) may share the address; a port they
//!   take is refused, naming the rule. None of them is ever written.

use super::spec::{LbSpec, parse_rule_name};
use super::wire::LbRule;
use crate::capabilities::{ServiceRef, default_load_balancer_name};
use crate::error::CloudError;

/// The load-balancer name of the Service a rule belongs to, when its name is a Service rule's
/// (`a` + 31 hex digits + `-<protocol>-<port>`).
fn owner(rule: &str) -> Option<&str> {
    let lb = rule.get(..32)?;
    let hex = lb.strip_prefix('a')?;
    let is_hex = hex.len() == 31 && hex.bytes().all(|b| b.is_ascii_hexdigit());
    (is_hex && parse_rule_name(lb, rule).is_some()).then_some(lb)
}

/// `Ok` when `svc` may put `spec`'s rules on address `wanted`, which carries `on_it`.
pub(super) fn check_held_address(
    svc: &ServiceRef,
    spec: &LbSpec,
    wanted: &str,
    on_it: &[LbRule],
) -> Result<(), CloudError> {
    let own = default_load_balancer_name(&svc.uid);
    let theirs: Vec<&LbRule> = on_it
        .iter()
        .filter(|r| parse_rule_name(&own, &r.name).is_none())
        .collect();
    for r in &theirs {
        if let Some(lb) = owner(&r.name)
            && svc.names.namespace_of(lb).as_deref() != Some(svc.namespace.as_str())
        {
            return Err(CloudError::Conflict {
                message: format!(
                    "spec.loadBalancerIP {wanted}: the address carries the load balancer of a \
                     Service in another namespace (or of one this cluster does not know); a \
                     Service shares an address only with Services of its own namespace"
                ),
            });
        }
    }
    for want in &spec.rules {
        let udp = want.protocol.transport() == "udp";
        let clash = theirs
            .iter()
            .find(|r| r.publicport == want.public_port.to_string() && (r.protocol == "udp") == udp);
        if let Some(r) = clash {
            let whose = match owner(&r.name) {
                Some(lb) => svc.names.describe(lb),
                None => format!("load-balancer rule {:?}, which no Service made", r.name),
            };
            return Err(CloudError::Conflict {
                message: format!(
                    "spec.loadBalancerIP {wanted}: port {} ({}) is taken by {whose}",
                    want.public_port,
                    want.protocol.transport(),
                ),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capabilities::{PortProtocol, ServiceNames, ServicePort};

    const OTHER_UID: &str = "11111111-2222-3333-4444-555555555555";
    const NEIGHBOUR_UID: &str = "66666666-7777-8888-9999-000000000000";

    fn svc() -> ServiceRef {
        ServiceRef {
            uid: "0216b82c-7038-4967-824d-fd72bf91f4f0".into(),
            namespace: "shop".into(),
            name: "web".into(),
            ports: vec![ServicePort {
                name: None,
                protocol: PortProtocol::Tcp,
                port: 443,
                node_port: 30443,
            }],
            names: ServiceNames::new(|id| {
                if id == default_load_balancer_name(OTHER_UID) {
                    Some("bank/vault".into())
                } else if id == default_load_balancer_name(NEIGHBOUR_UID) {
                    Some("shop/api".into())
                } else {
                    None
                }
            }),
            ..Default::default()
        }
    }

    fn rule(name: &str, port: u16) -> LbRule {
        LbRule {
            name: name.into(),
            publicport: port.to_string(),
            protocol: "tcp".into(),
            ..Default::default()
        }
    }

    fn check(on_it: &[LbRule]) -> Result<(), String> {
        let s = svc();
        let spec = LbSpec::parse(&s).unwrap();
        check_held_address(&s, &spec, "203.0.113.7", on_it).map_err(|e| e.to_string())
    }

    #[test]
    fn another_namespace_or_an_unknown_service_is_refused_naming_nothing_of_it() {
        let other = format!("{}-tcp-80", default_load_balancer_name(OTHER_UID));
        let e = check(&[rule(&other, 80)]).unwrap_err();
        assert!(e.contains("another namespace"), "{e}");
        assert!(
            !e.contains("bank") && !e.contains("vault") && !e.contains(&other),
            "{e}"
        );
        let unknown = format!("a{}-udp-53", "f".repeat(31));
        assert!(owner(&unknown).is_some(), "{unknown}");
        assert!(
            check(&[rule(&unknown, 53)])
                .unwrap_err()
                .contains("another namespace")
        );
    }

    #[test]
    fn the_same_namespace_shares_other_ports_and_is_named_on_the_same_port() {
        let api = |port| {
            let lb = default_load_balancer_name(NEIGHBOUR_UID);
            rule(&format!("{lb}-tcp-{port}"), port)
        };
        assert_eq!(check(&[api(80)]), Ok(()));
        let e = check(&[api(443)]).unwrap_err();
        assert!(
            e.contains("port 443 (tcp) is taken by Service shop/api"),
            "{e}"
        );
    }

    #[test]
    fn rules_no_service_made_share_the_address_and_are_named_when_they_hold_the_port() {
        assert_eq!(check(&[rule("cks-api", 6443)]), Ok(()));
        let e = check(&[rule("cks-api", 443)]).unwrap_err();
        assert!(e.contains("\"cks-api\", which no Service made"), "{e}");
        // Our own rules are never in the way.
        let own = format!("{}-tcp-443", default_load_balancer_name(&svc().uid));
        assert_eq!(check(&[rule(&own, 443)]), Ok(()));
    }
}
