//! What this process last applied to each Service's load balancer, so a reconcile can tell which
//! cloud work (if any) it has to do: nothing, a target update, or a full ensure.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

/// The cloud work one reconcile needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Work {
    /// The Service is new to this process or its spec changed: full ensure, with events.
    Ensure,
    /// Nothing changed for a while: full ensure against a fresh read of the cloud, quiet unless it
    /// had to repair something.
    DriftCheck,
    /// Only the eligible node set changed: update the targets from the remembered load balancer.
    UpdateTargets,
    /// Nothing to do until the next drift check.
    Nothing,
    /// A drift check is due, but the cloud API budget is low: nothing now, ask again soon.
    DriftDeferred,
}

#[derive(Debug, Clone, Copy)]
struct Applied {
    spec: u64,
    nodes: u64,
    /// When a full ensure last succeeded (start of the drift-check period).
    ensured_at: Instant,
    /// This Service's drift-check period (jittered once, so checks of many Services spread out).
    period: Duration,
}

/// Per-Service record keyed by UID (a re-created Service is a new entry).
#[derive(Debug)]
pub struct AppliedSet {
    drift_period: Duration,
    entries: Mutex<HashMap<String, Applied>>,
}

impl AppliedSet {
    /// The drift-check period (before its jitter).
    pub fn drift_period(&self) -> Duration {
        self.drift_period
    }

    /// Drift checks run every `drift_period` (±10 % per Service).
    pub fn new(drift_period: Duration) -> Self {
        Self {
            drift_period,
            entries: Mutex::new(HashMap::new()),
        }
    }

    fn entries(&self) -> std::sync::MutexGuard<'_, HashMap<String, Applied>> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The work for a Service whose spec and node set hash to `spec` and `nodes` now.
    pub fn work(&self, uid: &str, spec: u64, nodes: u64) -> Work {
        self.work_within_budget(uid, spec, nodes, || true)
    }

    /// As [`work`](Self::work), asking `drift_allowed` when a drift check is due: when it says
    /// no, a changed node set is still followed (a leaving node's target cannot wait).
    pub fn work_within_budget(
        &self,
        uid: &str,
        spec: u64,
        nodes: u64,
        drift_allowed: impl FnOnce() -> bool,
    ) -> Work {
        let entries = self.entries();
        let Some(a) = entries.get(uid) else {
            return Work::Ensure;
        };
        let drift_due = a.ensured_at.elapsed() >= a.period;
        if a.spec != spec {
            Work::Ensure
        } else if drift_due && drift_allowed() {
            Work::DriftCheck
        } else if a.nodes != nodes {
            Work::UpdateTargets
        } else if drift_due {
            Work::DriftDeferred
        } else {
            Work::Nothing
        }
    }

    /// Records a successful full ensure.
    pub fn ensured(&self, uid: &str, spec: u64, nodes: u64) {
        let jitter = 0.9 + fastrand::f64() * 0.2;
        let period = self.drift_period.mul_f64(jitter);
        self.entries().insert(
            uid.to_string(),
            Applied {
                spec,
                nodes,
                ensured_at: Instant::now(),
                period,
            },
        );
    }

    /// Records a successful target update.
    pub fn targets_updated(&self, uid: &str, nodes: u64) {
        if let Some(a) = self.entries().get_mut(uid) {
            a.nodes = nodes;
        }
    }

    /// How old a read of its load balancer a drift check may compare against: half the period, so
    /// the checks of every Service share about two lists of all load balancers per period (their
    /// jitter spreads them over it) instead of a read each.
    pub fn drift_read_age(&self) -> Duration {
        self.drift_period / 2
    }

    /// Time until the Service's next drift check.
    pub fn next_check_in(&self, uid: &str) -> Duration {
        self.entries()
            .get(uid)
            .map(|a| a.period.saturating_sub(a.ensured_at.elapsed()))
            .unwrap_or(self.drift_period)
    }

    /// Forgets a Service (deleted, or no longer ours): the next time it is seen, it is ensured.
    pub fn forget(&self, uid: &str) -> bool {
        self.entries().remove(uid).is_some()
    }

    /// Number of Services with an ensured load balancer.
    pub fn len(&self) -> usize {
        self.entries().len()
    }

    /// No Service has an ensured load balancer.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_changed_node_only_and_quiet() {
        let a = AppliedSet::new(Duration::from_secs(600));
        assert_eq!(a.work("u", 1, 1), Work::Ensure);
        a.ensured("u", 1, 1);
        assert_eq!(a.work("u", 1, 1), Work::Nothing);
        assert_eq!(a.work("u", 2, 1), Work::Ensure);
        assert_eq!(a.work("u", 1, 2), Work::UpdateTargets);
        a.targets_updated("u", 2);
        assert_eq!(a.work("u", 1, 2), Work::Nothing);
        let next = a.next_check_in("u");
        assert!(next > Duration::from_secs(500) && next <= Duration::from_secs(660));
        assert!(a.forget("u"));
        assert_eq!(a.work("u", 1, 2), Work::Ensure);
    }

    #[test]
    fn drift_check_when_the_period_is_over() {
        let a = AppliedSet::new(Duration::ZERO);
        a.ensured("u", 1, 1);
        assert_eq!(a.work("u", 1, 1), Work::DriftCheck);
        // A spec change still wins: it gets the loud ensure.
        assert_eq!(a.work("u", 2, 1), Work::Ensure);
    }

    #[test]
    fn a_deferred_drift_check_still_follows_the_node_set() {
        let a = AppliedSet::new(Duration::ZERO);
        a.ensured("u", 1, 1);
        let low = || false;
        assert_eq!(a.work_within_budget("u", 1, 1, low), Work::DriftDeferred);
        assert_eq!(a.work_within_budget("u", 1, 2, low), Work::UpdateTargets);
        assert_eq!(a.work_within_budget("u", 2, 2, low), Work::Ensure);
        assert_eq!(a.work_within_budget("u", 1, 1, || true), Work::DriftCheck);
    }
}
