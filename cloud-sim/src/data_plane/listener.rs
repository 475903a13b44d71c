//! One service's listener: accepts client connections, picks a target by the load balancer's
//! algorithm and relays bytes both ways.
//!
//! - Candidates are the resolved targets whose health for this listen port is `healthy` and
//!   whose server is `running`, read from the world at every accept (so a target removed or
//!   turned unhealthy gets no new connection from then on).
//! - `round_robin` rotates through them; `least_connections` takes the one with the fewest open
//!   connections through this listener, the first in target order on a tie.
//! - With `proxyprotocol` the target first gets a PROXY header (`proxy_protocol`) naming the
//!   client's address and the load balancer's public address and listen port.
//! - No healthy target, or the connect to the chosen one fails: the client connection is
//!   closed. Another target is not tried, so a test sees the failure it caused.
//! - A relayed connection lives until either side closes, whatever happens to its target in the
//!   API meanwhile (connection draining). Closing the listener ends its connections too.
//! - `https` services end TLS here (`tls`: the certificate is chosen per handshake) and relay
//!   the decrypted bytes, plain HTTP, to the target; a failed handshake closes the connection
//!   before the target is connected. `http` and `https` services are otherwise relayed as TCP
//!   like `tcp` ones: no sticky sessions, no redirects, no added headers.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;

use super::faults::TargetFault;
use super::host::HostRef;
use super::proxy_protocol;
use super::targets;
use super::tls;
use crate::state::{HealthKey, HealthStatus, HealthSubject, LoadBalancer};

/// How long a connect to a target may take before the client connection is given up. Targets
/// are local addresses, where a connect succeeds or is refused at once; this only bounds a
/// real address that drops packets.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// How long a client may take over its TLS handshake: a client that connects and says nothing
/// does not hold a target's slot for ever.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Connection counts of one listener, as `GET /_sim/load_balancers/{id}/listeners` shows them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConnectionCounts {
    /// Client connections accepted.
    pub accepted: u64,
    /// Connections handed to a target (connected, or held open by a `hang` fault).
    pub forwarded: u64,
    /// Client connections closed because no target was healthy or the connect failed.
    pub refused: u64,
    /// Forwarded connections open now.
    pub active: u64,
}

/// The live counts behind [`ConnectionCounts`], of a listener or a CloudStack rule's.
#[derive(Debug, Default)]
pub(super) struct Counters {
    pub accepted: AtomicU64,
    pub forwarded: AtomicU64,
    pub refused: AtomicU64,
    pub active: AtomicU64,
}

impl Counters {
    pub fn counts(&self) -> ConnectionCounts {
        ConnectionCounts {
            accepted: self.accepted.load(Ordering::Relaxed),
            forwarded: self.forwarded.load(Ordering::Relaxed),
            refused: self.refused.load(Ordering::Relaxed),
            active: self.active.load(Ordering::Relaxed),
        }
    }
}

/// What a listener shares with the registry: who it serves, its counts, its balancing state.
#[derive(Debug)]
pub(super) struct ListenerRecord {
    pub lb: u64,
    pub listen_port: u16,
    counters: Counters,
    balance: Mutex<Balance>,
}

#[derive(Debug, Default)]
struct Balance {
    /// Round robin: how many picks so far.
    next: usize,
    /// Least connections: open connections per target (from the pick until the close).
    open: HashMap<HealthSubject, usize>,
}

impl ListenerRecord {
    pub fn new(lb: u64, listen_port: u16) -> ListenerRecord {
        ListenerRecord {
            lb,
            listen_port,
            counters: Counters::default(),
            balance: Mutex::new(Balance::default()),
        }
    }

    pub fn counts(&self) -> ConnectionCounts {
        self.counters.counts()
    }

