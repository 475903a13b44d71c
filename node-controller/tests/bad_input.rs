//! Bad-input catalogue of the node controller: Nodes whose providerID or
//! `alpha.kubernetes.io/provided-node-ip` cannot be used. Each must get a Warning naming the field,
//! the offending value and what is accepted; the node keeps its uninitialized taint and its
//! providerID, the controller makes no cloud write and keeps running, and a good node next to the
//! bad ones initializes. A Node registered without the taint and without a providerID (kubelet
//! without `--cloud-provider=external`) is left alone with one Warning saying so. The table in
//! docs/bad-input.md lists the same.

use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::{Patch, PatchParams};
use node_controller::controller::NEVER_INITIALIZED_NOTE;
use test_support::e2e::run::{cloud_for, spawn, test_config};
use test_support::e2e::{
    NodeSpecT, T, create_node, eventually, get_node, has_taint, node_events, unique,
};

/// One bad Node and what its Warning must contain.
#[derive(Debug)]
struct Case {
    /// `spec.providerID`, if set.
    provider_id: Option<&'static str>,
    /// `alpha.kubernetes.io/provided-node-ip`, if set (the node then has a server of its name).
    node_ip: Option<&'static str>,
    reason: &'static str,
    /// Field, value and accepted forms, as the note must say them.
    expect: &'static [&'static str],
}

const PID: &str = "spec.providerID";
const CLOUD_FORM: &str = "hcloud://<server id>";
const NODE_IP: &str = "alpha.kubernetes.io/provided-node-ip";
const IP_FORMS: &str = "expected one IP, or an IPv4,IPv6 dual-stack pair";

const fn pid(v: &'static str, expect: &'static [&'static str]) -> Case {
    Case {
        provider_id: Some(v),
        node_ip: None,
        reason: "UnknownProviderIDPrefix",
        expect,
    }
}

const fn ip(v: &'static str, reason: &'static str, expect: &'static [&'static str]) -> Case {
    Case {
        provider_id: None,
        node_ip: Some(v),
        reason,
        expect,
    }
}

