//! The Robot webservice at `/robot`: shapes as syself/hrobot-go decodes them, basic auth, Robot
//! errors, the per-resource rate limit, control endpoints, faults and persistence.

mod common;

use std::collections::BTreeSet;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::time::Duration;

use cloud_sim::client::{RawResponse, SimClient};
use cloud_sim::{Sim, SimConfig};
use reqwest::Method;
use serde_json::{Value, json};

/// `GET /robot{path}` with the simulator's own credentials.
async fn robot_get(sim: &Sim, w: &SimClient, path: &str) -> RawResponse {
    w.robot_raw(
        Method::GET,
        path,
        Some((&sim.robot_user(), &sim.robot_password())),
    )
    .await
    .expect("transport")
}

/// A Robot error answer: `{"error": {"status", "code", "message"}}`, the status repeated.
#[track_caller]
fn assert_robot_error(r: &RawResponse, status: u16, code: &str) {
    assert_eq!(r.status, status, "body: {}", r.body);
    let e = &r.body["error"];
    assert_eq!(e["status"], status, "body: {}", r.body);
    assert_eq!(e["code"], code, "body: {}", r.body);
    assert!(
        e["message"].as_str().is_some_and(|m| !m.is_empty()),
        "error without message: {}",
        r.body
    );
}

fn keys(v: &Value) -> BTreeSet<&str> {
    v.as_object()
        .unwrap_or_else(|| panic!("not an object: {v}"))
        .keys()
        .map(String::as_str)
        .collect()
}

// The key sets of syself/hrobot-go's fixtures (test/response/server_list.json, server_get.json,
// reset_get.json), plus `linked_storagebox`, which today's API sends and hrobot-go's model has.
const LIST_KEYS: &[&str] = &[
    "server_ip",
    "server_ipv6_net",
    "server_number",
    "server_name",
    "product",
    "dc",
    "traffic",
    "status",
    "cancelled",
    "paid_until",
    "ip",
    "subnet",
    "linked_storagebox",
];
const DETAIL_ONLY_KEYS: &[&str] = &[
    "reset", "rescue", "vnc", "windows", "plesk", "cpanel", "wol", "hot_swap",
];
const RESET_KEYS: &[&str] = &[
    "server_ip",
    "server_ipv6_net",
    "server_number",
    "type",
    "operating_status",
];

#[track_caller]
fn assert_summary_types(s: &Value) {
    assert!(s["server_number"].is_u64(), "{s}");
    for k in [
        "server_ip",
        "server_ipv6_net",
        "server_name",
        "product",
        "dc",
        "traffic",
        "status",
        "paid_until",
    ] {
        assert!(s[k].is_string(), "{k} in {s}");
    }
    assert!(s["cancelled"].is_boolean(), "{s}");
    assert!(
        s["ip"].as_array().unwrap().iter().all(Value::is_string),
        "{s}"
    );
    for subnet in s["subnet"].as_array().unwrap() {
        assert_eq!(keys(subnet), BTreeSet::from(["ip", "mask"]));
        assert!(
            subnet["ip"].is_string() && subnet["mask"].is_string(),
            "{s}"
        );
    }
    // The main /64 as HCCM reads it: the network address with no prefix length, so that
    // appending "1" gives the host address.
    let net = s["server_ipv6_net"].as_str().unwrap();
    assert!(net.ends_with("::"), "{net}");
    let host: Ipv6Addr = format!("{net}1").parse().unwrap();
    assert_eq!(host.segments()[7], 1);
    assert!(s["paid_until"].as_str().unwrap().len() == 10, "{s}");
}

