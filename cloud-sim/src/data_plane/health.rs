//! Health checks: one checker task per (load balancer, service, resolved target), doing what the
//! service's `health_check` says.
//!
//! - `tcp`: the connect succeeds → pass. `http`: `GET {path}` over HTTP/1.1 with
//!   `Host: {domain, else the target's IP}` and `Connection: close`; pass iff the status code
//!   matches one of `status_codes` (`"2??"`, `"200"`, ...; none given: `2??` or `3??`) and, when
//!   `response` is set, the body contains it. `https` (and `http` with `tls`) checks only that
//!   the connect succeeds: the simulator speaks no TLS.
//! - Interval and timeout are the service's, divided by the speedup (`DataPlane::speedup`).
//!   The first check of a new target runs at once; the next ones `interval` after the previous
//!   one ended.
//! - Status: `unknown` until decided; one pass → `healthy`; `retries + 1` failures in a row →
//!   `unhealthy` (a status in between stays as it was). A server that is not `running` is
//!   `unhealthy` without being probed.
//! - Target faults (`faults`): `refuse` and `fail_health` fail at once, `hang` times out.
//!
//! The checker re-reads the world before every check, so an `update_service` (port, path,
//! interval, ...) applies from the next check on, without losing the count of failures.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::faults::TargetFault;
use super::host::{Host, HostRef};
use super::targets::{self, Resolved};
use crate::state::{HealthCheck, HealthCheckHttp, HealthKey, HealthStatus, State};

/// A response larger than this is cut off: a health endpoint answers a few bytes, and a runaway
/// one must not make the simulator buffer without end.
const MAX_RESPONSE: usize = 64 * 1024;

/// Runs the checks for `key` until the target, its service or its load balancer is gone (the
/// reconciler also aborts it then). `alive` turns false when the reconciler retires it.
pub(super) async fn run(app: HostRef, key: HealthKey, alive: Arc<AtomicBool>) {
    let Some(dp) = app.tables() else {
        return;
    };
    let mut speedup = dp.subscribe_speedup();
    let mut failures: u64 = 0;
    loop {
        let Some((check, target)) = plan(&app.state(), &key) else {
            return;
        };
        let factor = *speedup.borrow_and_update();
        let status = if !target.running {
            failures = check.retries.saturating_add(1);
            Some(HealthStatus::Unhealthy)
        } else if probe(app.as_ref(), &check, &target, scaled(check.timeout, factor)).await {
            failures = 0;
            Some(HealthStatus::Healthy)
        } else {
            failures = failures.saturating_add(1);
            (failures > check.retries).then_some(HealthStatus::Unhealthy)
        };
        if let Some(status) = status {
            dp.health.set_while(&key, status, &alive);
        }
        // A changed speedup shortens (or stretches) the wait already under way.
        tokio::select! {
            () = tokio::time::sleep(scaled(check.interval, factor)) => {}
            _ = speedup.changed() => {}
        }
    }
}

/// The health check and the target of `key` as the world has them now.
fn plan(st: &State, key: &HealthKey) -> Option<(HealthCheck, Resolved)> {
    let lb = st.load_balancers.get(&key.lb)?;
    let svc = lb
        .services
        .iter()
        .find(|s| s.listen_port == key.listen_port)?;
    let target = targets::resolve(st, lb)
        .into_iter()
        .find(|r| r.subject == key.subject)?;
    Some((svc.health_check.clone(), target))
}

/// `secs` seconds divided by the speedup; at least a millisecond, so a huge speedup cannot spin.
pub(super) fn scaled(secs: u64, speedup: f64) -> Duration {
    Duration::from_secs_f64(secs as f64 / speedup).max(Duration::from_millis(1))
}

/// One check; `true` = pass.
async fn probe(app: &dyn Host, check: &HealthCheck, target: &Resolved, timeout: Duration) -> bool {
    // A target without an address cannot be reached: the check fails like a refused connect.
    let Some(ip) = target.ip else {
        return false;
    };
    let fault = app.tables().and_then(|dp| dp.faults.get(ip));
    match fault {
        Some(TargetFault::Refuse | TargetFault::FailHealth) => return false,
        Some(TargetFault::Hang) => {
            tokio::time::sleep(timeout).await;
            return false;
        }
        None => {}
    }
    let addr = SocketAddr::new(app.addresses().local(ip), check.port);
    let http = match (&check.protocol[..], &check.http) {
        ("http", Some(h)) if !h.tls => Some(h),
        _ => None,
    };
    let attempt = async {
        let stream = TcpStream::connect(addr).await.ok()?;
        match http {
            None => Some(true),
            Some(h) => Some(http_check(stream, h, ip).await),
        }
    };
    matches!(tokio::time::timeout(timeout, attempt).await, Ok(Some(true)))
}

