//! One error type for every cloud call, classified so controllers can pick a requeue policy without
//! knowing which cloud answered.

use std::time::Duration;

/// How a controller should react to a [`CloudError`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorClass {
    /// The thing looked up positively does not exist (fresh answer, never a stale cache).
    NotFound,
    /// Transient: retry later with backoff (429, 5xx, `locked`, `conflict`, timeouts, transport).
    Retryable,
    /// Retrying the same request will fail the same way until someone changes the input or the cloud.
    Permanent,
}

/// Every error a cloud provider returns.
///
/// The API token never appears in any variant (messages are built from path templates and the
/// cloud's own error body, never from request URLs or headers).
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum CloudError {
    /// The object does not exist in the cloud. `tried` lists what was looked up
    /// (e.g. `providerID hcloud://12`, `server name "node-1"`), for events such as "instance not found".
    #[error("{what} not found (tried: {})", tried.join(", "))]
    NotFound { what: String, tried: Vec<String> },

    /// The cloud API answered with an error body. Boxed: it is by far the largest variant, and every
    /// `Result<_, CloudError>` in every controller pays for the largest one.
    #[error(transparent)]
    Api(Box<ApiError>),

    /// Connection refused/reset, TLS failure, malformed response and other failures below HTTP.
    #[error("{method} {endpoint}: transport error: {message}")]
    Transport {
        method: String,
        endpoint: String,
        message: String,
    },

    /// Shadow mode: the write was planned, not sent (see [`crate::plan`]).
    #[error(
        "{method} {endpoint}: not sent: shadow mode (--dry-run) plans writes instead of making them"
    )]
    DryRun { method: String, endpoint: String },

    /// The per-request timeout (or an action wait deadline) elapsed.
    #[error("{operation}: timed out after {after:?}")]
    Timeout { operation: String, after: Duration },

    /// A response body did not match what the client expects.
    #[error("{method} {endpoint}: cannot decode response: {message}")]
    Decode {
        method: String,
        endpoint: String,
        message: String,
    },

    /// An asynchronous cloud action (a Hetzner action, a CloudStack async job) finished with an
    /// error. `id` is the cloud's id of it, as the cloud writes it (a number, a UUID).
    #[error("action {id} ({command}) failed: {code}: {message}")]
    ActionFailed {
        id: String,
        command: String,
        code: String,
        message: String,
    },

    /// Retries of a retryable error were exhausted; `last` is the final error.
    #[error("giving up after {attempts} attempts: {last}")]
    RetriesExhausted {
        attempts: u32,
        last: Box<CloudError>,
    },

    /// The request is valid Kubernetes but this cloud/provider cannot do it
    /// (e.g. `hrobot://` nodes, IPv6 routes, UDP ports).
    #[error("unsupported: {message}")]
    Unsupported { message: String },

    /// User input on a Kubernetes object is invalid (annotation value, providerID, ...).
    /// `field` names the annotation/field, `value` the rejected value, `expected` what is accepted.
    #[error("invalid value {value:?} for {field}: expected {expected}")]
    InvalidInput {
        field: String,
        value: String,
        expected: String,
    },

    /// One of a Node's own annotations is invalid (e.g. Hetzner's `external-ipv6`): `reason` is
    /// the Warning's reason, `message` names the annotation, the value and what is accepted.
    /// Nothing is written to the Node until it changes.
    #[error("{message}")]
    InvalidNodeInput {
        reason: &'static str,
        message: String,
    },

    /// Process configuration is invalid; lists ALL problems found at once.
    #[error("invalid configuration: {}", problems.join("; "))]
    InvalidConfig { problems: Vec<String> },

    /// The request is valid on its own but collides with another Service's use of a shared
    /// resource (a listen port, a shared load balancer's settings or capacity). `message` names
    /// the other Service. Nothing was written; it may clear when the other Service changes.
    #[error("conflict: {message}")]
    Conflict { message: String },

    /// The cloud returned something contradictory (e.g. two load balancers carry the same Service UID label).
    #[error("inconsistent cloud state: {message}")]
    Inconsistent { message: String },
}

