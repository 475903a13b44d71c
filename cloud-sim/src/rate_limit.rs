//! The API's per-project token bucket: capacity = limit per hour, refilled at
//! limit/3600 tokens per second, every API response carries the three `RateLimit-*` headers.
//!
//! The Robot webservice limits differently ([`RobotRateLimiter`]): per user and resource, at most
//! `max_request` requests within any `interval` (a sliding window), and it sends no headers.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::clock::now_ms;

/// What the `RateLimit-*` headers say.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct RateLimitStatus {
    /// `RateLimit-Limit`: requests per hour.
    pub limit: u32,
    /// `RateLimit-Remaining`: whole requests left in the bucket.
    pub remaining: u32,
    /// `RateLimit-Reset`: unix timestamp (seconds) when the bucket is full again.
    pub reset: u64,
}

#[derive(Debug)]
pub struct RateLimiter {
    bucket: Mutex<Bucket>,
}

#[derive(Debug)]
struct Bucket {
    limit: u32,
    tokens: f64,
    refilled_at: Instant,
}

impl Bucket {
    fn refill(&mut self) {
        let now = Instant::now();
        let per_sec = f64::from(self.limit) / 3600.0;
        let elapsed = now.duration_since(self.refilled_at).as_secs_f64();
        self.tokens = (self.tokens + elapsed * per_sec).min(f64::from(self.limit));
        self.refilled_at = now;
    }

    fn status(&self) -> RateLimitStatus {
        let per_sec = f64::from(self.limit) / 3600.0;
        let missing = f64::from(self.limit) - self.tokens;
        let secs_to_full = if per_sec > 0.0 {
            (missing / per_sec).ceil()
        } else {
            0.0
        };
        RateLimitStatus {
            limit: self.limit,
            remaining: self.tokens.floor().max(0.0) as u32,
            reset: now_ms() / 1000 + secs_to_full.max(0.0) as u64,
        }
    }
}

impl RateLimiter {
    pub fn new(limit_per_hour: u32) -> Self {
        RateLimiter {
            bucket: Mutex::new(Bucket {
                limit: limit_per_hour,
                tokens: f64::from(limit_per_hour),
                refilled_at: Instant::now(),
            }),
        }
    }

    fn bucket(&self) -> std::sync::MutexGuard<'_, Bucket> {
        self.bucket.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes one token if there is one; the status is the one to put in the headers.
    pub fn try_acquire(&self) -> (bool, RateLimitStatus) {
        let mut b = self.bucket();
        b.refill();
        let allowed = b.tokens >= 1.0;
        if allowed {
            b.tokens -= 1.0;
        }
        (allowed, b.status())
    }

    pub fn status(&self) -> RateLimitStatus {
        let mut b = self.bucket();
        b.refill();
        b.status()
    }

    /// Changes the limit and/or the tokens left; tests use it to start "with 10 remaining".
    pub fn set(&self, limit_per_hour: Option<u32>, remaining: Option<u32>) {
        let mut b = self.bucket();
        b.refill();
        if let Some(limit) = limit_per_hour {
            b.limit = limit;
            b.tokens = b.tokens.min(f64::from(limit));
        }
        if let Some(remaining) = remaining {
            b.tokens = f64::from(remaining.min(b.limit));
        }
    }
}

/// One Robot resource's limit as `GET /_sim/robot/rate_limit` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RobotRateLimitStatus {
    /// `server` (`GET /server`, `GET /server/{n}`) or `reset` (`GET /reset/{n}`).
    pub resource: String,
    /// Requests allowed within `interval`; the `max_request` of a `RATE_LIMIT_EXCEEDED` error.
    pub max_request: u32,
    /// The window, in seconds; the `interval` of a `RATE_LIMIT_EXCEEDED` error.
    pub interval: u64,
    /// Requests counted within the current window.
    pub used: u32,
    pub remaining: u32,
    /// Seconds until the oldest counted request leaves the window (0 when none is counted).
    pub reset_in: u64,
}

/// The Robot webservice's limits: a sliding window per resource. The resources and their
/// default limits come from `SimConfig`; requests over the limit are refused and not counted.
#[derive(Debug)]
pub struct RobotRateLimiter {
    windows: Mutex<BTreeMap<String, Window>>,
}

#[derive(Debug)]
struct Window {
    max_request: u32,
    interval: Duration,
    /// When requests were counted, oldest first; one entry may stand for several requests
    /// (`set_remaining` fills the window with one entry, whatever the limit).
    hits: VecDeque<(Instant, u32)>,
}

impl Window {
    fn expire(&mut self, now: Instant) {
        while let Some(&(at, _)) = self.hits.front() {
            if now.duration_since(at) >= self.interval {
                self.hits.pop_front();
            } else {
                break;
            }
        }
    }

    fn used(&self) -> u32 {
        self.hits
            .iter()
            .fold(0u32, |sum, &(_, n)| sum.saturating_add(n))
    }

    fn status(&self, resource: &str, now: Instant) -> RobotRateLimitStatus {
        let used = self.used();
        let reset_in = self.hits.front().map_or(0, |&(at, _)| {
            (self.interval.saturating_sub(now.duration_since(at)))
                .as_secs_f64()
                .ceil() as u64
        });
        RobotRateLimitStatus {
            resource: resource.to_owned(),
            max_request: self.max_request,
            interval: self.interval.as_secs_f64().ceil() as u64,
            used,
            remaining: self.max_request.saturating_sub(used),
            reset_in,
        }
    }
}

