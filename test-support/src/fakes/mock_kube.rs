//! A `kube::Client` without an apiserver, for the fast suites, in the style of kube-rs's
//! controller-rs tests: the code under test talks to a mocked service, and the test plays the
//! apiserver, answering each request it expects and asserting on its body.
//!
//! [`mock_client`] returns the client and its [`ApiServerVerifier`]. Sequential code is driven
//! with [`ApiServerVerifier::run`] and a script of expected requests; a request the script did
//! not take fails the test. Code that writes concurrently is served by
//! [`ApiServerVerifier::answer_all`], which answers every request and records it.
//!
//! Built on `tower::service_fn` and tokio channels (what `tower_test::mock::pair` does), so the
//! workspace gains no crate.

use std::future::Future;
use std::pin::pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::{Request, Response};
use kube::client::Body;
use serde::Serialize;
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};

type BoxError = Box<dyn std::error::Error + Send + Sync>;
type Pending = (Request<Body>, oneshot::Sender<Response<Body>>);

/// How long the script waits for the next request before it fails the test. A guard against a
/// test that hangs, not a synchronisation: every request arrives as soon as the code sends it.
const PATIENCE: Duration = Duration::from_secs(5);

/// A client whose every request goes to the returned verifier.
pub fn mock_client() -> (kube::Client, ApiServerVerifier) {
    let (tx, rx) = mpsc::unbounded_channel::<Pending>();
    let service = tower::service_fn(move |req: Request<Body>| {
        let tx = tx.clone();
        async move {
            let (reply, answer) = oneshot::channel();
            tx.send((req, reply))
                .map_err(|_| BoxError::from("the mock apiserver is gone"))?;
            answer
                .await
                .map_err(|_| BoxError::from("the mock apiserver left the request unanswered"))
        }
    });
    (
        kube::Client::new(service, "default"),
        ApiServerVerifier { rx },
    )
}

/// What the code under test sent.
#[derive(Debug, Clone, PartialEq)]
pub struct Sent {
    /// `GET`, `PATCH`, ...
    pub method: String,
    /// The path without the query, e.g. `/api/v1/nodes/node-a/status`.
    pub path: String,
    pub query: String,
    /// `Content-Type`, e.g. `application/merge-patch+json`.
    pub content_type: String,
    /// The JSON body; `Null` when there was none.
    pub body: Value,
}

impl Sent {
    /// An Event written: a POST, or the PATCH kube's recorder sends for a repeat (a series).
    pub fn is_event(&self) -> bool {
        matches!(self.method.as_str(), "POST" | "PATCH")
            && self.path.split('/').any(|s| s == "events")
    }

    /// `METHOD path`, for messages.
    pub fn line(&self) -> String {
        format!("{} {}", self.method, self.path)
    }
}

/// One request waiting for its answer. Dereferences to what was [`Sent`].
#[derive(Debug)]
pub struct ApiRequest {
    sent: Sent,
    reply: oneshot::Sender<Response<Body>>,
}

impl std::ops::Deref for ApiRequest {
    type Target = Sent;
    fn deref(&self) -> &Sent {
        &self.sent
    }
}

impl ApiRequest {
    async fn read(req: Request<Body>, reply: oneshot::Sender<Response<Body>>) -> Self {
        let (parts, body) = req.into_parts();
        let bytes = body.collect_bytes().await.expect("read the request body");
        let body = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes).expect("the request body is JSON")
        };
        let header = |name| {
            parts
                .headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_string()
        };
        let sent = Sent {
            method: parts.method.to_string(),
            path: parts.uri.path().to_string(),
            query: parts.uri.query().unwrap_or_default().to_string(),
            content_type: header(http::header::CONTENT_TYPE),
            body,
        };
        Self { sent, reply }
    }

    /// What was sent (for a log of the requests).
    pub fn sent(&self) -> &Sent {
        &self.sent
    }

    /// Answers with `status` and `body`.
    pub fn respond(self, status: u16, body: &Value) {
        let response = Response::builder()
            .status(status)
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(Body::from(serde_json::to_vec(body).unwrap()))
            .unwrap();
        // The code under test may have given up on the request; nothing to answer then.
        let _ = self.reply.send(response);
    }

    /// Answers 200 with `object`.
    pub fn ok(self, object: &impl Serialize) {
        self.respond(200, &serde_json::to_value(object).unwrap());
    }

    /// Answers 200 with the request's own body (what a create returns).
    pub fn echo(self) {
        let body = self.sent.body.clone();
        self.respond(200, &body);
    }

    /// Answers with an apiserver `Status` error, e.g. 404 `NotFound`, 409 `Conflict`.
    pub fn fail(self, code: u16, reason: &str) {
        let status = json!({
            "apiVersion": "v1",
            "kind": "Status",
            "status": "Failure",
            "message": format!("{reason} (mock apiserver)"),
            "reason": reason,
            "code": code,
        });
        self.respond(code, &status);
    }
}

/// The test's side of [`mock_client`]: it receives every request the client sends.
#[derive(Debug)]
pub struct ApiServerVerifier {
    rx: mpsc::UnboundedReceiver<Pending>,
}

impl ApiServerVerifier {
    /// The next request; fails the test if none comes.
    pub async fn next(&mut self) -> ApiRequest {
        match tokio::time::timeout(PATIENCE, self.rx.recv()).await {
            Ok(Some((req, reply))) => ApiRequest::read(req, reply).await,
            Ok(None) => panic!("expected another request, but every client is gone"),
            Err(_) => panic!("expected another request, but none came within {PATIENCE:?}"),
        }
    }

