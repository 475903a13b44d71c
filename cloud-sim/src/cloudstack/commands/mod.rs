//! The API commands the simulator answers, one module per area: `compute` (VMs, zones,
//! offerings, networks, projects, capabilities, management servers, async job results),
//! `addresses` (public IPs), `load_balancers`, `firewall` (firewall rules and network ACLs).
//! A handler gets the world locked for the request and returns the inner object of its answer;
//! the pipeline wraps it in `{"<command>response": ...}`.

pub mod addresses;
pub mod compute;
pub mod firewall;
pub mod load_balancers;

use serde_json::{Value, json};

use super::access::Caller;
use super::error::CsError;
use super::jobs::JobPlan;
use super::model::{JobOutcome, World};
use super::params::Params;

/// What a handler works with.
#[derive(Debug)]
pub struct Ctx<'a> {
    pub world: &'a mut World,
    pub caller: Caller,
    pub params: &'a Params,
    pub now: u64,
    /// How long a job takes unless a fault rule says otherwise.
    pub job_ms: u64,
    pub plan: JobPlan,
}

pub type Handler = fn(&mut Ctx) -> Result<Value, CsError>;

/// A command: its name as sent, whether only root admins may use it, its handler.
#[derive(Debug)]
pub struct Command {
    pub name: &'static str,
    pub admin_only: bool,
    pub run: Handler,
}

const fn cmd(name: &'static str, run: Handler) -> Command {
    Command {
        name,
        admin_only: false,
        run,
    }
}

pub const COMMANDS: &[Command] = &[
    cmd("listVirtualMachines", compute::list_virtual_machines),
    cmd("listZones", compute::list_zones),
    cmd("listServiceOfferings", compute::list_service_offerings),
    cmd("listNetworks", compute::list_networks),
    cmd("listProjects", compute::list_projects),
    cmd("listCapabilities", compute::list_capabilities),
    Command {
        name: "listManagementServersMetrics",
        admin_only: true,
        run: compute::list_management_servers_metrics,
    },
    cmd("queryAsyncJobResult", compute::query_async_job_result),
    cmd("listPublicIpAddresses", addresses::list_public_ip_addresses),
    cmd("associateIpAddress", addresses::associate_ip_address),
    cmd("disassociateIpAddress", addresses::disassociate_ip_address),
    cmd("listLoadBalancerRules", load_balancers::list_rules),
    cmd("createLoadBalancerRule", load_balancers::create_rule),
    cmd("updateLoadBalancerRule", load_balancers::update_rule),
    cmd("deleteLoadBalancerRule", load_balancers::delete_rule),
    cmd("assignToLoadBalancerRule", load_balancers::assign),
    cmd("removeFromLoadBalancerRule", load_balancers::remove),
    cmd(
        "listLoadBalancerRuleInstances",
        load_balancers::list_instances,
    ),
    cmd("listFirewallRules", firewall::list_firewall_rules),
    cmd("createFirewallRule", firewall::create_firewall_rule),
    cmd("deleteFirewallRule", firewall::delete_firewall_rule),
    cmd("listNetworkACLLists", firewall::list_acl_lists),
    cmd("listNetworkACLs", firewall::list_acls),
    cmd("createNetworkACL", firewall::create_acl),
    cmd("deleteNetworkACL", firewall::delete_acl),
];

/// The command by its exact name (CloudStack's names are case-sensitive).
pub fn find(name: &str) -> Option<&'static Command> {
    COMMANDS.iter().find(|c| c.name == name)
}

impl Ctx<'_> {
    /// Whether a job started now does its work (no fault rule fails or stalls it). A create
    /// command makes its object only then.
    pub fn job_runs(&self) -> bool {
        self.plan.fail.is_none() && !self.plan.stalls()
    }

    /// Starts a job whose effect `effect` makes (now, unless the plan fails or stalls the job,
    /// which then does nothing) and whose `jobresult` it returns. `created`: the id of the object
    /// a create command makes, which its first answer carries beside the job id.
    pub fn job(
        &mut self,
        instance_type: &str,
        created: Option<String>,
        effect: impl FnOnce(&mut World) -> Result<Value, CsError>,
    ) -> Result<Value, CsError> {
        let command = self.params.command().unwrap_or_default().to_owned();
        let instance_id = created
            .clone()
            .or_else(|| self.params.get("id").map(str::to_owned));
        let outcome = match (&self.plan.fail, self.plan.stalls()) {
            (Some((errorcode, text)), _) => JobOutcome::Failure {
                errorcode: *errorcode,
                text: text.clone(),
            },
            (None, true) => JobOutcome::Failure {
                errorcode: 530,
                text: "never finishes".into(),
            },
            (None, false) => match effect(self.world) {
                Ok(result) => JobOutcome::Success(result),
                // A check only the job makes: the job fails, the request did not.
                Err(e) => JobOutcome::Failure {
                    errorcode: e.errorcode,
                    text: e.text,
                },
            },
        };
        let done_at = match self.plan.duration_ms {
            Some(super::jobs::NEVER_MS) => None,
            Some(ms) => Some(self.now + ms),
            None => Some(self.now + self.job_ms),
        };
        let job_id = self.world.submit_job(
            &self.caller,
            &command,
            (instance_type, instance_id),
            outcome,
            self.now,
            done_at,
        );
        Ok(match created {
            Some(id) => json!({"id": id, "jobid": job_id}),
            None => json!({"jobid": job_id}),
        })
    }
}

/// Case-insensitive substring match, as MySQL's `LIKE '%x%'` under CloudStack's collation.
pub fn like(haystack: &str, needle: &str) -> bool {
    haystack.to_lowercase().contains(&needle.to_lowercase())
}
