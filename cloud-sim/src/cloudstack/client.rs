//! `CloudStackClient`: calls the CloudStack API the way apache/cloudstack-go does (its own
//! signing, written from cloudstack-go's `newRawRequest` and `EncodeValues`, not from the
//! simulator's verifier: Go's `QueryEscape` with `+` → `%20` and `%2A` → `*`, signature version
//! 3 with an `expires` 15 minutes ahead), and builds CloudStack worlds through `/_sim/cloudstack`.
//!
//! ```no_run
//! # async fn demo() {
//! let sim = cloud_sim::Sim::start().await;
//! let cs = sim.cloudstack_client();
//! let p = cs.create_project("team-a", &[]).await.unwrap();
//! let vm = cs.create_vm(&cloud_sim::CsVmSpec::named("node-1").project(&p)).await.unwrap();
//! let found = cs.call("listVirtualMachines", &[("id", &vm), ("projectid", &p)]).await.unwrap();
//! assert_eq!(found["count"], 1);
//! # }
//! ```

use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::Value;

use super::crypto::{base64, hmac_sha1};
use crate::clock::{now_ms, rfc3339};
use crate::faults::UNFAULTED_HEADER;

#[derive(Debug, thiserror::Error)]
pub enum CsClientError {
    /// The API answered with CloudStack's error body.
    #[error(
        "{command}: HTTP {status}: CloudStack API error {errorcode} (CSExceptionErrorCode: {cserrorcode:?}): {errortext}"
    )]
    Api {
        command: String,
        status: u16,
        errorcode: u16,
        cserrorcode: Option<u32>,
        errortext: String,
    },
    #[error("HTTP transport: {0}")]
    Http(#[from] reqwest::Error),
    #[error("job {jobid} failed: {errorcode}: {errortext}")]
    JobFailed {
        jobid: String,
        errorcode: u16,
        errortext: String,
    },
    #[error("job {0} still pending after the deadline")]
    JobTimeout(String),
    #[error("world building: HTTP {status}: {body}")]
    Control { status: u16, body: Value },
    #[error("unexpected response: {0}")]
    Unexpected(String),
}

impl CsClientError {
    /// The CloudStack `errorcode` (or a failed job's), if the API answered with one.
    pub fn errorcode(&self) -> Option<u16> {
        match self {
            CsClientError::Api { errorcode, .. } | CsClientError::JobFailed { errorcode, .. } => {
                Some(*errorcode)
            }
            _ => None,
        }
    }
}

/// An answer as it came: status and body (JSON, a string for a non-JSON body, `Null` if empty).
#[derive(Debug, Clone)]
pub struct CsResponse {
    pub status: u16,
    pub body: Value,
}

type Result<T, E = CsClientError> = std::result::Result<T, E>;

/// A VM for world building; unset fields take the world's defaults (zone `zone-1`, `Small
/// Instance`, the zone's first network of the owner, `Running`, the primary account).
#[derive(Debug, Clone, Default, Serialize)]
pub struct CsVmSpec {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offering: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub account: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub project: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ip: Option<String>,
    pub static_nat: bool,
}

impl CsVmSpec {
    pub fn named(name: &str) -> CsVmSpec {
        CsVmSpec {
            name: Some(name.into()),
            ..Default::default()
        }
    }

    pub fn project(mut self, project: &str) -> Self {
        self.project = Some(project.into());
        self
    }

    pub fn account(mut self, account: &str) -> Self {
        self.account = Some(account.into());
        self
    }

    pub fn zone(mut self, zone: &str) -> Self {
        self.zone = Some(zone.into());
        self
    }

    pub fn offering(mut self, offering: &str) -> Self {
        self.offering = Some(offering.into());
        self
    }

    pub fn network(mut self, network: &str) -> Self {
        self.network = Some(network.into());
        self
    }

    pub fn state(mut self, state: &str) -> Self {
        self.state = Some(state.into());
        self
    }

    /// With a static-NAT public address (the VM's `publicip`).
    pub fn static_nat(mut self) -> Self {
        self.static_nat = true;
        self
    }
}

