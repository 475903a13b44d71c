//! Control endpoints under `/_sim`, outside the API: no authentication, no rate limit, not
//! counted. They drive what a test needs and a real cloud would never offer.
//!
//! | method + path | body | effect |
//! |---|---|---|
//! | `GET /_sim/health` | | `ok` |
//! | `GET /_sim/counters` | | `{"total": n, "endpoints": {"GET /servers": n, ...}}` |
//! | `DELETE /_sim/counters` | | resets counters and the request log |
//! | `GET /_sim/requests` | | the request log, oldest first |
//! | `GET /_sim/faults` | | `{"faults": [{"id", ...rule}]}` |
//! | `POST /_sim/faults` | a [`FaultRule`] | `{"id": n}` |
//! | `DELETE /_sim/faults` / `DELETE /_sim/faults/{id}` | | clears all / one |
//! | `GET /_sim/rate_limit` / `PUT /_sim/rate_limit` | `{"limit"?, "remaining"?}` | bucket state / change it |
//! | `GET /_sim/config` / `PUT /_sim/config` | `{"action_duration_ms"?, "health_check_speedup"?}` | live settings |
//! | `PUT /_sim/metadata` | `{"server": id}` | default server of the metadata service |
//! | `POST /_sim/batch/servers` | `{"count", "prefix", "server_type", "image"?, "location"?, "labels"?, "networks"?, "public_net"?, "name"?, "public_ipv4"?}` | `{"servers": [ids]}` |
//! | `POST /_sim/state/save` | | writes the `--state` file now |
//! | `GET /_sim/robot/servers` | | `{"servers": [{"server": {...}}]}`: the dedicated servers |
//! | `POST /_sim/robot/servers` | a `RobotServerReq`, all optional | 201 `{"server": {...}}` (`GET /server/{n}` shape) |
//! | `GET` / `PUT` / `DELETE /_sim/robot/servers/{number}` | `PUT`: a `RobotServerReq` without `server_number`, `ipv4` | show / change (`"power": "off"`) / remove |
//! | `GET /_sim/robot/rate_limit` | | `{"server": {status}, "reset": {status}}` |
//! | `PUT /_sim/robot/rate_limit` | `{"resource", "max_request"?, "interval"? (s), "remaining"?}` | the resource's status |
//! | `DELETE /_sim/robot/rate_limit` | | forgets all counted Robot requests |
//! | `GET /_sim/load_balancers/{id}/listeners` | | `{"listeners": [{"listen_port", "protocol", "address", "connections": {"accepted", "forwarded", "refused", "active"}}]}` (empty with the data plane off) |
//! | `GET /_sim/addresses` | | `{"addresses": {"100.64.0.5": "127.1.0.1", ...}}`: simulated → local |
//! | `POST /_sim/addresses` | `{"ip"}` | `{"ip", "local"}`, allocating the local address on first use |
//! | `PUT /_sim/targets/{ip}/fault` | `{"kind": "refuse" \| "hang" \| "fail_health"}` | a target fault (data plane only) |
//! | `DELETE /_sim/targets/{ip}/fault` | | the target behaves again |
//!
//! The batch endpoint exists because benchmarks need 1 000–10 000 servers: through
//! `POST /servers` that is one request plus an action wait each, minutes of setup and the whole
//! rate-limit budget. The batch runs the very same validation (`create_server`) under one lock
//! and creates the servers already `running`, without actions.

use std::net::IpAddr;
use std::time::Duration;

use axum::extract::{Path, State as AppState};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post, put};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::app::App;
use crate::clock::{now_ms, rfc3339};
use crate::data_plane::TargetFault;
use crate::error::ApiError;
use crate::faults::FaultRule;
use crate::handlers::{Body, robot, servers};
use crate::state::RobotServer;

