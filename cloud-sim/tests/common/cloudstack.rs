//! Helpers of the CloudStack tests.

use cloud_sim::CsResponse;
use serde_json::{Value, json};

/// The error answer of `command` as CloudStack serializes it, with the status it came with.
#[track_caller]
pub fn assert_cs_error(resp: &CsResponse, key: &str, errorcode: u16, cs: Option<u32>) -> String {
    assert_eq!(resp.status, errorcode, "{}", resp.body);
    let inner = &resp.body[key];
    assert_eq!(inner["errorcode"], errorcode, "{}", resp.body);
    assert_eq!(inner["uuidList"], json!([]), "{}", resp.body);
    assert_eq!(
        inner.get("cserrorcode").and_then(Value::as_u64),
        cs.map(u64::from),
        "{}",
        resp.body
    );
    assert_eq!(
        resp.body.as_object().map(|o| o.len()),
        Some(1),
        "{}",
        resp.body
    );
    inner["errortext"].as_str().unwrap_or_default().to_owned()
}

pub fn names(list: &Value) -> Vec<String> {
    list["virtualmachine"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|v| v["name"].as_str().unwrap().to_owned())
                .collect()
        })
        .unwrap_or_default()
}
