//! `--leader-elect*`: upstream's leader-election flags, each controller on a Lease of its own.

use std::time::Duration;

use clap::{ArgAction, Args};

use super::problems::Problems;
use crate::info::ControllerInfo;

/// Upstream's leader-election flags.
#[derive(Args, Debug, Clone)]
pub struct LeaderElectionArgs {
    /// Run leader election on a coordination.k8s.io Lease before reconciling anything.
    #[arg(long, default_value_t = true, action = ArgAction::Set, num_args = 0..=1, default_missing_value = "true", env = "LEADER_ELECT")]
    pub leader_elect: bool,
    /// Lease duration (Go duration, e.g. `15s`).
    #[arg(long, default_value = "15s")]
    pub leader_elect_lease_duration: String,
    /// How long the leader keeps retrying to renew before giving up (Go duration).
    #[arg(long, default_value = "10s")]
    pub leader_elect_renew_deadline: String,
    /// How often a standby retries to acquire the Lease (Go duration).
    #[arg(long, default_value = "2s")]
    pub leader_elect_retry_period: String,
    /// Lease name; default `cloud-controller-manager-<controller>`.
    #[arg(long)]
    pub leader_elect_resource_name: Option<String>,
    /// Lease namespace.
    #[arg(long, default_value = "kube-system", env = "LEADER_ELECT_NAMESPACE")]
    pub leader_elect_resource_namespace: String,
    /// Lock type; only `leases` is supported (as upstream).
    #[arg(long, default_value = "leases")]
    pub leader_elect_resource_lock: String,
    /// Lease holder identity; default `<hostname>_<random>`.
    #[arg(long, env = "POD_NAME")]
    pub leader_elect_identity: Option<String>,
}

impl Default for LeaderElectionArgs {
    /// clap's defaults.
    fn default() -> Self {
        Self {
            leader_elect: true,
            leader_elect_lease_duration: "15s".into(),
            leader_elect_renew_deadline: "10s".into(),
            leader_elect_retry_period: "2s".into(),
            leader_elect_resource_name: None,
            leader_elect_resource_namespace: "kube-system".into(),
            leader_elect_resource_lock: "leases".into(),
            leader_elect_identity: None,
        }
    }
}

/// Leader-election settings.
#[derive(Debug, Clone)]
pub struct LeaderElection {
    /// Lease name.
    pub lease_name: String,
    /// Lease namespace.
    pub namespace: String,
    /// Holder identity.
    pub identity: String,
    /// Lease duration.
    pub lease_duration: Duration,
    /// Renew deadline.
    pub renew_deadline: Duration,
    /// Standby retry period.
    pub retry_period: Duration,
}

impl LeaderElectionArgs {
    /// The Lease settings, `None` when leader election is off. A shadow (`dry_run`) never holds
    /// the acting controllers' Lease: it takes one named apart.
    pub fn validate(
        &self,
        info: &ControllerInfo,
        dry_run: bool,
        p: &mut Problems,
    ) -> Option<LeaderElection> {
        let lease_duration = p.positive_duration(
            "--leader-elect-lease-duration",
            &self.leader_elect_lease_duration,
            Duration::from_secs(15),
        );
        let renew_deadline = p.positive_duration(
            "--leader-elect-renew-deadline",
            &self.leader_elect_renew_deadline,
            Duration::from_secs(10),
        );
        let retry_period = p.positive_duration(
            "--leader-elect-retry-period",
            &self.leader_elect_retry_period,
            Duration::from_secs(2),
        );
        if !self.leader_elect {
            return None;
        }
        if renew_deadline >= lease_duration {
            p.push(format!(
                "--leader-elect-renew-deadline ({renew_deadline:?}) must be less than --leader-elect-lease-duration ({lease_duration:?})"
            ));
        }
        if retry_period >= renew_deadline {
            p.push(format!(
                "--leader-elect-retry-period ({retry_period:?}) must be less than --leader-elect-renew-deadline ({renew_deadline:?})"
            ));
        }
        if lease_duration.as_secs() < 2 || lease_duration.subsec_nanos() != 0 {
            p.push(format!(
                "--leader-elect-lease-duration ({lease_duration:?}) must be whole seconds, at least 2s (Lease granularity)"
            ));
        }
        if self.leader_elect_resource_lock != "leases" {
            p.push(format!(
                "--leader-elect-resource-lock={:?}: only \"leases\" is supported",
                self.leader_elect_resource_lock
            ));
        }
        if self.leader_elect_resource_namespace.is_empty() {
            p.push("--leader-elect-resource-namespace must not be empty");
        }
        Some(LeaderElection {
            lease_name: format!(
                "{}{}",
                self.leader_elect_resource_name
                    .clone()
                    .unwrap_or_else(|| format!("cloud-controller-manager-{}", info.name)),
                if dry_run { "-dry-run" } else { "" }
            ),
            namespace: self.leader_elect_resource_namespace.clone(),
            identity: self
                .leader_elect_identity
                .clone()
                .filter(|s| !s.is_empty())
                .map(|s| format!("{s}_{}", random_suffix()))
                .unwrap_or_else(default_identity),
            lease_duration,
            renew_deadline,
            retry_period,
        })
    }
}

fn default_identity() -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.is_empty())
        .or_else(|| {
            std::fs::read_to_string("/proc/sys/kernel/hostname")
                .ok()
                .map(|s| s.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into());
    format!("{host}_{}", random_suffix())
}

/// A random hex string from std's randomly seeded hasher (no extra dependency).
pub fn random_suffix() -> String {
    use std::collections::hash_map::RandomState;
    use std::hash::{BuildHasher, Hasher};
    let mut h = RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default(),
    );
    format!("{:016x}", h.finish())
}
