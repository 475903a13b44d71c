//! Each planned write as the HTTP request that makes it.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::ownership::SERVICE_UID_LABEL;
use super::spec::{LbAlgorithm, Placement};
use crate::hcloud::transport::Req;
use crate::hcloud::wire::LbService;

/// What the create request carries. Whatever it cannot carry is left to the [`plan`](super::plan::plan)
/// against the created load balancer: a fixed private IP or subnet (the inline network takes neither),
/// private-IP targets while the network is not attached yet, targets beyond the type's limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewLb {
    pub name: String,
    pub uid: String,
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

impl Op {
    /// The action's name (`None`: a `PUT` of the load balancer itself) and the body.
    pub fn request(&self) -> (Option<&'static str>, Value) {
        match self {
            Op::Update { name, labels } => {
                let mut b = json!({});
                if let Some(n) = name {
                    b["name"] = json!(n);
                }
                if let Some(l) = labels {
                    b["labels"] = json!(l);
                }
                (None, b)
            }
            Op::ChangeDnsPtr { ip, dns_ptr } => (
                Some("change_dns_ptr"),
                json!({"ip": ip, "dns_ptr": dns_ptr}),
            ),
            Op::ChangeAlgorithm(t) => (Some("change_algorithm"), json!({"type": t.as_str()})),
            Op::ChangeType(t) => (Some("change_type"), json!({"load_balancer_type": t})),
            Op::DetachNetwork(n) => (Some("detach_from_network"), json!({"network": n})),
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
                (Some("attach_to_network"), b)
            }
            Op::EnablePublicInterface => (Some("enable_public_interface"), json!({})),
            Op::DisablePublicInterface => (Some("disable_public_interface"), json!({})),
            Op::DeleteService(p) => (Some("delete_service"), json!({"listen_port": p})),
            Op::UpdateService(s) => (
                Some("update_service"),
                serde_json::to_value(s).unwrap_or_default(),
            ),
            Op::AddService(s) => (
                Some("add_service"),
                serde_json::to_value(s).unwrap_or_default(),
            ),
            Op::RemoveTarget(id) => (
                Some("remove_target"),
                json!({"type": "server", "server": {"id": id}}),
            ),
            Op::AddTarget {
                server,
                use_private_ip,
            } => (
                Some("add_target"),
                json!({"type": "server", "server": {"id": server}, "use_private_ip": use_private_ip}),
            ),
            Op::RemoveIpTarget(ip) => (
                Some("remove_target"),
                json!({"type": "ip", "ip": {"ip": ip}}),
            ),
            Op::AddIpTarget(ip) => (Some("add_target"), json!({"type": "ip", "ip": {"ip": ip}})),
        }
    }

    /// The HTTP request for this op against load balancer `lb`.
    pub(crate) fn to_req(&self, lb: i64) -> Req {
        let (action, body) = self.request();
        match action {
            None => Req::put(
                "/load_balancers/{id}",
                format!("/load_balancers/{lb}"),
                body,
            ),
            Some(name) => Req::post(
                action_template(name),
                format!("/load_balancers/{lb}/actions/{name}"),
                body,
            ),
        }
    }
}

/// Metrics and logs name requests by path template, which must be `'static`.
fn action_template(name: &str) -> &'static str {
    match name {
        "add_target" => "/load_balancers/{id}/actions/add_target",
        "remove_target" => "/load_balancers/{id}/actions/remove_target",
        "add_service" => "/load_balancers/{id}/actions/add_service",
        "update_service" => "/load_balancers/{id}/actions/update_service",
        "delete_service" => "/load_balancers/{id}/actions/delete_service",
        "attach_to_network" => "/load_balancers/{id}/actions/attach_to_network",
        "detach_from_network" => "/load_balancers/{id}/actions/detach_from_network",
        "change_type" => "/load_balancers/{id}/actions/change_type",
        "change_algorithm" => "/load_balancers/{id}/actions/change_algorithm",
        "enable_public_interface" => "/load_balancers/{id}/actions/enable_public_interface",
        "disable_public_interface" => "/load_balancers/{id}/actions/disable_public_interface",
        "change_dns_ptr" => "/load_balancers/{id}/actions/change_dns_ptr",
        _ => "/load_balancers/{id}/actions/{action}",
    }
}

impl NewLb {
    /// `POST /load_balancers` with everything inline.
    pub(crate) fn to_req(&self) -> Req {
        let mut body = json!({
            "name": self.name,
            "load_balancer_type": self.lb_type,
            "labels": {SERVICE_UID_LABEL: self.uid},
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
