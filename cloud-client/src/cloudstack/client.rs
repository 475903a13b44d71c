//! The CloudStack calls the provider makes, typed: VMs by id and by name, zones, projects, async
//! job results; lists read to their end, page by page.

use std::time::Instant;

use serde::de::DeserializeOwned;
use serde_json::Value;

use super::config::JobPolling;
use super::errors::code_of;
use super::transport::{Call, Transport};
use super::wire::{AsyncJob, Project, VirtualMachine, Zone, list};
use crate::error::CloudError;

/// The API as one configured account (and project) sees it. Cheap to clone.
#[derive(Debug, Clone)]
pub struct CloudStackApi {
    transport: Transport,
    /// `projectid` of every call that takes one: the project's id, resolved.
    project_id: Option<String>,
    jobs: JobPolling,
}

impl CloudStackApi {
    pub(crate) fn new(transport: Transport, project_id: Option<String>, jobs: JobPolling) -> Self {
        Self {
            transport,
            project_id,
            jobs,
        }
    }

    pub(crate) fn transport(&self) -> &Transport {
        &self.transport
    }

    /// `call` scoped to the project, when there is one.
    pub(crate) fn scoped(&self, call: Call) -> Call {
        match &self.project_id {
            Some(p) => call.param("projectid", p.clone()),
            None => call,
        }
    }

    /// The configured project's id.
    pub(crate) fn project_id(&self) -> Option<&str> {
        self.project_id.as_deref()
    }

    /// The VM with id `id`, in the project when `in_project` (and one is configured), else
    /// wherever the keys may see it. `None` only when the API answered a well-formed empty list
    /// for that id: its own word that no such VM exists there, which may delete a Node. An
    /// answer that lists VMs but not this one is an error, never `None`.
    pub(crate) async fn vm_by_id(
        &self,
        id: &str,
        in_project: bool,
    ) -> Result<Option<VirtualMachine>, CloudError> {
        let call = Call::read("listVirtualMachines", "listVirtualMachines?id={id}").param("id", id);
        let call = if in_project { self.scoped(call) } else { call };
        let answer = self.transport.call(&call).await?;
        let (_, items) = list(&answer, "virtualmachine").ok_or_else(|| not_a_list(&call))?;
        if items.is_empty() {
            return Ok(None);
        }
        let vms: Vec<VirtualMachine> = decode(&call, items)?;
        match vms.into_iter().find(|vm| vm.id.eq_ignore_ascii_case(id)) {
            Some(vm) => Ok(Some(vm)),
            None => Err(CloudError::Inconsistent {
                message: format!(
                    "listVirtualMachines for id {id} answered other VMs, not that one; the VM's \
                     existence is unknown"
                ),
            }),
        }
    }

    /// The VMs whose name contains `name` (CloudStack's `name` filter is a case-insensitive
    /// substring match; the caller looks for the exact name), in `zone_id` when given: every
    /// page.
    pub(crate) async fn vms_named(
        &self,
        name: &str,
        zone_id: Option<&str>,
    ) -> Result<Vec<VirtualMachine>, CloudError> {
        let mut call = self.scoped(
            Call::read("listVirtualMachines", "listVirtualMachines?name={name}")
                .param("name", name),
        );
        if let Some(zone) = zone_id {
            call = call.param("zoneid", zone);
        }
        let mut vms: Vec<VirtualMachine> = self.list_all(call, "virtualmachine").await?;
        // A VM that moved between pages while they were read is listed once.
        let mut seen = std::collections::HashSet::new();
        vms.retain(|vm| seen.insert(vm.id.clone()));
        Ok(vms)
    }

    /// Every zone the account may use.
    pub(crate) async fn zones(&self) -> Result<Vec<Zone>, CloudError> {
        self.list_all(Call::read("listZones", "listZones"), "zone")
            .await
    }

    /// The project with id `id`, or the projects named `name` (exact, case-insensitive), that
    /// the account may use.
    pub(crate) async fn projects(
        &self,
        id: Option<&str>,
        name: Option<&str>,
    ) -> Result<Vec<Project>, CloudError> {
        let mut call = Call::read("listProjects", "listProjects");
        if let Some(id) = id {
            call = Call::read("listProjects", "listProjects?id={id}").param("id", id);
        }
        if let Some(name) = name {
            call = Call::read("listProjects", "listProjects?name={name}").param("name", name);
        }
        self.list_all(call, "project").await
    }

