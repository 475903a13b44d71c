//! The API's per-project token bucket: capacity = limit per hour, refilled at
//! limit/3600 tokens per second, every API response carries the three `RateLimit-*` headers.

use std::sync::Mutex;
use std::time::Instant;

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
}
