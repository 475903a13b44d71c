//! What the controller reads from and writes to a Service: whether it wants a load balancer, the
//! cleanup finalizer, the provider's view of it, and `status.loadBalancer`.

use std::hash::{Hash, Hasher};

use cloud_client::{
    IpFamilies, IpMode, LoadBalancerStatus, PortProtocol, ServiceNames, ServicePort, ServiceRef,
    TrafficPolicy, default_load_balancer_name,
};
use k8s_openapi::api::core::v1::{LoadBalancerIngress, Service};
use kube::ResourceExt;
use kube::runtime::reflector::Store;

use crate::patches::FINALIZER;

/// Which `spec.loadBalancerClass` values this controller serves.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClassFilter {
    /// An opt-in class of our own, served next to "no class" (upstream only serves "no class").
    pub own_class: Option<String>,
}

impl ClassFilter {
    /// Whether a Service of `class` is ours to serve.
    pub fn serves(&self, class: Option<&str>) -> bool {
        match class {
            None => true,
            Some(c) => self.own_class.as_deref() == Some(c),
        }
    }
}

fn is_type_lb(svc: &Service) -> bool {
    svc.spec.as_ref().and_then(|s| s.type_.as_deref()) == Some("LoadBalancer")
}

fn class(svc: &Service) -> Option<&str> {
    svc.spec
        .as_ref()
        .and_then(|s| s.load_balancer_class.as_deref())
}

/// `type: LoadBalancer` with a class we serve.
pub fn wants_load_balancer(svc: &Service, classes: &ClassFilter) -> bool {
    is_type_lb(svc) && classes.serves(class(svc))
}

/// Carries our finalizer.
pub fn has_finalizer(svc: &Service) -> bool {
    svc.finalizers().iter().any(|f| f == FINALIZER)
}

/// Our finalizer is on it and it no longer wants a load balancer (deleted, or type changed).
pub fn needs_cleanup(svc: &Service, classes: &ClassFilter) -> bool {
    has_finalizer(svc)
        && (svc.metadata.deletion_timestamp.is_some() || !wants_load_balancer(svc, classes))
}

/// `namespace/name`.
pub fn key(svc: &Service) -> String {
    format!("{}/{}", svc.namespace().unwrap_or_default(), svc.name_any())
}

/// The Service as the load-balancer provider sees it.
pub fn service_ref(svc: &Service) -> ServiceRef {
    let ports = svc
        .spec
        .as_ref()
        .and_then(|s| s.ports.as_ref())
        .map(|ports| {
            ports
                .iter()
                .map(|p| ServicePort {
                    name: p.name.clone(),
                    protocol: PortProtocol::parse(p.protocol.as_deref().unwrap_or("")),
                    port: u16::try_from(p.port).unwrap_or(0),
                    node_port: p.node_port.and_then(|n| u16::try_from(n).ok()).unwrap_or(0),
                })
                .collect()
        })
        .unwrap_or_default();
    ServiceRef {
        uid: svc.uid().unwrap_or_default(),
        namespace: svc.namespace().unwrap_or_default(),
        name: svc.name_any(),
        annotations: svc.annotations().clone(),
        ports,
        traffic_policy: traffic_policy(svc),
        names: ServiceNames::default(),
        kube_proxy_unreachable: false,
        read_once: Default::default(),
        ip_families: IpFamilies::from_names(
            svc.spec
                .as_ref()
                .and_then(|s| s.ip_families.as_ref())
                .into_iter()
                .flatten()
                .map(String::as_str),
        ),
        ingress_ips: svc
            .status
            .as_ref()
            .and_then(|s| s.load_balancer.as_ref())
            .and_then(|lb| lb.ingress.as_ref())
            .into_iter()
            .flatten()
            .filter_map(|i| i.ip.clone())
            .collect(),
        load_balancer_ip: svc
            .spec
            .as_ref()
            .and_then(|s| s.load_balancer_ip.clone())
            .filter(|ip| !ip.trim().is_empty()),
        source_ranges: crate::source_ranges::given(svc),
        session_affinity_client_ip: svc
            .spec
            .as_ref()
            .and_then(|s| s.session_affinity.as_deref())
            == Some("ClientIP"),
        recorder: Default::default(),
        tls_secrets: Default::default(),
    }
}

/// Other Services' names by UID or by the load-balancer name made of it, from the Service cache
/// (looked up only for a conflict or tenancy decision).
pub fn names(store: Store<Service>) -> ServiceNames {
    ServiceNames::new(move |id| {
        store
            .state()
            .iter()
            .find(|s| {
                s.metadata
                    .uid
                    .as_deref()
                    .is_some_and(|uid| uid == id || default_load_balancer_name(uid) == id)
            })
            .map(|s| key(s))
    })
}

