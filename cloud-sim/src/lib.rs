//! cloud-sim: a simulator of the Hetzner Cloud API subset the controllers use
//! (docs/hetzner-api.md, "What cloud-sim models"), and of the Robot webservice (dedicated
//! servers) reads hcloud-cloud-controller-manager makes, at `Sim::robot_endpoint()`.
//!
//! ```no_run
//! # async fn demo() {
//! let sim = cloud_sim::Sim::start().await;          // 127.0.0.1:<free port>
//! let endpoint = sim.endpoint();                    // HCLOUD_ENDPOINT: http://127.0.0.1:PORT/v1
//! let client = sim.client();                       // builds the world over the public API
//! let net = client.create_network("k8s", "10.0.0.0/16", "10.0.1.0/24").await.unwrap();
//! let node = client.create_server("node-1", "cx22", "fsn1").await.unwrap();
//! client.attach_to_network(node, net, None).await.unwrap();
//! sim.faults().fail_next(Some("GET /servers"), 1, 503, "unavailable");
//! assert_eq!(sim.requests("POST", "/servers"), 1);
//! # }
//! ```
//!
//! Where things are, in two layers. The model never imports the HTTP layer, so it can be read,
//! tested and persisted without a router:
//! - model: `state` (the world as plain data, actions' records included), `actions` (their
//!   lifecycle and locking), `resource` (what every resource kind shares: the `Resource` trait,
//!   naming and label rules, renaming and relabelling), `config`, `app` (the shared handle),
//!   `persistence`, `catalog`, `cidr`, `clock`, `certs` (uploads checked as Hetzner checks
//!   them, managed ones issued as real certificates).
//! - HTTP: `server` (router, request pipeline: rate limit, auth, faults, counters; [`Sim`]),
//!   `handlers::*` (one module per API resource; `load_balancers` one per sub-resource;
//!   `collection` the list and update endpoints every resource kind shares), `wire`
//!   (JSON shapes), `control` (`/_sim` endpoints).
//! - Shared plumbing: `pagination`, `label_selector`, `rate_limit`, [`faults`], `counters`.
//! - Data plane (off unless `SimConfig::data_plane` is set): `data_plane` (`mod.rs` the
//!   reconciler that makes listeners and health checkers follow the world; `tables`, `host`,
//!   `addresses`, `targets`, `listener`, `health`, `proxy_protocol`, `faults` one concern each;
//!   `rules` and `rule_traffic` carry CloudStack load-balancer rules).
//!   It reads the world through its `Host` trait, which `AppInner` implements; the model only
//!   holds the health table it fills (`state::TargetHealth`).
//! - [`SimClient`]: the test-side client; [`stand_in`]: what a node answers (NodePort, kube-proxy's
//!   health), for tests, the demo and the benchmark to put behind load balancers;
//!   [`stand_in_udp`]: a node's UDP NodePort, for CloudStack `udp` rules; [`test_certs`]: real
//!   certificates and keys to upload.
//!
//! Control endpoints live under `/_sim` without authentication; see the `control` module.
//! The metadata service is at `/hetzner/v1/metadata` and `/metadata/{server}/hetzner/v1/metadata`;
//! see the `handlers::metadata` module for how the asking server is chosen. The Robot
//! webservice is at `/robot` (HTTP basic auth); see the `handlers::robot` module. The CloudStack
//! API is at `/client/api` (signed requests, `Sim::cloudstack_endpoint()`), its world building at
//! `/_sim/cloudstack`; see the `cloudstack` module and [`CloudStackClient`].

mod actions;
mod app;
mod catalog;
mod certs;
mod cidr;
pub mod client;
mod clock;
mod cloudstack;
mod config;
mod control;
mod counters;
mod data_plane;
mod error;
pub mod faults;
mod handlers;
mod inventory;
mod label_selector;
mod pagination;
mod persistence;
mod rate_limit;
mod resource;
mod server;
pub mod stand_in;
pub mod stand_in_udp;
mod state;
pub mod test_certs;
mod wire;

pub use client::{ActionInfo, ApiFailure, RawResponse, SimClient, SimClientError};
pub use cloudstack::client::{CloudStackClient, CsClientError, CsResponse, CsVmSpec};
pub use config::{
    DEFAULT_CLOUDSTACK_API_KEY, DEFAULT_CLOUDSTACK_SECRET_KEY, DEFAULT_ROBOT_PASSWORD,
    DEFAULT_ROBOT_USER, DEFAULT_TOKEN, DataPlaneConfig, SimConfig,
};
pub use counters::RequestLogEntry;
pub use data_plane::rules::RuleListenerInfo;
pub use data_plane::{ConnectionCounts, ListenerInfo, TargetFault};
pub use error::StartError;
pub use faults::{FaultKind, FaultRule, Faults, UNFAULTED_HEADER};
pub use inventory::{CertificateItem, Inventory, LoadBalancerItem, RouteItem, ServerItem};
pub use label_selector::Selector;
pub use rate_limit::{RateLimitStatus, RobotRateLimitStatus};
pub use server::Sim;