const CASES: &[Case] = &[
    pid(
        "hcloud://not-a-number",
        &[PID, "hcloud://not-a-number", CLOUD_FORM],
    ),
    pid("hcloud://", &[PID, "\"hcloud://\"", CLOUD_FORM]),
    pid("hcloud://-5", &[PID, "hcloud://-5", CLOUD_FORM]),
    pid("hcloud://0", &[PID, "hcloud://0", CLOUD_FORM]),
    pid("hcloud://12abc", &[PID, "hcloud://12abc", CLOUD_FORM]),
    pid(
        "aws:///eu-central-1a/i-0abc",
        &[PID, "aws:///eu-central-1a/i-0abc", CLOUD_FORM],
    ),
    pid(
        "gce://project/zone/vm",
        &[PID, "gce://project/zone/vm", CLOUD_FORM],
    ),
    pid(
        "hcloud://bm-x",
        &[PID, "hcloud://bm-x", "hcloud://bm-<server number>"],
    ),
    pid("hrobot://", &[PID, "hrobot://", "hrobot://<server number>"]),
    // Well-formed, but a dedicated server, and Robot support is off.
    pid(
        "hrobot://5",
        &[
            "providerID",
            "hrobot://5",
            "set ROBOT_ENABLED=true with ROBOT_USER and ROBOT_PASSWORD",
        ],
    ),
    ip(
        "not-an-ip",
        "InvalidNodeIP",
        &[NODE_IP, "not-an-ip", IP_FORMS],
    ),
    ip(
        "10.0.0.1,10.0.0.2",
        "InvalidNodeIP",
        &[NODE_IP, "10.0.0.1,10.0.0.2", "one IPv4 and one IPv6"],
    ),
    ip(
        "10.0.0.1,::1,10.0.0.2",
        "InvalidNodeIP",
        &[NODE_IP, "10.0.0.1,::1,10.0.0.2", IP_FORMS],
    ),
    ip(
        " 10.0.0.1",
        "InvalidNodeIP",
        &[NODE_IP, "\" 10.0.0.1\"", IP_FORMS],
    ),
    // Well-formed, but not an address of the node's server.
    ip(
        "10.99.99.99",
        "NodeIPNotFound",
        &[
            NODE_IP,
            "10.99.99.99",
            "expected one of the cloud addresses",
        ],
    ),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_bad_node_warns_keeps_its_taint_and_writes_nothing() {
    let k = testenv::kube().await;
    let client = k.client().await;
    let sim = cloud_sim::Sim::start().await;
    let run = unique("badnode");
    let cloud = cloud_for(&sim).await;
    let stats = cloud.stats.clone();
    let ctl = spawn(
        &node_controller::INFO,
        test_config(&node_controller::INFO, &run),
        client.clone(),
        move |rt| node_controller::start(rt, cloud, Default::default()),
    )
    .await;
    let started = std::time::Instant::now();
    let mut names = Vec::new();
    for c in CASES {
        let name = unique("bad");
        if c.node_ip.is_some() {
            test_support::e2e::sim::create_server(&sim, &name).await;
        }
        let spec = NodeSpecT {
            tainted: true,
            provider_id: c.provider_id.map(str::to_string),
            node_ip: c.node_ip.map(str::to_string),
            ..Default::default()
        };
        create_node(&client, &run, &name, spec).await;
        names.push(name);
    }
    // A good node next to the bad ones initializes.
    let good = unique("good");
    test_support::e2e::sim::create_server(&sim, &good).await;
    let spec = NodeSpecT {
        tainted: true,
        ..Default::default()
    };
    create_node(&client, &run, &good, spec).await;
    eventually("the good node initialized", T, || async {
        get_node(&client, &good)
            .await
            .filter(|n| !has_taint(n, test_support::e2e::UNINITIALIZED))
    })
    .await;

    let mut failures = Vec::new();
    for (c, name) in CASES.iter().zip(&names) {
        let what = c.provider_id.or(c.node_ip).unwrap_or_default();
        let ev = eventually(&format!("{} on {what}", c.reason), T, || async {
            node_events(&client, name)
                .await
                .into_iter()
                .find(|e| e.reason.as_deref() == Some(c.reason))
        })
        .await;
        let note = ev.note.unwrap_or_default();
        if ev.type_.as_deref() != Some("Warning") {
            failures.push(format!("{what}: not a Warning: {note}"));
        }
        for part in c.expect {
            if !note.contains(part) {
                failures.push(format!("{what}: {part:?} missing from {note:?}"));
            }
        }
        let node = get_node(&client, name).await.expect("the node exists");
        if !has_taint(&node, test_support::e2e::UNINITIALIZED) {
            failures.push(format!("{what}: the taint was removed"));
        }
        let pid = node.spec.and_then(|s| s.provider_id);
        if pid.as_deref() != c.provider_id {
            failures.push(format!("{what}: providerID is now {pid:?}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));

    let writes: Vec<_> = stats
        .snapshot()
        .calls
        .keys()
        .filter(|k| k.method != "GET")
        .cloned()
        .collect();
    assert!(writes.is_empty(), "no cloud write: {writes:?}");
    assert!(!ctl.task.is_finished(), "the controller is still running");
    let metrics = ctl.metrics().await;
    let warned: u64 = metrics
        .lines()
        .filter(|l| l.contains("bad_input_warnings_total"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum();
    assert!(warned >= CASES.len() as u64, "{warned}: {metrics}");
    println!(
        "{} bad Nodes warned and kept their taint, 0 cloud writes, good node initialized ({:.1?})",
        CASES.len(),
        started.elapsed()
    );
    ctl.stop().await.unwrap();
}

/// The value of the series `name{labels}` in a /metrics text, 0 when absent.
fn metric(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series).and_then(|v| v.trim().parse().ok()))
        .unwrap_or(0.0)
}

/// A Node as kubelet registers it without `--cloud-provider=external`: no uninitialized taint,
/// no providerID, though a server of its name exists. It is left uninitialized, as upstream, with
/// exactly one `NotInitializedByCloudProvider` Warning saying why and what to do, counted once,
/// however often it is reconciled again (a label edit) or the address sync passes over it. A
/// node with a providerID and no taint (initialized earlier) gets no such Warning.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_registered_without_external_cloud_provider_warns_once_and_is_left_alone() {
    const REASON: &str = "NotInitializedByCloudProvider";
    let k = testenv::kube().await;
    let client = k.client().await;
    let sim = cloud_sim::Sim::start().await;
    let run = unique("notaint");
    let cloud = cloud_for(&sim).await;
    let settings = node_controller::Settings {
        address_sync_period: Duration::from_millis(200),
        ..Default::default()
    };
    let ctl = spawn(
        &node_controller::INFO,
        test_config(&node_controller::INFO, &run),
        client.clone(),
        move |rt| node_controller::start(rt, cloud, settings),
    )
    .await;

    let done = unique("done");
    let server = test_support::e2e::sim::create_server(&sim, &done).await;
    let spec = NodeSpecT {
        provider_id: Some(format!("hcloud://{}", server.id)),
        ..Default::default()
    };
    create_node(&client, &run, &done, spec).await;
    let bare = unique("bare");
    let bare_server = test_support::e2e::sim::create_server(&sim, &bare).await;
    let created = create_node(&client, &run, &bare, NodeSpecT::default()).await;
    assert!(!has_taint(&created, test_support::e2e::UNINITIALIZED));

    let ev = eventually(&format!("{REASON} on {bare}"), T, || async {
        node_events(&client, &bare)
            .await
            .into_iter()
            .find(|e| e.reason.as_deref() == Some(REASON))
    })
    .await;
    assert_eq!(ev.type_.as_deref(), Some("Warning"));
    assert_eq!(ev.note.as_deref(), Some(NEVER_INITIALIZED_NOTE));
    assert_eq!(
        ev.reporting_controller.as_deref(),
        Some("cloud-node-controller")
    );

    // Reconciled again: a label edit is a change the controller acts on.
    let touched = serde_json::json!({"metadata": {"labels": {"example.com/touched": "yes"}}});
    Api::<Node>::all(client.clone())
        .patch(&bare, &PatchParams::default(), &Patch::Merge(&touched))
        .await
        .expect("label the node");
    let ok = r#"cloud_controllers_reconciles_total{controller="node-controller",result="ok"}"#;
    eventually(
        "three reconciles: done, bare, bare after the label",
        T,
        || async { (metric(&ctl.metrics().await, ok) >= 3.0).then_some(()) },
    )
    .await;
    // The address sync looks the node up by name and refreshes its addresses, as upstream's does
    // for every node without the taint: passes over the node after the warning.
    eventually("the address sync passed over the bare node", T, || async {
        let n = get_node(&client, &bare).await?;
        let addrs = n.status?.addresses?;
        addrs
            .iter()
            .any(|a| a.address == bare_server.ipv4)
            .then_some(())
    })
    .await;

    let warnings: Vec<_> = node_events(&client, &bare)
        .await
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some(REASON))
        .collect();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].series.is_none(),
        "published once, not repeated into a series: {:?}",
        warnings[0].series
    );
    let series = format!(
        r#"cloud_controllers_bad_input_warnings_total{{controller="node-controller",reason="{REASON}"}}"#
    );
    let metrics = ctl.metrics().await;
    assert_eq!(metric(&metrics, &series), 1.0, "{metrics}");

    // Left alone: no providerID, its taints as kubelet registered them, no cloud label.
    let node = get_node(&client, &bare).await.expect("the node exists");
    assert_eq!(
        node.spec.as_ref().and_then(|s| s.provider_id.as_deref()),
        None
    );
    assert_eq!(
        node.spec.as_ref().and_then(|s| s.taints.clone()),
        created.spec.as_ref().and_then(|s| s.taints.clone())
    );
    let mut expected = created.metadata.labels.clone().unwrap_or_default();
    expected.insert("example.com/touched".into(), "yes".into());
    assert_eq!(node.metadata.labels.unwrap_or_default(), expected);

    let done_warnings: Vec<_> = node_events(&client, &done)
        .await
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some(REASON))
        .collect();
    assert!(done_warnings.is_empty(), "{done_warnings:?}");
    assert!(!ctl.task.is_finished(), "the controller is still running");
    ctl.stop().await.unwrap();
}
