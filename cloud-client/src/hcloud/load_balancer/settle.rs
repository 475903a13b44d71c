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

#[cfg(test)]
mod tests {
    use cloud_sim::Sim;
    use serde_json::json;

    use super::super::test_world;
    use super::*;

    /// A load balancer of Service `uid` in cloud-sim, as the client reads it.
    async fn made(sim: &Sim, lbs: &HcloudLoadBalancers, uid: &str) -> LoadBalancer {
        let body = json!({"name": format!("lb-{uid}"), "load_balancer_type": "lb11",
                          "location": "fsn1", "labels": {"hcloud-ccm/service-uid": uid}});
        let made = sim.client().post("/load_balancers", body).await.unwrap();
        let id = made["load_balancer"]["id"].as_i64().unwrap();
        lbs.finder.get_lb(id).await.unwrap()
    }

    /// Requests the next remembered find makes: none when the finder knows the load balancer
    /// whole, one `GET` by id when it knows only its id.
    async fn reads_to_find(sim: &Sim, lbs: &HcloudLoadBalancers, svc: &ServiceRef) -> u64 {
        sim.reset_counters();
        let found = lbs.finder.find(svc, None, Freshness::Remembered).await;
        assert!(found.unwrap().is_some());
        sim.requests("GET", "/load_balancers/{id}") + sim.requests("GET", "/load_balancers")
    }

    #[tokio::test]
    async fn the_finder_keeps_what_apply_leaves_known() {
        let sim = Sim::start().await;
        let lbs = test_world::load_balancers(&sim).await;
        let svc = test_world::service("u1", &[]);
        let lb = made(&sim, &lbs, "u1").await;
        let target = Op::AddTarget {
            server: 7,
            use_private_ip: false,
        };
        let rename = Op::Update {
            name: Some("renamed".into()),
            labels: None,
        };

        // Nothing written: kept whole, the next find reads nothing.
        let (_, writes) = lbs
            .settle(&svc, lb.clone(), &[], Ok((0, false)), true)
            .await
            .unwrap();
        assert_eq!((writes, reads_to_find(&sim, &lbs, &svc).await), (0, 0));
        // Only targets, all written: followed without a read.
        let (after, _) = lbs
            .settle(
                &svc,
                lb.clone(),
                std::slice::from_ref(&target),
                Ok((1, false)),
                true,
            )
            .await
            .unwrap();
        assert_eq!(after.targets.len(), 1);
        assert_eq!(reads_to_find(&sim, &lbs, &svc).await, 0);
        // A target write that warned, or any other write: only the id, read next time.
        for (op, clean) in [(&target, false), (&rename, true)] {
            lbs.settle(
                &svc,
                lb.clone(),
                std::slice::from_ref(op),
                Ok((1, false)),
                clean,
            )
            .await
            .unwrap();
            assert_eq!(
                reads_to_find(&sim, &lbs, &svc).await,
                1,
                "{op:?} clean={clean}"
            );
        }
        // The status needs what the write assigned: read now, then known whole.
        sim.reset_counters();
        lbs.settle(
            &svc,
            lb.clone(),
            std::slice::from_ref(&rename),
            Ok((1, true)),
            true,
        )
        .await
        .unwrap();
        assert_eq!(sim.requests("GET", "/load_balancers/{id}"), 1);
        assert_eq!(reads_to_find(&sim, &lbs, &svc).await, 0);
        // A failed apply may have written part of the plan: the error, and only the id.
        let failed = CloudError::Unsupported {
            message: "x".into(),
        };
        let r = lbs
            .settle(&svc, lb, std::slice::from_ref(&target), Err(failed), true)
            .await;
        assert!(r.is_err());
        assert_eq!(reads_to_find(&sim, &lbs, &svc).await, 1);
    }
}
