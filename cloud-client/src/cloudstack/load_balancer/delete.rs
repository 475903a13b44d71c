//! A Service's load balancer goes: its ACL rules (a VPC tier's, found by their `reason`), then,
//! when the address is ours to release, the address alone (CloudStack releases the rules and
//! firewall rules on it with it: one write, and no moment with rules but no address); else the
//! firewall rules of our ports on the address and our rules, one by one.
//!
//! The address is ours to release when `spec.loadBalancerIP` does not name it (upstream's rule),
//! or upstream's annotation says it associated it, or our rules carry [`ASSOCIATED_MARK`] — and
//! no rule on it is anybody else's.
//!
//! A Service with no rule left may still hold the address recorded for it by a reconcile that
//! stopped before its first rule (`address`): released, when nothing but its rules is on it.
//!
//! The annotations are not checked here: a Service with invalid ones is deleted all the same.

use super::spec::{self, parse_rule_name};
use super::wire::Filter;
use super::{ASSOCIATED_MARK, CloudStackLoadBalancers};
use crate::capabilities::{DeleteOutcome, ServiceRef, default_load_balancer_name};
use crate::error::CloudError;

impl CloudStackLoadBalancers {
    pub(super) async fn delete_service(
        &self,
        svc: &ServiceRef,
    ) -> Result<DeleteOutcome, CloudError> {
        let name = default_load_balancer_name(&svc.uid);
        let rules = self.calls.our_rules(&name).await?;
        let Some(first) = rules.first() else {
            return self.release_recorded(svc, &name).await;
        };
        let network = self.network(&first.networkid).await?;
        if network.filter() == Filter::Acl {
            for acl in self.calls.acl_rules(&network.id).await? {
                if parse_rule_name(&name, &acl.reason).is_some() {
                    self.calls.delete_acl_rule(&acl.id).await?;
                }
            }
        }
        let named = svc.load_balancer_ip.as_deref().map(str::trim);
        let associated = svc.annotations.get(spec::IP_ASSOCIATED).map(String::as_str)
            == Some("true")
            || rules
                .iter()
                .any(|r| r.description.contains(ASSOCIATED_MARK));
        let mut addresses: Vec<(&str, &str)> = rules
            .iter()
            .map(|r| (r.publicipid.as_str(), r.publicip.as_str()))
            .collect();
        addresses.sort();
        addresses.dedup();
        for (ip_id, address) in addresses {
            let ours_to_release = named != Some(address) || associated;
            let on_it = self.calls.rules_on(ip_id).await?;
            let only_ours = on_it
                .iter()
                .all(|r| parse_rule_name(&name, &r.name).is_some());
            if ours_to_release && only_ours {
                tracing::info!(%address, "releasing the load balancer's address");
                self.calls.disassociate(ip_id).await?;
                continue;
            }
            let mine: Vec<_> = rules.iter().filter(|r| r.publicipid == ip_id).collect();
            if network.filter() == Filter::Firewall {
                let ports: Vec<(&str, u32)> = mine
                    .iter()
                    .filter_map(|r| {
                        let (p, port) = parse_rule_name(&name, &r.name)?;
                        Some((p.transport(), u32::from(port)))
                    })
                    .collect();
                for f in self.calls.firewall_rules(ip_id).await? {
                    let ours = ports.iter().any(|(p, port)| {
                        f.protocol == *p && f.startport == Some(*port) && f.endport == Some(*port)
                    });
                    if ours {
                        self.calls.delete_firewall_rule(&f.id).await?;
                    }
                }
            }
            for r in mine {
                self.calls.delete_rule(&r.id).await?;
            }
        }
        Ok(DeleteOutcome {
            deleted: true,
            warnings: Vec::new(),
        })
    }
}
