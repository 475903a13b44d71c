//! Switching from upstream's CloudStack CCM on a VPC tier, where the two disagree on purpose
//! (docs/cloudstack.md, "Switching from the upstream CCM"): upstream opens each Service's
//! *public* port in the tier's ACL list to `0.0.0.0/0`, whatever the source ranges, a rule the
//! tier's VMs never see traffic for (they receive on the NodePort). Ours keeps upstream's rules
//! and address (no load-balancer write) and adds one ACL rule per port on the NodePort with the
//! Service's ranges, told from others by its `reason`; upstream's ACL rules are left alone (they
//! are not ours to delete: nothing marks whose they are). A PROXY Service upstream never served
//! there (it sends its ACL rule as `protocol=tcp-proxy`, which is refused) is served by ours.
//!
//! One test in this binary: upstream's CCM watches every Node and Service of the apiserver.

use std::collections::BTreeMap;
use std::time::Duration;

use cloud_sim::CsVmSpec;
use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use kube::api::PostParams;
use kube::{Api, ResourceExt};
use serde_json::json;
use service_controller::Settings;
use test_support::e2e::cloudstack::{
    TestVm, UpstreamCcm, cloud_with, cloudstack_writes, config, lb_rules, vm, write_cloud_config,
};
use test_support::e2e::run::{spawn, test_config};
use test_support::e2e::test_run::TestRun;
use test_support::e2e::{NodeSpecT, T, create_node, eventually, unique};

const RANGE: &str = "198.51.100.0/24";
const PROXY: &str = "service.beta.kubernetes.io/cloudstack-load-balancer-proxy-protocol";

