//! Which nodes run a serving endpoint of each Service, for load balancers that target only those
//! nodes (`externalTrafficPolicy: Local` with the provider's opt-in,
//! [`LoadBalancers::targets_nodes_with_endpoints`](cloud_client::LoadBalancers)): a Service with
//! 3 pods on a 500-node cluster gets 3 targets instead of 500 (which no load balancer type holds).
//!
//! Two views of each followed Service's node set:
//! - **live**: what its EndpointSlices say now, updated by the watch;
//! - **published**: what its targets follow. A change of the live set is published at most once
//!   per window per Service (the first at once, then the latest at the end of the window), and
//!   only a published change wakes the Service's reconcile. A rolling update that moves pods one
//!   by one, or an endpoint flapping between ready and not, costs one target update per window,
//!   not one per EndpointSlice write; a flap that is back where it was when the window ends costs
//!   none.
//!
//! A node counts while an endpoint on it is `serving`: ready, or terminating and still serving
//! (kube-proxy sends it traffic until the pod exits), so a node leaves the targets only after its
//! pod is gone, when the load balancer's health check has long since stopped sending to it.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use futures::channel::mpsc;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::runtime::reflector::ObjectRef;
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::metrics::ServiceMetrics;

/// The label the EndpointSlice controller puts on a Service's slices.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

/// Node names.
pub type NodeSet = BTreeSet<String>;

/// `namespace/name` of a Service.
type ServiceKey = (String, String);

/// The endpoint node sets (see the module docs).
#[derive(Debug, Default)]
pub struct EndpointNodes {
    state: Mutex<State>,
    /// Wakes the publisher: a followed Service's live set changed.
    changed: Notify,
}

#[derive(Debug, Default)]
struct State {
    /// Per Service, per EndpointSlice name, the nodes with a serving endpoint in that slice.
    slices: HashMap<ServiceKey, HashMap<String, NodeSet>>,
    /// The slices of a list in progress (a relist replaces `slices` when it is complete).
    relisting: Option<HashMap<ServiceKey, HashMap<String, NodeSet>>>,
    /// The first list is complete: an empty set means no endpoint, not "not known yet".
    synced: bool,
    /// Followed Services: what their targets follow.
    published: HashMap<ServiceKey, Published>,
    /// Followed Services whose live set may differ from the published one.
    dirty: HashSet<ServiceKey>,
}

#[derive(Debug)]
struct Published {
    nodes: Arc<NodeSet>,
    at: Instant,
}

impl EndpointNodes {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The nodes `svc`'s targets follow, and from now on its set is followed. `None` until the
    /// EndpointSlices are listed (the reconcile waits rather than remove every target).
    pub fn follow(&self, namespace: &str, name: &str) -> Option<Arc<NodeSet>> {
        let mut s = self.state();
        if !s.synced {
            return None;
        }
        let key = (namespace.to_owned(), name.to_owned());
        if let Some(p) = s.published.get(&key) {
            return Some(p.nodes.clone());
        }
        let nodes = Arc::new(s.live(&key));
        let at = Instant::now();
        s.published.insert(
            key,
            Published {
                nodes: nodes.clone(),
                at,
            },
        );
        Some(nodes)
    }

    /// `svc` no longer targets by endpoints (or is gone): its set is no longer followed.
    pub fn unfollow(&self, namespace: &str, name: &str) {
        let mut s = self.state();
        let key = (namespace.to_owned(), name.to_owned());
        s.published.remove(&key);
        s.dirty.remove(&key);
    }

    /// Services whose sets are followed.
    pub fn followed(&self) -> usize {
        self.state().published.len()
    }

    /// A list starts (the watch's `Init`).
    pub fn relist(&self) {
        self.state().relisting = Some(HashMap::new());
    }

    /// A slice as the watch reports it (listed or changed).
    pub fn apply(&self, slice: &EndpointSlice) {
        let Some((key, slice_name)) = slice_key(slice) else {
            return;
        };
        let nodes = serving_nodes(slice);
        let mut s = self.state();
        if let Some(relisting) = &mut s.relisting {
            relisting.entry(key).or_default().insert(slice_name, nodes);
            return;
        }
        let slices = s.slices.entry(key.clone()).or_default();
        if slices.get(&slice_name) != Some(&nodes) {
            slices.insert(slice_name, nodes);
            s.mark(key, &self.changed);
        }
    }

    /// A slice was deleted.
    pub fn delete(&self, slice: &EndpointSlice) {
        let Some((key, slice_name)) = slice_key(slice) else {
            return;
        };
        let mut s = self.state();
        let Some(slices) = s.slices.get_mut(&key) else {
            return;
        };
        slices.remove(&slice_name);
        if slices.is_empty() {
            s.slices.remove(&key);
        }
        s.mark(key, &self.changed);
    }

    /// The list is complete (the watch's `InitDone`): it replaces what was known, and every
    /// followed Service is looked at again.
    pub fn relisted(&self) {
        let mut s = self.state();
        if let Some(listed) = s.relisting.take() {
            s.slices = listed;
        }
        s.synced = true;
        let followed: Vec<ServiceKey> = s.published.keys().cloned().collect();
        for key in followed {
            s.mark(key, &self.changed);
        }
    }

