//! One reconcile of a Service: what CloudStack has of it, the network and address it gets, the
//! plan, the writes, the status.
//!
//! - **Members** are the nodes' VMs by the id in their providerID, never by name. The VMs are
//!   read (one `listVirtualMachines ids=…`) only when a rule is made or a member added, to learn
//!   their network: a VM outside the load balancer's network is left out with a Warning.
//! - **The network** is the one the rules are in, else the one most of the nodes' VMs are in.
//! - **The address** is the rules', else `spec.loadBalancerIP` (an address the project holds,
//!   whose rules on the Service's ports must be nobody else's; or a free one, associated and
//!   marked [`ASSOCIATED_MARK`]), else a new one associated in the network (in its VPC for a
//!   tier), recorded on the Service first (`address`). An address associated by a reconcile whose writes then fail is released before it
//!   returns, so nothing is left half made.

use std::collections::{BTreeMap, BTreeSet};

use super::plan::{self, Have, Target};
use super::spec::LbSpec;
use super::tenancy;
use super::wire::{Filter, LbRule, Network};
use super::{ASSOCIATED_MARK, CloudStackLoadBalancers, status};
use crate::capabilities::{
    LbNode, LoadBalancerStatus, ServiceRef, TARGETS_LEFT_OUT, TrafficPolicy, Warning,
};
use crate::cloudstack::provider_id;
use crate::error::CloudError;

/// The waits before each further attempt to release an address a failed reconcile associated.
const RELEASE_RETRIES: [std::time::Duration; 3] = [
    std::time::Duration::from_millis(500),
    std::time::Duration::from_secs(1),
    std::time::Duration::from_secs(2),
];

/// What a reconcile did.
#[derive(Debug, Default)]
pub(super) struct Done {
    /// `None` when the Service has no load balancer and none was to be made.
    pub status: Option<LoadBalancerStatus>,
    pub warnings: Vec<Warning>,
    pub writes: u32,
}

/// The address the rules go on.
#[derive(Debug, Clone)]
pub(super) struct Address {
    pub id: String,
    pub address: String,
    /// Associated by this reconcile (released again if its writes fail).
    pub fresh: bool,
    /// Associated for `spec.loadBalancerIP` by us: marked on the rules, released on delete.
    pub marked: bool,
}

