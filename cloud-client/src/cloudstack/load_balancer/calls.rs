//! The CloudStack calls of the load balancers: reads listed to their end, every write an async
//! job awaited with [`CloudStackApi::wait_job`] before the next one starts.

use serde_json::Value;

use super::super::client::CloudStackApi;
use super::super::transport::Call;
use super::super::wire::VirtualMachine;
use super::wire::{AclList, AclRule, FirewallRule, LbRule, Network, PublicIp};
use crate::error::CloudError;

/// The load balancers' view of the API.
#[derive(Debug, Clone)]
pub(crate) struct Calls {
    api: CloudStackApi,
}

impl Calls {
    pub fn new(api: CloudStackApi) -> Self {
        Self { api }
    }

    /// Rules whose name contains `keyword` (CloudStack's substring match; the caller keeps the
    /// exact names), in the project.
    pub async fn rules_named(&self, keyword: &str) -> Result<Vec<LbRule>, CloudError> {
        let call = Call::read(
            "listLoadBalancerRules",
            "listLoadBalancerRules?keyword={name}",
        )
        .param("keyword", keyword)
        .param("listall", "true");
        self.api
            .list_all(self.api.scoped(call), "loadbalancerrule")
            .await
    }

    /// The Service's rules: the ones named exactly as upstream names the rules of load balancer
    /// `lb` (the keyword list also holds any name that contains it).
    pub async fn our_rules(&self, lb: &str) -> Result<Vec<LbRule>, CloudError> {
        let mut rules = self.rules_named(lb).await?;
        rules.retain(|r| super::spec::parse_rule_name(lb, &r.name).is_some());
        Ok(rules)
    }

    /// Every rule on address `ip_id`, whoever made it.
    pub async fn rules_on(&self, ip_id: &str) -> Result<Vec<LbRule>, CloudError> {
        let call = Call::read(
            "listLoadBalancerRules",
            "listLoadBalancerRules?publicipid={id}",
        )
        .param("publicipid", ip_id)
        .param("listall", "true");
        self.api
            .list_all(self.api.scoped(call), "loadbalancerrule")
            .await
    }

    /// The member VMs' ids of rule `id`.
    pub async fn members(&self, rule_id: &str) -> Result<Vec<String>, CloudError> {
        let call = Call::read(
            "listLoadBalancerRuleInstances",
            "listLoadBalancerRuleInstances?id={id}",
        )
        .param("id", rule_id);
        let vms: Vec<VirtualMachine> = self.api.list_all(call, "loadbalancerruleinstance").await?;
        Ok(vms.into_iter().map(|vm| vm.id).collect())
    }

