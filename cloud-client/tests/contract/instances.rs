//! Instances: metadata, existence, shutdown, provider IDs, the shared server snapshot, and the
//! network lookup at startup.

use std::time::Duration;

use cloud_client::hcloud::HcloudClients;
use cloud_client::{AddressKind, CloudError, NodeAddress, NodeRef};

use crate::common::{config, provider};
use crate::{calls, server_in_network, sim_fast};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instance_metadata_by_name_and_provider_id() {
    let sim = sim_fast().await;
    let w = sim.client();
    let (net, id) = server_in_network(&sim, "node-1").await;
    let p = provider(&sim, |c| {
        c.network.name_or_id = Some("k8s".into());
        c.instances.address_family = cloud_client::hcloud::AddressFamily::DualStack;
    })
    .await;
    assert_eq!(p.network_id(), Some(net as i64));
    let inst = p.instances();

    let by_name = inst
        .instance_metadata(&NodeRef::new("node-1"))
        .await
        .unwrap();
    assert_eq!(by_name.provider_id, format!("hcloud://{id}"));
    assert_eq!(by_name.instance_type, "cx22");
    assert_eq!(by_name.region.as_deref(), Some("fsn1"));
    assert_eq!(by_name.zone.as_deref(), Some("fsn1-dc14"));
    assert_eq!(
        by_name.additional_labels["instance.hetzner.cloud/provided-by"],
        "cloud"
    );
    let kinds: Vec<AddressKind> = by_name.addresses.iter().map(|a| a.kind).collect();
    assert_eq!(
        kinds,
        [
            AddressKind::Hostname,
            AddressKind::ExternalIP,
            AddressKind::ExternalIP,
            AddressKind::InternalIP
        ]
    );
    assert_eq!(by_name.addresses[0].address, "node-1");
    assert!(
        by_name.addresses[2].address.ends_with("::1"),
        "{:?}",
        by_name.addresses
    );
    assert!(
        by_name.addresses[3].address.starts_with("10.0.1."),
        "{:?}",
        by_name.addresses
    );
    let server = w.get_server(id).await.unwrap();
    assert_eq!(
        by_name.addresses[1].address,
        server["public_net"]["ipv4"]["ip"].as_str().unwrap()
    );

    let by_id = inst
        .instance_metadata(&NodeRef::with_provider_id(
            "other-name",
            format!("hcloud://{id}"),
        ))
        .await
        .unwrap();
    assert_eq!(by_id, by_name);
    assert!(inst.instance_exists(&NodeRef::new("node-1")).await.unwrap());
    assert!(
        !inst
            .instance_shutdown(&NodeRef::new("node-1"))
            .await
            .unwrap()
    );
    // Everything above came from one server list (plus the network resolution).
    assert_eq!(sim.requests("GET", "/servers"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zone_label_disabled_and_ipv4_only() {
    let sim = sim_fast().await;
    sim.client()
        .create_server("node-z", "cx22", "nbg1")
        .await
        .unwrap();
    let p = provider(&sim, |c| c.instances.zone_label_enabled = false).await;
    let md = p
        .instances()
        .instance_metadata(&NodeRef::new("node-z"))
        .await
        .unwrap();
    assert_eq!(md.zone, None);
    assert_eq!(md.region.as_deref(), Some("nbg1"));
    assert_eq!(md.addresses.len(), 2, "{:?}", md.addresses);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tolerant_decoding_without_datacenter_and_with_null_ipv4() {
    let sim = sim_fast().await;
    sim.client()
        .create_server("node-t", "cx22", "hel1")
        .await
        .unwrap();
    sim.faults()
        .omit_field(Some("GET /servers"), "server.public_net.ipv4", true);
    sim.faults()
        .omit_field(Some("GET /servers"), "server.datacenter", false);
    let p = provider(&sim, |_| {}).await;
    let md = p
        .instances()
        .instance_metadata(&NodeRef::new("node-t"))
        .await
        .unwrap();
    assert_eq!(
        md.addresses,
        vec![NodeAddress::new(AddressKind::Hostname, "node-t")]
    );
    assert_eq!(md.zone.as_deref(), Some("hel1-dc2"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn not_found_is_confirmed_by_a_fresh_list_and_names_what_was_tried() {
    let sim = sim_fast().await;
    let w = sim.client();
    let id = w.create_server("node-gone", "cx22", "fsn1").await.unwrap();
    let p = provider(&sim, |c| c.server_cache.miss_fresh = Duration::ZERO).await;
    let inst = p.instances();
    let node = NodeRef::with_provider_id("node-gone", format!("hcloud://{id}"));
    assert!(inst.instance_exists(&node).await.unwrap());
    w.delete_server(id).await.unwrap();
    // The cached snapshot still has the server: exists stays true until it is refreshed ...
    assert!(inst.instance_exists(&node).await.unwrap());
    // ... but a miss is never served from the cache: an unknown name costs one read of that name
    // (`GET /servers?name=`), and a name alone never proves a server gone.
    let before = sim.requests("GET", "/servers");
    let err = inst
        .instance_exists(&NodeRef::new("never-existed"))
        .await
        .unwrap_err();
    assert!(
        err.is_not_found() && err.to_string().contains("never-existed"),
        "{err}"
    );
    assert_eq!(sim.requests("GET", "/servers"), before + 1);
    // Once the list is past its max age, the deletion (an action) costs a fresh list, and the
    // server's own 404 confirms it.
    let p = provider(&sim, |c| c.server_cache.max_age = Duration::ZERO).await;
    let inst = p.instances();
    assert!(!inst.instance_exists(&node).await.unwrap());
    let err = inst.instance_metadata(&node).await.unwrap_err();
    assert!(err.is_not_found(), "{err}");
    let msg = err.to_string();
    assert!(
        msg.contains(&format!("hcloud://{id}")) && msg.contains("node-gone"),
        "{msg}"
    );
    let err = inst
        .instance_metadata(&NodeRef::new("nobody"))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("server name \"nobody\""), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_is_status_off() {
    let sim = sim_fast().await;
    let w = sim.client();
    let id = w.create_server("node-off", "cx22", "fsn1").await.unwrap();
    w.poweroff(id).await.unwrap();
    let p = provider(&sim, |_| {}).await;
    assert!(
        p.instances()
            .instance_shutdown(&NodeRef::new("node-off"))
            .await
            .unwrap()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn robot_and_foreign_provider_ids_are_errors_not_absence() {
    let sim = sim_fast().await;
    let p = provider(&sim, |_| {}).await;
    for pid in ["hrobot://12", "hcloud://bm-12"] {
        let e = p
            .instances()
            .instance_exists(&NodeRef::with_provider_id("r", pid))
            .await
            .unwrap_err();
        assert!(matches!(e, CloudError::Unsupported { .. }), "{e}");
    }
    let e = p
        .instances()
        .instance_exists(&NodeRef::with_provider_id("x", "aws:///i-1"))
        .await
        .unwrap_err();
    assert!(matches!(e, CloudError::InvalidInput { .. }), "{e}");
    assert_eq!(calls(&sim), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshot_serves_1000_concurrent_lookups_with_one_paginated_list() {
    let sim = sim_fast().await;
    let ids = sim
        .client()
        .create_servers(1000, "bulk", "cx22", "fsn1")
        .await
        .unwrap();
    assert_eq!(ids.len(), 1000);
    let names: Vec<String> = sim
        .client()
        .list_servers()
        .await
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap().to_string())
        .collect();
    sim.reset_counters();
    let p = provider(&sim, |_| {}).await;
    let inst = p.instances();
    let lookups = names.iter().map(|n| {
        let inst = inst.clone();
        let n = n.clone();
        async move { inst.instance_metadata(&NodeRef::new(n)).await }
    });
    let results = futures::future::join_all(lookups).await;
    assert!(results.iter().all(Result::is_ok));
    let lists = sim.requests("GET", "/servers");
    println!(
        "FIGURE snapshot: 1000 concurrent instance lookups cost {lists} GET /servers calls (pages of 50)"
    );
    assert!(lists <= 21, "{lists}");
    assert_eq!(p.stats().snapshot().calls_to("GET", "/servers"), lists);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn network_by_id_and_missing_network_fails_at_startup() {
    let sim = sim_fast().await;
    let net = sim
        .client()
        .create_network("cluster-net", "10.0.0.0/16", "10.0.1.0/24")
        .await
        .unwrap();
    let p = provider(&sim, |c| c.network.name_or_id = Some(net.to_string())).await;
    assert_eq!(p.network_id(), Some(net as i64));
    let mut c = config(&sim);
    c.network.name_or_id = Some("does-not-exist".into());
    let e = HcloudClients::new(c).await.unwrap_err();
    assert!(
        e.is_not_found() && e.to_string().contains("does-not-exist"),
        "{e}"
    );
    assert!(p.check_connectivity().await.is_ok());
}

/// Lists lag behind creates: a server missing from every list still exists while `GET
/// /servers/{id}` finds it, and only that read's 404 says it is gone (`cargo xtask chaos`'s
/// "lists omit servers" deleted Nodes of running servers before).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_that_misses_a_server_never_makes_it_gone() {
    let sim = sim_fast().await;
    let w = sim.client();
    let id = w.create_server("lagging", "cx22", "fsn1").await.unwrap();
    sim.faults().omit_items(Some("GET /servers"), 1.0);
    let p = provider(&sim, |c| c.server_cache.miss_fresh = Duration::ZERO).await;
    let inst = p.instances();
    let node = NodeRef::with_provider_id("lagging", format!("hcloud://{id}"));
    assert!(inst.instance_exists(&node).await.unwrap());
    assert_eq!(
        sim.requests("GET", "/servers/{id}"),
        1,
        "asked the server itself"
    );
    let by_name = inst.instance_exists(&NodeRef::new("lagging")).await;
    assert!(
        by_name.is_err_and(|e| e.is_not_found()),
        "a name miss is no proof"
    );
    w.delete_server(id).await.unwrap();
    assert!(!inst.instance_exists(&node).await.unwrap());
}

/// `HCLOUD_SERVER_CACHE_MODE`: `all` lists once for both lookups; `one` reads each server by itself
/// once and keeps it; `off` reads it at every lookup. A server missing from the list is still
/// confirmed by id in `all`, and a 404 in `one`/`off` is final (one read, no second ask).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_cache_modes_read_as_hccm_names_them() {
    use cloud_client::hcloud::ServerCacheMode;
    let sim = sim_fast().await;
    let id = sim
        .client()
        .create_server("node-1", "cx22", "fsn1")
        .await
        .unwrap();
    let by_id = NodeRef {
        provider_id: Some(format!("hcloud://{id}")),
        ..NodeRef::new("node-1")
    };
    let by_name = NodeRef::new("node-1");
    // (calls to GET /servers, list or ?name=; calls to GET /servers/{id}) for the four lookups.
    for (mode, expected) in [
        (ServerCacheMode::All, (1, 0)),
        (ServerCacheMode::One, (1, 1)),
        (ServerCacheMode::Off, (2, 2)),
    ] {
        let p = provider(&sim, |c| {
            c.server_cache.mode = mode;
            c.server_cache.max_age = Duration::from_secs(60);
        })
        .await;
        let inst = p.instances();
        for node in [&by_id, &by_name, &by_id, &by_name] {
            let meta = inst.instance_metadata(node).await.unwrap();
            assert_eq!(meta.provider_id, format!("hcloud://{id}"), "{mode:?}");
        }
        let calls = p.stats().snapshot();
        let gets = calls.calls_to("GET", "/servers/{id}");
        assert_eq!(
            (calls.calls_to("GET", "/servers"), gets),
            expected,
            "{mode:?}: {calls:?}"
        );
        assert!(
            !inst
                .instance_exists(&NodeRef {
                    provider_id: Some("hcloud://999999".into()),
                    ..NodeRef::new("gone")
                })
                .await
                .unwrap(),
            "{mode:?}"
        );
        let gone_reads = p.stats().snapshot().calls_to("GET", "/servers/{id}") - gets;
        assert_eq!(gone_reads, 1, "{mode:?}: a 404 is asked once");
    }
}

/// `HCLOUD_SERVER_CACHE_RELIST_PERIOD`: a server list past its max age is confirmed by one call to
/// the servers' action list while no server changed; a change (here a power-off) costs a full
/// list, which shows it; with the period 0 every refresh is a full list again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_old_server_list_is_confirmed_by_one_call_while_no_server_changed() {
    let sim = sim_fast().await;
    let w = sim.client();
    let id = w.create_server("node-1", "cx22", "fsn1").await.unwrap();
    let node = NodeRef::with_provider_id("node-1", format!("hcloud://{id}"));
    // Max age 0: every lookup wants the list confirmed or made again.
    let p = provider(&sim, |c| c.server_cache.max_age = Duration::ZERO).await;
    let inst = p.instances();
    for _ in 0..3 {
        assert!(!inst.instance_shutdown(&node).await.unwrap());
    }
    // One list (with the probe read before it), then two confirmations.
    assert_eq!(lists_and_probes(&p), (1, 3));

    w.poweroff(id).await.unwrap();
    wait_shut_down(inst.as_ref(), &node).await;
    let (lists, probes) = lists_and_probes(&p);
    assert!(lists >= 2, "the change was listed: {lists}");
    // Settled again: confirmations only.
    inst.instance_shutdown(&node).await.unwrap();
    let settled = lists_and_probes(&p);
    for _ in 0..3 {
        assert!(inst.instance_shutdown(&node).await.unwrap());
    }
    assert_eq!(
        lists_and_probes(&p),
        (settled.0, settled.1 + 3),
        "after {lists} lists and {probes} probes"
    );

    let p = provider(&sim, |c| {
        c.server_cache.max_age = Duration::ZERO;
        c.server_cache.relist_period = Duration::ZERO;
    })
    .await;
    for _ in 0..3 {
        assert!(p.instances().instance_shutdown(&node).await.unwrap());
    }
    assert_eq!(lists_and_probes(&p), (3, 0), "period 0: a list each time");
}

/// A few changed servers in a list of many are read one by one into it (`GET /servers/{id}`, a
/// new one by its name), not listed again: here 120 servers (a list of 3 pages), one powered off
/// and one created.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_few_changed_servers_are_read_into_an_old_list_instead_of_listing_all() {
    let sim = sim_fast().await;
    let w = sim.client();
    let mut ids = Vec::new();
    for i in 0..120 {
        ids.push(
            w.create_server(&format!("node-{i}"), "cx22", "fsn1")
                .await
                .unwrap(),
        );
    }
    let node = NodeRef::with_provider_id("node-0", format!("hcloud://{}", ids[0]));
    let p = provider(&sim, |c| c.server_cache.max_age = Duration::ZERO).await;
    let inst = p.instances();
    assert!(!inst.instance_shutdown(&node).await.unwrap());
    assert_eq!(lists_and_probes(&p), (3, 1), "one list of 3 pages");

    w.poweroff(ids[0]).await.unwrap();
    wait_shut_down(inst.as_ref(), &node).await;
    let new = w.create_server("node-new", "cx22", "fsn1").await.unwrap();
    let by_name = NodeRef::new("node-new");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let found = inst.instance_metadata(&by_name).await;
        if found.is_ok_and(|m| m.provider_id == format!("hcloud://{new}")) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the new server never showed"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let s = p.stats().snapshot();
    let reads = s.calls_to("GET", "/servers/{id}");
    let (_, probes) = lists_and_probes(&p);
    let (pages, by_name) = list_pages_and_name_queries(&sim);
    eprintln!(
        "after a power-off and a create: {pages} list pages, {by_name} name queries, {probes} \
         probes, {reads} reads"
    );
    assert_eq!(pages, 3, "no second list");
    assert!(
        reads + by_name >= 2,
        "the changed servers were read: {reads} by id, {by_name} by name"
    );
}

/// A changed server is read when a lookup asks for it, not when the probe names it: with two of
/// 120 servers powered off, a lookup of a third reads neither, a lookup of one of them reads that
/// one, once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_server_is_read_only_when_a_lookup_asks_for_it() {
    let sim = sim_fast().await;
    let w = sim.client();
    let ids = w.create_servers(120, "node", "cx22", "fsn1").await.unwrap();
    let node = |i: usize| {
        NodeRef::with_provider_id(format!("node-{}", i + 1), format!("hcloud://{}", ids[i]))
    };
    let p = provider(&sim, |c| c.server_cache.max_age = Duration::ZERO).await;
    let inst = p.instances();
    assert!(!inst.instance_shutdown(&node(0)).await.unwrap());
    let reads = || p.stats().snapshot().calls_to("GET", "/servers/{id}");
    assert_eq!((lists_and_probes(&p), reads()), ((3, 1), 0));

    // `poweroff` returns when its action has finished: the next probe names both servers.
    w.poweroff(ids[1]).await.unwrap();
    w.poweroff(ids[2]).await.unwrap();
    assert!(!inst.instance_shutdown(&node(0)).await.unwrap());
    assert_eq!(
        (lists_and_probes(&p), reads()),
        ((3, 2), 0),
        "a probe and no read for an unchanged server"
    );
    assert!(inst.instance_shutdown(&node(1)).await.unwrap());
    assert_eq!(reads(), 1, "the changed server asked for is read");
    assert!(inst.instance_shutdown(&node(1)).await.unwrap());
    assert_eq!(reads(), 1, "and kept: not read again");
    assert!(inst.instance_shutdown(&node(2)).await.unwrap());
    assert_eq!(reads(), 2);
    assert_eq!(lists_and_probes(&p).0, 3, "no second list");
}

/// More actions since the list than a page of them holds (60 power changes on two servers) are
/// read from older pages of the action list, not answered by a full list, while those pages cost
/// less than half a list: here 300 servers, a list of 6 pages, 2 pages of actions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_probe_reads_older_pages_of_actions_rather_than_listing_again() {
    let sim = sim_fast().await;
    let w = sim.client();
    let ids = w.create_servers(300, "node", "cx22", "fsn1").await.unwrap();
    let node = |i: usize| {
        NodeRef::with_provider_id(format!("node-{}", i + 1), format!("hcloud://{}", ids[i]))
    };
    let p = provider(&sim, |c| c.server_cache.max_age = Duration::ZERO).await;
    let inst = p.instances();
    assert!(!inst.instance_shutdown(&node(2)).await.unwrap());
    assert_eq!(lists_and_probes(&p), (6, 1), "one list of 6 pages");

    for _ in 0..15 {
        for id in &ids[..2] {
            w.poweroff(*id).await.unwrap();
            w.poweron(*id).await.unwrap();
        }
    }
    assert!(!inst.instance_shutdown(&node(2)).await.unwrap());
    assert_eq!(
        lists_and_probes(&p),
        (6, 3),
        "two pages of actions named the two servers; no second list"
    );
    assert!(!inst.instance_shutdown(&node(0)).await.unwrap());
    assert_eq!(p.stats().snapshot().calls_to("GET", "/servers/{id}"), 1);
}

/// Polls until the lookups say `node`'s server is off (10 s at most).
async fn wait_shut_down(inst: &dyn cloud_client::Instances, node: &NodeRef) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !inst.instance_shutdown(node).await.unwrap() {
        assert!(
            std::time::Instant::now() < deadline,
            "the power-off never showed"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// `(full-list pages, name queries)` of `GET /servers` in the sim's request log.
fn list_pages_and_name_queries(sim: &cloud_sim::Sim) -> (u64, u64) {
    let servers: Vec<_> = sim
        .request_log()
        .into_iter()
        .filter(|r| r.method == "GET" && r.endpoint == "/servers")
        .collect();
    let by_name = servers.iter().filter(|r| r.uri.contains("name=")).count() as u64;
    (servers.len() as u64 - by_name, by_name)
}

/// `(GET /servers, GET /servers/actions)` the provider made.
fn lists_and_probes(p: &HcloudClients) -> (u64, u64) {
    let s = p.stats().snapshot();
    (
        s.calls_to("GET", "/servers"),
        s.calls_to("GET", "/servers/actions"),
    )
}