async fn http_check(mut stream: TcpStream, h: &HealthCheckHttp, ip: IpAddr) -> bool {
    let host = h.domain.clone().unwrap_or_else(|| ip.to_string());
    let request = format!(
        "GET {} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: cloud-sim-health-check\r\nAccept: */*\r\nConnection: close\r\n\r\n",
        h.path
    );
    if stream.write_all(request.as_bytes()).await.is_err() {
        return false;
    }
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(verdict) = judge(&buf, h, false) {
            return verdict;
        }
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return judge(&buf, h, true).unwrap_or(false),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
        if buf.len() >= MAX_RESPONSE {
            return judge(&buf, h, true).unwrap_or(false);
        }
    }
}

/// The verdict on the response read so far, or `None` while more is needed. `complete`: the
/// peer closed (or the size cap was hit), nothing more will come.
fn judge(buf: &[u8], h: &HealthCheckHttp, complete: bool) -> Option<bool> {
    let Some(head_end) = find(buf, b"\r\n\r\n") else {
        return complete.then_some(false);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]);
    let Some(code) = status_code(&head) else {
        return Some(false);
    };
    if !status_matches(&h.status_codes, code) {
        return Some(false);
    }
    if h.response.is_empty() {
        return Some(true);
    }
    // The body as sent: a Content-Length body once it is all there, anything else (chunked,
    // read to the end) when the peer closes. Chunk framing is not decoded.
    let body = &buf[head_end + 4..];
    let found = find(body, h.response.as_bytes()).is_some();
    let length = head.lines().find_map(|l| {
        let (name, value) = l.split_once(':')?;
        name.trim()
            .eq_ignore_ascii_case("content-length")
            .then(|| value.trim().parse::<usize>().ok())?
    });
    if found || complete || length.is_some_and(|n| body.len() >= n) {
        Some(found)
    } else {
        None
    }
}

/// `HTTP/1.1 503 Service Unavailable` → 503.
fn status_code(head: &str) -> Option<u16> {
    let line = head.lines().next()?;
    let mut parts = line.split_whitespace();
    let version = parts.next()?;
    if !version.starts_with("HTTP/") {
        return None;
    }
    parts.next()?.parse().ok()
}

/// Whether `code` matches one of `patterns` (three characters, digits or `?` for any digit);
/// no patterns means `2??` or `3??`, the API's default.
pub(super) fn status_matches(patterns: &[String], code: u16) -> bool {
    let code = code.to_string();
    let one = |p: &str| {
        p.len() == code.len()
            && p.bytes()
                .zip(code.bytes())
                .all(|(want, got)| want == b'?' || want == got)
    };
    if patterns.is_empty() {
        one("2??") || one("3??")
    } else {
        patterns.iter().any(|p| one(p.trim()))
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() {
        return Some(0);
    }
    haystack.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(codes: &[&str], response: &str) -> HealthCheckHttp {
        HealthCheckHttp {
            domain: None,
            path: "/".to_owned(),
            response: response.to_owned(),
            status_codes: codes.iter().map(|c| (*c).to_owned()).collect(),
            tls: false,
        }
    }

    #[test]
    fn status_code_patterns() {
        let p = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert!(status_matches(&p(&["2??"]), 204));
        assert!(!status_matches(&p(&["2??"]), 301));
        assert!(status_matches(&p(&["200"]), 200));
        assert!(!status_matches(&p(&["200"]), 201));
        assert!(status_matches(&p(&["200", "3??"]), 302));
        assert!(status_matches(&[], 200) && status_matches(&[], 399));
        assert!(!status_matches(&[], 404) && !status_matches(&[], 503));
    }

    #[test]
    fn responses_are_judged_by_code_and_body() {
        let ok = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello";
        assert_eq!(judge(ok, &check(&[], ""), false), Some(true));
        assert_eq!(judge(ok, &check(&[], "ell"), false), Some(true));
        assert_eq!(judge(ok, &check(&[], "bye"), false), Some(false));
        assert_eq!(judge(ok, &check(&["3??"], ""), false), Some(false));
        // Not all of the body yet: wait; at the end: decide.
        let part = b"HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\nhel";
        assert_eq!(judge(part, &check(&[], "hello"), false), None);
        assert_eq!(judge(part, &check(&[], "hello"), true), Some(false));
        assert_eq!(judge(b"HTTP/1.1 20", &check(&[], ""), false), None);
        assert_eq!(
            judge(b"garbage\r\n\r\n", &check(&[], ""), false),
            Some(false)
        );
        let unavailable = b"HTTP/1.0 503 Service Unavailable\r\n\r\n";
        assert_eq!(judge(unavailable, &check(&[], ""), true), Some(false));
    }

    #[test]
    fn speedup_divides_and_never_reaches_zero() {
        assert_eq!(scaled(15, 50.0), Duration::from_millis(300));
        assert_eq!(scaled(15, 1.0), Duration::from_secs(15));
        assert_eq!(scaled(1, 1e9), Duration::from_millis(1));
    }
}
