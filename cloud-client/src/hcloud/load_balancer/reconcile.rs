//! The stages after a load balancer is found (or created), in order: tenancy → desired → own →
//! plan → apply → settle → retire (a Secret's earlier certificates, and those the Service stopped
//! naming).

use super::*;
use crate::hcloud::wire::LbService;

impl HcloudLoadBalancers {
    /// A load balancer found for the Service (`how`), as ensure and update_targets both take
    /// it: whose it is, what it should be, then [`reconcile_existing`](Self::reconcile_existing).
    pub(super) async fn reconcile_found(
        &self,
        svc: &ServiceRef,
        spec: &LbSpec,
        holding: Holding,
        (lb, how): (LoadBalancer, Found),
        nodes: &[LbNode],
        warnings: &mut Vec<Warning>,
    ) -> Result<(LoadBalancer, u32), CloudError> {
        self.check_tenancy(svc, spec, &lb, &how, warnings)?;
        let desired = self.desired(svc, spec, nodes, Some(&lb), warnings).await?;
        holding.note_found(svc, &lb, &how, warnings);
        self.reconcile_existing(svc, spec, holding, lb, &desired, warnings)
            .await
    }

    /// Shared by create, ensure and update: own → plan against `lb` → apply → settle.
    pub(super) async fn reconcile_existing(
        &self,
        svc: &ServiceRef,
        spec: &LbSpec,
        holding: Holding,
        lb: LoadBalancer,
        desired: &Desired,
        warnings: &mut Vec<Warning>,
    ) -> Result<(LoadBalancer, u32), CloudError> {
        let service = svc.key();
        let served_before = certificates_of(&lb.services);
        let membership = holding.membership(&lb, svc, spec, &desired.services)?;
        let input = PlanInput {
            uid: &svc.uid,
            service: &service,
            network: self.network,
            services: &desired.services,
            targets: &desired.targets,
            shared: membership.as_ref(),
        };
        let (ops, plan_warnings) = plan::plan(&lb, spec, &input);
        warnings.extend(plan_warnings);
        if !ops.is_empty() {
            tracing::debug!(service = %service, lb = lb.id, ops = ops.len(), "reconciling load balancer");
        }
        let limit = TargetLimit {
            max: plan::max_targets_after(&lb, spec),
            desired: &desired.targets,
            service: &service,
        };
        let warnings_before = warnings.len();
        let applied = self.applier.apply(lb.id, &ops, &limit, warnings).await;
        let clean = warnings.len() == warnings_before;
        let settled = self.settle(svc, lb, &ops, applied, clean).await?;
        // Only a change can have stopped serving one: an unchanged load balancer costs no call.
        let unserved: Vec<i64> = if settled.1 > 0 {
            let now = certificates_of(&desired.services.services);
            served_before
                .into_iter()
                .filter(|id| !now.contains(id))
                .collect()
        } else {
            Vec::new()
        };
        self.certificates.retire(svc, spec, &unserved).await;
        Ok(settled)
    }
}

/// The certificate ids `services` serve.
fn certificates_of(services: &[LbService]) -> Vec<i64> {
    services
        .iter()
        .filter_map(|s| s.http.as_ref())
        .flat_map(|h| h.certificates.iter().copied())
        .collect()
}
