//! End-to-end tests of the node controller with the CloudStack provider
//! (`--cloud-provider=external-cloudstack`): real kube-apiserver (testenv), cloud-sim's CloudStack
//! API over HTTP, the controller in-process through its library entry point.

use cloud_client::Cloud;
use cloud_sim::{CsVmSpec, Sim};
use k8s_openapi::api::core::v1::Node;
use test_support::e2e::cloudstack::{cloud, vm};
use test_support::e2e::run::{Running, spawn, test_config};
use test_support::e2e::{
    NodeSpecT, T, UNINITIALIZED, create_node, event_with_reason, eventually, get_node, has_taint,
    unique,
};

async fn start_node_controller(client: kube::Client, run: &str, cloud: Cloud) -> Running {
    let cfg = test_config(&node_controller::INFO, run);
    spawn(&node_controller::INFO, cfg, client, move |rt| {
        node_controller::start(rt, cloud, Default::default())
    })
    .await
}

fn label(n: &Node, k: &str) -> Option<String> {
    n.metadata.labels.as_ref().and_then(|l| l.get(k).cloned())
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

#[tokio::test]
async fn a_tainted_node_gets_upstreams_provider_id_labels_and_addresses() {
    let k = testenv::kube().await;
    let client = k.client().await;
    let sim = Sim::start().await;
    let cs = sim.cloudstack_client();
    cs.create_offering("CKS Instance (2 vCPU, 2GB)", 2, 2048)
        .await
        .unwrap();
    let run = unique("cs-init");
    let name = unique("worker");
    // Its name inside another VM's: the API's name filter lists both.
    vm(&sim, &CsVmSpec::named(&format!("{name}0"))).await;
    let v = vm(
        &sim,
        &CsVmSpec::named(&name)
            .offering("CKS Instance (2 vCPU, 2GB)")
            .static_nat(),
    )
    .await;
    let ctl = start_node_controller(client.clone(), &run, cloud(&sim).await).await;
    create_node(
        &client,
        &run,
        &name,
        NodeSpecT {
            tainted: true,
            node_ip: Some(v.ip.clone()),
            ..Default::default()
        },
    )
    .await;

    let n = eventually("node initialized", T, || async {
        get_node(&client, &name)
            .await
            .filter(|n| !has_taint(n, UNINITIALIZED))
    })
    .await;
    assert_eq!(
        n.spec.as_ref().unwrap().provider_id.as_deref(),
        Some(v.provider_id().as_str())
    );
    // Upstream's six labels: beta and GA of instance type, zone and region.
    for (key, want) in [
        ("node.kubernetes.io/instance-type", "CKSInstance2vCPU2GB"),
        ("beta.kubernetes.io/instance-type", "CKSInstance2vCPU2GB"),
        ("topology.kubernetes.io/zone", "zone-1"),
        ("failure-domain.beta.kubernetes.io/zone", "zone-1"),
        ("topology.kubernetes.io/region", "zone-1"),
        ("failure-domain.beta.kubernetes.io/region", "zone-1"),
    ] {
        assert_eq!(label(&n, key).as_deref(), Some(want), "{key}");
    }
    let public = v.public_ip.clone().expect("static NAT");
    let want = vec![
        ("InternalIP".to_string(), v.ip.clone()),
        ("ExternalIP".to_string(), public),
        // The Node's own: the cloud names none (its `hostname` is the hypervisor's).
        ("Hostname".to_string(), name.clone()),
    ];
    eventually("addresses written", T, || async {
        let a = addresses(&get_node(&client, &name).await?);
        (a == want).then_some(())
    })
    .await;
    eventually("Synced event", T, || {
        event_with_reason(&client, &name, "Synced")
    })
    .await;
    ctl.stop().await.unwrap();
}

#[tokio::test]
async fn a_name_two_vms_have_leaves_the_node_tainted_with_a_warning_naming_both() {
    let k = testenv::kube().await;
    let client = k.client().await;
    let sim = Sim::start().await;
    let run = unique("cs-dup");
    let name = unique("dup");
    // CloudStack allows equal names in other networks, accounts and projects.
    let a = vm(&sim, &CsVmSpec::named(&name)).await;
    let b = vm(&sim, &CsVmSpec::named(&name).zone("zone-2")).await;
    let ctl = start_node_controller(client.clone(), &run, cloud(&sim).await).await;
    create_node(
        &client,
        &run,
        &name,
        NodeSpecT {
            tainted: true,
            ..Default::default()
        },
    )
    .await;

    let event = eventually("InstanceLookupFailed warning", T, || {
        event_with_reason(&client, &name, "InstanceLookupFailed")
    })
    .await;
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    let note = event.note.unwrap_or_default();
    assert!(note.contains(&a.id) && note.contains(&b.id), "{note}");
    let n = get_node(&client, &name).await.unwrap();
    assert!(has_taint(&n, UNINITIALIZED), "no VM is picked by guessing");
    assert!(n.spec.as_ref().unwrap().provider_id.is_none());
    ctl.stop().await.unwrap();
}
