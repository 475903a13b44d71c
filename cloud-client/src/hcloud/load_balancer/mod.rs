//! `LoadBalancers` for Hetzner Cloud (hetzner.md §1.5-1.6), with fewer calls than HCCM: the LB id is
//! remembered per Service UID, a new LB is created with its services and targets inline in one request,
//! and an existing one only receives the actions that change something.

pub mod annotations;
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
    DEFAULT_LB_TYPE, Op, PlanInput, desired_services, desired_targets, known_max_targets, plan,
};
use spec::{CertificateType, LbProtocol, LbSpec};

/// How a load balancer was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Found {
    /// Carries our UID label.
    Owned,
    /// Matched by name only (pre-existing or legacy LB): adopted by setting the label.
    ByName,
}

#[derive(Debug)]
pub struct HcloudLoadBalancers {
    transport: Transport,
    actions: ActionWaiter,
    network: Option<i64>,
    defaults: LbDefaults,
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
        let Some(name) = name else { return Ok(None) };
        let by_name: Vec<LoadBalancer> = list_all::<LoadBalancersPage>(
            &self.transport,
            Req::get("/load_balancers", "/load_balancers").query("name", name),
        )
        .await?;
        match by_name.into_iter().find(|lb| lb.name == name) {
            // Owned by another Service: adopting it would make two Services fight over one LB.
            Some(lb)
                if lb
                    .labels
                    .get(SERVICE_UID_LABEL)
                    .is_some_and(|u| u != &svc.uid) =>
            {
                Err(CloudError::Inconsistent {
                    message: format!(
                        "load balancer {name:?} ({}) belongs to Service UID {}; choose another {}",
                        lb.id,
                        lb.labels
                            .get(SERVICE_UID_LABEL)
                            .map(String::as_str)
                            .unwrap_or_default(),
                        annotations::NAME
                    ),
                })
            }
            found => Ok(found.map(|lb| (lb, Found::ByName))),
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
    /// found by name or created (and waited for).
    async fn certificate_ids(
        &self,
        svc: &ServiceRef,
        spec: &LbSpec,
    ) -> Result<Vec<i64>, CloudError> {
        if spec.protocol != LbProtocol::Https {
            return Ok(Vec::new());
        }
        if spec.http.certificate_type == CertificateType::Managed {
            let name = spec
                .http
                .managed_certificate_name
                .clone()
                .unwrap_or_default();
            if let Some(id) = self.certificate_by_name(&name).await? {
                return Ok(vec![id]);
            }
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
                // Created concurrently (or by an earlier attempt): use it.
                Err(e) if e.code() == Some("uniqueness_error") => {
                    let id = self.certificate_by_name(&name).await?.ok_or(e)?;
                    return Ok(vec![id]);
                }
                Err(e) => return Err(e),
            };
            if let Some(a) = &r.action {
                self.actions.wait(a).await?;
            }
            return Ok(vec![r.certificate.id]);
        }
        let mut ids = Vec::new();
        for c in &spec.http.certificates {
            match c.parse::<i64>() {
                Ok(id) => ids.push(id),
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

    async fn certificate_by_name(&self, name: &str) -> Result<Option<i64>, CloudError> {
        let found = list_all::<CertificatesPage>(
            &self.transport,
            Req::get("/certificates", "/certificates").query("name", name),
        )
        .await?;
        Ok(found.into_iter().find(|c| c.name == name).map(|c| c.id))
    }

    async fn create(
        &self,
        svc: &ServiceRef,
        spec: &LbSpec,
        services: &[crate::hcloud::wire::LbService],
        targets: &[i64],
        warnings: &mut Vec<Warning>,
    ) -> Result<LoadBalancer, CloudError> {
        if spec.location.is_none() && spec.network_zone.is_none() {
            return Err(CloudError::invalid_input(
                format!(
                    "annotation {} / {}",
                    annotations::LOCATION,
                    annotations::NETWORK_ZONE
                ),
                "",
                "a location (e.g. fsn1) or a network zone (e.g. eu-central), by annotation or \
                 HCLOUD_LOAD_BALANCERS_LOCATION / HCLOUD_LOAD_BALANCERS_NETWORK_ZONE",
            ));
        }
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
            "services": services,
        });
        if let Some(l) = &spec.location {
            body["location"] = json!(l);
        }
        if let Some(z) = &spec.network_zone {
            body["network_zone"] = json!(z);
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
            let inline: Vec<_> = targets
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
        Ok(r.load_balancer)
    }

    /// Executes `ops` one after another (the API locks the LB while an action runs). Returns the number
    /// of writes and whether a re-read is needed for the status (network changes assign IPs).
    async fn apply(
        &self,
        lb: &LoadBalancer,
        ops: &[Op],
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
                        Err(e)
                            if e.code() == Some("resource_limit_exceeded")
                                && matches!(op, Op::AddTarget { .. }) =>
                        {
                            if let Op::AddTarget { server, .. } = op {
                                let max = lb
                                    .load_balancer_type
                                    .as_ref()
                                    .and_then(|t| t.max_targets)
                                    .unwrap_or(0);
                                warnings.push(reconcile::max_targets_warning(max, &[*server]));
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

    /// Desired services and targets (resolving certificates costs calls, so it is done once per reconcile).
    async fn desired(
        &self,
        svc: &ServiceRef,
        spec: &LbSpec,
        nodes: &[LbNode],
        warnings: &mut Vec<Warning>,
    ) -> Result<Desired, CloudError> {
        let certs = self.certificate_ids(svc, spec).await?;
        let (services, w1) = desired_services(spec, &svc.ports, &certs);
        let (targets, w2) = desired_targets(spec, nodes);
        warnings.extend(w1);
        warnings.extend(w2);
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
        let input = PlanInput {
            uid: &svc.uid,
            network: self.network,
            services: &desired.services,
            targets: &desired.targets,
            type_explicit: spec.lb_type.is_some(),
        };
        let (ops, w3) = plan(&lb, spec, &input);
        warnings.extend(w3);
        if ops.is_empty() {
            self.remember(&svc.uid, &lb);
            return Ok((lb, 0));
        }
        tracing::debug!(service = %svc.key(), lb = lb.id, ops = ops.len(), "reconciling load balancer");
        let warnings_before = warnings.len();
        let (writes, reread) = match self.apply(&lb, &ops, warnings).await {
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
    services: Vec<crate::hcloud::wire::LbService>,
    targets: Vec<i64>,
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
        let found = self.find(svc, Some(&spec.name), false).await?;
        let desired = self.desired(svc, &spec, nodes, &mut warnings).await?;
        let (lb, writes) = match found {
            Some((lb, found)) => {
                if found == Found::ByName {
                    tracing::info!(service = %svc.key(), lb = lb.id, "adopting load balancer found by name");
                }
                self.reconcile_existing(svc, &spec, lb, &desired, &mut warnings)
                    .await?
            }
            None => {
                let created = self
                    .create(
                        svc,
                        &spec,
                        &desired.services,
                        &desired.targets,
                        &mut warnings,
                    )
                    .await?;
                // Whatever the create request could not express (fixed private IP, targets beyond the
                // type's limit, ...) is done by the normal plan; usually it is empty.
                let (lb, more) = self
                    .reconcile_existing(svc, &spec, created, &desired, &mut warnings)
                    .await?;
                (lb, more + 1)
            }
        };
        dedup(&mut warnings);
        Ok(EnsureOutcome {
            status: status::status(&lb, &spec),
            warnings,
            writes,
        })
    }

    async fn update_targets(
        &self,
        svc: &ServiceRef,
        nodes: &[LbNode],
    ) -> Result<UpdateOutcome, CloudError> {
        let spec = self.spec(svc)?;
        let mut warnings = Vec::new();
        let Some((lb, _)) = self.find(svc, Some(&spec.name), true).await? else {
            return Ok(UpdateOutcome {
                found: false,
                warnings,
                writes: 0,
            });
        };
        let desired = self.desired(svc, &spec, nodes, &mut warnings).await?;
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

fn dedup(w: &mut Vec<Warning>) {
    let mut seen = std::collections::HashSet::new();
    w.retain(|x| seen.insert((x.reason.clone(), x.message.clone())));
}