/// `Local` only when set so (the apiserver's default is `Cluster`).
fn traffic_policy(svc: &Service) -> TrafficPolicy {
    let Some(spec) = &svc.spec else {
        return TrafficPolicy::Cluster;
    };
    if spec.external_traffic_policy.as_deref() == Some("Local") {
        TrafficPolicy::Local {
            health_check_node_port: spec
                .health_check_node_port
                .and_then(|p| u16::try_from(p).ok()),
        }
    } else {
        TrafficPolicy::Cluster
    }
}

/// Hash of everything that makes a load balancer differ (upstream's `needsUpdate` list): identity,
/// ports, annotations, and the spec fields a provider may read. Status, labels, finalizers and the
/// annotations the provider records (`recorded`, see
/// [`LoadBalancers::recorded_annotations`](cloud_client::LoadBalancers)) are not in it, so our own
/// writes never look like a change.
pub fn spec_hash(svc: &Service, recorded: &[&str]) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    svc.uid().hash(&mut h);
    for (k, v) in svc.annotations() {
        if !recorded.contains(&k.as_str()) {
            (k, v).hash(&mut h);
        }
    }
    if let Some(s) = &svc.spec {
        s.type_.hash(&mut h);
        s.load_balancer_class.hash(&mut h);
        s.load_balancer_ip.hash(&mut h);
        s.load_balancer_source_ranges.hash(&mut h);
        s.external_ips.hash(&mut h);
        s.external_traffic_policy.hash(&mut h);
        s.health_check_node_port.hash(&mut h);
        s.session_affinity.hash(&mut h);
        s.ip_families.as_ref().map(Vec::len).hash(&mut h);
        for p in s.ports.iter().flatten() {
            (&p.name, &p.protocol, p.port, p.node_port, &p.app_protocol).hash(&mut h);
            serde_json::to_string(&p.target_port)
                .unwrap_or_default()
                .hash(&mut h);
        }
    }
    h.finish()
}

/// What triggers a reconcile: the spec hash plus finalizers and deletion (status excluded, so the
/// controller's own status writes are filtered out before they reach the queue).
pub fn trigger_hash(svc: &Service, recorded: &[&str]) -> Option<u64> {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    spec_hash(svc, recorded).hash(&mut h);
    svc.finalizers().hash(&mut h);
    svc.metadata.deletion_timestamp.is_some().hash(&mut h);
    Some(h.finish())
}

/// The provider's status as Kubernetes ingress entries. `ipMode` defaults to VIP for IP entries, as
/// the apiserver does, so an unchanged status compares equal and is never re-written.
pub fn ingress(status: &LoadBalancerStatus) -> Vec<LoadBalancerIngress> {
    status
        .ingress
        .iter()
        .map(|i| LoadBalancerIngress {
            ip: i.ip.clone(),
            hostname: i.hostname.clone(),
            ip_mode: i
                .ip
                .as_ref()
                .map(|_| i.ip_mode.unwrap_or(IpMode::Vip).as_str().to_string()),
            ..Default::default()
        })
        .collect()
}

/// The Service's current ingress, normalised the same way.
pub fn current_ingress(svc: &Service) -> Vec<LoadBalancerIngress> {
    svc.status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref())
        .and_then(|lb| lb.ingress.clone())
        .unwrap_or_default()
        .into_iter()
        .map(|mut i| {
            if i.ip.is_some() && i.ip_mode.is_none() {
                i.ip_mode = Some(IpMode::Vip.as_str().to_string());
            }
            i
        })
        .collect()
}