/// An error answer of the cloud API.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{method} {endpoint} failed: HTTP {status} {code}: {message}{}",
    correlation_id.as_deref().map(|c| format!(" (correlation id {c})")).unwrap_or_default()
)]
pub struct ApiError {
    /// HTTP status code.
    pub status: u16,
    /// The cloud's error code, e.g. `locked`, `invalid_input`, `rate_limit_exceeded`.
    pub code: String,
    /// The cloud's human readable message (plus field details when the cloud gave any).
    pub message: String,
    /// `X-Correlation-Id` of the failing response, for support tickets.
    pub correlation_id: Option<String>,
    /// HTTP method.
    pub method: String,
    /// Path template, e.g. `/load_balancers/{id}/actions/add_target`.
    pub endpoint: String,
    /// Delay the cloud asked for (derived from rate-limit headers), if any.
    pub retry_after: Option<Duration>,
}

impl From<ApiError> for CloudError {
    fn from(e: ApiError) -> Self {
        CloudError::Api(Box::new(e))
    }
}

impl CloudError {
    /// Classification the controllers map to their requeue policy.
    pub fn class(&self) -> ErrorClass {
        match self {
            CloudError::NotFound { .. } => ErrorClass::NotFound,
            CloudError::Api(e) => classify_api(e.status, &e.code),
            CloudError::Transport { .. } | CloudError::Timeout { .. } => ErrorClass::Retryable,
            // A decode failure usually means a proxy answered with HTML or a truncated body.
            CloudError::Decode { .. } => ErrorClass::Retryable,
            CloudError::ActionFailed { code, .. } => classify_api(0, code),
            // Retries exhausted on something transient: still worth a (slower) controller requeue.
            CloudError::RetriesExhausted { last, .. } => last.class(),
            CloudError::Unsupported { .. }
            | CloudError::DryRun { .. }
            | CloudError::InvalidInput { .. }
            | CloudError::InvalidNodeInput { .. }
            | CloudError::InvalidConfig { .. }
            | CloudError::Conflict { .. }
            | CloudError::Inconsistent { .. } => ErrorClass::Permanent,
        }
    }

    /// True when another Service holds what this one asks for ([`CloudError::Conflict`]).
    pub fn is_conflict(&self) -> bool {
        matches!(self, CloudError::Conflict { .. })
    }

    /// True when shadow mode planned the write instead of making it.
    pub fn is_dry_run(&self) -> bool {
        matches!(self, CloudError::DryRun { .. })
    }

    /// True for errors worth retrying with backoff (429, 5xx, `locked`, `conflict`, timeouts, transport).
    pub fn is_retryable(&self) -> bool {
        self.class() == ErrorClass::Retryable
    }

    /// True when the cloud refused the request for the project's rate limit (429,
    /// `rate_limit_exceeded`), also after the client's own retries: nothing is wrong with the
    /// request, and it will pass once the budget refills, so a controller retries it soon rather
    /// than backing off further with every refusal.
    pub fn is_rate_limited(&self) -> bool {
        match self {
            CloudError::Api(e) => e.status == 429 || e.code == "rate_limit_exceeded",
            CloudError::RetriesExhausted { last, .. } => last.is_rate_limited(),
            _ => false,
        }
    }

    /// True when the object positively does not exist (`NotFound` or an API `not_found`/404).
    pub fn is_not_found(&self) -> bool {
        self.class() == ErrorClass::NotFound
    }

    /// The cloud's error code (`locked`, `invalid_input`, ...) when the cloud sent one.
    pub fn code(&self) -> Option<&str> {
        match self {
            CloudError::Api(e) => Some(&e.code),
            CloudError::ActionFailed { code, .. } => Some(code),
            CloudError::RetriesExhausted { last, .. } => last.code(),
            _ => None,
        }
    }

    /// `X-Correlation-Id` of the failing response, when there was one.
    pub fn correlation_id(&self) -> Option<&str> {
        match self {
            CloudError::Api(e) => e.correlation_id.as_deref(),
            CloudError::RetriesExhausted { last, .. } => last.correlation_id(),
            _ => None,
        }
    }

