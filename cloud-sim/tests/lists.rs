//! Pagination, `name`, `label_selector`, `status` and `sort` on collections.

mod common;

use std::collections::HashSet;

use cloud_sim::Sim;
use common::{assert_error, send};
use reqwest::Method;
use serde_json::{Value, json};

fn ids(body: &Value, key: &str) -> Vec<u64> {
    body[key]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["id"].as_u64().unwrap())
        .collect()
}

#[tokio::test]
async fn three_pages_of_fifty_with_meta_and_link() {
    let sim = Sim::start().await;
    let w = sim.client();
    w.create_servers(150, "node", "cx22", "fsn1").await.unwrap();
    let mut seen = HashSet::new();
    for page in 1..=3u64 {
        let r = send(
            &w,
            Method::GET,
            &format!("/servers?page={page}&per_page=50"),
            None,
        )
        .await;
        assert_eq!(r.status, 200);
        let p = &r.body["meta"]["pagination"];
        assert_eq!(p["page"], json!(page));
        assert_eq!(p["per_page"], 50);
        assert_eq!(p["last_page"], 3);
        assert_eq!(p["total_entries"], 150);
        assert_eq!(
            p["previous_page"],
            if page == 1 {
                Value::Null
            } else {
                json!(page - 1)
            }
        );
        assert_eq!(
            p["next_page"],
            if page == 3 {
                Value::Null
            } else {
                json!(page + 1)
            }
        );
        let page_ids = ids(&r.body, "servers");
        assert_eq!(page_ids.len(), 50);
        seen.extend(page_ids);
        let link = r.header("link").expect("Link header");
        assert!(
            link.contains(r#"rel="last""#) && link.contains("page=3&per_page=50"),
            "{link}"
        );
        assert_eq!(link.contains(r#"rel="next""#), page < 3, "{link}");
        assert_eq!(link.contains(r#"rel="prev""#), page > 1, "{link}");
    }
    assert_eq!(seen.len(), 150, "pages overlap or miss servers");

    // Default 25, cap 50, past the end empty, garbage refused.
    let r = send(&w, Method::GET, "/servers", None).await;
    assert_eq!(ids(&r.body, "servers").len(), 25);
    assert_eq!(r.body["meta"]["pagination"]["last_page"], 6);
    let r = send(&w, Method::GET, "/servers?per_page=500", None).await;
    assert_eq!(r.body["meta"]["pagination"]["per_page"], 50);
    let r = send(&w, Method::GET, "/servers?page=9&per_page=50", None).await;
    assert_eq!(ids(&r.body, "servers").len(), 0);
    assert_eq!(r.body["meta"]["pagination"]["next_page"], Value::Null);
    assert_error(
        &send(&w, Method::GET, "/servers?page=0", None).await,
        400,
        "invalid_input",
    );
    assert_error(
        &send(&w, Method::GET, "/servers?per_page=x", None).await,
        400,
        "invalid_input",
    );

    // The Link header keeps the other filters.
    let r = send(
        &w,
        Method::GET,
        "/servers?label_selector=a%3Db&per_page=1",
        None,
    )
    .await;
    assert_eq!(r.body["meta"]["pagination"]["total_entries"], 0);
    let r = send(&w, Method::GET, "/servers?name=node-7&per_page=1", None).await;
    assert!(r.header("link").unwrap().contains("name=node-7"));
}

#[tokio::test]
async fn label_selectors_filter_every_collection() {
    let sim = Sim::start().await;
    let w = sim.client();
    let body = |name: &str, labels: Value| json!({"name": name, "server_type": "cx22", "image": "ubuntu-24.04", "labels": labels});
    let web = w
        .create_server_with(body("web", json!({"env": "prod", "tier": "web"})))
        .await
        .unwrap();
    let db = w
        .create_server_with(body("db", json!({"env": "prod", "tier": "db"})))
        .await
        .unwrap();
    let dev = w
        .create_server_with(body("dev", json!({"env": "dev"})))
        .await
        .unwrap();
    let cases: &[(&str, &[u64])] = &[
        ("env=prod", &[web, db]),
        ("env==prod", &[web, db]),
        ("env!=prod", &[dev]),
        ("tier", &[web, db]),
        ("!tier", &[dev]),
        ("tier in (web,cache)", &[web]),
        ("tier notin (web)", &[db, dev]),
        ("env=prod,tier!=db", &[web]),
    ];
    for (selector, want) in cases {
        let r = send(
            &w,
            Method::GET,
            &format!("/servers?label_selector={}", urlencode(selector)),
            None,
        )
        .await;
        assert_eq!(r.status, 200, "{selector}: {}", r.body);
        assert_eq!(ids(&r.body, "servers"), *want, "{selector}");
    }
    assert_error(
        &send(&w, Method::GET, "/servers?label_selector=a%20in%20(b", None).await,
        400,
        "invalid_input",
    );

    // The CCM's ownership lookup on load balancers.
    let lb_body = json!({"name": "lb", "load_balancer_type": "lb11", "location": "fsn1", "labels": {"hcloud-ccm/service-uid": "1234"}});
    let lb = w.create_load_balancer_with(lb_body).await.unwrap();
    w.create_load_balancer("other", "lb11", "nbg1")
        .await
        .unwrap();
    let r = send(
        &w,
        Method::GET,
        "/load_balancers?label_selector=hcloud-ccm%2Fservice-uid%3D1234",
        None,
    )
    .await;
    assert_eq!(ids(&r.body, "load_balancers"), [lb]);
    let r = send(&w, Method::GET, "/load_balancers?name=other", None).await;
    assert_eq!(r.body["load_balancers"].as_array().unwrap().len(), 1);
}

fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

#[tokio::test]
async fn sort_and_status_filters() {
    let sim = Sim::start().await;
    let w = sim.client();
    let b = w.create_server("b", "cx22", "fsn1").await.unwrap();
    let a = w.create_server("a", "cx22", "fsn1").await.unwrap();
    let c = w.create_server("c", "cx22", "fsn1").await.unwrap();
    w.poweroff(a).await.unwrap();
    let get = |q: &'static str| {
        let w = w.clone();
        async move {
            ids(
                &send(&w, Method::GET, &format!("/servers?{q}"), None)
                    .await
                    .body,
                "servers",
            )
        }
    };
    assert_eq!(get("sort=name").await, [a, b, c]);
    assert_eq!(get("sort=name:desc").await, [c, b, a]);
    assert_eq!(get("sort=id:desc").await, [c, a, b]);
    assert_eq!(get("sort=status&sort=name:desc").await, [a, c, b]); // off < running
    assert_eq!(get("status=off").await, [a]);
    assert_eq!(get("status=running&status=off&sort=id").await, [b, a, c]);
    assert_error(
        &send(&w, Method::GET, "/servers?sort=color", None).await,
        400,
        "invalid_input",
    );
    assert_error(
        &send(&w, Method::GET, "/servers?sort=name:sideways", None).await,
        400,
        "invalid_input",
    );
    assert_error(
        &send(&w, Method::GET, "/servers?status=sleeping", None).await,
        400,
        "invalid_input",
    );
    let types = send(
        &w,
        Method::GET,
        "/server_types?sort=name:desc&per_page=50",
        None,
    )
    .await;
    let names: Vec<&str> = types.body["server_types"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    let mut sorted = names.clone();
    sorted.sort_unstable_by(|x, y| y.cmp(x));
    assert_eq!(names, sorted);
}