    fn balance(&self) -> std::sync::MutexGuard<'_, Balance> {
        self.balance.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Picks one of `candidates` (in target order) by `algorithm` and counts it open until the
    /// returned slot is dropped.
    fn pick(
        self: &Arc<Self>,
        algorithm: &str,
        candidates: Vec<(HealthSubject, IpAddr)>,
    ) -> Option<(IpAddr, Slot)> {
        if candidates.is_empty() {
            return None;
        }
        let mut b = self.balance();
        let i = if algorithm == "least_connections" {
            // `min_by_key` keeps the first of equal minima: ties go by target order.
            candidates
                .iter()
                .enumerate()
                .min_by_key(|(_, (s, _))| b.open.get(s).copied().unwrap_or(0))
                .map_or(0, |(i, _)| i)
        } else {
            let i = b.next % candidates.len();
            b.next = b.next.wrapping_add(1);
            i
        };
        let (subject, ip) = candidates.into_iter().nth(i)?;
        *b.open.entry(subject.clone()).or_default() += 1;
        Some((
            ip,
            Slot {
                record: self.clone(),
                subject,
            },
        ))
    }
}

/// A connection counted open against its target (for `least_connections`) until dropped.
#[derive(Debug)]
struct Slot {
    record: Arc<ListenerRecord>,
    subject: HealthSubject,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut b = self.record.balance();
        if let Some(n) = b.open.get_mut(&self.subject) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                b.open.remove(&self.subject);
            }
        }
    }
}

/// The `active` gauge, held while a connection is forwarded.
#[derive(Debug)]
struct Active(Arc<ListenerRecord>);

impl Active {
    fn new(record: &Arc<ListenerRecord>) -> Active {
        record.counters.forwarded.fetch_add(1, Ordering::Relaxed);
        record.counters.active.fetch_add(1, Ordering::Relaxed);
        Active(record.clone())
    }
}

impl Drop for Active {
    fn drop(&mut self) {
        self.0.counters.active.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Accepts until the task is aborted; the connections live in a `JoinSet` owned by this task,
/// so aborting it ends them too (nothing outlives the listener).
pub(super) async fn serve(app: HostRef, listener: TcpListener, record: Arc<ListenerRecord>) {
    let mut connections = JoinSet::new();
    // Built once: the certificate is looked up per handshake, so a rotation needs no new one.
    let tls = tls::acceptor(app.clone(), record.lb, record.listen_port);
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((client, peer)) => {
                    record.counters.accepted.fetch_add(1, Ordering::Relaxed);
                    connections.spawn(handle(app.clone(), record.clone(), client, peer, tls.clone()));
                }
                Err(e) => {
                    // Out of file descriptors and the like: back off instead of spinning.
                    tracing::warn!(lb = record.lb, listen_port = record.listen_port, error = %e,
                        "cloud-sim data plane cannot accept");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

/// Where one accepted connection goes.
#[derive(Debug)]
struct Route {
    /// The target's simulated address (target faults are keyed by it).
    ip: IpAddr,
    /// The local address to connect to.
    to: SocketAddr,
    proxy_header: Option<Vec<u8>>,
    /// An `https` service: the client's TLS ends here.
    tls: bool,
    _slot: Slot,
}

async fn handle(
    app: HostRef,
    record: Arc<ListenerRecord>,
    mut client: TcpStream,
    peer: SocketAddr,
    tls: Option<TlsAcceptor>,
) {
    let Some(route) = route(&app, &record, peer) else {
        record.counters.refused.fetch_add(1, Ordering::Relaxed);
        tracing::debug!(
            lb = record.lb,
            listen_port = record.listen_port,
            "no healthy target"
        );
        return;
    };
    let fault = app.tables().and_then(|dp| dp.faults.get(route.ip));
    match fault {
        Some(TargetFault::Refuse) => {
            record.counters.refused.fetch_add(1, Ordering::Relaxed);
            return;
        }
        Some(TargetFault::Hang) => {
            // Open, silent, until the client gives up.
            let _active = Active::new(&record);
            let _ = tokio::io::copy(&mut client, &mut tokio::io::sink()).await;
            return;
        }
        Some(TargetFault::FailHealth) | None => {}
    }
    if !route.tls {
        return forward(&record, &route, client).await;
    }
    let Some(acceptor) = tls else {
        record.counters.refused.fetch_add(1, Ordering::Relaxed);
        return;
    };
    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(client)).await {
        Ok(Ok(decrypted)) => forward(&record, &route, decrypted).await,
        Ok(Err(e)) => tracing::debug!(error = %e, "cloud-sim data plane: TLS handshake failed"),
        Err(_) => tracing::debug!("cloud-sim data plane: TLS handshake timed out"),
    }
}

/// Connects the target and relays `client` (a TCP stream, or the decrypted side of a TLS one)
/// to it, the PROXY header first if the service asks for one.
async fn forward<S>(record: &Arc<ListenerRecord>, route: &Route, mut client: S)
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let mut upstream = match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(route.to))
        .await
    {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            record.counters.refused.fetch_add(1, Ordering::Relaxed);
            tracing::debug!(to = %route.to, error = %e, "cloud-sim data plane: target refused");
            return;
        }
        Err(_) => {
            record.counters.refused.fetch_add(1, Ordering::Relaxed);
            tracing::debug!(to = %route.to, "cloud-sim data plane: connect to target timed out");
            return;
        }
    };
    let _active = Active::new(record);
    if let Some(header) = &route.proxy_header
        && let Err(e) = upstream.write_all(header).await
    {
        tracing::debug!(to = %route.to, error = %e, "cloud-sim data plane: cannot send PROXY header");
        return;
    }
    // Ends when both directions are done; an error (a reset) just ends the connection.
    let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
}

