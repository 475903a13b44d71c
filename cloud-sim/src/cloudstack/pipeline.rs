//! `GET|POST /client/api`: every CloudStack request, in the management server's order:
//!
//! 1. the "unreachable" switch (503 from the proxy in front, no CloudStack body);
//! 2. `command` known, `apiKey` and `signature` present, `expires` still ahead (signature
//!    version 3), the key an enabled account's: else 401;
//! 3. API throttling of the account (429), a command the account's role may not use (401);
//! 4. the signature (401);
//! 5. fault rules for `CLOUDSTACK <command>` (latency, hang, injected error);
//! 6. `response=json` (the simulator speaks no XML), then the command.
//!
//! Every request is counted and logged as `CLOUDSTACK <command>` (see `Sim::cloudstack_calls`),
//! whatever its outcome.

use std::sync::atomic::Ordering;
use std::time::Instant;

use axum::Json;
use axum::extract::{Request, State};
use axum::http::{Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::access::Caller;
use super::commands::{self, Command, Ctx};
use super::error::{CsError, code, cs_code};
use super::jobs::JobPlan;
use super::model::World;
use super::params::Params;
use super::signature;
use crate::app::{App, AppInner};
use crate::clock::{now_ms, rfc3339};
use crate::counters::RequestLogEntry;
use crate::error::ApiError;
use crate::faults::{self, Decision};

/// The method counters and fault rules file CloudStack commands under: `CLOUDSTACK <command>`.
pub const METHOD: &str = "CLOUDSTACK";

/// Form bodies larger than this are refused (CloudStack requests are small; user data is not
/// simulated).
const MAX_BODY: usize = 1 << 20;

pub async fn api(State(app): State<App>, req: Request) -> Response {
    let started = Instant::now();
    let method = req.method().clone();
    if method != Method::GET && method != Method::POST {
        return StatusCode::METHOD_NOT_ALLOWED.into_response();
    }
    let uri = redacted(req.uri().path(), req.uri().query());
    let query = req.uri().query().unwrap_or_default().to_owned();
    let unfaulted = req.headers().contains_key(faults::UNFAULTED_HEADER);
    let form = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/x-www-form-urlencoded"));
    let body = match axum::body::to_bytes(req.into_body(), MAX_BODY).await {
        Ok(b) => b,
        Err(_) => return StatusCode::PAYLOAD_TOO_LARGE.into_response(),
    };
    let form_body: &[u8] = if method == Method::POST && form {
        &body
    } else {
        b""
    };
    let params = Params::parse(&query, form_body);
    let resp = respond(&app, &params, unfaulted).await;
    record(&app, &params, uri, &resp, started);
    resp
}

async fn respond(app: &AppInner, params: &Params, unfaulted: bool) -> Response {
    if app.read().cloudstack.settings.unreachable {
        return (StatusCode::SERVICE_UNAVAILABLE, "<html><body><h1>503 Service Unavailable</h1>No server is available to handle this request.</body></html>").into_response();
    }
    let command = params.command().and_then(commands::find);
    let name = match command {
        Some(c) => format!("{}response", c.name.to_ascii_lowercase()),
        None => "errorresponse".to_owned(),
    };
    let caller = {
        let mut st = app.write();
        authenticate(app, &mut st.cloudstack, params, command)
    };
    let (caller, command) = match (caller, command) {
        (Ok(caller), Some(command)) => (caller, command),
        (Err(e), _) => return e.into_response_named(&name),
        (Ok(_), None) => return CsError::unauthorized().into_response_named(&name),
    };
    let decision = if unfaulted {
        Decision::default()
    } else {
        app.faults.decide(&format!("{METHOD} {}", command.name))
    };
    if !decision.latency.is_zero() {
        tokio::time::sleep(decision.latency).await;
    }
    if let Some(hang) = decision.hang {
        tokio::time::sleep(hang).await;
        return CsError {
            errorcode: 504,
            cserrorcode: None,
            text: "injected timeout".into(),
        }
        .into_response_named(&name);
    }
    if let Some(e) = &decision.error {
        return injected(e, params).into_response_named(&name);
    }
    if !params
        .get("response")
        .is_some_and(|r| r.eq_ignore_ascii_case("json"))
    {
        return CsError::new(
            code::PARAM_ERROR,
            cs_code::SERVER_API,
            "cloud-sim answers response=json only",
        )
        .into_response_named(&name);
    }
    let result = run(
        app,
        command,
        caller,
        params,
        JobPlan::from_decision(&decision),
    );
    match result {
        Ok(mut inner) => {
            shape(&mut inner, &decision);
            (StatusCode::OK, Json(json!({ name: inner }))).into_response()
        }
        Err(e) => e.into_response_named(&name),
    }
}

fn run(
    app: &AppInner,
    command: &Command,
    caller: Caller,
    params: &Params,
    plan: JobPlan,
) -> Result<Value, CsError> {
    let job_ms = app.action_ms.load(Ordering::Relaxed);
    let mut st = app.write();
    let now = now_ms();
    st.cloudstack.settle(now);
    let mut ctx = Ctx {
        world: &mut st.cloudstack,
        caller,
        params,
        now,
        job_ms,
        plan,
    };
    (command.run)(&mut ctx)
}

/// Steps 2 to 4 of the module comment: the account the request was signed for.
fn authenticate(
    app: &AppInner,
    world: &mut World,
    params: &Params,
    command: Option<&Command>,
) -> Result<Caller, CsError> {
    let command = command.ok_or_else(CsError::unauthorized)?;
    let api_key = params.get("apiKey").ok_or_else(CsError::unauthorized)?;
    let sent = params.get("signature").ok_or_else(CsError::unauthorized)?;
    if params.get("signatureversion") == Some("3") {
        let expires = params
            .get("expires")
            .and_then(signature::parse_expires)
            .ok_or_else(CsError::unauthorized)?;
        if expires < now_ms() {
            return Err(CsError::unauthorized());
        }
    }
    let (account_id, secret) = key_owner(app, world, api_key).ok_or_else(CsError::unauthorized)?;
    throttle(world, &account_id, now_ms())?;
    let caller = Caller::of(world, &account_id).ok_or_else(CsError::unauthorized)?;
    if command.admin_only && !caller.admin {
        return Err(CsError::command_not_available(command.name));
    }
    let expected = signature::sign(&secret, &signature::canonical(params.pairs()));
    if signature::same(sent, &expected) {
        Ok(caller)
    } else {
        Err(CsError::unauthorized())
    }
}

/// The enabled account holding `api_key`, and its secret key: the primary account holds the
/// configured pair.
fn key_owner(app: &AppInner, world: &World, api_key: &str) -> Option<(String, String)> {
    let account = world.accounts.iter().find(|a| {
        a.enabled
            && if a.primary {
                api_key == app.config.cloudstack_api_key
            } else {
                a.api_key.as_deref() == Some(api_key)
            }
    })?;
    let secret = if account.primary {
        app.config.cloudstack_secret_key.clone()
    } else {
        account.secret_key.clone()?
    };
    Some((account.id.clone(), secret))
}

/// `api.throttling.*`: a window per account opens with its first request and allows `max`;
/// requests over it are refused, and still counted, until the window ends.
fn throttle(world: &mut World, account_id: &str, now: u64) -> Result<(), CsError> {
    let Some(t) = world.settings.throttling else {
        return Ok(());
    };
    let window = world
        .throttle_windows
        .entry(account_id.to_owned())
        .or_insert((now, 0));
    if now >= window.0 + t.interval_ms {
        *window = (now, 0);
    }
    window.1 += 1;
    if window.1 <= t.max {
        return Ok(());
    }
    Err(throttled(window.0 + t.interval_ms - now))
}

fn throttled(retry_after_ms: u64) -> CsError {
    CsError::new(
        code::API_LIMIT_EXCEED,
        cs_code::SERVER_API,
        format!(
            "The given user has reached his/her account api limit, please retry after [{retry_after_ms}] ms."
        ),
    )
}

/// An injected error in CloudStack's form: the rule's status is the `errorcode`, a numeric
/// `code` the `cserrorcode` (else the usual one), and without a message of its own the text
/// CloudStack gives such errors.
fn injected(e: &ApiError, params: &Params) -> CsError {
    let errorcode = e.status.as_u16();
    let cs = e
        .code
        .parse::<u32>()
        .unwrap_or_else(|_| CsError::usual_cs_code(errorcode));
    let own = !e.message.starts_with("injected fault") && e.message != faults::RATE_LIMIT_ECHO;
    let text = match errorcode {
        _ if own => e.message.clone(),
        code::API_LIMIT_EXCEED => return throttled(1000),
        code::INTERNAL_ERROR => {
            "Internal error executing command, please contact your system administrator".into()
        }
        code::PARAM_ERROR => format!(
            "Unable to execute API command {} due to invalid value. (injected fault)",
            params.command_lower()
        ),
        code::ACCOUNT_ERROR => "Permission denied (injected fault)".into(),
        other => format!("injected fault {other}"),
    };
    CsError::new(errorcode, cs, text)
}

/// Applies `omit_field` (`virtualmachine.publicip`: the field of every item under that key) and
/// `omit_items` rules to a successful answer's inner object.
fn shape(inner: &mut Value, decision: &Decision) {
    for (path, null) in &decision.omit {
        let parts: Vec<&str> = path.split('.').collect();
        let Some((kind, rest)) = parts.split_first() else {
            continue;
        };
        if rest.is_empty() {
            continue;
        }
        match inner.get_mut(*kind) {
            Some(Value::Array(items)) => {
                for item in items {
                    faults::omit_in(item, rest, *null);
                }
            }
            Some(one) => faults::omit_in(one, rest, *null),
            None => {}
        }
    }
    if let Some((share, seed)) = decision.omit_items {
        faults::omit_items(inner, share, seed);
    }
}

/// The request's path and query with the `apiKey` and `signature` values blanked: the request
/// log is for reading, and keys have no place in it.
fn redacted(path: &str, query: Option<&str>) -> String {
    let Some(query) = query else {
        return path.to_owned();
    };
    let pairs: Vec<String> = query
        .split('&')
        .map(|p| match p.split_once('=') {
            Some((k, _))
                if k.eq_ignore_ascii_case("apikey") || k.eq_ignore_ascii_case("signature") =>
            {
                format!("{k}=***")
            }
            _ => p.to_owned(),
        })
        .collect();
    format!("{path}?{}", pairs.join("&"))
}

fn record(app: &AppInner, params: &Params, uri: String, resp: &Response, started: Instant) {
    let status = resp.status().as_u16();
    let duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    let endpoint = params.command().unwrap_or("(no command)").to_owned();
    tracing::debug!(command = %endpoint, status, duration_ms, "cloud-sim CloudStack request");
    app.counters.record(RequestLogEntry {
        seq: 0,
        method: METHOD.into(),
        endpoint,
        uri,
        status,
        duration_ms,
        at: rfc3339(now_ms()),
    });
}
