//! The Robot webservice client against cloud-sim's Robot API: shapes, the cached list, "gone" only
//! from a server's own 404, the shut-off rule, credentials, and the rate-limit backoff.

use std::time::Duration;

use cloud_client::Secret;
use cloud_client::robot::{RobotClient, RobotConfig, RobotCredentials};
use cloud_client::{ClientStats, ErrorClass};
use cloud_sim::Sim;

use crate::sim_fast;

fn config(sim: &Sim) -> RobotConfig {
    crate::common::robot_config(sim)
}

fn client(config: &RobotConfig) -> RobotClient {
    RobotClient::new(config, ClientStats::new())
        .unwrap()
        .expect("enabled with credentials")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_cached_list_serves_lookups_and_only_a_404_says_gone() {
    let sim = sim_fast().await;
    let w = sim.client();
    let a = w
        .create_robot_server("bm-a", "AX41-NVMe", "FSN1-DC14")
        .await
        .unwrap() as i64;
    let b = w
        .create_robot_server("bm-b", "EX44", "HEL1-DC2")
        .await
        .unwrap() as i64;
    let robot = client(&config(&sim));
    sim.reset_counters();

    let by_name = robot.by_name("bm-b").await.unwrap().unwrap();
    assert_eq!(
        (
            by_name.server_number,
            by_name.product.as_str(),
            by_name.dc.as_str()
        ),
        (b, "EX44", "HEL1-DC2")
    );
    assert!(
        by_name
            .server_ip
            .as_deref()
            .is_some_and(|ip| !ip.is_empty())
    );
    assert_eq!(robot.cached(a).await.unwrap().unwrap().server_name, "bm-a");
    assert_eq!(robot.servers().await.unwrap().len(), 2);
    assert!(robot.by_name("nope").await.unwrap().is_none());
    assert_eq!(sim.requests("GET", "/robot/server"), 1, "one list for all");

    // A server missing from the (cached) list is not gone; its own 404 is.
    w.delete_robot_server(a as u64).await.unwrap();
    assert!(
        robot.cached(a).await.unwrap().is_some(),
        "the list is cached"
    );
    assert_eq!(robot.server(a).await.unwrap(), None);
    assert_eq!(robot.server(b).await.unwrap().unwrap().server_name, "bm-b");

    // HCCM's shutdown rule: the reset state's operating_status.
    assert!(!robot.is_shut_off(b).await.unwrap());
    w.robot_power_off(b as u64).await.unwrap();
    assert!(robot.is_shut_off(b).await.unwrap());
    let calls = robot.stats().snapshot();
    assert_eq!(calls.calls_to("GET", "/server"), 1);
    assert_eq!(calls.calls_to("GET", "/server/{number}"), 2);
    assert_eq!(calls.calls_to("GET", "/reset/{number}"), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_credentials_are_a_permanent_error_that_never_shows_them() {
    let sim = sim_fast().await;
    let mut wrong = config(&sim);
    wrong.credentials = Some(RobotCredentials {
        user: Secret::new("SECRETuser"),
        password: Secret::new("SECRETpassword"),
    });
    let robot = client(&wrong);
    let err = robot.servers().await.unwrap_err();
    assert_eq!(err.class(), ErrorClass::Permanent, "{err}");
    let shown = format!("{err} {err:?} {robot:?}");
    assert!(shown.contains("401"), "{shown}");
    assert!(!shown.contains("SECRET"), "{shown}");
    assert!(
        RobotClient::new(&RobotConfig::default(), ClientStats::new())
            .unwrap()
            .is_none(),
        "Robot off: no client"
    );
}

/// Robot's own messages quote no credential, but a text the webservice sends that did would be
/// scrubbed like the Cloud API's: no run of 8 characters of the user or password in the error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_robot_message_that_quotes_the_credentials_is_scrubbed() {
    let sim = sim_fast().await;
    let (user, password) = (sim.robot_user(), sim.robot_password());
    sim.faults().add(cloud_sim::FaultRule {
        endpoint: None,
        count: Some(1),
        probability: 1.0,
        every: None,
        kind: cloud_sim::FaultKind::Error {
            status: Some(403),
            code: "FORBIDDEN".into(),
            message: Some(format!(
                "user {user} with password {password} may not do this"
            )),
        },
    });
    let err = client(&config(&sim)).servers().await.unwrap_err();
    let shown = format!("{err} {err:?}");
    assert!(shown.contains("may not do this"), "{shown}");
    for secret in [&user, &password] {
        let chars: Vec<char> = secret.chars().collect();
        for run in chars.windows(8.min(chars.len())) {
            let run: String = run.iter().collect();
            assert!(!shown.contains(&run), "{run:?} in {shown}");
        }
    }
}

/// Over the Robot rate limit the client makes no call for `ROBOT_RATE_LIMIT_WAIT_TIME`, and
/// lookups are answered from the last list meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_the_rate_limit_it_waits_and_answers_from_the_last_list() {
    let sim = sim_fast().await;
    let number = sim
        .client()
        .create_robot_server("bm", "AX41-NVMe", "FSN1-DC14")
        .await
        .unwrap() as i64;
    let mut cfg = config(&sim);
    // Every lookup wants a fresh list.
    cfg.cache_timeout = Duration::ZERO;
    cfg.rate_limit_wait = Duration::from_secs(60);
    let robot = client(&cfg);
    assert!(robot.cached(number).await.unwrap().is_some());
    sim.set_robot_rate_limit_remaining("server", 0);
    sim.reset_counters();

    // The refused refresh: the last list answers.
    assert!(robot.cached(number).await.unwrap().is_some());
    // From now on no call at all, until the wait is over.
    for _ in 0..5 {
        assert!(robot.cached(number).await.unwrap().is_some());
    }
    let err = robot.server(number).await.unwrap_err();
    assert_eq!(err.code(), Some("rate_limit_exceeded"), "{err}");
    assert!(err.is_retryable());
    assert_eq!(err.retry_after().map(|d| d.as_secs() > 50), Some(true));
    assert_eq!(
        sim.total_requests(),
        1,
        "one refused call, then none: {:?}",
        sim.request_log()
    );
}

/// Dedicated servers answer through the same `Instances` as Cloud servers, with HCCM's metadata:
/// product as instance type, data center as zone, its location as region, `provided-by=robot`,
/// the Node's own InternalIPs forwarded; gone only on the server's 404; shut off per its reset
/// state; a name both APIs know is an error, not a guess.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn robot_nodes_through_the_instances_trait() {
    use cloud_client::{AddressKind, CloudError, NodeRef};
    let sim = sim_fast().await;
    let w = sim.client();
    let number = w
        .create_robot_server("bm-1", "AX41 NVMe", "FSN1-DC14")
        .await
        .unwrap() as i64;
    let robot = config(&sim);
    let p = crate::common::provider(&sim, |c| {
        c.robot = robot.clone();
        c.robot.forward_internal_ips = true;
    })
    .await;
    let inst = p.instances();
    let listed = sim.robot_servers();
    let server = listed[0].get("server").unwrap_or(&listed[0]);
    let server_ip = server["server_ip"]
        .as_str()
        .unwrap_or_else(|| panic!("{listed:?}"))
        .to_string();

    let node = NodeRef::new("bm-1").with_internal_ips([
        "10.1.0.5".to_string(),
        server_ip.clone(),
        "fd00::5".into(),
    ]);
    let md = inst.instance_metadata(&node).await.unwrap();
    assert_eq!(md.provider_id, format!("hrobot://{number}"));
    assert_eq!(md.instance_type, "AX41-NVMe");
    assert_eq!(md.zone.as_deref(), Some("fsn1-dc14"));
    assert_eq!(md.region.as_deref(), Some("fsn1"));
    assert_eq!(
        md.additional_labels["instance.hetzner.cloud/provided-by"],
        "robot"
    );
    let addresses: Vec<(AddressKind, &str)> = md
        .addresses
        .iter()
        .map(|a| (a.kind, a.address.as_str()))
        .collect();
    assert_eq!(
        addresses,
        [
            (AddressKind::Hostname, "bm-1"),
            (AddressKind::ExternalIP, server_ip.as_str()),
            // The public IP is not forwarded again; the IPv6 one does not fit ipv4.
            (AddressKind::InternalIP, "10.1.0.5"),
        ]
    );
    // The legacy providerID form names the same server.
    let legacy = NodeRef::with_provider_id("bm-1", format!("hcloud://bm-{number}"));
    assert_eq!(
        inst.instance_metadata(&legacy).await.unwrap().provider_id,
        md.provider_id
    );

    let by_id = NodeRef::with_provider_id("bm-1", md.provider_id.clone());
    assert!(inst.instance_exists(&by_id).await.unwrap());
    assert!(!inst.instance_shutdown(&by_id).await.unwrap());
    w.robot_power_off(number as u64).await.unwrap();
    assert!(inst.instance_shutdown(&by_id).await.unwrap());
    w.delete_robot_server(number as u64).await.unwrap();
    assert!(
        inst.instance_exists(&by_id).await.unwrap(),
        "the cached list answers until ROBOT_CACHE_TIMEOUT, as in HCCM"
    );
    let fresh = crate::common::provider(&sim, |c| c.robot = robot.clone()).await;
    sim.reset_counters();
    assert!(
        !fresh.instances().instance_exists(&by_id).await.unwrap(),
        "a fresh list misses it, and its own GET says 404"
    );
    assert_eq!(sim.requests("GET", "/robot/server/{server-number}"), 1);

    // One name in both APIs.
    w.create_robot_server("twin", "EX44", "HEL1-DC2")
        .await
        .unwrap();
    w.create_server("twin", "cx22", "fsn1").await.unwrap();
    let p = crate::common::provider(&sim, |c| c.robot = robot.clone()).await;
    let err = p
        .instances()
        .instance_metadata(&NodeRef::new("twin"))
        .await
        .unwrap_err();
    assert!(
        matches!(err, CloudError::Inconsistent { .. }) && err.to_string().contains("both"),
        "{err}"
    );
}

