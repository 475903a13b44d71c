//! The one HTTP path every Hetzner call takes: auth, rate-limit pacing, retries, error mapping,
//! accounting and a tracing span per request.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use reqwest::Method;
use serde::Serialize;
use serde::de::DeserializeOwned;
use tracing::Instrument;

use crate::credentials::{Credentials, TokenFile};
use crate::error::{ApiError, CloudError};
use crate::hcloud::config::{ClientConfig, RetryPolicy, Token};
use crate::hcloud::rate_limit::{RateLimiter, parse_headers};
use crate::hcloud::retry::should_retry;
use crate::hcloud::wire::ErrorBody;
use crate::retry::backoff;
use crate::shadow::{Api as WriteApi, PlannedWrites};
use crate::stats::ClientStats;

/// One API request. `template` is the path with placeholders (`/servers/{id}`) for metrics and logs;
/// `path` the concrete one.
#[derive(Clone)]
pub(crate) struct Req {
    pub method: Method,
    pub template: &'static str,
    pub path: String,
    pub query: Vec<(String, String)>,
    pub body: Option<serde_json::Value>,
}

/// Its body as [`shown`] shows it.
impl std::fmt::Debug for Req {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Req")
            .field("method", &self.method)
            .field("path", &self.path)
            .field("query", &self.query)
            .field("body", &self.body.as_ref().map(shown))
            .finish()
    }
}

impl Req {
    pub fn get(template: &'static str, path: impl Into<String>) -> Self {
        Self {
            method: Method::GET,
            template,
            path: path.into(),
            query: Vec::new(),
            body: None,
        }
    }

    pub fn post(template: &'static str, path: impl Into<String>, body: impl Serialize) -> Self {
        Self {
            method: Method::POST,
            template,
            path: path.into(),
            query: Vec::new(),
            body: Some(serde_json::to_value(body).unwrap_or(serde_json::Value::Null)),
        }
    }

    pub fn put(template: &'static str, path: impl Into<String>, body: impl Serialize) -> Self {
        Self {
            method: Method::PUT,
            ..Self::post(template, path, body)
        }
    }

    pub fn delete(template: &'static str, path: impl Into<String>) -> Self {
        Self {
            method: Method::DELETE,
            ..Self::get(template, path)
        }
    }

    pub fn query(mut self, k: &str, v: impl Into<String>) -> Self {
        self.query.push((k.to_string(), v.into()));
        self
    }
}

/// HTTP client for the Hetzner Cloud API. Cheap to clone.
#[derive(Clone)]
pub struct Transport {
    inner: Arc<Inner>,
}

struct Inner {
    http: reqwest::Client,
    endpoint: String,
    credentials: Arc<Credentials>,
    timeout: Duration,
    retry: RetryPolicy,
    limiter: RateLimiter,
    stats: Arc<ClientStats>,
    /// `HCLOUD_DEBUG`: log each exchange in full.
    debug: bool,
    /// Shadow mode: writes are recorded here and not sent.
    planned_writes: Option<Arc<PlannedWrites>>,
}

impl fmt::Debug for Transport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Transport")
            .field("endpoint", &self.inner.endpoint)
            .field("credentials", &self.inner.credentials)
            .field("timeout", &self.inner.timeout)
            .field("retry", &self.inner.retry)
            .finish()
    }
}

impl Transport {
    pub fn new(
        config: &ClientConfig,
        stats: Arc<ClientStats>,
        planned_writes: Option<Arc<PlannedWrites>>,
    ) -> Result<Self, CloudError> {
        let http =
            crate::http::client(&config.endpoint, &config.user_agent, config.request_timeout)?;
        Ok(Self {
            inner: Arc::new(Inner {
                http,
                endpoint: config.endpoint.trim_end_matches('/').to_string(),
                credentials: Credentials::new(
                    config.token.clone(),
                    config.token_file.clone().map(|path| TokenFile {
                        path,
                        setting: "HCLOUD_TOKEN_FILE",
                    }),
                ),
                timeout: config.request_timeout,
                retry: config.retry,
                limiter: RateLimiter::new(config.rate_limit_reserve),
                stats,
                debug: config.debug,
                planned_writes,
            }),
        })
    }

    pub fn stats(&self) -> &Arc<ClientStats> {
        &self.inner.stats
    }

    /// The token calls are sent with (rotated from `HCLOUD_TOKEN_FILE`, see
    /// [`Credentials::watch_file`]).
    pub fn credentials(&self) -> &Arc<Credentials> {
        &self.inner.credentials
    }

    /// Shadow mode: records a write the controller refused to plan at all, with `note` saying
    /// what would let it (e.g. the command by which an owner consents). Nothing otherwise.
    pub(crate) fn plan_refused(&self, operation: &str, object: String, note: String) {
        if let Some(plan) = &self.inner.planned_writes {
            plan.record(
                WriteApi::Cloud,
                format!("refused: {operation}"),
                object,
                Some(note),
            );
        }
    }