#[tokio::test]
async fn list_get_and_reset_have_hrobot_shapes() {
    let sim = Sim::start().await;
    let w = sim.client();
    assert_eq!(sim.robot_endpoint(), format!("http://{}/robot", sim.addr()));
    // An empty account lists an empty array.
    let r = robot_get(&sim, &w, "/server").await;
    assert_eq!((r.status, &r.body), (200, &json!([])));

    let a = w
        .create_robot_server("bm-1", "AX41-NVMe", "FSN1-DC14")
        .await
        .unwrap();
    let b = w
        .create_robot_server("bm-2", "EX44", "HEL1-DC2")
        .await
        .unwrap();
    assert!(a > 1_000_000 && b > a, "{a} {b}");
    let cloud = w.create_server("cloud-1", "cx22", "fsn1").await.unwrap();
    sim.reset_counters();
    let cloud_budget = sim.rate_limit().remaining;

    // GET /server: a bare array of {"server": {...}}.
    let r = robot_get(&sim, &w, "/server").await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(
        r.header("content-type")
            .is_some_and(|c| c.starts_with("application/json"))
    );
    let list = r.body.as_array().unwrap();
    assert_eq!(list.len(), 2);
    for item in list {
        assert_eq!(keys(item), BTreeSet::from(["server"]));
        assert_eq!(keys(&item["server"]), LIST_KEYS.iter().copied().collect());
        assert_summary_types(&item["server"]);
    }
    let first = &list[0]["server"];
    assert_eq!(first["server_number"], a);
    assert_eq!(first["server_name"], "bm-1");
    assert_eq!(first["product"], "AX41-NVMe");
    assert_eq!(first["dc"], "FSN1-DC14");
    assert_eq!(first["status"], "ready");
    assert_eq!(first["cancelled"], false);
    assert_eq!(first["linked_storagebox"], Value::Null);
    assert_eq!(first["ip"], json!([first["server_ip"]]));
    assert_eq!(
        first["subnet"],
        json!([{"ip": first["server_ipv6_net"], "mask": "64"}])
    );
    assert_eq!(list[1]["server"]["server_name"], "bm-2");
    assert_eq!(list[1]["server"]["dc"], "HEL1-DC2");

    // Addresses are unique and never a Cloud server's.
    let v4: BTreeSet<&str> = list
        .iter()
        .map(|s| s["server"]["server_ip"].as_str().unwrap())
        .collect();
    let v6: BTreeSet<&str> = list
        .iter()
        .map(|s| s["server"]["server_ipv6_net"].as_str().unwrap())
        .collect();
    assert_eq!((v4.len(), v6.len()), (2, 2));
    for ip in &v4 {
        ip.parse::<Ipv4Addr>().unwrap();
    }
    let cloud = w.get_server(cloud).await.unwrap();
    let cloud_v4 = cloud["public_net"]["ipv4"]["ip"].as_str().unwrap();
    assert!(!v4.contains(cloud_v4), "{cloud_v4}");

    // GET /server/{n}: the summary plus the feature flags.
    let r = robot_get(&sim, &w, &format!("/server/{a}")).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(keys(&r.body), BTreeSet::from(["server"]));
    let detail = &r.body["server"];
    let want: BTreeSet<&str> = LIST_KEYS.iter().chain(DETAIL_ONLY_KEYS).copied().collect();
    assert_eq!(keys(detail), want);
    assert_summary_types(detail);
    for k in DETAIL_ONLY_KEYS {
        assert!(detail[k].is_boolean(), "{k}: {detail}");
    }
    assert_eq!(detail["reset"], true);
    for k in LIST_KEYS {
        assert_eq!(&detail[k], &first[k], "{k}");
    }
    // The main IPv4 works in place of the number, as in the older API.
    let by_ip = robot_get(
        &sim,
        &w,
        &format!("/server/{}", first["server_ip"].as_str().unwrap()),
    )
    .await;
    assert_eq!(by_ip.body["server"]["server_number"], a);

    // GET /reset/{n}: power state and reset types.
    let r = robot_get(&sim, &w, &format!("/reset/{b}")).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(keys(&r.body), BTreeSet::from(["reset"]));
    let reset = &r.body["reset"];
    assert_eq!(keys(reset), RESET_KEYS.iter().copied().collect());
    assert_eq!(reset["server_number"], b);
    assert_eq!(reset["server_ip"], list[1]["server"]["server_ip"]);
    assert_eq!(
        reset["server_ipv6_net"],
        list[1]["server"]["server_ipv6_net"]
    );
    assert_eq!(reset["operating_status"], "running");
    assert_eq!(
        reset["type"],
        json!(["power", "power_long", "sw", "hw", "man"])
    );

    // Counted per endpoint template with the /robot prefix, next to the Cloud ones (the one
    // Cloud call is the get_server above).
    assert_eq!(sim.requests("GET", "/robot/server"), 1);
    assert_eq!(sim.requests("GET", "/robot/server/{server-number}"), 2);
    assert_eq!(sim.requests("GET", "/robot/reset/{server-number}"), 1);
    assert_eq!(sim.requests("GET", "/servers"), 0);
    assert_eq!(sim.requests("GET", "/servers/{id}"), 1);
    assert_eq!(sim.total_requests(), 5);
    let log = sim.request_log();
    let last = log.last().unwrap();
    assert_eq!(
        (last.method.as_str(), last.endpoint.as_str(), last.status),
        ("GET", "/robot/reset/{server-number}", 200)
    );
    assert_eq!(last.uri, format!("/robot/reset/{b}"));
    // And over HTTP, like the Cloud counters.
    let counters = w.raw(Method::GET, "/_sim/counters", None).await.unwrap();
    assert_eq!(counters.body["endpoints"]["GET /robot/server"], 1);
    // Robot requests spend no Cloud rate limit (only the Cloud call does).
    assert!(sim.rate_limit().remaining + 1 >= cloud_budget);
}

