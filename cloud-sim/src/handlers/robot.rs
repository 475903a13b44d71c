//! The Robot webservice (dedicated servers) subset hcloud-cloud-controller-manager reads, served
//! under `/robot` (`Sim::robot_endpoint()`), in the shapes `syself/hrobot-go` decodes:
//!
//! | method + path | answer |
//! |---|---|
//! | `GET /robot/server` | `[{"server": {summary}}, ...]`, a bare array |
//! | `GET /robot/server/{server-number}` | `{"server": {summary + reset, rescue, vnc, ...}}` |
//! | `GET /robot/reset/{server-number}` | `{"reset": {"server_ip", "server_ipv6_net", "server_number", "type", "operating_status"}}` |
//!
//! `{server-number}` may also be the server's main IPv4, as the older API accepted.
//! Authentication (HTTP basic), the per-resource rate limit, faults and counters are applied
//! by the pipeline in `server`; this module only reads the world and renders it. Errors are
//! `RobotError`s: `{"error": {"status", "code", "message"}}`.

use std::net::Ipv4Addr;

use axum::Json;
use axum::Router;
use axum::extract::{Path, State as AppState};
use axum::http::{HeaderMap, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::{Value, json};

use crate::app::{App, AppInner};
use crate::error::RobotError;
use crate::state::{RobotServer, State};

/// Where the Robot webservice lives below the simulator's root.
pub const PREFIX: &str = "/robot";

type RobotResult = Result<Response, RobotError>;

pub fn routes() -> Router<App> {
    Router::new()
        .route("/robot/server", get(list))
        .route("/robot/server/{server-number}", get(get_one))
        .route("/robot/reset/{server-number}", get(reset))
}

/// The rate-limited resource an endpoint template belongs to. The list and the single server
/// share `server`: Robot counts every `GET /server...` call against one limit.
pub fn resource_of(endpoint: &str) -> Option<&'static str> {
    let rest = endpoint.strip_prefix(PREFIX)?;
    if rest == "/server" || rest.starts_with("/server/") {
        Some("server")
    } else if rest.starts_with("/reset/") {
        Some("reset")
    } else {
        None
    }
}

/// Checks HTTP basic credentials against the configured Robot user and password.
pub fn authorize(app: &AppInner, headers: &HeaderMap) -> Result<(), RobotError> {
    let (user, password) = headers
        .get(header::AUTHORIZATION)
        .and_then(|h| h.to_str().ok())
        .and_then(basic_credentials)
        .ok_or_else(RobotError::unauthorized)?;
    if user == app.config.robot_user && password == app.config.robot_password {
        Ok(())
    } else {
        Err(RobotError::unauthorized())
    }
}

/// `Basic base64(user:password)` → (user, password).
fn basic_credentials(header: &str) -> Option<(String, String)> {
    let (scheme, encoded) = header.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = String::from_utf8(base64_decode(encoded.trim())?).ok()?;
    let (user, password) = decoded.split_once(':')?;
    Some((user.to_owned(), password.to_owned()))
}

/// Standard base64 with optional padding; one header does not justify a dependency.
fn base64_decode(s: &str) -> Option<Vec<u8>> {
    let value = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    };
    let s = s.trim_end_matches('=').as_bytes();
    if s.len() % 4 == 1 {
        return None;
    }
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    for chunk in s.chunks(4) {
        let mut acc = 0u32;
        for &c in chunk {
            acc = (acc << 6) | value(c)?;
        }
        acc <<= 6 * (4 - chunk.len() as u32);
        let bytes = acc.to_be_bytes();
        out.extend_from_slice(&bytes[1..chunk.len()]);
    }
    Some(out)
}

/// A server by number or main IPv4.
fn find<'a>(st: &'a State, key: &str) -> Result<&'a RobotServer, RobotError> {
    let found = if let Ok(number) = key.parse::<u64>() {
        st.robot_servers.get(&number)
    } else if let Ok(ip) = key.parse::<Ipv4Addr>() {
        st.robot_servers.values().find(|s| s.ipv4 == Some(ip))
    } else {
        None
    };
    found.ok_or_else(|| RobotError::server_not_found(key))
}

/// The fields `GET /server` shows for every server.
fn summary(s: &RobotServer) -> serde_json::Map<String, Value> {
    let v6 = s.ipv6_net_shown();
    let json = json!({
        "server_ip": s.ipv4.map(|ip| ip.to_string()),
        "server_ipv6_net": v6,
        "server_number": s.number,
        "server_name": s.name,
        "product": s.product,
        "dc": s.dc,
        "traffic": s.traffic,
        "status": s.status,
        "cancelled": s.cancelled,
        "paid_until": s.paid_until,
        "ip": s.ipv4.iter().map(|ip| ip.to_string()).collect::<Vec<_>>(),
        "subnet": [{"ip": v6, "mask": "64"}],
        "linked_storagebox": null,
    });
    match json {
        Value::Object(map) => map,
        _ => serde_json::Map::new(),
    }
}

/// `{"server": {...}}` as a list item (`detail = false`) or as `GET /server/{n}` shows it.
pub fn server_json(s: &RobotServer, detail: bool) -> Value {
    let mut server = summary(s);
    if detail {
        for (key, value) in [
            ("reset", s.reset_available),
            ("rescue", true),
            ("vnc", true),
            ("windows", false),
            ("plesk", false),
            ("cpanel", false),
            ("wol", true),
            ("hot_swap", false),
        ] {
            server.insert(key.to_owned(), json!(value));
        }
    }
    json!({ "server": server })
}

async fn list(AppState(app): AppState<App>) -> RobotResult {
    let st = app.read();
    let servers: Vec<Value> = st
        .robot_servers
        .values()
        .map(|s| server_json(s, false))
        .collect();
    Ok(Json(Value::Array(servers)).into_response())
}

async fn get_one(AppState(app): AppState<App>, Path(key): Path<String>) -> RobotResult {
    let st = app.read();
    Ok(Json(server_json(find(&st, &key)?, true)).into_response())
}

async fn reset(AppState(app): AppState<App>, Path(key): Path<String>) -> RobotResult {
    let st = app.read();
    let s = find(&st, &key)?;
    if !s.reset_available {
        return Err(RobotError::reset_not_available(s.number));
    }
    Ok(Json(json!({"reset": {
        "server_ip": s.ipv4.map(|ip| ip.to_string()),
        "server_ipv6_net": s.ipv6_net_shown(),
        "server_number": s.number,
        "type": s.reset_types(),
        "operating_status": s.operating_status(),
    }}))
    .into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_basic_credentials() {
        // "user:pa:ss" and "a:" in standard base64.
        assert_eq!(
            basic_credentials("Basic dXNlcjpwYTpzcw=="),
            Some(("user".into(), "pa:ss".into()))
        );
        assert_eq!(
            basic_credentials("basic YTo="),
            Some(("a".into(), String::new()))
        );
        assert_eq!(basic_credentials("Bearer dXNlcjpwYXNz"), None);
        assert_eq!(basic_credentials("Basic !!!"), None);
        // No colon: not a credential pair.
        assert_eq!(basic_credentials("Basic dXNlcg=="), None);
    }

    #[test]
    fn resources_of_endpoints() {
        assert_eq!(resource_of("/robot/server"), Some("server"));
        assert_eq!(resource_of("/robot/server/{server-number}"), Some("server"));
        assert_eq!(resource_of("/robot/reset/{server-number}"), Some("reset"));
        assert_eq!(resource_of("/robot/boot/1"), None);
        assert_eq!(resource_of("/servers"), None);
    }
}
