//! Per-object exponential backoff after failures, the one policy every controller uses with its own
//! figures: a failed object waits `first`, then twice as long after each further failure, up to
//! `max`; a success forgets it. Kept per object, so one broken Node or Service never slows the
//! others.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// How long to wait after the n-th failure in a row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// Wait after the first failure (doubled after each further one).
    pub first: Duration,
    /// Longest wait.
    pub max: Duration,
    /// Retry the first failure at once (the next pass), starting the doubling with the second.
    pub first_retry_immediate: bool,
}

impl Backoff {
    /// `first`, doubling, up to `max`.
    pub const fn new(first: Duration, max: Duration) -> Self {
        Self {
            first,
            max,
            first_retry_immediate: false,
        }
    }

    /// The first failure is retried at the next pass; then as [`Backoff::new`] from the second,
    /// counted as if it were the second doubling (`first` × 2).
    pub const fn after_one_free_retry(first: Duration, max: Duration) -> Self {
        Self {
            first,
            max,
            first_retry_immediate: true,
        }
    }

    /// The wait after failure number `attempt` (1 for the first).
    pub fn delay(&self, attempt: u32) -> Duration {
        if attempt <= 1 && self.first_retry_immediate {
            return Duration::ZERO;
        }
        let doublings = attempt.saturating_sub(1).min(20);
        self.first.saturating_mul(1 << doublings).min(self.max)
    }
}

/// Failures in a row per object, and when each may be tried again.
#[derive(Debug)]
pub struct PerObject<K> {
    policy: Backoff,
    entries: Mutex<HashMap<K, (u32, Instant)>>,
}

impl<K: Eq + Hash> PerObject<K> {
    /// No object failing yet.
    pub fn new(policy: Backoff) -> Self {
        Self {
            policy,
            entries: Mutex::new(HashMap::new()),
        }
    }

    fn entries(&self) -> MutexGuard<'_, HashMap<K, (u32, Instant)>> {
        // A panic elsewhere while holding the lock leaves a map that is still consistent.
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records a failure of `key`: returns how many in a row and how long it should wait.
    pub fn failed(&self, key: K) -> (u32, Duration) {
        let mut entries = self.entries();
        let entry = entries.entry(key).or_insert((0, Instant::now()));
        entry.0 = entry.0.saturating_add(1);
        let delay = self.policy.delay(entry.0);
        entry.1 = Instant::now() + delay;
        (entry.0, delay)
    }

    /// Forgets `key`'s failures.
    pub fn succeeded(&self, key: &K) {
        self.entries().remove(key);
    }

    /// Whether `key` failed and its wait has not passed yet.
    pub fn waiting(&self, key: &K) -> bool {
        self.entries()
            .get(key)
            .is_some_and(|(_, until)| Instant::now() < *until)
    }

    /// When the first waiting object may be tried again.
    pub fn earliest_retry(&self) -> Option<Instant> {
        self.entries().values().map(|(_, at)| *at).min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn doubles_from_first_up_to_max() {
        let b = Backoff::new(5 * S, 300 * S);
        let delays: Vec<u64> = (1..=8).map(|n| b.delay(n).as_secs()).collect();
        assert_eq!(delays, [5, 10, 20, 40, 80, 160, 300, 300]);
        assert_eq!(b.delay(u32::MAX), 300 * S);
    }

    #[test]
    fn a_free_first_retry_then_doubling() {
        let b = Backoff::after_one_free_retry(S, 300 * S);
        let delays: Vec<u64> = (1..=11).map(|n| b.delay(n).as_secs()).collect();
        assert_eq!(delays, [0, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300]);
    }

    #[test]
    fn per_object_counts_waits_and_forgets() {
        let p = PerObject::new(Backoff::new(60 * S, 300 * S));
        assert!(!p.waiting(&"a"));
        assert_eq!(p.failed("a"), (1, 60 * S));
        assert_eq!(p.failed("a"), (2, 120 * S));
        assert!(p.waiting(&"a") && !p.waiting(&"b"));
        assert!(p.earliest_retry().is_some());
        p.succeeded(&"a");
        assert!(!p.waiting(&"a"));
        assert_eq!(p.failed("a"), (1, 60 * S));
    }
}
