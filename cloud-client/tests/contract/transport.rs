//! Transport: errors, retries, rate limit, redaction; pagination and the call statistics.

use std::sync::Arc;
use std::time::Duration;

use cloud_client::hcloud::{HcloudClients, Token};
use cloud_client::{CloudError, NodeRef};

use crate::common::{config, provider};
use crate::sim_fast;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_never_appears_in_debug_or_errors() {
    let sim = sim_fast().await;
    let secret = "s3cr3t-token-that-is-not-64-chars";
    let mut c = config(&sim);
    c.client.token = Token::new(secret);
    let dbg = format!("{c:?}");
    assert!(!dbg.contains(secret), "{dbg}");
    let p = HcloudClients::new(c.clone()).await.unwrap();
    assert!(!format!("{p:?}").contains(secret));
    let e = p.check_connectivity().await.unwrap_err();
    assert_eq!(e.code(), Some("unauthorized"));
    assert!(e.correlation_id().is_some(), "{e:?}");
    for text in [format!("{e}"), format!("{e:?}")] {
        assert!(!text.contains(secret), "{text}");
    }
    // A transport failure (nothing listens there) must not leak it either.
    c.client.endpoint = "http://127.0.0.1:9/v1".into();
    c.client.retry.max_attempts = 2;
    let p = HcloudClients::new(c).await.unwrap();
    let e = p.check_connectivity().await.unwrap_err();
    assert!(e.is_retryable(), "{e}");
    for text in [format!("{e}"), format!("{e:?}")] {
        assert!(!text.contains(secret), "{text}");
    }
}

/// Every run of 8 characters of `secret` in `text`, if any.
fn runs_of(secret: &str, text: &str) -> Vec<String> {
    (0..=secret.len().saturating_sub(8))
        .map(|i| &secret[i..i + 8])
        .filter(|run| text.contains(run))
        .map(str::to_owned)
        .collect()
}

