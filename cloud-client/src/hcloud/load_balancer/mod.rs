//! `LoadBalancers` for Hetzner Cloud (docs/hetzner-api.md, "Load balancers"), with fewer calls than
//! HCCM: the LB id is remembered per Service UID, a new LB is created with its services and targets
//! inline in one request, and an existing one only receives the actions that change something.
//!
//! `ensure` and `update_targets` run these stages, one module each, top to bottom:
//! [`spec`] (annotations and env → [`LbSpec`], each value with its source, parsed once) →
//! [`find`] (the LB: remembered, by label, or adopted by name), else [`create`] (one request with
//! everything it can carry) → [`tenancy`] (whose it is) → [`desired`] (services with their
//! [`certificates`], the [`catalog`]'s check, targets within the [`zones`] it reaches) →
//! [`holding`] (own: alone, or a member of a shared LB; [`sharing`] checks who may join and what
//! each owns, and [`locks`] lets one reconcile at a time write a shared LB) →
//! [`plan`] (desired vs. actual → [`ops::Op`]s, pure) → [`ops`] (each op as its HTTP request) →
//! [`apply`] (the requests, one at a time, actions waited for) → [`settle`] (what the
//! [`Finder`] now knows of the LB) → [`status`]. [`reconcile`] runs the stages after find in
//! that order. A deleted Service goes through [`delete`] (its own LB, or its part of a shared
//! one). A Service that asks for one load balancer per network zone runs all of it once per
//! zone ([`per_zone`]).
//! This module only wires them together behind the provider trait.

pub mod annotations;
mod apply;
pub mod catalog;
mod certificates;
mod create;
mod delete;
mod desired;
mod find;
mod health;
mod holding;
mod locks;
pub mod ops;
mod ownership;
mod per_zone;
pub mod plan;
mod reconcile;
mod secret_certificates;
mod secret_check;
mod settle;
pub mod sharing;
pub mod spec;
pub mod status;
pub mod tenancy;
pub mod zones;

#[cfg(test)]
mod test_world;

use std::collections::BTreeMap;
use std::sync::Arc;
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
use holding::{Holding, Release};
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

    /// The annotations read, once per [`ServiceRef`] (one per reconcile).
    fn read(&self, svc: &ServiceRef) -> Result<Arc<LbSpec>, CloudError> {
        let read = || LbSpec::parse(svc, &self.defaults).map(Arc::new);
        svc.read_once.get_or_read(read).as_ref().clone()
    }

    /// The spec an ensure works from: as read, checked against the network, and with kube-proxy's
    /// health checks given up where kube-proxy answers on no node.
    fn spec(&self, svc: &ServiceRef) -> Result<Arc<LbSpec>, CloudError> {
        let spec = self.read(svc)?;
        spec.check_network(self.network.is_some())?;
        if svc.kube_proxy_unreachable {
            return Ok(Arc::new(spec.without_kube_proxy_checks()));
        }
        Ok(spec)
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
                Ok((lb, writes)) => return Ok(status::outcome(&lb, spec, warnings, writes)),
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
        Ok(status::outcome(&lb, spec, warnings, writes))
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
        status::dedup(&mut warnings);
        Ok(UpdateOutcome {
            found: true,
            warnings,
            writes,
            target_health: Some(health::target_health(&lb)),
        })
    }
}

#[async_trait]
impl LoadBalancers for HcloudLoadBalancers {
    fn load_balancer_name(&self, svc: &ServiceRef) -> String {
        spec::name(svc)
    }

    fn unenforced_source_ranges(&self) -> Option<&'static str> {
        Some(spec::SOURCE_RANGES_UNENFORCED)
    }

    // Invalid annotations: neither (the ensure reports them).
    fn kube_proxy_health_port(&self, svc: &ServiceRef) -> Option<u16> {
        self.read(svc).ok()?.kube_proxy_health_port()
    }

    fn targets_nodes_with_endpoints(&self, svc: &ServiceRef) -> bool {
        self.read(svc)
            .is_ok_and(|spec| spec.targets_nodes_with_endpoints(svc))
    }

    fn certificate_secrets(&self, svc: &ServiceRef) -> Vec<String> {
        certificates::secrets_named(svc)
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