#[tokio::test]
async fn credentials_are_checked() {
    let sim = Sim::start().await;
    let w = sim.client();
    let n = w
        .create_robot_server("bm", "AX41-NVMe", "FSN1-DC14")
        .await
        .unwrap();
    let (user, password) = (sim.robot_user(), sim.robot_password());
    assert_eq!(user, cloud_sim::DEFAULT_ROBOT_USER);
    for credentials in [
        None,
        Some((user.as_str(), "wrong")),
        Some(("someone", password.as_str())),
        Some(("", "")),
    ] {
        for path in [
            "/server".to_owned(),
            format!("/server/{n}"),
            format!("/reset/{n}"),
            "/nothing".to_owned(),
        ] {
            let r = w.robot_raw(Method::GET, &path, credentials).await.unwrap();
            assert_robot_error(&r, 401, "UNAUTHORIZED");
            assert_eq!(
                r.body,
                json!({"error": {"status": 401, "code": "UNAUTHORIZED", "message": "Unauthorized"}})
            );
            assert!(
                r.header("www-authenticate")
                    .is_some_and(|h| h.starts_with("Basic")),
                "{path}"
            );
        }
    }
    // The Cloud bearer token is no Robot credential.
    let r = w.raw(Method::GET, "/robot/server", None).await.unwrap();
    assert_robot_error(&r, 401, "UNAUTHORIZED");
    // Failed logins are counted (and visible) but spend no rate limit.
    assert_eq!(sim.requests("GET", "/robot/server"), 5);
    assert_eq!(sim.robot_rate_limit("server").unwrap().used, 0);
    assert_eq!(robot_get(&sim, &w, "/server").await.status, 200);

    // Configured credentials replace the defaults.
    let sim = Sim::start_with(SimConfig {
        robot_user: "#ws+abc".into(),
        robot_password: "p:ss w0rd".into(),
        ..SimConfig::default()
    })
    .await;
    let w = sim.client();
    assert_eq!(
        (sim.robot_user(), sim.robot_password()),
        ("#ws+abc".to_owned(), "p:ss w0rd".to_owned())
    );
    assert_eq!(robot_get(&sim, &w, "/server").await.status, 200);
    let r = w
        .robot_raw(
            Method::GET,
            "/server",
            Some((
                cloud_sim::DEFAULT_ROBOT_USER,
                cloud_sim::DEFAULT_ROBOT_PASSWORD,
            )),
        )
        .await
        .unwrap();
    assert_robot_error(&r, 401, "UNAUTHORIZED");
}

