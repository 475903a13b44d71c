//! Work that can wait, deferred while the project's API budget is low.
//!
//! The budget (Hetzner: 3600 calls an hour, refilled one a second) is shared by everything that
//! holds the project's token: these controllers, the cluster autoscaler, the CSI driver, DNS
//! tools. Below `--api-budget-floor` (a percentage of the limit, 20 by default) the periodic work
//! that only confirms what is already known waits: the address sync, drift checks and the route
//! controller's safety resync. What cannot wait (a new Node's initialization, a new or changed
//! load balancer, a leaving Node's target, a new Node's route) is never deferred, so it gets the
//! calls that are left. Each kind logs when its deferral starts and ends, and every deferred run
//! counts in `cloud_controllers_deferred_work_total{kind}`; `cloud_controllers_api_budget_low` is
//! 1 while the budget is below the floor.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cloud_client::ClientStats;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// How soon deferred work asks again (the budget refills about 1 % of Hetzner's limit a minute).
pub const ASK_AGAIN_AFTER: Duration = Duration::from_secs(60);

/// How soon work the cloud refused for the rate limit is tried again: not backed off further with
/// each refusal (the request was fine; the client's limiter paces it to the refill), so urgent
/// work is served as soon as tokens come back, even while another client of the project spends
/// most of them.
pub const RATE_LIMITED_RETRY: Duration = Duration::from_secs(5);

/// Periodic work that only confirms what is known, and can wait for the budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Deferrable {
    /// node-controller's periodic address refresh of initialized Nodes.
    AddressSync,
    /// service-controller's periodic comparison of a load balancer with its Service.
    DriftCheck,
    /// route-controller's periodic re-read of the routes (catches routes changed behind its back).
    RouteResync,
}

impl Deferrable {
    /// The `kind` label and the log's word for it.
    pub fn as_str(self) -> &'static str {
        match self {
            Deferrable::AddressSync => "address_sync",
            Deferrable::DriftCheck => "drift_check",
            Deferrable::RouteResync => "route_resync",
        }
    }
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabels {
    kind: &'static str,
}

/// Says whether deferrable work may run now. Cheap to clone.
#[derive(Clone)]
pub struct ApiBudget {
    inner: Arc<Inner>,
}

struct Inner {
    stats: Option<Arc<ClientStats>>,
    /// Share of the limit below which deferrable work waits (0: never).
    floor: f64,
    /// Kinds deferred at their last ask (for the start and end log lines).
    deferring: Mutex<BTreeSet<Deferrable>>,
    deferred: Family<KindLabels, Counter>,
    low: Gauge,
}

impl std::fmt::Debug for ApiBudget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiBudget")
            .field("floor", &self.inner.floor)
            .finish_non_exhaustive()
    }
}

impl ApiBudget {
    /// Defers below `floor_percent` of the limit `stats` reports; registers its metrics.
    pub fn new(stats: Arc<ClientStats>, floor_percent: u8, registry: &mut Registry) -> Self {
        let budget = Self::with(Some(stats), floor_percent);
        registry.register(
            "deferred_work",
            "Periodic runs put off because the cloud API budget was below --api-budget-floor, by kind",
            budget.inner.deferred.clone(),
        );
        registry.register(
            "api_budget_low",
            "1 while the cloud API budget is below --api-budget-floor (periodic work waits)",
            budget.inner.low.clone(),
        );
        budget
    }

    /// Never defers (tests, and controllers without a cloud).
    pub fn unlimited() -> Self {
        Self::with(None, 0)
    }

    fn with(stats: Option<Arc<ClientStats>>, floor_percent: u8) -> Self {
        Self {
            inner: Arc::new(Inner {
                stats,
                floor: f64::from(floor_percent.min(100)) / 100.0,
                deferring: Mutex::new(BTreeSet::new()),
                deferred: Family::default(),
                low: Gauge::default(),
            }),
        }
    }

    /// Whether `kind` may run now: not while the budget left is below the floor. Logs when a
    /// kind's deferral starts and ends, and counts each deferred run.
    pub fn allows(&self, kind: Deferrable) -> bool {
        let inner = &self.inner;
        let left = inner.stats.as_ref().and_then(|s| s.budget_left());
        let low = inner.floor > 0.0 && left.is_some_and(|left| left < inner.floor);
        inner.low.set(i64::from(low));
        let mut deferring = inner.deferring.lock().unwrap_or_else(|e| e.into_inner());
        let percent = left.map_or(100.0, |l| l * 100.0);
        if low {
            inner
                .deferred
                .get_or_create(&KindLabels {
                    kind: kind.as_str(),
                })
                .inc();
            if deferring.insert(kind) {
                tracing::warn!(
                    kind = kind.as_str(),
                    budget_left_percent = format!("{percent:.0}"),
                    floor_percent = format!("{:.0}", inner.floor * 100.0),
                    "cloud API budget low: deferring {} until it recovers (urgent work goes on)",
                    kind.as_str()
                );
            }
        } else if deferring.remove(&kind) {
            tracing::info!(
                kind = kind.as_str(),
                budget_left_percent = format!("{percent:.0}"),
                "cloud API budget recovered: {} runs again",
                kind.as_str()
            );
        }
        !low
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_a_reported_budget_nothing_waits() {
        let mut registry = Registry::default();
        let budget = ApiBudget::new(ClientStats::new(), 20, &mut registry);
        assert!(budget.allows(Deferrable::DriftCheck));
        assert!(ApiBudget::unlimited().allows(Deferrable::AddressSync));
    }
}
