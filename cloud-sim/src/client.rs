//! `SimClient`: builds and inspects a simulated cloud through the simulator's public API, the way
//! a user or a provisioning tool would. It keeps its own JSON types on purpose: cloud-sim must
//! not depend on cloud-client, so contract tests compare two independent readings of the API.
//!
//! Every mutating helper waits for the action it started (polling `GET /actions/{id}`), so the
//! next call does not run into `locked`.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use reqwest::Method;
use reqwest::header::HeaderMap;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::data_plane::{ListenerInfo, TargetFault};
use crate::faults::UNFAULTED_HEADER;

#[derive(Debug, thiserror::Error)]
pub enum SimClientError {
    /// The API answered with an error body.
    #[error("{0}")]
    Api(Box<ApiFailure>),
    #[error("HTTP transport: {0}")]
    Http(#[from] reqwest::Error),
    #[error("action {id} ({command}) failed: {code}: {message}")]
    ActionFailed {
        id: u64,
        command: String,
        code: String,
        message: String,
    },
    #[error("action {0} still running after the deadline")]
    ActionTimeout(u64),
    #[error("unexpected response: {0}")]
    Unexpected(String),
}

/// An API error answer, as `SimClient` read it.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{method} {path}: HTTP {status} {code}: {message}")]
pub struct ApiFailure {
    pub method: String,
    pub path: String,
    pub status: u16,
    pub code: String,
    pub message: String,
    pub details: Value,
}

impl SimClientError {
    /// The API error code (`uniqueness_error`, `locked`, ...) if the API answered with one.
    pub fn code(&self) -> Option<&str> {
        match self {
            SimClientError::Api(f) => Some(&f.code),
            SimClientError::ActionFailed { code, .. } => Some(code),
            _ => None,
        }
    }

    pub fn status(&self) -> Option<u16> {
        match self {
            SimClientError::Api(f) => Some(f.status),
            _ => None,
        }
    }

    fn api(method: &str, path: &str, r: &RawResponse) -> SimClientError {
        let err = |k: &str| {
            r.body
                .pointer(&format!("/error/{k}"))
                .cloned()
                .unwrap_or(Value::Null)
        };
        SimClientError::Api(Box::new(ApiFailure {
            method: method.to_owned(),
            path: path.to_owned(),
            status: r.status,
            code: err("code").as_str().unwrap_or("").to_owned(),
            message: err("message").as_str().unwrap_or("").to_owned(),
            details: err("details"),
        }))
    }
}

/// An action as `SimClient` reads it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ActionInfo {
    pub id: u64,
    pub command: String,
    pub status: String,
    pub progress: u8,
    pub error: Option<ActionErrorInfo>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ActionErrorInfo {
    pub code: String,
    pub message: String,
}

#[derive(Debug, Deserialize)]
struct IdOnly {
    id: u64,
}

#[derive(Debug, Deserialize)]
struct ActionEnvelope {
    action: ActionInfo,
}

/// A response as it came: for tests that look at statuses and headers themselves.
#[derive(Debug, Clone)]
pub struct RawResponse {
    pub status: u16,
    pub headers: HeaderMap,
    /// The JSON body; `Value::Null` for an empty body, a string for a non-JSON one.
    pub body: Value,
}

impl RawResponse {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    pub fn error_code(&self) -> Option<&str> {
        self.body.pointer("/error/code").and_then(Value::as_str)
    }
}

/// A client for one simulator (or any Hetzner-compatible endpoint).
#[derive(Debug, Clone)]
pub struct SimClient {
    http: reqwest::Client,
    base: String,
    token: String,
    poll: Duration,
    action_deadline: Duration,
    /// `key=value` added to every request's query ([`SimClient::tagged`]).
    tag: Option<String>,
    /// Sends [`UNFAULTED_HEADER`] ([`SimClient::unfaulted`]).
    unfaulted: bool,
}

type Result<T, E = SimClientError> = std::result::Result<T, E>;

impl SimClient {
    /// `base` is the server root (`http://127.0.0.1:PORT`) or the API endpoint (`.../v1`).
    pub fn new(base: &str, token: &str) -> SimClient {
        let base = base.trim_end_matches('/');
        let base = base.strip_suffix("/v1").unwrap_or(base).to_owned();
        SimClient {
            // No proxy: the simulator is always on loopback, whatever HTTP_PROXY says.
            http: reqwest::Client::builder()
                .no_proxy()
                .timeout(Duration::from_secs(60))
                .build()
                .unwrap_or_default(),
            base,
            token: token.to_owned(),
            poll: Duration::from_millis(10),
            action_deadline: Duration::from_secs(30),
            tag: None,
            unfaulted: false,
        }
    }