    /// The next request, asserted to be `method path` (path without the query).
    pub async fn expect(&mut self, method: &str, path: &str) -> ApiRequest {
        let req = self.next().await;
        assert_eq!(
            req.line(),
            format!("{method} {path}"),
            "unexpected request; its body: {}",
            req.body
        );
        req
    }

    /// The next request, asserted to be an Event of `type_` (`Normal`/`Warning`) with `reason`;
    /// answered as created. Returns the Event (its `note`, `regarding`, ...).
    pub async fn expect_event(&mut self, type_: &str, reason: &str) -> Value {
        let req = self.next().await;
        assert!(
            req.is_event(),
            "expected a {reason} event, got {}: {}",
            req.line(),
            req.body
        );
        assert_eq!(
            (req.body["type"].as_str(), req.body["reason"].as_str()),
            (Some(type_), Some(reason)),
            "{}",
            req.body
        );
        let event = req.body.clone();
        req.echo();
        event
    }

    /// Runs `code` (e.g. one reconcile) while `script` plays the apiserver, and returns what `code`
    /// returned. After the script, `code` must finish without another request: one it sends
    /// anyway fails the test, naming it.
    pub async fn run<F: Future>(
        &mut self,
        code: F,
        script: impl AsyncFnOnce(&mut ApiServerVerifier),
    ) -> F::Output {
        let mut code = pin!(code);
        let mut output = None;
        {
            let mut script = pin!(script(self));
            loop {
                tokio::select! {
                    () = &mut script => break,
                    out = &mut code, if output.is_none() => output = Some(out),
                }
            }
        }
        let output = match output {
            Some(out) => out,
            None => tokio::select! {
                out = &mut code => out,
                Some((req, reply)) = self.rx.recv() => {
                    let req = ApiRequest::read(req, reply).await;
                    panic!("unexpected request after the script: {}: {}", req.line(), req.body)
                }
            },
        };
        self.assert_idle();
        output
    }

    /// Asserts that no request is waiting.
    pub fn assert_idle(&mut self) {
        if let Ok((req, _)) = self.rx.try_recv() {
            panic!("unexpected request: {} {}", req.method(), req.uri());
        }
    }

    /// Answers every request with `answer` from now on, in a task of its own, and records them.
    /// For code that sends requests concurrently, where the order is not fixed.
    pub fn answer_all(
        mut self,
        answer: impl Fn(&Sent) -> (u16, Value) + Send + 'static,
    ) -> RequestLog {
        let log = RequestLog::default();
        let record = log.clone();
        tokio::spawn(async move {
            while let Some((req, reply)) = self.rx.recv().await {
                let req = ApiRequest::read(req, reply).await;
                let (status, body) = answer(&req);
                record.0.lock().unwrap().push(req.sent.clone());
                req.respond(status, &body);
            }
        });
        log
    }
}

/// The requests [`ApiServerVerifier::answer_all`] answered, in the order they arrived.
#[derive(Debug, Clone, Default)]
pub struct RequestLog(Arc<Mutex<Vec<Sent>>>);

impl RequestLog {
    pub fn all(&self) -> Vec<Sent> {
        self.0.lock().unwrap().clone()
    }

    /// The requests so far, removed from the log (to look at one step's requests only).
    pub fn take(&self) -> Vec<Sent> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }
}

/// Applies a JSON merge patch (RFC 7386) to `target`: what the apiserver does with one, so a
/// script can answer a PATCH with the object it would return.
pub fn merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(patch) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = json!({});
    }
    let target = target.as_object_mut().unwrap();
    for (key, value) in patch {
        if value.is_null() {
            target.remove(key);
        } else {
            merge_patch(target.entry(key.clone()).or_insert(Value::Null), value);
        }
    }
}

/// `object` with the merge patch `patch` applied, re-read as its type.
pub fn patched<K: Serialize + serde::de::DeserializeOwned>(object: &K, patch: &Value) -> K {
    let mut value = serde_json::to_value(object).unwrap();
    merge_patch(&mut value, patch);
    serde_json::from_value(value).expect("the patched object is still valid")
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Node;
    use kube::Api;

    #[test]
    fn merge_patch_replaces_lists_and_removes_nulls() {
        let mut v = json!({"a": {"b": 1, "c": [1, 2]}, "d": 1});
        merge_patch(&mut v, &json!({"a": {"c": [3], "e": "x"}, "d": null}));
        assert_eq!(v, json!({"a": {"b": 1, "c": [3], "e": "x"}}));
    }

    #[tokio::test]
    async fn the_script_answers_and_an_unexpected_request_fails_the_test() {
        let (client, mut api) = mock_client();
        let nodes: Api<Node> = Api::all(client);
        let mut n = Node::default();
        n.metadata.name = Some("a".into());
        let got = api
            .run(nodes.get("a"), async |api| {
                api.expect("GET", "/api/v1/nodes/a").await.ok(&n);
            })
            .await
            .unwrap();
        assert_eq!(got.metadata.name.as_deref(), Some("a"));

        let extra = tokio::spawn(async move {
            api.run(async { nodes.get("a").await.map(drop) }, async |_| {})
                .await
        });
        let panic = extra.await.unwrap_err().into_panic();
        let message = panic.downcast_ref::<String>().unwrap();
        assert!(message.contains("GET /api/v1/nodes/a"), "{message}");
    }
}
