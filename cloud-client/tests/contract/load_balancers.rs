//! Load balancers: create, minimal updates, adoption, warnings, deletion, private networks,
//! certificates, and what a node joining costs.

use std::time::Duration;

use cloud_client::{IpMode, PortProtocol, ServicePort, ServiceRef};
use serde_json::json;

use crate::common::{provider, writes};
use crate::{calls, k8s_network, lb_nodes, sim_fast, svc};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lb_create_with_two_ports_and_ten_targets_then_no_op() {
    let sim = sim_fast().await;
    let nodes = sim
        .client()
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
    // This client's one list of the project's load balancers (no label lookup per Service), the
    // create and its action; the follow-up plan uses the create's answer, no read-back (and no
    // name lookup: the default name is this Service's own).
    assert!(create_calls <= 3, "{:?}", sim.request_counts());
    assert_eq!(sim.requests("GET", "/load_balancers"), 1);
    assert_eq!(sim.requests("POST", "/load_balancers"), 1);
    assert_eq!(sim.requests("GET", "/load_balancers/{id}"), 0);
    assert!(out.warnings.is_empty(), "{:?}", out.warnings);
    assert_eq!(out.status.ingress.len(), 2);
    assert!(
        out.status
            .ingress
            .iter()
            .all(|i| i.ip_mode == Some(IpMode::Vip))
    );

    let lb = &sim.client().list_load_balancers().await.unwrap()[0];
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
        .client()
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

/// Servers in two network zones: the create names only the load balancer's zone's servers, so
/// the API accepts it. Nodes without a region label are placed by one list of the servers;
/// labelled ones cost no server call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lb_targets_only_the_servers_of_its_network_zone() {
    let sim = sim_fast().await;
    let client = sim.client();
    let eu = client
        .create_servers(2, "eu", "cx22", "nbg1")
        .await
        .unwrap();
    let us = client
        .create_servers(1, "us", "cpx11", "ash")
        .await
        .unwrap();
    let p = provider(&sim, |_| {}).await;
    let lbs = p.load_balancers().unwrap();
    let unlabelled = |ids: &[u64]| -> Vec<cloud_client::LbNode> {
        ids.iter()
            .map(|id| cloud_client::LbNode {
                name: format!("n{id}"),
                provider_id: Some(format!("hcloud://{id}")),
                ..Default::default()
            })
            .collect()
    };
    let all: Vec<u64> = eu.iter().chain(&us).copied().collect();

    let s = svc("zones-1", &[("network-zone", "eu-central")]);
    sim.reset_counters();
    let out = lbs.ensure(&s, &unlabelled(&all)).await.unwrap();
    assert_eq!(
        sim.requests("GET", "/servers"),
        1,
        "one list places them all"
    );
    assert_eq!(
        sim.requests("POST", "/load_balancers"),
        1,
        "accepted at once"
    );
    let lb = &client.list_load_balancers().await.unwrap()[0];
    let mut targets: Vec<u64> = lb["targets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["server"]["id"].as_u64().unwrap())
        .collect();
    targets.sort_unstable();
    assert_eq!(targets, eu);
    let w: Vec<_> = out
        .warnings
        .iter()
        .filter(|w| w.reason == cloud_client::NODES_OUTSIDE_ZONE)
        .collect();
    assert_eq!(w.len(), 1, "{:?}", out.warnings);
    assert!(
        w[0].message.contains(&format!("n{} (ash)", us[0])),
        "{}",
        w[0].message
    );

    // Labelled as the node-controller labels them: no server call, no write.
    let mut labelled = unlabelled(&all);
    for n in &mut labelled {
        let location = if n.name == format!("n{}", us[0]) {
            "ash"
        } else {
            "nbg1"
        };
        n.labels = std::sync::Arc::new(
            [(
                "topology.kubernetes.io/region".to_string(),
                location.to_string(),
            )]
            .into(),
        );
    }
    sim.reset_counters();
    let up = lbs.update_targets(&s, &labelled).await.unwrap();
    assert_eq!(up.writes, 0);
    assert_eq!(calls(&sim), 0, "{:?}", sim.request_counts());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lb_annotation_changes_are_applied_minimally() {
    let sim = sim_fast().await;
    let nodes = sim
        .client()
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
    let lb = &sim.client().list_load_balancers().await.unwrap()[0];
    assert_eq!(lb["name"], "renamed-lb");
    assert_eq!(lb["algorithm"]["type"], "least_connections");
    assert_eq!(lb["services"][0]["health_check"]["interval"], 7);
    sim.reset_counters();
    assert_eq!(lbs.ensure(&s2, &lb_nodes(&nodes)).await.unwrap().writes, 0);
}

/// A load balancer made outside the cluster (no label of ours or HCCM's) is adopted by the name
/// a Service gives only with its owner's consent on it (`cloud-controllers.io/adopt=<namespace>`,
/// or as spelt before 0.2, `cloud-controllers/adopt`, which this test uses),
/// or with HCCM's adoption by name turned on (`HCLOUD_LOAD_BALANCERS_ADOPT_BY_NAME`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lb_adopts_an_existing_lb_by_name_with_consent() {
    let sim = sim_fast().await;
    let nodes = sim
        .client()
        .create_servers(2, "a", "cx22", "fsn1")
        .await
        .unwrap();
    let existing = sim
        .client()
        .create_load_balancer("legacy-lb", "lb11", "fsn1")
        .await
        .unwrap();
    let p = provider(&sim, |_| {}).await;
    let lbs = p.load_balancers().unwrap();
    let s = svc("adopt-1", &[("name", "legacy-lb")]);
    sim.reset_counters();
    let refused = lbs.ensure(&s, &lb_nodes(&nodes)).await.unwrap_err();
    assert!(
        refused.to_string().contains(
            "hcloud load-balancer add-label legacy-lb cloud-controllers.io/adopt=default"
        ),
        "{refused}"
    );
    assert_eq!(
        writes(&sim),
        Vec::<String>::new(),
        "refused before any write"
    );

    // HCCM's adoption by name, turned on for a migration: adopted without the label.
    let migrating = provider(&sim, |c| {
        c.load_balancers.defaults.tenancy.adopt_by_name = true
    })
    .await;
    let other = svc("adopt-2", &[("name", "legacy-lb"), ("location", "fsn1")]);
    let by_name = migrating.load_balancers().unwrap();
    by_name.ensure(&other, &lb_nodes(&nodes)).await.unwrap();
    let lb = sim.client().get_load_balancer(existing).await.unwrap();
    assert_eq!(lb["labels"]["hcloud-ccm/service-uid"], "adopt-2");
    sim.client().delete_load_balancer(existing).await.unwrap();

    // The owner's consent.
    let existing = sim
        .client()
        .create_load_balancer_with(json!({
            "name": "legacy-lb", "load_balancer_type": "lb11", "location": "fsn1",
            "labels": {"cloud-controllers/adopt": "default"},
        }))
        .await
        .unwrap();
    sim.reset_counters();
    lbs.ensure(&s, &lb_nodes(&nodes)).await.unwrap();
    assert_eq!(sim.requests("POST", "/load_balancers"), 0);
    assert_eq!(sim.requests("PUT", "/load_balancers/{id}"), 1);
    let lb = sim.client().get_load_balancer(existing).await.unwrap();
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
        .client()
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
    let lb = &sim.client().list_load_balancers().await.unwrap()[0];
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
        .client()
        .create_servers(1, "d", "cx22", "fsn1")
        .await
        .unwrap();
    let p = provider(&sim, |_| {}).await;
    let lbs = p.load_balancers().unwrap();
    let s = svc("del-1", &[("location", "fsn1")]);
    lbs.ensure(&s, &lb_nodes(&nodes)).await.unwrap();
    let out = lbs.delete(&s).await.unwrap();
    assert!(out.deleted);
    assert!(sim.client().list_load_balancers().await.unwrap().is_empty());
    let again = lbs.delete(&s).await.unwrap();
    assert!(!again.deleted);

    // Protected: kept, reported as a warning.
    let s2 = svc("del-2", &[("location", "fsn1")]);
    lbs.ensure(&s2, &lb_nodes(&nodes)).await.unwrap();
    let id = sim.client().list_load_balancers().await.unwrap()[0]["id"]
        .as_u64()
        .unwrap();
    sim.client()
        .load_balancer_action(id, "change_protection", json!({"delete": true}))
        .await
        .unwrap();
    let out = lbs.delete(&s2).await.unwrap();
    assert!(!out.deleted);
    assert_eq!(out.warnings[0].reason, "DeleteProtected");
    assert_eq!(sim.client().list_load_balancers().await.unwrap().len(), 1);

    // A same-named LB without our label is never deleted.
    let foreign = svc("del-3", &[("name", "someone-elses")]);
    sim.client()
        .create_load_balancer("someone-elses", "lb11", "fsn1")
        .await
        .unwrap();
    assert!(!lbs.delete(&foreign).await.unwrap().deleted);
    assert_eq!(sim.client().list_load_balancers().await.unwrap().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lb_private_network_targets_and_status() {
    let sim = sim_fast().await;
    let w = sim.client();
    let net = k8s_network(&sim).await;
    let nodes = w.create_servers(2, "p", "cx22", "fsn1").await.unwrap();
    for n in &nodes {
        w.attach_to_network(*n, net, None).await.unwrap();
    }
    let p = provider(&sim, |c| c.network.name_or_id = Some(net.to_string())).await;
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
        .client()
        .create_servers(1, "h", "cx22", "fsn1")
        .await
        .unwrap();
    // The simulator checks uploads as Hetzner does: a real certificate and its key.
    let (cert_pem, key_pem) = cloud_sim::test_certs::self_signed(&["example.com"]);
    let cert = sim
        .client()
        .create_certificate("my-cert", &cert_pem, &key_pem)
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
    let lb = &sim.client().list_load_balancers().await.unwrap()[0];
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lb_settings_per_port_over_the_service_wide_ones() {
    let sim = sim_fast().await;
    let nodes = sim
        .client()
        .create_servers(1, "pp", "cx22", "fsn1")
        .await
        .unwrap();
    // The simulator checks uploads as Hetzner does: a real certificate and its key.
    let (cert_pem, key_pem) = cloud_sim::test_certs::self_signed(&["example.com"]);
    let cert = sim
        .client()
        .create_certificate("port-cert", &cert_pem, &key_pem)
        .await
        .unwrap();
    let p = provider(&sim, |_| {}).await;
    let lbs = p.load_balancers().unwrap();
    // 80: the Service-wide http, PROXY protocol for this port only; 443: https with its own
    // certificate and an HTTP health check on /ready.
    let s = svc(
        "per-port",
        &[
            ("location", "fsn1"),
            ("protocol", "http"),
            ("uses-proxyprotocol.80", "true"),
            ("protocol.443", "https"),
            ("http-certificates.443", "port-cert"),
            ("health-check-protocol.443", "http"),
            ("health-check-http-path.443", "/ready"),
        ],
    );
    lbs.ensure(&s, &lb_nodes(&nodes)).await.unwrap();
    let lb = &sim.client().list_load_balancers().await.unwrap()[0];
    let by_port = |port: u64| {
        lb["services"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["listen_port"] == port)
            .cloned()
            .unwrap()
    };
    let (p80, p443) = (by_port(80), by_port(443));
    assert_eq!(p80["protocol"], "http");
    assert_eq!(p80["proxyprotocol"], true);
    assert_eq!(p80["health_check"]["protocol"], "tcp");
    assert_eq!(p443["protocol"], "https");
    assert_eq!(p443["proxyprotocol"], false);
    assert_eq!(p443["http"]["certificates"][0].as_u64(), Some(cert));
    assert_eq!(p443["health_check"]["protocol"], "http");
    assert_eq!(p443["health_check"]["http"]["path"], "/ready");
    // As asked: nothing more to write.
    assert_eq!(lbs.ensure(&s, &lb_nodes(&nodes)).await.unwrap().writes, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lb_node_join_costs_only_the_target_write() {
    let sim = sim_fast().await;
    let nodes = sim
        .client()
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
    assert_eq!(sim.client().list_load_balancers().await.unwrap().len(), 1);
    assert_eq!(
        sim.client().list_load_balancers().await.unwrap()[0]["labels"]["hcloud-ccm/service-uid"],
        "owner-2"
    );
    assert!(!lbs.delete(&first).await.unwrap().deleted);
    assert_eq!(sim.client().list_load_balancers().await.unwrap().len(), 1);
}

/// HCCM v1.36: a load balancer of a deprecated type gets a `LoadBalancerTypeDeprecated` Warning
/// (cloud-sim's catalogue deprecates one type, as the API marks it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deprecated_type_is_served_with_a_warning() {
    let sim = sim_fast().await;
    let name = "lb01"; // deprecated in cloud-sim's catalogue, still orderable
    let nodes = sim
        .client()
        .create_servers(1, "dep", "cx22", "fsn1")
        .await
        .unwrap();
    let p = provider(&sim, |_| {}).await;
    let lbs = p.load_balancers().unwrap();
    let s = svc("dep-1", &[("location", "fsn1"), ("type", name)]);
    let out = lbs.ensure(&s, &lb_nodes(&nodes)).await.unwrap();
    let warning = out
        .warnings
        .iter()
        .find(|w| w.reason == "LoadBalancerTypeDeprecated")
        .unwrap_or_else(|| panic!("{:?}", out.warnings));
    assert!(warning.message.contains(name), "{}", warning.message);
}

/// Drift checks (`check_drift`) compare against a read shared by every Service: once the
/// remembered load balancers are older than the read age, the first check lists them all and the
/// others use that list. A change made outside (a target removed in the console) is still seen
/// and repaired.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drift_checks_of_many_services_share_one_list_and_still_repair() {
    let sim = sim_fast().await;
    let nodes = sim
        .client()
        .create_servers(3, "d", "cx22", "fsn1")
        .await
        .unwrap();
    let p = provider(&sim, |_| {}).await;
    let lbs = p.load_balancers().unwrap();
    let services: Vec<ServiceRef> = (0..3)
        .map(|i| svc(&format!("drift-{i}"), &[("location", "fsn1")]))
        .collect();
    for s in &services {
        lbs.ensure(s, &lb_nodes(&nodes)).await.unwrap();
    }
    let drifted = sim.client().list_load_balancers().await.unwrap()[0]["id"]
        .as_u64()
        .unwrap();
    sim.client()
        .load_balancer_action(
            drifted,
            "remove_target",
            json!({"type": "server", "server": {"id": nodes[0]}}),
        )
        .await
        .unwrap();
    // What the ensures remembered must be older than the read age (the data ages; nothing is
    // waited for).
    let read_age = Duration::from_secs(2);
    tokio::time::sleep(read_age + Duration::from_millis(100)).await;
    sim.reset_counters();
    let mut writes = 0;
    for s in &services {
        writes += lbs
            .check_drift(s, &lb_nodes(&nodes), read_age)
            .await
            .unwrap()
            .writes;
    }
    assert_eq!(sim.requests("GET", "/load_balancers"), 1, "one shared list");
    assert_eq!(
        sim.requests("GET", "/load_balancers/{id}"),
        0,
        "no read each"
    );
    assert_eq!(writes, 1, "the removed target is back");
    assert_eq!(
        sim.requests("POST", "/load_balancers/{id}/actions/add_target"),
        1
    );
}