    /// Sends `req` and decodes the JSON body.
    pub(crate) async fn call<T: DeserializeOwned>(&self, req: &Req) -> Result<T, CloudError> {
        let bytes = self.call_raw(req).await?;
        // A 204 has no body; callers that expect one get a decode error.
        serde_json::from_slice(&bytes).map_err(|e| CloudError::Decode {
            method: req.method.to_string(),
            endpoint: req.template.to_string(),
            message: e.to_string(),
        })
    }

    /// Sends `req`, ignoring any response body.
    pub(crate) async fn call_empty(&self, req: &Req) -> Result<(), CloudError> {
        self.call_raw(req).await.map(|_| ())
    }

    async fn call_raw(&self, req: &Req) -> Result<Vec<u8>, CloudError> {
        if let Some(plan) = &self.inner.planned_writes
            && req.method != Method::GET
        {
            plan.record(
                WriteApi::Cloud,
                format!("{} {}", req.method, req.template),
                req.path.clone(),
                req.body.as_ref().map(|b| self.redact(shown(b))),
            );
            return Err(CloudError::DryRun {
                method: req.method.to_string(),
                endpoint: req.template.to_string(),
            });
        }
        let idempotent = req.method != Method::POST;
        let max = self.inner.retry.max_attempts.max(1);
        let mut attempt = 0;
        loop {
            attempt += 1;
            match self.once(req).await {
                Ok(b) => return Ok(b),
                Err(e) if attempt < max && should_retry(&e, idempotent) => {
                    self.inner.stats.record_retry();
                    // 429s are paced by the limiter itself on the next acquire; other errors back off.
                    let paced_by_limiter = matches!(
                        &e,
                        CloudError::Api(api) if api.status == 429 && api.retry_after.is_some()
                    );
                    if !paced_by_limiter {
                        let wait = backoff(&self.inner.retry, attempt - 1, e.retry_after());
                        tracing::debug!(error = %e, attempt, ?wait, "retrying cloud request");
                        tokio::time::sleep(wait).await;
                    } else {
                        tracing::debug!(error = %e, attempt, "rate limited, retrying after pacing");
                    }
                }
                Err(e) if attempt > 1 && should_retry(&e, idempotent) => {
                    return Err(CloudError::RetriesExhausted {
                        attempts: attempt,
                        last: Box::new(e),
                    });
                }
                Err(e) => return Err(e),
            }
        }
    }

    async fn once(&self, req: &Req) -> Result<Vec<u8>, CloudError> {
        let inner = &self.inner;
        let permit = inner.limiter.acquire().await;
        if !permit.waited.is_zero() {
            inner.stats.record_paced();
        }
        let span = tracing::debug_span!(
            "cloud_request",
            method = %req.method,
            path = req.template,
            status = tracing::field::Empty,
            correlation_id = tracing::field::Empty,
        );
        let started = Instant::now();
        let token = inner.credentials.in_use();
        let result = {
            let _on_the_wire = inner.stats.in_flight();
            self.exchange(req, &token.token)
                .instrument(span.clone())
                .await
        };
        let elapsed = started.elapsed();
        let method = req.method.as_str();
        match result {
            Ok((status, headers, body)) => {
                let rl = parse_headers(&headers);
                if let Some(rl) = rl {
                    inner.stats.record_rate_limit(rl);
                }
                inner.limiter.complete(rl, status == 429);
                inner
                    .stats
                    .record_call(method, req.template, status, elapsed);
                if inner.credentials.record_answer(&token, status) {
                    tracing::warn!(
                        token_file = ?inner.credentials.status().file,
                        "the cloud API refuses the current token (401 unauthorized): calls fail \
                         and /readyz reports it until a call succeeds or a new token is \
                         configured; nothing is deleted meanwhile"
                    );
                }
                let correlation_id = headers
                    .get("x-correlation-id")
                    .and_then(|v| v.to_str().ok())
                    .map(|c| self.redact(c.to_string()));
                span.record("status", status);
                if let Some(c) = &correlation_id {
                    span.record("correlation_id", c.as_str());
                }
                if inner.debug {
                    self.dump(req, status, &body);
                }
                let _e = span.enter();
                tracing::debug!(
                    elapsed_ms = elapsed.as_millis() as u64,
                    "cloud request done"
                );
                if (200..300).contains(&status) {
                    return Ok(body);
                }
                let parsed: Option<ErrorBody> = serde_json::from_slice(&body).ok();
                let (code, message) = match parsed {
                    Some(b) => {
                        let mut message = b.error.message;
                        if let Some(d) = b.error.details.as_ref().and_then(render_details) {
                            message = format!("{message} ({d})");
                        }
                        (b.error.code, message)
                    }
                    None => (
                        String::new(),
                        String::from_utf8_lossy(&body).chars().take(200).collect(),
                    ),
                };
                let retry_after = (status == 429).then(|| wait_from_headers(rl)).flatten();
                // The cloud's texts are scrubbed here, where they enter an error: Hetzner's 429
                // quotes half the token (see `crate::scrub`).
                Err(ApiError {
                    status,
                    code: self.redact(code),
                    message: self.redact(message),
                    correlation_id,
                    method: method.to_string(),
                    endpoint: req.template.to_string(),
                    retry_after,
                }
                .into())
            }
            Err(e) => {
                inner.limiter.abandon();
                inner.stats.record_call(method, req.template, 0, elapsed);
                let _e = span.enter();
                tracing::debug!(error = %e, "cloud request failed");
                if e.is_timeout() {
                    Err(CloudError::Timeout {
                        operation: format!("{method} {}", req.template),
                        after: inner.timeout,
                    })
                } else {
                    let kind = if e.is_connect() {
                        "connect"
                    } else if e.is_body() {
                        "body"
                    } else {
                        "request"
                    };
                    Err(CloudError::Transport {
                        method: method.to_string(),
                        endpoint: req.template.to_string(),
                        message: self.redact(format!("{kind}: {}", error_chain(&e.without_url()))),
                    })
                }
            }
        }
    }

