//! End-to-end test of the service controller with the CloudStack provider
//! (`--cloud-provider=external-cloudstack`): real kube-apiserver (testenv), cloud-sim's CloudStack
//! API over HTTP, the controller in-process under its chart RBAC (impersonated ServiceAccount).
//! What it made is read back through cloud-sim's CloudStack API, unfaulted.

use std::collections::BTreeMap;
use std::time::Duration;

use cloud_client::cloudstack::JobPolling;
use cloud_sim::CsVmSpec;
use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use kube::api::{DeleteParams, PostParams};
use kube::{Api, ResourceExt};
use service_controller::Settings;
use test_support::e2e::cloudstack::{
    CsRule, TestVm, cloud_with, config, firewall_rules, held_addresses, lb_rules, vm,
};
use test_support::e2e::run::{Running, spawn, test_config};
use test_support::e2e::test_run::TestRun;
use test_support::e2e::{NodeSpecT, T, create_node, eventually, unique};

const RANGES: [&str; 2] = ["198.51.100.0/24", "203.0.113.0/24"];

async fn start(world: &TestRun) -> Running {
    let mut c = config(&world.sim);
    c.client.jobs = JobPolling {
        initial: Duration::from_millis(20),
        factor: 2.0,
        max: Duration::from_millis(200),
        timeout: Duration::from_secs(20),
    };
    let cloud = cloud_with(c).await;
    let settings = Settings {
        namespace: Some(world.ns.clone()),
        node_sync_window: Duration::from_millis(200),
        ..Default::default()
    };
    let sa = world.service_account().await;
    spawn(
        &service_controller::INFO,
        test_config(&service_controller::INFO, &world.run),
        sa,
        move |rt| service_controller::start(rt, cloud, settings),
    )
    .await
}

/// A VM and its Ready Node, initialized as node-controller would (upstream's providerID).
async fn node(world: &TestRun) -> TestVm {
    let name = unique("cs-node");
    let v = vm(&world.sim, &CsVmSpec::named(&name)).await;
    create_node(
        &world.admin,
        &world.run,
        &name,
        NodeSpecT {
            provider_id: Some(v.provider_id()),
            node_ip: Some(v.ip.clone()),
            ready: Some(true),
            labels: BTreeMap::new(),
            ..Default::default()
        },
    )
    .await;
    v
}

async fn create_service(world: &TestRun, name: &str) -> Service {
    let api: Api<Service> = Api::namespaced(world.admin.clone(), &world.ns);
    let port = |n: &str, p: i32, proto: &str| ServicePort {
        name: Some(n.into()),
        port: p,
        protocol: Some(proto.into()),
        ..Default::default()
    };
    let mut s = Service::default();
    s.metadata.name = Some(name.into());
    s.spec = Some(ServiceSpec {
        type_: Some("LoadBalancer".into()),
        selector: Some([("app".to_string(), name.to_string())].into()),
        ports: Some(vec![port("https", 443, "TCP"), port("dns", 53, "UDP")]),
        load_balancer_source_ranges: Some(RANGES.iter().map(|r| r.to_string()).collect()),
        ..Default::default()
    });
    api.create(&PostParams::default(), &s)
        .await
        .expect("create the Service")
}

fn node_port(s: &Service, port: i32) -> u16 {
    s.spec
        .as_ref()
        .and_then(|s| s.ports.as_ref())
        .and_then(|p| p.iter().find(|p| p.port == port))
        .and_then(|p| p.node_port)
        .and_then(|p| u16::try_from(p).ok())
        .expect("a nodePort")
}

fn ingress_ips(s: &Service) -> Vec<String> {
    s.status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref())
        .and_then(|l| l.ingress.as_ref())
        .map(|i| i.iter().filter_map(|i| i.ip.clone()).collect())
        .unwrap_or_default()
}

fn sorted(vms: &[&TestVm]) -> Vec<String> {
    let mut ids: Vec<String> = vms.iter().map(|v| v.id.clone()).collect();
    ids.sort();
    ids
}