#[tokio::test]
async fn unknown_servers_and_paths_answer_robot_errors() {
    let sim = Sim::start().await;
    let w = sim.client();
    let n = w
        .create_robot_server("bm", "AX41-NVMe", "FSN1-DC14")
        .await
        .unwrap();
    for path in [
        "/server/999",
        "/reset/999",
        "/server/abc",
        "/server/203.0.113.9",
        "/reset/1",
    ] {
        let r = robot_get(&sim, &w, path).await;
        assert_robot_error(&r, 404, "SERVER_NOT_FOUND");
    }
    // Paths and methods the simulator does not serve.
    for path in ["", "/", "/boot/1", "/server/1/extra", "/servers"] {
        let r = robot_get(&sim, &w, path).await;
        assert_robot_error(&r, 404, "NOT_FOUND");
    }
    let r = w
        .robot_raw(
            Method::POST,
            &format!("/reset/{n}"),
            Some((&sim.robot_user(), &sim.robot_password())),
        )
        .await
        .unwrap();
    assert_robot_error(&r, 404, "NOT_FOUND");
    // A server without a reset option.
    let no_reset = w
        .create_robot_server_with(json!({"server_name": "old", "reset": false}))
        .await
        .unwrap();
    let r = robot_get(&sim, &w, &format!("/reset/{no_reset}")).await;
    assert_robot_error(&r, 404, "RESET_NOT_AVAILABLE");
    let r = robot_get(&sim, &w, &format!("/server/{no_reset}")).await;
    assert_eq!(r.body["server"]["reset"], false);
    // Unknown paths are counted under their raw path.
    assert_eq!(sim.requests("GET", "/robot/boot/1"), 1);
}

#[tokio::test]
async fn rate_limit_per_resource_and_its_reset() {
    let sim = Sim::start().await;
    let w = sim.client();
    let n = w
        .create_robot_server("bm", "AX41-NVMe", "FSN1-DC14")
        .await
        .unwrap();

    // Real limits: 200 per hour for server (list and single share it), 500 for reset.
    let limits = w
        .raw(Method::GET, "/_sim/robot/rate_limit", None)
        .await
        .unwrap();
    assert_eq!(limits.status, 200);
    assert_eq!(limits.body["server"]["max_request"], 200);
    assert_eq!(limits.body["server"]["interval"], 3600);
    assert_eq!(limits.body["reset"]["max_request"], 500);
    assert_eq!(limits.body["reset"]["used"], 0);

    // 200 calls (list and get mixed, 404s too) pass, the 201st is refused.
    for i in 0..200 {
        let path = match i % 3 {
            0 => "/server".to_owned(),
            1 => format!("/server/{n}"),
            _ => "/server/42".to_owned(),
        };
        let r = robot_get(&sim, &w, &path).await;
        assert_ne!(r.status, 403, "request {i}: {}", r.body);
    }
    let st = sim.robot_rate_limit("server").unwrap();
    assert_eq!((st.used, st.remaining), (200, 0));
    for path in [
        "/server".to_owned(),
        format!("/server/{n}"),
        "/server/42".to_owned(),
    ] {
        let r = robot_get(&sim, &w, &path).await;
        assert_robot_error(&r, 403, "RATE_LIMIT_EXCEEDED");
        assert_eq!(r.body["error"]["max_request"], 200);
        assert_eq!(r.body["error"]["interval"], 3600);
    }
    // Refused calls are counted as requests, not against the limit; reset is separate.
    assert_eq!(sim.robot_rate_limit("server").unwrap().used, 200);
    assert_eq!(sim.requests("GET", "/robot/server"), 68);
    let r = robot_get(&sim, &w, &format!("/reset/{n}")).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(sim.robot_rate_limit("reset").unwrap().used, 1);

    // DELETE /_sim/robot/rate_limit empties every window.
    w.reset_robot_rate_limit().await.unwrap();
    assert_eq!(robot_get(&sim, &w, "/server").await.status, 200);
    assert_eq!(sim.robot_rate_limit("server").unwrap().used, 1);

    // A small limit over HTTP.
    w.set_robot_rate_limit("reset", 2, 60).await.unwrap();
    assert_eq!(
        robot_get(&sim, &w, &format!("/reset/{n}")).await.status,
        200
    );
    assert_eq!(
        robot_get(&sim, &w, &format!("/reset/{n}")).await.status,
        200
    );
    let r = robot_get(&sim, &w, &format!("/reset/{n}")).await;
    assert_robot_error(&r, 403, "RATE_LIMIT_EXCEEDED");
    assert_eq!(
        (
            &r.body["error"]["max_request"],
            &r.body["error"]["interval"]
        ),
        (&json!(2), &json!(60))
    );
    // "remaining" over HTTP, and bad requests.
    let r = w
        .raw(
            Method::PUT,
            "/_sim/robot/rate_limit",
            Some(json!({"resource": "reset", "remaining": 1})),
        )
        .await
        .unwrap();
    assert_eq!((r.status, &r.body["remaining"]), (200, &json!(1)));
    assert_eq!(
        robot_get(&sim, &w, &format!("/reset/{n}")).await.status,
        200
    );
    assert_eq!(
        robot_get(&sim, &w, &format!("/reset/{n}")).await.status,
        403
    );
    let r = w
        .raw(
            Method::PUT,
            "/_sim/robot/rate_limit",
            Some(json!({"resource": "boot", "max_request": 1})),
        )
        .await
        .unwrap();
    common::assert_error(&r, 400, "invalid_input");

    // The window slides: with a 1 s interval the oldest request ages out.
    sim.set_robot_rate_limit("server", 1, Duration::from_secs(1));
    sim.reset_robot_rate_limit();
    assert_eq!(robot_get(&sim, &w, "/server").await.status, 200);
    assert_eq!(robot_get(&sim, &w, "/server").await.status, 403);
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_eq!(robot_get(&sim, &w, "/server").await.status, 200);

    // Configured limits.
    let sim = Sim::start_with(SimConfig {
        robot_server_requests_per_hour: 1,
        ..SimConfig::default()
    })
    .await;
    let w = sim.client();
    assert_eq!(robot_get(&sim, &w, "/server").await.status, 200);
    assert_robot_error(
        &robot_get(&sim, &w, "/server").await,
        403,
        "RATE_LIMIT_EXCEEDED",
    );
    sim.set_robot_rate_limit_remaining("server", 1);
    assert_eq!(robot_get(&sim, &w, "/server").await.status, 200);
}

