//! `LoadBalancers` for Hetzner Cloud (docs/hetzner-api.md, "Load balancers"), with fewer calls than
//! HCCM: the LB id is remembered per Service UID, a new LB is created with its services and targets
//! inline in one request, and an existing one only receives the actions that change something.

pub mod annotations;
pub mod catalog;
pub mod reconcile;
pub mod spec;
pub mod status;

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

use async_trait::async_trait;
use serde_json::json;

use crate::error::CloudError;
use crate::hcloud::actions::ActionWaiter;
use crate::hcloud::config::LbDefaults;
use crate::hcloud::label_selector::{SERVICE_UID_LABEL, service_uid_selector};
use crate::hcloud::pagination::list_all;
use crate::hcloud::transport::{Req, Transport};
use crate::hcloud::wire::{
    ActionResponse, CertificateResponse, CertificatesPage, IdRef, LbTarget, LoadBalancer,
    LoadBalancerResponse, LoadBalancersPage,
};
use crate::provider::{
    DeleteOutcome, EnsureOutcome, LbNode, LoadBalancerStatus, LoadBalancers, ServiceRef,
    UpdateOutcome, Warning,
};
use reconcile::{
    DEFAULT_LB_TYPE, DesiredServices, DesiredTargets, Op, PlanInput, check_services,
    desired_services, desired_targets, known_max_targets, max_targets_after, plan, type_change,
    with_certificates,
};
use spec::{CertificateType, LbProtocol, LbSpec, Placement};

/// How a load balancer was found.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Found {
    /// Carries our UID label.
    Owned,
    /// Matched by name only: adopted by setting our label. `owner` is the Service UID it was
    /// labelled with, if any: HCCM takes such an LB over too (a delete-protected LB outlives its
    /// Service and keeps its IP for the Service re-created under the same name annotation).
    ByName { owner: Option<String> },
}

#[derive(Debug)]
pub struct HcloudLoadBalancers {
    transport: Transport,
    actions: ActionWaiter,
    network: Option<i64>,
    defaults: LbDefaults,
    /// Known locations, network zones and types, to refuse a typo before the first write.
    catalog: catalog::Catalog,
    /// Service UID → LB id (so steady-state reconciles skip the label-selector search) and the LB as
    /// last read or written by us (so a node-set change costs only the target writes).
    known: Mutex<HashMap<String, Known>>,
}

#[derive(Debug, Clone)]
struct Known {
    id: i64,
    lb: Option<(Instant, LoadBalancer)>,
}

/// How long `update_targets` trusts the remembered LB instead of reading it. `ensure` always reads, so
/// periodic Service resyncs correct any drift made outside the controller.
const KNOWN_LB_MAX_AGE: Duration = Duration::from_secs(300);

impl HcloudLoadBalancers {
    pub(crate) fn new(
        transport: Transport,
        actions: ActionWaiter,
        network: Option<i64>,
        defaults: LbDefaults,
    ) -> Self {
        Self {
            transport,
            actions,
            network,
            defaults,
            catalog: catalog::Catalog::default(),
            known: Mutex::new(HashMap::new()),
        }
    }

    fn known(&self) -> std::sync::MutexGuard<'_, HashMap<String, Known>> {
        self.known.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn remember(&self, uid: &str, lb: &LoadBalancer) {
        self.known().insert(
            uid.to_string(),
            Known {
                id: lb.id,
                lb: Some((Instant::now(), lb.clone())),
            },
        );
    }

    /// Keep the id, drop the object (it no longer reflects the cloud).
    fn remember_id(&self, uid: &str, id: i64) {
        self.known().insert(uid.to_string(), Known { id, lb: None });
    }

    fn spec(&self, svc: &ServiceRef) -> Result<LbSpec, CloudError> {
        let spec = LbSpec::parse(svc, &self.defaults)?;
        if spec.use_private_ip && self.network.is_none() {
            return Err(CloudError::invalid_input(
                format!("annotation {}", annotations::USE_PRIVATE_IP),
                "true",
                "false unless the controller runs with HCLOUD_NETWORK set",
            ));
        }
        Ok(spec)
    }

