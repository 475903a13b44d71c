//! Whose load balancer a Service may write to. Checked right after the load balancer is found and
//! before anything is written (a managed certificate included), so a refused Service changes
//! nothing in the cloud and learns nothing about other namespaces.
//!
//! - **Namespaces.** A Service is on a load balancer with other Services (shared, or one another
//!   Service owns) only when each of those is in its own namespace, or in a namespace the cluster's
//!   administrator grouped with it (`HCLOUD_LOAD_BALANCERS_SHARE_ACROSS_NAMESPACES`). Anyone who
//!   may create a Service in one namespace could otherwise serve anything on another team's
//!   address, by naming its load balancer. A Service this cluster does not know (another cluster
//!   on the same project) counts as another namespace. The refusal names neither the other
//!   Services nor their ports.
//! - **Consent.** A load balancer that carries no ownership label of ours or HCCM's was made
//!   outside this cluster (Terraform, the console, another tool). A Service that names it never
//!   writes to it, unless its owner consented on the load balancer itself (label
//!   [`ADOPT_LABEL`]`=<the Service's namespace>`) or the administrator turned on HCCM's adoption
//!   by name (`HCLOUD_LOAD_BALANCERS_ADOPT_BY_NAME`, for a migration). A load balancer under the
//!   Service's own default name (`a` + its UID) was made for it, by an HCCM from before labels,
//!   and is adopted as HCCM does.

use super::annotations::NAME;
use super::find::Found;
use super::ownership::{Owners, SERVICE_UID_LABEL};
use crate::capabilities::{ServiceRef, Warning};
use crate::error::CloudError;
use crate::hcloud::config::Tenancy;
use crate::hcloud::wire::LoadBalancer;

/// The Warning's reason for a Service that is on a load balancer with another namespace already.
pub const SHARED_ACROSS_NAMESPACES: &str = "LoadBalancerSharedAcrossNamespaces";

/// The label by which a load balancer's owner lets the Services of one namespace adopt it:
/// `hcloud load-balancer add-label <name> cloud-controllers.io/adopt=<namespace>`.
pub const ADOPT_LABEL: &str = "cloud-controllers.io/adopt";
/// [`ADOPT_LABEL`] as it was spelt before the project's keys had one prefix: still honoured.
pub const LEGACY_ADOPT_LABEL: &str = "cloud-controllers/adopt";

impl Tenancy {
    /// Refuses, before any write, a Service that may not write to `lb`, found as `how`.
    /// `default_name`: `lb` has the Service's default name, not one its annotation chose.
    ///
    /// A Service that is on `lb` already with another namespace (it joined before these rules,
    /// or before the administrator narrowed them) is not refused: refusing it would freeze its
    /// targets. It gets the returned Warning instead, at each reconcile, until one of them leaves.
    pub(super) fn check(
        &self,
        lb: &LoadBalancer,
        how: &Found,
        svc: &ServiceRef,
        default_name: bool,
    ) -> Result<Option<Warning>, CloudError> {
        if made_elsewhere(lb, how, default_name) {
            return self.consented(lb, svc).map(|()| None);
        }
        let owners = Owners::of(&lb.labels);
        match self.same_tenant(lb, &owners, svc) {
            Ok(()) => Ok(None),
            Err(CloudError::Conflict { message }) if owners.members.contains_key(&svc.uid) => {
                Ok(Some(Warning::new(
                    SHARED_ACROSS_NAMESPACES,
                    format!(
                        "{message}. This Service stays on it because it was there already; \
                         Services of other namespaces are no longer let on"
                    ),
                )))
            }
            Err(refusal) => Err(refusal),
        }
    }

    /// A load balancer that nothing in the cluster made: written only with its owner's consent
    /// or the administrator's adoption by name.
    fn consented(&self, lb: &LoadBalancer, svc: &ServiceRef) -> Result<(), CloudError> {
        let consent = [ADOPT_LABEL, LEGACY_ADOPT_LABEL]
            .iter()
            .find_map(|label| lb.labels.get(*label))
            .map(String::as_str);
        if self.adopt_by_name || consent == Some(svc.namespace.as_str()) {
            return Ok(());
        }
        Err(CloudError::Conflict {
            message: format!(
                "annotation {NAME} names load balancer {name} ({id}), which was not made by this \
                 cluster (it has no label {SERVICE_UID_LABEL} or shared.cloud-controllers/…), so \
                 no Service writes to it. If this Service may take it over (its targets, \
                 services and labels), its owner says so on the load balancer: `{}`; or choose \
                 another name",
                consent_command(&lb.name, &svc.namespace),
                name = lb.name,
                id = lb.id,
            ),
        })
    }

