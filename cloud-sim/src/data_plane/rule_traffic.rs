//! What a CloudStack rule's listener does with each TCP connection or UDP datagram: the
//! firewall or ACL check, the member pick, the relay. Everything is decided from the world at
//! the moment traffic arrives, so a rule deleted, a member removed or stopped, or a firewall rule
//! revoked applies to the next connection or datagram.
//!
//! - The source is checked first ([`reach::admits`]); a source not let in is refused: a TCP
//!   connection is closed without a byte and without reaching a member, a datagram is dropped.
//! - Members are picked round-robin over those that can take traffic now ([`reach::members`]).
//!   CloudStack's `roundrobin`, `leastconn` and `source` all behave as round robin here: the
//!   virtual router's balancing policy is not what a controller test checks, only that every
//!   member is reached and a gone one is not.
//! - A member is reached at its NIC's address mapped to a local address (`addresses`) and the
//!   rule's private port, where a test binds the node's stand-in (TCP: `stand_in`, UDP:
//!   `stand_in_udp`). No health checks: CloudStack's rules have none of their own.
//! - `tcp-proxy` sends a PROXY v1 header first (HAProxy's `send-proxy`, what the virtual router
//!   configures), naming the client and the rule's public address and port.
//! - UDP: each datagram goes to the next member through a socket of its own per client and
//!   member, whose answers go back to the client from the rule's address; such a session is
//!   dropped after [`UDP_IDLE`] without traffic.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream, UdpSocket};
use tokio::task::{AbortHandle, JoinSet};

use super::host::HostRef;
use super::listener::{ConnectionCounts, Counters};
use super::proxy_protocol;
use crate::cloudstack::reach;

/// How long a connect to a member may take (local addresses answer at once; this bounds a real
/// address that drops packets).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// How long a UDP client session lives without a datagram either way.
pub const UDP_IDLE: Duration = Duration::from_secs(30);

/// A rule listener's counts and its round-robin position.
#[derive(Debug)]
pub(super) struct RuleRecord {
    rule: String,
    counters: Counters,
    next: AtomicUsize,
}

impl RuleRecord {
    pub fn new(rule: &str) -> RuleRecord {
        RuleRecord {
            rule: rule.to_owned(),
            counters: Counters::default(),
            next: AtomicUsize::new(0),
        }
    }

    pub fn counts(&self) -> ConnectionCounts {
        self.counters.counts()
    }

    fn refuse(&self, why: &str) {
        self.counters.refused.fetch_add(1, Ordering::Relaxed);
        tracing::debug!(rule = %self.rule, why, "cloud-sim data plane refused");
    }
}

/// Where one connection or datagram goes.
#[derive(Debug)]
struct Route {
    to: SocketAddr,
    proxy_header: Option<Vec<u8>>,
}

/// The client's address as the firewall sees it.
fn source(peer: SocketAddr) -> Option<Ipv4Addr> {
    match peer.ip() {
        IpAddr::V4(v4) => Some(v4),
        IpAddr::V6(v6) => v6.to_ipv4_mapped(),
    }
}

/// Reads the world: `Err` says why the traffic is refused.
fn route(app: &HostRef, record: &RuleRecord, peer: SocketAddr) -> Result<Route, &'static str> {
    let st = app.state();
    let w = &st.cloudstack;
    let rule = w.lb_rule(&record.rule).ok_or("rule gone")?;
    let src = source(peer).ok_or("not an IPv4 client")?;
    if !reach::admits(w, rule, src) {
        return Err("source not allowed by the firewall or ACL rules");
    }
    let members = reach::members(w, rule);
    if members.is_empty() {
        return Err("no member can take traffic");
    }
    let i = record.next.fetch_add(1, Ordering::Relaxed) % members.len();
    let member = &members[i];
    let proxy_header = (rule.protocol == "tcp-proxy").then(|| {
        let (ip, port) = reach::public_address(w, rule).unwrap_or((Ipv4Addr::UNSPECIFIED, 0));
        proxy_protocol::header(1, peer, SocketAddr::new(IpAddr::V4(ip), port))
    });
    let port = rule.private_port;
    drop(st);
    Ok(Route {
        to: SocketAddr::new(app.addresses().local(IpAddr::V4(member.ip)), port),
        proxy_header,
    })
}

/// Accepts until aborted; connections live in a `JoinSet` this task owns, so they end with it.
pub(super) async fn serve_tcp(app: HostRef, listener: TcpListener, record: Arc<RuleRecord>) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((client, peer)) => {
                    record.counters.accepted.fetch_add(1, Ordering::Relaxed);
                    connections.spawn(relay_tcp(app.clone(), record.clone(), client, peer));
                }
                Err(e) => {
                    tracing::warn!(rule = %record.rule, error = %e, "cloud-sim data plane cannot accept");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

async fn relay_tcp(app: HostRef, record: Arc<RuleRecord>, mut client: TcpStream, peer: SocketAddr) {
    let route = match route(&app, &record, peer) {
        Ok(r) => r,
        // Dropping the client closes it before a byte went anywhere.
        Err(why) => return record.refuse(why),
    };
    let mut upstream =
        match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(route.to)).await {
            Ok(Ok(s)) => s,
            _ => return record.refuse("member refused or did not answer"),
        };
    record.counters.forwarded.fetch_add(1, Ordering::Relaxed);
    record.counters.active.fetch_add(1, Ordering::Relaxed);
    if let Some(header) = &route.proxy_header
        && upstream.write_all(header).await.is_err()
    {
        record.counters.active.fetch_sub(1, Ordering::Relaxed);
        return;
    }
    let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
    record.counters.active.fetch_sub(1, Ordering::Relaxed);
}

