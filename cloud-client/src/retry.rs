//! How long a client waits before it tries a failed request again: the policy and the backoff
//! every provider's transport shares. Which failures are worth another attempt is the provider's
//! own question (its error codes, which of its requests are idempotent).

use std::time::Duration;

/// Client-side retry policy for retryable errors (jittered exponential backoff).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Total attempts including the first (1 = no retry).
    pub max_attempts: u32,
    pub base: Duration,
    pub cap: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: 5,
            base: Duration::from_millis(500),
            cap: Duration::from_secs(30),
        }
    }
}

/// Full-jitter exponential backoff: uniform in [0, min(cap, base·2^attempt)], but never below `floor`
/// (a wait the cloud asked for, e.g. from rate-limit headers).
pub(crate) fn backoff(policy: &RetryPolicy, attempt: u32, floor: Option<Duration>) -> Duration {
    let exp = policy
        .base
        .saturating_mul(1u32.checked_shl(attempt.min(20)).unwrap_or(u32::MAX));
    let ceiling = exp.min(policy.cap);
    let jittered = ceiling.mul_f64(fastrand::f64());
    jittered.max(floor.unwrap_or(Duration::ZERO))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_is_bounded_and_honours_floor() {
        let p = RetryPolicy {
            max_attempts: 5,
            base: Duration::from_millis(100),
            cap: Duration::from_secs(1),
        };
        for attempt in 0..30 {
            let d = backoff(&p, attempt, None);
            assert!(d <= Duration::from_secs(1));
            assert!(d <= Duration::from_millis(100) * 2u32.saturating_pow(attempt.min(10)));
        }
        assert!(backoff(&p, 0, Some(Duration::from_secs(3))) >= Duration::from_secs(3));
    }
}
