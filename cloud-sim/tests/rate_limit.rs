//! The rate-limit token bucket as a client sees it.

mod common;

use cloud_sim::{Sim, SimConfig};
use common::{assert_error, send};
use reqwest::Method;

fn num(r: &cloud_sim::RawResponse, h: &str) -> u64 {
    r.header(h)
        .unwrap_or_else(|| panic!("{h} missing"))
        .parse()
        .unwrap()
}

#[tokio::test]
async fn headers_on_every_response_and_429_when_empty() {
    let sim = Sim::start_with(SimConfig {
        rate_limit_per_hour: 3600,
        ..SimConfig::default()
    })
    .await;
    let w = sim.client();
    sim.set_rate_limit_remaining(10);
    let mut last = u64::MAX;
    let mut resets = Vec::new();
    for i in 0..10 {
        // Successes, 404s and 401s all spend budget and all carry the headers.
        let r = match i % 3 {
            0 => send(&w, Method::GET, "/locations", None).await,
            1 => send(&w, Method::GET, "/servers/424242", None).await,
            _ => w
                .with_token("bad")
                .raw(Method::GET, "/v1/locations", None)
                .await
                .unwrap(),
        };
        assert_ne!(r.status, 429, "request {i}");
        assert_eq!(num(&r, "ratelimit-limit"), 3600);
        let remaining = num(&r, "ratelimit-remaining");
        assert!(
            remaining < last,
            "remaining must fall: {remaining} after {last}"
        );
        last = remaining;
        resets.push(num(&r, "ratelimit-reset"));
    }
    assert_eq!(last, 0);
    let r = send(&w, Method::GET, "/locations", None).await;
    assert_error(&r, 429, "rate_limit_exceeded");
    assert_eq!(num(&r, "ratelimit-remaining"), 0);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    // Empty bucket of 3600 at one token per second: full again in about an hour.
    let reset = num(&r, "ratelimit-reset");
    assert!(
        reset >= now + 3500 && reset <= now + 3601,
        "reset {reset} now {now}"
    );
    assert!(
        resets.windows(2).all(|p| p[1] >= p[0]),
        "reset moves later as the bucket drains"
    );
    // 401s and the 429 are counted like any request: 4 + 3 + 1.
    assert_eq!(sim.requests("GET", "/locations"), 8);

    // Runtime control refills it.
    sim.set_rate_limit(7200, 100);
    let r = send(&w, Method::GET, "/locations", None).await;
    assert_eq!(r.status, 200);
    assert_eq!(num(&r, "ratelimit-limit"), 7200);
    assert_eq!(num(&r, "ratelimit-remaining"), 99);
    assert_eq!(sim.rate_limit().remaining, 99);
}

#[tokio::test]
async fn bucket_refills_over_time_and_is_settable_over_http() {
    // 36000/h = 10 tokens per second.
    let sim = Sim::start_with(SimConfig {
        rate_limit_per_hour: 36_000,
        ..SimConfig::default()
    })
    .await;
    let w = sim.client();
    let r = w
        .raw(
            Method::PUT,
            "/_sim/rate_limit",
            Some(serde_json::json!({"remaining": 0})),
        )
        .await
        .unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.body["remaining"], 0);
    assert_eq!(send(&w, Method::GET, "/locations", None).await.status, 429);
    let r = common::eventually("a refilled token", || {
        let w = w.clone();
        async move {
            let r = send(&w, Method::GET, "/locations", None).await;
            (r.status == 200).then_some(r)
        }
    })
    .await;
    assert_eq!(num(&r, "ratelimit-limit"), 36_000);
}
