//! `Sim`'s CloudStack side: endpoint and keys, the client, counters, faults and switches.

use std::time::Duration;

use super::client::CloudStackClient;
use super::jobs::NEVER_MS;
use super::model::Throttling;
use super::pipeline::METHOD;
use crate::faults::{FaultKind, FaultRule};
use crate::server::Sim;

impl Sim {
    /// `http://127.0.0.1:PORT/client/api`: a CloudStack client's `api-url`.
    pub fn cloudstack_endpoint(&self) -> String {
        format!("http://{}{}", self.addr(), super::PATH)
    }

    /// The primary account's (`admin`, a root admin) API key.
    pub fn cloudstack_api_key(&self) -> String {
        self.app().config.cloudstack_api_key.clone()
    }

    /// The primary account's secret key.
    pub fn cloudstack_secret_key(&self) -> String {
        self.app().config.cloudstack_secret_key.clone()
    }

    /// A client signing as the primary account, which also builds CloudStack worlds.
    pub fn cloudstack_client(&self) -> CloudStackClient {
        CloudStackClient::new(
            &self.cloudstack_endpoint(),
            &self.cloudstack_api_key(),
            &self.cloudstack_secret_key(),
        )
    }

    /// Requests received for `command` (`listVirtualMachines`), whatever their outcome; the
    /// same as `requests("CLOUDSTACK", command)`.
    pub fn cloudstack_calls(&self, command: &str) -> u64 {
        self.requests(METHOD, command)
    }

    /// All CloudStack requests received.
    pub fn cloudstack_total_calls(&self) -> u64 {
        self.request_counts()
            .iter()
            .filter(|(k, _)| k.starts_with(METHOD) && k.as_bytes().get(METHOD.len()) == Some(&b' '))
            .map(|(_, n)| n)
            .sum()
    }

    /// The next `n` requests for `command` (every command: `None`) fail with CloudStack error
    /// `errorcode` (431, 530, 531, ...), its usual `cserrorcode` and text. The rule's id.
    pub fn cloudstack_fail_next(&self, command: Option<&str>, n: u32, errorcode: u16) -> u64 {
        let endpoint = rule_endpoint(command);
        let cs = super::error::CsError::usual_cs_code(errorcode).to_string();
        self.faults().fail_next(Some(&endpoint), n, errorcode, &cs)
    }

    /// The jobs the next `n` requests for `command` (every command: `None`) start fail:
    /// `jobstatus` 2 with `errorcode` (530 is CloudStack's usual). The request itself succeeds,
    /// and the job's effect is not made. The rule's id.
    pub fn cloudstack_fail_jobs(&self, command: Option<&str>, n: u32, errorcode: u16) -> u64 {
        self.faults()
            .fail_actions(Some(&rule_endpoint(command)), n, &errorcode.to_string())
    }

    /// The jobs the next `n` requests for `command` start never finish: `jobstatus` 0 for good,
    /// and no effect. The rule's id.
    pub fn cloudstack_stall_jobs(&self, command: Option<&str>, n: u32) -> u64 {
        self.faults().add(FaultRule {
            endpoint: Some(rule_endpoint(command)),
            count: Some(n),
            probability: 1.0,
            every: None,
            kind: FaultKind::ActionDuration { ms: NEVER_MS },
        })
    }

    /// Every request answers 503 from the proxy in front of the management server (no
    /// CloudStack body) until switched back.
    pub fn set_cloudstack_unreachable(&self, unreachable: bool) {
        self.app().write().cloudstack.settings.unreachable = unreachable;
    }

    /// API throttling (`api.throttling.max` per `api.throttling.interval`, per account): over
    /// it, 429. `None` switches it off (CloudStack's default).
    pub fn set_cloudstack_throttling(&self, limit: Option<(u32, Duration)>) {
        let mut st = self.app().write();
        st.cloudstack.settings.throttling = limit.map(|(max, interval)| Throttling {
            max,
            interval_ms: u64::try_from(interval.as_millis()).unwrap_or(u64::MAX),
        });
        st.cloudstack.throttle_windows.clear();
    }
}

/// A fault rule's endpoint for one command, or every CloudStack command.
fn rule_endpoint(command: Option<&str>) -> String {
    match command {
        Some(c) => format!("{METHOD} {c}"),
        None => format!("{METHOD} *"),
    }
}