/// Hetzner's 429 quotes the first half of the token; cloud-sim answers the same way. The error
/// that reaches Events and conditions says the limit was reached and carries none of it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rate_limit_answer_that_quotes_the_token_is_scrubbed() {
    let sim = sim_fast().await;
    let p = provider(&sim, |c| c.client.retry.max_attempts = 1).await;
    sim.faults()
        .fail_next(Some("GET /locations"), 1, 429, "rate_limit_exceeded");
    let e = p.check_connectivity().await.unwrap_err();
    assert_eq!(e.code(), Some("rate_limit_exceeded"));
    // What the sim sent: the first half of the token, as Hetzner does.
    let raw = reqwest::Client::new()
        .get(format!("{}/locations", sim.endpoint()))
        .bearer_auth(sim.token())
        .send()
        .await
        .unwrap();
    assert_eq!(raw.status().as_u16(), 200, "one 429 was injected, not two");
    sim.faults()
        .fail_next(Some("GET /locations"), 1, 429, "rate_limit_exceeded");
    let raw = reqwest::Client::new()
        .get(format!("{}/locations", sim.endpoint()))
        .bearer_auth(sim.token())
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        raw.contains(&sim.token()[..32]),
        "the sim quotes the token: {raw}"
    );
    for text in [e.to_string(), format!("{e:?}")] {
        assert!(runs_of(&sim.token(), &text).is_empty(), "{text}");
        assert!(
            text.contains("requests per hour for token '<redacted>...' reached"),
            "{text}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_errors_are_retried_then_reported_clearly() {
    let sim = sim_fast().await;
    let p = provider(&sim, |_| {}).await;
    sim.faults()
        .fail_next(Some("GET /locations"), 2, 503, "unavailable");
    p.check_connectivity()
        .await
        .expect("recovers after two 503s");
    assert_eq!(sim.requests("GET", "/locations"), 3);

    sim.faults()
        .fail_next(Some("GET /locations"), 100, 500, "server_error");
    let e = p.check_connectivity().await.unwrap_err();
    println!("FIGURE 5xx: persistent 500s end with: {e}");
    assert!(
        matches!(e, CloudError::RetriesExhausted { attempts: 5, .. }),
        "{e:?}"
    );
    assert_eq!(e.code(), Some("server_error"));
    assert!(e.correlation_id().is_some());
    assert!(e.is_retryable());
    assert_eq!(sim.requests("GET", "/locations"), 3 + 5);
    // Permanent errors are not retried.
    sim.faults().clear();
    sim.faults()
        .fail_next(Some("GET /locations"), 1, 400, "invalid_input");
    let e = p.check_connectivity().await.unwrap_err();
    assert_eq!(e.code(), Some("invalid_input"));
    assert_eq!(sim.requests("GET", "/locations"), 9);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeouts_are_typed_and_retryable() {
    let sim = sim_fast().await;
    let p = provider(&sim, |c| {
        c.client.request_timeout = Duration::from_millis(200);
        c.client.retry.max_attempts = 2;
    })
    .await;
    sim.faults()
        .hang(Some("GET /locations"), 1, Duration::from_secs(2));
    p.check_connectivity()
        .await
        .expect("second attempt succeeds");
    sim.faults()
        .hang(Some("GET /locations"), 2, Duration::from_secs(2));
    let e = p.check_connectivity().await.unwrap_err();
    assert!(
        matches!(&e, CloudError::RetriesExhausted { last, .. } if matches!(**last, CloudError::Timeout { .. })),
        "{e:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paces_100_concurrent_requests_with_10_remaining_budget() {
    let sim = sim_fast().await;
    // 360000/h = 100 requests/s refill, so the test stays quick; the client learns the rate from the headers.
    sim.set_rate_limit(360_000, 10);
    let p = Arc::new(provider(&sim, |_| {}).await);
    let reqs = (0..100).map(|_| {
        let p = p.clone();
        async move { p.check_connectivity().await }
    });
    let results = futures::future::join_all(reqs).await;
    let failed = results.iter().filter(|r| r.is_err()).count();
    let got_429 = sim.request_log().iter().filter(|e| e.status == 429).count();
    let s = p.stats().snapshot();
    println!(
        "FIGURE rate limit: 100 concurrent requests starting with 10 remaining: {got_429} x 429 \
         (client counted {}), {} paced, {failed} failed",
        s.rate_limited, s.paced
    );
    assert_eq!(failed, 0);
    assert!(got_429 <= 1, "{got_429}");
    assert_eq!(sim.requests("GET", "/locations"), 100 + got_429 as u64);
    assert!(s.rate_limit.is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recovers_from_an_injected_429_storm() {
    let sim = sim_fast().await;
    let p = Arc::new(provider(&sim, |_| {}).await);
    p.check_connectivity().await.unwrap();
    sim.faults().fail_next(None, 20, 429, "rate_limit_exceeded");
    let reqs = (0..10).map(|_| {
        let p = p.clone();
        async move { p.check_connectivity().await }
    });
    let results = futures::future::join_all(reqs).await;
    let ok = results.iter().filter(|r| r.is_ok()).count();
    let s = p.stats().snapshot();
    println!(
        "FIGURE 429 storm: 20 injected 429s, {ok}/10 requests succeeded, {} retries",
        s.retries
    );
    // 10 requests x 5 attempts = 50 tries for 20 failures: everyone gets through.
    assert_eq!(ok, 10);
    assert_eq!(s.rate_limited, 20);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pagination_follows_next_page_and_stats_match_the_sim() {
    let sim = sim_fast().await;
    sim.client()
        .create_servers(120, "pg", "cx22", "fsn1")
        .await
        .unwrap();
    sim.reset_counters();
    let p = provider(&sim, |_| {}).await;
    let miss = p
        .instances()
        .instance_exists(&NodeRef::new("no-such-node"))
        .await;
    assert!(miss.is_err_and(|e| e.is_not_found()));
    let pages: Vec<String> = sim
        .request_log()
        .iter()
        .filter(|e| e.endpoint == "/servers")
        .map(|e| e.uri.clone())
        .collect();
    assert_eq!(pages.len(), 3, "{pages:?}");
    assert!(pages.iter().all(|u| u.contains("per_page=50")), "{pages:?}");
    let s = p.stats().snapshot();
    assert_eq!(s.calls_to("GET", "/servers"), 3);
    assert_eq!(s.total_calls(), sim.total_requests());
    assert!(s.rate_limit.unwrap().remaining > 0);
    assert_eq!(
        p.stats().remaining_budget(),
        Some(s.rate_limit.unwrap().remaining)
    );
}

/// A `MakeWriter` into a shared buffer, to read what was logged.
#[derive(Clone, Default)]
struct Captured(Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Captured {
    type Writer = Captured;
    fn make_writer(&'a self) -> Captured {
        self.clone()
    }
}

/// `HCLOUD_DEBUG=true` logs each request and response in full, the token redacted, at info level
/// (no RUST_LOG needed); without it, nothing of the kind is logged.
#[tokio::test(flavor = "current_thread")]
async fn hcloud_debug_logs_every_exchange_with_the_token_redacted() {
    let sim = sim_fast().await;
    sim.client()
        .create_server("node-1", "cx22", "fsn1")
        .await
        .unwrap();
    let captured = Captured::default();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(captured.clone())
        .with_max_level(tracing::Level::INFO)
        .with_ansi(false)
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);
    for debug in [false, true] {
        captured.0.lock().unwrap().clear();
        let p = provider(&sim, |c| c.client.debug = debug).await;
        let meta = p
            .instances()
            .instance_metadata(&NodeRef::new("node-1"))
            .await
            .unwrap();
        let log = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
        assert!(!log.contains(&sim.token()), "{log}");
        if !debug {
            assert!(!log.contains("HCLOUD_DEBUG"), "{log}");
            continue;
        }
        let line = log
            .lines()
            .find(|l| l.contains("HCLOUD_DEBUG") && l.contains("GET "))
            .unwrap_or_else(|| panic!("no exchange logged: {log}"));
        assert!(
            line.contains("/servers")
                && line.contains("Bearer <redacted>")
                && line.contains("status=200")
                && line.contains(&meta.provider_id["hcloud://".len()..]),
            "{line}"
        );
    }
}
