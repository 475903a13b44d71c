//! `LoadBalancers` for Hetzner Cloud (docs/hetzner-api.md, "Load balancers"), with fewer calls than
//! HCCM: the LB id is remembered per Service UID, a new LB is created with its services and targets
//! inline in one request, and an existing one only receives the actions that change something.
//!
//! `ensure` and `update_targets` run these stages, one module each, top to bottom:
//! [`spec`] (annotations and env → [`LbSpec`], each value with its source) →
//! [`find`] (the LB: remembered, by label, or adopted by name) and [`tenancy`] (whose it is) →
//! [`holding`] (own: alone, or a member of a shared LB; [`sharing`] checks who may join and what
//! each owns, and [`locks`] lets one reconcile at a time write a shared LB) →
//! [`certificates`] and [`catalog`] (what the spec names must exist) → [`zones`] (which nodes
//! the load balancer can reach) →
//! [`plan`] (desired vs. actual → [`ops::Op`]s, pure) → [`ops`] (each op as its HTTP request) →
//! [`apply`] (the requests, one at a time, actions waited for) → settle (the one step that tells
//! the [`Finder`] what it now knows of the LB) → [`status`].
//! A deleted Service goes through [`delete`] (its own LB, or its part of a shared one). A
//! Service that asks for one load balancer per network zone runs all of it once per zone
//! ([`per_zone`]).
//! This module only wires them together behind the provider trait.

pub mod annotation_reference;
pub mod annotations;
mod apply;
pub mod catalog;
mod certificates;
mod delete;
mod find;
mod health;
mod holding;
mod locks;
pub mod ops;
mod ownership;
mod per_zone;
pub mod plan;
pub mod sharing;
pub mod spec;
pub mod status;
pub mod tenancy;
pub mod zones;

use std::collections::BTreeMap;
use std::time::Duration;

pub use health::target_health_json;

use async_trait::async_trait;

use crate::capabilities::{
    DeleteOutcome, EnsureOutcome, IpFamilies, LbNode, LoadBalancerStatus, LoadBalancers,
    ServiceRef, UpdateOutcome, Warning,
};
use crate::error::CloudError;
use crate::hcloud::actions::ActionWaiter;
use crate::hcloud::config::LbDefaults;
use crate::hcloud::provider_id::ProviderId;
use crate::hcloud::servers::ServerCache;
use crate::hcloud::transport::Transport;
use crate::hcloud::wire::LoadBalancer;
use crate::robot::RobotClient;
use apply::{Applier, TargetLimit};
use certificates::Certificates;
use find::{Finder, Found, Freshness, Known};
use holding::Holding;
use locks::Locks;
use ops::Op;
use ownership::Owners;
use plan::{Desired, PlanInput, RobotAddresses, RobotTargets};
use spec::LbSpec;

#[derive(Debug)]
pub struct HcloudLoadBalancers {
    transport: Transport,
    network: Option<i64>,
    defaults: LbDefaults,
    /// Known locations, network zones and types, to refuse a typo before the first write.
    catalog: catalog::Catalog,
    finder: Finder,
    certificates: Certificates,
    applier: Applier,
    /// `ROBOT_ENABLED`, and the Robot client when credentials are given: dedicated servers are
    /// targeted by IP.
    robot_enabled: bool,
    robot: Option<RobotClient>,
    /// One reconcile at a time writes a shared load balancer (see [`Holding::lock_name`]).
    turns: Locks,
    /// Where a node without a region label is ([`zones`]).
    servers: ServerCache,
}

impl HcloudLoadBalancers {
    pub(crate) fn new(
        transport: Transport,
        actions: ActionWaiter,
        servers: ServerCache,
        network: Option<i64>,
        defaults: LbDefaults,
    ) -> Self {
        Self {
            servers,
            network,
            defaults,
            catalog: catalog::Catalog::default(),
            finder: Finder::new(transport.clone()),
            certificates: Certificates::new(transport.clone(), actions.clone()),
            applier: Applier::new(transport.clone(), actions),
            transport,
            robot_enabled: false,
            robot: None,
            turns: Locks::default(),
        }
    }

    /// Dedicated servers become IP targets (`ROBOT_ENABLED`; `client` with credentials).
    pub(crate) fn with_robot(mut self, enabled: bool, client: Option<RobotClient>) -> Self {
        self.robot_enabled = enabled;
        self.robot = client;
        self
    }

    fn spec(&self, svc: &ServiceRef) -> Result<LbSpec, CloudError> {
        let spec = LbSpec::parse(svc, &self.defaults)?;
        spec.check_network(self.network.is_some())?;
        Ok(spec)
    }