#[tokio::test]
async fn control_changes_show_in_list_get_and_reset() {
    let sim = Sim::start().await;
    let w = sim.client();
    let n = w
        .create_robot_server("bm-1", "AX41-NVMe", "FSN1-DC14")
        .await
        .unwrap();
    let other = w
        .create_robot_server("bm-2", "AX41-NVMe", "FSN1-DC14")
        .await
        .unwrap();
    sim.reset_counters();

    w.robot_power_off(n).await.unwrap();
    let r = robot_get(&sim, &w, &format!("/reset/{n}")).await;
    assert_eq!(r.body["reset"]["operating_status"], "shut off");
    assert_eq!(
        robot_get(&sim, &w, &format!("/reset/{other}")).await.body["reset"]["operating_status"],
        "running"
    );
    // Power is not the server status.
    assert_eq!(
        robot_get(&sim, &w, &format!("/server/{n}")).await.body["server"]["status"],
        "ready"
    );
    w.robot_power_on(n).await.unwrap();
    assert_eq!(
        robot_get(&sim, &w, &format!("/reset/{n}")).await.body["reset"]["operating_status"],
        "running"
    );

    // Renames and other fields.
    let updated = w
        .update_robot_server(
            n,
            json!({"server_name": "renamed", "status": "in process", "cancelled": true}),
        )
        .await
        .unwrap();
    assert_eq!(updated["server"]["server_name"], "renamed");
    let list = robot_get(&sim, &w, "/server").await.body;
    assert_eq!(list[0]["server"]["server_name"], "renamed");
    assert_eq!(list[0]["server"]["status"], "in process");
    assert_eq!(list[0]["server"]["cancelled"], true);
    assert_eq!(sim.robot_servers().len(), 2);

    // Removal.
    w.delete_robot_server(n).await.unwrap();
    assert_robot_error(
        &robot_get(&sim, &w, &format!("/server/{n}")).await,
        404,
        "SERVER_NOT_FOUND",
    );
    assert_robot_error(
        &robot_get(&sim, &w, &format!("/reset/{n}")).await,
        404,
        "SERVER_NOT_FOUND",
    );
    let list = robot_get(&sim, &w, "/server").await.body;
    assert_eq!(list.as_array().unwrap().len(), 1);
    assert_eq!(list[0]["server"]["server_number"], other);
    let e = w.delete_robot_server(n).await.unwrap_err();
    assert_eq!((e.status(), e.code()), (Some(404), Some("not_found")));
    assert_eq!(w.robot_power_off(n).await.unwrap_err().status(), Some(404));
    // Control calls are not counted: only the 8 Robot GETs above are.
    assert_eq!(sim.total_requests(), 8);

    // Chosen numbers, IPv6-only, tower-case models, validation.
    let chosen = w
        .create_robot_server_with(json!({
            "server_number": 321, "server_name": "tower", "ipv4": false,
            "operating_status_supported": false, "power": "off", "traffic": "5 TB",
            "paid_until": "2030-01-31",
        }))
        .await
        .unwrap();
    assert_eq!(chosen, 321);
    let s = robot_get(&sim, &w, "/server/321").await.body;
    assert_eq!(s["server"]["server_ip"], Value::Null);
    assert_eq!(s["server"]["ip"], json!([]));
    assert_eq!(s["server"]["traffic"], "5 TB");
    assert_eq!(s["server"]["paid_until"], "2030-01-31");
    let reset = robot_get(&sim, &w, "/reset/321").await.body;
    assert_eq!(reset["reset"]["operating_status"], "not supported");
    assert_eq!(reset["reset"]["type"], json!(["sw", "hw", "man"]));
    assert_eq!(reset["reset"]["server_ip"], Value::Null);
    let e = w
        .create_robot_server_with(json!({"server_number": 321}))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Some("uniqueness_error"));
    for (body, field) in [
        (json!({"power": "sleeping"}), "power"),
        (json!({"status": "running"}), "status"),
        (json!({"paid_until": "soon"}), "paid_until"),
        (json!({"server_nmae": "typo"}), "server_nmae"),
    ] {
        let r = w
            .raw(Method::POST, "/_sim/robot/servers", Some(body))
            .await
            .unwrap();
        common::assert_error(&r, 400, "invalid_input");
        assert_eq!(common::invalid_fields(&r), [field]);
    }
    let e = w
        .update_robot_server(321, json!({"ipv4": true}))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Some("invalid_input"));
    // The control list shows everything, detailed.
    let all = w
        .raw(Method::GET, "/_sim/robot/servers", None)
        .await
        .unwrap();
    assert_eq!(all.body["servers"].as_array().unwrap().len(), 2);
    assert_eq!(all.body["servers"][0]["server"]["server_number"], 321);
    assert!(all.body["servers"][0]["server"].get("hot_swap").is_some());
}