pub fn routes() -> Router<App> {
    Router::new()
        .route("/_sim/health", get(|| async { "ok" }))
        .route("/_sim/counters", get(counters).delete(reset_counters))
        .route("/_sim/requests", get(requests))
        .route(
            "/_sim/faults",
            get(list_faults).post(add_fault).delete(clear_faults),
        )
        .route("/_sim/faults/{id}", delete(remove_fault))
        .route("/_sim/rate_limit", get(rate_limit).put(set_rate_limit))
        .route("/_sim/config", get(config).put(set_config))
        .route("/_sim/metadata", put(set_metadata))
        .route("/_sim/batch/servers", post(batch_servers))
        .route("/_sim/state/save", post(save_state))
        .route(
            "/_sim/robot/servers",
            get(robot_servers).post(create_robot_server),
        )
        .route(
            "/_sim/robot/servers/{number}",
            get(robot_server)
                .put(update_robot_server)
                .delete(delete_robot_server),
        )
        .route(
            "/_sim/robot/rate_limit",
            get(robot_rate_limit)
                .put(set_robot_rate_limit)
                .delete(reset_robot_rate_limit),
        )
        .route("/_sim/load_balancers/{id}/listeners", get(listeners))
        .route("/_sim/addresses", get(addresses).post(allocate_address))
        .route(
            "/_sim/targets/{ip}/fault",
            put(set_target_fault).delete(clear_target_fault),
        )
}

async fn counters(AppState(app): AppState<App>) -> Json<Value> {
    Json(json!({"total": app.counters.total(), "endpoints": app.counters.snapshot()}))
}

async fn reset_counters(AppState(app): AppState<App>) -> StatusCode {
    app.counters.reset();
    StatusCode::NO_CONTENT
}

async fn requests(AppState(app): AppState<App>) -> Json<Value> {
    Json(json!({"requests": app.counters.log()}))
}

async fn list_faults(AppState(app): AppState<App>) -> Json<Value> {
    let faults: Vec<Value> = app
        .faults
        .list()
        .into_iter()
        .map(|(id, rule)| {
            let mut v = serde_json::to_value(rule).unwrap_or(Value::Null);
            v["id"] = json!(id);
            v
        })
        .collect();
    Json(json!({"faults": faults}))
}

async fn add_fault(
    AppState(app): AppState<App>,
    Body(rule): Body<FaultRule>,
) -> Result<Response, ApiError> {
    if !(0.0..=1.0).contains(&rule.probability) {
        return Err(ApiError::invalid_input(
            "probability",
            "must be between 0 and 1",
        ));
    }
    if let crate::faults::FaultKind::OmitItems { share } = rule.kind
        && !(0.0..=1.0).contains(&share)
    {
        return Err(ApiError::invalid_input("share", "must be between 0 and 1"));
    }
    let id = app.faults.add(rule);
    Ok((StatusCode::CREATED, Json(json!({"id": id}))).into_response())
}

async fn clear_faults(AppState(app): AppState<App>) -> StatusCode {
    app.faults.clear();
    StatusCode::NO_CONTENT
}

async fn remove_fault(AppState(app): AppState<App>, Path(id): Path<u64>) -> StatusCode {
    if app.faults.remove(id) {
        StatusCode::NO_CONTENT
    } else {
        StatusCode::NOT_FOUND
    }
}

async fn rate_limit(AppState(app): AppState<App>) -> Json<Value> {
    Json(json!(app.rate.status()))
}

#[derive(Debug, Deserialize)]
struct RateLimitReq {
    limit: Option<u32>,
    remaining: Option<u32>,
}

async fn set_rate_limit(
    AppState(app): AppState<App>,
    Body(req): Body<RateLimitReq>,
) -> Json<Value> {
    app.rate.set(req.limit, req.remaining);
    Json(json!(app.rate.status()))
}

async fn config(AppState(app): AppState<App>) -> Json<Value> {
    let data_plane = app.data_plane.as_ref().map(|dp| {
        json!({
            "listen_ip": dp.config.listen_ip,
            "health_check_speedup": dp.speedup(),
            "proxy_protocol_version": dp.config.proxy_protocol_version,
        })
    });
    Json(json!({
        "action_duration_ms": app.action_ms.load(std::sync::atomic::Ordering::Relaxed),
        "rate_limit": app.rate.status(),
        "state_file": app.config.state_file,
        "max_routes_per_network": app.config.max_routes_per_network,
        "data_plane": data_plane,
    }))
}

#[derive(Debug, Deserialize)]
struct ConfigReq {
    action_duration_ms: Option<u64>,
    /// Data plane only: health-check interval and timeout are divided by it.
    health_check_speedup: Option<f64>,
}

async fn set_config(
    AppState(app): AppState<App>,
    Body(req): Body<ConfigReq>,
) -> Result<Json<Value>, ApiError> {
    if let Some(speedup) = req.health_check_speedup {
        let dp = app.data_plane.as_ref().ok_or_else(data_plane_off)?;
        if !dp.set_speedup(speedup) {
            return Err(ApiError::invalid_input(
                "health_check_speedup",
                "must be a positive number",
            ));
        }
    }
    if let Some(ms) = req.action_duration_ms {
        app.set_action_duration(Duration::from_millis(ms));
    }
    Ok(config(AppState(app)).await)
}

