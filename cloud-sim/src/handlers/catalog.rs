//! Read-only catalog: `/locations`, `/server_types`, `/load_balancer_types`, `/images`.

use axum::Router;
use axum::routing::get;
use serde_json::json;

use super::{Id, ok};
use crate::app::App;
use crate::catalog::{
    IMAGES, Image, LB_TYPES, LOCATIONS, LbType, Location, SERVER_TYPES, ServerType,
};
use crate::error::ApiError;
use crate::label_selector::Labels;
use crate::pagination::{ListParams, Listable, SortKey};

macro_rules! listable {
    ($t:ty) => {
        impl Listable for $t {
            fn id(&self) -> u64 {
                self.id
            }
            fn name(&self) -> Option<&str> {
                Some(self.name)
            }
            fn labels(&self) -> Option<&Labels> {
                None
            }
            fn sort_key(&self, field: &str) -> Option<SortKey> {
                Some(match field {
                    "id" => SortKey::Int(self.id as i64),
                    "name" => SortKey::Str(self.name.to_owned()),
                    _ => return None,
                })
            }
        }
    };
}
listable!(Location);
listable!(ServerType);
listable!(LbType);
listable!(Image);

/// Routes for one catalog collection: list under `plural`, one item under `plural/{id}`.
macro_rules! collection {
    ($router:expr, $path:literal, $plural:literal, $single:literal, $items:expr) => {
        $router
            .route(
                concat!("/v1/", $path),
                get(|params: ListParams| async move { params.respond($plural, $items.iter(), |x| x.json()) }),
            )
            .route(
                concat!("/v1/", $path, "/{id}"),
                get(|Id(id): Id| async move {
                    let item = $items.iter().find(|x| x.id == id).ok_or_else(|| ApiError::not_found($single))?;
                    ok(json!({ $single: item.json() }))
                }),
            )
    };
}

pub fn routes() -> axum::Router<App> {
    let r = Router::new();
    let r = collection!(r, "locations", "locations", "location", LOCATIONS);
    let r = collection!(
        r,
        "server_types",
        "server_types",
        "server_type",
        SERVER_TYPES
    );
    let r = collection!(
        r,
        "load_balancer_types",
        "load_balancer_types",
        "load_balancer_type",
        LB_TYPES
    );
    collection!(r, "images", "images", "image", IMAGES)
}
