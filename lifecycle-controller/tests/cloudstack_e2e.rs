//! End-to-end tests of the lifecycle controller with the CloudStack provider
//! (`--cloud-provider=external-cloudstack`): real kube-apiserver (testenv), cloud-sim's CloudStack
//! API over HTTP, the controller in-process through its library entry point.

use cloud_client::Cloud;
use cloud_sim::{CsVmSpec, Sim};
use lifecycle_controller::filter::NodeFilter;
use test_support::e2e::cloudstack::{cloud, set_state, vm};
use test_support::e2e::run::{Running, spawn, test_config};
use test_support::e2e::{
    NodeSpecT, T, create_node, event_with_reason, eventually, get_node, has_taint, set_ready,
    unique,
};

const SHUTDOWN: &str = "node.cloudprovider.kubernetes.io/shutdown";

/// The lifecycle controller on this run's Nodes, passing every 500 ms.
async fn start_lifecycle(client: kube::Client, run: &str, cloud: Cloud) -> Running {
    let cfg = test_config(&lifecycle_controller::INFO, run);
    let settings = lifecycle_controller::Settings {
        filter: NodeFilter::default(),
        monitor_period: std::time::Duration::from_millis(500),
    };
    spawn(&lifecycle_controller::INFO, cfg, client, move |rt| {
        lifecycle_controller::start(rt, cloud, settings)
    })
    .await
}

async fn not_ready_node(client: &kube::Client, run: &str, name: &str, provider_id: String) {
    create_node(
        client,
        run,
        name,
        NodeSpecT {
            provider_id: Some(provider_id),
            ready: Some(false),
            ..Default::default()
        },
    )
    .await;
}

async fn deleted(client: &kube::Client, name: &str) {
    eventually(&format!("node {name} deleted"), T, || async {
        get_node(client, name).await.is_none().then_some(())
    })
    .await
}

#[tokio::test]
async fn a_stopped_vm_taints_its_node_and_a_destroyed_or_expunged_one_deletes_it() {
    let k = testenv::kube().await;
    let client = k.client().await;
    let sim = Sim::start().await;
    let run = unique("cs-life");
    let (stopped, destroyed, expunged, running) = (
        unique("stopped"),
        unique("destroyed"),
        unique("expunged"),
        unique("running"),
    );
    let vms = [
        vm(&sim, &CsVmSpec::named(&stopped).state("Stopped")).await,
        vm(&sim, &CsVmSpec::named(&destroyed)).await,
        vm(&sim, &CsVmSpec::named(&expunged)).await,
        vm(&sim, &CsVmSpec::named(&running)).await,
    ];
    for (name, v) in [&stopped, &destroyed, &expunged, &running]
        .into_iter()
        .zip(&vms)
    {
        not_ready_node(&client, &run, name, v.provider_id()).await;
    }
    let ctl = start_lifecycle(client.clone(), &run, cloud(&sim).await).await;

    // Upstream never taints: its shutdown check is not implemented.
    let n = eventually("shutdown taint on the stopped VM's node", T, || async {
        get_node(&client, &stopped)
            .await
            .filter(|n| has_taint(n, SHUTDOWN))
    })
    .await;
    let taint = n
        .spec
        .and_then(|s| s.taints)
        .unwrap_or_default()
        .into_iter()
        .find(|t| t.key == SHUTDOWN)
        .unwrap();
    assert_eq!(taint.effect, "NoSchedule");

    // Upstream never deletes: it asks by name, and a missing VM is an error to it.
    set_state(&sim, &vms[1], "Destroyed").await;
    sim.cloudstack_client()
        .expunge_vm(&vms[2].id)
        .await
        .unwrap();
    deleted(&client, &destroyed).await;
    deleted(&client, &expunged).await;
    let ev = event_with_reason(&client, &destroyed, "DeletingNode")
        .await
        .expect("DeletingNode event");
    assert!(
        ev.note
            .unwrap_or_default()
            .contains("does not exist in the cloud provider")
    );
    // The running VM's NotReady Node is kept, untainted.
    let n = get_node(&client, &running).await.expect("kept");
    assert!(!has_taint(&n, SHUTDOWN));

    // Ready again: the taint goes (no cloud call needed).
    set_state(&sim, &vms[0], "Running").await;
    set_ready(&client, &stopped, true).await;
    eventually("shutdown taint removed", T, || async {
        get_node(&client, &stopped)
            .await
            .filter(|n| !has_taint(n, SHUTDOWN))
    })
    .await;
    ctl.stop().await.unwrap();
}

#[tokio::test]
async fn cloudstack_errors_never_delete_a_node() {
    let k = testenv::kube().await;
    let client = k.client().await;
    let sim = Sim::start().await;
    let run = unique("cs-errors");
    let name = unique("node");
    let v = vm(&sim, &CsVmSpec::named(&name)).await;
    not_ready_node(&client, &run, &name, v.provider_id()).await;
    let cloud = cloud(&sim).await;
    // Every check fails, one after the other (the Node backs off 2 s, then 4 s, ...): a bad
    // parameter (431, not retried), the management server's own error (530, every attempt),
    // then no answer at all (the proxy's 503).
    sim.cloudstack_fail_next(Some("listVirtualMachines"), 1, 431);
    sim.cloudstack_fail_next(Some("listVirtualMachines"), 3, 530);
    let ctl = start_lifecycle(client.clone(), &run, cloud).await;
    eventually("the 431 and the 530s", T, || async {
        (sim.cloudstack_calls("listVirtualMachines") >= 4).then_some(())
    })
    .await;
    sim.set_cloudstack_unreachable(true);
    eventually("a check against the unreachable server", T, || async {
        (sim.cloudstack_calls("listVirtualMachines") >= 5).then_some(())
    })
    .await;
    assert!(
        get_node(&client, &name).await.is_some(),
        "never deleted on an error"
    );
    // Once the API answers again and the VM is gone, the Node goes.
    sim.set_cloudstack_unreachable(false);
    set_state(&sim, &v, "Destroyed").await;
    deleted(&client, &name).await;
    ctl.stop().await.unwrap();
}
