//! `Instances` for CloudStack VMs: a Node's VM by its providerID's id once it has one, by its
//! name only before; never guessed.
//!
//! - **By id** (`listVirtualMachines id=…`): an empty answer for the VM's own id, or the VM in
//!   state `Destroyed` or `Expunging`, is the API's word that it is gone. An error is never
//!   "gone". With a project configured, an empty answer in the project is asked again without
//!   it: a VM found outside the project is an error (a wrong `project-id` would otherwise make
//!   every NotReady Node's VM look gone), not a deletion.
//! - **By name** (`listVirtualMachines name=…`, in the configured zone): CloudStack matches the
//!   name as a substring, so the VM is the one whose name is the Node's (case aside: DNS names);
//!   VMs being destroyed do not count. Two such VMs (CloudStack allows equal names across
//!   accounts, projects and networks) are an error naming both, not a guess: the Node stays
//!   uninitialized until its providerID says which.
//! - Every call carries the configured project (`projectid`).
//!
//! A NotReady Node's check asks whether its VM exists and then whether it is off: the second
//! answer comes from the VM the first read, when that read is at most [`RECENT`] old, so one
//! check is one call and sees one state of the VM.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use async_trait::async_trait;

use super::client::CloudStackApi;
use super::metadata::{self, Power};
use super::provider_id;
use super::wire::VirtualMachine;
use crate::capabilities::{InstanceMetadata, Instances, NodeRef};
use crate::error::CloudError;

/// How long a VM read by id answers the shutdown check that follows its existence check.
pub const RECENT: Duration = Duration::from_secs(1);

/// The Node's VM, or why there is none.
#[derive(Debug)]
enum Lookup {
    Found(Box<VirtualMachine>),
    /// The API said so for the VM's own id.
    Gone(String),
    /// No VM has the Node's name (a name lookup can never prove a VM gone).
    NotFound(Vec<String>),
}

#[derive(Debug)]
pub struct CloudStackInstances {
    api: CloudStackApi,
    /// The configured zone's id: name lookups look there only.
    zone_id: Option<String>,
    /// The configured zone and project, for messages.
    scope: String,
    /// The configured region (else each VM's zone name).
    region: Option<String>,
    recent: Mutex<HashMap<String, (Instant, VirtualMachine)>>,
}

impl CloudStackInstances {
    pub(crate) fn new(
        api: CloudStackApi,
        zone_id: Option<String>,
        scope: String,
        region: Option<String>,
    ) -> Self {
        Self {
            api,
            zone_id,
            scope,
            region,
            recent: Mutex::new(HashMap::new()),
        }
    }

    /// `reuse`: a VM read by id within [`RECENT`] answers instead of a new read.
    async fn lookup(&self, node: &NodeRef, reuse: bool) -> Result<Lookup, CloudError> {
        let Some(pid) = node.provider_id.as_deref().filter(|p| !p.is_empty()) else {
            return self.by_name(&node.name).await;
        };
        let id = provider_id::vm_id(pid)?;
        let known = if reuse { self.recent(id) } else { None };
        let vm = match known {
            Some(vm) => Some(vm),
            None => self.vm_by_id(id).await?,
        };
        Ok(match vm {
            None => Lookup::Gone(format!(
                "listVirtualMachines answered no VM for its providerID's id {id}{}",
                self.scope
            )),
            Some(vm) if Power::of(&vm.state) == Power::Gone => {
                Lookup::Gone(format!("VM {id} is {}", vm.state))
            }
            Some(vm) => {
                self.remember(&vm);
                Lookup::Found(Box::new(vm))
            }
        })
    }

    /// The VM `id` in the project; none there is confirmed outside it (see the module comment).
    async fn vm_by_id(&self, id: &str) -> Result<Option<VirtualMachine>, CloudError> {
        let found = self.api.vm_by_id(id, true).await?;
        let Some(project) = self.api.project_id().filter(|_| found.is_none()) else {
            return Ok(found);
        };
        match self.api.vm_by_id(id, false).await? {
            None => Ok(None),
            Some(vm) => Err(CloudError::Inconsistent {
                message: format!(
                    "VM {id} exists, but not in the configured project {project} (it is {}'s): \
                     check project-id in the cloud-config",
                    vm.project
                        .as_deref()
                        .map(|p| format!("project {p}"))
                        .or_else(|| vm.account.as_deref().map(|a| format!("account {a}")))
                        .unwrap_or_else(|| "another owner".to_owned())
                ),
            }),
        }
    }

    async fn by_name(&self, name: &str) -> Result<Lookup, CloudError> {
        let listed = self.api.vms_named(name, self.zone_id.as_deref()).await?;
        let mut found = exact_matches(listed, name);
        match found.len() {
            0 => Ok(Lookup::NotFound(vec![format!(
                "VM name {name:?} (node has no providerID){}",
                self.scope
            )])),
            1 => Ok(Lookup::Found(Box::new(found.remove(0)))),
            _ => Err(CloudError::Inconsistent {
                message: ambiguous(name, &found),
            }),
        }
    }

