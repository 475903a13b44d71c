//! The CloudStack API, at `/client/api` on the same listener as the Hetzner API
//! (`Sim::cloudstack_endpoint()`), in the shapes apache/cloudstack-go v2 decodes: what a
//! CloudStack cloud-controller-manager reads and writes (docs/cloudstack-api.md, "What cloud-sim
//! models for CloudStack").
//!
//! Two layers, as on the Hetzner side. The model never imports the HTTP layer:
//! - model: `model` (the world as plain data, part of the `--state` file), `world` (fixtures,
//!   ids, lookups, VM transitions), `build` (what creates and changes things, shared by world
//!   building and the API), `access` (who the caller is and what a list shows them), `jobs`
//!   (async jobs and their answers), `render` and `render_rules` (each object's JSON), `reach`
//!   (who may reach a load-balancer rule and which members take its traffic, for the data plane).
//! - HTTP: `pipeline` (`/client/api`: authentication, throttling, faults, counters, dispatch),
//!   `params` (parameters, paging, list answers), `signature` and `crypto` (the request
//!   signature), `error` (CloudStack's error answer), `commands::*` (one module per area),
//!   `control` (`/_sim/cloudstack`, world building), `sim` (`Sim`'s CloudStack accessors),
//!   `traffic` (where a rule's listener is, for tests).
//! - [`client::CloudStackClient`]: the test-side client, signing as cloudstack-go does
//!   (`client`) and building worlds (`client_world`).

mod access;
mod build;
pub mod client;
mod client_world;
mod commands;
mod control;
mod crypto;
mod error;
mod jobs;
pub(crate) mod model;
mod params;
mod pipeline;
pub(crate) mod reach;
mod render;
mod render_rules;
mod signature;
mod sim;
mod traffic;
mod world;

use axum::Router;
use axum::routing::any;

use crate::app::App;

/// Where the API lives below the simulator's root (CloudStack's own path).
pub const PATH: &str = "/client/api";

pub fn routes() -> Router<App> {
    Router::new()
        .route(PATH, any(pipeline::api))
        .merge(control::routes())
        .merge(traffic::routes())
}
