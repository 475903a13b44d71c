//! The Robot webservice client: basic auth, one cached server list (the Robot API allows 200
//! server-list requests an hour, Cloud 3600 requests of any kind), errors classified like Cloud
//! errors, and a rate-limit backoff: after the API says "rate limit exceeded", no Robot call is
//! made for `ROBOT_RATE_LIMIT_WAIT_TIME` (HCCM's `internal/robot` does the same), and lookups are
//! answered from the last list meanwhile.
//!
//! "Gone" is only ever the server's own 404 (`GET /server/{number}`), never a list that misses it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use reqwest::Method;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use tokio::time::Instant;

use crate::error::{ApiError, CloudError};
use crate::robot::config::{RobotConfig, RobotCredentials};
use crate::stats::ClientStats;

/// One dedicated server, as `GET /server` and `GET /server/{number}` describe it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct RobotServer {
    pub server_number: i64,
    #[serde(default)]
    pub server_name: String,
    /// The main IPv4 address (null for IPv6-only servers).
    #[serde(default)]
    pub server_ip: Option<String>,
    /// The IPv6 /64 (`2a01:4f8:…::`), when the server has one.
    #[serde(default)]
    pub server_ipv6_net: Option<String>,
    /// The product, e.g. `AX41-NVMe`: HCCM's instance type.
    #[serde(default)]
    pub product: String,
    /// The data center, e.g. `FSN1-DC14`: HCCM's zone (lowercased) and region (its location).
    #[serde(default)]
    pub dc: String,
    #[serde(default)]
    pub status: String,
    #[serde(default)]
    pub cancelled: bool,
}

#[derive(Deserialize)]
struct ServerEnvelope {
    server: RobotServer,
}

#[derive(Deserialize)]
struct ResetEnvelope {
    reset: Reset,
}

#[derive(Deserialize)]
struct Reset {
    #[serde(default)]
    operating_status: String,
}

#[derive(Deserialize)]
struct ErrorEnvelope {
    error: ErrorBody,
}

#[derive(Deserialize)]
struct ErrorBody {
    #[serde(default)]
    status: u16,
    #[serde(default)]
    code: String,
    #[serde(default)]
    message: String,
}

/// The cached list: by number and by name.
#[derive(Debug, Default)]
struct Listing {
    by_number: HashMap<i64, RobotServer>,
    by_name: HashMap<String, i64>,
}

/// The Robot client. Cheap to clone.
#[derive(Clone)]
pub struct RobotClient {
    inner: Arc<Inner>,
}

struct Inner {
    http: reqwest::Client,
    endpoint: String,
    credentials: RobotCredentials,
    stats: Arc<ClientStats>,
    cache_timeout: Duration,
    rate_limit_wait: Duration,
    listing: Mutex<Option<(Instant, Arc<Listing>)>>,
    refresh: tokio::sync::Mutex<()>,
    /// Set by a rate-limit answer: no call before then.
    blocked_until: Mutex<Option<Instant>>,
}

impl Inner {
    /// A text of the webservice's without the user or password in it, should it echo them (see
    /// [`crate::scrub`]); Robot's own messages are not known to, but every text is treated alike.
    fn scrub(&self, text: &str) -> String {
        crate::scrub::scrub(text, [&self.credentials.user, &self.credentials.password])
    }
}

impl std::fmt::Debug for RobotClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RobotClient")
            .field("endpoint", &self.inner.endpoint)
            .field("credentials", &self.inner.credentials)
            .finish_non_exhaustive()
    }
}

const TIMEOUT: Duration = Duration::from_secs(15);

/// How old the list may be before a name it misses is asked again (see [`RobotClient::by_name`]).
pub const MISS_REFRESH: Duration = Duration::from_secs(30);

impl RobotClient {
    /// The client for `config`; `None` when Robot is off or runs without credentials.
    pub fn new(config: &RobotConfig, stats: Arc<ClientStats>) -> Result<Option<Self>, CloudError> {
        let Some(credentials) = config.credentials.clone().filter(|_| config.enabled) else {
            return Ok(None);
        };
        let http = crate::http::client(
            &config.endpoint,
            &format!("cloud-controllers/{}", env!("CARGO_PKG_VERSION")),
            TIMEOUT,
        )?;
        Ok(Some(Self {
            inner: Arc::new(Inner {
                http,
                endpoint: config.endpoint.clone(),
                credentials,
                stats,
                cache_timeout: config.cache_timeout,
                rate_limit_wait: config.rate_limit_wait,
                listing: Mutex::new(None),
                refresh: tokio::sync::Mutex::new(()),
                blocked_until: Mutex::new(None),
            }),
        }))
    }