    /// A delay the cloud asked for before retrying (rate limiting), if known.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            CloudError::Api(e) => e.retry_after,
            CloudError::RetriesExhausted { last, .. } => last.retry_after(),
            _ => None,
        }
    }

    /// Shorthand for a single-field [`CloudError::InvalidInput`].
    pub fn invalid_input(
        field: impl Into<String>,
        value: impl Into<String>,
        expected: impl Into<String>,
    ) -> Self {
        CloudError::InvalidInput {
            field: field.into(),
            value: value.into(),
            expected: expected.into(),
        }
    }

    /// Shorthand for [`CloudError::Unsupported`].
    pub fn unsupported(message: impl Into<String>) -> Self {
        CloudError::Unsupported {
            message: message.into(),
        }
    }
}

/// Hetzner-style codes are the source of truth; the HTTP status only decides when the code is unknown.
fn classify_api(status: u16, code: &str) -> ErrorClass {
    match code {
        "not_found" => ErrorClass::NotFound,
        "rate_limit_exceeded"
        | "limit_reached"
        | "locked"
        | "conflict"
        | "server_error"
        | "service_error"
        | "unknown_error"
        | "bad_gateway"
        | "timeout"
        | "unavailable"
        | "maintenance" => ErrorClass::Retryable,
        "invalid_input"
        | "json_error"
        | "unauthorized"
        | "forbidden"
        | "token_readonly"
        | "uniqueness_error"
        | "protected"
        | "resource_limit_exceeded"
        | "unsupported_error" => ErrorClass::Permanent,
        _ => match status {
            404 => ErrorClass::NotFound,
            408 | 409 | 423 | 429 => ErrorClass::Retryable,
            s if s >= 500 => ErrorClass::Retryable,
            _ => ErrorClass::Permanent,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(status: u16, code: &str) -> CloudError {
        ApiError {
            status,
            code: code.into(),
            message: "m".into(),
            correlation_id: Some("abc".into()),
            method: "GET".into(),
            endpoint: "/servers".into(),
            retry_after: None,
        }
        .into()
    }

    #[test]
    fn stays_small_enough_to_return_by_value() {
        // clippy's result_large_err threshold is 128 bytes; every controller returns this type.
        assert!(
            std::mem::size_of::<CloudError>() <= 96,
            "{}",
            std::mem::size_of::<CloudError>()
        );
    }

    #[test]
    fn classification_follows_codes_then_status() {
        for (s, c) in [
            (429, "rate_limit_exceeded"),
            (423, "locked"),
            (409, "conflict"),
            (500, "server_error"),
            (502, "x"),
            (503, ""),
        ] {
            assert!(api(s, c).is_retryable(), "{s} {c}");
        }
        for (s, c) in [
            (400, "invalid_input"),
            (403, "forbidden"),
            (409, "uniqueness_error"),
            (423, "protected"),
            (422, "whatever"),
        ] {
            assert_eq!(api(s, c).class(), ErrorClass::Permanent, "{s} {c}");
        }
        assert!(api(404, "not_found").is_not_found());
        assert!(api(404, "").is_not_found());
        assert_eq!(api(423, "locked").code(), Some("locked"));
        assert_eq!(api(423, "locked").correlation_id(), Some("abc"));
        let wrapped = CloudError::RetriesExhausted {
            attempts: 5,
            last: Box::new(api(503, "unavailable")),
        };
        assert!(wrapped.is_retryable());
        assert_eq!(wrapped.code(), Some("unavailable"));
        assert!(wrapped.to_string().contains("correlation id abc"));
    }

    #[test]
    fn not_found_lists_what_was_tried() {
        let e = CloudError::NotFound {
            what: "server".into(),
            tried: vec!["id 12".into(), "name \"n1\"".into()],
        };
        assert_eq!(
            e.to_string(),
            "server not found (tried: id 12, name \"n1\")"
        );
    }
}
