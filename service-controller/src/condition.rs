//! The Service condition that says whether its load balancer serves it, and if not, why: Events
//! expire after an hour and `EXTERNAL-IP <pending>` gives no reason; a condition stays.
//!
//! Type [`TYPE`], `cloud-controllers.github.io/LoadBalancerReady`:
//! - `True`, reason `EnsuredLoadBalancer`: the load balancer matches the Service and has targets;
//! - `False`, reason `InvalidLoadBalancerInput`: an annotation or field the controller refuses
//!   (the message names it, quotes the value and says what is accepted); nothing was written;
//! - `False`, reason `LoadBalancerConflict`: on a shared load balancer, what this Service asks
//!   for (a listen port, a setting, room under the type's limit) is another Service's; the
//!   message names it; nothing was written; retried with backoff;
//! - `False`, reason `SyncLoadBalancerFailed`: the cloud (or the apiserver) failed; retried with
//!   backoff, the message is the error;
//! - `True`, reason `KubeProxyHealthCheckUnreachable`: the load balancer serves, but checks the
//!   NodePort over TCP because kube-proxy's health port answered on no node (see
//!   [`crate::kube_proxy_probe`]);
//! - `True`, reason `CertificateSecretUnusable`: a TLS Secret the Service names cannot be used
//!   (missing, deleted, a key that is not the certificate's, expired, over the cloud's limits);
//!   the load balancer keeps serving the certificate it had from it; the message says why;
//! - `False`, reason `UnAvailableLoadBalancer`: no eligible node, so no target;
//! - `False`, reason `NoHealthyTargets`: the load balancer has targets and its health checks fail
//!   on every one, so it drops the Service's traffic.
//!
//! While `True`, the message quotes the targets' health as the cloud last reported it ("2 of 3
//! targets healthy"); see [`crate::target_health`] for how old that figure can be.
//!
//! Upstream defines no Service condition for load balancers: KEP-4631 proposed
//! `LoadBalancerServing`/`LoadBalancerProvisioning` for cloud providers and was not accepted, so
//! an unprefixed name could later mean something else. The type is therefore prefixed, as
//! `metav1.Condition` asks of types outside Kubernetes (Cilium's LB-IPAM writes
//! `io.cilium/lb-ipam-request-satisfied` the same way), and the reasons are the Event reasons
//! operators already alert on. `observedGeneration` is the Service generation it describes.
//!
//! A condition write is one strategic-merge patch of `services/status` keyed by type (other
//! conditions are untouched), made only when status, reason, message or generation changed;
//! `lastTransitionTime` moves only when the status does. It never costs a cloud call.

use cloud_client::TargetHealth;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::api::Patch;
use serde_json::json;

use crate::error::Error;
use crate::{patches, reasons};

/// The condition type.
pub const TYPE: &str = "cloud-controllers.github.io/LoadBalancerReady";

/// Messages longer than this are cut (an apiserver limit is 32 KiB; a condition is read by people).
const MAX_MESSAGE: usize = 1024;

/// What the condition should say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Want {
    pub ready: bool,
    pub reason: &'static str,
    pub message: String,
}

impl Want {
    /// The load balancer is ensured and has targets, whose health checks are as `health` says
    /// (`None`: not known).
    pub fn ready(health: Option<TargetHealth>) -> Want {
        let serves = "The load balancer serves this Service";
        let Some(h) = health.filter(|h| h.total() > 0) else {
            return Want {
                ready: true,
                reason: reasons::ENSURED,
                message: serves.into(),
            };
        };
        let of = format!("{} of {} targets healthy", h.healthy, h.total());
        if h.healthy == 0 && h.unknown == 0 {
            return Want {
                ready: false,
                reason: reasons::NO_HEALTHY_TARGETS,
                message: format!(
                    "{of}: the load balancer's health checks fail on every target, so it drops this Service's traffic"
                ),
            };
        }
        let unknown = match h.unknown {
            0 => String::new(),
            n => format!(", {n} not checked yet"),
        };
        Want {
            ready: true,
            reason: reasons::ENSURED,
            message: format!("{serves}: {of}{unknown}"),
        }
    }

    /// The same, for `reason` (still ready: a condition reason of its own for a load balancer
    /// that serves differently from what the Service asked).
    pub fn because(mut self, reason: &'static str) -> Want {
        self.reason = reason;
        self
    }

    /// The same, with `note` appended to the message (e.g. what the load balancer does not do
    /// that the Service asks for).
    pub fn noting(mut self, note: &str) -> Want {
        self.message = format!("{}. {note}", self.message);
        self
    }

    /// Ensured, but the load balancer serves no node, for the reason the provider gave.
    pub fn not_serving(reason: &'static str, message: String) -> Want {
        Want {
            ready: false,
            reason,
            message,
        }
    }

    /// Ensured, but no node is eligible as a target.
    pub fn unavailable() -> Want {
        Want {
            ready: false,
            reason: reasons::UNAVAILABLE,
            message: "There are no available nodes for LoadBalancer".into(),
        }
    }

