//! Whether kube-proxy answers health checks at all, asked before a load balancer is told to rely
//! on them (`health-check-kube-proxy`).
//!
//! A load balancer whose health check asks kube-proxy takes a node out when kube-proxy says it
//! cannot serve. Where kube-proxy's health server cannot be reached, that is every node at once:
//! k3s binds it to 127.0.0.1, Cilium's kube-proxy replacement serves it only when
//! `kubeProxyReplacementHealthzBindAddr` is set, and a firewall may drop it. So before each ensure
//! of such a Service (and every [`PROBE_PERIOD`] after), the controller sends kube-proxy's
//! `GET /healthz` itself to up to [`SAMPLE`] of the eligible nodes, at their first `InternalIP`
//! (a round without an answer is confirmed by a second one [`CONFIRM_AFTER`] later):
//!
//! - `externalTrafficPolicy: Cluster` (port 10256): kube-proxy answers `200` while it runs and its
//!   node is not being deleted. When no probed node answers `200` (refused, timed out, or `503`
//!   on all of them: Cilium while it cannot reach the apiserver), kube-proxy is **unreachable**.
//! - `Local` (the Service's `healthCheckNodePort`): `503` means "no ready endpoint on this node",
//!   and `503` everywhere means no endpoint anywhere: a true answer that the TCP check would not
//!   improve (kube-proxy drops the traffic on such a node either way). So any HTTP answer counts
//!   as kube-proxy answering; only no answer from any probed node is **unreachable**.
//! - No eligible node has an `InternalIP`: nothing to ask, the Service keeps what it had.
//!
//! While unreachable, the Service's load balancer checks the NodePort over TCP, as it does
//! without the option (see `ServiceRef::kube_proxy_unreachable`); once kube-proxy answers again,
//! the next probe switches it back. Verdicts are kept per port for [`FRESH_FOR`], so a thousand
//! Services on port 10256 cost one round of probes. A probe costs no cloud call.

use std::collections::{HashMap, HashSet};
use std::net::{IpAddr, SocketAddr};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use cloud_client::LbNode;
use prometheus_client::metrics::gauge::Gauge;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

/// How often a Service whose load balancer follows kube-proxy is looked at again: the longest a
/// load balancer keeps asking a kube-proxy that stopped answering everywhere (then one health
/// check interval until the TCP check passes).
pub const PROBE_PERIOD: Duration = Duration::from_secs(30);
/// How long a verdict on a port is reused by other Services.
const FRESH_FOR: Duration = Duration::from_secs(10);
/// How many nodes are asked, spread over the node list.
pub const SAMPLE: usize = 8;
/// After a round in which kube-proxy did not answer, the second round that decides: kube-proxy
/// opens a new Service's `healthCheckNodePort` a moment after the apiserver allocated it (the
/// controller's first look comes sooner), and Cilium answers 503 during a short apiserver blip.
const CONFIRM_AFTER: Duration = Duration::from_secs(2);
/// One probe: connect, request, status line.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);
/// Where kube-proxy answers, on its health server and on a Service's `healthCheckNodePort`.
const PATH: &str = "/healthz";

/// What the probes of one port found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// kube-proxy answered on at least one node.
    Answers,
    /// No probed node gave an answer that counts (see the module docs).
    Unreachable {
        /// Nodes asked.
        probed: usize,
        /// Of them, those that answered `503` (`Cluster` only: kube-proxy is there but says no
        /// node can serve).
        unavailable: usize,
    },
    /// No node to ask.
    Unknown,
}

/// Which answer counts: see the module docs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Policy {
    /// `externalTrafficPolicy: Cluster`: only `2xx` says kube-proxy can serve.
    Cluster,
    /// `Local`: any HTTP answer is kube-proxy's true answer.
    Local,
}

/// The probes' verdicts and which Services fall back because of them.
#[derive(Debug)]
pub struct KubeProxyProbe {
    verdicts: Mutex<HashMap<(u16, Policy), (Instant, Verdict)>>,
    /// UIDs of the Services whose load balancer checks the NodePort instead of kube-proxy.
    falling_back: Mutex<HashSet<String>>,
    /// Their number (`service_controller_kube_proxy_fallbacks`).
    gauge: Gauge,
}

impl KubeProxyProbe {
    pub fn new(gauge: Gauge) -> Self {
        Self {
            verdicts: Mutex::default(),
            falling_back: Mutex::default(),
            gauge,
        }
    }

    /// Whether kube-proxy answers on `port` of `nodes`: a verdict younger than [`FRESH_FOR`], or
    /// a new round of probes (two, [`CONFIRM_AFTER`] apart, when the first finds no answer).
    pub async fn verdict(&self, port: u16, policy: Policy, nodes: &[LbNode]) -> Verdict {
        let key = (port, policy);
        if let Some((at, v)) = lock(&self.verdicts).get(&key)
            && at.elapsed() < FRESH_FOR
        {
            return *v;
        }
        let mut v = probe(port, policy, nodes, PROBE_TIMEOUT).await;
        if matches!(v, Verdict::Unreachable { .. }) {
            tokio::time::sleep(CONFIRM_AFTER).await;
            v = probe(port, policy, nodes, PROBE_TIMEOUT).await;
        }
        lock(&self.verdicts).insert(key, (Instant::now(), v));
        v
    }