// --- data plane ------------------------------------------------------------------------------

fn data_plane_off() -> ApiError {
    ApiError::new(
        409,
        "conflict",
        "the data plane is off (SimConfig::data_plane, --data-plane)",
    )
}

async fn listeners(
    AppState(app): AppState<App>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let id: u64 = id
        .parse()
        .map_err(|_| ApiError::not_found("load_balancer"))?;
    if !app.read().load_balancers.contains_key(&id) {
        return Err(ApiError::not_found("load_balancer"));
    }
    let listeners = app
        .data_plane
        .as_ref()
        .map(|dp| dp.listeners(id))
        .unwrap_or_default();
    Ok(Json(json!({"listeners": listeners})))
}

async fn addresses(AppState(app): AppState<App>) -> Json<Value> {
    Json(json!({"addresses": app.addresses.snapshot()}))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AddressReq {
    ip: IpAddr,
}

async fn allocate_address(
    AppState(app): AppState<App>,
    Body(req): Body<AddressReq>,
) -> Json<Value> {
    Json(json!({"ip": req.ip, "local": app.addresses.local(req.ip)}))
}

fn target_ip(raw: &str) -> Result<IpAddr, ApiError> {
    raw.parse()
        .map_err(|_| ApiError::invalid_input("ip", "not an IP address"))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TargetFaultReq {
    kind: TargetFault,
}

async fn set_target_fault(
    AppState(app): AppState<App>,
    Path(ip): Path<String>,
    Body(req): Body<TargetFaultReq>,
) -> Result<Json<Value>, ApiError> {
    let ip = target_ip(&ip)?;
    let dp = app.data_plane.as_ref().ok_or_else(data_plane_off)?;
    dp.faults.set(ip, req.kind);
    Ok(Json(json!({"ip": ip, "kind": req.kind})))
}

async fn clear_target_fault(
    AppState(app): AppState<App>,
    Path(ip): Path<String>,
) -> Result<StatusCode, ApiError> {
    let ip = target_ip(&ip)?;
    let dp = app.data_plane.as_ref().ok_or_else(data_plane_off)?;
    dp.faults.clear(ip);
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Debug, Deserialize)]
struct MetadataReq {
    server: Option<u64>,
}

async fn set_metadata(AppState(app): AppState<App>, Body(req): Body<MetadataReq>) -> StatusCode {
    *app.metadata_server
        .lock()
        .unwrap_or_else(|e| e.into_inner()) = req.server;
    StatusCode::NO_CONTENT
}

#[derive(Debug, Deserialize)]
struct BatchReq {
    count: usize,
    prefix: String,
    /// With `count: 1`: the server's exact name instead of `{prefix}-1`.
    #[serde(default)]
    name: Option<String>,
    /// With `count: 1`: the server's public IPv4 instead of one from 100.64.0.0/10, for a server
    /// that stands for a real machine (`cargo xtask cluster`'s node), so the addresses a
    /// controller writes are ones the machine really has.
    #[serde(default)]
    public_ipv4: Option<std::net::Ipv4Addr>,
    #[serde(flatten)]
    template: serde_json::Map<String, Value>,
}

async fn batch_servers(
    AppState(app): AppState<App>,
    Body(req): Body<BatchReq>,
) -> Result<Response, ApiError> {
    if req.count > 100_000 {
        return Err(ApiError::invalid_input(
            "count",
            "at most 100000 servers per batch",
        ));
    }
    let mut template = Value::Object(req.template);
    if template.get("image").is_none() {
        template["image"] = json!("ubuntu-24.04");
    }
    if (req.name.is_some() || req.public_ipv4.is_some()) && req.count != 1 {
        return Err(ApiError::invalid_input(
            "count",
            "name and public_ipv4 need count 1",
        ));
    }
    if req.public_ipv4.is_some()
        && template.pointer("/public_net/enable_ipv4") == Some(&json!(false))
    {
        return Err(ApiError::invalid_input(
            "public_ipv4",
            "a server without a public IPv4 (public_net.enable_ipv4: false) cannot have one",
        ));
    }
    let mut st = app.write();
    let ids = match &req.name {
        Some(name) => {
            template["name"] = json!(name);
            let one = serde_json::from_value(template)
                .map_err(|e| ApiError::invalid_input("body", e.to_string()))?;
            vec![servers::create_server(&mut st, &one, false)?.server]
        }
        None => servers::create_batch(&mut st, &template, req.count, &req.prefix)?,
    };
    if let Some(ip) = req.public_ipv4
        && let Some(v4) = ids
            .first()
            .and_then(|id| st.servers.get_mut(id))
            .and_then(|s| s.ipv4.as_mut())
    {
        v4.ip = ip;
        v4.dns_ptr = format!("static.{ip}.clients.your-server.de");
    }
    Ok((StatusCode::CREATED, Json(json!({"servers": ids}))).into_response())
}

async fn save_state(AppState(app): AppState<App>) -> Result<StatusCode, ApiError> {
    app.mark_dirty();
    app.flush()
        .map(|()| StatusCode::NO_CONTENT)
        .map_err(|e| ApiError::new(500, "server_error", format!("cannot write state: {e}")))
}

// --- Robot webservice ------------------------------------------------------------------------

/// A dedicated server to create (`POST`) or the fields to change (`PUT`); every field optional.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RobotServerReq {
    /// Default: the next free number above 1 000 000. Create only.
    server_number: Option<u64>,
    /// Default: `""` (a server nobody named).
    server_name: Option<String>,
    /// Default `AX41-NVMe`.
    product: Option<String>,
    /// Default `FSN1-DC14`.
    dc: Option<String>,
    /// Default `unlimited`.
    traffic: Option<String>,
    /// `ready` (default) | `in process`.
    status: Option<String>,
    cancelled: Option<bool>,
    /// `YYYY-MM-DD`; default: 30 days from now.
    paid_until: Option<String>,
    /// `false`: IPv6 only (`server_ip` null, `ip` empty). Create only.
    ipv4: Option<bool>,
    /// `false`: no IPv6 subnet (`server_ipv6_net: ""`), as Robot reports for some servers.
    /// Create only.
    ipv6: Option<bool>,
    /// `on` (default) | `off`: `operating_status` `running` | `shut off`.
    power: Option<String>,
    /// `false`: a tower-case model whose `operating_status` is `not supported`.
    operating_status_supported: Option<bool>,
    /// `false`: no reset option; `GET /reset/{n}` answers `RESET_NOT_AVAILABLE`.
    reset: Option<bool>,
}

