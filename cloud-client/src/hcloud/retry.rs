//! Which failures are retried, and how long to wait between attempts.

use std::time::Duration;

use crate::error::CloudError;
use crate::hcloud::config::RetryPolicy;

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

/// Whether `err` on a request with this method may be retried. A POST that may have reached the
/// server (timeout, broken connection after sending) is not retried, because creates are not idempotent.
pub(crate) fn should_retry(err: &CloudError, idempotent: bool) -> bool {
    match err {
        CloudError::Timeout { .. } => idempotent,
        CloudError::Transport { message, .. } => idempotent || message.starts_with("connect"),
        CloudError::Decode { .. } => idempotent,
        CloudError::Api(api) => {
            if !err.is_retryable() {
                return false;
            }
            // Rejections before any state change are safe to repeat for every method.
            idempotent
                || api.status == 429
                || matches!(
                    api.code.as_str(),
                    "locked" | "conflict" | "rate_limit_exceeded" | "unavailable" | "maintenance"
                )
                || api.status == 503
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(status: u16, code: &str) -> CloudError {
        crate::error::ApiError {
            status,
            code: code.into(),
            message: String::new(),
            correlation_id: None,
            method: "POST".into(),
            endpoint: "/x".into(),
            retry_after: None,
        }
        .into()
    }

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

    #[test]
    fn posts_retry_only_rejections() {
        assert!(should_retry(&api(423, "locked"), false));
        assert!(should_retry(&api(429, "rate_limit_exceeded"), false));
        assert!(!should_retry(&api(500, "server_error"), false));
        assert!(should_retry(&api(500, "server_error"), true));
        assert!(!should_retry(&api(400, "invalid_input"), true));
        assert!(!should_retry(&api(404, "not_found"), true));
        let t = CloudError::Timeout {
            operation: "x".into(),
            after: Duration::from_secs(1),
        };
        assert!(should_retry(&t, true));
        assert!(!should_retry(&t, false));
    }
}
