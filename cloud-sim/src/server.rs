//! Router assembly, the request pipeline every API call goes through, and `Sim`, a running
//! simulator.
//!
//! Pipeline for `/v1/...` (in this order): rate limit (429 `rate_limit_exceeded`) → bearer
//! token (401 `unauthorized`, 403 `token_readonly`) → fault rules (latency, hang, injected
//! error) → handler → field omission → `RateLimit-*` and `X-Correlation-Id` headers → counters,
//! request log and a debug log line. `/_sim/...` and the metadata service skip all of it.
//!
//! Pipeline for `/robot/...` (the Robot webservice, see `handlers::robot`): HTTP basic auth
//! (401 `UNAUTHORIZED`) → the resource's sliding-window limit (403 `RATE_LIMIT_EXCEEDED`) →
//! fault rules → handler (unknown paths and methods: 404 `NOT_FOUND`) → field omission →
//! counters, request log and a debug log line. Robot endpoints keep their prefix in counters
//! and fault rules (`GET /robot/server/{server-number}`); they spend no Cloud rate limit.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body as HttpBody;
use axum::extract::{MatchedPath, Request, State};
use axum::http::{HeaderValue, Method, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::actions::{FORCED_ACTION_ERROR, FORCED_ACTION_MS};
use crate::app::{App, AppInner};
use crate::client::SimClient;
use crate::clock::{now_ms, rfc3339};
use crate::config::{DEFAULT_TOKEN, SimConfig};
use crate::control;
use crate::counters::{self, RequestLogEntry};
use crate::data_plane::{self, ListenerInfo, TargetFault};
use crate::error::{ApiError, RobotError, StartError};
use crate::faults::{self, Faults};
use crate::handlers;
use crate::persistence;
use crate::rate_limit::{RateLimitStatus, RobotRateLimitStatus};
use crate::state::State as SimState;

/// The whole HTTP surface: API, metadata service and control endpoints.
pub(crate) fn router(app: App) -> Router {
    Router::new()
        .merge(handlers::servers::routes())
        .merge(handlers::load_balancers::routes())
        .merge(handlers::networks::routes())
        .merge(handlers::certificates::routes())
        .merge(handlers::catalog::routes())
        .merge(handlers::actions::routes())
        .merge(handlers::metadata::routes())
        .merge(handlers::robot::routes())
        .merge(crate::cloudstack::routes())
        .merge(control::routes())
        .fallback(not_found)
        .method_not_allowed_fallback(not_found)
        .layer(middleware::from_fn_with_state(app.clone(), pipeline))
        .with_state(app)
}

async fn not_found() -> ApiError {
    ApiError::not_found("the requested resource")
}

fn bearer_token(req: &Request) -> Option<&str> {
    req.headers()
        .get(header::AUTHORIZATION)
        .and_then(|h| h.to_str().ok())
        .and_then(|h| h.strip_prefix("Bearer "))
}

fn authorize(app: &AppInner, req: &Request) -> Result<(), ApiError> {
    let token = bearer_token(req).ok_or_else(ApiError::unauthorized)?;
    if app.config.readonly_token.as_deref() == Some(token) {
        return if req.method() == Method::GET || req.method() == Method::HEAD {
            Ok(())
        } else {
            Err(ApiError::token_readonly())
        };
    }
    let valid = match &*app.token.lock().unwrap_or_else(|e| e.into_inner()) {
        Some(expected) => token == expected,
        None => token.len() == 64 && token.bytes().all(|b| b.is_ascii_graphic()),
    };
    if valid {
        Ok(())
    } else {
        Err(ApiError::unauthorized())
    }
}

async fn pipeline(State(app): State<App>, req: Request, next: Next) -> Response {
    let path = req.uri().path().to_owned();
    let method = req.method().as_str().to_owned();
    if path
        .strip_prefix(handlers::robot::PREFIX)
        .is_some_and(|p| p.is_empty() || p.starts_with('/'))
    {
        return robot_pipeline(app, req, next, path, method).await;
    }
    if path == crate::cloudstack::PATH {
        return next.run(req).await;
    }
    let Some(api_path) = path
        .strip_prefix("/v1")
        .filter(|p| p.is_empty() || p.starts_with('/'))
    else {
        let resp = next.run(req).await;
        tracing::debug!(%method, %path, status = resp.status().as_u16(), "cloud-sim control/metadata request");
        return resp;
    };
    // Counters and fault rules speak in route templates ("/servers/{id}"), not raw paths.
    let endpoint = req
        .extensions()
        .get::<MatchedPath>()
        .map(|m| {
            m.as_str()
                .strip_prefix("/v1")
                .unwrap_or(m.as_str())
                .to_owned()
        })
        .unwrap_or_else(|| api_path.to_owned());
    let uri = req
        .uri()
        .path_and_query()
        .map(|p| p.to_string())
        .unwrap_or_else(|| path.clone());
    let started = Instant::now();

    let (allowed, rate) = app.rate.try_acquire();
    let token = bearer_token(&req).map(str::to_owned);
    let mut resp = if !allowed {
        ApiError::rate_limited(rate.limit, token.as_deref()).into_response()
    } else if let Err(e) = authorize(&app, &req) {
        e.into_response()
    } else {
        let decision = fault_decision(&app, &req, &method, &endpoint);
        if injected_wait(&decision).await {
            ApiError::new(504, "timeout", "injected timeout").into_response()
        } else if let Some(e) = decision.error {
            if e.message == faults::RATE_LIMIT_ECHO {
                ApiError::rate_limited(rate.limit, token.as_deref()).into_response()
            } else {
                e.into_response()
            }
        } else {
            let resp = FORCED_ACTION_ERROR
                .scope(
                    decision.action_error,
                    FORCED_ACTION_MS.scope(
                        decision.action_duration.map(|d| d.as_millis() as u64),
                        next.run(req),
                    ),
                )
                .await;
            shaped(resp, &decision.omit, decision.omit_items).await
        }
    };

    let seq = app.counters.total() + 1;
    let headers = resp.headers_mut();
    for (name, value) in [
        ("ratelimit-limit", rate.limit.to_string()),
        ("ratelimit-remaining", rate.remaining.to_string()),
        ("ratelimit-reset", rate.reset.to_string()),
        ("x-correlation-id", format!("sim-{seq:016x}")),
    ] {
        if let Ok(v) = HeaderValue::from_str(&value) {
            headers.insert(name, v);
        }
    }
    record(&app, method, endpoint, uri, &resp, started);
    resp
}

/// What the fault rules do to this request: nothing to the harness's own
/// ([`faults::UNFAULTED_HEADER`]).
fn fault_decision(app: &AppInner, req: &Request, method: &str, endpoint: &str) -> faults::Decision {
    if req.headers().contains_key(faults::UNFAULTED_HEADER) {
        return faults::Decision::default();
    }
    app.faults.decide(&counters::key(method, endpoint))
}

/// Counts a finished API request and logs it.
fn record(
    app: &AppInner,
    method: String,
    endpoint: String,
    uri: String,
    resp: &Response,
    started: Instant,
) {
    let status = resp.status().as_u16();
    let duration_ms = started.elapsed().as_millis() as u64;
    tracing::debug!(%method, path = %uri, status, duration_ms, "cloud-sim API request");
    app.counters.record(RequestLogEntry {
        seq: 0,
        method,
        endpoint,
        uri,
        status,
        duration_ms,
        at: rfc3339(now_ms()),
    });
}

/// The Robot webservice's pipeline (see the module comment).
async fn robot_pipeline(
    app: App,
    req: Request,
    next: Next,
    path: String,
    method: String,
) -> Response {
    let matched = req
        .extensions()
        .get::<MatchedPath>()
        .map(|m| m.as_str().to_owned());
    // Only reads are simulated; other methods on known paths answer like unknown paths.
    let served = matched.is_some() && (req.method() == Method::GET || req.method() == Method::HEAD);
    let endpoint = matched.unwrap_or_else(|| path.clone());
    let uri = req
        .uri()
        .path_and_query()
        .map(|p| p.to_string())
        .unwrap_or_else(|| path.clone());
    let started = Instant::now();

    let limited = || {
        let resource = handlers::robot::resource_of(&endpoint).filter(|_| served)?;
        app.robot_rate.try_acquire(resource).err()
    };
    let resp = if let Err(e) = handlers::robot::authorize(&app, req.headers()) {
        e.into_response()
    } else if let Some(st) = limited() {
        RobotError::rate_limited(st.max_request, st.interval).into_response()
    } else {
        let decision = fault_decision(&app, &req, &method, &endpoint);
        if injected_wait(&decision).await {
            RobotError::new(504, "TIMEOUT", "injected timeout").into_response()
        } else if let Some(e) = decision.error {
            RobotError::from(e).into_response()
        } else if !served {
            RobotError::not_found().into_response()
        } else {
            shaped(next.run(req).await, &decision.omit, decision.omit_items).await
        }
    };
    record(&app, method, endpoint, uri, &resp, started);
    resp
}

/// Waits what a fault decision injects before the answer: its latency, then its hang. `true` when
/// the request hung (both APIs then answer 504, each in its own error shape).
async fn injected_wait(decision: &faults::Decision) -> bool {
    if !decision.latency.is_zero() {
        tokio::time::sleep(decision.latency).await;
    }
    match decision.hang {
        Some(hang) => {
            tokio::time::sleep(hang).await;
            true
        }
        None => false,
    }
}

/// `resp` with the fields (`rules`) and list items a fault decision leaves out; as it is when
/// there are none.
async fn shaped(resp: Response, rules: &[(String, bool)], items: Option<(f64, u64)>) -> Response {
    if rules.is_empty() && items.is_none() {
        resp
    } else {
        omit(resp, rules, items).await
    }
}

async fn omit(resp: Response, rules: &[(String, bool)], items: Option<(f64, u64)>) -> Response {
    let (mut parts, body) = resp.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, usize::MAX).await else {
        return ApiError::new(500, "server_error", "cannot buffer response").into_response();
    };
    let Ok(mut value) = serde_json::from_slice::<serde_json::Value>(&bytes) else {
        return Response::from_parts(parts, HttpBody::from(bytes));
    };
    faults::omit_fields(&mut value, rules);
    if let Some((share, seed)) = items {
        faults::omit_items(&mut value, share, seed);
    }
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(
        parts,
        HttpBody::from(serde_json::to_vec(&value).unwrap_or_default()),
    )
}

