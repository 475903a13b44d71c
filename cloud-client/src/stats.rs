//! API call accounting for the controllers' Prometheus metrics, without a prometheus dependency here.
//!
//! Two ways to read it: pull ([`ClientStats::snapshot`], e.g. from a custom collector at scrape time) or
//! push ([`ApiObserver`], called synchronously after every HTTP response, e.g. to bump a counter family).

use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

/// Key of the per-endpoint call counter (labels of `cloud_api_requests_total`-style metrics).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CallKey {
    /// `GET`, `POST`, ...
    pub method: String,
    /// Path template, e.g. `/servers/{id}` (never a concrete id, so cardinality stays bounded).
    pub endpoint: String,
    /// HTTP status; 0 when no response arrived (transport error/timeout).
    pub status: u16,
}

/// Rate-limit budget as last reported by the cloud.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimitSnapshot {
    /// Requests per hour (`RateLimit-Limit`).
    pub limit: i64,
    /// Requests left (`RateLimit-Remaining`).
    pub remaining: i64,
    /// UNIX time when the budget is full again (`RateLimit-Reset`).
    pub reset_unix: i64,
}

/// Point-in-time copy of all counters.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StatsSnapshot {
    /// Calls by (method, endpoint template, status). Monotonic.
    pub calls: BTreeMap<CallKey, u64>,
    /// Last seen rate-limit headers, `None` before the first response carrying them.
    pub rate_limit: Option<RateLimitSnapshot>,
    /// Responses with HTTP 429.
    pub rate_limited: u64,
    /// Retries performed (any retryable error).
    pub retries: u64,
    /// Times a request was delayed client-side to protect the remaining budget.
    pub paced: u64,
    /// `GET /actions` polls.
    pub action_polls: u64,
    /// Durations of answered requests by method, in [`LATENCY_BUCKETS`].
    pub latency: BTreeMap<String, Latency>,
    /// Requests on the wire right now.
    pub in_flight: i64,
    /// Provider operations by HCCM's name for them (e.g. `hcloud/instancesv2.InstanceMetadata`).
    pub operations: BTreeMap<&'static str, u64>,
}

/// Upper bounds of the request-duration buckets, in seconds: Prometheus's default buckets, which
/// hcloud-go's `hcloud_api_request_duration_seconds` uses.
pub const LATENCY_BUCKETS: [f64; 11] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// A request-duration histogram.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Latency {
    /// Observations at or below each bound of [`LATENCY_BUCKETS`] (not cumulative).
    pub buckets: [u64; LATENCY_BUCKETS.len()],
    /// All observations, including those above the last bound.
    pub count: u64,
    /// Their sum, in seconds.
    pub sum: f64,
}

impl Latency {
    fn observe(&mut self, seconds: f64) {
        if let Some(i) = LATENCY_BUCKETS.iter().position(|b| seconds <= *b) {
            self.buckets[i] += 1;
        }
        self.count += 1;
        self.sum += seconds;
    }
}

impl StatsSnapshot {
    /// Total calls to `method endpoint` with any status.
    pub fn calls_to(&self, method: &str, endpoint: &str) -> u64 {
        self.calls
            .iter()
            .filter(|(k, _)| k.method == method && k.endpoint == endpoint)
            .map(|(_, v)| v)
            .sum()
    }

    /// Total calls of any kind.
    pub fn total_calls(&self) -> u64 {
        self.calls.values().sum()
    }
}

/// Push-style hook, called after every HTTP exchange. Implementations must be cheap and never block.
pub trait ApiObserver: Send + Sync {
    /// One HTTP exchange finished (`status` 0 = no response).
    fn on_request(&self, _key: &CallKey, _elapsed: Duration) {}
    /// The cloud reported its rate-limit budget.
    fn on_rate_limit(&self, _rl: RateLimitSnapshot) {}
}

/// Shared counters of one cloud client. Cheap to clone via `Arc`.
#[derive(Default)]
pub struct ClientStats {
    calls: Mutex<BTreeMap<CallKey, u64>>,
    rl_limit: AtomicI64,
    rl_remaining: AtomicI64,
    rl_reset: AtomicI64,
    rl_seen: AtomicU64,
    /// When the last `RateLimit-*` headers arrived (for [`ClientStats::budget_left`]).
    rl_seen_at: Mutex<Option<std::time::Instant>>,
    rate_limited: AtomicU64,
    retries: AtomicU64,
    paced: AtomicU64,
    action_polls: AtomicU64,
    latency: Mutex<BTreeMap<String, Latency>>,
    in_flight: AtomicI64,
    operations: Mutex<BTreeMap<&'static str, u64>>,
    observer: OnceLock<Arc<dyn ApiObserver>>,
}

impl fmt::Debug for ClientStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientStats")
            .field("snapshot", &self.snapshot())
            .finish()
    }
}

impl ClientStats {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Install the push observer. Only the first call wins (returns false afterwards).
    pub fn set_observer(&self, observer: Arc<dyn ApiObserver>) -> bool {
        self.observer.set(observer).is_ok()
    }

