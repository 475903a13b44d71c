//! `LoadBalancers` for CloudStack, a drop-in for upstream's (apache/cloudstack-kubernetes-provider
//! v1.2.0): a Service is a public address with one load-balancer rule per port, named as upstream
//! names them (`a<uid>-<tcp|udp|tcp-proxy>-<port>`), so upstream's rules are found and kept.
//!
//! By stage, as Hetzner's (`hcloud/load_balancer/`):
//! - [`spec`]: the Service's ports, upstream's annotations and `spec` fields, checked before any
//!   write;
//! - [`reconcile`]: what CloudStack has of the Service's (its rules by name, their members, the
//!   network, the address and the filters) and the address it gets;
//! - [`address`]: a new Service's address, recorded on the Service before it is associated, so
//!   a crash in between leaks nothing;
//! - [`tenancy`]: whether an address `spec.loadBalancerIP` names may take the Service's rules;
//! - [`plan`]: the writes, a pure function of what is wanted and what is there;
//! - [`apply`]: the writes, each job awaited;
//! - [`delete`]: everything of ours goes; the address only when we (or upstream) associated it;
//! - `calls` and `wire`: the API calls and their answers.
//!
//! Only rules with this Service's names are written, and firewall rules on their address for
//! their ports, and ACL rules whose `reason` is one of those names: nothing another Service or
//! anyone else made.

pub mod address;
mod apply;
mod calls;
mod delete;
mod plan;
mod reconcile;
pub mod spec;
mod tenancy;
mod wire;

use std::collections::HashMap;
use std::sync::Mutex;

use async_trait::async_trait;

use super::client::CloudStackApi;
use crate::capabilities::{
    DeleteOutcome, EnsureOutcome, LbNode, LoadBalancerIngress, LoadBalancerStatus, LoadBalancers,
    ServiceRef, TrafficPolicy, UpdateOutcome, default_load_balancer_name,
};
use crate::error::CloudError;
use calls::Calls;
use wire::Network;

/// What a rule's `description` says when the controller associated the address
/// `spec.loadBalancerIP` named (upstream records it in the Service's annotation, which the
/// provider seam does not write): that address is released on delete.
pub const ASSOCIATED_MARK: &str = "cloud-controllers.io/ip-associated-by-controller";

/// CloudStack's load balancers.
#[derive(Debug)]
pub struct CloudStackLoadBalancers {
    calls: Calls,
    /// Networks by id: what filters them does not change.
    networks: Mutex<HashMap<String, Network>>,
    /// ACL list names by id (`default_allow`, `default_deny` cannot be changed).
    acl_lists: Mutex<HashMap<String, String>>,
    /// VMs' networks by VM id (see `reconcile::vm_networks`).
    vm_networks: Mutex<HashMap<String, String>>,
}

impl CloudStackLoadBalancers {
    pub(crate) fn new(api: CloudStackApi) -> Self {
        Self {
            calls: Calls::new(api),
            networks: Mutex::new(HashMap::new()),
            acl_lists: Mutex::new(HashMap::new()),
            vm_networks: Mutex::new(HashMap::new()),
        }
    }

    /// Network `id`, read once.
    async fn network(&self, id: &str) -> Result<Network, CloudError> {
        if let Some(n) = self.networks.lock().expect("poisoned").get(id) {
            return Ok(n.clone());
        }
        let n = self
            .calls
            .network(id)
            .await?
            .ok_or_else(|| CloudError::Inconsistent {
                message: format!("listNetworks does not list network {id}, the nodes' network"),
            })?;
        self.networks
            .lock()
            .expect("poisoned")
            .insert(id.to_owned(), n.clone());
        Ok(n)
    }

    /// The name of ACL list `id`, read once.
    async fn acl_list_name(&self, id: &str) -> Result<String, CloudError> {
        if let Some(n) = self.acl_lists.lock().expect("poisoned").get(id) {
            return Ok(n.clone());
        }
        let name = self
            .calls
            .acl_list(id)
            .await?
            .map(|l| l.name)
            .unwrap_or_default();
        self.acl_lists
            .lock()
            .expect("poisoned")
            .insert(id.to_owned(), name.clone());
        Ok(name)
    }
}

/// The status: the hostname annotation's name, else the address.
pub(crate) fn status(hostname: Option<&str>, address: &str) -> LoadBalancerStatus {
    let ingress = match hostname {
        Some(h) => LoadBalancerIngress {
            ip: None,
            hostname: Some(h.to_owned()),
            ip_mode: None,
        },
        None => LoadBalancerIngress {
            ip: Some(address.to_owned()),
            hostname: None,
            ip_mode: None,
        },
    };
    LoadBalancerStatus {
        ingress: vec![ingress],
    }
}

#[async_trait]
impl LoadBalancers for CloudStackLoadBalancers {
    fn load_balancer_name(&self, svc: &ServiceRef) -> String {
        default_load_balancer_name(&svc.uid)
    }

    // Source ranges are enforced: firewall rules on isolated networks, ACL rules on VPC tiers,
    // and a Service whose network has neither is refused (`reconcile`).

    /// `externalTrafficPolicy: Local`: only the nodes running a serving endpoint are members.
    /// CloudStack's virtual-router load balancers cannot health-check a node (health-check
    /// policies are NetScaler's only), so a node without an endpoint, where kube-proxy drops the
    /// traffic, must not be a member at all.
    fn recorded_annotations(&self) -> &'static [&'static str] {
        &[address::ADDRESS_RECORD, spec::IP_ASSOCIATED]
    }

    fn targets_nodes_with_endpoints(&self, svc: &ServiceRef) -> bool {
        matches!(svc.traffic_policy, TrafficPolicy::Local { .. })
    }

    async fn get(&self, svc: &ServiceRef) -> Result<Option<LoadBalancerStatus>, CloudError> {
        let name = default_load_balancer_name(&svc.uid);
        let rules = self.calls.our_rules(&name).await?;
        let hostname = svc
            .annotations
            .get(spec::HOSTNAME)
            .map(|h| h.trim())
            .filter(|h| !h.is_empty());
        Ok(rules.first().map(|r| status(hostname, &r.publicip)))
    }

    async fn ensure(
        &self,
        svc: &ServiceRef,
        nodes: &[LbNode],
    ) -> Result<EnsureOutcome, CloudError> {
        let done = self.reconcile(svc, nodes, true).await?;
        Ok(EnsureOutcome {
            status: done.status.unwrap_or_default(),
            warnings: done.warnings,
            writes: done.writes,
            target_health: None,
        })
    }

    async fn update_targets(
        &self,
        svc: &ServiceRef,
        nodes: &[LbNode],
    ) -> Result<UpdateOutcome, CloudError> {
        let done = self.reconcile(svc, nodes, false).await?;
        Ok(UpdateOutcome {
            found: done.status.is_some(),
            warnings: done.warnings,
            writes: done.writes,
            target_health: None,
        })
    }

    async fn delete(&self, svc: &ServiceRef) -> Result<DeleteOutcome, CloudError> {
        self.delete_service(svc).await
    }
}
