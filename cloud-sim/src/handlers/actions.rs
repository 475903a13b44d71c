//! `/actions` and the resource-scoped action endpoints (`/load_balancers/actions/{id}`,
//! `/load_balancers/{id}/actions`, same for servers, networks and certificates).

use axum::Router;
use axum::extract::State as AppState;
use axum::routing::get;
use serde_json::json;

use super::{ApiResult, Id, ok};
use crate::actions::{Action, action_json};
use crate::app::App;
use crate::error::ApiError;
use crate::label_selector::Labels;
use crate::pagination::{ListParams, Listable, SortKey};

impl Listable for Action {
    fn id(&self) -> u64 {
        self.id
    }
    fn name(&self) -> Option<&str> {
        None
    }
    fn labels(&self) -> Option<&Labels> {
        None
    }
    fn sort_key(&self, field: &str) -> Option<SortKey> {
        Some(match field {
            "id" => SortKey::Int(self.id as i64),
            "command" => SortKey::Str(self.command.clone()),
            "status" => SortKey::Str(self.status.clone()),
            "progress" => SortKey::Int(i64::from(self.status != "running") * 100),
            "started" => SortKey::Int(self.started_ms as i64),
            "finished" => self
                .finished_ms
                .map_or(SortKey::Null, |f| SortKey::Int(f as i64)),
            _ => return None,
        })
    }
}

const KINDS: &[(&str, &str)] = &[
    ("servers", "server"),
    ("load_balancers", "load_balancer"),
    ("networks", "network"),
    ("certificates", "certificate"),
];

pub fn routes() -> Router<App> {
    let mut r = Router::new()
        .route(
            "/v1/actions",
            get(|app: AppState<App>, p: ListParams| list(app, p, None, None, true)),
        )
        .route(
            "/v1/actions/{id}",
            get(|app: AppState<App>, id: Id| get_one(app, id, None)),
        );
    for &(plural, kind) in KINDS {
        r = r
            .route(
                &format!("/v1/{plural}/actions"),
                get(move |app: AppState<App>, p: ListParams| list(app, p, Some(kind), None, false)),
            )
            .route(
                &format!("/v1/{plural}/actions/{{id}}"),
                get(move |app: AppState<App>, id: Id| get_one(app, id, Some(kind))),
            )
            .route(
                &format!("/v1/{plural}/{{id}}/actions"),
                get(move |app: AppState<App>, Id(id): Id, p: ListParams| {
                    list(app, p, Some(kind), Some(id), false)
                }),
            );
    }
    r
}

/// `id` is mandatory on the global list since 2025-01-30; the scoped lists keep it optional.
async fn list(
    AppState(app): AppState<App>,
    params: ListParams,
    kind: Option<&'static str>,
    resource: Option<u64>,
    require_ids: bool,
) -> ApiResult {
    let mut ids = Vec::new();
    for raw in params.query.all("id") {
        ids.push(
            raw.parse::<u64>().map_err(|_| {
                ApiError::invalid_input("id", format!("'{raw}' is not an action id"))
            })?,
        );
    }
    if require_ids && ids.is_empty() {
        return Err(ApiError::invalid_input(
            "id",
            "filter by at least one action id",
        ));
    }
    let statuses: Vec<&str> = params.query.all("status").collect();
    if let Some(bad) = statuses
        .iter()
        .find(|s| !["running", "success", "error"].contains(s))
    {
        return Err(ApiError::invalid_input(
            "status",
            format!("unknown status '{bad}'"),
        ));
    }
    let st = app.read();
    if let (Some(kind), Some(rid)) = (kind, resource) {
        let exists = match kind {
            "server" => st.servers.contains_key(&rid),
            "load_balancer" => st.load_balancers.contains_key(&rid),
            "network" => st.networks.contains_key(&rid),
            _ => st.certificates.contains_key(&rid),
        };
        if !exists {
            return Err(ApiError::not_found(kind));
        }
    }
    let selected = st.actions.values().filter(|a| {
        (ids.is_empty() || ids.contains(&a.id))
            && (statuses.is_empty() || statuses.contains(&a.status.as_str()))
            && kind.is_none_or(|k| {
                a.resources
                    .iter()
                    .any(|r| r.kind == k && resource.is_none_or(|id| r.id == id))
            })
    });
    params.respond("actions", selected, action_json)
}

async fn get_one(
    AppState(app): AppState<App>,
    Id(id): Id,
    kind: Option<&'static str>,
) -> ApiResult {
    let st = app.read();
    let a = st
        .actions
        .get(&id)
        .filter(|a| kind.is_none_or(|k| a.resources.iter().any(|r| r.kind == k)))
        .ok_or_else(|| ApiError::not_found("action"))?;
    ok(json!({"action": action_json(a)}))
}
