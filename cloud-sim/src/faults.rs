//! Fault injection: rules that make matching API requests fail, slow down, hang, lose fields
//! in their response, or start actions that end in `error`. The same rules are reachable from
//! Rust (`Sim::faults()`) and over HTTP (`/_sim/faults`), so tests and demos share one model.
//! They apply to the Robot webservice too: its endpoints keep their prefix
//! (`"GET /robot/server/{server-number}"`) and injected errors answer in Robot shape.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::actions::ActionFailure;
use crate::error::ApiError;

/// The message of an injected `rate_limit_exceeded` that names none: the pipeline replaces it with
/// the real API's wording for the caller (see [`ApiError::rate_limited`]).
pub const RATE_LIMIT_ECHO: &str = "(the real rate-limit message for the caller)";

/// A request carrying this header (any value) is left alone by every rule: it is the test
/// harness changing the world (a server that joins mid-scenario), not a caller under test.
pub const UNFAULTED_HEADER: &str = "x-sim-unfaulted";

/// One fault rule. `endpoint` is `"METHOD /template"` as the counters name it
/// (`"POST /load_balancers/{id}/actions/add_target"`); a trailing `*` matches a prefix
/// (`"POST /load_balancers/*"`); `None` matches every API request (Cloud and Robot).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FaultRule {
    #[serde(default)]
    pub endpoint: Option<String>,
    /// Fires for this many matching requests, then is removed; `None` = until cleared.
    #[serde(default)]
    pub count: Option<u32>,
    /// Chance that a matching request is affected (0.0..=1.0); a miss does not use up `count`.
    #[serde(default = "always")]
    pub probability: f64,
    /// Only every n-th matching request is affected; `None` = every one.
    #[serde(default)]
    pub every: Option<u32>,
    #[serde(flatten)]
    pub kind: FaultKind,
}

