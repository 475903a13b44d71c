//! CloudStack's error answers as [`ApiError`]s, classified by what the `errorcode` means: the
//! `code` is the floor's word for the class (`unauthorized`, `rate_limit_exceeded`,
//! `invalid_input`, `forbidden`, `server_error`, ...), and the message keeps CloudStack's own
//! numbers and text. An error answer is never read as an empty list, whatever its status.

use std::time::Duration;

use super::wire::ErrorBody;
use crate::error::ApiError;

/// What a 401 means here, for the message: the signature is made with both keys.
pub(crate) const REFUSED_KEYS: &str = "the CloudStack API refused the request signature: check \
     api-key and secret-key in the cloud-config's [Global] section (and that the clock is right: \
     a signed request is valid for 15 minutes)";

/// The floor's code for CloudStack's `errorcode` (or the HTTP status, when the answer carried
/// none), which decides whether the error is retried.
pub(crate) fn code_of(errorcode: u16) -> &'static str {
    match errorcode {
        401 => "unauthorized",
        // API throttling (`api.throttling.*`).
        429 => "rate_limit_exceeded",
        // BAD_REQUEST, METHOD_NOT_ALLOWED, MALFORMED_PARAMETER_ERROR, PARAM_ERROR; a 404 means
        // the api-url is no API endpoint: never a "not found" of anything asked for.
        400 | 404 | 405 | 430 | 431 => "invalid_input",
        // UNSUPPORTED_ACTION_ERROR: a command the keys' role may not use.
        432 => "unsupported_error",
        // ACCOUNT_ERROR: permission denied.
        531 => "forbidden",
        // ACCOUNT_RESOURCE_LIMIT_ERROR.
        532 => "resource_limit_exceeded",
        // NETWORK_RULE_CONFLICT_ERROR.
        537 => "uniqueness_error",
        // Capacity, allocation and availability: may pass later.
        533..=536 => "unavailable",
        502..=504 => "unavailable",
        // INTERNAL_ERROR and the rest of 5xx.
        500..=599 => "server_error",
        _ => "",
    }
}

/// The error for an answer with HTTP `status` and `body` (the answer's inner object when it was
/// CloudStack's, else `raw`'s first characters), for the request `method`/`template`. `redact`
/// scrubs every text the cloud sent before it enters the error.
pub(crate) fn api_error(
    status: u16,
    body: Option<ErrorBody>,
    raw: &[u8],
    method: &str,
    template: &str,
    redact: impl Fn(String) -> String,
) -> ApiError {
    let (errorcode, message) = match body {
        Some(b) => {
            let errorcode = b.errorcode.unwrap_or(status);
            let cs = b
                .cserrorcode
                .map(|c| format!(", CSExceptionErrorCode {c}"))
                .unwrap_or_default();
            let text = redact(b.errortext.unwrap_or_default());
            let mut message = format!("CloudStack error {errorcode}{cs}: {text}");
            if errorcode == 401 {
                message = format!("{message} ({REFUSED_KEYS})");
            }
            (errorcode, message)
        }
        None => {
            let shown: String = String::from_utf8_lossy(raw).chars().take(120).collect();
            (
                status,
                format!(
                    "no CloudStack answer (a proxy in front of the management server?): {}",
                    redact(shown.split_whitespace().collect::<Vec<_>>().join(" "))
                ),
            )
        }
    };
    let retry_after = (errorcode == 429).then(|| retry_after(&message)).flatten();
    ApiError {
        status,
        code: code_of(errorcode).to_owned(),
        message,
        correlation_id: None,
        method: method.to_owned(),
        endpoint: template.to_owned(),
        retry_after,
    }
}

/// The wait a throttled answer asks for: `... please retry after [1500] ms` (brackets or not).
fn retry_after(text: &str) -> Option<Duration> {
    let (_, rest) = text.split_once("retry after")?;
    let digits: String = rest
        .trim_start()
        .trim_start_matches('[')
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    let n: u64 = digits.parse().ok()?;
    let after_number = rest.trim_start().trim_start_matches('[')[digits.len()..]
        .trim_start_matches(']')
        .trim_start();
    let wait = if after_number.starts_with("ms") {
        Duration::from_millis(n)
    } else {
        Duration::from_secs(n)
    };
    Some(wait.min(Duration::from_secs(60)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{CloudError, ErrorClass};

    fn error(status: u16, errorcode: u16, text: &str) -> CloudError {
        let body = ErrorBody {
            errorcode: Some(errorcode),
            cserrorcode: Some(4350),
            errortext: Some(text.into()),
        };
        api_error(status, Some(body), b"", "GET", "listZones", |s| s).into()
    }

    #[test]
    fn classes_follow_what_the_errorcode_means() {
        for e in [431, 432, 401, 531, 532, 537, 404] {
            assert_eq!(error(e, e, "x").class(), ErrorClass::Permanent, "{e}");
        }
        for e in [429, 530, 533, 500, 502, 503] {
            assert_eq!(error(e, e, "x").class(), ErrorClass::Retryable, "{e}");
        }
        // Nothing CloudStack answers is a "not found": only an empty list by id is.
        assert!(!error(404, 404, "x").is_not_found());
        assert!(error(429, 429, "x").is_rate_limited());
    }

    #[test]
    fn messages_keep_cloudstacks_numbers_and_text() {
        let e = error(431, 431, "Unable to execute API command listzones");
        assert_eq!(
            e.to_string(),
            "GET listZones failed: HTTP 431 invalid_input: CloudStack error 431, \
             CSExceptionErrorCode 4350: Unable to execute API command listzones"
        );
        let refused = error(
            401,
            401,
            "unable to verify user credentials and/or request signature",
        );
        assert!(refused.to_string().contains("check api-key and secret-key"));
        let html = api_error(
            503,
            None,
            b"<html>\n<h1>503</h1></html>",
            "GET",
            "listZones",
            |s| s,
        );
        assert_eq!(html.code, "unavailable");
        assert!(
            html.message.ends_with("<html> <h1>503</h1></html>"),
            "{}",
            html.message
        );
    }

    #[test]
    fn throttling_says_how_long_to_wait() {
        let e = error(
            429,
            429,
            "The given user has reached his/her account api limit, please retry after [1500] ms.",
        );
        assert_eq!(e.retry_after(), Some(Duration::from_millis(1500)));
        assert_eq!(
            retry_after("please retry after 3 s"),
            Some(Duration::from_secs(3))
        );
        assert_eq!(retry_after("no hint"), None);
    }

    #[test]
    fn what_the_cloud_sent_is_scrubbed() {
        let body = ErrorBody {
            errorcode: Some(530),
            cserrorcode: None,
            errortext: Some("key SECRETkeySECRET".into()),
        };
        let e = api_error(530, Some(body), b"", "GET", "listZones", |s| {
            s.replace("SECRETkeySECRET", "<redacted>")
        });
        assert!(!e.message.contains("SECRET"), "{}", e.message);
    }
}
