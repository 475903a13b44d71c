//! Finding a Service's load balancer: the one remembered for its UID, else by our UID label,
//! else (where the Service may adopt one) by name.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use tokio::time::Instant;

use super::ownership::{
    MEMBER_LABEL_PREFIX, SERVICE_UID_LABEL, member_label, service_uid_selector,
};
use crate::capabilities::{ServiceRef, Warning};
use crate::error::CloudError;
use crate::hcloud::pagination::list_all;
use crate::hcloud::transport::{Req, Transport};
use crate::hcloud::wire::{LoadBalancer, LoadBalancerResponse, LoadBalancersPage};

/// How a load balancer was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Found {
    /// Carries our UID label.
    Owned,
    /// Matched by name only: adopted by setting our label. `owner` is the Service UID it was
    /// labelled with, if any: HCCM takes such an LB over too (a delete-protected LB outlives its
    /// Service and keeps its IP for the Service re-created under the same name annotation).
    ByName { owner: Option<String> },
}

/// What we remember: each Service's load balancer id, and each load balancer as we last read or
/// wrote it. By id, not by Service: the Services on a shared load balancer see each other's
/// writes (they are made one at a time, under its lock).
#[derive(Debug, Default)]
struct Memory {
    ids: HashMap<String, i64>,
    lbs: HashMap<i64, (Instant, LoadBalancer)>,
}

/// How long `update_targets` trusts the remembered LB instead of reading it. `ensure` always reads,
/// and drift checks read a list at most their period's half old, so they correct any drift made
/// outside the controller.
const KNOWN_LB_MAX_AGE: Duration = Duration::from_secs(300);

/// How old a load balancer a reconcile may act on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Freshness {
    /// Read now (a full ensure: the Service is new or changed).
    Now,
    /// As remembered, while younger than [`KNOWN_LB_MAX_AGE`] (a target update).
    Remembered,
    /// Read at most this long ago, by a read shared with the other drift checks: the remembered
    /// object while this young, else one list of every load balancer, which refreshes them all.
    /// Drift checks of many Services then cost one list per ⌈load balancers / 50⌉ instead of a
    /// read each.
    Listed(Duration),
}

impl Freshness {
    /// How old a remembered object may be to be used without a read.
    fn trusted_for(self) -> Option<Duration> {
        match self {
            Freshness::Now => None,
            Freshness::Remembered => Some(KNOWN_LB_MAX_AGE),
            Freshness::Listed(age) => Some(age),
        }
    }
}

#[derive(Debug)]
pub(super) struct Finder {
    transport: Transport,
    /// Service UID → LB id (so steady-state reconciles skip the label-selector search) and the LB
    /// as last read or written by us (so a node-set change costs only the target writes).
    memory: Mutex<Memory>,
    /// When the project's load balancers were last listed (see [`Finder::refresh_index`]).
    index: tokio::sync::Mutex<Index>,
}

/// The last list of every load balancer, which put each owned one in [`Memory`].
#[derive(Debug, Default)]
struct Index {
    listed: Option<Instant>,
    /// Service UIDs whose label several load balancers carry.
    duplicates: HashMap<String, usize>,
}

/// How long a list of every load balancer stands in for a label search: as long as a burst of new
/// Services takes to start reconciling, so a burst costs one list instead of one search each. A
/// load balancer made by someone else is missed for no longer than by a search made this much
/// earlier; our own creates and deletes are remembered anyway, and a new process (after a crash
/// mid-create) lists first. A default name is the Service UID's, so a create that missed one
/// finds it taken and adopts it instead of making a second.
const INDEX_MAX_AGE: Duration = Duration::from_secs(3);

/// What a reconcile knows of a load balancer after writing it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Known {
    /// It is as the object says (read, or followed through writes that all succeeded): the next
    /// reconcile needs no read.
    Whole,
    /// Only its id: a write may have changed it in ways the object does not show.
    IdOnly,
}

impl Finder {
    pub(super) fn new(transport: Transport) -> Self {
        Self {
            transport,
            memory: Mutex::new(Memory::default()),
            index: tokio::sync::Mutex::new(Index::default()),
        }
    }

    fn memory(&self) -> MutexGuard<'_, Memory> {
        self.memory.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Keeps what a reconcile knows of the Service's load balancer after writing it (see
    /// [`Known`]).
    pub(super) fn record(&self, uid: &str, lb: &LoadBalancer, known: Known) {
        match known {
            Known::Whole => self.remember(uid, lb),
            Known::IdOnly => self.remember_id(uid, lb.id),
        }
    }

    fn remember(&self, uid: &str, lb: &LoadBalancer) {
        let mut m = self.memory();
        m.ids.insert(uid.to_string(), lb.id);
        m.lbs.insert(lb.id, (Instant::now(), lb.clone()));
    }

