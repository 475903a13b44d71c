//! The rules of a shared load balancer (annotation `shared`), as pure functions: what a Service
//! owns on it, whether it may join or change it, and the labels that record its ownership.
//! Everything here is decided before the first write, so a refused Service writes nothing.
//!
//! - Each Service owns the listen ports in its member label; it adds, changes and deletes only
//!   those. A port nobody's label claims was made by hand or by another tool and is left alone.
//! - One target set: every member must select the same nodes (node selector, private IPs).
//! - Type, location, algorithm and network settings belong to the load balancer: a member's
//!   annotation that disagrees with it is a conflict unless that member is alone on it.

use std::collections::{BTreeMap, BTreeSet};

use super::annotations as a;
use super::ownership::{
    MEMBER_LABEL_PREFIX, Owners, SERVICE_UID_LABEL, SHARED_TARGETS_LABEL, member_label, ports_value,
};
use super::plan::{DesiredServices, Membership, known_max_services};
use super::spec::{LbSpec, Source};
use crate::capabilities::ServiceRef;
use crate::error::CloudError;
use crate::hcloud::wire::LoadBalancer;

/// The ports `uid` owns on `lb`: its member label's, or every port of a load balancer that is
/// still its own alone (HCCM's label), which it made before it opted into sharing.
pub fn claimed(lb: &LoadBalancer, uid: &str) -> BTreeSet<u16> {
    let owners = Owners::of(&lb.labels);
    if let Some(ports) = owners.members.get(uid) {
        return ports.clone();
    }
    if owners.single.as_deref() == Some(uid) {
        return lb.services.iter().map(|s| s.listen_port).collect();
    }
    BTreeSet::new()
}

/// Labels of a new shared load balancer made by `svc`.
pub fn new_labels(
    svc: &ServiceRef,
    spec: &LbSpec,
    desired: &DesiredServices,
) -> Result<BTreeMap<String, String>, CloudError> {
    let ports = listen_ports(desired);
    Ok(BTreeMap::from([
        (member_label(&svc.uid), label_value(&ports)?),
        (
            SHARED_TARGETS_LABEL.to_string(),
            spec.target_selection.clone(),
        ),
    ]))
}

/// Checks that `svc` may be on `lb` with `desired`, and returns its membership. Every refusal
/// is a [`CloudError::Conflict`] naming the Service it conflicts with.
pub fn join(
    lb: &LoadBalancer,
    svc: &ServiceRef,
    spec: &LbSpec,
    desired: &DesiredServices,
) -> Result<Membership, CloudError> {
    let owners = Owners::of(&lb.labels);
    let uid = svc.uid.as_str();
    let lb_name = format!("load balancer {} ({})", lb.name, lb.id);
    if let Some(single) = owners.single.as_deref().filter(|s| *s != uid) {
        return Err(conflict(format!(
            "{lb_name} belongs to {} alone (label {SERVICE_UID_LABEL}), which does not share it; \
             set {}: \"true\" on that Service first, or choose another name",
            svc.names.describe(single),
            a::SHARED
        )));
    }
    let others: Vec<&str> = owners.others(uid).collect();
    let alone = others.is_empty();
    let with = || {
        others
            .iter()
            .map(|o| svc.names.describe(o))
            .collect::<Vec<_>>()
            .join(", ")
    };
    if !alone && owners.targets.as_deref() != Some(spec.target_selection.as_str()) {
        return Err(conflict(format!(
            "{lb_name} is shared with {}, and this Service selects its targets differently \
             (annotations {}, {} and {}): a load balancer has one target set, so every Service \
             on it must select the same nodes",
            with(),
            a::NODE_SELECTOR,
            a::USE_PRIVATE_IP,
            a::ROBOT_TARGET_ADDRESS_FAMILY
        )));
    }
    if !alone && let Some(clash) = setting_clash(lb, spec) {
        return Err(conflict(format!(
            "{lb_name} is shared with {}, and {clash}. Its type, location, algorithm and network \
             settings are the same for every Service on it: change the load balancer itself \
             (e.g. with the hcloud CLI), then the annotations",
            with()
        )));
    }
    let claimed = claimed(lb, uid);
    let wanted = listen_ports(desired);
    for port in &wanted {
        if claimed.contains(port) || !lb.services.iter().any(|s| s.listen_port == *port) {
            continue;
        }
        return Err(conflict(match owners.owner_of(*port) {
            Some(owner) => format!(
                "listen port {port} of {lb_name} belongs to {}",
                svc.names.describe(owner)
            ),
            None => format!(
                "listen port {port} of {lb_name} was not made by a Service (by hand or by another \
                 tool) and is left as it is; choose another port"
            ),
        }));
    }
    check_capacity(lb, svc, &owners, &claimed, &wanted, &lb_name)?;
    let mut during = lb.labels.clone();
    if owners.single.as_deref() == Some(uid) {
        during.remove(SERVICE_UID_LABEL);
    }
    if alone {
        during.insert(
            SHARED_TARGETS_LABEL.to_string(),
            spec.target_selection.clone(),
        );
    }
    let mut after = during.clone();
    during.insert(member_label(uid), label_value(&(&claimed | &wanted))?);
    after.insert(member_label(uid), label_value(&wanted)?);
    Ok(Membership {
        claimed,
        alone,
        labels_during: during,
        labels_after: after,
    })
}

