//! The `NetworkUnavailable` node condition: True/`NoRouteCreated` while a node's route is missing
//! (from the moment the node has a podCIDR, so it never looks schedulable before its route
//! exists), False/`RouteCreated` once it exists. A condition another component wrote (e.g. a CNI
//! with its own reason) is left alone.

use controller_kit::slim_node::SlimNode;
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::json;

use crate::reasons::{CONDITION, NO_ROUTE_CREATED, NODE_NOT_ROUTABLE, ROUTE_CREATED};

/// What the condition should say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Routed {
    Yes,
    No,
    /// Not until the operator acts, as the message says.
    Cannot(String),
}

impl Routed {
    fn status(&self) -> &'static str {
        match self {
            Routed::Yes => "False",
            Routed::No | Routed::Cannot(_) => "True",
        }
    }
    fn reason(&self) -> &'static str {
        match self {
            Routed::Yes => ROUTE_CREATED,
            Routed::No => NO_ROUTE_CREATED,
            Routed::Cannot(_) => NODE_NOT_ROUTABLE,
        }
    }
    fn message(&self) -> &str {
        match self {
            Routed::Yes => "RouteController created a route",
            Routed::No => "RouteController failed to create a route",
            Routed::Cannot(why) => why,
        }
    }
}

/// `(status, reason, message)` of the node's current condition, if any.
fn current(node: &SlimNode) -> Option<(&str, Option<&str>, Option<&str>)> {
    node.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == CONDITION)
        .map(|c| (c.status.as_str(), c.reason.as_deref(), c.message.as_deref()))
}

/// True when a write is needed: the condition is missing or ours and says something else.
pub fn needs_write(node: &SlimNode, want: &Routed) -> bool {
    match current(node) {
        None => true,
        Some((status, reason, message)) => {
            let ours = matches!(
                reason,
                Some(ROUTE_CREATED) | Some(NO_ROUTE_CREATED) | Some(NODE_NOT_ROUTABLE)
            );
            // Upstream's and HCCM's messages for the other two differ in wording, not meaning.
            let says_why = matches!(want, Routed::Cannot(_));
            ours && (status != want.status()
                || reason != Some(want.reason())
                || (says_why && message != Some(want.message())))
        }
    }
}

/// Writes the condition (strategic merge by condition type: other conditions are untouched).
pub async fn write(nodes: &Api<Node>, name: &str, want: &Routed) -> Result<(), kube::Error> {
    let now = k8s_openapi::jiff::Timestamp::now().to_string();
    let patch = json!({"status": {"conditions": [{
        "type": CONDITION,
        "status": want.status(),
        "reason": want.reason(),
        "message": want.message(),
        "lastTransitionTime": now,
        "lastHeartbeatTime": now,
    }]}});
    nodes
        .patch_status(name, &PatchParams::default(), &Patch::Strategic(patch))
        .await
        .map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;
    use controller_kit::slim_node::SlimNodeStatus;
    use k8s_openapi::api::core::v1::NodeCondition;

    fn with(status: &str, reason: &str) -> SlimNode {
        SlimNode {
            status: Some(SlimNodeStatus {
                conditions: Some(vec![NodeCondition {
                    type_: CONDITION.into(),
                    status: status.into(),
                    reason: Some(reason.into()),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn writes_missing_or_changed_own_conditions_only() {
        assert!(needs_write(&SlimNode::default(), &Routed::No));
        assert!(needs_write(&with("True", NO_ROUTE_CREATED), &Routed::Yes));
        assert!(!needs_write(&with("False", ROUTE_CREATED), &Routed::Yes));
        assert!(!needs_write(&with("True", NO_ROUTE_CREATED), &Routed::No));
        assert!(
            !needs_write(&with("False", "CiliumIsUp"), &Routed::No),
            "a CNI's condition is left alone"
        );
        // Why a node cannot be routed: written over ours, rewritten when the why changes.
        let cannot = Routed::Cannot("no subnet in us-east".into());
        assert!(needs_write(&with("True", NO_ROUTE_CREATED), &cannot));
        assert!(needs_write(&with("True", NODE_NOT_ROUTABLE), &cannot));
        assert!(needs_write(&with("True", NODE_NOT_ROUTABLE), &Routed::Yes));
        let mut said = with("True", NODE_NOT_ROUTABLE);
        said.status.as_mut().unwrap().conditions.as_mut().unwrap()[0].message =
            Some("no subnet in us-east".into());
        assert!(!needs_write(&said, &cannot));
    }
}