    /// The VMs with these ids (one call for all, every page).
    pub async fn vms(&self, ids: &[String]) -> Result<Vec<VirtualMachine>, CloudError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let call = Call::read("listVirtualMachines", "listVirtualMachines?ids={ids}")
            .param("ids", ids.join(","));
        self.api
            .list_all(self.api.scoped(call), "virtualmachine")
            .await
    }

    pub async fn network(&self, id: &str) -> Result<Option<Network>, CloudError> {
        let call = Call::read("listNetworks", "listNetworks?id={id}").param("id", id);
        let found: Vec<Network> = self.api.list_all(self.api.scoped(call), "network").await?;
        Ok(found.into_iter().find(|n| n.id == id))
    }

    pub async fn acl_list(&self, id: &str) -> Result<Option<AclList>, CloudError> {
        let call = Call::read("listNetworkACLLists", "listNetworkACLLists?id={id}").param("id", id);
        let found: Vec<AclList> = self.api.list_all(call, "networkacllist").await?;
        Ok(found.into_iter().find(|l| l.id == id))
    }

    /// The address `address`, allocated to the project or account, or free (`allocated` empty):
    /// `None` when the keys cannot see it (unknown, or another account's).
    pub async fn address(&self, address: &str) -> Result<Option<PublicIp>, CloudError> {
        let call = Call::read(
            "listPublicIpAddresses",
            "listPublicIpAddresses?ipaddress={ip}",
        )
        .param("ipaddress", address)
        .param("allocatedonly", "false")
        .param("listall", "true");
        let found: Vec<PublicIp> = self
            .api
            .list_all(self.api.scoped(call), "publicipaddress")
            .await?;
        Ok(found.into_iter().find(|i| i.ipaddress == address))
    }

    pub async fn firewall_rules(&self, ip_id: &str) -> Result<Vec<FirewallRule>, CloudError> {
        let call = Call::read("listFirewallRules", "listFirewallRules?ipaddressid={id}")
            .param("ipaddressid", ip_id)
            .param("listall", "true");
        self.api
            .list_all(self.api.scoped(call), "firewallrule")
            .await
    }

    pub async fn acl_rules(&self, network_id: &str) -> Result<Vec<AclRule>, CloudError> {
        let call = Call::read("listNetworkACLs", "listNetworkACLs?networkid={id}")
            .param("networkid", network_id)
            .param("listall", "true");
        self.api.list_all(call, "networkacl").await
    }

    /// Sends write `call` and waits for its job: the job's result.
    async fn write(&self, call: Call) -> Result<Value, CloudError> {
        let command = call.command;
        let jobid = self.start(call).await?;
        self.api.wait_job(&jobid, command).await
    }

    /// Sends write `call`: its job's id. An error here is CloudStack refusing the command
    /// before its job exists (or no answer at all, which may still have acted).
    async fn start(&self, call: Call) -> Result<String, CloudError> {
        let answer = self.api.transport().call(&call).await?;
        answer
            .get("jobid")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| CloudError::Decode {
                method: "POST".into(),
                endpoint: call.template.into(),
                message: "the answer carries no jobid".into(),
            })
    }

    /// Up to `n` free public addresses of zone `zone_id` (one page: any of them will do).
    pub async fn free_addresses(&self, zone_id: &str, n: u32) -> Result<Vec<PublicIp>, CloudError> {
        let call = Call::read(
            "listPublicIpAddresses",
            "listPublicIpAddresses?zoneid={id}&state=Free",
        )
        .param("zoneid", zone_id)
        .param("allocatedonly", "false")
        .param("forvirtualnetwork", "true")
        .param("state", "Free")
        .param("page", "1")
        .param("pagesize", n.to_string());
        let answer = self.api.transport().call(&call).await?;
        let listed: Vec<PublicIp> = answer
            .get("publicipaddress")
            .cloned()
            .map(serde_json::from_value)
            .transpose()
            .map_err(|e| CloudError::Decode {
                method: "GET".into(),
                endpoint: call.template.into(),
                message: e.to_string(),
            })?
            .unwrap_or_default();
        Ok(listed
            .into_iter()
            .filter(|ip| ip.allocated.as_deref().is_none_or(str::is_empty))
            .collect())
    }

    /// [`associate`](Self::associate)'s first half: the job's id.
    pub async fn start_associate(
        &self,
        network_id: &str,
        vpc_id: Option<&str>,
        address: &str,
    ) -> Result<String, CloudError> {
        let call = associate_call(network_id, vpc_id, Some(address));
        self.start(self.api.scoped(call)).await
    }

    /// [`associate`](Self::associate)'s second half: the address, once its job is done.
    pub async fn finish_associate(&self, jobid: &str) -> Result<PublicIp, CloudError> {
        let result = self.api.wait_job(jobid, "associateIpAddress").await?;
        decode(result.get("ipaddress"), "associateIpAddress")
    }

    /// Associates a new address with network `network_id`, or with VPC `vpc_id`; `address`: that
    /// one (a free address `spec.loadBalancerIP` named).
    pub async fn associate(
        &self,
        network_id: &str,
        vpc_id: Option<&str>,
        address: Option<&str>,
    ) -> Result<PublicIp, CloudError> {
        let call = associate_call(network_id, vpc_id, address);
        let result = self.write(self.api.scoped(call)).await?;
        decode(result.get("ipaddress"), "associateIpAddress")
    }

    pub async fn disassociate(&self, ip_id: &str) -> Result<(), CloudError> {
        let call = Call::write("disassociateIpAddress", "disassociateIpAddress?id={id}")
            .param("id", ip_id);
        self.write(call).await.map(drop)
    }

    pub async fn create_rule(&self, rule: &NewRule<'_>) -> Result<LbRule, CloudError> {
        let mut call = Call::write("createLoadBalancerRule", "createLoadBalancerRule")
            .param("name", rule.name)
            .param("algorithm", rule.algorithm)
            .param("protocol", rule.protocol)
            .param("publicport", rule.public_port.to_string())
            .param("privateport", rule.private_port.to_string())
            .param("publicipid", rule.ip_id)
            .param("networkid", rule.network_id)
            .param("cidrlist", rule.cidrs.join(","))
            // Filtering is ours: firewall rules with the Service's ranges (upstream's too).
            .param("openfirewall", "false");
        if !rule.description.is_empty() {
            call = call.param("description", rule.description);
        }
        let result = self.write(call).await?;
        decode(result.get("loadbalancer"), "createLoadBalancerRule")
    }

    pub async fn delete_rule(&self, id: &str) -> Result<(), CloudError> {
        let call =
            Call::write("deleteLoadBalancerRule", "deleteLoadBalancerRule?id={id}").param("id", id);
        self.write(call).await.map(drop)
    }

    /// Adds (`add`) or removes members of rule `id`, all in one job.
    pub async fn members_change(
        &self,
        rule_id: &str,
        vms: &[String],
        add: bool,
    ) -> Result<(), CloudError> {
        let call = if add {
            Call::write(
                "assignToLoadBalancerRule",
                "assignToLoadBalancerRule?id={id}",
            )
        } else {
            Call::write(
                "removeFromLoadBalancerRule",
                "removeFromLoadBalancerRule?id={id}",
            )
        };
        let call = call
            .param("id", rule_id)
            .param("virtualmachineids", vms.join(","));
        self.write(call).await.map(drop)
    }

    pub async fn create_firewall_rule(
        &self,
        ip_id: &str,
        protocol: &str,
        port: u16,
        cidrs: &[String],
    ) -> Result<(), CloudError> {
        let call = Call::write("createFirewallRule", "createFirewallRule")
            .param("ipaddressid", ip_id)
            .param("protocol", protocol)
            .param("startport", port.to_string())
            .param("endport", port.to_string())
            .param("cidrlist", cidrs.join(","));
        self.write(call).await.map(drop)
    }

    pub async fn delete_firewall_rule(&self, id: &str) -> Result<(), CloudError> {
        let call = Call::write("deleteFirewallRule", "deleteFirewallRule?id={id}").param("id", id);
        self.write(call).await.map(drop)
    }

    /// An Allow Ingress rule in the ACL list of tier `network_id`, `reason` naming its rule.
    pub async fn create_acl_rule(
        &self,
        network_id: &str,
        acl_id: &str,
        rule: &super::plan::AclWant,
    ) -> Result<(), CloudError> {
        let call = Call::write("createNetworkACL", "createNetworkACL")
            .param("aclid", acl_id)
            .param("networkid", network_id)
            .param("protocol", rule.protocol)
            .param("startport", rule.port.to_string())
            .param("endport", rule.port.to_string())
            .param("cidrlist", rule.cidrs.join(","))
            .param("action", "Allow")
            .param("traffictype", "Ingress")
            .param("reason", rule.reason.clone());
        self.write(call).await.map(drop)
    }

    pub async fn delete_acl_rule(&self, id: &str) -> Result<(), CloudError> {
        let call = Call::write("deleteNetworkACL", "deleteNetworkACL?id={id}").param("id", id);
        self.write(call).await.map(drop)
    }
}