fn parse_power(power: &str) -> Result<bool, ApiError> {
    match power {
        "on" => Ok(true),
        "off" => Ok(false),
        _ => Err(ApiError::invalid_input(
            "power",
            "must be \"on\" or \"off\"",
        )),
    }
}

fn check_robot_fields(req: &RobotServerReq) -> Result<(), ApiError> {
    if let Some(status) = &req.status
        && status != "ready"
        && status != "in process"
    {
        return Err(ApiError::invalid_input(
            "status",
            "must be \"ready\" or \"in process\"",
        ));
    }
    if let Some(date) = &req.paid_until {
        let b = date.as_bytes();
        let shape = b.len() == 10
            && b.iter().enumerate().all(|(i, c)| match i {
                4 | 7 => *c == b'-',
                _ => c.is_ascii_digit(),
            });
        if !shape {
            return Err(ApiError::invalid_input("paid_until", "must be YYYY-MM-DD"));
        }
    }
    if let Some(power) = &req.power {
        parse_power(power)?;
    }
    Ok(())
}

/// Applies the changeable fields of `req` (already checked).
fn apply_robot_fields(s: &mut RobotServer, req: RobotServerReq) {
    let set = |field: &mut String, value: Option<String>| {
        if let Some(v) = value {
            *field = v;
        }
    };
    set(&mut s.name, req.server_name);
    set(&mut s.product, req.product);
    set(&mut s.dc, req.dc);
    set(&mut s.traffic, req.traffic);
    set(&mut s.status, req.status);
    set(&mut s.paid_until, req.paid_until);
    if let Some(c) = req.cancelled {
        s.cancelled = c;
    }
    if let Some(on) = req.power.as_deref().and_then(|p| parse_power(p).ok()) {
        s.powered_on = on;
    }
    if let Some(v) = req.operating_status_supported {
        s.operating_status_supported = v;
    }
    if let Some(v) = req.reset {
        s.reset_available = v;
    }
}

fn robot_number(raw: &str) -> Result<u64, ApiError> {
    raw.parse()
        .map_err(|_| ApiError::not_found("dedicated server"))
}

