//! A load balancer's targets resolved to what traffic and health checks go to: one entry per
//! server (a label selector stands for every server it matches) or IP, each with its simulated
//! address. The rules are the API's: a server is reached at its public IPv4, or with
//! `use_private_ip` at its private IP in a network the load balancer is attached to; a label
//! selector matches servers in the load balancer's network zone (`State::selected_servers`, the
//! very list `wire::load_balancer` shows in the target's nested `targets`).

use std::collections::HashSet;
use std::net::IpAddr;

use crate::label_selector::Selector;
use crate::state::{HealthSubject, LoadBalancer, Server, State, TargetKind};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    pub subject: HealthSubject,
    /// The simulated address; `None` when there is none to reach (a server without a public
    /// IPv4, or with `use_private_ip` but in none of the load balancer's networks).
    pub ip: Option<IpAddr>,
    /// Whether the server is `running`; IP targets (machines outside the cloud) always are.
    pub running: bool,
}

/// Every resolved target of `lb`, in the order of its targets (a label selector's servers by
/// id); a server that two targets resolve to alike is listed once.
pub fn resolve(st: &State, lb: &LoadBalancer) -> Vec<Resolved> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    let mut push = |r: Resolved| {
        if seen.insert(r.subject.clone()) {
            out.push(r);
        }
    };
    for t in &lb.targets {
        match &t.kind {
            TargetKind::Server(id) => {
                if let Some(s) = st.servers.get(id) {
                    push(server(lb, s, t.use_private_ip));
                }
            }
            TargetKind::LabelSelector(sel) => {
                if let Ok(selector) = Selector::parse(sel) {
                    for s in st.selected_servers(lb, &selector) {
                        push(server(lb, s, t.use_private_ip));
                    }
                }
            }
            TargetKind::Ip(ip) => push(Resolved {
                subject: HealthSubject::Ip(ip.clone()),
                ip: ip.parse().ok(),
                running: true,
            }),
        }
    }
    out
}

fn server(lb: &LoadBalancer, s: &Server, private: bool) -> Resolved {
    let ip = if private {
        s.private_net
            .iter()
            .find(|p| lb.private_net.iter().any(|l| l.network == p.network))
            .map(|p| IpAddr::V4(p.ip))
    } else {
        s.ipv4.as_ref().map(|v4| IpAddr::V4(v4.ip))
    };
    Resolved {
        subject: HealthSubject::Server { id: s.id, private },
        ip,
        running: s.status == "running",
    }
}
