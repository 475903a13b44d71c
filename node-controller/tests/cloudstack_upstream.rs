//! Side by side with upstream's CloudStack CCM (apache/cloudstack-kubernetes-provider v1.2.0,
//! built by `testenv::cloudstack_ccm()`): the same apiserver, the same cloud-sim CloudStack API,
//! the same cloud-config file.
//!
//! Upstream initializes a few Nodes (two zones, VMs with and without a static-NAT address, an
//! offering name with spaces, dots and parentheses) and is stopped; then our node-controller runs
//! on them and must write nothing (a switch changes no Node). Then the same Nodes register again,
//! tainted, and ours initializes them: the providerID, labels and addresses upstream gave them,
//! but for the one deliberate difference, the Hostname (docs/cloudstack.md#the-hostname).
//!
//! This binary's apiserver holds only this test's Nodes: upstream's CCM watches every Node.

use std::collections::BTreeMap;
use std::time::Duration;

use cloud_sim::{CsVmSpec, Sim};
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::DeleteParams;
use test_support::e2e::cloudstack::{TestVm, UpstreamCcm, cloud_with, vm, write_cloud_config};
use test_support::e2e::run::{spawn, test_config};
use test_support::e2e::{
    NodeSpecT, T, UNINITIALIZED, create_node, eventually, get_node, has_taint, unique,
};

/// An offering name upstream strips to `m1smallPlus2vCPU2GB`.
const OFFERING: &str = "m1.small Plus (2 vCPU, 2GB)";

struct Case {
    name: String,
    vm: TestVm,
    /// Registered with kubelet's `--node-ip` (the provided-node-ip annotation).
    node_ip: bool,
}

fn addresses(n: &Node) -> Vec<(String, String)> {
    n.status
        .as_ref()
        .and_then(|s| s.addresses.as_ref())
        .map(|a| {
            a.iter()
                .map(|a| (a.type_.clone(), a.address.clone()))
                .collect()
        })
        .unwrap_or_default()
}

fn without_hostname(a: &[(String, String)]) -> Vec<(String, String)> {
    a.iter().filter(|(t, _)| t != "Hostname").cloned().collect()
}

fn hostname(a: &[(String, String)]) -> Option<String> {
    a.iter()
        .find(|(t, _)| t == "Hostname")
        .map(|(_, v)| v.clone())
}

fn provider_id(n: &Node) -> Option<String> {
    n.spec.as_ref().and_then(|s| s.provider_id.clone())
}

fn labels(n: &Node) -> BTreeMap<String, String> {
    n.metadata.labels.clone().unwrap_or_default()
}

fn resource_version(n: &Node) -> String {
    n.metadata.resource_version.clone().unwrap_or_default()
}

/// A Node the cloud initialized: untainted, with a providerID and its VM's InternalIP.
async fn initialized(client: &kube::Client, c: &Case) -> Option<Node> {
    let n = get_node(client, &c.name).await?;
    let done = !has_taint(&n, UNINITIALIZED)
        && provider_id(&n).is_some()
        && addresses(&n).contains(&("InternalIP".into(), c.vm.ip.clone()))
        && c.vm
            .public_ip
            .as_ref()
            .is_none_or(|ip| addresses(&n).contains(&("ExternalIP".into(), ip.clone())));
    done.then_some(n)
}

async fn register(client: &kube::Client, run: &str, c: &Case) {
    create_node(
        client,
        run,
        &c.name,
        NodeSpecT {
            tainted: true,
            ready: Some(true),
            node_ip: c.node_ip.then(|| c.vm.ip.clone()),
            ..Default::default()
        },
    )
    .await;
}

