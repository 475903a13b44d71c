//! Deleting a Service's load balancer: its own one (unless delete-protected), or its part of a
//! shared one (its ports and label; the load balancer itself only with the last Service, and only
//! when nothing made by hand is left on it).

use super::*;

impl HcloudLoadBalancers {
    /// The Service's load balancer goes, or its part of a shared one (see
    /// [`Holding::released_at_delete`]).
    pub(super) async fn delete_service(
        &self,
        svc: &ServiceRef,
    ) -> Result<DeleteOutcome, CloudError> {
        let mut outcome = DeleteOutcome {
            deleted: false,
            warnings: Vec::new(),
        };
        for release in Holding::released_at_delete(&self.finder, svc).await? {
            let done = match release {
                Release::Own(lb) => self.delete_own(svc, &lb).await?,
                Release::Part(lb) => self.leave_shared(svc, &lb).await?,
            };
            outcome.deleted |= done.deleted;
            outcome.warnings.extend(done.warnings);
        }
        self.certificates.release(svc).await;
        Ok(outcome)
    }

    /// Deletes the Service's own (not shared) load balancer, unless it is delete-protected.
    pub(super) async fn delete_own(
        &self,
        svc: &ServiceRef,
        lb: &LoadBalancer,
    ) -> Result<DeleteOutcome, CloudError> {
        if lb.protection.as_ref().is_some_and(|p| p.delete) {
            return Ok(DeleteOutcome {
                deleted: false,
                warnings: vec![Warning::new(
                    "DeleteProtected",
                    format!(
                        "load balancer {} ({}) has delete protection; it was left in place",
                        lb.name, lb.id
                    ),
                )],
            });
        }
        let r = self.delete_lb(lb.id).await;
        self.finder.forget(&svc.uid);
        r
    }

    /// `DELETE`; one already gone counts as not deleted by us.
    async fn delete_lb(&self, id: i64) -> Result<DeleteOutcome, CloudError> {
        match self.applier.delete(id).await {
            Ok(()) => Ok(DeleteOutcome {
                deleted: true,
                warnings: Vec::new(),
            }),
            Err(e) if e.is_not_found() => Ok(DeleteOutcome {
                deleted: false,
                warnings: Vec::new(),
            }),
            Err(e) => Err(e),
        }
    }

    /// A Service leaves shared load balancer `id`: its own ports are deleted and its label
    /// removed, and the load balancer itself is deleted only by the last Service on it, and only
    /// when no port made by hand or by another tool is left on it.
    async fn leave_shared(
        &self,
        svc: &ServiceRef,
        found: &LoadBalancer,
    ) -> Result<DeleteOutcome, CloudError> {
        let _turn = self.turns.hold(Some(&found.name)).await;
        // Read again under the lock: another Service on it may have just written.
        let lb = self.finder.get_lb(found.id).await?;
        let owners = Owners::of(&lb.labels);
        if !owners.members.contains_key(&svc.uid) {
            return Ok(DeleteOutcome {
                deleted: false,
                warnings: Vec::new(),
            });
        }
        let claimed = sharing::claimed(&lb, &svc.uid);
        let foreign: Vec<u16> = lb
            .services
            .iter()
            .map(|s| s.listen_port)
            .filter(|p| !claimed.contains(p) && owners.owner_of(*p).is_none())
            .collect();
        let last = owners.others(&svc.uid).next().is_none();
        let protected = lb.protection.as_ref().is_some_and(|p| p.delete);
        self.finder.forget(&svc.uid);
        if last && foreign.is_empty() && !protected {
            return self.delete_lb(lb.id).await;
        }
        let mut ops: Vec<Op> = lb
            .services
            .iter()
            .filter(|s| claimed.contains(&s.listen_port))
            .map(|s| Op::DeleteService(s.listen_port))
            .collect();
        ops.push(Op::Update {
            name: None,
            labels: Some(sharing::labels_without(&lb, &svc.uid)),
        });
        let none = plan::DesiredTargets::default();
        let limit = TargetLimit {
            max: 0,
            desired: &none,
            service: &svc.key(),
        };
        let mut warnings = Vec::new();
        self.applier
            .apply(lb.id, &ops, &limit, &mut warnings)
            .await?;
        if last {
            let why = if protected {
                "it has delete protection".to_string()
            } else {
                let ports: Vec<String> = foreign.iter().map(u16::to_string).collect();
                format!(
                    "port(s) {} on it were not made by a Service",
                    ports.join(", ")
                )
            };
            warnings.push(Warning::new(
                "LoadBalancerKept",
                format!(
                    "this Service was the last on shared load balancer {} ({}); its ports were \
                     removed and the load balancer left in place: {why}",
                    lb.name, lb.id
                ),
            ));
        }
        Ok(DeleteOutcome {
            deleted: false,
            warnings,
        })
    }
}
