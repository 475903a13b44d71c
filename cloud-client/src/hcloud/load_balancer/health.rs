//! How many of a load balancer's targets pass their health checks, read from the `health_status`
//! the API returns with every load balancer (so it costs no call of its own).

use serde::Deserialize;

use crate::capabilities::TargetHealth;
use crate::hcloud::wire::{LbTarget, LoadBalancer};

/// Counts each server and IP target once; a label selector's resolved servers count one by one.
pub fn target_health(lb: &LoadBalancer) -> TargetHealth {
    of_targets(&lb.targets)
}

/// The same count (`target_health`, what the controller reports) of a load balancer as JSON: the
/// API's `load_balancer` object, or cloud-sim's as `cloud_sim::world` reads it. For tools that
/// hold the JSON rather than this crate's types, such as the demo. No `targets` counts nothing;
/// malformed ones are an error.
pub fn target_health_json(lb: &serde_json::Value) -> Result<TargetHealth, serde_json::Error> {
    let targets = Option::<Vec<LbTarget>>::deserialize(&lb["targets"])?;
    Ok(of_targets(&targets.unwrap_or_default()))
}

fn of_targets(targets: &[LbTarget]) -> TargetHealth {
    let mut h = TargetHealth::default();
    for t in targets {
        if t.kind == "label_selector" {
            t.targets.iter().for_each(|t| count(&mut h, t));
        } else {
            count(&mut h, t);
        }
    }
    h
}

/// Healthy only when every port's check passed; one failing port makes the target unhealthy (the
/// load balancer sends that port's traffic elsewhere); anything else is not known yet.
fn count(h: &mut TargetHealth, t: &LbTarget) {
    let statuses = || t.health_status.iter().map(|s| s.status.as_str());
    if statuses().any(|s| s == "unhealthy") {
        h.unhealthy += 1;
    } else if !t.health_status.is_empty() && statuses().all(|s| s == "healthy") {
        h.healthy += 1;
    } else {
        h.unknown += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Shaped like the API's documented `GET /load_balancers/{id}` response.
    fn lb(targets: serde_json::Value) -> LoadBalancer {
        serde_json::from_value(serde_json::json!({"id": 1, "name": "lb", "targets": targets}))
            .unwrap()
    }

    #[test]
    fn counts_each_target_by_its_worst_port() {
        let lb = lb(serde_json::json!([
            {"type": "server", "server": {"id": 1}, "use_private_ip": false,
             "health_status": [{"listen_port": 80, "status": "healthy"}, {"listen_port": 443, "status": "healthy"}]},
            {"type": "server", "server": {"id": 2}, "use_private_ip": false,
             "health_status": [{"listen_port": 80, "status": "healthy"}, {"listen_port": 443, "status": "unhealthy"}]},
            {"type": "server", "server": {"id": 3}, "use_private_ip": false,
             "health_status": [{"listen_port": 80, "status": "unknown"}, {"listen_port": 443, "status": "healthy"}]},
            {"type": "ip", "ip": {"ip": "203.0.113.1"}, "health_status": []},
        ]));
        assert_eq!(
            target_health(&lb),
            TargetHealth {
                healthy: 1,
                unhealthy: 1,
                unknown: 2
            }
        );
    }

    #[test]
    fn a_label_selector_counts_the_servers_it_resolves_to() {
        let lb = lb(serde_json::json!([
            {"type": "label_selector", "label_selector": {"selector": "role=web"}, "use_private_ip": false,
             "targets": [
                {"type": "server", "server": {"id": 1}, "health_status": [{"listen_port": 80, "status": "healthy"}]},
                {"type": "server", "server": {"id": 2}, "health_status": [{"listen_port": 80, "status": "healthy"}]},
             ]},
        ]));
        assert_eq!(target_health(&lb).healthy, 2);
        assert_eq!(target_health(&lb).total(), 2);
    }

    #[test]
    fn json_is_counted_by_the_same_rule() {
        let targets = serde_json::json!([
            {"type": "server", "server": {"id": 1},
             "health_status": [{"listen_port": 80, "status": "healthy"}, {"listen_port": 443, "status": "unhealthy"}]},
            {"type": "label_selector", "label_selector": {"selector": "role=web"},
             "targets": [
                {"type": "server", "server": {"id": 2}, "health_status": [{"listen_port": 80, "status": "healthy"}]},
                {"type": "server", "server": {"id": 3}, "health_status": []},
             ]},
        ]);
        let json = serde_json::json!({"id": 1, "name": "lb", "targets": targets});
        assert_eq!(
            target_health_json(&json).unwrap(),
            TargetHealth {
                healthy: 1,
                unhealthy: 1,
                unknown: 1
            }
        );
        assert_eq!(
            target_health_json(&json).unwrap(),
            target_health(&lb(targets))
        );
        assert_eq!(
            target_health_json(&serde_json::json!({"id": 1})).unwrap(),
            TargetHealth::default()
        );
        assert!(target_health_json(&serde_json::json!({"targets": "none"})).is_err());
    }
}
