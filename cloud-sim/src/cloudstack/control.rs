//! World building for the CloudStack cloud, under `/_sim/cloudstack` like the other control
//! endpoints: no authentication, not counted, untouched by faults. Errors answer in the control
//! endpoints' own (Hetzner) shape. Zones, offerings, networks, accounts and projects are named
//! by id or name; VMs by id.
//!
//! | method + path | body | answer |
//! |---|---|---|
//! | `GET /_sim/cloudstack/world` | | ids and names of accounts, projects, zones, offerings, VPCs, networks, ACL lists |
//! | `GET`/`PUT /_sim/cloudstack/config` | `{"default_page_size"?, "allow_user_view_destroyed_vm"?, "throttling"? ({"max", "interval_ms"} or null), "unreachable"?, "version"?}` | the settings |
//! | `POST /_sim/cloudstack/accounts` | `{"name", "role"? ("admin" \| "user"), "api_key"?, "secret_key"?}` | 201 `{"id", "name", "role", "api_key", "secret_key"}` |
//! | `PUT /_sim/cloudstack/accounts/{id}` | `{"enabled"}` | the account |
//! | `POST /_sim/cloudstack/projects` | `{"name", "members"? [accounts]}` | 201 `{"id"}` |
//! | `POST /_sim/cloudstack/zones` | `{"name"}` | 201 `{"id"}` |
//! | `POST /_sim/cloudstack/offerings` | `{"name", "cpu_number"?, "cpu_speed"?, "memory"?}` | 201 `{"id"}` |
//! | `POST /_sim/cloudstack/networks` | `{"name", "zone"?, "kind"? ("isolated" \| "vpc_tier" \| "shared"), "cidr"?, "account"?, "project"?, "vpc"?, "acl"?}` | 201 `{"id"}` |
//! | `GET /_sim/cloudstack/vms` | | `{"vms": [...]}`, expunged ones included |
//! | `POST /_sim/cloudstack/vms` | `{"name"?, "count"?, "prefix"?, "display_name"?, "zone"?, "offering"?, "network"?, "account"?, "project"?, "state"?, "ip"?, "static_nat"?}` | 201 `{"ids": [...]}` |
//! | `GET`/`PUT`/`DELETE /_sim/cloudstack/vms/{id}` | `PUT`: `{"state"?, "name"?, "display_name"?, "host"?}` | the VM / changed / expunged at once |
//! | `POST /_sim/cloudstack/vms/{id}/{start\|stop\|destroy\|expunge}` | | the VM (in its transitional state) |
//! | `PUT`/`DELETE /_sim/cloudstack/vms/{id}/static_nat` | `PUT`: `{"ip"?}` | `{"id", "ipaddress"}` / 204 |
//! | `POST /_sim/cloudstack/jobs` | `{"account"?, "command"?, "duration_ms"?, "never"?, "fail"? {"errorcode", "errortext"}, "result"?}` | 201 `{"jobid"}` |
//!
//! `POST .../vms` with `count` creates `{prefix}-1` ... `{prefix}-{count}` under one lock (a
//! thousand VMs for a benchmark in one request). Transitional states (`Starting`, `Stopping`,
//! `Expunging`) last as long as an action (`SimConfig::action_duration`, `PUT /_sim/config`).

use std::net::Ipv4Addr;
use std::sync::atomic::Ordering;

use axum::extract::{Path, State as AppState};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{Value, json};

use super::access::Caller;
use super::build::{NetworkSpec, VmOp, VmSpec};
use super::model::{
    JobOutcome, NetworkKind, Owner, Role, Settings, Throttling, Vm, VmState, World,
};
use crate::app::App;
use crate::clock::now_ms;
use crate::error::ApiError;
use crate::handlers::Body;

type Result<T, E = ApiError> = std::result::Result<T, E>;

pub fn routes() -> Router<App> {
    Router::new()
        .route("/_sim/cloudstack/world", get(world))
        .route("/_sim/cloudstack/config", get(config).put(set_config))
        .route("/_sim/cloudstack/accounts", post(create_account))
        .route("/_sim/cloudstack/accounts/{id}", put(update_account))
        .route("/_sim/cloudstack/projects", post(create_project))
        .route("/_sim/cloudstack/zones", post(create_zone))
        .route("/_sim/cloudstack/offerings", post(create_offering))
        .route("/_sim/cloudstack/networks", post(create_network))
        .route("/_sim/cloudstack/vms", get(list_vms).post(create_vms))
        .route(
            "/_sim/cloudstack/vms/{id}",
            get(show_vm).put(update_vm).delete(expunge_vm),
        )
        .route(
            "/_sim/cloudstack/vms/{id}/static_nat",
            put(set_static_nat).delete(clear_static_nat),
        )
        .route("/_sim/cloudstack/vms/{id}/{op}", post(vm_op))
        .route("/_sim/cloudstack/jobs", post(create_job))
}

