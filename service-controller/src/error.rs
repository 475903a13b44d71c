//! Reconcile errors; every variant names the Service and the failing call.

use std::time::Duration;

use cloud_client::{CloudError, ErrorClass};

/// Why a Service reconcile failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A cloud call failed (includes invalid annotations, reported before any cloud write).
    #[error("service {service}: {op}: {source}")]
    Cloud {
        /// `namespace/name`.
        service: String,
        /// `ensure load balancer`, `update load balancer targets`, `delete load balancer`.
        op: &'static str,
        /// Cause.
        #[source]
        source: CloudError,
    },
    /// A Kubernetes write failed.
    #[error("service {service}: {what}: {source}")]
    Kube {
        /// `namespace/name`.
        service: String,
        /// The call, e.g. `add finalizer`.
        what: &'static str,
        /// Cause.
        #[source]
        source: kube::Error,
    },
}

impl Error {
    /// Bounded metric label.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Error::Cloud { .. } if self.is_bad_input() => "invalid_input",
            Error::Cloud { .. } if self.is_conflict() => "conflict",
            Error::Cloud { .. } if self.is_dry_run() => "planned",
            Error::Cloud { .. } => "cloud_error",
            Error::Kube { .. } => "kube_error",
        }
    }

    /// True when the user's Service is what is wrong: retrying cannot help until it changes.
    pub fn is_bad_input(&self) -> bool {
        matches!(
            self,
            Error::Cloud {
                source: CloudError::InvalidInput { .. } | CloudError::Unsupported { .. },
                ..
            }
        )
    }

    /// True when another Service holds what this one asks for on a shared load balancer: nothing
    /// was written, and it may clear when that Service changes, so it is retried with backoff.
    pub fn is_conflict(&self) -> bool {
        matches!(self, Error::Cloud { source, .. } if source.is_conflict())
    }

    /// True when shadow mode planned the write instead of making it.
    pub fn is_dry_run(&self) -> bool {
        matches!(self, Error::Cloud { source, .. } if source.is_dry_run())
    }

    /// The cloud refused a write as it stands (`422`, e.g. a target in another network zone):
    /// sending it again soon cannot pass, only a change in the cluster or the cloud can.
    pub fn is_refused_as_unprocessable(&self) -> bool {
        matches!(self, Error::Cloud { source: CloudError::Api(a), .. } if a.status == 422)
    }

    /// Delay the cloud asked for (rate limit), if any.
    /// The cloud refused a request for the project's rate limit.
    pub fn is_rate_limited(&self) -> bool {
        matches!(self, Error::Cloud { source, .. } if source.is_rate_limited())
    }

    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Error::Cloud { source, .. } if source.class() == ErrorClass::Retryable => {
                source.retry_after()
            }
            _ => None,
        }
    }
}