fn always() -> f64 {
    1.0
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum FaultKind {
    /// Answer with this error instead of running the handler. `status` defaults to the code's
    /// usual status (`conflict` → 409, `server_error` → 500, ...).
    Error {
        #[serde(default)]
        status: Option<u16>,
        code: String,
        #[serde(default)]
        message: Option<String>,
    },
    /// Delay the response, then answer normally.
    Latency { ms: u64 },
    /// Hang for `ms` (meant to exceed the client's timeout), then answer 504 `timeout` without
    /// running the handler, so a hung write has no effect.
    Hang { ms: u64 },
    /// Drop a field from the resources in the response. `path` starts with the resource kind:
    /// `server.public_net.ipv4`, `server.location`, `load_balancer.private_net`. The rule applies
    /// to the single-resource root key (`server`) and to every element of the plural
    /// (`servers`). `null: true` keeps the key with a `null` value instead of removing it.
    OmitField {
        path: String,
        #[serde(default)]
        null: bool,
    },
    /// Actions started by the matching request finish with `status: error` and this error.
    ActionError {
        code: String,
        #[serde(default)]
        message: Option<String>,
    },
    /// Actions started by the matching request take `ms` instead of the configured duration
    /// (slow actions on some endpoints without slowing the whole world down).
    ActionDuration { ms: u64 },
    /// Leave out each item of a list response (`servers`, `load_balancers`, ...) with this
    /// chance, as an eventually consistent list does for a while: the items still exist and
    /// answer by id, only the list misses them.
    OmitItems { share: f64 },
}

/// What the rules decided for one request.
#[derive(Debug, Default)]
pub struct Decision {
    pub latency: Duration,
    pub hang: Option<Duration>,
    pub error: Option<ApiError>,
    pub omit: Vec<(String, bool)>,
    pub action_error: Option<ActionFailure>,
    pub action_duration: Option<Duration>,
    /// Share of list items to leave out, and the seed that picks them.
    pub omit_items: Option<(f64, u64)>,
}

/// Handle on the fault rules of one simulator; cheap to clone.
#[derive(Debug, Clone)]
pub struct Faults {
    inner: Arc<Mutex<Inner>>,
}

#[derive(Debug)]
struct Inner {
    rules: Vec<(u64, FaultRule)>,
    /// Matching requests seen per rule, for `every`.
    seen: std::collections::HashMap<u64, u64>,
    next_id: u64,
    rng: u64,
}

impl Faults {
    pub(crate) fn new(seed: u64) -> Self {
        Faults {
            inner: Arc::new(Mutex::new(Inner {
                rules: Vec::new(),
                seen: std::collections::HashMap::new(),
                next_id: 0,
                rng: seed | 1,
            })),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds a rule; the id removes it again.
    pub fn add(&self, rule: FaultRule) -> u64 {
        let mut inner = self.lock();
        inner.next_id += 1;
        let id = inner.next_id;
        inner.rules.push((id, rule));
        id
    }

    pub fn remove(&self, id: u64) -> bool {
        let mut inner = self.lock();
        let before = inner.rules.len();
        inner.rules.retain(|(i, _)| *i != id);
        inner.rules.len() != before
    }

    pub fn clear(&self) {
        self.lock().rules.clear();
    }

    pub fn list(&self) -> Vec<(u64, FaultRule)> {
        self.lock().rules.clone()
    }

    /// The next `n` matching requests fail with `status`/`code`.
    pub fn fail_next(&self, endpoint: Option<&str>, n: u32, status: u16, code: &str) -> u64 {
        self.add(FaultRule {
            endpoint: endpoint.map(str::to_owned),
            count: Some(n),
            probability: 1.0,
            every: None,
            kind: FaultKind::Error {
                status: Some(status),
                code: code.to_owned(),
                message: None,
            },
        })
    }

    /// Every `n`-th matching request fails with `status`/`code` until cleared.
    pub fn fail_every(&self, endpoint: Option<&str>, n: u32, status: u16, code: &str) -> u64 {
        self.add(FaultRule {
            endpoint: endpoint.map(str::to_owned),
            count: None,
            probability: 1.0,
            every: Some(n),
            kind: FaultKind::Error {
                status: Some(status),
                code: code.to_owned(),
                message: None,
            },
        })
    }

    /// A share (`0.0..=1.0`) of matching requests fail with `status`/`code` until cleared.
    pub fn error_rate(
        &self,
        endpoint: Option<&str>,
        probability: f64,
        status: u16,
        code: &str,
    ) -> u64 {
        self.add(FaultRule {
            endpoint: endpoint.map(str::to_owned),
            count: None,
            probability,
            every: None,
            kind: FaultKind::Error {
                status: Some(status),
                code: code.to_owned(),
                message: None,
            },
        })
    }

    pub fn latency(&self, endpoint: Option<&str>, delay: Duration) -> u64 {
        self.add(FaultRule {
            endpoint: endpoint.map(str::to_owned),
            count: None,
            probability: 1.0,
            every: None,
            kind: FaultKind::Latency {
                ms: delay.as_millis() as u64,
            },
        })
    }

    /// The next `n` matching requests hang for `duration` and then get 504 `timeout`.
    pub fn hang(&self, endpoint: Option<&str>, n: u32, duration: Duration) -> u64 {
        self.add(FaultRule {
            endpoint: endpoint.map(str::to_owned),
            count: Some(n),
            probability: 1.0,
            every: None,
            kind: FaultKind::Hang {
                ms: duration.as_millis() as u64,
            },
        })
    }

    /// Responses lose `path` (see [`FaultKind::OmitField`]) until cleared.
    pub fn omit_field(&self, endpoint: Option<&str>, path: &str, null: bool) -> u64 {
        self.add(FaultRule {
            endpoint: endpoint.map(str::to_owned),
            count: None,
            probability: 1.0,
            every: None,
            kind: FaultKind::OmitField {
                path: path.to_owned(),
                null,
            },
        })
    }

    /// List responses leave out each item with chance `share` (see [`FaultKind::OmitItems`])
    /// until cleared.
    pub fn omit_items(&self, endpoint: Option<&str>, share: f64) -> u64 {
        self.add(FaultRule {
            endpoint: endpoint.map(str::to_owned),
            count: None,
            probability: 1.0,
            every: None,
            kind: FaultKind::OmitItems { share },
        })
    }

    /// Actions started by the next `n` matching requests end in `error` with `code`.
    pub fn fail_actions(&self, endpoint: Option<&str>, n: u32, code: &str) -> u64 {
        self.add(FaultRule {
            endpoint: endpoint.map(str::to_owned),
            count: Some(n),
            probability: 1.0,
            every: None,
            kind: FaultKind::ActionError {
                code: code.to_owned(),
                message: None,
            },
        })
    }

    /// Evaluates (and uses up) the rules for one request to `endpoint` ("GET /servers").
    pub(crate) fn decide(&self, endpoint: &str) -> Decision {
        let mut inner = self.lock();
        let mut decision = Decision::default();
        let Inner {
            rules, seen, rng, ..
        } = &mut *inner;
        let mut rng = *rng;
        for (id, rule) in rules.iter_mut() {
            if !matches(rule.endpoint.as_deref(), endpoint) {
                continue;
            }
            if let Some(n) = rule.every {
                let count = seen.entry(*id).or_default();
                *count += 1;
                if *count % u64::from(n.max(1)) != 0 {
                    continue;
                }
            }
            if rule.probability < 1.0 {
                rng = xorshift(rng);
                if unit(rng) >= rule.probability {
                    continue;
                }
            }
            let fired = match &rule.kind {
                FaultKind::Error {
                    status,
                    code,
                    message,
                } if decision.error.is_none() => {
                    // An injected 429 with no message of its own is worded by the pipeline as
                    // the real one is, the caller's token quoted (see `ApiError::rate_limited`).
                    let message = message.clone().unwrap_or_else(|| {
                        if code == "rate_limit_exceeded" {
                            RATE_LIMIT_ECHO.to_owned()
                        } else {
                            format!("injected fault: {code}")
                        }
                    });
                    decision.error = Some(match status {
                        Some(s) => ApiError::new(*s, code, message),
                        None => ApiError::with_code(code, message),
                    });
                    true
                }
                FaultKind::Latency { ms } => {
                    decision.latency += Duration::from_millis(*ms);
                    true
                }
                FaultKind::Hang { ms } if decision.hang.is_none() => {
                    decision.hang = Some(Duration::from_millis(*ms));
                    true
                }
                FaultKind::OmitField { path, null } => {
                    decision.omit.push((path.clone(), *null));
                    true
                }
                FaultKind::ActionError { code, message } if decision.action_error.is_none() => {
                    decision.action_error = Some(ActionFailure {
                        code: code.clone(),
                        message: message
                            .clone()
                            .unwrap_or_else(|| format!("injected action failure: {code}")),
                    });
                    true
                }
                FaultKind::ActionDuration { ms } if decision.action_duration.is_none() => {
                    decision.action_duration = Some(Duration::from_millis(*ms));
                    true
                }
                FaultKind::OmitItems { share } if decision.omit_items.is_none() => {
                    rng = xorshift(rng);
                    decision.omit_items = Some((*share, rng));
                    true
                }
                _ => false,
            };
            if fired && let Some(c) = rule.count.as_mut() {
                *c = c.saturating_sub(1);
            }
        }
        inner.rng = rng;
        inner.rules.retain(|(_, r)| r.count != Some(0));
        decision
    }
}

/// xorshift64: enough randomness for error rates, reproducible with the seed.
fn xorshift(mut x: u64) -> u64 {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    x
}

/// `x` as a number in `0.0..1.0`.
fn unit(x: u64) -> f64 {
    (x >> 11) as f64 / (1u64 << 53) as f64
}

fn matches(pattern: Option<&str>, endpoint: &str) -> bool {
    match pattern {
        None => true,
        Some(p) => match p.strip_suffix('*') {
            Some(prefix) => endpoint.starts_with(prefix),
            None => p == endpoint,
        },
    }
}

/// Applies `OmitField` rules to a response body. A body that is an array (the Robot server
/// list, `[{"server": {...}}]`) has the rules applied to each element.
pub(crate) fn omit_fields(body: &mut Value, rules: &[(String, bool)]) {
    if let Value::Array(items) = body {
        for item in items {
            omit_fields(item, rules);
        }
        return;
    }
    for (path, null) in rules {
        let mut parts = path.split('.');
        let Some(kind) = parts.next() else { continue };
        let rest: Vec<&str> = parts.collect();
        if rest.is_empty() {
            continue;
        }
        if let Some(one) = body.get_mut(kind) {
            omit_in(one, &rest, *null);
        }
        if let Some(Value::Array(many)) = body.get_mut(format!("{kind}s")) {
            for item in many {
                omit_in(item, &rest, *null);
            }
        }
    }
}

/// Applies an `OmitItems` rule: drops items of every top-level array in a response body
/// (`servers`, `load_balancers`, ...), each with chance `share`. Pagination meta is left as
/// it was, as a list that lags behind its own count would show it. A body that is itself an
/// array (the Robot server list) loses its own items.
pub(crate) fn omit_items(body: &mut Value, share: f64, seed: u64) {
    let mut rng = seed | 1;
    if let Value::Array(items) = body {
        items.retain(|_| {
            rng = xorshift(rng);
            unit(rng) >= share
        });
        return;
    }
    let Value::Object(map) = body else { return };
    for value in map.values_mut() {
        if let Value::Array(items) = value {
            items.retain(|_| {
                rng = xorshift(rng);
                unit(rng) >= share
            });
        }
    }
}

pub(crate) fn omit_in(value: &mut Value, path: &[&str], null: bool) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut cur = value;
    for p in parents {
        match cur.get_mut(*p) {
            Some(next) => cur = next,
            None => return,
        }
    }
    if let Value::Object(map) = cur
        && map.contains_key(*last)
    {
        if null {
            map.insert((*last).to_owned(), Value::Null);
        } else {
            map.remove(*last);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn counted_rules_expire_and_match_endpoints() {
        let f = Faults::new(7);
        f.fail_next(Some("GET /servers"), 2, 503, "unavailable");
        assert!(f.decide("GET /locations").error.is_none());
        assert_eq!(f.decide("GET /servers").error.unwrap().status.as_u16(), 503);
        assert!(f.decide("GET /servers").error.is_some());
        assert!(f.decide("GET /servers").error.is_none());
        assert!(f.list().is_empty());
        f.add(FaultRule {
            endpoint: Some("POST /load_balancers/*".into()),
            count: None,
            probability: 1.0,
            every: None,
            kind: FaultKind::Error {
                status: None,
                code: "conflict".into(),
                message: None,
            },
        });
        assert_eq!(
            f.decide("POST /load_balancers/{id}/actions/add_target")
                .error
                .unwrap()
                .status
                .as_u16(),
            409
        );
    }

    #[test]
    fn every_nth() {
        let f = Faults::new(1);
        f.fail_every(Some("GET /servers"), 3, 500, "server_error");
        let hits: Vec<bool> = (0..9)
            .map(|_| f.decide("GET /servers").error.is_some())
            .collect();
        assert_eq!(
            hits,
            [false, false, true, false, false, true, false, false, true]
        );
    }

    #[test]
    fn error_rate_is_roughly_honoured() {
        let f = Faults::new(42);
        f.error_rate(None, 0.25, 500, "server_error");
        let hits = (0..4000)
            .filter(|_| f.decide("GET /servers").error.is_some())
            .count();
        assert!((800..1200).contains(&hits), "{hits}");
    }

    #[test]
    fn omit_items_drops_about_the_share_and_keeps_meta() {
        let f = Faults::new(3);
        f.add(
            serde_json::from_value(
                json!({"endpoint": "GET /servers", "kind": "omit_items", "share": 0.25}),
            )
            .unwrap(),
        );
        assert!(f.decide("GET /load_balancers").omit_items.is_none());
        let (share, seed) = f.decide("GET /servers").omit_items.unwrap();
        let servers: Vec<Value> = (0..400).map(|i| json!({"id": i})).collect();
        let mut body = json!({"servers": servers, "meta": {"pagination": {"total_entries": 400}}});
        omit_items(&mut body, share, seed);
        let kept = body["servers"].as_array().unwrap().len();
        assert!((260..340).contains(&kept), "{kept}");
        assert_eq!(body["meta"]["pagination"]["total_entries"], 400);
    }

    #[test]
    fn action_duration_applies_to_matching_requests_only() {
        let f = Faults::new(3);
        f.add(serde_json::from_value(json!({"endpoint": "POST /load_balancers*", "kind": "action_duration", "ms": 10000})).unwrap());
        assert_eq!(
            f.decide("POST /load_balancers/{id}/actions/add_target")
                .action_duration,
            Some(Duration::from_secs(10))
        );
        assert!(
            f.decide("POST /networks/{id}/actions/add_route")
                .action_duration
                .is_none()
        );
    }

    #[test]
    fn omits_fields_in_single_and_plural_roots() {
        let mut body = json!({"servers": [{"public_net": {"ipv4": {"ip": "1"}}, "location": {}}]});
        omit_fields(
            &mut body,
            &[
                ("server.public_net.ipv4".into(), true),
                ("server.location".into(), false),
            ],
        );
        assert_eq!(body, json!({"servers": [{"public_net": {"ipv4": null}}]}));
        let rule: FaultRule =
            serde_json::from_value(json!({"kind": "omit_field", "path": "server.location"}))
                .unwrap();
        assert_eq!(rule.probability, 1.0);
    }
}
