//! Which failures of a Hetzner request are retried (how long to wait between attempts is
//! [`crate::retry`]'s, shared by every provider).

use crate::error::CloudError;

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
    fn posts_retry_only_rejections() {
        assert!(should_retry(&api(423, "locked"), false));
        assert!(should_retry(&api(429, "rate_limit_exceeded"), false));
        assert!(!should_retry(&api(500, "server_error"), false));
        assert!(should_retry(&api(500, "server_error"), true));
        assert!(!should_retry(&api(400, "invalid_input"), true));
        assert!(!should_retry(&api(404, "not_found"), true));
        let t = CloudError::Timeout {
            operation: "x".into(),
            after: std::time::Duration::from_secs(1),
        };
        assert!(should_retry(&t, true));
        assert!(!should_retry(&t, false));
    }
}
