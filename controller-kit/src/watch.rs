//! The watches behind every controller's reflector stores, in one shape.
//!
//! A watch delivers whole objects, and a kubelet-registered Node is 11–12 KB of JSON (50 images,
//! managedFields from four field managers, five conditions with messages). Each controller keeps
//! only the fields its logic reads: [`slimmed`] applies the controller's `slim` to every object
//! before a store or a reconciler sees it, so what the process holds per Node is what it uses.
//! Each controller's `slim` is next to the code that reads the Node, with a test that its
//! decisions are the same on the slimmed object as on the whole one.

use futures::Stream;
use kube::Api;
use kube::runtime::watcher::{self, Event};
use kube::runtime::{WatchStreamExt, watcher as watch};
use prometheus_client::metrics::counter::Counter;
use serde::de::DeserializeOwned;

/// `api`'s watch with kube's default backoff; every object it delivers counted into `events`
/// (see [`crate::metrics::KubeApiMetrics::watch_events`]), then passed through `slim`.
pub fn slimmed<K>(
    api: Api<K>,
    config: watcher::Config,
    events: Counter,
    slim: impl FnMut(&mut K) + Send,
) -> impl Stream<Item = Result<Event<K>, watcher::Error>> + Send
where
    K: kube::Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    use futures::StreamExt as _;
    watch(api, config)
        .default_backoff()
        .inspect(move |event| {
            if let Ok(Event::Apply(_) | Event::InitApply(_) | Event::Delete(_)) = event {
                events.inc();
            }
        })
        .modify(slim)
}
