//! `/servers`: the writes tests and the demo build their world with (create, delete, power,
//! networks; the controllers never write servers) and the reads the controllers make.

use std::net::Ipv4Addr;

use axum::Router;
use axum::extract::State as AppState;
use axum::routing::{get, post};
use serde_json::{Value, json};

use super::collection::{list, update};
use super::{ApiResult, Body, Id, action, check_labels, created, ok, validate_name};
use crate::actions::{Effect, ResourceRef};
use crate::app::App;
use crate::catalog;
use crate::cidr::Ipv4Net;
use crate::clock::now_ms;
use crate::error::ApiError;
use crate::pagination::{Query, SortKey};
use crate::resource::{Resource, resource_accessors};
use crate::state::{PublicIpv4, PublicIpv6, Server, ServerPrivateNet, State, TargetKind};
use crate::wire::{self, AttachReq, CreateServerReq, NetworkRef, ProtectionReq};

pub fn routes() -> Router<App> {
    let power = |command: &'static str| {
        post(move |AppState(app): AppState<App>, Id(id): Id| async move {
            power_action(&app, id, command)
        })
    };
    Router::new()
        .route("/v1/servers", get(list::<Server>).post(create))
        .route(
            "/v1/servers/{id}",
            get(get_one).put(update::<Server>).delete(delete),
        )
        .route("/v1/servers/{id}/actions/poweron", power("poweron"))
        .route("/v1/servers/{id}/actions/poweroff", power("poweroff"))
        .route("/v1/servers/{id}/actions/shutdown", power("shutdown"))
        .route("/v1/servers/{id}/actions/reboot", power("reboot"))
        .route("/v1/servers/{id}/actions/reset", power("reset"))
        .route("/v1/servers/{id}/actions/attach_to_network", post(attach))
        .route("/v1/servers/{id}/actions/detach_from_network", post(detach))
        .route(
            "/v1/servers/{id}/actions/change_protection",
            post(change_protection),
        )
}

impl Resource for Server {
    const KIND: &'static str = "server";
    const COLLECTION: &'static str = "servers";
    const HOSTNAME: bool = true;
    resource_accessors!(servers);

    fn render(&self, st: &State) -> Value {
        wire::server(st, self)
    }

    fn own_sort_key(&self, field: &str) -> Option<SortKey> {
        (field == "status").then(|| SortKey::Str(self.status.clone()))
    }

    /// `status=` (repeatable): servers in any of the given states; a state the API does not
    /// have is refused.
    fn list_filter(query: &Query) -> Result<impl Fn(&Server) -> bool, ApiError> {
        let statuses: Vec<&str> = query.all("status").collect();
        if let Some(bad) = statuses.iter().find(|s| !STATUSES.contains(s)) {
            return Err(ApiError::invalid_input(
                "status",
                format!("unknown status '{bad}'"),
            ));
        }
        Ok(move |s: &Server| statuses.is_empty() || statuses.contains(&s.status.as_str()))
    }

    /// Keeps the name index (used by `?name=` lookups at 10 000 servers) in step.
    fn renamed(st: &mut State, id: u64, previous: &str) {
        let current = st.servers[&id].name.clone();
        st.server_names.remove(previous);
        st.server_names.insert(current, id);
    }
}

const STATUSES: &[&str] = &[
    "initializing",
    "starting",
    "running",
    "stopping",
    "off",
    "deleting",
    "migrating",
    "rebuilding",
    "unknown",
];

async fn get_one(AppState(app): AppState<App>, Id(id): Id) -> ApiResult {
    let st = app.read();
    let s = st
        .servers
        .get(&id)
        .ok_or_else(|| ApiError::not_found("server"))?;
    ok(json!({"server": wire::server(&st, s)}))
}

/// What creating a server produced.
#[derive(Debug)]
pub struct Created {
    pub server: u64,
    pub action: Option<u64>,
    pub next_action: Option<u64>,
}