/// cloudstack-go's value escaping: `url.QueryEscape` (letters, digits and `-_.~` stay, space is
/// `+`, the rest `%XX`), then `+` → `%20` and `%2A` → `*`.
fn go_escape(value: &str) -> String {
    let mut out = String::new();
    for b in value.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(b as char)
            }
            b' ' => out.push_str("%20"),
            b'*' => out.push('*'),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// `url.QueryEscape` itself, for the signature in a GET URL and the form body of a POST.
fn query_escape(value: &str) -> String {
    go_escape(value).replace("%20", "+").replace('*', "%2A")
}

/// A client of one simulator's CloudStack API (or any CloudStack endpoint).
#[derive(Debug, Clone)]
pub struct CloudStackClient {
    pub(super) http: reqwest::Client,
    endpoint: String,
    pub(super) base: String,
    api_key: String,
    secret_key: String,
    post: bool,
    unfaulted: bool,
    pub(super) poll: Duration,
    pub(super) job_deadline: Duration,
}

impl CloudStackClient {
    /// `endpoint`: `http://127.0.0.1:PORT/client/api`.
    pub fn new(endpoint: &str, api_key: &str, secret_key: &str) -> CloudStackClient {
        let endpoint = endpoint.trim_end_matches('/').to_owned();
        let base = endpoint
            .strip_suffix(super::PATH)
            .unwrap_or(&endpoint)
            .to_owned();
        CloudStackClient {
            // No proxy: the simulator is always on loopback, whatever HTTP_PROXY says.
            http: reqwest::Client::builder()
                .no_proxy()
                .timeout(Duration::from_secs(60))
                .build()
                .unwrap_or_default(),
            endpoint,
            base,
            api_key: api_key.into(),
            secret_key: secret_key.into(),
            post: false,
            unfaulted: false,
            poll: Duration::from_millis(10),
            job_deadline: Duration::from_secs(30),
        }
    }

    /// A copy that signs with another key pair (another account, or a wrong secret).
    pub fn with_keys(&self, api_key: &str, secret_key: &str) -> CloudStackClient {
        CloudStackClient {
            api_key: api_key.into(),
            secret_key: secret_key.into(),
            ..self.clone()
        }
    }

    /// A copy that sends its API calls as form POSTs, as cloudstack-go does for writes.
    pub fn using_post(&self) -> CloudStackClient {
        CloudStackClient {
            post: true,
            ..self.clone()
        }
    }

    /// A copy whose calls the fault rules leave alone ([`UNFAULTED_HEADER`]).
    pub fn unfaulted(&self) -> CloudStackClient {
        CloudStackClient {
            unfaulted: true,
            ..self.clone()
        }
    }

    /// A copy that waits at most `deadline` for a job.
    pub fn job_deadline(&self, deadline: Duration) -> CloudStackClient {
        CloudStackClient {
            job_deadline: deadline,
            ..self.clone()
        }
    }

    /// The parameters of a call as cloudstack-go sends them, signature last, each `(name,
    /// value)` unescaped; `extra` may override the fixed ones (an `expires` in the past).
    pub fn signed_params(&self, command: &str, params: &[(&str, &str)]) -> Vec<(String, String)> {
        let expires = rfc3339(now_ms() + 15 * 60 * 1000).replace("+00:00", "Z");
        let mut all: Vec<(String, String)> = vec![
            ("apiKey".into(), self.api_key.clone()),
            ("command".into(), command.into()),
            ("response".into(), "json".into()),
            ("signatureversion".into(), "3".into()),
            ("expires".into(), expires),
        ];
        for (k, v) in params {
            match all.iter_mut().find(|(name, _)| name == k) {
                Some(slot) => slot.1 = (*v).to_owned(),
                None => all.push(((*k).to_owned(), (*v).to_owned())),
            }
        }
        all.sort_by(|a, b| a.0.cmp(&b.0));
        let encoded = encode_values(&all);
        let signature = base64(&hmac_sha1(
            self.secret_key.as_bytes(),
            encoded.to_lowercase().as_bytes(),
        ));
        all.push(("signature".into(), signature));
        all
    }

