//! CloudStack's error answer: `{"<command>response": {"uuidList": [], "errorcode": N,
//! "cserrorcode": M, "errortext": "..."}}` with HTTP status N, as `ApiServer` serializes an
//! `ExceptionResponse` (cloudstack-go reads the body of every non-200 answer into its `CSError`).
//! Answers to requests that fail authentication carry no `cserrorcode`.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

/// `ApiErrorCode`s the simulator answers with.
pub mod code {
    pub const UNAUTHORIZED: u16 = 401;
    pub const API_LIMIT_EXCEED: u16 = 429;
    pub const PARAM_ERROR: u16 = 431;
    pub const INTERNAL_ERROR: u16 = 530;
    pub const ACCOUNT_ERROR: u16 = 531;
    pub const INSUFFICIENT_CAPACITY_ERROR: u16 = 533;
    pub const NETWORK_RULE_CONFLICT_ERROR: u16 = 537;
}

/// `CSExceptionErrorCode`s: which Java exception was behind an error.
pub mod cs_code {
    pub const CLOUD_RUNTIME: u32 = 4250;
    pub const INSUFFICIENT_ADDRESS_CAPACITY: u32 = 4320;
    pub const INVALID_PARAMETER_VALUE: u32 = 4350;
    pub const NETWORK_RULE_CONFLICT: u32 = 4360;
    pub const PERMISSION_DENIED: u32 = 4365;
    /// A `ServerApiException` raised by the API layer itself (missing or unknown parameter,
    /// throttling, a command the caller may not use).
    pub const SERVER_API: u32 = 9999;
}

/// The text of every authentication failure.
pub const UNAUTHORIZED_TEXT: &str = "unable to verify user credentials and/or request signature";

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("CloudStack API error {errorcode} ({cserrorcode:?}): {text}")]
pub struct CsError {
    pub errorcode: u16,
    pub cserrorcode: Option<u32>,
    pub text: String,
}

impl CsError {
    pub fn new(errorcode: u16, cserrorcode: u32, text: impl Into<String>) -> Self {
        CsError {
            errorcode,
            cserrorcode: Some(cserrorcode),
            text: text.into(),
        }
    }

    /// Unknown key, bad signature, expired request, unknown command: one answer for all.
    pub fn unauthorized() -> Self {
        CsError {
            errorcode: code::UNAUTHORIZED,
            cserrorcode: None,
            text: UNAUTHORIZED_TEXT.to_owned(),
        }
    }

    /// A known command the caller's role does not allow.
    pub fn command_not_available(command: &str) -> Self {
        CsError::new(
            code::UNAUTHORIZED,
            cs_code::SERVER_API,
            format!(
                "The given command '{command}' either does not exist, is not available for user."
            ),
        )
    }

    /// An `InvalidParameterValueException` from the service layer.
    pub fn invalid(text: impl Into<String>) -> Self {
        CsError::new(code::PARAM_ERROR, cs_code::INVALID_PARAMETER_VALUE, text)
    }

    /// A `PermissionDeniedException`.
    pub fn denied(text: impl Into<String>) -> Self {
        CsError::new(code::ACCOUNT_ERROR, cs_code::PERMISSION_DENIED, text)
    }

    /// The `cserrorcode` CloudStack's most common exception behind `errorcode` carries: what an
    /// injected fault answers when it names none.
    pub fn usual_cs_code(errorcode: u16) -> u32 {
        match errorcode {
            code::PARAM_ERROR => cs_code::INVALID_PARAMETER_VALUE,
            code::INTERNAL_ERROR => cs_code::CLOUD_RUNTIME,
            code::ACCOUNT_ERROR => cs_code::PERMISSION_DENIED,
            code::INSUFFICIENT_CAPACITY_ERROR => 4325,
            534 => 4380,
            535 => 4370,
            536 => 4375,
            code::NETWORK_RULE_CONFLICT_ERROR => cs_code::NETWORK_RULE_CONFLICT,
            _ => cs_code::SERVER_API,
        }
    }

    /// The inner object: `{"uuidList": [], "errorcode", "cserrorcode"?, "errortext"}`.
    pub fn body(&self) -> Value {
        let mut m = Map::new();
        m.insert("uuidList".into(), json!([]));
        m.insert("errorcode".into(), json!(self.errorcode));
        if let Some(cs) = self.cserrorcode {
            m.insert("cserrorcode".into(), json!(cs));
        }
        m.insert("errortext".into(), json!(self.text));
        Value::Object(m)
    }

    /// The whole answer under `response_name` (`listvirtualmachinesresponse`, `errorresponse`).
    pub fn into_response_named(self, response_name: &str) -> Response {
        let status =
            StatusCode::from_u16(self.errorcode).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        (status, Json(json!({ response_name: self.body() }))).into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn authentication_failures_carry_no_cs_code() {
        assert_eq!(
            CsError::unauthorized().body(),
            json!({"uuidList": [], "errorcode": 401, "errortext": UNAUTHORIZED_TEXT})
        );
        assert_eq!(
            CsError::invalid("bad").body(),
            json!({"uuidList": [], "errorcode": 431, "cserrorcode": 4350, "errortext": "bad"})
        );
    }
}
