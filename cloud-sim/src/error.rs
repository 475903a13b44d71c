//! The API's error body and status codes (docs/hetzner-api.md, "Errors"), the Robot
//! webservice's (upper-case codes, the status repeated in the body), plus the crate's startup
//! errors.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// An error answered to an API client as `{"error": {"code", "message", "details"}}`.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{status} {code}: {message}")]
pub struct ApiError {
    pub status: StatusCode,
    pub code: String,
    pub message: String,
    pub details: Option<Value>,
}

impl ApiError {
    pub fn new(status: u16, code: &str, message: impl Into<String>) -> Self {
        ApiError {
            status: StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
            code: code.to_owned(),
            message: message.into(),
            details: None,
        }
    }

    /// An error for `code` with the status the real API uses for it; used for injected faults
    /// that name only a code.
    pub fn with_code(code: &str, message: impl Into<String>) -> Self {
        Self::new(default_status(code), code, message)
    }

    fn details(mut self, details: Value) -> Self {
        self.details = Some(details);
        self
    }

    pub fn invalid_input(field: &str, message: impl Into<String>) -> Self {
        let message = message.into();
        Self::new(
            400,
            "invalid_input",
            format!("invalid input in field '{field}'"),
        )
        .details(json!({"fields": [{"name": field, "messages": [message]}]}))
    }

    pub fn json_error(message: impl Into<String>) -> Self {
        Self::new(400, "json_error", message)
    }

    pub fn unauthorized() -> Self {
        Self::new(401, "unauthorized", "unable to authenticate")
    }

    pub fn token_readonly() -> Self {
        Self::new(
            403,
            "token_readonly",
            "the token is only allowed to perform GET requests",
        )
    }

    pub fn not_found(what: &str) -> Self {
        Self::new(404, "not_found", format!("{what} not found"))
    }

    pub fn uniqueness(field: &str) -> Self {
        Self::new(409, "uniqueness_error", format!("{field} is already used"))
            .details(json!({"fields": [{"name": field}]}))
    }

    pub fn locked(kind: &str, id: u64) -> Self {
        Self::new(
            423,
            "locked",
            format!("{kind} {id} is locked by another running action"),
        )
    }

    pub fn protected(kind: &str, id: u64) -> Self {
        Self::new(423, "protected", format!("{kind} {id} is protected"))
    }

    pub fn resource_limit(limit: &str, message: impl Into<String>) -> Self {
        Self::new(403, "resource_limit_exceeded", message)
            .details(json!({"limits": [{"name": limit}]}))
    }

    /// The real API's answer over the hourly limit, which quotes the first half of the caller's
    /// token (`Limit of '3600' requests per hour for token 'abcd…...' reached.`): clients must
    /// keep it out of everything they show.
    pub fn rate_limited(limit: u32, token: Option<&str>) -> Self {
        let message = match token {
            Some(token) => {
                let half: String = token.chars().take(token.chars().count() / 2).collect();
                format!("Limit of '{limit}' requests per hour for token '{half}...' reached.")
            }
            None => format!("Limit of '{limit}' requests per hour reached."),
        };
        Self::new(429, "rate_limit_exceeded", message)
    }

    /// The LB and network specific codes (`source_port_already_used`, `target_already_defined`,
    /// `unsupported_error`, ...): all 422 in the real API.
    pub fn unprocessable(code: &str, message: impl Into<String>) -> Self {
        Self::new(422, code, message)
    }

    pub fn body(&self) -> Value {
        json!({"error": {"code": self.code, "message": self.message, "details": self.details}})
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, Json(self.body())).into_response()
    }
}

