//! HTTP handlers, one module per resource. Handlers parse, lock the world once, validate,
//! mutate and render; the validation rules live next to the resource they protect, rules every
//! resource shares in `crate::resource`. The list and update endpoints, the same for every
//! resource kind, are `collection`'s. The model never imports this layer.

pub mod actions;
pub mod catalog;
pub mod certificates;
pub mod collection;
pub mod load_balancers;
pub mod metadata;
pub mod networks;
pub mod robot;
pub mod servers;

pub use crate::resource::{check_labels, validate_name};

use axum::Json;
use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, RawPathParams, Request};
use axum::http::StatusCode;
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::error::ApiError;
use crate::state::State;

pub type ApiResult = Result<Response, ApiError>;

/// A JSON request body. Malformed JSON is `json_error`; well-formed JSON of the wrong shape is
/// `invalid_input` naming the field. An empty body reads as `{}`, since clients send action
/// requests without one.
#[derive(Debug)]
pub struct Body<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for Body<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let bytes = Bytes::from_request(req, state)
            .await
            .map_err(|e| ApiError::json_error(format!("cannot read body: {e}")))?;
        let value: Value = if bytes.iter().all(u8::is_ascii_whitespace) {
            json!({})
        } else {
            serde_json::from_slice(&bytes)
                .map_err(|e| ApiError::json_error(format!("malformed JSON: {e}")))?
        };
        if !value.is_object() {
            return Err(ApiError::json_error("request body must be a JSON object"));
        }
        serde_path_to_error::deserialize(value)
            .map(Body)
            .map_err(|e| {
                let inner = e.inner().to_string();
                let mut field = e.path().to_string();
                if field == "." {
                    // serde reports a missing field at the parent: "missing field `name`".
                    field = inner.split('`').nth(1).unwrap_or("body").to_owned();
                }
                ApiError::invalid_input(&field, inner)
            })
    }
}

/// The first path parameter as a resource id; anything that is not an id cannot exist.
#[derive(Debug, Clone, Copy)]
pub struct Id(pub u64);

impl<S: Send + Sync> FromRequestParts<S> for Id {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let params = RawPathParams::from_request_parts(parts, state)
            .await
            .map_err(|_| ApiError::not_found("resource"))?;
        params
            .iter()
            .next()
            .and_then(|(_, v)| v.parse::<u64>().ok())
            .map(Id)
            .ok_or_else(|| ApiError::not_found("resource"))
    }
}

pub fn ok(body: Value) -> ApiResult {
    Ok(Json(body).into_response())
}

pub fn created(body: Value) -> ApiResult {
    Ok((StatusCode::CREATED, Json(body)).into_response())
}

pub fn no_content() -> ApiResult {
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// `{"action": {...}}`, what every `/actions/<command>` endpoint answers.
pub fn action(st: &State, id: u64) -> ApiResult {
    ok(json!({"action": st.action_json(id)}))
}