    /// A copy that adds `query` (`key=value`) to every request it sends, its action polls too:
    /// a benchmark tags its own calls so that the request log tells them from the controllers'.
    pub fn tagged(&self, query: &str) -> SimClient {
        SimClient {
            tag: Some(query.to_owned()),
            ..self.clone()
        }
    }

    /// A copy whose requests the fault rules leave alone ([`UNFAULTED_HEADER`]): a harness that
    /// builds or changes a world while faults are injected must not fail of the faults it is
    /// there to aim at the controllers. The rate limit still counts them, as any other client of
    /// the project.
    pub fn unfaulted(&self) -> SimClient {
        SimClient {
            unfaulted: true,
            ..self.clone()
        }
    }

    /// A copy that sends a different token (for auth tests).
    pub fn with_token(&self, token: &str) -> SimClient {
        SimClient {
            token: token.to_owned(),
            ..self.clone()
        }
    }

    /// Sends any request to `path` (relative to the server root, e.g. `/v1/servers?page=2`).
    pub async fn raw(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<RawResponse> {
        let path = match &self.tag {
            Some(tag) if path.contains('?') => format!("{path}&{tag}"),
            Some(tag) => format!("{path}?{tag}"),
            None => path.to_owned(),
        };
        let mut req = self
            .http
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(&self.token);
        if self.unfaulted {
            req = req.header(UNFAULTED_HEADER, "true");
        }
        if let Some(b) = body {
            req = req.json(&b);
        }
        Self::read(req).await
    }

    async fn read(req: reqwest::RequestBuilder) -> Result<RawResponse> {
        let resp = req.send().await?;
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let text = resp.text().await?;
        let body = if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or(Value::String(text))
        };
        Ok(RawResponse {
            status,
            headers,
            body,
        })
    }

    /// An API call (`path` below `/v1`); non-2xx answers become [`SimClientError::Api`].
    pub async fn call(&self, method: Method, path: &str, body: Option<Value>) -> Result<Value> {
        let m = method.to_string();
        let r = self.raw(method, &format!("/v1{path}"), body).await?;
        if (200..300).contains(&r.status) {
            return Ok(r.body);
        }
        Err(SimClientError::api(&m, path, &r))
    }

    pub async fn get(&self, path: &str) -> Result<Value> {
        self.call(Method::GET, path, None).await
    }

    pub async fn post(&self, path: &str, body: Value) -> Result<Value> {
        self.call(Method::POST, path, Some(body)).await
    }

    /// Every item of a collection, following `meta.pagination.next_page` at 50 per page.
    pub async fn list_all(&self, collection: &str) -> Result<Vec<Value>> {
        let mut items = Vec::new();
        let mut page = 1;
        loop {
            let sep = if collection.contains('?') { '&' } else { '?' };
            let body = self
                .get(&format!("/{collection}{sep}page={page}&per_page=50"))
                .await?;
            let key = collection.split('?').next().unwrap_or(collection);
            let batch = body
                .get(key)
                .and_then(Value::as_array)
                .ok_or_else(|| SimClientError::Unexpected(format!("no '{key}' in list")))?;
            items.extend(batch.iter().cloned());
            match body
                .pointer("/meta/pagination/next_page")
                .and_then(Value::as_u64)
            {
                Some(next) => page = next,
                None => return Ok(items),
            }
        }
    }

