//! The one HTTP path every CloudStack call takes: signing, GET for reads and form POST for
//! writes (as cloudstack-go), retries, CloudStack's answers as [`CloudError`]s, call counters
//! and a tracing span per request, and shadow mode for writes.
//!
//! Neither key leaves this file except signed into a request: no URL is ever formatted into an
//! error or a log line (a GET's URL holds the API key and a signature valid for 15 minutes;
//! upstream's errors print it), errors name the call's template (`listVirtualMachines?id={id}`),
//! and every text the cloud sends back is scrubbed of any 8 characters in a row of either key.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::Value;
use tracing::Instrument;

use super::config::CloudStackConfig;
use super::errors::api_error;
use super::signing::Signed;
use super::wire::{ErrorBody, inner as answer_of};
use crate::credentials::Credentials;
use crate::error::CloudError;
use crate::retry::{RetryPolicy, backoff};
use crate::secret::Secret;
use crate::shadow::{Api as WriteApi, PlannedWrites};
use crate::stats::ClientStats;

/// One API call: its command, the template it is counted and named under, its parameters.
#[derive(Debug, Clone)]
pub(crate) struct Call {
    pub command: &'static str,
    /// `listVirtualMachines?id={id}`: the command and which lookup it is, never a value.
    pub template: &'static str,
    pub params: Vec<(String, String)>,
    /// A write (form POST; planned instead of sent in shadow mode; retried only when refused
    /// before it could act).
    pub write: bool,
}

impl Call {
    /// A read (`list*`, `queryAsyncJobResult`): sent as a GET.
    pub fn read(command: &'static str, template: &'static str) -> Self {
        Self {
            command,
            template,
            params: Vec::new(),
            write: false,
        }
    }

    /// A write: sent as a form POST (load balancers' writes).
    pub fn write(command: &'static str, template: &'static str) -> Self {
        Self {
            write: true,
            ..Self::read(command, template)
        }
    }

    pub fn param(mut self, name: &str, value: impl Into<String>) -> Self {
        self.params.push((name.to_owned(), value.into()));
        self
    }

    fn method(&self) -> Method {
        if self.write {
            Method::POST
        } else {
            Method::GET
        }
    }
}

/// HTTP client of one CloudStack API. Cheap to clone.
#[derive(Clone)]
pub struct Transport {
    inner: Arc<Inner>,
}

struct Inner {
    http: reqwest::Client,
    api_url: String,
    api_key: Secret,
    secret_key: Secret,
    /// The cloud's verdict on the keys (readiness): the secret key stands for the pair.
    credentials: Arc<Credentials>,
    timeout: Duration,
    retry: RetryPolicy,
    stats: Arc<ClientStats>,
    planned_writes: Option<Arc<PlannedWrites>>,
}

impl fmt::Debug for Transport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Transport")
            .field("api_url", &self.inner.api_url)
            .field("timeout", &self.inner.timeout)
            .field("retry", &self.inner.retry)
            .finish_non_exhaustive()
    }
}

impl Transport {
    pub(crate) fn new(
        config: &CloudStackConfig,
        stats: Arc<ClientStats>,
        planned_writes: Option<Arc<PlannedWrites>>,
    ) -> Result<Self, CloudError> {
        let http = crate::http::client_with(
            &config.api_url,
            &config.client.user_agent,
            config.client.request_timeout,
            config.ssl_no_verify,
        )?;
        Ok(Self {
            inner: Arc::new(Inner {
                http,
                api_url: config.api_url.clone(),
                api_key: config.api_key.clone(),
                secret_key: config.secret_key.clone(),
                credentials: Credentials::new(config.secret_key.clone(), None),
                timeout: config.client.request_timeout,
                retry: config.client.retry,
                stats,
                planned_writes,
            }),
        })
    }

    pub(crate) fn stats(&self) -> &Arc<ClientStats> {
        &self.inner.stats
    }

    pub(crate) fn credentials(&self) -> &Arc<Credentials> {
        &self.inner.credentials
    }

