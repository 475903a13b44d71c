//! CloudStack load-balancer rules on the wire: the reconciler's CloudStack half. A test of the
//! CloudStack provider needs to see that a Service's rule carries traffic to its nodes, only
//! from the sources its firewall or ACL rules let in, the way the virtual router would; the
//! Hetzner listeners (`listener`) are keyed by load balancer and service and health-checked,
//! which CloudStack rules are not, so they live apart and share only the address map, the PROXY
//! header and the connection counts.
//!
//! Per rule whose public address is allocated ([`reach::carried`]): a TCP listener (`tcp`,
//! `tcp-proxy`) or a UDP socket (`udp`) on `listen_ip:0`, kept (with its address) while the rule
//! lives and its transport stays, closed when it goes. What each connection or datagram does is
//! `rule_traffic`'s.
//!
//! Sources: clients are all local, so the simulated source address of a connection or datagram
//! is its real local source address (`127.0.0.2`, ...); a test binds its client socket to one
//! loopback address a firewall or ACL rule allows and another it does not. An IPv6 client (other
//! than IPv4-mapped) matches no rule.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use tokio::net::{TcpListener, UdpSocket};
use tokio::task::JoinHandle;

use super::DataPlane;
use super::host::HostRef;
use super::listener::ConnectionCounts;
use super::rule_traffic::{self, RuleRecord};
use crate::cloudstack::reach;

/// One rule's listener as `GET /_sim/cloudstack/load_balancer_rules/{id}/listener` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuleListenerInfo {
    pub rule_id: String,
    /// The rule's protocol: `tcp`, `udp` or `tcp-proxy`.
    pub protocol: String,
    /// Where to connect (TCP) or send datagrams (UDP) to reach the rule.
    pub address: SocketAddr,
    /// For TCP: connections accepted, handed to a member, refused (firewall, no member, member
    /// refused) and open now. For UDP: datagrams received, sent to a member, dropped, and the
    /// client sessions open now.
    pub connections: ConnectionCounts,
}

#[derive(Debug)]
pub(super) struct RuleListener {
    address: SocketAddr,
    protocol: String,
    record: Arc<RuleRecord>,
    pub(super) task: JoinHandle<()>,
}

impl RuleListener {
    fn info(&self, rule_id: &str) -> RuleListenerInfo {
        RuleListenerInfo {
            rule_id: rule_id.to_owned(),
            protocol: self.protocol.clone(),
            address: self.address,
            connections: self.record.counts(),
        }
    }
}

impl DataPlane {
    /// The listener of CloudStack load-balancer rule `id`; `None` while it has none (no such
    /// rule, or not reconciled yet: poll).
    pub fn rule_listener(&self, id: &str) -> Option<RuleListenerInfo> {
        self.tasks().rules.get(id).map(|l| l.info(id))
    }
}

/// Closes the listeners of rules gone (or whose transport changed) and opens the new ones.
pub(super) async fn reconcile(app: &HostRef, dp: &DataPlane) {
    let want: BTreeMap<String, String> = reach::carried(&app.state().cloudstack)
        .into_iter()
        .collect();
    let to_open: Vec<(String, String)> = {
        let mut tasks = dp.tasks();
        if tasks.stopped {
            return;
        }
        tasks.rules.retain(|id, l| match want.get(id) {
            Some(p) if reach::transport(p) == reach::transport(&l.protocol) => {
                p.clone_into(&mut l.protocol);
                true
            }
            _ => {
                l.task.abort();
                false
            }
        });
        want.iter()
            .filter(|(id, _)| !tasks.rules.contains_key(*id))
            .map(|(id, p)| (id.clone(), p.clone()))
            .collect()
    };
    for (id, protocol) in to_open {
        let at = SocketAddr::new(dp.config.listen_ip, 0);
        let record = Arc::new(RuleRecord::new(&id));
        let opened = if reach::transport(&protocol) == "udp" {
            UdpSocket::bind(at).await.and_then(|s| {
                let address = s.local_addr()?;
                let task = tokio::spawn(rule_traffic::serve_udp(app.clone(), s, record.clone()));
                Ok((address, task))
            })
        } else {
            TcpListener::bind(at).await.and_then(|s| {
                let address = s.local_addr()?;
                let task = tokio::spawn(rule_traffic::serve_tcp(app.clone(), s, record.clone()));
                Ok((address, task))
            })
        };
        let (address, task) = match opened {
            Ok(o) => o,
            Err(e) => {
                // Tried again at the next reconcile.
                tracing::warn!(rule = %id, error = %e, "cloud-sim data plane cannot listen");
                continue;
            }
        };
        let mut tasks = dp.tasks();
        if tasks.stopped {
            task.abort();
            return;
        }
        tracing::debug!(rule = %id, %address, %protocol, "cloud-sim data plane carries a rule");
        tasks.rules.insert(
            id,
            RuleListener {
                address,
                protocol,
                record,
                task,
            },
        );
    }
}