    /// Polls the action until it is no longer `running`; an `error` outcome is an error.
    pub async fn wait_action(&self, id: u64) -> Result<ActionInfo> {
        let deadline = Instant::now() + self.action_deadline;
        loop {
            let env: ActionEnvelope = decode(self.get(&format!("/actions/{id}")).await?)?;
            match env.action.status.as_str() {
                "running" if Instant::now() < deadline => tokio::time::sleep(self.poll).await,
                "running" => return Err(SimClientError::ActionTimeout(id)),
                "error" => {
                    let e = env.action.error.clone().unwrap_or(ActionErrorInfo {
                        code: "unknown".into(),
                        message: String::new(),
                    });
                    return Err(SimClientError::ActionFailed {
                        id,
                        command: env.action.command,
                        code: e.code,
                        message: e.message,
                    });
                }
                _ => return Ok(env.action),
            }
        }
    }

    /// Waits for the `action` (and `next_actions`) of a response, if it has any.
    async fn wait_in(&self, body: &Value) -> Result<()> {
        let ids = body
            .get("action")
            .into_iter()
            .chain(
                body.get("next_actions")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten(),
            )
            .filter_map(|a| a.get("id").and_then(Value::as_u64));
        for id in ids.collect::<Vec<_>>() {
            self.wait_action(id).await?;
        }
        Ok(())
    }

    async fn post_and_wait(&self, path: &str, body: Value) -> Result<Value> {
        let resp = self.post(path, body).await?;
        self.wait_in(&resp).await?;
        Ok(resp)
    }

    // --- networks -------------------------------------------------------------------------

    /// A network with one `cloud` subnet in `eu-central`.
    pub async fn create_network(&self, name: &str, ip_range: &str, subnet: &str) -> Result<u64> {
        self.create_network_in_zone(name, ip_range, subnet, "eu-central")
            .await
    }

    pub async fn create_network_in_zone(
        &self,
        name: &str,
        ip_range: &str,
        subnet: &str,
        zone: &str,
    ) -> Result<u64> {
        self.create_network_with(json!({
            "name": name, "ip_range": ip_range,
            "subnets": [{"type": "cloud", "ip_range": subnet, "network_zone": zone}],
        }))
        .await
    }

    /// `POST /networks` with a full body.
    pub async fn create_network_with(&self, body: Value) -> Result<u64> {
        id_at(&self.post("/networks", body).await?, "network")
    }

    pub async fn get_network(&self, id: u64) -> Result<Value> {
        field(self.get(&format!("/networks/{id}")).await?, "network")
    }

    pub async fn delete_network(&self, id: u64) -> Result<()> {
        self.call(Method::DELETE, &format!("/networks/{id}"), None)
            .await
            .map(drop)
    }

    pub async fn add_subnet(&self, network: u64, ip_range: &str, zone: &str) -> Result<()> {
        let body = json!({"type": "cloud", "ip_range": ip_range, "network_zone": zone});
        self.post_and_wait(&format!("/networks/{network}/actions/add_subnet"), body)
            .await
            .map(drop)
    }

    pub async fn add_route(&self, network: u64, destination: &str, gateway: &str) -> Result<()> {
        let body = json!({"destination": destination, "gateway": gateway});
        self.post_and_wait(&format!("/networks/{network}/actions/add_route"), body)
            .await
            .map(drop)
    }

    pub async fn delete_route(&self, network: u64, destination: &str, gateway: &str) -> Result<()> {
        let body = json!({"destination": destination, "gateway": gateway});
        self.post_and_wait(&format!("/networks/{network}/actions/delete_route"), body)
            .await
            .map(drop)
    }

    // --- servers --------------------------------------------------------------------------

    /// Creates a server (image ubuntu-24.04) and waits until it is `running`.
    pub async fn create_server(
        &self,
        name: &str,
        server_type: &str,
        location: &str,
    ) -> Result<u64> {
        self.create_server_with(json!({
            "name": name, "server_type": server_type, "location": location, "image": "ubuntu-24.04",
        }))
        .await
    }

    /// `POST /servers` with a full body (labels, networks, public_net, ...), then waits.
    pub async fn create_server_with(&self, body: Value) -> Result<u64> {
        id_at(&self.post_and_wait("/servers", body).await?, "server")
    }

    /// `n` running servers `prefix-1 .. prefix-n` in one call to `POST /_sim/batch/servers`
    /// (same validation as `POST /servers`; see the `control` module for why it exists).
    pub async fn create_servers(
        &self,
        n: usize,
        prefix: &str,
        server_type: &str,
        location: &str,
    ) -> Result<Vec<u64>> {
        self.create_servers_with(
            n,
            prefix,
            json!({"server_type": server_type, "location": location}),
        )
        .await
    }