#[tokio::test]
async fn faults_address_robot_endpoints() {
    let sim = Sim::start().await;
    let w = sim.client();
    let n = w
        .create_robot_server("bm", "AX41-NVMe", "FSN1-DC14")
        .await
        .unwrap();
    // An injected error answers in Robot shape; the status defaults to the code's usual one.
    sim.faults()
        .fail_next(Some("GET /robot/server"), 1, 503, "MAINTENANCE");
    assert_robot_error(&robot_get(&sim, &w, "/server").await, 503, "MAINTENANCE");
    assert_eq!(robot_get(&sim, &w, "/server").await.status, 200);
    sim.faults().add(
        serde_json::from_value(json!({
            "endpoint": "GET /robot/server/{server-number}", "count": 1,
            "kind": "error", "code": "SERVER_NOT_FOUND",
        }))
        .unwrap(),
    );
    assert_robot_error(
        &robot_get(&sim, &w, &format!("/server/{n}")).await,
        404,
        "SERVER_NOT_FOUND",
    );
    assert_eq!(
        robot_get(&sim, &w, &format!("/server/{n}")).await.status,
        200
    );
    // A prefix rule reaches every Robot endpoint, and no Cloud one.
    let rule = sim
        .faults()
        .fail_every(Some("GET /robot/*"), 1, 500, "INTERNAL_ERROR");
    assert_robot_error(
        &robot_get(&sim, &w, &format!("/reset/{n}")).await,
        500,
        "INTERNAL_ERROR",
    );
    assert_eq!(
        common::send(&w, Method::GET, "/servers", None).await.status,
        200
    );
    sim.faults().remove(rule);
    // Missing fields, in the list (an array body) and in single answers.
    sim.faults()
        .omit_field(Some("GET /robot/*"), "server.server_ipv6_net", false);
    sim.faults()
        .omit_field(Some("GET /robot/*"), "reset.operating_status", true);
    let list = robot_get(&sim, &w, "/server").await.body;
    assert!(list[0]["server"].get("server_ipv6_net").is_none(), "{list}");
    assert!(list[0]["server"].get("server_ip").is_some());
    let one = robot_get(&sim, &w, &format!("/server/{n}")).await.body;
    assert!(one["server"].get("server_ipv6_net").is_none(), "{one}");
    let reset = robot_get(&sim, &w, &format!("/reset/{n}")).await.body;
    assert_eq!(reset["reset"]["operating_status"], Value::Null);
    sim.faults().clear();
    // An eventually consistent list.
    for i in 0..19 {
        w.create_robot_server(&format!("more-{i}"), "AX41-NVMe", "FSN1-DC14")
            .await
            .unwrap();
    }
    sim.faults().omit_items(Some("GET /robot/server"), 1.0);
    assert_eq!(robot_get(&sim, &w, "/server").await.body, json!([]));
    assert_eq!(
        robot_get(&sim, &w, &format!("/server/{n}")).await.status,
        200
    );
    sim.faults().clear();
    assert_eq!(
        robot_get(&sim, &w, "/server")
            .await
            .body
            .as_array()
            .unwrap()
            .len(),
        20
    );
    // Latency.
    sim.faults()
        .latency(Some("GET /robot/server"), Duration::from_millis(200));
    let t = std::time::Instant::now();
    assert_eq!(robot_get(&sim, &w, "/server").await.status, 200);
    assert!(t.elapsed() >= Duration::from_millis(200));
}