impl CloudStackLoadBalancers {
    /// `create`: make the load balancer when the Service has none (ensure); else leave such a
    /// Service alone (update_targets).
    pub(super) async fn reconcile(
        &self,
        svc: &ServiceRef,
        nodes: &[LbNode],
        create: bool,
    ) -> Result<Done, CloudError> {
        let spec = LbSpec::parse(svc)?;
        let mut warnings = Vec::new();
        let rules = self.calls.our_rules(&spec.name).await?;
        if rules.is_empty() && !create {
            return Ok(Done::default());
        }
        let mut have = Have::default();
        for rule in rules {
            let members = self.calls.members(&rule.id).await?;
            have.rules.push((rule, members));
        }
        let mut wanted: BTreeSet<String> = BTreeSet::new();
        for node in nodes {
            match node.provider_id.as_deref().map(provider_id::vm_id) {
                Some(Ok(id)) => {
                    wanted.insert(id.to_owned());
                }
                // A Node without (or with another provider's) providerID is no VM of ours yet.
                _ => tracing::debug!(node = %node.name, "no CloudStack VM id; not a member"),
            }
        }
        // The VMs' networks, when they matter: a rule to make or a member to add.
        let all_members = have
            .rules
            .iter()
            .all(|(_, m)| wanted.iter().all(|w| m.contains(w)));
        let all_rules = have.rules.len() >= spec.rules.len();
        let mut network_id = have.rules.first().map(|(r, _)| r.networkid.clone());
        let known = all_members && all_rules && network_id.is_some();
        if !known && !wanted.is_empty() {
            let ids: Vec<String> = wanted.iter().cloned().collect();
            let nets = self.vm_networks(&ids).await?;
            if network_id.is_none() {
                network_id = majority(nets.values());
            }
            let net = network_id.clone().unwrap_or_default();
            let out: Vec<String> = wanted
                .iter()
                .filter(|id| nets.get(*id) != Some(&net))
                .cloned()
                .collect();
            if !out.is_empty() {
                wanted.retain(|id| !out.contains(id));
                warnings.push(Warning::new(
                    TARGETS_LEFT_OUT,
                    format!(
                        "{} node VM(s) are not members: not found, or not in network {net} of \
                         the load balancer's rules ({})",
                        out.len(),
                        out.join(", ")
                    ),
                ));
            }
        }
        let Some(network_id) = network_id else {
            return Err(CloudError::Inconsistent {
                message: format!(
                    "Service {}: no eligible node{} has a CloudStack VM (providerID {}…) to \
                     take the load balancer's network from",
                    svc.key(),
                    match svc.traffic_policy {
                        TrafficPolicy::Local { .. } =>
                            " running a serving endpoint (externalTrafficPolicy: Local)",
                        TrafficPolicy::Cluster => "",
                    },
                    provider_id::PREFIX
                ),
            });
        };
        let network = self.network(&network_id).await?;
        let mut filter = network.filter();
        if filter == Filter::Acl {
            let list = network.aclid.clone().unwrap_or_default();
            let name = if list.is_empty() {
                String::new()
            } else {
                self.acl_list_name(&list).await?
            };
            if list.is_empty() || name == "default_allow" || name == "default_deny" {
                filter = Filter::None;
                if spec.restricts {
                    return Err(unenforceable(
                        &spec,
                        &format!(
                            "VPC tier {} uses the ACL list {:?}, which no one may change: give the \
                         tier an ACL list of its own",
                            network.name,
                            if name.is_empty() {
                                "none"
                            } else {
                                name.as_str()
                            }
                        ),
                    ));
                }
            }
        }
        if filter == Filter::None && spec.restricts {
            return Err(unenforceable(
                &spec,
                &format!(
                    "network {} offers neither a firewall nor network ACLs (a shared network)",
                    network.name
                ),
            ));
        }
        let address = self.address(svc, &spec, &have.rules, &network).await?;
        let mut writes = u32::from(address.fresh);
        // A node-set change (update_targets) moves members only: the filters follow the
        // Service's spec, which every ensure reconciles. So it neither reads nor plans them.
        let filter = if create { filter } else { Filter::None };
        if filter == Filter::Firewall && !address.fresh {
            have.firewall = self.calls.firewall_rules(&address.id).await?;
        }
        if filter == Filter::Acl {
            have.acl = self.calls.acl_rules(&network_id).await?;
        }
        let marked = address.marked
            || have
                .rules
                .iter()
                .any(|(r, _)| r.description.contains(ASSOCIATED_MARK));
        let target = Target {
            ip_id: &address.id,
            members: &wanted,
            filter,
        };
        let ops = plan::plan(&spec, &have, &target);
        let acl_id = network.aclid.clone().unwrap_or_default();
        let applied = self
            .apply(
                &spec,
                &ops,
                &target,
                &network_id,
                &acl_id,
                marked,
                &mut writes,
            )
            .await;
        if let Err(e) = applied {
            if address.fresh {
                // Nothing half made: the address goes, and the rules made on it with it. Tried
                // again when the release fails too: an address without a rule carries nothing
                // the next reconcile could find it by (the chaos suite's 530s leaked one).
                let mut undone = self.calls.disassociate(&address.id).await;
                for wait in RELEASE_RETRIES {
                    if undone.is_ok() {
                        break;
                    }
                    tokio::time::sleep(wait).await;
                    undone = self.calls.disassociate(&address.id).await;
                }
                if let Err(undo) = undone {
                    tracing::warn!(error = %undo, address = %address.address,
                        "could not release the address this reconcile associated; the next \
                         reconcile finds it through its rules, if any were made");
                }
            }
            return Err(e);
        }
        Ok(Done {
            status: Some(status(spec.hostname.as_deref(), &address.address)),
            warnings,
            writes,
        })
    }