    /// The sync failed with `err`.
    pub fn failed(err: &Error) -> Want {
        let reason = if err.is_bad_input() {
            reasons::INVALID_INPUT
        } else if err.is_conflict() {
            reasons::CONFLICT
        } else {
            reasons::SYNC_FAILED
        };
        let mut message = err.to_string();
        if message.len() > MAX_MESSAGE {
            let cut = (0..=MAX_MESSAGE)
                .rev()
                .find(|i| message.is_char_boundary(*i))
                .unwrap_or(0);
            message.truncate(cut);
            message.push('…');
        }
        Want {
            ready: false,
            reason,
            message,
        }
    }

    fn status(&self) -> &'static str {
        if self.ready { "True" } else { "False" }
    }
}

/// The Service's condition of [`TYPE`], if any.
pub fn current(svc: &Service) -> Option<&Condition> {
    svc.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == TYPE)
}

/// True when the condition is missing or says something else than `want` for this generation.
pub fn needs_write(svc: &Service, want: &Want) -> bool {
    match current(svc) {
        None => true,
        Some(c) => {
            c.status != want.status()
                || c.reason != want.reason
                || c.message != want.message
                || c.observed_generation != svc.metadata.generation
        }
    }
}

/// Writes `want`; a Service already gone is fine.
pub async fn write(client: &kube::Client, svc: &Service, want: &Want) -> Result<(), kube::Error> {
    let transition = match current(svc) {
        Some(c) if c.status == want.status() => c.last_transition_time.0.to_string(),
        _ => k8s_openapi::jiff::Timestamp::now().to_string(),
    };
    let mut condition = json!({
        "type": TYPE,
        "status": want.status(),
        "reason": want.reason,
        "message": want.message,
        "lastTransitionTime": transition,
    });
    if let Some(generation) = svc.metadata.generation {
        condition["observedGeneration"] = json!(generation);
    }
    let patch = json!({"status": {"conditions": [condition]}});
    patches::patch_status(client, svc, Patch::Strategic(patch)).await
}

/// Removes the condition (the Service is no longer ours to serve); a Service already gone is fine.
pub async fn remove(client: &kube::Client, svc: &Service) -> Result<(), kube::Error> {
    let patch = json!({"status": {"conditions": [{"type": TYPE, "$patch": "delete"}]}});
    patches::patch_status(client, svc, Patch::Strategic(patch)).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ServiceStatus;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn with(status: &str, reason: &str, message: &str, generation: i64) -> Service {
        let mut svc = Service::default();
        svc.metadata.generation = Some(generation);
        svc.status = Some(ServiceStatus {
            conditions: Some(vec![Condition {
                type_: TYPE.into(),
                status: status.into(),
                reason: reason.into(),
                message: message.into(),
                observed_generation: Some(generation),
                last_transition_time: Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH),
            }]),
            ..Default::default()
        });
        svc
    }

    #[test]
    fn writes_only_what_changed() {
        let ready = Want::ready(None);
        assert!(needs_write(&Service::default(), &ready));
        let svc = with("True", reasons::ENSURED, &ready.message, 3);
        assert!(
            !needs_write(&svc, &ready),
            "an unchanged resync writes nothing"
        );
        assert!(needs_write(&svc, &Want::unavailable()));
        let mut newer = svc.clone();
        newer.metadata.generation = Some(4);
        assert!(needs_write(&newer, &ready), "a new generation is observed");
    }

    #[test]
    fn the_message_quotes_target_health_and_none_healthy_is_not_ready() {
        let h = |healthy, unhealthy, unknown| {
            Want::ready(Some(TargetHealth {
                healthy,
                unhealthy,
                unknown,
            }))
        };
        let w = h(2, 1, 0);
        assert!(w.ready);
        assert_eq!(
            w.message,
            "The load balancer serves this Service: 2 of 3 targets healthy"
        );
        assert_eq!(
            h(0, 0, 3).message,
            "The load balancer serves this Service: 0 of 3 targets healthy, 3 not checked yet"
        );
        assert!(h(0, 0, 3).ready, "not checked yet is not failing");
        let none = h(0, 3, 0);
        assert_eq!(
            (none.ready, none.reason),
            (false, reasons::NO_HEALTHY_TARGETS)
        );
        assert!(
            none.message.starts_with("0 of 3 targets healthy: "),
            "{}",
            none.message
        );
        assert_eq!(h(0, 0, 0).message, "The load balancer serves this Service");
    }

    #[test]
    fn long_messages_are_cut_on_a_character_boundary() {
        let e = Error::Cloud {
            service: "ns/svc".into(),
            op: "ensure load balancer",
            source: cloud_client::CloudError::InvalidInput {
                field: "load-balancer.hetzner.cloud/name".into(),
                value: "é".repeat(2000),
                expected: "a name".into(),
            },
        };
        let want = Want::failed(&e);
        assert_eq!(want.reason, reasons::INVALID_INPUT);
        assert!(want.message.len() <= MAX_MESSAGE + '…'.len_utf8());
        assert!(want.message.ends_with('…'));
    }
}