/// A running simulator. Dropping it stops the server (and writes the state file, if any).
#[derive(Debug)]
pub struct Sim {
    app: App,
    addr: SocketAddr,
    shutdown: Option<oneshot::Sender<()>>,
    server: Option<JoinHandle<()>>,
    flusher: Option<JoinHandle<()>>,
}

impl Sim {
    /// Starts on a free loopback port with the default configuration.
    pub async fn start() -> Sim {
        Sim::start_with(SimConfig::default()).await
    }

    /// Starts with `cfg`; panics if it cannot (tests want the failure loud and early).
    pub async fn start_with(cfg: SimConfig) -> Sim {
        match Sim::try_start(cfg).await {
            Ok(sim) => sim,
            Err(e) => panic!("cloud-sim failed to start: {e}"),
        }
    }

    pub async fn try_start(cfg: SimConfig) -> Result<Sim, StartError> {
        let state = match &cfg.state_file {
            Some(path) => persistence::load(path)?,
            None => SimState::default(),
        };
        let listener = TcpListener::bind(cfg.listen)
            .await
            .map_err(|source| StartError::Bind {
                addr: cfg.listen,
                source,
            })?;
        let addr = listener.local_addr().map_err(|source| StartError::Bind {
            addr: cfg.listen,
            source,
        })?;
        let app = AppInner::new(cfg, state);
        let (tx, rx) = oneshot::channel::<()>();
        let routes = router(app.clone());
        let server = tokio::spawn(async move {
            let shutdown = async {
                let _ = rx.await;
            };
            if let Err(e) = axum::serve(listener, routes)
                .with_graceful_shutdown(shutdown)
                .await
            {
                tracing::error!(error = %e, "cloud-sim server stopped");
            }
        });
        let flusher = app.config.state_file.is_some().then(|| {
            let app = app.clone();
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    if let Err(e) = app.flush() {
                        tracing::warn!(error = %e, "cloud-sim cannot write its state file");
                    }
                }
            })
        });
        // Nothing starts here when the data plane is off.
        if let Some(dp) = &app.data_plane {
            data_plane::start(app.clone(), dp);
        }
        tracing::info!(%addr, "cloud-sim listening");
        Ok(Sim {
            app,
            addr,
            shutdown: Some(tx),
            server: Some(server),
            flusher,
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The shared handle, for the `impl Sim` blocks of other modules (`cloudstack::sim`).
    pub(crate) fn app(&self) -> &App {
        &self.app
    }

    /// `http://127.0.0.1:PORT/v1`: what `HCLOUD_ENDPOINT` is set to.
    pub fn endpoint(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// `http://127.0.0.1:PORT`: where `/_sim` and the metadata service live.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Base URL of the metadata service as seen by server `server` (id or name): append
    /// `/hetzner/v1/metadata[/key]`, exactly as after `http://169.254.169.254`.
    pub fn metadata_url(&self, server: &str) -> String {
        format!("http://{}/metadata/{server}", self.addr)
    }

    /// `http://127.0.0.1:PORT/robot`: the Robot webservice's base URL (what
    /// `https://robot-ws.your-server.de` is for the real one).
    pub fn robot_endpoint(&self) -> String {
        format!("http://{}{}", self.addr, handlers::robot::PREFIX)
    }

    /// The Robot webservice user (HTTP basic auth).
    pub fn robot_user(&self) -> String {
        self.app.config.robot_user.clone()
    }

    /// The Robot webservice password (HTTP basic auth).
    pub fn robot_password(&self) -> String {
        self.app.config.robot_password.clone()
    }

    /// A valid 64-character token (the one accepted now, if one is set).
    pub fn token(&self) -> String {
        self.app
            .token
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
            .unwrap_or_else(|| DEFAULT_TOKEN.to_owned())
    }

    /// Accepts `token` alone from now on, as the API does once a project's token is rotated:
    /// every other token, the previous one included, is answered 401 `unauthorized`. `None`
    /// accepts any 64-character token again.
    pub fn set_token(&self, token: Option<&str>) {
        *self.app.token.lock().unwrap_or_else(|e| e.into_inner()) = token.map(str::to_owned);
    }

    /// Requests received for `method` + path template without `/v1`, e.g.
    /// `requests("POST", "/load_balancers/{id}/actions/add_target")`. Robot endpoints keep
    /// their prefix: `requests("GET", "/robot/server/{server-number}")`.
    pub fn requests(&self, method: &str, path_template: &str) -> u64 {
        self.app.counters.get(method, path_template)
    }

    pub fn total_requests(&self) -> u64 {
        self.app.counters.total()
    }

    /// All counters as `"METHOD /template" → count`.
    pub fn request_counts(&self) -> std::collections::HashMap<String, u64> {
        self.app.counters.snapshot()
    }

    pub fn request_log(&self) -> Vec<RequestLogEntry> {
        self.app.counters.log()
    }

    pub fn reset_counters(&self) {
        self.app.counters.reset();
    }

    pub fn faults(&self) -> Faults {
        self.app.faults.clone()
    }

    /// Sets the hourly limit (bucket capacity and refill) and the tokens left now.
    pub fn set_rate_limit(&self, limit_per_hour: u32, remaining: u32) {
        self.app.rate.set(Some(limit_per_hour), Some(remaining));
    }

    /// Sets only the tokens left now ("start with 10 remaining").
    pub fn set_rate_limit_remaining(&self, remaining: u32) {
        self.app.rate.set(None, Some(remaining));
    }

    pub fn rate_limit(&self) -> RateLimitStatus {
        self.app.rate.status()
    }

    /// Sets a Robot resource's limit: at most `max_request` requests within any `interval`.
    /// Resources: `server` (`GET /server`, `GET /server/{n}`) and `reset` (`GET /reset/{n}`).
    /// Requests already counted stay counted. Panics on an unknown resource.
    pub fn set_robot_rate_limit(&self, resource: &str, max_request: u32, interval: Duration) {
        self.app
            .robot_rate
            .set(resource, Some(max_request), Some(interval), None)
            .unwrap_or_else(|| panic!("unknown Robot rate-limit resource {resource:?}"));
    }

    /// Leaves `remaining` requests of a Robot resource's current window ("10 left").
    /// Panics on an unknown resource.
    pub fn set_robot_rate_limit_remaining(&self, resource: &str, remaining: u32) {
        self.app
            .robot_rate
            .set(resource, None, None, Some(remaining))
            .unwrap_or_else(|| panic!("unknown Robot rate-limit resource {resource:?}"));
    }

    /// Forgets all counted Robot requests (every window empty); limits stay.
    pub fn reset_robot_rate_limit(&self) {
        self.app.robot_rate.reset();
    }

    /// A Robot resource's limit and usage; `None` for an unknown resource.
    pub fn robot_rate_limit(&self, resource: &str) -> Option<RobotRateLimitStatus> {
        self.app.robot_rate.status(resource)
    }

    /// The dedicated servers as they are now, read without a request (not counted, untouched
    /// by faults and rate limits), in their `GET /server/{n}` shape (`{"server": {...}}`).
    pub fn robot_servers(&self) -> Vec<serde_json::Value> {
        self.app
            .read()
            .robot_servers
            .values()
            .map(|s| handlers::robot::server_json(s, true))
            .collect()
    }

    /// How long actions started from now on stay `running`.
    pub fn set_action_duration(&self, d: Duration) {
        self.app.set_action_duration(d);
    }

    /// The server the metadata service answers for when a request names none.
    pub fn set_metadata_server(&self, server: Option<u64>) {
        *self
            .app
            .metadata_server
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = server;
    }

    /// A client that builds worlds through this simulator's public API.
    pub fn client(&self) -> SimClient {
        SimClient::new(&self.base_url(), &self.token())
    }

    /// Servers, load balancers and routes as they are now, read without a request: not
    /// counted, untouched by fault rules and the rate limit.
    pub fn inventory(&self) -> crate::Inventory {
        crate::Inventory::of(&self.app.read())
    }

    // --- data plane (docs/hetzner-api.md, "Load balancers that carry traffic") ---------------

    /// Where the service of load balancer `lb` on `listen_port` accepts connections; `None`
    /// while it has no listener (data plane off, no such service, public interface disabled,
    /// or not reconciled yet: poll).
    pub fn listener(&self, lb: u64, listen_port: u16) -> Option<SocketAddr> {
        self.app
            .data_plane
            .as_ref()
            .and_then(|dp| dp.listener(lb, listen_port))
    }

    /// Every listener of load balancer `lb` with its connection counts (empty with the data
    /// plane off).
    pub fn listeners(&self, lb: u64) -> Vec<ListenerInfo> {
        self.app
            .data_plane
            .as_ref()
            .map(|dp| dp.listeners(lb))
            .unwrap_or_default()
    }

    /// The local address the simulated address `ip` is reached at (allocated on first use):
    /// bind a target's responder here. See the `data_plane::addresses` module.
    pub fn local_address(&self, ip: IpAddr) -> IpAddr {
        self.app.addresses.local(ip)
    }

    /// Every simulated address allocated so far → its local address.
    pub fn addresses(&self) -> BTreeMap<IpAddr, IpAddr> {
        self.app.addresses.snapshot()
    }

    /// Makes the target with simulated address `ip` misbehave on the wire. No effect with the
    /// data plane off (there is no wire then).
    pub fn set_target_fault(&self, ip: IpAddr, fault: TargetFault) {
        if let Some(dp) = &self.app.data_plane {
            dp.faults.set(ip, fault);
        }
    }

    /// Lets the target with simulated address `ip` behave again.
    pub fn clear_target_fault(&self, ip: IpAddr) {
        if let Some(dp) = &self.app.data_plane {
            dp.faults.clear(ip);
        }
    }

    /// Sets the health-check speedup (interval and timeout are divided by it); `false` with
    /// the data plane off or a speedup that is not a positive number.
    pub fn set_health_check_speedup(&self, speedup: f64) -> bool {
        self.app
            .data_plane
            .as_ref()
            .is_some_and(|dp| dp.set_speedup(speedup))
    }

    /// Writes the state file now (no-op without one).
    pub fn save_state(&self) -> std::io::Result<()> {
        self.app.mark_dirty();
        self.app.flush()
    }

    /// Stops accepting, lets in-flight requests finish, stops the data plane (listeners, their
    /// connections, health checks) and writes the state file.
    pub async fn shutdown(mut self) {
        if let Some(dp) = &self.app.data_plane {
            for task in dp.stop() {
                // Aborted: this only waits until the task is gone (its sockets closed).
                let _ = task.await;
            }
        }
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(server) = self.server.take() {
            // Idle keep-alive connections can hold graceful shutdown open; do not wait forever.
            let _ = tokio::time::timeout(Duration::from_secs(5), server).await;
        }
        // Drop does the rest (flusher, final write).
    }
}

impl Drop for Sim {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        // The tasks hold the app (and their sockets) until aborted; aborting drops them on the
        // runtime's next turn, so no listener stays bound after the `Sim` is gone.
        if let Some(dp) = &self.app.data_plane {
            dp.stop();
        }
        if let Some(f) = self.flusher.take() {
            f.abort();
        }
        if let Err(e) = self.save_state() {
            tracing::warn!(error = %e, "cloud-sim cannot write its state file at shutdown");
        }
    }
}
