//! One reconcile at a time per shared load balancer. Its labels are written whole (`PUT`), so two
//! Services joining at once would each write the labels they read and one claim would be lost.
//! The Lease makes this process the only writer, so a lock in memory is enough.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use tokio::sync::{Mutex as AsyncMutex, OwnedMutexGuard};

#[derive(Debug, Default)]
pub(super) struct Locks {
    by_name: Mutex<HashMap<String, Weak<AsyncMutex<()>>>>,
}

impl Locks {
    /// Waits for the load balancer `name`, or returns at once for `None` (not shared).
    pub(super) async fn hold(&self, name: Option<&str>) -> Option<OwnedMutexGuard<()>> {
        let name = name?;
        let lock = {
            let mut map = self.by_name.lock().unwrap_or_else(|e| e.into_inner());
            map.retain(|_, l| l.strong_count() > 0);
            match map.get(name).and_then(Weak::upgrade) {
                Some(l) => l,
                None => {
                    let l = Arc::new(AsyncMutex::new(()));
                    map.insert(name.to_string(), Arc::downgrade(&l));
                    l
                }
            }
        };
        Some(lock.lock_owned().await)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn one_holder_per_name_and_none_for_unshared() {
        let locks = Locks::default();
        assert!(locks.hold(None).await.is_none());
        let a = locks.hold(Some("web")).await;
        assert!(a.is_some());
        let other = tokio::time::timeout(
            std::time::Duration::from_millis(50),
            locks.hold(Some("web")),
        )
        .await;
        assert!(other.is_err(), "a second holder of the same name waits");
        assert!(
            locks.hold(Some("api")).await.is_some(),
            "another name does not"
        );
        drop(a);
        assert!(locks.hold(Some("web")).await.is_some());
    }
}
