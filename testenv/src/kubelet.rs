//! What a kubelet would write: no kubelet runs here, so tests and the demo report a Node's
//! readiness themselves.

use k8s_openapi::api::core::v1::{Node, NodeCondition, NodeStatus};
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};

use crate::error::Result;

/// Writes the Node's `Ready` condition as kubelet's heartbeat (or its absence) would. A strategic
/// merge by condition type, so conditions other components own (e.g. `NetworkUnavailable`) stay.
pub async fn set_node_ready(client: &Client, name: &str, ready: bool) -> Result<()> {
    let status = NodeStatus {
        conditions: Some(vec![NodeCondition {
            type_: "Ready".into(),
            status: if ready { "True" } else { "False" }.into(),
            reason: Some(
                if ready {
                    "KubeletReady"
                } else {
                    "KubeletNotReady"
                }
                .into(),
            ),
            ..Default::default()
        }]),
        ..Default::default()
    };
    Api::<Node>::all(client.clone())
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Strategic(serde_json::json!({"status": status})),
        )
        .await?;
    Ok(())
}
