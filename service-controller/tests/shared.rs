//! Several Services on one load balancer (annotations `name` + `shared`), end to end: a real
//! kube-apiserver, cloud-sim with its data plane, the controller under its chart RBAC.
//!
//! - three Services on one lb11, each with its own ports; a port made by hand survives every step;
//! - deleting the middle one removes only its ports while requests keep going through the others;
//! - a clashing port, and a port past the type's limit, are refused naming who holds what, with
//!   0 writes; a restart makes 0 writes;
//! - two Services created at once naming the same new load balancer: one load balancer, 20 times;
//! - a Service that owns its load balancer opts into sharing it with one label write; one that
//!   does not share, selects other nodes or asks for another type is refused;
//! - shadow mode plans the port on the shared load balancer; a Service that stops sharing is
//!   refused, and its port goes when it is deleted.

mod support;

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use cloud_sim::stand_in::{self, NodeStandIn};
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::ResourceExt;
use serde_json::{Value, json};
use support::traffic::*;
use support::*;
use test_support::e2e::{eventually, unique};

const MEMBER_PREFIX: &str = "shared.cloud-controllers/";

fn shared(name: &str) -> [(&'static str, String); 2] {
    [("name", name.to_string()), ("shared", "true".to_string())]
}

async fn shared_service(fx: &Fixture, svc: &str, lb: &str, ports: &[i32]) -> Service {
    let ann = shared(lb);
    let ann: Vec<(&str, &str)> = ann.iter().map(|(k, v)| (*k, v.as_str())).collect();
    fx.service(svc, ports, &ann).await
}

/// Every load balancer named `name`.
async fn lbs_named(fx: &Fixture, name: &str) -> Vec<Value> {
    fx.sim
        .client()
        .list_load_balancers()
        .await
        .expect("list load balancers")
        .into_iter()
        .filter(|lb| lb["name"] == name)
        .collect()
}

fn members(lb: &Value) -> BTreeSet<String> {
    lb["labels"]
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(k, _)| k.starts_with(MEMBER_PREFIX))
        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
        .collect()
}

fn condition(svc: &Service) -> Option<Condition> {
    service_controller::condition::current(svc).cloned()
}

async fn wait_condition(fx: &Fixture, name: &str, status: &str, reason: &str) -> Condition {
    eventually(&format!("{name}: {status}/{reason}"), T, || async {
        let c = condition(&fx.get(name).await?)?;
        (c.status == status && c.reason == reason).then_some(c)
    })
    .await
}

/// Waits until the one load balancer named `name` listens on exactly `ports`.
async fn wait_ports(fx: &Fixture, name: &str, ports: &[u64]) -> Value {
    wait_lb(fx, name, ports, None).await
}

/// [`wait_ports`], and `members` Services recorded on it when given.
async fn wait_lb(fx: &Fixture, name: &str, ports: &[u64], members_n: Option<usize>) -> Value {
    let want: BTreeSet<u64> = ports.iter().copied().collect();
    eventually(
        &format!("{name} listens on {want:?}, {members_n:?} members"),
        T,
        || async {
            let mut lbs = lbs_named(fx, name).await;
            assert!(lbs.len() <= 1, "one load balancer named {name}: {lbs:?}");
            let lb = lbs.pop()?;
            let n_ok = members_n.is_none_or(|n| members(&lb).len() == n);
            (listen_ports(&lb) == want && n_ok).then_some(lb)
        },
    )
    .await
}