/// `cloud_controllers_reconciles_total{controller="node-controller",result="ok"}`.
fn reconciles_ok(metrics: &str) -> u64 {
    metrics
        .lines()
        .find_map(|l| {
            l.strip_prefix(
                r#"cloud_controllers_reconciles_total{controller="node-controller",result="ok"} "#,
            )
        })
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

#[tokio::test]
async fn nodes_upstream_initialized_get_no_write_and_ours_initialize_them_as_upstream() {
    let k = testenv::kube().await;
    let client = k.client().await;
    let sim = Sim::start().await;
    let cs = sim.cloudstack_client();
    cs.create_offering(OFFERING, 2, 2048).await.unwrap();
    let run = unique("cs-upstream");
    let mut cases = Vec::new();
    for (suffix, zone, offering, nat, node_ip) in [
        ("a", "zone-1", OFFERING, true, true),
        ("b", "zone-1", "Small Instance", false, false),
        ("c", "zone-2", OFFERING, false, true),
        ("d", "zone-2", "Small Instance", true, false),
    ] {
        let name = format!("{run}-{suffix}");
        let mut spec = CsVmSpec::named(&name).zone(zone).offering(offering);
        if nat {
            spec = spec.static_nat();
        }
        let vm = vm(&sim, &spec).await;
        cases.push(Case { name, vm, node_ip });
    }
    let dir = std::env::temp_dir().join(&run);
    std::fs::create_dir_all(&dir).unwrap();
    let cloud_config = dir.join("cloud-config");
    write_cloud_config(&sim, &cloud_config);

    // 1. Upstream initializes them.
    let upstream = UpstreamCcm::start(k.kubeconfig(), &cloud_config, &dir.join("upstream.log"));
    for c in &cases {
        register(&client, &run, c).await;
    }
    let mut by_upstream = BTreeMap::new();
    for c in &cases {
        let n = tokio::time::timeout(
            Duration::from_secs(60),
            eventually(
                "upstream initialized the Node",
                Duration::from_secs(60),
                || initialized(&client, c),
            ),
        )
        .await
        .unwrap_or_else(|_| panic!("upstream's log:\n{}", upstream.output()));
        by_upstream.insert(c.name.clone(), n);
    }
    let log = upstream.stop().await;
    // Read again once it is stopped: what it wrote last.
    for c in &cases {
        by_upstream.insert(c.name.clone(), get_node(&client, &c.name).await.unwrap());
    }
    let upstream_calls = sim.cloudstack_calls("listVirtualMachines");
    assert!(upstream_calls > 0, "{log}");

    // 2. Ours, with the same cloud-config, on the Nodes upstream initialized: no write.
    let config = cloud_client::cloudstack::CloudStackConfig::from_file(&cloud_config)
        .unwrap_or_else(|p| panic!("{p:?}"));
    let cloud = cloud_with(config).await;
    let settings = node_controller::Settings {
        // Passes in quick succession, so the test can wait for two whole ones.
        address_sync_period: Duration::from_millis(200),
        ..Default::default()
    };
    let cfg = test_config(&node_controller::INFO, &run);
    let ctl = spawn(&node_controller::INFO, cfg, client.clone(), move |rt| {
        node_controller::start(rt, cloud, settings)
    })
    .await;
    let n = cases.len() as u64;
    // Synced: each Node reconciled, and at least two address-sync passes begun after the first
    // (a pass writes before the next one starts: each looks every Node up by its id once).
    eventually("our node-controller synced", T, || async {
        let looked_up = sim.cloudstack_calls("listVirtualMachines") - upstream_calls;
        (reconciles_ok(&ctl.metrics().await) >= n && looked_up >= 3 * n).then_some(())
    })
    .await;
    for c in &cases {
        let before = &by_upstream[&c.name];
        let now = get_node(&client, &c.name).await.unwrap();
        assert_eq!(
            resource_version(&now),
            resource_version(before),
            "{}: our node-controller wrote to a Node upstream initialized:\nupstream's: {:?}\nnow: {:?}",
            c.name,
            before,
            now
        );
    }

    // 3. The same Nodes registered again, tainted: ours initializes them as upstream did.
    let api: Api<Node> = Api::all(client.clone());
    for c in &cases {
        api.delete(&c.name, &DeleteParams::default()).await.unwrap();
    }
    for c in &cases {
        eventually("Node deleted", T, || async {
            get_node(&client, &c.name).await.is_none().then_some(())
        })
        .await;
        register(&client, &run, c).await;
    }
    for c in &cases {
        let theirs = &by_upstream[&c.name];
        // Until it has written all it will (or the deadline: then the assertions say what differs).
        let deadline = tokio::time::Instant::now() + T;
        let ours = loop {
            let n = initialized(&client, c).await;
            let same = n.as_ref().is_some_and(|n| {
                labels(n) == labels(theirs)
                    && without_hostname(&addresses(n)) == without_hostname(&addresses(theirs))
            });
            if same || tokio::time::Instant::now() > deadline {
                break n.unwrap_or_else(|| panic!("{}: ours did not initialize it", c.name));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        assert_eq!(provider_id(&ours), provider_id(theirs), "{}", c.name);
        assert_eq!(
            provider_id(&ours).as_deref(),
            Some(c.vm.provider_id().as_str())
        );
        assert_eq!(labels(&ours), labels(theirs), "{}: labels", c.name);
        let (a_ours, a_theirs) = (addresses(&ours), addresses(theirs));
        assert_eq!(
            without_hostname(&a_ours),
            without_hostname(&a_theirs),
            "{}: addresses",
            c.name
        );
        // The one difference, on purpose: upstream (with the admin keys it needs) names the
        // hypervisor host the VM runs on; ours keeps the Node's own.
        let host = cs.vm(&c.vm.id).await.unwrap()["host"]
            .as_str()
            .map(str::to_owned);
        assert_eq!(hostname(&a_theirs), host, "{}: upstream's Hostname", c.name);
        assert_eq!(hostname(&a_ours), Some(c.name.clone()), "{}", c.name);
    }
    // The sanitized offering, the zones and regions, as upstream wrote them.
    let a = &by_upstream[&cases[0].name];
    assert_eq!(
        labels(a)
            .get("node.kubernetes.io/instance-type")
            .map(String::as_str),
        Some("m1smallPlus2vCPU2GB")
    );
    let d = &by_upstream[&cases[3].name];
    assert_eq!(
        labels(d)
            .get("topology.kubernetes.io/region")
            .map(String::as_str),
        Some("zone-2")
    );
    ctl.stop().await.unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}
