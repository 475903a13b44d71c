//! `/load_balancers`: CRUD and every load-balancer action of the API with the validation rules the
//! CCM has to live with (zones, limits, ports, certificates, private networks), one module per
//! sub-resource.

mod common;
mod crud;
mod network;
mod services;
mod settings;
mod targets;

use axum::Router;
use axum::routing::{get, post};

use crate::app::App;
use crate::handlers::collection::{list, update};
use crate::state::LoadBalancer;

pub fn routes() -> Router<App> {
    Router::new()
        .route(
            "/v1/load_balancers",
            get(list::<LoadBalancer>).post(crud::create),
        )
        .route(
            "/v1/load_balancers/{id}",
            get(crud::get_one)
                .put(update::<LoadBalancer>)
                .delete(crud::delete),
        )
        .route(
            "/v1/load_balancers/{id}/actions/add_target",
            post(targets::add_target),
        )
        .route(
            "/v1/load_balancers/{id}/actions/remove_target",
            post(targets::remove_target),
        )
        .route(
            "/v1/load_balancers/{id}/actions/add_service",
            post(services::add_service),
        )
        .route(
            "/v1/load_balancers/{id}/actions/update_service",
            post(services::update_service),
        )
        .route(
            "/v1/load_balancers/{id}/actions/delete_service",
            post(services::delete_service),
        )
        .route(
            "/v1/load_balancers/{id}/actions/attach_to_network",
            post(network::attach),
        )
        .route(
            "/v1/load_balancers/{id}/actions/detach_from_network",
            post(network::detach),
        )
        .route(
            "/v1/load_balancers/{id}/actions/change_type",
            post(settings::change_type),
        )
        .route(
            "/v1/load_balancers/{id}/actions/change_algorithm",
            post(settings::change_algorithm),
        )
        .route(
            "/v1/load_balancers/{id}/actions/enable_public_interface",
            post(network::enable_public),
        )
        .route(
            "/v1/load_balancers/{id}/actions/disable_public_interface",
            post(network::disable_public),
        )
        .route(
            "/v1/load_balancers/{id}/actions/change_dns_ptr",
            post(settings::change_dns_ptr),
        )
        .route(
            "/v1/load_balancers/{id}/actions/change_protection",
            post(settings::change_protection),
        )
}