    /// Every other Service on `lb` is in `svc`'s namespace, or in one allowed to share with it.
    /// An owner this cluster does not know counts as another namespace, except HCCM's single
    /// owner: a load balancer whose Service is gone is taken over by its successor, as HCCM does.
    fn same_tenant(
        &self,
        lb: &LoadBalancer,
        owners: &Owners,
        svc: &ServiceRef,
    ) -> Result<(), CloudError> {
        let allowed = |uid: &str| {
            svc.names
                .namespace_of(uid)
                .is_some_and(|ns| self.share_across_namespaces.allows(&svc.namespace, &ns))
        };
        let foreign_member = owners.others(&svc.uid).any(|uid| !allowed(uid));
        let foreign_owner = owners
            .single
            .as_deref()
            .filter(|uid| *uid != svc.uid)
            .and_then(|uid| svc.names.namespace_of(uid))
            .is_some_and(|ns| !self.share_across_namespaces.allows(&svc.namespace, &ns));
        if !foreign_member && !foreign_owner {
            return Ok(());
        }
        Err(CloudError::Conflict {
            message: format!(
                "load balancer {} ({}) is used by a Service outside namespace {}; Services are on \
                 one load balancer only with Services of their own namespace, unless the \
                 cluster's administrator allows the namespaces to share \
                 (HCLOUD_LOAD_BALANCERS_SHARE_ACROSS_NAMESPACES, chart value \
                 hcloud.loadBalancers.shareAcrossNamespaces); choose another name",
                lb.name, lb.id, svc.namespace
            ),
        })
    }
}

/// Whether `lb`, found as `how`, was made outside this cluster: found by a name the Service
/// chose, with no ownership label of ours or HCCM's.
pub(super) fn made_elsewhere(lb: &LoadBalancer, how: &Found, default_name: bool) -> bool {
    let owners = Owners::of(&lb.labels);
    let made_here = owners.single.is_some() || owners.is_shared();
    !made_here && matches!(how, Found::ByName { .. }) && !default_name
}

/// The hcloud CLI command that lets the Services of `namespace` adopt load balancer `name`.
pub fn consent_command(name: &str, namespace: &str) -> String {
    format!("hcloud load-balancer add-label {name} {ADOPT_LABEL}={namespace}")
}