    /// Like [`SimClient::create_servers`] with a body template (`labels`, `networks`, `public_net`, ...).
    pub async fn create_servers_with(
        &self,
        n: usize,
        prefix: &str,
        template: Value,
    ) -> Result<Vec<u64>> {
        let mut body = template;
        body["count"] = json!(n);
        body["prefix"] = json!(prefix);
        let r = self
            .raw(Method::POST, "/_sim/batch/servers", Some(body))
            .await?;
        if r.status != 201 {
            return Err(SimClientError::api("POST", "/_sim/batch/servers", &r));
        }
        Ok(r.body["servers"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_u64)
            .collect())
    }

    pub async fn get_server(&self, id: u64) -> Result<Value> {
        field(self.get(&format!("/servers/{id}")).await?, "server")
    }

    pub async fn list_servers(&self) -> Result<Vec<Value>> {
        self.list_all("servers").await
    }

    pub async fn set_server_labels(&self, id: u64, labels: &[(&str, &str)]) -> Result<()> {
        let labels: serde_json::Map<String, Value> = labels
            .iter()
            .map(|(k, v)| ((*k).to_owned(), json!(v)))
            .collect();
        self.call(
            Method::PUT,
            &format!("/servers/{id}"),
            Some(json!({"labels": labels})),
        )
        .await
        .map(drop)
    }

    pub async fn attach_to_network(
        &self,
        server: u64,
        network: u64,
        ip: Option<&str>,
    ) -> Result<()> {
        let mut body = json!({"network": network});
        if let Some(ip) = ip {
            body["ip"] = json!(ip);
        }
        self.post_and_wait(
            &format!("/servers/{server}/actions/attach_to_network"),
            body,
        )
        .await
        .map(drop)
    }

    pub async fn detach_from_network(&self, server: u64, network: u64) -> Result<()> {
        self.post_and_wait(
            &format!("/servers/{server}/actions/detach_from_network"),
            json!({"network": network}),
        )
        .await
        .map(drop)
    }

    /// Runs a server action (`poweroff`, `poweron`, `shutdown`, `reboot`, `reset`) and waits.
    pub async fn server_action(&self, server: u64, command: &str) -> Result<ActionInfo> {
        let resp = self
            .post(&format!("/servers/{server}/actions/{command}"), json!({}))
            .await?;
        let env: ActionEnvelope = decode(resp)?;
        self.wait_action(env.action.id).await
    }

    pub async fn poweroff(&self, server: u64) -> Result<()> {
        self.server_action(server, "poweroff").await.map(drop)
    }

    pub async fn poweron(&self, server: u64) -> Result<()> {
        self.server_action(server, "poweron").await.map(drop)
    }

    pub async fn delete_server(&self, server: u64) -> Result<()> {
        let resp = self
            .call(Method::DELETE, &format!("/servers/{server}"), None)
            .await?;
        self.wait_in(&resp).await
    }

    // --- Robot webservice (dedicated servers) -----------------------------------------------

    /// A Robot webservice request (`path` below `/robot`, e.g. `/server/1000001`) with HTTP
    /// basic `credentials` (`None`: without any), answered as it came.
    pub async fn robot_raw(
        &self,
        method: Method,
        path: &str,
        credentials: Option<(&str, &str)>,
    ) -> Result<RawResponse> {
        let mut req = self
            .http
            .request(method, format!("{}/robot{path}", self.base));
        if let Some((user, password)) = credentials {
            req = req.basic_auth(user, Some(password));
        }
        Self::read(req).await
    }

    /// A `/_sim` control call expecting `expect`; anything else is [`SimClientError::Api`].
    async fn control(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
        expect: u16,
    ) -> Result<Value> {
        let m = method.to_string();
        let r = self.raw(method, path, body).await?;
        if r.status == expect {
            Ok(r.body)
        } else {
            Err(SimClientError::api(&m, path, &r))
        }
    }

