//! Event publishing: one [`Recorder`] per process (its dedup cache is per instance), failures logged
//! and never propagated (an Event is never a reason to fail a reconcile). Each controller owns its
//! reasons (`reasons.rs` in its crate).

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Resource;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};

use crate::metrics::KitMetrics;

/// Publishes Events as one component (e.g. `cloud-node-controller`).
///
/// Warnings go through kube's [`Recorder`], whose per-process cache turns repeats into an event
/// series. Routine one-off events (`Synced` once per node) use [`Events::once`], which writes the same
/// events.k8s.io/v1 object without caching it: the Recorder's cache keeps every event for 6 minutes,
/// which at 1000 initializing nodes was the largest single heap consumer.
#[derive(Clone)]
pub struct Events {
    recorder: Recorder,
    client: kube::Client,
    reporter: Reporter,
}

impl std::fmt::Debug for Events {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Events").finish_non_exhaustive()
    }
}

impl Events {
    /// One per process. `instance` is the pod name (or hostname).
    pub fn new(client: kube::Client, component: &str, instance: Option<String>) -> Self {
        let reporter = Reporter {
            controller: component.to_string(),
            instance,
        };
        Self {
            recorder: Recorder::new(client.clone(), reporter.clone()),
            client,
            reporter,
        }
    }

    /// Publishes a Normal event that is not expected to repeat, without caching it.
    pub async fn once<K: Resource<DynamicType = ()>>(
        &self,
        obj: &K,
        reason: &str,
        action: &str,
        note: String,
    ) {
        use k8s_openapi::api::events::v1::Event as K8sEvent;
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
        let reference: ObjectReference = obj.object_ref(&());
        let now = k8s_openapi::jiff::Timestamp::now();
        let namespace = reference
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into());
        let event = K8sEvent {
            metadata: ObjectMeta {
                name: Some(format!(
                    "{}.{:x}",
                    reference
                        .name
                        .as_deref()
                        .unwrap_or(&self.reporter.controller),
                    now.as_nanosecond()
                )),
                namespace: Some(namespace.clone()),
                ..Default::default()
            },
            event_time: Some(MicroTime(now)),
            action: Some(action.to_string()),
            reason: Some(reason.to_string()),
            note: Some(note),
            type_: Some("Normal".into()),
            reporting_controller: Some(self.reporter.controller.clone()),
            reporting_instance: Some(
                self.reporter
                    .instance
                    .clone()
                    .unwrap_or_else(|| self.reporter.controller.clone()),
            ),
            regarding: Some(reference),
            ..Default::default()
        };
        let api: kube::Api<K8sEvent> = kube::Api::namespaced(self.client.clone(), &namespace);
        if let Err(e) = api.create(&Default::default(), &event).await {
            tracing::warn!(error = %e, reason, "failed to publish event");
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

/// Where a controller's reconciler reports: its Event publisher and the kit's metrics (a
/// [`crate::Context`]'s, or a test's own).
#[derive(Clone)]
pub struct Reporters {
    pub events: Events,
    pub kit: KitMetrics,
}

impl std::fmt::Debug for Reporters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reporters").finish_non_exhaustive()
    }
}
