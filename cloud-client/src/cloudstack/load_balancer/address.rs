//! The address a Service gets when it has no rule yet and `spec.loadBalancerIP` names none.
//!
//! CloudStack's addresses carry no name when they are made, so an address associated by a
//! reconcile that then crashed, before its first rule (which carries the Service's name), could
//! not be found again: it would leak. So the address is chosen first (a free one of the zone),
//! written down on the Service ([`ADDRESS_RECORD`], through the controller's
//! [`Recorder`](crate::capabilities::Recorder)), and only then associated, by that address. The
//! next reconcile, or the delete, finds it by the record:
//!
//! - the record names an address the keys see allocated, with no rule on it but this Service's,
//!   and neither source nor static NAT: ours, from a reconcile that stopped before its rules;
//! - it names a free address: associated now;
//! - anything else (invisible to the keys, another's rules on it): a new choice.
//!
//! CloudStack refusing the associate outright (another Service took the address between the list
//! and the associate) clears the record before the error returns, so the next reconcile cannot
//! take that address for ours. A job that fails or outlasts its poll keeps the record: the
//! address may be ours. Without a recorder (shadow mode, a caller without one) CloudStack picks the
//! address, as upstream lets it.

use super::CloudStackLoadBalancers;
use super::reconcile::Address;
use super::spec::{IP_ASSOCIATED, parse_rule_name};
use super::wire::{Network, PublicIp};
use crate::capabilities::{DeleteOutcome, ServiceRef};
use crate::error::CloudError;

/// The annotation holding the address chosen for the Service before it is associated.
pub const ADDRESS_RECORD: &str = "cloud-controllers.io/load-balancer-address";

/// How many free addresses the choice is made among (one page).
const CHOICES: u32 = 50;

/// What the recorded address is now.
pub(super) enum Recorded {
    /// Allocated, with nothing on it but this Service's rules.
    Ours(PublicIp),
    Free,
}

impl CloudStackLoadBalancers {
    /// A new address for `svc` (load balancer `lb`) in `network`, found again by its record.
    pub(super) async fn new_address(
        &self,
        svc: &ServiceRef,
        lb: &str,
        network: &Network,
    ) -> Result<Address, CloudError> {
        if let Some(recorded) = recorded(svc) {
            match self.recorded_address(lb, recorded).await? {
                Some(Recorded::Ours(ip)) => {
                    tracing::info!(address = %ip.ipaddress, "using the address recorded on the Service");
                    return Ok(Address {
                        id: ip.id,
                        address: ip.ipaddress,
                        fresh: false,
                        marked: false,
                    });
                }
                Some(Recorded::Free) => {
                    return self.associate_recorded(svc, network, recorded).await;
                }
                None => {}
            }
        }
        let free = if svc.recorder.records() {
            self.calls.free_addresses(&network.zoneid, CHOICES).await?
        } else {
            Vec::new()
        };
        let Some(pick) = choose(&svc.uid, &free) else {
            let ip = self
                .calls
                .associate(&network.id, network.vpc(), None)
                .await?;
            return Ok(Address {
                id: ip.id,
                address: ip.ipaddress,
                fresh: true,
                marked: false,
            });
        };
        svc.recorder.record(ADDRESS_RECORD, pick).await?;
        self.associate_recorded(svc, network, pick).await
    }

    /// Associates `address`, recorded on `svc` before.
    async fn associate_recorded(
        &self,
        svc: &ServiceRef,
        network: &Network,
        address: &str,
    ) -> Result<Address, CloudError> {
        self.associate_then(svc, network, address, (ADDRESS_RECORD, ""))
            .await
    }

    /// The free address `spec.loadBalancerIP` names, associated and recorded as upstream records
    /// it ([`IP_ASSOCIATED`] `"true"`, so either CCM releases it on delete), but before the
    /// associate rather than after, so a crash in between cannot leave it unreleased; also
    /// marked on the rules ([`ASSOCIATED_MARK`](super::ASSOCIATED_MARK)) for a Service without
    /// a recorder.
    pub(super) async fn associate_named(
        &self,
        svc: &ServiceRef,
        network: &Network,
        address: &str,
    ) -> Result<Address, CloudError> {
        svc.recorder.record(IP_ASSOCIATED, "true").await?;
        let made = self
            .associate_then(svc, network, address, (IP_ASSOCIATED, "false"))
            .await?;
        Ok(Address {
            marked: true,
            ..made
        })
    }

