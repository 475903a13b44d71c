//! Switching from upstream's CloudStack CCM (apache/cloudstack-kubernetes-provider v1.2.0, built by
//! `testenv::cloudstack_ccm()`): its service controller makes five Services' load balancers on
//! cloud-sim's CloudStack API (TCP, UDP, PROXY protocol, source ranges, a `loadBalancerIP` the
//! project already holds), over HTTP, against the same apiserver.
//!
//! 1. Ours in shadow mode (`--dry-run`) beside it plans nothing and nobody writes anything.
//! 2. Upstream stops; ours takes over with 0 CloudStack writes, every Service keeps its address,
//!    and gets our `LoadBalancerReady` condition.
//! 3. A node joins: ours adds its VM to every rule, one `assignToLoadBalancerRule` per rule and
//!    no other write, so it manages what it adopted.
//!
//! One test in this binary: upstream's CCM watches every Node and Service of the apiserver.

use std::collections::BTreeMap;
use std::time::Duration;

use cloud_client::cloudstack::JobPolling;
use cloud_sim::CsVmSpec;
use controller_kit::Config;
use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use kube::api::PostParams;
use kube::{Api, ResourceExt};
use service_controller::Settings;
use test_support::e2e::cloudstack::{
    CsFirewallRule, CsRule, TestVm, UpstreamCcm, cloudstack_writes, config, firewall_rules,
    lb_rules, vm, write_cloud_config,
};
use test_support::e2e::run::{Running, planned_writes, shadow, spawn, test_config};
use test_support::e2e::test_run::TestRun;
use test_support::e2e::{NodeSpecT, T, create_node, eventually, unique};

const PROXY: &str = "service.beta.kubernetes.io/cloudstack-load-balancer-proxy-protocol";
const CIDRS: &str = "service.beta.kubernetes.io/cloudstack-load-balancer-source-cidrs";
const RANGE: &str = "198.51.100.0/24";

/// Ours, as the chart runs it, or in shadow mode.
async fn start_ours(world: &TestRun, dry_run: bool) -> Running {
    let mut c = config(&world.sim);
    c.client.jobs = JobPolling {
        initial: Duration::from_millis(20),
        factor: 2.0,
        max: Duration::from_millis(200),
        timeout: Duration::from_secs(20),
    };
    let mut cfg: Config = test_config(&service_controller::INFO, &world.run);
    let plan = dry_run.then(|| shadow(&mut cfg));
    let cloud = cloud_client::cloudstack::CloudStackClients::with_planned_writes(c, plan)
        .await
        .expect("CloudStack provider for the sim")
        .cloud();
    let settings = Settings {
        namespace: Some(world.ns.clone()),
        node_sync_window: Duration::from_millis(200),
        ..Default::default()
    };
    let sa = world.service_account().await;
    spawn(&service_controller::INFO, cfg, sa, move |rt| {
        service_controller::start(rt, cloud, settings)
    })
    .await
}

/// A VM and its Ready Node, named alike (upstream finds members by name), with the providerID
/// upstream's node controller gives it.
async fn node(world: &TestRun) -> TestVm {
    let name = unique("cs-up");
    let v = vm(&world.sim, &CsVmSpec::named(&name)).await;
    create_node(
        &world.admin,
        &world.run,
        &name,
        NodeSpecT {
            provider_id: Some(v.provider_id()),
            node_ip: Some(v.ip.clone()),
            ready: Some(true),
            ..Default::default()
        },
    )
    .await;
    v
}

/// The five Services: name, ports, annotations, source ranges, `loadBalancerIP`.
fn services(held_ip: &str) -> Vec<Service> {
    let port = |p: i32, proto: &str| ServicePort {
        name: Some(format!("{}-{p}", proto.to_lowercase())),
        port: p,
        protocol: Some(proto.into()),
        ..Default::default()
    };
    let mk = |name: &str, ports: Vec<ServicePort>| {
        let mut s = Service::default();
        s.metadata.name = Some(name.into());
        s.spec = Some(ServiceSpec {
            type_: Some("LoadBalancer".into()),
            selector: Some([("app".to_string(), name.to_string())].into()),
            ports: Some(ports),
            ..Default::default()
        });
        s
    };
    let tcp = mk("tcp", vec![port(80, "TCP"), port(443, "TCP")]);
    let udp = mk("udp", vec![port(53, "UDP")]);
    let mut proxy = mk("proxy", vec![port(443, "TCP")]);
    proxy.annotations_mut().insert(PROXY.into(), "true".into());
    let mut ranges = mk("ranges", vec![port(8080, "TCP")]);
    ranges.spec.as_mut().unwrap().load_balancer_source_ranges = Some(vec![RANGE.into()]);
    // Upstream's other CIDR source, the rule's own `cidrlist` (two, sent comma-joined and read
    // back space-separated), and the `source` algorithm of ClientIP.
    ranges
        .annotations_mut()
        .insert(CIDRS.into(), "10.0.0.0/8, 192.168.0.0/16".into());
    ranges.spec.as_mut().unwrap().session_affinity = Some("ClientIP".into());
    let mut held = mk("held", vec![port(80, "TCP")]);
    held.spec.as_mut().unwrap().load_balancer_ip = Some(held_ip.into());
    vec![tcp, udp, proxy, ranges, held]
}

