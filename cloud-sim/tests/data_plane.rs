//! The data plane over real sockets: listeners, balancing, PROXY headers, health checks, target
//! faults, listener lifecycle, and the `health_status` contract. Every wait polls with a
//! deadline (`eventually`); nothing sleeps to synchronise.
//!
//! Targets are stood in for by `cloud_sim::stand_in::NodeStandIn`s serving an app, bound to
//! `sim.local_address(<the target's simulated IP>)` on the service's destination port: `GET /`
//! answers `<name>\n` (plus `client=<PROXY source>\n`), `/healthz` a status code the test
//! switches, any other path 404; each records the requests it answered (path, `Host`, PROXY
//! header).

mod common;

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use cloud_sim::client::SimClient;
use cloud_sim::stand_in::{self, NodeStandIn, ProxyHeader};
use cloud_sim::{DataPlaneConfig, Sim, SimConfig, TargetFault};
use common::{eventually, send};
use reqwest::Method;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;

// --- helpers ---------------------------------------------------------------------------------

/// A simulator with the data plane on; health checks 50 times faster (a 15 s interval is 300 ms).
async fn dp_sim() -> Sim {
    dp_sim_with(DataPlaneConfig {
        health_check_speedup: 50.0,
        ..DataPlaneConfig::default()
    })
    .await
}

async fn dp_sim_with(dp: DataPlaneConfig) -> Sim {
    Sim::start_with(SimConfig {
        action_duration: Duration::ZERO,
        data_plane: Some(dp),
        ..SimConfig::default()
    })
    .await
}

