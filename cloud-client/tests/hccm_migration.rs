//! Migration from HCCM: every test builds a load balancer exactly as hcloud-cloud-controller-manager
//! would have (its create body, the `add_service` bodies of its `hclbServiceOptsBuilder`, its
//! `add_target` calls), then hands the equivalent Service to our `ensure` and reads cloud-sim's
//! request log: taking over must write nothing, and one changed annotation must write only what it
//! changes. Bad input must be refused before any write.

mod common;

use common::{provider, writes};
use std::sync::Arc;
use std::time::Duration;

use cloud_client::{
    CloudError, IpMode, LbNode, LoadBalancers, PortProtocol, ServicePort, ServiceRef, Warning,
};
use cloud_sim::{Sim, SimClient};
use serde_json::{Value, json};

const LB_PREFIX: &str = "load-balancer.hetzner.cloud/";
const UID_LABEL: &str = "hcloud-ccm/service-uid";
const UID: &str = "6f1c2b3a-4d5e-4f60-8a7b-9c0d1e2f3a4b";

async fn sim_fast() -> Sim {
    common::sim_with_actions(Duration::from_millis(20)).await
}

fn tcp(port: u16, node_port: u16) -> ServicePort {
    ServicePort {
        name: None,
        protocol: PortProtocol::Tcp,
        port,
        node_port,
    }
}

fn svc(uid: &str, ports: Vec<ServicePort>, ann: &[(&str, &str)]) -> ServiceRef {
    ServiceRef {
        uid: uid.to_string(),
        namespace: "default".into(),
        name: "web".into(),
        annotations: ann
            .iter()
            .map(|(k, v)| (format!("{LB_PREFIX}{k}"), v.to_string()))
            .collect(),
        ports,
        ..Default::default()
    }
}

/// Nodes of servers in fsn1, as the node-controller labels them.
fn lb_nodes(ids: &[u64]) -> Vec<LbNode> {
    let region: std::sync::Arc<std::collections::BTreeMap<String, String>> = std::sync::Arc::new(
        [(
            "topology.kubernetes.io/region".to_string(),
            "fsn1".to_string(),
        )]
        .into(),
    );
    ids.iter()
        .map(|id| LbNode {
            name: format!("node-{id}"),
            provider_id: Some(format!("hcloud://{id}")),
            labels: region.clone(),
            internal_ips: vec![],
        })
        .collect()
}

/// Runs `ensure` with a fresh request log and returns the writes it made.
async fn ensure_writes(
    sim: &Sim,
    lbs: &Arc<dyn LoadBalancers>,
    svc: &ServiceRef,
    nodes: &[LbNode],
) -> Vec<String> {
    sim.reset_counters();
    lbs.ensure(svc, nodes).await.unwrap();
    writes(sim)
}

fn action(name: &str) -> String {
    format!("POST /load_balancers/{{id}}/actions/{name}")
}

fn reasons(w: &[Warning]) -> Vec<&str> {
    w.iter().map(|w| w.reason.as_str()).collect()
}

// --- what HCCM sends ------------------------------------------------------------------------------

/// HCCM's `DefaultLoadBalancerName`: `a` + UID without dashes, 32 characters.
fn hccm_name(uid: &str) -> String {
    let mut n: String = std::iter::once('a')
        .chain(uid.chars().filter(|c| *c != '-'))
        .collect();
    n.truncate(32);
    n
}

/// hcops `Create`: name, type, the UID label and the location; nothing else unless configured.
fn hccm_create(uid: &str, name: &str, lb_type: &str, location: &str) -> Value {
    json!({
        "name": name,
        "load_balancer_type": lb_type,
        "labels": {UID_LABEL: uid},
        "location": location,
    })
}

/// `buildAddServiceOpts` with no service annotations: protocol tcp, no `proxyprotocol`, no `http`,
/// health check "TCP on the NodePort" without interval/timeout/retries.
fn hccm_tcp_service(port: u16, node_port: u16) -> Value {
    json!({
        "protocol": "tcp",
        "listen_port": port,
        "destination_port": node_port,
        "health_check": {"protocol": "tcp", "port": node_port},
    })
}

/// Creates the LB, adds its services, then its server targets, one call each as HCCM does.
async fn hccm_lb(w: &SimClient, create: Value, services: &[Value], servers: &[u64]) -> u64 {
    let id = w.create_load_balancer_with(create).await.unwrap();
    for s in services {
        w.load_balancer_action(id, "add_service", s.clone())
            .await
            .unwrap();
    }
    for s in servers {
        let body = json!({"type": "server", "server": {"id": s}, "use_private_ip": false});
        w.load_balancer_action(id, "add_target", body)
            .await
            .unwrap();
    }
    id
}

/// The common case: lb11 in fsn1, ports 80 and 443, the given servers as targets.
async fn hccm_default_lb(w: &SimClient, uid: &str, servers: &[u64]) -> u64 {
    hccm_lb(
        w,
        hccm_create(uid, &hccm_name(uid), "lb11", "fsn1"),
        &[hccm_tcp_service(80, 30080), hccm_tcp_service(443, 30443)],
        servers,
    )
    .await
}

