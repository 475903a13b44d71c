//! Helpers shared by the integration tests.
#![allow(dead_code)]

pub mod cloudstack;

use std::time::{Duration, Instant};

use cloud_sim::client::{RawResponse, SimClient};
use reqwest::Method;
use serde_json::Value;

/// Sends a request below `/v1` and returns whatever came back.
pub async fn send(w: &SimClient, method: Method, path: &str, body: Option<Value>) -> RawResponse {
    w.raw(method, &format!("/v1{path}"), body)
        .await
        .expect("transport")
}

/// Asserts an error answer with `status` and `code` and returns it.
#[track_caller]
pub fn assert_error(r: &RawResponse, status: u16, code: &str) {
    assert_eq!(
        (r.status, r.error_code()),
        (status, Some(code)),
        "body: {}",
        r.body
    );
    let msg = r
        .body
        .pointer("/error/message")
        .and_then(Value::as_str)
        .unwrap_or("");
    assert!(!msg.is_empty(), "error without message: {}", r.body);
    assert!(
        r.body
            .pointer("/error")
            .is_some_and(|e| e.get("details").is_some()),
        "details key missing"
    );
}

/// The `invalid_input` field names of an error body.
pub fn invalid_fields(r: &RawResponse) -> Vec<String> {
    r.body
        .pointer("/error/details/fields")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|f| f["name"].as_str().map(str::to_owned))
        .collect()
}

/// Polls `check` until it returns `Some` or the deadline passes.
pub async fn eventually<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