fn created(body: Value) -> Response {
    (StatusCode::CREATED, Json(body)).into_response()
}

fn invalid(field: &str, message: impl Into<String>) -> ApiError {
    ApiError::invalid_input(field, message)
}

async fn world(AppState(app): AppState<App>) -> Json<Value> {
    let st = app.read();
    let w = &st.cloudstack;
    let named = |id: &str, name: &str| json!({"id": id, "name": name});
    Json(json!({
        "accounts": w.accounts.iter().map(|a| json!({"id": a.id, "name": a.name, "role": a.role, "primary": a.primary, "enabled": a.enabled})).collect::<Vec<_>>(),
        "projects": w.projects.iter().map(|p| named(&p.id, &p.name)).collect::<Vec<_>>(),
        "zones": w.zones.iter().map(|z| named(&z.id, &z.name)).collect::<Vec<_>>(),
        "offerings": w.offerings.iter().map(|o| named(&o.id, &o.name)).collect::<Vec<_>>(),
        "vpcs": w.vpcs.iter().map(|v| named(&v.id, &v.name)).collect::<Vec<_>>(),
        "networks": w.networks.iter().map(|n| json!({"id": n.id, "name": n.name, "kind": n.kind, "cidr": n.cidr.to_string(), "services": n.services})).collect::<Vec<_>>(),
        "acl_lists": w.acl_lists.iter().map(|a| named(&a.id, &a.name)).collect::<Vec<_>>(),
    }))
}

async fn config(AppState(app): AppState<App>) -> Json<Settings> {
    Json(app.read().cloudstack.settings.clone())
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigReq {
    default_page_size: Option<usize>,
    allow_user_view_destroyed_vm: Option<bool>,
    /// Absent: unchanged; `null`: off.
    #[serde(default, deserialize_with = "present")]
    throttling: Option<Option<Throttling>>,
    unreachable: Option<bool>,
    version: Option<String>,
}

/// Tells a field sent as `null` (`Some(None)`) from one not sent (`None`).
fn present<'de, D, T>(d: D) -> std::result::Result<Option<Option<T>>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(d).map(Some)
}