/// Reads the world and picks the target for a connection from `peer`; `None` when the service
/// is gone or no target is healthy.
fn route(app: &HostRef, record: &Arc<ListenerRecord>, peer: SocketAddr) -> Option<Route> {
    let dp = app.tables()?;
    let (ip, port, proxy_header, tls, slot) = {
        let st = app.state();
        let lb = st.load_balancers.get(&record.lb)?;
        let svc = lb
            .services
            .iter()
            .find(|s| s.listen_port == record.listen_port)?;
        let candidates: Vec<(HealthSubject, IpAddr)> = targets::resolve(&st, lb)
            .into_iter()
            .filter(|r| r.running)
            .filter(|r| {
                let key = HealthKey {
                    lb: lb.id,
                    listen_port: svc.listen_port,
                    subject: r.subject.clone(),
                };
                dp.health.status(&key) == HealthStatus::Healthy
            })
            .filter_map(|r| Some((r.subject, r.ip?)))
            .collect();
        let (ip, slot) = record.pick(&lb.algorithm, candidates)?;
        let proxy_header = svc.proxyprotocol.then(|| {
            proxy_protocol::header(
                dp.config.proxy_protocol_version,
                peer,
                public_address(lb, peer, svc.listen_port),
            )
        });
        (
            ip,
            svc.destination_port,
            proxy_header,
            svc.protocol == "https",
            slot,
        )
    };
    Some(Route {
        ip,
        to: SocketAddr::new(app.addresses().local(ip), port),
        proxy_header,
        tls,
        _slot: slot,
    })
}

/// The address the client reached as the API shows it: the load balancer's public IPv4 and the
/// listen port (its IPv6 for an IPv6 client, so the PROXY header keeps one family).
fn public_address(lb: &LoadBalancer, peer: SocketAddr, listen_port: u16) -> SocketAddr {
    let v4_client = match peer.ip() {
        IpAddr::V4(_) => true,
        IpAddr::V6(v6) => v6.to_ipv4_mapped().is_some(),
    };
    let ip = if v4_client {
        IpAddr::V4(lb.ipv4)
    } else {
        IpAddr::V6(lb.ipv6)
    };
    SocketAddr::new(ip, listen_port)
}
