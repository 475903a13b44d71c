//! The API's JSON: request bodies (deserialized, every optional field an `Option`) and the
//! rendering of stored resources into the API's response shapes.

use std::collections::BTreeSet;

use serde::Deserialize;
use serde_json::{Value, json};

use crate::catalog;
use crate::clock::{now_ms, rfc3339};
use crate::label_selector::{Labels, Selector};
use crate::state::{
    Certificate, HealthKey, HealthSubject, LoadBalancer, Network, Server, State, Target, TargetKind,
};

// ---------------------------------------------------------------------------------------------
// Request bodies.

#[derive(Debug, Default, Deserialize)]
pub struct ServiceReq {
    pub protocol: Option<String>,
    pub listen_port: Option<u32>,
    pub destination_port: Option<u32>,
    pub proxyprotocol: Option<bool>,
    pub http: Option<ServiceHttpReq>,
    pub health_check: Option<HealthCheckReq>,
}

#[derive(Debug, Default, Deserialize)]
pub struct ServiceHttpReq {
    pub cookie_name: Option<String>,
    pub cookie_lifetime: Option<u64>,
    pub certificates: Option<Vec<u64>>,
    pub redirect_http: Option<bool>,
    pub sticky_sessions: Option<bool>,
    pub timeout_idle: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
pub struct HealthCheckReq {
    pub protocol: Option<String>,
    pub port: Option<u32>,
    pub interval: Option<u64>,
    pub timeout: Option<u64>,
    pub retries: Option<u64>,
    pub http: Option<HealthCheckHttpReq>,
}

#[derive(Debug, Default, Deserialize)]
pub struct HealthCheckHttpReq {
    pub domain: Option<String>,
    pub path: Option<String>,
    pub response: Option<String>,
    pub status_codes: Option<Vec<String>>,
    pub tls: Option<bool>,
}

#[derive(Debug, Deserialize)]
pub struct IdRef {
    pub id: u64,
}

#[derive(Debug, Deserialize)]
pub struct SelectorRef {
    pub selector: String,
}

#[derive(Debug, Deserialize)]
pub struct IpRef {
    pub ip: String,
}

#[derive(Debug, Deserialize)]
pub struct TargetReq {
    #[serde(rename = "type")]
    pub kind: String,
    pub server: Option<IdRef>,
    pub label_selector: Option<SelectorRef>,
    pub ip: Option<IpRef>,
    pub use_private_ip: Option<bool>,
}

#[derive(Debug, Deserialize)]
pub struct AlgorithmReq {
    #[serde(rename = "type")]
    pub kind: String,
}

#[derive(Debug, Deserialize)]
pub struct CreateLoadBalancerReq {
    pub name: String,
    pub load_balancer_type: Value,
    pub algorithm: Option<AlgorithmReq>,
    pub location: Option<Value>,
    pub network_zone: Option<String>,
    pub labels: Option<Labels>,
    pub targets: Option<Vec<TargetReq>>,
    pub services: Option<Vec<ServiceReq>>,
    pub public_interface: Option<bool>,
    pub network: Option<u64>,
}

#[derive(Debug, Deserialize)]
pub struct UpdateReq {
    pub name: Option<String>,
    pub labels: Option<Labels>,
}

#[derive(Debug, Deserialize)]
pub struct PublicNetReq {
    pub enable_ipv4: Option<bool>,
    pub enable_ipv6: Option<bool>,
}

#[derive(Debug, Deserialize)]
pub struct CreateServerReq {
    pub name: String,
    pub server_type: Value,
    pub image: Value,
    pub location: Option<Value>,
    pub labels: Option<Labels>,
    pub networks: Option<Vec<u64>>,
    pub public_net: Option<PublicNetReq>,
    pub start_after_create: Option<bool>,
}

#[derive(Debug, Deserialize)]
pub struct AttachReq {
    pub network: u64,
    pub ip: Option<String>,
    pub alias_ips: Option<Vec<String>>,
    pub ip_range: Option<String>,
}

#[derive(Debug, Deserialize)]
pub struct NetworkRef {
    pub network: u64,
}

#[derive(Debug, Deserialize)]
pub struct SubnetReq {
    #[serde(rename = "type")]
    pub kind: String,
    pub ip_range: Option<String>,
    pub network_zone: String,
    pub vswitch_id: Option<u64>,
}

#[derive(Debug, Deserialize)]
pub struct RouteReq {
    pub destination: String,
    pub gateway: String,
}

#[derive(Debug, Deserialize)]
pub struct CreateNetworkReq {
    pub name: String,
    pub ip_range: String,
    pub subnets: Option<Vec<SubnetReq>>,
    pub routes: Option<Vec<RouteReq>>,
    pub labels: Option<Labels>,
    pub expose_routes_to_vswitch: Option<bool>,
}

#[derive(Debug, Deserialize)]
pub struct DeleteSubnetReq {
    pub ip_range: String,
}

#[derive(Debug, Deserialize)]
pub struct CreateCertificateReq {
    pub name: String,
    #[serde(rename = "type")]
    pub kind: Option<String>,
    pub certificate: Option<String>,
    /// Redacted in `Debug`, like the stored one.
    pub private_key: Option<crate::state::PrivateKeyPem>,
    pub domain_names: Option<Vec<String>>,
    pub labels: Option<Labels>,
}

#[derive(Debug, Deserialize)]
pub struct ProtectionReq {
    pub delete: Option<bool>,
    pub rebuild: Option<bool>,
}

#[derive(Debug, Deserialize)]
pub struct ChangeTypeReq {
    pub load_balancer_type: Value,
}

#[derive(Debug, Deserialize)]
pub struct DnsPtrReq {
    pub ip: String,
    pub dns_ptr: Option<String>,
}

#[derive(Debug, Deserialize)]
pub struct ListenPortReq {
    pub listen_port: u32,
}

// ---------------------------------------------------------------------------------------------
// Rendering.

const INCLUDED_TRAFFIC: u64 = 21_990_232_555_520;

pub fn server(st: &State, s: &Server) -> Value {
    let st_type = catalog::server_type(s.server_type);
    let load_balancers: Vec<u64> = st
        .load_balancers
        .values()
        .filter(|lb| {
            lb.targets
                .iter()
                .any(|t| t.kind == TargetKind::Server(s.id))
        })
        .map(|lb| lb.id)
        .collect();
    json!({
        "id": s.id,
        "name": s.name,
        "status": s.status,
        "created": rfc3339(s.created_ms),
        "public_net": {
            "ipv4": s.ipv4.as_ref().map(|v4| json!({
                "id": v4.id, "ip": v4.ip.to_string(), "blocked": false, "dns_ptr": v4.dns_ptr,
            })),
            "ipv6": s.ipv6.as_ref().map(|v6| json!({
                "id": v6.id, "ip": format!("{}/64", v6.network), "blocked": false, "dns_ptr": [],
            })),
            "floating_ips": [],
            "firewalls": [],
        },
        "private_net": s.private_net.iter().map(|p| json!({
            "network": p.network,
            "ip": p.ip.to_string(),
            "alias_ips": p.alias_ips.iter().map(|a| a.to_string()).collect::<Vec<_>>(),
            "mac_address": p.mac_address,
        })).collect::<Vec<_>>(),
        "server_type": st_type.json(),
        "location": catalog::location(s.location).json(),
        "image": catalog::image(s.image).json(),
        "iso": null,
        "rescue_enabled": false,
        "locked": st.ensure_unlocked("server", s.id).is_err(),
        "backup_window": null,
        "outgoing_traffic": 0,
        "ingoing_traffic": 0,
        "included_traffic": INCLUDED_TRAFFIC,
        "protection": {"delete": s.protection_delete, "rebuild": s.protection_rebuild},
        "labels": s.labels,
        "volumes": [],
        "load_balancers": load_balancers,
        "primary_disk_size": st_type.disk,
        "placement_group": null,
    })
}

/// `health_status` of one resolved target (`subject`; `server` is its server, if any). With the
/// data plane on, what its health checks measured per service (`unknown` until decided);
/// without it, `unknown` until the target has been in the LB for one action duration, then
/// `healthy` while its server runs. Either way what the CCM sees in `health_status`.
fn health(
    st: &State,
    lb: &LoadBalancer,
    subject: HealthSubject,
    server: Option<u64>,
    added_ms: u64,
) -> Value {
    if let Some(table) = &st.target_health {
        return Value::Array(
            lb.services
                .iter()
                .map(|svc| {
                    let key = HealthKey {
                        lb: lb.id,
                        listen_port: svc.listen_port,
                        subject: subject.clone(),
                    };
                    json!({"listen_port": svc.listen_port, "status": table.status(&key).as_str()})
                })
                .collect(),
        );
    }
    let settled = now_ms() >= added_ms + st.action_ms.max(1);
    let status = match server {
        _ if !settled => "unknown",
        Some(id) => match st.servers.get(&id) {
            Some(s) if s.status == "running" => "healthy",
            _ => "unhealthy",
        },
        None => "healthy",
    };
    Value::Array(
        lb.services
            .iter()
            .map(|svc| json!({"listen_port": svc.listen_port, "status": status}))
            .collect(),
    )
}

pub fn load_balancer(st: &State, lb: &LoadBalancer) -> Value {
    let location = catalog::location(lb.location);
    let server_subject = |id: u64, t: &Target| HealthSubject::Server {
        id,
        private: t.use_private_ip,
    };
    let targets: Vec<Value> = lb
        .targets
        .iter()
        .map(|t| match &t.kind {
            TargetKind::Server(id) => json!({
                "type": "server", "server": {"id": id}, "use_private_ip": t.use_private_ip,
                "health_status": health(st, lb, server_subject(*id, t), Some(*id), t.added_ms),
            }),
            TargetKind::LabelSelector(sel) => {
                let matched: Vec<Value> = Selector::parse(sel)
                    .map(|selector| {
                        st.selected_servers(lb, &selector)
                            .map(|s| {
                                json!({
                                    "type": "server", "server": {"id": s.id},
                                    "use_private_ip": t.use_private_ip,
                                    "health_status": health(
                                        st, lb, server_subject(s.id, t), Some(s.id), t.added_ms,
                                    ),
                                })
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                json!({
                    "type": "label_selector", "label_selector": {"selector": sel},
                    "use_private_ip": t.use_private_ip, "targets": matched,
                })
            }
            TargetKind::Ip(ip) => json!({
                "type": "ip", "ip": {"ip": ip},
                "health_status": health(st, lb, HealthSubject::Ip(ip.clone()), None, t.added_ms),
            }),
        })
        .collect();
    json!({
        "id": lb.id,
        "name": lb.name,
        "public_net": {
            "enabled": lb.public_enabled,
            "ipv4": {"ip": lb.ipv4.to_string(), "dns_ptr": lb.ipv4_dns_ptr},
            "ipv6": {"ip": lb.ipv6.to_string(), "dns_ptr": lb.ipv6_dns_ptr},
        },
        "private_net": lb.private_net.iter().map(|p| json!({"network": p.network, "ip": p.ip.to_string()})).collect::<Vec<_>>(),
        "location": location.json(),
        "load_balancer_type": catalog::lb_type(lb.lb_type).json(),
        "protection": {"delete": lb.protection_delete},
        "labels": lb.labels,
        "targets": targets,
        "services": lb.services,
        "algorithm": {"type": lb.algorithm},
        "outgoing_traffic": 0,
        "ingoing_traffic": 0,
        "included_traffic": INCLUDED_TRAFFIC,
        "created": rfc3339(lb.created_ms),
    })
}

pub fn network(st: &State, n: &Network) -> Value {
    let servers: BTreeSet<u64> = st
        .servers
        .values()
        .filter(|s| s.private_net.iter().any(|p| p.network == n.id))
        .map(|s| s.id)
        .collect();
    let load_balancers: BTreeSet<u64> = st
        .load_balancers
        .values()
        .filter(|lb| lb.private_net.iter().any(|p| p.network == n.id))
        .map(|lb| lb.id)
        .collect();
    json!({
        "id": n.id,
        "name": n.name,
        "ip_range": n.ip_range.to_string(),
        "subnets": n.subnets.iter().map(|s| {
            let mut v = json!({
                "type": s.kind, "ip_range": s.ip_range.to_string(),
                "network_zone": s.network_zone, "gateway": s.gateway.to_string(),
            });
            if let Some(vs) = s.vswitch_id {
                v["vswitch_id"] = json!(vs);
            }
            v
        }).collect::<Vec<_>>(),
        "routes": n.routes.iter().map(|r| json!({
            "destination": r.destination.to_string(), "gateway": r.gateway.to_string(),
        })).collect::<Vec<_>>(),
        "servers": servers,
        "load_balancers": load_balancers,
        "protection": {"delete": n.protection_delete},
        "labels": n.labels,
        "created": rfc3339(n.created_ms),
        "expose_routes_to_vswitch": n.expose_routes_to_vswitch,
    })
}

pub fn certificate(st: &State, c: &Certificate) -> Value {
    let used_by: Vec<Value> = st
        .load_balancers
        .values()
        .filter(|lb| {
            lb.services.iter().any(|s| {
                s.http
                    .as_ref()
                    .is_some_and(|h| h.certificates.contains(&c.id))
            })
        })
        .map(|lb| json!({"id": lb.id, "type": "load_balancer"}))
        .collect();
    let status = c.issuance.as_ref().map(|issuance| {
        json!({
            "issuance": issuance,
            "renewal": if issuance == "completed" { "scheduled" } else { "unavailable" },
            "error": c.error.as_ref().map(|(code, message)| json!({"code": code, "message": message})),
        })
    });
    json!({
        "id": c.id,
        "name": c.name,
        "labels": c.labels,
        "type": c.kind,
        "certificate": c.certificate,
        "created": rfc3339(c.created_ms),
        "not_valid_before": c.not_valid_before_ms.map(rfc3339),
        "not_valid_after": c.not_valid_after_ms.map(rfc3339),
        "domain_names": c.domain_names,
        "fingerprint": c.fingerprint,
        "status": status,
        "used_by": used_by,
    })
}