async fn server_ip(w: &SimClient, id: u64) -> IpAddr {
    w.get_server(id).await.unwrap()["public_net"]["ipv4"]["ip"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap()
}

/// Listeners bound to `ips`, all on one port (a service has one destination port). Tries again
/// with another port if one of the addresses has it taken already (another test, another
/// process).
async fn bind_group(ips: &[IpAddr]) -> (u16, Vec<TcpListener>) {
    for _ in 0..50 {
        let first = TcpListener::bind(SocketAddr::new(ips[0], 0)).await.unwrap();
        let port = first.local_addr().unwrap().port();
        let mut all = vec![first];
        for ip in &ips[1..] {
            match TcpListener::bind(SocketAddr::new(*ip, port)).await {
                Ok(l) => all.push(l),
                Err(_) => break,
            }
        }
        if all.len() == ips.len() {
            return (port, all);
        }
    }
    panic!("no common free port on {ips:?}");
}

/// A node's stand-in on `listener` (bound at its local address): `GET /` answers with its name
/// (and `client=` with a PROXY header's source), `/healthz` with the status the test sets, any
/// other path 404.
fn responder(name: &str, listener: TcpListener) -> NodeStandIn {
    let mut node = NodeStandIn::new(name, listener.local_addr().unwrap().ip());
    node.serve_app_on(listener).unwrap();
    node
}

/// What a request through a listener brought back.
#[derive(Debug, Clone, PartialEq)]
struct Answer {
    server: String,
    /// The source a PROXY header named, as the answer says.
    client: Option<SocketAddr>,
    /// The client's own address for this connection.
    local: SocketAddr,
}

/// `GET /` through `addr`; `None` when the connection was refused or closed without an answer.
async fn get(addr: SocketAddr) -> Option<Answer> {
    let reply = match stand_in::request(addr, Duration::from_secs(5)).await {
        Ok(reply) => reply,
        Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {
            panic!("an answer or a close within 5 s")
        }
        Err(_) => return None,
    };
    assert_eq!(reply.status, 200, "{reply:?}");
    let mut lines = reply.body.lines();
    Some(Answer {
        server: lines.next().unwrap_or_default().to_owned(),
        client: lines
            .find_map(|l| l.strip_prefix("client="))
            .map(|c| c.parse().unwrap()),
        local: reply.local,
    })
}

/// The PROXY header in front of the last request `node` answered.
fn last_proxy(node: &NodeStandIn) -> Option<ProxyHeader> {
    node.seen().last().expect("a request answered").proxy
}

/// The `Host` headers of the `/healthz` requests `node` answered.
fn health_hosts(node: &NodeStandIn) -> Vec<Option<String>> {
    node.seen()
        .into_iter()
        .filter(|s| s.path == "/healthz")
        .map(|s| s.host)
        .collect()
}

/// The listener of `lb` on `port`, once the data plane has opened it.
async fn listener(sim: &Sim, lb: u64, port: u16) -> SocketAddr {
    eventually(&format!("listener {lb}:{port}"), || async move {
        sim.listener(lb, port)
    })
    .await
}

/// `status` of `listen_port` in the `health_status` of the target at JSON `pointer`
/// (`/targets/0`, `/targets/1/targets/0`).
fn status_at(v: &Value, pointer: &str, listen_port: u16) -> Option<String> {
    v.pointer(&format!("{pointer}/health_status"))?
        .as_array()?
        .iter()
        .find(|h| h["listen_port"] == json!(listen_port))?["status"]
        .as_str()
        .map(str::to_owned)
}

async fn wait_status(w: &SimClient, lb: u64, pointer: &str, port: u16, want: &str) {
    eventually(&format!("{pointer} port {port} {want}"), || async move {
        let v = w.get_load_balancer(lb).await.unwrap();
        (status_at(&v, pointer, port).as_deref() == Some(want)).then_some(())
    })
    .await
}

/// A load balancer in fsn1 with `services` and `targets`; returns its id.
async fn lb_with(w: &SimClient, name: &str, extra: Value) -> u64 {
    let mut body = json!({"name": name, "load_balancer_type": "lb11", "location": "fsn1"});
    for (k, v) in extra.as_object().unwrap() {
        body[k] = v.clone();
    }
    w.create_load_balancer_with(body).await.unwrap()
}

/// A load balancer forwarding TCP 80 to `port` of the servers `ids`.
async fn tcp_lb(w: &SimClient, name: &str, port: u16, ids: &[u64]) -> u64 {
    lb_with(
        w,
        name,
        json!({
            "services": [{"protocol": "tcp", "listen_port": 80, "destination_port": port}],
            "targets": server_targets(ids),
        }),
    )
    .await
}

/// `n` servers in fsn1, each with a responder on a common destination port.
async fn servers_with_responders(
    sim: &Sim,
    w: &SimClient,
    names: &[&str],
) -> (Vec<u64>, u16, Vec<NodeStandIn>) {
    let mut ids = Vec::new();
    let mut locals = Vec::new();
    for n in names {
        let id = w.create_server(n, "cx22", "fsn1").await.unwrap();
        locals.push(sim.local_address(server_ip(w, id).await));
        ids.push(id);
    }
    let (port, listeners) = bind_group(&locals).await;
    let responders = names
        .iter()
        .zip(listeners)
        .map(|(n, l)| responder(n, l))
        .collect();
    (ids, port, responders)
}

fn server_targets(ids: &[u64]) -> Value {
    ids.iter()
        .map(|id| json!({"type": "server", "server": {"id": id}}))
        .collect()
}

fn tally(answers: &[Answer]) -> BTreeMap<String, usize> {
    let mut t = BTreeMap::new();
    for a in answers {
        *t.entry(a.server.clone()).or_default() += 1;
    }
    t
}

// --- traffic ---------------------------------------------------------------------------------

#[tokio::test]
async fn a_request_through_the_listener_reaches_the_target() {
    let sim = dp_sim().await;
    let w = sim.client();
    let (ids, port, responders) = servers_with_responders(&sim, &w, &["s1"]).await;
    let lb = tcp_lb(&w, "one", port, &ids).await;
    let addr = listener(&sim, lb, 80).await;
    wait_status(&w, lb, "/targets/0", 80, "healthy").await;

    let a = get(addr).await.expect("an answer");
    assert_eq!(a.server, "s1");
    assert_eq!(a.client, None);
    assert_eq!(
        last_proxy(&responders[0]),
        None,
        "no PROXY header without proxyprotocol"
    );
    assert_eq!(responders[0].served(), 1);

    // The listener as `/_sim` publishes it, through the client and through `Sim`.
    let listeners = w.listeners(lb).await.unwrap();
    assert_eq!(listeners.len(), 1);
    assert_eq!(
        (
            listeners[0].listen_port,
            listeners[0].protocol.as_str(),
            listeners[0].address
        ),
        (80, "tcp", addr)
    );
    assert_eq!(w.listener(lb, 80).await.unwrap(), Some(addr));
    assert_eq!(sim.listeners(lb), listeners);
    let c = listeners[0].connections;
    assert_eq!((c.accepted, c.forwarded, c.refused), (1, 1, 0));
    let raw = w
        .raw(
            Method::GET,
            &format!("/_sim/load_balancers/{lb}/listeners"),
            None,
        )
        .await
        .unwrap();
    assert_eq!(raw.body["listeners"][0]["address"], json!(addr.to_string()));
    assert_eq!(raw.body["listeners"][0]["listen_port"], 80);
    // An unknown load balancer is an error, not an empty list.
    let raw = w
        .raw(Method::GET, "/_sim/load_balancers/999/listeners", None)
        .await
        .unwrap();
    assert_eq!(raw.status, 404);
}

#[tokio::test]
async fn round_robin_spreads_requests_evenly() {
    let sim = dp_sim().await;
    let w = sim.client();
    let (ids, port, responders) = servers_with_responders(&sim, &w, &["a", "b", "c"]).await;
    let lb = lb_with(
        &w,
        "rr",
        json!({
            "algorithm": {"type": "round_robin"},
            "services": [{"protocol": "tcp", "listen_port": 80, "destination_port": port}],
            "targets": server_targets(&ids),
        }),
    )
    .await;
    let addr = listener(&sim, lb, 80).await;
    for i in 0..3 {
        wait_status(&w, lb, &format!("/targets/{i}"), 80, "healthy").await;
    }
    let mut answers = Vec::new();
    for _ in 0..30 {
        answers.push(get(addr).await.expect("an answer"));
    }
    assert_eq!(
        tally(&answers),
        BTreeMap::from([("a".into(), 10), ("b".into(), 10), ("c".into(), 10)])
    );
    assert_eq!(
        responders
            .iter()
            .map(NodeStandIn::served)
            .collect::<Vec<_>>(),
        [10, 10, 10]
    );
}

#[tokio::test]
async fn least_connections_prefers_the_idle_target() {
    let sim = dp_sim().await;
    let w = sim.client();
    let (ids, port, _responders) = servers_with_responders(&sim, &w, &["a", "b"]).await;
    let lb = lb_with(
        &w,
        "lc",
        json!({
            "algorithm": {"type": "least_connections"},
            "services": [{"protocol": "tcp", "listen_port": 80, "destination_port": port}],
            "targets": server_targets(&ids),
        }),
    )
    .await;
    let addr = listener(&sim, lb, 80).await;
    wait_status(&w, lb, "/targets/0", 80, "healthy").await;
    wait_status(&w, lb, "/targets/1", 80, "healthy").await;

    // One connection held open: with none open anywhere it goes to the first target, a.
    let mut held = TcpStream::connect(addr).await.unwrap();
    let active = |n: u64| {
        let sim = &sim;
        async move { (sim.listeners(lb)[0].connections.active == n).then_some(()) }
    };
    eventually("the held connection forwarded", || active(1)).await;
    // Every new request goes to b, the target with fewer open connections (round robin would
    // alternate). Each waits until the previous one is closed on the load balancer's side too.
    for _ in 0..4 {
        assert_eq!(get(addr).await.expect("an answer").server, "b");
        eventually("only the held connection open", || active(1)).await;
    }
    // The held connection really was with a.
    held.write_all(b"GET / HTTP/1.1\r\nHost: lb\r\n\r\n")
        .await
        .unwrap();
    let mut out = Vec::new();
    held.read_to_end(&mut out).await.unwrap();
    assert!(
        String::from_utf8_lossy(&out).ends_with("\r\n\r\na\n"),
        "{}",
        String::from_utf8_lossy(&out)
    );
}

#[tokio::test]
async fn removing_a_target_drains_its_connections() {
    let sim = dp_sim().await;
    let w = sim.client();
    let (ids, port, _responders) = servers_with_responders(&sim, &w, &["a", "b"]).await;
    let lb = tcp_lb(&w, "drain", port, &ids).await;
    let addr = listener(&sim, lb, 80).await;
    wait_status(&w, lb, "/targets/0", 80, "healthy").await;
    wait_status(&w, lb, "/targets/1", 80, "healthy").await;

    // Round robin: the first connection goes to a; keep it open without a request yet.
    let mut held = TcpStream::connect(addr).await.unwrap();
    eventually("the held connection forwarded", || async {
        (sim.listeners(lb)[0].connections.active == 1).then_some(())
    })
    .await;
    w.load_balancer_action(
        lb,
        "remove_target",
        json!({"type": "server", "server": {"id": ids[0]}}),
    )
    .await
    .unwrap();
    // New connections never reach a any more...
    for _ in 0..4 {
        assert_eq!(get(addr).await.expect("an answer").server, "b");
    }
    // ...while the one it had carries on.
    held.write_all(b"GET / HTTP/1.1\r\nHost: lb\r\n\r\n")
        .await
        .unwrap();
    let mut out = Vec::new();
    held.read_to_end(&mut out).await.unwrap();
    assert!(
        String::from_utf8_lossy(&out).ends_with("\r\n\r\na\n"),
        "{}",
        String::from_utf8_lossy(&out)
    );
    // Its health status went with it.
    let v = w.get_load_balancer(lb).await.unwrap();
    assert_eq!(v["targets"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn proxy_protocol_carries_the_client_address() {
    for version in [1u8, 2] {
        let sim = dp_sim_with(DataPlaneConfig {
            health_check_speedup: 50.0,
            proxy_protocol_version: version,
            ..DataPlaneConfig::default()
        })
        .await;
        let w = sim.client();
        let (ids, port, responders) = servers_with_responders(&sim, &w, &["s1"]).await;
        let lb = lb_with(
            &w,
            "proxy",
            json!({
                "services": [
                    {"protocol": "tcp", "listen_port": 443, "destination_port": port, "proxyprotocol": true},
                    {"protocol": "tcp", "listen_port": 80, "destination_port": port},
                ],
                "targets": server_targets(&ids),
            }),
        )
        .await;
        let lb_ip = w.get_load_balancer(lb).await.unwrap()["public_net"]["ipv4"]["ip"]
            .as_str()
            .unwrap()
            .to_owned();
        let addr = listener(&sim, lb, 443).await;
        wait_status(&w, lb, "/targets/0", 443, "healthy").await;
        let a = get(addr).await.expect("an answer");
        assert_eq!(a.server, "s1");
        assert_eq!(a.client, Some(a.local), "PROXY v{version} source");
        assert_eq!(
            last_proxy(&responders[0]),
            Some(ProxyHeader {
                version,
                source: Some(a.local),
                destination: Some(format!("{lb_ip}:443").parse().unwrap()),
            }),
            "PROXY v{version}"
        );
        // The other service has proxyprotocol off: no header.
        let plain = listener(&sim, lb, 80).await;
        wait_status(&w, lb, "/targets/0", 80, "healthy").await;
        assert_eq!(get(plain).await.expect("an answer").client, None);
        assert_eq!(last_proxy(&responders[0]), None);
    }
}

// --- health checks ---------------------------------------------------------------------------

#[tokio::test]
async fn http_health_checks_follow_path_status_codes_and_response() {
    let sim = dp_sim().await;
    let w = sim.client();
    let (ids, port, responders) = servers_with_responders(&sim, &w, &["a", "b"]).await;
    let lb = lb_with(
        &w,
        "http",
        json!({
            "services": [{
                "protocol": "http", "listen_port": 80, "destination_port": port,
                "health_check": {
                    "protocol": "http", "port": port, "interval": 5, "timeout": 5, "retries": 2,
                    "http": {"domain": "health.example.com", "path": "/healthz", "status_codes": ["2??"]},
                },
            }],
            "targets": server_targets(&ids),
        }),
    )
    .await;
    let addr = listener(&sim, lb, 80).await;
    wait_status(&w, lb, "/targets/0", 80, "healthy").await;
    wait_status(&w, lb, "/targets/1", 80, "healthy").await;
    // The checks asked for the path, with the domain as Host.
    let hosts = health_hosts(&responders[0]);
    assert!(!hosts.is_empty());
    assert!(
        hosts
            .iter()
            .all(|h| h.as_deref() == Some("health.example.com")),
        "{hosts:?}"
    );

    // a answers 503: after retries + 1 = 3 failures it is unhealthy, and gets no traffic.
    responders[0].set_healthz_status(503);
    wait_status(&w, lb, "/targets/0", 80, "unhealthy").await;
    let before = responders[0].served();
    for _ in 0..6 {
        assert_eq!(get(addr).await.expect("an answer").server, "b");
    }
    assert_eq!(responders[0].served(), before);
    // Back to 200: healthy after one pass, and served again.
    responders[0].set_healthz_status(200);
    wait_status(&w, lb, "/targets/0", 80, "healthy").await;
    let answers = [get(addr).await.unwrap(), get(addr).await.unwrap()];
    assert_eq!(
        tally(&answers),
        BTreeMap::from([("a".into(), 1), ("b".into(), 1)])
    );

    // An exact code list: 204 is not "200".
    w.load_balancer_action(
        lb,
        "update_service",
        json!({"listen_port": 80, "health_check": {"http": {"status_codes": ["200"]}}}),
    )
    .await
    .unwrap();
    responders[1].set_healthz_status(204);
    wait_status(&w, lb, "/targets/1", 80, "unhealthy").await;
    // The listener kept its address through the update.
    assert_eq!(sim.listener(lb, 80), Some(addr));
    // A body check: "ok" is there, "ready" is not.
    w.load_balancer_action(
        lb,
        "update_service",
        json!({"listen_port": 80, "health_check": {"http": {"status_codes": ["2??"], "response": "ok"}}}),
    )
    .await
    .unwrap();
    wait_status(&w, lb, "/targets/1", 80, "healthy").await;
    w.load_balancer_action(
        lb,
        "update_service",
        json!({"listen_port": 80, "health_check": {"http": {"response": "ready"}}}),
    )
    .await
    .unwrap();
    wait_status(&w, lb, "/targets/0", 80, "unhealthy").await;
    wait_status(&w, lb, "/targets/1", 80, "unhealthy").await;
    // No healthy target: the client connection is closed without an answer, and counted.
    assert_eq!(get(addr).await, None);
    assert!(sim.listeners(lb)[0].connections.refused >= 1);
    // Without the body check both are healthy again...
    w.load_balancer_action(
        lb,
        "update_service",
        json!({"listen_port": 80, "health_check": {"http": {"response": ""}}}),
    )
    .await
    .unwrap();
    wait_status(&w, lb, "/targets/0", 80, "healthy").await;
    wait_status(&w, lb, "/targets/1", 80, "healthy").await;
    // ...and the path matters: the responders answer 404 on any other.
    w.load_balancer_action(
        lb,
        "update_service",
        json!({"listen_port": 80, "health_check": {"http": {"path": "/nope"}}}),
    )
    .await
    .unwrap();
    wait_status(&w, lb, "/targets/0", 80, "unhealthy").await;
    wait_status(&w, lb, "/targets/1", 80, "unhealthy").await;
}

#[tokio::test]
async fn tcp_health_checks_decide_after_retries_and_follow_the_speedup() {
    // At speedup 1 the default check (15 s interval, 3 retries) takes a minute to decide a
    // target that refuses: it stays unknown after its first, immediate, failed check.
    let sim = dp_sim_with(DataPlaneConfig::default()).await;
    let w = sim.client();
    let (ids, port, responders) = servers_with_responders(&sim, &w, &["up"]).await;
    let down = w.create_server("down", "cx22", "fsn1").await.unwrap();
    let lb = lb_with(
        &w,
        "tcp",
        json!({
            "services": [{"protocol": "tcp", "listen_port": 80, "destination_port": port}],
            "targets": server_targets(&[ids[0], down]),
        }),
    )
    .await;
    let addr = listener(&sim, lb, 80).await;
    wait_status(&w, lb, "/targets/0", 80, "healthy").await;
    let v = w.get_load_balancer(lb).await.unwrap();
    assert_eq!(status_at(&v, "/targets/1", 80).as_deref(), Some("unknown"));
    // Only the healthy target gets traffic.
    for _ in 0..3 {
        assert_eq!(get(addr).await.expect("an answer").server, "up");
    }
    // Speeding up at runtime shortens the waits under way: 4 failures in about a second.
    w.set_health_check_speedup(50.0).await.unwrap();
    wait_status(&w, lb, "/targets/1", 80, "unhealthy").await;
    let v = w.raw(Method::GET, "/_sim/config", None).await.unwrap().body;
    assert_eq!(v["data_plane"]["health_check_speedup"], 50.0);
    // A responder appears on the down server's address: healthy after one pass.
    let local = sim.local_address(server_ip(&w, down).await);
    let l = TcpListener::bind(SocketAddr::new(local, port))
        .await
        .unwrap();
    let _late = responder("down", l);
    wait_status(&w, lb, "/targets/1", 80, "healthy").await;
    assert_eq!(responders[0].served(), 3);
    // A speedup that is not a positive number is refused.
    assert!(w.set_health_check_speedup(0.0).await.is_err());
}

/// Health checks answered one by one by the test: each check is a request the test receives
/// and replies to with a status code. The next check arriving proves the previous one's verdict
/// is recorded, so the status can be read at exactly known points.
#[tokio::test]
async fn a_pass_decides_healthy_and_retries_plus_one_failures_unhealthy() {
    let sim = dp_sim_with(DataPlaneConfig::default()).await;
    let w = sim.client();
    let s = w.create_server("s1", "cx22", "fsn1").await.unwrap();
    let (port, mut ls) = bind_group(&[sim.local_address(server_ip(&w, s).await)]).await;
    let socket = ls.pop().unwrap();
    let (checks_tx, mut checks) = tokio::sync::mpsc::unbounded_channel();
    let _gate = tokio::spawn(async move {
        let mut conns = JoinSet::new();
        while let Ok((mut stream, _)) = socket.accept().await {
            let checks_tx = checks_tx.clone();
            conns.spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 1024];
                while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
                let (reply, code) = tokio::sync::oneshot::channel::<u16>();
                if checks_tx.send(reply).is_err() {
                    return;
                }
                let Ok(code) = code.await else { return };
                let resp = format!("HTTP/1.1 {code} X\r\nContent-Length: 0\r\n\r\n");
                let _ = stream.write_all(resp.as_bytes()).await;
            });
        }
    });
    // Interval 15 s at speedup 1: a first check that waited for an interval would miss the
    // 10 s deadline below. Timeout 60 s leaves the test all the time it needs to answer.
    let lb = lb_with(
        &w,
        "gated",
        json!({
            "services": [{"protocol": "tcp", "listen_port": 80, "destination_port": port,
                "health_check": {"protocol": "http", "port": port, "interval": 15, "timeout": 60,
                    "retries": 2, "http": {"path": "/healthz"}}}],
            "targets": server_targets(&[s]),
        }),
    )
    .await;
    async fn next(
        checks: &mut tokio::sync::mpsc::UnboundedReceiver<tokio::sync::oneshot::Sender<u16>>,
    ) -> tokio::sync::oneshot::Sender<u16> {
        tokio::time::timeout(Duration::from_secs(10), checks.recv())
            .await
            .expect("a health check within 10 s")
            .expect("the gate runs")
    }
    let status = || async {
        let v = w.get_load_balancer(lb).await.unwrap();
        status_at(&v, "/targets/0", 80).unwrap()
    };
    let check = next(&mut checks).await;
    assert_eq!(
        status().await,
        "unknown",
        "undecided while the first check runs"
    );
    // From now on a check every 150 ms.
    assert!(sim.set_health_check_speedup(100.0));
    check.send(200).unwrap();
    let mut check = next(&mut checks).await;
    assert_eq!(status().await, "healthy", "one pass");
    for failures in 1..=3 {
        check.send(503).unwrap();
        check = next(&mut checks).await;
        let want = if failures <= 2 {
            "healthy"
        } else {
            "unhealthy"
        };
        assert_eq!(
            status().await,
            want,
            "after {failures} failures with retries 2"
        );
    }
    check.send(200).unwrap();
    next(&mut checks).await;
    assert_eq!(status().await, "healthy", "one pass again");
}

#[tokio::test]
async fn a_removed_target_forgets_its_health() {
    // Speedup 1: a target's first check decides nothing when it fails, so a re-added target
    // shows "unknown" unless a stale status survived its removal.
    let sim = dp_sim_with(DataPlaneConfig::default()).await;
    let w = sim.client();
    let (ids, port, _responders) = servers_with_responders(&sim, &w, &["s1"]).await;
    let target = json!({"type": "server", "server": {"id": ids[0]}});
    let lb = lb_with(
        &w,
        "forget",
        json!({
            "services": [
                {"protocol": "tcp", "listen_port": 80, "destination_port": port},
                {"protocol": "tcp", "listen_port": 81, "destination_port": port},
            ],
            "targets": [target.clone()],
        }),
    )
    .await;
    wait_status(&w, lb, "/targets/0", 80, "healthy").await;
    listener(&sim, lb, 81).await;
    w.load_balancer_action(lb, "remove_target", target.clone())
        .await
        .unwrap();
    // A later change, and its visible effect: the reconciler has seen the removal too.
    w.load_balancer_action(lb, "delete_service", json!({"listen_port": 81}))
        .await
        .unwrap();
    eventually("listener 81 gone", || async {
        sim.listener(lb, 81).is_none().then_some(())
    })
    .await;
    sim.set_target_fault(server_ip(&w, ids[0]).await, TargetFault::FailHealth);
    w.load_balancer_action(lb, "add_target", target)
        .await
        .unwrap();
    let v = w.get_load_balancer(lb).await.unwrap();
    assert_eq!(status_at(&v, "/targets/0", 80).as_deref(), Some("unknown"));
}

#[tokio::test]
async fn a_stopped_server_turns_unhealthy_and_gets_no_traffic() {
    let sim = dp_sim().await;
    let w = sim.client();
    let (ids, port, _responders) = servers_with_responders(&sim, &w, &["s1"]).await;
    let lb = tcp_lb(&w, "stop", port, &ids).await;
    let addr = listener(&sim, lb, 80).await;
    wait_status(&w, lb, "/targets/0", 80, "healthy").await;
    assert!(get(addr).await.is_some());
    // Powered off through the API while its responder still answers: unhealthy regardless.
    w.poweroff(ids[0]).await.unwrap();
    wait_status(&w, lb, "/targets/0", 80, "unhealthy").await;
    assert_eq!(get(addr).await, None);
    w.poweron(ids[0]).await.unwrap();
    wait_status(&w, lb, "/targets/0", 80, "healthy").await;
    assert_eq!(get(addr).await.expect("an answer").server, "s1");
}

// --- target kinds ----------------------------------------------------------------------------

#[tokio::test]
async fn use_private_ip_targets_are_reached_at_their_private_ip() {
    let sim = dp_sim().await;
    let w = sim.client();
    let net = w
        .create_network("net", "10.0.0.0/16", "10.0.1.0/24")
        .await
        .unwrap();
    let s = w.create_server("s1", "cx22", "fsn1").await.unwrap();
    w.attach_to_network(s, net, Some("10.0.1.5")).await.unwrap();
    let private = sim.local_address("10.0.1.5".parse().unwrap());
    let public = sim.local_address(server_ip(&w, s).await);
    assert_ne!(private, public);
    let (port, mut ls) = bind_group(&[private, public]).await;
    let _public = responder("public", ls.pop().unwrap());
    let _private = responder("private", ls.pop().unwrap());
    let lb = lb_with(
        &w,
        "private",
        json!({
            "network": net,
            "services": [{"protocol": "tcp", "listen_port": 80, "destination_port": port}],
            "targets": [{"type": "server", "server": {"id": s}, "use_private_ip": true}],
        }),
    )
    .await;
    let addr = listener(&sim, lb, 80).await;
    wait_status(&w, lb, "/targets/0", 80, "healthy").await;
    assert_eq!(get(addr).await.expect("an answer").server, "private");
    // The address map is published: both addresses are in it, each with its local address.
    let map = w.addresses().await.unwrap();
    assert_eq!(map.get(&"10.0.1.5".parse().unwrap()), Some(&private));
    assert_eq!(
        w.local_address("10.0.1.5".parse().unwrap()).await.unwrap(),
        private
    );
    assert_eq!(sim.addresses(), map);
}

#[tokio::test]
async fn ip_targets_are_reached_at_their_ip() {
    let sim = dp_sim().await;
    let w = sim.client();
    let ip: IpAddr = "203.0.113.7".parse().unwrap();
    // Allocated through the control endpoint this time; `Sim` sees the same.
    let local = w.local_address(ip).await.unwrap();
    assert!(local.is_loopback(), "{local}");
    assert_eq!(sim.local_address(ip), local);
    let (port, mut ls) = bind_group(&[local]).await;
    let _r = responder("robot", ls.pop().unwrap());
    let lb = lb_with(
        &w,
        "ip",
        json!({
            "services": [{"protocol": "tcp", "listen_port": 80, "destination_port": port}],
            "targets": [{"type": "ip", "ip": {"ip": ip.to_string()}}],
        }),
    )
    .await;
    let addr = listener(&sim, lb, 80).await;
    wait_status(&w, lb, "/targets/0", 80, "healthy").await;
    assert_eq!(get(addr).await.expect("an answer").server, "robot");
}

#[tokio::test]
async fn label_selector_targets_are_balanced_and_report_nested_health() {
    let sim = dp_sim().await;
    let w = sim.client();
    let (ids, port, _responders) = servers_with_responders(&sim, &w, &["w1", "w2"]).await;
    for id in &ids {
        w.set_server_labels(*id, &[("role", "web")]).await.unwrap();
    }
    // A matching server without a responder: unhealthy, skipped.
    let dead = w.create_server("w3", "cx22", "fsn1").await.unwrap();
    w.set_server_labels(dead, &[("role", "web")]).await.unwrap();
    let lb = lb_with(
        &w,
        "sel",
        json!({
            "services": [{"protocol": "tcp", "listen_port": 80, "destination_port": port,
                "health_check": {"protocol": "tcp", "port": port, "interval": 5, "timeout": 5, "retries": 0}}],
            "targets": [{"type": "label_selector", "label_selector": {"selector": "role=web"}}],
        }),
    )
    .await;
    let addr = listener(&sim, lb, 80).await;
    wait_status(&w, lb, "/targets/0/targets/0", 80, "healthy").await;
    wait_status(&w, lb, "/targets/0/targets/1", 80, "healthy").await;
    wait_status(&w, lb, "/targets/0/targets/2", 80, "unhealthy").await;
    let answers: Vec<Answer> = [
        get(addr).await,
        get(addr).await,
        get(addr).await,
        get(addr).await,
    ]
    .into_iter()
    .map(|a| a.expect("an answer"))
    .collect();
    assert_eq!(
        tally(&answers),
        BTreeMap::from([("w1".into(), 2), ("w2".into(), 2)])
    );
    // A server that stops matching is no longer a target; its health status is dropped.
    w.set_server_labels(ids[0], &[("role", "db")])
        .await
        .unwrap();
    for _ in 0..3 {
        assert_eq!(get(addr).await.expect("an answer").server, "w2");
    }
}

// --- target faults ---------------------------------------------------------------------------

#[tokio::test]
async fn target_faults_refuse_hang_and_fail_health() {
    let sim = dp_sim().await;
    let w = sim.client();
    let (ids, port, responders) = servers_with_responders(&sim, &w, &["s1"]).await;
    let ip = server_ip(&w, ids[0]).await;
    // Two services on one target: 80 is slow to give up on it (20 retries of a 600 ms check),
    // 81 gives up at the first failure. 80 shows what traffic does while the target is still
    // healthy, 81 what the health checks see.
    let lb = lb_with(
        &w,
        "faults",
        json!({
            "services": [
                {"protocol": "tcp", "listen_port": 80, "destination_port": port,
                 "health_check": {"protocol": "tcp", "port": port, "interval": 30, "timeout": 10, "retries": 20}},
                {"protocol": "tcp", "listen_port": 81, "destination_port": port,
                 "health_check": {"protocol": "tcp", "port": port, "interval": 5, "timeout": 10, "retries": 0}},
            ],
            "targets": server_targets(&ids),
        }),
    )
    .await;
    let addr = listener(&sim, lb, 80).await;
    wait_status(&w, lb, "/targets/0", 80, "healthy").await;
    wait_status(&w, lb, "/targets/0", 81, "healthy").await;

    // refuse: checks fail, and so does traffic at once, although the target is still healthy.
    w.set_target_fault(ip, TargetFault::Refuse).await.unwrap();
    wait_status(&w, lb, "/targets/0", 81, "unhealthy").await;
    let refused = sim.listeners(lb)[0].connections.refused;
    assert_eq!(get(addr).await, None);
    assert_eq!(sim.listeners(lb)[0].connections.refused, refused + 1);
    let v = w.get_load_balancer(lb).await.unwrap();
    assert_eq!(status_at(&v, "/targets/0", 80).as_deref(), Some("healthy"));
    w.clear_target_fault(ip).await.unwrap();
    wait_status(&w, lb, "/targets/0", 81, "healthy").await;
    assert_eq!(get(addr).await.expect("an answer").server, "s1");

    // fail_health: checks fail, traffic still flows.
    sim.set_target_fault(ip, TargetFault::FailHealth);
    wait_status(&w, lb, "/targets/0", 81, "unhealthy").await;
    assert_eq!(get(addr).await.expect("an answer").server, "s1");
    sim.clear_target_fault(ip);
    wait_status(&w, lb, "/targets/0", 81, "healthy").await;

    // hang: checks time out; a connection opens but nothing comes back, and it stays open.
    let served = responders[0].served();
    w.set_target_fault(ip, TargetFault::Hang).await.unwrap();
    wait_status(&w, lb, "/targets/0", 81, "unhealthy").await;
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(b"GET / HTTP/1.1\r\nHost: lb\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut buf = [0u8; 64];
    // An absence can only be shown by waiting: nothing (not even a close) within 500 ms.
    let read = tokio::time::timeout(Duration::from_millis(500), s.read(&mut buf)).await;
    assert!(read.is_err(), "expected silence, got {read:?}");
    assert_eq!(responders[0].served(), served);
    assert_eq!(sim.listeners(lb)[0].connections.active, 1);
    drop(s);
    w.clear_target_fault(ip).await.unwrap();
    wait_status(&w, lb, "/targets/0", 81, "healthy").await;
    assert_eq!(get(addr).await.expect("an answer").server, "s1");

    // The API's own fault rules are untouched by target faults and still work.
    sim.faults()
        .fail_next(Some("GET /load_balancers/{id}"), 1, 503, "unavailable");
    assert_eq!(
        send(&w, Method::GET, &format!("/load_balancers/{lb}"), None)
            .await
            .status,
        503
    );
    // An unknown kind is invalid input.
    let r = w
        .raw(
            Method::PUT,
            &format!("/_sim/targets/{ip}/fault"),
            Some(json!({"kind": "explode"})),
        )
        .await
        .unwrap();
    assert_eq!(r.status, 400);
}

// --- listener lifecycle ----------------------------------------------------------------------

#[tokio::test]
async fn listeners_follow_services_and_load_balancers() {
    let sim = dp_sim().await;
    let w = sim.client();
    let lb = lb_with(
        &w,
        "life",
        json!({"services": [
            {"protocol": "tcp", "listen_port": 80, "destination_port": 30080},
            {"protocol": "tcp", "listen_port": 443, "destination_port": 30443},
        ]}),
    )
    .await;
    let a80 = listener(&sim, lb, 80).await;
    let a443 = listener(&sim, lb, 443).await;
    assert_ne!(a80, a443);

    // A service added later gets a listener promptly: the mutation wakes the reconciler. (Its
    // safety tick is 1 s, so a listener within 500 ms shows the change signal at work; it
    // normally takes a millisecond or two.)
    w.load_balancer_action(
        lb,
        "add_service",
        json!({"protocol": "http", "listen_port": 8080, "destination_port": 30081}),
    )
    .await
    .unwrap();
    let added = std::time::Instant::now();
    listener(&sim, lb, 8080).await;
    assert!(
        added.elapsed() < Duration::from_millis(500),
        "listener after {:?}",
        added.elapsed()
    );
    assert_eq!(
        w.listeners(lb).await.unwrap()[2].protocol,
        "http",
        "by listen port"
    );

    // A changed service keeps its address; a deleted one closes.
    w.load_balancer_action(
        lb,
        "update_service",
        json!({"listen_port": 443, "destination_port": 31443}),
    )
    .await
    .unwrap();
    w.load_balancer_action(lb, "delete_service", json!({"listen_port": 80}))
        .await
        .unwrap();
    eventually("listener 80 gone", || async {
        sim.listener(lb, 80).is_none().then_some(())
    })
    .await;
    eventually("port 80's socket closed", || async {
        TcpStream::connect(a80).await.is_err().then_some(())
    })
    .await;
    assert_eq!(sim.listener(lb, 443), Some(a443));

    // No public interface, no listeners; back on, new ones.
    w.load_balancer_action(lb, "disable_public_interface", json!({}))
        .await
        .unwrap();
    eventually("listeners gone", || async {
        sim.listeners(lb).is_empty().then_some(())
    })
    .await;
    w.load_balancer_action(lb, "enable_public_interface", json!({}))
        .await
        .unwrap();
    let a443 = listener(&sim, lb, 443).await;

    // A deleted load balancer takes its listeners with it.
    w.delete_load_balancer(lb).await.unwrap();
    eventually("port 443's socket closed", || async {
        TcpStream::connect(a443).await.is_err().then_some(())
    })
    .await;
    assert!(sim.listeners(lb).is_empty());
    let r = w
        .raw(
            Method::GET,
            &format!("/_sim/load_balancers/{lb}/listeners"),
            None,
        )
        .await
        .unwrap();
    assert_eq!(r.status, 404);
}

#[tokio::test]
async fn shutdown_and_drop_close_every_listener() {
    let sim = dp_sim().await;
    let w = sim.client();
    let lb = lb_with(
        &w,
        "bye",
        json!({"services": [{"protocol": "tcp", "listen_port": 80, "destination_port": 30080}]}),
    )
    .await;
    let addr = listener(&sim, lb, 80).await;
    assert!(TcpStream::connect(addr).await.is_ok());
    // The client's idle keep-alive connection would hold the API server's graceful shutdown.
    drop(w);
    // shutdown waits for the listener's task: closed when it returns.
    sim.shutdown().await;
    assert!(TcpStream::connect(addr).await.is_err());

    let sim = dp_sim().await;
    let w = sim.client();
    let lb = lb_with(
        &w,
        "bye",
        json!({"services": [{"protocol": "tcp", "listen_port": 80, "destination_port": 30080}]}),
    )
    .await;
    let addr = listener(&sim, lb, 80).await;
    drop(sim);
    eventually("the dropped simulator's listener closed", || async {
        TcpStream::connect(addr).await.is_err().then_some(())
    })
    .await;
}

// --- off by default, and the contract --------------------------------------------------------

#[tokio::test]
async fn with_the_data_plane_off_nothing_listens_and_health_is_derived() {
    let sim = Sim::start().await;
    let w = sim.client();
    let s = w.create_server("s1", "cx22", "fsn1").await.unwrap();
    let lb = lb_with(
        &w,
        "off",
        json!({
            "services": [{"protocol": "tcp", "listen_port": 80, "destination_port": 30080}],
            "targets": server_targets(&[s]),
        }),
    )
    .await;
    // The old behaviour: healthy once settled while the server runs (no responder anywhere).
    wait_status(&w, lb, "/targets/0", 80, "healthy").await;
    assert!(w.listeners(lb).await.unwrap().is_empty());
    assert_eq!(sim.listener(lb, 80), None);
    let r = w
        .raw(Method::GET, "/_sim/load_balancers/999/listeners", None)
        .await
        .unwrap();
    assert_eq!(r.status, 404);
    // Target faults need the data plane.
    let ip = server_ip(&w, s).await;
    let e = w
        .set_target_fault(ip, TargetFault::Refuse)
        .await
        .unwrap_err();
    assert_eq!(e.status(), Some(409));
    assert!(w.set_health_check_speedup(10.0).await.is_err());
    let v = w.raw(Method::GET, "/_sim/config", None).await.unwrap().body;
    assert_eq!(v["data_plane"], Value::Null);
}

/// Hetzner's API reference, `GET /load_balancers/{id}`, response example: a server target
/// and a label_selector target whose nested targets carry the same shape:
/// `"health_status": [{"listen_port": 443, "status": "healthy"}]`.
#[tokio::test]
async fn health_status_has_the_documented_shape() {
    let documented = json!([{"listen_port": 443, "status": "healthy"}]);
    let sim = dp_sim().await;
    let w = sim.client();
    let (ids, port, _responders) = servers_with_responders(&sim, &w, &["a", "b"]).await;
    w.set_server_labels(ids[1], &[("app", "web")])
        .await
        .unwrap();
    let lb = lb_with(
        &w,
        "contract",
        json!({
            "services": [{"protocol": "tcp", "listen_port": 443, "destination_port": port}],
            "targets": [
                {"type": "server", "server": {"id": ids[0]}},
                {"type": "label_selector", "label_selector": {"selector": "app=web"}},
            ],
        }),
    )
    .await;
    wait_status(&w, lb, "/targets/0", 443, "healthy").await;
    wait_status(&w, lb, "/targets/1/targets/0", 443, "healthy").await;
    let v = w.get_load_balancer(lb).await.unwrap();
    assert_eq!(v["targets"][0]["health_status"], documented);
    assert_eq!(v["targets"][1]["targets"][0]["health_status"], documented);
    // The label_selector target itself carries no health_status; its nested targets do.
    assert_eq!(v["targets"][1].get("health_status"), None);
    assert_eq!(v["targets"][1]["targets"][0]["server"]["id"], json!(ids[1]));
    // Undecided is "unknown" in the same shape (a target nobody answers for, at speedup 1 it
    // stays undecided for a minute).
    let sim = dp_sim_with(DataPlaneConfig::default()).await;
    let w = sim.client();
    let s = w.create_server("quiet", "cx22", "fsn1").await.unwrap();
    let lb = lb_with(
        &w,
        "contract",
        json!({
            "services": [{"protocol": "tcp", "listen_port": 443, "destination_port": 30443}],
            "targets": server_targets(&[s]),
        }),
    )
    .await;
    let v = w.get_load_balancer(lb).await.unwrap();
    assert_eq!(
        v["targets"][0]["health_status"],
        json!([{"listen_port": 443, "status": "unknown"}])
    );
}
