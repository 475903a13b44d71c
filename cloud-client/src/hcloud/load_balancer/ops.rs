//! Each planned write as the HTTP request that makes it.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::spec::{LbAlgorithm, Placement};
use crate::hcloud::transport::Req;
use crate::hcloud::wire::LbService;

/// What the create request carries. Whatever it cannot carry is left to the [`plan`](super::plan::plan)
/// against the created load balancer: a fixed private IP or subnet (the inline network takes neither),
/// private-IP targets while the network is not attached yet, targets beyond the type's limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewLb {
    pub name: String,
    /// Its ownership labels (see [`super::ownership`]).
    pub labels: BTreeMap<String, String>,
    pub lb_type: String,
    pub placement: Placement,
    pub algorithm: Option<LbAlgorithm>,
    pub public_interface: Option<bool>,
    pub network: Option<i64>,
    pub services: Vec<LbService>,
    /// `None`: none inline, all are added afterwards.
    pub targets: Option<Vec<i64>>,
    pub use_private_ip: bool,
}

/// One write against a load balancer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// `PUT` with only the fields that change.
    Update {
        name: Option<String>,
        labels: Option<BTreeMap<String, String>>,
    },
    ChangeDnsPtr {
        ip: String,
        dns_ptr: String,
    },
    ChangeAlgorithm(LbAlgorithm),
    ChangeType(String),
    DetachNetwork(i64),
    AttachNetwork {
        network: i64,
        ip: Option<String>,
        ip_range: Option<String>,
    },
    EnablePublicInterface,
    DisablePublicInterface,
    DeleteService(u16),
    UpdateService(LbService),
    AddService(LbService),
    RemoveTarget(i64),
    AddTarget {
        server: i64,
        use_private_ip: bool,
    },
    /// A dedicated server's address (HCCM targets Robot nodes by IP).
    RemoveIpTarget(String),
    AddIpTarget(String),
}

/// A load balancer action: its name, and its path template (what metrics and logs name the
/// request by).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Action {
    pub name: &'static str,
    pub template: &'static str,
}

macro_rules! action {
    ($name:literal) => {
        Some(Action {
            name: $name,
            template: concat!("/load_balancers/{id}/actions/", $name),
        })
    };
}

impl Op {
    /// A target write: what [`follow_targets`](super::apply::follow_targets) can follow without
    /// a read.
    pub fn is_target(&self) -> bool {
        matches!(
            self,
            Op::AddTarget { .. } | Op::RemoveTarget(_) | Op::AddIpTarget(_) | Op::RemoveIpTarget(_)
        )
    }

    /// The action this op posts; `None`: a `PUT` of the load balancer itself.
    pub fn action(&self) -> Option<Action> {
        match self {
            Op::Update { .. } => None,
            Op::ChangeDnsPtr { .. } => action!("change_dns_ptr"),
            Op::ChangeAlgorithm(_) => action!("change_algorithm"),
            Op::ChangeType(_) => action!("change_type"),
            Op::DetachNetwork(_) => action!("detach_from_network"),
            Op::AttachNetwork { .. } => action!("attach_to_network"),
            Op::EnablePublicInterface => action!("enable_public_interface"),
            Op::DisablePublicInterface => action!("disable_public_interface"),
            Op::DeleteService(_) => action!("delete_service"),
            Op::UpdateService(_) => action!("update_service"),
            Op::AddService(_) => action!("add_service"),
            Op::RemoveTarget(_) | Op::RemoveIpTarget(_) => action!("remove_target"),
            Op::AddTarget { .. } | Op::AddIpTarget(_) => action!("add_target"),
        }
    }

    /// The request's body.
    pub fn body(&self) -> Value {
        match self {
            Op::Update { name, labels } => {
                let mut b = json!({});
                if let Some(n) = name {
                    b["name"] = json!(n);
                }
                if let Some(l) = labels {
                    b["labels"] = json!(l);
                }
                b
            }
            Op::ChangeDnsPtr { ip, dns_ptr } => json!({"ip": ip, "dns_ptr": dns_ptr}),
            Op::ChangeAlgorithm(t) => json!({"type": t.as_str()}),
            Op::ChangeType(t) => json!({"load_balancer_type": t}),
            Op::DetachNetwork(n) => json!({"network": n}),
            Op::AttachNetwork {
                network,
                ip,
                ip_range,
            } => {
                let mut b = json!({"network": network});
                if let Some(ip) = ip {
                    b["ip"] = json!(ip);
                }
                if let Some(r) = ip_range {
                    b["ip_range"] = json!(r);
                }
                b
            }
            Op::EnablePublicInterface | Op::DisablePublicInterface => json!({}),
            Op::DeleteService(p) => json!({"listen_port": p}),
            Op::UpdateService(s) | Op::AddService(s) => serde_json::to_value(s).unwrap_or_default(),
            Op::RemoveTarget(id) => json!({"type": "server", "server": {"id": id}}),
            Op::AddTarget {
                server,
                use_private_ip,
            } => {
                json!({"type": "server", "server": {"id": server}, "use_private_ip": use_private_ip})
            }
            Op::RemoveIpTarget(ip) | Op::AddIpTarget(ip) => json!({"type": "ip", "ip": {"ip": ip}}),
        }
    }

    /// The HTTP request for this op against load balancer `lb`.
    pub(crate) fn to_req(&self, lb: i64) -> Req {
        match self.action() {
            None => Req::put(
                "/load_balancers/{id}",
                format!("/load_balancers/{lb}"),
                self.body(),
            ),
            Some(action) => Req::post(
                action.template,
                format!("/load_balancers/{lb}/actions/{}", action.name),
                self.body(),
            ),
        }
    }
}

impl NewLb {
    /// Whether `lb` (the create's answer) shows every service and inline target asked for.
    pub(crate) fn shown_in(&self, lb: &crate::hcloud::wire::LoadBalancer) -> bool {
        let services = self
            .services
            .iter()
            .all(|s| lb.services.iter().any(|a| a.listen_port == s.listen_port));
        let targets = self.targets.iter().flatten().all(|id| {
            lb.targets
                .iter()
                .any(|t| t.server.as_ref().is_some_and(|s| s.id == *id))
        });
        services && targets
    }

    /// `POST /load_balancers` with everything inline.
    pub(crate) fn to_req(&self) -> Req {
        let mut body = json!({
            "name": self.name,
            "load_balancer_type": self.lb_type,
            "labels": self.labels,
            "services": self.services,
        });
        match &self.placement {
            Placement::Location(l) => body["location"] = json!(l),
            Placement::NetworkZone(z) => body["network_zone"] = json!(z),
        }
        if let Some(a) = self.algorithm {
            body["algorithm"] = json!({"type": a.as_str()});
        }
        if let Some(p) = self.public_interface {
            body["public_interface"] = json!(p);
        }
        if let Some(n) = self.network {
            body["network"] = json!(n);
        }
        if let Some(targets) = &self.targets {
            let inline: Vec<_> = targets
                .iter()
                .map(|id| json!({"type": "server", "server": {"id": id}, "use_private_ip": self.use_private_ip}))
                .collect();
            body["targets"] = json!(inline);
        }
        Req::post("/load_balancers", "/load_balancers", body)
    }
}
