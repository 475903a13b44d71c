//! The desired stage: what a Service's load balancer should carry (its services, with their
//! certificates, and its targets, within the zone it reaches), checked before the first write.

use super::*;

impl HcloudLoadBalancers {
    /// Desired services and targets. Bad input is found before the first write (creating a managed
    /// certificate is one), then certificates are resolved once per reconcile (they cost calls).
    pub(super) async fn desired(
        &self,
        svc: &ServiceRef,
        spec: &LbSpec,
        nodes: &[LbNode],
        lb: Option<&LoadBalancer>,
        warnings: &mut Vec<Warning>,
    ) -> Result<Desired, CloudError> {
        if self.network.is_none() {
            warnings.extend(spec.ignored_without_network());
        }
        warnings.extend(spec.endpoint_targets_ignored(svc));
        let mut services = plan::desired_services(spec, &svc.ports);
        plan::check_services(&services, lb, spec)?;
        if let Some(wanted) = catalog::Wanted::of(spec, lb) {
            self.catalog
                .check(&self.transport, &|e| wanted.check(e))
                .await?;
        }
        let certs = self.certificates.ids(svc, spec, lb, warnings).await?;
        let mut by_port = BTreeMap::new();
        for (port, port_spec) in &spec.ports {
            let ids = self.certificates.ids(svc, port_spec, lb, warnings).await?;
            by_port.insert(*port, ids);
        }
        services.services =
            plan::with_certificates(std::mem::take(&mut services.services), &certs, &by_port);
        let robot = self.robot_targets(svc, spec, nodes).await?;
        let (catalog, t) = (&self.catalog, &self.transport);
        let reach = zones::reach(catalog, t, &self.servers, spec, lb, nodes, &robot.dcs).await?;
        let mut targets = plan::desired_targets(spec, nodes, &robot, &reach);
        warnings.append(&mut services.warnings);
        warnings.append(&mut targets.warnings);
        Ok(Desired { services, targets })
    }

    /// Dedicated servers' public addresses, read from the cached Robot list only when a node is
    /// a Robot server, and the family of the addresses `svc` targets them by.
    pub(super) async fn robot_targets(
        &self,
        svc: &ServiceRef,
        spec: &LbSpec,
        nodes: &[LbNode],
    ) -> Result<RobotTargets, CloudError> {
        let family = spec
            .robot_target_family
            .map_or(svc.ip_families, |f| IpFamilies {
                ipv4: f.has_v4(),
                ipv6: f.has_v6(),
            });
        let mut robot = RobotTargets {
            enabled: self.robot_enabled,
            api: self.robot.is_some(),
            family,
            ..RobotTargets::default()
        };
        let any_robot_node = nodes.iter().any(|n| {
            n.provider_id
                .as_deref()
                .is_some_and(|p| matches!(ProviderId::parse(p), Ok(ProviderId::Robot(_))))
        });
        if let Some(client) = self.robot.as_ref().filter(|_| any_robot_node) {
            for s in client.servers().await? {
                let addresses = RobotAddresses {
                    ipv4: s.server_ip.filter(|ip| !ip.is_empty()),
                    ipv6: s
                        .server_ipv6_net
                        .as_deref()
                        .and_then(crate::hcloud::external_ipv6::first_address),
                };
                robot.public_ips.insert(s.server_number, addresses);
                robot.dcs.insert(s.server_number, s.dc);
            }
        }
        Ok(robot)
    }
}

#[cfg(test)]
mod tests {
    use cloud_sim::Sim;

    use super::super::test_world;
    use super::*;
    use crate::capabilities::NODES_OUTSIDE_ZONE;

    #[tokio::test]
    async fn services_and_targets_within_the_zone_with_the_warnings_before_any_write() {
        let sim = Sim::start().await;
        let lbs = test_world::load_balancers(&sim).await;
        let w = sim.client();
        let eu = w.create_server("eu-1", "cx22", "fsn1").await.unwrap() as i64;
        let us = w.create_server("us-1", "cpx11", "ash").await.unwrap() as i64;
        let node = |name: &str, id: i64| LbNode {
            name: name.into(),
            provider_id: Some(format!("hcloud://{id}")),
            ..Default::default()
        };
        let nodes = [node("eu-1", eu), node("us-1", us)];
        let svc = test_world::service(
            "u1",
            &[
                (annotations::LOCATION, "fsn1"),
                (annotations::PRIVATE_IPV4, "10.0.0.9"),
            ],
        );
        let spec = LbSpec::parse(&svc, &LbDefaults::default()).unwrap();
        sim.reset_counters();
        let mut warnings = Vec::new();
        let desired = lbs
            .desired(&svc, &spec, &nodes, None, &mut warnings)
            .await
            .unwrap();
        assert_eq!(desired.services.services.len(), 1);
        assert_eq!(desired.services.services[0].destination_port, 30080);
        // A load balancer in fsn1 reaches eu-central's servers only.
        assert_eq!(desired.targets.servers, [eu]);
        let reasons: Vec<&str> = warnings.iter().map(|w| w.reason.as_str()).collect();
        assert!(reasons.contains(&NODES_OUTSIDE_ZONE), "{reasons:?}");
        // No network: the private IP is ignored, and said so.
        assert!(reasons.contains(&"PrivateNetworkIgnored"), "{reasons:?}");
        let writes: u64 = sim
            .request_counts()
            .iter()
            .filter(|(k, _)| !k.starts_with("GET "))
            .map(|(_, n)| n)
            .sum();
        assert_eq!(writes, 0, "the desired stage writes nothing");
    }
}