    /// Without a network there is nothing to take a private IP from. HCCM ignores these
    /// annotations silently, and Services it served with them must keep working after a switch,
    /// so they are ignored here too, but not silently.
    fn warn_ignored_private_network(&self, svc: &ServiceRef, warnings: &mut Vec<Warning>) {
        if self.network.is_some() {
            return;
        }
        for key in [
            annotations::PRIVATE_IPV4,
            annotations::PRIVATE_SUBNET_IP_RANGE,
        ] {
            if let Some(v) = svc.annotations.get(key).filter(|v| !v.trim().is_empty()) {
                warnings.push(Warning::new(
                    "PrivateNetworkIgnored",
                    format!(
                        "annotation {key}={v:?} is ignored: the controller runs without \
                         HCLOUD_NETWORK, so the load balancer has no private network"
                    ),
                ));
            }
        }
    }

    /// The type (of a new load balancer, or the one a `change_type` switches to) and, for a new
    /// one, its location and network zone must exist, and a location must lie in the zone when
    /// both are set. Reads only, and usually not even that (see [`catalog`]).
    async fn check_catalog(
        &self,
        svc: &ServiceRef,
        spec: &LbSpec,
        lb: Option<&LoadBalancer>,
    ) -> Result<(), CloudError> {
        let lb_type = match lb {
            None => Some(spec.lb_type.as_deref().unwrap_or(DEFAULT_LB_TYPE)),
            Some(lb) => type_change(lb, spec, spec.lb_type.is_some()),
        };
        let new = lb.is_none();
        if lb_type.is_none() && !new {
            return Ok(());
        }
        // Name where the value came from: the annotation if set, else the env default.
        let source = |key: &str, env: &str| {
            if svc
                .annotations
                .get(key)
                .is_some_and(|v| !v.trim().is_empty())
            {
                format!("annotation {key}")
            } else {
                env.to_string()
            }
        };
        let type_field = source(annotations::TYPE, "HCLOUD_LOAD_BALANCERS_TYPE");
        let loc_field = source(annotations::LOCATION, "HCLOUD_LOAD_BALANCERS_LOCATION");
        let zone_field = source(
            annotations::NETWORK_ZONE,
            "HCLOUD_LOAD_BALANCERS_NETWORK_ZONE",
        );
        let (location, zone) = if new {
            (spec.location.as_deref(), spec.network_zone.as_deref())
        } else {
            (None, None)
        };
        let check = |e: &catalog::Entries| -> Result<(), CloudError> {
            if let Some(t) = lb_type
                && !e.has_lb_type(t)
            {
                return Err(CloudError::invalid_input(
                    type_field.clone(),
                    t,
                    format!("a load balancer type: {}", e.lb_type_names()),
                ));
            }
            if let Some(z) = zone
                && !e.has_zone(z)
            {
                return Err(CloudError::invalid_input(
                    zone_field.clone(),
                    z,
                    format!("a network zone: {}", e.zone_names()),
                ));
            }
            if let Some(l) = location {
                match (e.zone_of(l), zone) {
                    (None, _) => {
                        return Err(CloudError::invalid_input(
                            loc_field.clone(),
                            l,
                            format!("a location: {}", e.location_names()),
                        ));
                    }
                    (Some(lz), Some(z)) if lz != z => {
                        return Err(CloudError::invalid_input(
                            loc_field.clone(),
                            l,
                            format!(
                                "a location in network zone {z} ({zone_field}): {}; or only \
                                 one of the two ({l} is in {lz})",
                                e.locations_in(z)
                            ),
                        ));
                    }
                    _ => {}
                }
            }
            Ok(())
        };
        self.catalog.check(&self.transport, &check).await
    }