    /// Keep the id, drop the object (it no longer reflects the cloud).
    fn remember_id(&self, uid: &str, id: i64) {
        let mut m = self.memory();
        m.ids.insert(uid.to_string(), id);
        m.lbs.remove(&id);
    }

    /// The remembered UIDs that start with `prefix` (a Service's zones' load balancers).
    pub(super) fn uids_starting(&self, prefix: &str) -> Vec<String> {
        let m = self.memory();
        m.ids
            .keys()
            .filter(|uid| uid.starts_with(prefix))
            .cloned()
            .collect()
    }

    pub(super) fn forget(&self, uid: &str) {
        let mut m = self.memory();
        if let Some(id) = m.ids.remove(uid)
            && !m.ids.values().any(|other| *other == id)
        {
            m.lbs.remove(&id);
        }
    }

    /// Lists every load balancer (paged) once the last list is `max_age` old or there was none, and
    /// remembers each one by the Service UIDs its labels name. One caller lists; the others wait
    /// for its result.
    async fn refresh_index(&self, max_age: Duration) -> Result<(), CloudError> {
        let mut index = self.index.lock().await;
        if index.listed.is_some_and(|at| at.elapsed() < max_age) {
            return Ok(());
        }
        let all: Vec<LoadBalancer> = list_all::<LoadBalancersPage>(
            &self.transport,
            Req::get("/load_balancers", "/load_balancers"),
        )
        .await?;
        let mut owners: HashMap<String, usize> = HashMap::new();
        for lb in &all {
            if let Some(uid) = lb.labels.get(SERVICE_UID_LABEL) {
                *owners.entry(uid.clone()).or_default() += 1;
                self.remember(uid, lb);
            }
            for key in lb.labels.keys() {
                if let Some(uid) = key.strip_prefix(MEMBER_LABEL_PREFIX)
                    && !lb.labels.contains_key(SERVICE_UID_LABEL)
                {
                    self.remember(uid, lb);
                }
            }
        }
        index.duplicates = owners.into_iter().filter(|(_, n)| *n > 1).collect();
        index.listed = Some(Instant::now());
        Ok(())
    }

    /// The remembered id of `uid`'s load balancer, and the object while younger than `max_age`.
    fn known(&self, uid: &str, max_age: Option<Duration>) -> Option<(i64, Option<LoadBalancer>)> {
        let m = self.memory();
        let id = *m.ids.get(uid)?;
        let lb = max_age.and_then(|max_age| {
            m.lbs
                .get(&id)
                .filter(|(at, _)| at.elapsed() < max_age)
                .map(|(_, lb)| lb.clone())
        });
        Some((id, lb))
    }

    /// `uid`'s remembered load balancer as `fresh` allows it without a read of its own: as
    /// remembered, or (for [`Freshness::Listed`]) after the shared list; `None`: read it.
    async fn without_read(
        &self,
        uid: &str,
        fresh: Freshness,
        ours: impl Fn(&LoadBalancer) -> bool,
    ) -> Result<Option<LoadBalancer>, CloudError> {
        if let Some((_, Some(lb))) = self.known(uid, fresh.trusted_for()) {
            return Ok(Some(lb).filter(|lb| ours(lb)));
        }
        if let Freshness::Listed(age) = fresh {
            self.refresh_index(age).await?;
            if let Some((_, Some(lb))) = self.known(uid, Some(age)) {
                return Ok(Some(lb).filter(|lb| ours(lb)));
            }
        }
        Ok(None)
    }

    /// Remembered object (as `fresh` allows), remembered id (verified by GET), then UID label,
    /// then (if `name` is given) name.
    pub(super) async fn find(
        &self,
        svc: &ServiceRef,
        name: Option<&str>,
        fresh: Freshness,
    ) -> Result<Option<(LoadBalancer, Found)>, CloudError> {
        if let Some((id, _)) = self.known(&svc.uid, None) {
            // A shared one only while the Service still names it.
            let ours = |lb: &LoadBalancer| {
                lb.labels.get(SERVICE_UID_LABEL) == Some(&svc.uid)
                    || (lb.labels.contains_key(&member_label(&svc.uid))
                        && name == Some(lb.name.as_str()))
            };
            if let Some(lb) = self.without_read(&svc.uid, fresh, ours).await? {
                return Ok(Some((lb, Found::Owned)));
            }
            if let Some(lb) = self.read_remembered(&svc.uid, id, ours).await? {
                return Ok(Some((lb, Found::Owned)));
            }
        }
        // Not remembered: the index (one list of the project's load balancers) says whether one
        // carries our label, instead of a label search per Service.
        self.refresh_index(INDEX_MAX_AGE).await?;
        if let Some(n) = self.index.lock().await.duplicates.get(&svc.uid) {
            return Err(CloudError::Inconsistent {
                message: format!(
                    "{n} load balancers carry label {}; expected at most one",
                    service_uid_selector(&svc.uid)
                ),
            });
        }
        if let Some((_, Some(lb))) = self.known(&svc.uid, Some(KNOWN_LB_MAX_AGE))
            && lb.labels.get(SERVICE_UID_LABEL) == Some(&svc.uid)
        {
            return Ok(Some((lb, Found::Owned)));
        }
        match name {
            Some(name) => self.find_by_name(name).await,
            None => Ok(None),
        }
    }

