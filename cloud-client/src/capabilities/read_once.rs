//! What a provider read from a Service, kept with the [`ServiceRef`](super::ServiceRef) it read it
//! from: a reconcile builds one `ServiceRef` and asks the provider several things about it (its
//! targets, its health-check port, then the ensure), and the annotations are read once for all.

use std::any::Any;
use std::fmt;
use std::sync::{Arc, OnceLock};

/// A provider's reading of one Service, made on first use. Clones share it, so a `ServiceRef` that
/// is changed into another Service's (one zone's of several) starts from a new `ReadOnce`.
///
/// Not part of the Service's identity: two `ServiceRef`s compare equal whatever each has read.
#[derive(Clone, Default)]
pub struct ReadOnce(Arc<OnceLock<Arc<dyn Any + Send + Sync>>>);

impl ReadOnce {
    /// The kept reading, or `read()` kept for next time. A reading of another type (another
    /// provider's) is not replaced: `read()` is returned without being kept.
    pub fn get_or_read<T: Any + Send + Sync>(&self, read: impl FnOnce() -> T) -> Arc<T> {
        if let Some(kept) = self.0.get() {
            return Arc::clone(kept)
                .downcast::<T>()
                .unwrap_or_else(|_| Arc::new(read()));
        }
        let value = Arc::new(read());
        // Another task may have read it meanwhile: the same annotations, the same reading.
        let _ = self.0.set(value.clone());
        value
    }
}

impl PartialEq for ReadOnce {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for ReadOnce {}

impl fmt::Debug for ReadOnce {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.get().is_some() {
            "ReadOnce(read)"
        } else {
            "ReadOnce(not read)"
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn reads_once_and_clones_share_the_reading() {
        let reads = AtomicUsize::new(0);
        let read = || {
            reads.fetch_add(1, Ordering::SeqCst);
            "spec".to_string()
        };
        let once = ReadOnce::default();
        let copy = once.clone();
        assert_eq!(*once.get_or_read(read), "spec");
        assert_eq!(*copy.get_or_read(read), "spec");
        assert_eq!(reads.load(Ordering::SeqCst), 1);
        // Another type is read every time, never mistaken for the kept one.
        assert_eq!(*once.get_or_read(|| 7u8), 7);
        assert_eq!(format!("{once:?}"), "ReadOnce(read)");
        assert_eq!(ReadOnce::default(), once);
    }
}
