//! Async jobs: what a write command answers at once (`{"jobid"}`, or `{"id", "jobid"}` for a
//! create), and what `queryAsyncJobResult` answers until and after the job is done: `jobstatus`
//! 0 (pending), 1 (done, `jobresult` the object or `{"success": true}`) or 2 (failed,
//! `jobresult` `{"errorcode", "errortext"}`).
//!
//! Fault rules decide a job's fate when its command arrives: an `action_error` rule makes it
//! fail (its `code` is the error code, 530 unless numeric), an `action_duration` rule makes it
//! take that long, `u64::MAX` milliseconds meaning never. World building makes jobs of any fate
//! directly (`/_sim/cloudstack/jobs`).

use serde_json::{Map, Value, json};

use super::access::Caller;
use super::model::{Job, JobOutcome, World};
use super::render::cs_date;
use crate::faults::Decision;

/// The fate fault rules gave the job a request starts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JobPlan {
    /// Fail with this error code and text instead of doing anything.
    pub fail: Option<(u16, String)>,
    /// How long the job runs; `Some(u64::MAX)` never finishes. `None`: the configured duration.
    pub duration_ms: Option<u64>,
}

/// Milliseconds that stand for "never" in an `action_duration` rule.
pub const NEVER_MS: u64 = u64::MAX;

impl JobPlan {
    pub fn from_decision(d: &Decision) -> JobPlan {
        JobPlan {
            fail: d.action_error.as_ref().map(|f| {
                let code = f.code.parse::<u16>().unwrap_or(530);
                let text = if f.message.starts_with("injected action failure") {
                    format!("Failed to run the job (injected fault {code})")
                } else {
                    f.message.clone()
                };
                (code, text)
            }),
            duration_ms: d
                .action_duration
                .map(|d| u64::try_from(d.as_millis()).unwrap_or(NEVER_MS)),
        }
    }

    /// Whether the job stays pending for good.
    pub fn stalls(&self) -> bool {
        self.duration_ms == Some(NEVER_MS)
    }
}

/// The Java command class a job's `cmd` names.
fn command_class(command: &str) -> String {
    let (package, class) = match command {
        "associateIpAddress" => ("address", "AssociateIPAddrCmd"),
        "disassociateIpAddress" => ("address", "DisassociateIPAddrCmd"),
        "createLoadBalancerRule" => ("loadbalancer", "CreateLoadBalancerRuleCmd"),
        "deleteLoadBalancerRule" => ("loadbalancer", "DeleteLoadBalancerRuleCmd"),
        "updateLoadBalancerRule" => ("loadbalancer", "UpdateLoadBalancerRuleCmd"),
        "assignToLoadBalancerRule" => ("loadbalancer", "AssignToLoadBalancerRuleCmd"),
        "removeFromLoadBalancerRule" => ("loadbalancer", "RemoveFromLoadBalancerRuleCmd"),
        "createFirewallRule" => ("firewall", "CreateFirewallRuleCmd"),
        "deleteFirewallRule" => ("firewall", "DeleteFirewallRuleCmd"),
        "createNetworkACL" => ("network", "CreateNetworkACLCmd"),
        "deleteNetworkACL" => ("network", "DeleteNetworkACLCmd"),
        other => ("misc", other),
    };
    format!("org.apache.cloudstack.api.command.user.{package}.{class}")
}

impl World {
    /// Records a job for `caller` and returns its id. `outcome` is what it ends with;
    /// `done_at_ms` `None` never ends.
    pub fn submit_job(
        &mut self,
        caller: &Caller,
        command: &str,
        instance: (&str, Option<String>),
        outcome: JobOutcome,
        created_ms: u64,
        done_at_ms: Option<u64>,
    ) -> String {
        let (id, seq) = self.new_id();
        self.jobs.insert(
            seq,
            Job {
                id: id.clone(),
                seq,
                command: command.into(),
                account_id: caller.account_id.clone(),
                user_id: caller.user_id.clone(),
                created_ms,
                done_at_ms,
                outcome,
                instance_type: instance.0.into(),
                instance_id: instance.1,
            },
        );
        id
    }

    pub fn job(&self, id: &str) -> Option<&Job> {
        self.jobs.values().find(|j| j.id == id)
    }
}

/// `queryAsyncJobResult`'s object for `job` as of `now`.
pub fn job_json(world: &World, job: &Job, now: u64) -> Value {
    let account = world.account(&job.account_id);
    let mut m = match json!({
        "accountid": job.account_id,
        "account": account.map(|a| a.name.as_str()).unwrap_or_default(),
        "domainid": super::world::ROOT_DOMAIN_ID,
        "domainpath": "ROOT",
        "userid": job.user_id,
        "cmd": command_class(&job.command),
        "jobprocstatus": 0,
        "jobinstancetype": job.instance_type,
        "created": cs_date(job.created_ms),
        "jobid": job.id,
    }) {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    if let Some(instance) = &job.instance_id {
        m.insert("jobinstanceid".into(), json!(instance));
    }
    let done = job.done_at_ms.filter(|at| *at <= now);
    match (done, &job.outcome) {
        (None, _) => {
            m.insert("jobstatus".into(), json!(0));
            m.insert("jobresultcode".into(), json!(0));
        }
        (Some(at), JobOutcome::Success(result)) => {
            m.insert("jobstatus".into(), json!(1));
            m.insert("jobresultcode".into(), json!(0));
            m.insert("jobresulttype".into(), json!("object"));
            m.insert("jobresult".into(), result.clone());
            m.insert("completed".into(), json!(cs_date(at)));
        }
        (Some(at), JobOutcome::Failure { errorcode, text }) => {
            m.insert("jobstatus".into(), json!(2));
            m.insert("jobresultcode".into(), json!(errorcode));
            m.insert("jobresulttype".into(), json!("object"));
            m.insert(
                "jobresult".into(),
                json!({"errorcode": errorcode, "errortext": text}),
            );
            m.insert("completed".into(), json!(cs_date(at)));
        }
    }
    Value::Object(m)
}