async fn robot_servers(AppState(app): AppState<App>) -> Json<Value> {
    let st = app.read();
    let servers: Vec<Value> = st
        .robot_servers
        .values()
        .map(|s| robot::server_json(s, true))
        .collect();
    Json(json!({"servers": servers}))
}

async fn robot_server(
    AppState(app): AppState<App>,
    Path(number): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let number = robot_number(&number)?;
    let st = app.read();
    st.robot_servers
        .get(&number)
        .map(|s| Json(robot::server_json(s, true)))
        .ok_or_else(|| ApiError::not_found("dedicated server"))
}

async fn create_robot_server(
    AppState(app): AppState<App>,
    Body(mut req): Body<RobotServerReq>,
) -> Result<Response, ApiError> {
    check_robot_fields(&req)?;
    let mut st = app.write();
    let number = match req.server_number.take() {
        Some(n) if st.robot_servers.contains_key(&n) => {
            return Err(ApiError::uniqueness("server_number"));
        }
        Some(0) => return Err(ApiError::invalid_input("server_number", "must be > 0")),
        Some(n) => n,
        None => st.alloc_robot_number(),
    };
    let (v4, v6) = st.alloc_robot_ips();
    let created_ms = now_ms();
    let mut server = RobotServer {
        number,
        name: String::new(),
        ipv4: req.ipv4.take().unwrap_or(true).then_some(v4),
        ipv6_net: req.ipv6.take().unwrap_or(true).then_some(v6),
        product: "AX41-NVMe".to_owned(),
        dc: "FSN1-DC14".to_owned(),
        traffic: "unlimited".to_owned(),
        status: "ready".to_owned(),
        cancelled: false,
        paid_until: rfc3339(created_ms + 30 * 24 * 3600 * 1000)[..10].to_owned(),
        powered_on: true,
        operating_status_supported: true,
        reset_available: true,
        created_ms,
    };
    apply_robot_fields(&mut server, req);
    let body = robot::server_json(&server, true);
    st.robot_servers.insert(number, server);
    Ok((StatusCode::CREATED, Json(body)).into_response())
}

async fn update_robot_server(
    AppState(app): AppState<App>,
    Path(number): Path<String>,
    Body(req): Body<RobotServerReq>,
) -> Result<Json<Value>, ApiError> {
    let number = robot_number(&number)?;
    if req.server_number.is_some_and(|n| n != number) {
        return Err(ApiError::invalid_input(
            "server_number",
            "cannot be changed",
        ));
    }
    if req.ipv4.is_some() {
        return Err(ApiError::invalid_input("ipv4", "cannot be changed"));
    }
    check_robot_fields(&req)?;
    let mut st = app.write();
    let server = st
        .robot_servers
        .get_mut(&number)
        .ok_or_else(|| ApiError::not_found("dedicated server"))?;
    apply_robot_fields(server, req);
    Ok(Json(robot::server_json(server, true)))
}

async fn delete_robot_server(
    AppState(app): AppState<App>,
    Path(number): Path<String>,
) -> Result<StatusCode, ApiError> {
    let number = robot_number(&number)?;
    app.write()
        .robot_servers
        .remove(&number)
        .map(|_| StatusCode::NO_CONTENT)
        .ok_or_else(|| ApiError::not_found("dedicated server"))
}

async fn robot_rate_limit(AppState(app): AppState<App>) -> Json<Value> {
    let limits: serde_json::Map<String, Value> = app
        .robot_rate
        .statuses()
        .into_iter()
        .map(|st| (st.resource.clone(), json!(st)))
        .collect();
    Json(Value::Object(limits))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RobotRateLimitReq {
    resource: String,
    max_request: Option<u32>,
    /// Seconds.
    interval: Option<u64>,
    remaining: Option<u32>,
}

async fn set_robot_rate_limit(
    AppState(app): AppState<App>,
    Body(req): Body<RobotRateLimitReq>,
) -> Result<Json<Value>, ApiError> {
    if req.interval == Some(0) {
        return Err(ApiError::invalid_input(
            "interval",
            "must be at least 1 second",
        ));
    }
    app.robot_rate
        .set(
            &req.resource,
            req.max_request,
            req.interval.map(Duration::from_secs),
            req.remaining,
        )
        .map(|st| Json(json!(st)))
        .ok_or_else(|| ApiError::invalid_input("resource", "must be \"server\" or \"reset\""))
}

async fn reset_robot_rate_limit(AppState(app): AppState<App>) -> StatusCode {
    app.robot_rate.reset();
    StatusCode::NO_CONTENT
}