#[tokio::test]
async fn robot_servers_persist_in_the_state_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("world.json");
    let cfg = || SimConfig {
        state_file: Some(path.clone()),
        ..SimConfig::default()
    };
    let sim = Sim::start_with(cfg()).await;
    let w = sim.client();
    let a = w
        .create_robot_server("bm-1", "AX41-NVMe", "FSN1-DC14")
        .await
        .unwrap();
    let b = w
        .create_robot_server("bm-2", "EX44", "NBG1-DC3")
        .await
        .unwrap();
    let c = w
        .create_robot_server("bm-3", "EX44", "NBG1-DC3")
        .await
        .unwrap();
    w.robot_power_off(b).await.unwrap();
    w.delete_robot_server(c).await.unwrap();
    let before = robot_get(&sim, &w, "/server").await.body;
    sim.shutdown().await;

    let sim = Sim::start_with(cfg()).await;
    let w = sim.client();
    assert_eq!(robot_get(&sim, &w, "/server").await.body, before);
    assert_eq!(
        robot_get(&sim, &w, &format!("/reset/{b}")).await.body["reset"]["operating_status"],
        "shut off"
    );
    assert_eq!(
        robot_get(&sim, &w, &format!("/reset/{a}")).await.body["reset"]["operating_status"],
        "running"
    );
    // Numbers and addresses are never handed out twice, even after a restart.
    let d = w
        .create_robot_server("bm-4", "EX44", "NBG1-DC3")
        .await
        .unwrap();
    assert!(d > c, "{d} after {c}");
    let list = robot_get(&sim, &w, "/server").await.body;
    let ips: BTreeSet<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["server"]["server_ip"].as_str().unwrap())
        .collect();
    assert_eq!(ips.len(), 3);
}

#[tokio::test]
async fn state_files_without_robot_servers_still_load() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("world.json");
    {
        let sim = Sim::start_with(SimConfig {
            state_file: Some(path.clone()),
            ..SimConfig::default()
        })
        .await;
        sim.client()
            .create_server("s", "cx22", "fsn1")
            .await
            .unwrap();
        sim.shutdown().await;
    }
    // Strip what Robot support added, as a file written before it would look.
    let mut state: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let obj = state.as_object_mut().unwrap();
    assert!(obj.remove("robot_servers").is_some());
    let next = obj.get_mut("next").unwrap().as_object_mut().unwrap();
    assert!(next.remove("robot_server").is_some() && next.remove("robot_ip").is_some());
    std::fs::write(&path, serde_json::to_vec(&state).unwrap()).unwrap();

    let sim = Sim::start_with(SimConfig {
        state_file: Some(path.clone()),
        ..SimConfig::default()
    })
    .await;
    let w = sim.client();
    assert_eq!(w.list_servers().await.unwrap().len(), 1);
    assert_eq!(robot_get(&sim, &w, "/server").await.body, json!([]));
    let n = w
        .create_robot_server("bm", "AX41-NVMe", "FSN1-DC14")
        .await
        .unwrap();
    assert_eq!(n, 1_000_001);
}
