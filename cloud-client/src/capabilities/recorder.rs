//! A provider's way to write down, on the Service itself, something it must find again after a
//! crash, *before* the cloud write that makes it true: CloudStack's addresses carry no name or
//! label at creation, so the address a Service is about to get is recorded first and found by
//! the next reconcile, whatever happened in between.
//!
//! The controller fills it in (an annotation patched through the Service's status subresource,
//! as the finalizer is); tests and shadow mode leave it empty, and a provider then does without.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use crate::error::CloudError;

type Write = dyn Fn(String, String) -> Pin<Box<dyn Future<Output = Result<(), String>> + Send>>
    + Send
    + Sync;

/// Writes annotation `key` = `value` on the Service being reconciled.
#[derive(Clone, Default)]
pub struct Recorder(Option<Arc<Write>>);

impl Recorder {
    pub fn new<F, Fut>(write: F) -> Self
    where
        F: Fn(String, String) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), String>> + Send + 'static,
    {
        Self(Some(Arc::new(move |k, v| Box::pin(write(k, v)))))
    }

    /// Whether anything is recorded at all (not in tests without one, nor in shadow mode).
    pub fn records(&self) -> bool {
        self.0.is_some()
    }

    /// Records `key` = `value` on the Service; `Ok(false)` when nothing records.
    pub async fn record(&self, key: &str, value: &str) -> Result<bool, CloudError> {
        let Some(write) = &self.0 else {
            return Ok(false);
        };
        write(key.to_owned(), value.to_owned())
            .await
            // A failed Kubernetes write is retried like a failed cloud call: nothing was made.
            .map_err(|message| CloudError::Transport {
                method: "PATCH".into(),
                endpoint: "services/status".into(),
                message: format!("could not record {key}={value} on the Service: {message}"),
            })?;
        Ok(true)
    }
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.records() {
            "Recorder"
        } else {
            "Recorder(none)"
        })
    }
}

/// A recorder is not part of a Service's identity.
impl PartialEq for Recorder {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for Recorder {}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[tokio::test]
    async fn records_through_the_writer_or_says_it_did_not() {
        assert!(!Recorder::default().record("k", "v").await.unwrap());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s = seen.clone();
        let r = Recorder::new(move |k, v| {
            s.lock().unwrap().push((k, v));
            async { Ok(()) }
        });
        assert!(r.record("k", "v").await.unwrap());
        assert_eq!(*seen.lock().unwrap(), [("k".to_owned(), "v".to_owned())]);
        let failing = Recorder::new(|_, _| async { Err("forbidden".to_owned()) });
        let e = failing.record("k", "v").await.unwrap_err().to_string();
        assert!(e.contains("forbidden") && e.contains("k=v"), "{e}");
    }
}
