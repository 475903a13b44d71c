//! `status.loadBalancer` from a Hetzner load balancer, reported as HCCM reports it.

use super::spec::LbSpec;
use crate::capabilities::{
    EnsureOutcome, IpMode, LoadBalancerIngress, LoadBalancerStatus, Warning,
};
use crate::hcloud::wire::LoadBalancer;

/// Hostname annotation wins; else public v4 (+v6 unless disabled) when the public interface is
/// enabled, plus each private IP unless private ingress is disabled. ipMode is Proxy iff PROXY protocol
/// is on: as configured, or, when nothing configures it (we leave it as is), as the services have it.
pub fn status(lb: &LoadBalancer, spec: &LbSpec) -> LoadBalancerStatus {
    if let Some(h) = &spec.hostname {
        return LoadBalancerStatus {
            ingress: vec![LoadBalancerIngress {
                ip: None,
                hostname: Some(h.clone()),
                ip_mode: None,
            }],
        };
    }
    let proxied = spec
        .proxy_protocol
        .unwrap_or_else(|| lb.services.iter().any(|s| s.proxyprotocol == Some(true)));
    let mode = if proxied { IpMode::Proxy } else { IpMode::Vip };
    let ip = |ip: &str| LoadBalancerIngress {
        ip: Some(ip.to_string()),
        hostname: None,
        ip_mode: Some(mode),
    };
    let mut ingress = Vec::new();
    if let Some(p) = lb.public_net.as_ref().filter(|p| p.enabled) {
        if let Some(v4) = p
            .ipv4
            .as_ref()
            .and_then(|x| x.ip.as_deref())
            .filter(|x| !x.is_empty())
        {
            ingress.push(ip(v4));
        }
        if !spec.ipv6_disabled
            && let Some(v6) = p
                .ipv6
                .as_ref()
                .and_then(|x| x.ip.as_deref())
                .filter(|x| !x.is_empty())
        {
            ingress.push(ip(v6));
        }
    }
    if !spec.disable_private_ingress {
        for p in &lb.private_net {
            if let Some(v) = p.ip.as_deref().filter(|x| !x.is_empty()) {
                ingress.push(ip(v));
            }
        }
    }
    LoadBalancerStatus { ingress }
}

/// What an ensure reports: the status, its warnings once each, the writes and target health.
pub(super) fn outcome(
    lb: &LoadBalancer,
    spec: &LbSpec,
    mut warnings: Vec<Warning>,
    writes: u32,
) -> EnsureOutcome {
    dedup(&mut warnings);
    EnsureOutcome {
        status: status(lb, spec),
        warnings,
        writes,
        target_health: Some(super::health::target_health(lb)),
    }
}

/// Each warning once.
pub(super) fn dedup(w: &mut Vec<Warning>) {
    let mut seen = std::collections::HashSet::new();
    w.retain(|x| seen.insert((x.reason.clone(), x.message.clone(), x.node.clone())));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hcloud::wire::{LbIp, LbPrivateNet, LbPublicNet};

    fn lb(enabled: bool) -> LoadBalancer {
        LoadBalancer {
            id: 1,
            public_net: Some(LbPublicNet {
                enabled,
                ipv4: Some(LbIp {
                    ip: Some("100.64.1.1".into()),
                    dns_ptr: None,
                }),
                ipv6: Some(LbIp {
                    ip: Some("2001:db8::1".into()),
                    dns_ptr: None,
                }),
            }),
            private_net: vec![LbPrivateNet {
                network: 3,
                ip: Some("10.0.0.4".into()),
            }],
            ..Default::default()
        }
    }

    fn ips(s: &LoadBalancerStatus) -> Vec<String> {
        s.ingress
            .iter()
            .map(|i| format!("{}/{}", i.ip.clone().unwrap(), i.ip_mode.unwrap().as_str()))
            .collect()
    }

    #[test]
    fn status_rules() {
        let spec = LbSpec::default();
        assert_eq!(
            ips(&status(&lb(true), &spec)),
            ["100.64.1.1/VIP", "2001:db8::1/VIP", "10.0.0.4/VIP"]
        );
        let s = LbSpec {
            ipv6_disabled: true,
            disable_private_ingress: true,
            proxy_protocol: Some(true),
            ..Default::default()
        };
        assert_eq!(ips(&status(&lb(true), &s)), ["100.64.1.1/Proxy"]);
        assert_eq!(ips(&status(&lb(false), &spec)), ["10.0.0.4/VIP"]);
        let h = LbSpec {
            hostname: Some("lb.example.com".into()),
            ..Default::default()
        };
        let st = status(&lb(true), &h);
        assert_eq!(st.ingress.len(), 1);
        assert_eq!(st.ingress[0].hostname.as_deref(), Some("lb.example.com"));
        assert_eq!(st.ingress[0].ip_mode, None);
    }
}
