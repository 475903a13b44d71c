//! Fault injection (every kind, from Rust and over HTTP) and the request counters.

mod common;

use std::time::{Duration, Instant};

use cloud_sim::{FaultKind, FaultRule, Sim};
use common::{assert_error, send};
use reqwest::Method;
use serde_json::{Value, json};

#[tokio::test]
async fn forced_errors_for_the_next_n_calls_of_one_endpoint() {
    let sim = Sim::start().await;
    let w = sim.client();
    let id = w.create_server("s", "cx22", "fsn1").await.unwrap();
    sim.faults()
        .fail_next(Some("GET /servers/{id}"), 2, 503, "unavailable");
    assert_error(
        &send(&w, Method::GET, &format!("/servers/{id}"), None).await,
        503,
        "unavailable",
    );
    // Other endpoints are untouched.
    assert_eq!(send(&w, Method::GET, "/servers", None).await.status, 200);
    assert_error(
        &send(&w, Method::GET, &format!("/servers/{id}"), None).await,
        503,
        "unavailable",
    );
    assert_eq!(
        send(&w, Method::GET, &format!("/servers/{id}"), None)
            .await
            .status,
        200
    );
    assert!(sim.faults().list().is_empty());
    // An injected failure of a write leaves no trace.
    sim.faults()
        .fail_next(Some("POST /load_balancers"), 1, 409, "conflict");
    let body = json!({"name": "lb", "load_balancer_type": "lb11", "location": "fsn1"});
    assert_error(
        &send(&w, Method::POST, "/load_balancers", Some(body)).await,
        409,
        "conflict",
    );
    assert_eq!(w.list_load_balancers().await.unwrap().len(), 0);
}

#[tokio::test]
async fn the_harness_passes_every_rule_and_is_still_counted() {
    let sim = Sim::start().await;
    let w = sim.client();
    sim.faults()
        .error_rate(None, 1.0, 429, "rate_limit_exceeded");
    assert_error(
        &send(&w, Method::GET, "/servers", None).await,
        429,
        "rate_limit_exceeded",
    );
    // Creating a server takes a POST and polls of its action: none may fail.
    let harness = w.unfaulted();
    let id = harness
        .create_server("joins", "cx22", "fsn1")
        .await
        .unwrap();
    assert_eq!(harness.get_server(id).await.unwrap()["id"], id);
    assert_error(
        &send(&w, Method::GET, &format!("/servers/{id}"), None).await,
        429,
        "rate_limit_exceeded",
    );
    // The rate limit is not a fault rule: one call a (simulated) hour, and the second is refused.
    sim.faults().clear();
    sim.set_rate_limit(1, 1);
    assert_eq!(
        send(&harness, Method::GET, "/servers", None).await.status,
        200
    );
    assert_error(
        &send(&harness, Method::GET, "/servers", None).await,
        429,
        "rate_limit_exceeded",
    );
}

#[tokio::test]
async fn error_rate_and_wildcards() {
    let sim = Sim::start().await;
    let w = sim.client();
    let rule = sim
        .faults()
        .error_rate(Some("GET /locations*"), 0.5, 500, "server_error");
    let mut failed = 0;
    for _ in 0..200 {
        if send(&w, Method::GET, "/locations", None).await.status == 500 {
            failed += 1;
        }
    }
    assert!(
        (60..140).contains(&failed),
        "about half should fail, got {failed}"
    );
    assert!(sim.faults().remove(rule));
    // Every third call fails, deterministically.
    let rule = sim
        .faults()
        .fail_every(Some("GET /locations"), 3, 502, "bad_gateway");
    let mut statuses = Vec::new();
    for _ in 0..6 {
        statuses.push(send(&w, Method::GET, "/locations", None).await.status);
    }
    assert_eq!(statuses, [200, 200, 502, 200, 200, 502]);
    assert!(sim.faults().remove(rule));
    assert_eq!(send(&w, Method::GET, "/locations", None).await.status, 200);
}

#[tokio::test]
async fn latency_and_hangs() {
    let sim = Sim::start().await;
    let w = sim.client();
    sim.faults()
        .latency(Some("GET /locations"), Duration::from_millis(300));
    let t = Instant::now();
    assert_eq!(send(&w, Method::GET, "/locations", None).await.status, 200);
    assert!(t.elapsed() >= Duration::from_millis(300));
    sim.faults().clear();

    // A hang outlives a client with a short timeout; the hung write has no effect.
    sim.faults()
        .hang(Some("POST /networks"), 1, Duration::from_millis(1500));
    let client = reqwest::Client::builder()
        .timeout(Duration::from_millis(200))
        .build()
        .unwrap();
    let err = client
        .post(format!("{}/networks", sim.endpoint()))
        .bearer_auth(sim.token())
        .json(&json!({"name": "n", "ip_range": "10.0.0.0/16"}))
        .send()
        .await
        .unwrap_err();
    assert!(err.is_timeout(), "{err}");
    // A patient client sees 504 timeout instead.
    sim.faults()
        .hang(Some("GET /networks"), 1, Duration::from_millis(100));
    assert_error(
        &send(&w, Method::GET, "/networks", None).await,
        504,
        "timeout",
    );
    assert_eq!(w.list_all("networks").await.unwrap().len(), 0);
}

