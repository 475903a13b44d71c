//! Actions: running → success, locking meanwhile, the `id` filter, scoped endpoints, failures.

mod common;

use std::time::Duration;

use cloud_sim::Sim;
use common::{assert_error, eventually, send};
use reqwest::Method;
use serde_json::{Value, json};

#[tokio::test]
async fn server_create_action_runs_then_succeeds_and_locks_meanwhile() {
    let sim = Sim::start().await;
    sim.set_action_duration(Duration::from_millis(400));
    let w = sim.client();
    let r = send(
        &w,
        Method::POST,
        "/servers",
        Some(json!({"name": "s", "server_type": "cx22", "image": "ubuntu-24.04"})),
    )
    .await;
    assert_eq!(r.status, 201);
    assert_eq!(r.body["server"]["status"], "initializing");
    assert!(r.body["root_password"].is_string());
    let action = r.body["action"].clone();
    assert_eq!(action["command"], "create_server");
    assert_eq!(action["status"], "running");
    assert_eq!(action["finished"], Value::Null);
    assert_eq!(action["error"], Value::Null);
    assert_eq!(
        action["resources"][0],
        json!({"id": r.body["server"]["id"], "type": "server"})
    );
    assert!(action["started"].as_str().unwrap().ends_with("+00:00"));
    assert_eq!(r.body["next_actions"][0]["command"], "start_server");
    let id = r.body["server"]["id"].as_u64().unwrap();
    let aid = action["id"].as_u64().unwrap();

    // Locked while creating.
    assert_error(
        &send(
            &w,
            Method::POST,
            &format!("/servers/{id}/actions/poweroff"),
            None,
        )
        .await,
        423,
        "locked",
    );
    assert_eq!(w.get_server(id).await.unwrap()["locked"], true);

    let done = eventually("create action to finish", || {
        let w = w.clone();
        async move {
            let a = send(&w, Method::GET, &format!("/actions/{aid}"), None)
                .await
                .body["action"]
                .clone();
            (a["status"] != "running").then_some(a)
        }
    })
    .await;
    assert_eq!(done["status"], "success");
    assert_eq!(done["progress"], 100);
    assert!(done["finished"].is_string());
    // The server stays locked until its next action (start_server) is done too, as in the API;
    // it may end a millisecond after the create.
    let next = r.body["next_actions"][0]["id"].as_u64().unwrap();
    eventually("start_server to finish", || {
        let w = w.clone();
        async move {
            let a = send(&w, Method::GET, &format!("/actions/{next}"), None)
                .await
                .body["action"]
                .clone();
            (a["status"] == "success").then_some(())
        }
    })
    .await;
    let s = w.get_server(id).await.unwrap();
    assert_eq!(
        (s["status"].as_str(), s["locked"].as_bool()),
        (Some("running"), Some(false))
    );

    // Power off: stopping while running, off after.
    let r = send(
        &w,
        Method::POST,
        &format!("/servers/{id}/actions/poweroff"),
        None,
    )
    .await;
    assert_eq!(r.body["action"]["command"], "poweroff");
    assert_eq!(w.get_server(id).await.unwrap()["status"], "stopping");
    w.wait_action(r.body["action"]["id"].as_u64().unwrap())
        .await
        .unwrap();
    assert_eq!(w.get_server(id).await.unwrap()["status"], "off");
    sim.set_action_duration(Duration::ZERO);
    w.poweron(id).await.unwrap();
    assert_eq!(w.get_server(id).await.unwrap()["status"], "running");
}

#[tokio::test]
async fn action_lists_need_ids_and_scope_by_resource() {
    let sim = Sim::start().await;
    let w = sim.client();
    assert_error(
        &send(&w, Method::GET, "/actions", None).await,
        400,
        "invalid_input",
    );
    assert_error(
        &send(&w, Method::GET, "/actions?id=abc", None).await,
        400,
        "invalid_input",
    );
    let lb = w.create_load_balancer("lb", "lb11", "fsn1").await.unwrap();
    let a1 = w
        .load_balancer_action(lb, "change_algorithm", json!({"type": "least_connections"}))
        .await
        .unwrap();
    let a2 = w
        .load_balancer_action(lb, "change_algorithm", json!({"type": "round_robin"}))
        .await
        .unwrap();
    let r = send(
        &w,
        Method::GET,
        &format!(
            "/actions?id={}&id={}&sort=status&sort=id:desc",
            a1.id, a2.id
        ),
        None,
    )
    .await;
    let got: Vec<u64> = r.body["actions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["id"].as_u64().unwrap())
        .collect();
    assert_eq!(got, [a2.id, a1.id]);
    assert_eq!(r.body["meta"]["pagination"]["total_entries"], 2);

    let r = send(
        &w,
        Method::GET,
        &format!("/load_balancers/actions/{}", a1.id),
        None,
    )
    .await;
    assert_eq!(r.body["action"]["command"], "change_algorithm");
    let s = w.create_server("s", "cx22", "fsn1").await.unwrap();
    let r = send(&w, Method::GET, &format!("/servers/{s}/actions"), None).await;
    let commands: Vec<&str> = r.body["actions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["command"].as_str().unwrap())
        .collect();
    assert_eq!(commands, ["create_server", "start_server"]);
    // An LB action is not a server action.
    assert_error(
        &send(
            &w,
            Method::GET,
            &format!("/servers/actions/{}", a1.id),
            None,
        )
        .await,
        404,
        "not_found",
    );
    let r = send(
        &w,
        Method::GET,
        &format!("/load_balancers/{lb}/actions?status=success"),
        None,
    )
    .await;
    assert_eq!(r.body["actions"].as_array().unwrap().len(), 3); // create + two changes
}

#[tokio::test]
async fn injected_action_errors_and_managed_certificates() {
    let sim = Sim::start().await;
    let w = sim.client();
    sim.faults()
        .fail_actions(Some("POST /certificates"), 1, "dns_zone_not_found");
    let err = w
        .create_managed_certificate("bad", &["example.com"])
        .await
        .unwrap_err();
    assert_eq!(err.code(), Some("dns_zone_not_found"));
    let certs = w.list_all("certificates?name=bad").await.unwrap();
    let failed = &certs[0];
    assert_eq!(failed["status"]["issuance"], "failed");
    assert_eq!(failed["status"]["error"]["code"], "dns_zone_not_found");
    assert_eq!(failed["certificate"], Value::Null);
    // Retry succeeds now that the fault is used up.
    let id = failed["id"].as_u64().unwrap();
    let r = send(
        &w,
        Method::POST,
        &format!("/certificates/{id}/actions/retry"),
        None,
    )
    .await;
    w.wait_action(r.body["action"]["id"].as_u64().unwrap())
        .await
        .unwrap();
    assert_eq!(
        w.get_certificate(id).await.unwrap()["status"]["issuance"],
        "completed"
    );

    let ok = w
        .create_managed_certificate("good", &["example.com", "*.example.com"])
        .await
        .unwrap();
    let c = w.get_certificate(ok).await.unwrap();
    assert_eq!(
        (c["type"].as_str(), c["status"]["issuance"].as_str()),
        (Some("managed"), Some("completed"))
    );
    assert!(
        c["certificate"]
            .as_str()
            .unwrap()
            .contains("BEGIN CERTIFICATE")
    );
    assert!(c["fingerprint"].as_str().unwrap().split(':').count() == 32);
}
