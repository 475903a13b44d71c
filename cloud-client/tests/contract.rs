//! Contract tests: every client call against cloud-sim over HTTP. cloud-sim keeps its own wire
//! types, so these compare two independent readings of the Hetzner API.
//!
//! Figures are printed with `--nocapture` (lines starting with `FIGURE`).

mod common;

use common::{config, provider};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use cloud_client::hcloud::{HcloudProvider, Token};
use cloud_client::{
    AddressKind, CloudError, IpMode, LbNode, NodeAddress, NodeRef, PortProtocol, Route,
    RouteRequest, ServicePort, ServiceRef,
};
use cloud_sim::Sim;
use serde_json::json;

const LB_PREFIX: &str = "load-balancer.hetzner.cloud/";

async fn sim_fast() -> Sim {
    common::sim_with_actions(Duration::from_millis(50)).await
}

fn svc(uid: &str, ann: &[(&str, &str)]) -> ServiceRef {
    ServiceRef {
        uid: uid.to_string(),
        namespace: "default".into(),
        name: format!("svc-{uid}"),
        annotations: ann
            .iter()
            .map(|(k, v)| (format!("{LB_PREFIX}{k}"), v.to_string()))
            .collect(),
        ports: vec![
            ServicePort {
                name: Some("http".into()),
                protocol: PortProtocol::Tcp,
                port: 80,
                node_port: 30080,
            },
            ServicePort {
                name: Some("https".into()),
                protocol: PortProtocol::Tcp,
                port: 443,
                node_port: 30443,
            },
        ],
    }
}

fn lb_nodes(ids: &[u64]) -> Vec<LbNode> {
    ids.iter()
        .map(|id| LbNode {
            name: format!("n{id}"),
            provider_id: Some(format!("hcloud://{id}")),
            labels: BTreeMap::new(),
            internal_ips: vec![],
        })
        .collect()
}

fn calls(sim: &Sim) -> u64 {
    sim.total_requests()
}