    /// Sends a call and returns the answer as it came.
    pub async fn raw(&self, command: &str, params: &[(&str, &str)]) -> Result<CsResponse> {
        let mut all = self.signed_params(command, params);
        let req = if self.post {
            let body = all
                .iter()
                .map(|(k, v)| format!("{}={}", query_escape(k), query_escape(v)))
                .collect::<Vec<_>>()
                .join("&");
            self.http
                .post(&self.endpoint)
                .header("content-type", "application/x-www-form-urlencoded")
                .body(body)
        } else {
            let (_, signature) = all.pop().unwrap_or_default();
            let url = format!(
                "{}?{}&signature={}",
                self.endpoint,
                encode_values(&all),
                query_escape(&signature)
            );
            self.http.get(url)
        };
        let req = if self.unfaulted {
            req.header(UNFAULTED_HEADER, "1")
        } else {
            req
        };
        let resp = req.send().await?;
        let status = resp.status().as_u16();
        let text = resp.text().await?;
        let body = if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or(Value::String(text))
        };
        Ok(CsResponse { status, body })
    }

    /// Calls `command` and returns the inner object of a 200 answer (the value under
    /// `<command>response`); any other answer is an error.
    pub async fn call(&self, command: &str, params: &[(&str, &str)]) -> Result<Value> {
        let resp = self.raw(command, params).await?;
        // cloudstack-go takes the one value of the answer, whatever its key.
        let inner = match &resp.body {
            Value::Object(m) if m.len() == 1 => m.values().next().cloned().unwrap_or(Value::Null),
            other => {
                return Err(CsClientError::Unexpected(format!(
                    "{command}: HTTP {}: {other}",
                    resp.status
                )));
            }
        };
        if resp.status == 200 {
            return Ok(inner);
        }
        let field = |k: &str| inner.get(k).and_then(Value::as_u64);
        Err(CsClientError::Api {
            command: command.into(),
            status: resp.status,
            errorcode: field("errorcode").map_or(0, |c| c as u16),
            cserrorcode: field("cserrorcode").map(|c| c as u32),
            errortext: inner["errortext"].as_str().unwrap_or_default().into(),
        })
    }

    /// Polls `queryAsyncJobResult` until the job is done and returns its `jobresult`.
    pub async fn wait_job(&self, jobid: &str) -> Result<Value> {
        let deadline = Instant::now() + self.job_deadline;
        loop {
            let job = self
                .call("queryAsyncJobResult", &[("jobid", jobid)])
                .await?;
            match job["jobstatus"].as_u64() {
                Some(1) => return Ok(job["jobresult"].clone()),
                Some(2) => {
                    return Err(CsClientError::JobFailed {
                        jobid: jobid.into(),
                        errorcode: job["jobresult"]["errorcode"].as_u64().unwrap_or(0) as u16,
                        errortext: job["jobresult"]["errortext"]
                            .as_str()
                            .unwrap_or_default()
                            .into(),
                    });
                }
                _ if Instant::now() >= deadline => {
                    return Err(CsClientError::JobTimeout(jobid.into()));
                }
                _ => tokio::time::sleep(self.poll).await,
            }
        }
    }

    /// Calls an async command and waits for its job: the `jobresult`.
    pub async fn call_async(&self, command: &str, params: &[(&str, &str)]) -> Result<Value> {
        let first = self.call(command, params).await?;
        let jobid = first["jobid"]
            .as_str()
            .ok_or_else(|| CsClientError::Unexpected(format!("{command}: no jobid in {first}")))?;
        self.wait_job(jobid).await
    }
}

/// cloudstack-go's `EncodeValues` over parameters already sorted by name.
fn encode_values(sorted: &[(String, String)]) -> String {
    sorted
        .iter()
        .map(|(k, v)| format!("{k}={}", go_escape(v)))
        .collect::<Vec<_>>()
        .join("&")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_as_cloudstack_go() {
        // What cloudstack-go's EncodeValues wrote for the same value (v2.19.0).
        assert_eq!(go_escape("node 1*+/&=é~"), "node%201*%2B%2F%26%3D%C3%A9~");
        assert_eq!(query_escape("a b*+"), "a+b%2A%2B");
    }
}
