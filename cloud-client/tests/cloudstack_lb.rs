//! Contract tests of CloudStack's load balancers against cloud-sim over HTTP: upstream's rule
//! names, TCP/UDP/PROXY, members by providerID, source ranges as firewall rules (isolated
//! networks) and ACL rules (VPC tiers), minimal writes, deletion, faults.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cloud_client::cloudstack::load_balancer::address::ADDRESS_RECORD;
use cloud_client::cloudstack::load_balancer::spec::IP_ASSOCIATED;
use cloud_client::cloudstack::{CloudStackClients, CloudStackConfig, JobPolling};
use cloud_client::retry::RetryPolicy;
use cloud_client::{CloudError, LbNode, PortProtocol, Recorder, Secret, ServicePort, ServiceRef};
use cloud_sim::{CloudStackClient, CsVmSpec, Sim};
use serde_json::{Value, json};

const UID: &str = "0216b82c-7038-4967-824d-fd72bf91f4f0";
const LB: &str = "a0216b82c70384967824dfd72bf91f4f";
const PROXY: &str = "service.beta.kubernetes.io/cloudstack-load-balancer-proxy-protocol";

async fn provider(sim: &Sim) -> CloudStackClients {
    let mut c = CloudStackConfig::new(
        sim.cloudstack_endpoint(),
        Secret::new(sim.cloudstack_api_key()),
        Secret::new(sim.cloudstack_secret_key()),
    );
    c.client.retry = RetryPolicy {
        max_attempts: 4,
        base: Duration::from_millis(5),
        cap: Duration::from_millis(50),
    };
    c.client.jobs = JobPolling {
        initial: Duration::from_millis(10),
        factor: 1.5,
        max: Duration::from_millis(50),
        timeout: Duration::from_secs(5),
    };
    CloudStackClients::new(c).await.expect("provider")
}

fn port(protocol: PortProtocol, port: u16, node_port: u16) -> ServicePort {
    ServicePort {
        name: None,
        protocol,
        port,
        node_port,
    }
}

fn svc(ports: Vec<ServicePort>, ranges: &[&str], ann: &[(&str, &str)]) -> ServiceRef {
    ServiceRef {
        uid: UID.into(),
        namespace: "ns".into(),
        name: "web".into(),
        annotations: ann
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        ports,
        source_ranges: ranges.iter().map(|r| r.to_string()).collect(),
        ..Default::default()
    }
}

fn nodes(vms: &[String]) -> Vec<LbNode> {
    vms.iter()
        .enumerate()
        .map(|(i, id)| LbNode {
            name: format!("node-{i}"),
            provider_id: Some(format!("external-cloudstack://{id}")),
            ..Default::default()
        })
        .collect()
}

async fn vms(cs: &CloudStackClient, n: usize, network: Option<&str>) -> Vec<String> {
    let mut out = Vec::new();
    for i in 0..n {
        let mut spec = CsVmSpec::named(&format!("node-{i}-{}", network.unwrap_or("default")));
        if let Some(net) = network {
            spec = spec.network(net);
        }
        out.push(cs.create_vm(&spec).await.unwrap());
    }
    out
}

async fn list(
    cs: &CloudStackClient,
    command: &str,
    params: &[(&str, &str)],
    key: &str,
) -> Vec<Value> {
    let v = cs.unfaulted().call(command, params).await.unwrap();
    v[key].as_array().cloned().unwrap_or_default()
}

async fn rules(cs: &CloudStackClient) -> Vec<Value> {
    let mut r = list(
        cs,
        "listLoadBalancerRules",
        &[("keyword", LB), ("listall", "true")],
        "loadbalancerrule",
    )
    .await;
    r.sort_by_key(|r| r["name"].as_str().unwrap_or_default().to_owned());
    r
}