    /// The Robot API calls this client made.
    pub fn stats(&self) -> &Arc<ClientStats> {
        &self.inner.stats
    }

    /// Server `number` from the cached list, refreshed when older than the cache timeout.
    pub async fn cached(&self, number: i64) -> Result<Option<RobotServer>, CloudError> {
        Ok(self.listing().await?.by_number.get(&number).cloned())
    }

    /// The server named `name`, from the cached list. A miss in a list older than
    /// [`MISS_REFRESH`] is asked again with a fresh list (a dedicated server added since would
    /// otherwise wait for `ROBOT_CACHE_TIMEOUT`, 5 minutes); at most one list per
    /// [`MISS_REFRESH`] that way, well inside the Robot API's 200 lists an hour.
    pub async fn by_name(&self, name: &str) -> Result<Option<RobotServer>, CloudError> {
        let listing = self.listing().await?;
        if let Some(found) = Self::named(&listing, name) {
            return Ok(Some(found));
        }
        let listing = self.listing_younger_than(MISS_REFRESH).await?;
        Ok(Self::named(&listing, name))
    }

    /// The server named `name` in the cached list, a miss not asked again: a Cloud node's name
    /// is checked against Robot's this way, to refuse a name both APIs know, at no more than one
    /// list per `ROBOT_CACHE_TIMEOUT`.
    pub async fn cached_by_name(&self, name: &str) -> Result<Option<RobotServer>, CloudError> {
        let listing = self.listing().await?;
        Ok(Self::named(&listing, name))
    }

    fn named(listing: &Listing, name: &str) -> Option<RobotServer> {
        listing
            .by_name
            .get(name)
            .and_then(|n| listing.by_number.get(n))
            .cloned()
    }

    /// Every server, from the cached list.
    pub async fn servers(&self) -> Result<Vec<RobotServer>, CloudError> {
        Ok(self.listing().await?.by_number.values().cloned().collect())
    }