    /// Desired services and targets. Bad input is found before the first write (creating a managed
    /// certificate is one), then certificates are resolved once per reconcile (they cost calls).
    async fn desired(
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
        let certs = self.certificates.ids(svc, spec, lb).await?;
        let mut by_port = BTreeMap::new();
        for (port, port_spec) in &spec.ports {
            by_port.insert(*port, self.certificates.ids(svc, port_spec, lb).await?);
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
    async fn robot_targets(
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

    /// Creates the load balancer with everything the request can carry, then plans the rest
    /// against the create's answer when it shows what was asked (HCCM always reads it again by
    /// id). Usually that plan is empty. Returns the LB and the writes made.
    async fn create_and_plan(
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

    /// Whose load balancer `lb` is (see [`tenancy`]), before any write. In shadow mode a load
    /// balancer made outside the cluster is put in the plan, with the command by which its owner
    /// consents: the one thing an operator must do before switching from HCCM, which adopts by name.
    fn check_tenancy(
        &self,
        svc: &ServiceRef,
        spec: &LbSpec,
        lb: &LoadBalancer,
        how: &find::Found,
        warnings: &mut Vec<Warning>,
    ) -> Result<(), CloudError> {
        let default_name = !spec.name_annotated;
        match self.defaults.tenancy.check(lb, how, svc, default_name) {
            Ok(warning) => {
                warnings.extend(warning);
                Ok(())
            }
            Err(refusal) => {
                if tenancy::made_elsewhere(lb, how, default_name) {
                    self.transport.plan_refused(
                        "adopt a load balancer made outside the cluster",
                        format!("/load_balancers/{}", lb.id),
                        format!(
                            "its owner consents with: {}",
                            tenancy::consent_command(&lb.name, &svc.namespace)
                        ),
                    );
                }
                Err(refusal)
            }
        }
    }

    /// A load balancer found for the Service (`how`), as ensure and update_targets both take
    /// it: whose it is, what it should be, then [`reconcile_existing`](Self::reconcile_existing).
    async fn reconcile_found(
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
    async fn reconcile_existing(
        &self,
        svc: &ServiceRef,
        spec: &LbSpec,
        holding: Holding,
        lb: LoadBalancer,
        desired: &Desired,
        warnings: &mut Vec<Warning>,
    ) -> Result<(LoadBalancer, u32), CloudError> {
        let service = svc.key();
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
        self.settle(svc, lb, &ops, applied, clean).await
    }

    /// A full ensure on the load balancer as `fresh` as asked: found (or created), checked, and
    /// brought in line with the Service.
    async fn ensure_one(
        &self,
        svc: &ServiceRef,
        spec: &LbSpec,
        nodes: &[LbNode],
        fresh: Freshness,
    ) -> Result<EnsureOutcome, CloudError> {
        let holding = Holding::of(spec);
        let _turn = self.turns.hold(holding.lock_name(spec)).await;
        let mut warnings = Vec::new();
        let found = holding.find(&self.finder, svc, spec, fresh).await?;
        let (lb, how) = match found {
            Some(found) => found,
            None => match self
                .create_and_plan(svc, spec, holding, nodes, &mut warnings)
                .await
            {
                Ok((lb, writes)) => return Ok(outcome(&lb, spec, warnings, writes)),
                Err(e)
                    if e.code() == Some("uniqueness_error") && holding.finds_taken_name(spec) =>
                {
                    self.finder.find_by_name(&spec.name).await?.ok_or(e)?
                }
                Err(e) => return Err(e),
            },
        };
        let (lb, writes) = self
            .reconcile_found(svc, spec, holding, (lb, how), nodes, &mut warnings)
            .await?;
        Ok(outcome(&lb, spec, warnings, writes))
    }

    /// A target update from the remembered load balancer; not found: nothing done.
    async fn update_one(
        &self,
        svc: &ServiceRef,
        spec: &LbSpec,
        nodes: &[LbNode],
    ) -> Result<UpdateOutcome, CloudError> {
        let holding = Holding::of(spec);
        let _turn = self.turns.hold(holding.lock_name(spec)).await;
        let mut warnings = Vec::new();
        let Some((lb, how)) = holding
            .find(&self.finder, svc, spec, Freshness::Remembered)
            .await?
        else {
            return Ok(UpdateOutcome {
                found: false,
                warnings,
                ..Default::default()
            });
        };
        let (lb, writes) = self
            .reconcile_found(svc, spec, holding, (lb, how), nodes, &mut warnings)
            .await?;
        dedup(&mut warnings);
        Ok(UpdateOutcome {
            found: true,
            warnings,
            writes,
            target_health: Some(health::target_health(&lb)),
        })
    }

    /// After apply, the one step that records what was written: the finder keeps the load
    /// balancer as it now is when that is known without a read (nothing written, or only target
    /// writes that all succeeded), reads it when the status needs it (a network change assigns
    /// addresses), and otherwise keeps only its id, so the next reconcile reads it.
    async fn settle(
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

#[async_trait]
impl LoadBalancers for HcloudLoadBalancers {
    fn load_balancer_name(&self, svc: &ServiceRef) -> String {
        spec::name(svc)
    }

    fn unenforced_source_ranges(&self) -> Option<&'static str> {
        Some(
            "Hetzner load balancers cannot filter by source address, and Hetzner firewalls do not \
             apply to them, so the Service is reachable from every address. A NetworkPolicy or a \
             firewall on the nodes sees only the load balancer's address; with annotation \
             load-balancer.hetzner.cloud/uses-proxyprotocol the pods learn each client's address, \
             so the application or its proxy (e.g. an ingress controller's allow-list) can \
             refuse it",
        )
    }

    fn kube_proxy_health_port(&self, svc: &ServiceRef) -> Option<u16> {
        let svc = ServiceRef {
            kube_proxy_unreachable: false,
            ..svc.clone()
        };
        // Invalid annotations: no check to probe for; the ensure reports them.
        let spec = LbSpec::parse(&svc, &self.defaults).ok()?;
        let asks_kube_proxy = |s: &LbSpec| {
            let hc = &s.health_check;
            hc.kube_proxy_port.filter(|_| hc.port.is_none())
        };
        asks_kube_proxy(&spec).or_else(|| spec.ports.values().find_map(asks_kube_proxy))
    }

    fn targets_nodes_with_endpoints(&self, svc: &ServiceRef) -> bool {
        // Invalid annotations: every eligible node, as the ensure that reports them would have.
        LbSpec::parse(svc, &self.defaults).is_ok_and(|spec| spec.targets_nodes_with_endpoints(svc))
    }

    async fn get(&self, svc: &ServiceRef) -> Result<Option<LoadBalancerStatus>, CloudError> {
        self.transport
            .stats()
            .record_operation("hcloud/loadBalancers.GetLoadBalancer");
        let spec = self.spec(svc)?;
        Ok(self
            .finder
            .find(svc, Some(&spec.name), Freshness::Now)
            .await?
            .map(|(lb, _)| status::status(&lb, &spec)))
    }

    async fn ensure(
        &self,
        svc: &ServiceRef,
        nodes: &[LbNode],
    ) -> Result<EnsureOutcome, CloudError> {
        self.transport
            .stats()
            .record_operation("hcloud/loadBalancers.EnsureLoadBalancer");
        let spec = self.spec(svc)?;
        self.ensure_zones(svc, &spec, nodes, Freshness::Now).await
    }

    async fn check_drift(
        &self,
        svc: &ServiceRef,
        nodes: &[LbNode],
        read_age: Duration,
    ) -> Result<EnsureOutcome, CloudError> {
        self.transport
            .stats()
            .record_operation("hcloud/loadBalancers.EnsureLoadBalancer");
        let spec = self.spec(svc)?;
        self.ensure_zones(svc, &spec, nodes, Freshness::Listed(read_age))
            .await
    }

    async fn update_targets(
        &self,
        svc: &ServiceRef,
        nodes: &[LbNode],
    ) -> Result<UpdateOutcome, CloudError> {
        self.transport
            .stats()
            .record_operation("hcloud/loadBalancers.UpdateLoadBalancer");
        let spec = self.spec(svc)?;
        self.update_zones(svc, &spec, nodes).await
    }

    async fn delete(&self, svc: &ServiceRef) -> Result<DeleteOutcome, CloudError> {
        self.transport
            .stats()
            .record_operation("hcloud/loadBalancers.EnsureLoadBalancerDeleted");
        let mut outcome = self.delete_service(svc).await?;
        self.delete_zones(svc, &mut outcome).await?;
        Ok(outcome)
    }
}

fn outcome(
    lb: &LoadBalancer,
    spec: &LbSpec,
    mut warnings: Vec<Warning>,
    writes: u32,
) -> EnsureOutcome {
    dedup(&mut warnings);
    EnsureOutcome {
        status: status::status(lb, spec),
        warnings,
        writes,
        target_health: Some(health::target_health(lb)),
    }
}

fn dedup(w: &mut Vec<Warning>) {
    let mut seen = std::collections::HashSet::new();
    w.retain(|x| seen.insert((x.reason.clone(), x.message.clone(), x.node.clone())));
}