/// One client's datagrams to one member.
#[derive(Debug)]
struct Session {
    upstream: Arc<UdpSocket>,
    relay: AbortHandle,
    /// Milliseconds since the listener started, of the last datagram either way.
    last: Arc<AtomicU64>,
}

/// Receives until aborted; the answer relays are its tasks and end with it.
pub(super) async fn serve_udp(app: HostRef, socket: UdpSocket, record: Arc<RuleRecord>) {
    let mut udp = Udp {
        app,
        record,
        socket: Arc::new(socket),
        started: Instant::now(),
        sessions: HashMap::new(),
        relays: JoinSet::new(),
    };
    let mut sweep = tokio::time::interval(UDP_IDLE / 3);
    let mut buf = vec![0u8; 65_535];
    loop {
        tokio::select! {
            received = udp.socket.recv_from(&mut buf) => {
                if let Ok((n, peer)) = received {
                    udp.datagram(&buf[..n], peer).await;
                }
            }
            Some(_) = udp.relays.join_next(), if !udp.relays.is_empty() => {}
            _ = sweep.tick() => udp.sweep(),
        }
        let open = udp.sessions.len() as u64;
        udp.record.counters.active.store(open, Ordering::Relaxed);
    }
}

/// A UDP listener's state: its sessions by (client, member address) and their relays.
struct Udp {
    app: HostRef,
    record: Arc<RuleRecord>,
    socket: Arc<UdpSocket>,
    started: Instant,
    sessions: HashMap<(SocketAddr, SocketAddr), Session>,
    relays: JoinSet<()>,
}

impl Udp {
    /// Milliseconds since the listener started.
    fn now_ms(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    async fn datagram(&mut self, data: &[u8], peer: SocketAddr) {
        let record = self.record.clone();
        record.counters.accepted.fetch_add(1, Ordering::Relaxed);
        let route = match route(&self.app, &record, peer) {
            Ok(r) => r,
            Err(why) => return record.refuse(why),
        };
        let now = self.now_ms();
        let session = match self.sessions.entry((peer, route.to)) {
            Entry::Occupied(o) => o.into_mut(),
            Entry::Vacant(v) => {
                let Ok(upstream) = open_upstream(route.to).await else {
                    return record.refuse("cannot open a socket to the member");
                };
                let last = Arc::new(AtomicU64::new(now));
                let relay = self.relays.spawn(relay_answers(
                    upstream.clone(),
                    self.socket.clone(),
                    peer,
                    last.clone(),
                    self.started,
                ));
                v.insert(Session {
                    upstream,
                    relay,
                    last,
                })
            }
        };
        session.last.store(now, Ordering::Relaxed);
        match session.upstream.send(data).await {
            Ok(_) => {
                record.counters.forwarded.fetch_add(1, Ordering::Relaxed);
            }
            Err(_) => record.refuse("member unreachable"),
        }
    }

    /// Drops the sessions idle for [`UDP_IDLE`].
    fn sweep(&mut self) {
        let idle_before = self
            .now_ms()
            .saturating_sub(u64::try_from(UDP_IDLE.as_millis()).unwrap_or(u64::MAX));
        self.sessions.retain(|_, s| {
            let keep = s.last.load(Ordering::Relaxed) >= idle_before;
            if !keep {
                s.relay.abort();
            }
            keep
        });
    }
}

async fn open_upstream(to: SocketAddr) -> std::io::Result<Arc<UdpSocket>> {
    let any = match to {
        SocketAddr::V4(_) => SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0)),
        SocketAddr::V6(_) => SocketAddr::from((std::net::Ipv6Addr::UNSPECIFIED, 0)),
    };
    let s = UdpSocket::bind(any).await?;
    s.connect(to).await?;
    Ok(Arc::new(s))
}

/// A member's answers, back to the client from the rule's own address.
async fn relay_answers(
    upstream: Arc<UdpSocket>,
    socket: Arc<UdpSocket>,
    client: SocketAddr,
    last: Arc<AtomicU64>,
    started: Instant,
) {
    let mut buf = vec![0u8; 65_535];
    loop {
        match upstream.recv(&mut buf).await {
            Ok(n) => {
                let ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
                last.store(ms, Ordering::Relaxed);
                let _ = socket.send_to(&buf[..n], client).await;
            }
            // An ICMP port unreachable from a member not listening: the next datagram may
            // find it up.
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {}
            Err(_) => return,
        }
    }
}