/// Waits until the Service's two rules have exactly `members`.
async fn wait_members(world: &TestRun, uid: &str, members: &[String]) -> Vec<CsRule> {
    eventually(&format!("rules with members {members:?}"), T, || async {
        let rules = lb_rules(&world.sim, uid).await;
        (rules.len() == 2 && rules.iter().all(|r| r.members == members)).then_some(rules)
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tcp_and_udp_service_with_source_ranges_gets_upstreams_rules_members_and_firewall() {
    let world = TestRun::start("service-controller", "cs-svc", None).await;
    let a = node(&world).await;
    let b = node(&world).await;
    let ctl = start(&world).await;
    let api: Api<Service> = Api::namespaced(world.admin.clone(), &world.ns);

    // Create: an address, upstream's two rules, both VMs members, firewall rules with the ranges.
    let created = create_service(&world, "web").await;
    let uid = created.uid().expect("uid");
    let lb = cloud_client::default_load_balancer_name(&uid);
    let svc = eventually("the Service's ingress", T, || async {
        api.get_opt("web")
            .await
            .ok()
            .flatten()
            .filter(|s| !ingress_ips(s).is_empty())
    })
    .await;
    let rules = wait_members(&world, &uid, &sorted(&[&a, &b])).await;
    let names: Vec<&str> = rules.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, [format!("{lb}-tcp-443"), format!("{lb}-udp-53")]);
    let (tcp, udp) = (&rules[0], &rules[1]);
    assert_eq!(
        (tcp.protocol.as_str(), udp.protocol.as_str()),
        ("tcp", "udp")
    );
    assert_eq!(
        (tcp.public_port, tcp.private_port),
        (443, node_port(&created, 443))
    );
    assert_eq!(
        (udp.public_port, udp.private_port),
        (53, node_port(&created, 53))
    );
    assert_eq!(tcp.public_ip, udp.public_ip, "one address for the Service");
    assert_eq!(ingress_ips(&svc), vec![tcp.public_ip.clone()]);
    assert_eq!(
        held_addresses(&world.sim).await,
        vec![tcp.public_ip.clone()]
    );
    let ranges: Vec<String> = RANGES.iter().map(|r| r.to_string()).collect();
    let fw = eventually("firewall rules with the ranges", T, || async {
        let fw = firewall_rules(&world.sim, &tcp.public_ip_id).await;
        (fw.len() == 2).then_some(fw)
    })
    .await;
    assert_eq!(
        fw,
        [
            ("tcp".to_string(), 443, ranges.clone()),
            ("udp".to_string(), 53, ranges.clone())
        ]
    );
    assert!(
        svc.finalizers()
            .iter()
            .any(|f| f == service_controller::patches::FINALIZER)
    );
    // Ready, and no Warning that the ranges are not enforced: CloudStack enforces them.
    let ready = eventually("LoadBalancerReady True", T, || async {
        let s = api.get_opt("web").await.ok().flatten()?;
        let c = service_controller::condition::current(&s)?.clone();
        (c.status == "True").then_some(c)
    })
    .await;
    assert_eq!(ready.reason, "EnsuredLoadBalancer", "{ready:?}");
    assert!(!ready.message.contains("not enforced"), "{}", ready.message);
    assert!(
        !world
            .has_event("Service", "web", service_controller::source_ranges::IGNORED)
            .await
    );

    // A node joins: its VM becomes a member of both rules, nothing else changes.
    let c = node(&world).await;
    let after = wait_members(&world, &uid, &sorted(&[&a, &b, &c])).await;
    for (before, now) in rules.iter().zip(&after) {
        assert_eq!(
            (&before.name, &before.public_ip_id, before.private_port),
            (&now.name, &now.public_ip_id, now.private_port),
            "the rule is kept"
        );
    }
    assert_eq!(firewall_rules(&world.sim, &tcp.public_ip_id).await, fw);

    // Deleted: the rules, their firewall rules and the address go, then the finalizer.
    api.delete("web", &DeleteParams::default())
        .await
        .expect("delete the Service");
    eventually("the Service gone (finalizer released)", T, || async {
        api.get_opt("web")
            .await
            .ok()
            .and_then(|s| s.is_none().then_some(()))
    })
    .await;
    assert!(lb_rules(&world.sim, &uid).await.is_empty(), "rules left");
    assert!(
        firewall_rules(&world.sim, &tcp.public_ip_id)
            .await
            .is_empty(),
        "firewall rules left"
    );
    assert!(held_addresses(&world.sim).await.is_empty(), "address left");
    ctl.stop().await.expect("controller stops cleanly");
}