    /// Sends `call` and returns the inner object of its answer.
    pub(crate) async fn call(&self, call: &Call) -> Result<Value, CloudError> {
        if call.write
            && let Some(plan) = &self.inner.planned_writes
        {
            let params: Vec<String> = call
                .params
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            plan.record(
                WriteApi::Cloud,
                call.command.to_owned(),
                call.template.to_owned(),
                Some(self.redact(params.join("&"))),
            );
            return Err(CloudError::DryRun {
                method: "POST".into(),
                endpoint: call.template.into(),
            });
        }
        let max = self.inner.retry.max_attempts.max(1);
        let mut attempt = 0;
        loop {
            attempt += 1;
            match self.once(call).await {
                Ok(v) => return Ok(v),
                Err(e) if attempt < max && should_retry(&e, call.write) => {
                    self.inner.stats.record_retry();
                    let wait = backoff(&self.inner.retry, attempt - 1, e.retry_after());
                    tracing::debug!(error = %e, attempt, ?wait, "retrying CloudStack request");
                    tokio::time::sleep(wait).await;
                }
                Err(e) if attempt > 1 && should_retry(&e, call.write) => {
                    return Err(CloudError::RetriesExhausted {
                        attempts: attempt,
                        last: Box::new(e),
                    });
                }
                Err(e) => return Err(e),
            }
        }
    }

    async fn once(&self, call: &Call) -> Result<Value, CloudError> {
        let inner = &self.inner;
        let method = call.method();
        let span = tracing::debug_span!(
            "cloud_request",
            method = %method,
            path = call.template,
            status = tracing::field::Empty,
        );
        let keys = inner.credentials.in_use();
        let signed = Signed::new(
            call.command,
            &call.params,
            &inner.api_key,
            &inner.secret_key,
            jiff::Timestamp::now().as_second(),
        );
        let started = Instant::now();
        let result = {
            let _on_the_wire = inner.stats.in_flight();
            self.exchange(&method, &signed)
                .instrument(span.clone())
                .await
        };
        let elapsed = started.elapsed();
        let (status, body) = match result {
            Ok(answer) => answer,
            Err(e) => {
                inner
                    .stats
                    .record_call(method.as_str(), call.template, 0, elapsed);
                let error = self.transport_error(&method, call, e);
                let _e = span.enter();
                tracing::debug!(%error, "CloudStack request failed");
                return Err(error);
            }
        };
        inner
            .stats
            .record_call(method.as_str(), call.template, status, elapsed);
        span.record("status", status);
        if inner.credentials.record_answer(&keys, status) {
            tracing::warn!(
                "the CloudStack API refuses the request signature (401): check api-key and \
                 secret-key in the cloud-config; calls fail and /readyz reports it until a call \
                 succeeds; nothing is deleted meanwhile"
            );
        }
        let decoded: Option<Value> = serde_json::from_slice(&body).ok();
        let answer = decoded.as_ref().and_then(answer_of);
        let error_body = answer
            .filter(|a| a.get("errorcode").is_some())
            .and_then(|a| serde_json::from_value::<ErrorBody>(a.clone()).ok());
        if status == 200 && error_body.is_none() {
            return answer.cloned().ok_or_else(|| CloudError::Decode {
                method: method.to_string(),
                endpoint: call.template.to_owned(),
                message: "the answer is not one JSON object of one key".into(),
            });
        }
        // An error answer, also one that came with 200: never read as an empty list.
        Err(api_error(
            status,
            error_body,
            &body,
            method.as_str(),
            call.template,
            |s| self.redact(s),
        )
        .into())
    }

    async fn exchange(
        &self,
        method: &Method,
        signed: &Signed,
    ) -> Result<(u16, Vec<u8>), reqwest::Error> {
        let inner = &self.inner;
        let request = if *method == Method::POST {
            inner
                .http
                .post(&inner.api_url)
                .header(
                    reqwest::header::CONTENT_TYPE,
                    "application/x-www-form-urlencoded",
                )
                .body(signed.form())
        } else {
            inner
                .http
                .get(format!("{}?{}", inner.api_url, signed.query()))
        };
        let resp = request.send().await?;
        let status = resp.status().as_u16();
        let body = resp.bytes().await?.to_vec();
        Ok((status, body))
    }

    /// A failure below HTTP, without the URL (it holds the key and a signature).
    fn transport_error(&self, method: &Method, call: &Call, e: reqwest::Error) -> CloudError {
        if e.is_timeout() {
            return CloudError::Timeout {
                operation: format!("{method} {}", call.template),
                after: self.inner.timeout,
            };
        }
        let kind = if e.is_connect() {
            "connect"
        } else if e.is_body() {
            "body"
        } else {
            "request"
        };
        CloudError::Transport {
            method: method.to_string(),
            endpoint: call.template.to_owned(),
            message: self.redact(format!("{kind}: {}", error_chain(&e.without_url()))),
        }
    }

    /// `s` without any 8 characters in a row of either key.
    pub(crate) fn redact(&self, s: String) -> String {
        crate::scrub::scrub(&s, [&self.inner.api_key, &self.inner.secret_key])
    }
}