    /// Remembered object (only if `trust_known`), remembered id (verified by GET), then UID label, then
    /// (if `name` is given) name.
    async fn find(
        &self,
        svc: &ServiceRef,
        name: Option<&str>,
        trust_known: bool,
    ) -> Result<Option<(LoadBalancer, Found)>, CloudError> {
        let known = self.known().get(&svc.uid).cloned();
        if let Some(Known { id, lb }) = known {
            if trust_known
                && let Some((at, lb)) = lb
                && at.elapsed() < KNOWN_LB_MAX_AGE
            {
                return Ok(Some((lb, Found::Owned)));
            }
            match self.get_lb(id).await {
                Ok(lb) if lb.labels.get(SERVICE_UID_LABEL) == Some(&svc.uid) => {
                    self.remember(&svc.uid, &lb);
                    return Ok(Some((lb, Found::Owned)));
                }
                Ok(_) => {}
                Err(e) if e.is_not_found() => {}
                Err(e) => return Err(e),
            }
            self.known().remove(&svc.uid);
        }
        let by_label: Vec<LoadBalancer> = list_all::<LoadBalancersPage>(
            &self.transport,
            Req::get("/load_balancers", "/load_balancers")
                .query("label_selector", service_uid_selector(&svc.uid)),
        )
        .await?;
        match by_label.len() {
            0 => {}
            1 => {
                let lb = by_label.into_iter().next().unwrap_or_default();
                self.remember(&svc.uid, &lb);
                return Ok(Some((lb, Found::Owned)));
            }
            n => {
                return Err(CloudError::Inconsistent {
                    message: format!(
                        "{n} load balancers carry label {}; expected at most one",
                        service_uid_selector(&svc.uid)
                    ),
                });
            }
        }
        match name {
            Some(name) => self.find_by_name(name).await,
            None => Ok(None),
        }
    }

    /// A load balancer named `name` (pre-existing, hand-made, or another Service's), to adopt.
    async fn find_by_name(&self, name: &str) -> Result<Option<(LoadBalancer, Found)>, CloudError> {
        let by_name: Vec<LoadBalancer> = list_all::<LoadBalancersPage>(
            &self.transport,
            Req::get("/load_balancers", "/load_balancers").query("name", name),
        )
        .await?;
        Ok(by_name.into_iter().find(|lb| lb.name == name).map(|lb| {
            let owner = lb.labels.get(SERVICE_UID_LABEL).cloned();
            (lb, Found::ByName { owner })
        }))
    }

    /// Logs an adoption by name and, when the LB was another Service's, says so in a warning.
    fn note_adoption(
        &self,
        svc: &ServiceRef,
        lb: &LoadBalancer,
        how: &Found,
        warnings: &mut Vec<Warning>,
    ) {
        let Found::ByName { owner } = how else { return };
        match owner {
            None => {
                tracing::info!(service = %svc.key(), lb = lb.id, "adopting load balancer found by name")
            }
            Some(prev) => {
                tracing::info!(service = %svc.key(), lb = lb.id, previous_uid = %prev, "taking over load balancer found by name from another Service UID");
                warnings.push(Warning::new(
                    "LoadBalancerAdopted",
                    format!(
                        "load balancer {} ({}) was found by name and taken over from Service UID \
                         {prev}; it is now labelled {SERVICE_UID_LABEL}={}",
                        lb.name, lb.id, svc.uid
                    ),
                ));
            }
        }
    }

    async fn get_lb(&self, id: i64) -> Result<LoadBalancer, CloudError> {
        let r: LoadBalancerResponse = self
            .transport
            .call(&Req::get(
                "/load_balancers/{id}",
                format!("/load_balancers/{id}"),
            ))
            .await?;
        Ok(r.load_balancer)
    }

    /// Certificate ids for https: ids pass through, names are looked up, a managed certificate is
    /// found by label or created (and waited for).
    async fn certificate_ids(
        &self,
        svc: &ServiceRef,
        spec: &LbSpec,
        lb: Option<&LoadBalancer>,
    ) -> Result<Vec<i64>, CloudError> {
        if spec.protocol != LbProtocol::Https {
            return Ok(Vec::new());
        }
        if spec.http.certificate_type == CertificateType::Managed {
            return Ok(vec![self.managed_certificate(svc, spec).await?]);
        }
        self.uploaded_certificates(spec, lb).await
    }