#[tokio::test]
async fn omitted_fields_for_tolerant_decoding() {
    let sim = Sim::start().await;
    let w = sim.client();
    let id = w.create_server("s", "cx22", "fsn1").await.unwrap();
    sim.faults()
        .omit_field(None, "server.public_net.ipv4", true);
    sim.faults()
        .omit_field(Some("GET /servers"), "server.location", false);
    let one = w.get_server(id).await.unwrap();
    assert_eq!(one["public_net"]["ipv4"], Value::Null);
    assert!(
        one.get("location").is_some(),
        "rule scoped to the list endpoint"
    );
    let list = send(&w, Method::GET, "/servers", None).await.body;
    assert_eq!(list["servers"][0]["public_net"]["ipv4"], Value::Null);
    assert!(list["servers"][0].get("location").is_none());
    assert!(list["servers"][0]["public_net"]["ipv6"].is_object());
}

#[tokio::test]
async fn faults_over_http_control_endpoints() {
    let sim = Sim::start().await;
    let w = sim.client();
    let rule =
        json!({"endpoint": "GET /locations", "count": 1, "kind": "error", "code": "maintenance"});
    let r = w
        .raw(Method::POST, "/_sim/faults", Some(rule))
        .await
        .unwrap();
    assert_eq!(r.status, 201);
    let listed = w.raw(Method::GET, "/_sim/faults", None).await.unwrap().body;
    assert_eq!(listed["faults"][0]["code"], "maintenance");
    // Status defaults to the code's usual one.
    assert_error(
        &send(&w, Method::GET, "/locations", None).await,
        503,
        "maintenance",
    );
    let r = w
        .raw(
            Method::POST,
            "/_sim/faults",
            Some(json!({"kind": "latency", "ms": 1})),
        )
        .await
        .unwrap();
    let id = r.body["id"].as_u64().unwrap();
    assert_eq!(
        w.raw(Method::DELETE, &format!("/_sim/faults/{id}"), None)
            .await
            .unwrap()
            .status,
        204
    );
    assert!(sim.faults().list().is_empty());
    let r = w
        .raw(
            Method::POST,
            "/_sim/faults",
            Some(json!({"kind": "explode"})),
        )
        .await
        .unwrap();
    assert_eq!(r.status, 400);
    // Typed rules and HTTP rules are the same thing.
    sim.faults().add(FaultRule {
        endpoint: None,
        count: Some(1),
        probability: 1.0,
        every: None,
        kind: FaultKind::Hang { ms: 10 },
    });
    let listed = w.raw(Method::GET, "/_sim/faults", None).await.unwrap().body;
    assert_eq!(listed["faults"][0]["kind"], "hang");
    assert_eq!(
        w.raw(Method::DELETE, "/_sim/faults", None)
            .await
            .unwrap()
            .status,
        204
    );
    // Action duration at runtime.
    let r = w
        .raw(
            Method::PUT,
            "/_sim/config",
            Some(json!({"action_duration_ms": 0})),
        )
        .await
        .unwrap();
    assert_eq!(r.body["action_duration_ms"], 0);
    let r = send(
        &w,
        Method::POST,
        "/servers",
        Some(json!({"name": "s", "server_type": "cx22", "image": "ubuntu-24.04"})),
    )
    .await;
    assert_eq!(r.body["action"]["status"], "success");
}

#[tokio::test]
async fn counters_and_request_log() {
    let sim = Sim::start().await;
    let w = sim.client();
    let lb = w.create_load_balancer("lb", "lb11", "fsn1").await.unwrap();
    let s = w.create_server("s", "cx22", "fsn1").await.unwrap();
    sim.reset_counters();
    assert_eq!(sim.total_requests(), 0);
    w.load_balancer_action(
        lb,
        "add_target",
        json!({"type": "server", "server": {"id": s}}),
    )
    .await
    .unwrap();
    w.get_load_balancer(lb).await.unwrap();
    send(&w, Method::GET, "/nope", None).await;
    assert_eq!(
        sim.requests("POST", "/load_balancers/{id}/actions/add_target"),
        1
    );
    assert_eq!(
        sim.requests("post", "/load_balancers/{id}/actions/add_target"),
        1
    );
    assert_eq!(sim.requests("GET", "/load_balancers/{id}"), 1);
    assert_eq!(sim.requests("GET", "/nope"), 1);
    let polls = sim.requests("GET", "/actions/{id}");
    assert!(polls >= 1);
    assert_eq!(sim.total_requests(), 3 + polls);
    // Control and metadata traffic is not counted.
    w.raw(Method::GET, "/_sim/counters", None).await.unwrap();
    assert_eq!(sim.total_requests(), 3 + polls);

    let log = sim.request_log();
    assert_eq!(log.len() as u64, sim.total_requests());
    assert_eq!(log[0].endpoint, "/load_balancers/{id}/actions/add_target");
    assert_eq!(
        log[0].uri,
        format!("/v1/load_balancers/{lb}/actions/add_target")
    );
    assert_eq!(log[0].status, 200);
    assert!(log.windows(2).all(|p| p[0].seq < p[1].seq));
    let http = w
        .raw(Method::GET, "/_sim/counters", None)
        .await
        .unwrap()
        .body;
    assert_eq!(http["endpoints"]["GET /load_balancers/{id}"], 1);
    assert_eq!(http["total"], json!(sim.total_requests()));
    let reqs = w
        .raw(Method::GET, "/_sim/requests", None)
        .await
        .unwrap()
        .body;
    assert_eq!(
        reqs["requests"].as_array().unwrap().len() as u64,
        sim.total_requests()
    );
    assert_eq!(
        w.raw(Method::DELETE, "/_sim/counters", None)
            .await
            .unwrap()
            .status,
        204
    );
    assert_eq!(sim.total_requests(), 0);
    assert!(sim.request_log().is_empty());
}
