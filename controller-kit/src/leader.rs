//! Leader election on a coordination.k8s.io Lease, via kube-lease-manager, behind a small gate.
//!
//! - A standby re-reads the Lease every retry period (one GET), so a Lease released on SIGTERM is
//!   taken over within about one retry period instead of a full lease duration.
//! - The leader renews `renew_deadline` after each renewal (grace = duration − renew deadline).
//! - [`Leadership::lost`] resolves when another holder took the Lease, or renewals failed for longer
//!   than the renew deadline; the runtime then stops reconciling and exits non-zero.
//! - [`Leadership::release`] frees the Lease on graceful shutdown; so does a shutdown that comes
//!   while an attempt to take it is in flight, if the attempt's write landed.

use std::time::{Duration, Instant};

use kube_lease_manager::{LeaseManager, LeaseManagerBuilder};
use tokio_util::sync::CancellationToken;

use crate::config::LeaderElection;

/// How long a shutdown lets an attempt to take the Lease finish: a write's round trip, not the
/// wait for another holder's Lease to expire.
const ATTEMPT_END: Duration = Duration::from_secs(1);

/// Acquires the Lease of one controller.
#[derive(Clone)]
pub struct LeaderGate {
    client: kube::Client,
    cfg: LeaderElection,
}

impl std::fmt::Debug for LeaderGate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaderGate")
            .field("cfg", &self.cfg)
            .finish()
    }
}

/// Proof of holding the Lease.
#[derive(Debug)]
pub struct Leadership {
    manager: LeaseManager,
    cfg: LeaderElection,
}

impl LeaderGate {
    /// A gate for `cfg`.
    pub fn new(client: kube::Client, cfg: LeaderElection) -> Self {
        Self { client, cfg }
    }

    /// The settings.
    pub fn config(&self) -> &LeaderElection {
        &self.cfg
    }

    fn durations(&self) -> (u64, u64) {
        let duration = self.cfg.lease_duration.as_secs().max(2);
        let grace = duration
            .saturating_sub(self.cfg.renew_deadline.as_secs())
            .clamp(1, duration - 1);
        (duration, grace)
    }

    /// A shutdown cut an attempt to take the Lease short without its answer: its write may have
    /// landed, leaving the Lease naming this process until it expires. Reads the Lease and gives
    /// it back if so, so a successor need not wait a lease duration.
    async fn release_if_taken(&self) {
        use k8s_openapi::api::coordination::v1::Lease;
        let leases = kube::Api::<Lease>::namespaced(self.client.clone(), &self.cfg.namespace);
        let read =
            tokio::time::timeout(Duration::from_secs(5), leases.get_opt(&self.cfg.lease_name));
        let holder = match read.await {
            Ok(Ok(lease)) => lease.and_then(|l| l.spec).and_then(|s| s.holder_identity),
            _ => return,
        };
        if holder.as_deref() != Some(self.cfg.identity.as_str()) {
            return;
        }
        if let Ok(Ok(manager)) = tokio::time::timeout(Duration::from_secs(5), self.build()).await {
            Leadership {
                manager,
                cfg: self.cfg.clone(),
            }
            .release()
            .await;
        }
    }

    async fn build(&self) -> Result<LeaseManager, kube_lease_manager::LeaseManagerError> {
        let (duration, grace) = self.durations();
        LeaseManagerBuilder::new(self.client.clone(), &self.cfg.lease_name)
            .with_namespace(&self.cfg.namespace)
            .with_identity(&self.cfg.identity)
            .with_duration(duration)
            .with_grace(grace)
            .build()
            .await
    }

