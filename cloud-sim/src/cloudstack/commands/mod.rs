//! The API commands the simulator answers, one module per area: `compute` (VMs, zones,
//! offerings, networks, projects, capabilities, management servers, async job results).
//! A handler gets the world locked for the request and returns the inner object of its answer;
//! the pipeline wraps it in `{"<command>response": ...}`.

pub mod compute;

use serde_json::Value;

use super::access::Caller;
use super::error::CsError;
use super::model::World;
use super::params::Params;

/// What a handler works with.
#[derive(Debug)]
pub struct Ctx<'a> {
    pub world: &'a mut World,
    pub caller: Caller,
    pub params: &'a Params,
    pub now: u64,
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
];

/// The command by its exact name (CloudStack's names are case-sensitive).
pub fn find(name: &str) -> Option<&'static Command> {
    COMMANDS.iter().find(|c| c.name == name)
}

/// Case-insensitive substring match, as MySQL's `LIKE '%x%'` under CloudStack's collation.
pub fn like(haystack: &str, needle: &str) -> bool {
    haystack.to_lowercase().contains(&needle.to_lowercase())
}