    /// The network of each of VMs `ids` (their first NIC's) that CloudStack lists; read once
    /// per VM and process (a VM keeps its NIC), so a node joining 20 Services' rules is looked
    /// up once, not 20 times.
    async fn vm_networks(&self, ids: &[String]) -> Result<BTreeMap<String, String>, CloudError> {
        let unknown: Vec<String> = {
            let known = self.vm_networks.lock().expect("poisoned");
            ids.iter()
                .filter(|id| !known.contains_key(*id))
                .cloned()
                .collect()
        };
        if !unknown.is_empty() {
            let vms = self.calls.vms(&unknown).await?;
            let mut known = self.vm_networks.lock().expect("poisoned");
            for vm in vms {
                if let Some(nic) = vm.nic.first() {
                    known.insert(vm.id.clone(), nic.networkid.clone());
                }
            }
        }
        let known = self.vm_networks.lock().expect("poisoned");
        Ok(ids
            .iter()
            .filter_map(|id| Some((id.clone(), known.get(id)?.clone())))
            .collect())
    }

    async fn address(
        &self,
        svc: &ServiceRef,
        spec: &LbSpec,
        rules: &[(LbRule, Vec<String>)],
        network: &Network,
    ) -> Result<Address, CloudError> {
        let from_rules = |want: Option<&str>| {
            let ips: Vec<&LbRule> = rules
                .iter()
                .map(|(r, _)| r)
                .filter(|r| want.is_none_or(|w| r.publicip == w))
                .collect();
            majority(ips.iter().map(|r| &r.publicipid)).map(|id| Address {
                address: ips
                    .iter()
                    .find(|r| r.publicipid == id)
                    .map(|r| r.publicip.clone())
                    .unwrap_or_default(),
                id,
                fresh: false,
                marked: false,
            })
        };
        let Some(wanted) = spec.address.map(|a| a.to_string()) else {
            if let Some(a) = from_rules(None) {
                return Ok(a);
            }
            return self.new_address(svc, &spec.name, network).await;
        };
        if let Some(a) = from_rules(Some(&wanted)) {
            return Ok(a);
        }
        let Some(ip) = self.calls.address(&wanted).await? else {
            return Err(CloudError::invalid_input(
                "spec.loadBalancerIP",
                wanted,
                "an address the project (or account) holds, or a free one: CloudStack shows \
                 none by this address to these keys",
            ));
        };
        if ip.allocated.as_deref().is_none_or(str::is_empty) {
            return self.associate_named(svc, network, &wanted).await;
        }
        // Held: whose rules it carries decides whether this Service may use it.
        let on_it = self.calls.rules_on(&ip.id).await?;
        tenancy::check_held_address(svc, spec, &wanted, &on_it)?;
        Ok(Address {
            id: ip.id,
            address: ip.ipaddress,
            fresh: false,
            marked: false,
        })
    }
}

/// Source ranges that cannot be enforced: refused before any write.
fn unenforceable(spec: &LbSpec, why: &str) -> CloudError {
    CloudError::invalid_input(
        "spec.loadBalancerSourceRanges",
        spec.allowed.join(","),
        format!("no source ranges here, since they could not be enforced: {why}"),
    )
}

/// The value most often given (the first of equals).
fn majority<'a>(values: impl Iterator<Item = &'a String>) -> Option<String> {
    let mut counts: Vec<(&String, usize)> = Vec::new();
    for v in values {
        match counts.iter_mut().find(|(k, _)| *k == v) {
            Some((_, n)) => *n += 1,
            None => counts.push((v, 1)),
        }
    }
    let best = counts.iter().map(|(_, n)| *n).max()?;
    counts
        .into_iter()
        .find(|(_, n)| *n == best)
        .map(|(k, _)| k.clone())
}
