//! The instance metadata service, answered for one simulated server.
//!
//! A real server asks `http://169.254.169.254/hetzner/v1/metadata[/key]` and the hypervisor
//! knows who is asking. Here the server is chosen, in this order, by:
//! 1. the path prefix `/metadata/{server}/hetzner/v1/metadata[/key]` (id or name), so each
//!    simulated node gets its own base URL (`Sim::metadata_url(id)`);
//! 2. the query parameter `?server=<id or name>`;
//! 3. the header `X-Sim-Server: <id or name>`;
//! 4. the default set with `PUT /_sim/metadata {"server": <id>}` / `Sim::set_metadata_server`.
//!
//! No authentication and no rate limit, like the link-local service.

use axum::Router;
use axum::extract::{Path, RawQuery, State as AppState};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::app::App;
use crate::catalog;
use crate::pagination::Query;
use crate::state::{Server, State};

pub fn routes() -> Router<App> {
    Router::new()
        .route(
            "/hetzner/v1/metadata",
            get(|app: AppState<App>, q: RawQuery, h: HeaderMap| serve(app, None, None, q, h)),
        )
        .route(
            "/hetzner/v1/metadata/{key}",
            get(
                |app: AppState<App>, Path(key): Path<String>, q: RawQuery, h: HeaderMap| {
                    serve(app, None, Some(key), q, h)
                },
            ),
        )
        .route(
            "/metadata/{server}/hetzner/v1/metadata",
            get(
                |app: AppState<App>, Path(server): Path<String>, q: RawQuery, h: HeaderMap| {
                    serve(app, Some(server), None, q, h)
                },
            ),
        )
        .route(
            "/metadata/{server}/hetzner/v1/metadata/{key}",
            get(
                |app: AppState<App>,
                 Path((server, key)): Path<(String, String)>,
                 q: RawQuery,
                 h: HeaderMap| serve(app, Some(server), Some(key), q, h),
            ),
        )
}

fn text(status: StatusCode, body: String) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        body,
    )
        .into_response()
}

fn find<'a>(st: &'a State, who: &str) -> Option<&'a Server> {
    match who.parse::<u64>() {
        Ok(id) => st.servers.get(&id),
        Err(_) => st.server_names.get(who).and_then(|id| st.servers.get(id)),
    }
}

async fn serve(
    AppState(app): AppState<App>,
    from_path: Option<String>,
    key: Option<String>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Response {
    let query = Query::parse(query.as_deref().unwrap_or(""));
    let who = from_path
        .or_else(|| query.first("server").map(str::to_owned))
        .or_else(|| {
            headers
                .get("x-sim-server")
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        })
        .or_else(|| {
            app.metadata_server
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .map(|id| id.to_string())
        });
    let Some(who) = who else {
        return text(
            StatusCode::NOT_FOUND,
            "no server selected: use /metadata/{server}/..., ?server= or X-Sim-Server\n".into(),
        );
    };
    let st = app.read();
    let Some(server) = find(&st, &who) else {
        return text(StatusCode::NOT_FOUND, format!("server {who} not found\n"));
    };
    match render(&st, server, key.as_deref()) {
        Some(body) => text(StatusCode::OK, body),
        None => text(StatusCode::NOT_FOUND, "not found\n".into()),
    }
}

fn private_networks(st: &State, s: &Server) -> String {
    if s.private_net.is_empty() {
        return "[]\n".to_owned();
    }
    let zone = catalog::location(s.location).network_zone;
    let mut out = String::new();
    for (i, p) in s.private_net.iter().enumerate() {
        let net = st.networks.get(&p.network);
        let subnet = net.and_then(|n| {
            n.subnets
                .iter()
                .find(|sub| sub.ip_range.contains(p.ip) && sub.network_zone == zone)
        });
        let aliases: Vec<String> = p.alias_ips.iter().map(|a| a.to_string()).collect();
        out.push_str(&format!("- ip: {}\n", p.ip));
        out.push_str(&format!("  alias_ips: [{}]\n", aliases.join(", ")));
        out.push_str(&format!("  interface_num: {}\n", i + 1));
        out.push_str(&format!("  mac_address: {}\n", p.mac_address));
        out.push_str(&format!("  network_id: {}\n", p.network));
        out.push_str(&format!(
            "  network_name: {}\n",
            net.map(|n| n.name.as_str()).unwrap_or("")
        ));
        out.push_str(&format!(
            "  network: {}\n",
            net.map(|n| n.ip_range.to_string()).unwrap_or_default()
        ));
        out.push_str(&format!(
            "  subnet: {}\n",
            subnet.map(|s| s.ip_range.to_string()).unwrap_or_default()
        ));
        out.push_str(&format!(
            "  gateway: {}\n",
            subnet.map(|s| s.gateway.to_string()).unwrap_or_default()
        ));
    }
    out
}

fn render(st: &State, s: &Server, key: Option<&str>) -> Option<String> {
    let loc = catalog::location(s.location);
    let public_ipv4 = s
        .ipv4
        .as_ref()
        .map(|v| v.ip.to_string())
        .unwrap_or_default();
    Some(match key {
        None => {
            let nets = private_networks(st, s);
            let nets_yaml = if nets == "[]\n" {
                " []\n".to_owned()
            } else {
                format!(
                    "\n{}",
                    nets.lines().map(|l| format!("  {l}\n")).collect::<String>()
                )
            };
            format!(
                "availability-zone: {}\nhostname: {}\ninstance-id: {}\nlocal-ipv4: ''\npublic-ipv4: {}\nregion: {}\npublic-keys: []\nprivate-networks:{}",
                loc.datacenter, s.name, s.id, public_ipv4, loc.network_zone, nets_yaml
            )
        }
        Some("hostname") => s.name.clone(),
        Some("instance-id") => s.id.to_string(),
        Some("public-ipv4") => public_ipv4,
        Some("private-networks") => private_networks(st, s),
        Some("availability-zone") => loc.datacenter.to_owned(),
        Some("region") => loc.network_zone.to_owned(),
        Some("public-keys") => "[]".to_owned(),
        Some(_) => return None,
    })
}