fn ingress_ip(s: &Service) -> Option<String> {
    s.status
        .as_ref()?
        .load_balancer
        .as_ref()?
        .ingress
        .as_ref()?
        .first()?
        .ip
        .clone()
}

/// What CloudStack has of each Service: its rules and their address's firewall rules.
async fn cloud_state(
    world: &TestRun,
    uids: &BTreeMap<String, String>,
) -> BTreeMap<String, (Vec<CsRule>, Vec<CsFirewallRule>)> {
    let mut out = BTreeMap::new();
    for (name, uid) in uids {
        let rules = lb_rules(&world.sim, uid).await;
        let fw = match rules.first() {
            Some(r) => firewall_rules(&world.sim, &r.public_ip_id).await,
            None => Vec::new(),
        };
        out.insert(name.clone(), (rules, fw));
    }
    out
}

/// `cloud_controllers_reconciles_total` of every result.
fn reconciles(metrics: &str) -> f64 {
    metrics
        .lines()
        .filter(|l| l.starts_with("cloud_controllers_reconciles_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

fn total(writes: &BTreeMap<String, u64>) -> u64 {
    writes.values().sum()
}

/// The writes made since `before`, by command.
fn since(before: &BTreeMap<String, u64>, now: &BTreeMap<String, u64>) -> BTreeMap<String, u64> {
    now.iter()
        .map(|(k, n)| (k.clone(), n - before.get(k).copied().unwrap_or(0)))
        .filter(|(_, n)| *n > 0)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ours_shadows_then_takes_over_upstreams_load_balancers_with_no_write() {
    let world = TestRun::start("service-controller", "cs-up", None).await;
    let a = node(&world).await;
    let b = node(&world).await;
    let cs = world.sim.cloudstack_client();
    let sim_world = cs.world().await.unwrap();
    let net = sim_world["networks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["name"] == "default-zone-1")
        .expect("the VMs' network")["id"]
        .as_str()
        .unwrap()
        .to_owned();
    // The address the project already holds, for `spec.loadBalancerIP`.
    let held_ip = cs
        .call_async("associateIpAddress", &[("networkid", &net)])
        .await
        .unwrap()["ipaddress"]["ipaddress"]
        .as_str()
        .unwrap()
        .to_owned();

    // Upstream makes the load balancers.
    let dir = std::env::temp_dir().join(&world.run);
    std::fs::create_dir_all(&dir).unwrap();
    let cloud_config = dir.join("cloud-config");
    write_cloud_config(&world.sim, &cloud_config);
    let k = testenv::kube().await;
    let upstream = UpstreamCcm::start_controllers(
        k.kubeconfig(),
        &cloud_config,
        &dir.join("upstream.log"),
        "service",
    );
    let api: Api<Service> = Api::namespaced(world.admin.clone(), &world.ns);
    let mut uids = BTreeMap::new();
    for s in services(&held_ip) {
        let made = api.create(&PostParams::default(), &s).await.unwrap();
        uids.insert(made.name_any(), made.uid().unwrap());
    }
    let mut ips = BTreeMap::new();
    for name in uids.keys() {
        let ip = tokio::time::timeout(
            Duration::from_secs(60),
            eventually(
                "upstream set the ingress",
                Duration::from_secs(60),
                || async {
                    api.get_opt(name)
                        .await
                        .ok()
                        .flatten()
                        .and_then(|s| ingress_ip(&s))
                },
            ),
        )
        .await
        .unwrap_or_else(|_| panic!("{name}: upstream's log:\n{}", upstream.output()));
        ips.insert(name.clone(), ip);
    }
    assert_eq!(ips["held"], held_ip, "upstream used the held address");
    let members = {
        let mut m = vec![a.id.clone(), b.id.clone()];
        m.sort();
        m
    };
    // Until upstream has made every rule's firewall rule (its last write for a Service).
    let by_upstream = eventually("upstream's rules and firewall rules", T, || async {
        let state = cloud_state(&world, &uids).await;
        let done = state.values().all(|(rules, fw)| {
            !rules.is_empty()
                && rules.len() == fw.len()
                && rules.iter().all(|r| r.members == members)
        });
        done.then_some(state)
    })
    .await;
    let rules: usize = by_upstream.values().map(|(r, _)| r.len()).sum();
    assert_eq!(rules, 6, "{by_upstream:#?}");
    // Upstream's two CIDR sources: no annotation, so the rule says 0.0.0.0/0 and the firewall
    // rule has the ranges; the proxy port's firewall rule is plain tcp.
    assert_eq!(
        by_upstream["ranges"].1,
        [("tcp".to_string(), 8080, vec![RANGE.to_string()])]
    );
    assert_eq!(by_upstream["proxy"].0[0].protocol, "tcp-proxy");
    assert_eq!(
        by_upstream["proxy"].1,
        [("tcp".to_string(), 443, vec!["0.0.0.0/0".to_string()])]
    );
    let versions: BTreeMap<String, String> = api
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .iter()
        .map(|s| (s.name_any(), s.resource_version().unwrap_or_default()))
        .collect();

    // 1. Ours in shadow mode beside upstream: nothing to change, nothing written.
    let before = cloudstack_writes(&world.sim);
    let ghost = start_ours(&world, true).await;
    eventually("the shadow reconciled every Service", T, || async {
        (reconciles(&ghost.metrics().await) >= uids.len() as f64).then_some(())
    })
    .await;
    // A second node sync of the shadow's, so a late plan would show.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        planned_writes(ghost.admin).await,
        Vec::<serde_json::Value>::new(),
        "the shadow plans nothing beside upstream"
    );
    assert_eq!(
        since(&before, &cloudstack_writes(&world.sim)),
        BTreeMap::new()
    );
    ghost.stop().await.unwrap();
    let now: BTreeMap<String, String> = api
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .iter()
        .map(|s| (s.name_any(), s.resource_version().unwrap_or_default()))
        .collect();
    assert_eq!(now, versions, "the shadow wrote no Service");
    let log = upstream.stop().await;

    // 2. Ours takes over: no CloudStack write, every address kept, our condition set.
    let before = cloudstack_writes(&world.sim);
    let ours = start_ours(&world, false).await;
    for name in uids.keys() {
        let s = eventually("LoadBalancerReady True", T, || async {
            let s = api.get_opt(name).await.ok().flatten()?;
            let c = service_controller::condition::current(&s)?;
            (c.status == "True").then_some(s.clone())
        })
        .await;
        assert_eq!(
            ingress_ip(&s).as_ref(),
            Some(&ips[name]),
            "{name} kept its address"
        );
    }
    assert_eq!(
        since(&before, &cloudstack_writes(&world.sim)),
        BTreeMap::new(),
        "ours wrote to what upstream made; upstream's log:\n{log}"
    );
    assert_eq!(cloud_state(&world, &uids).await, by_upstream);

    // 3. A node joins: one assign per rule, nothing else.
    let before = cloudstack_writes(&world.sim);
    let c = node(&world).await;
    let mut with_c = [members.clone(), vec![c.id.clone()]].concat();
    with_c.sort();
    let after = eventually("the new VM a member of every rule", T, || async {
        let state = cloud_state(&world, &uids).await;
        state
            .values()
            .all(|(rules, _)| rules.iter().all(|r| r.members == with_c))
            .then_some(state)
    })
    .await;
    let writes = since(&before, &cloudstack_writes(&world.sim));
    assert_eq!(
        writes,
        BTreeMap::from([("assignToLoadBalancerRule".to_string(), rules as u64)]),
        "total {}",
        total(&writes)
    );
    for (name, (rules, fw)) in &after {
        let (theirs, their_fw) = &by_upstream[name];
        assert_eq!(fw, their_fw, "{name}: firewall rules kept");
        for (r, t) in rules.iter().zip(theirs) {
            assert_eq!((&r.name, &r.public_ip_id), (&t.name, &t.public_ip_id));
        }
    }
    ours.stop().await.unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}
