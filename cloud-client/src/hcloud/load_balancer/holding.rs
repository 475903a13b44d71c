//! The "own" stage: how a Service holds its load balancer, alone (its own, or one adopted by name)
//! or as one member of a load balancer several Services share (annotation `shared`). Every
//! difference between the two is here, so the coordinator runs the same stages for both.

use std::collections::BTreeMap;

use super::find::{self, Finder, Found, Freshness};
use super::ownership::SERVICE_UID_LABEL;
use super::plan::{DesiredServices, Membership};
use super::sharing;
use super::spec::LbSpec;
use crate::capabilities::{ServiceRef, Warning};
use crate::error::CloudError;
use crate::hcloud::wire::LoadBalancer;

/// How a Service holds its load balancer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Holding {
    Alone,
    Shared,
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
}