/// The tenancy stage, right after the load balancer is found.
impl super::HcloudLoadBalancers {
    /// Whose load balancer `lb` is (see [`tenancy`]), before any write. In shadow mode a load
    /// balancer made outside the cluster is put in the plan, with the command by which its owner
    /// consents: the one thing an operator must do before switching from HCCM, which adopts by name.
    pub(super) fn check_tenancy(
        &self,
        svc: &ServiceRef,
        spec: &super::spec::LbSpec,
        lb: &LoadBalancer,
        how: &Found,
        warnings: &mut Vec<Warning>,
    ) -> Result<(), CloudError> {
        let default_name = !spec.name_annotated;
        match self.defaults.tenancy.check(lb, how, svc, default_name) {
            Ok(warning) => {
                warnings.extend(warning);
                Ok(())
            }
            Err(refusal) => {
                if made_elsewhere(lb, how, default_name) {
                    self.transport.plan_refused(
                        "adopt a load balancer made outside the cluster",
                        format!("/load_balancers/{}", lb.id),
                        format!(
                            "its owner consents with: {}",
                            consent_command(&lb.name, &svc.namespace)
                        ),
                    );
                }
                Err(refusal)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::capabilities::ServiceNames;
    use crate::hcloud::config::ShareAcrossNamespaces;

    fn svc(uid: &str, namespace: &str) -> ServiceRef {
        ServiceRef {
            uid: uid.into(),
            namespace: namespace.into(),
            name: "web".into(),
            names: ServiceNames::new(|uid| match uid {
                "prod-1" | "prod-2" => Some(format!("prod/svc-{uid}")),
                "canary-1" => Some(format!("prod-canary/svc-{uid}")),
                _ => None,
            }),
            ..Default::default()
        }
    }

    fn lb(labels: &[(&str, &str)]) -> LoadBalancer {
        LoadBalancer {
            id: 7,
            name: "prod-lb".into(),
            labels: labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<BTreeMap<_, _>>(),
            ..Default::default()
        }
    }

    const BY_NAME: Found = Found::ByName { owner: None };

    #[test]
    fn a_shared_load_balancer_is_joined_only_within_the_namespace_or_its_group() {
        let shared = lb(&[("shared.cloud-controllers/prod-1", "443")]);
        let t = Tenancy::default();
        assert!(
            t.check(&shared, &BY_NAME, &svc("prod-2", "prod"), false)
                .is_ok()
        );
        let e = t
            .check(&shared, &BY_NAME, &svc("evil-1", "intruder"), false)
            .unwrap_err()
            .to_string();
        assert!(e.contains("outside namespace intruder"), "{e}");
        assert!(
            !e.contains("prod/") && !e.contains("443"),
            "names nothing of prod: {e}"
        );
        let grouped = Tenancy {
            share_across_namespaces: ShareAcrossNamespaces::parse("prod,prod-canary").unwrap(),
            ..Tenancy::default()
        };
        assert!(
            grouped
                .check(&shared, &BY_NAME, &svc("canary-1", "prod-canary"), false)
                .is_ok()
        );
        assert!(
            grouped
                .check(&shared, &BY_NAME, &svc("evil-1", "intruder"), false)
                .is_err()
        );
        let any = Tenancy {
            share_across_namespaces: ShareAcrossNamespaces::Any,
            ..Tenancy::default()
        };
        assert!(
            any.check(&shared, &BY_NAME, &svc("evil-1", "intruder"), false)
                .is_ok()
        );
        let unknown = lb(&[("shared.cloud-controllers/other-cluster", "80")]);
        assert!(
            any.check(&unknown, &BY_NAME, &svc("prod-2", "prod"), false)
                .is_err()
        );
        // On it already, from before the rules: kept, with a Warning.
        let both = lb(&[
            ("shared.cloud-controllers/prod-1", "443"),
            ("shared.cloud-controllers/evil-1", "8443"),
        ]);
        let kept = t.check(&both, &Found::Owned, &svc("evil-1", "intruder"), false);
        assert_eq!(kept.unwrap().unwrap().reason, SHARED_ACROSS_NAMESPACES);
    }

    #[test]
    fn a_load_balancer_of_a_live_service_elsewhere_is_refused_and_of_a_gone_one_taken_over() {
        let t = Tenancy::default();
        let of_prod = lb(&[(SERVICE_UID_LABEL, "prod-1")]);
        let how = Found::ByName {
            owner: Some("prod-1".into()),
        };
        assert!(
            t.check(&of_prod, &how, &svc("evil-1", "intruder"), false)
                .is_err()
        );
        assert!(
            t.check(&of_prod, &how, &svc("prod-2", "prod"), false)
                .is_ok()
        );
        let of_gone = lb(&[(SERVICE_UID_LABEL, "deleted-1")]);
        assert!(
            t.check(&of_gone, &how, &svc("evil-1", "intruder"), false)
                .is_ok()
        );
    }

    #[test]
    fn a_load_balancer_nobody_here_made_needs_consent() {
        let t = Tenancy::default();
        let terraform = lb(&[("managed-by", "terraform")]);
        let e = t
            .check(&terraform, &BY_NAME, &svc("t-1", "tenant"), false)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("hcloud load-balancer add-label prod-lb cloud-controllers.io/adopt=tenant"),
            "{e}"
        );
        assert!(
            t.check(&terraform, &BY_NAME, &svc("t-1", "tenant"), true)
                .is_ok(),
            "default name"
        );
        let consented = lb(&[(ADOPT_LABEL, "tenant")]);
        assert!(
            t.check(&consented, &BY_NAME, &svc("t-1", "tenant"), false)
                .is_ok()
        );
        let consented_before = lb(&[(LEGACY_ADOPT_LABEL, "tenant")]);
        assert!(
            t.check(&consented_before, &BY_NAME, &svc("t-1", "tenant"), false)
                .is_ok(),
            "the label as spelt before 0.2"
        );
        assert!(
            t.check(&consented, &BY_NAME, &svc("x-1", "other"), false)
                .is_err()
        );
        let migrating = Tenancy {
            adopt_by_name: true,
            ..Tenancy::default()
        };
        assert!(
            migrating
                .check(&terraform, &BY_NAME, &svc("t-1", "tenant"), false)
                .is_ok()
        );
    }

    #[test]
    fn the_setting_reads_groups_and_refuses_what_is_no_namespace() {
        assert_eq!(
            ShareAcrossNamespaces::parse(""),
            Some(ShareAcrossNamespaces::Never)
        );
        assert_eq!(
            ShareAcrossNamespaces::parse(" * "),
            Some(ShareAcrossNamespaces::Any)
        );
        let g = ShareAcrossNamespaces::parse("a, b;c,d").unwrap();
        assert!(g.allows("a", "b") && g.allows("d", "c") && !g.allows("a", "c"));
        assert_eq!(ShareAcrossNamespaces::parse("a,,b"), None);
        assert_eq!(ShareAcrossNamespaces::parse("Team_A"), None);
    }
}