/// The labels once `uid` has left `lb`: its member label gone, and with the last member the
/// shared-targets label too.
pub fn labels_without(lb: &LoadBalancer, uid: &str) -> BTreeMap<String, String> {
    let mut labels = lb.labels.clone();
    labels.remove(&member_label(uid));
    if labels.get(SERVICE_UID_LABEL).map(String::as_str) == Some(uid) {
        labels.remove(SERVICE_UID_LABEL);
    }
    if !labels.keys().any(|k| k.starts_with(MEMBER_LABEL_PREFIX)) {
        labels.remove(SHARED_TARGETS_LABEL);
    }
    labels
}

fn listen_ports(desired: &DesiredServices) -> BTreeSet<u16> {
    desired.services.iter().map(|s| s.listen_port).collect()
}

fn label_value(ports: &BTreeSet<u16>) -> Result<String, CloudError> {
    ports_value(ports).ok_or_else(|| {
        CloudError::invalid_input(
            "Service ports",
            format!("{} ports", ports.len()),
            "at most 10 ports on a shared load balancer: each Service's ports are recorded in a \
             label value of 63 characters",
        )
    })
}

fn conflict(message: String) -> CloudError {
    CloudError::Conflict { message }
}

/// The first load-balancer setting this Service's own annotations set differently from `lb`.
/// Env defaults are the same for every Service and are not compared.
fn setting_clash(lb: &LoadBalancer, spec: &LbSpec) -> Option<String> {
    let by_annotation = |key: &str| spec.source(key) == Source::Annotation;
    let differs = |key: &str, want: Option<&str>, have: Option<&str>| {
        let want = want.filter(|_| by_annotation(key))?;
        (have != Some(want)).then(|| {
            format!(
                "it has {} {}, where annotation {key} asks for {want}",
                key.trim_start_matches(a::PREFIX),
                have.unwrap_or("none")
            )
        })
    };
    let location = lb.location.as_ref();
    let private_ip = spec.private_ipv4.map(|ip| ip.to_string());
    let public = spec.disable_public_network.map(|d| (!d).to_string());
    differs(
        a::TYPE,
        spec.lb_type.as_deref(),
        lb.load_balancer_type.as_ref().map(|t| t.name.as_str()),
    )
    .or_else(|| {
        differs(
            a::LOCATION,
            spec.location.as_deref(),
            location.map(|l| l.name.as_str()),
        )
    })
    .or_else(|| {
        differs(
            a::NETWORK_ZONE,
            spec.network_zone.as_deref(),
            location.and_then(|l| l.network_zone.as_deref()),
        )
    })
    .or_else(|| {
        differs(
            a::ALGORITHM_TYPE,
            spec.algorithm.map(|a| a.as_str()),
            lb.algorithm.as_ref().map(|a| a.kind.as_str()),
        )
    })
    .or_else(|| {
        differs(
            a::PRIVATE_IPV4,
            private_ip.as_deref(),
            lb.private_net.first().and_then(|p| p.ip.as_deref()),
        )
    })
    .or_else(|| {
        let enabled = lb.public_net.as_ref().map(|p| p.enabled.to_string());
        differs(
            a::DISABLE_PUBLIC_NETWORK,
            public.as_deref(),
            enabled.as_deref(),
        )
        .map(|_| {
            format!(
                "annotation {} disagrees with its public interface",
                a::DISABLE_PUBLIC_NETWORK
            )
        })
    })
}