    /// Reads `uid`'s remembered load balancer `id`: kept (and remembered afresh) while `ours`
    /// says it still belongs to the Service, forgotten when it does not or is gone.
    async fn read_remembered(
        &self,
        uid: &str,
        id: i64,
        ours: impl Fn(&LoadBalancer) -> bool,
    ) -> Result<Option<LoadBalancer>, CloudError> {
        match self.get_lb(id).await {
            Ok(lb) if ours(&lb) => {
                self.remember(uid, &lb);
                return Ok(Some(lb));
            }
            Ok(_) => {}
            Err(e) if e.is_not_found() => {}
            Err(e) => return Err(e),
        }
        self.forget(uid);
        Ok(None)
    }

    /// A shared load balancer is found by its name first (the label search would find only a
    /// load balancer the Service owns alone, about to be shared): the remembered one while it
    /// still has the name, the one named so, else the Service's own by label.
    pub(super) async fn find_shared(
        &self,
        svc: &ServiceRef,
        name: &str,
        fresh: Freshness,
    ) -> Result<Option<(LoadBalancer, Found)>, CloudError> {
        let ours = |lb: &LoadBalancer| {
            lb.name == name || lb.labels.get(SERVICE_UID_LABEL) == Some(&svc.uid)
        };
        if let Some((id, _)) = self.known(&svc.uid, None) {
            if let Some(lb) = self.without_read(&svc.uid, fresh, ours).await? {
                return Ok(Some((lb, Found::Owned)));
            }
            if let Some(lb) = self.read_remembered(&svc.uid, id, ours).await? {
                return Ok(Some((lb, Found::Owned)));
            }
        }
        if let Some(found) = self.find_by_name(name).await? {
            return Ok(Some(found));
        }
        self.find(svc, None, Freshness::Now).await
    }

    /// The shared load balancer that carries `uid`'s member label, wherever its name went
    /// (a Service that left it keeps no other trace of it).
    pub(super) async fn find_member(&self, uid: &str) -> Result<Option<LoadBalancer>, CloudError> {
        let found: Vec<LoadBalancer> = list_all::<LoadBalancersPage>(
            &self.transport,
            Req::get("/load_balancers", "/load_balancers")
                .query("label_selector", member_label(uid)),
        )
        .await?;
        Ok(found.into_iter().next())
    }

    /// A load balancer named `name` (pre-existing, hand-made, or another Service's), to adopt.
    pub(super) async fn find_by_name(
        &self,
        name: &str,
    ) -> Result<Option<(LoadBalancer, Found)>, CloudError> {
        let by_name: Vec<LoadBalancer> = list_all::<LoadBalancersPage>(
            &self.transport,
            Req::get("/load_balancers", "/load_balancers").query("name", name),
        )
        .await?;
        Ok(by_name.into_iter().find(|lb| lb.name == name).map(|lb| {
            let owner = lb.labels.get(SERVICE_UID_LABEL).cloned();
            (lb, Found::ByName { owner })
        }))
    }

    pub(super) async fn get_lb(&self, id: i64) -> Result<LoadBalancer, CloudError> {
        let r: LoadBalancerResponse = self
            .transport
            .call(&Req::get(
                "/load_balancers/{id}",
                format!("/load_balancers/{id}"),
            ))
            .await?;
        Ok(r.load_balancer)
    }
}

/// Logs an adoption by name and, when the LB was another Service's, says so in a warning.
pub(super) fn note_adoption(
    svc: &ServiceRef,
    lb: &LoadBalancer,
    how: &Found,
    warnings: &mut Vec<Warning>,
) {
    let Found::ByName { owner } = how else { return };
    match owner.as_ref().filter(|o| **o != svc.uid) {
        // Unlabelled, or already ours (found by name after a create found the name taken).
        None => {
            tracing::info!(service = %svc.key(), lb = lb.id, "adopting load balancer found by name")
        }
        Some(prev) => {
            tracing::info!(service = %svc.key(), lb = lb.id, previous_uid = %prev, "taking over load balancer found by name from another Service UID");
            warnings.push(Warning::new(
                "LoadBalancerAdopted",
                format!(
                    "load balancer {} ({}) was found by name and taken over from Service UID \
                     {prev}; it is now labelled {SERVICE_UID_LABEL}={}",
                    lb.name, lb.id, svc.uid
                ),
            ));
        }
    }
}