    /// Records whether Service `uid` falls back; returns whether it did before.
    pub fn set_falling_back(&self, uid: &str, on: bool) -> bool {
        let mut set = lock(&self.falling_back);
        let was = if on {
            !set.insert(uid.to_owned())
        } else {
            set.remove(uid)
        };
        self.gauge.set(set.len() as i64);
        was
    }

    pub fn is_falling_back(&self, uid: &str) -> bool {
        lock(&self.falling_back).contains(uid)
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Asks up to [`SAMPLE`] of `nodes` (those with an `InternalIP`, spread over the list) at once.
async fn probe(port: u16, policy: Policy, nodes: &[LbNode], timeout: Duration) -> Verdict {
    let addresses: Vec<IpAddr> = nodes
        .iter()
        .filter_map(|n| n.internal_ips.iter().find_map(|ip| ip.parse().ok()))
        .collect();
    if addresses.is_empty() {
        return Verdict::Unknown;
    }
    let step = addresses.len().div_ceil(SAMPLE);
    let asked: Vec<IpAddr> = addresses.into_iter().step_by(step).collect();
    let answers = futures::future::join_all(
        asked
            .iter()
            .map(|ip| status(SocketAddr::new(*ip, port), timeout)),
    )
    .await;
    let counts = |s: &Option<u16>| match (policy, s) {
        (_, None) => false,
        (Policy::Local, Some(_)) => true,
        (Policy::Cluster, Some(code)) => (200..300).contains(code),
    };
    if answers.iter().any(counts) {
        return Verdict::Answers;
    }
    Verdict::Unreachable {
        probed: answers.len(),
        unavailable: answers.iter().filter(|s| **s == Some(503)).count(),
    }
}

/// kube-proxy's HTTP status at `addr`, `None` when it gave none in `timeout`.
async fn status(addr: SocketAddr, timeout: Duration) -> Option<u16> {
    let exchange = async {
        let mut conn = TcpStream::connect(addr).await.ok()?;
        let head = format!(
            "GET {PATH} HTTP/1.1\r\nHost: {addr}\r\nUser-Agent: cloud-controllers-service-controller\r\nConnection: close\r\n\r\n"
        );
        conn.write_all(head.as_bytes()).await.ok()?;
        let mut buf = Vec::with_capacity(64);
        let mut chunk = [0u8; 64];
        // "HTTP/1.1 200 OK": the status is all we read.
        while buf.len() < 12 {
            let n = conn.read(&mut chunk).await.ok()?;
            if n == 0 {
                break;
            }
            buf.extend_from_slice(&chunk[..n]);
        }
        let line = std::str::from_utf8(&buf).ok()?;
        line.strip_prefix("HTTP/1.")?.get(2..5)?.parse().ok()
    };
    tokio::time::timeout(timeout, exchange).await.ok().flatten()
}

/// What the `LoadBalancerReady` condition adds while a Service's load balancer checks the NodePort
/// because kube-proxy answered on no node (the Warning gives the details).
pub const FALLING_BACK_NOTE: &str = "kube-proxy's health check answered on no node, so the load \
     balancer checks each node's NodePort over TCP instead (see the KubeProxyHealthCheckUnreachable \
     Event for the likely cause and the fix); the controller returns to kube-proxy's check once it \
     answers";

/// The Warning's words for `verdict` on `port`: what was found, what the load
/// balancer does instead, the likely cause and the setting that fixes it.
pub fn unreachable_note(port: u16, policy: Policy, verdict: Verdict) -> String {
    let Verdict::Unreachable {
        probed,
        unavailable,
    } = verdict
    else {
        return String::new();
    };
    let found = if unavailable == probed {
        format!("answered 503 on all {probed} nodes asked")
    } else if unavailable > 0 {
        format!("gave no 200 on the {probed} nodes asked ({unavailable} answered 503)")
    } else {
        format!("did not answer on any of the {probed} nodes asked")
    };
    let cause = match policy {
        Policy::Cluster => {
            "On k3s kube-proxy's health server listens on 127.0.0.1 only: set the k3s option \
             kube-proxy-arg: healthz-bind-address=0.0.0.0:10256. Cilium's kube-proxy replacement \
             serves it only with kubeProxyReplacementHealthzBindAddr set (e.g. 0.0.0.0:10256), \
             and answers 503 everywhere while it cannot reach the apiserver. A firewall on the \
             nodes must let the load balancer reach port 10256"
        }
        Policy::Local => {
            "kube-proxy (or Cilium's kube-proxy replacement, with enableHealthCheckNodePort on) \
             serves the Service's healthCheckNodePort on every node; a firewall on the nodes must \
             let the load balancer reach it"
        }
    };
    format!(
        "kube-proxy's health check (GET {PATH} on port {port}) {found}, so the load balancer \
         checks each node's NodePort over TCP instead: asking kube-proxy would take every target \
         out at once. {cause}. The controller asks again every {}s and returns to kube-proxy's \
         check once it answers",
        PROBE_PERIOD.as_secs()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::net::TcpListener;

    fn node(ip: &str) -> LbNode {
        LbNode {
            name: ip.into(),
            provider_id: None,
            labels: Default::default(),
            internal_ips: vec![ip.into()],
        }
    }

    /// A kube-proxy on 127.0.0.1 answering `code` to every request; returns its port.
    async fn kube_proxy(code: u16) -> u16 {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            while let Ok((mut conn, _)) = listener.accept().await {
                let mut buf = [0u8; 512];
                let _ = conn.read(&mut buf).await;
                let answer = format!("HTTP/1.1 {code} Whatever\r\nContent-Length: 0\r\n\r\n");
                let _ = conn.write_all(answer.as_bytes()).await;
            }
        });
        port
    }

    /// A port nothing listens on.
    async fn closed_port() -> u16 {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        listener.local_addr().unwrap().port()
    }

    const T: Duration = Duration::from_secs(2);

    #[tokio::test]
    async fn cluster_counts_only_a_200_and_local_any_answer() {
        let nodes = [node("127.0.0.1")];
        let ok = kube_proxy(200).await;
        let no = kube_proxy(503).await;
        let none = closed_port().await;
        assert_eq!(
            probe(ok, Policy::Cluster, &nodes, T).await,
            Verdict::Answers
        );
        assert_eq!(
            probe(no, Policy::Cluster, &nodes, T).await,
            Verdict::Unreachable {
                probed: 1,
                unavailable: 1
            }
        );
        assert_eq!(probe(no, Policy::Local, &nodes, T).await, Verdict::Answers);
        for policy in [Policy::Cluster, Policy::Local] {
            assert_eq!(
                probe(none, policy, &nodes, T).await,
                Verdict::Unreachable {
                    probed: 1,
                    unavailable: 0
                }
            );
        }
    }

    #[tokio::test]
    async fn one_answering_node_of_many_is_enough_and_nodes_without_an_address_are_unknown() {
        let port = kube_proxy(200).await;
        // 127.0.0.2.. refuse (nothing bound there); 127.0.0.1 answers.
        let mut nodes: Vec<LbNode> = (2..6).map(|i| node(&format!("127.0.0.{i}"))).collect();
        nodes.push(node("127.0.0.1"));
        assert_eq!(
            probe(port, Policy::Cluster, &nodes, T).await,
            Verdict::Answers
        );
        let bare = LbNode {
            internal_ips: vec![],
            ..node("x")
        };
        assert_eq!(
            probe(port, Policy::Cluster, &[bare], T).await,
            Verdict::Unknown
        );
    }

    #[tokio::test]
    async fn no_more_than_the_sample_is_asked() {
        let port = closed_port().await;
        let nodes: Vec<LbNode> = (1..=50).map(|i| node(&format!("127.0.1.{i}"))).collect();
        let Verdict::Unreachable { probed, .. } = probe(port, Policy::Local, &nodes, T).await
        else {
            panic!("nothing listens");
        };
        assert!((1..=SAMPLE).contains(&probed), "{probed}");
    }

    #[test]
    fn the_note_names_the_cause_and_the_fix() {
        let v = Verdict::Unreachable {
            probed: 3,
            unavailable: 0,
        };
        let n = unreachable_note(10256, Policy::Cluster, v);
        assert!(n.contains("did not answer on any of the 3 nodes"), "{n}");
        assert!(n.contains("healthz-bind-address=0.0.0.0:10256"), "{n}");
        assert!(n.contains("kubeProxyReplacementHealthzBindAddr"), "{n}");
        let all_503 = Verdict::Unreachable {
            probed: 3,
            unavailable: 3,
        };
        assert!(
            unreachable_note(10256, Policy::Cluster, all_503).contains("answered 503 on all 3")
        );
        assert!(unreachable_note(31000, Policy::Local, v).contains("healthCheckNodePort"));
        assert_eq!(unreachable_note(1, Policy::Local, Verdict::Answers), "");
    }

    #[tokio::test]
    async fn verdicts_are_reused_while_fresh_and_fallbacks_are_counted() {
        let probe = KubeProxyProbe::new(Gauge::default());
        let port = closed_port().await;
        let nodes = [node("127.0.0.1")];
        let first = probe.verdict(port, Policy::Cluster, &nodes).await;
        assert!(matches!(first, Verdict::Unreachable { .. }));
        // A second round confirmed it: the stand-in answering in between would have said so.
        // Something listens now, but the verdict is fresh.
        let _listener = TcpListener::bind(("127.0.0.1", port)).await.unwrap();
        assert_eq!(probe.verdict(port, Policy::Cluster, &nodes).await, first);

        assert!(!probe.set_falling_back("u1", true));
        assert!(probe.set_falling_back("u1", true));
        assert!(probe.is_falling_back("u1"));
        assert_eq!(probe.gauge.get(), 1);
        assert!(probe.set_falling_back("u1", false));
        assert!(!probe.is_falling_back("u1"));
        assert_eq!(probe.gauge.get(), 0);
    }
}