fn lb_node(name: &str, provider_id: String) -> cloud_client::LbNode {
    cloud_client::LbNode {
        name: name.to_string(),
        provider_id: Some(provider_id),
        labels: Default::default(),
        internal_ips: vec!["10.1.0.9".into()],
    }
}

fn ip_targets(lb: &serde_json::Value) -> Vec<String> {
    let mut ips: Vec<String> = lb["targets"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["type"] == "ip")
        .map(|t| t["ip"]["ip"].as_str().unwrap().to_string())
        .collect();
    ips.sort();
    ips
}

/// A mixed cluster's load balancer: Cloud nodes as server targets, dedicated servers as IP targets
/// (their public IPv4 from the Robot API), as HCCM makes them; an IP target that is no current
/// Robot node's is removed; without Robot support the Robot node is left out with a Warning.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn robot_nodes_become_ip_targets_and_stale_ip_targets_go() {
    let sim = sim_fast().await;
    let w = sim.client();
    let cloud = w.create_server("cloud-1", "cx22", "fsn1").await.unwrap();
    let number = w
        .create_robot_server("bm-1", "AX41-NVMe", "FSN1-DC14")
        .await
        .unwrap();
    let listed = sim.robot_servers();
    let server = listed[0].get("server").unwrap_or(&listed[0]);
    let public_ip = server["server_ip"].as_str().unwrap().to_string();
    let nodes = [
        lb_node("cloud-1", format!("hcloud://{cloud}")),
        lb_node("bm-1", format!("hrobot://{number}")),
    ];
    let robot = config(&sim);
    let p = crate::common::provider(&sim, |c| c.robot = robot.clone()).await;
    let lbs = p.load_balancers().unwrap();
    let svc = crate::svc("mixed", &[("location", "fsn1"), ("type", "lb11")]);

    let out = lbs.ensure(&svc, &nodes).await.unwrap();
    assert!(out.warnings.is_empty(), "{:?}", out.warnings);
    let lb = w.list_load_balancers().await.unwrap().remove(0);
    let id = lb["id"].as_u64().unwrap();
    assert_eq!(ip_targets(&lb), vec![public_ip.clone()]);
    assert!(
        lb["targets"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["server"]["id"] == cloud),
        "{lb}"
    );

    // An IP target no Robot node has (a removed server's) goes; the rest stays.
    w.load_balancer_action(
        id,
        "add_target",
        serde_json::json!({"type": "ip", "ip": {"ip": "203.0.113.7"}}),
    )
    .await
    .unwrap();
    sim.reset_counters();
    let out = lbs.ensure(&svc, &nodes).await.unwrap();
    assert_eq!(out.writes, 1, "one remove_target");
    assert_eq!(
        ip_targets(&w.get_load_balancer(id).await.unwrap()),
        vec![public_ip.clone()]
    );
    // Nothing changed: nothing written.
    assert_eq!(lbs.ensure(&svc, &nodes).await.unwrap().writes, 0);

    // Robot off: the dedicated server is no target, and says why.
    let off = crate::common::provider(&sim, |_| {}).await;
    let out = off
        .load_balancers()
        .unwrap()
        .ensure(&svc, &nodes)
        .await
        .unwrap();
    assert!(
        out.warnings
            .iter()
            .any(|w| w.reason == "RobotServerNotSupported"),
        "{:?}",
        out.warnings
    );
    assert!(ip_targets(&w.get_load_balancer(id).await.unwrap()).is_empty());
}