impl RobotRateLimiter {
    /// `limits`: resource → requests per hour.
    pub fn new(limits: &[(&str, u32)]) -> Self {
        let windows = limits
            .iter()
            .map(|&(resource, per_hour)| {
                (
                    resource.to_owned(),
                    Window {
                        max_request: per_hour,
                        interval: Duration::from_secs(3600),
                        hits: VecDeque::new(),
                    },
                )
            })
            .collect();
        RobotRateLimiter {
            windows: Mutex::new(windows),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Window>> {
        self.windows.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Counts one request to `resource`; `Err` with the window's state when it is full. A
    /// resource without a limit is always allowed.
    pub fn try_acquire(&self, resource: &str) -> Result<(), RobotRateLimitStatus> {
        let now = Instant::now();
        let mut windows = self.lock();
        let Some(w) = windows.get_mut(resource) else {
            return Ok(());
        };
        w.expire(now);
        if w.used() >= w.max_request {
            return Err(w.status(resource, now));
        }
        match w.hits.back_mut() {
            Some((at, n)) if *at == now => *n += 1,
            _ => w.hits.push_back((now, 1)),
        }
        Ok(())
    }

    pub fn status(&self, resource: &str) -> Option<RobotRateLimitStatus> {
        let now = Instant::now();
        let mut windows = self.lock();
        let w = windows.get_mut(resource)?;
        w.expire(now);
        Some(w.status(resource, now))
    }

    pub fn statuses(&self) -> Vec<RobotRateLimitStatus> {
        let now = Instant::now();
        self.lock()
            .iter_mut()
            .map(|(resource, w)| {
                w.expire(now);
                w.status(resource, now)
            })
            .collect()
    }

    /// Changes a resource's limit, window and/or what is left of it now (`remaining` counts the
    /// missing requests as made now). `None` for an unknown resource.
    pub fn set(
        &self,
        resource: &str,
        max_request: Option<u32>,
        interval: Option<Duration>,
        remaining: Option<u32>,
    ) -> Option<RobotRateLimitStatus> {
        let now = Instant::now();
        let mut windows = self.lock();
        let w = windows.get_mut(resource)?;
        if let Some(max) = max_request {
            w.max_request = max;
        }
        if let Some(interval) = interval {
            w.interval = interval;
        }
        w.expire(now);
        if let Some(remaining) = remaining {
            w.hits.clear();
            let used = w.max_request.saturating_sub(remaining);
            if used > 0 {
                w.hits.push_back((now, used));
            }
        }
        Some(w.status(resource, now))
    }

    /// Forgets every counted request: all windows are empty again, limits stay.
    pub fn reset(&self) {
        for w in self.lock().values_mut() {
            w.hits.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empties_and_reports_reset() {
        let rl = RateLimiter::new(3600);
        rl.set(None, Some(2));
        assert!(rl.try_acquire().0);
        let (ok, st) = rl.try_acquire();
        assert!(ok);
        assert_eq!(st.remaining, 0);
        let (ok, st) = rl.try_acquire();
        assert!(!ok);
        assert_eq!(st.limit, 3600);
        // ~3600 s of refill are missing at one token per second.
        let now = now_ms() / 1000;
        assert!(st.reset >= now + 3590 && st.reset <= now + 3601, "{st:?}");
    }

    #[test]
    fn robot_window_fills_slides_and_resets() {
        let rl = RobotRateLimiter::new(&[("server", 3), ("reset", 5)]);
        assert!(rl.try_acquire("server").is_ok());
        assert!(rl.try_acquire("server").is_ok());
        assert!(rl.try_acquire("server").is_ok());
        let full = rl.try_acquire("server").unwrap_err();
        assert_eq!(
            (full.max_request, full.interval, full.used, full.remaining),
            (3, 3600, 3, 0)
        );
        assert!(full.reset_in > 3590 && full.reset_in <= 3600, "{full:?}");
        // Refused requests are not counted, other resources are independent.
        assert_eq!(rl.status("server").unwrap().used, 3);
        assert!(rl.try_acquire("reset").is_ok());
        assert!(rl.try_acquire("unlimited").is_ok());
        rl.reset();
        assert_eq!(rl.status("server").unwrap().remaining, 3);
        // A short window lets requests age out.
        rl.set("server", Some(1), Some(Duration::from_millis(30)), None);
        assert!(rl.try_acquire("server").is_ok());
        assert!(rl.try_acquire("server").is_err());
        std::thread::sleep(Duration::from_millis(40));
        assert!(rl.try_acquire("server").is_ok());
        // "remaining" pretends the missing requests were just made.
        let st = rl
            .set("reset", Some(1000), Some(Duration::from_secs(60)), Some(2))
            .unwrap();
        assert_eq!((st.used, st.remaining), (998, 2));
        assert!(rl.try_acquire("reset").is_ok());
        assert!(rl.try_acquire("reset").is_ok());
        assert!(rl.try_acquire("reset").is_err());
        assert!(rl.set("nope", Some(1), None, None).is_none());
    }
}
