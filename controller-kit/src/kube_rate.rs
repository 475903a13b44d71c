//! `--kube-api-qps`/`--kube-api-burst`: a token bucket in front of the Kubernetes client, with
//! client-go's semantics. A request takes a token; when none is left it waits until one is due
//! (the reservation is made at once, so waiting requests keep their order and the rate holds).

use std::future::Future as _;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::time::{Instant, Sleep};

use crate::config::KubeApiRate;

/// The shared bucket.
#[derive(Debug)]
struct Bucket {
    rate: KubeApiRate,
    state: Mutex<(f64, Instant)>,
}

impl Bucket {
    fn new(rate: KubeApiRate) -> Self {
        Self {
            rate,
            state: Mutex::new((f64::from(rate.burst), Instant::now())),
        }
    }

    /// Takes a token and returns how long to wait before it is due.
    fn reserve(&self) -> Duration {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let (tokens, last) = &mut *state;
        let now = Instant::now();
        let refill = now.saturating_duration_since(*last).as_secs_f64() * self.rate.qps;
        *tokens = (*tokens + refill).min(f64::from(self.rate.burst)) - 1.0;
        *last = now;
        if *tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-*tokens / self.rate.qps)
        }
    }
}

/// The tower layer for [`kube::client::ClientBuilder::with_layer`].
#[derive(Debug, Clone)]
pub struct RateLimitLayer {
    bucket: Arc<Bucket>,
}

impl RateLimitLayer {
    /// A bucket of `rate.burst` tokens refilled at `rate.qps`, full at the start.
    pub fn new(rate: KubeApiRate) -> Self {
        Self {
            bucket: Arc::new(Bucket::new(rate)),
        }
    }
}

impl<S> tower::Layer<S> for RateLimitLayer {
    type Service = RateLimit<S>;
    fn layer(&self, inner: S) -> RateLimit<S> {
        RateLimit {
            inner,
            bucket: self.bucket.clone(),
            due: None,
        }
    }
}

/// The service [`RateLimitLayer`] wraps around the client's. The wait happens in `poll_ready`
/// (as tower's own rate limit does), so the request is only handed on once its token is due.
#[derive(Debug)]
pub struct RateLimit<S> {
    inner: S,
    bucket: Arc<Bucket>,
    /// Set once this instance reserved a token; the sleep until it is due.
    due: Option<Pin<Box<Sleep>>>,
}

impl<S, R> tower::Service<R> for RateLimit<S>
where
    S: tower::Service<R>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        let due = self.due.get_or_insert_with(|| {
            Box::pin(tokio::time::sleep_until(
                Instant::now() + self.bucket.reserve(),
            ))
        });
        if due.as_mut().poll(cx).is_pending() {
            return Poll::Pending;
        }
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: R) -> Self::Future {
        // The token reserved in poll_ready is spent; the next request reserves its own.
        self.due = None;
        self.inner.call(request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// With time paused, the bucket's waits are exact: a burst of 3 at 2 per second lets three
    /// through at once, then one every 500 ms.
    #[tokio::test(start_paused = true)]
    async fn a_burst_then_the_rate() {
        let bucket = Bucket::new(KubeApiRate { qps: 2.0, burst: 3 });
        let waits: Vec<Duration> = (0..6).map(|_| bucket.reserve()).collect();
        assert_eq!(
            waits,
            [0, 0, 0, 500, 1000, 1500]
                .map(Duration::from_millis)
                .to_vec()
        );
        tokio::time::advance(Duration::from_secs(10)).await;
        // Refilled, but never beyond the burst.
        let waits: Vec<Duration> = (0..4).map(|_| bucket.reserve()).collect();
        assert_eq!(waits, [0, 0, 0, 500].map(Duration::from_millis).to_vec());
    }

    #[tokio::test(start_paused = true)]
    async fn the_layer_delays_requests_beyond_the_burst() {
        use tower::{Service, ServiceExt};
        let mut svc = tower::ServiceBuilder::new()
            .layer(RateLimitLayer::new(KubeApiRate {
                qps: 10.0,
                burst: 1,
            }))
            .service_fn(|_: ()| async { Ok::<_, std::convert::Infallible>(Instant::now()) });
        let start = Instant::now();
        let first = svc.ready().await.unwrap().call(()).await.unwrap();
        let second = svc.ready().await.unwrap().call(()).await.unwrap();
        assert_eq!(first - start, Duration::ZERO);
        assert_eq!(second - start, Duration::from_millis(100));
    }
}