    async fn exchange(
        &self,
        req: &Req,
        token: &Token,
    ) -> Result<(u16, reqwest::header::HeaderMap, Vec<u8>), reqwest::Error> {
        let inner = &self.inner;
        let url = format!("{}{}", inner.endpoint, req.path);
        let mut rb = inner
            .http
            .request(req.method.clone(), url)
            .bearer_auth(token.expose());
        if !req.query.is_empty() {
            rb = rb.query(&req.query);
        }
        if let Some(b) = &req.body {
            rb = rb.json(b);
        }
        let resp = rb.send().await?;
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let body = resp.bytes().await?.to_vec();
        Ok((status, headers, body))
    }

    /// `HCLOUD_DEBUG`: the exchange as HCCM's debug writer shows it (request line, the
    /// Authorization header redacted, bodies), logged at info so that no RUST_LOG is needed.
    fn dump(&self, req: &Req, status: u16, body: &[u8]) {
        let query: Vec<String> = req.query.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let request = format!(
            "{} {}{}{} (Authorization: Bearer <redacted>){}",
            req.method,
            self.inner.endpoint,
            req.path,
            if query.is_empty() {
                String::new()
            } else {
                format!("?{}", query.join("&"))
            },
            req.body
                .as_ref()
                .map(|b| format!(" {}", shown(b)))
                .unwrap_or_default(),
        );
        tracing::info!(
            target: "hcloud_debug",
            request = %self.redact(request),
            status,
            response = %self.redact(String::from_utf8_lossy(body).into_owned()),
            "HCLOUD_DEBUG"
        );
    }

    /// No text the cloud sent and no message we build may contain 8 characters in a row of a
    /// token (the current one or one rotated out), whatever the cloud or a library put in it.
    fn redact(&self, s: String) -> String {
        self.inner.credentials.redact(s)
    }
}

/// A request body as logs and the shadow plan show it: an uploaded certificate's
/// `private_key` never leaves the request itself.
fn shown(body: &serde_json::Value) -> String {
    match body {
        serde_json::Value::Object(m) if m.contains_key("private_key") => {
            let mut m = m.clone();
            m.insert("private_key".into(), "<redacted>".into());
            serde_json::Value::Object(m).to_string()
        }
        other => other.to_string(),
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

/// Time until one request's worth of budget has refilled, from the headers of a 429.
fn wait_from_headers(rl: Option<crate::stats::RateLimitSnapshot>) -> Option<Duration> {
    let rl = rl?;
    let per_sec = rl.limit.max(1) as f64 / 3600.0;
    Some(Duration::from_secs_f64((1.0 / per_sec).min(60.0)))
}

/// Compact rendering of `invalid_input` field messages and similar details for error messages/events.
fn render_details(d: &serde_json::Value) -> Option<String> {
    let fields = d.get("fields")?.as_array()?;
    let parts: Vec<String> = fields
        .iter()
        .filter_map(|f| {
            let name = f.get("name")?.as_str()?;
            let msgs: Vec<&str> = f
                .get("messages")
                .and_then(|m| m.as_array())
                .map(|m| m.iter().filter_map(|x| x.as_str()).collect())
                .unwrap_or_default();
            Some(if msgs.is_empty() {
                name.to_string()
            } else {
                format!("{name}: {}", msgs.join(", "))
            })
        })
        .collect();
    (!parts.is_empty()).then(|| parts.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn details_are_rendered() {
        let d = serde_json::json!({"fields": [{"name": "name", "messages": ["is too long"]}, {"name": "x"}]});
        assert_eq!(render_details(&d).unwrap(), "name: is too long; x");
    }
}