fn web_ports() -> Vec<ServicePort> {
    vec![tcp(80, 30080), tcp(443, 30443)]
}

fn service_on(lb: &Value, port: u16) -> Value {
    lb["services"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["listen_port"] == port)
        .cloned()
        .unwrap_or(Value::Null)
}

// --- migration: zero writes, then only the expected write -----------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hccm_lb_is_taken_over_without_a_write_and_one_annotation_costs_its_updates() {
    let sim = sim_fast().await;
    let w = sim.client();
    let servers = w.create_servers(3, "n", "cx22", "fsn1").await.unwrap();
    let id = hccm_default_lb(&w, UID, &servers).await;
    let ann = [("type", "lb11"), ("location", "fsn1")];
    let s = svc(UID, web_ports(), &ann);
    let p = provider(&sim, |_| {}).await;
    let lbs = p.load_balancers().unwrap();

    sim.reset_counters();
    let out = lbs.ensure(&s, &lb_nodes(&servers)).await.unwrap();
    assert_eq!(writes(&sim), Vec::<String>::new());
    assert_eq!(out.writes, 0);
    assert!(out.warnings.is_empty(), "{:?}", out.warnings);
    let lb = w.get_load_balancer(id).await.unwrap();
    assert_eq!(
        out.status.ingress[0].ip.as_deref(),
        lb["public_net"]["ipv4"]["ip"].as_str()
    );
    assert_eq!(out.status.ingress[0].ip_mode, Some(IpMode::Vip));
    let up = lbs.update_targets(&s, &lb_nodes(&servers)).await.unwrap();
    assert_eq!((up.found, up.writes), (true, 0));
    assert_eq!(writes(&sim), Vec::<String>::new());

    // One annotation: one update_service per port, nothing else.
    let proxied = svc(
        UID,
        web_ports(),
        &[ann[0], ann[1], ("uses-proxyprotocol", "true")],
    );
    sim.reset_counters();
    let out = lbs.ensure(&proxied, &lb_nodes(&servers)).await.unwrap();
    assert_eq!(
        writes(&sim),
        [action("update_service"), action("update_service")]
    );
    assert_eq!(out.status.ingress[0].ip_mode, Some(IpMode::Proxy));
    let lb = w.get_load_balancer(id).await.unwrap();
    assert!(
        lb["services"]
            .as_array()
            .unwrap()
            .iter()
            .all(|s| s["proxyprotocol"] == true)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn port_without_node_port_keeps_its_lb_service() {
    // Item 1: a port whose nodePort is 0 (allocateLoadBalancerNodePorts: false) is neither
    // deleted nor updated; the others are reconciled as usual.
    let sim = sim_fast().await;
    let w = sim.client();
    let id = hccm_default_lb(&w, UID, &[]).await;
    let p = provider(&sim, |_| {}).await;
    let lbs = p.load_balancers().unwrap();
    let ann = [("type", "lb11"), ("location", "fsn1")];
    let ports = vec![tcp(80, 30080), tcp(443, 0)];

    sim.reset_counters();
    let out = lbs
        .ensure(&svc(UID, ports.clone(), &ann), &[])
        .await
        .unwrap();
    assert_eq!(writes(&sim), Vec::<String>::new());
    let w443 = out
        .warnings
        .iter()
        .find(|w| w.reason == "NodePortNotAllocated")
        .expect("NodePortNotAllocated");
    assert!(w443.message.contains("443"), "{}", w443.message);
    let lb = w.get_load_balancer(id).await.unwrap();
    assert_eq!(service_on(&lb, 443)["destination_port"], 30443);

    let proxied = svc(
        UID,
        ports,
        &[ann[0], ann[1], ("uses-proxyprotocol", "true")],
    );
    assert_eq!(
        ensure_writes(&sim, &lbs, &proxied, &[]).await,
        [action("update_service")]
    );
    let lb = w.get_load_balancer(id).await.unwrap();
    assert_eq!(service_on(&lb, 80)["proxyprotocol"], true);
    assert_eq!(service_on(&lb, 443)["proxyprotocol"], false);
    assert_eq!(service_on(&lb, 443)["destination_port"], 30443);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lb_is_renamed_only_by_the_name_annotation() {
    // Item 2: HCCM created the LB under a name annotation that has since been removed; HCCM never
    // renames without the annotation, so neither do we.
    let sim = sim_fast().await;
    let w = sim.client();
    let id = hccm_lb(
        &w,
        hccm_create(UID, "web-lb", "lb11", "fsn1"),
        &[hccm_tcp_service(80, 30080), hccm_tcp_service(443, 30443)],
        &[],
    )
    .await;
    let p = provider(&sim, |_| {}).await;
    let lbs = p.load_balancers().unwrap();
    let ann = [("type", "lb11"), ("location", "fsn1")];

    assert_eq!(
        ensure_writes(&sim, &lbs, &svc(UID, web_ports(), &ann), &[]).await,
        Vec::<String>::new()
    );
    assert_eq!(w.get_load_balancer(id).await.unwrap()["name"], "web-lb");

    let named = svc(UID, web_ports(), &[ann[0], ann[1], ("name", "web-lb-2")]);
    assert_eq!(
        ensure_writes(&sim, &lbs, &named, &[]).await,
        ["PUT /load_balancers/{id}"]
    );
    assert_eq!(w.get_load_balancer(id).await.unwrap()["name"], "web-lb-2");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unlabelled_lb_found_by_name_gets_only_the_label() {
    // Item 2, adoption: an LB from before HCCM labelled LBs (default name, no label) gets the UID
    // label and keeps its name.
    let sim = sim_fast().await;
    let w = sim.client();
    let mut create = hccm_create(UID, &hccm_name(UID), "lb11", "fsn1");
    create["labels"] = json!({"team": "web"});
    let id = hccm_lb(
        &w,
        create,
        &[hccm_tcp_service(80, 30080), hccm_tcp_service(443, 30443)],
        &[],
    )
    .await;
    let p = provider(&sim, |_| {}).await;
    let lbs = p.load_balancers().unwrap();
    let ann = [("type", "lb11"), ("location", "fsn1")];

    sim.reset_counters();
    let out = lbs.ensure(&svc(UID, web_ports(), &ann), &[]).await.unwrap();
    // With the default name, the name lookup is only made once the create is refused because
    // the name is taken (it saves a list for every new Service); the refused create changed
    // nothing.
    assert_eq!(
        writes(&sim),
        ["POST /load_balancers", "PUT /load_balancers/{id}"]
    );
    let refused = sim.request_log();
    assert_eq!(
        refused
            .iter()
            .find(|e| e.method == "POST")
            .map(|e| e.status),
        Some(409)
    );
    assert!(!reasons(&out.warnings).contains(&"LoadBalancerAdopted"));
    let lb = w.get_load_balancer(id).await.unwrap();
    assert_eq!(lb["name"], hccm_name(UID));
    assert_eq!(lb["labels"], json!({"team": "web", UID_LABEL: UID}));

    assert_eq!(
        ensure_writes(&sim, &lbs, &svc(UID, web_ports(), &ann), &[]).await,
        Vec::<String>::new()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unset_proxyprotocol_and_health_check_path_leave_what_hccm_set() {
    // Item 3: the LB was made with uses-proxyprotocol=true and health-check-http-path=/healthz;
    // both annotations are gone now. HCCM would leave both fields out of update_service, i.e.
    // leave them as they are.
    let sim = sim_fast().await;
    let w = sim.client();
    let service = json!({
        "protocol": "http",
        "listen_port": 80,
        "destination_port": 30080,
        "proxyprotocol": true,
        "health_check": {"protocol": "http", "port": 30080, "http": {"path": "/healthz"}},
    });
    let id = hccm_lb(
        &w,
        hccm_create(UID, &hccm_name(UID), "lb11", "fsn1"),
        &[service],
        &[],
    )
    .await;
    let p = provider(&sim, |_| {}).await;
    let lbs = p.load_balancers().unwrap();
    let ann = [
        ("type", "lb11"),
        ("location", "fsn1"),
        ("protocol", "http"),
        ("health-check-protocol", "http"),
    ];

    sim.reset_counters();
    let out = lbs
        .ensure(&svc(UID, vec![tcp(80, 30080)], &ann), &[])
        .await
        .unwrap();
    assert_eq!(writes(&sim), Vec::<String>::new());
    // PROXY protocol is on, so the status says so even though no annotation asks for it.
    assert_eq!(out.status.ingress[0].ip_mode, Some(IpMode::Proxy));
    let lb = w.get_load_balancer(id).await.unwrap();
    assert_eq!(service_on(&lb, 80)["proxyprotocol"], true);
    assert_eq!(
        service_on(&lb, 80)["health_check"]["http"]["path"],
        "/healthz"
    );

    let mut with_path = ann.to_vec();
    with_path.push(("health-check-http-path", "/ready"));
    assert_eq!(
        ensure_writes(&sim, &lbs, &svc(UID, vec![tcp(80, 30080)], &with_path), &[]).await,
        [action("update_service")]
    );
    let lb = w.get_load_balancer(id).await.unwrap();
    assert_eq!(
        service_on(&lb, 80)["health_check"]["http"]["path"],
        "/ready"
    );
    assert_eq!(service_on(&lb, 80)["proxyprotocol"], true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_check_details_alone_keep_tcp_on_the_node_port() {
    // Item 4: HTTP health-check details without protocol/port/interval/timeout/retries do not make
    // HCCM send its custom block; the check stays TCP on the NodePort.
    let sim = sim_fast().await;
    let w = sim.client();
    let service = json!({
        "protocol": "http",
        "listen_port": 80,
        "destination_port": 30080,
        "health_check": {"protocol": "tcp", "port": 30080},
    });
    let id = hccm_lb(
        &w,
        hccm_create(UID, &hccm_name(UID), "lb11", "fsn1"),
        &[service],
        &[],
    )
    .await;
    let p = provider(&sim, |_| {}).await;
    let lbs = p.load_balancers().unwrap();
    let ann = [
        ("type", "lb11"),
        ("location", "fsn1"),
        ("protocol", "http"),
        ("health-check-http-path", "/healthz"),
        ("health-check-http-domain", "example.com"),
        ("http-status-codes", "2??"),
    ];

    assert_eq!(
        ensure_writes(&sim, &lbs, &svc(UID, vec![tcp(80, 30080)], &ann), &[]).await,
        Vec::<String>::new()
    );

    // A trigger (here the port) switches the whole block on, with the details.
    let mut trig = ann.to_vec();
    trig.push(("health-check-port", "30080"));
    assert_eq!(
        ensure_writes(&sim, &lbs, &svc(UID, vec![tcp(80, 30080)], &trig), &[]).await,
        [action("update_service")]
    );
    let hc = service_on(&w.get_load_balancer(id).await.unwrap(), 80)["health_check"].clone();
    assert_eq!(hc["protocol"], "http");
    assert_eq!(hc["http"]["path"], "/healthz");
    assert_eq!(hc["http"]["domain"], "example.com");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn env_health_check_default_matches_hccms_block() {
    // Item 4: with HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_INTERVAL=5s HCCM sends the custom block
    // (protocol = the service's, here http; port = NodePort; interval 5) without any health-check
    // annotation.
    let sim = sim_fast().await;
    let w = sim.client();
    let service = |port: u16, node_port: u16| {
        json!({
            "protocol": "http",
            "listen_port": port,
            "destination_port": node_port,
            "health_check": {"protocol": "http", "port": node_port, "interval": 5, "http": {}},
        })
    };
    let id = hccm_lb(
        &w,
        hccm_create(UID, &hccm_name(UID), "lb11", "fsn1"),
        &[service(80, 30080), service(443, 30443)],
        &[],
    )
    .await;
    let p = provider(&sim, |c| {
        c.load_balancers.defaults.health_check_interval = Some(Duration::from_secs(5));
        c.load_balancers.defaults.location = Some("fsn1".into());
        c.load_balancers.defaults.lb_type = Some("lb11".into());
    })
    .await;
    let lbs = p.load_balancers().unwrap();

    let http = ("protocol", "http");
    assert_eq!(
        ensure_writes(&sim, &lbs, &svc(UID, web_ports(), &[http]), &[]).await,
        Vec::<String>::new()
    );

    assert_eq!(
        ensure_writes(
            &sim,
            &lbs,
            &svc(UID, web_ports(), &[http, ("health-check-retries", "5")]),
            &[],
        )
        .await,
        [action("update_service"), action("update_service")]
    );
    let hc = service_on(&w.get_load_balancer(id).await.unwrap(), 443)["health_check"].clone();
    assert_eq!(
        (
            hc["protocol"].clone(),
            hc["interval"].clone(),
            hc["retries"].clone()
        ),
        (json!("http"), json!(5), json!(5))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn protected_lb_of_a_deleted_service_is_taken_over_by_its_successor() {
    // Item 5: the Service was deleted, its delete-protected LB stayed (and kept its IP); the
    // re-created Service (new UID, same name annotation) takes it over with one label write.
    let sim = sim_fast().await;
    let w = sim.client();
    let old_uid = "0a0a0a0a-1111-4222-8333-444444444444";
    let id = hccm_lb(
        &w,
        hccm_create(old_uid, "keep-ip", "lb11", "fsn1"),
        &[hccm_tcp_service(80, 30080), hccm_tcp_service(443, 30443)],
        &[],
    )
    .await;
    w.load_balancer_action(id, "change_protection", json!({"delete": true}))
        .await
        .unwrap();
    let ip = w.get_load_balancer(id).await.unwrap()["public_net"]["ipv4"]["ip"].clone();
    let p = provider(&sim, |_| {}).await;
    let lbs = p.load_balancers().unwrap();
    let ann = [("type", "lb11"), ("location", "fsn1"), ("name", "keep-ip")];
    let old = svc(old_uid, web_ports(), &ann);
    let gone = lbs.delete(&old).await.unwrap();
    assert!(!gone.deleted);
    assert_eq!(reasons(&gone.warnings), ["DeleteProtected"]);

    sim.reset_counters();
    let out = lbs.ensure(&svc(UID, web_ports(), &ann), &[]).await.unwrap();
    assert_eq!(writes(&sim), ["PUT /load_balancers/{id}"]);
    let adopted = out
        .warnings
        .iter()
        .find(|w| w.reason == "LoadBalancerAdopted")
        .expect("LoadBalancerAdopted");
    assert!(adopted.message.contains(old_uid), "{}", adopted.message);
    assert_eq!(out.status.ingress[0].ip.as_deref(), ip.as_str());
    let lb = w.get_load_balancer(id).await.unwrap();
    assert_eq!(lb["labels"][UID_LABEL], UID);
    // delete only ever goes by our label: the old Service's UID no longer matches anything.
    sim.reset_counters();
    assert!(!lbs.delete(&old).await.unwrap().deleted);
    assert_eq!(writes(&sim), Vec::<String>::new());

    let mut changed = ann.to_vec();
    changed.push(("algorithm-type", "least_connections"));
    assert_eq!(
        ensure_writes(&sim, &lbs, &svc(UID, web_ports(), &changed), &[]).await,
        [action("change_algorithm")]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn location_wins_over_network_zone() {
    // Item 6: HCCM's Create keeps the location when both are set; we warn that the zone is ignored.
    let sim = sim_fast().await;
    let p = provider(&sim, |_| {}).await;
    let lbs = p.load_balancers().unwrap();
    let ann = [
        ("type", "lb11"),
        ("location", "nbg1"),
        ("network-zone", "eu-central"),
    ];
    let out = lbs.ensure(&svc(UID, web_ports(), &ann), &[]).await.unwrap();
    let ignored = out
        .warnings
        .iter()
        .find(|w| w.reason == "NetworkZoneIgnored")
        .expect("NetworkZoneIgnored");
    assert!(
        ignored.message.contains("eu-central"),
        "{}",
        ignored.message
    );
    let lb = &sim.client().list_load_balancers().await.unwrap()[0];
    assert_eq!(lb["location"]["name"], "nbg1");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn annotation_case_is_accepted_as_hccm_does() {
    // Item 6: HCCM lowercases protocol, health-check-protocol and algorithm-type, so an LB it made
    // from `HTTP`, `TCP`, `Least_Connections` has the lowercase values.
    let sim = sim_fast().await;
    let w = sim.client();
    let mut create = hccm_create(UID, &hccm_name(UID), "lb11", "fsn1");
    create["algorithm"] = json!({"type": "least_connections"});
    let service = json!({
        "protocol": "http",
        "listen_port": 80,
        "destination_port": 30080,
        "health_check": {"protocol": "tcp", "port": 30080, "interval": 10},
    });
    hccm_lb(&w, create, &[service], &[]).await;
    let p = provider(&sim, |_| {}).await;
    let lbs = p.load_balancers().unwrap();
    let ann = [
        ("type", "lb11"),
        ("location", "fsn1"),
        ("protocol", "HTTP"),
        ("algorithm-type", "Least_Connections"),
        ("health-check-protocol", "TCP"),
        ("health-check-interval", "10s"),
    ];

    assert_eq!(
        ensure_writes(&sim, &lbs, &svc(UID, vec![tcp(80, 30080)], &ann), &[]).await,
        Vec::<String>::new()
    );

    let mut changed = ann.to_vec();
    changed[3] = ("algorithm-type", "ROUND_ROBIN");
    assert_eq!(
        ensure_writes(&sim, &lbs, &svc(UID, vec![tcp(80, 30080)], &changed), &[]).await,
        [action("change_algorithm")]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follow_up_after_create_plans_against_a_fresh_read() {
    // Item 7: the create response may not show the inline services and targets yet; planning
    // against it would add them a second time (source_port_already_used).
    let sim = sim_fast().await;
    let servers = sim
        .client()
        .create_servers(2, "n", "cx22", "fsn1")
        .await
        .unwrap();
    for field in ["load_balancer.services", "load_balancer.targets"] {
        sim.faults()
            .omit_field(Some("POST /load_balancers"), field, false);
    }
    let p = provider(&sim, |_| {}).await;
    let lbs = p.load_balancers().unwrap();
    let s = svc(UID, web_ports(), &[("type", "lb11"), ("location", "fsn1")]);
    sim.reset_counters();
    let out = lbs.ensure(&s, &lb_nodes(&servers)).await.unwrap();
    assert_eq!(writes(&sim), ["POST /load_balancers"]);
    // The answer misses them: read again (an answer that shows them is planned against as it is).
    assert_eq!(sim.requests("GET", "/load_balancers/{id}"), 1);
    assert_eq!(out.writes, 1);
    let lb = &sim.client().list_load_balancers().await.unwrap()[0];
    assert_eq!(lb["services"].as_array().unwrap().len(), 2);
    assert_eq!(lb["targets"].as_array().unwrap().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn type_change_makes_room_for_the_nodes_hccm_could_not_add() {
    // Item 8: HCCM filled an lb11 (25 targets) and warned on the other 5 Nodes. We do the same,
    // one warning per Node; switching to lb21 adds those 5 in the same reconcile, because the
    // room comes from the new type.
    let sim = sim_fast().await;
    let w = sim.client();
    let servers = w.create_servers(30, "n", "cx22", "fsn1").await.unwrap();
    let id = hccm_default_lb(&w, UID, &servers[..25]).await;
    let p = provider(&sim, |_| {}).await;
    let lbs = p.load_balancers().unwrap();

    sim.reset_counters();
    let out = lbs
        .ensure(
            &svc(UID, web_ports(), &[("type", "lb11"), ("location", "fsn1")]),
            &lb_nodes(&servers),
        )
        .await
        .unwrap();
    assert_eq!(writes(&sim), Vec::<String>::new());
    let full: Vec<&Warning> = out
        .warnings
        .iter()
        .filter(|w| w.reason == "MaxTargetsReached")
        .collect();
    assert_eq!(full.len(), 5, "{:?}", out.warnings);
    for (w, server) in full.iter().zip(&servers[25..]) {
        let node = format!("node-{server}");
        assert_eq!(w.node.as_deref(), Some(node.as_str()));
        assert!(
            w.message.contains(&format!("server {server}")),
            "{}",
            w.message
        );
    }

    sim.reset_counters();
    let out = lbs
        .ensure(
            &svc(UID, web_ports(), &[("type", "lb21"), ("location", "fsn1")]),
            &lb_nodes(&servers),
        )
        .await
        .unwrap();
    let mut expected = vec![action("change_type")];
    expected.extend(std::iter::repeat_n(action("add_target"), 5));
    assert_eq!(writes(&sim), expected);
    assert!(!reasons(&out.warnings).contains(&"MaxTargetsReached"));
    let lb = w.get_load_balancer(id).await.unwrap();
    assert_eq!(lb["targets"].as_array().unwrap().len(), 30);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn managed_certificate_is_found_by_its_label() {
    // Item 9: HCCM labels its managed certificate with the Service UID and finds it by that label,
    // so a changed name annotation does not order a second certificate.
    let sim = sim_fast().await;
    let w = sim.client();
    let cert = w
        .post(
            "/certificates",
            json!({
                "name": format!("ccm-managed-certificate-{UID}"),
                "type": "managed",
                "domain_names": ["example.com"],
                "labels": {UID_LABEL: UID},
            }),
        )
        .await
        .unwrap();
    w.wait_action(cert["action"]["id"].as_u64().unwrap())
        .await
        .unwrap();
    let cert_id = cert["certificate"]["id"].as_u64().unwrap();
    let service = json!({
        "protocol": "https",
        "listen_port": 443,
        "destination_port": 30443,
        "http": {"certificates": [cert_id]},
        "health_check": {"protocol": "tcp", "port": 30443},
    });
    let id = hccm_lb(
        &w,
        hccm_create(UID, &hccm_name(UID), "lb11", "fsn1"),
        &[service],
        &[],
    )
    .await;
    let p = provider(&sim, |_| {}).await;
    let lbs = p.load_balancers().unwrap();
    let ann = [
        ("type", "lb11"),
        ("location", "fsn1"),
        ("protocol", "https"),
        ("certificate-type", "managed"),
        ("http-managed-certificate-domains", "example.com"),
    ];
    let ports = || vec![tcp(443, 30443)];

    assert_eq!(
        ensure_writes(&sim, &lbs, &svc(UID, ports(), &ann), &[]).await,
        Vec::<String>::new()
    );

    let mut renamed = ann.to_vec();
    renamed.push(("http-managed-certificate-name", "web-cert"));
    assert_eq!(
        ensure_writes(&sim, &lbs, &svc(UID, ports(), &renamed), &[]).await,
        Vec::<String>::new()
    );

    renamed.push(("http-redirect-http", "true"));
    assert_eq!(
        ensure_writes(&sim, &lbs, &svc(UID, ports(), &renamed), &[]).await,
        [action("update_service")]
    );
    let lb = w.get_load_balancer(id).await.unwrap();
    assert_eq!(
        service_on(&lb, 443)["http"]["certificates"],
        json!([cert_id])
    );
    assert_eq!(service_on(&lb, 443)["http"]["redirect_http"], true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn empty_type_annotation_means_unset() {
    // Item 10: `type: ""` falls back to HCLOUD_LOAD_BALANCERS_TYPE (here lb21, what HCCM created
    // the LB with), so nothing changes; without env a new LB gets lb11 and the usual warning.
    let sim = sim_fast().await;
    let w = sim.client();
    let id = hccm_lb(
        &w,
        hccm_create(UID, &hccm_name(UID), "lb21", "fsn1"),
        &[hccm_tcp_service(80, 30080), hccm_tcp_service(443, 30443)],
        &[],
    )
    .await;
    let p = provider(&sim, |c| {
        c.load_balancers.defaults.lb_type = Some("lb21".into())
    })
    .await;
    let lbs = p.load_balancers().unwrap();
    let ann = [("type", ""), ("location", "fsn1"), ("certificate-type", "")];

    assert_eq!(
        ensure_writes(&sim, &lbs, &svc(UID, web_ports(), &ann), &[]).await,
        Vec::<String>::new()
    );

    assert_eq!(
        ensure_writes(
            &sim,
            &lbs,
            &svc(UID, web_ports(), &[("type", "lb31"), ann[1]]),
            &[]
        )
        .await,
        [action("change_type")]
    );
    let lb = w.get_load_balancer(id).await.unwrap();
    assert_eq!(lb["load_balancer_type"]["name"], "lb31");

    let no_env = provider(&sim, |_| {}).await;
    let other = "7e7e7e7e-2222-4333-8444-555555555555";
    let out = no_env
        .load_balancers()
        .unwrap()
        .ensure(&svc(other, web_ports(), &ann), &[])
        .await
        .unwrap();
    assert!(reasons(&out.warnings).contains(&"LoadBalancerTypeUnconfigured"));
    let created = w
        .list_load_balancers()
        .await
        .unwrap()
        .into_iter()
        .find(|lb| lb["labels"][UID_LABEL] == other)
        .unwrap();
    assert_eq!(created["load_balancer_type"]["name"], "lb11");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn udp_next_to_tcp_is_skipped_and_the_tcp_ports_served() {
    // HCCM skipped the UDP port with UnsupportedProtocolConfigured and served the TCP ones.
    let sim = sim_fast().await;
    let w = sim.client();
    hccm_default_lb(&w, UID, &[]).await;
    let p = provider(&sim, |_| {}).await;
    let lbs = p.load_balancers().unwrap();
    let mut ports = web_ports();
    ports.push(ServicePort {
        name: Some("dns".into()),
        protocol: PortProtocol::Udp,
        port: 53,
        node_port: 30053,
    });
    sim.reset_counters();
    let out = lbs
        .ensure(
            &svc(UID, ports, &[("type", "lb11"), ("location", "fsn1")]),
            &[],
        )
        .await
        .unwrap();
    assert_eq!(writes(&sim), Vec::<String>::new());
    assert_eq!(reasons(&out.warnings), ["UnsupportedProtocolConfigured"]);
}

// --- bad input: refused before any write ----------------------------------------------------------

fn assert_invalid(e: &CloudError, needles: &[&str]) {
    assert!(matches!(e, CloudError::InvalidInput { .. }), "{e:?}");
    let msg = e.to_string();
    for n in needles {
        assert!(msg.contains(n), "{msg:?} should mention {n:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_without_certificates_is_refused_before_any_write() {
    let sim = sim_fast().await;
    let w = sim.client();
    let p = provider(&sim, |_| {}).await;
    let lbs = p.load_balancers().unwrap();
    let ann = [
        ("type", "lb11"),
        ("location", "fsn1"),
        ("protocol", "https"),
    ];

    sim.reset_counters();
    let e = lbs
        .ensure(&svc(UID, web_ports(), &ann), &[])
        .await
        .unwrap_err();
    assert_invalid(
        &e,
        &["load-balancer.hetzner.cloud/http-certificates", "https"],
    );
    assert_eq!(writes(&sim), Vec::<String>::new());
    assert!(w.list_load_balancers().await.unwrap().is_empty());

    // Switching an existing HCCM LB to https without certificates: no write either.
    hccm_default_lb(&w, UID, &[]).await;
    sim.reset_counters();
    let e = lbs
        .ensure(&svc(UID, web_ports(), &ann), &[])
        .await
        .unwrap_err();
    assert_invalid(&e, &["http-certificates"]);
    assert_eq!(writes(&sim), Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn more_ports_than_the_type_allows_is_refused_before_any_write() {
    let sim = sim_fast().await;
    let w = sim.client();
    let p = provider(&sim, |_| {}).await;
    let lbs = p.load_balancers().unwrap();
    let six: Vec<ServicePort> = (0..6).map(|i| tcp(8000 + i, 30000 + i)).collect();
    let ann = [("type", "lb11"), ("location", "fsn1")];

    sim.reset_counters();
    let e = lbs
        .ensure(&svc(UID, six.clone(), &ann), &[])
        .await
        .unwrap_err();
    assert_invalid(&e, &["6 ports", "lb11", "5"]);
    assert_eq!(writes(&sim), Vec::<String>::new());

    // An HCCM lb21 with the six services: its own limit (15) counts, not lb11's. Made before
    // the controller starts, as in a migration (one made since the list of load balancers a few
    // seconds ago would be found by the create's name clash instead).
    let services: Vec<Value> = (0..6)
        .map(|i| hccm_tcp_service(8000 + i, 30000 + i))
        .collect();
    hccm_lb(
        &w,
        hccm_create(UID, &hccm_name(UID), "lb21", "fsn1"),
        &services,
        &[],
    )
    .await;
    let p = provider(&sim, |_| {}).await;
    let lbs = p.load_balancers().unwrap();
    assert_eq!(
        ensure_writes(&sim, &lbs, &svc(UID, six, &[ann[1]]), &[]).await,
        Vec::<String>::new()
    );
    let sixteen: Vec<ServicePort> = (0..16).map(|i| tcp(8000 + i, 30000 + i)).collect();
    sim.reset_counters();
    let e = lbs
        .ensure(&svc(UID, sixteen, &[ann[1]]), &[])
        .await
        .unwrap_err();
    assert_invalid(&e, &["16 ports", "lb21", "15"]);
    assert_eq!(writes(&sim), Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn service_without_a_servable_port_gets_no_load_balancer() {
    let sim = sim_fast().await;
    let p = provider(&sim, |_| {}).await;
    let lbs = p.load_balancers().unwrap();
    let ann = [("type", "lb11"), ("location", "fsn1")];
    let udp = ServicePort {
        name: None,
        protocol: PortProtocol::Udp,
        port: 53,
        node_port: 30053,
    };
    let sctp = ServicePort {
        protocol: PortProtocol::Sctp,
        port: 9999,
        ..udp.clone()
    };
    for ports in [vec![udp, sctp], vec![tcp(80, 0), tcp(443, 0)]] {
        sim.reset_counters();
        let e = lbs.ensure(&svc(UID, ports, &ann), &[]).await.unwrap_err();
        assert_invalid(&e, &["Service ports", "nodePort"]);
        assert_eq!(writes(&sim), Vec::<String>::new());
    }
    assert!(sim.client().list_load_balancers().await.unwrap().is_empty());
}

/// A mixed cluster's load balancer as HCCM builds it (`ReconcileHCLBTargets` with Robot: Cloud
/// nodes as server targets, each dedicated server as an IP target with its public IPv4) is taken
/// over without a write.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hccm_lb_with_robot_ip_targets_is_taken_over_without_a_write() {
    let sim = sim_fast().await;
    let w = sim.client();
    let servers = w.create_servers(2, "n", "cx22", "fsn1").await.unwrap();
    let number = w
        .create_robot_server("bm-1", "AX41-NVMe", "FSN1-DC14")
        .await
        .unwrap();
    let listed = sim.robot_servers();
    let robot_ip = listed[0].get("server").unwrap_or(&listed[0])["server_ip"]
        .as_str()
        .unwrap()
        .to_string();
    let id = hccm_default_lb(&w, UID, &servers).await;
    w.load_balancer_action(
        id,
        "add_target",
        json!({"type": "ip", "ip": {"ip": robot_ip}}),
    )
    .await
    .unwrap();
    let mut nodes = lb_nodes(&servers);
    nodes.push(LbNode {
        name: "bm-1".into(),
        provider_id: Some(format!("hrobot://{number}")),
        labels: Default::default(),
        internal_ips: vec![],
    });
    let p = provider(&sim, |c| c.robot = common::robot_config(&sim)).await;
    let lbs = p.load_balancers().unwrap();
    let s = svc(UID, web_ports(), &[("type", "lb11"), ("location", "fsn1")]);
    let writes = ensure_writes(&sim, &lbs, &s, &nodes).await;
    assert_eq!(writes, Vec::<String>::new());
    println!(
        "FIGURE migration: HCCM's mixed-cluster load balancer (2 server targets, 1 Robot IP target) adopted with 0 writes"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_load_balancer_made_since_the_last_list_is_adopted_not_duplicated() {
    // The controller lists the project's load balancers once per burst instead of searching per
    // Service. HCCM (or a process before a crash) makes this Service's load balancer right after
    // that list: the create finds the default name taken and adopts it, with no second one.
    let sim = sim_fast().await;
    let w = sim.client();
    let servers = w.create_servers(2, "n", "cx22", "fsn1").await.unwrap();
    let p = provider(&sim, |_| {}).await;
    let lbs = p.load_balancers().unwrap();
    let ann = [("type", "lb11"), ("location", "fsn1")];
    let other = "11111111-2222-3333-4444-555555555555";
    lbs.ensure(&svc(other, web_ports(), &ann), &lb_nodes(&servers))
        .await
        .unwrap();
    let id = hccm_default_lb(&w, UID, &servers).await;
    sim.reset_counters();
    let out = lbs
        .ensure(&svc(UID, web_ports(), &ann), &lb_nodes(&servers))
        .await
        .unwrap();
    assert_eq!(
        sim.requests("GET", "/load_balancers"),
        1,
        "{:?}",
        sim.request_counts()
    );
    assert_eq!(
        writes(&sim),
        ["POST /load_balancers"],
        "the create, refused: name taken"
    );
    assert!(out.warnings.is_empty(), "{:?}", out.warnings);
    let mine: Vec<Value> = w
        .list_load_balancers()
        .await
        .unwrap()
        .into_iter()
        .filter(|lb| lb["labels"][UID_LABEL] == UID)
        .collect();
    assert_eq!(mine.len(), 1, "no duplicate");
    assert_eq!(mine[0]["id"].as_u64(), Some(id));
}