/// Strips what the controller never reads, to keep the Service cache small; of the conditions,
/// only its own stays.
pub fn slim(svc: &mut Service) {
    svc.metadata.managed_fields = None;
    if let Some(spec) = svc.spec.as_mut() {
        spec.selector = None;
        spec.cluster_ips = None;
    }
    if let Some(status) = svc.status.as_mut() {
        status.conditions = status
            .conditions
            .take()
            .map(|c| {
                c.into_iter()
                    .filter(|c| c.type_ == crate::condition::TYPE)
                    .collect::<Vec<_>>()
            })
            .filter(|c| !c.is_empty());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cloud_client::LoadBalancerIngress as CloudIngress;
    use k8s_openapi::api::core::v1::{ServicePort as KPort, ServiceSpec};

    fn svc(type_: &str, class: Option<&str>) -> Service {
        let mut s = Service::default();
        s.metadata.name = Some("web".into());
        s.metadata.namespace = Some("ns".into());
        s.metadata.uid = Some("u-1".into());
        s.spec = Some(ServiceSpec {
            type_: Some(type_.into()),
            load_balancer_class: class.map(str::to_string),
            ports: Some(vec![KPort {
                port: 80,
                node_port: Some(30080),
                protocol: Some("TCP".into()),
                ..Default::default()
            }]),
            ..Default::default()
        });
        s
    }

    #[test]
    fn classes_and_types() {
        let ours = ClassFilter {
            own_class: Some("cloud-controllers.io/hcloud".into()),
        };
        let upstream = ClassFilter::default();
        assert!(wants_load_balancer(&svc("LoadBalancer", None), &upstream));
        assert!(!wants_load_balancer(&svc("NodePort", None), &upstream));
        let other = svc("LoadBalancer", Some("metallb"));
        assert!(!wants_load_balancer(&other, &upstream) && !wants_load_balancer(&other, &ours));
        let own = svc("LoadBalancer", Some("cloud-controllers.io/hcloud"));
        assert!(!wants_load_balancer(&own, &upstream) && wants_load_balancer(&own, &ours));
    }

    #[test]
    fn cleanup_needs_our_finalizer_and_a_reason() {
        let c = ClassFilter::default();
        let mut s = svc("LoadBalancer", None);
        assert!(!needs_cleanup(&s, &c));
        s.metadata.finalizers = Some(vec![FINALIZER.into()]);
        assert!(!needs_cleanup(&s, &c));
        s.spec.as_mut().unwrap().type_ = Some("ClusterIP".into());
        assert!(needs_cleanup(&s, &c));
        let mut d = svc("LoadBalancer", None);
        d.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            k8s_openapi::jiff::Timestamp::now(),
        ));
        assert!(!needs_cleanup(&d, &c), "no finalizer: not ours to clean");
        d.metadata.finalizers = Some(vec!["other".into(), FINALIZER.into()]);
        assert!(needs_cleanup(&d, &c));
    }

    #[test]
    fn own_writes_do_not_change_the_hashes() {
        let a = svc("LoadBalancer", None);
        let mut b = a.clone();
        b.metadata.labels = Some([("x".to_string(), "y".to_string())].into());
        b.status = Some(Default::default());
        assert_eq!(spec_hash(&a, &[]), spec_hash(&b, &[]));
        assert_eq!(trigger_hash(&a, &[]), trigger_hash(&b, &[]));
        b.metadata.finalizers = Some(vec![FINALIZER.into()]);
        assert_eq!(spec_hash(&a, &[]), spec_hash(&b, &[]));
        assert_ne!(trigger_hash(&a, &[]), trigger_hash(&b, &[]));
        let mut c = a.clone();
        c.metadata.annotations = Some(
            [(
                "load-balancer.hetzner.cloud/type".to_string(),
                "lb21".to_string(),
            )]
            .into(),
        );
        assert_ne!(spec_hash(&a, &[]), spec_hash(&c, &[]));
        let mut d = a.clone();
        d.spec.as_mut().unwrap().ports.as_mut().unwrap()[0].node_port = Some(30081);
        assert_ne!(spec_hash(&a, &[]), spec_hash(&d, &[]));
    }

    #[test]
    fn ingress_defaults_ip_mode_to_vip_on_both_sides() {
        let status = LoadBalancerStatus {
            ingress: vec![
                CloudIngress {
                    ip: Some("1.2.3.4".into()),
                    hostname: None,
                    ip_mode: None,
                },
                CloudIngress {
                    ip: None,
                    hostname: Some("lb.example.com".into()),
                    ip_mode: None,
                },
            ],
        };
        let want = ingress(&status);
        assert_eq!(want[0].ip_mode.as_deref(), Some("VIP"));
        assert_eq!(want[1].ip_mode, None);
        let mut s = svc("LoadBalancer", None);
        s.status = Some(k8s_openapi::api::core::v1::ServiceStatus {
            load_balancer: Some(k8s_openapi::api::core::v1::LoadBalancerStatus {
                ingress: Some(vec![
                    LoadBalancerIngress {
                        ip: Some("1.2.3.4".into()),
                        ..Default::default()
                    },
                    LoadBalancerIngress {
                        hostname: Some("lb.example.com".into()),
                        ..Default::default()
                    },
                ]),
            }),
            ..Default::default()
        });
        assert_eq!(current_ingress(&s), want);
    }

    #[test]
    fn provider_view_of_ports() {
        let mut s = svc("LoadBalancer", None);
        s.spec
            .as_mut()
            .unwrap()
            .ports
            .as_mut()
            .unwrap()
            .push(KPort {
                port: 53,
                protocol: Some("UDP".into()),
                ..Default::default()
            });
        let r = service_ref(&s);
        assert_eq!(r.key(), "ns/web");
        assert_eq!(r.ports[0].node_port, 30080);
        assert_eq!(r.ports[1].protocol, PortProtocol::Udp);
        assert_eq!(r.ports[1].node_port, 0);
    }
}