async fn members(cs: &CloudStackClient, rule: &Value) -> Vec<String> {
    let mut m: Vec<String> = list(
        cs,
        "listLoadBalancerRuleInstances",
        &[("id", rule["id"].as_str().unwrap())],
        "loadbalancerruleinstance",
    )
    .await
    .iter()
    .map(|v| v["id"].as_str().unwrap().to_owned())
    .collect();
    m.sort();
    m
}

const WRITES: [&str; 11] = [
    "associateIpAddress",
    "disassociateIpAddress",
    "createLoadBalancerRule",
    "deleteLoadBalancerRule",
    "assignToLoadBalancerRule",
    "removeFromLoadBalancerRule",
    "createFirewallRule",
    "deleteFirewallRule",
    "createNetworkACL",
    "deleteNetworkACL",
    "updateLoadBalancerRule",
];

fn writes(sim: &Sim) -> u64 {
    WRITES.iter().map(|c| sim.cloudstack_calls(c)).sum()
}

#[tokio::test]
async fn tcp_udp_and_proxy_get_upstreams_rules_members_and_firewall_and_changes_are_minimal() {
    let sim = Sim::start().await;
    let cs = sim.cloudstack_client();
    let mut ids = vms(&cs, 3, None).await;
    ids.sort();
    let p = provider(&sim).await;
    let lbs = p.load_balancers();
    let ports = vec![
        port(PortProtocol::Tcp, 443, 31443),
        port(PortProtocol::Udp, 53, 30053),
    ];
    let s = svc(ports.clone(), &["203.0.113.0/24"], &[(PROXY, "true")]);
    let out = lbs.ensure(&s, &nodes(&ids)).await.unwrap();
    let ip = out.status.ingress[0].ip.clone().expect("an address");
    // associate, 2 rules, 2 assigns, 2 firewall rules.
    assert_eq!((out.writes, writes(&sim)), (7, 7));
    let r = rules(&cs).await;
    let names: Vec<&str> = r.iter().map(|r| r["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [format!("{LB}-tcp-proxy-443"), format!("{LB}-udp-53")]
    );
    assert_eq!(r[0]["protocol"], "tcp-proxy");
    assert_eq!(
        (r[0]["publicport"].as_str(), r[0]["privateport"].as_str()),
        (Some("443"), Some("31443"))
    );
    assert_eq!(r[0]["publicip"], ip.as_str());
    for rule in &r {
        assert_eq!(members(&cs, rule).await, ids);
    }
    let ip_id = r[0]["publicipid"].as_str().unwrap().to_owned();
    let fw = list(
        &cs,
        "listFirewallRules",
        &[("ipaddressid", &ip_id)],
        "firewallrule",
    )
    .await;
    let mut fw: Vec<(String, u64, String)> = fw
        .iter()
        .map(|f| {
            (
                f["protocol"].as_str().unwrap().into(),
                f["startport"].as_u64().unwrap(),
                f["cidrlist"].as_str().unwrap().into(),
            )
        })
        .collect();
    fw.sort();
    assert_eq!(
        fw,
        [
            ("tcp".into(), 443, "203.0.113.0/24".into()),
            ("udp".into(), 53, "203.0.113.0/24".into())
        ]
    );

    // Nothing changed: no write.
    let again = lbs.ensure(&s, &nodes(&ids)).await.unwrap();
    assert_eq!((again.writes, writes(&sim)), (0, 7));
    assert_eq!(again.status, out.status);
    assert_eq!(lbs.get(&s).await.unwrap(), Some(out.status.clone()));

    // A node leaves: one remove per rule.
    let two = &ids[..2];
    let up = lbs.update_targets(&s, &nodes(two)).await.unwrap();
    assert!(up.found);
    assert_eq!(
        (
            up.writes,
            sim.cloudstack_calls("removeFromLoadBalancerRule")
        ),
        (2, 2)
    );
    // A member removed by hand comes back.
    cs.call_async(
        "removeFromLoadBalancerRule",
        &[
            ("id", r[1]["id"].as_str().unwrap()),
            ("virtualmachineids", &ids[0]),
        ],
    )
    .await
    .unwrap();
    let before = writes(&sim);
    let fixed = lbs.ensure(&s, &nodes(two)).await.unwrap();
    assert_eq!((fixed.writes, writes(&sim) - before), (1, 1));
    assert_eq!(members(&cs, &rules(&cs).await[1]).await, two.to_vec());

    // The ranges change: one firewall rule made, one deleted per port; the rules stay.
    let before = writes(&sim);
    let wider = svc(
        ports.clone(),
        &["198.51.100.0/24", "203.0.113.0/24"],
        &[(PROXY, "true")],
    );
    let changed = lbs.ensure(&wider, &nodes(two)).await.unwrap();
    assert_eq!(changed.writes, 4);
    assert_eq!(sim.cloudstack_calls("createLoadBalancerRule"), 2);
    assert_eq!(writes(&sim) - before, 4);

    // A port goes: its rule and firewall rule only.
    let before = writes(&sim);
    let tcp_only = svc(
        vec![ports[0].clone()],
        &["198.51.100.0/24", "203.0.113.0/24"],
        &[(PROXY, "true")],
    );
    let fewer = lbs.ensure(&tcp_only, &nodes(two)).await.unwrap();
    assert_eq!((fewer.writes, writes(&sim) - before), (2, 2));
    assert_eq!(rules(&cs).await.len(), 1);

    // Delete: the address we associated goes, with its rules and firewall rules (one write).
    let before = writes(&sim);
    let gone = lbs.delete(&tcp_only).await.unwrap();
    assert!(gone.deleted);
    assert_eq!(writes(&sim) - before, 1);
    assert!(rules(&cs).await.is_empty());
    let left = list(
        &cs,
        "listPublicIpAddresses",
        &[("ipaddress", &ip)],
        "publicipaddress",
    )
    .await;
    assert!(left.is_empty(), "{left:?}");
    assert!(!lbs.delete(&tcp_only).await.unwrap().deleted);
}

#[tokio::test]
async fn a_held_load_balancer_ip_is_used_kept_and_refused_when_anothers_rule_has_the_port() {
    let sim = Sim::start().await;
    let cs = sim.cloudstack_client();
    let ids = vms(&cs, 1, None).await;
    let world = cs.world().await.unwrap();
    let net = world["networks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["name"] == "default-zone-1")
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let held = cs
        .call_async("associateIpAddress", &[("networkid", &net)])
        .await
        .unwrap()["ipaddress"]
        .clone();
    let (held_id, held_ip) = (
        held["id"].as_str().unwrap().to_owned(),
        held["ipaddress"].as_str().unwrap().to_owned(),
    );
    // Someone else's rule on port 80 of that address.
    cs.call_async(
        "createLoadBalancerRule",
        &[
            ("name", "cks-api"),
            ("algorithm", "roundrobin"),
            ("publicport", "80"),
            ("privateport", "6443"),
            ("publicipid", &held_id),
            ("networkid", &net),
            ("openfirewall", "false"),
        ],
    )
    .await
    .unwrap();
    let p = provider(&sim).await;
    let lbs = p.load_balancers();
    let mut s = svc(vec![port(PortProtocol::Tcp, 80, 30080)], &[], &[]);
    s.load_balancer_ip = Some(held_ip.clone());
    let before = writes(&sim);
    let e = lbs.ensure(&s, &nodes(&ids)).await.unwrap_err();
    assert!(matches!(e, CloudError::Conflict { .. }), "{e}");
    assert!(e.to_string().contains("cks-api"), "{e}");
    assert_eq!(writes(&sim), before, "nothing written");
    // Another port of the same address: used, and kept on delete.
    s.ports = vec![port(PortProtocol::Tcp, 8080, 30080)];
    let out = lbs.ensure(&s, &nodes(&ids)).await.unwrap();
    assert_eq!(out.status.ingress[0].ip.as_deref(), Some(held_ip.as_str()));
    assert_eq!(
        sim.cloudstack_calls("associateIpAddress"),
        1,
        "only the test's own"
    );
    assert!(lbs.delete(&s).await.unwrap().deleted);
    let still = list(
        &cs,
        "listPublicIpAddresses",
        &[("id", &held_id)],
        "publicipaddress",
    )
    .await;
    assert_eq!(still.len(), 1);
    let theirs = list(
        &cs,
        "listLoadBalancerRules",
        &[("publicipid", &held_id)],
        "loadbalancerrule",
    )
    .await;
    assert_eq!(theirs.len(), 1, "{theirs:?}");
    assert_eq!(theirs[0]["name"], "cks-api");
    // An address the project does not hold and that is not free: refused, nothing associated.
    s.load_balancer_ip = Some("198.18.0.1".into());
    let e = lbs.ensure(&s, &nodes(&ids)).await.unwrap_err();
    assert!(e.to_string().contains("spec.loadBalancerIP"), "{e}");
}

#[tokio::test]
async fn vpc_tiers_get_acl_rules_on_the_nodeport_and_shared_networks_refuse_ranges() {
    let sim = Sim::start().await;
    let cs = sim.cloudstack_client();
    let tier = cs
        .create_network(
            json!({"name": "tier-1", "kind": "vpc_tier", "vpc": "vpc-k8s", "acl": "k8s-acl"}),
        )
        .await
        .unwrap();
    let ids = vms(&cs, 2, Some(&tier)).await;
    let p = provider(&sim).await;
    let lbs = p.load_balancers();
    let s = svc(
        vec![port(PortProtocol::Tcp, 80, 30080)],
        &["203.0.113.0/24"],
        &[],
    );
    let out = lbs.ensure(&s, &nodes(&ids)).await.unwrap();
    assert!(out.status.ingress[0].ip.is_some());
    assert_eq!(sim.cloudstack_calls("createFirewallRule"), 0);
    let acl = list(
        &cs,
        "listNetworkACLs",
        &[("networkid", &tier)],
        "networkacl",
    )
    .await;
    assert_eq!(acl.len(), 1, "{acl:?}");
    assert_eq!(
        (
            acl[0]["startport"].as_str(),
            acl[0]["cidrlist"].as_str(),
            acl[0]["reason"].as_str()
        ),
        (
            Some("30080"),
            Some("203.0.113.0/24"),
            Some(format!("{LB}-tcp-80").as_str())
        )
    );
    let again = lbs.ensure(&s, &nodes(&ids)).await.unwrap();
    assert_eq!(again.writes, 0);
    assert!(lbs.delete(&s).await.unwrap().deleted);
    assert!(
        list(
            &cs,
            "listNetworkACLs",
            &[("networkid", &tier)],
            "networkacl"
        )
        .await
        .is_empty()
    );
    assert!(rules(&cs).await.is_empty());

    // A shared network filters nothing: ranges are refused before any write.
    let shared = cs
        .create_network(json!({"name": "shared-1", "kind": "shared"}))
        .await
        .unwrap();
    let on_shared = vms(&cs, 1, Some(&shared)).await;
    let before = writes(&sim);
    let e = lbs.ensure(&s, &nodes(&on_shared)).await.unwrap_err();
    assert!(
        e.to_string().contains("spec.loadBalancerSourceRanges"),
        "{e}"
    );
    assert_eq!(writes(&sim), before);
}

#[tokio::test]
async fn failed_jobs_leave_nothing_half_made_and_the_next_reconcile_finishes() {
    let sim = Sim::start().await;
    let cs = sim.cloudstack_client();
    let ids = vms(&cs, 2, None).await;
    let p = provider(&sim).await;
    let lbs = p.load_balancers();
    let s = svc(vec![port(PortProtocol::Tcp, 80, 30080)], &[], &[]);
    // The rule's job fails: the address this reconcile associated is released again.
    sim.cloudstack_fail_jobs(Some("createLoadBalancerRule"), 1, 530);
    let e = lbs.ensure(&s, &nodes(&ids)).await.unwrap_err();
    assert!(e.to_string().contains("createLoadBalancerRule"), "{e}");
    assert_eq!(sim.cloudstack_calls("disassociateIpAddress"), 1);
    let held = list(
        &cs,
        "listPublicIpAddresses",
        &[("issourcenat", "false")],
        "publicipaddress",
    )
    .await;
    assert!(held.is_empty(), "leaked: {held:?}");
    // The members' job fails: the rule stays, and the next reconcile assigns them.
    sim.cloudstack_fail_jobs(Some("assignToLoadBalancerRule"), 1, 530);
    assert!(lbs.ensure(&s, &nodes(&ids)).await.is_err());
    let ok = lbs.ensure(&s, &nodes(&ids)).await.unwrap();
    assert_eq!(
        sim.cloudstack_calls("createLoadBalancerRule"),
        3,
        "no duplicate"
    );
    assert!(ok.writes >= 1);
    let r = rules(&cs).await;
    assert_eq!(r.len(), 1);
    let mut want = ids.clone();
    want.sort();
    assert_eq!(members(&cs, &r[0]).await, want);
    // A 530 on a read is retried.
    sim.cloudstack_fail_next(Some("listLoadBalancerRules"), 1, 530);
    assert_eq!(lbs.ensure(&s, &nodes(&ids)).await.unwrap().writes, 0);
    // SCTP is refused naming the field, before any call.
    let before = sim.cloudstack_total_calls();
    let sctp = svc(vec![port(PortProtocol::Sctp, 80, 30080)], &[], &[]);
    let e = lbs.ensure(&sctp, &nodes(&ids)).await.unwrap_err();
    assert!(e.to_string().contains("spec.ports[0].protocol"), "{e}");
    assert_eq!(sim.cloudstack_total_calls(), before);
}

/// A Service whose annotations are what the recorder wrote so far, as the controller's next
/// read of it would be.
fn recorded_svc(
    ports: Vec<ServicePort>,
    book: &Arc<Mutex<BTreeMap<String, String>>>,
) -> ServiceRef {
    let mut s = svc(ports, &[], &[]);
    s.annotations = book.lock().unwrap().clone();
    let b = book.clone();
    s.recorder = Recorder::new(move |k, v| {
        b.lock().unwrap().insert(k, v);
        async { Ok(()) }
    });
    s
}

#[tokio::test]
async fn an_address_left_without_rules_is_found_by_its_record_used_and_released() {
    let sim = Sim::start().await;
    let cs = sim.cloudstack_client();
    let ids = vms(&cs, 1, None).await;
    let p = provider(&sim).await;
    let lbs = p.load_balancers();
    let book = Arc::new(Mutex::new(BTreeMap::new()));
    let held = || async {
        list(
            &cs,
            "listPublicIpAddresses",
            &[("issourcenat", "false")],
            "publicipaddress",
        )
        .await
        .iter()
        .filter_map(|ip| ip["ipaddress"].as_str().map(str::to_owned))
        .collect::<Vec<_>>()
    };
    // What a crash after the associate leaves: the address, no rule (here the rule's job fails
    // and so does every release).
    sim.cloudstack_fail_jobs(Some("createLoadBalancerRule"), 1, 530);
    let no_release = sim.cloudstack_fail_next(Some("disassociateIpAddress"), 100, 530);
    let ports = || vec![port(PortProtocol::Tcp, 80, 30080)];
    assert!(
        lbs.ensure(&recorded_svc(ports(), &book), &nodes(&ids))
            .await
            .is_err()
    );
    sim.faults().remove(no_release);
    let recorded = book.lock().unwrap()[ADDRESS_RECORD].clone();
    assert_eq!(
        held().await,
        vec![recorded.clone()],
        "the address was recorded before it was made"
    );
    // The next reconcile uses it: no second address.
    let out = lbs
        .ensure(&recorded_svc(ports(), &book), &nodes(&ids))
        .await
        .unwrap();
    assert_eq!(out.status.ingress[0].ip.as_deref(), Some(recorded.as_str()));
    assert_eq!(sim.cloudstack_calls("associateIpAddress"), 1);
    assert_eq!(held().await, vec![recorded.clone()]);
    assert!(
        lbs.delete(&recorded_svc(ports(), &book))
            .await
            .unwrap()
            .deleted
    );
    assert!(held().await.is_empty());

    // A Service deleted before its first rule: the recorded address goes with it.
    let other = Arc::new(Mutex::new(BTreeMap::new()));
    sim.cloudstack_fail_jobs(Some("createLoadBalancerRule"), 1, 530);
    let no_release = sim.cloudstack_fail_next(Some("disassociateIpAddress"), 100, 530);
    assert!(
        lbs.ensure(&recorded_svc(ports(), &other), &nodes(&ids))
            .await
            .is_err()
    );
    sim.faults().remove(no_release);
    assert_eq!(held().await.len(), 1);
    assert!(
        lbs.delete(&recorded_svc(ports(), &other))
            .await
            .unwrap()
            .deleted
    );
    assert!(held().await.is_empty(), "released by its record");

    // CloudStack refusing the associate itself (the address taken meanwhile): the record is
    // cleared, so that address is never taken for this Service's.
    let refused = Arc::new(Mutex::new(BTreeMap::new()));
    sim.cloudstack_fail_next(Some("associateIpAddress"), 100, 431);
    assert!(
        lbs.ensure(&recorded_svc(ports(), &refused), &nodes(&ids))
            .await
            .is_err()
    );
    sim.faults().clear();
    assert_eq!(refused.lock().unwrap()[ADDRESS_RECORD], "");
    assert!(held().await.is_empty());

    // A free address `spec.loadBalancerIP` names: recorded as upstream records it (before the
    // associate), so either CCM releases it on delete.
    let named = Arc::new(Mutex::new(BTreeMap::new()));
    let with_ip = || {
        let mut s = recorded_svc(ports(), &named);
        s.load_balancer_ip = Some("100.101.0.200".into());
        s
    };
    let out = lbs.ensure(&with_ip(), &nodes(&ids)).await.unwrap();
    assert_eq!(out.status.ingress[0].ip.as_deref(), Some("100.101.0.200"));
    assert_eq!(named.lock().unwrap()[IP_ASSOCIATED], "true");
    assert!(!named.lock().unwrap().contains_key(ADDRESS_RECORD));
    assert!(lbs.delete(&with_ip()).await.unwrap().deleted);
    assert!(held().await.is_empty(), "released: we associated it");
}

#[tokio::test]
async fn the_hostname_annotation_is_the_status_as_upstreams() {
    let sim = Sim::start().await;
    let cs = sim.cloudstack_client();
    let ids = vms(&cs, 1, None).await;
    let p = provider(&sim).await;
    let lbs = p.load_balancers();
    let hostname = "service.beta.kubernetes.io/cloudstack-load-balancer-hostname";
    let s = svc(
        vec![port(PortProtocol::Tcp, 80, 30080)],
        &[],
        &[(hostname, " lb.example.com ")],
    );
    let out = lbs.ensure(&s, &nodes(&ids)).await.unwrap();
    let ingress = &out.status.ingress[0];
    assert_eq!(ingress.hostname.as_deref(), Some("lb.example.com"));
    assert_eq!(ingress.ip, None, "a hostname and no address, as upstream");
    let got = lbs.get(&s).await.unwrap().expect("found");
    assert_eq!(got.ingress[0].hostname.as_deref(), Some("lb.example.com"));
    assert_eq!(rules(&cs).await.len(), 1, "the rule is made all the same");
}
