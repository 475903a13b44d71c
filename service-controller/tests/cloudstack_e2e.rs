//! End-to-end test of the service controller with the CloudStack provider
//! (`--cloud-provider=external-cloudstack`): real kube-apiserver (testenv), cloud-sim's CloudStack
//! API over HTTP, the controller in-process under its chart RBAC (impersonated ServiceAccount).
//! What it made is read back through cloud-sim's CloudStack API, unfaulted; the drain test also
//! sends requests through a rule (cloud-sim's data plane on, the nodes' stand-ins at their VMs).
//!
//! Each test has its own namespace and controller (namespaced), on the binary's apiserver.

use std::collections::BTreeMap;
use std::time::Duration;

use cloud_client::cloudstack::JobPolling;
use cloud_client::cloudstack::load_balancer::address::ADDRESS_RECORD;
use cloud_client::cloudstack::load_balancer::spec::SOURCE_CIDRS;
use cloud_sim::CsVmSpec;
use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions, EndpointSlice};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::api::{DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use service_controller::{Settings, reasons};
use test_support::e2e::cloudstack::{
    CsRule, TestVm, cloud_with, cloudstack_writes, config, firewall_rules, held_addresses,
    lb_rules, vm,
};
use test_support::e2e::run::{Running, spawn, test_config};
use test_support::e2e::test_run::TestRun;
use test_support::e2e::{NodeSpecT, T, create_node, eventually, unique};

const RANGES: [&str; 2] = ["198.51.100.0/24", "203.0.113.0/24"];

async fn start(world: &TestRun) -> Running {
    start_in(
        world,
        &world.ns,
        world.service_account().await,
        Duration::from_secs(300),
    )
    .await
}

/// The controller for namespace `ns` as `sa`, on `world`'s Nodes and simulator, checking for
/// drift every `drift_period`.
async fn start_in(world: &TestRun, ns: &str, sa: kube::Client, drift_period: Duration) -> Running {
    let mut c = config(&world.sim);
    c.client.jobs = JobPolling {
        initial: Duration::from_millis(20),
        factor: 2.0,
        max: Duration::from_millis(200),
        timeout: Duration::from_secs(20),
    };
    let cloud = cloud_with(c).await;
    let settings = Settings {
        namespace: Some(ns.to_owned()),
        node_sync_window: Duration::from_millis(200),
        drift_period,
        ..Default::default()
    };
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
    named_node(world).await.1
}

/// [`node`], with the Node's name.
async fn named_node(world: &TestRun) -> (String, TestVm) {
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
    (name, v)
}

fn port(name: &str, port: i32, protocol: &str) -> ServicePort {
    ServicePort {
        name: Some(name.into()),
        port,
        protocol: Some(protocol.into()),
        ..Default::default()
    }
}

/// A LoadBalancer Service `name` in `ns` with `ports`, as `shape` makes it further.
async fn create_in(
    world: &TestRun,
    ns: &str,
    name: &str,
    ports: Vec<ServicePort>,
    shape: impl FnOnce(&mut Service),
) -> Service {
    let api: Api<Service> = Api::namespaced(world.admin.clone(), ns);
    let mut s = Service::default();
    s.metadata.name = Some(name.into());
    s.spec = Some(ServiceSpec {
        type_: Some("LoadBalancer".into()),
        selector: Some([("app".to_string(), name.to_string())].into()),
        ports: Some(ports),
        ..Default::default()
    });
    shape(&mut s);
    api.create(&PostParams::default(), &s)
        .await
        .expect("create the Service")
}

async fn create_service(world: &TestRun, name: &str) -> Service {
    let ports = vec![port("https", 443, "TCP"), port("dns", 53, "UDP")];
    create_in(world, &world.ns, name, ports, |s| {
        let spec = s.spec.as_mut().expect("spec");
        spec.load_balancer_source_ranges = Some(RANGES.iter().map(|r| r.to_string()).collect());
    })
    .await
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
        svc.annotations().get(ADDRESS_RECORD),
        Some(&tcp.public_ip),
        "the address was recorded on the Service (through its status) before it was made"
    );
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

/// The Service's `LoadBalancerReady` condition once its reason is `reason`.
async fn condition_in(world: &TestRun, ns: &str, name: &str, reason: &str) -> Condition {
    let api: Api<Service> = Api::namespaced(world.admin.clone(), ns);
    eventually(&format!("{ns}/{name}: {reason}"), T, || async {
        let s = api.get_opt(name).await.ok().flatten()?;
        let c = service_controller::condition::current(&s)?.clone();
        (c.reason == reason).then_some(c)
    })
    .await
}

async fn wait_ingress(world: &TestRun, name: &str) -> String {
    let api: Api<Service> = Api::namespaced(world.admin.clone(), &world.ns);
    eventually(&format!("{name}'s ingress"), T, || async {
        let s = api.get_opt(name).await.ok().flatten()?;
        ingress_ips(&s).into_iter().next()
    })
    .await
}

/// Waits until the Service has `rules` rules, each with exactly `members`.
async fn wait_rules(world: &TestRun, uid: &str, rules: usize, members: &[String]) -> Vec<CsRule> {
    eventually(
        &format!("{rules} rule(s) with members {members:?}"),
        T,
        || async {
            let got = lb_rules(&world.sim, uid).await;
            (got.len() == rules && got.iter().all(|r| r.members == members)).then_some(got)
        },
    )
    .await
}

/// The Service's EndpointSlice, written as the EndpointSlice controller would (testenv runs
/// none): one ready endpoint on each of `nodes`.
async fn endpoints_on(world: &TestRun, svc: &str, nodes: &[&str]) {
    let slices: Api<EndpointSlice> = Api::namespaced(world.admin.clone(), &world.ns);
    let slice = EndpointSlice {
        metadata: ObjectMeta {
            name: Some(format!("{svc}-slice")),
            labels: Some([("kubernetes.io/service-name".to_owned(), svc.to_owned())].into()),
            ..Default::default()
        },
        address_type: "IPv4".into(),
        endpoints: nodes
            .iter()
            .enumerate()
            .map(|(i, node)| Endpoint {
                addresses: vec![format!("10.244.0.{}", i + 10)],
                node_name: Some((*node).to_owned()),
                conditions: Some(EndpointConditions {
                    ready: Some(true),
                    serving: Some(true),
                    terminating: Some(false),
                }),
                ..Default::default()
            })
            .collect(),
        ports: None,
    };
    slices
        .patch(
            &format!("{svc}-slice"),
            &PatchParams::apply("cloudstack-e2e").force(),
            &Patch::Apply(&slice),
        )
        .await
        .expect("write the EndpointSlice");
}

/// The id of the Service's rule `name`, read from the simulator.
async fn rule_id(world: &TestRun, name: &str) -> String {
    let listed = world
        .sim
        .cloudstack_client()
        .call(
            "listLoadBalancerRules",
            &[("keyword", name), ("listall", "true")],
        )
        .await
        .expect("list rules");
    listed["loadbalancerrule"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|r| r["name"] == name)
        .and_then(|r| r["id"].as_str())
        .expect("the rule")
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_tenancy_local_traffic_and_drift() {
    let world = TestRun::start("service-controller", "cs-refuse", None).await;
    let (a_name, a) = named_node(&world).await;
    let (b_name, b) = named_node(&world).await;
    let sa = world.service_account().await;
    let ctl = start_in(&world, &world.ns, sa, Duration::from_secs(1)).await;
    let http = |p| vec![port("http", p, "TCP")];

    // Bad input: the condition and a Warning name the field, and nothing is written.
    let before = cloudstack_writes(&world.sim);
    create_in(&world, &world.ns, "bad-cidrs", http(80), |s| {
        let ann = [(SOURCE_CIDRS.to_owned(), "10.0.0.0/8,nope".to_owned())];
        s.metadata.annotations = Some(ann.into());
    })
    .await;
    create_in(
        &world,
        &world.ns,
        "sctp",
        vec![port("sctp", 9, "SCTP")],
        |_| {},
    )
    .await;
    for (name, says) in [
        (
            "bad-cidrs",
            format!("\"nope\" for annotation {SOURCE_CIDRS}"),
        ),
        ("sctp", "spec.ports[0].protocol".to_owned()),
    ] {
        let c = condition_in(&world, &world.ns, name, reasons::INVALID_INPUT).await;
        assert!(c.message.contains(&says), "{name}: {}", c.message);
        let note = world
            .wait_event("Service", name, reasons::SYNC_FAILED)
            .await;
        assert!(note.contains(&says), "{name}: {note}");
    }
    assert_eq!(
        cloudstack_writes(&world.sim),
        before,
        "bad input writes nothing"
    );

    // Tenancy: `first` gets an address; `second` asks for it on the same port and is refused,
    // naming `first`; `intruder`, in another namespace, is refused on another port too, and
    // learns nothing of `first`.
    let first = create_in(&world, &world.ns, "first", http(80), |_| {}).await;
    let ip = wait_ingress(&world, "first").await;
    let lb_ip =
        |s: &mut Service| s.spec.as_mut().expect("spec").load_balancer_ip = Some(ip.clone());
    create_in(&world, &world.ns, "second", http(80), lb_ip).await;
    let c = condition_in(&world, &world.ns, "second", reasons::CONFLICT).await;
    let named = format!("port 80 (tcp) is taken by Service {}/first", world.ns);
    assert!(c.message.contains(&named), "{}", c.message);
    let other = TestRun::start("service-controller", "cs-other", None).await;
    let sa = other.service_account().await;
    let other_ctl = start_in(&world, &other.ns, sa, Duration::from_secs(300)).await;
    create_in(&world, &other.ns, "intruder", http(8080), lb_ip).await;
    let c = condition_in(&world, &other.ns, "intruder", reasons::CONFLICT).await;
    assert!(c.message.contains("another namespace"), "{}", c.message);
    for secret in ["first", world.ns.as_str()] {
        assert!(!c.message.contains(secret), "{}", c.message);
    }
    other_ctl
        .stop()
        .await
        .expect("the other controller stops cleanly");
    let first_uid = first.uid().expect("uid");
    let rules = wait_rules(&world, &first_uid, 1, &sorted(&[&a, &b])).await;
    assert_eq!(rules[0].public_ip, ip);

    // externalTrafficPolicy Local: the members are the nodes running a serving endpoint.
    endpoints_on(&world, "local", &[&a_name]).await;
    let local = create_in(&world, &world.ns, "local", http(8081), |s| {
        s.spec.as_mut().expect("spec").external_traffic_policy = Some("Local".into());
    })
    .await;
    let local_uid = local.uid().expect("uid");
    wait_rules(&world, &local_uid, 1, &sorted(&[&a])).await;
    endpoints_on(&world, "local", &[&b_name]).await;
    wait_rules(&world, &local_uid, 1, &sorted(&[&b])).await;

    // Drift: a rule deleted by hand comes back, a member removed by hand is added back.
    let cs = world.sim.cloudstack_client();
    let name = rules[0].name.clone();
    let id = rule_id(&world, &name).await;
    cs.call_async("deleteLoadBalancerRule", &[("id", &id)])
        .await
        .expect("delete the rule by hand");
    wait_rules(&world, &first_uid, 1, &sorted(&[&a, &b])).await;
    let id = rule_id(&world, &name).await;
    cs.call_async(
        "removeFromLoadBalancerRule",
        &[("id", &id), ("virtualmachineids", &a.id)],
    )
    .await
    .expect("remove a member by hand");
    eventually("the member back", T, || async {
        let r = lb_rules(&world.sim, &first_uid).await;
        (r.len() == 1 && r[0].members == sorted(&[&a, &b])).then_some(())
    })
    .await;
    ctl.stop().await.expect("controller stops cleanly");
}

/// Requests started during a drain step: sent, failed, finished.
#[derive(Debug, Default, Clone, Copy)]
struct StepCount {
    sent: usize,
    failed: usize,
    done: usize,
}

const DRAIN_STEPS: [&str; 5] = [
    "before: three members",
    "Node labelled exclude-from-external-load-balancers, until its VM left the rule",
    "its kube-proxy gone: the node's stand-in stops serving",
    "tainted ToBeDeletedByClusterAutoscaler, Node deleted, VM destroyed",
    "after: two members",
];

/// Draining under load, as `drain.rs` does it for Hetzner: 50 requests/s through the rule of an
/// `externalTrafficPolicy: Cluster` Service on three VMs while the third is excluded by label,
/// stops serving once its VM left the rule (CloudStack rules have no health checks: the order is
/// what keeps requests from the node), and is scaled down. No request fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn draining_a_node_under_load_through_its_rule_loses_no_request() {
    use cloud_sim::stand_in::{self, NodeStandIn};
    use k8s_openapi::api::core::v1::Node;
    use serde_json::json;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};

    const MIN_SERVED: usize = 25;
    let sim = cloud_sim::SimConfig {
        action_duration: Duration::from_millis(50),
        data_plane: Some(cloud_sim::DataPlaneConfig::default()),
        ..Default::default()
    };
    let world = TestRun::start("service-controller", "cs-drain", Some(sim)).await;
    let mut nodes = Vec::new();
    for _ in 0..3 {
        nodes.push(named_node(&world).await);
    }
    let ctl = start(&world).await;
    let svc = create_in(
        &world,
        &world.ns,
        "drain",
        vec![port("http", 80, "TCP")],
        |_| {},
    )
    .await;
    let (uid, np) = (svc.uid().expect("uid"), node_port(&svc, 80));
    let mut stand_ins = Vec::new();
    for (name, v) in &nodes {
        let mut s = NodeStandIn::new(name, world.sim.local_address(v.ip.parse().expect("ip")));
        s.serve_node_port(np).await.expect("bind the NodePort");
        stand_ins.push(s);
    }
    let vms: Vec<&TestVm> = nodes.iter().map(|(_, v)| v).collect();
    let rules = wait_rules(&world, &uid, 1, &sorted(&vms)).await;
    let id = rule_id(&world, &rules[0].name).await;
    let cs = world.sim.cloudstack_client();
    let addr = eventually("the rule's listener", T, || async {
        cs.rule_listener(&id)
            .await
            .ok()
            .flatten()
            .map(|l| l.address)
    })
    .await;
    // The firewall rule follows the rule: answered once it is there.
    let timeout = Duration::from_secs(2);
    eventually("an answer through the rule", T, || async {
        matches!(stand_in::get(addr, timeout).await, Ok((200, _))).then_some(())
    })
    .await;

    let step = Arc::new(AtomicUsize::new(0));
    let counts = Arc::new(Mutex::new([StepCount::default(); DRAIN_STEPS.len()]));
    let load = tokio::spawn({
        let (step, counts) = (step.clone(), counts.clone());
        async move {
            let mut tick = tokio::time::interval(Duration::from_millis(20));
            loop {
                tick.tick().await;
                let at = step.load(Ordering::SeqCst);
                counts.lock().unwrap()[at].sent += 1;
                let counts = counts.clone();
                tokio::spawn(async move {
                    let ok = matches!(stand_in::get(addr, timeout).await, Ok((200, _)));
                    let mut c = counts.lock().unwrap();
                    c[at].failed += usize::from(!ok);
                    c[at].done += 1;
                });
            }
        }
    });
    let served_in = |at: usize| {
        let counts = counts.clone();
        async move {
            eventually(&format!("{MIN_SERVED} served in step {at}"), T, || async {
                let c = counts.lock().unwrap()[at];
                (c.done - c.failed >= MIN_SERVED).then_some(())
            })
            .await
        }
    };
    let nodes_api: Api<Node> = Api::all(world.admin.clone());
    let (gone, two) = (&nodes[2].0, sorted(&vms[..2]));
    let patch = |p: serde_json::Value| {
        let nodes_api = nodes_api.clone();
        async move {
            nodes_api
                .patch(gone, &PatchParams::default(), &Patch::Merge(&p))
                .await
                .expect("patch the Node");
        }
    };
    served_in(0).await;

    step.store(1, Ordering::SeqCst);
    let label = "node.kubernetes.io/exclude-from-external-load-balancers";
    patch(json!({"metadata": {"labels": {label: "true"}}})).await;
    wait_rules(&world, &uid, 1, &two).await;

    // Only now, as a drain does it: kube-proxy goes once the node is out of the rule.
    step.store(2, Ordering::SeqCst);
    assert!(stand_ins[2].served() > 0, "the third node was in rotation");
    stand_ins[2].stop();
    served_in(2).await;

    step.store(3, Ordering::SeqCst);
    let taint =
        json!({"key": "ToBeDeletedByClusterAutoscaler", "value": "1", "effect": "NoSchedule"});
    patch(json!({"spec": {"taints": [taint]}})).await;
    nodes_api
        .delete(gone, &DeleteParams::default())
        .await
        .expect("delete the Node");
    cs.destroy_vm(&nodes[2].1.id).await.expect("destroy the VM");
    let rules = wait_rules(&world, &uid, 1, &two).await;

    step.store(4, Ordering::SeqCst);
    served_in(4).await;
    load.abort();
    let counts = eventually("every request finished", T, || async {
        let c = *counts.lock().unwrap();
        c.iter().all(|c| c.done == c.sent).then_some(c)
    })
    .await;
    eprintln!("{:<80} {:>12}", "step (50 requests/s)", "failed/sent");
    for (name, c) in DRAIN_STEPS.iter().zip(&counts) {
        eprintln!("{name:<80} {:>12}", format!("{}/{}", c.failed, c.sent));
    }
    for (name, c) in DRAIN_STEPS.iter().zip(&counts) {
        assert_eq!(c.failed, 0, "{name}: {c:?}");
    }
    for at in [0, 2, 4] {
        assert!(
            counts[at].sent - counts[at].failed >= MIN_SERVED,
            "{counts:?}"
        );
    }
    assert_eq!(rules[0].members, two, "the two remaining VMs");
    ctl.stop().await.expect("controller stops cleanly");
}
