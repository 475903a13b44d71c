//! What the cloud last said about each load balancer's targets' health checks, per Service: the
//! `cloud_controllers_load_balancer_targets{service,state}` gauge and the figure the
//! [`condition`](crate::condition) message quotes.
//!
//! It is read from the load balancer the reconcile reads or writes anyway (the create, a target
//! update, the drift check), never fetched for its own sake, so it is as old as that read: at most
//! the drift-check period (10 min by default, jittered) while nothing about the Service or the
//! node set changes.

use std::collections::HashMap;
use std::sync::Mutex;

use cloud_client::TargetHealth;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TargetLabels {
    /// `namespace/name`.
    pub service: String,
    /// `healthy`, `unhealthy` or `unknown`.
    pub state: String,
}

/// Per Service UID, its key and the last figure seen.
#[derive(Debug, Default)]
pub struct TargetHealthBook {
    seen: Mutex<HashMap<String, (String, TargetHealth)>>,
    gauge: Family<TargetLabels, Gauge>,
}

impl TargetHealthBook {
    /// The gauge family, for registration.
    pub fn gauge(&self) -> Family<TargetLabels, Gauge> {
        self.gauge.clone()
    }

    /// Records what the cloud said about the load balancer of Service `key` (UID `uid`).
    pub fn record(&self, uid: &str, key: &str, health: TargetHealth) {
        for (state, n) in [
            ("healthy", health.healthy),
            ("unhealthy", health.unhealthy),
            ("unknown", health.unknown),
        ] {
            self.gauge.get_or_create(&labels(key, state)).set(n.into());
        }
        self.lock()
            .insert(uid.to_string(), (key.to_string(), health));
    }

    /// The last figure for Service `uid`, if its load balancer was read by this process.
    pub fn get(&self, uid: &str) -> Option<TargetHealth> {
        self.lock().get(uid).map(|(_, h)| *h)
    }

    /// The Service no longer has a load balancer of ours: its series go.
    pub fn forget(&self, uid: &str) {
        if let Some((key, _)) = self.lock().remove(uid) {
            for state in ["healthy", "unhealthy", "unknown"] {
                self.gauge.remove(&labels(&key, state));
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, (String, TargetHealth)>> {
        self.seen.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn labels(service: &str, state: &str) -> TargetLabels {
    TargetLabels {
        service: service.to_string(),
        state: state.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::registry::Registry;

    fn scrape(book: &TargetHealthBook) -> String {
        let mut r = Registry::with_prefix("cloud_controllers");
        r.register("load_balancer_targets", "", book.gauge());
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &r).unwrap();
        out
    }

    #[test]
    fn records_each_state_and_forgets_the_service() {
        let book = TargetHealthBook::default();
        let h = TargetHealth {
            healthy: 2,
            unhealthy: 1,
            unknown: 0,
        };
        book.record("u1", "default/web", h);
        let text = scrape(&book);
        assert!(
            text.contains(
                r#"cloud_controllers_load_balancer_targets{service="default/web",state="healthy"} 2"#
            ),
            "{text}"
        );
        assert!(text.contains(r#"state="unhealthy"} 1"#), "{text}");
        assert_eq!(book.get("u1"), Some(h));
        book.forget("u1");
        assert_eq!(book.get("u1"), None);
        assert!(!scrape(&book).contains("default/web"));
    }
}