    /// Associates `address`; when CloudStack refuses it outright, records `undo` (key, value)
    /// before the error returns.
    async fn associate_then(
        &self,
        svc: &ServiceRef,
        network: &Network,
        address: &str,
        undo: (&str, &str),
    ) -> Result<Address, CloudError> {
        let started = self
            .calls
            .start_associate(&network.id, network.vpc(), address)
            .await;
        let jobid = match started {
            Ok(jobid) => jobid,
            Err(e) => {
                if never_acted(&e) {
                    svc.recorder.record(undo.0, undo.1).await?;
                }
                return Err(e);
            }
        };
        let ip = self.calls.finish_associate(&jobid).await?;
        Ok(Address {
            id: ip.id,
            address: ip.ipaddress,
            fresh: true,
            marked: false,
        })
    }

    /// What `address`, recorded on a Service whose load balancer is `lb`, is now; `None` when
    /// it is not that Service's to use.
    pub(super) async fn recorded_address(
        &self,
        lb: &str,
        address: &str,
    ) -> Result<Option<Recorded>, CloudError> {
        let Some(ip) = self.calls.address(address).await? else {
            return Ok(None);
        };
        if ip.allocated.as_deref().is_none_or(str::is_empty) {
            return Ok(Some(Recorded::Free));
        }
        if ip.issourcenat || ip.isstaticnat {
            return Ok(None);
        }
        let on_it = self.calls.rules_on(&ip.id).await?;
        let only_ours = on_it.iter().all(|r| parse_rule_name(lb, &r.name).is_some());
        Ok(only_ours.then_some(Recorded::Ours(ip)))
    }
}

impl CloudStackLoadBalancers {
    /// The delete of a Service without rules: the address recorded for it goes when it is still
    /// its own.
    pub(super) async fn release_recorded(
        &self,
        svc: &ServiceRef,
        lb: &str,
    ) -> Result<DeleteOutcome, CloudError> {
        let Some(address) = recorded(svc) else {
            return Ok(DeleteOutcome::default());
        };
        let Some(Recorded::Ours(ip)) = self.recorded_address(lb, address).await? else {
            return Ok(DeleteOutcome::default());
        };
        tracing::info!(%address, "releasing the address recorded for the Service, which has no rule");
        self.calls.disassociate(&ip.id).await?;
        Ok(DeleteOutcome {
            deleted: true,
            warnings: Vec::new(),
        })
    }
}

/// The address recorded on `svc`, if any.
pub(super) fn recorded(svc: &ServiceRef) -> Option<&str> {
    svc.annotations
        .get(ADDRESS_RECORD)
        .map(|a| a.trim())
        .filter(|a| !a.is_empty())
}

/// One of `free`, the same for the same UID and list: Services made at once choose apart.
fn choose<'a>(uid: &str, free: &'a [PublicIp]) -> Option<&'a str> {
    if free.is_empty() {
        return None;
    }
    // FNV-1a: stable across builds, unlike the standard hasher.
    let hash = uid.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    let i = usize::try_from(hash % free.len() as u64).unwrap_or(0);
    Some(free[i].ipaddress.as_str())
}

/// CloudStack answered the command with an error: no job was started, nothing was allocated.
/// (No answer at all may still have acted.)
fn never_acted(e: &CloudError) -> bool {
    match e {
        CloudError::Api(_) => true,
        CloudError::RetriesExhausted { last, .. } => never_acted(last),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::KEY_PREFIX;

    #[test]
    fn the_record_is_one_of_our_keys() {
        assert_eq!(ADDRESS_RECORD, format!("{KEY_PREFIX}load-balancer-address"));
    }

    #[test]
    fn the_choice_is_stable_and_spread() {
        let free: Vec<PublicIp> = (1..=50)
            .map(|i| PublicIp {
                ipaddress: format!("100.100.0.{i}"),
                ..Default::default()
            })
            .collect();
        assert_eq!(choose("uid-1", &free), choose("uid-1", &free));
        assert_eq!(choose("uid-1", &[]), None);
        let picks: std::collections::BTreeSet<_> = (0..20)
            .filter_map(|i| choose(&format!("7d1e2aa7-0414-4886-91de-7f18f431b1{i:02}"), &free))
            .collect();
        assert!(
            picks.len() >= 12,
            "20 Services chose only {} addresses",
            picks.len()
        );
    }

    #[test]
    fn only_an_error_answer_is_known_to_have_done_nothing() {
        let timeout = CloudError::Timeout {
            operation: "associateIpAddress".into(),
            after: std::time::Duration::from_secs(1),
        };
        assert!(!never_acted(&timeout));
        let exhausted = CloudError::RetriesExhausted {
            attempts: 3,
            last: Box::new(timeout),
        };
        assert!(!never_acted(&exhausted));
    }
}