// ------------------------------------------------------------------------------------------------
// Instances
// ------------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instance_metadata_by_name_and_provider_id() {
    let sim = sim_fast().await;
    let w = sim.world();
    let net = w
        .create_network("k8s", "10.0.0.0/16", "10.0.1.0/24")
        .await
        .unwrap();
    let id = w.create_server("node-1", "cx22", "fsn1").await.unwrap();
    w.attach_to_network(id, net, None).await.unwrap();
    let p = provider(&sim, |c| {
        c.network = Some("k8s".into());
        c.address_family = cloud_client::hcloud::AddressFamily::DualStack;
    })
    .await;
    assert_eq!(p.network_id(), Some(net as i64));
    let inst = p.instances();

    let by_name = inst
        .instance_metadata(&NodeRef::new("node-1"))
        .await
        .unwrap();
    assert_eq!(by_name.provider_id, format!("hcloud://{id}"));
    assert_eq!(by_name.instance_type, "cx22");
    assert_eq!(by_name.region.as_deref(), Some("fsn1"));
    assert_eq!(by_name.zone.as_deref(), Some("fsn1-dc14"));
    assert_eq!(
        by_name.additional_labels["instance.hetzner.cloud/provided-by"],
        "cloud"
    );
    let kinds: Vec<AddressKind> = by_name.addresses.iter().map(|a| a.kind).collect();
    assert_eq!(
        kinds,
        [
            AddressKind::Hostname,
            AddressKind::ExternalIP,
            AddressKind::ExternalIP,
            AddressKind::InternalIP
        ]
    );
    assert_eq!(by_name.addresses[0].address, "node-1");
    assert!(
        by_name.addresses[2].address.ends_with("::1"),
        "{:?}",
        by_name.addresses
    );
    assert!(
        by_name.addresses[3].address.starts_with("10.0.1."),
        "{:?}",
        by_name.addresses
    );
    let server = w.get_server(id).await.unwrap();
    assert_eq!(
        by_name.addresses[1].address,
        server["public_net"]["ipv4"]["ip"].as_str().unwrap()
    );

    let by_id = inst
        .instance_metadata(&NodeRef::with_provider_id(
            "other-name",
            format!("hcloud://{id}"),
        ))
        .await
        .unwrap();
    assert_eq!(by_id, by_name);
    assert!(inst.instance_exists(&NodeRef::new("node-1")).await.unwrap());
    assert!(
        !inst
            .instance_shutdown(&NodeRef::new("node-1"))
            .await
            .unwrap()
    );
    // Everything above came from one server list (plus the network resolution).
    assert_eq!(sim.requests("GET", "/servers"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zone_label_disabled_and_ipv4_only() {
    let sim = sim_fast().await;
    sim.world()
        .create_server("node-z", "cx22", "nbg1")
        .await
        .unwrap();
    let p = provider(&sim, |c| c.zone_label_enabled = false).await;
    let md = p
        .instances()
        .instance_metadata(&NodeRef::new("node-z"))
        .await
        .unwrap();
    assert_eq!(md.zone, None);
    assert_eq!(md.region.as_deref(), Some("nbg1"));
    assert_eq!(md.addresses.len(), 2, "{:?}", md.addresses);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tolerant_decoding_without_datacenter_and_with_null_ipv4() {
    let sim = sim_fast().await;
    sim.world()
        .create_server("node-t", "cx22", "hel1")
        .await
        .unwrap();
    sim.faults()
        .omit_field(Some("GET /servers"), "server.public_net.ipv4", true);
    sim.faults()
        .omit_field(Some("GET /servers"), "server.datacenter", false);
    let p = provider(&sim, |_| {}).await;
    let md = p
        .instances()
        .instance_metadata(&NodeRef::new("node-t"))
        .await
        .unwrap();
    assert_eq!(
        md.addresses,
        vec![NodeAddress::new(AddressKind::Hostname, "node-t")]
    );
    assert_eq!(md.zone.as_deref(), Some("hel1-dc2"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn not_found_is_confirmed_by_a_fresh_list_and_names_what_was_tried() {
    let sim = sim_fast().await;
    let w = sim.world();
    let id = w.create_server("node-gone", "cx22", "fsn1").await.unwrap();
    let p = provider(&sim, |c| c.server_cache_miss_fresh = Duration::ZERO).await;
    let inst = p.instances();
    let node = NodeRef::with_provider_id("node-gone", format!("hcloud://{id}"));
    assert!(inst.instance_exists(&node).await.unwrap());
    w.delete_server(id).await.unwrap();
    // The cached snapshot still has the server: exists stays true until it is refreshed ...
    assert!(inst.instance_exists(&node).await.unwrap());
    // ... but a miss is never served from the cache: an unknown name costs one fresh list, and
    // a name alone never proves a server gone.
    let before = sim.requests("GET", "/servers");
    let err = inst
        .instance_exists(&NodeRef::new("never-existed"))
        .await
        .unwrap_err();
    assert!(
        err.is_not_found() && err.to_string().contains("never-existed"),
        "{err}"
    );
    assert_eq!(sim.requests("GET", "/servers"), before + 1);
    // That refresh also made the deletion visible, and the server's own 404 confirms it.
    assert!(!inst.instance_exists(&node).await.unwrap());
    let err = inst.instance_metadata(&node).await.unwrap_err();
    assert!(err.is_not_found(), "{err}");
    let msg = err.to_string();
    assert!(
        msg.contains(&format!("hcloud://{id}")) && msg.contains("node-gone"),
        "{msg}"
    );
    let err = inst
        .instance_metadata(&NodeRef::new("nobody"))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("server name \"nobody\""), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_is_status_off() {
    let sim = sim_fast().await;
    let w = sim.world();
    let id = w.create_server("node-off", "cx22", "fsn1").await.unwrap();
    w.poweroff(id).await.unwrap();
    let p = provider(&sim, |_| {}).await;
    assert!(
        p.instances()
            .instance_shutdown(&NodeRef::new("node-off"))
            .await
            .unwrap()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn robot_and_foreign_provider_ids_are_errors_not_absence() {
    let sim = sim_fast().await;
    let p = provider(&sim, |_| {}).await;
    for pid in ["hrobot://12", "hcloud://bm-12"] {
        let e = p
            .instances()
            .instance_exists(&NodeRef::with_provider_id("r", pid))
            .await
            .unwrap_err();
        assert!(matches!(e, CloudError::Unsupported { .. }), "{e}");
    }
    let e = p
        .instances()
        .instance_exists(&NodeRef::with_provider_id("x", "aws:///i-1"))
        .await
        .unwrap_err();
    assert!(matches!(e, CloudError::InvalidInput { .. }), "{e}");
    assert_eq!(calls(&sim), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshot_serves_1000_concurrent_lookups_with_one_paginated_list() {
    let sim = sim_fast().await;
    let ids = sim
        .world()
        .create_servers(1000, "bulk", "cx22", "fsn1")
        .await
        .unwrap();
    assert_eq!(ids.len(), 1000);
    let names: Vec<String> = sim
        .world()
        .list_servers()
        .await
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap().to_string())
        .collect();
    sim.reset_counters();
    let p = provider(&sim, |_| {}).await;
    let inst = p.instances();
    let lookups = names.iter().map(|n| {
        let inst = inst.clone();
        let n = n.clone();
        async move { inst.instance_metadata(&NodeRef::new(n)).await }
    });
    let results = futures::future::join_all(lookups).await;
    assert!(results.iter().all(Result::is_ok));
    let lists = sim.requests("GET", "/servers");
    println!(
        "FIGURE snapshot: 1000 concurrent instance lookups cost {lists} GET /servers calls (pages of 50)"
    );
    assert!(lists <= 21, "{lists}");
    assert_eq!(p.stats().snapshot().calls_to("GET", "/servers"), lists);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn network_by_id_and_missing_network_fails_at_startup() {
    let sim = sim_fast().await;
    let net = sim
        .world()
        .create_network("cluster-net", "10.0.0.0/16", "10.0.1.0/24")
        .await
        .unwrap();
    let p = provider(&sim, |c| c.network = Some(net.to_string())).await;
    assert_eq!(p.network_id(), Some(net as i64));
    let mut c = config(&sim);
    c.network = Some("does-not-exist".into());
    let e = HcloudProvider::new(c).await.unwrap_err();
    assert!(
        e.is_not_found() && e.to_string().contains("does-not-exist"),
        "{e}"
    );
    assert!(p.check_connectivity().await.is_ok());
}

// ------------------------------------------------------------------------------------------------
// Transport: errors, retries, rate limit, redaction
// ------------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_never_appears_in_debug_or_errors() {
    let sim = sim_fast().await;
    let secret = "s3cr3t-token-that-is-not-64-chars";
    let mut c = config(&sim);
    c.token = Token::new(secret);
    let dbg = format!("{c:?}");
    assert!(!dbg.contains(secret), "{dbg}");
    let p = HcloudProvider::new(c.clone()).await.unwrap();
    assert!(!format!("{p:?}").contains(secret));
    let e = p.check_connectivity().await.unwrap_err();
    assert_eq!(e.code(), Some("unauthorized"));
    assert!(e.correlation_id().is_some(), "{e:?}");
    for text in [format!("{e}"), format!("{e:?}")] {
        assert!(!text.contains(secret), "{text}");
    }
    // A transport failure (nothing listens there) must not leak it either.
    c.endpoint = "http://127.0.0.1:9/v1".into();
    c.retry.max_attempts = 2;
    let p = HcloudProvider::new(c).await.unwrap();
    let e = p.check_connectivity().await.unwrap_err();
    assert!(e.is_retryable(), "{e}");
    for text in [format!("{e}"), format!("{e:?}")] {
        assert!(!text.contains(secret), "{text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_errors_are_retried_then_reported_clearly() {
    let sim = sim_fast().await;
    let p = provider(&sim, |_| {}).await;
    sim.faults()
        .fail_next(Some("GET /locations"), 2, 503, "unavailable");
    p.check_connectivity()
        .await
        .expect("recovers after two 503s");
    assert_eq!(sim.requests("GET", "/locations"), 3);

    sim.faults()
        .fail_next(Some("GET /locations"), 100, 500, "server_error");
    let e = p.check_connectivity().await.unwrap_err();
    println!("FIGURE 5xx: persistent 500s end with: {e}");
    assert!(
        matches!(e, CloudError::RetriesExhausted { attempts: 5, .. }),
        "{e:?}"
    );
    assert_eq!(e.code(), Some("server_error"));
    assert!(e.correlation_id().is_some());
    assert!(e.is_retryable());
    assert_eq!(sim.requests("GET", "/locations"), 3 + 5);
    // Permanent errors are not retried.
    sim.faults().clear();
    sim.faults()
        .fail_next(Some("GET /locations"), 1, 400, "invalid_input");
    let e = p.check_connectivity().await.unwrap_err();
    assert_eq!(e.code(), Some("invalid_input"));
    assert_eq!(sim.requests("GET", "/locations"), 9);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeouts_are_typed_and_retryable() {
    let sim = sim_fast().await;
    let p = provider(&sim, |c| {
        c.request_timeout = Duration::from_millis(200);
        c.retry.max_attempts = 2;
    })
    .await;
    sim.faults()
        .hang(Some("GET /locations"), 1, Duration::from_secs(2));
    p.check_connectivity()
        .await
        .expect("second attempt succeeds");
    sim.faults()
        .hang(Some("GET /locations"), 2, Duration::from_secs(2));
    let e = p.check_connectivity().await.unwrap_err();
    assert!(
        matches!(&e, CloudError::RetriesExhausted { last, .. } if matches!(**last, CloudError::Timeout { .. })),
        "{e:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paces_100_concurrent_requests_with_10_remaining_budget() {
    let sim = sim_fast().await;
    // 360000/h = 100 requests/s refill, so the test stays quick; the client learns the rate from the headers.
    sim.set_rate_limit(360_000, 10);
    let p = Arc::new(provider(&sim, |_| {}).await);
    let reqs = (0..100).map(|_| {
        let p = p.clone();
        async move { p.check_connectivity().await }
    });
    let results = futures::future::join_all(reqs).await;
    let failed = results.iter().filter(|r| r.is_err()).count();
    let got_429 = sim.request_log().iter().filter(|e| e.status == 429).count();
    let s = p.stats().snapshot();
    println!(
        "FIGURE rate limit: 100 concurrent requests starting with 10 remaining: {got_429} x 429 \
         (client counted {}), {} paced, {failed} failed",
        s.rate_limited, s.paced
    );
    assert_eq!(failed, 0);
    assert!(got_429 <= 1, "{got_429}");
    assert_eq!(sim.requests("GET", "/locations"), 100 + got_429 as u64);
    assert!(s.rate_limit.is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recovers_from_an_injected_429_storm() {
    let sim = sim_fast().await;
    let p = Arc::new(provider(&sim, |_| {}).await);
    p.check_connectivity().await.unwrap();
    sim.faults().fail_next(None, 20, 429, "rate_limit_exceeded");
    let reqs = (0..10).map(|_| {
        let p = p.clone();
        async move { p.check_connectivity().await }
    });
    let results = futures::future::join_all(reqs).await;
    let ok = results.iter().filter(|r| r.is_ok()).count();
    let s = p.stats().snapshot();
    println!(
        "FIGURE 429 storm: 20 injected 429s, {ok}/10 requests succeeded, {} retries",
        s.retries
    );
    // 10 requests x 5 attempts = 50 tries for 20 failures: everyone gets through.
    assert_eq!(ok, 10);
    assert_eq!(s.rate_limited, 20);
}

// ------------------------------------------------------------------------------------------------
// Actions
// ------------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_two_second_action_takes_few_polls() {
    let sim = sim_fast().await;
    let w = sim.world();
    let net = w
        .create_network("k8s", "10.0.0.0/16", "10.0.1.0/24")
        .await
        .unwrap();
    let id = w.create_server("node-r", "cx22", "fsn1").await.unwrap();
    w.attach_to_network(id, net, None).await.unwrap();
    let p = provider(&sim, |c| c.network = Some(net.to_string())).await;
    let routes = p.routes().unwrap();
    sim.set_action_duration(Duration::from_secs(2));
    sim.reset_counters();
    routes
        .create_route(&RouteRequest {
            name_hint: "uid".into(),
            target_node: NodeRef::new("node-r"),
            target_addresses: vec![],
            destination_cidr: "10.244.1.0/24".into(),
        })
        .await
        .unwrap();
    let polls = sim.requests("GET", "/actions");
    println!("FIGURE actions: a 2 s action was polled {polls} times");
    assert!(polls <= 6, "{polls}");
    assert!(polls >= 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_waits_share_poll_calls() {
    let sim = sim_fast().await;
    let w = sim.world();
    let nodes: Vec<u64> = w.create_servers(3, "t", "cx22", "fsn1").await.unwrap();
    let p = provider(&sim, |_| {}).await;
    let lbs = p.load_balancers().unwrap();
    // Five Services, all created at once; the create actions last 1 s.
    sim.set_action_duration(Duration::from_secs(1));
    let services: Vec<ServiceRef> = (0..5)
        .map(|i| svc(&format!("batch-{i}"), &[("location", "fsn1")]))
        .collect();
    let targets = lb_nodes(&nodes);
    let ensures = services.iter().map(|s| lbs.ensure(s, &targets));
    let results = futures::future::join_all(ensures).await;
    assert!(results.iter().all(Result::is_ok), "{results:?}");
    let polls = sim.requests("GET", "/actions");
    println!(
        "FIGURE actions: 5 concurrent 1 s LB creates used {polls} GET /actions calls in total"
    );
    // Five separate waiters would need at least 4 polls each (0.1, 0.3, 0.7, 1.5 s).
    assert!(polls <= 10, "{polls}");
    let batched = sim
        .request_log()
        .iter()
        .any(|e| e.endpoint == "/actions" && e.uri.matches("id=").count() >= 2);
    assert!(batched, "expected at least one poll carrying several ids");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_action_is_a_typed_error() {
    let sim = sim_fast().await;
    let w = sim.world();
    let nodes = w.create_servers(1, "f", "cx22", "fsn1").await.unwrap();
    let p = provider(&sim, |_| {}).await;
    sim.faults()
        .fail_actions(Some("POST /load_balancers"), 1, "service_error");
    let e = p
        .load_balancers()
        .unwrap()
        .ensure(&svc("fail-1", &[("location", "fsn1")]), &lb_nodes(&nodes))
        .await
        .unwrap_err();
    assert!(matches!(e, CloudError::ActionFailed { .. }), "{e:?}");
    assert_eq!(e.code(), Some("service_error"));
}

// ------------------------------------------------------------------------------------------------
// Load balancers
// ------------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lb_create_with_two_ports_and_ten_targets_then_no_op() {
    let sim = sim_fast().await;
    let nodes = sim
        .world()
        .create_servers(10, "lbn", "cx22", "fsn1")
        .await
        .unwrap();
    let p = provider(&sim, |_| {}).await;
    let lbs = p.load_balancers().unwrap();
    let s = svc(
        "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0",
        &[("location", "fsn1"), ("type", "lb11")],
    );
    sim.reset_counters();
    let out = lbs.ensure(&s, &lb_nodes(&nodes)).await.unwrap();
    let create_calls = calls(&sim);
    println!(
        "FIGURE lb: create with 2 ports and 10 targets cost {create_calls} calls ({:?})",
        sim.request_counts()
    );
    // The label lookup, the create, its action, and the fresh read the follow-up plan uses (no
    // name lookup: the default name is this Service's own).
    assert!(create_calls <= 4, "{:?}", sim.request_counts());
    assert_eq!(sim.requests("GET", "/load_balancers"), 1);
    assert_eq!(sim.requests("POST", "/load_balancers"), 1);
    assert_eq!(sim.requests("GET", "/load_balancers/{id}"), 1);
    assert!(out.warnings.is_empty(), "{:?}", out.warnings);
    assert_eq!(out.status.ingress.len(), 2);
    assert!(
        out.status
            .ingress
            .iter()
            .all(|i| i.ip_mode == Some(IpMode::Vip))
    );

    let lb = &sim.world().list_load_balancers().await.unwrap()[0];
    assert_eq!(lb["name"], "a0f1e2d3c4b5a69788796a5b4c3d2e1f");
    assert_eq!(
        lb["labels"]["hcloud-ccm/service-uid"],
        "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
    );
    assert_eq!(lb["services"].as_array().unwrap().len(), 2);
    assert_eq!(lb["targets"].as_array().unwrap().len(), 10);
    assert_eq!(
        out.status.ingress[0].ip.as_deref(),
        lb["public_net"]["ipv4"]["ip"].as_str()
    );

    // Nothing changed: one GET by the remembered id, zero writes.
    sim.reset_counters();
    let again = lbs.ensure(&s, &lb_nodes(&nodes)).await.unwrap();
    println!(
        "FIGURE lb: unchanged reconcile cost {} calls, {} writes",
        calls(&sim),
        again.writes
    );
    assert_eq!(again.writes, 0);
    assert_eq!(calls(&sim), 1, "{:?}", sim.request_counts());
    assert_eq!(again.status, out.status);
    assert_eq!(lbs.get(&s).await.unwrap(), Some(out.status));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lb_update_targets_writes_only_the_difference() {
    let sim = sim_fast().await;
    let nodes = sim
        .world()
        .create_servers(4, "u", "cx22", "fsn1")
        .await
        .unwrap();
    let p = provider(&sim, |_| {}).await;
    let lbs = p.load_balancers().unwrap();
    let s = svc("upd-1", &[("location", "fsn1")]);
    let out = lbs.ensure(&s, &lb_nodes(&nodes[..3])).await.unwrap();
    assert!(
        out.warnings
            .iter()
            .any(|w| w.reason == "LoadBalancerTypeUnconfigured")
    );
    sim.reset_counters();
    let up = lbs
        .update_targets(&s, &lb_nodes(&nodes[1..]))
        .await
        .unwrap();
    assert!(up.found);
    assert_eq!(up.writes, 2);
    assert_eq!(
        sim.requests("POST", "/load_balancers/{id}/actions/add_target"),
        1
    );
    assert_eq!(
        sim.requests("POST", "/load_balancers/{id}/actions/remove_target"),
        1
    );
    assert_eq!(
        sim.requests("POST", "/load_balancers/{id}/actions/update_service"),
        0
    );
    let unknown = lbs.update_targets(&svc("nobody", &[]), &[]).await.unwrap();
    assert!(!unknown.found);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lb_annotation_changes_are_applied_minimally() {
    let sim = sim_fast().await;
    let nodes = sim
        .world()
        .create_servers(2, "c", "cx22", "fsn1")
        .await
        .unwrap();
    let p = provider(&sim, |_| {}).await;
    let lbs = p.load_balancers().unwrap();
    let s = svc("chg-1", &[("location", "fsn1")]);
    lbs.ensure(&s, &lb_nodes(&nodes)).await.unwrap();
    let s2 = svc(
        "chg-1",
        &[
            ("location", "fsn1"),
            ("algorithm-type", "least_connections"),
            ("uses-proxyprotocol", "true"),
            ("name", "renamed-lb"),
            ("health-check-interval", "7s"),
        ],
    );
    sim.reset_counters();
    let out = lbs.ensure(&s2, &lb_nodes(&nodes)).await.unwrap();
    assert_eq!(sim.requests("PUT", "/load_balancers/{id}"), 1);
    assert_eq!(
        sim.requests("POST", "/load_balancers/{id}/actions/change_algorithm"),
        1
    );
    assert_eq!(
        sim.requests("POST", "/load_balancers/{id}/actions/update_service"),
        2
    );
    assert!(
        out.status
            .ingress
            .iter()
            .all(|i| i.ip_mode == Some(IpMode::Proxy))
    );
    let lb = &sim.world().list_load_balancers().await.unwrap()[0];
    assert_eq!(lb["name"], "renamed-lb");
    assert_eq!(lb["algorithm"]["type"], "least_connections");
    assert_eq!(lb["services"][0]["health_check"]["interval"], 7);
    sim.reset_counters();
    assert_eq!(lbs.ensure(&s2, &lb_nodes(&nodes)).await.unwrap().writes, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lb_adopts_an_existing_lb_by_name() {
    let sim = sim_fast().await;
    let nodes = sim
        .world()
        .create_servers(2, "a", "cx22", "fsn1")
        .await
        .unwrap();
    let existing = sim
        .world()
        .create_load_balancer("legacy-lb", "lb11", "fsn1")
        .await
        .unwrap();
    let p = provider(&sim, |_| {}).await;
    let lbs = p.load_balancers().unwrap();
    let s = svc("adopt-1", &[("name", "legacy-lb")]);
    sim.reset_counters();
    lbs.ensure(&s, &lb_nodes(&nodes)).await.unwrap();
    assert_eq!(sim.requests("POST", "/load_balancers"), 0);
    assert_eq!(sim.requests("PUT", "/load_balancers/{id}"), 1);
    let lb = sim.world().get_load_balancer(existing).await.unwrap();
    assert_eq!(lb["labels"]["hcloud-ccm/service-uid"], "adopt-1");
    assert_eq!(lb["targets"].as_array().unwrap().len(), 2);
    // A fresh provider (no remembered id) finds it by label in one call.
    let p2 = provider(&sim, |_| {}).await;
    sim.reset_counters();
    assert!(
        p2.load_balancers()
            .unwrap()
            .get(&s)
            .await
            .unwrap()
            .is_some()
    );
    assert_eq!(calls(&sim), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lb_warnings_for_udp_and_max_targets() {
    let sim = sim_fast().await;
    let nodes = sim
        .world()
        .create_servers(30, "m", "cx22", "fsn1")
        .await
        .unwrap();
    let p = provider(&sim, |_| {}).await;
    let lbs = p.load_balancers().unwrap();
    let mut s = svc("warn-1", &[("location", "fsn1"), ("type", "lb11")]);
    s.ports.push(ServicePort {
        name: Some("dns".into()),
        protocol: PortProtocol::Udp,
        port: 53,
        node_port: 30053,
    });
    let out = lbs.ensure(&s, &lb_nodes(&nodes)).await.unwrap();
    let reasons: Vec<&str> = out.warnings.iter().map(|w| w.reason.as_str()).collect();
    assert!(
        reasons.contains(&"UnsupportedProtocolConfigured"),
        "{reasons:?}"
    );
    assert!(reasons.contains(&"MaxTargetsReached"), "{reasons:?}");
    let lb = &sim.world().list_load_balancers().await.unwrap()[0];
    assert_eq!(lb["targets"].as_array().unwrap().len(), 25);
    assert_eq!(lb["services"].as_array().unwrap().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lb_invalid_annotation_makes_no_call() {
    let sim = sim_fast().await;
    let p = provider(&sim, |_| {}).await;
    let e = p
        .load_balancers()
        .unwrap()
        .ensure(
            &svc(
                "bad-1",
                &[("location", "fsn1"), ("health-check-interval", "often")],
            ),
            &[],
        )
        .await
        .unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains("load-balancer.hetzner.cloud/health-check-interval") && msg.contains("often"),
        "{msg}"
    );
    assert_eq!(calls(&sim), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lb_delete_is_idempotent_and_respects_protection() {
    let sim = sim_fast().await;
    let nodes = sim
        .world()
        .create_servers(1, "d", "cx22", "fsn1")
        .await
        .unwrap();
    let p = provider(&sim, |_| {}).await;
    let lbs = p.load_balancers().unwrap();
    let s = svc("del-1", &[("location", "fsn1")]);
    lbs.ensure(&s, &lb_nodes(&nodes)).await.unwrap();
    let out = lbs.delete(&s).await.unwrap();
    assert!(out.deleted);
    assert!(sim.world().list_load_balancers().await.unwrap().is_empty());
    let again = lbs.delete(&s).await.unwrap();
    assert!(!again.deleted);

    // Protected: kept, reported as a warning.
    let s2 = svc("del-2", &[("location", "fsn1")]);
    lbs.ensure(&s2, &lb_nodes(&nodes)).await.unwrap();
    let id = sim.world().list_load_balancers().await.unwrap()[0]["id"]
        .as_u64()
        .unwrap();
    sim.world()
        .load_balancer_action(id, "change_protection", json!({"delete": true}))
        .await
        .unwrap();
    let out = lbs.delete(&s2).await.unwrap();
    assert!(!out.deleted);
    assert_eq!(out.warnings[0].reason, "DeleteProtected");
    assert_eq!(sim.world().list_load_balancers().await.unwrap().len(), 1);

    // A same-named LB without our label is never deleted.
    let foreign = svc("del-3", &[("name", "someone-elses")]);
    sim.world()
        .create_load_balancer("someone-elses", "lb11", "fsn1")
        .await
        .unwrap();
    assert!(!lbs.delete(&foreign).await.unwrap().deleted);
    assert_eq!(sim.world().list_load_balancers().await.unwrap().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lb_private_network_targets_and_status() {
    let sim = sim_fast().await;
    let w = sim.world();
    let net = w
        .create_network("k8s", "10.0.0.0/16", "10.0.1.0/24")
        .await
        .unwrap();
    let nodes = w.create_servers(2, "p", "cx22", "fsn1").await.unwrap();
    for n in &nodes {
        w.attach_to_network(*n, net, None).await.unwrap();
    }
    let p = provider(&sim, |c| c.network = Some(net.to_string())).await;
    let lbs = p.load_balancers().unwrap();
    let s = svc(
        "priv-1",
        &[
            ("location", "fsn1"),
            ("use-private-ip", "true"),
            ("ipv6-disabled", "true"),
        ],
    );
    let out = lbs.ensure(&s, &lb_nodes(&nodes)).await.unwrap();
    let ips: Vec<String> = out
        .status
        .ingress
        .iter()
        .filter_map(|i| i.ip.clone())
        .collect();
    assert_eq!(ips.len(), 2, "{ips:?}");
    assert!(ips[1].starts_with("10.0."), "{ips:?}");
    let lb = &w.list_load_balancers().await.unwrap()[0];
    assert!(
        lb["targets"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t["use_private_ip"] == true)
    );
    sim.reset_counters();
    assert_eq!(lbs.ensure(&s, &lb_nodes(&nodes)).await.unwrap().writes, 0);
    let s_host = svc(
        "priv-1",
        &[
            ("location", "fsn1"),
            ("use-private-ip", "true"),
            ("hostname", "lb.example.com"),
        ],
    );
    let st = lbs.ensure(&s_host, &lb_nodes(&nodes)).await.unwrap().status;
    assert_eq!(st.ingress[0].hostname.as_deref(), Some("lb.example.com"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lb_https_with_uploaded_and_managed_certificates() {
    let sim = sim_fast().await;
    let nodes = sim
        .world()
        .create_servers(1, "h", "cx22", "fsn1")
        .await
        .unwrap();
    let cert = sim
        .world()
        .create_certificate("my-cert", CERT_PEM, KEY_PEM)
        .await
        .unwrap();
    let p = provider(&sim, |_| {}).await;
    let lbs = p.load_balancers().unwrap();
    let s = svc(
        "tls-1",
        &[
            ("location", "fsn1"),
            ("protocol", "https"),
            ("http-certificates", "my-cert"),
        ],
    );
    lbs.ensure(&s, &lb_nodes(&nodes)).await.unwrap();
    let lb = &sim.world().list_load_balancers().await.unwrap()[0];
    assert_eq!(
        lb["services"][0]["http"]["certificates"][0].as_u64(),
        Some(cert)
    );
    sim.reset_counters();
    let m = svc(
        "tls-2",
        &[
            ("location", "fsn1"),
            ("protocol", "https"),
            ("certificate-type", "managed"),
            ("http-managed-certificate-domains", "example.com"),
        ],
    );
    lbs.ensure(&m, &lb_nodes(&nodes)).await.unwrap();
    assert_eq!(sim.requests("POST", "/certificates"), 1);
    sim.reset_counters();
    assert_eq!(lbs.ensure(&m, &lb_nodes(&nodes)).await.unwrap().writes, 0);
    assert_eq!(sim.requests("POST", "/certificates"), 0);
}

// The simulator checks only the PEM framing, so a stub pair is enough.
const CERT_PEM: &str = "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIUQ2FsbGVkIGJ5IHRlc3RzAAAAAAAAAAAwCgYIKoZIzj0EAwIw\n-----END CERTIFICATE-----\n";
const KEY_PEM: &str = "-----BEGIN PRIVATE KEY-----\nMIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg\n-----END PRIVATE KEY-----\n";

// ------------------------------------------------------------------------------------------------
// Routes
// ------------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn routes_list_create_replace_delete() {
    let sim = sim_fast().await;
    let w = sim.world();
    let net = w
        .create_network("k8s", "10.0.0.0/16", "10.0.1.0/24")
        .await
        .unwrap();
    let a = w.create_server("ra", "cx22", "fsn1").await.unwrap();
    let b = w.create_server("rb", "cx22", "fsn1").await.unwrap();
    w.attach_to_network(a, net, Some("10.0.1.10"))
        .await
        .unwrap();
    w.attach_to_network(b, net, Some("10.0.1.11"))
        .await
        .unwrap();
    w.add_route(net, "10.250.0.0/24", "10.0.1.99")
        .await
        .unwrap();
    let p = provider(&sim, |c| c.network = Some("k8s".into())).await;
    let routes = p.routes().unwrap();
    let req = |node: &str, cidr: &str, ip: &str| RouteRequest {
        name_hint: "x".into(),
        target_node: NodeRef::new(node),
        target_addresses: vec![NodeAddress::new(AddressKind::InternalIP, ip)],
        destination_cidr: cidr.into(),
    };
    routes
        .create_route(&req("ra", "10.244.1.0/24", "10.0.1.10"))
        .await
        .unwrap();
    let list = routes.list_routes().await.unwrap();
    let blackhole = list
        .iter()
        .find(|r| r.destination_cidr == "10.250.0.0/24")
        .unwrap();
    assert!(blackhole.blackhole && blackhole.target_node.is_empty());
    let r = list
        .iter()
        .find(|r| r.destination_cidr == "10.244.1.0/24")
        .unwrap();
    assert_eq!(
        r,
        &Route {
            name: "10.0.1.10-10.244.1.0/24".into(),
            target_node: "ra".into(),
            destination_cidr: "10.244.1.0/24".into(),
            gateway: "10.0.1.10".into(),
            blackhole: false,
        }
    );
    // Same route again: no write.
    sim.reset_counters();
    routes
        .create_route(&req("ra", "10.244.1.0/24", "10.0.1.10"))
        .await
        .unwrap();
    assert_eq!(sim.requests("POST", "/networks/{id}/actions/add_route"), 0);
    // Same destination, other node: delete then add.
    routes
        .create_route(&req("rb", "10.244.1.0/24", "10.0.1.11"))
        .await
        .unwrap();
    assert_eq!(
        sim.requests("POST", "/networks/{id}/actions/delete_route"),
        1
    );
    assert_eq!(sim.requests("POST", "/networks/{id}/actions/add_route"), 1);
    let net_json = w.get_network(net).await.unwrap();
    assert!(
        net_json["routes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["gateway"] == "10.0.1.11")
    );
    // Gateway must be one of the node's InternalIPs.
    let e = routes
        .create_route(&req("ra", "10.244.2.0/24", "10.0.1.77"))
        .await
        .unwrap_err();
    assert!(matches!(e, CloudError::InvalidInput { .. }), "{e}");
    // IPv6 is rejected before any call.
    sim.reset_counters();
    let e = routes
        .create_route(&req("ra", "fd00:10:244::/64", "10.0.1.10"))
        .await
        .unwrap_err();
    assert!(matches!(e, CloudError::Unsupported { .. }), "{e}");
    assert_eq!(calls(&sim), 0);
    // Delete, twice.
    let current = routes.list_routes().await.unwrap();
    let r = current
        .iter()
        .find(|r| r.destination_cidr == "10.244.1.0/24")
        .unwrap()
        .clone();
    routes.delete_route(&r).await.unwrap();
    routes
        .delete_route(&Route {
            gateway: String::new(),
            ..r.clone()
        })
        .await
        .unwrap();
    assert!(
        routes
            .list_routes()
            .await
            .unwrap()
            .iter()
            .all(|x| x.destination_cidr != "10.244.1.0/24")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn routes_locked_network_is_retried() {
    let sim = sim_fast().await;
    let w = sim.world();
    let net = w
        .create_network("k8s", "10.0.0.0/16", "10.0.1.0/24")
        .await
        .unwrap();
    let a = w.create_server("la", "cx22", "fsn1").await.unwrap();
    w.attach_to_network(a, net, None).await.unwrap();
    let p = provider(&sim, |c| c.network = Some(net.to_string())).await;
    sim.faults().fail_next(
        Some("POST /networks/{id}/actions/add_route"),
        2,
        423,
        "locked",
    );
    p.routes()
        .unwrap()
        .create_route(&RouteRequest {
            name_hint: "x".into(),
            target_node: NodeRef::new("la"),
            target_addresses: vec![],
            destination_cidr: "10.244.9.0/24".into(),
        })
        .await
        .unwrap();
    assert_eq!(sim.requests("POST", "/networks/{id}/actions/add_route"), 3);
    sim.faults().fail_next(
        Some("POST /networks/{id}/actions/add_route"),
        10,
        409,
        "conflict",
    );
    let e = p
        .routes()
        .unwrap()
        .create_route(&RouteRequest {
            name_hint: "x".into(),
            target_node: NodeRef::new("la"),
            target_addresses: vec![],
            destination_cidr: "10.244.10.0/24".into(),
        })
        .await
        .unwrap_err();
    assert!(e.is_retryable() && e.code() == Some("conflict"), "{e}");
}

// ------------------------------------------------------------------------------------------------
// Pagination and stats
// ------------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pagination_follows_next_page_and_stats_match_the_sim() {
    let sim = sim_fast().await;
    sim.world()
        .create_servers(120, "pg", "cx22", "fsn1")
        .await
        .unwrap();
    sim.reset_counters();
    let p = provider(&sim, |_| {}).await;
    let miss = p
        .instances()
        .instance_exists(&NodeRef::new("no-such-node"))
        .await;
    assert!(miss.is_err_and(|e| e.is_not_found()));
    let pages: Vec<String> = sim
        .request_log()
        .iter()
        .filter(|e| e.endpoint == "/servers")
        .map(|e| e.uri.clone())
        .collect();
    assert_eq!(pages.len(), 3, "{pages:?}");
    assert!(pages.iter().all(|u| u.contains("per_page=50")), "{pages:?}");
    let s = p.stats().snapshot();
    assert_eq!(s.calls_to("GET", "/servers"), 3);
    assert_eq!(s.total_calls(), sim.total_requests());
    assert!(s.rate_limit.unwrap().remaining > 0);
    assert_eq!(
        p.stats().remaining_budget(),
        Some(s.rate_limit.unwrap().remaining)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lb_node_join_costs_only_the_target_write() {
    let sim = sim_fast().await;
    let nodes = sim
        .world()
        .create_servers(4, "j", "cx22", "fsn1")
        .await
        .unwrap();
    let p = provider(&sim, |_| {}).await;
    let lbs = p.load_balancers().unwrap();
    let services: Vec<ServiceRef> = (0..3)
        .map(|i| svc(&format!("join-{i}"), &[("location", "fsn1")]))
        .collect();
    for s in &services {
        lbs.ensure(s, &lb_nodes(&nodes[..3])).await.unwrap();
    }
    sim.reset_counters();
    for s in &services {
        let up = lbs.update_targets(s, &lb_nodes(&nodes)).await.unwrap();
        assert_eq!(up.writes, 1);
    }
    let total = calls(&sim);
    println!(
        "FIGURE lb: one node joining 3 LB Services cost {total} calls ({:.1} per LB: add_target + action poll)",
        total as f64 / 3.0
    );
    assert!(total <= 6, "{:?}", sim.request_counts());
    // A later ensure still reads the LB and sees all four targets: nothing to write.
    sim.reset_counters();
    assert_eq!(
        lbs.ensure(&services[0], &lb_nodes(&nodes))
            .await
            .unwrap()
            .writes,
        0
    );
    assert_eq!(calls(&sim), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lb_takes_over_a_same_named_lb_of_another_service_uid() {
    // HCCM relabels such an LB (a delete-protected LB outliving its Service keeps its IP for the
    // re-created Service); only our label decides what `delete` may remove.
    let sim = sim_fast().await;
    let p = provider(&sim, |_| {}).await;
    let lbs = p.load_balancers().unwrap();
    let first = svc("owner-1", &[("location", "fsn1"), ("name", "shared")]);
    lbs.ensure(&first, &[]).await.unwrap();
    let second = svc("owner-2", &[("location", "fsn1"), ("name", "shared")]);
    let out = lbs.ensure(&second, &[]).await.unwrap();
    let adopted = out
        .warnings
        .iter()
        .find(|w| w.reason == "LoadBalancerAdopted")
        .expect("LoadBalancerAdopted warning");
    assert!(adopted.message.contains("owner-1"), "{}", adopted.message);
    assert_eq!(sim.world().list_load_balancers().await.unwrap().len(), 1);
    assert_eq!(
        sim.world().list_load_balancers().await.unwrap()[0]["labels"]["hcloud-ccm/service-uid"],
        "owner-2"
    );
    assert!(!lbs.delete(&first).await.unwrap().deleted);
    assert_eq!(sim.world().list_load_balancers().await.unwrap().len(), 1);
}

/// Lists lag behind creates: a server missing from every list still exists while `GET
/// /servers/{id}` finds it, and only that read's 404 says it is gone (`cargo xtask chaos`'s
/// "lists omit servers" deleted Nodes of running servers before).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_that_misses_a_server_never_makes_it_gone() {
    let sim = sim_fast().await;
    let w = sim.world();
    let id = w.create_server("lagging", "cx22", "fsn1").await.unwrap();
    sim.faults().omit_items(Some("GET /servers"), 1.0);
    let p = provider(&sim, |c| c.server_cache_miss_fresh = Duration::ZERO).await;
    let inst = p.instances();
    let node = NodeRef::with_provider_id("lagging", format!("hcloud://{id}"));
    assert!(inst.instance_exists(&node).await.unwrap());
    assert_eq!(
        sim.requests("GET", "/servers/{id}"),
        1,
        "asked the server itself"
    );
    let by_name = inst.instance_exists(&NodeRef::new("lagging")).await;
    assert!(
        by_name.is_err_and(|e| e.is_not_found()),
        "a name miss is no proof"
    );
    w.delete_server(id).await.unwrap();
    assert!(!inst.instance_exists(&node).await.unwrap());
}