/// Whether a failed call may be sent again: any retryable failure of a read; a write only when
/// it was refused before it could act (throttled, or never connected), since a write that
/// reached the management server may have started a job.
fn should_retry(err: &CloudError, write: bool) -> bool {
    match err {
        CloudError::Timeout { .. } | CloudError::Decode { .. } => !write,
        CloudError::Transport { message, .. } => !write || message.starts_with("connect"),
        CloudError::Api(api) => err.is_retryable() && (!write || api.status == 429),
        _ => false,
    }
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(inner) = src {
        s.push_str(": ");
        s.push_str(&inner.to_string());
        src = inner.source();
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ApiError;

    fn api(status: u16) -> CloudError {
        ApiError {
            status,
            code: super::super::errors::code_of(status).into(),
            message: String::new(),
            correlation_id: None,
            method: "GET".into(),
            endpoint: "x".into(),
            retry_after: None,
        }
        .into()
    }

    #[test]
    fn reads_retry_what_may_pass_and_writes_only_what_never_acted() {
        for s in [429, 530, 503] {
            assert!(should_retry(&api(s), false), "{s}");
        }
        for s in [401, 431, 432, 531] {
            assert!(!should_retry(&api(s), false), "{s}");
        }
        assert!(should_retry(&api(429), true));
        assert!(!should_retry(&api(530), true));
        let connect = CloudError::Transport {
            method: "POST".into(),
            endpoint: "x".into(),
            message: "connect: refused".into(),
        };
        assert!(should_retry(&connect, true));
        let timeout = CloudError::Timeout {
            operation: "x".into(),
            after: Duration::from_secs(1),
        };
        assert!(should_retry(&timeout, false) && !should_retry(&timeout, true));
    }

    #[test]
    fn debug_shows_no_key() {
        let config = CloudStackConfig::new(
            "http://127.0.0.1:1/client/api",
            Secret::new("APIkeyAPIkeyAPIkey"),
            Secret::new("SECRETkeySECRETkey"),
        );
        let t = Transport::new(&config, ClientStats::new(), None).unwrap();
        let shown = format!("{t:?}");
        assert!(
            !shown.contains("keyAPI") && !shown.contains("keySECRET"),
            "{shown}"
        );
        assert_eq!(
            t.redact("a APIkeyAPI b keySECRETk".into()),
            "a <redacted> b <redacted>"
        );
    }

    fn sim_transport(sim: &cloud_sim::Sim, plan: Option<Arc<PlannedWrites>>) -> Transport {
        let config = CloudStackConfig::new(
            sim.cloudstack_endpoint(),
            Secret::new(sim.cloudstack_api_key()),
            Secret::new(sim.cloudstack_secret_key()),
        );
        Transport::new(&config, ClientStats::new(), plan).unwrap()
    }

    #[tokio::test]
    async fn reads_and_writes_are_signed_as_the_api_checks_them() {
        let sim = cloud_sim::Sim::start().await;
        let t = sim_transport(&sim, None);
        // Every character class cloudstack-go escapes differently from a form.
        let odd = "zone 1*+/&=é~";
        let read = Call::read("listZones", "listZones?keyword={keyword}").param("keyword", odd);
        assert_eq!(t.call(&read).await.unwrap(), serde_json::json!({}));
        let mut write = Call::write("listZones", "listZones?keyword={keyword}");
        write.params = read.params.clone();
        assert_eq!(t.call(&write).await.unwrap(), serde_json::json!({}));
        assert_eq!(sim.cloudstack_calls("listZones"), 2);
        let log = sim.request_log();
        assert!(log.iter().all(|e| e.status == 200), "{log:?}");
        let stats = t.stats().snapshot();
        assert_eq!(stats.calls_to("GET", "listZones?keyword={keyword}"), 1);
        assert_eq!(stats.calls_to("POST", "listZones?keyword={keyword}"), 1);
    }

    #[tokio::test]
    async fn shadow_mode_plans_writes_without_keys_and_sends_reads() {
        let sim = cloud_sim::Sim::start().await;
        let plan = PlannedWrites::new();
        let t = sim_transport(&sim, Some(plan.clone()));
        let write = Call::write("listZones", "listZones?name={name}").param("name", "x");
        let e = t.call(&write).await.unwrap_err();
        assert!(e.is_dry_run(), "{e}");
        assert!(t.call(&Call::read("listZones", "listZones")).await.is_ok());
        assert_eq!(sim.cloudstack_calls("listZones"), 1);
        let planned = serde_json::to_string(&plan.entries()).unwrap();
        assert!(planned.contains("name=x"), "{planned}");
        assert!(
            !planned.contains(&sim.cloudstack_api_key()[..8]),
            "{planned}"
        );
    }
}