    /// A dedicated server, powered on, with fresh main addresses; returns its server number.
    pub async fn create_robot_server(&self, name: &str, product: &str, dc: &str) -> Result<u64> {
        self.create_robot_server_with(json!({"server_name": name, "product": product, "dc": dc}))
            .await
    }

    /// `POST /_sim/robot/servers` with a full body (`server_number`, `power`, `ipv4`,
    /// `operating_status_supported`, `reset`, ...; see the `control` module).
    pub async fn create_robot_server_with(&self, body: Value) -> Result<u64> {
        let r = self
            .control(Method::POST, "/_sim/robot/servers", Some(body), 201)
            .await?;
        r.pointer("/server/server_number")
            .and_then(Value::as_u64)
            .ok_or_else(|| SimClientError::Unexpected(format!("no server_number in {r}")))
    }

    /// `PUT /_sim/robot/servers/{number}`: changes the given fields; returns the server as
    /// `GET /server/{n}` shows it (`{"server": {...}}`).
    pub async fn update_robot_server(&self, number: u64, body: Value) -> Result<Value> {
        self.control(
            Method::PUT,
            &format!("/_sim/robot/servers/{number}"),
            Some(body),
            200,
        )
        .await
    }

    /// Powers a dedicated server off: `GET /reset/{n}` shows `operating_status: "shut off"`.
    pub async fn robot_power_off(&self, number: u64) -> Result<()> {
        self.update_robot_server(number, json!({"power": "off"}))
            .await
            .map(drop)
    }

    /// Powers a dedicated server on: `operating_status: "running"`.
    pub async fn robot_power_on(&self, number: u64) -> Result<()> {
        self.update_robot_server(number, json!({"power": "on"}))
            .await
            .map(drop)
    }

    /// Removes a dedicated server (cancelled and gone): it answers `SERVER_NOT_FOUND`.
    pub async fn delete_robot_server(&self, number: u64) -> Result<()> {
        self.control(
            Method::DELETE,
            &format!("/_sim/robot/servers/{number}"),
            None,
            204,
        )
        .await
        .map(drop)
    }

    /// At most `max_request` requests to `resource` (`server` | `reset`) within any
    /// `interval_secs`; requests already counted stay counted.
    pub async fn set_robot_rate_limit(
        &self,
        resource: &str,
        max_request: u32,
        interval_secs: u64,
    ) -> Result<()> {
        let body =
            json!({"resource": resource, "max_request": max_request, "interval": interval_secs});
        self.control(Method::PUT, "/_sim/robot/rate_limit", Some(body), 200)
            .await
            .map(drop)
    }

    /// Forgets every counted Robot request; limits stay.
    pub async fn reset_robot_rate_limit(&self) -> Result<()> {
        self.control(Method::DELETE, "/_sim/robot/rate_limit", None, 204)
            .await
            .map(drop)
    }

    // --- load balancers -------------------------------------------------------------------

    pub async fn create_load_balancer(
        &self,
        name: &str,
        lb_type: &str,
        location: &str,
    ) -> Result<u64> {
        self.create_load_balancer_with(
            json!({"name": name, "load_balancer_type": lb_type, "location": location}),
        )
        .await
    }

    pub async fn create_load_balancer_with(&self, body: Value) -> Result<u64> {
        id_at(
            &self.post_and_wait("/load_balancers", body).await?,
            "load_balancer",
        )
    }

    pub async fn get_load_balancer(&self, id: u64) -> Result<Value> {
        field(
            self.get(&format!("/load_balancers/{id}")).await?,
            "load_balancer",
        )
    }

    pub async fn list_load_balancers(&self) -> Result<Vec<Value>> {
        self.list_all("load_balancers").await
    }

    pub async fn delete_load_balancer(&self, id: u64) -> Result<()> {
        self.call(Method::DELETE, &format!("/load_balancers/{id}"), None)
            .await
            .map(drop)
    }

    /// `POST /load_balancers/{id}/actions/{command}` and wait for the action.
    pub async fn load_balancer_action(
        &self,
        id: u64,
        command: &str,
        body: Value,
    ) -> Result<ActionInfo> {
        let env: ActionEnvelope = decode(
            self.post(&format!("/load_balancers/{id}/actions/{command}"), body)
                .await?,
        )?;
        self.wait_action(env.action.id).await
    }

