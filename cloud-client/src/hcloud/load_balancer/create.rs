//! Creating a Service's load balancer with everything one request can carry.

use super::*;

impl HcloudLoadBalancers {
    /// Creates the load balancer with everything the request can carry, then plans the rest
    /// against the create's answer when it shows what was asked (HCCM always reads it again by
    /// id). Usually that plan is empty. Returns the LB and the writes made.
    pub(super) async fn create_and_plan(
        &self,
        svc: &ServiceRef,
        spec: &LbSpec,
        holding: Holding,
        nodes: &[LbNode],
        warnings: &mut Vec<Warning>,
    ) -> Result<(LoadBalancer, u32), CloudError> {
        // Where it would go is bad input too: checked before any write.
        let (placement, zone_ignored) = spec.placement()?;
        warnings.extend(zone_ignored);
        let desired = self.desired(svc, spec, nodes, None, warnings).await?;
        let labels = holding.new_labels(svc, spec, &desired.services)?;
        let (new, no_type) = plan::plan_create(spec, labels, placement, self.network, &desired);
        warnings.extend(no_type);
        let created = self.applier.create(&new).await?;
        // Found by id next time, even when the create's action fails.
        self.finder.record(&svc.uid, &created.lb, Known::IdOnly);
        self.applier.wait(created.action.as_ref()).await?;
        // The answer usually shows everything created (services, targets, addresses), and the plan
        // against it is empty. An answer without them (seen from the API) is read again, or the
        // plan would add them a second time.
        let lb = if new.shown_in(&created.lb) {
            created.lb
        } else {
            self.finder.get_lb(created.lb.id).await?
        };
        let (lb, more) = self
            .reconcile_existing(svc, spec, holding, lb, &desired, warnings)
            .await?;
        Ok((lb, more + 1))
    }
}