    /// The Service's managed certificate, found by its `hcloud-ccm/service-uid` label as HCCM's
    /// `GetCertificateByLabel` does (so a changed name annotation does not order a second one), else
    /// created with that label.
    async fn managed_certificate(
        &self,
        svc: &ServiceRef,
        spec: &LbSpec,
    ) -> Result<i64, CloudError> {
        if let Some(id) = self.certificate_by_label(&svc.uid).await? {
            return Ok(id);
        }
        let name = spec
            .http
            .managed_certificate_name
            .clone()
            .unwrap_or_default();
        let mut labels = BTreeMap::from([(SERVICE_UID_LABEL.to_string(), svc.uid.clone())]);
        if spec.http.managed_certificate_acme_staging {
            labels.insert("HC-Use-Staging-CA".to_string(), "true".to_string());
        }
        let body = json!({
            "name": name, "type": "managed",
            "domain_names": spec.http.managed_certificate_domains, "labels": labels,
        });
        let r: CertificateResponse = match self
            .transport
            .call(&Req::post("/certificates", "/certificates", body))
            .await
        {
            Ok(r) => r,
            // Created concurrently (or by an earlier attempt) it carries our label; otherwise the
            // name belongs to a certificate that is not ours.
            Err(e) if e.code() == Some("uniqueness_error") => {
                return self.certificate_by_label(&svc.uid).await?.ok_or_else(|| {
                    CloudError::invalid_input(
                        format!("annotation {}", annotations::HTTP_MANAGED_CERTIFICATE_NAME),
                        name.clone(),
                        format!(
                            "a name no other certificate uses: certificate {name:?} exists but is \
                             not labelled {}",
                            service_uid_selector(&svc.uid)
                        ),
                    )
                });
            }
            Err(e) => return Err(e),
        };
        if let Some(a) = &r.action {
            self.actions.wait(a).await?;
        }
        Ok(r.certificate.id)
    }

    /// Names are looked up; an id the load balancer does not use yet is checked to exist, since
    /// the API would refuse it only after the load balancer was created.
    async fn uploaded_certificates(
        &self,
        spec: &LbSpec,
        lb: Option<&LoadBalancer>,
    ) -> Result<Vec<i64>, CloudError> {
        let in_use: Vec<i64> = lb
            .map(|lb| {
                lb.services
                    .iter()
                    .filter_map(|s| s.http.as_ref())
                    .flat_map(|h| h.certificates.iter().copied())
                    .collect()
            })
            .unwrap_or_default();
        let mut ids = Vec::new();
        for c in &spec.http.certificates {
            match c.parse::<i64>() {
                Ok(id) if in_use.contains(&id) => ids.push(id),
                Ok(id) => {
                    let req = Req::get("/certificates/{id}", format!("/certificates/{id}"));
                    match self.transport.call::<CertificateResponse>(&req).await {
                        Ok(_) => ids.push(id),
                        Err(e) if e.is_not_found() => {
                            return Err(CloudError::invalid_input(
                                format!("annotation {}", annotations::HTTP_CERTIFICATES),
                                c.clone(),
                                format!(
                                    "ids or names of existing certificates (there is no \
                                     certificate {id})"
                                ),
                            ));
                        }
                        Err(e) => return Err(e),
                    }
                }
                Err(_) => match self.certificate_by_name(c).await? {
                    Some(id) => ids.push(id),
                    None => {
                        return Err(CloudError::invalid_input(
                            format!("annotation {}", annotations::HTTP_CERTIFICATES),
                            c.clone(),
                            "ids or names of existing certificates",
                        ));
                    }
                },
            }
        }
        Ok(ids)
    }

    async fn certificate_by_label(&self, uid: &str) -> Result<Option<i64>, CloudError> {
        let found = list_all::<CertificatesPage>(
            &self.transport,
            Req::get("/certificates", "/certificates")
                .query("label_selector", service_uid_selector(uid)),
        )
        .await?;
        Ok(found.iter().map(|c| c.id).min())
    }

    async fn certificate_by_name(&self, name: &str) -> Result<Option<i64>, CloudError> {
        let found = list_all::<CertificatesPage>(
            &self.transport,
            Req::get("/certificates", "/certificates").query("name", name),
        )
        .await?;
        Ok(found.into_iter().find(|c| c.name == name).map(|c| c.id))
    }

