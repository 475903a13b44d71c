//! Event publishing: one [`Recorder`] per process (its dedup cache is per instance), failures logged
//! and never propagated (an Event is never a reason to fail a reconcile).

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Resource;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};

/// Upstream event reasons.
pub mod reasons {
    /// Node initialized (Normal, cloud-node-controller).
    pub const SYNCED: &str = "Synced";
    /// Node about to be deleted because its server is gone (Normal, lifecycle).
    pub const DELETING_NODE: &str = "DeletingNode";
    /// Node deletion failed (Warning, lifecycle).
    pub const DELETING_NODE_FAILED: &str = "DeletingNodeFailed";
    /// A node could not be initialized yet (Warning; ours, upstream is silent).
    pub const INITIALIZATION_BLOCKED: &str = "NodeInitializationBlocked";
    /// The server of a node was not found (Warning; HCCM's reason).
    pub const SERVER_NOT_FOUND: &str = "ServerNotFound";
    /// The provided node IP is not among the cloud's addresses (Warning).
    pub const NODE_IP_NOT_FOUND: &str = "NodeIPNotFound";
    /// The provided node IP annotation cannot be parsed (Warning).
    pub const INVALID_NODE_IP: &str = "InvalidNodeIP";
    /// A providerID is malformed or not ours (Warning; HCCM's reason).
    pub const UNKNOWN_PROVIDER_ID: &str = "UnknownProviderIDPrefix";
    /// A cloud lookup failed (Warning; HCCM's reason).
    pub const INSTANCE_LOOKUP_FAILED: &str = "InstanceLookupFailed";
}

/// Publishes Events as one component (e.g. `cloud-node-controller`).
#[derive(Clone)]
pub struct Events {
    recorder: Recorder,
}

impl std::fmt::Debug for Events {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Events").finish_non_exhaustive()
    }
}

impl Events {
    /// One per process. `instance` is the pod name (or hostname).
    pub fn new(client: kube::Client, component: &str, instance: Option<String>) -> Self {
        Self {
            recorder: Recorder::new(
                client,
                Reporter {
                    controller: component.to_string(),
                    instance,
                },
            ),
        }
    }

    /// Publishes a Normal event on `obj`.
    pub async fn normal<K: Resource<DynamicType = ()>>(
        &self,
        obj: &K,
        reason: &str,
        action: &str,
        note: String,
    ) {
        self.publish(obj, EventType::Normal, reason, action, note)
            .await;
    }

    /// Publishes a Warning event on `obj`.
    pub async fn warning<K: Resource<DynamicType = ()>>(
        &self,
        obj: &K,
        reason: &str,
        action: &str,
        note: String,
    ) {
        self.publish(obj, EventType::Warning, reason, action, note)
            .await;
    }

    async fn publish<K: Resource<DynamicType = ()>>(
        &self,
        obj: &K,
        type_: EventType,
        reason: &str,
        action: &str,
        note: String,
    ) {
        let reference: ObjectReference = obj.object_ref(&());
        self.publish_ref(&reference, type_, reason, action, note)
            .await;
    }

    /// Publishes an event on an explicit reference.
    pub async fn publish_ref(
        &self,
        reference: &ObjectReference,
        type_: EventType,
        reason: &str,
        action: &str,
        mut note: String,
    ) {
        if note.len() > 1000 {
            let mut cut = 1000;
            while !note.is_char_boundary(cut) {
                cut -= 1;
            }
            note.truncate(cut);
            note.push('…');
        }
        let ev = Event {
            type_,
            reason: reason.to_string(),
            note: Some(note),
            action: action.to_string(),
            secondary: None,
        };
        if let Err(e) = self.recorder.publish(&ev, reference).await {
            tracing::warn!(error = %e, reason, object = ?reference.name, "failed to publish event");
        }
    }
}
