//! Core API behaviour over real HTTP: auth, errors, servers, catalog, actions.

use cloud_sim::{Sim, SimConfig};
use reqwest::Method;
use serde_json::{Value, json};

#[tokio::test]
async fn servers_and_locations_work_end_to_end() {
    let sim = Sim::start().await;
    assert!(sim.endpoint().starts_with("http://127.0.0.1:") && sim.endpoint().ends_with("/v1"));
    assert_eq!(sim.token().len(), 64);
    let w = sim.client();

    let locations = w.get("/locations").await.unwrap();
    let names: Vec<&str> = locations["locations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["fsn1", "nbg1", "hel1", "ash", "hil", "sin"]);
    assert_eq!(locations["locations"][3]["network_zone"], "us-east");

    let id = w.create_server("node-1", "cx22", "fsn1").await.unwrap();
    let s = w.get_server(id).await.unwrap();
    assert_eq!(s["name"], "node-1");
    assert_eq!(s["status"], "running");
    assert_eq!(s["location"]["name"], "fsn1");
    assert!(
        s.get("datacenter").is_none(),
        "current API has no datacenter"
    );
    assert_eq!(s["server_type"]["name"], "cx22");
    let v4 = s["public_net"]["ipv4"]["ip"].as_str().unwrap();
    assert!(v4.starts_with("100.64."), "{v4}");
    assert!(
        s["public_net"]["ipv6"]["ip"]
            .as_str()
            .unwrap()
            .ends_with("::/64")
    );

    let by_name = w.get("/servers?name=node-1").await.unwrap();
    assert_eq!(by_name["servers"].as_array().unwrap().len(), 1);
    assert_eq!(by_name["servers"][0]["id"], json!(id));
    let none = w.get("/servers?name=node-2").await.unwrap();
    assert_eq!(none["servers"], json!([]));

    assert_eq!(sim.requests("POST", "/servers"), 1);
    assert_eq!(sim.requests("GET", "/servers/{id}"), 1);
    assert_eq!(sim.requests("GET", "/locations"), 1);
}

/// A rotated project token: from `set_token` on, the new token alone is accepted.
#[tokio::test]
async fn a_rotated_token_refuses_the_old_one() {
    let (old, new) = ("o".repeat(64), "n".repeat(64));
    let sim = Sim::start_with(SimConfig {
        token: Some(old.clone()),
        ..SimConfig::default()
    })
    .await;
    let w = sim.client();
    let status = |token: String| {
        let w = w.with_token(&token);
        async move { w.raw(Method::GET, "/v1/servers", None).await.unwrap() }
    };
    assert_eq!(status(old.clone()).await.status, 200);
    assert_eq!(status(new.clone()).await.status, 401);
    sim.set_token(Some(&new));
    let refused = status(old).await;
    assert_eq!(refused.status, 401);
    assert_eq!(refused.error_code(), Some("unauthorized"));
    assert_eq!(status(new.clone()).await.status, 200);
    assert_eq!(sim.token(), new, "the sim hands out the token it accepts");
}

#[tokio::test]
async fn auth_rejects_bad_tokens_and_readonly_writes() {
    let ro = "r".repeat(64);
    let sim = Sim::start_with(SimConfig {
        readonly_token: Some(ro.clone()),
        ..SimConfig::default()
    })
    .await;
    let w = sim.client();
    for bad in ["short", &"x".repeat(65), ""] {
        let r = w
            .with_token(bad)
            .raw(Method::GET, "/v1/servers", None)
            .await
            .unwrap();
        assert_eq!(r.status, 401, "token {bad:?}");
        assert_eq!(r.error_code(), Some("unauthorized"));
    }
    // Any 64-character token is accepted by default.
    let r = w
        .with_token(&"a".repeat(64))
        .raw(Method::GET, "/v1/servers", None)
        .await
        .unwrap();
    assert_eq!(r.status, 200);
    let reader = w.with_token(&ro);
    assert_eq!(
        reader
            .raw(Method::GET, "/v1/servers", None)
            .await
            .unwrap()
            .status,
        200
    );
    let r = reader
        .raw(
            Method::POST,
            "/v1/networks",
            Some(json!({"name": "n", "ip_range": "10.0.0.0/16"})),
        )
        .await
        .unwrap();
    assert_eq!((r.status, r.error_code()), (403, Some("token_readonly")));

    let strict = Sim::start_with(SimConfig {
        token: Some("t".repeat(64)),
        ..SimConfig::default()
    })
    .await;
    let r = strict
        .client()
        .with_token(&"a".repeat(64))
        .raw(Method::GET, "/v1/servers", None)
        .await
        .unwrap();
    assert_eq!(r.status, 401);
    assert_eq!(
        strict
            .client()
            .raw(Method::GET, "/v1/servers", None)
            .await
            .unwrap()
            .status,
        200
    );
}

#[tokio::test]
async fn malformed_input_and_unknown_paths_get_json_errors() {
    let sim = Sim::start().await;
    let w = sim.client();
    let client = reqwest::Client::new();
    let r = client
        .post(format!("{}/servers", sim.endpoint()))
        .bearer_auth(sim.token())
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"]["code"], "json_error");

    let r = w.raw(Method::GET, "/v1/no_such_thing", None).await.unwrap();
    assert_eq!((r.status, r.error_code()), (404, Some("not_found")));
    let r = w.raw(Method::GET, "/v1/servers/999", None).await.unwrap();
    assert_eq!((r.status, r.error_code()), (404, Some("not_found")));
    let r = w.raw(Method::GET, "/v1/servers/abc", None).await.unwrap();
    assert_eq!((r.status, r.error_code()), (404, Some("not_found")));

    let r = w
        .raw(
            Method::POST,
            "/v1/servers",
            Some(json!({"name": "a", "server_type": "cx22"})),
        )
        .await
        .unwrap();
    assert_eq!((r.status, r.error_code()), (400, Some("invalid_input")));
    assert_eq!(r.body["error"]["details"]["fields"][0]["name"], "image");

    let r = w
        .raw(
            Method::POST,
            "/v1/servers",
            Some(json!({"name": "a", "server_type": "nope", "image": "ubuntu-24.04"})),
        )
        .await
        .unwrap();
    assert_eq!(
        r.body["error"]["details"]["fields"][0]["name"],
        "server_type"
    );
    let r = w
        .raw(
            Method::POST,
            "/v1/servers",
            Some(json!({"name": "a", "server_type": "cx22", "image": "windows-95"})),
        )
        .await
        .unwrap();
    assert_eq!(r.body["error"]["details"]["fields"][0]["name"], "image");
    // cx22 is sold in the EU only.
    let r = w
        .raw(Method::POST, "/v1/servers", Some(json!({"name": "a", "server_type": "cx22", "image": "ubuntu-24.04", "location": "ash"})))
        .await
        .unwrap();
    assert_eq!((r.status, r.error_code()), (400, Some("invalid_input")));
}
