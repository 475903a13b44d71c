//! The plan's writes, one job after another, each awaited: a failure stops the rest, and the
//! next reconcile plans again from what CloudStack then has (a rule made without its members
//! gets them, a rule half replaced is made).

use std::collections::BTreeSet;

use super::CloudStackLoadBalancers;
use super::calls::NewRule;
use super::plan::{Op, Target};
use super::spec::LbSpec;
use crate::error::CloudError;

impl CloudStackLoadBalancers {
    /// Makes `ops`; `writes` counts every write sent. `marked`: new rules carry the mark of an
    /// address we associated for `spec.loadBalancerIP`.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn apply(
        &self,
        spec: &LbSpec,
        ops: &[Op],
        target: &Target<'_>,
        network_id: &str,
        acl_id: &str,
        marked: bool,
        writes: &mut u32,
    ) -> Result<(), CloudError> {
        let members: Vec<String> = target
            .members
            .iter()
            .cloned()
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let description = if marked { super::ASSOCIATED_MARK } else { "" };
        for op in ops {
            *writes += 1;
            match op {
                Op::DeleteRule { id, name } => {
                    tracing::info!(rule = %name, "deleting load-balancer rule");
                    self.calls.delete_rule(id).await?;
                }
                Op::CreateRule { index } => {
                    let want = &spec.rules[*index];
                    tracing::info!(rule = %want.name, "creating load-balancer rule");
                    let made = self
                        .calls
                        .create_rule(&NewRule {
                            name: &want.name,
                            algorithm: spec.algorithm,
                            protocol: want.protocol.as_str(),
                            public_port: want.public_port,
                            private_port: want.private_port,
                            ip_id: target.ip_id,
                            network_id,
                            cidrs: &spec.rule_cidrs,
                            description,
                        })
                        .await?;
                    if !members.is_empty() {
                        *writes += 1;
                        self.calls.members_change(&made.id, &members, true).await?;
                    }
                }
                Op::Assign { rule_id, vms } => {
                    self.calls.members_change(rule_id, vms, true).await?;
                }
                Op::Remove { rule_id, vms } => {
                    self.calls.members_change(rule_id, vms, false).await?;
                }
                Op::CreateFirewall {
                    protocol,
                    port,
                    cidrs,
                } => {
                    self.calls
                        .create_firewall_rule(target.ip_id, protocol, *port, cidrs)
                        .await?;
                }
                Op::CreateAcl(want) => {
                    self.calls.create_acl_rule(network_id, acl_id, want).await?;
                }
                Op::DeleteFirewall { id } => self.calls.delete_firewall_rule(id).await?,
                Op::DeleteAcl { id } => self.calls.delete_acl_rule(id).await?,
            }
        }
        Ok(())
    }
}