    /// Waits until this process holds the Lease. `None` when `shutdown` was cancelled first.
    pub async fn acquire(&self, shutdown: &CancellationToken) -> Option<Leadership> {
        let mut logged_holder = false;
        loop {
            if shutdown.is_cancelled() {
                return None;
            }
            match self.build().await {
                Ok(manager) => {
                    // `changed()` locks a free/expired Lease, or sleeps until the holder's lease would
                    // expire; cut that sleep at the retry period and re-read the Lease instead.
                    let (outcome, cancelled) = {
                        let attempt = manager.changed();
                        tokio::pin!(attempt);
                        tokio::select! {
                            r = &mut attempt => (Some(r), false),
                            _ = tokio::time::sleep(self.cfg.retry_period) => (None, false),
                            // A write in flight may land now: let the attempt end (one that waits
                            // for another holder's Lease to expire ends at the bound instead).
                            _ = shutdown.cancelled() => {
                                (tokio::time::timeout(ATTEMPT_END, attempt).await.ok(), true)
                            }
                        }
                    };
                    if cancelled {
                        match outcome {
                            Some(Ok(true)) => {
                                Leadership {
                                    manager,
                                    cfg: self.cfg.clone(),
                                }
                                .release()
                                .await
                            }
                            Some(Ok(false)) => {}
                            Some(Err(_)) | None => self.release_if_taken().await,
                        }
                        return None;
                    }
                    match outcome {
                        Some(Ok(true)) => {
                            tracing::info!(lease = %self.cfg.lease_name, namespace = %self.cfg.namespace,
                                identity = %self.cfg.identity, "acquired leadership");
                            return Some(Leadership {
                                manager,
                                cfg: self.cfg.clone(),
                            });
                        }
                        Some(Ok(false)) | None => {
                            if !logged_holder {
                                tracing::info!(lease = %self.cfg.lease_name, "standing by: the Lease is held by another instance");
                                logged_holder = true;
                            }
                            // Loop immediately only after a timeout; after an explicit "not leader"
                            // answer wait one retry period.
                            if outcome.is_some() {
                                tokio::select! {
                                    _ = shutdown.cancelled() => return None,
                                    _ = tokio::time::sleep(self.cfg.retry_period) => {}
                                }
                            }
                        }
                        Some(Err(e)) => {
                            tracing::warn!(error = %e, lease = %self.cfg.lease_name, "leader election attempt failed");
                            tokio::select! {
                                _ = shutdown.cancelled() => return None,
                                _ = tokio::time::sleep(self.cfg.retry_period) => {}
                            }
                        }
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, lease = %self.cfg.lease_name, namespace = %self.cfg.namespace,
                        "cannot read or create the Lease");
                    tokio::select! {
                        _ = shutdown.cancelled() => return None,
                        _ = tokio::time::sleep(self.cfg.retry_period) => {}
                    }
                }
            }
        }
    }
}

impl Leadership {
    /// Keeps renewing; resolves when leadership is lost. Must be polled continuously while leading.
    pub async fn lost(&self) -> String {
        let mut failing_since: Option<Instant> = None;
        loop {
            match self.manager.changed().await {
                Ok(false) => {
                    return format!(
                        "Lease {}/{} was taken by another holder",
                        self.cfg.namespace, self.cfg.lease_name
                    );
                }
                Ok(true) => failing_since = None,
                Err(e) => {
                    let since = *failing_since.get_or_insert_with(Instant::now);
                    tracing::warn!(error = %e, "renewing the Lease failed");
                    if since.elapsed() >= self.cfg.renew_deadline {
                        return format!(
                            "could not renew Lease {}/{} for {:?}: {e}",
                            self.cfg.namespace, self.cfg.lease_name, self.cfg.renew_deadline
                        );
                    }
                    tokio::time::sleep(self.cfg.retry_period.min(Duration::from_secs(1))).await;
                }
            }
        }
    }

    /// Releases the Lease so a standby takes over at once.
    pub async fn release(self) {
        use kube_lease_manager::LeaseManagerError;
        match tokio::time::timeout(Duration::from_secs(5), self.manager.release()).await {
            Ok(Ok(())) => tracing::info!(lease = %self.cfg.lease_name, "released leadership"),
            // `helm uninstall` deletes the chart's Lease (and its Role) while the pods stop.
            Ok(Err(LeaseManagerError::NonexistentLease(_))) => {
                tracing::info!(lease = %self.cfg.lease_name, "the Lease is gone (deleted, e.g. by helm uninstall): nothing to release")
            }
            Ok(Err(LeaseManagerError::KubeError(kube::Error::Api(e)))) if e.code == 404 => {
                tracing::info!(lease = %self.cfg.lease_name, "the Lease is gone (deleted, e.g. by helm uninstall): nothing to release")
            }
            // RBAC allowed the renewals until now: its Role went first (helm uninstall deletes the
            // Role and then the Lease itself).
            Ok(Err(LeaseManagerError::KubeError(kube::Error::Api(e)))) if e.code == 403 => {
                tracing::info!(lease = %self.cfg.lease_name, error = %e,
                    "the Lease was not released: its Role no longer allows it (deleted, e.g. by helm uninstall, which deletes the Lease too)")
            }
            Ok(Err(e)) => tracing::warn!(error = %e, "releasing the Lease failed"),
            Err(_) => tracing::warn!("releasing the Lease timed out"),
        }
    }
}