/// The HTTP status the real API answers with for an error code.
pub fn default_status(code: &str) -> u16 {
    match code {
        "invalid_input" | "json_error" => 400,
        "unauthorized" => 401,
        "forbidden" | "token_readonly" | "resource_limit_exceeded" => 403,
        "not_found" => 404,
        "method_not_allowed" => 405,
        "conflict" | "uniqueness_error" => 409,
        "locked" | "protected" => 423,
        "rate_limit_exceeded" | "limit_reached" => 429,
        "server_error" | "unknown_error" => 500,
        "bad_gateway" => 502,
        "unavailable" | "maintenance" => 503,
        "timeout" => 504,
        // Robot webservice codes (upper case), for injected faults that name only a code.
        "INVALID_INPUT" => 400,
        "UNAUTHORIZED" => 401,
        "RATE_LIMIT_EXCEEDED" => 403,
        "NOT_FOUND"
        | "SERVER_NOT_FOUND"
        | "RESET_NOT_AVAILABLE"
        | "IP_NOT_FOUND"
        | "SUBNET_NOT_FOUND" => 404,
        "METHOD_NOT_ALLOWED" => 405,
        "CONFLICT" | "RESET_MANUAL_ACTIVE" => 409,
        "INTERNAL_ERROR" | "RESET_FAILED" => 500,
        "MAINTENANCE" => 503,
        "TIMEOUT" => 504,
        _ => 422,
    }
}

/// A Robot webservice error: `{"error": {"status", "code", "message", ...}}`. The status is
/// repeated in the body; `RATE_LIMIT_EXCEEDED` adds `max_request` and `interval`.
#[derive(Debug, Clone)]
pub struct RobotError {
    pub status: StatusCode,
    pub code: String,
    pub message: String,
    /// Extra members of the `error` object.
    pub extra: serde_json::Map<String, Value>,
}

impl RobotError {
    pub fn new(status: u16, code: &str, message: impl Into<String>) -> Self {
        RobotError {
            status: StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
            code: code.to_owned(),
            message: message.into(),
            extra: serde_json::Map::new(),
        }
    }

    pub fn unauthorized() -> Self {
        Self::new(401, "UNAUTHORIZED", "Unauthorized")
    }

    /// An unknown path (or a method the simulator does not serve on a known one).
    pub fn not_found() -> Self {
        Self::new(404, "NOT_FOUND", "Not found")
    }

    pub fn server_not_found(key: &str) -> Self {
        Self::new(
            404,
            "SERVER_NOT_FOUND",
            format!("Server with id or ip {key} not found"),
        )
    }

    pub fn reset_not_available(number: u64) -> Self {
        Self::new(
            404,
            "RESET_NOT_AVAILABLE",
            format!("The server {number} has no reset option"),
        )
    }

    pub fn rate_limited(max_request: u32, interval: u64) -> Self {
        let mut e = Self::new(
            403,
            "RATE_LIMIT_EXCEEDED",
            format!("Rate limit exceeded: at most {max_request} requests in {interval} seconds"),
        );
        e.extra.insert("max_request".into(), json!(max_request));
        e.extra.insert("interval".into(), json!(interval));
        e
    }

    pub fn body(&self) -> Value {
        let mut error = serde_json::Map::new();
        error.insert("status".into(), json!(self.status.as_u16()));
        error.insert("code".into(), json!(self.code));
        error.insert("message".into(), json!(self.message));
        error.extend(self.extra.clone());
        json!({ "error": error })
    }
}

/// Injected faults are decided as Cloud errors; on `/robot` they answer in Robot shape.
impl From<ApiError> for RobotError {
    fn from(e: ApiError) -> Self {
        RobotError {
            status: e.status,
            code: e.code,
            message: e.message,
            extra: serde_json::Map::new(),
        }
    }
}

impl IntoResponse for RobotError {
    fn into_response(self) -> Response {
        let mut resp = (self.status, Json(self.body())).into_response();
        if self.status == StatusCode::UNAUTHORIZED {
            resp.headers_mut().insert(
                axum::http::header::WWW_AUTHENTICATE,
                axum::http::HeaderValue::from_static("Basic realm=\"Robot Webservice\""),
            );
        }
        resp
    }
}

/// Why a simulator could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: std::net::SocketAddr,
        source: std::io::Error,
    },
    #[error("cannot read state file {path}: {source}")]
    ReadState {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error("state file {path} is not a cloud-sim state: {source}")]
    ParseState {
        path: std::path::PathBuf,
        source: serde_json::Error,
    },
}