/// The type's service limit, counting every port on the load balancer that stays.
fn check_capacity(
    lb: &LoadBalancer,
    svc: &ServiceRef,
    owners: &Owners,
    claimed: &BTreeSet<u16>,
    wanted: &BTreeSet<u16>,
    lb_name: &str,
) -> Result<(), CloudError> {
    let staying: Vec<u16> = lb
        .services
        .iter()
        .map(|s| s.listen_port)
        .filter(|p| !claimed.contains(p))
        .collect();
    let lb_type = lb.load_balancer_type.as_ref();
    let type_name = lb_type.map_or("lb11", |t| t.name.as_str());
    let max = lb_type
        .and_then(|t| t.max_services)
        .unwrap_or_else(|| known_max_services(type_name));
    if staying.len() + wanted.len() <= max as usize {
        return Ok(());
    }
    let mut by_owner: BTreeMap<String, Vec<u16>> = BTreeMap::new();
    for p in &staying {
        let who = owners.owner_of(*p).map_or_else(
            || "not made by a Service".to_string(),
            |o| svc.names.describe(o),
        );
        by_owner.entry(who).or_default().push(*p);
    }
    let holders = by_owner
        .iter()
        .map(|(who, ports)| {
            let ports: Vec<String> = ports.iter().map(u16::to_string).collect();
            format!("{who}: {}", ports.join(", "))
        })
        .collect::<Vec<_>>()
        .join("; ");
    Err(conflict(format!(
        "{lb_name} is type {type_name}, which holds at most {max} services; {} are taken ({holders}) \
         and this Service needs {}. Choose a larger type for every Service on it, or another \
         load balancer",
        staying.len(),
        wanted.len()
    )))
}

