//! Executing the planned writes: the create request, the ops one after another (the API locks the
//! load balancer while an action runs), each action waited for, and the delete.

use super::ops::{NewLb, Op};
use super::plan::{DesiredTargets, max_targets_warning};
use crate::capabilities::Warning;
use crate::error::CloudError;
use crate::hcloud::actions::ActionWaiter;
use crate::hcloud::transport::{Req, Transport};
use crate::hcloud::wire::{
    Action, ActionResponse, IdRef, IpRef, LbTarget, LoadBalancer, LoadBalancerResponse,
};

/// What [`Applier::apply`] needs to word a late `MaxTargetsReached`.
#[derive(Debug)]
pub(super) struct TargetLimit<'a> {
    pub max: u32,
    pub desired: &'a DesiredTargets,
    /// `namespace/name`, named in the warning.
    pub service: &'a str,
}

/// A created load balancer as the create answered it, its action still running.
#[derive(Debug)]
pub(super) struct Created {
    pub lb: LoadBalancer,
    pub action: Option<Action>,
}

#[derive(Debug)]
pub(super) struct Applier {
    transport: Transport,
    actions: ActionWaiter,
}

impl Applier {
    pub(super) fn new(transport: Transport, actions: ActionWaiter) -> Self {
        Self { transport, actions }
    }

    /// Sends the create request; the caller remembers the id before [`wait`](Self::wait)ing, so
    /// a create whose action fails is still found by id next time.
    pub(super) async fn create(&self, new: &NewLb) -> Result<Created, CloudError> {
        let r: LoadBalancerResponse = self.transport.call(&new.to_req()).await?;
        Ok(Created {
            lb: r.load_balancer,
            action: r.action,
        })
    }

    pub(super) async fn wait(&self, action: Option<&Action>) -> Result<(), CloudError> {
        match action {
            Some(a) => self.actions.wait(a).await,
            None => Ok(()),
        }
    }

    /// Executes `ops` against load balancer `lb` one after another. Returns the number of writes
    /// and whether a re-read is needed for the status (network changes assign IPs).
    pub(super) async fn apply(
        &self,
        lb: i64,
        ops: &[Op],
        targets: &TargetLimit<'_>,
        warnings: &mut Vec<Warning>,
    ) -> Result<(u32, bool), CloudError> {
        let mut writes = 0;
        let mut reread = false;
        for op in ops {
            let req = op.to_req(lb);
            writes += 1;
            if op.action().is_none() {
                let _: LoadBalancerResponse = self.transport.call(&req).await?;
                continue;
            }
            match self.transport.call::<ActionResponse>(&req).await {
                Ok(r) => self.actions.wait(&r.action).await?,
                // Full after all (e.g. targets added concurrently): HCCM's per-node event.
                Err(e)
                    if e.code() == Some("resource_limit_exceeded")
                        && matches!(op, Op::AddTarget { .. } | Op::AddIpTarget(_)) =>
                {
                    match op {
                        Op::AddTarget { server, .. } => warnings.push(max_targets_warning(
                            targets.max,
                            &server.to_string(),
                            targets.desired.nodes.get(server),
                            targets.service,
                        )),
                        Op::AddIpTarget(ip) => warnings.push(max_targets_warning(
                            targets.max,
                            ip,
                            targets.desired.ip_nodes.get(ip),
                            targets.service,
                        )),
                        _ => {}
                    }
                }
                // Already in the desired state (e.g. a concurrent reconcile did it).
                Err(e) if e.code() == Some("target_already_defined") => {}
                Err(e) => return Err(e),
            }
            if matches!(op, Op::AttachNetwork { .. } | Op::DetachNetwork(_)) {
                reread = true;
            }
        }
        Ok((writes, reread))
    }

    pub(super) async fn delete(&self, lb: i64) -> Result<(), CloudError> {
        self.transport
            .call_empty(&Req::delete(
                "/load_balancers/{id}",
                format!("/load_balancers/{lb}"),
            ))
            .await
    }
}

/// `lb` as it is after target `ops` that all succeeded, so it can be remembered without a re-read.
pub(super) fn follow_targets(lb: &mut LoadBalancer, ops: &[Op]) {
    for op in ops {
        match op {
            Op::RemoveTarget(id) => lb
                .targets
                .retain(|t| t.server.as_ref().is_none_or(|s| s.id != *id)),
            Op::AddTarget {
                server,
                use_private_ip,
            } => lb.targets.push(LbTarget {
                kind: "server".to_string(),
                server: Some(IdRef { id: *server }),
                use_private_ip: *use_private_ip,
                ..Default::default()
            }),
            Op::RemoveIpTarget(ip) => lb
                .targets
                .retain(|t| t.ip.as_ref().is_none_or(|i| &i.ip != ip)),
            Op::AddIpTarget(ip) => lb.targets.push(LbTarget {
                kind: "ip".to_string(),
                server: None,
                ip: Some(IpRef { ip: ip.clone() }),
                ..Default::default()
            }),
            _ => {}
        }
    }
}