    /// `POST /load_balancers` with the services and targets inline; returns the new id.
    /// Creates the load balancer with everything the request can carry, then plans the rest
    /// against a fresh read, not the create response, which may not show everything yet (HCCM's
    /// Create re-reads by id too). Usually that plan is empty; it does what the request could not
    /// (fixed private IP, targets beyond the limit, ...). Returns the LB and the writes made.
    async fn create_and_plan(
        &self,
        svc: &ServiceRef,
        spec: &LbSpec,
        nodes: &[LbNode],
        warnings: &mut Vec<Warning>,
    ) -> Result<(LoadBalancer, u32), CloudError> {
        // Where it would go is bad input too: checked before any write.
        let (placement, zone_ignored) = spec.placement()?;
        warnings.extend(zone_ignored);
        let desired = self.desired(svc, spec, nodes, None, warnings).await?;
        let id = self
            .create(svc, spec, &placement, &desired, warnings)
            .await?;
        let created = self.get_lb(id).await?;
        let (lb, more) = self
            .reconcile_existing(svc, spec, created, &desired, warnings)
            .await?;
        Ok((lb, more + 1))
    }

    async fn create(
        &self,
        svc: &ServiceRef,
        spec: &LbSpec,
        placement: &Placement,
        desired: &Desired,
        warnings: &mut Vec<Warning>,
    ) -> Result<i64, CloudError> {
        let lb_type = spec.lb_type.clone().unwrap_or_else(|| {
            warnings.push(Warning::new(
                "LoadBalancerTypeUnconfigured",
                format!(
                    "no load balancer type configured, using {DEFAULT_LB_TYPE}; set {} or HCLOUD_LOAD_BALANCERS_TYPE",
                    annotations::TYPE
                ),
            ));
            DEFAULT_LB_TYPE.to_string()
        });
        let mut body = json!({
            "name": spec.name,
            "load_balancer_type": lb_type,
            "labels": {SERVICE_UID_LABEL: svc.uid},
            "services": desired.services.services,
        });
        match placement {
            Placement::Location(l) => body["location"] = json!(l),
            Placement::NetworkZone(z) => body["network_zone"] = json!(z),
        }
        if let Some(a) = &spec.algorithm {
            body["algorithm"] = json!({"type": a});
        }
        if let Some(d) = spec.disable_public_network {
            body["public_interface"] = json!(!d);
        }
        // The inline network has no ip/ip_range, so a fixed IP or subnet means attaching afterwards
        // (the follow-up plan does it), and private-IP targets must wait for that.
        let inline_network = self
            .network
            .filter(|_| spec.private_ipv4.is_none() && spec.private_subnet_ip_range.is_none());
        if let Some(n) = inline_network {
            body["network"] = json!(n);
        }
        if inline_network.is_some() || !spec.use_private_ip {
            let max = known_max_targets(&lb_type) as usize;
            let inline: Vec<_> = desired
                .targets
                .servers
                .iter()
                .take(max)
                .map(|id| json!({"type": "server", "server": {"id": id}, "use_private_ip": spec.use_private_ip}))
                .collect();
            body["targets"] = json!(inline);
        }
        let r: LoadBalancerResponse = self
            .transport
            .call(&Req::post("/load_balancers", "/load_balancers", body))
            .await?;
        self.remember_id(&svc.uid, r.load_balancer.id);
        if let Some(a) = &r.action {
            self.actions.wait(a).await?;
        }
        Ok(r.load_balancer.id)
    }