/// A Service that does not share is refused a load balancer other Services share (found by its
/// `name` annotation): taking it over would delete their ports.
pub(super) fn refuse_if_shared(lb: &LoadBalancer, svc: &ServiceRef) -> Result<(), CloudError> {
    let owners = Owners::of(&lb.labels);
    if !owners.is_shared() {
        return Ok(());
    }
    if owners.members.contains_key(&svc.uid) {
        return Err(CloudError::Conflict {
            message: format!(
                "this Service has ports on shared load balancer {} ({}) but no longer sets \
                 annotation {}: \"true\"; set it again, or remove {} to get a load balancer of \
                 its own (its ports on {} go when the Service is deleted)",
                lb.name,
                lb.id,
                a::SHARED,
                a::NAME,
                lb.name
            ),
        });
    }
    let members: Vec<String> = owners
        .members
        .keys()
        .map(|uid| svc.names.describe(uid))
        .collect();
    Err(CloudError::Conflict {
        message: format!(
            "load balancer {} ({}) is shared by {}; set annotation {}: \"true\" to share it \
             too, or choose another name",
            lb.name,
            lb.id,
            members.join(", "),
            a::SHARED
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capabilities::{PortProtocol, ServiceNames, ServicePort};
    use crate::hcloud::config::LbDefaults;
    use crate::hcloud::wire::{LbService, LbType};

    fn svc(uid: &str, ann: &[(&str, &str)], ports: &[u16]) -> ServiceRef {
        let mut annotations: BTreeMap<String, String> = ann
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        annotations.insert(a::NAME.into(), "shared-web".into());
        annotations.insert(a::SHARED.into(), "true".into());
        ServiceRef {
            uid: uid.into(),
            namespace: "ns".into(),
            name: format!("svc-{uid}"),
            annotations,
            ports: ports
                .iter()
                .map(|p| ServicePort {
                    name: None,
                    protocol: PortProtocol::Tcp,
                    port: *p,
                    node_port: 30_000 + *p % 1000,
                })
                .collect(),
            names: ServiceNames::new(|uid| Some(format!("ns/svc-{uid}"))),
            ..Default::default()
        }
    }

    fn spec(s: &ServiceRef) -> LbSpec {
        let defaults = LbDefaults {
            location: Some("fsn1".into()),
            ..Default::default()
        };
        LbSpec::parse(s, &defaults).unwrap()
    }

    fn desired(s: &ServiceRef) -> DesiredServices {
        crate::hcloud::load_balancer::plan::desired_services(&spec(s), &s.ports)
    }

    /// The load balancer `members` made, with their ports, plus `by_hand` ports.
    fn lb(members: &[(&str, &[u16])], by_hand: &[u16]) -> LoadBalancer {
        let first = svc(members[0].0, &[], members[0].1);
        let mut labels = BTreeMap::from([(
            SHARED_TARGETS_LABEL.to_string(),
            spec(&first).target_selection,
        )]);
        let mut services = Vec::new();
        for (uid, ports) in members {
            labels.insert(
                member_label(uid),
                ports_value(&ports.iter().copied().collect()).unwrap(),
            );
            services.extend(ports.iter().map(|p| LbService {
                listen_port: *p,
                ..Default::default()
            }));
        }
        services.extend(by_hand.iter().map(|p| LbService {
            listen_port: *p,
            ..Default::default()
        }));
        LoadBalancer {
            id: 7,
            name: "shared-web".into(),
            labels,
            load_balancer_type: Some(LbType {
                name: "lb11".into(),
                max_services: Some(5),
                ..Default::default()
            }),
            services,
            ..Default::default()
        }
    }

    fn refusal(r: Result<Membership, CloudError>) -> String {
        match r {
            Err(CloudError::Conflict { message }) => message,
            other => panic!("expected a conflict, got {other:?}"),
        }
    }

    #[test]
    fn a_new_member_claims_its_ports_and_leaves_the_others_alone() {
        let lb = lb(&[("a", &[80])], &[9000]);
        let b = svc("b", &[], &[8080, 8443]);
        let m = join(&lb, &b, &spec(&b), &desired(&b)).unwrap();
        assert!(m.claimed.is_empty());
        assert!(!m.alone);
        assert_eq!(m.labels_during[&member_label("b")], "8080.8443");
        assert_eq!(m.labels_during[&member_label("a")], "80");
        assert_eq!(m.labels_during, m.labels_after);
    }

    #[test]
    fn a_port_of_another_member_is_refused_naming_it() {
        let lb = lb(&[("a", &[80])], &[]);
        let b = svc("b", &[], &[80]);
        let msg = refusal(join(&lb, &b, &spec(&b), &desired(&b)));
        assert!(
            msg.contains(
                "listen port 80 of load balancer shared-web (7) belongs to Service ns/svc-a"
            ),
            "{msg}"
        );
    }

    #[test]
    fn a_port_made_by_hand_is_refused_and_kept() {
        let lb = lb(&[("a", &[80])], &[9000]);
        let b = svc("b", &[], &[9000]);
        let msg = refusal(join(&lb, &b, &spec(&b), &desired(&b)));
        assert!(
            msg.contains("listen port 9000") && msg.contains("not made by a Service"),
            "{msg}"
        );
    }

    #[test]
    fn different_target_selection_is_refused_unless_alone() {
        let lb = lb(&[("a", &[80])], &[]);
        let b = svc("b", &[(a::NODE_SELECTOR, "pool=web")], &[8080]);
        let msg = refusal(join(&lb, &b, &spec(&b), &desired(&b)));
        assert!(
            msg.contains("Service ns/svc-a") && msg.contains("same nodes"),
            "{msg}"
        );
        // Alone on it, the member may change its selection.
        let a = svc("a", &[(a::NODE_SELECTOR, "pool=web")], &[80]);
        let m = join(&lb, &a, &spec(&a), &desired(&a)).unwrap();
        assert!(m.alone);
        assert_eq!(
            m.labels_after[SHARED_TARGETS_LABEL],
            spec(&a).target_selection
        );
    }

    #[test]
    fn a_per_load_balancer_setting_that_disagrees_is_refused() {
        let lb = lb(&[("a", &[80])], &[]);
        let b = svc("b", &[(a::TYPE, "lb21")], &[8080]);
        let msg = refusal(join(&lb, &b, &spec(&b), &desired(&b)));
        assert!(msg.contains("it has type lb11, where annotation"), "{msg}");
        assert!(msg.contains("Service ns/svc-a"), "{msg}");
        let same = svc("b", &[(a::TYPE, "lb11")], &[8080]);
        assert!(join(&lb, &same, &spec(&same), &desired(&same)).is_ok());
    }

    #[test]
    fn the_type_limit_counts_every_port_that_stays() {
        let lb = lb(&[("a", &[80, 443]), ("b", &[8080])], &[9000]);
        let c = svc("c", &[], &[8443]);
        assert!(join(&lb, &c, &spec(&c), &desired(&c)).is_ok(), "5 of 5");
        let d = svc("d", &[], &[8443, 8444]);
        let msg = refusal(join(&lb, &d, &spec(&d), &desired(&d)));
        assert!(
            msg.contains("holds at most 5 services; 4 are taken"),
            "{msg}"
        );
        assert!(msg.contains("Service ns/svc-a: 80, 443"), "{msg}");
        assert!(msg.contains("not made by a Service: 9000"), "{msg}");
    }

    #[test]
    fn a_load_balancer_of_one_service_is_shared_only_by_that_service() {
        let mut own = lb(&[("a", &[80])], &[]);
        own.labels = BTreeMap::from([(SERVICE_UID_LABEL.to_string(), "a".to_string())]);
        let b = svc("b", &[], &[8080]);
        let msg = refusal(join(&own, &b, &spec(&b), &desired(&b)));
        assert!(msg.contains("belongs to Service ns/svc-a alone"), "{msg}");
        // Its owner opts in: one label write, HCCM's label replaced by the member label.
        let a = svc("a", &[], &[80]);
        let m = join(&own, &a, &spec(&a), &desired(&a)).unwrap();
        assert_eq!(m.claimed, BTreeSet::from([80]));
        assert!(!m.labels_during.contains_key(SERVICE_UID_LABEL));
        assert_eq!(m.labels_during, m.labels_after);
    }

    #[test]
    fn dropped_ports_stay_claimed_until_deleted() {
        let lb = lb(&[("a", &[80, 443])], &[]);
        let a = svc("a", &[], &[80, 8080]);
        let m = join(&lb, &a, &spec(&a), &desired(&a)).unwrap();
        assert_eq!(m.labels_during[&member_label("a")], "80.443.8080");
        assert_eq!(m.labels_after[&member_label("a")], "80.8080");
    }

    #[test]
    fn leaving_drops_the_member_label_and_with_the_last_the_targets_label() {
        let lb2 = lb(&[("a", &[80]), ("b", &[8080])], &[]);
        let l = labels_without(&lb2, "a");
        assert!(!l.contains_key(&member_label("a")));
        assert!(l.contains_key(SHARED_TARGETS_LABEL));
        let lb1 = lb(&[("a", &[80])], &[]);
        assert!(labels_without(&lb1, "a").is_empty());
    }
}