/// Validates and creates a server. `with_actions: false` is the batch path used by
/// `/_sim/batch/servers`: same validation, but the server is born `running` without actions.
pub fn create_server(
    st: &mut State,
    req: &CreateServerReq,
    with_actions: bool,
) -> Result<Created, ApiError> {
    validate_name(&req.name, true)?;
    if st.server_names.contains_key(&req.name) {
        return Err(ApiError::uniqueness("name"));
    }
    let server_type = catalog::find_server_type(&req.server_type)
        .ok_or_else(|| ApiError::invalid_input("server_type", "unknown server type"))?;
    if server_type.deprecation.is_some() {
        return Err(ApiError::invalid_input(
            "server_type",
            "server type is deprecated and no longer available",
        ));
    }
    let image = catalog::find_image(&req.image)
        .ok_or_else(|| ApiError::invalid_input("image", "unknown image"))?;
    let location = match &req.location {
        Some(l) => catalog::find_location(l)
            .ok_or_else(|| ApiError::invalid_input("location", "unknown location"))?,
        None => catalog::LOCATIONS
            .iter()
            .find(|l| server_type.available_in(l.name))
            .unwrap_or(&catalog::LOCATIONS[0]),
    };
    if !server_type.available_in(location.name) {
        return Err(ApiError::invalid_input(
            "server_type",
            format!(
                "server type {} is not available in location {}",
                server_type.name, location.name
            ),
        ));
    }
    let labels = req.labels.clone().unwrap_or_default();
    check_labels(&labels)?;
    let networks = req.networks.clone().unwrap_or_default();
    for n in &networks {
        if !st.networks.contains_key(n) {
            return Err(ApiError::invalid_input(
                "networks",
                format!("network {n} not found"),
            ));
        }
    }
    let enable_v4 = req
        .public_net
        .as_ref()
        .and_then(|p| p.enable_ipv4)
        .unwrap_or(true);
    let enable_v6 = req
        .public_net
        .as_ref()
        .and_then(|p| p.enable_ipv6)
        .unwrap_or(true);
    if !enable_v4 && !enable_v6 && networks.is_empty() {
        return Err(ApiError::invalid_input(
            "public_net",
            "a server without public IPs needs a network",
        ));
    }
    let start = req.start_after_create.unwrap_or(true);

    let id = State::next_id(&mut st.next.server);
    let (ip_id, v4, v6) = st.alloc_public_ips();
    let server = Server {
        id,
        name: req.name.clone(),
        status: if with_actions {
            "initializing"
        } else if start {
            "running"
        } else {
            "off"
        }
        .to_owned(),
        created_ms: now_ms(),
        server_type: server_type.id,
        location: location.id,
        image: image.id,
        labels,
        ipv4: enable_v4.then(|| PublicIpv4 {
            id: ip_id,
            ip: v4,
            dns_ptr: format!("static.{v4}.clients.your-server.de"),
        }),
        ipv6: enable_v6.then_some(PublicIpv6 {
            id: ip_id,
            network: v6,
        }),
        private_net: Vec::new(),
        protection_delete: false,
        protection_rebuild: false,
    };
    st.server_names.insert(server.name.clone(), id);
    st.servers.insert(id, server);
    for n in networks {
        if let Err(e) = attach_server(
            st,
            id,
            &AttachReq {
                network: n,
                ip: None,
                alias_ips: None,
                ip_range: None,
            },
        ) {
            remove_server(st, id);
            return Err(e);
        }
    }
    if !with_actions {
        return Ok(Created {
            server: id,
            action: None,
            next_action: None,
        });
    }
    let effect = Effect::ServerStatus {
        server: id,
        status: if start { "running" } else { "off" }.to_owned(),
    };
    let action = st.start_action(
        "create_server",
        vec![ResourceRef::new("server", id)],
        effect,
    );
    let next_action = start.then(|| {
        st.start_action(
            "start_server",
            vec![ResourceRef::new("server", id)],
            Effect::None,
        )
    });
    Ok(Created {
        server: id,
        action: Some(action),
        next_action,
    })
}

async fn create(AppState(app): AppState<App>, Body(req): Body<CreateServerReq>) -> ApiResult {
    let mut st = app.write();
    let c = create_server(&mut st, &req, true)?;
    let server = wire::server(&st, &st.servers[&c.server]);
    created(json!({
        "server": server,
        "action": c.action.map(|a| st.action_json(a)),
        "next_actions": c.next_action.map(|a| vec![st.action_json(a)]).unwrap_or_default(),
        "root_password": format!("sim-root-{}", c.server),
    }))
}

