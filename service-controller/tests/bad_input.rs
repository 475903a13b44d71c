//! Bad-input catalogue of the service controller: every `load-balancer.hetzner.cloud/*`
//! annotation it parses given a malformed value, Service specs no load balancer can serve, and a
//! Node it cannot target. Each must end in a Warning that names the field, the offending value and
//! what is accepted, with no cloud write, while the controller keeps running and a good Service
//! next to the bad ones converges. The table in docs/bad-input.md lists the same.
//! The catalogue itself lives in `test_support::catalogues::bad_input`, shared with the chart's admission-policy
//! test; this test runs it with no policy installed: the controller alone catches every case.

mod support;

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ServicePort;
use k8s_openapi::api::events::v1::Event;
use kube::Api;
use kube::api::ListParams;
use support::{Fixture, T, annotation_patch};
use test_support::catalogues::bad_input::{CASES, NOT_OURS_LB, Ports};
use test_support::e2e::{NodeSpecT, create_node, eventually, unique};

/// The Warning notes of `reason` per object name, in namespace `ns`.
async fn warnings(fx: &Fixture, ns: &str, reason: &str) -> BTreeMap<String, String> {
    Api::<Event>::namespaced(fx.admin.clone(), ns)
        .list(&ListParams::default())
        .await
        .expect("list events")
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some(reason) && e.type_.as_deref() == Some("Warning"))
        .filter_map(|e| Some((e.regarding?.name?, e.note.unwrap_or_default())))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_bad_input_warns_with_field_value_and_accepted_forms_and_writes_nothing() {
    let fx = Fixture::start().await;
    let node = fx.nodes(1).await.remove(0);
    // A Node this cloud cannot target: skipped with a Warning on the Node.
    let foreign = unique("aws-node");
    let foreign_pid = "aws:///eu-central-1a/i-0abc";
    create_node(
        &fx.admin,
        &fx.run,
        &foreign,
        NodeSpecT {
            provider_id: Some(foreign_pid.into()),
            ready: Some(true),
            ..Default::default()
        },
    )
    .await;
    // What the `t-*` cases name: a load balancer made outside the cluster.
    fx.sim
        .client()
        .create_load_balancer(NOT_OURS_LB, "lb11", "fsn1")
        .await
        .expect("a load balancer made outside the cluster");
    let mark = fx.mark();
    let started = std::time::Instant::now();
    for c in CASES {
        match c.ports {
            Ports::Tcp(p) => fx.service(c.name, p, c.ann).await,
            Ports::Udp(port) => {
                fx.service_with(c.name, &[], c.ann, |s| {
                    s.ports = Some(vec![ServicePort {
                        name: Some("dns".into()),
                        port,
                        protocol: Some("UDP".into()),
                        ..Default::default()
                    }])
                })
                .await
            }
        };
    }
    // A good Service next to the bad ones converges, targeting only the Hetzner node.
    fx.service("good", &[80], &[]).await;
    let good = fx.wait_ingress("good").await;
    fx.wait_targets(&good, &[node.server]).await;

    let notes = eventually(
        "a SyncLoadBalancerFailed Warning on every case",
        T,
        || async {
            let w = warnings(&fx, &fx.ns, "SyncLoadBalancerFailed").await;
            CASES.iter().all(|c| w.contains_key(c.name)).then_some(w)
        },
    )
    .await;
    let mut failures = Vec::new();
    for c in CASES {
        let note = &notes[c.name];
        for part in [c.field, c.value, c.hint] {
            if !note.contains(part) {
                failures.push(format!("{}: {part:?} missing from {note:?}", c.name));
            }
        }
        if c.field != "Service ports" && !note.contains(&format!("{}{}", support::PREFIX, c.field))
        {
            failures.push(format!(
                "{}: the full annotation key is missing: {note}",
                c.name
            ));
        }
    }
    // Both mistakes of the two-at-once case are named.
    assert!(notes["m-two"].contains("\"udp\""), "{}", notes["m-two"]);
    assert!(!notes.contains_key("good"), "{notes:?}");
    assert!(failures.is_empty(), "{}", failures.join("\n"));

    let note = eventually("UnknownProviderIDPrefix on the foreign node", T, || async {
        warnings(&fx, "default", "UnknownProviderIDPrefix")
            .await
            .remove(&foreign)
    })
    .await;
    assert!(
        note.contains(foreign_pid) && note.contains("hcloud://<server id>"),
        "{note}"
    );

    let writes = fx.writes_since(&mark);
    assert_eq!(
        writes,
        [("POST".to_string(), "/load_balancers".to_string())],
        "only the good Service's create"
    );
    for c in CASES {
        let svc = fx.get(c.name).await.expect("the Service exists");
        assert!(
            fx.lbs_of(&svc).await.is_empty(),
            "{}: no load balancer",
            c.name
        );
        assert!(
            support::ingress_ips(&svc).is_empty(),
            "{}: no ingress",
            c.name
        );
    }
    let ctl = fx.ctl.as_ref().expect("started");
    assert!(!ctl.task.is_finished(), "the controller is still running");
    let metrics = fx.metrics().await;
    let counted: u64 = metrics
        .lines()
        .filter(|l| {
            l.contains("bad_input_warnings_total")
                && (l.contains("InvalidLoadBalancerInput") || l.contains("LoadBalancerConflict"))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum();
    assert!(
        counted >= CASES.len() as u64,
        "{counted} < {}: {metrics}",
        CASES.len()
    );
    println!(
        "{} bad Services warned, 0 cloud writes for them, good Service converged ({:.1?})",
        CASES.len(),
        started.elapsed()
    );

    // Fixing a bad value is all it takes.
    fx.patch("e-type", annotation_patch("type", Some("lb11")))
        .await;
    fx.wait_ingress("e-type").await;
}

/// HCCM ignores `private-ipv4` and `private-subnet-ip-range` without a network; Services it served
/// with them must keep being served after a switch. They are ignored here too, with a Warning.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn private_network_annotations_without_a_network_warn_and_still_serve() {
    let fx = Fixture::start().await;
    fx.nodes(1).await;
    for (name, key, value) in [
        ("p-fixed-ip", "private-ipv4", "10.0.0.5"),
        ("p-subnet", "private-subnet-ip-range", "10.0.1.0/24"),
    ] {
        fx.service(name, &[80], &[(key, value)]).await;
        fx.wait_ingress(name).await;
        let note = fx
            .wait_event("Service", name, "PrivateNetworkIgnored")
            .await;
        assert!(
            note.contains(&format!("{}{key}", support::PREFIX))
                && note.contains(value)
                && note.contains("HCLOUD_NETWORK"),
            "{note}"
        );
    }
}