    /// Copy of all counters.
    pub fn snapshot(&self) -> StatsSnapshot {
        let rate_limit = (self.rl_seen.load(Ordering::Relaxed) > 0).then(|| RateLimitSnapshot {
            limit: self.rl_limit.load(Ordering::Relaxed),
            remaining: self.rl_remaining.load(Ordering::Relaxed),
            reset_unix: self.rl_reset.load(Ordering::Relaxed),
        });
        StatsSnapshot {
            calls: self.calls.lock().map(|c| c.clone()).unwrap_or_default(),
            rate_limit,
            rate_limited: self.rate_limited.load(Ordering::Relaxed),
            retries: self.retries.load(Ordering::Relaxed),
            paced: self.paced.load(Ordering::Relaxed),
            action_polls: self.action_polls.load(Ordering::Relaxed),
            latency: self.latency.lock().map(|l| l.clone()).unwrap_or_default(),
            in_flight: self.in_flight.load(Ordering::Relaxed),
            operations: self
                .operations
                .lock()
                .map(|o| o.clone())
                .unwrap_or_default(),
        }
    }

    /// Counts one provider operation under HCCM's name for it
    /// (`cloud_controller_manager_operations_total{op}`).
    pub fn record_operation(&self, op: &'static str) {
        if let Ok(mut o) = self.operations.lock() {
            *o.entry(op).or_default() += 1;
        }
    }

    /// Marks a request as on the wire until the guard drops.
    pub(crate) fn in_flight(&self) -> InFlight<'_> {
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        InFlight(&self.in_flight)
    }

    /// The share of the rate-limit budget left now (0.0 to 1.0): the last reported remainder
    /// plus what the budget refilled since (the limit spread over an hour, as Hetzner refills
    /// it). `None` before any response carried the headers.
    pub fn budget_left(&self) -> Option<f64> {
        let seen_at = (*self.rl_seen_at.lock().ok()?)?;
        let limit = self.rl_limit.load(Ordering::Relaxed) as f64;
        if limit <= 0.0 {
            return None;
        }
        let remaining = self.rl_remaining.load(Ordering::Relaxed) as f64;
        let refilled = seen_at.elapsed().as_secs_f64() * limit / 3600.0;
        Some(((remaining + refilled) / limit).clamp(0.0, 1.0))
    }

    /// Remaining rate-limit budget as last reported, if any response carried it.
    pub fn remaining_budget(&self) -> Option<i64> {
        self.snapshot().rate_limit.map(|r| r.remaining)
    }

    pub(crate) fn record_call(&self, method: &str, endpoint: &str, status: u16, elapsed: Duration) {
        let key = CallKey {
            method: method.to_string(),
            endpoint: endpoint.to_string(),
            status,
        };
        if status == 429 {
            self.rate_limited.fetch_add(1, Ordering::Relaxed);
        }
        if let Some(o) = self.observer.get() {
            o.on_request(&key, elapsed);
        }
        if status != 0
            && let Ok(mut l) = self.latency.lock()
        {
            l.entry(key.method.clone())
                .or_default()
                .observe(elapsed.as_secs_f64());
        }
        if let Ok(mut c) = self.calls.lock() {
            *c.entry(key).or_default() += 1;
        }
    }

    pub(crate) fn record_rate_limit(&self, rl: RateLimitSnapshot) {
        self.rl_limit.store(rl.limit, Ordering::Relaxed);
        self.rl_remaining.store(rl.remaining, Ordering::Relaxed);
        self.rl_reset.store(rl.reset_unix, Ordering::Relaxed);
        self.rl_seen.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut at) = self.rl_seen_at.lock() {
            *at = Some(std::time::Instant::now());
        }
        if let Some(o) = self.observer.get() {
            o.on_rate_limit(rl);
        }
    }

    pub(crate) fn record_retry(&self) {
        self.retries.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn record_paced(&self) {
        self.paced.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn record_action_poll(&self) {
        self.action_polls.fetch_add(1, Ordering::Relaxed);
    }
}

/// A request on the wire (see [`ClientStats::in_flight`]).
pub(crate) struct InFlight<'a>(&'a AtomicI64);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;

    #[derive(Default)]
    struct Counting {
        requests: AtomicU64,
        last_remaining: AtomicI64,
    }

    impl ApiObserver for Counting {
        fn on_request(&self, key: &CallKey, _elapsed: Duration) {
            assert_eq!(key.endpoint, "/servers/{id}");
            self.requests.fetch_add(1, Ordering::Relaxed);
        }
        fn on_rate_limit(&self, rl: RateLimitSnapshot) {
            self.last_remaining.store(rl.remaining, Ordering::Relaxed);
        }
    }

    #[test]
    fn snapshot_and_observer_see_the_same_calls() {
        let stats = ClientStats::new();
        let obs = Arc::new(Counting::default());
        assert!(stats.set_observer(obs.clone()));
        assert!(!stats.set_observer(obs.clone()));
        assert_eq!(stats.remaining_budget(), None);
        stats.record_call("GET", "/servers/{id}", 200, Duration::from_millis(3));
        stats.record_call("GET", "/servers/{id}", 429, Duration::from_millis(20));
        stats.record_rate_limit(RateLimitSnapshot {
            limit: 3600,
            remaining: 17,
            reset_unix: 1,
        });
        let s = stats.snapshot();
        assert_eq!(s.calls_to("GET", "/servers/{id}"), 2);
        assert_eq!(s.total_calls(), 2);
        assert_eq!(s.rate_limited, 1);
        assert_eq!(stats.remaining_budget(), Some(17));
        assert_eq!(obs.requests.load(Ordering::Relaxed), 2);
        let get = &s.latency["GET"];
        assert_eq!((get.count, get.buckets[0], get.buckets[2]), (2, 1, 1));
        {
            let _a = stats.in_flight();
            let _b = stats.in_flight();
            assert_eq!(stats.snapshot().in_flight, 2);
        }
        assert_eq!(stats.snapshot().in_flight, 0);
        assert_eq!(obs.last_remaining.load(Ordering::Relaxed), 17);
    }
}