    /// Executes `ops` one after another (the API locks the LB while an action runs). Returns the number
    /// of writes and whether a re-read is needed for the status (network changes assign IPs).
    async fn apply(
        &self,
        svc: &ServiceRef,
        lb: &LoadBalancer,
        ops: &[Op],
        targets: &TargetLimit<'_>,
        warnings: &mut Vec<Warning>,
    ) -> Result<(u32, bool), CloudError> {
        let mut writes = 0;
        let mut reread = false;
        for op in ops {
            let (action, body) = op.request();
            writes += 1;
            match action {
                None => {
                    let _: LoadBalancerResponse = self
                        .transport
                        .call(&Req::put(
                            "/load_balancers/{id}",
                            format!("/load_balancers/{}", lb.id),
                            body,
                        ))
                        .await?;
                }
                Some(name) => {
                    let template = action_template(name);
                    let req = Req::post(
                        template,
                        format!("/load_balancers/{}/actions/{name}", lb.id),
                        body,
                    );
                    match self.transport.call::<ActionResponse>(&req).await {
                        Ok(r) => self.actions.wait(&r.action).await?,
                        // Full after all (e.g. targets added concurrently): HCCM's per-node event.
                        Err(e)
                            if e.code() == Some("resource_limit_exceeded")
                                && matches!(op, Op::AddTarget { .. }) =>
                        {
                            if let Op::AddTarget { server, .. } = op {
                                warnings.push(reconcile::max_targets_warning(
                                    targets.max,
                                    *server,
                                    targets.desired.nodes.get(server),
                                    &svc.key(),
                                ));
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
            }
        }
        Ok((writes, reread))
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
        self.warn_ignored_private_network(svc, warnings);
        let mut services = desired_services(spec, &svc.ports);
        check_services(&services, lb, spec, spec.lb_type.is_some())?;
        self.check_catalog(svc, spec, lb).await?;
        let certs = self.certificate_ids(svc, spec, lb).await?;
        services.services = with_certificates(std::mem::take(&mut services.services), &certs);
        let mut targets = desired_targets(spec, nodes);
        warnings.append(&mut services.warnings);
        warnings.append(&mut targets.warnings);
        Ok(Desired { services, targets })
    }

    /// Shared by ensure and update: plan against `lb` and apply.
    async fn reconcile_existing(
        &self,
        svc: &ServiceRef,
        spec: &LbSpec,
        lb: LoadBalancer,
        desired: &Desired,
        warnings: &mut Vec<Warning>,
    ) -> Result<(LoadBalancer, u32), CloudError> {
        let service = svc.key();
        let input = PlanInput {
            uid: &svc.uid,
            service: &service,
            network: self.network,
            services: &desired.services,
            targets: &desired.targets,
            type_explicit: spec.lb_type.is_some(),
        };
        let (ops, w3) = plan(&lb, spec, &input);
        let limit = TargetLimit {
            max: max_targets_after(&lb, spec, input.type_explicit),
            desired: &desired.targets,
        };
        warnings.extend(w3);
        if ops.is_empty() {
            self.remember(&svc.uid, &lb);
            return Ok((lb, 0));
        }
        tracing::debug!(service = %svc.key(), lb = lb.id, ops = ops.len(), "reconciling load balancer");
        let warnings_before = warnings.len();
        let (writes, reread) = match self.apply(svc, &lb, &ops, &limit, warnings).await {
            Ok(r) => r,
            Err(e) => {
                // Part of the plan may have been applied: the next reconcile must read the LB.
                self.remember_id(&svc.uid, lb.id);
                return Err(e);
            }
        };
        let mut lb = if reread {
            self.get_lb(lb.id).await?
        } else {
            lb
        };
        let only_targets = ops
            .iter()
            .all(|o| matches!(o, Op::AddTarget { .. } | Op::RemoveTarget(_)));
        if reread {
            self.remember(&svc.uid, &lb);
        } else if only_targets && warnings.len() == warnings_before {
            // Every target write succeeded: the remembered LB can follow without a re-read.
            apply_target_ops(&mut lb, &ops);
            self.remember(&svc.uid, &lb);
        } else {
            self.remember_id(&svc.uid, lb.id);
        }
        Ok((lb, writes))
    }
}

fn apply_target_ops(lb: &mut LoadBalancer, ops: &[Op]) {
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
                ip: None,
                use_private_ip: *use_private_ip,
            }),
            _ => {}
        }
    }
}

#[derive(Debug)]
struct Desired {
    services: DesiredServices,
    targets: DesiredTargets,
}

/// What `apply` needs to word a late `MaxTargetsReached`.
#[derive(Debug)]
struct TargetLimit<'a> {
    max: u32,
    desired: &'a DesiredTargets,
}

fn action_template(name: &str) -> &'static str {
    match name {
        "add_target" => "/load_balancers/{id}/actions/add_target",
        "remove_target" => "/load_balancers/{id}/actions/remove_target",
        "add_service" => "/load_balancers/{id}/actions/add_service",
        "update_service" => "/load_balancers/{id}/actions/update_service",
        "delete_service" => "/load_balancers/{id}/actions/delete_service",
        "attach_to_network" => "/load_balancers/{id}/actions/attach_to_network",
        "detach_from_network" => "/load_balancers/{id}/actions/detach_from_network",
        "change_type" => "/load_balancers/{id}/actions/change_type",
        "change_algorithm" => "/load_balancers/{id}/actions/change_algorithm",
        "enable_public_interface" => "/load_balancers/{id}/actions/enable_public_interface",
        "disable_public_interface" => "/load_balancers/{id}/actions/disable_public_interface",
        "change_dns_ptr" => "/load_balancers/{id}/actions/change_dns_ptr",
        _ => "/load_balancers/{id}/actions/{action}",
    }
}

