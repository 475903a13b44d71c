//! Client-side view of the project's rate-limit budget, driven by the `RateLimit-*` response headers.
//!
//! Why: the budget (3600/h, refilling 1/s) is shared by every controller and tool of the project;
//! firing into 429s wastes time and budget. We keep an estimate of the remaining tokens, spend them
//! freely while above a small reserve, and below it space requests by the refill rate.

use std::sync::Mutex;
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use crate::stats::RateLimitSnapshot;

#[derive(Debug)]
pub(crate) struct RateLimiter {
    state: Mutex<State>,
    /// Wakes callers queued behind the first ("probe") request while the budget is still unknown.
    probe_done: Notify,
    reserve: f64,
}

#[derive(Debug)]
struct State {
    mode: Mode,
    /// Estimated tokens left after every request already let through.
    tokens: f64,
    /// Tokens per second.
    rate: f64,
    limit: f64,
    updated: Instant,
    /// Requests let through whose response has not arrived yet.
    in_flight: u64,
    /// The answers carry no (readable) `RateLimit-*` headers, so the budget is Hetzner's
    /// documented one (said once, in the log).
    assumed: bool,
}

/// Hetzner's documented budget: 3600 requests an hour per project, refilled one a second. Paced
/// by when the answers do not say (a proxy that drops the headers, an API that changed them).
const DOCUMENTED_LIMIT: f64 = 3600.0;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// No response seen yet: let one request through to learn the budget.
    Unknown { probing: bool },
    /// Headers seen (or the documented budget assumed): pace by the estimate.
    Known,
}

/// What the limiter decided for one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Permit {
    /// How long the caller was (or must be) delayed to protect the budget.
    pub waited: Duration,
}

