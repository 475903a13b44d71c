//! Holding a controller's first pass until its watch has listed everything once.
//!
//! A store is empty until the watch's first list is complete, and a pass planned against it
//! would act as if every object were gone (a load balancer with no targets, no routes). So a
//! controller drives its watch on a task of its own ([`WatchTask::spawn`]) and waits at the gate
//! ([`WatchTask::first_list`]) before its first pass, as kube-runtime's
//! `Store::wait_until_ready` does for a reflector. A stop that arrives first is a clean exit,
//! not a failure: the watch task ends with the stop and closes the gate's channel, which must
//! not be mistaken for an error.

use futures::{Stream, StreamExt as _};
use kube::runtime::watcher::{self, Event};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// A watch driven on its own task until shutdown, and the gate its first complete list opens.
#[derive(Debug)]
pub struct WatchTask {
    task: JoinHandle<()>,
    listed: watch::Receiver<bool>,
}

/// How waiting at the gate ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FirstList {
    /// Every object was listed once: the first pass may start.
    Listed,
    /// The controller is stopping: return without a pass, successfully.
    Stopping,
}

impl WatchTask {
    /// Feeds every event of `stream` to `on_event` until `shutdown`; the gate opens after the
    /// first `InitDone` has been handled.
    pub fn spawn<K, S>(
        stream: S,
        shutdown: CancellationToken,
        mut on_event: impl FnMut(Result<Event<K>, watcher::Error>) + Send + 'static,
    ) -> Self
    where
        K: Send + 'static,
        S: Stream<Item = Result<Event<K>, watcher::Error>> + Send + 'static,
    {
        let (tx, listed) = watch::channel(false);
        let task = tokio::spawn(async move {
            let drive = stream.for_each(move |ev| {
                let done = matches!(ev, Ok(Event::InitDone));
                on_event(ev);
                if done {
                    tx.send_replace(true);
                }
                futures::future::ready(())
            });
            tokio::select! {
                _ = shutdown.cancelled() => {}
                _ = drive => {}
            }
        });
        Self { task, listed }
    }

    /// Waits until the first list is complete, or `shutdown`, whichever comes first. Shutdown is
    /// looked at first: it also ends the watch task, which closes the gate's channel.
    pub async fn first_list(&mut self, shutdown: &CancellationToken) -> FirstList {
        let listed = tokio::select! {
            biased;
            _ = shutdown.cancelled() => false,
            r = self.listed.wait_for(|listed| *listed) => r.is_ok(),
        };
        if listed {
            return FirstList::Listed;
        }
        // The task ended without a list: only a stop ends it (the watch retries errors for
        // ever), so the stop is on its way.
        shutdown.cancelled().await;
        self.task.abort();
        FirstList::Stopping
    }
}

impl WatchTask {
    /// Ends the watch (also on drop).
    pub fn abort(&self) {
        self.task.abort();
    }
}

impl Drop for WatchTask {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_gate_opens_after_the_first_list() {
        let (tx, stream) = futures::channel::mpsc::unbounded::<Result<Event<u8>, watcher::Error>>();
        let seen = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = seen.clone();
        let shutdown = CancellationToken::new();
        let mut task = WatchTask::spawn(stream, shutdown.clone(), move |_| {
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        });
        for ev in [Event::Init, Event::InitApply(1), Event::InitDone] {
            tx.unbounded_send(Ok(ev)).unwrap();
        }
        assert_eq!(task.first_list(&shutdown).await, FirstList::Listed);
        assert_eq!(
            seen.load(std::sync::atomic::Ordering::SeqCst),
            3,
            "handled before"
        );
    }

    /// Many times, since a select without priority would pick either branch.
    #[tokio::test]
    async fn a_stop_before_the_first_list_is_stopping_never_an_error() {
        for _ in 0..200 {
            let (_tx, stream) =
                futures::channel::mpsc::unbounded::<Result<Event<u8>, watcher::Error>>();
            let shutdown = CancellationToken::new();
            let mut task = WatchTask::spawn(stream, shutdown.clone(), |_| {});
            shutdown.cancel();
            tokio::task::yield_now().await;
            assert_eq!(task.first_list(&shutdown).await, FirstList::Stopping);
        }
    }
}