async fn node(world: &TestRun, tier: &str) -> TestVm {
    let name = unique("cs-vpc");
    let v = vm(&world.sim, &CsVmSpec::named(&name).network(tier)).await;
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

fn service(name: &str, port: i32, ranges: Option<&str>) -> Service {
    let mut s = Service::default();
    s.metadata.name = Some(name.into());
    s.spec = Some(ServiceSpec {
        type_: Some("LoadBalancer".into()),
        selector: Some([("app".to_string(), name.to_string())].into()),
        ports: Some(vec![ServicePort {
            port,
            protocol: Some("TCP".into()),
            ..Default::default()
        }]),
        load_balancer_source_ranges: ranges.map(|r| vec![r.to_string()]),
        ..Default::default()
    });
    s
}

/// The tier's ACL rules: (protocol, start port, cidrs, reason), sorted.
async fn acl_rules(world: &TestRun, tier: &str) -> Vec<(String, u16, String, String)> {
    let v = world
        .sim
        .cloudstack_client()
        .unfaulted()
        .call(
            "listNetworkACLs",
            &[("networkid", tier), ("listall", "true")],
        )
        .await
        .unwrap();
    let s = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_owned();
    let mut out: Vec<_> = v["networkacl"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|r| {
            let port = r["startport"].as_str().and_then(|p| p.parse().ok());
            (
                s(&r["protocol"]),
                port.unwrap_or(0),
                s(&r["cidrlist"]),
                s(&r["reason"]),
            )
        })
        .collect();
    out.sort();
    out
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

fn node_port(s: &Service) -> u16 {
    let p = s.spec.as_ref().unwrap().ports.as_ref().unwrap()[0].node_port;
    u16::try_from(p.expect("a nodePort")).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_vpc_tier_ours_keeps_upstreams_rules_and_adds_acl_rules_on_the_nodeport() {
    let world = TestRun::start("service-controller", "cs-vpc", None).await;
    let cs = world.sim.cloudstack_client();
    let tier = cs
        .create_network(
            json!({"name": "tier-1", "kind": "vpc_tier", "vpc": "vpc-k8s", "acl": "k8s-acl"}),
        )
        .await
        .unwrap();
    node(&world, &tier).await;
    node(&world, &tier).await;
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
    let mut made = BTreeMap::new();
    let mut proxy = service("proxy", 443, None);
    proxy.annotations_mut().insert(PROXY.into(), "true".into());
    for s in [
        service("open", 80, None),
        service("ranged", 8080, Some(RANGE)),
        proxy,
    ] {
        let s = api.create(&PostParams::default(), &s).await.unwrap();
        made.insert(s.name_any(), s);
    }
    let mut ips = BTreeMap::new();
    for name in ["open", "ranged"] {
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
        ips.insert(name.to_string(), ip);
    }
    // The PROXY Service: its rule made, its ACL rule refused (a third create), no address.
    let proxy_uid = made["proxy"].uid().unwrap();
    let proxy_rule = eventually(
        "upstream's PROXY rule and its refused ACL rule",
        T,
        || async {
            let r = lb_rules(&world.sim, &proxy_uid).await;
            let tried = world.sim.cloudstack_calls("createNetworkACL") >= 3;
            (tried && r.len() == 1 && r[0].members.len() == 2).then(|| r[0].clone())
        },
    )
    .await;
    assert_eq!(proxy_rule.protocol, "tcp-proxy");
    let unserved = api.get("proxy").await.unwrap();
    assert_eq!(
        ingress_ip(&unserved),
        None,
        "upstream served the PROXY Service"
    );
    ips.insert("proxy".to_string(), proxy_rule.public_ip.clone());
    // Upstream's: the public ports, open to all, ranges or not.
    let theirs = eventually("upstream's ACL rules", T, || async {
        let acl = acl_rules(&world, &tier).await;
        (acl.len() == 2).then_some(acl)
    })
    .await;
    let all = "0.0.0.0/0".to_string();
    assert_eq!(
        theirs
            .iter()
            .map(|(p, port, c, _)| (p.as_str(), *port, c))
            .collect::<Vec<_>>(),
        [("tcp", 80, &all), ("tcp", 8080, &all)]
    );
    let mut rules = BTreeMap::new();
    for (name, s) in &made {
        rules.insert(name.clone(), lb_rules(&world.sim, &s.uid().unwrap()).await);
    }
    let log = upstream.stop().await;

    // Ours: no load-balancer write, one ACL rule per port on the NodePort with the ranges.
    let before = cloudstack_writes(&world.sim);
    let cloud = cloud_with(config(&world.sim)).await;
    let settings = Settings {
        namespace: Some(world.ns.clone()),
        node_sync_window: Duration::from_millis(200),
        ..Default::default()
    };
    let sa = world.service_account().await;
    let cfg = test_config(&service_controller::INFO, &world.run);
    let ours = spawn(&service_controller::INFO, cfg, sa, move |rt| {
        service_controller::start(rt, cloud, settings)
    })
    .await;
    for name in made.keys() {
        let s = eventually("LoadBalancerReady True", T, || async {
            let s = api.get_opt(name).await.ok().flatten()?;
            let c = service_controller::condition::current(&s)?;
            (c.status == "True").then_some(s.clone())
        })
        .await;
        assert_eq!(ingress_ip(&s).as_ref(), Some(&ips[name]), "{name}");
    }
    let writes: BTreeMap<String, u64> = cloudstack_writes(&world.sim)
        .into_iter()
        .map(|(k, n)| (k.clone(), n - before.get(&k).copied().unwrap_or(0)))
        .filter(|(_, n)| *n > 0)
        .collect();
    assert_eq!(
        writes,
        BTreeMap::from([("createNetworkACL".to_string(), 3)]),
        "upstream's log:\n{log}"
    );
    for (name, s) in &made {
        assert_eq!(lb_rules(&world.sim, &s.uid().unwrap()).await, rules[name]);
    }
    let lb = |name: &str| cloud_client::default_load_balancer_name(&made[name].uid().unwrap());
    let mut want = theirs.clone();
    want.push((
        "tcp".into(),
        node_port(&made["open"]),
        all.clone(),
        format!("{}-tcp-80", lb("open")),
    ));
    want.push((
        "tcp".into(),
        node_port(&made["ranged"]),
        RANGE.into(),
        format!("{}-tcp-8080", lb("ranged")),
    ));
    want.push((
        "tcp".into(),
        node_port(&made["proxy"]),
        all.clone(),
        format!("{}-tcp-proxy-443", lb("proxy")),
    ));
    want.sort();
    assert_eq!(acl_rules(&world, &tier).await, want);
    ours.stop().await.unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}
