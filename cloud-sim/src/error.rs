//! The API's error body and status codes (docs/hetzner-api.md, "Errors"), plus the crate's
//! startup errors.

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

    pub fn rate_limited() -> Self {
        Self::new(
            429,
            "rate_limit_exceeded",
            "limit of requests per hour reached",
        )
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
        _ => 422,
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