/// A load-balancer rule to create.
#[derive(Debug, Clone)]
pub(crate) struct NewRule<'a> {
    pub name: &'a str,
    pub algorithm: &'a str,
    pub protocol: &'a str,
    pub public_port: u16,
    pub private_port: u16,
    pub ip_id: &'a str,
    pub network_id: &'a str,
    pub cidrs: &'a [String],
    pub description: &'a str,
}

/// `associateIpAddress` for network `network_id` (for VPC `vpc_id` when given), of `address`
/// when given.
fn associate_call(network_id: &str, vpc_id: Option<&str>, address: Option<&str>) -> Call {
    let mut call = match vpc_id {
        Some(v) => {
            Call::write("associateIpAddress", "associateIpAddress?vpcid={id}").param("vpcid", v)
        }
        None => Call::write("associateIpAddress", "associateIpAddress?networkid={id}")
            .param("networkid", network_id),
    };
    if let Some(a) = address {
        call = call.param("ipaddress", a);
    }
    call
}

fn decode<T: serde::de::DeserializeOwned>(
    value: Option<&Value>,
    command: &str,
) -> Result<T, CloudError> {
    let value = value.cloned().unwrap_or(Value::Null);
    serde_json::from_value(value).map_err(|e| CloudError::Decode {
        method: "GET".into(),
        endpoint: format!("queryAsyncJobResult ({command})"),
        message: e.to_string(),
    })
}
