//! The "own" stage: how a Service holds its load balancer, alone (its own, or one adopted by name)
//! or as one member of a load balancer several Services share (annotation `shared`). Every
//! difference between the two is here, so the coordinator runs the same stages for both, and the
//! delete only carries out what [`Holding::released_at_delete`] decided.

use std::collections::BTreeMap;

use super::annotations;
use super::find::{self, Finder, Found, Freshness};
use super::ownership::{self, Owners, SERVICE_UID_LABEL};
use super::plan::{DesiredServices, Membership};
use super::sharing;
use super::spec::{self, LbSpec};
use crate::capabilities::{ServiceRef, Warning};
use crate::error::CloudError;
use crate::hcloud::wire::LoadBalancer;

/// How a Service holds its load balancer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Holding {
    Alone,
    Shared,
}

/// What a deleted Service lets go of.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Release {
    /// Its own load balancer: deleted (unless delete-protected).
    Own(LoadBalancer),
    /// Its part of a shared one: its ports and its member label.
    Part(LoadBalancer),
}

impl Holding {
    pub(super) fn of(spec: &LbSpec) -> Self {
        if spec.shared {
            Holding::Shared
        } else {
            Holding::Alone
        }
    }

    /// The name under which reconciles wait for each other: one at a time per shared load
    /// balancer; none for one alone.
    pub(super) fn lock_name(self, spec: &LbSpec) -> Option<&str> {
        (self == Holding::Shared).then_some(spec.name.as_str())
    }

    /// The Service's load balancer (see [`Finder`]), as `fresh` as asked.
    pub(super) async fn find(
        self,
        finder: &Finder,
        svc: &ServiceRef,
        spec: &LbSpec,
        fresh: Freshness,
    ) -> Result<Option<(LoadBalancer, Found)>, CloudError> {
        match self {
            Holding::Shared => finder.find_shared(svc, &spec.name, fresh).await,
            Holding::Alone => {
                let named = spec.name_annotated.then_some(spec.name.as_str());
                finder.find(svc, named, fresh).await
            }
        }
    }

    /// Whether a create refused because the name is taken finds the load balancer by name after
    /// all. HCCM also looks an unlabelled LB up by name; with the default name (`a` + this
    /// Service's UID) only a label-less LB from before labels could be found that way, so the
    /// list is saved and made only when the create says the name is taken. A shared one taken in
    /// the meantime (by another process) is joined the same way.
    pub(super) fn finds_taken_name(self, spec: &LbSpec) -> bool {
        !spec.name_annotated || self == Holding::Shared
    }

    /// The labels a new load balancer of `svc` carries.
    pub(super) fn new_labels(
        self,
        svc: &ServiceRef,
        spec: &LbSpec,
        services: &DesiredServices,
    ) -> Result<BTreeMap<String, String>, CloudError> {
        match self {
            Holding::Shared => sharing::new_labels(svc, spec, services),
            Holding::Alone => Ok(BTreeMap::from([(
                SERVICE_UID_LABEL.to_string(),
                svc.uid.clone(),
            )])),
        }
    }

    /// What the Service is told about the load balancer it found: an adoption by name, for one
    /// alone (a shared one is joined, not adopted).
    pub(super) fn note_found(
        self,
        svc: &ServiceRef,
        lb: &LoadBalancer,
        how: &Found,
        warnings: &mut Vec<Warning>,
    ) {
        if self == Holding::Alone {
            find::note_adoption(svc, lb, how, warnings);
        }
    }

    /// Before the plan: joins `lb` (what the Service may own there), or, alone, refuses a load
    /// balancer other Services share. Every refusal is before any write.
    pub(super) fn membership(
        self,
        lb: &LoadBalancer,
        svc: &ServiceRef,
        spec: &LbSpec,
        services: &DesiredServices,
    ) -> Result<Option<Membership>, CloudError> {
        match self {
            Holding::Shared => sharing::join(lb, svc, spec, services).map(Some),
            Holding::Alone => sharing::refuse_if_shared(lb, svc).map(|()| None),
        }
    }

    /// What a deleted Service holds, in the order it lets go. Decided by our labels on what is
    /// found: a delete reads no annotation but `shared` (the others may be invalid by now), and
    /// that one only says where to look first. A Service that once shared a load balancer and
    /// now has its own may still have ports on the shared one.
    pub(super) async fn released_at_delete(
        finder: &Finder,
        svc: &ServiceRef,
    ) -> Result<Vec<Release>, CloudError> {
        // The remembered object will do: leaving reads it again under the lock.
        if annotations::is_shared(svc)
            && let Some((lb, _)) = finder
                .find_shared(svc, &spec::name(svc), Freshness::Remembered)
                .await?
            && lb.labels.contains_key(&ownership::member_label(&svc.uid))
        {
            return Ok(vec![Release::Part(lb)]);
        }
        // Only our labels identify what we may delete; a same-named foreign LB is never touched.
        let own = finder
            .find(svc, None, Freshness::Now)
            .await?
            .map(|(lb, _)| lb);
        let own_is_shared = own.as_ref().is_some_and(is_shared);
        let member = if own_is_shared {
            None
        } else {
            finder.find_member(&svc.uid).await?
        };
        Ok(releases(own, member))
    }
}

fn is_shared(lb: &LoadBalancer) -> bool {
    Owners::of(&lb.labels).is_shared()
}

/// The Service's own load balancer (labelled with its UID) and the shared one that carries its
/// member label, as found → what it lets go of.
fn releases(own: Option<LoadBalancer>, member: Option<LoadBalancer>) -> Vec<Release> {
    match own {
        Some(lb) if !is_shared(&lb) => std::iter::once(Release::Own(lb))
            .chain(member.map(Release::Part))
            .collect(),
        // Labelled with its UID but shared: it made it, others joined.
        Some(lb) => vec![Release::Part(lb)],
        None => member.map(Release::Part).into_iter().collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lb(id: i64, labels: &[(&str, &str)]) -> LoadBalancer {
        LoadBalancer {
            id,
            labels: labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn a_deleted_service_lets_go_of_what_our_labels_say_it_holds() {
        let own = lb(1, &[(SERVICE_UID_LABEL, "u1")]);
        let member = ownership::member_label("u1");
        let shared = lb(2, &[(member.as_str(), "80")]);
        let made_and_shared = lb(3, &[(SERVICE_UID_LABEL, "u1"), (member.as_str(), "80")]);
        assert_eq!(releases(None, None), vec![]);
        assert_eq!(
            releases(Some(own.clone()), None),
            vec![Release::Own(own.clone())]
        );
        // Its own one first; then the ports it kept on one it shared before.
        assert_eq!(
            releases(Some(own.clone()), Some(shared.clone())),
            vec![Release::Own(own), Release::Part(shared.clone())]
        );
        assert_eq!(
            releases(None, Some(shared.clone())),
            vec![Release::Part(shared)]
        );
        // One it made that others joined is only left, never deleted by it alone.
        assert!(is_shared(&made_and_shared));
        assert_eq!(
            releases(Some(made_and_shared.clone()), None),
            vec![Release::Part(made_and_shared)]
        );
    }
}