/// Requests every 20 ms to each address until stopped; counts sent and failed.
struct Load {
    stop: Arc<AtomicBool>,
    sent: Arc<AtomicUsize>,
    failed: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Load {
    fn start(addrs: Vec<SocketAddr>) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let sent = Arc::new(AtomicUsize::new(0));
        let failed = Arc::new(AtomicUsize::new(0));
        let (s, n, f) = (stop.clone(), sent.clone(), failed.clone());
        let task = tokio::spawn(async move {
            while !s.load(Ordering::Relaxed) {
                for a in &addrs {
                    n.fetch_add(1, Ordering::Relaxed);
                    match stand_in::get(*a, REQUEST_TIMEOUT).await {
                        Ok((200, _)) => {}
                        other => {
                            eprintln!("request to {a} failed: {other:?}");
                            f.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        });
        Load {
            stop,
            sent,
            failed,
            task,
        }
    }

    /// Keeps going until `n` requests were sent in all.
    async fn until_sent(&self, n: usize) {
        eventually(&format!("{n} requests sent"), T, || async {
            (self.sent.load(Ordering::Relaxed) >= n).then_some(())
        })
        .await;
    }

    async fn stop(self) -> (usize, usize) {
        self.stop.store(true, Ordering::Relaxed);
        self.task.await.expect("load task");
        (
            self.failed.load(Ordering::Relaxed),
            self.sent.load(Ordering::Relaxed),
        )
    }
}

async fn serve(stand_ins: &mut [NodeStandIn], svc: &Service, ports: &[u64]) {
    for s in stand_ins.iter_mut() {
        for p in ports {
            s.serve_node_port(node_port(svc, *p)).await.expect("bind");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_services_share_one_lb11_and_each_owns_its_ports() {
    let mut fx = fixture(Duration::from_secs(600)).await;
    let nodes = fx.nodes(2).await;
    let mut stand_ins = Vec::new();
    for n in &nodes {
        stand_ins.push(stand_in(&fx, n).await);
    }

    // Three Services name one load balancer: one lb11, each Service's ports on it.
    let a = shared_service(&fx, "a", "shared-web", &[80]).await;
    let b = shared_service(&fx, "b", "shared-web", &[81, 82]).await;
    let c = shared_service(&fx, "c", "shared-web", &[83]).await;
    let mut ingress = BTreeSet::new();
    for name in ["a", "b", "c"] {
        ingress.insert(ingress_ips(&fx.wait_ingress(name).await));
        wait_condition(&fx, name, "True", "EnsuredLoadBalancer").await;
    }
    assert_eq!(
        ingress.len(),
        1,
        "every Service has the same ingress: {ingress:?}"
    );
    let lb = wait_ports(&fx, "shared-web", &[80, 81, 82, 83]).await;
    let id = lb["id"].as_u64().unwrap();
    assert_eq!(lb["load_balancer_type"]["name"], "lb11");
    let uid = |s: &Service| s.uid().unwrap();
    let want_members: BTreeSet<String> = [(&a, "80"), (&b, "81.82"), (&c, "83")]
        .iter()
        .map(|(s, p)| format!("{MEMBER_PREFIX}{}={p}", uid(s)))
        .collect();
    assert_eq!(members(&lb), want_members);
    assert!(lb["labels"].get(LB_UID_LABEL).is_none(), "{}", lb["labels"]);
    eprintln!("ownership record on load balancer {id}: {}", lb["labels"]);

    // A port made by hand, and a label: ours to leave alone.
    fx.sim
        .client()
        .load_balancer_action(
            id,
            "add_service",
            json!({"protocol": "tcp", "listen_port": 9000, "destination_port": 9000, "proxyprotocol": false}),
        )
        .await
        .expect("add a service by hand");
    let by_hand = |lb: &Value| {
        lb["services"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["listen_port"] == 9000)
            .cloned()
    };
    let hand_made =
        by_hand(&fx.sim.client().get_load_balancer(id).await.unwrap()).expect("the hand-made port");

    // Delete the middle one under load: only its ports go, a and c answer throughout.
    serve(&mut stand_ins, &a, &[80]).await;
    serve(&mut stand_ins, &c, &[83]).await;
    let lb = wait_ports(&fx, "shared-web", &[80, 81, 82, 83, 9000]).await;
    let addrs = vec![listener(&fx, &lb, 80).await, listener(&fx, &lb, 83).await];
    for addr in &addrs {
        // Every target healthy on that port: both nodes answer in turn.
        eventually(&format!("{addr} answered by both nodes"), T, || async {
            let mut seen = BTreeSet::new();
            for _ in 0..4 {
                let (status, body) = stand_in::get(*addr, REQUEST_TIMEOUT).await.ok()?;
                (status == 200).then_some(())?;
                seen.insert(answered_by(&body).to_string());
            }
            (seen.len() == 2).then_some(())
        })
        .await;
    }
    let load = Load::start(addrs);
    fx.delete("b").await;
    eventually("b gone", T, || async {
        fx.get("b").await.is_none().then_some(())
    })
    .await;
    let lb = wait_lb(&fx, "shared-web", &[80, 83, 9000], Some(2)).await;
    load.until_sent(200).await;
    let (failed, sent) = load.stop().await;
    eprintln!("while b left: {failed}/{sent} requests to a and c failed");
    assert!(sent > 0);
    assert_eq!(failed, 0);
    assert_eq!(by_hand(&lb).as_ref(), Some(&hand_made));

    // A clashing port: refused naming the Service that has it, nothing written.
    let mark = fx.mark();
    shared_service(&fx, "d", "shared-web", &[80]).await;
    let c_d = wait_condition(&fx, "d", "False", "LoadBalancerConflict").await;
    eprintln!("d: {}", c_d.message);
    assert!(
        c_d.message.contains(&format!(
            "listen port 80 of load balancer shared-web ({id}) belongs to Service {}/a",
            fx.ns
        )),
        "{}",
        c_d.message
    );
    fx.wait_event("Service", "d", "SyncLoadBalancerFailed")
        .await;

    // Past the type's limit (5 on lb11): refused naming the limit and who holds what.
    shared_service(&fx, "e", "shared-web", &[84, 85, 86]).await;
    let c_e = wait_condition(&fx, "e", "False", "LoadBalancerConflict").await;
    eprintln!("e: {}", c_e.message);
    assert!(
        c_e.message
            .contains("is type lb11, which holds at most 5 services; 3 are taken"),
        "{}",
        c_e.message
    );
    assert!(
        c_e.message.contains("not made by a Service: 9000"),
        "{}",
        c_e.message
    );
    assert_eq!(fx.writes_since(&mark), [], "refusals write nothing");
    assert!(
        fx.metrics()
            .await
            .contains("reason=\"LoadBalancerConflict\"")
    );

    // A restart reads ownership from the cloud alone: 0 writes.
    let sa = fx.service_account().await;
    fx.restart(sa).await;
    let mark = fx.mark();
    eventually("every Service looked at after the restart", T, || async {
        let refused = fx
            .metrics()
            .await
            .lines()
            .filter(|l| {
                l.starts_with("cloud_controllers_bad_input_warnings_total")
                    && l.contains("LoadBalancerConflict")
            })
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>();
        let reads = fx
            .calls_since(&mark)
            .iter()
            .filter(|(m, e)| m == "GET" && e.starts_with("/load_balancers"))
            .count();
        // d and e refused again, and a and c read too.
        (refused >= 2.0 && reads >= 4).then_some(())
    })
    .await;
    assert_eq!(fx.writes_since(&mark), [], "a restart writes nothing");
    let lb = wait_ports(&fx, "shared-web", &[80, 83, 9000]).await;
    assert_eq!(by_hand(&lb).as_ref(), Some(&hand_made));

    // Leaving: the refused ones had nothing; a's port goes; the last one leaves the load
    // balancer in place because of the hand-made port, and says why.
    for name in ["d", "e", "a"] {
        fx.delete(name).await;
    }
    wait_lb(&fx, "shared-web", &[83, 9000], Some(1)).await;
    fx.delete("c").await;
    let lb = wait_lb(&fx, "shared-web", &[9000], Some(0)).await;
    assert!(
        lb["labels"].as_object().unwrap().is_empty(),
        "{}",
        lb["labels"]
    );
    fx.wait_event("Service", "c", "LoadBalancerKept").await;
    assert_eq!(by_hand(&lb).as_ref(), Some(&hand_made));
    eventually("every Service gone", T, || async {
        fx.services()
            .list(&Default::default())
            .await
            .ok()?
            .items
            .is_empty()
            .then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_services_created_at_once_share_one_new_load_balancer_20_times() {
    let fx = Fixture::start().await;
    fx.nodes(1).await;
    for run in 0..20 {
        let name = format!("race-{run}");
        let (xn, yn) = (format!("x{run}"), format!("y{run}"));
        let (x, y) = tokio::join!(
            shared_service(&fx, &xn, &name, &[80]),
            shared_service(&fx, &yn, &name, &[81]),
        );
        for s in [&x, &y] {
            fx.wait_ingress(&s.name_any()).await;
        }
        let lb = wait_ports(&fx, &name, &[80, 81]).await;
        assert_eq!(
            lbs_named(&fx, &name).await.len(),
            1,
            "run {run}: one load balancer"
        );
        assert_eq!(members(&lb).len(), 2, "run {run}: {}", lb["labels"]);
        eprintln!(
            "race run {run}: 1 load balancer ({}), 2 members, ports 80 and 81",
            lb["id"]
        );
        fx.delete(&x.name_any()).await;
        fx.delete(&y.name_any()).await;
        eventually(&format!("run {run}: load balancer gone"), T, || async {
            lbs_named(&fx, &name).await.is_empty().then_some(())
        })
        .await;
    }
    assert_eq!(fx.sim.inventory().load_balancers.len(), 0, "no leak");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_opts_into_sharing_its_own_load_balancer_with_one_label_write() {
    let fx = Fixture::start().await;
    fx.nodes(1).await;
    let solo = fx.service("solo", &[80], &[]).await;
    fx.wait_ingress("solo").await;
    let before = fx.lb_of(&solo).await;

    let mark = fx.mark();
    fx.patch(
        "solo",
        json!({"metadata": {"annotations": {
            format!("{PREFIX}name"): "team-lb",
            format!("{PREFIX}shared"): "true",
        }}}),
    )
    .await;
    let lb = eventually("solo's load balancer shared", T, || async {
        let lb = fx
            .sim
            .client()
            .get_load_balancer(before["id"].as_u64()?)
            .await
            .ok()?;
        (!members(&lb).is_empty()).then_some(lb)
    })
    .await;
    let writes = fx.writes_since(&mark);
    assert_eq!(
        writes,
        [("PUT".to_string(), "/load_balancers/{id}".to_string())],
        "one write: labels and name"
    );
    assert_eq!(lb["name"], "team-lb");
    assert!(lb["labels"].get(LB_UID_LABEL).is_none());

    // Another Service joins; a Service that does not share is refused it.
    shared_service(&fx, "mate", "team-lb", &[8080]).await;
    wait_ports(&fx, "team-lb", &[80, 8080]).await;
    fx.service("taker", &[9090], &[("name", "team-lb")]).await;
    let c = wait_condition(&fx, "taker", "False", "LoadBalancerConflict").await;
    eprintln!("taker: {}", c.message);
    assert!(c.message.contains("is shared by Service"), "{}", c.message);
    assert!(
        c.message.contains(&format!("{}/solo", fx.ns)),
        "{}",
        c.message
    );
    assert_eq!(lbs_named(&fx, "team-lb").await.len(), 1);

    // Other nodes, or another type, than the load balancer's: refused, naming who is on it.
    let mark = fx.mark();
    let picky = [
        ("name", "team-lb"),
        ("shared", "true"),
        ("node-selector", "pool=gpu"),
    ];
    fx.service("picky", &[9091], &picky).await;
    let c = wait_condition(&fx, "picky", "False", "LoadBalancerConflict").await;
    eprintln!("picky: {}", c.message);
    assert!(
        c.message.contains("selects its targets differently"),
        "{}",
        c.message
    );
    assert!(
        c.message.contains(&format!("{}/mate", fx.ns)),
        "{}",
        c.message
    );
    let bigger = [("name", "team-lb"), ("shared", "true"), ("type", "lb21")];
    fx.service("bigger", &[9092], &bigger).await;
    let c = wait_condition(&fx, "bigger", "False", "LoadBalancerConflict").await;
    eprintln!("bigger: {}", c.message);
    assert!(
        c.message.contains("it has type lb11, where annotation"),
        "{}",
        c.message
    );
    assert_eq!(fx.writes_since(&mark), [], "refusals write nothing");
    wait_ports(&fx, "team-lb", &[80, 8080]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shadow_mode_plans_the_port_on_the_shared_load_balancer_not_a_new_one() {
    let mut fx = Fixture::start().await;
    fx.nodes(1).await;
    shared_service(&fx, "first", "plan-lb", &[80]).await;
    fx.wait_ingress("first").await;
    let id = wait_ports(&fx, "plan-lb", &[80]).await["id"].clone();
    fx.stop().await;

    fx.start_shadow().await;
    let admin = fx.ctl.as_ref().unwrap().admin;
    let second = shared_service(&fx, "second", "plan-lb", &[8080]).await;
    let planned = eventually("the join planned", T, || async {
        let p = test_support::e2e::run::planned_writes(admin).await;
        let cloud: Vec<Value> = p.into_iter().filter(|e| e["api"] == "cloud").collect();
        (!cloud.is_empty()).then_some(cloud)
    })
    .await;
    eprintln!("/plan: {planned:#?}");
    assert_eq!(planned.len(), 1, "{planned:#?}");
    assert_eq!(planned[0]["operation"], "PUT /load_balancers/{id}");
    assert_eq!(planned[0]["object"], format!("/load_balancers/{id}"));
    let claim = format!("{MEMBER_PREFIX}{}", second.uid().unwrap());
    let body = planned[0]["body"].as_str().unwrap_or_default();
    assert!(body.contains(&claim) && body.contains("8080"), "{body}");
    assert_eq!(lbs_named(&fx, "plan-lb").await.len(), 1);
    wait_ports(&fx, "plan-lb", &[80]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_that_stops_sharing_is_refused_and_its_ports_go_with_it() {
    let fx = Fixture::start().await;
    fx.nodes(1).await;
    shared_service(&fx, "stay", "drop-lb", &[80]).await;
    shared_service(&fx, "leave", "drop-lb", &[81]).await;
    wait_lb(&fx, "drop-lb", &[80, 81], Some(2)).await;

    // `shared` dropped, `name` kept: it would take the load balancer from "stay".
    fx.patch("leave", annotation_patch("shared", None)).await;
    let c = wait_condition(&fx, "leave", "False", "LoadBalancerConflict").await;
    eprintln!("leave: {}", c.message);
    assert!(
        c.message.contains("no longer sets annotation"),
        "{}",
        c.message
    );

    // `name` dropped too: a load balancer of its own; deleting it removes its port on drop-lb.
    fx.patch("leave", annotation_patch("name", None)).await;
    // Its ingress is still drop-lb's until its own load balancer is made: wait for that.
    let own = fx.wait_ingress("leave").await;
    eventually("a load balancer of its own", T, || async {
        (fx.lbs_of(&own).await.len() == 1).then_some(())
    })
    .await;
    wait_lb(&fx, "drop-lb", &[80, 81], Some(2)).await;
    fx.delete("leave").await;
    wait_lb(&fx, "drop-lb", &[80], Some(1)).await;
    eventually("its own load balancer gone", T, || async {
        fx.lbs_of(&own).await.is_empty().then_some(())
    })
    .await;
}

/// A load balancer made outside Kubernetes (Terraform: no label of ours or HCCM's, the control
/// plane's API on a server that is no Node) is never written because a Service names it, shared
/// or not. Shadow mode plans the refusal with the command by which its owner consents; with that
/// label, a Service of the named namespace takes it over.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_load_balancer_made_outside_the_cluster_is_written_only_with_its_owners_consent() {
    let mut fx = Fixture::without_controller(None).await;
    let nodes = fx.nodes(2).await;
    let node_servers: BTreeSet<u64> = nodes.iter().map(|n| n.server).collect();
    let cp = fx.server(&unique("cp")).await;
    let api_name = unique("k8s-api");
    let api_id = fx
        .sim
        .client()
        .create_load_balancer_with(json!({
            "name": api_name, "load_balancer_type": "lb11", "location": "fsn1",
            "services": [{"protocol": "tcp", "listen_port": 6443, "destination_port": 6443}],
            "targets": [{"type": "server", "server": {"id": cp.id}}],
        }))
        .await
        .unwrap();
    let before = fx.sim.client().get_load_balancer(api_id).await.unwrap();
    let consent = format!(
        "hcloud load-balancer add-label {api_name} cloud-controllers.io/adopt={}",
        fx.ns
    );

    // Before a switch from HCCM, which would take it over by name: the shadow's plan shows it.
    fx.start_shadow().await;
    let admin = fx.ctl.as_ref().unwrap().admin;
    let api_ann = [("name", api_name.clone()), ("shared", "true".to_string())];
    let api_ann: Vec<(&str, &str)> = api_ann.iter().map(|(k, v)| (*k, v.as_str())).collect();
    fx.service("shared-api", &[8443], &api_ann).await;
    let planned = eventually("the refusal planned", T, || async {
        let p = test_support::e2e::run::planned_writes(admin).await;
        p.into_iter().find(|e| {
            e["operation"]
                .as_str()
                .is_some_and(|o| o.starts_with("refused: "))
        })
    })
    .await;
    eprintln!("/plan: {planned:#}");
    assert_eq!(planned["object"], format!("/load_balancers/{api_id}"));
    assert!(
        planned["body"]
            .as_str()
            .is_some_and(|b| b.contains(&consent)),
        "{planned:#}"
    );
    fx.stop().await;

    // Acting: refused, shared or not, with the same command; nothing written.
    let sa = fx.service_account().await;
    fx.restart(sa).await;
    let mark = fx.mark();
    fx.service("own-api", &[9443], &[("name", &api_name)]).await;
    for name in ["shared-api", "own-api"] {
        let c = wait_condition(&fx, name, "False", "LoadBalancerConflict").await;
        eprintln!("{name}: {}", c.message);
        assert!(
            c.message.contains("was not made by this cluster"),
            "{}",
            c.message
        );
        assert!(c.message.contains(&consent), "{}", c.message);
    }
    assert_eq!(
        fx.writes_since(&mark),
        [],
        "a foreign load balancer gets no write"
    );
    let after = fx.sim.client().get_load_balancer(api_id).await.unwrap();
    assert_eq!(
        target_servers(&after),
        BTreeSet::from([cp.id]),
        "cp stays its target"
    );
    assert_eq!(after["services"], before["services"]);
    assert_eq!(after["labels"], before["labels"]);

    // The owner consents for this namespace: the shared Service takes it over (its targets become
    // the Nodes); the unclaimed 6443 stays as it is. (Two Services that both take over one load
    // balancer fight over it, consent or not: the other one goes first.)
    fx.delete("own-api").await;
    eventually("own-api gone", T, || async {
        fx.get("own-api").await.is_none().then_some(())
    })
    .await;
    fx.sim
        .client()
        .call(
            reqwest::Method::PUT,
            &format!("/load_balancers/{api_id}"),
            Some(json!({"labels": {"cloud-controllers.io/adopt": fx.ns}})),
        )
        .await
        .unwrap();
    fx.wait_ingress("shared-api").await;
    let taken = fx.sim.client().get_load_balancer(api_id).await.unwrap();
    assert_eq!(target_servers(&taken), node_servers);
    assert_eq!(listen_ports(&taken), BTreeSet::from([6443, 8443]));
}