#[async_trait]
impl LoadBalancers for HcloudLoadBalancers {
    fn load_balancer_name(&self, svc: &ServiceRef) -> String {
        svc.annotations
            .get(annotations::NAME)
            .map(|s| s.trim())
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .unwrap_or_else(|| spec::default_name(&svc.uid))
    }

    async fn get(&self, svc: &ServiceRef) -> Result<Option<LoadBalancerStatus>, CloudError> {
        let spec = self.spec(svc)?;
        Ok(self
            .find(svc, Some(&spec.name), false)
            .await?
            .map(|(lb, _)| status::status(&lb, &spec)))
    }

    async fn ensure(
        &self,
        svc: &ServiceRef,
        nodes: &[LbNode],
    ) -> Result<EnsureOutcome, CloudError> {
        let spec = self.spec(svc)?;
        let mut warnings = Vec::new();
        // HCCM also looks an unlabelled LB up by name. With the default name (`a` + this Service's
        // UID) only a label-less LB from before labels could be found that way, so the list is
        // saved and made only when the create says the name is taken.
        let named = spec.name_annotated.then_some(spec.name.as_str());
        let (lb, how) = match self.find(svc, named, false).await? {
            Some(found) => found,
            None => match self.create_and_plan(svc, &spec, nodes, &mut warnings).await {
                Ok((lb, writes)) => return Ok(outcome(&lb, &spec, warnings, writes)),
                Err(e) if e.code() == Some("uniqueness_error") && named.is_none() => {
                    self.find_by_name(&spec.name).await?.ok_or(e)?
                }
                Err(e) => return Err(e),
            },
        };
        let desired = self
            .desired(svc, &spec, nodes, Some(&lb), &mut warnings)
            .await?;
        self.note_adoption(svc, &lb, &how, &mut warnings);
        let (lb, writes) = self
            .reconcile_existing(svc, &spec, lb, &desired, &mut warnings)
            .await?;
        Ok(outcome(&lb, &spec, warnings, writes))
    }

    async fn update_targets(
        &self,
        svc: &ServiceRef,
        nodes: &[LbNode],
    ) -> Result<UpdateOutcome, CloudError> {
        let spec = self.spec(svc)?;
        let mut warnings = Vec::new();
        let named = spec.name_annotated.then_some(spec.name.as_str());
        let Some((lb, how)) = self.find(svc, named, true).await? else {
            return Ok(UpdateOutcome {
                found: false,
                warnings,
                writes: 0,
            });
        };
        let desired = self
            .desired(svc, &spec, nodes, Some(&lb), &mut warnings)
            .await?;
        self.note_adoption(svc, &lb, &how, &mut warnings);
        let (_, writes) = self
            .reconcile_existing(svc, &spec, lb, &desired, &mut warnings)
            .await?;
        dedup(&mut warnings);
        Ok(UpdateOutcome {
            found: true,
            warnings,
            writes,
        })
    }

    async fn delete(&self, svc: &ServiceRef) -> Result<DeleteOutcome, CloudError> {
        // Only our label identifies what we may delete; a same-named foreign LB is never touched.
        let Some((lb, _)) = self.find(svc, None, false).await? else {
            return Ok(DeleteOutcome {
                deleted: false,
                warnings: Vec::new(),
            });
        };
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
        let r = self
            .transport
            .call_empty(&Req::delete(
                "/load_balancers/{id}",
                format!("/load_balancers/{}", lb.id),
            ))
            .await;
        self.known().remove(&svc.uid);
        match r {
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
    }
}

fn dedup(w: &mut Vec<Warning>) {
    let mut seen = std::collections::HashSet::new();
    w.retain(|x| seen.insert((x.reason.clone(), x.message.clone(), x.node.clone())));
}