    /// Reads server `number` itself: `None` only on its 404, the one proof that it is gone.
    pub async fn server(&self, number: i64) -> Result<Option<RobotServer>, CloudError> {
        match self
            .call::<ServerEnvelope>("/server/{number}", &format!("/server/{number}"))
            .await
        {
            Ok(e) => Ok(Some(e.server)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Whether server `number` is powered off: its reset state's `operating_status` is
    /// `shut off` (HCCM's rule).
    pub async fn is_shut_off(&self, number: i64) -> Result<bool, CloudError> {
        let reset: ResetEnvelope = self
            .call("/reset/{number}", &format!("/reset/{number}"))
            .await?;
        Ok(reset.reset.operating_status == "shut off")
    }

    async fn listing(&self) -> Result<Arc<Listing>, CloudError> {
        self.listing_younger_than(self.inner.cache_timeout).await
    }

    /// The cached list if younger than `max_age`, else a new one (single-flight).
    async fn listing_younger_than(&self, max_age: Duration) -> Result<Arc<Listing>, CloudError> {
        if let Some(fresh) = self.fresh_listing(max_age) {
            return Ok(fresh);
        }
        let _single_flight = self.inner.refresh.lock().await;
        if let Some(fresh) = self.fresh_listing(max_age) {
            return Ok(fresh);
        }
        let servers: Vec<ServerEnvelope> = match self.call("/server", "/server").await {
            Ok(s) => s,
            // Over the rate limit: the last list is better than none until the API answers again.
            Err(e) if e.code() == Some("rate_limit_exceeded") => {
                return self.stale_listing().ok_or(e);
            }
            Err(e) => return Err(e),
        };
        let mut listing = Listing::default();
        for ServerEnvelope { server } in servers {
            listing
                .by_name
                .insert(server.server_name.clone(), server.server_number);
            listing.by_number.insert(server.server_number, server);
        }
        let listing = Arc::new(listing);
        *self.inner.listing.lock().unwrap_or_else(|e| e.into_inner()) =
            Some((Instant::now(), listing.clone()));
        Ok(listing)
    }

    fn fresh_listing(&self, max_age: Duration) -> Option<Arc<Listing>> {
        let guard = self.inner.listing.lock().unwrap_or_else(|e| e.into_inner());
        guard
            .as_ref()
            .filter(|(at, _)| at.elapsed() < max_age)
            .map(|(_, l)| l.clone())
    }

    fn stale_listing(&self) -> Option<Arc<Listing>> {
        let guard = self.inner.listing.lock().unwrap_or_else(|e| e.into_inner());
        guard.as_ref().map(|(_, l)| l.clone())
    }

    fn rate_limit_error(template: &str, wait: Duration) -> CloudError {
        ApiError {
            status: 403,
            code: "rate_limit_exceeded".into(),
            message: format!(
                "Robot API rate limit reached; no Robot call for {wait:?} (ROBOT_RATE_LIMIT_WAIT_TIME)"
            ),
            correlation_id: None,
            method: "GET".into(),
            endpoint: template.to_string(),
            retry_after: Some(wait),
        }
        .into()
    }

    async fn call<T: DeserializeOwned>(&self, template: &str, path: &str) -> Result<T, CloudError> {
        let inner = &self.inner;
        if let Some(until) = *inner
            .blocked_until
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            && let Some(left) = until.checked_duration_since(Instant::now())
        {
            return Err(Self::rate_limit_error(template, left));
        }
        let started = std::time::Instant::now();
        let sent = {
            let _on_the_wire = inner.stats.in_flight();
            inner
                .http
                .request(Method::GET, format!("{}{path}", inner.endpoint))
                .basic_auth(
                    inner.credentials.user.expose(),
                    Some(inner.credentials.password.expose()),
                )
                .send()
                .await
        };
        let response = match sent {
            Ok(r) => r,
            Err(e) => {
                inner
                    .stats
                    .record_call("GET", template, 0, started.elapsed());
                return Err(if e.is_timeout() {
                    CloudError::Timeout {
                        operation: format!("Robot GET {template}"),
                        after: TIMEOUT,
                    }
                } else {
                    CloudError::Transport {
                        method: "GET".into(),
                        endpoint: template.to_string(),
                        message: format!("Robot: {}", inner.scrub(&e.without_url().to_string())),
                    }
                });
            }
        };
        let status = response.status().as_u16();
        let body = response.bytes().await.unwrap_or_default();
        inner
            .stats
            .record_call("GET", template, status, started.elapsed());
        if (200..300).contains(&status) {
            return serde_json::from_slice(&body).map_err(|e| CloudError::Decode {
                method: "GET".into(),
                endpoint: format!("Robot {template}"),
                message: e.to_string(),
            });
        }
        let error = serde_json::from_slice::<ErrorEnvelope>(&body)
            .map(|e| e.error)
            .unwrap_or(ErrorBody {
                status,
                code: String::new(),
                message: String::from_utf8_lossy(&body).chars().take(200).collect(),
            });
        // Robot's codes are upper case (`SERVER_NOT_FOUND`, `RATE_LIMIT_EXCEEDED`); Cloud's lower
        // case ones are what the error classes know.
        // HCCM takes any 403 for the rate limit too (`HandleRateLimitExceededError`).
        let code = match error.code.to_ascii_lowercase() {
            c if c.is_empty() && status == 403 => "rate_limit_exceeded".to_string(),
            c => c,
        };
        let rate_limited = code == "rate_limit_exceeded";
        if rate_limited {
            *inner
                .blocked_until
                .lock()
                .unwrap_or_else(|e| e.into_inner()) = Some(Instant::now() + inner.rate_limit_wait);
        }
        Err(ApiError {
            status: if error.status == 0 {
                status
            } else {
                error.status
            },
            message: format!("Robot: {}", inner.scrub(&error.message)),
            code,
            correlation_id: None,
            method: "GET".into(),
            endpoint: template.to_string(),
            retry_after: rate_limited.then_some(inner.rate_limit_wait),
        }
        .into())
    }
}