    /// Publishes the changed sets that are due: those whose last publication is at least `window`
    /// old. Returns the Services whose published set changed, and when the next is due.
    fn publish_due(&self, window: Duration) -> (Vec<ServiceKey>, Option<Instant>) {
        let now = Instant::now();
        let mut s = self.state();
        let mut changed = Vec::new();
        let mut next: Option<Instant> = None;
        let dirty: Vec<ServiceKey> = s.dirty.iter().cloned().collect();
        for key in dirty {
            let Some(at) = s.published.get(&key).map(|p| p.at) else {
                s.dirty.remove(&key);
                continue;
            };
            let due = at + window;
            if due > now {
                next = Some(next.map_or(due, |n| n.min(due)));
                continue;
            }
            s.dirty.remove(&key);
            let live = s.live(&key);
            let published = s.published.get_mut(&key).expect("looked up above");
            if *published.nodes != live {
                *published = Published {
                    nodes: Arc::new(live),
                    at: now,
                };
                changed.push(key);
            }
        }
        (changed, next)
    }
}

impl State {
    /// The nodes of every slice of `key`.
    fn live(&self, key: &ServiceKey) -> NodeSet {
        self.slices
            .get(key)
            .into_iter()
            .flat_map(|slices| slices.values().flatten().cloned())
            .collect()
    }

    /// Notes that `key`'s live set may have changed; only followed Services matter.
    fn mark(&mut self, key: ServiceKey, changed: &Notify) {
        if self.published.contains_key(&key) && self.dirty.insert(key) {
            changed.notify_one();
        }
    }
}

/// The Service a slice belongs to and the slice's name; `None` for a slice no Service owns.
fn slice_key(slice: &EndpointSlice) -> Option<(ServiceKey, String)> {
    let meta = &slice.metadata;
    let service = meta.labels.as_ref()?.get(SERVICE_NAME_LABEL)?;
    Some((
        (meta.namespace.clone()?, service.clone()),
        meta.name.clone()?,
    ))
}

/// The nodes with an endpoint that serves: `serving`, which the API says to read as `ready` when
/// unset, which it says to read as true when unset.
fn serving_nodes(slice: &EndpointSlice) -> NodeSet {
    slice
        .endpoints
        .iter()
        .filter(|e| {
            let c = e.conditions.as_ref();
            let ready = c.and_then(|c| c.ready).unwrap_or(true);
            c.and_then(|c| c.serving).unwrap_or(ready)
        })
        .filter_map(|e| e.node_name.clone())
        .collect()
}

/// Publishes changed sets at most once per `window` per Service and wakes each Service whose
/// published set changed (see the module docs).
pub async fn publish(
    endpoints: Arc<EndpointNodes>,
    window: Duration,
    trigger: mpsc::UnboundedSender<ObjectRef<Service>>,
    metrics: ServiceMetrics,
    shutdown: CancellationToken,
) {
    let mut next: Option<Instant> = None;
    loop {
        let wait = async {
            match next {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = endpoints.changed.notified() => {}
            _ = wait => {}
        }
        let (changed, due) = endpoints.publish_due(window);
        next = due;
        for (namespace, name) in changed {
            metrics.endpoint_node_set_changes.inc();
            tracing::debug!(service = %format!("{namespace}/{name}"), "endpoint nodes changed");
            let _ = trigger.unbounded_send(ObjectRef::new(&name).within(&namespace));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions};
    use kube::api::ObjectMeta;

    fn slice(name: &str, endpoints: &[(&str, bool, bool)]) -> EndpointSlice {
        EndpointSlice {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ns".into()),
                labels: Some([(SERVICE_NAME_LABEL.to_owned(), "web".to_owned())].into()),
                ..Default::default()
            },
            address_type: "IPv4".into(),
            endpoints: endpoints
                .iter()
                .map(|(node, ready, serving)| Endpoint {
                    node_name: Some((*node).into()),
                    conditions: Some(EndpointConditions {
                        ready: Some(*ready),
                        serving: Some(*serving),
                        terminating: Some(!*ready),
                    }),
                    ..Default::default()
                })
                .collect(),
            ports: None,
        }
    }

    fn names(set: &NodeSet) -> Vec<&str> {
        set.iter().map(String::as_str).collect()
    }

    #[test]
    fn serving_endpoints_count_until_their_pod_is_gone() {
        let s = slice(
            "web-1",
            &[("a", true, true), ("b", false, true), ("c", false, false)],
        );
        // b's pod is terminating and still serving; c's is not serving.
        assert_eq!(names(&serving_nodes(&s)), ["a", "b"]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_change_is_published_at_most_once_per_window_and_a_flap_back_not_at_all() {
        let e = EndpointNodes::default();
        let window = Duration::from_secs(5);
        assert!(e.follow("ns", "web").is_none(), "not listed yet");
        e.relist();
        e.apply(&slice("web-1", &[("a", true, true)]));
        e.relisted();
        assert_eq!(names(&e.follow("ns", "web").unwrap()), ["a"]);

        // Published just now: a change waits for the window.
        e.apply(&slice("web-1", &[("a", true, true), ("b", true, true)]));
        let (changed, next) = e.publish_due(window);
        assert!(changed.is_empty());
        assert!(next.is_some());
        tokio::time::advance(window).await;
        let (changed, _) = e.publish_due(window);
        assert_eq!(changed.len(), 1);
        assert_eq!(names(&e.follow("ns", "web").unwrap()), ["a", "b"]);

        // b flaps away and back within the next window: nothing to publish.
        e.apply(&slice("web-1", &[("a", true, true)]));
        e.apply(&slice("web-1", &[("a", true, true), ("b", true, true)]));
        tokio::time::advance(window).await;
        let (changed, next) = e.publish_due(window);
        assert!(changed.is_empty());
        assert!(next.is_none());

        // Unfollowed Services are not tracked.
        e.unfollow("ns", "web");
        e.delete(&slice("web-1", &[]));
        assert_eq!(e.publish_due(window), (vec![], None));
    }
}