    fn recent(&self, id: &str) -> Option<VirtualMachine> {
        let recent = self.recent.lock().unwrap_or_else(|e| e.into_inner());
        recent
            .get(id)
            .filter(|(at, _)| at.elapsed() < RECENT)
            .map(|(_, vm)| vm.clone())
    }

    fn remember(&self, vm: &VirtualMachine) {
        let mut recent = self.recent.lock().unwrap_or_else(|e| e.into_inner());
        recent.retain(|_, (at, _)| at.elapsed() < RECENT);
        recent.insert(vm.id.clone(), (Instant::now(), vm.clone()));
    }
}

/// The VMs among `listed` (a name filter's substring matches) whose name is `name`, case aside,
/// and that are not being destroyed.
fn exact_matches(listed: Vec<VirtualMachine>, name: &str) -> Vec<VirtualMachine> {
    listed
        .into_iter()
        .filter(|vm| vm.name.eq_ignore_ascii_case(name))
        .filter(|vm| Power::of(&vm.state) != Power::Gone)
        .collect()
}

/// Why a name that several VMs have matches none of them.
fn ambiguous(name: &str, vms: &[VirtualMachine]) -> String {
    let each: Vec<String> = vms
        .iter()
        .map(|vm| {
            let owner = match (&vm.project, &vm.account) {
                (Some(p), _) => format!("project {p}"),
                (None, Some(a)) => format!("account {a}"),
                (None, None) => "owner unknown".to_owned(),
            };
            format!("{} ({owner}, zone {})", vm.id, vm.zonename)
        })
        .collect();
    format!(
        "node {name:?} matches {} VMs named so: {}. CloudStack allows equal names across \
         accounts, projects and networks, and none is picked by guessing: set the Node's \
         providerID ({}<VM id>), set zone or project-id in the cloud-config, or rename the \
         other VMs",
        vms.len(),
        each.join(", "),
        provider_id::PREFIX
    )
}

fn not_found(node: &NodeRef, tried: Vec<String>) -> CloudError {
    CloudError::NotFound {
        what: format!("VM for node {:?}", node.name),
        tried,
    }
}

#[async_trait]
impl Instances for CloudStackInstances {
    /// `Ok(false)` only when the API said so for the VM's own id (see the module comment).
    async fn instance_exists(&self, node: &NodeRef) -> Result<bool, CloudError> {
        match self.lookup(node, false).await? {
            Lookup::Found(_) => Ok(true),
            Lookup::Gone(_) => Ok(false),
            Lookup::NotFound(tried) => Err(not_found(node, tried)),
        }
    }

    /// `Stopped` is off; `Stopping` is not yet (see [`Power`]).
    async fn instance_shutdown(&self, node: &NodeRef) -> Result<bool, CloudError> {
        match self.lookup(node, true).await? {
            Lookup::Found(vm) => Ok(Power::of(&vm.state) == Power::Off),
            Lookup::Gone(why) => Err(not_found(node, vec![why])),
            Lookup::NotFound(tried) => Err(not_found(node, tried)),
        }
    }

    async fn instance_metadata(&self, node: &NodeRef) -> Result<InstanceMetadata, CloudError> {
        match self.lookup(node, false).await? {
            Lookup::Found(vm) => Ok(metadata::of(&vm, &node.name, self.region.as_deref())),
            Lookup::Gone(why) => Err(not_found(node, vec![why])),
            Lookup::NotFound(tried) => Err(not_found(node, tried)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vm(id: &str, name: &str, state: &str) -> VirtualMachine {
        VirtualMachine {
            id: id.into(),
            name: name.into(),
            state: state.into(),
            zonename: "zone-1".into(),
            ..Default::default()
        }
    }

    #[test]
    fn only_the_exact_name_of_a_vm_not_being_destroyed_matches() {
        let listed = vec![
            vm("1", "worker-1", "Running"),
            vm("2", "worker-10", "Running"),
            vm("3", "old-worker-1", "Running"),
            vm("4", "Worker-1", "Stopped"),
            vm("5", "worker-1", "Destroyed"),
            vm("6", "worker-1", "Expunging"),
        ];
        let ids: Vec<String> = exact_matches(listed, "worker-1")
            .into_iter()
            .map(|v| v.id)
            .collect();
        assert_eq!(ids, ["1", "4"]);
        // A lone substring match is not the Node's VM (upstream took it).
        assert!(exact_matches(vec![vm("2", "worker-10", "Running")], "worker-1").is_empty());
    }

    #[test]
    fn an_ambiguous_name_names_every_vm_and_what_to_do() {
        let mut a = vm("aaaa", "dup", "Running");
        a.project = Some("team-a".into());
        let mut b = vm("bbbb", "dup", "Stopped");
        b.account = Some("admin".into());
        b.zonename = "zone-2".into();
        let m = ambiguous("dup", &[a, b]);
        assert!(
            m.starts_with(
                "node \"dup\" matches 2 VMs named so: aaaa (project team-a, zone zone-1), bbbb \
                 (account admin, zone zone-2)"
            ),
            "{m}"
        );
        assert!(m.contains("external-cloudstack://<VM id>"), "{m}");
    }
}
