//! Shadow mode (`--dry-run`): the writes a controller would have made, instead of making them.
//!
//! A controller in shadow mode watches, plans and reconciles as usual, but its writes end here:
//! - a **cloud** write is not sent: the transport records it and answers
//!   [`crate::CloudError::DryRun`], so the reconcile stops at the first write it would make (what
//!   follows depends on that write's result);
//! - a **Kubernetes** write is sent with `dryRun=All`: the apiserver validates it (admission,
//!   RBAC, conflicts) and stores nothing, and the controller goes on with the answer.
//!
//! Both land in one [`PlannedWrites`], served as JSON on the admin port's `/plan` and counted in
//! `cloud_controllers_planned_writes_total`. An entry is one (api, operation, object): seen again,
//! its count and last-seen time move, so a controller retrying the same write does not grow the
//! plan. The reason is what the controller was doing, set around its work with [`with_reason`].

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex};

use serde::Serialize;

/// Which API a planned write was for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Api {
    Cloud,
    Kubernetes,
}

/// One write the controller would have made.
#[derive(Debug, Clone, Serialize)]
pub struct PlannedWrite {
    pub api: Api,
    /// Method and path template (cloud: `POST /load_balancers/{id}/actions/update_service`;
    /// Kubernetes: `PATCH nodes` or `DELETE nodes`, plus the subresource, e.g. `PATCH
    /// services/status`). Bounded: it is also a metric label.
    pub operation: String,
    /// What it would change: the cloud path (`/load_balancers/42/actions/update_service`) or the
    /// Kubernetes object (`Node node-1`, `Service default/web`).
    pub object: String,
    /// What the controller was doing (see [`with_reason`]); empty when it said nothing.
    pub reason: String,
    /// The cloud request's body (shortened), for what exactly would change.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    /// RFC 3339.
    pub first_seen: String,
    pub last_seen: String,
    /// Times it was planned again since (a retry, the next resync).
    pub count: u64,
}

type Key = (Api, String, String);

/// The writes planned so far, shared by the transport, the Kubernetes client and `/plan`.
#[derive(Default)]
pub struct PlannedWrites {
    entries: Mutex<BTreeMap<Key, PlannedWrite>>,
}

impl std::fmt::Debug for PlannedWrites {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PlannedWrites")
            .field("entries", &self.entries().len())
            .finish()
    }
}

/// A cloud request body kept in an entry is cut to this many bytes.
const MAX_BODY: usize = 512;

tokio::task_local! {
    static REASON: String;
}

/// Runs `fut` with `reason` as the reason of every write it plans (e.g. `Service default/web:
/// spec changed`). Outside such a scope writes are planned with an empty reason.
pub async fn with_reason<F: Future>(reason: impl Into<String>, fut: F) -> F::Output {
    REASON.scope(reason.into(), fut).await
}

impl PlannedWrites {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Records a write; `true` when it is new (not planned before), the moment to log it once.
    pub fn record(
        &self,
        api: Api,
        operation: String,
        object: String,
        body: Option<String>,
    ) -> bool {
        let now = jiff::Timestamp::now().to_string();
        let reason = REASON.try_with(Clone::clone).unwrap_or_default();
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        let key = (api, operation.clone(), object.clone());
        if let Some(e) = entries.get_mut(&key) {
            e.count += 1;
            e.last_seen = now;
            return false;
        }
        let body = body.map(|mut b| {
            if b.len() > MAX_BODY {
                let cut = (0..=MAX_BODY)
                    .rev()
                    .find(|i| b.is_char_boundary(*i))
                    .unwrap_or(0);
                b.truncate(cut);
                b.push('…');
            }
            b
        });
        tracing::info!(
            api = ?api,
            %operation,
            %object,
            %reason,
            "shadow mode: planned write (not made)"
        );
        entries.insert(
            key,
            PlannedWrite {
                api,
                operation,
                object,
                reason,
                body,
                first_seen: now.clone(),
                last_seen: now,
                count: 1,
            },
        );
        true
    }

    /// Every planned write, oldest first.
    pub fn entries(&self) -> Vec<PlannedWrite> {
        let mut all: Vec<PlannedWrite> = self
            .entries
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .cloned()
            .collect();
        all.sort_by(|a, b| a.first_seen.cmp(&b.first_seen));
        all
    }

    /// Distinct planned writes per (api, operation), for the metric.
    pub fn counts(&self) -> BTreeMap<(Api, String), u64> {
        let mut out = BTreeMap::new();
        for (api, operation, _) in self
            .entries
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .keys()
        {
            *out.entry((*api, operation.clone())).or_default() += 1;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_write_planned_again_counts_instead_of_growing_the_plan() {
        let plan = PlannedWrites::new();
        let op = || "POST /load_balancers/{id}/actions/update_service".to_string();
        let first = with_reason("Service default/web: spec changed", async {
            plan.record(
                Api::Cloud,
                op(),
                "/load_balancers/1/actions/update_service".into(),
                Some("{}".into()),
            )
        })
        .await;
        assert!(first);
        assert!(!plan.record(
            Api::Cloud,
            op(),
            "/load_balancers/1/actions/update_service".into(),
            None
        ));
        assert!(plan.record(
            Api::Kubernetes,
            "DELETE nodes".into(),
            "Node n-1".into(),
            None
        ));
        let entries = plan.entries();
        assert_eq!(entries.len(), 2);
        assert_eq!(entries[0].count, 2);
        assert_eq!(entries[0].reason, "Service default/web: spec changed");
        assert_eq!(entries[1].reason, "", "no reason outside a scope");
        assert_eq!(plan.counts()[&(Api::Cloud, op())], 1);
    }

    #[test]
    fn long_bodies_are_cut() {
        let plan = PlannedWrites::new();
        plan.record(
            Api::Cloud,
            "POST /x".into(),
            "/x".into(),
            Some("é".repeat(1000)),
        );
        let body = plan.entries()[0].body.clone().unwrap();
        assert!(body.len() <= MAX_BODY + '…'.len_utf8() && body.ends_with('…'));
    }
}