/// Takes a server out of the world: its private IPs and every LB target pointing at it go too,
/// as they do in the real cloud.
fn remove_server(st: &mut State, id: u64) {
    let Some(s) = st.servers.remove(&id) else {
        return;
    };
    st.server_names.remove(&s.name);
    for p in &s.private_net {
        st.release_private_ip(p.network, p.ip);
        for a in &p.alias_ips {
            st.release_private_ip(p.network, *a);
        }
    }
    for lb in st.load_balancers.values_mut() {
        lb.targets.retain(|t| t.kind != TargetKind::Server(id));
    }
}

async fn delete(AppState(app): AppState<App>, Id(id): Id) -> ApiResult {
    let mut st = app.write();
    let s = st
        .servers
        .get(&id)
        .ok_or_else(|| ApiError::not_found("server"))?;
    if s.protection_delete {
        return Err(ApiError::protected("server", id));
    }
    st.ensure_unlocked("server", id)?;
    remove_server(&mut st, id);
    let a = st.start_action(
        "delete_server",
        vec![ResourceRef::new("server", id)],
        Effect::None,
    );
    action(&st, a)
}

fn power_action(app: &App, id: u64, command: &str) -> ApiResult {
    let mut st = app.write();
    let s = st
        .servers
        .get_mut(&id)
        .ok_or_else(|| ApiError::not_found("server"))?;
    let (during, after) = match command {
        "poweron" => ("starting", "running"),
        "poweroff" | "shutdown" => ("stopping", "off"),
        // reboot / reset: the server stays `running` from the API's point of view.
        _ => ("running", "running"),
    };
    let current = s.status.clone();
    st.ensure_unlocked("server", id)?;
    let (during, after) = if command == "poweron" && current == "running" {
        ("running", "running")
    } else {
        (during, after)
    };
    if let Some(s) = st.servers.get_mut(&id) {
        s.status = during.to_owned();
    }
    let effect = Effect::ServerStatus {
        server: id,
        status: after.to_owned(),
    };
    let a = st.start_action(command, vec![ResourceRef::new("server", id)], effect);
    action(&st, a)
}

fn parse_ip(field: &str, s: &str) -> Result<Ipv4Addr, ApiError> {
    s.parse()
        .map_err(|_| ApiError::invalid_input(field, format!("'{s}' is not an IPv4 address")))
}

/// Attaches a server to a network (shared with `POST /servers {networks}`).
pub fn attach_server(st: &mut State, id: u64, req: &AttachReq) -> Result<(), ApiError> {
    let server = st
        .servers
        .get(&id)
        .ok_or_else(|| ApiError::not_found("server"))?;
    let zone = catalog::location(server.location).network_zone;
    if server.private_net.iter().any(|p| p.network == req.network) {
        return Err(ApiError::unprocessable(
            "server_already_attached",
            "server is already attached to this network",
        ));
    }
    let network = st.networks.get(&req.network).ok_or_else(|| {
        ApiError::invalid_input("network", format!("network {} not found", req.network))
    })?;
    let subnets: Vec<Ipv4Net> = network
        .subnets
        .iter()
        .filter(|s| s.network_zone == zone && s.kind != "vswitch")
        .map(|s| s.ip_range)
        .collect();
    if subnets.is_empty() {
        return Err(ApiError::invalid_input(
            "network",
            format!(
                "network {} has no subnet in network zone {zone}",
                req.network
            ),
        ));
    }
    let pool: Vec<Ipv4Net> = match &req.ip_range {
        Some(r) => {
            let r = Ipv4Net::parse(r)
                .ok_or_else(|| ApiError::invalid_input("ip_range", "not a valid IP range"))?;
            if !subnets.contains(&r) {
                return Err(ApiError::invalid_input(
                    "ip_range",
                    "no subnet with this IP range in the server's network zone",
                ));
            }
            vec![r]
        }
        None => subnets.clone(),
    };
    let check = |st: &State, field: &str, raw: &str| -> Result<Ipv4Addr, ApiError> {
        let ip = parse_ip(field, raw)?;
        let sub = pool.iter().find(|s| s.contains(ip)).ok_or_else(|| {
            ApiError::invalid_input(
                field,
                "IP is not inside a subnet of the server's network zone",
            )
        })?;
        if u32::from(ip) < sub.first() + 2 || u32::from(ip) >= sub.last() {
            return Err(ApiError::invalid_input(field, "IP is reserved"));
        }
        if st.private_ip_taken(req.network, ip) {
            return Err(ApiError::unprocessable(
                "ip_not_available",
                format!("IP {ip} is already in use"),
            ));
        }
        Ok(ip)
    };
    let ip = match &req.ip {
        Some(raw) => check(st, "ip", raw)?,
        None => pool
            .iter()
            .find_map(|s| st.free_ip_in(req.network, s))
            .ok_or_else(|| {
                ApiError::unprocessable(
                    "no_subnet_available",
                    "no free IP left in the network's subnets",
                )
            })?,
    };
    let mut aliases = Vec::new();
    for raw in req.alias_ips.iter().flatten() {
        let a = check(st, "alias_ips", raw)?;
        if a == ip || aliases.contains(&a) {
            return Err(ApiError::unprocessable(
                "ip_not_available",
                format!("IP {a} is already in use"),
            ));
        }
        aliases.push(a);
    }
    let mac = st.alloc_mac();
    st.claim_private_ip(req.network, ip);
    for a in &aliases {
        st.claim_private_ip(req.network, *a);
    }
    if let Some(s) = st.servers.get_mut(&id) {
        s.private_net.push(ServerPrivateNet {
            network: req.network,
            ip,
            alias_ips: aliases,
            mac_address: mac,
        });
    }
    Ok(())
}

