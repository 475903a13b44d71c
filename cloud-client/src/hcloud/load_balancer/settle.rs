//! The settle stage, after apply: what the finder now knows of the load balancer.

use super::*;

impl HcloudLoadBalancers {
    /// After apply, the one step that records what was written: the finder keeps the load
    /// balancer as it now is when that is known without a read (nothing written, or only target
    /// writes that all succeeded), reads it when the status needs it (a network change assigns
    /// addresses), and otherwise keeps only its id, so the next reconcile reads it.
    pub(super) async fn settle(
        &self,
        svc: &ServiceRef,
        mut lb: LoadBalancer,
        ops: &[Op],
        applied: Result<(u32, bool), CloudError>,
        clean: bool,
    ) -> Result<(LoadBalancer, u32), CloudError> {
        let (writes, reread) = match applied {
            Ok(r) => r,
            Err(e) => {
                // Part of the plan may have been applied.
                self.finder.record(&svc.uid, &lb, Known::IdOnly);
                return Err(e);
            }
        };
        let known = if reread {
            lb = self.finder.get_lb(lb.id).await?;
            Known::Whole
        } else if ops.iter().all(Op::is_target) && clean {
            apply::follow_targets(&mut lb, ops);
            Known::Whole
        } else {
            Known::IdOnly
        };
        self.finder.record(&svc.uid, &lb, known);
        Ok((lb, writes))
    }
}