    /// Waits for async job `jobid` (started by `command`) and returns its `jobresult`: polled at
    /// once, then ever less often, until [`JobPolling::timeout`].
    pub async fn wait_job(&self, jobid: &str, command: &str) -> Result<Value, CloudError> {
        let started = Instant::now();
        let mut wait = self.jobs.initial;
        loop {
            // Not at once: a job is never done the moment it is accepted, and a poll that only
            // says "running" is a call for nothing (upstream's client polls a 500 ms job twice).
            tokio::time::sleep(wait).await;
            wait = wait.mul_f64(self.jobs.factor).min(self.jobs.max);
            let call =
                Call::read("queryAsyncJobResult", "queryAsyncJobResult").param("jobid", jobid);
            let answer = self.transport.call(&call).await?;
            self.transport.stats().record_action_poll();
            let job: AsyncJob = serde_json::from_value(answer).map_err(|e| CloudError::Decode {
                method: "GET".into(),
                endpoint: call.template.into(),
                message: e.to_string(),
            })?;
            match job.jobstatus {
                1 => return Ok(job.jobresult.unwrap_or(Value::Null)),
                2 => return Err(self.job_failed(jobid, command, &job)),
                _ if started.elapsed() + wait > self.jobs.timeout => {
                    return Err(CloudError::Timeout {
                        operation: format!(
                            "async job {jobid} ({command}) still running; it may finish later"
                        ),
                        after: self.jobs.timeout,
                    });
                }
                _ => {}
            }
        }
    }

    fn job_failed(&self, jobid: &str, command: &str, job: &AsyncJob) -> CloudError {
        let result = job.jobresult.as_ref();
        let errorcode = result
            .and_then(|r| r.get("errorcode"))
            .and_then(Value::as_u64)
            .map_or(job.jobresultcode, |c| c as i64);
        let text = result
            .and_then(|r| r.get("errortext"))
            .and_then(Value::as_str)
            .map(str::to_owned)
            .or_else(|| result.and_then(Value::as_str).map(str::to_owned))
            .unwrap_or_default();
        CloudError::ActionFailed {
            id: jobid.to_owned(),
            command: command.to_owned(),
            code: code_of(u16::try_from(errorcode).unwrap_or(0)).to_owned(),
            message: self
                .transport
                .redact(format!("CloudStack error {errorcode}: {text}")),
        }
    }

    /// Every item under `key` of a list, page after page. The first page is asked for without
    /// `page`/`pagesize` (the operator's `default.page.size` answers, and no page size the
    /// server would refuse is sent); when `count` says there is more, the next pages are asked
    /// for in that size.
    pub(crate) async fn list_all<T: DeserializeOwned>(
        &self,
        call: Call,
        key: &str,
    ) -> Result<Vec<T>, CloudError> {
        let answer = self.transport.call(&call).await?;
        let (count, items) = list(&answer, key).ok_or_else(|| not_a_list(&call))?;
        let page_size = items.len();
        let mut out: Vec<T> = decode(&call, items)?;
        let mut page = 1;
        while (out.len() as u64) < count && page_size > 0 {
            page += 1;
            let next = call
                .clone()
                .param("page", page.to_string())
                .param("pagesize", page_size.to_string());
            let answer = self.transport.call(&next).await?;
            let (_, items) = list(&answer, key).ok_or_else(|| not_a_list(&next))?;
            if items.is_empty() {
                break;
            }
            out.extend(decode::<T>(&next, items)?);
        }
        Ok(out)
    }
}

fn decode<T: DeserializeOwned>(call: &Call, items: &[Value]) -> Result<Vec<T>, CloudError> {
    items
        .iter()
        .map(|v| {
            serde_json::from_value(v.clone()).map_err(|e| CloudError::Decode {
                method: "GET".into(),
                endpoint: call.template.into(),
                message: e.to_string(),
            })
        })
        .collect()
}

fn not_a_list(call: &Call) -> CloudError {
    CloudError::Decode {
        method: "GET".into(),
        endpoint: call.template.into(),
        message: "the answer is not a list (`count` and an array)".into(),
    }
}