async fn attach(AppState(app): AppState<App>, Id(id): Id, Body(req): Body<AttachReq>) -> ApiResult {
    let mut st = app.write();
    if !st.servers.contains_key(&id) {
        return Err(ApiError::not_found("server"));
    }
    st.ensure_unlocked("server", id)?;
    attach_server(&mut st, id, &req)?;
    let resources = vec![
        ResourceRef::new("server", id),
        ResourceRef::new("network", req.network),
    ];
    let a = st.start_action("attach_to_network", resources, Effect::None);
    action(&st, a)
}

async fn detach(
    AppState(app): AppState<App>,
    Id(id): Id,
    Body(req): Body<NetworkRef>,
) -> ApiResult {
    let mut st = app.write();
    let s = st
        .servers
        .get(&id)
        .ok_or_else(|| ApiError::not_found("server"))?;
    let Some(pos) = s.private_net.iter().position(|p| p.network == req.network) else {
        return Err(ApiError::invalid_input(
            "network",
            "server is not attached to this network",
        ));
    };
    st.ensure_unlocked("server", id)?;
    let Some(p) = st.servers.get_mut(&id).map(|s| s.private_net.remove(pos)) else {
        return Err(ApiError::not_found("server"));
    };
    st.release_private_ip(p.network, p.ip);
    for a in &p.alias_ips {
        st.release_private_ip(p.network, *a);
    }
    let resources = vec![
        ResourceRef::new("server", id),
        ResourceRef::new("network", req.network),
    ];
    let a = st.start_action("detach_from_network", resources, Effect::None);
    action(&st, a)
}

async fn change_protection(
    AppState(app): AppState<App>,
    Id(id): Id,
    Body(req): Body<ProtectionReq>,
) -> ApiResult {
    let mut st = app.write();
    if !st.servers.contains_key(&id) {
        return Err(ApiError::not_found("server"));
    }
    st.ensure_unlocked("server", id)?;
    if let Some(s) = st.servers.get_mut(&id) {
        if let Some(d) = req.delete {
            s.protection_delete = d;
        }
        if let Some(r) = req.rebuild {
            s.protection_rebuild = r;
        }
    }
    let a = st.start_action(
        "change_protection",
        vec![ResourceRef::new("server", id)],
        Effect::None,
    );
    action(&st, a)
}

/// Used by the batch control endpoint: `n` servers `prefix-1..prefix-n` in one lock.
pub fn create_batch(
    st: &mut State,
    template: &Value,
    n: usize,
    prefix: &str,
) -> Result<Vec<u64>, ApiError> {
    let mut ids = Vec::with_capacity(n);
    for i in 1..=n {
        let mut body = template.clone();
        body["name"] = json!(format!("{prefix}-{i}"));
        let req: CreateServerReq = serde_json::from_value(body)
            .map_err(|e| ApiError::invalid_input("body", e.to_string()))?;
        ids.push(create_server(st, &req, false)?.server);
    }
    Ok(ids)
}