async fn set_config(
    AppState(app): AppState<App>,
    Body(req): Body<ConfigReq>,
) -> Result<Json<Settings>> {
    let mut st = app.write();
    let s = &mut st.cloudstack.settings;
    if let Some(n) = req.default_page_size {
        if n == 0 {
            return Err(invalid("default_page_size", "must be positive"));
        }
        s.default_page_size = n;
    }
    if let Some(b) = req.allow_user_view_destroyed_vm {
        s.allow_user_view_destroyed_vm = b;
    }
    if let Some(t) = req.throttling {
        s.throttling = t;
        st.cloudstack.throttle_windows.clear();
    }
    let s = &mut st.cloudstack.settings;
    if let Some(b) = req.unreachable {
        s.unreachable = b;
    }
    if let Some(v) = req.version {
        s.version = v;
    }
    Ok(Json(s.clone()))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AccountReq {
    name: String,
    #[serde(default)]
    role: Option<Role>,
    api_key: Option<String>,
    secret_key: Option<String>,
}

async fn create_account(
    AppState(app): AppState<App>,
    Body(req): Body<AccountReq>,
) -> Result<Response> {
    let mut st = app.write();
    let w = &mut st.cloudstack;
    if w.account_by_name(&req.name).is_some() {
        return Err(ApiError::uniqueness("name"));
    }
    let (api_key, _) = w.new_id();
    let (secret_key, _) = w.new_id();
    let api_key = req.api_key.unwrap_or_else(|| format!("key-{api_key}"));
    let secret_key = req
        .secret_key
        .unwrap_or_else(|| format!("secret-{secret_key}"));
    if w.accounts
        .iter()
        .any(|a| a.api_key.as_deref() == Some(api_key.as_str()))
        || api_key == app.config.cloudstack_api_key
    {
        return Err(ApiError::uniqueness("api_key"));
    }
    let role = req.role.unwrap_or(Role::User);
    let id = w.add_account(&req.name, role, Some((api_key.clone(), secret_key.clone())));
    Ok(created(
        json!({"id": id, "name": req.name, "role": role, "api_key": api_key, "secret_key": secret_key}),
    ))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AccountUpdate {
    enabled: bool,
}

async fn update_account(
    AppState(app): AppState<App>,
    Path(id): Path<String>,
    Body(req): Body<AccountUpdate>,
) -> Result<Json<Value>> {
    let mut st = app.write();
    let a = st
        .cloudstack
        .accounts
        .iter_mut()
        .find(|a| a.id == id || a.name == id)
        .ok_or_else(|| ApiError::not_found("account"))?;
    a.enabled = req.enabled;
    Ok(Json(
        json!({"id": a.id, "name": a.name, "enabled": a.enabled}),
    ))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ProjectReq {
    name: String,
    #[serde(default)]
    members: Vec<String>,
}

async fn create_project(
    AppState(app): AppState<App>,
    Body(req): Body<ProjectReq>,
) -> Result<Response> {
    let mut st = app.write();
    let w = &mut st.cloudstack;
    if w.projects.iter().any(|p| p.name == req.name) {
        return Err(ApiError::uniqueness("name"));
    }
    let members = req
        .members
        .iter()
        .map(|m| account_id(w, m))
        .collect::<Result<Vec<_>>>()?;
    Ok(created(json!({"id": w.add_project(&req.name, members)})))
}

fn account_id(w: &World, key: &str) -> Result<String> {
    w.accounts
        .iter()
        .find(|a| a.id == key || a.name == key)
        .map(|a| a.id.clone())
        .ok_or_else(|| invalid("account", format!("no account {key:?}")))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct NameReq {
    name: String,
}

async fn create_zone(AppState(app): AppState<App>, Body(req): Body<NameReq>) -> Result<Response> {
    let mut st = app.write();
    if st.cloudstack.zone_ref(&req.name).is_some() {
        return Err(ApiError::uniqueness("name"));
    }
    Ok(created(json!({"id": st.cloudstack.add_zone(&req.name)})))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct OfferingReq {
    name: String,
    cpu_number: Option<u32>,
    cpu_speed: Option<u32>,
    memory: Option<u32>,
}

async fn create_offering(
    AppState(app): AppState<App>,
    Body(req): Body<OfferingReq>,
) -> Result<Response> {
    let mut st = app.write();
    if st.cloudstack.offering_ref(&req.name).is_some() {
        return Err(ApiError::uniqueness("name"));
    }
    let id = st.cloudstack.add_offering(
        &req.name,
        req.cpu_number.unwrap_or(2),
        req.cpu_speed.unwrap_or(2000),
        req.memory.unwrap_or(4096),
    );
    Ok(created(json!({"id": id})))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct NetworkReq {
    name: String,
    zone: Option<String>,
    kind: Option<NetworkKind>,
    cidr: Option<String>,
    account: Option<String>,
    project: Option<String>,
    vpc: Option<String>,
    acl: Option<String>,
}

/// The owner named by `account` or `project` (not both); default the primary account.
fn owner(w: &World, account: Option<&str>, project: Option<&str>) -> Result<Owner> {
    match (account, project) {
        (Some(_), Some(_)) => Err(invalid("project", "give an account or a project, not both")),
        (None, Some(p)) => w
            .project_ref(p)
            .map(|p| Owner::Project(p.id.clone()))
            .ok_or_else(|| invalid("project", format!("no project {p:?}"))),
        (Some(a), None) => account_id(w, a).map(Owner::Account),
        (None, None) => Ok(Owner::Account(w.primary().id.clone())),
    }
}

async fn create_network(
    AppState(app): AppState<App>,
    Body(req): Body<NetworkReq>,
) -> Result<Response> {
    let mut st = app.write();
    let w = &mut st.cloudstack;
    let kind = req.kind.unwrap_or(NetworkKind::Isolated);
    let owner = if kind == NetworkKind::Shared && req.account.is_none() && req.project.is_none() {
        None
    } else {
        Some(owner(w, req.account.as_deref(), req.project.as_deref())?)
    };
    let spec = NetworkSpec {
        name: req.name,
        zone: req.zone.unwrap_or_else(|| "zone-1".into()),
        kind,
        cidr: req.cidr,
        owner,
        vpc: req.vpc,
        acl: req.acl,
    };
    let id = w.add_network(spec).map_err(|e| invalid("network", e))?;
    Ok(created(json!({"id": id})))
}

/// A VM as world building shows it (not the API's shape).
fn vm_json(w: &World, vm: &Vm) -> Value {
    json!({
        "id": vm.id,
        "name": vm.name,
        "display_name": vm.display_name,
        "state": vm.state.as_str(),
        "expunged": vm.expunged,
        "zone": w.zone(&vm.zone_id).map(|z| z.name.clone()),
        "offering": w.offering(&vm.offering_id).map(|o| o.name.clone()),
        "owner": vm.owner,
        "host": vm.host,
        "ip": vm.nics.first().map(|n| n.ip.to_string()),
        "network": vm.nics.first().map(|n| n.network_id.clone()),
        "public_ip": w.static_nat_of(&vm.id).map(|i| i.address.to_string()),
    })
}

async fn list_vms(AppState(app): AppState<App>) -> Json<Value> {
    let mut st = app.write();
    st.cloudstack.settle(now_ms());
    let w = &st.cloudstack;
    Json(json!({"vms": w.vms.iter().map(|v| vm_json(w, v)).collect::<Vec<_>>()}))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct VmReq {
    name: Option<String>,
    count: Option<usize>,
    prefix: Option<String>,
    display_name: Option<String>,
    zone: Option<String>,
    offering: Option<String>,
    network: Option<String>,
    account: Option<String>,
    project: Option<String>,
    state: Option<String>,
    ip: Option<Ipv4Addr>,
    #[serde(default)]
    static_nat: bool,
}

async fn create_vms(AppState(app): AppState<App>, Body(req): Body<VmReq>) -> Result<Response> {
    let count = req.count.unwrap_or(1);
    let names: Vec<String> = match (&req.name, &req.prefix) {
        (Some(name), None) if count == 1 => vec![name.clone()],
        (None, Some(prefix)) => (1..=count).map(|i| format!("{prefix}-{i}")).collect(),
        _ => return Err(invalid("name", "give a name (count 1) or a prefix")),
    };
    let state = parse_state(req.state.as_deref().unwrap_or("Running"))?;
    let mut st = app.write();
    let w = &mut st.cloudstack;
    let owner = owner(w, req.account.as_deref(), req.project.as_deref())?;
    let mut ids = Vec::with_capacity(names.len());
    for name in names {
        let spec = VmSpec {
            name,
            display_name: req.display_name.clone(),
            owner: owner.clone(),
            zone: req.zone.clone(),
            offering: req.offering.clone(),
            network: req.network.clone(),
            state,
            ip: req.ip.filter(|_| count == 1),
        };
        let id = w.add_vm(spec).map_err(|e| invalid("vm", e))?;
        if req.static_nat {
            w.set_static_nat(&id, None)
                .map_err(|e| invalid("static_nat", e))?;
        }
        ids.push(id);
    }
    Ok(created(json!({"ids": ids})))
}

fn parse_state(s: &str) -> Result<VmState> {
    VmState::parse(s).ok_or_else(|| invalid("state", format!("unknown VM state {s:?}")))
}

fn live_vm<'a>(w: &'a World, id: &str) -> Result<&'a Vm> {
    w.vm(id)
        .filter(|v| !v.expunged)
        .ok_or_else(|| ApiError::not_found("vm"))
}

async fn show_vm(AppState(app): AppState<App>, Path(id): Path<String>) -> Result<Json<Value>> {
    let mut st = app.write();
    st.cloudstack.settle(now_ms());
    let w = &st.cloudstack;
    let vm = w.vm(&id).ok_or_else(|| ApiError::not_found("vm"))?;
    Ok(Json(vm_json(w, vm)))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct VmUpdate {
    state: Option<String>,
    name: Option<String>,
    display_name: Option<String>,
    /// The hypervisor host; `null` takes the VM off its host.
    #[serde(default, deserialize_with = "present")]
    host: Option<Option<String>>,
}

async fn update_vm(
    AppState(app): AppState<App>,
    Path(id): Path<String>,
    Body(req): Body<VmUpdate>,
) -> Result<Json<Value>> {
    let ms = app.action_ms.load(Ordering::Relaxed);
    let mut st = app.write();
    let w = &mut st.cloudstack;
    w.settle(now_ms());
    live_vm(w, &id)?;
    if let Some(s) = &req.state {
        let state = parse_state(s)?;
        w.vm_op(&id, VmOp::Set(state), ms)
            .map_err(|e| invalid("state", e))?;
    }
    let vm = w.vm_mut(&id).ok_or_else(|| ApiError::not_found("vm"))?;
    if let Some(name) = req.name {
        vm.name = name;
    }
    if let Some(name) = req.display_name {
        vm.display_name = name;
    }
    if let Some(host) = req.host {
        vm.host = host;
    }
    let w = &st.cloudstack;
    Ok(Json(vm_json(w, live_vm(w, &id)?)))
}

async fn expunge_vm(AppState(app): AppState<App>, Path(id): Path<String>) -> Result<StatusCode> {
    let mut st = app.write();
    let w = &mut st.cloudstack;
    live_vm(w, &id)?;
    w.vm_op(&id, VmOp::Expunge, 0)
        .map_err(|e| invalid("vm", e))?;
    Ok(StatusCode::NO_CONTENT)
}

async fn vm_op(
    AppState(app): AppState<App>,
    Path((id, op)): Path<(String, String)>,
) -> Result<Json<Value>> {
    let op = match op.as_str() {
        "start" => VmOp::Start,
        "stop" => VmOp::Stop,
        "destroy" => VmOp::Destroy,
        "expunge" => VmOp::Expunge,
        _ => return Err(ApiError::not_found("operation")),
    };
    let ms = app.action_ms.load(Ordering::Relaxed);
    let mut st = app.write();
    let w = &mut st.cloudstack;
    w.settle(now_ms());
    live_vm(w, &id)?;
    w.vm_op(&id, op, ms).map_err(|e| invalid("vm", e))?;
    let vm = w.vm(&id).ok_or_else(|| ApiError::not_found("vm"))?;
    Ok(Json(vm_json(w, vm)))
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct StaticNatReq {
    ip: Option<Ipv4Addr>,
}

async fn set_static_nat(
    AppState(app): AppState<App>,
    Path(id): Path<String>,
    Body(req): Body<StaticNatReq>,
) -> Result<Json<Value>> {
    let mut st = app.write();
    let w = &mut st.cloudstack;
    live_vm(w, &id)?;
    let ip = w
        .set_static_nat(&id, req.ip)
        .map_err(|e| invalid("ip", e))?;
    let address = w.ip(&ip).map(|i| i.address.to_string());
    Ok(Json(json!({"id": ip, "ipaddress": address})))
}

async fn clear_static_nat(
    AppState(app): AppState<App>,
    Path(id): Path<String>,
) -> Result<StatusCode> {
    let mut st = app.write();
    live_vm(&st.cloudstack, &id)?;
    st.cloudstack.clear_static_nat(&id);
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct JobReq {
    account: Option<String>,
    command: Option<String>,
    duration_ms: Option<u64>,
    #[serde(default)]
    never: bool,
    fail: Option<JobFailure>,
    result: Option<Value>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct JobFailure {
    errorcode: u16,
    errortext: Option<String>,
}

/// A job that does nothing but end as told: for clients' job pollers.
async fn create_job(AppState(app): AppState<App>, Body(req): Body<JobReq>) -> Result<Response> {
    let default_ms = app.action_ms.load(Ordering::Relaxed);
    let mut st = app.write();
    let w = &mut st.cloudstack;
    let account = match &req.account {
        Some(a) => account_id(w, a)?,
        None => w.primary().id.clone(),
    };
    let caller = Caller::of(w, &account).ok_or_else(|| invalid("account", "no such account"))?;
    let outcome = match req.fail {
        Some(f) => JobOutcome::Failure {
            errorcode: f.errorcode,
            text: f.errortext.unwrap_or_else(|| "Job failed".into()),
        },
        None => JobOutcome::Success(req.result.unwrap_or_else(|| json!({"success": true}))),
    };
    let now = now_ms();
    let done_at = (!req.never).then(|| now + req.duration_ms.unwrap_or(default_ms));
    let command = req.command.unwrap_or_else(|| "simulatedJob".into());
    let id = w.submit_job(&caller, &command, ("None", None), outcome, now, done_at);
    Ok(created(json!({"jobid": id})))
}