impl RateLimiter {
    pub(crate) fn new(reserve: u32) -> Self {
        Self {
            state: Mutex::new(State {
                mode: Mode::Unknown { probing: false },
                tokens: 0.0,
                rate: 1.0,
                limit: DOCUMENTED_LIMIT,
                updated: Instant::now(),
                in_flight: 0,
                assumed: false,
            }),
            probe_done: Notify::new(),
            reserve: f64::from(reserve),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits until a request may be sent. Every `acquire` must be followed by exactly one
    /// [`complete`](Self::complete) (with or without headers).
    pub(crate) async fn acquire(&self) -> Permit {
        let started = Instant::now();
        loop {
            let notified = self.probe_done.notified();
            let delay = {
                let mut s = self.lock();
                match s.mode {
                    Mode::Unknown { probing: true } => None,
                    Mode::Unknown { probing: false } => {
                        s.mode = Mode::Unknown { probing: true };
                        s.in_flight += 1;
                        Some(Duration::ZERO)
                    }
                    Mode::Known => {
                        s.refill(Instant::now());
                        s.tokens -= 1.0;
                        s.in_flight += 1;
                        // Below the reserve each request books the next refilled token, so queued
                        // callers are spaced 1/rate apart instead of stampeding. Up to one refill
                        // of jitter on top: a client sharing the budget that asks at a steady
                        // pace would otherwise take every refilled token just before ours, for
                        // ever (our spacing locked to its phase).
                        let deficit = self.reserve - s.tokens;
                        if deficit > 0.0 {
                            let jitter = fastrand::f64();
                            Some(Duration::from_secs_f64(
                                ((deficit + jitter) / s.rate).min(3600.0),
                            ))
                        } else {
                            Some(Duration::ZERO)
                        }
                    }
                }
            };
            match delay {
                Some(d) if d.is_zero() => {
                    return Permit {
                        waited: started.elapsed(),
                    };
                }
                Some(d) => {
                    tokio::time::sleep(d).await;
                    return Permit {
                        waited: started.elapsed(),
                    };
                }
                None => notified.await,
            }
        }
    }

    /// Records a request that got no response (transport error, timeout): nothing was learned, so a
    /// failed probe hands the probing role to the next caller.
    pub(crate) fn abandon(&self) {
        let mut s = self.lock();
        s.in_flight = s.in_flight.saturating_sub(1);
        let was_probe = matches!(s.mode, Mode::Unknown { .. });
        if was_probe {
            s.mode = Mode::Unknown { probing: false };
        }
        drop(s);
        if was_probe {
            self.probe_done.notify_waiters();
        }
    }

    /// Records the end of a request. `headers` = the parsed `RateLimit-*` values, if the response had them.
    /// `rate_limited` = the response was a 429.
    pub(crate) fn complete(&self, headers: Option<RateLimitSnapshot>, rate_limited: bool) {
        let now = Instant::now();
        let mut s = self.lock();
        s.in_flight = s.in_flight.saturating_sub(1);
        let was_probe = matches!(s.mode, Mode::Unknown { .. });
        match headers {
            Some(h) => {
                s.limit = h.limit.max(1) as f64;
                s.rate = s.limit / 3600.0;
                // The server's count is the truth (other clients share the budget); requests still in
                // flight will consume from it too.
                let remaining = if rate_limited {
                    0.0
                } else {
                    h.remaining as f64
                };
                s.tokens = remaining - s.in_flight as f64;
                s.updated = now;
                s.mode = Mode::Known;
                s.assumed = false;
            }
            // Never unpaced: without the server's word, the documented budget, full, is the
            // estimate (bursts stay within what the project may spend in an hour).
            None if was_probe && !rate_limited => {
                if !s.assumed {
                    tracing::warn!(
                        "the cloud's answers carry no readable RateLimit-Limit/-Remaining/-Reset \
                         headers: pacing requests by the documented budget, 3600 an hour"
                    );
                }
                s.limit = DOCUMENTED_LIMIT;
                s.rate = DOCUMENTED_LIMIT / 3600.0;
                s.tokens = DOCUMENTED_LIMIT - s.in_flight as f64;
                s.updated = now;
                s.mode = Mode::Known;
                s.assumed = true;
            }
            None if was_probe => s.mode = Mode::Unknown { probing: false },
            None => {
                if rate_limited {
                    s.refill(now);
                    s.tokens = s.tokens.min(0.0);
                }
            }
        }
        drop(s);
        if was_probe {
            self.probe_done.notify_waiters();
        }
    }

    /// Estimated remaining budget (None before the first response).
    #[cfg(test)]
    pub(crate) fn estimate(&self) -> Option<f64> {
        let mut s = self.lock();
        if s.mode != Mode::Known {
            return None;
        }
        s.refill(Instant::now());
        Some(s.tokens)
    }
}

impl State {
    fn refill(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.updated).as_secs_f64();
        self.tokens = (self.tokens + elapsed * self.rate).min(self.limit);
        self.updated = now;
    }
}

/// Parses `RateLimit-Limit/Remaining/Reset`; all three must be present, numeric and agree (a
/// positive limit, a remaining count between 0 and it). Anything else is no word at all.
pub(crate) fn parse_headers(h: &reqwest::header::HeaderMap) -> Option<RateLimitSnapshot> {
    let num = |name: &str| h.get(name)?.to_str().ok()?.trim().parse::<i64>().ok();
    let snapshot = RateLimitSnapshot {
        limit: num("ratelimit-limit")?,
        remaining: num("ratelimit-remaining")?,
        reset_unix: num("ratelimit-reset")?,
    };
    (snapshot.limit > 0 && (0..=snapshot.limit).contains(&snapshot.remaining)).then_some(snapshot)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hdr(limit: i64, remaining: i64) -> Option<RateLimitSnapshot> {
        Some(RateLimitSnapshot {
            limit,
            remaining,
            reset_unix: 0,
        })
    }

    #[tokio::test(start_paused = true)]
    async fn first_request_probes_then_paces_below_reserve() {
        let rl = std::sync::Arc::new(RateLimiter::new(2));
        let p = rl.acquire().await;
        assert!(p.waited.is_zero());
        // A second caller must wait for the probe's answer.
        let rl2 = rl.clone();
        let second = tokio::spawn(async move { rl2.acquire().await });
        tokio::task::yield_now().await;
        assert!(!second.is_finished());
        rl.complete(hdr(3600, 5), false);
        let p2 = second.await.unwrap();
        assert!(p2.waited.is_zero());
        rl.complete(hdr(3600, 4), false);
        // 4 left, reserve 2: two more immediately, then 1/s spacing.
        assert!(rl.acquire().await.waited.is_zero());
        assert!(rl.acquire().await.waited.is_zero());
        let t = rl.acquire().await;
        assert!(t.waited >= Duration::from_millis(900), "{t:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_probe_lets_the_next_caller_probe() {
        let rl = std::sync::Arc::new(RateLimiter::new(2));
        rl.acquire().await;
        let rl2 = rl.clone();
        let second = tokio::spawn(async move { rl2.acquire().await });
        tokio::task::yield_now().await;
        assert!(!second.is_finished());
        rl.abandon();
        second.await.unwrap();
        // Still unknown: a third caller waits for the second probe.
        let rl3 = rl.clone();
        let third = tokio::spawn(async move { rl3.acquire().await });
        tokio::task::yield_now().await;
        assert!(!third.is_finished());
        rl.complete(hdr(3600, 100), false);
        third.await.unwrap();
        assert!(rl.estimate().is_some());
    }

    #[tokio::test(start_paused = true)]
    async fn no_headers_means_the_documented_budget_never_an_unbounded_burst() {
        let rl = RateLimiter::new(2);
        rl.acquire().await;
        rl.complete(None, false);
        assert_eq!(rl.estimate(), Some(3600.0));
        for _ in 0..3598 {
            assert!(rl.acquire().await.waited.is_zero());
            rl.complete(None, false);
        }
        let paced = rl.acquire().await;
        assert!(paced.waited >= Duration::from_millis(900), "{paced:?}");
    }

    #[test]
    fn headers_that_contradict_themselves_are_no_word_at_all() {
        let h = |limit: &str, remaining: &str| {
            let mut m = reqwest::header::HeaderMap::new();
            m.insert("ratelimit-limit", limit.parse().unwrap());
            m.insert("ratelimit-remaining", remaining.parse().unwrap());
            m.insert("ratelimit-reset", "1700000000".parse().unwrap());
            parse_headers(&m)
        };
        assert!(h("3600", "3599").is_some());
        for (limit, remaining) in [("3600", "4000"), ("0", "0"), ("3600", "-1"), ("x", "1")] {
            assert_eq!(h(limit, remaining), None, "{limit}/{remaining}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_429_empties_the_estimate() {
        let rl = RateLimiter::new(0);
        rl.acquire().await;
        rl.complete(hdr(3600, 100), false);
        rl.acquire().await;
        rl.complete(hdr(3600, 50), true);
        assert!(rl.estimate().unwrap() <= 0.01);
        let t = rl.acquire().await;
        assert!(t.waited >= Duration::from_millis(900));
    }
}