    // --- data plane (see `Sim::listener` and friends) ---------------------------------------

    /// `GET /_sim/load_balancers/{id}/listeners`: the load balancer's listeners with their
    /// connection counts (empty with the data plane off).
    pub async fn listeners(&self, lb: u64) -> Result<Vec<ListenerInfo>> {
        let r = self
            .control(
                Method::GET,
                &format!("/_sim/load_balancers/{lb}/listeners"),
                None,
                200,
            )
            .await?;
        decode(r.get("listeners").cloned().unwrap_or(Value::Null))
    }

    /// Where the service on `listen_port` accepts connections, if it has a listener yet.
    pub async fn listener(&self, lb: u64, listen_port: u16) -> Result<Option<SocketAddr>> {
        Ok(self
            .listeners(lb)
            .await?
            .into_iter()
            .find(|l| l.listen_port == listen_port)
            .map(|l| l.address))
    }

    /// `POST /_sim/addresses`: the local address the simulated `ip` is reached at.
    pub async fn local_address(&self, ip: IpAddr) -> Result<IpAddr> {
        let r = self
            .control(
                Method::POST,
                "/_sim/addresses",
                Some(json!({"ip": ip})),
                200,
            )
            .await?;
        decode(r.get("local").cloned().unwrap_or(Value::Null))
    }

    /// `GET /_sim/addresses`: simulated → local, every address allocated so far.
    pub async fn addresses(&self) -> Result<BTreeMap<IpAddr, IpAddr>> {
        let r = self
            .control(Method::GET, "/_sim/addresses", None, 200)
            .await?;
        decode(r.get("addresses").cloned().unwrap_or(Value::Null))
    }

    /// `PUT /_sim/targets/{ip}/fault`; `ip` is the target's simulated address.
    pub async fn set_target_fault(&self, ip: IpAddr, fault: TargetFault) -> Result<()> {
        self.control(
            Method::PUT,
            &format!("/_sim/targets/{ip}/fault"),
            Some(json!({"kind": fault})),
            200,
        )
        .await
        .map(drop)
    }

    /// `DELETE /_sim/targets/{ip}/fault`.
    pub async fn clear_target_fault(&self, ip: IpAddr) -> Result<()> {
        self.control(
            Method::DELETE,
            &format!("/_sim/targets/{ip}/fault"),
            None,
            204,
        )
        .await
        .map(drop)
    }

    /// `PUT /_sim/config {"health_check_speedup"}`.
    pub async fn set_health_check_speedup(&self, speedup: f64) -> Result<()> {
        self.control(
            Method::PUT,
            "/_sim/config",
            Some(json!({"health_check_speedup": speedup})),
            200,
        )
        .await
        .map(drop)
    }

    // --- certificates ---------------------------------------------------------------------

    /// An uploaded certificate.
    pub async fn create_certificate(
        &self,
        name: &str,
        certificate: &str,
        private_key: &str,
    ) -> Result<u64> {
        let body = json!({"name": name, "type": "uploaded", "certificate": certificate, "private_key": private_key});
        id_at(&self.post("/certificates", body).await?, "certificate")
    }

    /// A managed certificate; waits for issuance.
    pub async fn create_managed_certificate(&self, name: &str, domains: &[&str]) -> Result<u64> {
        let body = json!({"name": name, "type": "managed", "domain_names": domains});
        id_at(
            &self.post_and_wait("/certificates", body).await?,
            "certificate",
        )
    }

    pub async fn get_certificate(&self, id: u64) -> Result<Value> {
        field(
            self.get(&format!("/certificates/{id}")).await?,
            "certificate",
        )
    }
}

fn decode<T: serde::de::DeserializeOwned>(v: Value) -> Result<T> {
    serde_json::from_value(v).map_err(|e| SimClientError::Unexpected(e.to_string()))
}

fn field(mut v: Value, key: &str) -> Result<Value> {
    v.get_mut(key)
        .map(Value::take)
        .ok_or_else(|| SimClientError::Unexpected(format!("no '{key}' in response")))
}

fn id_at(v: &Value, key: &str) -> Result<u64> {
    let r: IdOnly = decode(v.get(key).cloned().unwrap_or(Value::Null))?;
    Ok(r.id)
}
