//! The two endpoints every resource kind answers the same way, written once against
//! [`Resource`]: `GET /<collection>` and `PUT /<collection>/{id}`. A kind routes them as
//! `list::<Server>` and `update::<Server>`; what differs per kind (its own list filter, indexes by
//! name) is in its `impl Resource`.

use axum::extract::State as AppState;
use serde_json::json;

use super::{ApiResult, Body, Id, ok};
use crate::app::App;
use crate::pagination::ListParams;
use crate::resource::{Resource, apply_update};
use crate::wire::UpdateReq;

/// The kind's own filter, then `name`, `label_selector`, `sort` and one page (`ListParams::respond`).
pub async fn list<R: Resource>(AppState(app): AppState<App>, params: ListParams) -> ApiResult {
    let own_filter = R::list_filter(&params.query)?;
    let st = app.read();
    params.respond(
        R::COLLECTION,
        R::all(&st).values().filter(|r| own_filter(r)),
        |r| r.render(&st),
    )
}

/// Renames and/or relabels one resource (`apply_update`), answering it as it is now.
pub async fn update<R: Resource>(
    AppState(app): AppState<App>,
    Id(id): Id,
    Body(req): Body<UpdateReq>,
) -> ApiResult {
    let mut st = app.write();
    apply_update::<R>(&mut st, id, req.name, req.labels)?;
    ok(json!({ (R::KIND): R::all(&st)[&id].render(&st) }))
}
